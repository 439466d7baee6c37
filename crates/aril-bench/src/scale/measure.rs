//! Measures one built store of the scale benchmark as a process that has just started sees it:
//! open time, the first search, search latency over many real questions, memory after them, and
//! recall inside the big scope. Gold is read only after every question is ranked.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use aril_core::ScopeFilter;
use aril_embed::Embedder;
use aril_engine::{Config, Engine, SearchRequest, StoreAt};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::build::Layout;
use super::corpus::{Corpus, original_session};
use crate::BenchError;
use crate::data::Case;
use crate::gold::Gold;
use crate::metrics::{fractional_recall, recall_any};
use crate::run::percentile;

/// Units a latency search returns, and the o200k tokens they may use.
pub const SEARCH_K: usize = 10;
pub const SEARCH_BUDGET: usize = 2000;

/// Session recall of the questions whose gold sessions a store holds whole.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Recall {
    pub questions: usize,
    /// Share of questions with a gold session among the top 5 / 10 sessions.
    pub any_at_5: f64,
    pub any_at_10: f64,
    /// Mean share of a question's gold sessions among its top 5 / 10 (seed 004's R@k).
    pub recall_at_5: f64,
    pub recall_at_10: f64,
}

impl Recall {
    /// Scores rankings (session ids, best first) against each question's gold sessions; only
    /// the questions `counted` admits take part.
    pub fn score(
        rankings: &HashMap<String, Vec<String>>,
        gold: &HashMap<String, Gold>,
        counted: &dyn Fn(&[String]) -> bool,
    ) -> Self {
        let mut r = Recall::default();
        for (id, ranked) in rankings {
            let Some(g) = gold.get(id) else { continue };
            if !counted(&g.answer_sessions) {
                continue;
            }
            r.questions += 1;
            r.any_at_5 += recall_any(ranked, &g.answer_sessions, 5);
            r.any_at_10 += recall_any(ranked, &g.answer_sessions, 10);
            r.recall_at_5 += fractional_recall(ranked, &g.answer_sessions, 5);
            r.recall_at_10 += fractional_recall(ranked, &g.answer_sessions, 10);
        }
        let n = r.questions.max(1) as f64;
        r.any_at_5 /= n;
        r.any_at_10 /= n;
        r.recall_at_5 /= n;
        r.recall_at_10 /= n;
        r
    }
}

/// What one store measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Measured {
    pub turns: usize,
    /// The data directory's bytes (PostgreSQL: the whole database's, every size's scope).
    pub bytes: u64,
    /// Opening the store and its indexes (the embedding model is loaded before).
    pub open_ms: f64,
    /// The first search after opening: what loads lazily is in it.
    pub first_search_ms: f64,
    pub searches: usize,
    /// Searches after the first, query embedding included.
    pub search_ms_p50: f64,
    pub search_ms_p99: f64,
    /// Resident memory after the searches (Linux), the model's included.
    pub rss_mib: Option<f64>,
    /// The questions whose searches took longest (by each question's median), slowest first:
    /// where the tail of the latency comes from.
    #[serde(default)]
    pub slowest: Vec<SlowQuestion>,
    /// Questions of the file searched inside the big scope (session search, k 10).
    pub recall: Recall,
    /// Searches filtered to a window of time before each question (a day, a week); empty in
    /// reports made before them.
    #[serde(default)]
    pub filtered: Vec<Filtered>,
}

/// Searches filtered with Mem0's filter language: to the days before each question was asked
/// (`created_at`), or on a metadata key (which every memory of the scope must be tested
/// against: no index holds metadata). What a filter costs, and whether the search still returns
/// `k` memories when the filter admits that many.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Filtered {
    /// A time window: memories said in the `days` before the question (0 for a metadata filter).
    pub days: i64,
    /// A metadata filter, as sent (empty for a time window).
    #[serde(default)]
    pub metadata: String,
    pub searches: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Mean memories of the scope the filter admits (counted by a filtered listing).
    pub admitted_mean: f64,
    /// Share of searches that returned `min(k, admitted)` memories.
    pub full: f64,
}

impl Filtered {
    /// The filter in words.
    pub fn describe(&self) -> String {
        if self.metadata.is_empty() {
            format!("filtered to the {} day(s) before each question", self.days)
        } else {
            format!("filtered by metadata {}", self.metadata)
        }
    }
}

/// The filters `aril bench scale` measures: the day and the week before the question, and two
/// metadata filters on a key the corpus does not have, one admitting no memory and one every
/// memory (an absent key meets `ne`).
#[derive(Debug, Clone, Copy)]
enum FilterKind {
    Days(i64),
    /// `category` equal to `work` (admits none), or with `every`, not equal (admits all).
    Metadata {
        every: bool,
    },
}

impl FilterKind {
    /// The filter for a question asked at `at`.
    fn filter(self, at: DateTime<Utc>) -> serde_json::Value {
        match self {
            FilterKind::Days(days) => serde_json::json!({"created_at": {
                "gte": (at - chrono::Duration::days(days)).to_rfc3339(),
                "lt": at.to_rfc3339(),
            }}),
            FilterKind::Metadata { every: false } => serde_json::json!({"category": "work"}),
            FilterKind::Metadata { every: true } => {
                serde_json::json!({"category": {"ne": "work"}})
            }
        }
    }
}

const FILTER_KINDS: [FilterKind; 4] = [
    FilterKind::Days(1),
    FilterKind::Days(7),
    FilterKind::Metadata { every: false },
    FilterKind::Metadata { every: true },
];

/// How many questions the filtered searches take.
const FILTERED_SEARCHES: usize = 100;

/// A question among the slowest to search.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SlowQuestion {
    pub id: String,
    pub question: String,
    /// The median of its searches' times.
    pub median_ms: f64,
}

/// How many of the slowest questions a report names.
const SLOWEST: usize = 5;

/// The `SLOWEST` questions of `times` (each question's search times) by median, slowest first.
fn slowest(cases: &[Case], times: &HashMap<usize, Vec<f64>>) -> Vec<SlowQuestion> {
    let mut medians: Vec<SlowQuestion> = times
        .iter()
        .map(|(&i, ms)| {
            let mut ms = ms.clone();
            ms.sort_by(f64::total_cmp);
            SlowQuestion {
                id: cases[i].id.clone(),
                question: cases[i].question.clone(),
                median_ms: percentile(&ms, 0.5),
            }
        })
        .collect();
    medians.sort_by(|a, b| b.median_ms.total_cmp(&a.median_ms));
    medians.truncate(SLOWEST);
    medians
}

/// When a question is asked, as the case gives it.
fn asked_at(case: &Case) -> Option<DateTime<Utc>> {
    case.question_date
        .as_deref()
        .and_then(|d| DateTime::parse_from_rfc3339(d).ok())
        .map(|d| d.with_timezone(&Utc))
}

/// Resident memory of this process in MiB, where the OS says.
fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Measures the built store of `size`: `searches` searches cycling through the questions of
/// `cases`, then each question once by session search for recall.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    layout: &Layout,
    corpus: &Corpus,
    size: usize,
    config: &Config,
    model: Arc<dyn Embedder>,
    cases: &[Case],
    gold_file: &Path,
    searches: usize,
) -> Result<Measured, BenchError> {
    if cases.is_empty() {
        return Err(BenchError::data(gold_file, "no question to search"));
    }
    let built = layout.progress(size)?;
    if built.turns < size {
        return Err(BenchError::data(
            &layout.dir(size),
            format!(
                "the store of {size} turns holds {} so far: build it first",
                built.turns
            ),
        ));
    }
    let dir = layout.dir(size);
    let started = Instant::now();
    let engine = Engine::open_existing_at(&dir, &layout.store, config.clone(), Some(model))?;
    let open_ms = started.elapsed().as_secs_f64() * 1000.0;
    let filter = ScopeFilter::user(layout.scope(size)?.user_id);
    let request = |case: &Case, k: usize, budget: Option<usize>| SearchRequest {
        filter: filter.clone(),
        query: case.question.clone(),
        k: Some(k),
        budget,
        asked_at: asked_at(case),
        condition: None,
        threshold: None,
    };
    let mut latencies = Vec::with_capacity(searches);
    let mut by_question: HashMap<usize, Vec<f64>> = HashMap::new();
    let mut first_search_ms = 0.0;
    for i in 0..searches.max(1) {
        let case = &cases[i % cases.len()];
        let t = Instant::now();
        engine.search(&request(case, SEARCH_K, Some(SEARCH_BUDGET)))?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        if i == 0 {
            first_search_ms = ms;
        } else {
            latencies.push(ms);
            by_question.entry(i % cases.len()).or_default().push(ms);
        }
    }
    let rss_mib = rss_mib();
    let filtered = FILTER_KINDS
        .into_iter()
        .map(|kind| filtered(&engine, &filter, cases, kind))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    let mut rankings = HashMap::new();
    for case in cases {
        let hits = engine
            .search_sessions(&request(case, SEARCH_K, None))?
            .results;
        // A session and its later passes are one conversation: ranked once, where first found
        // (counted twice, one gold session would fill two places of the recall).
        let mut ranked: Vec<String> = Vec::new();
        for h in hits {
            let session = original_session(&h.source.session.unwrap_or_default()).to_string();
            if !ranked.contains(&session) {
                ranked.push(session);
            }
        }
        rankings.insert(case.id.clone(), ranked);
    }
    let bytes = match layout.store {
        StoreAt::Embedded => dir_bytes(&dir),
        StoreAt::Postgres(_) => engine.stats()?.store.bytes,
    };
    drop(engine);
    latencies.sort_by(f64::total_cmp);
    // Every question is ranked: only now is gold read.
    let gold = crate::gold::longmemeval(gold_file)?;
    let recall = Recall::score(&rankings, &gold, &|ids| corpus.holds_all(ids, size));
    Ok(Measured {
        turns: built.turns,
        bytes,
        open_ms,
        first_search_ms,
        searches: latencies.len() + 1,
        search_ms_p50: percentile(&latencies, 0.5),
        search_ms_p99: percentile(&latencies, 0.99),
        rss_mib,
        slowest: slowest(cases, &by_question),
        recall,
        filtered,
    })
}

/// [`Filtered`] over the first questions that say when they were asked, with the filter `kind`
/// (no such question: `None`).
fn filtered(
    engine: &Engine,
    filter: &ScopeFilter,
    cases: &[Case],
    kind: FilterKind,
) -> Result<Option<Filtered>, BenchError> {
    let mut latencies = Vec::new();
    let (mut admitted_sum, mut full) = (0u64, 0usize);
    for case in cases.iter().take(FILTERED_SEARCHES) {
        let Some(at) = asked_at(case) else { continue };
        let window = kind.filter(at);
        let condition =
            aril_core::Condition::from_mem0(&window).map_err(aril_engine::EngineError::from)?;
        let (_, admitted) = engine.record_page(filter, Some(&condition), 0, 0)?;
        let t = Instant::now();
        let found = engine.search(&SearchRequest {
            filter: filter.clone(),
            query: case.question.clone(),
            k: Some(SEARCH_K),
            budget: None,
            asked_at: Some(at),
            condition: Some(condition),
            threshold: None,
        })?;
        latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        admitted_sum += admitted;
        if found.results.len() as u64 == admitted.min(SEARCH_K as u64) {
            full += 1;
        }
    }
    if latencies.is_empty() {
        return Ok(None);
    }
    let n = latencies.len();
    latencies.sort_by(f64::total_cmp);
    Ok(Some(Filtered {
        days: match kind {
            FilterKind::Days(days) => days,
            FilterKind::Metadata { .. } => 0,
        },
        metadata: match kind {
            FilterKind::Days(_) => String::new(),
            FilterKind::Metadata { .. } => kind.filter(Utc::now()).to_string(),
        },
        searches: n,
        p50_ms: percentile(&latencies, 0.5),
        p99_ms: percentile(&latencies, 0.99),
        admitted_mean: admitted_sum as f64 / n as f64,
        full: full as f64 / n as f64,
    }))
}
