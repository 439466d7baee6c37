//! `aril add`: one turn from the command line, or JSON lines from stdin. Every line is checked
//! before anything is written.

use std::io::BufRead;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, bail};
use aril_engine::{Engine, IngestOptions, NewTurn, Role, Scope};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::args::AddCmd;
use crate::progress;

/// One JSON line on stdin. Missing scope fields fall back to the command's flags.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    user_id: Option<String>,
    agent_id: Option<String>,
    run_id: Option<String>,
    conversation: Option<String>,
    session: Option<String>,
    role: Option<String>,
    speaker: Option<String>,
    #[serde(alias = "content")]
    text: String,
    at: Option<String>,
    source_id: Option<String>,
}

fn parse_time(s: &str) -> anyhow::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .with_context(|| format!("bad timestamp {s:?}: use RFC 3339, e.g. 2024-03-01T10:00:00Z"))
}

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
        }],
        _ => read_lines(cmd)?,
    };
    if turns.is_empty() {
        bail!("no turns given: pass TEXT, or JSON lines on stdin");
    }
    let cancel = AtomicBool::new(false);
    let report = engine.ingest(
        turns,
        &IngestOptions { flush: cmd.flush },
        &mut |_| {},
        &cancel,
    )?;
    println!("{}", progress::summary(&report));
    Ok(())
}

fn read_lines(cmd: &AddCmd) -> anyhow::Result<Vec<NewTurn>> {
    let mut turns = Vec::new();
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let n = n + 1;
        let line = line.with_context(|| format!("stdin line {n}: not valid UTF-8 text"))?;
        if line.trim().is_empty() {
            continue;
        }
        let l: Line = serde_json::from_str(&line).with_context(|| format!("stdin line {n}"))?;
        let scope = Scope::new(
            l.user_id.unwrap_or_else(|| cmd.scope.user.clone()),
            l.agent_id.or_else(|| cmd.scope.agent.clone()),
            l.run_id.or_else(|| cmd.scope.run.clone()),
        )
        .with_context(|| format!("stdin line {n}"))?;
        let role = Role::parse(l.role.as_deref().unwrap_or(&cmd.role))
            .with_context(|| format!("stdin line {n}"))?;
        let at = match l.at.as_deref().or(cmd.at.as_deref()) {
            Some(at) => parse_time(at).with_context(|| format!("stdin line {n}"))?,
            None => Utc::now(),
        };
        let turn = NewTurn {
            scope,
            conversation: l.conversation.unwrap_or_else(|| cmd.conversation.clone()),
            session: l.session.or_else(|| cmd.session.clone()),
            role,
            speaker: l.speaker.or_else(|| cmd.speaker.clone()),
            text: l.text,
            event_time: Some(at),
            source_id: l.source_id,
        };
        turn.validate().with_context(|| format!("stdin line {n}"))?;
        turns.push(turn);
    }
    Ok(turns)
}
