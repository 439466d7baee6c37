//! `aril bench scale`: how the read path holds as one scope grows to 10k, 100k and 1M turns.
//!
//! Stores are built from real conversation text ([`corpus`]: every haystack session of a
//! LongMemEval file, then the same sessions again under new ids and later dates) by [`build`],
//! resumable from their count; each is then measured by [`measure`] — meant to run in a process
//! of its own (the CLI starts one per size), so memory and open time are a fresh process's. Recall
//! at scale sits beside each question's recall inside its own haystack, the figure `aril bench
//! longmemeval` gives.

pub mod build;
pub mod corpus;
pub mod measure;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use aril_embed::Embedder;
use aril_engine::{Config, StoreAt};
use serde::Serialize;

pub use build::{Layout, Progress};
pub use corpus::Corpus;
pub use measure::{Filtered, Measured, Recall};

use crate::BenchError;
use crate::run::{Benchmark, aril_dir, file_hash};
use crate::strategy::{Aril, Embeddings, Strategy};

/// Parses a size: digits with an optional `k` (thousands) or `m` (millions), e.g. `10k`, `1m`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let lower = s.trim().to_ascii_lowercase();
    let (digits, times) = match lower.strip_suffix('k') {
        Some(d) => (d, 1_000),
        None => match lower.strip_suffix('m') {
            Some(d) => (d, 1_000_000),
            None => (lower.as_str(), 1),
        },
    };
    match digits.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n * times),
        _ => Err(format!(
            "{s:?} is not a size: give turns as digits, or with k or m (10k, 1m)"
        )),
    }
}

/// What to build and measure.
pub struct ScaleOptions {
    /// A LongMemEval file: its sessions make the stream, its questions are searched.
    pub data: PathBuf,
    /// Turns per store, ascending.
    pub sizes: Vec<usize>,
    pub store: StoreAt,
    /// The bench cache: stores live under `scale/` in it, own-haystack stores where `aril bench
    /// longmemeval` keeps its own.
    pub cache_dir: PathBuf,
    /// Searches timed per size (the file's questions, cycled).
    pub searches: usize,
    pub model: Arc<dyn Embedder>,
    pub engine: Config,
}

impl ScaleOptions {
    /// Where this file's stores live (one directory per configuration that changes ingest, per
    /// backend).
    pub fn layout(&self) -> Result<Layout, BenchError> {
        let data_hash = file_hash(&self.data)?;
        let own = aril_dir(
            &self.cache_dir,
            Benchmark::LongMemEval,
            &data_hash,
            &self.engine,
            &self.store,
        );
        let name = own
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("aril")
            .replacen("aril-longmemeval", "scale", 1);
        Ok(Layout {
            root: self.cache_dir.join("scale").join(name),
            store: self.store.clone(),
        })
    }
}

/// One size's row.
#[derive(Debug, Clone, Serialize)]
pub struct SizeReport {
    pub size: usize,
    /// Stream turns per second over the whole build (repeated passes embed nothing new).
    pub ingest_turns_per_s: f64,
    pub embedded_texts: usize,
    /// Seconds the build's closing search took (loading the vectors, building a graph).
    pub index_s: f64,
    #[serde(flatten)]
    pub measured: Measured,
    /// The same questions, each inside its own haystack.
    pub own_haystack: Recall,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleReport {
    pub data: String,
    pub backend: String,
    /// Distinct sessions and turns in one pass of the stream.
    pub sessions: usize,
    pub turns_per_pass: usize,
    pub search_k: usize,
    pub search_budget: usize,
    pub sizes: Vec<SizeReport>,
}

/// Session rankings of each case inside its own haystack (the `aril` strategy's store in the
/// bench cache, shared with `aril bench longmemeval`), for the cases `wanted` admits.
pub fn own_haystack_rankings(
    options: &ScaleOptions,
    cases: &[crate::data::Case],
    wanted: &dyn Fn(&str) -> bool,
    progress: &mut dyn FnMut(usize, usize),
    cancel: &AtomicBool,
) -> Result<HashMap<String, Vec<String>>, BenchError> {
    let embeddings = Embeddings::open(
        options.model.clone(),
        &options.cache_dir.join("embeddings.sqlite"),
    )?;
    let dir = aril_dir(
        &options.cache_dir,
        Benchmark::LongMemEval,
        &file_hash(&options.data)?,
        &options.engine,
        &options.store,
    );
    let mut aril = Aril::open(&dir, &options.store, embeddings, options.engine.clone())?;
    let chosen: Vec<_> = cases.iter().filter(|c| wanted(&c.id)).collect();
    let mut out = HashMap::new();
    for (done, case) in chosen.iter().enumerate() {
        if cancel.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(BenchError::BuildInterrupted);
        }
        aril.index(case)?;
        let units = aril.rank_sessions(case, measure::SEARCH_K)?;
        out.insert(
            case.id.clone(),
            units.into_iter().map(|u| u.session).collect(),
        );
        progress(done + 1, chosen.len());
    }
    Ok(out)
}

impl ScaleReport {
    /// The report as a Markdown table (what docs/benchmarks-scale.md shows).
    pub fn table(&self) -> String {
        let mut out = format!(
            "scale: {} ({}), {} sessions / {} turns per pass; search k {}, budget {}\n\n",
            self.data,
            self.backend,
            self.sessions,
            self.turns_per_pass,
            self.search_k,
            self.search_budget
        );
        out.push_str(
            "| turns | ingest turns/s | index s | bytes | open ms | first search ms | p50 ms | \
             p99 ms | RSS MiB | questions | any@5 | any@10 | R@10 | own any@5 | own any@10 | \
             own R@10 |\n",
        );
        out.push_str(
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for s in &self.sizes {
            let m = &s.measured;
            let _ = writeln!(
                out,
                "| {} | {:.0} | {:.1} | {} | {:.0} | {:.0} | {:.1} | {:.1} | {} | {} | {:.1} | \
                 {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
                s.size,
                s.ingest_turns_per_s,
                s.index_s,
                human_bytes(m.bytes),
                m.open_ms,
                m.first_search_ms,
                m.search_ms_p50,
                m.search_ms_p99,
                m.rss_mib.map_or("-".into(), |r| format!("{r:.0}")),
                m.recall.questions,
                100.0 * m.recall.any_at_5,
                100.0 * m.recall.any_at_10,
                100.0 * m.recall.recall_at_10,
                100.0 * s.own_haystack.any_at_5,
                100.0 * s.own_haystack.any_at_10,
                100.0 * s.own_haystack.recall_at_10,
            );
        }
        for s in &self.sizes {
            for f in &s.measured.filtered {
                let _ = writeln!(
                    out,
                    "\n{} at {} turns: {} searches, \
                     p50 {:.1} ms, p99 {:.1} ms, {:.1} memories admitted on average, {:.1}% \
                     returned min(k, admitted)",
                    f.describe(),
                    s.size,
                    f.searches,
                    f.p50_ms,
                    f.p99_ms,
                    f.admitted_mean,
                    100.0 * f.full
                );
            }
        }
        for s in &self.sizes {
            if s.measured.slowest.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\nslowest questions at {} turns (median ms):", s.size);
            for q in &s.measured.slowest {
                let _ = writeln!(out, "  {:>7.1}  {}  {}", q.median_ms, q.id, q.question);
            }
        }
        out
    }
}

fn human_bytes(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
    }
}

/// The report of sizes built and measured, with the own-haystack recall of the questions each
/// size counted (scored against the file's `gold`).
pub fn report(
    options: &ScaleOptions,
    corpus: &Corpus,
    rows: Vec<(usize, Progress, Measured)>,
    own: &HashMap<String, Vec<String>>,
    gold: &HashMap<String, crate::gold::Gold>,
) -> Result<ScaleReport, BenchError> {
    let sizes = rows
        .into_iter()
        .map(|(size, built, measured)| SizeReport {
            size,
            ingest_turns_per_s: built.turns as f64 / built.ingest_s.max(1e-9),
            index_s: built.index_s,
            embedded_texts: built.embedded_texts,
            own_haystack: Recall::score(own, gold, &|ids| corpus.holds_all(ids, size)),
            measured,
        })
        .collect();
    Ok(ScaleReport {
        data: options.data.display().to_string(),
        backend: options.store.describe(),
        sessions: corpus.sessions(),
        turns_per_pass: corpus.turns_per_pass(),
        search_k: measure::SEARCH_K,
        search_budget: measure::SEARCH_BUDGET,
        sizes,
    })
}

/// The questions a run scores at its largest size (their gold sessions are in that store): the
/// ones whose own-haystack recall is needed. Takes gold: call it after every store is measured.
pub fn counted_questions(
    options: &ScaleOptions,
    corpus: &Corpus,
    gold: &HashMap<String, crate::gold::Gold>,
) -> std::collections::HashSet<String> {
    let largest = options.sizes.iter().copied().max().unwrap_or(0);
    gold.iter()
        .filter(|(_, g)| corpus.holds_all(&g.answer_sessions, largest))
        .map(|(id, _)| id.clone())
        .collect()
}

/// The questions of the file, as a strategy may see them, and the stream built from their
/// haystacks (the file is read once for both).
pub fn cases_and_corpus(path: &Path) -> Result<(Vec<crate::data::Case>, Corpus), BenchError> {
    let cases = crate::data::longmemeval(path)?;
    let corpus = Corpus::from_cases(path, &cases)?;
    Ok((cases, corpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_their_suffixes_and_refuse_the_rest() {
        assert_eq!(parse_size("10k"), Ok(10_000));
        assert_eq!(parse_size("1M"), Ok(1_000_000));
        assert_eq!(parse_size("2500"), Ok(2500));
        for bad in ["", "0", "k", "1.5k", "-3", "ten"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
