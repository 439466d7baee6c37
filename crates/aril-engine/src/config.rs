//! The engine's configuration: one typed home for every tunable, with documented defaults.
//! Loaded from a TOML file (`--config`) or left at its defaults.

use std::path::{Path, PathBuf};

use aril_core::Role;
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
    /// instead of scoring every chunk. Default 20,000 (about 16k turns): below it the exact scan
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

/// How recall ranks and fuses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecallConfig {
    /// Candidates taken from each ranked list before fusion.
    pub candidates: usize,
    /// The `k` of reciprocal-rank fusion.
    pub rrf_k: f32,
    /// Fusion weight of dense (cosine) search over turns.
    pub w_dense_turns: f32,
    /// Fusion weight of BM25 over turns.
    pub w_lexical_turns: f32,
    /// Which turns the BM25 turn lists rank: `dense_roles` (default) the turns of `dense_roles`
    /// only, the turns the dense turn lists rank, so both turn lists vote among the same turns;
    /// `all` every turn. Either way every turn stays in its window's BM25 list and its segment, and
    /// BM25's statistics count every turn. Measured (docs/benchmarks-history.md): on LongMemEval,
    /// whose assistant replies are long and share a request's words ("suggest", "current"), keeping
    /// them out lifts the dev file widened five times (scripts/widen-longmemeval) from rankfor R@5
    /// / R@10 91.9 / 96.7 to 93.8 / 97.5; LoCoMo and HotpotQA, whose turns are all the user's, rank
    /// exactly as before.
    pub lexical_turn_roles: LexicalTurnRoles,
    /// Fusion weight of dense search over segments.
    pub w_dense_segments: f32,
    /// Fusion weight of BM25 over segments (0 by default: the window list does its work
    /// better; a list of weight 0 is not searched).
    pub w_lexical_segments: f32,
    /// Fusion weight of BM25 over the turns' lexical windows (`aril_core::window_text`: a turn with
    /// its session neighbours, searched for the turn). Measured on LoCoMo
    /// (docs/benchmarks-history.md), it finds short replies by the words of the exchange around
    /// them.
    pub w_lexical_windows: f32,
    /// Fusion weight of each of the three speaker-focus lists (the dense, BM25 and window turn
    /// lists searched again for the question without the name, restricted to the turns of the
    /// one speaker a question names; `crate::focus`). 0 turns speaker focus off.
    pub w_focus: f32,
    /// Fusion weight of each of the three date-focus lists (the dense, BM25 and window turn
    /// lists searched again for the question without the date, restricted to the turns said in
    /// the one day, month or year a question names; `crate::dated`). 0 turns date focus off.
    pub w_dated: f32,
    /// How much deeper than `candidates` a focus list is searched first (it keeps the named
    /// speaker's or period's turns), so it still holds about `candidates` turns.
    pub focus_depth: usize,
    /// Fusion weight of the session list in [`crate::Engine::search_sessions`] (sessions ranked by
    /// the mean cosine of their best `session_turns` dense turns); 0 ranks sessions by their best
    /// unit alone. Turn search ([`crate::Engine::search`]) does not use it. Measured on LongMemEval
    /// (docs/benchmarks-history.md): it lifts sessions that speak of the question in several turns.
    pub w_sessions: f32,
    /// How many of a session's best dense turns its session-list score averages.
    pub session_turns: usize,
    /// Results returned when the caller gives no `k`.
    pub default_k: usize,
    /// How retrieved segments take part: `rank_turns` (default) credits each member turn with the
    /// segment's rank, so a segment's context lifts its turns but only turns are shown; `units`
    /// returns segments as units of their own. Measured on LoCoMo, showing whole segments spends
    /// the token budget on neighbours of the evidence (docs/benchmarks-history.md).
    pub segments: SegmentUse,
}

/// The `k` of RRF in the LLM-free recall: lower than the customary 60, because a retrieved segment
/// credits all its turns with one rank and a large `k` lets such ties outweigh the turn lists'
/// leaders. Measured (docs/benchmarks-history.md): LoCoMo evidence recall at 1k tokens 0.794 at 60,
/// 0.812 at 20, 0.825 at 10; LongMemEval dev within a question either way.
pub const RECALL_RRF_K: f32 = 20.0;

/// See [`RecallConfig::segments`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentUse {
    RankTurns,
    Units,
}

/// See [`RecallConfig::lexical_turn_roles`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LexicalTurnRoles {
    DenseRoles,
    All,
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
            dense_roles: vec![Role::User],
            turn_vectors: TurnVectors::Sentences,
            sentence_min_bytes: 80,
            segmenter: SegmenterConfig::default(),
            recall: RecallConfig::default(),
            segment_vectors: SegmentVectors::Pooled,
            ingest_batch: 0,
            ann_min_chunks: 20_000,
            vector_memory_mib: 1024,
            llm: aril_llm::LlmSettings::default(),
        }
    }
}

impl Default for RecallConfig {
    fn default() -> Self {
        Self {
            candidates: 50,
            rrf_k: RECALL_RRF_K,
            w_dense_turns: 1.0,
            w_lexical_turns: 1.0,
            lexical_turn_roles: LexicalTurnRoles::DenseRoles,
            w_dense_segments: 1.0,
            w_lexical_segments: 0.0,
            w_lexical_windows: 2.0,
            w_focus: 2.0,
            w_dated: 2.0,
            focus_depth: 4,
            w_sessions: 2.0,
            session_turns: 3,
            default_k: 10,
            segments: SegmentUse::RankTurns,
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

    pub fn validate(&self) -> Result<(), EngineError> {
        self.segmenter.validate().map_err(EngineError::Config)?;
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
}
