//! The segmenter's weights and thresholds: configuration, not constants in code.

use serde::{Deserialize, Serialize};

/// Weights of the boundary model and the length bounds. Defaults: the paper's target of 600
/// tokens and cap of 10 exchanges, a floor of 150 tokens of compared turns before a topic cut, a
/// cap of 2000 tokens; the weights were calibrated on LoCoMo conversation conv-26 only (see
/// ARCHITECTURE.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SegmenterConfig {
    /// Bias `b` of the boundary logit.
    pub bias: f32,
    /// Weight of the normalised surprise `phi(s_t)`.
    pub w_surprise: f32,
    /// Weight of the cohesion drop `d_t`.
    pub w_cohesion: f32,
    /// Weight of the token-length pressure `L_t`.
    pub w_length: f32,
    /// Weight of the exchange-count pressure `N_t`.
    pub w_count: f32,
    /// `phi(s) = (s - surprise_center) / surprise_scale`.
    pub surprise_center: f32,
    pub surprise_scale: f32,
    /// Close when `p_t` exceeds this.
    pub threshold: f32,
    /// Target segment length in o200k tokens.
    pub target_tokens: u32,
    /// No topic shift closes a segment whose turns with vectors (the ones the boundary model
    /// compares: the dense roles') hold fewer tokens than this; sessions and caps still do. Below
    /// it a "shift" is mostly a turn of another kind on the same topic, and an encoder call
    /// would read an exchange instead of a topic. Measured (docs/benchmarks-history.md): turns
    /// per segment 4.49 -> 7.16 on LoCoMo, 2.7 -> 5.75 on LongMemEval dev, recall unchanged.
    pub min_tokens: u32,
    /// Hard cap in tokens (every turn's, which is what an encoder call reads). 2000, not the
    /// paper's 900: on assistant chats a reply alone is often 300-800 tokens, and 900 closed
    /// most LongMemEval segments after one or two exchanges.
    pub max_tokens: u32,
    /// Hard cap in exchanges (turns).
    pub max_exchanges: u32,
}

impl Default for SegmenterConfig {
    fn default() -> Self {
        Self {
            bias: -1.0,
            w_surprise: 2.0,
            w_cohesion: 4.0,
            w_length: 1.5,
            w_count: 1.0,
            surprise_center: 0.45,
            surprise_scale: 0.1,
            threshold: 0.5,
            target_tokens: 600,
            min_tokens: 150,
            max_tokens: 2000,
            max_exchanges: 10,
        }
    }
}

impl SegmenterConfig {
    /// Checks the bounds make sense; the message names the field to fix.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.min_tokens < self.target_tokens && self.target_tokens < self.max_tokens) {
            return Err(format!(
                "segmenter: need min_tokens < target_tokens < max_tokens, got {} / {} / {}",
                self.min_tokens, self.target_tokens, self.max_tokens
            ));
        }
        if self.max_exchanges == 0 {
            return Err("segmenter: max_exchanges must be at least 1".into());
        }
        if self.surprise_scale <= 0.0 {
            return Err("segmenter: surprise_scale must be positive".into());
        }
        if !(0.0..1.0).contains(&self.threshold) {
            return Err("segmenter: threshold must lie in [0, 1)".into());
        }
        Ok(())
    }
}
