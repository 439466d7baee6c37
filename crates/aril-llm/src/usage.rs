//! Token accounting: one record per model call, kept in a shared ledger that `aril stats` and
//! `aril bench` sum by purpose.

use std::sync::{Arc, Mutex};

use crate::{ChatModel, ChatReply, ChatRequest, LlmError};

use serde::Serialize;

/// Why a call was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    Encode,
    Plan,
    Answer,
    Judge,
}

/// One model call as it was paid for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallRecord {
    pub purpose: Purpose,
    pub model: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// True when the server sent no `usage` and the tokens were counted here (o200k).
    pub counted_locally: bool,
    /// The prompt's tokens under the o200k tokenizer, whatever the model's own tokenizer: runs
    /// with different models compare on these.
    pub prompt_o200k: u64,
    /// The reply's tokens under the o200k tokenizer.
    pub completion_o200k: u64,
    pub latency_ms: u64,
    /// HTTP attempts it took (1 without retries).
    pub attempts: u32,
}

/// Sums over a ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Every call made through the clients that share it.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    calls: Arc<Mutex<Vec<CallRecord>>>,
}

impl Ledger {
    pub fn record(&self, call: CallRecord) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(call);
        }
    }

    /// A copy of every record, oldest first.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Totals for one purpose, or all of them.
    pub fn totals(&self, purpose: Option<Purpose>) -> Totals {
        self.calls()
            .iter()
            .filter(|c| purpose.is_none_or(|p| c.purpose == p))
            .fold(Totals::default(), |t, c| Totals {
                calls: t.calls + 1,
                prompt_tokens: t.prompt_tokens + c.prompt_tokens,
                completion_tokens: t.completion_tokens + c.completion_tokens,
            })
    }
}

/// A model that records the calls it passes on.
pub struct Metered<'a> {
    inner: &'a dyn ChatModel,
    records: Mutex<Vec<CallRecord>>,
}

impl<'a> Metered<'a> {
    pub fn new(inner: &'a dyn ChatModel) -> Self {
        Self {
            inner,
            records: Mutex::new(Vec::new()),
        }
    }

    /// The records kept since the last take.
    pub fn take(&self) -> Vec<CallRecord> {
        self.records
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }
}

impl ChatModel for Metered<'_> {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn chat(&self, purpose: Purpose, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        let reply = self.inner.chat(purpose, request)?;
        if let Ok(mut records) = self.records.lock() {
            records.push(reply.record.clone());
        }
        Ok(reply)
    }
}
