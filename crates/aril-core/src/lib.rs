//! The data model every aril stage shares: who a memory belongs to ([`Scope`]), what was said
//! ([`Turn`], the ground state, kept verbatim), how turns group into topics ([`Segment`]), and the
//! typed [`Card`]s that later stages derive from segments.
//!
//! [`cache_root`] names where fetched models and derived caches live.
//!
//! This crate knows nothing about storage, embeddings, HTTP or any LLM vendor.

pub mod bm25;
mod cache;
mod card;
mod condition;
mod error;
mod ids;
mod metadata;
mod narrowing;
mod scope;
mod segment;
pub mod tokens;
mod turn;
mod unit;
mod window;

pub use bm25::BM25_QUERY_WORDS;
pub use cache::cache_root;
pub use card::{Card, CardId, CardKind, CardTime, parse_calendar_date};
pub use condition::{Condition, Field, Lifted, Op, Subject};
pub use error::InvalidInput;
pub use ids::{content_hash, short_hash};
pub use metadata::{METADATA_MAX_BYTES, METADATA_RESERVED_KEY, Metadata};
pub use narrowing::{Narrowing, TimeSpan, contains_json};
pub use scope::{Scope, ScopeFilter};
pub use segment::{CloseReason, Segment, SegmentId};
pub use turn::{Lifecycle, NewTurn, Role, Turn, TurnId, render_line, render_turns};
pub use unit::{UnitId, UnitKind};
pub use window::{WINDOW_SPAN, WINDOW_TOKENS, window_text};
