//! `aril add`: one turn from the command line, or JSON lines from stdin. Every line is checked
//! before anything is written.

use std::sync::atomic::AtomicBool;

use anyhow::{Context, bail};
use aril_engine::{
    Engine, IngestOptions, Lifecycle, Metadata, NewTurn, Role, TurnDefaults, TurnIn,
    parse_lifecycle, parse_time,
};
use chrono::Utc;

use crate::args::AddCmd;
use crate::progress;

pub fn run(mut engine: Engine, cmd: &AddCmd) -> anyhow::Result<()> {
    let turns = match cmd.text.as_deref() {
        Some(text) if text != "-" => vec![NewTurn {
            scope: cmd.scope.scope()?,
            conversation: cmd.conversation.clone(),
            session: cmd.session.clone(),
            role: Role::parse(&cmd.role)?,
            speaker: cmd.speaker.clone(),
            text: text.to_string(),
            event_time: Some(match &cmd.at {
                Some(at) => parse_time(at)?,
                None => Utc::now(),
            }),
            source_id: None,
            metadata: metadata(cmd)?,
            lifecycle: lifecycle(cmd)?,
        }],
        _ => read_lines(cmd)?,
    };
    if turns.is_empty() {
        bail!("no turns given: pass TEXT, or JSON lines on stdin");
    }
    let cancel = AtomicBool::new(false);
    let report = engine.ingest(
        turns,
        &IngestOptions {
            flush: cmd.flush,
            ..Default::default()
        },
        &mut |_| {},
        &cancel,
    )?;
    println!("{}", progress::summary(&report));
    Ok(())
}

/// The `--metadata` object, checked.
fn metadata(cmd: &AddCmd) -> anyhow::Result<Option<Metadata>> {
    cmd.metadata
        .as_deref()
        .map(Metadata::from_json)
        .transpose()
        .context("--metadata")
}

/// `--expires` and `--immutable`, checked.
fn lifecycle(cmd: &AddCmd) -> anyhow::Result<Lifecycle> {
    parse_lifecycle(cmd.expires.as_deref(), cmd.immutable).context("--expires")
}

fn read_lines(cmd: &AddCmd) -> anyhow::Result<Vec<NewTurn>> {
    let defaults = TurnDefaults {
        scope: Some(cmd.scope.scope()?),
        conversation: cmd.conversation.clone(),
        session: cmd.session.clone(),
        role: Role::parse(&cmd.role)?,
        speaker: cmd.speaker.clone(),
        at: cmd.at.as_deref().map(parse_time).transpose()?,
        metadata: metadata(cmd)?,
        lifecycle: lifecycle(cmd)?,
    };
    turn_lines(std::io::stdin().lock(), &defaults, "stdin", false)
}

/// Turns from JSON lines (`TurnIn`, one per line; blank lines skipped), each checked and named
/// by its line in errors. With `number_lines`, a line that names no `source_id` gets `line N`,
/// so reading the same file again gives the same ids.
pub fn turn_lines(
    reader: impl std::io::BufRead,
    defaults: &TurnDefaults,
    what: &str,
    number_lines: bool,
) -> anyhow::Result<Vec<NewTurn>> {
    let mut turns = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let n = n + 1;
        let line = line.with_context(|| format!("{what} line {n}: not valid UTF-8 text"))?;
        if line.trim().is_empty() {
            continue;
        }
        let mut turn: TurnIn =
            serde_json::from_str(&line).with_context(|| format!("{what} line {n}"))?;
        if number_lines && turn.source_id.is_none() {
            turn.source_id = Some(format!("line {n}"));
        }
        turns.push(
            turn.into_turn(defaults, Utc::now())
                .with_context(|| format!("{what} line {n}"))?,
        );
    }
    Ok(turns)
}
