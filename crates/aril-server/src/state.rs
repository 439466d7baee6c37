//! What every handler shares: the one engine of the data directory and the key ring. Engine calls
//! are blocking (SQLite, tantivy, the embedder), so they run on tokio's blocking pool behind a
//! read-write lock: reads ([`AppState::read`]: search, get, list, stats) run in parallel, writes
//! ([`AppState::run`]) one at a time and alone, and a response is sent only after the engine has
//! committed (durably) what it acknowledges. A write of turns holds the engine alone only to
//! segment and store them; indexing them ([`AppState::index`]) runs beside reads.
//!
//! A write that panics (a bug) fails alone: the store rolled its transaction back, and before the
//! next request the engine rebuilds its derived indexes, so one bad request cannot take the
//! service down or leave a half-written index behind. A read that panics changed nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use aril_engine::llm::ChatModel;
use aril_engine::{EncodeConfig, Engine, EngineError, Grant, KeyRing, SharedEngine};

use crate::ApiError;

/// Shared server state.
#[derive(Clone)]
pub struct AppState {
    engine: Arc<RwLock<Engine>>,
    /// Set when a write panicked and the derived indexes are still to be rebuilt.
    dirty: Arc<AtomicBool>,
    keys: Arc<Keys>,
    /// False only when the operator started the server with `--no-auth` on a loopback address.
    pub(crate) auth: bool,
    /// The encoder that writes cards, when one is configured: Mem0's `add` then returns cards.
    pub(crate) encoder: Option<Arc<CardWriter>>,
    /// The planner, when one is configured: the inspector's recall playground plans with it.
    pub(crate) planner: Option<Arc<dyn ChatModel>>,
}

/// The key ring, and when it was last read from the store.
struct Keys {
    ring: RwLock<KeyRing>,
    /// When the store was last read for keys after an unknown one (`None`: not yet).
    read_at: Mutex<Option<Instant>>,
}

/// An unknown key makes the server read the stored keys again (a key made by `aril keys create`
/// against a shared store, or by another server), at most this often.
const KEY_RELOAD_EVERY: Duration = Duration::from_secs(1);

/// The encoder model and its reply bounds.
pub(crate) struct CardWriter {
    pub model: Arc<dyn ChatModel>,
    pub config: EncodeConfig,
}

impl AppState {
    /// State over an open engine. `auth = false` lets every request act as an admin.
    pub fn new(engine: Engine, auth: bool) -> Result<Self, EngineError> {
        let keys = engine.key_ring()?;
        Ok(Self {
            engine: Arc::new(RwLock::new(engine)),
            dirty: Arc::new(AtomicBool::new(false)),
            keys: Arc::new(Keys {
                ring: RwLock::new(keys),
                read_at: Mutex::new(None),
            }),
            auth,
            encoder: None,
            planner: None,
        })
    }

    /// Lets Mem0's `add` (and the MCP `add_memory` tool) write the added messages into cards at
    /// once with this encoder, and answer with the cards.
    pub fn with_encoder(mut self, model: Arc<dyn ChatModel>, config: EncodeConfig) -> Self {
        self.encoder = Some(Arc::new(CardWriter { model, config }));
        self
    }

    /// Lets the inspector's recall playground plan its question with this model (one call per
    /// recall, recorded with the other calls).
    pub fn with_planner(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.planner = Some(model);
        self
    }

    /// What a presented key grants. A key the ring does not know sends the server to the store
    /// for the keys made since (at most once per [`KEY_RELOAD_EVERY`]), so keys made elsewhere
    /// work without a restart.
    pub(crate) async fn check_key(&self, presented: &str) -> Result<Option<Grant>, ApiError> {
        let known = |keys: &Keys| {
            keys.ring
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .check(presented)
                .cloned()
        };
        if let Some(grant) = known(&self.keys) {
            return Ok(Some(grant));
        }
        let due = {
            let mut read_at = self.keys.read_at.lock().unwrap_or_else(|p| p.into_inner());
            let due = read_at.is_none_or(|t| t.elapsed() >= KEY_RELOAD_EVERY);
            if due {
                *read_at = Some(Instant::now());
            }
            due
        };
        if !due {
            return Ok(None);
        }
        let ring = self.read(|e| e.key_ring()).await?;
        *self.keys.ring.write().unwrap_or_else(|p| p.into_inner()) = ring;
        Ok(known(&self.keys))
    }

    /// The engine for a write: alone, after rebuilding the derived indexes if a write panicked.
    fn write_guard(&self) -> Result<RwLockWriteGuard<'_, Engine>, EngineError> {
        let mut guard = self.engine.write().unwrap_or_else(|poisoned| {
            self.engine.clear_poison();
            self.dirty.store(true, Ordering::SeqCst);
            poisoned.into_inner()
        });
        if self.dirty.load(Ordering::SeqCst) {
            tracing::error!("an earlier request panicked: rebuilding the derived indexes");
            guard.reindex()?;
            self.dirty.store(false, Ordering::SeqCst);
        }
        Ok(guard)
    }

    /// The engine for a read, beside other reads. Indexes a panicked write left behind are
    /// rebuilt first (under the write lock).
    fn read_guard(&self) -> Result<RwLockReadGuard<'_, Engine>, EngineError> {
        if self.dirty.load(Ordering::SeqCst) || self.engine.is_poisoned() {
            drop(self.write_guard()?);
        }
        Ok(self
            .engine
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Runs the write `f` on the engine on the calling thread (a blocking context), after the
    /// same recovery as [`AppState::run`].
    pub(crate) fn with_engine<T>(
        &self,
        f: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        f(&mut *self.write_guard()?)
    }

    /// Runs the read `f` on the engine on the calling thread (a blocking context), beside other
    /// reads.
    pub(crate) fn with_reader<T>(
        &self,
        f: impl FnOnce(&Engine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        f(&*self.read_guard()?)
    }

    /// Runs the write `f` on the engine on the blocking pool, alone, and maps its error for the
    /// API.
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Engine) -> Result<T, EngineError> + Send + 'static,
    {
        let state = self.clone();
        tokio::task::spawn_blocking(move || state.with_engine(f).map_err(ApiError::from))
            .await
            .map_err(|e| ApiError::internal(format!("engine task failed: {e}")))?
    }

    /// Makes what a write stored for these users searchable ([`Engine::index_committed`]),
    /// beside reads. An indexing that panics leaves the indexes to be rebuilt before the next
    /// request, as a panicking write does.
    pub(crate) async fn index(&self, users: Vec<String>) -> Result<(), ApiError> {
        let state = self.clone();
        let dirty = self.dirty.clone();
        let indexed = tokio::task::spawn_blocking(move || {
            let users: Vec<&str> = users.iter().map(String::as_str).collect();
            state
                .with_reader(|engine| engine.index_committed(&users))
                .map_err(ApiError::from)
        })
        .await;
        match indexed {
            Ok(result) => result,
            Err(e) => {
                if e.is_panic() {
                    dirty.store(true, Ordering::SeqCst);
                }
                Err(ApiError::internal(format!("indexing task failed: {e}")))
            }
        }
    }

    /// Runs the read `f` on the engine on the blocking pool, in parallel with other reads, and
    /// maps its error for the API.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Engine) -> Result<T, EngineError> + Send + 'static,
    {
        let state = self.clone();
        tokio::task::spawn_blocking(move || state.with_reader(f).map_err(ApiError::from))
            .await
            .map_err(|e| ApiError::internal(format!("engine task failed: {e}")))?
    }
}

impl SharedEngine for AppState {
    fn read<T>(&self, f: impl FnOnce(&Engine) -> Result<T, EngineError>) -> Result<T, EngineError> {
        self.with_reader(f)
    }

    fn write<T>(
        &self,
        f: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        self.with_engine(f)
    }
}
