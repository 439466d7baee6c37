//! The native API under `/v1`: append turns, recall, list turns and segments, delete a scope,
//! stats, and the health probes. Request bodies reject unknown fields, so a typo is an error and
//! not a silently ignored option.

use aril_core::{Segment, Turn};
use aril_engine::{
    DeleteReport, Grant, Profile, Scope, SearchRequest, SearchResponse, Stored, TurnDefaults,
    TurnIn, parse_valid_to,
};
use axum::extract::{Path, State};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Caller;
use crate::error::ErrorBody;
use crate::extract::{ApiJson, ApiQuery};
use crate::mem0::ScopeArgs;
use crate::{ApiError, AppState};

/// The OpenAPI tag of these routes.
const TAG: &str = "native";

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(ready))
        .routes(routes!(append_turns, list_turns))
        .routes(routes!(search))
        .routes(routes!(list_segments))
        .routes(routes!(profile))
        .routes(routes!(delete_scope))
        .routes(routes!(stats))
        .routes(routes!(forget))
        .routes(routes!(restore))
}

#[derive(Serialize, ToSchema)]
struct Status {
    status: &'static str,
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/health", tag = TAG, responses((status = 200, body = Status)))]
async fn health() -> axum::Json<Status> {
    axum::Json(Status { status: "ok" })
}

/// Ready when the engine answers and its model is loaded (a missing model shows here as 503).
#[utoipa::path(get, path = "/ready", tag = TAG, responses(
    (status = 200, body = Status),
    (status = 503, description = "the embedding model is missing", body = ErrorBody)
))]
async fn ready(State(state): State<AppState>) -> Result<axum::Json<Status>, ApiError> {
    state.read(|engine| engine.load_model()).await?;
    Ok(axum::Json(Status { status: "ready" }))
}

/// Scope fields that many requests share.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ScopeParams {
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub run_id: Option<String>,
}

/// Turns to append, with defaults for the fields they leave out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AppendTurns {
    turns: Vec<TurnIn>,
    /// Defaults for turns that leave them out.
    user_id: Option<String>,
    agent_id: Option<String>,
    run_id: Option<String>,
    conversation: Option<String>,
    /// Close each conversation's open segment after these turns (the end of a thread).
    #[serde(default)]
    flush: bool,
}

/// What an append stored: every turn's id, whether it was stored before, and the ingest's counts.
pub(crate) type Appended = Stored;

/// Checks and stores turns for the caller; nothing is stored when one turn is bad.
pub(crate) async fn store_turns(
    state: &AppState,
    caller: &Caller,
    defaults: TurnDefaults,
    turns: Vec<TurnIn>,
    flush: bool,
) -> Result<Appended, ApiError> {
    if turns.is_empty() {
        return Err(ApiError::bad_request("no turns given"));
    }
    let now = Utc::now();
    let mut checked = Vec::with_capacity(turns.len());
    for (i, t) in turns.into_iter().enumerate() {
        let turn = t
            .into_turn(&defaults, now)
            .map_err(|e| ApiError::bad_request(format!("turn {i}: {e}")))?;
        if !caller.may_access(&turn.scope.user_id) {
            return Err(ApiError::forbidden(format!(
                "turn {i}: this API key is bound to another user than {:?}",
                turn.scope.user_id
            )));
        }
        checked.push(turn);
    }
    // The model's work beside other requests; only the commit holds the engine alone.
    let (checked, ahead) = state
        .read(move |engine| {
            let ahead = engine.prepare(&checked)?;
            Ok((checked, ahead))
        })
        .await?;
    let mut users: Vec<String> = checked.iter().map(|t| t.scope.user_id.clone()).collect();
    users.sort_unstable();
    users.dedup();
    let stored = state
        .run(move |engine| engine.store_prepared(checked, &ahead, flush))
        .await?;
    // Stored durably; searchable once indexed, beside the searches of others.
    state.index(users).await?;
    Ok(stored)
}

/// Appends turns (kept verbatim; embedded, segmented and indexed before the response). A batch is
/// stored whole or not at all; re-sending a turn is safe (stable ids).
#[utoipa::path(post, path = "/v1/turns", tag = TAG, request_body = AppendTurns,
    security(("token" = [])), responses(
    (status = 200, body = Appended),
    (status = "4XX", body = ErrorBody)
))]
async fn append_turns(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<AppendTurns>,
) -> Result<axum::Json<Appended>, ApiError> {
    let scope = match (&caller.grant, body.user_id) {
        (_, Some(user)) => Some(caller.filter(Some(user), body.agent_id, body.run_id)?),
        (Grant::User(own), None) => {
            Some(caller.filter(Some(own.clone()), body.agent_id, body.run_id)?)
        }
        (Grant::Admin, None) => None,
    };
    let defaults = TurnDefaults {
        scope: scope
            .map(|f| Scope::new(f.user_id, f.agent_id, f.run_id))
            .transpose()
            .map_err(|e| ApiError::bad_request(e.to_string()))?,
        conversation: body.conversation.unwrap_or_else(|| "default".into()),
        ..Default::default()
    };
    Ok(axum::Json(
        store_turns(&state, &caller, defaults, body.turns, body.flush).await?,
    ))
}

/// A question to recall for, inside a scope.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SearchBody {
    query: String,
    user_id: Option<String>,
    agent_id: Option<String>,
    run_id: Option<String>,
    /// Units to return (1–1000; default from the configuration).
    k: Option<usize>,
    /// o200k tokens the returned texts may use together.
    budget: Option<usize>,
    /// When the question is asked (RFC 3339; default: the time of the request): relative dates
    /// in it ("last week") resolve against this.
    asked_at: Option<String>,
    /// Rank sessions instead of units: one result per session, its best unit (as `aril search
    /// --sessions`).
    #[serde(default)]
    sessions: bool,
    /// Mem0's filter language over metadata keys and `created_at` / `updated_at` (the scope
    /// keys may be given here too): only memories that meet it are returned.
    #[schema(value_type = Option<Object>)]
    filters: Option<serde_json::Value>,
    /// Only turns at least this similar to the query (cosine of their own vector, 0–1; a turn
    /// of a role that is not embedded never is).
    threshold: Option<f32>,
}

pub(crate) fn check_k(k: Option<usize>) -> Result<Option<usize>, ApiError> {
    match k {
        Some(k) if !(1..=1000).contains(&k) => Err(ApiError::bad_request(format!(
            "k (top_k) must be between 1 and 1000, got {k}"
        ))),
        k => Ok(k),
    }
}

/// When a question is asked: the RFC 3339 time given, or a date's end (UTC) as `aril ask --at`
/// reads it ([`aril_engine::parse_asked_at`]), else the time of the request.
pub(crate) fn asked_at(at: Option<&str>) -> Result<chrono::DateTime<Utc>, ApiError> {
    Ok(match at {
        Some(at) => aril_engine::parse_asked_at(at)?,
        None => Utc::now(),
    })
}

pub(crate) fn check_query(query: &str) -> Result<(), ApiError> {
    if query.trim().is_empty() {
        return Err(ApiError::bad_request("query must not be empty"));
    }
    Ok(())
}

/// Recalls the turns most relevant to a query (hybrid dense + BM25 over turns and segments),
/// or with `"sessions": true` the sessions, one result each.
#[utoipa::path(post, path = "/v1/search", tag = TAG, request_body = SearchBody,
    security(("token" = [])), responses(
    (status = 200, description = "the recalled context", body = Object),
    (status = "4XX", body = ErrorBody)
))]
async fn search(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<SearchBody>,
) -> Result<axum::Json<SearchResponse>, ApiError> {
    check_query(&body.query)?;
    let scope = ScopeArgs::named(
        body.user_id,
        body.agent_id,
        body.run_id,
        body.filters.as_ref(),
    )?;
    let (filter, condition) = scope.filter_and_condition(&caller)?;
    let request = SearchRequest {
        filter,
        query: body.query,
        k: check_k(body.k)?,
        budget: body.budget,
        asked_at: Some(asked_at(body.asked_at.as_deref())?),
        condition,
        threshold: body.threshold,
    };
    let sessions = body.sessions;
    Ok(axum::Json(
        state
            .read(move |engine| {
                if sessions {
                    engine.search_sessions(&request)
                } else {
                    engine.search(&request)
                }
            })
            .await?,
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct PageParams {
    user_id: Option<String>,
    agent_id: Option<String>,
    run_id: Option<String>,
    #[serde(default)]
    offset: u64,
    limit: Option<u64>,
}

impl PageParams {
    /// The page's length: `limit`, 100 when absent, at most 1,000.
    fn page_limit(&self) -> u64 {
        self.limit.unwrap_or(100).clamp(1, 1000)
    }
}

#[derive(Serialize, ToSchema)]
struct TurnPage {
    total: u64,
    #[schema(value_type = Vec<Object>)]
    turns: Vec<Turn>,
}

/// A page of a scope's turns in store order (every version of an edited memory).
#[utoipa::path(get, path = "/v1/turns", tag = TAG, params(PageParams),
    security(("token" = [])), responses(
    (status = 200, body = TurnPage),
    (status = "4XX", body = ErrorBody)
))]
async fn list_turns(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(p): ApiQuery<PageParams>,
) -> Result<axum::Json<TurnPage>, ApiError> {
    let limit = p.page_limit();
    let filter = caller.filter(p.user_id, p.agent_id, p.run_id)?;
    let (turns, total) = state
        .read(move |engine| engine.list_turns(&filter, p.offset, limit))
        .await?;
    Ok(axum::Json(TurnPage { total, turns }))
}

#[derive(Serialize, ToSchema)]
struct SegmentPage {
    total: u64,
    #[schema(value_type = Vec<Object>)]
    segments: Vec<Segment>,
}

/// A page of a scope's closed segments in store order (`offset`, `limit`: default 100, at most
/// 1,000), with how many the scope has in all.
#[utoipa::path(get, path = "/v1/segments", tag = TAG, params(PageParams),
    security(("token" = [])), responses(
    (status = 200, body = SegmentPage),
    (status = "4XX", body = ErrorBody)
))]
async fn list_segments(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(p): ApiQuery<PageParams>,
) -> Result<axum::Json<SegmentPage>, ApiError> {
    let limit = p.page_limit();
    let filter = caller.filter(p.user_id, p.agent_id, p.run_id)?;
    let (segments, total) = state
        .read(move |engine| engine.segments(&filter, p.offset, limit))
        .await?;
    Ok(axum::Json(SegmentPage { total, segments }))
}

/// The scope's stable preferences and traits, newest first (from cards: empty until an encoder
/// has written some).
#[utoipa::path(get, path = "/v1/profile", tag = TAG, params(ScopeParams),
    security(("token" = [])), responses(
    (status = 200, body = Object),
    (status = "4XX", body = ErrorBody)
))]
async fn profile(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(p): ApiQuery<ScopeParams>,
) -> Result<axum::Json<Profile>, ApiError> {
    let filter = caller.filter(p.user_id, p.agent_id, p.run_id)?;
    Ok(axum::Json(
        state.read(move |engine| engine.profile(&filter)).await?,
    ))
}

/// Deletes a scope: its turns, segments, index entries and cached vectors, from every file.
#[utoipa::path(delete, path = "/v1/scopes", tag = TAG, params(ScopeParams),
    security(("token" = [])), responses(
    (status = 200, description = "what was deleted", body = Object),
    (status = "4XX", body = ErrorBody)
))]
async fn delete_scope(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(p): ApiQuery<ScopeParams>,
) -> Result<axum::Json<DeleteReport>, ApiError> {
    let filter = caller.filter(p.user_id, p.agent_id, p.run_id)?;
    Ok(axum::Json(
        state.run(move |engine| engine.delete(&filter)).await?,
    ))
}

/// Store-wide counts: for admin keys only, since they span users.
#[utoipa::path(get, path = "/v1/stats", tag = TAG, security(("token" = [])), responses(
    (status = 200, body = Object),
    (status = "4XX", body = ErrorBody)
))]
async fn stats(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<axum::Json<serde_json::Value>, ApiError> {
    if caller.grant != Grant::Admin {
        return Err(ApiError::forbidden(
            "stats span every user: use an admin key",
        ));
    }
    let stats = state.read(|engine| engine.stats()).await?;
    serde_json::to_value(stats)
        .map(axum::Json)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// When a memory stops holding.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
struct ForgetBody {
    /// From when it no longer holds: RFC 3339, or a date (from that day's start, UTC).
    /// Default: now.
    at: Option<String>,
}

/// Marks a memory as no longer holding from `at` (default now), without deleting it: recall
/// asked from then on leaves it out, its history shows until when it held, and listings show it
/// with its `valid_to`. Written as a new version with the same text; refused (409) for an
/// immutable memory.
#[utoipa::path(post, path = "/v1/memories/{id}/forget", tag = TAG, params(("id" = String, Path)),
    request_body = ForgetBody, security(("token" = [])), responses(
    (status = 200, body = crate::memory::Memory),
    (status = "4XX", body = ErrorBody)
))]
async fn forget(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<axum::Json<crate::memory::Memory>, ApiError> {
    // No body at all is the same as `{}`: forgotten from now.
    let body: ForgetBody = match body.iter().all(u8::is_ascii_whitespace) {
        true => ForgetBody::default(),
        false => serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("bad request body: {e}")))?,
    };
    let at = match body.at.as_deref() {
        Some(at) => parse_valid_to(at)?,
        None => Utc::now(),
    };
    Ok(axum::Json(
        crate::memory::set_validity(&state, &caller, id, Some(at)).await?,
    ))
}

/// Undoes a forgetting: the memory holds again (a new version that says so).
#[utoipa::path(post, path = "/v1/memories/{id}/restore", tag = TAG, params(("id" = String, Path)),
    security(("token" = [])), responses(
    (status = 200, body = crate::memory::Memory),
    (status = "4XX", body = ErrorBody)
))]
async fn restore(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<crate::memory::Memory>, ApiError> {
    Ok(axum::Json(
        crate::memory::set_validity(&state, &caller, id, None).await?,
    ))
}
