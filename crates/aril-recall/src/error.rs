//! Errors of recall: a request it cannot answer, or the stage below that failed.

#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    /// The message is the whole error (not a `source`), so a printed chain says it once.
    #[error("invalid input: {0}")]
    InvalidInput(aril_core::InvalidInput),
    #[error(transparent)]
    Store(#[from] aril_store::StoreError),
    #[error(transparent)]
    Index(#[from] aril_index::IndexError),
    #[error(transparent)]
    Embed(#[from] aril_embed::EmbedError),
}

impl From<aril_core::InvalidInput> for RecallError {
    fn from(e: aril_core::InvalidInput) -> Self {
        RecallError::InvalidInput(e)
    }
}
