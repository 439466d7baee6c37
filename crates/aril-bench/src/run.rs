//! One bench run: load the cases, let the strategy index each haystack and rank each question,
//! then (and only then) read the gold and score.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use aril_core::tokens;
use aril_embed::Embedder;

use crate::report::{BenchReport, Cost, QaCost, QuestionRanking};
use crate::strategy::{self, Embeddings, Unit};
use crate::{BenchError, data, gold, qa, score};

/// The benchmarks `aril bench` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    LongMemEval,
    Locomo,
    HotpotQa,
}

impl Benchmark {
    /// The cut-offs of the benchmark's `@k` metrics when `--k` does not give them: LongMemEval
    /// sessions at 5 and 10, LoCoMo units at 5, 10 and 20 and sessions at 5 and 10, HotpotQA
    /// paragraphs at 2, 5 and 10.
    pub fn default_cut_offs(self) -> CutOffs {
        let (units, sessions): (&[usize], &[usize]) = match self {
            Benchmark::LongMemEval => (&[], &[5, 10]),
            Benchmark::Locomo => (&[5, 10, 20], &[5, 10]),
            Benchmark::HotpotQa => (&[], &[2, 5, 10]),
        };
        CutOffs {
            units: units.to_vec(),
            sessions: sessions.to_vec(),
        }
    }

    /// Whether the benchmark's gold is sessions only (LongMemEval sessions, HotpotQA
    /// paragraphs), so strategies rank sessions ([`Strategy::rank_sessions`]); LoCoMo's evidence
    /// is turns.
    pub fn gold_is_sessions(self) -> bool {
        !matches!(self, Benchmark::Locomo)
    }

    pub fn name(self) -> &'static str {
        match self {
            Benchmark::LongMemEval => "longmemeval",
            Benchmark::Locomo => "locomo",
            Benchmark::HotpotQa => "hotpotqa",
        }
    }
}

/// The `k`s of the `@k` metrics: over ranked units (LoCoMo's evidence recall) and over the
/// sessions (LongMemEval sessions, LoCoMo sessions, HotpotQA paragraphs) their units rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutOffs {
    pub units: Vec<usize>,
    pub sessions: Vec<usize>,
}

/// What to run.
pub struct BenchOptions {
    pub benchmark: Benchmark,
    pub data: PathBuf,
    pub strategy: String,
    /// Only the first N questions.
    pub limit: Option<usize>,
    /// Cut-offs of every `@k` metric (units and sessions alike), in place of
    /// [`Benchmark::default_cut_offs`].
    pub ks: Option<Vec<usize>>,
    /// Embedding cache and the `aril` strategy's data directories.
    pub cache_dir: PathBuf,
    pub model: Arc<dyn Embedder>,
    /// Engine configuration for the `aril` strategies.
    pub engine: aril_engine::Config,
    /// Where the `aril` strategy keeps its store (PostgreSQL: a database of its own per
    /// benchmark configuration; the data directory then holds only the derived indexes).
    pub store: aril_engine::StoreAt,
    /// Models of the `aril-llm` strategy.
    pub models: strategy::BenchModels,
    /// Answer each question (and judge the answers) when set.
    pub qa: Option<qa::QaOptions>,
    /// LoCoMo only: an audit of its answer key ([`gold::LocomoAudit`]); adds the
    /// `evidence_audited` group, scored against the audit's corrected evidence, and with answers
    /// `qa_audited` and `judge_audited`, against its corrected answers.
    pub audit: Option<PathBuf>,
}

/// Units each strategy returns per question: enough for 10 distinct sessions and to fill the
/// largest budget (4k tokens) with the smallest units (single turns of ~35 tokens), so no
/// strategy is cut short by the count instead of the budget.
const DEPTH: usize = 300;
/// Units per question whose turns `--rankings` lists (LoCoMo).
pub const UNITS_SHOWN: usize = 60;

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// The cut-offs to score at: `asked` sorted and deduplicated, each from 1 to the units a strategy
/// returns, for units and sessions alike; or the benchmark's defaults.
fn cut_offs(benchmark: Benchmark, asked: Option<&[usize]>) -> Result<CutOffs, BenchError> {
    let Some(asked) = asked else {
        return Ok(benchmark.default_cut_offs());
    };
    if asked.is_empty() {
        return Err(BenchError::InvalidK {
            k: "(empty)".into(),
            why: "give at least one cut-off, e.g. --k 5,10".into(),
        });
    }
    if let Some(bad) = asked.iter().find(|&&k| k == 0 || k > DEPTH) {
        return Err(BenchError::InvalidK {
            k: bad.to_string(),
            why: format!("a cut-off is from 1 to {DEPTH}, the units each strategy returns"),
        });
    }
    let mut ks = asked.to_vec();
    ks.sort_unstable();
    ks.dedup();
    Ok(CutOffs {
        units: match benchmark {
            Benchmark::Locomo => ks.clone(),
            Benchmark::LongMemEval | Benchmark::HotpotQa => Vec::new(),
        },
        sessions: ks,
    })
}

/// The first 16 hex digits of a file's content hash: names what is derived from the file.
pub(crate) fn file_hash(path: &std::path::Path) -> Result<String, BenchError> {
    let bytes = std::fs::read(path).map_err(|e| BenchError::Io {
        what: format!("reading {}", path.display()),
        cause: e,
    })?;
    Ok(aril_core::content_hash(&[&String::from_utf8_lossy(&bytes)])[..16].to_string())
}

/// The `aril` strategy's data directory for a benchmark file (by its hash). What ingest depends
/// on (dense roles, turn and segment vectors, segmenter, the weights stored texts embed with)
/// picks it; recall settings do not, so trying them reuses the ingested store.
pub(crate) fn aril_dir(
    cache_dir: &std::path::Path,
    benchmark: Benchmark,
    data_hash: &str,
    engine: &aril_engine::Config,
    store: &aril_engine::StoreAt,
) -> PathBuf {
    let ingest_key = serde_json::to_string(&(
        &engine.dense_roles,
        &engine.segmenter,
        &engine.segment_vectors,
        &engine.turn_vectors,
        &engine.sentence_min_bytes,
    ))
    .unwrap_or_default();
    // The full weights add nothing, so the stores built before the setting existed still serve.
    let ingest_hash = match engine.stored_weights.variant() {
        "" => aril_core::content_hash(&[&ingest_key]),
        variant => aril_core::content_hash(&[&ingest_key, variant]),
    };
    let ingest_hash = &ingest_hash[..8];
    let store_tag = match store {
        aril_engine::StoreAt::Embedded => String::new(),
        at => format!("-pg-{}", &aril_core::content_hash(&[&at.describe()])[..8]),
    };
    cache_dir.join(format!(
        "aril-{}-{data_hash}-{ingest_hash}{store_tag}",
        benchmark.name()
    ))
}

/// Runs one strategy on one benchmark file. `progress(done, total)` is called after each question;
/// `cancel` stops between questions (the report then covers the questions done).
pub fn run(
    options: &BenchOptions,
    progress: &mut dyn FnMut(usize, usize),
    cancel: &AtomicBool,
) -> Result<BenchReport, BenchError> {
    let ks = cut_offs(options.benchmark, options.ks.as_deref())?;
    // Checked before the long part; held for the scorer, never shown to the strategy.
    let audit = match (&options.audit, options.benchmark) {
        (None, _) => None,
        (Some(path), Benchmark::Locomo) => Some(gold::LocomoAudit::read(path)?),
        (Some(_), other) => {
            return Err(BenchError::AuditNotLocomo(other.name().to_string()));
        }
    };
    let mut cases = match options.benchmark {
        Benchmark::LongMemEval => data::longmemeval(&options.data)?,
        Benchmark::Locomo => data::locomo(&options.data)?,
        Benchmark::HotpotQa => data::hotpotqa(&options.data)?,
    };
    if let Some(n) = options.limit {
        cases.truncate(n);
    }
    let data_hash = file_hash(&options.data)?;
    let embeddings = Embeddings::open(
        options.model.clone(),
        &options.cache_dir.join("embeddings.sqlite"),
    )?;
    let aril_dir = aril_dir(
        &options.cache_dir,
        options.benchmark,
        &data_hash,
        &options.engine,
        &options.store,
    );
    let mut strategy = strategy::by_name(
        &options.strategy,
        embeddings,
        &aril_dir,
        &options.store,
        options.engine.clone(),
        &options.models,
    )?;

    let mut rankings: Vec<Vec<Unit>> = Vec::with_capacity(cases.len());
    let mut ingest_s = 0.0;
    let mut latencies = Vec::with_capacity(cases.len());
    let mut context_tokens = 0usize;
    let mut answers: Vec<qa::Answer> = Vec::new();
    let mut indexed: Option<String> = None;
    let total = cases.len();
    for (done, case) in cases.iter().enumerate() {
        if cancel.load(Ordering::SeqCst) {
            break;
        }
        if indexed.as_deref() != Some(case.haystack_key.as_str()) {
            let t = Instant::now();
            strategy.index(case)?;
            ingest_s += t.elapsed().as_secs_f64();
            indexed = Some(case.haystack_key.clone());
        }
        let t = Instant::now();
        let units = if options.benchmark.gold_is_sessions() {
            strategy.rank_sessions(case, DEPTH)?
        } else {
            strategy.rank(case, DEPTH)?
        };
        latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        context_tokens += units
            .iter()
            .take(10)
            .map(|u| tokens::count(&u.text))
            .sum::<usize>();
        if let Some(qa) = &options.qa {
            // The reader gets the ranked units, the same whatever the metrics rank by.
            let ranked;
            let read = if options.benchmark.gold_is_sessions() {
                ranked = strategy.rank(case, DEPTH)?;
                &ranked
            } else {
                &units
            };
            let (context, n) = qa::answer_context(case, read, qa.context_budget);
            answers.push(qa::answer(qa.answerer.as_ref(), case, &context, n));
        }
        rankings.push(units);
        progress(done + 1, total);
    }
    let cases = &cases[..rankings.len()];
    // Gold is read only now, after every ranking and answer is fixed.
    let gold = match options.benchmark {
        Benchmark::LongMemEval => gold::longmemeval(&options.data)?,
        Benchmark::Locomo => gold::locomo(&options.data)?,
        Benchmark::HotpotQa => gold::hotpotqa(&options.data)?,
    };
    let audited = audit.map(|a| a.resolve(cases));
    let mut scores = match options.benchmark {
        Benchmark::LongMemEval => score::longmemeval(cases, &rankings, &gold, &ks.sessions),
        Benchmark::Locomo => score::locomo(cases, &rankings, &gold, &ks, audited.as_ref()),
        Benchmark::HotpotQa => score::hotpotqa(cases, &rankings, &gold, &ks.sessions),
    };
    let qa_scores = options.qa.as_ref().map(|qa| {
        qa::score(
            options.benchmark,
            cases,
            &answers,
            &gold,
            audited.as_ref().map(|a| &a.answers),
            qa.judge.as_deref(),
            progress,
            cancel,
        )
    });
    if let Some(q) = &qa_scores {
        merge_qa(&mut scores, q);
    }
    latencies.sort_by(|a, b| a.total_cmp(b));
    let llm = strategy.llm_cost();
    let mut notes = scores.notes;
    let details = strategy.details();
    if !details.is_null()
        && let Some(map) = notes.as_object_mut()
    {
        map.insert("strategy".into(), details);
    }
    let per_question = cases
        .iter()
        .zip(&rankings)
        .enumerate()
        .map(|(i, (c, units))| QuestionRanking {
            question_id: c.id.clone(),
            retrieved_ids: score::session_ranking(units).into_iter().take(10).collect(),
            retrieved_turns: match options.benchmark {
                Benchmark::Locomo => units
                    .iter()
                    .take(UNITS_SHOWN)
                    .map(|u| u.turns.clone())
                    .collect(),
                _ => Vec::new(),
            },
            qa: qa_scores
                .as_ref()
                .and_then(|q| q.per_question.get(i).cloned()),
        })
        .collect();
    let answer_cost = options.qa.as_ref().map(|_| {
        let mut c = aril_engine::CallCost::default();
        for a in &answers {
            c.add(a.cost);
        }
        c
    });
    Ok(BenchReport {
        benchmark: options.benchmark.name().to_string(),
        data: options
            .data
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        strategy: options.strategy.clone(),
        embedder: options.model.name().to_string(),
        n_questions: rankings.len(),
        metrics: scores.metrics,
        by_group: scores.by_group,
        notes,
        cost: Cost {
            embedded_texts: strategy.embedded_texts(),
            model: strategy.model_work(),
            context_tokens_per_query: context_tokens as f64 / rankings.len().max(1) as f64,
            ingest_s,
            query_ms_p50: percentile(&latencies, 0.5),
            query_ms_p99: percentile(&latencies, 0.99),
            llm_calls: llm.llm_calls,
            llm_tokens_in: llm.prompt_tokens,
            llm_tokens_out: llm.completion_tokens,
            llm_tokens_o200k: llm.o200k_tokens,
            answer: answer_cost.map(|c| QaCost::new(c, &answers)),
            judge: qa_scores
                .as_ref()
                .filter(|_| options.qa.as_ref().is_some_and(|q| q.judge.is_some()))
                .map(|q| QaCost::new(q.judge_cost, &[])),
        },
        rankings: per_question,
    })
}

/// Puts the answer scores beside the retrieval ones: `qa` and `judge` groups in the headline and
/// in each question type or category.
fn merge_qa(scores: &mut score::Scores, qa: &qa::QaScores) {
    if let Some(m) = scores.metrics.as_object_mut() {
        for (k, v) in &qa.metrics {
            m.insert(k.clone(), v.clone());
        }
    }
    if let Some(groups) = scores.by_group.as_object_mut() {
        for (name, extra) in &qa.by_group {
            let entry = groups
                .entry(name.clone())
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let Some(m) = entry.as_object_mut() {
                for (k, v) in extra {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
    }
    if !qa.judge_failures.is_empty()
        && let Some(n) = scores.notes.as_object_mut()
    {
        n.insert(
            "judge_failures".into(),
            serde_json::json!(qa.judge_failures.iter().take(20).collect::<Vec<_>>()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_offs_default_per_benchmark_and_are_checked() {
        assert_eq!(
            cut_offs(Benchmark::Locomo, None).unwrap(),
            CutOffs {
                units: vec![5, 10, 20],
                sessions: vec![5, 10]
            }
        );
        let asked = cut_offs(Benchmark::LongMemEval, Some(&[10, 1, 10, 3])).unwrap();
        assert_eq!(asked.sessions, vec![1, 3, 10]);
        assert!(asked.units.is_empty());
        assert_eq!(
            cut_offs(Benchmark::Locomo, Some(&[7])).unwrap().units,
            vec![7]
        );
        for bad in [&[][..], &[0], &[5, DEPTH + 1]] {
            let e = cut_offs(Benchmark::HotpotQa, Some(bad)).unwrap_err();
            assert!(matches!(e, BenchError::InvalidK { .. }), "{e}");
        }
    }
}
