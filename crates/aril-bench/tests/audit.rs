//! `--audit`: the public audit of LoCoMo's answer key rescoring a real run, and refused where it
//! does not apply before anything is ranked.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use aril_bench::{BenchError, BenchOptions, Benchmark};
use common::{bench_options, first_conversation, shared, small_file};

/// A run with the shared LoCoMo audit.
fn options(benchmark: Benchmark, data: PathBuf, cache: &Path) -> BenchOptions {
    BenchOptions {
        audit: Some(shared("locomo/locomo_audit_errors.json")),
        ..bench_options(benchmark, data, cache)
    }
}

#[test]
fn the_audit_rescores_the_questions_it_corrects_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let data = first_conversation(dir.path());
    let audited = aril_bench::run(
        &options(Benchmark::Locomo, data.clone(), dir.path()),
        &mut |_, _| {},
        &AtomicBool::new(false),
    )
    .unwrap();
    let plain = aril_bench::run(
        &bench_options(Benchmark::Locomo, data, dir.path()),
        &mut |_, _| {},
        &AtomicBool::new(false),
    )
    .unwrap();

    // Questions 1, 2, 4 and 5 of conv-26 have audit entries; two of them cite other turns
    // (question 1: D1:14 for D1:12; question 4: D3:1 and D11:14 for D1:5).
    let notes = &audited.notes["audit"];
    let entries = notes["entries"].as_u64().unwrap();
    assert!(entries > 100, "{notes}");
    assert_eq!(notes["matched"], 4, "{notes}");
    assert_eq!(notes["unmatched"].as_u64().unwrap(), entries - 4);
    assert_eq!(notes["evidence_changed"], 2, "{notes}");
    let table = audited.table();
    assert!(
        table.contains(&format!("audit: 4 of its {entries} entries")),
        "{table}"
    );
    assert!(!plain.table().contains("audit:"));
    // The official group is untouched by the audit; the audited one differs where evidence moved.
    assert_eq!(audited.metrics["evidence"], plain.metrics["evidence"]);
    assert!(plain.metrics.get("evidence_audited").is_none());
    let (official, corrected) = (
        &audited.metrics["evidence"],
        &audited.metrics["evidence_audited"],
    );
    assert_eq!(official["n"], corrected["n"]);
    assert!(
        ["recall@5", "recall@10", "recall@1k_tokens"]
            .iter()
            .any(|k| official[k] != corrected[k]),
        "{official} vs {corrected}"
    );
    assert_eq!(audited.rankings.len(), plain.rankings.len());
    for (a, b) in audited.rankings.iter().zip(&plain.rankings) {
        assert_eq!(a.retrieved_turns, b.retrieved_turns, "{}", a.question_id);
    }
}

#[test]
fn the_audit_is_refused_outside_locomo_and_when_malformed_before_any_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let lme = options(
        Benchmark::LongMemEval,
        small_file(dir.path(), false),
        dir.path(),
    );
    let e =
        aril_bench::run(&lme, &mut |_, _| panic!("ranked"), &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(e, BenchError::AuditNotLocomo(_)), "{e}");

    let bad = dir.path().join("bad-audit.json");
    std::fs::write(&bad, r#"{"not": "a list"}"#).unwrap();
    let mut locomo = options(
        Benchmark::Locomo,
        first_conversation(dir.path()),
        dir.path(),
    );
    locomo.audit = Some(bad);
    let e = aril_bench::run(
        &locomo,
        &mut |_, _| panic!("ranked"),
        &AtomicBool::new(false),
    )
    .unwrap_err();
    assert!(e.to_string().contains("bad-audit.json"), "{e}");
}
