//! The write path's LLM step (seed 000, BRIEF §1.2): when a segment closes, one call turns it into
//! typed, self-contained cards — each with entities, topics, an absolute time when it has one, the
//! turns it came from and the earlier cards it supersedes — and updates the disambiguation state
//! (aliases → canonical names, open references) that the next segment's call reads.
//!
//! The model sees turns and recent cards under short labels (`T1…`, `C1…`) that the reply's schema
//! enumerates, so a server that enforces the schema cannot cite a turn outside the segment, and the
//! check refuses it from one that does not. State and the recent-card digest are cut to fixed token
//! budgets, so the prompt does not grow with history.

mod encode;
mod guidance;
mod prompt;
mod schema;
mod state;

pub use encode::{EncodeConfig, Encoded, RecentCard, encode_segment};
pub use guidance::{Category, Guidance, MAX_CATEGORIES, MAX_GUIDANCE_CHARS};
pub use state::EncoderState;
