//! An engine shared behind a lock, as the server's state and the Python package's memory hold it:
//! the long operations that call a model (consolidation, a planned question) take the lock's read
//! or write side only for their store steps, so other calls go on during the model's call.

use std::cell::RefCell;

use crate::{Engine, EngineError};

/// An engine shared behind a lock (a server's state, the Python package's memory): what may run
/// beside other readers takes the read side, what changes the store the write side, and a model
/// call holds neither, so reads go on while an encoder call is in flight.
pub trait SharedEngine {
    fn read<T>(&self, f: impl FnOnce(&Engine) -> Result<T, EngineError>) -> Result<T, EngineError>;
    fn write<T>(
        &self,
        f: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError>;
}

/// An engine nobody else holds, as a [`SharedEngine`].
pub(crate) struct Alone<'a>(pub(crate) RefCell<&'a mut Engine>);

impl SharedEngine for Alone<'_> {
    fn read<T>(&self, f: impl FnOnce(&Engine) -> Result<T, EngineError>) -> Result<T, EngineError> {
        f(&self.0.borrow())
    }

    fn write<T>(
        &self,
        f: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        f(&mut self.0.borrow_mut())
    }
}
