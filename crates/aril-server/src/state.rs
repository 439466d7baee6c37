//! What every handler shares: the one engine of the data directory and the key ring. Engine calls
//! are blocking (SQLite, tantivy, the embedder), so they run on tokio's blocking pool, one at a
//! time behind a mutex: writes are serialised, and a response is sent only after the engine has
//! committed (durably) what it acknowledges.

use std::sync::{Arc, Mutex};

use aril_engine::{Engine, EngineError, KeyRing};

use crate::ApiError;

/// Shared server state.
#[derive(Clone)]
pub struct AppState {
    engine: Arc<Mutex<Engine>>,
    pub(crate) keys: Arc<KeyRing>,
    /// False only when the operator started the server with `--no-auth` on a loopback address.
    pub(crate) auth: bool,
}

impl AppState {
    /// State over an open engine. `auth = false` lets every request act as an admin.
    pub fn new(engine: Engine, auth: bool) -> Result<Self, EngineError> {
        let keys = engine.key_ring()?;
        Ok(Self {
            engine: Arc::new(Mutex::new(engine)),
            keys: Arc::new(keys),
            auth,
        })
    }

    /// Runs `f` on the engine on the blocking pool and maps its error for the API.
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Engine) -> Result<T, EngineError> + Send + 'static,
    {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = engine
                .lock()
                .map_err(|_| ApiError::internal("the engine failed in an earlier request"))?;
            f(&mut guard).map_err(ApiError::from)
        })
        .await
        .map_err(|e| ApiError::internal(format!("engine task failed: {e}")))?
    }
}
