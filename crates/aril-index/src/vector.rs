//! Exact nearest-neighbour search over chunk vectors. A unit's score is the best cosine of any of
//! its chunks, so a long unit is found by whichever part matches.

use std::collections::HashMap;

use aril_core::ScopeFilter;
use aril_store::{UnitKind, UnitVectors};

use crate::Hit;

/// The seam for vector search: exact here, an ANN index (HNSW, pgvector) elsewhere.
pub trait VectorSearch {
    /// The `k` units with the highest best-chunk cosine to `query` inside the filter.
    fn search(&self, filter: &ScopeFilter, query: &[f32], k: usize, kinds: &[UnitKind])
    -> Vec<Hit>;
}

/// All chunk vectors of the users loaded so far, in memory.
#[derive(Default)]
pub struct VectorIndex {
    by_user: HashMap<String, Vec<UnitVectors>>,
}

impl VectorIndex {
    pub fn has_user(&self, user_id: &str) -> bool {
        self.by_user.contains_key(user_id)
    }

    /// Replaces what is held for a user (after loading it from the store).
    pub fn load_user(&mut self, user_id: &str, units: Vec<UnitVectors>) {
        self.by_user.insert(user_id.to_string(), units);
    }

    /// Adds units of users already loaded; units of users not loaded are left for their load.
    pub fn add(&mut self, units: Vec<UnitVectors>) {
        for u in units {
            if let Some(list) = self.by_user.get_mut(&u.scope.user_id) {
                list.push(u);
            }
        }
    }

    /// The best cosine between any chunk of unit `a` and any chunk of unit `b` (both held for
    /// some user); 0 when either is not held.
    pub fn similarity(&self, a: &str, b: &str) -> f32 {
        let find = |id: &str| self.by_user.values().flatten().find(|u| u.id == id);
        let (Some(a), Some(b)) = (find(a), find(b)) else {
            return 0.0;
        };
        let mut best = 0.0f32;
        for x in &a.chunks {
            for y in &b.chunks {
                best = best.max(x.vector.iter().zip(&y.vector).map(|(p, q)| p * q).sum());
            }
        }
        best
    }

    /// Forgets a user (after a deletion); the next search reloads from the store.
    pub fn evict(&mut self, user_id: &str) {
        self.by_user.remove(user_id);
    }
}

impl VectorSearch for VectorIndex {
    fn search(
        &self,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
        kinds: &[UnitKind],
    ) -> Vec<Hit> {
        let Some(units) = self.by_user.get(&filter.user_id) else {
            return Vec::new();
        };
        let mut hits: Vec<Hit> = units
            .iter()
            .filter(|u| kinds.contains(&u.kind) && filter.admits(&u.scope))
            .map(|u| Hit {
                kind: u.kind,
                id: u.id.clone(),
                score: u
                    .chunks
                    .iter()
                    .map(|c| c.vector.iter().zip(query).map(|(a, b)| a * b).sum::<f32>())
                    .fold(f32::MIN, f32::max),
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        hits.truncate(k);
        hits
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
}
