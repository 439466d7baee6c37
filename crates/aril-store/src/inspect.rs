//! What the store answers for looking inside a memory (the inspector's pages, `aril stats`):
//! one scope's counts, model calls and stored turns per day, a filtered page of cards, and the
//! turns of one session. Each is one or a few indexed queries; none reads a whole memory.

use aril_core::{CardKind, Role};
use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

/// What one scope's memory holds, counted by the store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScopeSummary {
    pub turns: u64,
    pub segments: u64,
    /// Cards that hold now: none a newer card supersedes, none a forgetting ended.
    pub current_cards: u64,
    /// The scope's closed segments waiting to be written into cards, and those whose encoding
    /// failed.
    pub segments_pending: u64,
    pub segments_failed: u64,
    /// Bytes of the scope's own text: its turns and its cards (UTF-8). Vectors and indexes are
    /// not counted: the embedding cache is shared between scopes holding the same text.
    pub text_bytes: u64,
    /// When the newest turn was stored.
    pub last_write: Option<DateTime<Utc>>,
}

/// The language-model calls of one UTC day, for one purpose and model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DailyUsage {
    pub day: NaiveDate,
    pub purpose: String,
    pub model: String,
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// How many turns of one role were stored on one UTC day (a turn of an embedded role gets its
/// vectors as it is stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DailyTurns {
    pub day: NaiveDate,
    pub role: Role,
    pub turns: u64,
}

/// Which of a scope's cards a listing wants. Entity and topic match case-insensitively and
/// whole (as the structured indexes key them); the days bound the day the card's time starts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CardQuery {
    pub kind: Option<CardKind>,
    pub entity: Option<String>,
    pub topic: Option<String>,
    /// Cards whose time starts on or after this day…
    pub from: Option<NaiveDate>,
    /// …and on or before this one. A card without a time matches neither bound.
    pub to: Option<NaiveDate>,
    /// Leave out superseded cards and those a forgetting ended.
    pub current_only: bool,
}

impl CardQuery {
    /// The first instant of `from`, and the first instant after `to`, in UTC.
    pub(crate) fn bounds(&self) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
        let start = |d: NaiveDate| d.and_hms_opt(0, 0, 0).map(|t| t.and_utc());
        (
            self.from.and_then(start),
            self.to.and_then(|d| d.succ_opt()).and_then(start),
        )
    }
}
