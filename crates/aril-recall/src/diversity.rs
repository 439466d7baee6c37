//! Diversity-preserving selection after fusion. RRF across paths favours what several paths agree
//! on, so a question's rarer aspect (the second entity of a comparison, the earlier of two events)
//! can fall out of a short context. Here every path first keeps a share of its own best units, then
//! the fused order fills the rest; near-duplicates of a unit already chosen are dropped throughout.

use std::collections::HashSet;
use std::hash::Hash;

/// Picks at most `k` items: first, round-robin over the paths, each path's best items until it has
/// `share` of its own (or runs out); then items in `fused` order. An item equal to, or a
/// near-duplicate (`near`) of, an item already chosen is skipped. The result is in fused order
/// (items absent from `fused` go last, in the order they were chosen).
pub fn select_diverse<T: Clone + Eq + Hash>(
    fused: &[T],
    paths: &[Vec<T>],
    k: usize,
    share: usize,
    near: impl Fn(&T, &T) -> bool,
) -> Vec<T> {
    let mut chosen: Vec<T> = Vec::new();
    let mut seen: HashSet<T> = HashSet::new();
    let admissible = |chosen: &[T], seen: &HashSet<T>, item: &T| {
        !seen.contains(item) && !chosen.iter().any(|c| near(c, item))
    };
    let mut cursors = vec![0usize; paths.len()];
    let mut kept = vec![0usize; paths.len()];
    loop {
        let mut progressed = false;
        for (p, path) in paths.iter().enumerate() {
            if chosen.len() >= k || kept[p] >= share {
                continue;
            }
            while let Some(item) = path.get(cursors[p]) {
                cursors[p] += 1;
                if admissible(&chosen, &seen, item) {
                    seen.insert(item.clone());
                    chosen.push(item.clone());
                    kept[p] += 1;
                    progressed = true;
                    break;
                }
            }
        }
        if !progressed {
            break;
        }
    }
    for item in fused {
        if chosen.len() >= k {
            break;
        }
        if admissible(&chosen, &seen, item) {
            seen.insert(item.clone());
            chosen.push(item.clone());
        }
    }
    let position = |item: &T| fused.iter().position(|f| f == item).unwrap_or(usize::MAX);
    // A stable sort keeps the chosen order among items absent from `fused`.
    chosen.sort_by_key(|item| position(item));
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: &&str, _: &&str) -> bool {
        false
    }

    #[test]
    fn a_minority_path_keeps_its_share_against_the_fused_order() {
        // Path A dominates the fusion; path B's best unit ranks last.
        let fused = ["a1", "a2", "a3", "a4", "b1"];
        let paths = vec![vec!["a1", "a2", "a3", "a4"], vec!["b1"]];
        let plain = select_diverse(&fused, &[], 3, 0, never);
        assert_eq!(plain, ["a1", "a2", "a3"], "without shares: the fused top 3");
        let diverse = select_diverse(&fused, &paths, 3, 1, never);
        assert_eq!(
            diverse,
            ["a1", "a2", "b1"],
            "B keeps one unit, in fused order"
        );
    }

    #[test]
    fn near_duplicates_are_dropped_and_the_next_unit_takes_the_place() {
        let fused = ["x", "x'", "y", "z"];
        let near = |a: &&str, b: &&str| a.trim_end_matches('\'') == b.trim_end_matches('\'');
        assert_eq!(select_diverse(&fused, &[], 3, 0, near), ["x", "y", "z"]);
    }

    #[test]
    fn shares_never_exceed_k_and_units_are_not_repeated() {
        let fused = ["a", "b", "c"];
        let paths = vec![vec!["a", "b"], vec!["a", "c"], vec!["b", "c"]];
        let picked = select_diverse(&fused, &paths, 2, 2, never);
        assert_eq!(picked.len(), 2);
        assert_ne!(picked[0], picked[1]);
        assert!(select_diverse(&fused, &paths, 0, 2, never).is_empty());
    }

    #[test]
    fn a_path_whose_units_are_taken_reaches_further_down_its_list() {
        let fused = ["a", "b", "c", "d"];
        let paths = vec![vec!["a", "b"], vec!["a", "d"]];
        // Path 0 takes "a"; path 1's "a" is taken, so it keeps "d".
        assert_eq!(select_diverse(&fused, &paths, 2, 1, never), ["a", "d"]);
    }
}
