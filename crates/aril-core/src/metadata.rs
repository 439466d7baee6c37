//! Metadata: a JSON object a client attaches to what it stores (Mem0's `metadata`), kept
//! verbatim beside the turn and returned with it. aril never reads it to rank; filters select by it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::InvalidInput;

/// The one key a client's metadata may not use: card memories show aril's own details under it.
pub const METADATA_RESERVED_KEY: &str = "aril";

/// The most a turn's metadata may take, serialised: enough for tags, ids and small records, not
/// a place for documents (which belong in the turn's text, where recall can find them).
pub const METADATA_MAX_BYTES: usize = 16 * 1024;

/// A JSON object of at most [`METADATA_MAX_BYTES`] (its keys come back sorted; values verbatim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "Value")]
pub struct Metadata(Map<String, Value>);

impl Metadata {
    /// The object's entries.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }

    /// The value under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// The metadata of several turns shown as one (a segment, a card): every key of each, a key
    /// held by more than one taking the value of the last that has it. `None` when none has any.
    pub fn merged<'a>(parts: impl IntoIterator<Item = &'a Metadata>) -> Option<Metadata> {
        let mut merged: Option<Map<String, Value>> = None;
        for part in parts {
            let map = merged.get_or_insert_with(Map::new);
            for (k, v) in &part.0 {
                map.insert(k.clone(), v.clone());
            }
        }
        merged.map(Metadata)
    }

    /// The compact JSON text the stores keep.
    pub fn to_json(&self) -> String {
        // A map of JSON values always serialises.
        serde_json::to_string(&self.0).unwrap_or_default()
    }

    /// Reads what [`Metadata::to_json`] wrote (or any client's JSON object).
    pub fn from_json(text: &str) -> Result<Self, InvalidInput> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| InvalidInput(format!("metadata is not valid JSON: {e}")))?;
        Self::try_from(value)
    }
}

impl TryFrom<Value> for Metadata {
    type Error = InvalidInput;

    fn try_from(value: Value) -> Result<Self, Self::Error> {
        let Value::Object(map) = value else {
            return Err(InvalidInput(format!(
                "metadata must be a JSON object such as {{\"source\": \"email\"}}, not {}",
                kind_of(&value)
            )));
        };
        if map.contains_key(METADATA_RESERVED_KEY) {
            return Err(InvalidInput(format!(
                "metadata key {METADATA_RESERVED_KEY:?} is reserved (a card memory shows aril's \
                 details of the card under it): use another name"
            )));
        }
        let size = serde_json::to_string(&map).map_or(usize::MAX, |text| text.len());
        if size > METADATA_MAX_BYTES {
            return Err(InvalidInput(format!(
                "metadata takes {size} bytes as JSON; the limit is {METADATA_MAX_BYTES} (keep \
                 documents in the message text)"
            )));
        }
        Ok(Self(map))
    }
}

impl From<Metadata> for Value {
    fn from(m: Metadata) -> Self {
        Value::Object(m.0)
    }
}

/// How an error names a JSON value's type.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_round_trips_with_its_keys_sorted() {
        let m = Metadata::try_from(json!({"z": 1, "a": {"b": [true, null]}})).unwrap();
        let text = m.to_json();
        assert_eq!(text, r#"{"a":{"b":[true,null]},"z":1}"#);
        assert_eq!(Metadata::from_json(&text).unwrap(), m);
    }

    #[test]
    fn merging_keeps_every_key_and_the_last_value_of_each() {
        let a = Metadata::try_from(json!({"source": "email", "a": 1})).unwrap();
        let b = Metadata::try_from(json!({"source": "chat", "b": 2})).unwrap();
        let m = Metadata::merged([&a, &b]).unwrap();
        assert_eq!(Value::from(m), json!({"source": "chat", "a": 1, "b": 2}));
        assert_eq!(Metadata::merged([]), None);
    }

    #[test]
    fn anything_but_an_object_or_too_much_is_refused() {
        let err = Metadata::try_from(json!(["a"])).unwrap_err();
        assert!(err.0.contains("not a list"), "{err}");
        let big = json!({"text": "x".repeat(METADATA_MAX_BYTES)});
        let err = Metadata::try_from(big).unwrap_err();
        assert!(err.0.contains("the limit is 16384"), "{err}");
        assert!(serde_json::from_str::<Metadata>("\"a\"").is_err());
        let err = Metadata::try_from(json!({"aril": 1})).unwrap_err();
        assert!(err.0.contains("reserved"), "{err}");
    }
}
