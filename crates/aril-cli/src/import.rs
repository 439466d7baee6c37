//! `aril import`: reads a LoCoMo or LongMemEval file and ingests its haystack (never its gold).

use aril_engine::datasets::{locomo, longmemeval};
use aril_engine::{Engine, IngestOptions, NewTurn};

use crate::args::{ImportCmd, ImportFormat};
use crate::progress;

pub fn run(mut engine: Engine, cmd: &ImportCmd) -> anyhow::Result<()> {
    let turns: Vec<NewTurn> = match cmd.format {
        ImportFormat::Locomo => locomo::read(&cmd.file, &cmd.conversations)?
            .into_iter()
            .flat_map(|c| c.turns)
            .collect(),
        ImportFormat::Longmemeval => {
            if !cmd.conversations.is_empty() {
                anyhow::bail!("--conversation applies to LoCoMo files only");
            }
            longmemeval::read(&cmd.file)?
                .into_iter()
                .flat_map(|q| q.haystack.turns)
                .collect()
        }
    };
    let report = ingest_with_progress(&mut engine, turns, "import")?;
    println!("{}", progress::summary(&report));
    if report.interrupted {
        std::process::exit(130);
    }
    Ok(())
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
