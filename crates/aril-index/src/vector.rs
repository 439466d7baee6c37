//! Exact nearest-neighbour search over chunk vectors. A unit's score is the best cosine of any of
//! its chunks, so a long unit is found by whichever part matches.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Range;

use aril_embed::dot;

use aril_core::ScopeFilter;
use aril_store::{UnitKind, UnitVectors};

use crate::Hit;

/// The seam for vector search: exact here, an ANN index (HNSW, pgvector) elsewhere.
pub trait VectorSearch {
    /// The `k` units with the highest best-chunk cosine to `query` inside the filter.
    fn search(&self, filter: &ScopeFilter, query: &[f32], k: usize, kinds: &[UnitKind])
    -> Vec<Hit>;
}

/// A unit held for search: its chunks are rows `rows` of its user's vector block.
struct Held {
    kind: UnitKind,
    id: String,
    scope: aril_core::Scope,
    rows: Range<usize>,
}

/// One user's units, their chunk vectors in one block (row after row, so a scan reads memory in
/// order), and where each id sits among them.
#[derive(Default)]
struct UserVectors {
    units: Vec<Held>,
    /// Every chunk vector of the user, `dim` floats each.
    block: Vec<f32>,
    dim: usize,
    by_id: HashMap<String, usize>,
}

impl UserVectors {
    fn push(&mut self, unit: UnitVectors) {
        if self.dim == 0 {
            self.dim = unit.chunks.first().map_or(0, |c| c.vector.len());
        }
        let first = self.block.len() / self.dim.max(1);
        for c in &unit.chunks {
            // One model's vectors are loaded together, so every row has its width.
            debug_assert_eq!(c.vector.len(), self.dim);
            self.block.extend_from_slice(&c.vector);
        }
        let rows = first..self.block.len() / self.dim.max(1);
        self.by_id.insert(unit.id.clone(), self.units.len());
        self.units.push(Held {
            kind: unit.kind,
            id: unit.id,
            scope: unit.scope,
            rows,
        });
    }

    fn row(&self, i: usize) -> &[f32] {
        &self.block[i * self.dim..(i + 1) * self.dim]
    }

    /// The best cosine of any chunk of `unit` with `query`.
    fn best(&self, unit: &Held, query: &[f32]) -> f32 {
        unit.rows
            .clone()
            .map(|r| dot(self.row(r), query))
            .fold(f32::MIN, f32::max)
    }

    fn get(&self, id: &str) -> Option<&Held> {
        self.by_id.get(id).map(|&i| &self.units[i])
    }
}

/// All chunk vectors of the users loaded so far, in memory.
#[derive(Default)]
pub struct VectorIndex {
    by_user: HashMap<String, UserVectors>,
}

impl VectorIndex {
    pub fn has_user(&self, user_id: &str) -> bool {
        self.by_user.contains_key(user_id)
    }

    /// Replaces what is held for a user (after loading it from the store).
    pub fn load_user(&mut self, user_id: &str, units: Vec<UnitVectors>) {
        let mut held = UserVectors::default();
        units.into_iter().for_each(|u| held.push(u));
        self.by_user.insert(user_id.to_string(), held);
    }

    /// Adds units of users already loaded; units of users not loaded are left for their load.
    pub fn add(&mut self, units: Vec<UnitVectors>) {
        for u in units {
            if let Some(held) = self.by_user.get_mut(&u.scope.user_id) {
                held.push(u);
            }
        }
    }

    /// The best cosine between any chunk of unit `a` and any chunk of unit `b` (both held for
    /// some user); 0 when either is not held. One lookup per user held, no scan of units.
    pub fn similarity(&self, a: &str, b: &str) -> f32 {
        let find = |id: &str| {
            self.by_user
                .values()
                .find_map(|held| held.get(id).map(|unit| (held, unit)))
        };
        let (Some((ha, a)), Some((hb, b))) = (find(a), find(b)) else {
            return 0.0;
        };
        let mut best = 0.0f32;
        for x in a.rows.clone() {
            for y in b.rows.clone() {
                best = best.max(dot(ha.row(x), hb.row(y)));
            }
        }
        best
    }

    /// Forgets a user (after a deletion); the next search reloads from the store.
    pub fn evict(&mut self, user_id: &str) {
        self.by_user.remove(user_id);
    }
}

/// A scored unit while the best `k` are chosen: ordered best first (higher score, then smaller
/// id), so the heap's greatest is the worst kept.
struct Scored<'a> {
    score: f32,
    unit: &'a Held,
}

impl Ord for Scored<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.unit.id.cmp(&other.unit.id))
    }
}

impl PartialOrd for Scored<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Scored<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored<'_> {}

impl VectorSearch for VectorIndex {
    /// One pass over the user's chunks keeping the best `k` in a heap: nothing is cloned or
    /// sorted but the `k` returned.
    fn search(
        &self,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
        kinds: &[UnitKind],
    ) -> Vec<Hit> {
        let Some(held) = self.by_user.get(&filter.user_id) else {
            return Vec::new();
        };
        if k == 0 {
            return Vec::new();
        }
        let mut best: BinaryHeap<Scored<'_>> = BinaryHeap::with_capacity(k + 1);
        for unit in held
            .units
            .iter()
            .filter(|u| kinds.contains(&u.kind) && filter.admits(&u.scope))
        {
            let score = held.best(unit, query);
            let candidate = Scored { score, unit };
            if best.len() < k {
                best.push(candidate);
            } else if best.peek().is_some_and(|worst| candidate < *worst) {
                best.pop();
                best.push(candidate);
            }
        }
        best.into_sorted_vec()
            .into_iter()
            .map(|s| Hit {
                kind: s.unit.kind,
                id: s.unit.id.clone(),
                score: s.score,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aril_core::Scope;
    use aril_store::StoredChunk;

    fn unit(id: &str, user: &str, vectors: &[[f32; 2]]) -> UnitVectors {
        UnitVectors {
            kind: UnitKind::Turn,
            id: id.into(),
            scope: Scope::user(user).unwrap(),
            chunks: vectors
                .iter()
                .map(|v| StoredChunk {
                    start: 0,
                    end: 1,
                    vector: v.to_vec(),
                })
                .collect(),
        }
    }

    #[test]
    fn best_chunk_decides_and_scope_is_respected() {
        let mut idx = VectorIndex::default();
        idx.load_user(
            "u",
            vec![
                unit("a", "u", &[[1.0, 0.0]]),
                unit("b", "u", &[[0.0, 1.0], [0.8, 0.6]]),
            ],
        );
        idx.add(vec![unit("c", "v", &[[1.0, 0.0]])]);
        let hits = idx.search(&ScopeFilter::user("u"), &[0.6, 0.8], 5, &[UnitKind::Turn]);
        assert_eq!(
            hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(),
            vec!["b", "a"]
        );
        assert!((hits[0].score - 0.96).abs() < 1e-6);
        assert!(
            idx.search(&ScopeFilter::user("v"), &[1.0, 0.0], 5, &[UnitKind::Turn])
                .is_empty()
        );
    }

    /// The heap keeps what a full sort by score (then id) keeps, ties included, at every k.
    #[test]
    fn the_best_k_are_those_a_full_sort_ranks_first() {
        let mut units = Vec::new();
        for n in 0..40u32 {
            // Several units share each angle, so equal scores are common and ids break the ties.
            let angle = (n * 7 % 11) as f32 * 0.13;
            let id = format!("t{:02}", (n * 13) % 40);
            units.push(unit(&id, "u", &[[angle.cos(), angle.sin()], [0.0, -1.0]]));
        }
        let mut idx = VectorIndex::default();
        idx.load_user("u", units);
        let query = [0.8f32, 0.6];
        let everything = idx.search(&ScopeFilter::user("u"), &query, 1000, &[UnitKind::Turn]);
        assert_eq!(everything.len(), 40);
        let mut sorted = everything.clone();
        sorted.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        assert_eq!(
            everything, sorted,
            "a search returns best first, ties by id"
        );
        for k in [0, 1, 2, 5, 17, 39, 40] {
            let top = idx.search(&ScopeFilter::user("u"), &query, k, &[UnitKind::Turn]);
            assert_eq!(top, sorted[..k], "k = {k}");
        }
    }

    #[test]
    fn similarity_is_the_best_chunk_pair_of_two_held_units() {
        let mut idx = VectorIndex::default();
        idx.load_user("u", vec![unit("a", "u", &[[1.0, 0.0], [0.0, 1.0]])]);
        idx.load_user("v", vec![unit("b", "v", &[[0.6, 0.8]])]);
        assert!((idx.similarity("a", "b") - 0.8).abs() < 1e-6);
        assert_eq!(idx.similarity("a", "missing"), 0.0);
        idx.evict("v");
        assert_eq!(idx.similarity("a", "b"), 0.0);
    }
}
