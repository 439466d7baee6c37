//! Packing ranked units into a context: in rank order, each unit adds the turns not already shown,
//! stopping at `k` units; a unit whose new turns would overflow the token budget is passed over (a
//! smaller one further down may still fit). No turn is ever shown twice.

use std::collections::HashSet;
use std::hash::Hash;

/// The units chosen (index into the candidates, with the turns each newly shows) and the tokens
/// used.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed<T> {
    pub chosen: Vec<(usize, Vec<T>)>,
    pub tokens: usize,
}

/// `candidates[i]` = the turns of unit `i` in display order, each with its token cost.
pub fn pack<T: Eq + Hash + Clone>(
    candidates: &[Vec<(T, usize)>],
    k: usize,
    budget: Option<usize>,
) -> Packed<T> {
    let mut shown: HashSet<T> = HashSet::new();
    let mut chosen = Vec::new();
    let mut tokens = 0usize;
    for (i, turns) in candidates.iter().enumerate() {
        if chosen.len() >= k {
            break;
        }
        let new: Vec<&(T, usize)> = turns.iter().filter(|(t, _)| !shown.contains(t)).collect();
        if new.is_empty() {
            continue;
        }
        let cost: usize = new.iter().map(|(_, c)| c).sum();
        if budget.is_some_and(|b| tokens + cost > b) {
            continue;
        }
        tokens += cost;
        shown.extend(new.iter().map(|(t, _)| t.clone()));
        chosen.push((i, new.into_iter().map(|(t, _)| t.clone()).collect()));
    }
    Packed { chosen, tokens }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(turns: &[u32], cost: usize) -> Vec<(u32, usize)> {
        turns.iter().map(|&t| (t, cost)).collect()
    }

    #[test]
    fn shown_turns_are_not_shown_again() {
        let c = vec![
            unit(&[2], 10),
            unit(&[1, 2, 3], 10),
            unit(&[3], 10),
            unit(&[4], 10),
        ];
        let p = pack(&c, 10, None);
        assert_eq!(p.chosen, vec![(0, vec![2]), (1, vec![1, 3]), (3, vec![4])]);
        assert_eq!(p.tokens, 40);
    }

    #[test]
    fn budget_passes_over_what_does_not_fit_but_keeps_smaller_ones() {
        let c = vec![unit(&[1], 50), unit(&[2], 60), unit(&[3], 40)];
        let p = pack(&c, 10, Some(100));
        assert_eq!(
            p.chosen.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![0, 2]
        );
        assert_eq!(p.tokens, 90);
    }

    #[test]
    fn k_limits_the_count() {
        let c = vec![unit(&[1], 1), unit(&[2], 1), unit(&[3], 1)];
        assert_eq!(pack(&c, 2, None).chosen.len(), 2);
    }
}
