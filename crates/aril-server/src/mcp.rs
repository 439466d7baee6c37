//! The MCP server: aril's memory as tools an LLM agent calls, over stdio (`aril mcp`) or
//! streamable HTTP at `/mcp` under `aril serve`. Tool and argument names follow Mem0's MCP server
//! (`add_memory`, `search_memories`, … with `user_id`, `agent_id`, `run_id`, `query`, `memory_id`,
//! `filters`, `top_k`), plus `append_turns` and `recall_context` for aril's own verbatim model.
//!
//! Over HTTP the caller is the API key's grant, put in the request by an axum layer; over stdio the
//! local process is trusted as an admin (it could open the data directory itself), so every tool
//! still names its user.

use aril_engine::{
    Condition, Grant, MemoryEdit, Metadata, SearchRequest, TurnDefaults, TurnIn, parse_expiry,
    parse_lifecycle, parse_valid_to,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::schemars::{self, JsonSchema};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::auth::Caller;
use crate::mem0::{AddOptions, Message, ScopeArgs, add_messages, guidance, page_of, search_scope};
use crate::memory::{
    delete_memory, history, memory_by_id, set_validity, update_memory, update_time,
};
use crate::native::{asked_at, check_k, check_query, store_turns};
use crate::{ApiError, AppState};

/// The MCP service over one engine.
#[derive(Clone)]
pub struct MemoryTools {
    state: AppState,
    /// The caller when the transport carries no API key (stdio); `None` over HTTP.
    local: Option<Caller>,
}

impl MemoryTools {
    /// Tools for the local process (stdio): acts as an admin, every call names its user.
    pub fn local(state: AppState) -> Self {
        Self {
            state,
            local: Some(Caller {
                grant: Grant::Admin,
            }),
        }
    }

    /// Tools behind `aril serve`: each call acts with the grant of the request's API key.
    pub fn http(state: AppState) -> Self {
        Self { state, local: None }
    }

    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, ApiError> {
        let from_http = ctx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Caller>())
            .cloned();
        from_http
            .or_else(|| self.local.clone())
            .ok_or_else(|| ApiError::unauthorized("no API key on this MCP request"))
    }
}

/// A tool's answer: its JSON on success, `{"code", "message"}` marked as an error otherwise, so
/// the model reads what went wrong and what to do.
fn answer<T: Serialize>(result: Result<T, ApiError>) -> Result<CallToolResult, rmcp::ErrorData> {
    Ok(
        match result
            .and_then(|v| serde_json::to_value(v).map_err(|e| ApiError::internal(e.to_string())))
        {
            Ok(v) => CallToolResult::structured(v),
            Err(e) => {
                CallToolResult::structured_error(json!({"code": e.code, "message": e.message}))
            }
        },
    )
}

/// Scope arguments every tool takes.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ScopeArgsIn {
    /// The user whose memories these are. Required unless the API key is bound to a user.
    pub user_id: Option<String>,
    /// Narrow to one agent of the user.
    pub agent_id: Option<String>,
    /// Narrow to one run (conversation) of the user.
    pub run_id: Option<String>,
    /// Mem0 filters: the scope (`{"user_id": …}`, or inside a top-level `AND`) and, for
    /// searching and listing, conditions on metadata keys and `created_at` / `updated_at`, e.g.
    /// `{"AND": [{"user_id": "sam"}, {"category": {"in": ["food", "travel"]}}]}` (operators eq, ne,
    /// in, nin, gt, gte, lt, lte, contains, icontains; "*" for any value; AND, OR, NOT).
    pub filters: Option<Value>,
}

impl ScopeArgsIn {
    fn args(self) -> Result<ScopeArgs, ApiError> {
        ScopeArgs::named(
            self.user_id,
            self.agent_id,
            self.run_id,
            self.filters.as_ref(),
        )
    }

    /// The scope; filters beyond it are refused (the tool takes none).
    fn resolve(self, caller: &Caller) -> Result<aril_engine::ScopeFilter, ApiError> {
        self.args()?.filter(caller)
    }

    /// The scope and the condition the filters set on its memories.
    fn resolve_with_condition(
        self,
        caller: &Caller,
    ) -> Result<(aril_engine::ScopeFilter, Option<Condition>), ApiError> {
        self.args()?.filter_and_condition(caller)
    }
}

/// A tool's `metadata` argument, checked (an object of at most 16 KiB, without the key `aril`).
fn metadata_arg(m: Option<Map<String, Value>>) -> Result<Option<Metadata>, ApiError> {
    m.map(|m| Metadata::try_from(Value::Object(m)))
        .transpose()
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddMemoryArgs {
    /// The conversation to remember, as `[{"role": "user", "content": "…"}, …]`.
    pub messages: Option<Vec<Message>>,
    /// A single user message to remember, instead of `messages`.
    pub text: Option<String>,
    /// A JSON object kept with every message and returned with each memory, e.g.
    /// `{"source": "email"}`.
    pub metadata: Option<Map<String, Value>>,
    /// When the memories expire: a date `YYYY-MM-DD` (through that day, UTC) or RFC 3339.
    pub expiration_date: Option<String>,
    /// True: the memories cannot be updated (only deleted).
    #[serde(default)]
    pub immutable: bool,
    /// Instructions for the encoder writing these memories (needs an encoder configured).
    pub custom_instructions: Option<String>,
    /// What the memories written should be about (needs an encoder).
    pub includes: Option<String>,
    /// What no memory written should be about (needs an encoder).
    pub excludes: Option<String>,
    /// Categories for the memories written, as `[{"name": "description"}, …]` (needs an
    /// encoder): their names go into the topics of the memories they fit.
    pub custom_categories: Option<Vec<Map<String, Value>>>,
    #[serde(flatten)]
    pub scope: ScopeArgsIn,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// What to look for, in natural language.
    pub query: String,
    /// How many memories to return (1–1000, default 10).
    pub top_k: Option<usize>,
    /// Only memories at least this similar to the query (cosine, 0–1).
    pub threshold: Option<f32>,
    #[serde(flatten)]
    pub scope: ScopeArgsIn,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListArgs {
    /// Page number, from 1.
    pub page: Option<u64>,
    /// Memories per page (1–1000, default 100).
    pub page_size: Option<u64>,
    #[serde(flatten)]
    pub scope: ScopeArgsIn,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MemoryIdArgs {
    /// The memory's id, as returned by add_memory, search_memories or get_memories.
    pub memory_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateArgs {
    /// The memory's id.
    pub memory_id: String,
    /// The new text (default: the current text). The memory keeps its id; the old version
    /// stays in its history.
    pub text: Option<String>,
    /// The new metadata, replacing the current version's whole (default: kept).
    pub metadata: Option<Map<String, Value>>,
    /// The new expiry: a date `YYYY-MM-DD` (through that day, UTC) or RFC 3339 (default: kept).
    pub expiration_date: Option<String>,
    /// When the change happened, RFC 3339 (e.g. `2024-03-01T10:00:00Z`); default now.
    pub at: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ForgetArgs {
    /// The memory's id.
    pub memory_id: String,
    /// From when it no longer holds: a date `YYYY-MM-DD` (from that day's start, UTC) or RFC
    /// 3339; default now.
    pub at: Option<String>,
    /// True: undo an earlier forgetting (the memory holds again); `at` must then be absent.
    #[serde(default)]
    pub restore: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TurnArg {
    /// `user`, `assistant`, `system` or `tool` (default `user`).
    pub role: Option<String>,
    /// The speaker's name, when there is one.
    pub speaker: Option<String>,
    /// The verbatim text.
    pub text: String,
    /// When it was said, RFC 3339 (e.g. `2024-03-01T10:00:00Z`); default now.
    pub at: Option<String>,
    /// A session (sitting) inside the conversation.
    pub session: Option<String>,
    /// A JSON object kept with the turn and returned with it.
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AppendTurnsArgs {
    /// The turns, in order. Kept verbatim forever; the same turn sent twice is stored once.
    pub turns: Vec<TurnArg>,
    /// The conversation (thread) they belong to (default: the run_id, else `mcp`).
    pub conversation: Option<String>,
    /// True when the conversation has ended: closes its open topic segment.
    #[serde(default)]
    pub flush: bool,
    #[serde(flatten)]
    pub scope: ScopeArgsIn,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RecallArgs {
    /// The question the context is for.
    pub query: String,
    /// o200k tokens the context may use (default: no limit beyond `k`).
    pub budget: Option<usize>,
    /// Units of context at most (default 10).
    pub k: Option<usize>,
    /// When the question is asked (RFC 3339, or a date for that day's end, UTC; default now):
    /// relative dates in it ("last week") count back from it.
    pub asked_at: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArgsIn,
}

#[derive(Serialize)]
struct Recalled {
    /// The context, ready to put in a prompt: one `[time] Speaker: text` line per turn.
    context: String,
    context_tokens: usize,
    results: Vec<aril_engine::SearchHit>,
}

#[derive(Serialize)]
struct Deleted {
    message: String,
}

#[tool_router(server_handler)]
impl MemoryTools {
    #[tool(
        description = "Remember a conversation or a single message for a user. Messages are kept verbatim; returns the stored memories with their ids."
    )]
    async fn add_memory(
        &self,
        Parameters(args): Parameters<AddMemoryArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                let filter = args.scope.resolve(&caller)?;
                let messages = match (args.messages, args.text) {
                    (Some(m), None) if !m.is_empty() => m,
                    (None, Some(t)) => vec![Message {
                        role: "user".into(),
                        content: Value::String(t),
                    }],
                    _ => {
                        return Err(ApiError::bad_request(
                            "give either `messages` (a non-empty list) or `text`",
                        ));
                    }
                };
                let options = AddOptions {
                    at: None,
                    infer: true,
                    metadata: metadata_arg(args.metadata)?,
                    lifecycle: parse_lifecycle(args.expiration_date.as_deref(), args.immutable)?,
                    guidance: guidance(
                        args.custom_instructions,
                        args.includes,
                        args.excludes,
                        args.custom_categories.map(|c| json!(c)).as_ref(),
                    )?,
                };
                add_messages(&self.state, &caller, filter, messages, options).await
            }
            .await,
        )
    }

    #[tool(
        description = "Search a user's memories for what is relevant to a query. Returns the best matches, each with its id, text, time and score."
    )]
    async fn search_memories(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                let (filter, condition) = args.scope.resolve_with_condition(&caller)?;
                let k = check_k(args.top_k)?;
                search_scope(
                    &self.state,
                    filter,
                    condition,
                    args.threshold,
                    args.query,
                    k,
                )
                .await
            }
            .await,
        )
    }

    #[tool(description = "List a user's memories, oldest first, a page at a time.")]
    async fn get_memories(
        &self,
        Parameters(args): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                let (filter, condition) = args.scope.resolve_with_condition(&caller)?;
                page_of(
                    &self.state,
                    filter,
                    condition,
                    args.page.unwrap_or(1),
                    args.page_size.unwrap_or(100),
                )
                .await
            }
            .await,
        )
    }

    #[tool(description = "Get one memory by its id.")]
    async fn get_memory(
        &self,
        Parameters(args): Parameters<MemoryIdArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                memory_by_id(&self.state, &caller, args.memory_id).await
            }
            .await,
        )
    }

    #[tool(
        description = "Change a memory's text, its metadata or both. The memory keeps its id; the change becomes its newest version (what search and get return) and the old version stays in its history."
    )]
    async fn update_memory(
        &self,
        Parameters(args): Parameters<UpdateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                let edit = MemoryEdit {
                    text: args.text,
                    metadata: metadata_arg(args.metadata)?,
                    expires_at: args
                        .expiration_date
                        .as_deref()
                        .map(parse_expiry)
                        .transpose()?
                        .map(Some),
                    valid_to: None,
                    at: update_time(args.at.map(Value::String))?,
                };
                update_memory(&self.state, &caller, args.memory_id, edit).await
            }
            .await,
        )
    }

    #[tool(
        description = "Delete one memory with every version of it, from every file. Other memories are kept."
    )]
    async fn delete_memory(
        &self,
        Parameters(args): Parameters<MemoryIdArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                let report = delete_memory(&self.state, &caller, args.memory_id).await?;
                Ok(json!({"message": "Memory deleted.", "deleted": report}))
            }
            .await,
        )
    }

    #[tool(
        description = "Mark one memory as no longer true from a time on (default now), without deleting it: searches asked from then on leave it out, and its history keeps it with the interval it held. Use when the user says a fact stopped being true (moved, changed jobs); restore: true undoes it."
    )]
    async fn forget_memory(
        &self,
        Parameters(args): Parameters<ForgetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                let valid_to = match (args.at.as_deref(), args.restore) {
                    (Some(_), true) => {
                        return Err(ApiError::bad_request(
                            "give at or restore, not both: restore undoes a forgetting",
                        ));
                    }
                    (Some(at), false) => Some(parse_valid_to(at)?),
                    (None, false) => Some(chrono::Utc::now()),
                    (None, true) => None,
                };
                set_validity(&self.state, &caller, args.memory_id, valid_to).await
            }
            .await,
        )
    }

    #[tool(description = "Every version of one memory, first to newest.")]
    async fn memory_history(
        &self,
        Parameters(args): Parameters<MemoryIdArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                let results = history(&self.state, &caller, args.memory_id).await?;
                Ok(json!({ "results": results }))
            }
            .await,
        )
    }

    #[tool(
        description = "Delete every memory of a scope (a user, or one agent or run of a user), from every file. A scope is required."
    )]
    async fn delete_all_memories(
        &self,
        Parameters(args): Parameters<ScopeArgsIn>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                if args.user_id.is_none()
                    && args.agent_id.is_none()
                    && args.run_id.is_none()
                    && args.filters.is_none()
                {
                    return Err(ApiError::bad_request(
                        "name the scope to delete: user_id (and optionally agent_id or run_id)",
                    ));
                }
                let filter = args.resolve(&caller)?;
                let report = self.state.run(move |e| e.delete(&filter)).await?;
                Ok(Deleted {
                    message: format!(
                        "deleted {} turns and {} segments",
                        report.turns, report.segments
                    ),
                })
            }
            .await,
        )
    }

    #[tool(
        description = "Append conversation turns verbatim (aril's native write): each with role, text and optional time. Returns their ids."
    )]
    async fn append_turns(
        &self,
        Parameters(args): Parameters<AppendTurnsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                let filter = args.scope.resolve(&caller)?;
                let defaults = TurnDefaults {
                    conversation: args
                        .conversation
                        .or_else(|| filter.run_id.clone())
                        .unwrap_or_else(|| "mcp".into()),
                    scope: Some(
                        aril_engine::Scope::new(filter.user_id, filter.agent_id, filter.run_id)
                            .map_err(|e| ApiError::bad_request(e.to_string()))?,
                    ),
                    ..Default::default()
                };
                let turns = args
                    .turns
                    .into_iter()
                    .map(|t| {
                        Ok(TurnIn {
                            role: t.role,
                            speaker: t.speaker,
                            text: t.text,
                            at: t.at,
                            session: t.session,
                            metadata: metadata_arg(t.metadata)?,
                            ..Default::default()
                        })
                    })
                    .collect::<Result<_, ApiError>>()?;
                store_turns(&self.state, &caller, defaults, turns, args.flush).await
            }
            .await,
        )
    }

    #[tool(
        description = "Recall the context relevant to a question, as prompt-ready lines with their times, within a token budget."
    )]
    async fn recall_context(
        &self,
        Parameters(args): Parameters<RecallArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        answer(
            async {
                let caller = self.caller(&ctx)?;
                check_query(&args.query)?;
                let request = SearchRequest {
                    filter: args.scope.resolve(&caller)?,
                    query: args.query,
                    k: check_k(args.k)?,
                    budget: args.budget,
                    asked_at: Some(asked_at(args.asked_at.as_deref())?),
                    condition: None,
                    threshold: None,
                };
                let response = self.state.read(move |e| e.search(&request)).await?;
                let context = response
                    .results
                    .iter()
                    .map(|h| match h.time {
                        Some(t) => format!("[{}] {}", t.format("%Y-%m-%d %H:%M"), h.text),
                        None => h.text.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                Ok(Recalled {
                    context,
                    context_tokens: response.context_tokens,
                    results: response.results,
                })
            }
            .await,
        )
    }
}
