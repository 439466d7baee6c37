//! `aril proxy`: an OpenAI-compatible chat endpoint in front of any OpenAI-compatible model, so
//! that an OpenAI SDK gets memory by changing its base URL. For each chat completion it recalls
//! memory for the last user message (the offline recall of `aril ask`: no LLM call; turns the
//! request's messages already say are left out), adds it to the system prompt within a token
//! budget, forwards the request, passes the reply through (chunk
//! by chunk when streamed) and stores the exchange — the new user message and the reply — as turns
//! of the caller's scope. The ids of what it added come back in [`MEMORY_IDS`].
//!
//! What it deliberately does not do: change any other field of the request or the reply; store
//! anything when the upstream fails (its error passes through unchanged) or when the caller leaves
//! a stream before its end; remember what is not text (images and tool calls are forwarded, not
//! stored); plan the recall with an LLM (one more call per message).

mod chat;
mod upstream;

use std::sync::Arc;

use aril_core::{Scope, ScopeFilter, tokens};
use aril_engine::{AskRequest, Grant, Recalled, TurnDefaults, TurnIn};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRef, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use serde_json::Value;

use crate::auth::Caller;
use crate::{ApiError, AppState, native};
use chat::StreamedReply;
use upstream::{Upstream, UpstreamAuth};

/// The o200k tokens the added memory may take, frame included, unless `--budget` says otherwise.
pub const DEFAULT_BUDGET: usize = 1500;
/// Response header: the ids of the cards and turns added to the system prompt, comma-separated
/// (empty when nothing was).
pub const MEMORY_IDS: &str = "x-aril-memory-ids";
/// Response header of a whole (non-streamed) reply: how many turns of the exchange were stored
/// (`error` when storing failed: the reply is still the upstream's, and the server logs why).
pub const STORED: &str = "x-aril-stored";
/// Request header: the conversation the exchange belongs to (default [`DEFAULT_CONVERSATION`]).
pub const CONVERSATION: &str = "x-aril-conversation";
/// The conversation of exchanges that name none.
pub const DEFAULT_CONVERSATION: &str = "proxy";
/// Chat requests carry whole histories (and images): a larger limit than the memory API's.
const MAX_CHAT_BYTES: usize = 32 << 20;

/// What surrounds the recalled memory in the system prompt.
const FRAME_HEAD: &str = "Memory of earlier conversations with this user (kept by aril), newest \
first. Use it where it helps; where entries conflict, prefer the most recent.\n<memory>\n";
const FRAME_TAIL: &str = "\n</memory>";
/// The least room `--budget` must leave for memory inside the frame.
const MIN_MEMORY_TOKENS: usize = 50;

/// Settings of the proxy that `aril serve` does not have.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The upstream's OpenAI base URL, e.g. `http://127.0.0.1:8080/v1`.
    pub upstream: String,
    /// The key the upstream wants (sent as `Authorization: Bearer`).
    pub upstream_key: Option<String>,
    /// o200k tokens the added memory may take, frame included.
    pub budget: usize,
    /// The user of requests from an admin key (or a proxy without keys) that name none in `user`.
    pub default_user: Option<String>,
}

/// A proxy that cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(
        "the upstream URL {url:?} is not usable: {reason}; give the model server's OpenAI base \
         URL, e.g. http://127.0.0.1:8080/v1"
    )]
    Upstream { url: String, reason: String },
    #[error("cannot make the HTTP client for the upstream: {0}")]
    Client(String),
    #[error("--budget {budget} leaves no room for memory: give at least {min} tokens")]
    Budget { budget: usize, min: usize },
    #[error("--user must not be empty")]
    EmptyUser,
}

#[derive(Clone)]
struct Proxy {
    app: AppState,
    upstream: Arc<Upstream>,
    /// The budget of the recalled context: `--budget` less the frame.
    recall_budget: usize,
    default_user: Option<String>,
}

impl FromRef<Proxy> for AppState {
    fn from_ref(proxy: &Proxy) -> AppState {
        proxy.app.clone()
    }
}

/// The proxy's routes: `POST /v1/chat/completions` and `GET /v1/models`.
pub(crate) fn routes(app: AppState, config: ProxyConfig) -> Result<Router, ProxyError> {
    let frame = tokens::count(FRAME_HEAD) + tokens::count(FRAME_TAIL) + 2;
    let min = frame + MIN_MEMORY_TOKENS;
    if config.budget < min {
        return Err(ProxyError::Budget {
            budget: config.budget,
            min,
        });
    }
    if config
        .default_user
        .as_deref()
        .is_some_and(|u| u.trim().is_empty())
    {
        return Err(ProxyError::EmptyUser);
    }
    let auth = match (config.upstream_key, app.auth) {
        (Some(key), _) => UpstreamAuth::Key(key),
        (None, false) => UpstreamAuth::Caller,
        (None, true) => UpstreamAuth::None,
    };
    let proxy = Proxy {
        upstream: Arc::new(Upstream::new(&config.upstream, auth)?),
        app,
        recall_budget: config.budget - frame,
        default_user: config.default_user,
    };
    tracing::info!(upstream = %proxy.upstream.base(), "proxying chat completions");
    Ok(Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .layer(DefaultBodyLimit::max(MAX_CHAT_BYTES))
        .with_state(proxy))
}

impl Proxy {
    /// The scope of a request: the key's user, or under an admin key the request's `user` field
    /// (else `--user`).
    fn scope(&self, caller: &Caller, user: Option<&Value>) -> Result<ScopeFilter, ApiError> {
        let named = match user {
            None | Some(Value::Null) => None,
            Some(Value::String(u)) => Some(u.clone()),
            Some(_) => return Err(ApiError::bad_request("`user` must be a string")),
        };
        let user = match (&caller.grant, named) {
            (Grant::Admin, None) => Some(self.default_user.clone().ok_or_else(|| {
                ApiError::bad_request(
                    "whose memory is this? Send the user in the request's `user` field (an \
                     admin key, or a proxy without keys, is bound to no user), use a user's key, \
                     or start the proxy with --user USER",
                )
            })?),
            (_, named) => named,
        };
        caller.filter(user, None, None)
    }

    /// The memory for the last user message, within the budget, less the turns that say what
    /// the request's messages (`known`) say already.
    async fn recall(
        &self,
        filter: ScopeFilter,
        question: String,
        known: Vec<String>,
        now: DateTime<Utc>,
    ) -> Result<Recalled, ApiError> {
        let request = AskRequest {
            filter,
            question,
            asked_at: Some(now),
            k: None,
            budget: Some(self.recall_budget),
            single_list: false,
            known_texts: known,
        };
        self.app
            .read(move |engine| engine.recall_unplanned(&request))
            .await
    }
}

/// The conversation an exchange is stored in ([`CONVERSATION`]).
fn conversation(headers: &HeaderMap) -> Result<String, ApiError> {
    match headers.get(CONVERSATION) {
        None => Ok(DEFAULT_CONVERSATION.into()),
        Some(v) => match v.to_str().map(str::trim) {
            Ok(c) if !c.is_empty() => Ok(c.to_string()),
            _ => Err(ApiError::bad_request(format!(
                "{CONVERSATION} must be a non-empty ASCII conversation name"
            ))),
        },
    }
}

/// An exchange to store once the upstream has replied: the new user message (checked before
/// the request is forwarded) and the reply.
struct Exchange {
    app: AppState,
    caller: Caller,
    defaults: TurnDefaults,
    asked: Option<TurnIn>,
}

impl Exchange {
    fn new(
        app: AppState,
        caller: Caller,
        filter: ScopeFilter,
        conversation: String,
        asked: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<Self, ApiError> {
        let scope = Scope::new(filter.user_id, filter.agent_id, filter.run_id)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let defaults = TurnDefaults {
            scope: Some(scope),
            conversation,
            ..Default::default()
        };
        let asked = asked.map(|text| TurnIn {
            role: Some("user".into()),
            text,
            at: Some(now.to_rfc3339()),
            ..Default::default()
        });
        if let Some(turn) = &asked {
            turn.clone()
                .into_turn(&defaults, now)
                .map_err(|e| ApiError::bad_request(format!("the last user message: {e}")))?;
        }
        Ok(Self {
            app,
            caller,
            defaults,
            asked,
        })
    }

    /// Stores the user message and the reply (when it has text); returns how many turns.
    async fn store(self, reply: Option<String>) -> Result<usize, ApiError> {
        let replied = reply.map(|text| TurnIn {
            role: Some("assistant".into()),
            text,
            at: Some(Utc::now().to_rfc3339()),
            ..Default::default()
        });
        let turns: Vec<TurnIn> = self.asked.into_iter().chain(replied).collect();
        if turns.is_empty() {
            return Ok(0);
        }
        let stored =
            native::store_turns(&self.app, &self.caller, self.defaults, turns, false).await?;
        Ok(stored.ids.len())
    }

    /// [`Exchange::store`], with a failure logged: the reply has gone to the caller already.
    async fn store_logged(self, reply: Option<String>) -> Option<usize> {
        let user = self.defaults.scope.as_ref().map(|s| s.user_id.clone());
        match self.store(reply).await {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::error!(?user, error = %e.message, "the proxy could not store an exchange");
                None
            }
        }
    }
}

/// Recalls, injects, forwards, replies and stores (see the module's doc).
async fn chat_completions(
    State(proxy): State<Proxy>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let now = Utc::now();
    let mut request: Value = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body is not a JSON chat completion request: {e}"
        ))
    })?;
    let fields = request.as_object_mut().ok_or_else(|| {
        ApiError::bad_request("the body must be a JSON object (a chat completion request)")
    })?;
    let filter = proxy.scope(&caller, fields.get("user"))?;
    let conversation = conversation(&headers)?;
    let stream = fields.get("stream").and_then(Value::as_bool) == Some(true);
    let messages = fields
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| ApiError::bad_request("`messages` must be an array of chat messages"))?;
    let asked = chat::last_user(messages);
    let mut memory_ids: Vec<String> = Vec::new();
    if let Some(asked) = &asked {
        let known = messages.iter().filter_map(chat::message_text).collect();
        let recalled = proxy
            .recall(filter.clone(), asked.text.clone(), known, now)
            .await?;
        if !recalled.items.is_empty() {
            chat::inject(
                messages,
                &format!("{FRAME_HEAD}{}{FRAME_TAIL}", recalled.context),
            );
            memory_ids = recalled.items.into_iter().map(|i| i.id).collect();
        }
    }
    let new_message = asked.filter(|a| a.is_new).map(|a| a.text);
    let exchange = Exchange::new(
        proxy.app.clone(),
        caller,
        filter,
        conversation,
        new_message,
        now,
    )?;
    let reply = proxy
        .upstream
        .post("chat/completions", &request, &headers)
        .await?;
    if !reply.status().is_success() {
        return passed_through(reply).await;
    }
    let ids = header_value(&memory_ids.join(","));
    if stream {
        Ok(streamed(reply, exchange, ids))
    } else {
        whole(reply, exchange, ids).await
    }
}

/// Forwards `GET /v1/models`.
async fn models(
    State(proxy): State<Proxy>,
    _caller: Caller,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    passed_through(proxy.upstream.get("models", &headers).await?).await
}

fn header_value(v: &str) -> HeaderValue {
    HeaderValue::from_str(v).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The upstream's content type, else JSON.
fn content_type(reply: &reqwest::Response) -> HeaderValue {
    reply
        .headers()
        .get(CONTENT_TYPE)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("application/json"))
}

fn unreadable(e: reqwest::Error) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::BAD_GATEWAY,
        "upstream_failed",
        format!("the upstream model's reply broke off: {e}"),
    )
}

/// The upstream's reply as it came: status, content type and body.
async fn passed_through(reply: reqwest::Response) -> Result<Response, ApiError> {
    let status = reply.status();
    let kind = content_type(&reply);
    let body = reply.bytes().await.map_err(unreadable)?;
    Ok((status, [(CONTENT_TYPE, kind)], body).into_response())
}

/// A whole reply: stored, then passed on with the memory and storage headers.
async fn whole(
    reply: reqwest::Response,
    exchange: Exchange,
    ids: HeaderValue,
) -> Result<Response, ApiError> {
    let status = reply.status();
    let kind = content_type(&reply);
    let body = reply.bytes().await.map_err(unreadable)?;
    let text = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| chat::reply_text(&v));
    let stored = match exchange.store_logged(text).await {
        Some(n) => header_value(&n.to_string()),
        None => HeaderValue::from_static("error"),
    };
    Ok((
        status,
        [
            (CONTENT_TYPE, kind),
            (HeaderName::from_static(MEMORY_IDS), ids),
            (HeaderName::from_static(STORED), stored),
        ],
        body,
    )
        .into_response())
}

/// A streamed reply, passed on chunk by chunk. The exchange is stored when the stream says it is
/// done (before its last event goes out, so the caller's next request finds it) or ends cleanly;
/// a caller that leaves early, or an upstream that breaks off, stores nothing.
fn streamed(reply: reqwest::Response, exchange: Exchange, ids: HeaderValue) -> Response {
    let status = reply.status();
    let kind = content_type(&reply);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(32);
    tokio::spawn(async move {
        let mut text = StreamedReply::default();
        let mut exchange = Some(exchange);
        let mut upstream = reply.bytes_stream();
        while let Some(chunk) = upstream.next().await {
            let bytes = match chunk {
                Ok(bytes) => bytes,
                Err(e) => {
                    let _ = tx.send(Err(std::io::Error::other(e))).await;
                    return;
                }
            };
            if text.feed(&bytes)
                && let Some(exchange) = exchange.take()
            {
                exchange.store_logged(text.text()).await;
            }
            if tx.send(Ok(bytes)).await.is_err() {
                return; // the caller left
            }
        }
        if let Some(exchange) = exchange {
            exchange.store_logged(text.text()).await;
        }
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    (
        status,
        [
            (CONTENT_TYPE, kind),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (HeaderName::from_static(MEMORY_IDS), ids),
        ],
        Body::from_stream(body),
    )
        .into_response()
}
