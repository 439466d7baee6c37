//! What the engine's test files share.

use std::sync::{Arc, OnceLock};

use aril_embed::{Embedder, MiniLm, default_model_dir};

/// The real MiniLM embedder (`scripts/fetch-model`), loaded once per test binary.
pub fn embedder() -> Arc<dyn Embedder> {
    static MODEL: OnceLock<Arc<dyn Embedder>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            Arc::new(MiniLm::load(&default_model_dir()).unwrap_or_else(|e| panic!("{e}")))
        })
        .clone()
}
