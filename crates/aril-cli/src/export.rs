//! `aril export`: a scope's memories as they stand now, as JSON lines on stdout, in the form
//! `aril add` reads back (the same turns, the same ids).

use std::io::Write;

use anyhow::{Context, bail};
use aril_engine::{Engine, TurnIn};

use crate::args::ExportCmd;

/// Memories read from the store at a time.
const PAGE: u64 = 1000;

pub fn run(engine: &Engine, cmd: &ExportCmd) -> anyhow::Result<()> {
    let filter = cmd.scope.filter()?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut written = 0u64;
    loop {
        let (turns, total) = engine.list_memories(&filter, written, PAGE)?;
        if total == 0 {
            bail!(
                "nothing is stored for {}: check the user/agent/run ids",
                cmd.scope.describe()
            );
        }
        for turn in &turns {
            serde_json::to_writer(&mut out, &TurnIn::from(turn)).context("writing to stdout")?;
            out.write_all(b"\n").context("writing to stdout")?;
        }
        written += turns.len() as u64;
        if turns.is_empty() || written >= total {
            break;
        }
    }
    out.flush().context("writing to stdout")?;
    eprintln!("exported {written} memories of {}", cmd.scope.describe());
    Ok(())
}
