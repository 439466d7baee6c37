//! Packing ranked units into a context: in rank order, each unit adds the turns not already shown,
//! stopping at `k` units; a unit whose new turns would overflow the token budget is passed over (a
//! smaller one further down may still fit). No turn is ever shown twice.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// The units chosen (index into the candidates, with the turns each newly shows), the tokens
/// used, and the cost of every turn packing asked about (each chosen turn's among them).
#[derive(Debug, Clone, PartialEq)]
pub struct Packed<T: Eq + Hash> {
    pub chosen: Vec<(usize, Vec<T>)>,
    pub tokens: usize,
    pub costs: HashMap<T, usize>,
}

/// `candidates[i]` = the turns of unit `i` in display order; `cost` gives a turn's tokens. It is
/// asked only for the turns of the units packing reaches (counting tokens is the costly part of
/// packing, and the search stops at `k` units), and at most once per turn.
pub fn pack<T: Eq + Hash + Clone>(
    candidates: &[Vec<T>],
    mut cost: impl FnMut(&T) -> usize,
    k: usize,
    budget: Option<usize>,
) -> Packed<T> {
    let mut costs: HashMap<T, usize> = HashMap::new();
    let mut shown: HashSet<T> = HashSet::new();
    let mut chosen = Vec::new();
    let mut tokens = 0usize;
    for (i, turns) in candidates.iter().enumerate() {
        if chosen.len() >= k {
            break;
        }
        let new: Vec<&T> = turns.iter().filter(|t| !shown.contains(*t)).collect();
        if new.is_empty() {
            continue;
        }
        let unit_cost: usize = new
            .iter()
            .map(|t| *costs.entry((*t).clone()).or_insert_with(|| cost(t)))
            .sum();
        if budget.is_some_and(|b| tokens + unit_cost > b) {
            continue;
        }
        tokens += unit_cost;
        shown.extend(new.iter().map(|t| (*t).clone()));
        chosen.push((i, new.into_iter().cloned().collect()));
    }
    Packed {
        chosen,
        tokens,
        costs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs units given as (turns, cost of each of its turns).
    fn packed(units: &[(&[u32], usize)], k: usize, budget: Option<usize>) -> Packed<u32> {
        let costs: HashMap<u32, usize> = units
            .iter()
            .flat_map(|(turns, c)| turns.iter().map(move |t| (*t, *c)))
            .collect();
        let candidates: Vec<Vec<u32>> = units.iter().map(|(t, _)| t.to_vec()).collect();
        pack(&candidates, |t| costs[t], k, budget)
    }

    #[test]
    fn shown_turns_are_not_shown_again() {
        let p = packed(
            &[(&[2], 10), (&[1, 2, 3], 10), (&[3], 10), (&[4], 10)],
            10,
            None,
        );
        assert_eq!(p.chosen, vec![(0, vec![2]), (1, vec![1, 3]), (3, vec![4])]);
        assert_eq!(p.tokens, 40);
    }

    #[test]
    fn budget_passes_over_what_does_not_fit_but_keeps_smaller_ones() {
        let p = packed(&[(&[1], 50), (&[2], 60), (&[3], 40)], 10, Some(100));
        assert_eq!(
            p.chosen.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![0, 2]
        );
        assert_eq!(p.tokens, 90);
    }

    #[test]
    fn k_limits_the_count() {
        assert_eq!(
            packed(&[(&[1], 1), (&[2], 1), (&[3], 1)], 2, None)
                .chosen
                .len(),
            2
        );
    }

    /// Costs are asked for the turns of the units reached only, once per turn.
    #[test]
    fn only_the_turns_packing_reaches_are_counted_and_each_once() {
        let candidates = vec![vec![1u32, 2], vec![2, 3], vec![4], vec![5]];
        let mut asked = Vec::new();
        let p = pack(
            &candidates,
            |t| {
                asked.push(*t);
                1
            },
            2,
            None,
        );
        assert_eq!(p.chosen, vec![(0, vec![1, 2]), (1, vec![3])]);
        assert_eq!(asked, vec![1, 2, 3]);
    }
}
