//! The one error the core model raises: input that cannot become a valid turn or scope.

/// Input rejected before anything is written; the message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);
