//! Nearest-neighbour search over chunk vectors. A unit's score is the best cosine of any of its
//! chunks, so a long unit is found by whichever part matches. Scores are always exact (f32): a
//! small block of vectors is scanned whole; a large one ([`VectorSettings::ann_min_chunks`]) asks
//! its graph ([`crate::ann`]) for candidates and rescores only them.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use aril_embed::dot;

use aril_core::{Scope, ScopeFilter};
use aril_core::{UnitId, UnitKind};
use aril_store::UnitVectors;

use crate::ann::{Ann, AnnOwner, MAX_CHUNKS_PER_UNIT, chunk_key, key_seq};
use crate::{Hit, IndexError};

/// Where and from what size a user's vectors get a graph.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSettings {
    /// Directory the graphs are saved in; `None` keeps every block exact and in memory only.
    pub dir: Option<PathBuf>,
    /// Chunks of one kind from which a user's block is searched through a graph.
    pub ann_min_chunks: usize,
    /// Bytes of vectors (and graphs) held for all users together: past it, the users searched
    /// least recently are let go (reloaded, graphs from their files, on their next search). The
    /// user just loaded or written to is always held, however large.
    pub max_held_bytes: usize,
}

impl Default for VectorSettings {
    /// Exact, in memory only, unbounded (the card index: one user).
    fn default() -> Self {
        Self {
            dir: None,
            ann_min_chunks: usize::MAX,
            max_held_bytes: usize::MAX,
        }
    }
}

/// A unit held for search: its chunks are rows `rows` of its block.
struct Held {
    id: String,
    seq: i64,
    scope: Scope,
    rows: Range<usize>,
}

/// One user's units of one kind, their chunk vectors in one block (row after row, so a scan
/// reads memory in order), where each id sits among them, and the graph when the block is large.
struct Block {
    kind: UnitKind,
    units: Vec<Held>,
    /// Every chunk vector of the block, `dim` floats each.
    rows: Vec<f32>,
    dim: usize,
    by_id: HashMap<String, usize>,
    by_seq: HashMap<i64, usize>,
    ann: Option<Ann>,
}

impl Block {
    fn new(kind: UnitKind) -> Self {
        Self {
            kind,
            units: Vec::new(),
            rows: Vec::new(),
            dim: 0,
            by_id: HashMap::new(),
            by_seq: HashMap::new(),
            ann: None,
        }
    }

    fn push(&mut self, unit: UnitVectors) {
        if self.dim == 0 {
            self.dim = unit.chunks.first().map_or(0, |c| c.vector.len());
        }
        let first = self.chunk_count();
        for c in &unit.chunks {
            // One model's vectors are loaded together, so every row has its width.
            debug_assert_eq!(c.vector.len(), self.dim);
            self.rows.extend_from_slice(&c.vector);
        }
        let rows = first..self.chunk_count();
        self.by_id.insert(unit.id.clone(), self.units.len());
        self.by_seq.insert(unit.seq, self.units.len());
        self.units.push(Held {
            id: unit.id,
            seq: unit.seq,
            scope: unit.scope,
            rows,
        });
    }

    fn chunk_count(&self) -> usize {
        self.rows.len() / self.dim.max(1)
    }

    fn last_seq(&self) -> i64 {
        self.units.last().map_or(0, |u| u.seq)
    }

    fn row(&self, i: usize) -> &[f32] {
        &self.rows[i * self.dim..(i + 1) * self.dim]
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

    /// The graph's chunks of the units from index `from` on: key and vector.
    fn graph_chunks(&self, from: usize) -> Vec<(u64, &[f32])> {
        self.units[from..]
            .iter()
            .flat_map(|u| {
                u.rows
                    .clone()
                    .take(MAX_CHUNKS_PER_UNIT)
                    .enumerate()
                    .map(|(i, r)| (chunk_key(u.seq, i), self.row(r)))
            })
            .collect()
    }

    /// Chunks the graph holds of the units up to store order `last_seq`.
    fn graph_size_through(&self, last_seq: i64) -> usize {
        self.units
            .iter()
            .take_while(|u| u.seq <= last_seq)
            .map(|u| u.rows.len().min(MAX_CHUNKS_PER_UNIT))
            .sum()
    }

    /// Gives the block its graph when it is large enough and has none: the saved one brought up
    /// to date, else one built from the block and saved.
    fn ensure_graph(
        &mut self,
        settings: &VectorSettings,
        user: &str,
        model: &str,
    ) -> Result<(), IndexError> {
        let Some(dir) = &settings.dir else {
            return Ok(());
        };
        if self.ann.is_some() || self.chunk_count() < settings.ann_min_chunks || self.dim == 0 {
            return Ok(());
        }
        let owner = AnnOwner {
            user: user.to_string(),
            kind: self.kind,
            model: model.to_string(),
            dim: self.dim,
        };
        let (mut ann, from) = match Ann::open(dir, &owner, |last| self.graph_size_through(last)) {
            Some(ann) => {
                let from = self.units.partition_point(|u| u.seq <= ann.last_seq);
                (ann, from)
            }
            None => {
                tracing::info!(
                    user,
                    kind = self.kind.as_str(),
                    chunks = self.chunk_count(),
                    "building the vector graph"
                );
                (Ann::new(dir, owner)?, 0)
            }
        };
        if from < self.units.len() {
            ann.add(&self.graph_chunks(from), self.last_seq())?;
            ann.save()?;
        }
        self.ann = Some(ann);
        Ok(())
    }

    /// Keeps the graph up with the units pushed from index `from` on: adds them to the graph
    /// the block has, or gives it one if it has grown large enough.
    fn graph_from(
        &mut self,
        from: usize,
        settings: &VectorSettings,
        user: &str,
        model: &str,
    ) -> Result<(), IndexError> {
        let Some(mut ann) = self.ann.take() else {
            return self.ensure_graph(settings, user, model);
        };
        // A graph that failed to take every chunk is dropped: the next load rebuilds it.
        ann.add(&self.graph_chunks(from), self.last_seq())?;
        let saved = match ann.worth_saving() {
            true => ann.save(),
            false => Ok(()),
        };
        self.ann = Some(ann);
        saved
    }

    /// Pushes this block's best units for `query` into `best` (kept at `k`): every unit scored
    /// when there is no graph, else the units of the graph's candidate chunks.
    fn search_into<'a>(
        &'a self,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
        best: &mut BinaryHeap<Scored<'a>>,
    ) -> Result<(), IndexError> {
        let mut offer = |unit: &'a Held| {
            let candidate = Scored {
                score: self.best(unit, query),
                unit,
                kind: self.kind,
            };
            if best.len() < k {
                best.push(candidate);
            } else if best.peek().is_some_and(|worst| candidate < *worst) {
                best.pop();
                best.push(candidate);
            }
        };
        let Some(ann) = &self.ann else {
            self.units
                .iter()
                .filter(|u| filter.admits(&u.scope))
                .for_each(offer);
            return Ok(());
        };
        let unit_of = |key: u64| self.by_seq.get(&key_seq(key)).map(|&i| &self.units[i]);
        let narrowed = filter.agent_id.is_some() || filter.run_id.is_some();
        let keep = |key: u64| unit_of(key).is_some_and(|u| filter.admits(&u.scope));
        // A unit has about two chunks: three times `k` chunks name enough distinct units.
        let keys = ann.search(
            query,
            (3 * k).max(k + 32),
            narrowed.then_some(&keep as &dyn Fn(u64) -> bool),
        )?;
        let mut seen = HashSet::new();
        for unit in keys.into_iter().filter_map(unit_of) {
            if seen.insert(unit.seq) && filter.admits(&unit.scope) {
                offer(unit);
            }
        }
        Ok(())
    }
}

/// One user's blocks, one per kind held.
pub struct UserVectors {
    blocks: Vec<Block>,
    model: String,
    /// The [`VectorIndex`] tick of the user's last search (for letting the least recent go).
    last_used: AtomicU64,
}

impl UserVectors {
    /// A user's units (each kind in store order) as blocks, the large ones with their graphs
    /// (opened from `settings.dir`, or built and saved there). Built without any lock held, so a
    /// long graph build does not stop searches of other users.
    pub fn load(
        settings: &VectorSettings,
        user: &str,
        model: &str,
        units: Vec<UnitVectors>,
    ) -> Result<Self, IndexError> {
        let mut held = Self::empty(model);
        units.into_iter().for_each(|u| held.add(u));
        held.ready(settings, user)
    }

    /// No units yet, of `model`: filled by [`UserVectors::add`] one unit at a time (so a large
    /// user's vectors are held once, in their blocks), then made searchable by
    /// [`UserVectors::ready`].
    pub fn empty(model: &str) -> Self {
        Self {
            blocks: Vec::new(),
            model: model.to_string(),
            last_used: AtomicU64::new(0),
        }
    }

    /// Adds a unit (each kind in store order, after those held) to its block; its graph waits
    /// for [`UserVectors::ready`].
    pub fn add(&mut self, unit: UnitVectors) {
        self.block_mut(unit.kind).push(unit);
    }

    /// Gives the large blocks their graphs (opened from `settings.dir`, or built and saved
    /// there). Takes no lock: a long graph build does not stop searches of other users.
    pub fn ready(mut self, settings: &VectorSettings, user: &str) -> Result<Self, IndexError> {
        self.graphs_from(&[], settings, user)?;
        Ok(self)
    }

    /// Pushes units (each kind in store order, after those held) into their blocks, then keeps
    /// each block's graph up with what it got.
    fn push(
        &mut self,
        settings: &VectorSettings,
        user: &str,
        units: Vec<UnitVectors>,
    ) -> Result<(), IndexError> {
        // Blocks a push creates come after these, so the counts line up by position.
        let before: Vec<usize> = self.blocks.iter().map(|b| b.units.len()).collect();
        for u in units {
            self.block_mut(u.kind).push(u);
        }
        self.graphs_from(&before, settings, user)
    }

    /// Keeps each block's graph up with its units past `before[i]` (block `i`; 0 for a block
    /// past the end of `before`), leaving alone the blocks that got none.
    fn graphs_from(
        &mut self,
        before: &[usize],
        settings: &VectorSettings,
        user: &str,
    ) -> Result<(), IndexError> {
        for (i, block) in self.blocks.iter_mut().enumerate() {
            let from = before.get(i).copied().unwrap_or(0);
            if from < block.units.len() {
                block.graph_from(from, settings, user, &self.model)?;
            }
        }
        Ok(())
    }

    fn block_mut(&mut self, kind: UnitKind) -> &mut Block {
        match self.blocks.iter().position(|b| b.kind == kind) {
            Some(i) => &mut self.blocks[i],
            None => {
                self.blocks.push(Block::new(kind));
                let last = self.blocks.len() - 1;
                &mut self.blocks[last]
            }
        }
    }

    fn get(&self, id: &str) -> Option<(&Block, &Held)> {
        self.blocks
            .iter()
            .find_map(|b| b.get(id).map(|unit| (b, unit)))
    }

    /// Bytes held: the f32 rows and, per graph, about a row's 8-bit copy and its links.
    fn bytes(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| {
                let graph = b
                    .ann
                    .as_ref()
                    .map_or(0, |_| b.chunk_count() * (b.dim + 160));
                b.rows.len() * 4 + graph
            })
            .sum()
    }
}

/// The users loaded so far: their vectors in memory, large blocks with a graph.
#[derive(Default)]
pub struct VectorIndex {
    settings: VectorSettings,
    by_user: HashMap<String, UserVectors>,
    /// Counts searches: a user's `last_used` is the tick of its last one.
    tick: AtomicU64,
}

impl VectorIndex {
    pub fn new(settings: VectorSettings) -> Self {
        Self {
            settings,
            by_user: HashMap::new(),
            tick: AtomicU64::new(0),
        }
    }

    /// Lets the users searched least recently go until what is held fits
    /// [`VectorSettings::max_held_bytes`]; `keep` stays whatever its size.
    fn fit(&mut self, keep: &str) {
        let mut held: usize = self.by_user.values().map(UserVectors::bytes).sum();
        while held > self.settings.max_held_bytes {
            let Some(oldest) = self
                .by_user
                .iter()
                .filter(|(user, _)| user.as_str() != keep)
                .min_by_key(|(_, v)| v.last_used.load(AtomicOrdering::Relaxed))
                .map(|(user, _)| user.clone())
            else {
                return;
            };
            if let Some(gone) = self.by_user.remove(&oldest) {
                tracing::debug!(user = oldest, bytes = gone.bytes(), "vectors let go");
                held -= gone.bytes();
            }
        }
    }

    /// Users whose vectors are held now.
    pub fn held_users(&self) -> usize {
        self.by_user.len()
    }

    pub fn settings(&self) -> &VectorSettings {
        &self.settings
    }

    pub fn has_user(&self, user_id: &str) -> bool {
        self.by_user.contains_key(user_id)
    }

    /// The model of a user's vectors and the highest store order held for its turns and
    /// segments (`None` when not loaded): the units after them are what [`VectorIndex::append`]
    /// is given.
    pub fn held_through(&self, user_id: &str) -> Option<(String, i64, i64)> {
        let held = self.by_user.get(user_id)?;
        let last = |kind| {
            held.blocks
                .iter()
                .find(|b| b.kind == kind)
                .map_or(0, Block::last_seq)
        };
        Some((
            held.model.clone(),
            last(UnitKind::Turn),
            last(UnitKind::Segment),
        ))
    }

    /// Holds a user's vectors (see [`UserVectors::load`]), replacing what was held.
    pub fn insert_user(&mut self, user_id: &str, held: UserVectors) {
        held.last_used.store(
            self.tick.fetch_add(1, AtomicOrdering::Relaxed),
            AtomicOrdering::Relaxed,
        );
        self.by_user.insert(user_id.to_string(), held);
        self.fit(user_id);
    }

    /// Loads a user's units and holds them (see [`UserVectors::load`]).
    pub fn load_user(
        &mut self,
        user_id: &str,
        model: &str,
        units: Vec<UnitVectors>,
    ) -> Result<(), IndexError> {
        let held = UserVectors::load(&self.settings, user_id, model, units)?;
        self.insert_user(user_id, held);
        Ok(())
    }

    /// Adds a loaded user's units stored after those held (each kind in store order), graphs
    /// included; a user not loaded is left for its load.
    pub fn append(&mut self, user_id: &str, units: Vec<UnitVectors>) -> Result<(), IndexError> {
        let Some(held) = self.by_user.get_mut(user_id) else {
            return Ok(());
        };
        held.push(&self.settings, user_id, units)?;
        self.fit(user_id);
        Ok(())
    }

    /// The best cosine between any chunk of unit `a` and any chunk of unit `b` (both held for
    /// some user); 0 when either is not held. One lookup per user held, no scan of units.
    pub fn similarity(&self, a: &str, b: &str) -> f32 {
        let find = |id: &str| self.by_user.values().find_map(|held| held.get(id));
        let (Some((ba, a)), Some((bb, b))) = (find(a), find(b)) else {
            return 0.0;
        };
        let mut best = 0.0f32;
        for x in a.rows.clone() {
            for y in b.rows.clone() {
                best = best.max(dot(ba.row(x), bb.row(y)));
            }
        }
        best
    }

    /// Forgets a user (after a deletion); the next search reloads from the store.
    pub fn evict(&mut self, user_id: &str) {
        self.by_user.remove(user_id);
    }

    /// Removes a user's saved graphs; run before a deletion of the user's units reaches the
    /// store, so no file keeps a deleted vector (the next load rebuilds them).
    pub fn remove_files(&self, user_id: &str) -> Result<(), IndexError> {
        match &self.settings.dir {
            Some(dir) => Ann::remove_files(dir, user_id),
            None => Ok(()),
        }
    }

    /// Checks the saved graphs (see `ann::check_files`): each readable, whole, of a user
    /// `known` admits. Returns how many were checked.
    pub fn check_files(&self, known: &dyn Fn(&str) -> bool) -> Result<usize, IndexError> {
        match &self.settings.dir {
            Some(dir) => crate::ann::check_files(dir, known),
            None => Ok(0),
        }
    }

    /// Forgets every user and removes every saved graph (`aril reindex`).
    pub fn clear(&mut self) -> Result<(), IndexError> {
        self.by_user.clear();
        if let Some(dir) = &self.settings.dir {
            match std::fs::remove_dir_all(dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(IndexError::VectorFile {
                        path: dir.display().to_string(),
                        reason: format!("removing: {e}"),
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A scored unit while the best `k` are chosen: ordered best first (higher score, then smaller
/// id), so the heap's greatest is the worst kept.
struct Scored<'a> {
    score: f32,
    unit: &'a Held,
    kind: UnitKind,
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

impl VectorIndex {
    /// The `k` units with the highest best-chunk cosine to `query` inside the filter, of the
    /// kinds asked. Each block of a wanted kind offers its units to one heap of the best `k`:
    /// nothing is cloned or sorted but the `k` returned.
    pub fn search(
        &self,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
        kinds: &[UnitKind],
    ) -> Result<Vec<Hit>, IndexError> {
        let Some(held) = self.by_user.get(&filter.user_id) else {
            return Ok(Vec::new());
        };
        held.last_used.store(
            self.tick.fetch_add(1, AtomicOrdering::Relaxed),
            AtomicOrdering::Relaxed,
        );
        if k == 0 {
            return Ok(Vec::new());
        }
        let mut best: BinaryHeap<Scored<'_>> = BinaryHeap::with_capacity(k + 1);
        for block in held.blocks.iter().filter(|b| kinds.contains(&b.kind)) {
            block.search_into(filter, query, k, &mut best)?;
        }
        Ok(best
            .into_sorted_vec()
            .into_iter()
            .map(|s| Hit {
                unit: UnitId::of(s.kind, s.unit.id.clone()),
                score: s.score,
            })
            .collect())
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
            seq: 0,
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
            "m",
            vec![
                unit("a", "u", &[[1.0, 0.0]]),
                unit("b", "u", &[[0.0, 1.0], [0.8, 0.6]]),
            ],
        )
        .unwrap();
        idx.append("v", vec![unit("c", "v", &[[1.0, 0.0]])])
            .unwrap();
        let hits = idx
            .search(&ScopeFilter::user("u"), &[0.6, 0.8], 5, &[UnitKind::Turn])
            .unwrap();
        assert_eq!(
            hits.iter().map(|h| h.unit.as_str()).collect::<Vec<_>>(),
            vec!["b", "a"]
        );
        assert!((hits[0].score - 0.96).abs() < 1e-6);
        assert!(
            idx.search(&ScopeFilter::user("v"), &[1.0, 0.0], 5, &[UnitKind::Turn])
                .unwrap()
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
        idx.load_user("u", "m", units).unwrap();
        let query = [0.8f32, 0.6];
        let everything = idx
            .search(&ScopeFilter::user("u"), &query, 1000, &[UnitKind::Turn])
            .unwrap();
        assert_eq!(everything.len(), 40);
        let mut sorted = everything.clone();
        sorted.sort_by(Hit::ranking);
        assert_eq!(
            everything, sorted,
            "a search returns best first, ties by id"
        );
        for k in [0, 1, 2, 5, 17, 39, 40] {
            let top = idx
                .search(&ScopeFilter::user("u"), &query, k, &[UnitKind::Turn])
                .unwrap();
            assert_eq!(top, sorted[..k], "k = {k}");
        }
    }

    #[test]
    fn past_the_memory_bound_the_user_searched_least_recently_goes() {
        // Each user below holds one 2-float chunk: 8 bytes; room for two.
        let mut idx = VectorIndex::new(VectorSettings {
            max_held_bytes: 16,
            ..VectorSettings::default()
        });
        let load = |idx: &mut VectorIndex, user: &str| {
            idx.load_user(
                user,
                "m",
                vec![unit(&format!("{user}1"), user, &[[1.0, 0.0]])],
            )
            .unwrap()
        };
        load(&mut idx, "a");
        load(&mut idx, "b");
        // a is searched after b was loaded: b is now the least recent.
        idx.search(&ScopeFilter::user("a"), &[1.0, 0.0], 1, &[UnitKind::Turn])
            .unwrap();
        load(&mut idx, "c");
        assert_eq!(idx.held_users(), 2);
        assert!(idx.has_user("a") && idx.has_user("c") && !idx.has_user("b"));
        // A user larger than the bound alone is still held (alone).
        let mut big = VectorIndex::new(VectorSettings {
            max_held_bytes: 4,
            ..VectorSettings::default()
        });
        load(&mut big, "a");
        load(&mut big, "b");
        assert!(big.has_user("b") && !big.has_user("a"));
    }

    #[test]
    fn similarity_is_the_best_chunk_pair_of_two_held_units() {
        let mut idx = VectorIndex::default();
        idx.load_user("u", "m", vec![unit("a", "u", &[[1.0, 0.0], [0.0, 1.0]])])
            .unwrap();
        idx.load_user("v", "m", vec![unit("b", "v", &[[0.6, 0.8]])])
            .unwrap();
        assert!((idx.similarity("a", "b") - 0.8).abs() < 1e-6);
        assert_eq!(idx.similarity("a", "missing"), 0.0);
        idx.evict("v");
        assert_eq!(idx.similarity("a", "b"), 0.0);
    }
}
