//! `aril import`: reads a benchmark file (LoCoMo, LongMemEval: its haystack, never its gold), a
//! chat export (ChatGPT, Claude.ai, Claude Code) or JSON lines of turns, and ingests it. Every
//! turn's id comes from the source's own ids, so importing a file again stores nothing twice.

use anyhow::Context;
use aril_engine::datasets::{Conversation, exports, locomo, longmemeval};
use aril_engine::{Engine, IngestOptions, NewTurn, Scope, TurnDefaults};

use crate::args::{ImportCmd, ImportFormat};
use crate::progress;

pub fn run(mut engine: Engine, cmd: &ImportCmd) -> anyhow::Result<()> {
    let benchmark = matches!(cmd.format, ImportFormat::Locomo | ImportFormat::Longmemeval);
    if benchmark && cmd.user.is_some() {
        anyhow::bail!(
            "--user applies to chat exports and JSON lines: a benchmark file names its own users"
        );
    }
    if cmd.format != ImportFormat::Locomo && !cmd.conversations.is_empty() {
        anyhow::bail!("--conversation applies to LoCoMo files only");
    }
    let scope = || -> anyhow::Result<Scope> {
        let user = cmd
            .user
            .clone()
            .context("--user is required: name whose memory the conversations go into")?;
        Ok(Scope::new(user, cmd.agent.clone(), cmd.run.clone())?)
    };
    let turns_of = |conversations: Vec<Conversation>| -> Vec<NewTurn> {
        conversations.into_iter().flat_map(|c| c.turns).collect()
    };
    let turns: Vec<NewTurn> = match cmd.format {
        ImportFormat::Locomo => turns_of(locomo::read(&cmd.file, &cmd.conversations)?),
        ImportFormat::Longmemeval => longmemeval::read(&cmd.file)?
            .into_iter()
            .flat_map(|q| q.haystack.turns)
            .collect(),
        ImportFormat::Chatgpt => turns_of(exports::chatgpt::read(&cmd.file, &scope()?)?),
        ImportFormat::Claude => turns_of(exports::claude::read(&cmd.file, &scope()?)?),
        ImportFormat::ClaudeCode => turns_of(exports::claude_code::read(&cmd.file, &scope()?)?),
        ImportFormat::Jsonl => jsonl(cmd, scope()?)?,
    };
    let report = ingest_with_progress(&mut engine, turns, "import")?;
    println!("{}", progress::summary(&report));
    if report.interrupted {
        std::process::exit(130);
    }
    Ok(())
}

/// JSON lines of turns under the scope, in the conversation named after the file (unless a line
/// names its own); a line without a `source_id` is known by its line number.
fn jsonl(cmd: &ImportCmd, scope: Scope) -> anyhow::Result<Vec<NewTurn>> {
    let file = std::fs::File::open(&cmd.file)
        .with_context(|| format!("cannot read {}", cmd.file.display()))?;
    let name = cmd
        .file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "jsonl".into());
    let defaults = TurnDefaults {
        scope: Some(scope),
        conversation: format!("jsonl:{name}"),
        ..Default::default()
    };
    let turns = crate::add::turn_lines(
        std::io::BufReader::new(file),
        &defaults,
        &cmd.file.display().to_string(),
        true,
    )?;
    anyhow::ensure!(
        !turns.is_empty(),
        "{}: no turns in the file",
        cmd.file.display()
    );
    Ok(turns)
}

/// Ingests a finished input (its open segments are closed) with a progress bar and Ctrl-C.
pub fn ingest_with_progress(
    engine: &mut Engine,
    turns: Vec<NewTurn>,
    label: &str,
) -> anyhow::Result<aril_engine::IngestReport> {
    let cancel = progress::cancel_on_ctrl_c();
    let bar = progress::turns_bar(label);
    let report = engine.ingest(
        turns,
        &IngestOptions {
            flush: true,
            ..Default::default()
        },
        &mut |p| progress::update(&bar, p),
        &cancel,
    )?;
    bar.finish_and_clear();
    Ok(report)
}
