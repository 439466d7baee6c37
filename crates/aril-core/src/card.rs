//! Cards: typed, self-contained memories an LLM writes from one closed segment, each linked to the
//! turns it came from. The LLM stage produces them; this crate only defines their shape.

use chrono::{DateTime, NaiveDate, Utc};
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

impl CardKind {
    /// Every type, in the order the encoder's schema lists them.
    pub const ALL: [CardKind; 7] = [
        CardKind::Fact,
        CardKind::Preference,
        CardKind::Event,
        CardKind::Constraint,
        CardKind::Procedure,
        CardKind::FailurePattern,
        CardKind::ToolCapability,
    ];

    /// The type as stored and as the model writes it (snake case).
    pub const fn as_str(self) -> &'static str {
        match self {
            CardKind::Fact => "fact",
            CardKind::Preference => "preference",
            CardKind::Event => "event",
            CardKind::Constraint => "constraint",
            CardKind::Procedure => "procedure",
            CardKind::FailurePattern => "failure_pattern",
            CardKind::ToolCapability => "tool_capability",
        }
    }

    /// The type named `label` ([`CardKind::as_str`]), if any.
    pub fn parse(label: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == label)
    }
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
    /// Since when its content holds (valid time): when the turns it came from were said. `None`
    /// on cards of an older aril; readers then take their source turns' time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<DateTime<Utc>>,
    /// From when it no longer holds, when a forgetting said so (`aril forget`). A card that a
    /// newer card supersedes ends where that one begins; readers derive that, it is not stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
}

/// A calendar date as a model writes it (`YYYY`, `YYYY-MM` or `YYYY-MM-DD`), as the first instant
/// it names (UTC); `None` for anything else.
pub fn parse_calendar_date(s: &str) -> Option<DateTime<Utc>> {
    let mut parts = s.trim().split('-');
    let year: i32 = parts.next()?.parse().ok()?;
    let month: u32 = parts.next().map_or(Some(1), |m| m.parse().ok())?;
    let day: u32 = parts.next().map_or(Some(1), |d| d.parse().ok())?;
    if parts.next().is_some() {
        return None;
    }
    NaiveDate::from_ymd_opt(year, month, day)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_labels_are_the_serialized_names() {
        for kind in CardKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, serde_json::Value::String(kind.as_str().into()));
            assert_eq!(CardKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(CardKind::parse("opinion"), None);
    }

    #[test]
    fn dates_of_each_granularity_parse_and_nonsense_does_not() {
        let at = |s| parse_calendar_date(s).map(|t| t.to_rfc3339());
        assert_eq!(at("2023-05-08").unwrap(), "2023-05-08T00:00:00+00:00");
        assert_eq!(at("2023-05").unwrap(), "2023-05-01T00:00:00+00:00");
        assert_eq!(at("2023").unwrap(), "2023-01-01T00:00:00+00:00");
        for bad in ["2023-13", "2023-02-30", "yesterday", "2023-05-08-01", ""] {
            assert!(parse_calendar_date(bad).is_none(), "{bad}");
        }
    }
}
