//! Structured output that never fails silently: the reply is asked for with the JSON schema
//! (strict), parsed, validated against the schema and then by the caller's own check (e.g. that
//! every cited turn id exists). A reply that fails — empty, cut off, not JSON, off-schema, or
//! rejected by the check — gets one repair round that shows the model its reply and the error;
//! if that fails too, the result is [`LlmError::InvalidReply`] with the reason. A reply cut off at
//! the token limit is the one exception to "show the reply": its repair round asks the original
//! question again with twice the reply budget (a cut-off reply shown back would only eat the room
//! the second answer needs).

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{ChatModel, ChatRequest, LlmError, Message, Purpose, ResponseFormat};

/// The schema a reply must follow.
#[derive(Debug, Clone, Copy)]
pub struct JsonSpec<'a> {
    /// A short identifier (`[a-zA-Z0-9_-]`), sent as the schema's name.
    pub name: &'a str,
    pub schema: &'a Value,
}

/// A validated reply.
#[derive(Debug, Clone)]
pub struct Structured<T> {
    pub value: T,
    /// Model calls it took (1, or 2 after a repair).
    pub calls: u32,
}

/// The schema of an array of at most `max_items` non-empty strings of at most `max_len`
/// characters: bounds keep a small model from repeating until `max_tokens`.
pub fn bounded_strings(max_len: usize, max_items: usize) -> Value {
    serde_json::json!({"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": max_len}, "maxItems": max_items})
}

/// Asks `model` for JSON following `spec`, validates it, and repairs once. `check` adds the
/// caller's own rules; its error message is shown to the model in the repair round.
pub fn complete_json<T: DeserializeOwned>(
    model: &dyn ChatModel,
    purpose: Purpose,
    messages: Vec<Message>,
    spec: JsonSpec<'_>,
    max_tokens: u32,
    check: impl Fn(&T) -> Result<(), String>,
) -> Result<Structured<T>, LlmError> {
    let validator = jsonschema::validator_for(spec.schema).map_err(|e| {
        LlmError::Config(format!(
            "schema {:?} is not a valid JSON schema: {e}",
            spec.name
        ))
    })?;
    let mut request = ChatRequest {
        messages,
        max_tokens,
        temperature: 0.0,
        format: ResponseFormat::JsonSchema {
            name: spec.name.to_string(),
            schema: spec.schema.clone(),
        },
    };
    let original = request.messages.clone();
    let mut calls = 0;
    loop {
        calls += 1;
        let reply = model.chat(purpose, &request)?;
        let cut_off = reply.finish_reason.as_deref() == Some("length");
        let reason = match accept(&reply.content, reply.finish_reason.as_deref(), &validator) {
            Ok(value) => match serde_json::from_value::<T>(value) {
                Ok(typed) => match check(&typed) {
                    Ok(()) => {
                        return Ok(Structured {
                            value: typed,
                            calls,
                        });
                    }
                    Err(e) => e,
                },
                Err(e) => format!("the JSON does not have the expected shape: {e}"),
            },
            Err(e) => e,
        };
        if calls >= 2 {
            return Err(LlmError::InvalidReply { reason });
        }
        tracing::warn!(%reason, "the model's reply is invalid; asking once more with the error");
        if cut_off {
            request.messages = original.clone();
            request.max_tokens = max_tokens.saturating_mul(2);
            request.messages.push(Message::user(format!(
                "Your previous reply was cut off at {max_tokens} tokens. Answer again, shorter: \
                 only one JSON object that follows the schema, nothing else."
            )));
            continue;
        }
        request.messages.push(Message::assistant(reply.content));
        request.messages.push(Message::user(format!(
            "That reply is not usable: {reason}. Answer again with only one JSON object that \
             follows the schema, nothing else."
        )));
    }
}

/// The reply's JSON value if it is complete, parseable and on-schema; else why not.
fn accept(
    content: &str,
    finish_reason: Option<&str>,
    validator: &jsonschema::Validator,
) -> Result<Value, String> {
    let text = strip_fences(content);
    if text.is_empty() {
        return Err("the reply was empty".into());
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) if finish_reason == Some("length") => {
            return Err(format!(
                "the reply was cut off at the token limit ({e}); be shorter"
            ));
        }
        Err(e) => return Err(format!("the reply is not valid JSON: {e}")),
    };
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .take(3)
        .map(|e| format!("at {}: {e}", e.instance_path))
        .collect();
    if !errors.is_empty() {
        return Err(format!(
            "the JSON does not follow the schema: {}",
            errors.join("; ")
        ));
    }
    Ok(value)
}

/// The text inside a ```json fence, if the model wrapped its reply in one.
fn strip_fences(content: &str) -> &str {
    let t = content.trim();
    t.strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .map(str::trim)
        .unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_stripped_and_plain_json_is_kept() {
        assert_eq!(strip_fences("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(strip_fences("  {\"a\":1} "), "{\"a\":1}");
        assert_eq!(strip_fences("```\n[1]\n```"), "[1]");
    }

    #[test]
    fn accept_names_what_is_wrong() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": false
        });
        let v = jsonschema::validator_for(&schema).unwrap();
        assert!(accept("{\"n\": 3}", Some("stop"), &v).is_ok());
        assert!(accept("", Some("stop"), &v).unwrap_err().contains("empty"));
        assert!(
            accept("{\"n\": ", Some("length"), &v)
                .unwrap_err()
                .contains("cut off")
        );
        assert!(
            accept("{\"n\": ", Some("stop"), &v)
                .unwrap_err()
                .contains("not valid JSON")
        );
        let off = accept("{\"n\": \"three\"}", Some("stop"), &v).unwrap_err();
        assert!(off.contains("schema") && off.contains("/n"), "{off}");
    }
}
