//! `aril bench`: measures retrieval on LongMemEval, LoCoMo and HotpotQA with every strategy of the
//! seeds side by side, on the same data, with the published metric definitions.
//!
//! The split that keeps the numbers honest:
//! - [`data`] turns a benchmark file into [`data::Case`]s: a question and its haystack, nothing
//!   else. Strategies only ever see a `Case`.
//! - [`gold`] reads the labels (answer sessions, `has_answer`, evidence, question types, supporting
//!   paragraphs). Only [`score`] uses them, after the strategy has ranked.
//!
//! Cost: each strategy embeds its units once per text (embedding cache under
//! `~/.cache/aril/bench/`), so a warm re-run only searches.

pub mod data;
pub mod gold;
pub mod metrics;
pub mod plot;
pub mod qa;
mod report;
mod run;
pub mod scale;
pub mod score;
pub mod strategy;

pub use report::{BenchReport, Cost, QaCost, QuestionRanking};
pub use run::{BenchOptions, Benchmark, CutOffs, run};

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{path}: {message}")]
    Data { path: String, message: String },
    #[error("unknown strategy {0:?}: use one of {1}")]
    UnknownStrategy(String, String),
    #[error("strategy {strategy} does not run on {benchmark}: {why}")]
    Unsupported {
        strategy: String,
        benchmark: String,
        why: String,
    },
    #[error("--audit corrects LoCoMo's answer key; {0} has no audit (leave the flag out)")]
    AuditNotLocomo(String),
    #[error("--k {k}: {why}")]
    InvalidK { k: String, why: String },
    /// A dataset reader's error already names the file, line and column.
    #[error(transparent)]
    Dataset(#[from] aril_engine::datasets::DatasetError),
    #[error(transparent)]
    Embed(#[from] aril_embed::EmbedError),
    #[error(transparent)]
    Store(#[from] aril_store::StoreError),
    #[error(transparent)]
    Index(#[from] aril_index::IndexError),
    #[error(transparent)]
    Engine(#[from] aril_engine::EngineError),
    #[error(
        "interrupted while writing cards; the cards written so far are kept: run the same command again to go on"
    )]
    Interrupted,
    #[error(
        "interrupted: the turns committed so far are kept; run the same command again to go on from them"
    )]
    BuildInterrupted,
    /// The cause is in the message and not a `source`, so a printed chain names it once.
    #[error("{what}: {cause}")]
    Io { what: String, cause: std::io::Error },
}

/// Reads a whole file, naming it in the error.
pub(crate) fn read_text(path: &std::path::Path) -> Result<String, BenchError> {
    std::fs::read_to_string(path).map_err(|e| BenchError::Io {
        what: format!("reading {}", path.display()),
        cause: e,
    })
}

/// A whole JSON file read as `T`, naming the file in the error.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
) -> Result<T, BenchError> {
    parse_json(path, &read_text(path)?)
}

/// A whole JSON document (`text`, read from `path`) as `T`, naming the file in the error.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    text: &str,
) -> Result<T, BenchError> {
    serde_json::from_str(text).map_err(|e| BenchError::data(path, e.to_string()))
}

/// The records of a JSON Lines file (`text`, read from `path`), blank lines skipped; a bad line is
/// an error naming the file and the line.
pub(crate) fn json_lines<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    text: &str,
) -> Result<Vec<T>, BenchError> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line)
                .map_err(|e| BenchError::data(path, format!("line {}: {e}", n + 1)))
        })
        .collect()
}

impl BenchError {
    pub(crate) fn data(path: &std::path::Path, message: impl Into<String>) -> Self {
        BenchError::Data {
            path: path.display().to_string(),
            message: message.into(),
        }
    }
}
