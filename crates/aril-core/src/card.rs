//! Cards: typed, self-contained memories an LLM writes from one closed segment, each linked to the
//! turns it came from. The LLM stage produces them; this crate only defines their shape.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{Scope, SegmentId, TurnId};

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CardId(pub String);

/// The closed list of card types (BRIEF §1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardKind {
    Fact,
    Preference,
    Event,
    Constraint,
    Procedure,
    FailurePattern,
    ToolCapability,
}

/// When a card's content holds or happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardTime {
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
    /// "day", "month", "year"...
    pub granularity: String,
}

/// A memory card. Appended, never edited: an update is a new card that names what it supersedes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    pub id: CardId,
    pub scope: Scope,
    pub kind: CardKind,
    pub text: String,
    pub entities: Vec<String>,
    pub topics: Vec<String>,
    pub time: Option<CardTime>,
    /// The turns the card was written from; each exists in `segment`.
    pub source_turns: Vec<TurnId>,
    /// The segment (event frame) the card came from.
    pub segment: SegmentId,
    pub supersedes: Vec<CardId>,
}
