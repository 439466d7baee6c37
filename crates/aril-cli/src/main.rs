//! `aril`: the command-line adapter over `aril-engine`. Parses flags into engine calls, draws
//! progress, prints tables or JSON. No memory logic lives here.

mod add;
mod alloc;
mod args;
mod ask;
mod bench;
mod bench_scale;
mod consolidate;
mod demo;
mod export;
mod import;
mod migrate_store;
mod models;
mod output;
mod progress;
mod serve;

use std::process::ExitCode;

use anyhow::Context;
use aril_engine::{Config, Engine, StoreAt};
use clap::Parser;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ARIL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    alloc::keep_freed_memory();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", message(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes joined by ": ", leaving out a cause whose text the message already
/// holds (many errors quote their source in their own text).
fn message(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    let mut config = match &cli.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(dir) = &cli.model_dir {
        config.model_dir = Some(dir.clone());
    }
    Ok(config)
}

/// The data directory and where the store lives, from `--store` and `--data-dir`.
fn store_at(cli: &Cli) -> (std::path::PathBuf, StoreAt) {
    match cli.store.as_deref() {
        None => (cli.data_dir.clone(), StoreAt::Embedded),
        Some(s) => parse_store(s, &cli.data_dir),
    }
}

/// A store named on the command line: a `postgres://` URL (with `dir` as its unused data
/// directory), else a data directory.
fn parse_store(s: &str, dir: &std::path::Path) -> (std::path::PathBuf, StoreAt) {
    match StoreAt::postgres(s) {
        Some(pg) => (dir.to_path_buf(), pg),
        None => (s.into(), StoreAt::Embedded),
    }
}

/// Whether a command may start a memory where there is none, or needs one there already.
#[derive(Clone, Copy)]
enum Open {
    /// Commands that write (`import`, `add`, `serve`…): a missing data directory is created.
    OrStart,
    /// Commands that read or maintain a memory: a data directory without one is an error (a
    /// mistyped `--data-dir` is not an empty memory).
    Existing,
}

fn open(cli: &Cli, how: Open) -> anyhow::Result<Engine> {
    let (dir, at) = store_at(cli);
    open_store(cli, &dir, &at, how)
}

/// `aril serve`'s engine: unless the configuration sets `embed_threads`, a write embeds on
/// every core but one, so searches keep a core meanwhile (docs/benchmarks.md, reads beside a
/// writer).
fn open_for_serving(cli: &Cli) -> anyhow::Result<Engine> {
    let (dir, at) = store_at(cli);
    let mut config = load_config(cli)?;
    config
        .embed_threads
        .get_or_insert_with(Config::cores_but_one);
    open_configured(config, &dir, &at, Open::OrStart)
}

/// An engine over the given store, with the command line's configuration.
fn open_store(cli: &Cli, dir: &std::path::Path, at: &StoreAt, how: Open) -> anyhow::Result<Engine> {
    open_configured(load_config(cli)?, dir, at, how)
}

fn open_configured(
    config: Config,
    dir: &std::path::Path,
    at: &StoreAt,
    how: Open,
) -> anyhow::Result<Engine> {
    let remote = models::remote_embedder(&config.llm)?;
    let engine = match how {
        Open::OrStart => Engine::open_at(dir, at, config, remote),
        Open::Existing => Engine::open_existing_at(dir, at, config, remote),
    };
    engine.with_context(|| match at {
        StoreAt::Embedded => format!("opening data directory {}", dir.display()),
        pg => format!("opening the store {}", pg.describe()),
    })
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match &cli.command {
        Command::Import(cmd) => import::run(open(&cli, Open::OrStart)?, cmd),
        Command::Add(cmd) => add::run(open(&cli, Open::OrStart)?, cmd),
        Command::Search(cmd) => output::search(open(&cli, Open::Existing)?, cmd),
        Command::Segments(cmd) => output::segments(&open(&cli, Open::Existing)?, cmd),
        Command::Profile(cmd) => output::profile(&mut open(&cli, Open::Existing)?, cmd),
        Command::Stats(cmd) => output::stats(&open(&cli, Open::Existing)?, cmd),
        Command::Export(cmd) => export::run(&open(&cli, Open::Existing)?, cmd),
        Command::Delete(cmd) => {
            let mut engine = open(&cli, Open::Existing)?;
            let filter = cmd.scope.filter()?;
            let (report, what) = match (&cmd.conversation, &cmd.session) {
                (Some(conversation), Some(session)) => (
                    engine.delete_session(&filter, conversation, Some(session))?,
                    format!(
                        "session {session:?} of conversation {conversation:?} of {}",
                        cmd.scope.describe()
                    ),
                ),
                _ => (engine.delete(&filter)?, cmd.scope.describe()),
            };
            println!(
                "deleted {} turns, {} segments and {} cached embeddings of {what}",
                report.turns, report.segments, report.embeddings,
            );
            Ok(())
        }
        Command::Forget(cmd) => {
            let mut engine = open(&cli, Open::Existing)?;
            let valid_to = match (&cmd.at, cmd.restore) {
                (_, true) => None,
                (Some(at), false) => Some(aril_engine::parse_valid_to(at)?),
                (None, false) => Some(chrono::Utc::now()),
            };
            let memory = engine.set_record_validity(&cmd.id, valid_to, &|_| true)?;
            if cmd.json {
                println!("{}", serde_json::to_string_pretty(&memory)?);
            } else {
                match memory.valid_to {
                    Some(to) => println!(
                        "memory {} no longer holds from {}: {}",
                        memory.id,
                        to.to_rfc3339(),
                        memory.memory
                    ),
                    None => println!("memory {} holds again: {}", memory.id, memory.memory),
                }
            }
            Ok(())
        }
        Command::Reindex => {
            let mut engine = open(&cli, Open::Existing)?;
            let n = engine.reindex()?;
            println!("reindexed {n} units");
            Ok(())
        }
        Command::Check => {
            let engine = open(&cli, Open::Existing)?;
            engine.check_integrity()?;
            println!(
                "ok: {} passes its integrity check",
                engine.store_at().describe()
            );
            Ok(())
        }
        Command::Migrate => {
            let (dir, at) = store_at(&cli);
            let version = match &at {
                StoreAt::Embedded => {
                    open(&cli, Open::OrStart)?;
                    aril_engine::EMBEDDED_SCHEMA_VERSION
                }
                pg => pg
                    .migrate(&dir)
                    .with_context(|| format!("migrating {}", pg.describe()))?,
            };
            println!("{} is at schema version {version}", at.describe());
            Ok(())
        }
        Command::MigrateStore(cmd) => migrate_store::run(&cli, cmd),
        Command::Demo(cmd) => demo::run(&cli, load_config(&cli)?, cmd),
        Command::Bench(cmd) => bench::run(&cli, cmd),
        Command::Serve(cmd) => serve::run(open_for_serving(&cli)?, cmd, None),
        Command::Ui(cmd) => serve::ui(open_for_serving(&cli)?, cmd),
        Command::Proxy(cmd) => serve::run(
            open_for_serving(&cli)?,
            &cmd.serve,
            Some(aril_server::ProxyConfig {
                upstream: cmd.upstream.clone(),
                upstream_key: cmd.upstream_key.clone(),
                budget: cmd.budget,
                default_user: cmd.user.clone(),
            }),
        ),
        Command::Keys(cmd) => serve::keys(open(&cli, Open::OrStart)?, cmd),
        Command::Mcp => serve::mcp(open(&cli, Open::OrStart)?),
        Command::Consolidate(cmd) => consolidate::run(open(&cli, Open::Existing)?, cmd),
        Command::Ask(cmd) => ask::run(open(&cli, Open::Existing)?, cmd),
    }
}
