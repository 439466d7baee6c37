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

use aril_core::{Card, CardId, METADATA_RESERVED_KEY, Metadata, Turn, TurnId};
use aril_engine::{
    CardMemory, DeleteReport, Engine, EngineError, MemoryEdit, MemoryView, Role, parse_expiry,
};
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

/// A memory as Mem0 clients read it.
#[derive(Serialize, ToSchema)]
pub(crate) struct Memory {
    pub(crate) id: String,
    pub(crate) memory: String,
    pub(crate) user_id: String,
    pub(crate) agent_id: Option<String>,
    pub(crate) run_id: Option<String>,
    /// Who said it (a turn memory); none for a card, which may draw on several turns.
    #[schema(value_type = Option<String>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<Role>,
    pub(crate) metadata: Option<Value>,
    pub(crate) categories: Vec<String>,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) score: Option<f32>,
}

impl Memory {
    pub(crate) fn from_view(v: MemoryView) -> Self {
        let t = v.current;
        Self {
            id: v.id.0,
            created_at: v.created,
            updated_at: t.ingest_time,
            memory: t.turn.text,
            user_id: t.turn.scope.user_id,
            agent_id: t.turn.scope.agent_id,
            run_id: t.turn.scope.run_id,
            role: Some(t.turn.role),
            metadata: t.turn.metadata.map(Value::from),
            categories: Vec::new(),
            score: None,
        }
    }

    /// A card memory as it stands now: its newest card's text and topics, dated by the turns
    /// its first and newest cards came from. Its metadata is what clients attached to the turns
    /// the newest card came from (merged), with aril's details of the card (kind, entities,
    /// topics, time, source turns, card id) under the reserved key `aril`.
    fn from_cards(engine: &Engine, memory: &CardMemory) -> Result<Option<Self>, EngineError> {
        let (Some(first), Some(card)) = (memory.versions.first(), memory.current()) else {
            return Ok(None);
        };
        let sources = engine.turns(&card.source_turns)?;
        let mut metadata =
            Metadata::merged(sources.iter().filter_map(|t| t.turn.metadata.as_ref()))
                .map(|m| m.as_map().clone())
                .unwrap_or_default();
        metadata.insert(
            METADATA_RESERVED_KEY.into(),
            serde_json::json!({
                "type": card.kind,
                "entities": card.entities,
                "topics": card.topics,
                "time": card.time,
                "source_turns": card.source_turns,
                "card_id": card.id,
            }),
        );
        Ok(Some(Self {
            id: memory.id.0.clone(),
            memory: card.text.clone(),
            user_id: card.scope.user_id.clone(),
            agent_id: card.scope.agent_id.clone(),
            run_id: card.scope.run_id.clone(),
            role: None,
            metadata: Some(Value::Object(metadata)),
            categories: card.topics.clone(),
            created_at: said_at(engine, first)?,
            updated_at: latest(&sources),
            score: None,
        }))
    }
}

/// When the newest turn a card came from was said (else stored); now when none is left.
fn said_at(engine: &Engine, card: &Card) -> Result<DateTime<Utc>, EngineError> {
    Ok(latest(&engine.turns(&card.source_turns)?))
}

/// When the newest of these turns was said (else stored); now when there is none.
fn latest(turns: &[Turn]) -> DateTime<Utc> {
    turns
        .iter()
        .map(|t| t.turn.event_time.unwrap_or(t.ingest_time))
        .max()
        .unwrap_or_else(Utc::now)
}

/// Card memory ids are card ids (`c_…`); every other id is a turn memory's.
fn is_card(id: &str) -> bool {
    id.starts_with("c_")
}

/// The card memory with this id (any of its versions' ids) in the caller's grant.
fn card_versions(engine: &Engine, caller: &Caller, id: &str) -> Result<CardMemory, EngineError> {
    engine
        .card_memory(&CardId(id.to_string()))?
        .filter(|m| {
            m.versions
                .first()
                .is_some_and(|c| caller.may_access(&c.scope.user_id))
        })
        .ok_or_else(|| EngineError::UnknownMemory(id.to_string()))
}

/// One version in a memory's history (the shape of Mem0's history entries).
#[derive(Serialize, ToSchema)]
pub(crate) struct HistoryEntry {
    /// The version's own turn id.
    id: String,
    memory_id: String,
    version: u32,
    old_memory: Option<String>,
    new_memory: String,
    /// `ADD` for the first version, `UPDATE` for the others.
    event: &'static str,
    user_id: String,
    #[schema(value_type = Option<String>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<Role>,
    /// What the version carried (a turn memory's; none for a card's).
    #[schema(value_type = Option<Object>)]
    metadata: Option<Metadata>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    is_deleted: bool,
}

/// The versions of a memory in the caller's grant, first to newest.
fn versions(engine: &Engine, caller: &Caller, id: &str) -> Result<Vec<Turn>, EngineError> {
    engine
        .memory(&TurnId(id.to_string()))?
        .filter(|v| {
            v.first()
                .is_some_and(|t| caller.may_access(&t.turn.scope.user_id))
        })
        .ok_or_else(|| EngineError::UnknownMemory(id.to_string()))
}

fn view(versions: Vec<Turn>) -> Option<MemoryView> {
    let first = versions.first()?;
    let (id, created) = (
        first.id.clone(),
        first.turn.event_time.unwrap_or(first.ingest_time),
    );
    versions.into_iter().last().map(|current| MemoryView {
        id,
        current,
        created,
    })
}

/// One memory by id, as it stands now.
pub(crate) async fn memory_by_id(
    state: &AppState,
    caller: &Caller,
    id: String,
) -> Result<Memory, ApiError> {
    let caller = caller.clone();
    let found = state
        .read(move |engine| {
            if is_card(&id) {
                let memory = card_versions(engine, &caller, &id)?;
                return Memory::from_cards(engine, &memory);
            }
            Ok(view(versions(engine, &caller, &id)?).map(Memory::from_view))
        })
        .await?;
    found.ok_or_else(|| ApiError::not_found("no memory with this id in your scope"))
}

/// Writes the memory's next version; returns the memory as it now stands. A card memory takes
/// new text only: its metadata is that of the turns it was written from.
pub(crate) async fn update_memory(
    state: &AppState,
    caller: &Caller,
    id: String,
    edit: MemoryEdit,
) -> Result<Memory, ApiError> {
    let caller = caller.clone();
    if is_card(&id) && edit.metadata.is_some() {
        return Err(ApiError::bad_request(
            "a card memory's metadata is that of the turns it was written from: update those \
             turns' memories, or send only the text",
        ));
    }
    let found = state
        .run(move |engine| {
            if is_card(&id) {
                let memory = card_versions(engine, &caller, &id)?;
                let sources = memory.current().map(|c| c.source_turns.clone());
                if engine
                    .turns(&sources.unwrap_or_default())?
                    .iter()
                    .any(|t| t.turn.lifecycle.immutable)
                {
                    return Err(EngineError::ImmutableMemory(id));
                }
                let Some(text) = edit.text.as_deref() else {
                    return Err(aril_core::InvalidInput(
                        "an update of a card memory needs the new text".into(),
                    )
                    .into());
                };
                let memory = engine.update_card_memory(&memory.id, text)?;
                return Memory::from_cards(engine, &memory);
            }
            let mut all = versions(engine, &caller, &id)?;
            let new = engine.update_memory(&TurnId(id.clone()), &edit)?;
            all.push(new);
            Ok(view(all).map(Memory::from_view))
        })
        .await?;
    found.ok_or_else(|| ApiError::not_found("no memory with this id in your scope"))
}

/// Deletes a memory with every version, from every file.
pub(crate) async fn delete_memory(
    state: &AppState,
    caller: &Caller,
    id: String,
) -> Result<Deletion, ApiError> {
    let caller = caller.clone();
    state
        .run(move |engine| {
            if is_card(&id) {
                let memory = card_versions(engine, &caller, &id)?;
                let cards = engine.delete_card_memory(&memory.id)?;
                return Ok(Deletion::Cards { cards });
            }
            versions(engine, &caller, &id)?;
            Ok(Deletion::Turns(engine.delete_memory(&TurnId(id))?))
        })
        .await
}

/// What deleting one memory removed: a turn memory's turns (and what they left behind), or a
/// card memory's cards.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum Deletion {
    Turns(DeleteReport),
    Cards { cards: u64 },
}

impl Deletion {
    /// The memory's versions that were removed.
    pub(crate) fn versions(&self) -> u64 {
        match self {
            Deletion::Turns(report) => report.turns,
            Deletion::Cards { cards } => *cards,
        }
    }
}

/// Every version of a memory, first to newest.
pub(crate) async fn history(
    state: &AppState,
    caller: &Caller,
    id: String,
) -> Result<Vec<HistoryEntry>, ApiError> {
    let caller = caller.clone();
    if is_card(&id) {
        return state
            .read(move |engine| {
                let memory = card_versions(engine, &caller, &id)?;
                card_history(engine, &memory)
            })
            .await;
    }
    let all = state
        .read(move |engine| versions(engine, &caller, &id))
        .await?;
    let memory_id = all.first().map(|t| t.id.0.clone()).unwrap_or_default();
    let mut previous: Option<String> = None;
    Ok(all
        .into_iter()
        .zip(1..)
        .map(|(t, version)| {
            let entry = HistoryEntry {
                id: t.id.0,
                memory_id: memory_id.clone(),
                version,
                old_memory: previous.take(),
                new_memory: t.turn.text.clone(),
                event: if version == 1 { "ADD" } else { "UPDATE" },
                user_id: t.turn.scope.user_id,
                role: Some(t.turn.role),
                metadata: t.turn.metadata.clone(),
                created_at: t.turn.event_time.unwrap_or(t.ingest_time),
                updated_at: t.ingest_time,
                is_deleted: false,
            };
            previous = Some(t.turn.text);
            entry
        })
        .collect())
}

/// Every card of a card memory, first to newest, as history entries.
fn card_history(engine: &Engine, memory: &CardMemory) -> Result<Vec<HistoryEntry>, EngineError> {
    let mut previous: Option<String> = None;
    let mut entries = Vec::with_capacity(memory.versions.len());
    for (card, version) in memory.versions.iter().zip(1..) {
        let at = said_at(engine, card)?;
        entries.push(HistoryEntry {
            id: card.id.0.clone(),
            memory_id: memory.id.0.clone(),
            version,
            old_memory: previous.replace(card.text.clone()),
            new_memory: card.text.clone(),
            event: if version == 1 { "ADD" } else { "UPDATE" },
            user_id: card.scope.user_id.clone(),
            role: None,
            metadata: None,
            created_at: at,
            updated_at: at,
            is_deleted: false,
        });
    }
    Ok(entries)
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
