//! aril over HTTP. One process owns a data directory and serves:
//! - the native API (`/v1/turns`, `/v1/search`, `/v1/segments`, `/v1/scopes`, `/v1/stats`,
//!   `/health`, `/ready`), see [`native`];
//! - a Mem0-compatible API (the routes the `mem0ai` client and Mem0's open-source server use),
//!   see [`mem0`];
//! - an MCP server at `/mcp` (streamable HTTP), the same tools `aril mcp` serves over stdio, see
//!   [`mcp`];
//! - the memory inspector, HTML pages under `/ui` for a browser, see [`ui`];
//! - with `aril proxy`, an OpenAI-compatible chat endpoint in front of a model that recalls into
//!   and stores from every exchange, see [`proxy`].
//!
//! Every request but the health probes presents an API key; every scope comes from the key's
//! grant ([`auth`]). Engine calls run one at a time on the blocking pool ([`state`]); a write is
//! acknowledged only after it is committed durably.

mod auth;
mod consolidation;
mod error;
mod extract;
pub mod mcp;
pub mod mem0;
mod memory;
pub mod native;
pub mod proxy;
mod state;
mod sweep;
mod ui;

use std::future::Future;
use std::net::SocketAddr;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use utoipa_axum::router::OpenApiRouter;

pub use auth::Caller;
pub use consolidation::Consolidator;
pub use error::ApiError;
pub use proxy::{ProxyConfig, ProxyError};
pub use state::AppState;

/// Request bodies above this are refused with 413 (a batch of turns, not a data dump).
pub const MAX_BODY_BYTES: usize = 8 << 20;

/// Errors that stop the server itself.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}; pick another --bind address or stop what holds it")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the server failed: {0}")]
    Serve(std::io::Error),
    #[error("the MCP session failed: {0}")]
    Mcp(String),
    #[error(
        "refusing to serve without API keys on {0}: it is not a loopback address; create a key \
         with `aril keys create --user USER` or bind to 127.0.0.1"
    )]
    OpenOnNetwork(SocketAddr),
}

/// The OpenAPI document's frame; the paths come from the handlers' `#[utoipa::path]`.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "aril", description = "Long-term memory for LLM agents: the native API and a Mem0-compatible API."),
    modifiers(&TokenAuth),
    tags(
        (name = "native", description = "aril's own API: verbatim turns, recall, segments, scopes"),
        (name = "mem0", description = "Mem0-compatible routes (mem0ai 2.2.1; older and open-source forms are aliases)")
    )
)]
struct ApiDoc;

/// API keys travel as `Authorization: Token KEY` (or `Bearer KEY`, or `X-API-Key: KEY`).
struct TokenAuth;

impl utoipa::Modify for TokenAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "token",
                SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                    "Authorization",
                    "`Token KEY`, with a key from `aril keys create`",
                ))),
            );
    }
}

/// The OpenAPI document of the HTTP API (what `/openapi.json` serves).
pub fn openapi() -> utoipa::openapi::OpenApi {
    api_routes().split_for_parts().1
}

fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(<ApiDoc as utoipa::OpenApi>::openapi())
        .merge(native::routes())
        .merge(mem0::routes())
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    let tools = state.clone();
    let mcp = Router::new()
        .nest_service(
            "/mcp",
            StreamableHttpService::new(
                move || Ok(mcp::MemoryTools::http(tools.clone())),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            ),
        )
        .layer(middleware::from_fn_with_state(state.clone(), require_key));
    let (api, doc) = api_routes().split_for_parts();
    let doc = Arc::new(doc);
    api.route(
        "/openapi.json",
        get(move || {
            let doc = doc.clone();
            async move { axum::Json(doc.as_ref().clone()) }
        }),
    )
    .fallback(|| async { ApiError::not_found("no such route: see the README for the API") })
    .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
    .with_state(state.clone())
    .merge(mcp)
    .merge(ui::routes(state))
}

/// Authenticates an MCP request and hands the caller to the tools through the request.
async fn require_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    match Caller::from_request_parts(&mut parts, &state).await {
        Ok(caller) => {
            parts.extensions.insert(caller);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) => e.into_response(),
    }
}

/// Serves the MCP tools over stdin/stdout until the client closes them.
pub async fn serve_mcp_stdio(state: AppState) -> Result<(), ServerError> {
    let running = mcp::MemoryTools::local(state)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServerError::Mcp(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServerError::Mcp(e.to_string()))?;
    Ok(())
}

/// Refuses an open (key-less) server anywhere but on loopback.
pub fn check_open_bind(addr: SocketAddr, auth: bool) -> Result<(), ServerError> {
    if !auth && !addr.ip().is_loopback() {
        return Err(ServerError::OpenOnNetwork(addr));
    }
    Ok(())
}

/// The whole API and the proxy's chat routes ([`proxy`]) on one engine.
pub fn proxy_router(state: AppState, config: ProxyConfig) -> Result<Router, ProxyError> {
    Ok(router(state.clone()).merge(proxy::routes(state, config)?))
}

/// Binds `addr` and serves [`router`] until `shutdown` resolves; requests in flight finish
/// first. `ready` gets the bound address (useful with port 0).
pub async fn serve(
    state: AppState,
    addr: SocketAddr,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let app = router(state.clone());
    serve_router(state, app, addr, ready, shutdown).await
}

/// [`serve`] with another router over the same state (e.g. [`proxy_router`]).
pub async fn serve_router(
    state: AppState,
    app: Router,
    addr: SocketAddr,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    check_open_bind(addr, state.auth)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServerError::Bind { addr, source })?;
    ready(bound);
    let sweeper = tokio::spawn(sweep::sweep_periodically(state.clone()));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServerError::Serve);
    sweeper.abort();
    // Its state is dropped before the server's own, as it was before the sweeper existed.
    let _ = sweeper.await;
    served
}
