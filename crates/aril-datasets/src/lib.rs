//! Readers for benchmark and export formats. Each reader turns a file into [`Conversation`]s of
//! [`aril_core::NewTurn`]s, the haystack, and nothing else: gold labels (answers, evidence,
//! `has_answer`, answer session ids, question types) are not part of these types, so ingest cannot
//! read them. Only the benchmark scorer reads gold, through its own types.

mod error;
pub mod exports;
pub mod locomo;
pub mod longmemeval;
mod time;

use aril_core::{NewTurn, Scope};

pub use error::DatasetError;
pub use time::{parse_locomo_time, parse_longmemeval_time};

/// One conversation of a source file, in order, with the scope it is imported under.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub scope: Scope,
    pub id: String,
    pub turns: Vec<NewTurn>,
}

/// Reads a JSON file into `T`, naming the file, line and column of any error.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    format: &'static str,
) -> Result<T, DatasetError> {
    let file = std::fs::File::open(path).map_err(|e| DatasetError::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            DatasetError::Json {
                path: path.display().to_string(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            }
        } else {
            DatasetError::Format {
                path: path.display().to_string(),
                format,
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            }
        }
    })
}
