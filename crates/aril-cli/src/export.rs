//! `aril export`: a scope's memories as they stand now, as JSON lines on stdout, in the form
//! `aril add` reads back (the same turns, the same ids).

use std::io::Write;

use anyhow::{Context, bail};
use aril_engine::{Engine, TurnIn};

use crate::args::ExportCmd;

/// Memories read from the store at a time.
const PAGE: usize = 1000;

/// Writes the scope's memories. Their ids are read first, in one read, so that writers working
/// meanwhile (other servers on a shared PostgreSQL store) cannot shift a page: a memory updated
/// during the export comes out as it was, one deleted during it is left out.
pub fn run(engine: &Engine, cmd: &ExportCmd) -> anyhow::Result<()> {
    let filter = cmd.scope.filter()?;
    let ids = engine.current_memory_ids(&filter)?;
    if ids.is_empty() {
        bail!(
            "nothing is stored for {}: check the user/agent/run ids",
            cmd.scope.describe()
        );
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut written = 0u64;
    for page in ids.chunks(PAGE) {
        for turn in engine.turns(page)? {
            serde_json::to_writer(&mut out, &TurnIn::from(&turn)).context("writing to stdout")?;
            out.write_all(b"\n").context("writing to stdout")?;
            written += 1;
        }
    }
    out.flush().context("writing to stdout")?;
    eprintln!("exported {written} memories of {}", cmd.scope.describe());
    Ok(())
}
