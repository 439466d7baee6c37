//! The language-model stage. One client ([`OpenAiClient`]) for any OpenAI-compatible chat
//! endpoint (OpenAI, vLLM, llama.cpp's `llama-server`, Ollama, LM Studio), behind the
//! [`ChatModel`] seam; [`complete_json`] on top of it for structured output that is validated
//! against its JSON schema, repaired once by showing the model its error, and otherwise reported as
//! a failure — never an empty success. Every call is recorded with its purpose, model, tokens
//! (from the server's `usage`, or counted with the o200k tokenizer when it has none) and latency.
//!
//! The engine is synchronous (SQLite, tantivy, ONNX Runtime), so the client is too.

mod client;
mod config;
mod embed;
mod error;
mod local;
mod rerank;
#[cfg(feature = "scripted")]
mod scripted;
mod structured;
mod transport;
mod usage;

pub use client::{ChatModel, ChatReply, ChatRequest, Message, OpenAiClient, ResponseFormat};
pub use config::{ClientOptions, Endpoint, EndpointSettings, LlmSettings, Role};
pub use embed::OpenAiEmbedder;
pub use error::LlmError;
pub use local::LocalServer;
pub use rerank::{RerankClient, Reranker};
#[cfg(feature = "scripted")]
pub use scripted::Scripted;
pub use structured::{JsonSpec, Structured, bounded_strings, complete_json};
pub use usage::{CallRecord, Ledger, Metered, Purpose, Totals};
