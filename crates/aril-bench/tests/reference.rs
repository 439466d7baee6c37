//! The metric code reproduces the seed-004 study's own per-question figures, and strategies see
//! no gold: the same file with every gold field removed gives the same cases and rankings.

mod common;

use std::sync::Arc;

use common::{shared, small_file};

use aril_bench::metrics::{fractional_recall, rankfor_ndcg};
use aril_bench::strategy::{Embeddings, SessionDocs, Strategy, seci_extract};
use aril_bench::{data, score};
use aril_core::Role;
use aril_embed::{MiniLm, default_model_dir};

#[test]
fn rankfor_metrics_match_the_published_per_question_values() {
    let dir = shared("longmemeval/reference");
    let mut checked = 0;
    for file in [
        "seed004_raw-session-all_dev.jsonl",
        "seed004_seci-hybrid_dev.jsonl",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for line in text.lines() {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let ids = |key: &str| -> Vec<String> {
                row[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect()
            };
            let (got, gold) = (ids("retrieved_ids"), ids("gold_ids"));
            let m = &row["metrics"]["session"];
            for k in [5, 10] {
                let close = |a: f64, key: String| {
                    let b = m[&key].as_f64().unwrap();
                    assert!(
                        (a - b).abs() < 1e-9,
                        "{} {key}: {a} vs {b}",
                        row["question_id"]
                    );
                };
                close(fractional_recall(&got, &gold, k), format!("recall_all@{k}"));
                close(rankfor_ndcg(&got, &gold, k), format!("ndcg_any@{k}"));
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * 93);
}

#[test]
fn strategies_never_see_gold() {
    let dir = tempfile::tempdir().unwrap();
    let full = data::longmemeval(&small_file(dir.path(), false)).unwrap();
    let stripped = data::longmemeval(&small_file(dir.path(), true)).unwrap();
    assert_eq!(full.len(), stripped.len());
    let model = Arc::new(MiniLm::load(&default_model_dir()).unwrap());
    let embeddings = Embeddings::open(model, &dir.path().join("cache.sqlite")).unwrap();
    let mut strategy = SessionDocs::raw_user(embeddings);
    for (a, b) in full.iter().zip(&stripped) {
        assert_eq!(
            format!("{a:?}"),
            format!("{b:?}"),
            "the case changed with gold removed"
        );
        strategy.index(a).unwrap();
        let ra = score::session_ranking(&strategy.rank(a, 10).unwrap());
        strategy.index(b).unwrap();
        let rb = score::session_ranking(&strategy.rank(b, 10).unwrap());
        assert_eq!(ra, rb);
        assert!(!ra.is_empty());
    }
}

/// A retrieved session covers the turns whose text it hands the reader, and no others: the budget
/// views count what a reader gets.
#[test]
fn session_units_cover_the_turns_they_show() {
    let dir = tempfile::tempdir().unwrap();
    let cases = data::longmemeval(&small_file(dir.path(), false)).unwrap();
    let model = Arc::new(MiniLm::load(&default_model_dir()).unwrap());
    let open = || Embeddings::open(model.clone(), &dir.path().join("cache.sqlite")).unwrap();
    let case = &cases[0];
    let session = |id: &str| case.sessions.iter().find(|s| s.id == id).unwrap();
    let mut user = SessionDocs::raw_user(open());
    let mut digest = seci_extract(open());
    user.index(case).unwrap();
    digest.index(case).unwrap();
    let (by_user, by_digest) = (user.rank(case, 10).unwrap(), digest.rank(case, 10).unwrap());
    assert!(!by_user.is_empty() && !by_digest.is_empty());
    let mut assistant_turns = 0;
    for u in &by_user {
        let s = session(&u.session);
        let users: Vec<&String> = s
            .turns
            .iter()
            .filter(|t| t.role == Role::User)
            .map(|t| &t.id)
            .collect();
        assistant_turns += s.turns.len() - users.len();
        assert_eq!(u.turns.iter().collect::<Vec<_>>(), users);
        for t in s.turns.iter().filter(|t| t.role == Role::User) {
            assert!(u.text.contains(&t.text));
        }
    }
    assert!(
        assistant_turns > 0,
        "the sessions have assistant turns to leave out"
    );
    for u in &by_digest {
        let s = session(&u.session);
        assert_eq!(u.turns.len(), s.turns.len());
        for t in &s.turns {
            assert!(
                u.text.contains(&t.text),
                "the digest's unit is the transcript"
            );
        }
    }
}

/// The `aril` strategy reports the model's work for what it stored: every text the model ran,
/// its passes and word pieces, against the turns stored; pooled segment vectors cost no pass and
/// are not counted. A second run over the same cache stores and embeds nothing.
#[test]
fn the_aril_strategy_counts_the_model_work_of_its_writes() {
    let dir = tempfile::tempdir().unwrap();
    let data = small_file(dir.path(), false);
    let options = aril_bench::BenchOptions {
        strategy: "aril".into(),
        ..common::bench_options(
            aril_bench::Benchmark::LongMemEval,
            data,
            &dir.path().join("cache"),
        )
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    let cold = aril_bench::run(&options, &mut |_, _| {}, &never).unwrap();
    let model = cold.cost.model.unwrap();
    let cases = data::longmemeval(&small_file(dir.path(), false)).unwrap();
    // Only user turns are embedded (the default dense role), each once however often repeated.
    let user_texts: std::collections::HashSet<String> = cases
        .iter()
        .flat_map(|c| c.sessions.iter().flat_map(|s| &s.turns))
        .filter(|t| t.role == Role::User && !t.text.trim().is_empty())
        .map(|t| t.text.clone())
        .collect();
    assert_eq!(cold.cost.embedded_texts, user_texts.len());
    assert!(model.passes >= cold.cost.embedded_texts as u64);
    assert!(model.pieces > model.passes);
    assert!(model.turns_stored > cold.cost.embedded_texts);
    let warm = aril_bench::run(&options, &mut |_, _| {}, &never).unwrap();
    assert_eq!(warm.cost.embedded_texts, 0);
    assert_eq!(warm.cost.model.unwrap().turns_stored, 0);
    assert_eq!(warm.metrics, cold.metrics);
}
