//! One memory by id, as Mem0 clients and the MCP tools read, update, delete and trace it
//! (`GET|PUT|DELETE /v1/memories/{id}/`, `GET /v1/memories/{id}/history/` and the open-source
//! server's `/memories/{id}` forms).
//!
//! A memory's id is the turn id of its first version and never changes. An update appends a new
//! version (a new turn); history lists every version; a delete removes all of them from every file.
//! A memory of another user is reported as missing, not as forbidden: no existence leak.
//!
//! Card memories (what `add` returns once an encoder writes cards; ids `c_…`) follow the same
//! rules over a supersession chain: the id is the first card's, an update appends a card that
//! supersedes the newest, a delete removes every card of the chain (the turns they came from stay).

use aril_core::Metadata;
pub(crate) use aril_engine::{Deletion, HistoryEntry};
use aril_engine::{MemoryEdit, parse_expiry};
use axum::extract::{Path, State};
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Caller;
use crate::error::ErrorBody;
use crate::extract::ApiJson;
use crate::{ApiError, AppState};

/// The OpenAPI tag of these routes (Mem0's).
const TAG: &str = "mem0";

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_one, update_one, delete_one))
        .route(
            "/memories/{id}",
            get(get_one).put(update_one).delete(delete_one),
        )
        .routes(routes!(history_of))
        .route("/memories/{id}/history", get(history_of))
}

/// A memory as Mem0 clients read it (the engine's record of it).
pub(crate) use aril_engine::MemoryRecord as Memory;

/// True for the user ids this caller may read.
fn access(caller: &Caller) -> impl Fn(&str) -> bool + use<> {
    let caller = caller.clone();
    move |user| caller.may_access(user)
}

/// One memory by id, as it stands now.
pub(crate) async fn memory_by_id(
    state: &AppState,
    caller: &Caller,
    id: String,
) -> Result<Memory, ApiError> {
    let access = access(caller);
    state.read(move |engine| engine.record(&id, &access)).await
}

/// Writes the memory's next version; returns the memory as it now stands.
pub(crate) async fn update_memory(
    state: &AppState,
    caller: &Caller,
    id: String,
    edit: MemoryEdit,
) -> Result<Memory, ApiError> {
    let access = access(caller);
    state
        .run(move |engine| engine.update_record(&id, &edit, &access))
        .await
}

/// Marks a memory as no longer holding from `valid_to`, or (`None`) as holding again; returns
/// the memory as it now stands.
pub(crate) async fn set_validity(
    state: &AppState,
    caller: &Caller,
    id: String,
    valid_to: Option<DateTime<Utc>>,
) -> Result<Memory, ApiError> {
    let access = access(caller);
    state
        .run(move |engine| engine.set_record_validity(&id, valid_to, &access))
        .await
}

/// Deletes a memory with every version, from every file.
pub(crate) async fn delete_memory(
    state: &AppState,
    caller: &Caller,
    id: String,
) -> Result<Deletion, ApiError> {
    let access = access(caller);
    state
        .run(move |engine| engine.delete_record(&id, &access))
        .await
}

/// Every version of a memory, first to newest.
pub(crate) async fn history(
    state: &AppState,
    caller: &Caller,
    id: String,
) -> Result<Vec<HistoryEntry>, ApiError> {
    let access = access(caller);
    state
        .read(move |engine| engine.record_history(&id, &access))
        .await
}

/// One memory as it stands now (its newest version).
#[utoipa::path(get, path = "/v1/memories/{id}/", tag = TAG, params(("id" = String, Path)),
    security(("token" = [])), responses(
    (status = 200, body = Memory), (status = "4XX", body = ErrorBody)))]
async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<Memory>, ApiError> {
    Ok(axum::Json(memory_by_id(&state, &caller, id).await?))
}

/// `PUT /v1/memories/{id}/`: `{"text": …}` (the `mem0ai` client; `data` or `memory` as the
/// open-source server's clients send it) and/or `metadata` (replacing the memory's whole),
/// optional `timestamp` (unix seconds or RFC 3339).
#[derive(Deserialize, ToSchema)]
struct UpdateBody {
    text: Option<String>,
    data: Option<String>,
    memory: Option<String>,
    /// A JSON object: the new version's metadata (default: the current version's).
    #[schema(value_type = Option<Object>)]
    metadata: Option<Metadata>,
    /// The new expiry (a date `YYYY-MM-DD`, through that day UTC, or RFC 3339); `null` removes
    /// it; absent keeps it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    expiration_date: Option<Option<String>>,
    /// Unix seconds or RFC 3339.
    timestamp: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Tells a field sent as `null` (`Some(None)`) from one left out (`None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// The time an update names: unix seconds (as Mem0 sends it) or RFC 3339.
pub(crate) fn update_time(v: Option<Value>) -> Result<Option<DateTime<Utc>>, ApiError> {
    let bad = |v: &Value| {
        ApiError::bad_request(format!(
            "timestamp {v}: give unix seconds or RFC 3339, e.g. 2024-03-01T10:00:00Z"
        ))
    };
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|s| s.is_finite())
            .and_then(|s| DateTime::from_timestamp(s.trunc() as i64, 0))
            .map(Some)
            .ok_or_else(|| bad(&Value::Number(n))),
        Some(Value::String(s)) => aril_engine::parse_time(&s)
            .map(Some)
            .map_err(ApiError::from),
        Some(other) => Err(bad(&other)),
    }
}

/// Writes a new version of a memory (same id; the old text stays in its history).
#[utoipa::path(put, path = "/v1/memories/{id}/", tag = TAG, params(("id" = String, Path)),
    request_body = UpdateBody, security(("token" = [])), responses(
    (status = 200, body = Memory), (status = "4XX", body = ErrorBody)))]
async fn update_one(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<UpdateBody>,
) -> Result<axum::Json<Memory>, ApiError> {
    if let Some(k) = body.rest.keys().next() {
        return Err(ApiError::bad_request(format!(
            "unknown field {k:?}: an update takes text (or data), metadata and expiration_date \
             (at least one), and optionally timestamp"
        )));
    }
    let text = body.text.or(body.data).or(body.memory);
    if text.is_none() && body.metadata.is_none() && body.expiration_date.is_none() {
        return Err(ApiError::bad_request(
            "an update needs new text ({\"text\": \"…\"}), new metadata or a new \
             expiration_date",
        ));
    }
    let expires_at = match body.expiration_date {
        None => None,
        Some(None) => Some(None),
        Some(Some(at)) => Some(Some(parse_expiry(&at)?)),
    };
    let edit = MemoryEdit {
        text,
        metadata: body.metadata,
        expires_at,
        valid_to: None,
        at: update_time(body.timestamp)?,
    };
    Ok(axum::Json(update_memory(&state, &caller, id, edit).await?))
}

#[derive(Serialize, ToSchema)]
struct Deleted {
    message: String,
}

/// Deletes a memory with every version, from every file.
#[utoipa::path(delete, path = "/v1/memories/{id}/", tag = TAG, params(("id" = String, Path)),
    security(("token" = [])), responses(
    (status = 200, body = Deleted), (status = "4XX", body = ErrorBody)))]
async fn delete_one(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<Deleted>, ApiError> {
    // Mem0's `delete_linked` asks to delete the versions a memory superseded too; aril always
    // deletes every version, so the query string has nothing to change.
    let report = delete_memory(&state, &caller, id).await?;
    Ok(axum::Json(Deleted {
        message: format!(
            "Memory deleted successfully! ({} versions)",
            report.versions()
        ),
    }))
}

/// Every version of a memory, first to newest.
#[utoipa::path(get, path = "/v1/memories/{id}/history/", tag = TAG, params(("id" = String, Path)),
    security(("token" = [])), responses(
    (status = 200, body = Vec<HistoryEntry>), (status = "4XX", body = ErrorBody)))]
async fn history_of(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<axum::Json<Vec<HistoryEntry>>, ApiError> {
    Ok(axum::Json(history(&state, &caller, id).await?))
}
