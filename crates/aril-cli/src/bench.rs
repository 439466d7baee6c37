//! `aril bench`: runs one strategy on one benchmark file and prints the table (and JSON).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use aril_bench::qa::QaOptions;
use aril_bench::strategy::{Ablation, BenchModels};
use aril_bench::{BenchOptions, Benchmark};
use aril_engine::StoreAt;
use aril_engine::embed::{Embedder, MiniLm, default_model_dir};
use aril_engine::llm::{ChatModel, LlmSettings, OpenAiClient, Role};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::args::{BenchCmd, BenchName, Cli};
use crate::{models, progress};

fn default_cache_dir() -> PathBuf {
    aril_core::cache_root().join("bench")
}

/// The encoder and planner of `aril-llm` from the environment (other strategies need none), with
/// a bar for card writing under `bars` and Ctrl-C as its stop.
fn bench_models(
    cmd: &BenchCmd,
    strategy: &str,
    llm: &LlmSettings,
    bars: &MultiProgress,
    cancel: Arc<AtomicBool>,
) -> anyhow::Result<BenchModels> {
    let mut models = BenchModels {
        encode: models::encode_config(&cmd.encode)?,
        cancel,
        ..Default::default()
    };
    if let Some(name) = &cmd.ablation {
        if strategy != "aril-llm" {
            anyhow::bail!("--ablation applies to --strategy aril-llm only");
        }
        models.ablation = Some(Ablation::parse(name).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown ablation {name:?}: use one of {}",
                Ablation::NAMES.join(", ")
            )
        })?);
    }
    if strategy == "aril-llm" {
        let arc = |c: OpenAiClient| Arc::new(c) as Arc<dyn ChatModel>;
        models.encoder = Some(arc(models::required(Role::Encoder, llm)?));
        models.planner = models::client(Role::Planner, llm)?.map(arc);
        models.reranker = models::reranker(llm)?;
        if models.planner.is_none() {
            eprintln!("note: no planner model configured: each question is searched as asked");
        }
        let bar = bars.add(progress::units_bar("writing cards", "segments"));
        models.encode_progress = Some(Arc::new(move |p| {
            progress::update(&bar, p);
            if p.done == p.total {
                bar.finish_and_clear();
            } else if bar.is_finished() {
                bar.reset();
            }
        }));
    }
    Ok(models)
}

/// The answerer and judge for `--answer` / `--judge`, from the environment.
fn qa_options(cmd: &BenchCmd, llm: &LlmSettings) -> anyhow::Result<Option<QaOptions>> {
    if !cmd.answer && !cmd.judge {
        return Ok(None);
    }
    if cmd.answer_budget == 0 {
        anyhow::bail!("--answer-budget must be at least 1 token");
    }
    let arc = |c: OpenAiClient| Arc::new(c) as Arc<dyn ChatModel>;
    Ok(Some(QaOptions {
        answerer: arc(models::required(Role::Answerer, llm)?),
        judge: if cmd.judge {
            Some(arc(models::required(Role::Judge, llm)?))
        } else {
            None
        },
        context_budget: cmd.answer_budget,
    }))
}

/// The embedding model a bench runs: the configured remote one, else MiniLM.
pub(crate) fn bench_model(
    cli: &Cli,
    config: &aril_engine::Config,
) -> anyhow::Result<Arc<dyn Embedder>> {
    let model_dir = cli.model_dir.clone().unwrap_or_else(default_model_dir);
    Ok(match models::remote_embedder(&config.llm)? {
        Some(remote) => remote,
        None => Arc::new(MiniLm::load_with(&model_dir, &config.minilm_options())?),
    })
}

/// Where a bench keeps the `aril` strategy's store: `--store` must be a PostgreSQL URL here.
pub(crate) fn bench_store(cli: &Cli) -> anyhow::Result<StoreAt> {
    Ok(match cli.store.as_deref() {
        None => StoreAt::Embedded,
        Some(s) => StoreAt::postgres(s).ok_or_else(|| {
            anyhow::anyhow!(
                "aril bench keeps its data under --cache-dir; --store takes a postgres:// URL \
                 here (a database for this benchmark configuration), not {s:?}"
            )
        })?,
    })
}

/// Writes a report as pretty JSON and says where.
pub(crate) fn write_json(
    path: &std::path::Path,
    report: &impl serde::Serialize,
) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Draws the report at `path` (JSON, as --json writes it) into an SVG beside it, and says where.
fn plot(path: &std::path::Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let report: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a report made with --json", path.display()))?;
    let Some(svg) = aril_bench::plot::recall_svg(&report) else {
        anyhow::bail!(
            "{}: no recall measured at two cut-offs or more, nothing to draw",
            path.display()
        );
    };
    let out = path.with_extension("svg");
    std::fs::write(&out, svg).with_context(|| format!("writing {}", out.display()))?;
    println!("wrote {}", out.display());
    Ok(())
}

pub(crate) fn cache_dir(cmd: &BenchCmd) -> PathBuf {
    cmd.cache_dir.clone().unwrap_or_else(default_cache_dir)
}

pub fn run(cli: &Cli, cmd: &BenchCmd) -> anyhow::Result<()> {
    let benchmark = match cmd.benchmark {
        BenchName::Longmemeval => Benchmark::LongMemEval,
        BenchName::Locomo => Benchmark::Locomo,
        BenchName::Hotpotqa => Benchmark::HotpotQa,
        BenchName::Scale => return crate::bench_scale::run(cli, cmd),
        BenchName::Plot => {
            if cmd.strategy.is_some() || cmd.json.is_some() || cmd.rankings.is_some() {
                anyhow::bail!(
                    "`aril bench plot` takes only --data (the report): it draws the SVG beside it"
                );
            }
            return plot(&cmd.data);
        }
    };
    let scale_only = [
        ("--sizes", cmd.sizes.is_some()),
        ("--searches", cmd.searches.is_some()),
        ("--measure-size", cmd.measure_size.is_some()),
    ];
    if let Some((flag, _)) = scale_only.iter().find(|(_, given)| *given) {
        anyhow::bail!("{flag} applies to `aril bench scale` only");
    }
    let Some(strategy) = cmd.strategy.clone() else {
        anyhow::bail!(
            "--strategy is required: one of {}",
            aril_bench::strategy::NAMES.join(", ")
        );
    };
    let config = crate::load_config(cli)?;
    let model = bench_model(cli, &config)?;
    let store = bench_store(cli)?;
    let cancel = progress::cancel_on_ctrl_c();
    let bars = MultiProgress::new();
    let options = BenchOptions {
        store,
        benchmark,
        data: cmd.data.clone(),
        strategy: strategy.clone(),
        limit: cmd.limit,
        ks: cmd.k.clone(),
        cache_dir: cache_dir(cmd),
        model,
        models: bench_models(cmd, &strategy, &config.llm, &bars, cancel.clone())?,
        qa: qa_options(cmd, &config.llm)?,
        audit: cmd.audit.clone(),
        engine: config,
    };
    let bar = bars.add(ProgressBar::new(0));
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} questions  eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{} {strategy}", benchmark.name()));
    let report = aril_bench::run(&options, &mut progress::counter(&bar), &cancel)?;
    bar.finish_and_clear();
    print!("{}", report.table());
    if let Some(path) = &cmd.json {
        crate::bench::write_json(path, &report)?;
        plot(path)?;
    }
    if let Some(path) = &cmd.rankings {
        let mut text = String::new();
        for r in &report.rankings {
            text.push_str(&serde_json::to_string(r)?);
            text.push('\n');
        }
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
