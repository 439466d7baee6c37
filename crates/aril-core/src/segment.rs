//! A segment: consecutive turns of one conversation about one topic, closed by the segmenter.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{Scope, TurnId, short_hash};

/// Stable id of a segment, derived from the turns it holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SegmentId(pub String);

impl SegmentId {
    pub fn for_turns(turns: &[TurnId]) -> Self {
        let ids: Vec<&str> = turns.iter().map(|t| t.0.as_str()).collect();
        SegmentId(format!("s_{}", short_hash(&ids)))
    }
}

impl std::fmt::Display for SegmentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a segment was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// The boundary probability of the next turn passed the threshold: the topic changed.
    TopicShift,
    /// The segment reached the hard token cap.
    MaxTokens,
    /// The segment reached the hard cap on exchanges.
    MaxExchanges,
    /// The session ended (the next turn belongs to another session of the conversation).
    SessionEnd,
    /// Closed on request (end of an import, `flush`).
    Flushed,
}

impl CloseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::TopicShift => "topic_shift",
            CloseReason::MaxTokens => "max_tokens",
            CloseReason::MaxExchanges => "max_exchanges",
            CloseReason::SessionEnd => "session_end",
            CloseReason::Flushed => "flushed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            CloseReason::TopicShift,
            CloseReason::MaxTokens,
            CloseReason::MaxExchanges,
            CloseReason::SessionEnd,
            CloseReason::Flushed,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// A closed segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub id: SegmentId,
    pub scope: Scope,
    pub conversation: String,
    /// The turns, in conversation order.
    pub turns: Vec<TurnId>,
    /// The boundary probability that closed it (1.0 for forced cuts).
    pub boundary_score: f32,
    pub reason: CloseReason,
    /// o200k tokens of the rendered turns.
    pub tokens: u32,
    pub start_time: Option<DateTime<Utc>>,
    pub end_time: Option<DateTime<Utc>>,
}
