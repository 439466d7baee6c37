//! The metric code reproduces the seed-004 study's own per-question figures, and strategies see
//! no gold: the same file with every gold field removed gives the same cases and rankings.

mod common;

use std::sync::Arc;

use common::{shared, small_file};

use aril_bench::metrics::{fractional_recall, rankfor_ndcg};
use aril_bench::strategy::{Embeddings, SessionDocs, Strategy};
use aril_bench::{data, score};
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
