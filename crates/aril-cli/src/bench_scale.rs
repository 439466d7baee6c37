//! `aril bench scale`: builds each size's store (resumable, with a bar), measures each in a fresh
//! process (this binary again, with `--measure-size`), then prints the table (and JSON).

use std::process::Command;

use anyhow::Context;
use aril_bench::scale::{self, Measured, ScaleOptions};

use crate::args::{BenchCmd, Cli};
use crate::bench::{bench_model, bench_store, cache_dir};
use crate::progress;

/// Sizes measured when `--sizes` is not given.
const DEFAULT_SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];
/// Searches timed per size when `--searches` is not given.
const DEFAULT_SEARCHES: usize = 1000;

/// Flags of the other benchmarks, refused here rather than ignored.
fn refuse_other_flags(cmd: &BenchCmd) -> anyhow::Result<()> {
    let given = [
        ("--strategy", cmd.strategy.is_some()),
        ("--answer", cmd.answer),
        ("--judge", cmd.judge),
        ("--ablation", cmd.ablation.is_some()),
        ("--limit", cmd.limit.is_some()),
        ("--k", cmd.k.is_some()),
        ("--rankings", cmd.rankings.is_some()),
        ("--audit", cmd.audit.is_some()),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, on)| *on) {
        anyhow::bail!(
            "{flag} does not apply to `aril bench scale` (it measures the engine's own recall)"
        );
    }
    Ok(())
}

pub fn run(cli: &Cli, cmd: &BenchCmd) -> anyhow::Result<()> {
    refuse_other_flags(cmd)?;
    let config = crate::load_config(cli)?;
    let mut sizes = cmd.sizes.clone().unwrap_or_else(|| DEFAULT_SIZES.to_vec());
    sizes.sort_unstable();
    sizes.dedup();
    let searches = cmd.searches.unwrap_or(DEFAULT_SEARCHES);
    if searches == 0 {
        anyhow::bail!("--searches must be at least 1");
    }
    let options = ScaleOptions {
        data: cmd.data.clone(),
        sizes,
        store: bench_store(cli)?,
        cache_dir: cache_dir(cmd),
        searches,
        model: bench_model(cli, &config)?,
        engine: config,
    };
    let (cases, corpus) = scale::cases_and_corpus(&options.data)?;
    let layout = options.layout()?;
    if let Some(size) = cmd.measure_size {
        let measured = scale::measure::measure(
            &layout,
            &corpus,
            size,
            &options.engine,
            options.model.clone(),
            &cases,
            &options.data,
            options.searches,
        )?;
        println!("{}", serde_json::to_string(&measured)?);
        return Ok(());
    }
    eprintln!(
        "scale: {} sessions, {} turns per pass; stores under {}",
        corpus.sessions(),
        corpus.turns_per_pass(),
        layout.root.display()
    );
    let cancel = progress::cancel_on_ctrl_c();
    let mut rows = Vec::new();
    for &size in &options.sizes {
        let bar = progress::units_bar(&format!("building {size}"), "turns");
        let built = scale::build::build(
            &layout,
            &corpus,
            size,
            &options.engine,
            options.model.clone(),
            &mut progress::counter(&bar),
            &cancel,
        )?;
        bar.finish_and_clear();
        eprintln!("scale: measuring {size} turns in a fresh process");
        rows.push((size, built, measure_in_child(size)?));
    }
    // Every store is measured: only now is gold read (once, for choosing and scoring).
    let gold = aril_bench::gold::longmemeval(&options.data)?;
    let wanted = scale::counted_questions(&options, &corpus, &gold);
    let bar = progress::units_bar("own haystacks", "questions");
    let own = scale::own_haystack_rankings(
        &options,
        &cases,
        &|id| wanted.contains(id),
        &mut progress::counter(&bar),
        &cancel,
    )?;
    bar.finish_and_clear();
    let report = scale::report(&options, &corpus, rows, &own, &gold)?;
    print!("{}", report.table());
    if let Some(path) = &cmd.json {
        crate::bench::write_json(path, &report)?;
    }
    Ok(())
}

/// The program this process runs, to start again. On Linux `/proc/self/exe`, which names the
/// running file even after it was replaced on disk (a long build of stores outlives a rebuild of
/// the binary it started with: the measuring child is then the same program, not the new one,
/// and `current_exe` would name a deleted path).
fn this_program() -> anyhow::Result<std::path::PathBuf> {
    let running = std::path::PathBuf::from("/proc/self/exe");
    if running.exists() {
        return Ok(running);
    }
    std::env::current_exe().context("finding this program to measure in a child")
}

/// Runs this binary again with the same arguments and `--measure-size size`, and reads what it
/// measured from its output.
fn measure_in_child(size: usize) -> anyhow::Result<Measured> {
    let exe = this_program()?;
    let output = Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .arg("--measure-size")
        .arg(size.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    if !output.status.success() {
        anyhow::bail!(
            "measuring the store of {size} turns failed ({}); its error is above",
            output.status
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(text.trim())
        .with_context(|| format!("reading what the measuring process printed: {text:?}"))
}
