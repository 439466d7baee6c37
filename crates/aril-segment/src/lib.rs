//! The LLM-free topic segmenter (BRIEF §1.1). Turns of one conversation arrive with an embedding
//! and a token count; the segmenter decides, per turn, whether the open segment ends before it.
//!
//! For turn `t` and open segment `k` (centroid `c_k`, last turn `h_k`):
//! - surprise `s_t = 1 - max(sim(e_t, c_k), sim(e_t, h_k))`
//! - cohesion drop `d_t = coh(k) - coh(k + t)`, where `coh` is the mean similarity of members to
//!   the centroid
//! - length pressures `L_t = (T_k - target) / (target - min)` on tokens and
//!   `N_t = n_k / max_exchanges` on exchanges
//! - `p_t = sigmoid(b + w_s*phi(s_t) + w_c*d_t + w_l*L_t + w_n*N_t)`, where
//!   `phi(s) = (s - center) / scale`
//!
//! The segment closes before `t` when `p_t > threshold`, when `t` starts another session, or when
//! adding `t` would pass the token cap; it closes after `t` when it reaches the exchange cap.
//! Cost: O(members x dim) per turn, no model call. The state is bounded (at most `max_exchanges`
//! member vectors) and serialisable, so a store can keep it across restarts.

mod config;
mod state;

pub use config::SegmenterConfig;
pub use state::{BoundaryFeatures, Closed, OpenSegment, Segmenter, TurnInput};
