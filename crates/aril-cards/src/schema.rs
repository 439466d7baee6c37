//! The JSON schema of the encoder's reply, built per segment: turn and card labels are enumerated,
//! strings and arrays are bounded (a small model without bounds repeats until `max_tokens`).

use aril_llm::bounded_strings;
use serde::Deserialize;
use serde_json::{Value, json};

/// Card types as the model writes them ([`aril_core::CardKind::as_str`]).
pub(crate) const KINDS: [&str; 7] = {
    let all = aril_core::CardKind::ALL;
    let mut labels = [""; 7];
    let mut i = 0;
    while i < all.len() {
        labels[i] = all[i].as_str();
        i += 1;
    }
    labels
};

/// `YYYY`, `YYYY-MM` or `YYYY-MM-DD`.
pub(crate) const DATE_PATTERN: &str = "^[0-9]{4}(-[0-9]{2}(-[0-9]{2})?)?$";

/// The reply as parsed (labels not yet mapped back to ids).
#[derive(Debug, Deserialize)]
pub(crate) struct Reply {
    pub cards: Vec<CardOut>,
    pub state: StateOut,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CardOut {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
    pub entities: Vec<String>,
    pub topics: Vec<String>,
    pub time: Option<TimeOut>,
    pub source_turns: Vec<String>,
    pub supersedes: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct TimeOut {
    pub start: String,
    pub end: Option<String>,
    pub granularity: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StateOut {
    pub aliases: Vec<AliasOut>,
    pub open_references: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct AliasOut {
    pub alias: String,
    pub name: String,
}

/// Labels `P1…Pn`.
pub(crate) fn labels(prefix: char, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}{i}")).collect()
}

/// The schema for a segment of `turns` turns with `recent` recent cards, at most `max_cards` cards.
pub(crate) fn reply_schema(turns: usize, recent: usize, max_cards: usize) -> Value {
    let turn_labels = labels('T', turns);
    let supersedes = if recent == 0 {
        json!({"type": "array", "items": {"type": "string"}, "maxItems": 0})
    } else {
        json!({"type": "array", "items": {"enum": labels('C', recent)}, "maxItems": recent.min(4)})
    };
    let date = json!({"type": "string", "pattern": DATE_PATTERN});
    json!({
        "type": "object",
        "properties": {
            "cards": {
                "type": "array",
                "maxItems": max_cards,
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"enum": KINDS},
                        "text": {"type": "string", "minLength": 1, "maxLength": 240},
                        "entities": bounded_strings(40, 6),
                        "topics": bounded_strings(30, 4),
                        "time": {"anyOf": [
                            {"type": "null"},
                            {
                                "type": "object",
                                "properties": {
                                    "start": date,
                                    "end": {"anyOf": [{"type": "null"}, date]},
                                    "granularity": {"enum": ["day", "month", "year"]}
                                },
                                "required": ["start", "end", "granularity"],
                                "additionalProperties": false
                            }
                        ]},
                        "source_turns": {
                            "type": "array",
                            "items": {"enum": turn_labels},
                            "minItems": 1,
                            "maxItems": turns.clamp(1, 8)
                        },
                        "supersedes": supersedes
                    },
                    "required": ["type", "text", "entities", "topics", "time", "source_turns", "supersedes"],
                    "additionalProperties": false
                }
            },
            "state": {
                "type": "object",
                "properties": {
                    "aliases": {
                        "type": "array",
                        "maxItems": 6,
                        "items": {
                            "type": "object",
                            "properties": {
                                "alias": {"type": "string", "minLength": 1, "maxLength": 30},
                                "name": {"type": "string", "minLength": 1, "maxLength": 40}
                            },
                            "required": ["alias", "name"],
                            "additionalProperties": false
                        }
                    },
                    "open_references": bounded_strings(60, 3)
                },
                "required": ["aliases", "open_references"],
                "additionalProperties": false
            }
        },
        "required": ["cards", "state"],
        "additionalProperties": false
    })
}
