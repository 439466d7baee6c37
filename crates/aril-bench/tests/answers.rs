//! `--answer` and `--judge` end to end against a real OpenAI-compatible server (llama-server with
//! the tiny SmolLM2: its answers are nonsense, so this checks plumbing, never quality).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use aril_bench::qa::QaOptions;
use aril_bench::{BenchOptions, Benchmark};
use aril_engine::llm::{ChatModel, LocalServer};
use common::{bench_options, first_conversation, shared, small_file};

/// A run of `benchmark` on `data` whose answerer and judge are the tiny local model; the server
/// lives as long as the first value.
fn answered_by_the_tiny_model(
    benchmark: Benchmark,
    data: PathBuf,
    dir: &Path,
) -> (LocalServer, BenchOptions) {
    let server = LocalServer::from_cache().unwrap_or_else(|e| panic!("{e}"));
    let model: Arc<dyn ChatModel> = Arc::new(server.client().unwrap());
    let options = BenchOptions {
        qa: Some(QaOptions {
            answerer: model.clone(),
            judge: Some(model),
            context_budget: 300,
        }),
        ..bench_options(benchmark, data, &dir.join("cache"))
    };
    (server, options)
}

#[test]
fn a_real_model_answers_and_judges_and_every_call_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, options) = answered_by_the_tiny_model(
        Benchmark::LongMemEval,
        small_file(dir.path(), false),
        dir.path(),
    );
    let report = aril_bench::run(&options, &mut |_, _| {}, &AtomicBool::new(false)).unwrap();
    let qa = &report.metrics["qa"];
    assert_eq!(qa["n"], 2, "{}", report.metrics);
    for key in ["f1", "bleu1"] {
        let v = qa[key].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&v), "{key} {v}");
    }
    let judge = &report.metrics["judge"];
    assert_eq!(
        judge["n"].as_u64().unwrap() + judge["judge_failed"].as_u64().unwrap(),
        2,
        "{judge}"
    );
    // One answer call per question, within the budget; at least one judge call per question.
    let answer = report.cost.answer.as_ref().unwrap();
    assert_eq!(answer.llm_calls, 2);
    assert!(answer.context_tokens_per_question.unwrap() <= 300.0);
    assert!(answer.o200k_tokens > 0);
    assert!(report.cost.judge.as_ref().unwrap().llm_calls >= 2);
    // Each question's answer rides along with its ranking, and its type's group has the scores.
    for r in &report.rankings {
        let q = r.qa.as_ref().unwrap();
        assert!(!q.answer.is_empty() || q.answer_error.is_some(), "{q:?}");
    }
    let types = report.by_group.as_object().unwrap();
    assert!(types.values().all(|t| t.get("qa").is_some()), "{types:?}");
}

#[test]
fn with_the_audit_a_real_model_answers_are_also_scored_against_its_corrected_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, mut options) = answered_by_the_tiny_model(
        Benchmark::Locomo,
        first_conversation(dir.path()),
        dir.path(),
    );
    options.audit = Some(shared("locomo/locomo_audit_errors.json"));
    let report = aril_bench::run(&options, &mut |_, _| {}, &AtomicBool::new(false)).unwrap();
    // Six headline questions (categories 1-3); the audit corrects the answers of questions 2
    // ("Counseling or mental health") and 5 (Saturday, not Sunday), whatever the model says.
    assert_eq!(report.metrics["qa"]["n"], 6, "{}", report.metrics);
    assert_eq!(report.metrics["qa_audited"]["n"], 6, "{}", report.metrics);
    assert!(report.metrics["judge_audited"]["n"].as_u64().unwrap() <= 6);
    let corrected: Vec<usize> = report
        .rankings
        .iter()
        .enumerate()
        .filter(|(_, r)| r.qa.as_ref().unwrap().corrected_answer.is_some())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(corrected, vec![2, 5]);
    for (i, r) in report.rankings.iter().enumerate() {
        let q = r.qa.as_ref().unwrap();
        if !corrected.contains(&i) {
            // Where the answers agree the verdict is reused, not asked again.
            assert_eq!(q.correct_audited, q.correct, "question {i}");
        }
    }
}
