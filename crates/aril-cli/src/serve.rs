//! `aril serve`, `aril proxy`, `aril mcp` and `aril keys`: open the engine, hand it to `aril-server`, stop
//! cleanly on Ctrl-C or SIGTERM (requests in flight finish; every acknowledged write is already
//! durable).

use anyhow::{Context, bail};
use aril_engine::{Engine, StoreAt};
use std::sync::Arc;

use aril_engine::llm::{ChatModel, Role};
use aril_server::{AppState, Consolidator, ProxyConfig};

use crate::args::{EncodeArgs, KeyCreateCmd, KeysCmd, ServeCmd, UiCmd};
use crate::models;

/// `aril serve`, and with a proxy configuration `aril proxy` (the same API plus the chat routes).
pub fn run(mut engine: Engine, cmd: &ServeCmd, proxy: Option<ProxyConfig>) -> anyhow::Result<()> {
    aril_server::check_open_bind(cmd.bind, !cmd.no_auth)?;
    let keys = engine.api_keys()?;
    if keys.is_empty() && !cmd.no_auth {
        bail!(
            "no API keys in this store: create one with `aril keys create --user USER` (or \
             `--admin`), or pass --no-auth to serve on loopback without keys"
        );
    }
    eprintln!("{}", memory_line(&engine)?);
    let llm = engine.config().llm.clone();
    // A cross-encoder reorders each plan path's head, as in `aril ask`; the playground shows how.
    if let Some(reranker) = models::reranker(&llm)? {
        eprintln!("planned recall reranks with {}", reranker.model());
        engine.set_reranker(Some(reranker));
    }
    let mut state = AppState::new(engine, !cmd.no_auth)?;
    let encoder = if cmd.no_consolidate {
        None
    } else {
        models::client(Role::Encoder, &llm)?
    };
    let consolidator = match encoder {
        Some(model) => {
            eprintln!(
                "consolidating closed segments in the background with {}",
                model.model()
            );
            let config = models::encode_config(&cmd.encode)?;
            let model: Arc<dyn aril_engine::llm::ChatModel> = Arc::new(model);
            state = state.with_encoder(model.clone(), config.clone());
            Some(Consolidator::start(state.clone(), model, config))
        }
        None => {
            eprintln!(
                "no background consolidation (no encoder in ARIL_LLM_*, or --no-consolidate): \
                 segments wait for `aril consolidate`"
            );
            None
        }
    };
    if let Some(planner) = models::client(Role::Planner, &llm)? {
        eprintln!(
            "the inspector's recall playground plans with {}",
            planner.model()
        );
        state = state.with_planner(Arc::new(planner));
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let app = match proxy {
        Some(config) => {
            eprintln!(
                "proxying /v1/chat/completions to {} with up to {} tokens of memory",
                config.upstream, config.budget
            );
            aril_server::proxy_router(state.clone(), config)?
        }
        None => aril_server::router(state.clone()),
    };
    let served = runtime.block_on(aril_server::serve_router(
        state,
        app,
        cmd.bind,
        |addr| {
            // The one line scripts wait for.
            println!("aril serving on http://{addr}");
            eprintln!("memory inspector: http://{addr}/ui");
            eprintln!("stop with Ctrl-C");
        },
        shutdown_signal(),
    ));
    if let Some(c) = consolidator {
        c.stop();
    }
    served?;
    eprintln!("aril stopped");
    Ok(())
}

/// `aril ui`: [`run`] on a loopback address without keys, for the local user's browser.
pub fn ui(engine: Engine, cmd: &UiCmd) -> anyhow::Result<()> {
    if !cmd.bind.ip().is_loopback() {
        bail!(
            "aril ui serves without keys, so only on a loopback address (got {}); to open the \
             inspector to a network, use `aril serve` with API keys: it serves /ui too",
            cmd.bind
        );
    }
    let serve = ServeCmd {
        bind: cmd.bind,
        no_auth: true,
        no_consolidate: cmd.no_consolidate,
        encode: EncodeArgs::default(),
    };
    run(engine, &serve, None)
}

/// `aril mcp`: the MCP tools over stdio, as the local user (stdout carries the protocol only).
pub fn mcp(engine: Engine) -> anyhow::Result<()> {
    // stdout carries the protocol; what is served goes to stderr.
    eprintln!("{}", memory_line(&engine)?);
    let state = AppState::new(engine, false)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(aril_server::serve_mcp_stdio(state))?;
    Ok(())
}

/// Where the memory about to be served lives and how much it holds, so that a server started
/// on the wrong data directory says at once that its memory is empty.
fn memory_line(engine: &Engine) -> anyhow::Result<String> {
    let stats = engine.stats()?.store;
    let place = match engine.store_at() {
        StoreAt::Embedded => format!("data directory {}", engine.dir().display()),
        pg => format!("store {}", pg.describe()),
    };
    Ok(if stats.turns == 0 {
        format!("memory: {place}, empty (no turns stored yet)")
    } else {
        format!(
            "memory: {place}, {} of {}",
            counted(stats.turns, "turn"),
            counted(stats.users, "user")
        )
    })
}

/// `1 turn`, `2 turns`.
fn counted(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

pub fn keys(mut engine: Engine, cmd: &KeysCmd) -> anyhow::Result<()> {
    match cmd {
        KeysCmd::Create(KeyCreateCmd { user, admin }) => {
            let user = if *admin { None } else { user.as_deref() };
            let key = engine.create_api_key(user)?;
            println!("{key}");
        }
        KeysCmd::List => {
            for k in engine.api_keys()? {
                let grant = match (&k.user_id, k.admin) {
                    (_, true) => "admin".to_string(),
                    (Some(u), false) => format!("user {u}"),
                    (None, false) => "nothing".to_string(),
                };
                println!("{}  {}  created {}", k.id, grant, k.created.to_rfc3339());
            }
        }
    }
    Ok(())
}
