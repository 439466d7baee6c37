//! `aril demo`: the main job end to end on the embedded default, on a sample conversation shipped
//! with aril (or a LoCoMo conversation): ingest, show the segments, answer a few questions with the
//! recalled turns and their dates.

use anyhow::Context;
use aril_engine::datasets::locomo;
use aril_engine::{Config, Engine, NewTurn, Role, Scope, SearchRequest};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::args::{Cli, DemoCmd};
use crate::import::ingest_with_progress;

const SAMPLE: &str = include_str!("../demo/sample.json");

#[derive(Deserialize)]
struct Sample {
    user: String,
    questions: Vec<String>,
    sessions: Vec<SampleSession>,
}

#[derive(Deserialize)]
struct SampleSession {
    date: DateTime<Utc>,
    turns: Vec<(String, String)>,
}

#[derive(Deserialize)]
struct LocomoQuestions {
    sample_id: String,
    qa: Vec<LocomoQuestion>,
}

/// Only the question text: the demo never reads answers or evidence.
#[derive(Deserialize)]
struct LocomoQuestion {
    question: String,
}

fn sample_turns() -> anyhow::Result<(Scope, Vec<NewTurn>, Vec<String>)> {
    let sample: Sample =
        serde_json::from_str(SAMPLE).context("the built-in sample is malformed")?;
    let scope = Scope::user(sample.user)?;
    let mut turns = Vec::new();
    for (n, session) in sample.sessions.iter().enumerate() {
        for (i, (role, text)) in session.turns.iter().enumerate() {
            turns.push(NewTurn {
                scope: scope.clone(),
                conversation: "demo".into(),
                session: Some(format!("session_{}", n + 1)),
                role: Role::parse(role)?,
                speaker: None,
                text: text.clone(),
                // Turns a minute apart inside the session.
                event_time: Some(session.date + chrono::Duration::minutes(i as i64)),
                source_id: Some(format!("S{}:{}", n + 1, i + 1)),
                metadata: None,
                lifecycle: Default::default(),
            });
        }
    }
    Ok((scope, turns, sample.questions))
}

fn locomo_turns(
    path: &std::path::Path,
    conversation: Option<&str>,
) -> anyhow::Result<(Scope, Vec<NewTurn>, Vec<String>)> {
    let only: Vec<String> = conversation
        .map(|c| vec![c.to_string()])
        .unwrap_or_default();
    let conv = locomo::read(path, &only)?
        .into_iter()
        .next()
        .context("the LoCoMo file has no conversation")?;
    let text = std::fs::read_to_string(path)?;
    let all: Vec<LocomoQuestions> = serde_json::from_str(&text)?;
    let questions = all
        .into_iter()
        .find(|s| s.sample_id == conv.id)
        .map(|s| s.qa.into_iter().map(|q| q.question).collect())
        .unwrap_or_default();
    Ok((conv.scope, conv.turns, questions))
}

pub fn run(cli: &Cli, config: Config, cmd: &DemoCmd) -> anyhow::Result<()> {
    let (scope, turns, questions) = match &cmd.locomo {
        Some(path) => locomo_turns(path, cmd.conversation.as_deref())?,
        None => sample_turns()?,
    };
    // The demo works in a directory of its own unless --data-dir was given explicitly.
    let temp;
    let dir = if std::env::var_os("ARIL_DATA_DIR").is_some()
        || std::env::args().any(|a| a == "--data-dir" || a.starts_with("--data-dir="))
    {
        cli.data_dir.clone()
    } else {
        temp = tempfile::tempdir()?;
        temp.path().to_path_buf()
    };
    let mut engine = Engine::open(&dir, config)?;
    println!("== ingest: {} turns for {}", turns.len(), scope);
    let report = ingest_with_progress(&mut engine, turns, "demo")?;
    println!("{}", crate::progress::summary(&report));

    // The demo conversation is small: all of its segments.
    let (segments, _) = engine.segments(&scope.as_filter(), 0, u64::MAX)?;
    println!(
        "\n== {} segments (LLM-free: surprise + cohesion + length)",
        segments.len()
    );
    for s in &segments {
        let turns = engine.turns(&s.turns)?;
        let first = turns
            .first()
            .map(|t| t.rendered().replace('\n', " "))
            .unwrap_or_default();
        let when = s
            .start_time
            .map(|t| t.format("%Y-%m-%d").to_string())
            .unwrap_or_default();
        println!(
            "  {when}  {:>2} turns  {:<13}  {}",
            s.turns.len(),
            s.reason.as_str(),
            ellipsis(&first, 80)
        );
    }
    for q in questions.iter().take(cmd.questions) {
        println!("\n== {q}");
        let response = engine.search(&SearchRequest {
            filter: scope.as_filter(),
            query: q.clone(),
            k: Some(3),
            budget: Some(400),
            asked_at: None,
            condition: None,
            threshold: None,
        })?;
        for hit in &response.results {
            let when = hit
                .time
                .map(|t| t.format("%Y-%m-%d").to_string())
                .unwrap_or_default();
            println!("  {}. [{when} {}]", hit.rank, hit.source.turns.join(","));
            for line in hit.text.lines() {
                println!("       {}", ellipsis(line, 110));
            }
        }
    }
    Ok(())
}

fn ellipsis(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}
