//! The aril memory engine over one data directory: ingest turns (keep verbatim, embed, segment),
//! keep the derived indexes in step, and recall what is relevant to a question within a budget.
//! This is the library API that the CLI (and later the server) adapt; it knows no wire format.
//!
//! Data directory layout:
//! - `aril.lock`: held by the one process that owns the directory;
//! - `store.sqlite` (+ `-wal`, `-shm`): the ground state and the embedding cache;
//! - `lexical/`: the tantivy BM25 index, derived, rebuildable with [`Engine::reindex`];
//! - `store.at`: which store the derived index was built from (`embedded`, or a PostgreSQL URL
//!   without its password, when the ground state lives in PostgreSQL: [`StoreAt`]).

mod ask;
mod card_index;
mod card_memory;
mod config;
mod consolidate;
mod embedding;
mod error;
mod ingest;
mod input;
mod inspect;
mod keys;
mod lock;
mod memory;
mod metered;
mod pools;
mod records;
mod shared;
mod transfer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use aril_embed::{Embedder, MiniLm};
use aril_index::{EmbeddedIndex, InStore, LexicalIndex, UnitSearch, VectorSettings};
use aril_recall::Recall;
use aril_segment::Segmenter;
use aril_store::{PgStore, SqliteStore, Store, StoreStats};
use serde::Serialize;

pub use aril_cards::{Category, EncodeConfig, Guidance};
pub use aril_core::{
    Card, CardId, CardKind, Condition, Lifecycle, Metadata, NewTurn, Role, Scope, ScopeFilter,
    Segment, SegmentId, TurnId, UnitId, UnitKind, parse_calendar_date,
};
pub use aril_datasets as datasets;
pub use aril_embed as embed;
pub use aril_llm as llm;
pub use aril_plan::{Plan, PlanPath, TimeWindow, Want};
pub use aril_recall::{
    Explanation, FusedUnit, LexicalTurnRoles, PathList, PathUnit, RecallConfig, SearchHit,
    SearchRequest, SearchResponse, SegmentUse, SourceRef, Trace,
};
pub use aril_segment::SegmenterConfig;
pub use aril_store::transfer::{Fingerprint, MoveProgress, MoveReport, Table};
pub use aril_store::{
    ApiKeyRecord, CardQuery, DailyTurns, DailyUsage, DeleteReport, LlmUsage, PG_SCHEMA_VERSION,
    SCHEMA_VERSION as EMBEDDED_SCHEMA_VERSION, ScopeSummary, StoreError,
};
pub use ask::{
    AskRequest, AskResponse, ContextItem, PathRerank, Profile, Recalled, RerankedUnit, ask_shared,
    recall_planned_shared,
};
pub use card_memory::CardMemory;
pub use config::{Config, SegmentVectors, TurnVectors};
pub use consolidate::{
    ConsolidateOptions, ConsolidateReport, EncodeAttempt, EncodeJob, EncodeOutcome,
    consolidate_shared, encode_claimed,
};
pub use embedding::{ModelWorkDone, stored_chunks};
pub use error::EngineError;
pub use ingest::{IngestOptions, IngestReport, Prepared, Progress, Stored};
pub use input::{
    TurnDefaults, TurnIn, parse_asked_at, parse_expiry, parse_lifecycle, parse_time, parse_valid_to,
};
pub use keys::{Grant, KeyRing};
pub use memory::{MemoryEdit, MemoryView};
pub use metered::CallCost;
pub use records::{Access, Deletion, HistoryEntry, MemoryRecord};
pub use shared::SharedEngine;

/// Where the lexical index lives inside a data directory.
const LEXICAL_DIR: &str = "lexical";
/// Where the vector graphs of large scopes live inside a data directory.
const VECTORS_DIR: &str = "vectors";
const STORE_FILE: &str = "store.sqlite";
/// Names the store the data directory's derived indexes were built from.
const STORE_MARK: &str = "store.at";

/// Where the ground state lives: the data directory's SQLite file, or a PostgreSQL database that
/// several aril processes may share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreAt {
    Embedded,
    /// A `postgres://` (or `postgresql://`) URL.
    Postgres(String),
}

impl StoreAt {
    /// `Postgres` for a `postgres://` or `postgresql://` URL, else `None`.
    pub fn postgres(url: &str) -> Option<Self> {
        (url.starts_with("postgres://") || url.starts_with("postgresql://"))
            .then(|| StoreAt::Postgres(url.to_string()))
    }

    /// How the store is shown: `embedded`, or the URL without its password.
    pub fn describe(&self) -> String {
        match self {
            StoreAt::Embedded => "embedded".into(),
            StoreAt::Postgres(url) => aril_store::redact_url(url),
        }
    }

    /// Brings the store's schema up to this build's; returns the version it is at. The
    /// embedded store upgrades itself whenever it is opened.
    pub fn migrate(&self, dir: &Path) -> Result<i64, EngineError> {
        match self {
            StoreAt::Embedded => {
                let path = dir.join(STORE_FILE);
                SqliteStore::open(&path)?;
                Ok(aril_store::SCHEMA_VERSION)
            }
            StoreAt::Postgres(url) => Ok(PgStore::migrate(url)?),
        }
    }
}

/// An open memory: a data directory with its embedded store, or a PostgreSQL store. One process
/// at a time owns a data directory; any number share a PostgreSQL store.
///
/// An engine is `Send + Sync`. Its readers (`search`, `search_sessions`, `profile`, `stats`,
/// listing and getting memories) take `&self` and run in parallel on as many threads as call
/// them; the caches they fill (the embedder, a user's vectors, a user's card index) sit behind
/// locks of their own. Writers take `&mut self`, so a caller sharing an engine serialises them
/// (e.g. behind an `RwLock`).
pub struct Engine {
    dir: PathBuf,
    at: StoreAt,
    config: Config,
    store: Box<dyn Store>,
    /// Dense and lexical search over the store's units: indexes derived beside an embedded
    /// store, or the store's own.
    search: Box<dyn UnitSearch>,
    /// An embedded data directory is owned by one process.
    _lock: Option<lock::DirLock>,
    segmenter: Segmenter,
    /// Loaded on first use; the lock is held while loading, so it happens once.
    embedder: Mutex<Option<Arc<dyn Embedder>>>,
    /// Per user, built on first recall over cards; rebuilt when the store's cards of the user
    /// change (whoever changed them: [`Store::cards_generation`]).
    card_indexes: RwLock<HashMap<String, Arc<card_index::CardIndex>>>,
    /// The cross-encoder planned recall reorders each path with, when one is configured.
    reranker: Option<Arc<dyn aril_llm::Reranker>>,
    /// What the model has embedded for storage since the engine opened.
    model_work: Arc<embedding::ModelMeter>,
    /// The embedder's [`Embedder::variant`] (the given one's, else the configured weights'),
    /// part of every cache key the engine makes.
    variant: String,
}

/// Counts describing a data directory.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub data_dir: String,
    /// `embedded`, or the PostgreSQL URL (without its password).
    pub backend: String,
    #[serde(flatten)]
    pub store: StoreStats,
    /// Documents BM25 searches: each turn, each turn's window, each segment.
    pub lexical_units: u64,
    /// Turns per closed segment (the paper reports about 5.8 on LoCoMo): each closed segment
    /// is one encoder call when cards are written.
    pub turns_per_segment: f64,
    /// o200k tokens per closed segment: what one encoder call reads of the conversation.
    pub tokens_per_segment: f64,
    /// Every language-model call made on this directory, summed by purpose and model.
    pub llm: Vec<aril_store::LlmUsage>,
}

impl Engine {
    /// Stored turns by id (ids not stored are absent).
    pub fn turns_by_id(
        &self,
        ids: &[aril_core::TurnId],
    ) -> Result<std::collections::HashMap<aril_core::TurnId, aril_core::Turn>, EngineError> {
        Ok(self
            .store
            .turns(ids)?
            .into_iter()
            .map(|t| (t.id.clone(), t))
            .collect())
    }

    /// Opens (creating if needed) a data directory. The embedding model is loaded on first use
    /// from `config.model_dir` (default: [`aril_embed::default_model_dir`]).
    pub fn open(dir: &Path, config: Config) -> Result<Self, EngineError> {
        Self::open_inner(dir, &StoreAt::Embedded, config, None)
    }

    /// Opens a data directory with an embedder already loaded (shared between engines).
    pub fn open_with_embedder(
        dir: &Path,
        config: Config,
        embedder: Arc<dyn Embedder>,
    ) -> Result<Self, EngineError> {
        Self::open_inner(dir, &StoreAt::Embedded, config, Some(embedder))
    }

    /// Opens the store at `store` with `dir` as the data directory for what is derived from it
    /// (the lexical index) and for the process lock; `embedder` as in
    /// [`Engine::open_with_embedder`], or loaded on first use.
    pub fn open_at(
        dir: &Path,
        store: &StoreAt,
        config: Config,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Result<Self, EngineError> {
        Self::open_inner(dir, store, config, embedder)
    }

    /// [`Engine::open_at`] for work on a memory that must be there already (searching,
    /// exporting, checking…): an embedded data directory without a store is
    /// [`EngineError::NoMemory`], and is left as it was (not created), where `open_at` would
    /// start an empty memory. A PostgreSQL store is checked when opened (it must be migrated).
    pub fn open_existing_at(
        dir: &Path,
        store: &StoreAt,
        config: Config,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Result<Self, EngineError> {
        if *store == StoreAt::Embedded && !dir.join(STORE_FILE).is_file() {
            return Err(EngineError::NoMemory {
                dir: dir.display().to_string(),
            });
        }
        Self::open_inner(dir, store, config, embedder)
    }

    fn open_inner(
        dir: &Path,
        at: &StoreAt,
        config: Config,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Result<Self, EngineError> {
        config.validate()?;
        type Opened = (Box<dyn Store>, Box<dyn UnitSearch>, Option<lock::DirLock>);
        let (store, search, lock): Opened = match at {
            StoreAt::Embedded => {
                std::fs::create_dir_all(dir).map_err(|e| EngineError::Io {
                    what: format!("creating data directory {}", dir.display()),
                    cause: e,
                })?;
                let lock = lock::DirLock::acquire(dir)?;
                let store = SqliteStore::open(&dir.join(STORE_FILE))?;
                let settings = VectorSettings {
                    dir: Some(dir.join(VECTORS_DIR)),
                    ann_min_chunks: config.ann_min_chunks,
                    max_held_bytes: config.vector_memory_mib.saturating_mul(1 << 20),
                };
                let index = EmbeddedIndex::open(Self::open_lexical(dir)?, settings, &store)?;
                (Box::new(store), Box::new(index), Some(lock))
            }
            // Nothing local: the database holds and searches everything.
            StoreAt::Postgres(url) => {
                let store = PgStore::open(url)?;
                let search = InStore::new(store.searcher());
                (Box::new(store), Box::new(search), None)
            }
        };
        let variant = embedder.as_ref().map_or_else(
            || config.stored_weights.variant().to_string(),
            |e| e.variant().to_string(),
        );
        let mut engine = Self {
            dir: dir.to_path_buf(),
            at: at.clone(),
            segmenter: Segmenter::new(config.segmenter.clone()),
            config,
            store,
            search,
            _lock: lock,
            variant,
            embedder: Mutex::new(embedder),
            card_indexes: Default::default(),
            reranker: None,
            model_work: Default::default(),
        };
        let swept = engine.sweep_expired(chrono::Utc::now())?;
        if swept > 0 {
            tracing::info!(swept, "deleted the memories that expired");
        }
        Ok(engine)
    }

    /// The data directory's lexical index. It is derived from the directory's own store: one an
    /// older aril built from a PostgreSQL store (named in `store.at`) starts over.
    fn open_lexical(dir: &Path) -> Result<LexicalIndex, EngineError> {
        let mut lexical = LexicalIndex::open(&dir.join(LEXICAL_DIR))?;
        let mark = dir.join(STORE_MARK);
        let this = StoreAt::Embedded.describe();
        let before = std::fs::read_to_string(&mark).ok();
        let watermark = lexical.watermark()?;
        if watermark.turn_seq > 0 && !watermark.windows {
            tracing::info!("the lexical index predates turn windows: rebuilding it");
            lexical.clear()?;
        }
        if before.as_deref().map(str::trim) != Some(this.as_str()) {
            if before.is_some() {
                tracing::info!("the lexical index was built from another store: rebuilding it");
                lexical.clear()?;
            }
            std::fs::write(&mark, format!("{this}\n")).map_err(|e| EngineError::Io {
                what: format!("writing {}", mark.display()),
                cause: e,
            })?;
        }
        Ok(lexical)
    }

    /// The data directory (a PostgreSQL store keeps nothing in it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the ground state lives.
    pub fn store_at(&self) -> &StoreAt {
        &self.at
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The embedder, loading the model on first use.
    fn embedder(&self) -> Result<Arc<dyn Embedder>, EngineError> {
        let mut loaded = self.embedder.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = &*loaded {
            return Ok(e.clone());
        }
        let dir = self
            .config
            .model_dir
            .clone()
            .unwrap_or_else(aril_embed::default_model_dir);
        let model: Arc<dyn Embedder> =
            Arc::new(MiniLm::load_with(&dir, &self.config.minilm_options())?);
        *loaded = Some(model.clone());
        Ok(model)
    }

    /// The read path over this memory (loading the embedding model on first use).
    pub(crate) fn recall(&self) -> Result<Recall<'_>, EngineError> {
        Ok(Recall {
            store: &*self.store,
            search: &*self.search,
            embedder: self.embedder()?,
            config: &self.config.recall,
            dense_roles: &self.config.dense_roles,
        })
    }

    /// Recalls the units most relevant to a question inside a scope (see [`Recall::search`]).
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResponse, EngineError> {
        Ok(self.recall()?.search(request)?)
    }

    /// [`Engine::search`] with the ranked list of each retrieval path, the fused list and the
    /// context it made (see [`Recall::explain`]): what the inspector's recall playground shows.
    pub fn explain(&self, request: &SearchRequest) -> Result<Explanation, EngineError> {
        Ok(self.recall()?.explain(request)?)
    }

    /// Segments by id, for display (ids not stored are absent).
    pub fn segments_by_id(&self, ids: &[SegmentId]) -> Result<Vec<Segment>, EngineError> {
        Ok(self.store.segments(ids)?)
    }

    /// Recalls the sessions most relevant to a question inside a scope, one hit per session
    /// (see [`Recall::search_sessions`]).
    pub fn search_sessions(&self, request: &SearchRequest) -> Result<SearchResponse, EngineError> {
        Ok(self.recall()?.search_sessions(request)?)
    }

    /// Loads the embedding model now if it is not loaded yet; an error says what is missing.
    /// Servers call it to tell readiness without touching the store.
    pub fn load_model(&self) -> Result<(), EngineError> {
        self.embedder().map(|_| ())
    }

    /// Forgets every user's card index (rebuilt from the store on use).
    fn forget_card_indexes(&mut self) {
        self.card_indexes = RwLock::default();
    }

    /// Rebuilds the lexical index from the store, drops the in-memory vectors (reloaded from
    /// the store on the next query) and stores the vectors cards lack under this model. Returns
    /// the number of units indexed. A store that searches itself has nothing to rebuild: its
    /// units are counted.
    pub fn reindex(&mut self) -> Result<u64, EngineError> {
        self.forget_card_indexes();
        self.search.rebuild(&*self.store)?;
        let cards = self.store_missing_card_vectors()?;
        if cards > 0 {
            tracing::info!(cards, "stored the vectors cards lacked");
        }
        Ok(self.search.documents(&self.store.stats()?))
    }

    /// Store and index counts.
    pub fn stats(&self) -> Result<Stats, EngineError> {
        let store = self.store.stats()?;
        let per_segment = |n: u64| match store.segments {
            0 => 0.0,
            segments => n as f64 / segments as f64,
        };
        let turns_per_segment = per_segment(store.segmented_turns);
        let tokens_per_segment = per_segment(store.segment_tokens);
        Ok(Stats {
            data_dir: self.dir.display().to_string(),
            backend: self.at.describe(),
            lexical_units: self.search.documents(&store),
            turns_per_segment,
            tokens_per_segment,
            llm: self.store.llm_usage()?,
            store,
        })
    }

    /// A page of a scope's closed segments in store order (`limit` after the first `offset`),
    /// and how many the scope has in all.
    pub fn segments(
        &self,
        filter: &ScopeFilter,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Segment>, u64), EngineError> {
        Ok(self.store.list_segments(filter, offset, limit)?)
    }

    /// Every user with stored turns.
    pub fn users(&self) -> Result<Vec<String>, EngineError> {
        Ok(self.store.users()?)
    }

    /// A page of a scope's turns in store order (every version of an edited memory: turns are the
    /// verbatim record), and how many the scope has in all.
    pub fn list_turns(
        &self,
        filter: &ScopeFilter,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<aril_core::Turn>, u64), EngineError> {
        let (ids, total) = self.store.list_turn_ids(filter, offset, limit, false)?;
        Ok((self.store.turns(&ids)?, total))
    }

    /// Of the scope's `last` newest turns (store order), those no closed segment holds yet: the
    /// open segments' turns, waiting for a topic change, a session's end or a flush.
    pub fn unsegmented_turns(
        &self,
        filter: &ScopeFilter,
        last: u64,
    ) -> Result<Vec<aril_core::Turn>, EngineError> {
        let (_, total) = self.store.list_turn_ids(filter, 0, 0, false)?;
        let (ids, _) = self
            .store
            .list_turn_ids(filter, total.saturating_sub(last), last, false)?;
        let held: std::collections::HashSet<aril_core::TurnId> = self
            .store
            .segments_holding(&ids)?
            .into_iter()
            .flat_map(|s| s.turns)
            .collect();
        let open: Vec<aril_core::TurnId> =
            ids.into_iter().filter(|id| !held.contains(id)).collect();
        Ok(self.store.turns(&open)?)
    }

    /// Turns by id, for display.
    pub fn turns(&self, ids: &[aril_core::TurnId]) -> Result<Vec<aril_core::Turn>, EngineError> {
        Ok(self.store.turns(ids)?)
    }

    /// Deletes everything a filter admits from the store, the lexical index, the vector index and
    /// the embedding cache. An unknown scope is an error and changes nothing.
    pub fn delete(&mut self, filter: &ScopeFilter) -> Result<DeleteReport, EngineError> {
        self.search.deleting(&filter.user_id)?;
        let report = match self.store.delete(filter) {
            Ok(report) => report,
            Err(e) => {
                self.search.deletion_refused()?;
                return Err(e.into());
            }
        };
        self.search.deleted_scope(filter)?;
        self.drop_card_index(&filter.user_id);
        Ok(report)
    }

    /// Runs the store's integrity check, then checks the saved vector graphs against it (each
    /// whole, none of a user the store does not hold).
    pub fn check_integrity(&self) -> Result<(), EngineError> {
        self.store.check_integrity()?;
        self.search.check(&*self.store)?;
        Ok(())
    }
}
