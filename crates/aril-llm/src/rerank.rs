//! A cross-encoder behind a `/rerank` endpoint: llama.cpp's `--reranking` server, Jina and Cohere
//! (`{model, query, documents, top_n}` → `{results: [{index, relevance_score}]}`) or Hugging Face
//! TEI (`{query, texts}` → `[{index, score}]`; used when a server refuses the first shape).
//! No registry package carries cross-encoder weights, so offline there is none to call, and
//! recall says so.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::transport::Transport;
use crate::{ClientOptions, Endpoint, LlmError, LlmSettings, Role};

/// Scores how well each document answers a query.
pub trait Reranker: Send + Sync {
    fn model(&self) -> &str;
    /// One score per document, in the documents' order; higher is more relevant.
    fn rerank(&self, query: &str, documents: &[String]) -> Result<Vec<f32>, LlmError>;
}

/// A `/rerank` endpoint.
pub struct RerankClient {
    endpoint: Endpoint,
    transport: Transport,
    /// The server took TEI's request shape, not Jina/Cohere's.
    tei: AtomicBool,
}

#[derive(Deserialize)]
struct Scored {
    index: usize,
    #[serde(alias = "score")]
    relevance_score: f32,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RerankReply {
    Results { results: Vec<Scored> },
    Bare(Vec<Scored>),
}

impl RerankClient {
    /// The cross-encoder from `ARIL_LLM_RERANKER_*` or `[llm.reranker]`, if one is configured.
    pub fn from_settings(settings: &LlmSettings) -> Result<Option<Self>, LlmError> {
        let Some(endpoint) = Endpoint::from_env_and(Role::Reranker, settings)? else {
            return Ok(None);
        };
        Ok(Some(Self::new(endpoint, ClientOptions::from_env()?)?))
    }

    pub fn new(endpoint: Endpoint, options: ClientOptions) -> Result<Self, LlmError> {
        Ok(Self {
            transport: Transport::new(endpoint.api_key.clone(), options)?,
            endpoint,
            tei: AtomicBool::new(false),
        })
    }

    fn url(&self) -> String {
        format!("{}/rerank", self.endpoint.base_url)
    }

    fn body(&self, query: &str, documents: &[String]) -> Value {
        if self.tei.load(Ordering::SeqCst) {
            json!({"query": query, "texts": documents})
        } else {
            json!({"model": self.endpoint.model, "query": query, "documents": documents,
                   "top_n": documents.len()})
        }
    }
}

impl Reranker for RerankClient {
    fn model(&self) -> &str {
        &self.endpoint.model
    }

    fn rerank(&self, query: &str, documents: &[String]) -> Result<Vec<f32>, LlmError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let reply = loop {
            let reply = self
                .transport
                .post(&self.url(), &self.body(query, documents))?;
            let refused = matches!(reply.status, 400 | 422)
                && (reply.text.contains("texts") || reply.status == 422);
            if refused && !self.tei.swap(true, Ordering::SeqCst) {
                tracing::warn!(url = %self.url(), "the reranker refuses the Jina/Cohere shape; trying TEI's");
                continue;
            }
            break reply;
        };
        let parsed: RerankReply = reply.json(&self.url(), "a rerank result")?;
        let scored = match parsed {
            RerankReply::Results { results } => results,
            RerankReply::Bare(list) => list,
        };
        let mut scores = vec![None; documents.len()];
        for s in scored {
            if s.index >= documents.len() || !s.relevance_score.is_finite() {
                return Err(LlmError::InvalidReply {
                    reason: format!(
                        "the reranker scored document {} with {} (there are {})",
                        s.index,
                        s.relevance_score,
                        documents.len()
                    ),
                });
            }
            scores[s.index] = Some(s.relevance_score);
        }
        let missing = scores.iter().filter(|s| s.is_none()).count();
        if missing > 0 {
            return Err(LlmError::InvalidReply {
                reason: format!(
                    "the reranker left {missing} of {} documents unscored",
                    documents.len()
                ),
            });
        }
        Ok(scores.into_iter().flatten().collect())
    }
}
