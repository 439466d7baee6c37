//! Token accounting at the engine's edge: every model the engine is handed is wrapped in a
//! [`Metered`] that keeps each call's record, and the engine stores them (`llm_calls`) after the
//! step that made them, so `aril stats` sums every call whoever made it.

pub(crate) use aril_llm::Metered;
use aril_llm::{CallRecord, Purpose};
use aril_store::LlmCall;
use chrono::Utc;

use crate::{Engine, EngineError};

/// What a set of calls cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct CallCost {
    pub llm_calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The same calls in o200k tokens (prompt + reply), comparable across models.
    pub o200k_tokens: u64,
}

impl CallCost {
    /// The cost of these calls.
    pub fn of(records: &[CallRecord]) -> Self {
        Self {
            llm_calls: records.len() as u64,
            prompt_tokens: records.iter().map(|r| r.prompt_tokens).sum(),
            completion_tokens: records.iter().map(|r| r.completion_tokens).sum(),
            o200k_tokens: records
                .iter()
                .map(|r| r.prompt_o200k + r.completion_o200k)
                .sum(),
        }
    }

    pub fn add(&mut self, other: CallCost) {
        self.llm_calls += other.llm_calls;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.o200k_tokens += other.o200k_tokens;
    }
}

fn purpose_name(p: Purpose) -> String {
    match serde_json::to_value(p) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{p:?}").to_lowercase(),
    }
}

impl Engine {
    /// Stores the calls `model` made since the last take, and returns what they cost.
    pub(crate) fn store_calls(&mut self, model: &Metered<'_>) -> Result<CallCost, EngineError> {
        self.store_records(model.take())
    }

    /// Stores call records, and returns what they cost.
    pub(crate) fn store_records(
        &mut self,
        records: Vec<CallRecord>,
    ) -> Result<CallCost, EngineError> {
        if records.is_empty() {
            return Ok(CallCost::default());
        }
        let at = Utc::now();
        let calls: Vec<LlmCall> = records
            .iter()
            .map(|r| LlmCall {
                at,
                purpose: purpose_name(r.purpose),
                model: r.model.clone(),
                prompt_tokens: r.prompt_tokens,
                completion_tokens: r.completion_tokens,
                counted_locally: r.counted_locally,
                prompt_o200k: r.prompt_o200k,
                completion_o200k: r.completion_o200k,
                latency_ms: r.latency_ms,
                attempts: r.attempts,
            })
            .collect();
        self.store.record_llm_calls(&calls)?;
        Ok(CallCost::of(&records))
    }

    /// Every model call recorded in this data directory, summed by purpose and model.
    pub fn llm_usage(&self) -> Result<Vec<aril_store::LlmUsage>, EngineError> {
        Ok(self.store.llm_usage()?)
    }
}
