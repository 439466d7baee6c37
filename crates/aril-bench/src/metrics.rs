//! Metric definitions, each exactly as its source computes it. All take a ranked list of ids (best
//! first, no repeats) and the gold ids.

use std::collections::HashSet;

fn rels(retrieved: &[String], gold: &[String], k: usize) -> Vec<f64> {
    let gold: HashSet<&String> = gold.iter().collect();
    retrieved
        .iter()
        .take(k)
        .map(|id| if gold.contains(id) { 1.0 } else { 0.0 })
        .collect()
}

/// LongMemEval's official `evaluate_retrieval` (src/retrieval/eval_utils.py): 1 if any / all gold
/// ids are in the top k.
pub fn official_recall(retrieved: &[String], gold: &[String], k: usize) -> (f64, f64) {
    let top: HashSet<&String> = retrieved.iter().take(k).collect();
    let any = gold.iter().any(|g| top.contains(g));
    let all = gold.iter().all(|g| top.contains(g));
    (f64::from(u8::from(any)), f64::from(u8::from(all)))
}

/// LongMemEval's official `dcg`: `r1 + sum_{i>=2} r_i / log2(i)` (positions from 1), so the first
/// two positions weigh the same (the quirk of the original code).
pub fn official_dcg(relevances: &[f64]) -> f64 {
    relevances
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if i == 0 {
                *r
            } else {
                r / ((i + 1) as f64).log2()
            }
        })
        .sum()
}

/// LongMemEval's official `ndcg` at k: DCG of the top k over the DCG of all relevances of the
/// corpus sorted (the gold count, cut at k).
pub fn official_ndcg(retrieved: &[String], gold: &[String], k: usize) -> f64 {
    let actual = official_dcg(&rels(retrieved, gold, k));
    let ideal = official_dcg(&vec![1.0; gold.len().min(k)]);
    if ideal == 0.0 { 0.0 } else { actual / ideal }
}

/// `sum_i rel_i / log2(i + 2)` (positions from 0).
fn dcg(relevances: &[f64]) -> f64 {
    relevances
        .iter()
        .enumerate()
        .map(|(i, r)| r / ((i + 2) as f64).log2())
        .sum()
}

/// seed 004 (`seci_vs_mempalace.py`): `|gold ∩ top k| / |gold|`.
pub fn fractional_recall(retrieved: &[String], gold: &[String], k: usize) -> f64 {
    if gold.is_empty() {
        return 0.0;
    }
    let hits: f64 = rels(retrieved, gold, k).iter().sum();
    hits / gold.len() as f64
}

/// seed 004: NDCG with `1/log2(i+2)` and the ideal DCG over `min(|gold|, k)` relevant items.
pub fn rankfor_ndcg(retrieved: &[String], gold: &[String], k: usize) -> f64 {
    let ideal = dcg(&vec![1.0; gold.len().min(k)]);
    if ideal == 0.0 {
        0.0
    } else {
        dcg(&rels(retrieved, gold, k)) / ideal
    }
}

/// MemPalace (`benchmarks/longmemeval_bench.py`): 1 if any gold id is in the top k.
pub fn recall_any(retrieved: &[String], gold: &[String], k: usize) -> f64 {
    official_recall(retrieved, gold, k).0
}

/// MemPalace's NDCG: the ideal DCG is taken over the *retrieved* top k sorted, not over the gold
/// set, so a single relevant item anywhere in the top k scores 1. Optimistic, reproduced as is.
pub fn mempalace_ndcg(retrieved: &[String], gold: &[String], k: usize) -> f64 {
    let actual = rels(retrieved, gold, k);
    let mut ideal = actual.clone();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg = dcg(&ideal);
    if idcg == 0.0 {
        0.0
    } else {
        dcg(&actual) / idcg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn official_ndcg_weighs_the_first_two_positions_alike() {
        let gold = ids(&["g"]);
        // Gold at position 2: dcg = 1/log2(2) = 1, ideal = 1 -> 1.0 (the quirk).
        assert_eq!(official_ndcg(&ids(&["x", "g"]), &gold, 10), 1.0);
        // At position 3: 1/log2(3).
        let n = official_ndcg(&ids(&["x", "y", "g"]), &gold, 10);
        assert!((n - 1.0 / 3f64.log2()).abs() < 1e-12);
        // Two gold, found at 1 and 3: (1 + 1/log2 3) / (1 + 1).
        let n = official_ndcg(&ids(&["a", "x", "b"]), &ids(&["a", "b"]), 10);
        assert!((n - (1.0 + 1.0 / 3f64.log2()) / 2.0).abs() < 1e-12);
    }

    #[test]
    fn official_recall_any_and_all() {
        let gold = ids(&["a", "b"]);
        assert_eq!(
            official_recall(&ids(&["a", "x", "b"]), &gold, 2),
            (1.0, 0.0)
        );
        assert_eq!(
            official_recall(&ids(&["a", "x", "b"]), &gold, 3),
            (1.0, 1.0)
        );
        assert_eq!(official_recall(&ids(&["x"]), &gold, 3), (0.0, 0.0));
    }

    #[test]
    fn rankfor_metrics_are_fractional() {
        let gold = ids(&["a", "b", "c"]);
        let got = ids(&["a", "x", "b"]);
        assert!((fractional_recall(&got, &gold, 3) - 2.0 / 3.0).abs() < 1e-12);
        let ideal = 1.0 + 1.0 / 3f64.log2() + 0.5;
        let actual = 1.0 + 0.5;
        assert!((rankfor_ndcg(&got, &gold, 3) - actual / ideal).abs() < 1e-12);
        // Empty gold: nothing to find.
        assert_eq!(fractional_recall(&got, &[], 3), 0.0);
        assert_eq!(rankfor_ndcg(&got, &[], 3), 0.0);
    }

    #[test]
    fn mempalace_ndcg_is_optimistic() {
        // One gold of two found at rank 3: the ideal is taken from what was retrieved, so 1/log2(4)
        // over 1/log2(2)... no: ideal puts the one hit first, giving 0.5 / 1.
        let n = mempalace_ndcg(&ids(&["x", "y", "a"]), &ids(&["a", "b"]), 5);
        assert!((n - 0.5).abs() < 1e-12);
        // All found in order scores 1 even when gold has more items than found.
        assert_eq!(mempalace_ndcg(&ids(&["a"]), &ids(&["a", "b", "c"]), 5), 1.0);
        assert_eq!(mempalace_ndcg(&ids(&["x"]), &ids(&["a"]), 5), 0.0);
    }
}
