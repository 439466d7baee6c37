//! The read path's last steps, free of any storage or model: fuse ranked lists with reciprocal-rank
//! fusion and pack the fused units into a token budget. Pure functions over ids, so they are easy
//! to test on hand-built rankings.

mod budget;
mod fusion;

pub use budget::{Packed, pack};
pub use fusion::{RRF_K, rrf, rrf_ranked};
