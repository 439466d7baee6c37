//! Errors of the engine: each wraps a stage's error or says what to fix.

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(
        "data directory {dir} is in use by another aril process ({holder}); stop it, or use another \
         --data-dir"
    )]
    Busy { dir: String, holder: String },
    #[error(
        "no aril memory in {dir}: check --data-dir (or ARIL_DATA_DIR); `aril add` or `aril \
         import` starts one there"
    )]
    NoMemory { dir: String },
    /// The cause is in the message and not a `source`, so a printed chain names it once.
    #[error("{what}: {cause}")]
    Io { what: String, cause: std::io::Error },
    /// The message is the whole error (not a `source`), so a printed chain says it once.
    #[error("invalid input: {0}")]
    InvalidInput(aril_core::InvalidInput),
    #[error("no memory with id {0:?}: check the id (a memory's id is that of its first version)")]
    UnknownMemory(String),
    #[error(
        "no session {} in conversation {conversation:?} of this scope: check the names (the \
         timeline shows each session's)",
        session.as_deref().map_or("without a name".to_string(), |s| format!("{s:?}"))
    )]
    UnknownSession {
        conversation: String,
        session: Option<String>,
    },
    #[error(
        "memory {0:?} is immutable (it was added with immutable: true): delete it and add the new \
         text as a new memory"
    )]
    ImmutableMemory(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The engine a caller shares cannot be reached (closed, or its lock poisoned by a bug).
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Store(#[from] aril_store::StoreError),
    #[error(transparent)]
    Index(#[from] aril_index::IndexError),
    #[error(transparent)]
    Embed(#[from] aril_embed::EmbedError),
    #[error(transparent)]
    Dataset(#[from] aril_datasets::DatasetError),
    #[error(transparent)]
    Llm(#[from] aril_llm::LlmError),
}

impl From<aril_recall::RecallError> for EngineError {
    /// Recall's errors are the stages' errors the engine has too; an invalid request stays one.
    fn from(e: aril_recall::RecallError) -> Self {
        use aril_recall::RecallError;
        match e {
            RecallError::InvalidInput(e) => EngineError::InvalidInput(e),
            RecallError::Store(e) => EngineError::Store(e),
            RecallError::Index(e) => EngineError::Index(e),
            RecallError::Embed(e) => EngineError::Embed(e),
        }
    }
}

impl From<aril_core::InvalidInput> for EngineError {
    fn from(e: aril_core::InvalidInput) -> Self {
        EngineError::InvalidInput(e)
    }
}
