//! aril over HTTP. One process owns a data directory and serves:
//! - the native API (`/v1/turns`, `/v1/search`, `/v1/segments`, `/v1/scopes`, `/v1/stats`,
//!   `/health`, `/ready`), see [`native`];
//! - a Mem0-compatible API (the routes the `mem0ai` client and Mem0's open-source server use),
//!   see [`mem0`].
//!
//! Every request but the health probes presents an API key; every scope comes from the key's
//! grant ([`auth`]). Engine calls run one at a time on the blocking pool ([`state`]); a write is
//! acknowledged only after it is committed durably.

mod auth;
mod error;
mod extract;
pub mod mem0;
pub mod native;
mod state;

use std::future::Future;
use std::net::SocketAddr;

use axum::Router;
use axum::extract::DefaultBodyLimit;

pub use auth::Caller;
pub use error::ApiError;
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
    #[error(
        "refusing to serve without API keys on {0}: it is not a loopback address; create a key \
         with `aril keys create --user USER` or bind to 127.0.0.1"
    )]
    OpenOnNetwork(SocketAddr),
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    native::routes()
        .merge(mem0::routes())
        .fallback(|| async { ApiError::not_found("no such route: see the README for the API") })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Refuses an open (key-less) server anywhere but on loopback.
pub fn check_open_bind(addr: SocketAddr, auth: bool) -> Result<(), ServerError> {
    if !auth && !addr.ip().is_loopback() {
        return Err(ServerError::OpenOnNetwork(addr));
    }
    Ok(())
}

/// Binds `addr` and serves until `shutdown` resolves; requests in flight finish first. `ready`
/// gets the bound address (useful with port 0).
pub async fn serve(
    state: AppState,
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
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServerError::Serve)
}
