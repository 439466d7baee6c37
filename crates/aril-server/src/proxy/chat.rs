//! The OpenAI chat-completions wire format, as far as the proxy reads and changes it: the last
//! user message of a request, the memory added to its system prompt, and the reply's text in a
//! whole response or in a stream of server-sent events. Every other field passes through as sent.

use serde_json::{Value, json};

/// The last user message of a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Asked {
    pub text: String,
    /// True when it is the request's last message: a new turn of the user. Messages after it
    /// (a tool call and its result) mean an earlier request already carried it.
    pub is_new: bool,
}

/// A message's text: a string content, or the text parts of a content array (images, audio and
/// files are not text and are left out). `None` when it has no text.
pub(crate) fn message_text(message: &Value) -> Option<String> {
    let text = match message.get("content")? {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

fn role(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

/// The last message with the role `user` that has text.
pub(crate) fn last_user(messages: &[Value]) -> Option<Asked> {
    let (i, text) = messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| role(m) == Some("user"))
        .find_map(|(i, m)| message_text(m).map(|t| (i, t)))?;
    Some(Asked {
        text,
        is_new: i + 1 == messages.len(),
    })
}

/// Adds `block` to the system prompt: after the text of a leading `system` (or `developer`)
/// message, else as a new system message in front.
pub(crate) fn inject(messages: &mut Vec<Value>, block: &str) {
    if let Some(first) = messages.first_mut()
        && matches!(role(first), Some("system" | "developer"))
    {
        match first.get_mut("content") {
            Some(Value::String(s)) => {
                s.push_str("\n\n");
                s.push_str(block);
                return;
            }
            Some(Value::Array(parts)) => {
                parts.push(json!({"type": "text", "text": block}));
                return;
            }
            _ => {}
        }
    }
    messages.insert(0, json!({"role": "system", "content": block}));
}

/// The text of a whole (non-streamed) reply: the first choice's message content.
pub(crate) fn reply_text(reply: &Value) -> Option<String> {
    let content = reply.pointer("/choices/0/message/content")?.as_str()?;
    (!content.trim().is_empty()).then(|| content.to_string())
}

/// The reply's text put together from a stream of server-sent events as its bytes pass through
/// (split anywhere: a line may span chunks).
#[derive(Debug, Default)]
pub(crate) struct StreamedReply {
    /// The bytes of a line not yet ended.
    partial: Vec<u8>,
    text: String,
}

impl StreamedReply {
    /// Reads the next bytes of the stream; true when they end it (`data: [DONE]`).
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        self.partial.extend_from_slice(bytes);
        let mut ended = false;
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim_end().strip_prefix("data:") else {
                continue;
            };
            let data = data.trim_start();
            if data == "[DONE]" {
                ended = true;
            } else if let Ok(event) = serde_json::from_str::<Value>(data)
                && let Some(delta) = event
                    .pointer("/choices/0/delta/content")
                    .and_then(Value::as_str)
            {
                self.text.push_str(delta);
            }
        }
        ended
    }

    /// The reply's text so far (`None` when it has none: a reply of tool calls only).
    pub fn text(&self) -> Option<String> {
        (!self.text.trim().is_empty()).then(|| self.text.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_user_message_is_new_only_when_it_ends_the_request() {
        let asked = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "first"}),
            json!({"role": "assistant", "content": "ok"}),
            json!({"role": "user", "content": [{"type": "text", "text": "second"},
                                                {"type": "image_url", "image_url": {"url": "x"}}]}),
        ];
        let last = last_user(&asked).unwrap();
        assert_eq!(last.text, "second");
        assert!(last.is_new);
        let mut after_tool = asked.clone();
        after_tool.push(json!({"role": "tool", "tool_call_id": "1", "content": "42"}));
        assert!(!last_user(&after_tool).unwrap().is_new);
        assert_eq!(last_user(&asked[..1]), None);
    }

    #[test]
    fn memory_joins_the_system_prompt_or_leads_as_one() {
        let mut with_system = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "hi"}),
        ];
        inject(&mut with_system, "MEMORY");
        assert_eq!(with_system.len(), 2);
        assert_eq!(with_system[0]["content"], "Be brief.\n\nMEMORY");
        let mut parts =
            vec![json!({"role": "developer", "content": [{"type": "text", "text": "A"}]})];
        inject(&mut parts, "MEMORY");
        assert_eq!(parts[0]["content"][1]["text"], "MEMORY");
        let mut bare = vec![json!({"role": "user", "content": "hi"})];
        inject(&mut bare, "MEMORY");
        assert_eq!(bare[0], json!({"role": "system", "content": "MEMORY"}));
        assert_eq!(bare[1]["role"], "user");
    }

    #[test]
    fn a_stream_split_mid_line_gives_the_whole_reply() {
        let events = concat!(
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\r\n\r\n",
            ": a comment\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"lo, Ana\"}}]}\n\n",
            "data: [DONE]\n\n"
        )
        .as_bytes();
        for split in [1, 7, 40, events.len()] {
            let mut reply = StreamedReply::default();
            let ends: Vec<bool> = events.chunks(split).map(|c| reply.feed(c)).collect();
            assert_eq!(reply.text().as_deref(), Some("Hello, Ana"), "split {split}");
            assert_eq!(ends.iter().filter(|e| **e).count(), 1, "split {split}");
        }
        let mut cut = StreamedReply::default();
        assert!(!cut.feed(&events[..events.len() - 4]));
    }

    #[test]
    fn a_reply_of_tool_calls_has_no_text() {
        let tools = json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "1"}]}}]});
        assert_eq!(reply_text(&tools), None);
        let said = json!({"choices": [{"message": {"role": "assistant", "content": "Hi"}}]});
        assert_eq!(reply_text(&said).as_deref(), Some("Hi"));
    }
}
