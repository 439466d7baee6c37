//! What the engine's test files share.

use std::sync::{Arc, OnceLock};

use aril_embed::{Embedder, MiniLm, default_model_dir};
use aril_engine::{Config, Engine, StoreAt};

/// The real MiniLM embedder (`scripts/fetch-model`), loaded once per test binary.
pub fn embedder() -> Arc<dyn Embedder> {
    static MODEL: OnceLock<Arc<dyn Embedder>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            Arc::new(MiniLm::load(&default_model_dir()).unwrap_or_else(|e| panic!("{e}")))
        })
        .clone()
}

/// Where a test's engine lives: a data directory, with its store in it or in a scratch
/// PostgreSQL database. Opened again, it is the same memory.
pub struct Place {
    dir: tempfile::TempDir,
    at: StoreAt,
    _db: Option<aril_store::scratch::ScratchDatabase>,
}

impl Place {
    pub fn sqlite() -> Self {
        Place {
            dir: tempfile::tempdir().unwrap(),
            at: StoreAt::Embedded,
            _db: None,
        }
    }

    pub fn postgres() -> Self {
        let db = aril_store::scratch::ScratchDatabase::new().unwrap_or_else(|e| panic!("{e}"));
        Place {
            dir: tempfile::tempdir().unwrap(),
            at: StoreAt::Postgres(db.url().to_string()),
            _db: Some(db),
        }
    }

    /// A new, empty place on the same backend.
    #[allow(dead_code)]
    pub fn another(&self) -> Self {
        match self.at {
            StoreAt::Embedded => Self::sqlite(),
            StoreAt::Postgres(_) => Self::postgres(),
        }
    }

    pub fn open(&self) -> Engine {
        self.open_with(Config::default())
    }

    /// The engine with a configuration of its own.
    pub fn open_with(&self, config: Config) -> Engine {
        Engine::open_at(self.dir.path(), &self.at, config, Some(embedder())).unwrap()
    }

    /// The engine embedding through `embedder` (e.g. the real one, watched).
    #[allow(dead_code)]
    pub fn open_embedding_with(&self, embedder: Arc<dyn Embedder>) -> Engine {
        Engine::open_at(self.dir.path(), &self.at, Config::default(), Some(embedder)).unwrap()
    }

    /// An engine on the same store with a data directory of its own (another process of a
    /// scaled-out service). Only a shared store has one.
    #[allow(dead_code)]
    pub fn open_elsewhere(&self) -> Engine {
        let dir = tempfile::tempdir().unwrap();
        let engine =
            Engine::open_at(dir.path(), &self.at, Config::default(), Some(embedder())).unwrap();
        // Nothing of a shared store lives in the directory.
        assert_eq!(
            std::fs::read_dir(dir.path())
                .map(|d| d.count())
                .unwrap_or(0),
            0
        );
        engine
    }

    /// Whether several engines may open this store at once (PostgreSQL).
    #[allow(dead_code)]
    pub fn shared(&self) -> bool {
        matches!(self.at, StoreAt::Postgres(_))
    }

    /// The data directory (not every test binary looks inside it).
    #[allow(dead_code)]
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A new, empty place of the same backend.
    #[allow(dead_code)]
    pub fn like(&self) -> Self {
        match self.at {
            StoreAt::Embedded => Self::sqlite(),
            StoreAt::Postgres(_) => Self::postgres(),
        }
    }
}
