//! aril's errors as Python exceptions: one class per thing the caller can act on, each carrying
//! the engine's message (which says what to fix), all under `aril.ArilError`.

use aril_engine::{EngineError, StoreError};
use pyo3::PyErr;
use pyo3::create_exception;
use pyo3::exceptions::PyException;

create_exception!(
    _native,
    ArilError,
    PyException,
    "An aril call failed; the message says what to fix."
);
create_exception!(
    _native,
    InvalidInputError,
    ArilError,
    "A request aril refuses (empty text, an unknown field, a bad time…); nothing was changed."
);
create_exception!(
    _native,
    NotFoundError,
    ArilError,
    "No memory (or nothing stored) with that id or scope."
);
create_exception!(
    _native,
    ImmutableError,
    ArilError,
    "The memory was added with immutable=True: delete it and add the new text instead."
);
create_exception!(
    _native,
    BusyError,
    ArilError,
    "The data directory is open in another process: one process owns a data directory."
);

/// The Python exception for an engine error.
pub fn to_py(e: EngineError) -> PyErr {
    let message = e.to_string();
    match e {
        EngineError::InvalidInput(_) | EngineError::Config(_) => {
            InvalidInputError::new_err(message)
        }
        EngineError::UnknownMemory(_)
        | EngineError::NoMemory { .. }
        | EngineError::Store(StoreError::UnknownScope(_)) => NotFoundError::new_err(message),
        EngineError::ImmutableMemory(_) => ImmutableError::new_err(message),
        EngineError::Busy { .. } => BusyError::new_err(message),
        _ => ArilError::new_err(message),
    }
}

/// A request refused before it reached the engine.
pub fn invalid(message: impl Into<String>) -> PyErr {
    InvalidInputError::new_err(message.into())
}
