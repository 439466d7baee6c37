//! Packing ranked units into a context: in rank order, skipping units whose turns are all already
//! shown, stopping at `k` units or when the next unit would overflow the token budget.

use std::collections::HashSet;
use std::hash::Hash;

/// The units chosen, as indexes into the candidate list, and the tokens they use.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    pub chosen: Vec<usize>,
    pub tokens: usize,
}

/// `candidates[i] = (tokens, turns covered)`. A unit is skipped when every turn it covers is
/// already covered by a chosen unit, or when it does not fit in what is left of the budget (a
/// smaller one further down may still fit).
pub fn pack<T: Eq + Hash + Clone>(
    candidates: &[(usize, Vec<T>)],
    k: usize,
    budget: Option<usize>,
) -> Packed {
    let mut covered: HashSet<T> = HashSet::new();
    let mut chosen = Vec::new();
    let mut tokens = 0usize;
    for (i, (cost, turns)) in candidates.iter().enumerate() {
        if chosen.len() >= k {
            break;
        }
        if !turns.is_empty() && turns.iter().all(|t| covered.contains(t)) {
            continue;
        }
        if let Some(b) = budget
            && tokens + cost > b
        {
            continue;
        }
        tokens += cost;
        covered.extend(turns.iter().cloned());
        chosen.push(i);
    }
    Packed { chosen, tokens }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_units_are_skipped() {
        let c = vec![(30, vec![1, 2, 3]), (10, vec![2]), (10, vec![4])];
        assert_eq!(pack(&c, 10, None).chosen, vec![0, 2]);
    }

    #[test]
    fn budget_skips_what_does_not_fit_but_keeps_smaller_ones() {
        let c = vec![(50, vec![1]), (60, vec![2]), (40, vec![3])];
        let p = pack(&c, 10, Some(100));
        assert_eq!(p.chosen, vec![0, 2]);
        assert_eq!(p.tokens, 90);
    }

    #[test]
    fn k_limits_the_count() {
        let c = vec![(1, vec![1]), (1, vec![2]), (1, vec![3])];
        assert_eq!(pack(&c, 2, None).chosen, vec![0, 1]);
    }
}
