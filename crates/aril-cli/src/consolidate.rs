//! `aril consolidate`: writes the queued segments into cards with the encoder model named by the
//! `ARIL_LLM_*` environment (`ARIL_LLM_ENCODER_*` first), with a progress bar; Ctrl-C stops after
//! the segment in flight.

use aril_engine::llm::Role;
use aril_engine::{ConsolidateOptions, Engine};

use crate::args::ConsolidateCmd;
use crate::{models, progress};

pub fn run(mut engine: Engine, cmd: &ConsolidateCmd) -> anyhow::Result<()> {
    let model = models::required(Role::Encoder, &engine.config().llm)?;
    let options = ConsolidateOptions {
        limit: cmd.limit.unwrap_or(usize::MAX),
        retry_failed: cmd.retry_failed,
        encode: models::encode_config(&cmd.encode)?,
    };
    let cancel = progress::cancel_on_ctrl_c();
    let bar = progress::units_bar("consolidate", "segments");
    let report = engine.consolidate(
        &model,
        &options,
        &mut |p| progress::update(&bar, p),
        &cancel,
    )?;
    bar.finish_and_clear();
    let used = report.cost;
    println!(
        "{} segments encoded into {} cards, {} failed; {} LLM calls, {} prompt + {} completion tokens{}",
        report.segments_done,
        report.cards_added,
        report.segments_failed,
        used.llm_calls,
        used.prompt_tokens,
        used.completion_tokens,
        if report.interrupted {
            "; interrupted: run the same command again to go on"
        } else {
            ""
        }
    );
    for f in &report.failures {
        eprintln!("failed: {f} (retry with --retry-failed)");
    }
    if report.interrupted {
        std::process::exit(130);
    }
    Ok(())
}
