//! Where each role's model is: base URL, model name and key, from the environment
//! (`ARIL_LLM_<ROLE>_BASE_URL`, falling back to `ARIL_LLM_BASE_URL`; the same for `_MODEL` and
//! `_API_KEY`) and from the configuration file's `[llm]` table, and how patiently to talk to it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::LlmError;

/// What a model is used for; each role may point at a different endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Writes cards from closed segments.
    Encoder,
    /// Plans retrieval paths for a question.
    Planner,
    /// Answers from the recalled context.
    Answerer,
    /// Grades answers in benchmarks.
    Judge,
    /// A cross-encoder behind `/rerank`; configured on its own (`ARIL_LLM_RERANKER_*` only: a chat
    /// endpoint is no reranker).
    Reranker,
    /// An `/embeddings` endpoint used instead of the local model; configured on its own too.
    Embedder,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Encoder => "encoder",
            Role::Planner => "planner",
            Role::Answerer => "answerer",
            Role::Judge => "judge",
            Role::Reranker => "reranker",
            Role::Embedder => "embedder",
        }
    }
}

/// One role's endpoint in the configuration file. The key is never written in the file: name the
/// environment variable that holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EndpointSettings {
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
}

/// The configuration file's `[llm]` table: settings shared by every role (but the reranker) and a
/// table per role. Per field, the most specific source wins: `ARIL_LLM_<ROLE>_*`, then
/// `[llm.<role>]`, then `ARIL_LLM_*`, then `[llm]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmSettings {
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub encoder: EndpointSettings,
    pub planner: EndpointSettings,
    pub answerer: EndpointSettings,
    pub judge: EndpointSettings,
    pub reranker: EndpointSettings,
    pub embedder: EndpointSettings,
}

impl LlmSettings {
    fn role(&self, role: Role) -> &EndpointSettings {
        match role {
            Role::Encoder => &self.encoder,
            Role::Planner => &self.planner,
            Role::Answerer => &self.answerer,
            Role::Judge => &self.judge,
            Role::Reranker => &self.reranker,
            Role::Embedder => &self.embedder,
        }
    }

    /// The file's value for an `ARIL_LLM_*` variable name, if it sets one (keys through the
    /// variable `api_key_env` names, read with `env`).
    fn lookup(&self, name: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        let rest = name.strip_prefix("ARIL_LLM_")?;
        let roles = [
            Role::Encoder,
            Role::Planner,
            Role::Answerer,
            Role::Judge,
            Role::Reranker,
            Role::Embedder,
        ];
        let (base_url, model, key_env) = match roles
            .iter()
            .find(|r| rest.starts_with(&format!("{}_", r.as_str().to_ascii_uppercase())))
        {
            Some(r) => {
                let s = self.role(*r);
                (&s.base_url, &s.model, &s.api_key_env)
            }
            None => (&self.base_url, &self.model, &self.api_key_env),
        };
        let field = rest.rsplit_once('_').map(|(_, f)| f).unwrap_or(rest);
        match field {
            "URL" => base_url.clone(),
            "MODEL" => model.clone(),
            "KEY" => key_env.as_deref().and_then(env),
            _ => None,
        }
    }
}

/// One OpenAI-compatible endpoint and model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Up to and including the API version, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
}

impl Endpoint {
    /// The endpoint of a role from the environment; `Ok(None)` when no base URL is set at all.
    pub fn from_env(role: Role) -> Result<Option<Self>, LlmError> {
        Self::from_lookup(role, |k| std::env::var(k).ok())
    }

    /// The endpoint of a role from the environment and the configuration file's `[llm]` table
    /// (the environment wins at the same specificity; see [`LlmSettings`]).
    pub fn from_env_and(role: Role, settings: &LlmSettings) -> Result<Option<Self>, LlmError> {
        Self::from_sources(role, &|k| std::env::var(k).ok(), settings)
    }

    /// As [`Endpoint::from_env_and`], over any variable lookup.
    pub fn from_sources(
        role: Role,
        env: &dyn Fn(&str) -> Option<String>,
        settings: &LlmSettings,
    ) -> Result<Option<Self>, LlmError> {
        Self::from_lookup(role, |k| env(k).or_else(|| settings.lookup(k, env)))
    }

    /// As [`Endpoint::from_env`], over any variable lookup (testable without touching the
    /// process environment).
    pub fn from_lookup(
        role: Role,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, LlmError> {
        let get = |field: &str| {
            var(&format!(
                "ARIL_LLM_{}_{field}",
                role.as_str().to_ascii_uppercase()
            ))
            .or_else(|| {
                (!matches!(role, Role::Reranker | Role::Embedder))
                    .then(|| var(&format!("ARIL_LLM_{field}")))
                    .flatten()
            })
            .filter(|v| !v.trim().is_empty())
        };
        let Some(base_url) = get("BASE_URL") else {
            return Ok(None);
        };
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(LlmError::Config(format!(
                "base URL {base_url:?} for the {} must start with http:// or https://",
                role.as_str()
            )));
        }
        let model = get("MODEL").ok_or_else(|| {
            let upper = role.as_str().to_ascii_uppercase();
            LlmError::Config(if matches!(role, Role::Reranker | Role::Embedder) {
                format!("ARIL_LLM_{upper}_BASE_URL is set but no model: set ARIL_LLM_{upper}_MODEL")
            } else {
                format!(
                    "a base URL is set for the {} but no model: set ARIL_LLM_MODEL (or \
                     ARIL_LLM_{upper}_MODEL)",
                    role.as_str()
                )
            })
        })?;
        Ok(Some(Self {
            base_url: base_url.trim_end_matches('/').to_string(),
            model,
            api_key: get("API_KEY"),
        }))
    }
}

/// How patiently the client talks to an endpoint.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// For one HTTP exchange, connection to last byte.
    pub timeout: Duration,
    /// Further attempts after a timeout, a 429 or a 5xx.
    pub max_retries: u32,
    /// The first wait before a retry; doubled each time, unless the server sends `Retry-After`.
    pub backoff: Duration,
    /// No wait is longer than this, whatever `Retry-After` asks.
    pub max_wait: Duration,
    /// Requests one client lets be in flight at once; more callers wait their turn.
    pub max_concurrency: usize,
}

impl ClientOptions {
    /// The defaults with `ARIL_LLM_TIMEOUT_S` and `ARIL_LLM_MAX_CONCURRENCY` applied.
    pub fn from_env() -> Result<Self, LlmError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`ClientOptions::from_env`], over any variable lookup.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Self, LlmError> {
        let mut options = Self::default();
        if let Some(v) = var("ARIL_LLM_TIMEOUT_S") {
            let secs: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|s: &f64| *s > 0.0 && s.is_finite())
                .ok_or_else(|| {
                    LlmError::Config(format!(
                        "ARIL_LLM_TIMEOUT_S={v:?}: give a positive number of seconds"
                    ))
                })?;
            options.timeout = Duration::from_secs_f64(secs);
        }
        if let Some(v) = var("ARIL_LLM_MAX_CONCURRENCY") {
            options.max_concurrency = v
                .trim()
                .parse()
                .ok()
                .filter(|n: &usize| *n >= 1)
                .ok_or_else(|| {
                    LlmError::Config(format!(
                        "ARIL_LLM_MAX_CONCURRENCY={v:?}: give a whole number of at least 1"
                    ))
                })?;
        }
        Ok(options)
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(120),
            max_retries: 4,
            backoff: Duration::from_millis(500),
            max_wait: Duration::from_secs(60),
            max_concurrency: 4,
        }
    }
}
