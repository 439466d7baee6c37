//! Recall: the read path from a question to the context an answer is written from.
//!
//! - [`Recall`] (`hybrid`) is the LLM-free recall over one memory: the question embedded, ranked
//!   lists taken through the search seam ([`aril_index::UnitSearch`]: dense and BM25 over turns,
//!   windows and segments, plus the speaker (`focus.rs`), date (`dated.rs`), counting
//!   (`counting.rs`) and age (`age.rs`) focus lists), fused,
//!   resolved to the store's current turns (newest first among equals when the question asks about
//!   the present: `present.rs`) and packed into `k` and a token budget. Its session search adds a
//!   session list of the user's turns, except for a question about the assistant's own replies
//!   (`replies.rs`).
//! - Its last steps are pure functions over ids, easy to test on hand-built rankings:
//!   reciprocal-rank fusion ([`rrf`], [`rrf_ranked`]), selection across paths with diversity
//!   ([`select_diverse`]) and packing into a budget ([`pack`]). The planned recall of the engine
//!   (`ask`) uses them too.
//!
//! [`RecallConfig`] holds every weight and depth, with its measured default.

mod age;
mod budget;
mod config;
mod counting;
mod cues;
mod dated;
mod diversity;
mod error;
mod explain;
mod focus;
mod fusion;
mod hybrid;
mod present;
mod replies;

pub use budget::{Packed, pack};
pub use config::{LexicalTurnRoles, RECALL_RRF_K, RecallConfig, SegmentUse};
pub use diversity::select_diverse;
pub use error::RecallError;
pub use explain::{Explanation, FusedUnit, PathList, PathUnit, Trace};
pub use fusion::{RRF_K, rrf, rrf_ranked};
pub use hybrid::{Candidate, Recall, SearchHit, SearchRequest, SearchResponse, SourceRef};
