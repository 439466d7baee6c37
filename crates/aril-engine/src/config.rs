//! The engine's configuration: one typed home for every tunable, with documented defaults.
//! Loaded from a TOML file (`--config`) or left at its defaults.

use std::path::{Path, PathBuf};

use aril_core::Role;
use aril_embed::{MiniLmOptions, Weights};
use aril_recall::RecallConfig;
use aril_segment::SegmenterConfig;
use serde::{Deserialize, Serialize};

use crate::EngineError;

/// Everything an engine can be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Directory with `model.onnx`, `tokenizer.json`, `config.json` of all-MiniLM-L6-v2.
    /// Default: `$ARIL_MODEL_DIR`, else `models/all-MiniLM-L6-v2` in the cache root
    /// (`$ARIL_CACHE`, else `~/.cache/aril`).
    pub model_dir: Option<PathBuf>,
    /// The ONNX Runtime library (`libonnxruntime.so`, 1.24 or later) the embedder runs on.
    /// Default: `$ARIL_ONNXRUNTIME`, else `onnxruntime/libonnxruntime.so.1.31.1` in the cache
    /// root, where `scripts/fetch-model` installs it from the PyPI wheel.
    pub onnxruntime: Option<PathBuf>,
    /// Threads a large embedding (a write's turns and segments) runs on; a question always
    /// embeds on its caller's thread alone. Default: every core; `aril serve` defaults to every
    /// core but one ([`Config::cores_but_one`]), so searches keep a core while a write embeds.
    pub embed_threads: Option<usize>,
    /// The weights questions are embedded with: `int8` (default), `model-questions-int8.onnx`,
    /// which `scripts/fetch-model` writes beside the model, about twice as fast, with the same
    /// recall as the full weights on the benchmarks (docs/benchmarks-scale.md); `f32`,
    /// `model.onnx`, the full weights.
    pub question_weights: Weights,
    /// The weights the texts to store are embedded with: `f32` (default), the full weights,
    /// exactly as sentence-transformers; `int8`, the 8-bit graph, about three times the
    /// throughput on a CPU, within a question of the recall on each benchmark
    /// (docs/benchmarks.md: one question fewer at R@5 on LongMemEval dev, the same on dev2,
    /// LoCoMo 1k up 0.003). Both make vectors of the same model (within a cosine of ~0.995),
    /// searched together; they are cached apart ([`aril_embed::Embedder::variant`]), so a data
    /// directory may hold both and this can change at any time.
    pub stored_weights: Weights,
    /// Roles whose turns get dense vectors (and make up a segment's embedded text). Every turn is
    /// stored and BM25-indexed whatever its role. Default: `["user"]` — the user's own words carry
    /// what there is to remember about them, assistant turns are long and generic (seed 004:
    /// indexing user turns only raised session recall by 6 points), and skipping them roughly
    /// halves embedding cost on assistant chats. LoCoMo speakers are all `user`.
    pub dense_roles: Vec<Role>,
    /// How a dense-role turn's text becomes vectors: `sentences` (default) embeds each of its
    /// sentences (runs of at least `sentence_min_bytes`), so dense search, which takes a turn's
    /// best vector, finds the one sentence of a long turn that answers; `chunks` embeds it whole,
    /// cut into chunks only where it is longer than the model reads. Either way nothing is
    /// truncated, and a data directory may hold turns of both (each turn keeps the vectors it was
    /// stored with). Measured (docs/benchmarks-history.md): sentences hold LongMemEval's session
    /// recall where haystacks grow (dev widened three times: R@5 97.0 against 95.0) for the same
    /// LoCoMo recall within a few questions.
    pub turn_vectors: TurnVectors,
    /// The shortest sentence run `turn_vectors = "sentences"` embeds alone, in bytes: shorter
    /// sentences join the next one (a short last one the one before).
    pub sentence_min_bytes: usize,
    pub segmenter: SegmenterConfig,
    pub recall: RecallConfig,
    /// How a segment gets its vector: `pooled` (default) averages the chunk vectors of its
    /// dense-role turns, weighted by length, at no model cost; `embedded` runs the model over the
    /// segment's whole text (chunked), which doubles embedding work for a small gain or none
    /// (docs/benchmarks-history.md).
    pub segment_vectors: SegmentVectors,
    /// Turns committed per transaction during ingest: a crash keeps whole batches only.
    pub ingest_batch: usize,
    /// Chunk vectors of one kind (turns, segments) from which a user's dense search runs through
    /// an HNSW graph saved in the data directory (`vectors/`), its candidates rescored exactly,
    /// instead of scoring every chunk. Default 15,000 (about 12k turns): below it the exact scan
    /// costs a few milliseconds. PostgreSQL uses pgvector's HNSW whatever the size.
    pub ann_min_chunks: usize,
    /// Memory for the vectors (and graphs) of the users searched, in MiB, all users together:
    /// past it the users searched least recently are let go and reloaded on their next search
    /// (their graphs from `vectors/`), so a server's memory stays bounded however many users it
    /// serves. The user being searched or written is always held, however large. Default 1024.
    pub vector_memory_mib: usize,
    /// Language-model endpoints per role (`[llm]`, `[llm.encoder]`, ...); the `ARIL_LLM_*`
    /// environment overrides them field by field.
    pub llm: aril_llm::LlmSettings,
}

/// See [`Config::turn_vectors`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnVectors {
    Chunks,
    Sentences,
}

/// See [`Config::segment_vectors`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentVectors {
    Pooled,
    Embedded,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            model_dir: None,
            onnxruntime: None,
            embed_threads: None,
            question_weights: Weights::Int8,
            stored_weights: Weights::F32,
            dense_roles: vec![Role::User],
            turn_vectors: TurnVectors::Sentences,
            sentence_min_bytes: 80,
            segmenter: SegmenterConfig::default(),
            recall: RecallConfig::default(),
            segment_vectors: SegmentVectors::Pooled,
            ingest_batch: 0,
            ann_min_chunks: 15_000,
            vector_memory_mib: 1024,
            llm: aril_llm::LlmSettings::default(),
        }
    }
}

impl Config {
    /// Reads a TOML configuration file; unknown keys are errors.
    pub fn load(path: &Path) -> Result<Self, EngineError> {
        let text = std::fs::read_to_string(path).map_err(|e| EngineError::Io {
            what: format!("reading configuration {}", path.display()),
            cause: e,
        })?;
        let config: Config = toml::from_str(&text)
            .map_err(|e| EngineError::Config(format!("{}: {e}", path.display())))?;
        config.validate()?;
        Ok(config)
    }

    /// How the local MiniLM embedder runs under this configuration.
    pub fn minilm_options(&self) -> MiniLmOptions {
        MiniLmOptions {
            runtime: self
                .onnxruntime
                .clone()
                .unwrap_or_else(aril_embed::default_runtime_path),
            bulk_threads: self.embed_threads,
            questions: self.question_weights,
            stored: self.stored_weights,
        }
    }

    /// Every core of this machine but one, and at least one: what a server embeds its writes
    /// on unless `embed_threads` says otherwise.
    pub fn cores_but_one() -> usize {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .saturating_sub(1)
            .max(1)
    }

    pub fn validate(&self) -> Result<(), EngineError> {
        self.segmenter.validate().map_err(EngineError::Config)?;
        if self.embed_threads == Some(0) {
            return Err(EngineError::Config(
                "embed_threads must be at least 1 (leave it out for every core)".into(),
            ));
        }
        if self.recall.candidates == 0 || self.recall.default_k == 0 {
            return Err(EngineError::Config(
                "recall.candidates and recall.default_k must be at least 1".into(),
            ));
        }
        if self.dense_roles.is_empty() {
            return Err(EngineError::Config(
                "dense_roles is empty: no turn would be embedded".into(),
            ));
        }
        if self.recall.rrf_k < 0.0 {
            return Err(EngineError::Config(
                "recall.rrf_k must not be negative".into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn batch_size(&self) -> usize {
        if self.ingest_batch == 0 {
            64
        } else {
            self.ingest_batch
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/configuration.md` shows the defaults as a TOML file: it must load, and every value
    /// it states must be the code's default, so the page cannot drift from the code.
    #[test]
    fn the_documented_configuration_loads_and_states_the_defaults() {
        let page = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
        let page = std::fs::read_to_string(page).unwrap();
        let block = page
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("\n```").next())
            .unwrap();
        let mut documented: Config = toml::from_str(block).unwrap();
        documented.validate().unwrap();
        // The page names the batch that 0 (the default) stands for, and its model sections hold
        // only commented examples.
        assert_eq!(documented.ingest_batch, Config::default().batch_size());
        documented.ingest_batch = Config::default().ingest_batch;
        documented.llm = aril_llm::LlmSettings::default();
        assert_eq!(documented, Config::default());
    }

    #[test]
    fn no_embedding_threads_is_refused_and_a_server_leaves_a_core_where_there_are_two() {
        let none = Config {
            embed_threads: Some(0),
            ..Config::default()
        };
        let err = none.validate().unwrap_err().to_string();
        assert!(err.contains("embed_threads must be at least 1"), "{err}");
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let serving = Config::cores_but_one();
        assert!(serving >= 1 && (cores == 1 || serving < cores));
    }
}
