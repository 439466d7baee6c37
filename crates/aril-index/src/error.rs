//! Errors of the index stage.

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("lexical index error: {0} (run `aril reindex` to rebuild it from the store)")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("could not open the lexical index at {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("lexical index is corrupt: {0} (run `aril reindex` to rebuild it from the store)")]
    Corrupt(String),
    #[error(transparent)]
    Store(#[from] aril_store::StoreError),
    #[error("vector graph {path}: {reason} (check the disk; `aril reindex` rebuilds it)")]
    VectorFile { path: String, reason: String },
}
