//! Reciprocal-rank fusion (Cormack et al., 2009): `score(d) = sum_i w_i / (k + rank_i(d))`, ranks
//! from 1. Lists of different scorers (cosine, BM25) fuse without calibrating their scores.

use std::collections::HashMap;
use std::hash::Hash;

/// The customary `k`; seed 004's hybrid uses it too.
pub const RRF_K: f32 = 60.0;

/// Fuses ranked lists (best first) with weights; returns items by descending fused score, ties
/// broken by first appearance so the result is deterministic.
pub fn rrf<T: Clone + Eq + Hash>(lists: &[(&[T], f32)], k: f32) -> Vec<(T, f32)> {
    let ranked: Vec<Vec<(T, usize)>> = lists
        .iter()
        .map(|(list, _)| list.iter().cloned().zip(1..).collect())
        .collect();
    let views: Vec<(&[(T, usize)], f32)> = ranked
        .iter()
        .zip(lists)
        .map(|(r, (_, w))| (r.as_slice(), *w))
        .collect();
    rrf_ranked(&views, k)
}

/// RRF over lists whose items carry their own rank (from 1); items may share a rank, as the turns
/// of one retrieved segment do. An item's first occurrence in a list counts.
pub fn rrf_ranked<T: Clone + Eq + Hash>(lists: &[(&[(T, usize)], f32)], k: f32) -> Vec<(T, f32)> {
    let mut scores: HashMap<T, (f32, usize)> = HashMap::new();
    let mut order = 0usize;
    for (list, weight) in lists {
        let mut seen = std::collections::HashSet::new();
        for (item, rank) in list.iter() {
            if !seen.insert(item) {
                continue;
            }
            let entry = scores.entry(item.clone()).or_insert_with(|| {
                order += 1;
                (0.0, order)
            });
            entry.0 += weight / (k + *rank as f32);
        }
    }
    let mut fused: Vec<(T, f32, usize)> = scores.into_iter().map(|(t, (s, o))| (t, s, o)).collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    fused.into_iter().map(|(t, s, _)| (t, s)).collect()
}

/// One list of every item `lists` hold (items with the same `key` are one), each at its best
/// rank in any of them, best first; equal ranks in the order of their keys. For lists that only
/// *find* candidates which a filter then admits: the age focus's searches, where what matters is
/// that a statement was found, not which search found it or how many did.
pub(crate) fn best_rank_union<T: Clone, K: Ord + Hash>(
    lists: &[&[T]],
    key: impl Fn(&T) -> K,
) -> Vec<T> {
    let mut best: HashMap<K, (usize, T)> = HashMap::new();
    for list in lists {
        for (rank, item) in list.iter().enumerate() {
            let entry = best
                .entry(key(item))
                .or_insert_with(|| (rank, item.clone()));
            entry.0 = entry.0.min(rank);
        }
    }
    let mut union: Vec<(K, usize, T)> = best.into_iter().map(|(k, (r, t))| (k, r, t)).collect();
    union.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    union.into_iter().map(|(_, _, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_union_keeps_each_item_once_at_its_best_rank() {
        let dense = ["a", "b", "c"];
        let lexical = ["c", "d"];
        let none: [&str; 0] = [];
        let union = best_rank_union(&[&dense, &lexical, &none], |s| s.to_string());
        // a and c are first somewhere (a before c by key), b and d second.
        assert_eq!(union, ["a", "c", "b", "d"]);
        assert!(best_rank_union(&[&none], |s: &&str| s.to_string()).is_empty());
    }

    #[test]
    fn agreement_beats_a_single_first_place() {
        let a = ["x", "y", "z"];
        let b = ["y", "w", "x"];
        let fused = rrf(&[(&a[..], 1.0), (&b[..], 1.0)], 60.0);
        let ids: Vec<&str> = fused.iter().map(|(t, _)| *t).collect();
        assert_eq!(ids, vec!["y", "x", "w", "z"]);
        let expected_y = 1.0 / 62.0 + 1.0 / 61.0;
        assert!((fused[0].1 - expected_y).abs() < 1e-7);
    }

    #[test]
    fn weights_scale_a_list() {
        let a = ["x"];
        let b = ["y"];
        let fused = rrf(&[(&a[..], 1.0), (&b[..], 2.0)], 60.0);
        assert_eq!(fused[0].0, "y");
    }

    #[test]
    fn shared_ranks_give_equal_credit() {
        let seg = [("a", 1), ("b", 1), ("c", 2)];
        let turns = [("b", 1)];
        let fused = rrf_ranked(&[(&seg[..], 1.0), (&turns[..], 1.0)], 60.0);
        assert_eq!(fused[0].0, "b");
        assert!((fused[1].1 - 1.0 / 61.0).abs() < 1e-7, "a shares rank 1");
        assert_eq!(fused[2].0, "c");
    }

    #[test]
    fn empty_lists_fuse_to_nothing() {
        let empty: [&str; 0] = [];
        assert!(rrf(&[(&empty[..], 1.0)], 60.0).is_empty());
    }
}
