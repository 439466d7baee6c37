//! The chat seam and its OpenAI-compatible implementation: `POST {base}/chat/completions`, with
//! retries on timeouts, 429 and 5xx (honouring `Retry-After`), and a downgrade of the response
//! format for servers that do not support `json_schema` (then `json_object`, then plain text with
//! the schema in the prompt), remembered for later calls.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use aril_core::tokens;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::transport::{HttpReply, Transport, truncate};
use crate::{CallRecord, ClientOptions, Endpoint, Ledger, LlmError, LlmSettings, Purpose, Role};

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: "system".into(),
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: "user".into(),
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: "assistant".into(),
            content: content.into(),
        }
    }
}

/// The shape a reply must take.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON following this schema (`strict`).
    JsonSchema {
        name: String,
        schema: Value,
    },
}

/// One chat completion request.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub max_tokens: u32,
    pub temperature: f32,
    pub format: ResponseFormat,
}

/// A reply with what it cost.
#[derive(Debug, Clone)]
pub struct ChatReply {
    /// The message text (empty when the server sent none).
    pub content: String,
    /// `stop`, `length` (cut off at `max_tokens`), …
    pub finish_reason: Option<String>,
    pub record: CallRecord,
}

/// A chat model. Implementations: [`OpenAiClient`].
pub trait ChatModel: Send + Sync {
    /// The model's name, as accounted.
    fn model(&self) -> &str;
    /// One completion (with the implementation's own retries).
    fn chat(&self, purpose: Purpose, request: &ChatRequest) -> Result<ChatReply, LlmError>;
}

/// Response formats from the most to the least constrained, as the server accepts them.
const JSON_SCHEMA: u8 = 0;
const JSON_OBJECT: u8 = 1;
const TEXT_ONLY: u8 = 2;

/// A client for one OpenAI-compatible endpoint and model.
pub struct OpenAiClient {
    endpoint: Endpoint,
    transport: Transport,
    ledger: Ledger,
    /// The most constrained response format the server has not refused.
    format_support: AtomicU8,
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<ReplyMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ReplyMessage {
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

impl OpenAiClient {
    /// The client of a role from the `ARIL_LLM_*` environment and the configuration's `[llm]`
    /// table (see [`Endpoint::from_env_and`]), or `None` when no endpoint is configured for it.
    pub fn for_role(role: Role, settings: &LlmSettings) -> Result<Option<Self>, LlmError> {
        let Some(endpoint) = Endpoint::from_env_and(role, settings)? else {
            return Ok(None);
        };
        Ok(Some(Self::new(
            endpoint,
            ClientOptions::from_env()?,
            Ledger::default(),
        )?))
    }

    /// As [`OpenAiClient::for_role`] for a role the caller cannot do without:
    /// [`LlmError::NotConfigured`] says what to set.
    pub fn required(role: Role, settings: &LlmSettings) -> Result<Self, LlmError> {
        Self::for_role(role, settings)?.ok_or(LlmError::NotConfigured(role))
    }

    pub fn new(
        endpoint: Endpoint,
        options: ClientOptions,
        ledger: Ledger,
    ) -> Result<Self, LlmError> {
        Ok(Self {
            transport: Transport::new(endpoint.api_key.clone(), options)?,
            endpoint,
            ledger,
            format_support: AtomicU8::new(JSON_SCHEMA),
        })
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.endpoint.base_url)
    }

    /// The request body, with the response format downgraded to what the server supports.
    fn body(&self, request: &ChatRequest, support: u8) -> Value {
        let mut messages = request.messages.clone();
        if let (ResponseFormat::JsonSchema { schema, .. }, JSON_OBJECT | TEXT_ONLY) =
            (&request.format, support)
        {
            // The server cannot enforce the schema: the prompt carries it instead.
            messages.insert(
                0,
                Message::system(format!(
                    "Reply with only one JSON object that follows this JSON schema:\n{schema}"
                )),
            );
        }
        let mut body = json!({
            "model": self.endpoint.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        });
        let format = match (&request.format, support) {
            (ResponseFormat::Text, _) | (_, TEXT_ONLY) => None,
            (ResponseFormat::JsonSchema { name, schema }, JSON_SCHEMA) => Some(json!({
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": true}
            })),
            (ResponseFormat::JsonSchema { .. } | ResponseFormat::JsonObject, _) => {
                Some(json!({"type": "json_object"}))
            }
        };
        if let Some(f) = format {
            body["response_format"] = f;
        }
        body
    }
}

/// A call's prompt (its messages) and reply in o200k tokens.
pub(crate) fn o200k_counts(request: &ChatRequest, reply: &str) -> (u64, u64) {
    let prompt = request
        .messages
        .iter()
        .map(|m| tokens::count(&m.content) as u64)
        .sum();
    (prompt, tokens::count(reply) as u64)
}

/// A 400 that names the response format: the server does not support the one asked.
fn refuses_format(status: u16, body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    status == 400
        && (body.contains("response_format")
            || body.contains("json_schema")
            || body.contains("json_object"))
}

impl ChatModel for OpenAiClient {
    fn model(&self) -> &str {
        &self.endpoint.model
    }

    fn chat(&self, purpose: Purpose, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        let started = Instant::now();
        let mut total_attempts = 0;
        loop {
            let support = self.format_support.load(Ordering::SeqCst);
            let HttpReply {
                status,
                text,
                attempts,
            } = self
                .transport
                .post(&self.url(), &self.body(request, support))?;
            total_attempts += attempts;
            if status != 200 {
                if refuses_format(status, &text)
                    && request.format != ResponseFormat::Text
                    && support < TEXT_ONLY
                {
                    tracing::warn!(
                        model = %self.endpoint.model,
                        "the server refuses this response format; asking with a looser one"
                    );
                    self.format_support.store(support + 1, Ordering::SeqCst);
                    continue;
                }
                return Err(LlmError::Status {
                    url: self.url(),
                    status,
                    body: truncate(&text),
                    attempts: total_attempts,
                });
            }
            let completion: Completion =
                serde_json::from_str(&text).map_err(|e| LlmError::InvalidReply {
                    reason: format!(
                        "the server's reply is not a chat completion ({e}): {}",
                        truncate(&text)
                    ),
                })?;
            let choice = completion.choices.into_iter().next();
            let finish_reason = choice.as_ref().and_then(|c| c.finish_reason.clone());
            let content = choice
                .and_then(|c| c.message)
                .and_then(|m| m.content)
                .unwrap_or_default();
            let usage = completion
                .usage
                .and_then(|u| Some((u.prompt_tokens?, u.completion_tokens?)));
            let (prompt_o200k, completion_o200k) = o200k_counts(request, &content);
            let (prompt_tokens, completion_tokens, counted_locally) = match usage {
                Some((p, c)) => (p, c, false),
                None => (prompt_o200k, completion_o200k, true),
            };
            let record = CallRecord {
                purpose,
                model: self.endpoint.model.clone(),
                prompt_tokens,
                completion_tokens,
                counted_locally,
                prompt_o200k,
                completion_o200k,
                latency_ms: started.elapsed().as_millis() as u64,
                attempts: total_attempts,
            };
            self.ledger.record(record.clone());
            return Ok(ChatReply {
                content,
                finish_reason,
                record,
            });
        }
    }
}
