//! The Mem0-compatible API, so code written for Mem0 moves over by changing its base URL.
//!
//! Routes are those the official `mem0ai` client (2.2.1) calls — `GET /v1/ping/`,
//! `POST /v3/memories/add/`, `POST /v3/memories/search/`, `POST /v3/memories/` (get_all),
//! `GET|PUT|DELETE /v1/memories/{id}/`, `GET /v1/memories/{id}/history/`, `DELETE /v1/memories/`
//! (delete_all), `GET /v1/entities/` and `DELETE /v2/entities/{type}/{name}/` (reset) — the v1/v2
//! forms older clients use, and those of Mem0's open-source REST server
//! (`POST|GET|DELETE /memories`, `GET /memories/{id}`, `POST /search`, `POST /reset`).
//!
//! Without an LLM a memory is a turn, kept verbatim: `add` returns the turns it stored and invents
//! nothing. With an encoder configured, `add` answers with the cards it wrote from the messages
//! (the turns are kept verbatim all the same). Memory ids — turn ids, or a card memory's first
//! card id — are stable across restarts and updates; one memory's routes (get, update, delete,
//! history) live in [`crate::memory`].

use aril_engine::{
    Category, Condition, EncodeConfig, EncodeOutcome, EngineError, Grant, Guidance, Lifecycle,
    Metadata, Role, Scope, ScopeFilter, SearchRequest, TurnDefaults, TurnId, TurnIn,
    parse_lifecycle,
};
use axum::extract::{Path, State};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use rmcp::schemars;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Caller;
use crate::consolidation::encode_one;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiQuery};
use crate::memory::Memory;
use crate::native::{check_k, check_query, store_turns};
use crate::state::CardWriter;
use crate::{ApiError, AppState};

/// The OpenAPI tag of these routes.
const TAG: &str = "mem0";

/// Documented routes are those `mem0ai` 2.2.1 calls; the older and open-source forms of the same
/// operations are aliases (same handler, same behaviour), listed in the module doc.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(ping))
        .route("/v1/ping", get(ping))
        // add
        .routes(routes!(add))
        .route("/v2/memories/add/", post(add))
        .route("/v1/memories/", post(add))
        .route("/memories", post(add).get(get_all_query).delete(delete_all))
        // search
        .routes(routes!(search))
        .route("/v2/memories/search/", post(search))
        .route("/v1/memories/search/", post(search))
        .route("/search", post(search))
        // get_all, delete_all
        .routes(routes!(get_all))
        .route("/v2/memories/", post(get_all))
        .routes(routes!(get_all_query, delete_all))
        // one memory
        .merge(crate::memory::routes())
        // entities and reset
        .routes(routes!(entities))
        .routes(routes!(delete_entity))
        .routes(routes!(reset))
        .route("/reset", post(reset))
}

#[derive(Serialize, ToSchema)]
struct Ping {
    status: &'static str,
    /// The client insists on an organisation and a project; aril has one of each per server.
    org_id: &'static str,
    project_id: &'static str,
    user_email: Option<String>,
}

/// The client's start-up check: answers only for a valid key.
#[utoipa::path(get, path = "/v1/ping/", tag = TAG, security(("token" = [])), responses(
    (status = 200, body = Ping), (status = "4XX", body = ErrorBody)))]
async fn ping(_caller: Caller) -> axum::Json<Ping> {
    axum::Json(Ping {
        status: "ok",
        org_id: "aril",
        project_id: "default",
        user_email: None,
    })
}

/// Checks Mem0's remaining options: those with no meaning in aril (one organisation and
/// project per server, one output format, synchronous writes) pass whatever their value; one that
/// asks for what aril does not do is refused with what it does instead; any other field is
/// unknown (a typo must not pass silently).
fn check_options(rest: &Map<String, Value>) -> Result<(), ApiError> {
    for (key, value) in rest {
        let on = value.as_bool() == Some(true);
        let refusal = match key.as_str() {
            "org_id" | "project_id" | "version" | "async_mode" => None,
            "output_format" => (!value.is_null() && value != "v1.1")
                .then_some("aril answers in Mem0's v1.1 format ({\"results\": [...]}) only"),
            "enable_graph" => on.then_some("aril keeps no graph memory: leave enable_graph false"),
            "rerank" => on.then_some(
                "this search fuses keyword and vector lists and reranks nothing (a cross-encoder \
                 reranks `aril ask` when one is configured): leave rerank false",
            ),
            "keyword_search" => (value.as_bool() == Some(false))
                .then_some("aril's search always includes its keyword (BM25) lists"),
            "filter_memories" => on.then_some(
                "aril filters memories with `filters`, not with a model: leave filter_memories \
                 false",
            ),
            "app_id" => (!value.is_null())
                .then_some("app_id is not a scope in aril: use agent_id or run_id"),
            "prompt" => Some("`prompt` is Mem0's old extraction prompt: use custom_instructions"),
            "memory_type" => Some(
                "aril has one kind of memory (verbatim turns, and cards with an encoder): leave \
                 memory_type out",
            ),
            _ => return Err(ApiError::bad_request(format!("unknown field {key:?}"))),
        };
        if let Some(why) = refusal {
            return Err(ApiError::bad_request(format!("{key}: {why}")));
        }
    }
    Ok(())
}

/// The fields of a memory as the Mem0 routes return it (`fields` picks among them).
const MEMORY_FIELDS: &[&str] = &[
    "id",
    "memory",
    "user_id",
    "agent_id",
    "run_id",
    "role",
    "metadata",
    "categories",
    "created_at",
    "updated_at",
    "score",
];

/// A response whose `results` keep only `fields` (all when `None`), as Mem0's `fields` asks.
fn with_fields<T: Serialize>(
    response: T,
    fields: Option<&[String]>,
) -> Result<axum::Json<Value>, ApiError> {
    let mut value =
        serde_json::to_value(response).map_err(|e| ApiError::internal(e.to_string()))?;
    if let Some(fields) = fields {
        if let Some(unknown) = fields.iter().find(|f| !MEMORY_FIELDS.contains(&f.as_str())) {
            return Err(ApiError::bad_request(format!(
                "fields: {unknown:?} is not a field of a memory; they are {}",
                MEMORY_FIELDS.join(", ")
            )));
        }
        if let Some(Value::Array(results)) = value.get_mut("results") {
            for item in results.iter_mut().filter_map(Value::as_object_mut) {
                item.retain(|k, _| fields.iter().any(|f| f == k));
            }
        }
    }
    Ok(axum::Json(value))
}

/// Scope fields, top-level or inside `filters` (flat, or an `AND` of flat objects).
#[derive(Debug, Default)]
pub(crate) struct ScopeArgs {
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub run_id: Option<String>,
    /// What the filters ask beyond the scope (metadata, times).
    pub condition: Option<Condition>,
}

impl ScopeArgs {
    fn take(&mut self, key: &str, value: &Value) -> Result<bool, ApiError> {
        let slot = match key {
            "user_id" => &mut self.user_id,
            "agent_id" => &mut self.agent_id,
            "run_id" => &mut self.run_id,
            _ => return Ok(false),
        };
        match value {
            Value::String(s) => {
                if slot.as_ref().is_some_and(|old| old != s) {
                    return Err(ApiError::bad_request(format!(
                        "{key} is given twice with different values"
                    )));
                }
                *slot = Some(s.clone());
                Ok(true)
            }
            Value::Null => Ok(true),
            _ => Err(ApiError::bad_request(format!(
                "{key} must be a string (aril filters scopes by equality)"
            ))),
        }
    }

    /// The scope named by fields and Mem0 `filters` (which may name it too, and add a
    /// condition).
    pub(crate) fn named(
        user_id: Option<String>,
        agent_id: Option<String>,
        run_id: Option<String>,
        filters: Option<&Value>,
    ) -> Result<Self, ApiError> {
        let mut scope = Self {
            user_id,
            agent_id,
            run_id,
            condition: None,
        };
        if let Some(f) = filters {
            scope.add_filters(f)?;
        }
        Ok(scope)
    }

    /// Takes Mem0 `filters`: the scope keys of its top-level conjunction into the scope, the
    /// rest (metadata, times) as the condition.
    pub(crate) fn add_filters(&mut self, filters: &Value) -> Result<(), ApiError> {
        let lifted = Condition::from_mem0(filters)
            .and_then(Condition::take_scope)
            .map_err(|e| ApiError::bad_request(format!("filters: {}", e.0)))?;
        let named = [
            ("user_id", lifted.user_id),
            ("agent_id", lifted.agent_id),
            ("run_id", lifted.run_id),
        ];
        for (key, value) in named {
            if let Some(v) = value {
                self.take(key, &Value::String(v))?;
            }
        }
        self.condition = match (self.condition.take(), lifted.rest) {
            (Some(a), Some(b)) => Some(Condition::All(vec![a, b])),
            (a, b) => a.or(b),
        };
        Ok(())
    }

    /// The scope named by a body: its top-level `user_id`/`agent_id`/`run_id` and its `filters`.
    /// Fails on any other field that is not a known Mem0 option.
    fn gather(rest: &mut Map<String, Value>, filters: Option<&Value>) -> Result<Self, ApiError> {
        let mut scope = Self::default();
        for key in ["user_id", "agent_id", "run_id"] {
            if let Some(v) = rest.remove(key) {
                scope.take(key, &v)?;
            }
        }
        if let Some(f) = filters {
            scope.add_filters(f)?;
        }
        check_options(rest)?;
        Ok(scope)
    }

    /// The scope, for a request that takes no condition: filters beyond the scope are refused.
    pub(crate) fn filter(self, caller: &Caller) -> Result<ScopeFilter, ApiError> {
        if self.condition.is_some() {
            return Err(ApiError::bad_request(
                "filters beyond user_id, agent_id and run_id apply to search and get_all only",
            ));
        }
        caller.filter(self.user_id, self.agent_id, self.run_id)
    }

    /// The scope and the condition its memories must meet.
    pub(crate) fn filter_and_condition(
        self,
        caller: &Caller,
    ) -> Result<(ScopeFilter, Option<Condition>), ApiError> {
        let scope = caller.filter(self.user_id, self.agent_id, self.run_id)?;
        Ok((scope, self.condition))
    }
}

/// One chat message, as Mem0 takes them.
#[derive(Debug, Deserialize, Serialize, schemars::JsonSchema, ToSchema)]
pub struct Message {
    /// `user`, `assistant`, `system` or `tool`.
    pub role: String,
    /// The text of the message.
    pub content: Value,
}

/// What `add` takes as its messages: a list of chat messages, or one string (a user message, as
/// the `mem0ai` npm client sends `add("text", …)`).
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
enum AddMessages {
    Many(Vec<Message>),
    One(String),
}

impl AddMessages {
    fn into_list(self) -> Vec<Message> {
        match self {
            AddMessages::Many(list) => list,
            AddMessages::One(text) => vec![Message {
                role: "user".into(),
                content: Value::String(text),
            }],
        }
    }
}

/// Messages to keep, with their scope (top level or in `filters`) and Mem0's options.
#[derive(Deserialize, ToSchema)]
struct AddBody {
    messages: AddMessages,
    filters: Option<Value>,
    /// Unix seconds, as Mem0 sends it.
    timestamp: Option<i64>,
    /// With an encoder configured (default true): write the messages into cards now and answer
    /// with the cards. False: keep the turns only (cards come later, by topic segment).
    infer: Option<bool>,
    /// A JSON object kept with every message (at most 16 KiB), returned with each memory.
    #[schema(value_type = Option<Object>)]
    metadata: Option<Metadata>,
    /// The memories expire then: a date `YYYY-MM-DD` (they last through that day, UTC) or RFC
    /// 3339. Expired, they are never recalled or listed, and a sweep deletes them.
    expiration_date: Option<String>,
    /// True: an update of these memories is refused (409); a deletion is not.
    immutable: Option<bool>,
    /// Instructions for the encoder writing these messages' cards (needs an encoder and `infer`).
    custom_instructions: Option<String>,
    /// What the cards should be about (needs an encoder and `infer`).
    includes: Option<String>,
    /// What no card should be about (needs an encoder and `infer`).
    excludes: Option<String>,
    /// Categories whose names go into the topics of the cards they fit, as Mem0 sends them
    /// (`[{"name": "description"}, …]`; names alone or one object of them are taken too).
    #[schema(value_type = Option<Object>)]
    custom_categories: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// The encoder guidance of an `add` (Mem0's `custom_instructions`, `includes`, `excludes`,
/// `custom_categories`), checked.
pub(crate) fn guidance(
    instructions: Option<String>,
    includes: Option<String>,
    excludes: Option<String>,
    categories: Option<&Value>,
) -> Result<Guidance, ApiError> {
    let wrong = || {
        ApiError::bad_request(
            "custom_categories must be a list of {\"name\": \"description\"} objects (or of \
             names)",
        )
    };
    let category = |name: &str, description: &Value| -> Result<Category, ApiError> {
        Ok(Category {
            name: name.to_string(),
            description: match description {
                Value::String(d) => d.clone(),
                Value::Null => String::new(),
                _ => return Err(wrong()),
            },
        })
    };
    let mut listed = Vec::new();
    match categories {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items {
                match item {
                    Value::String(name) => listed.push(category(name, &Value::Null)?),
                    Value::Object(named) => {
                        for (name, description) in named {
                            listed.push(category(name, description)?);
                        }
                    }
                    _ => return Err(wrong()),
                }
            }
        }
        Some(Value::Object(named)) => {
            for (name, description) in named {
                listed.push(category(name, description)?);
            }
        }
        Some(_) => return Err(wrong()),
    }
    let guidance = Guidance {
        instructions,
        includes,
        excludes,
        categories: listed,
    };
    guidance.check().map_err(ApiError::bad_request)?;
    Ok(guidance)
}

#[derive(Serialize, ToSchema)]
pub(crate) struct AddEvent {
    id: String,
    memory: String,
    /// `ADD` (a new memory), `UPDATE` (a new version of the memory `id`) or `NONE` (known).
    event: &'static str,
    /// For `UPDATE`: the text the memory held before.
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_memory: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct AddResponse {
    results: Vec<AddEvent>,
    /// Why the results are turns and not cards although an encoder is configured, or why there
    /// are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// `add`: stores the messages as turns (kept verbatim). Without an encoder it answers with the
/// turns (no memory is invented); with one, and unless `infer` is false, it closes the
/// conversation's open segment, writes it into cards (one encoder call) and answers with the
/// cards, each a memory of its own or a new version of one it updates.
#[utoipa::path(post, path = "/v3/memories/add/", tag = TAG, request_body = AddBody,
    security(("token" = [])), responses(
    (status = 200, body = AddResponse), (status = "4XX", body = ErrorBody)))]
async fn add(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(mut body): ApiJson<AddBody>,
) -> Result<axum::Json<AddResponse>, ApiError> {
    let scope = ScopeArgs::gather(&mut body.rest, body.filters.as_ref())?;
    let filter = scope.filter(&caller)?;
    let at = match body.timestamp {
        Some(ts) => Some(DateTime::from_timestamp(ts, 0).ok_or_else(|| {
            ApiError::bad_request(format!("timestamp {ts} is out of range (unix seconds)"))
        })?),
        None => None,
    };
    let options = AddOptions {
        at,
        infer: body.infer.unwrap_or(true),
        metadata: body.metadata,
        lifecycle: parse_lifecycle(
            body.expiration_date.as_deref(),
            body.immutable.unwrap_or(false),
        )?,
        guidance: guidance(
            body.custom_instructions,
            body.includes,
            body.excludes,
            body.custom_categories.as_ref(),
        )?,
    };
    Ok(axum::Json(
        add_messages(&state, &caller, filter, body.messages.into_list(), options).await?,
    ))
}

/// How [`add_messages`] stores what it is given.
pub(crate) struct AddOptions {
    /// When the messages were said (default: now).
    pub at: Option<DateTime<Utc>>,
    /// With an encoder: write them into cards now.
    pub infer: bool,
    /// Kept with every message.
    pub metadata: Option<Metadata>,
    /// The expiry and immutability of every message's memory.
    pub lifecycle: Lifecycle,
    /// What the application asks of the cards (refused without an encoder or `infer`).
    pub guidance: Guidance,
}

/// Stores messages as turns of the conversation named by the scope's `run_id` (else `mem0`),
/// with the options' time and metadata, and with `infer` and an encoder writes them into cards.
/// Shared by the HTTP routes and the MCP tools.
pub(crate) async fn add_messages(
    state: &AppState,
    caller: &Caller,
    filter: ScopeFilter,
    messages: Vec<Message>,
    options: AddOptions,
) -> Result<AddResponse, ApiError> {
    let AddOptions {
        at,
        infer,
        metadata,
        lifecycle,
        guidance,
    } = options;
    if !guidance.is_empty() {
        if state.encoder.is_none() {
            return Err(ApiError::bad_request(
                "custom_instructions, includes, excludes and custom_categories steer the cards \
                 an encoder writes, and this server has no encoder (configure ARIL_LLM_ENCODER_* \
                 or [llm.encoder]): without one aril keeps the messages verbatim; leave them out",
            ));
        }
        if !infer {
            return Err(ApiError::bad_request(
                "custom_instructions, includes, excludes and custom_categories steer the cards \
                 `add` writes now, and `infer: false` writes none (the background consolidation \
                 writes them later, without these): leave `infer` true or leave them out",
            ));
        }
    }
    let mut turns = Vec::with_capacity(messages.len());
    let mut texts = Vec::with_capacity(messages.len());
    for (i, m) in messages.into_iter().enumerate() {
        let Value::String(text) = m.content else {
            return Err(ApiError::bad_request(format!(
                "messages[{i}].content must be text (aril keeps text turns)"
            )));
        };
        texts.push(text.clone());
        turns.push(TurnIn {
            role: Some(m.role),
            text,
            ..Default::default()
        });
    }
    let defaults = TurnDefaults {
        conversation: filter.run_id.clone().unwrap_or_else(|| "mem0".into()),
        scope: Some(
            Scope::new(filter.user_id, filter.agent_id, filter.run_id)
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
        ),
        at,
        metadata,
        lifecycle,
        ..Default::default()
    };
    let writer = state.encoder.clone().filter(|_| infer);
    let appended = store_turns(state, caller, defaults, turns, writer.is_some()).await?;
    let new_turns: Vec<TurnId> = appended
        .ids
        .iter()
        .zip(&appended.already_stored)
        .filter(|(_, known)| !**known)
        .map(|(id, _)| id.clone())
        .collect();
    let turn_events = || {
        appended
            .ids
            .iter()
            .zip(&appended.already_stored)
            .zip(&texts)
            .map(|((id, known), memory)| AddEvent {
                id: id.0.clone(),
                memory: memory.clone(),
                event: if *known { "NONE" } else { "ADD" },
                previous_memory: None,
            })
            .collect::<Vec<_>>()
    };
    let Some(writer) = writer else {
        return Ok(AddResponse {
            results: turn_events(),
            note: None,
        });
    };
    if new_turns.is_empty() {
        return Ok(AddResponse {
            results: turn_events(),
            note: Some("every message was already stored: no new card".into()),
        });
    }
    let worker = state.clone();
    let written =
        tokio::task::spawn_blocking(move || write_cards(&worker, &writer, &new_turns, guidance))
            .await
            .map_err(|e| ApiError::internal(format!("card writing failed: {e}")))?;
    match written {
        Ok(w) if w.failed.is_empty() => {
            let note = w.events.is_empty().then(|| {
                "the encoder found nothing to remember in these messages; they are kept \
                 verbatim as turns"
                    .to_string()
            });
            Ok(AddResponse {
                results: w.events,
                note,
            })
        }
        Ok(w) => Ok(AddResponse {
            results: w.events.into_iter().chain(turn_events()).collect(),
            note: Some(format!(
                "the encoder's reply was unusable ({}); the turns are kept verbatim and searchable, \
                 `aril consolidate --retry-failed` tries again",
                w.failed.join("; ")
            )),
        }),
        Err(EngineError::Llm(e)) => Ok(AddResponse {
            results: turn_events(),
            note: Some(format!(
                "no cards yet: the encoder could not be reached ({e}); the turns are stored and \
                 their segment stays queued for the background consolidation"
            )),
        }),
        Err(e) => Err(e.into()),
    }
}

/// What writing the added turns into cards produced.
struct Written {
    events: Vec<AddEvent>,
    /// Why segments failed.
    failed: Vec<String>,
}

/// Encodes the queued segments holding `turns` (blocking) and lists their cards as Mem0 events:
/// `ADD` for a new memory, `UPDATE` for a card that supersedes an earlier one (with the memory's
/// id and previous text).
fn write_cards(
    state: &AppState,
    writer: &CardWriter,
    turns: &[TurnId],
    guidance: Guidance,
) -> Result<Written, EngineError> {
    let config = EncodeConfig {
        guidance,
        ..writer.config.clone()
    };
    // Segments another worker already holds are being written by it; their cards come later.
    let segments = state.with_engine(|e| {
        let queued = e.queued_segments_holding(turns)?;
        e.claim_segments(&queued, false)
    })?;
    let mut written = Written {
        events: Vec::new(),
        failed: Vec::new(),
    };
    for segment in segments {
        let outcome = encode_one(state, writer.model.as_ref(), &config, &segment)?;
        if let EncodeOutcome::Failed(reason) = outcome {
            written.failed.push(reason);
            continue;
        }
        state.with_reader(|e| {
            for card in e.segment_cards(&segment)? {
                let Some(memory) = e.card_memory(&card.id)? else {
                    continue;
                };
                let position = memory.versions.iter().position(|v| v.id == card.id);
                let previous = position
                    .and_then(|p| p.checked_sub(1))
                    .and_then(|p| memory.versions.get(p))
                    .map(|v| v.text.clone());
                written.events.push(AddEvent {
                    id: memory.id.0.clone(),
                    memory: card.text,
                    event: if previous.is_some() { "UPDATE" } else { "ADD" },
                    previous_memory: previous,
                });
            }
            Ok(())
        })?;
    }
    Ok(written)
}

/// A query inside a scope (top level or in `filters`).
#[derive(Deserialize, ToSchema)]
struct SearchBody {
    query: String,
    filters: Option<Value>,
    top_k: Option<usize>,
    limit: Option<usize>,
    /// Only memories at least this similar to the query (cosine of their own vector, 0–1).
    threshold: Option<f32>,
    /// The fields of each memory to return (all when absent).
    fields: Option<Vec<String>>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct Results {
    results: Vec<Memory>,
}

/// Recalls the memories most relevant to a query.
#[utoipa::path(post, path = "/v3/memories/search/", tag = TAG, request_body = SearchBody,
    security(("token" = [])), responses(
    (status = 200, body = Results), (status = "4XX", body = ErrorBody)))]
async fn search(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(mut body): ApiJson<SearchBody>,
) -> Result<axum::Json<Value>, ApiError> {
    let scope = ScopeArgs::gather(&mut body.rest, body.filters.as_ref())?;
    let (filter, condition) = scope.filter_and_condition(&caller)?;
    let k = check_k(body.top_k.or(body.limit))?;
    with_fields(
        search_scope(&state, filter, condition, body.threshold, body.query, k).await?,
        body.fields.as_deref(),
    )
}

/// Recalls for a query inside a scope and shows each hit as the memory (turn) it is.
pub(crate) async fn search_scope(
    state: &AppState,
    filter: ScopeFilter,
    condition: Option<Condition>,
    threshold: Option<f32>,
    query: String,
    k: Option<usize>,
) -> Result<Results, ApiError> {
    check_query(&query)?;
    let request = SearchRequest {
        filter,
        query,
        k,
        budget: None,
        asked_at: Some(chrono::Utc::now()),
        condition,
        threshold,
    };
    let results = state
        .read(move |engine| {
            let response = engine.search(&request)?;
            // Each hit is one turn by default; show it as the memory that turn holds now.
            let ids: Vec<aril_core::TurnId> = response
                .results
                .iter()
                .map(|h| aril_core::TurnId(h.id.clone()))
                .collect();
            let views = engine.memory_views(engine.turns(&ids)?)?;
            Ok(response
                .results
                .into_iter()
                .map(|hit| {
                    let view = views.iter().find(|v| v.current.id.0 == hit.id).cloned();
                    match view {
                        Some(v) => Memory {
                            score: Some(hit.score),
                            ..Memory::from_view(v)
                        },
                        None => Memory {
                            id: hit.id,
                            memory: hit.text,
                            user_id: request.filter.user_id.clone(),
                            agent_id: request.filter.agent_id.clone(),
                            run_id: request.filter.run_id.clone(),
                            role: Some(Role::User),
                            metadata: hit.metadata.map(Value::from),
                            categories: Vec::new(),
                            created_at: hit.time.unwrap_or_else(Utc::now),
                            updated_at: hit.time.unwrap_or_else(Utc::now),
                            valid_to: None,
                            score: Some(hit.score),
                        },
                    }
                })
                .collect::<Vec<_>>())
        })
        .await?;
    Ok(Results { results })
}

/// The scope to list (top level or in `filters`), and the page (here or in the query string).
#[derive(Deserialize, ToSchema)]
struct GetAllBody {
    filters: Option<Value>,
    page: Option<u64>,
    page_size: Option<u64>,
    /// The fields of each memory to return (all when absent).
    fields: Option<Vec<String>>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A paging field from the query string or the body; given in both, they must agree.
fn one_of(name: &str, query: Option<u64>, body: Option<u64>) -> Result<Option<u64>, ApiError> {
    match (query, body) {
        (Some(q), Some(b)) if q != b => Err(ApiError::bad_request(format!(
            "{name} is {q} in the query string and {b} in the body: give it once"
        ))),
        (q, b) => Ok(q.or(b)),
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Paging {
    page: Option<u64>,
    page_size: Option<u64>,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct Page {
    count: u64,
    next: Option<String>,
    previous: Option<String>,
    results: Vec<Memory>,
}

pub(crate) async fn page_of(
    state: &AppState,
    filter: ScopeFilter,
    condition: Option<Condition>,
    page: u64,
    page_size: u64,
) -> Result<Page, ApiError> {
    let page = page.max(1);
    let size = page_size.clamp(1, 1000);
    let offset = (page - 1)
        .checked_mul(size)
        .ok_or_else(|| ApiError::bad_request(format!("page {page} is out of range")))?;
    let (results, count) = state
        .read(move |engine| engine.record_page(&filter, condition.as_ref(), offset, size))
        .await?;
    Ok(Page {
        count,
        next: (page.saturating_mul(size) < count)
            .then(|| format!("?page={}&page_size={size}", page + 1)),
        previous: (page > 1).then(|| format!("?page={}&page_size={size}", page - 1)),
        results,
    })
}

/// `POST /v3/memories/`: a page of the scope's memories, oldest first (`page` / `page_size` in
/// the query string, as the Mem0 client sends them, or in the body).
#[utoipa::path(post, path = "/v3/memories/", tag = TAG, params(Paging), request_body = GetAllBody,
    security(("token" = [])), responses(
    (status = 200, body = Page), (status = "4XX", body = ErrorBody)))]
async fn get_all(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(paging): ApiQuery<Paging>,
    ApiJson(mut body): ApiJson<GetAllBody>,
) -> Result<axum::Json<Value>, ApiError> {
    let scope = ScopeArgs::gather(&mut body.rest, body.filters.as_ref())?;
    let (filter, condition) = scope.filter_and_condition(&caller)?;
    let page = one_of("page", paging.page, body.page)?;
    let page_size = one_of("page_size", paging.page_size, body.page_size)?;
    let page = page_of(
        &state,
        filter,
        condition,
        page.unwrap_or(1),
        page_size.unwrap_or(100),
    )
    .await?;
    with_fields(page, body.fields.as_deref())
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ScopeQuery {
    user_id: Option<String>,
    agent_id: Option<String>,
    run_id: Option<String>,
    app_id: Option<String>,
    page: Option<u64>,
    page_size: Option<u64>,
}

/// `GET /memories?user_id=…` (open-source server) and `GET /v1/memories/?user_id=…` (v1 clients).
#[utoipa::path(get, path = "/v1/memories/", tag = TAG, params(ScopeQuery),
    security(("token" = [])), responses(
    (status = 200, body = Page), (status = "4XX", body = ErrorBody)))]
async fn get_all_query(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ScopeQuery>,
) -> Result<axum::Json<Page>, ApiError> {
    let filter = caller.filter(q.user_id, q.agent_id, q.run_id)?;
    Ok(axum::Json(
        page_of(
            &state,
            filter,
            None,
            q.page.unwrap_or(1),
            q.page_size.unwrap_or(100),
        )
        .await?,
    ))
}

#[derive(Serialize, ToSchema)]
struct Message2 {
    message: String,
}

/// `DELETE /v1/memories/?user_id=…`: deletes a scope. Without any scope it is refused, whatever
/// the key (Mem0 issue #3746: a scope-less delete_all wiped every user); use `/v1/reset`.
#[utoipa::path(delete, path = "/v1/memories/", tag = TAG, params(ScopeQuery),
    security(("token" = [])), responses(
    (status = 200, body = Message2), (status = "4XX", body = ErrorBody)))]
async fn delete_all(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ScopeQuery>,
) -> Result<axum::Json<Message2>, ApiError> {
    if q.user_id.is_none() && q.agent_id.is_none() && q.run_id.is_none() {
        return Err(ApiError::bad_request(format!(
            "delete_all needs a scope (user_id, agent_id or run_id){}; to delete every user, \
             POST /v1/reset with an admin key and {{\"confirm\": \"{CONFIRM}\"}}",
            if q.app_id.is_some() {
                " — app_id is not a scope in aril"
            } else {
                ""
            }
        )));
    }
    let filter = caller.filter(q.user_id, q.agent_id, q.run_id)?;
    let report = state.run(move |engine| engine.delete(&filter)).await?;
    Ok(axum::Json(Message2 {
        message: format!(
            "Memories deleted successfully! ({} turns, {} segments)",
            report.turns, report.segments
        ),
    }))
}

#[derive(Serialize, ToSchema)]
struct Entity {
    #[serde(rename = "type")]
    kind: &'static str,
    name: String,
}

#[derive(Serialize, ToSchema)]
struct Entities {
    results: Vec<Entity>,
}

/// The users the caller can see: all for an admin key, its own for a user key.
#[utoipa::path(get, path = "/v1/entities/", tag = TAG, security(("token" = [])), responses(
    (status = 200, body = Entities), (status = "4XX", body = ErrorBody)))]
async fn entities(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<axum::Json<Entities>, ApiError> {
    let users = state.read(|engine| engine.users()).await?;
    let results = users
        .into_iter()
        .filter(|u| caller.may_access(u))
        .map(|name| Entity { kind: "user", name })
        .collect();
    Ok(axum::Json(Entities { results }))
}

/// Deletes a user, or an agent or run of the caller's user (`kind` is user, agent or run).
#[utoipa::path(delete, path = "/v2/entities/{kind}/{name}/", tag = TAG,
    params(("kind" = String, Path), ("name" = String, Path)),
    security(("token" = [])), responses(
    (status = 200, body = Message2), (status = "4XX", body = ErrorBody)))]
async fn delete_entity(
    State(state): State<AppState>,
    caller: Caller,
    Path((kind, name)): Path<(String, String)>,
) -> Result<axum::Json<Message2>, ApiError> {
    let filter = match kind.as_str() {
        "user" => caller.filter(Some(name), None, None)?,
        "agent" => caller.filter(None, Some(name), None)?,
        "run" => caller.filter(None, None, Some(name))?,
        other => {
            return Err(ApiError::bad_request(format!(
                "entity type {other:?}: aril has user, agent and run"
            )));
        }
    };
    state.run(move |engine| engine.delete(&filter)).await?;
    Ok(axum::Json(Message2 {
        message: "Entity deleted successfully.".into(),
    }))
}

/// The confirmation a scope-less reset must carry.
pub const CONFIRM: &str = "delete all memories";

/// The confirmation a reset must carry.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
struct ResetBody {
    confirm: Option<String>,
}

/// Deletes every user: admin keys only, with the confirmation phrase.
#[utoipa::path(post, path = "/v1/reset", tag = TAG, request_body(content = Option<ResetBody>),
    security(("token" = [])), responses(
    (status = 200, body = Message2), (status = "4XX", body = ErrorBody)))]
async fn reset(
    State(state): State<AppState>,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<axum::Json<Message2>, ApiError> {
    if caller.grant != Grant::Admin {
        return Err(ApiError::forbidden(
            "reset deletes every user: it needs an admin key",
        ));
    }
    let body: ResetBody = if body.is_empty() {
        ResetBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("reset body: {e}")))?
    };
    let confirmed = body.confirm.is_some_and(|c| c == CONFIRM);
    if !confirmed {
        return Err(ApiError::bad_request(format!(
            "reset deletes every user: send {{\"confirm\": \"{CONFIRM}\"}} to go ahead"
        )));
    }
    let deleted = state
        .run(|engine| {
            let users = engine.users()?;
            for u in &users {
                engine.delete(&ScopeFilter {
                    user_id: u.clone(),
                    agent_id: None,
                    run_id: None,
                })?;
            }
            Ok(users.len())
        })
        .await?;
    Ok(axum::Json(Message2 {
        message: format!("Reset: {deleted} users deleted."),
    }))
}
