//! The read path's last steps, free of any storage or model: fuse ranked lists with reciprocal-rank
//! fusion, select across paths with diversity, and pack the chosen units into a token budget. Pure
//! functions over ids, so they are easy to test on hand-built rankings.

mod budget;
mod diversity;
mod fusion;

pub use budget::{Packed, pack};
pub use diversity::select_diverse;
pub use fusion::{RRF_K, rrf, rrf_ranked};
