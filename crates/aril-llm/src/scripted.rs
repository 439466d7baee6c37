//! A [`ChatModel`] that plays a script of replies, for tests of the stages above this crate:
//! fault injection at the model seam (a reply that cites a turn outside the segment, a window that
//! ends before it starts), never a stand-in for the real model, which the tests run too.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::{CallRecord, ChatModel, ChatReply, ChatRequest, LlmError, Purpose};

/// Replies from a script, in order (an empty reply once it runs out); records what it was asked.
pub struct Scripted {
    replies: Mutex<VecDeque<String>>,
    asked: Mutex<Vec<ChatRequest>>,
}

impl Scripted {
    pub fn new(replies: Vec<serde_json::Value>) -> Self {
        Self::from_texts(replies.into_iter().map(|r| r.to_string()).collect())
    }

    /// Replies given as raw text (prose, cut-off JSON…).
    pub fn from_texts(replies: Vec<String>) -> Self {
        Self {
            replies: Mutex::new(replies.into()),
            asked: Mutex::new(Vec::new()),
        }
    }

    /// Every request received, in order.
    pub fn asked(&self) -> Vec<ChatRequest> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl ChatModel for Scripted {
    fn model(&self) -> &str {
        "scripted"
    }

    fn chat(&self, purpose: Purpose, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(request.clone());
        }
        let content = self
            .replies
            .lock()
            .ok()
            .and_then(|mut r| r.pop_front())
            .unwrap_or_default();
        let (prompt_o200k, completion_o200k) = crate::client::o200k_counts(request, &content);
        Ok(ChatReply {
            content,
            finish_reason: Some("stop".into()),
            record: CallRecord {
                purpose,
                model: "scripted".into(),
                prompt_tokens: 1,
                completion_tokens: 1,
                counted_locally: false,
                prompt_o200k,
                completion_o200k,
                latency_ms: 0,
                attempts: 1,
            },
        })
    }
}
