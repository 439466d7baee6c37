//! The JSON schema of the planner's reply: bounded strings and arrays, dates as `YYYY-MM-DD`.

use aril_llm::bounded_strings;
use serde::Deserialize;
use serde_json::{Value, json};

/// A calendar day.
pub(crate) const DAY_PATTERN: &str = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$";

#[derive(Debug, Deserialize)]
pub(crate) struct Reply {
    pub paths: Vec<PathOut>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct PathOut {
    pub goal: String,
    pub query: String,
    pub entities: Vec<String>,
    pub topics: Vec<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub units: Vec<String>,
}

/// The schema for at most `max_paths` paths.
pub(crate) fn reply_schema(max_paths: usize) -> Value {
    let day = json!({"anyOf": [{"type": "null"}, {"type": "string", "pattern": DAY_PATTERN}]});
    json!({
        "type": "object",
        "properties": {
            "paths": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_paths,
                "items": {
                    "type": "object",
                    "properties": {
                        "goal": {"type": "string", "minLength": 1, "maxLength": 120},
                        "query": {"type": "string", "minLength": 1, "maxLength": 160},
                        "entities": bounded_strings(40, 4),
                        "topics": bounded_strings(30, 3),
                        "from": day,
                        "to": day,
                        "units": {
                            "type": "array",
                            "items": {"enum": ["cards", "turns"]},
                            "minItems": 1,
                            "maxItems": 2
                        }
                    },
                    "required": ["goal", "query", "entities", "topics", "from", "to", "units"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["paths"],
        "additionalProperties": false
    })
}
