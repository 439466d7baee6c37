//! Nearest-neighbour search over chunk vectors. A unit's score is the best cosine of any of its
//! chunks, so a long unit is found by whichever part matches. Scores are always exact (f32). A
//! small block of one user's units holds their vectors and is scanned whole; a large one
//! ([`VectorSettings::ann_min_chunks`]) holds only its graph ([`crate::ann`], saved in the data
//! directory), which proposes candidates whose vectors are read from the store
//! ([`StoredUnits`]) and scored exactly. So a large user costs its graph in memory, not its
//! vectors, and is opened from the graph's file without reading them.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use aril_embed::dot;

use aril_core::{Scope, ScopeFilter};
use aril_core::{UnitId, UnitKind};
use aril_store::{Store, UnitVectors};

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

/// The vectors of units by store order: what a block searched through its graph reads its
/// candidates' vectors from (it holds none). The store, under one model ([`FromStore`]).
pub trait StoredUnits {
    /// The units of `kind` with these store orders, in any order; orders it lacks are left out.
    fn units_at(&self, kind: UnitKind, seqs: &[i64]) -> Result<Vec<UnitVectors>, IndexError>;

    /// Whether the unit of `kind` at store order `seq` is `id`, of `user`: what a saved graph
    /// names as its last unit, so that a graph of another store (or of an older copy) is not
    /// taken for this one's.
    fn holds(&self, user: &str, kind: UnitKind, seq: i64, id: &str) -> bool {
        self.units_at(kind, &[seq]).is_ok_and(
            |found| matches!(found.as_slice(), [u] if u.id == id && u.scope.user_id == user),
        )
    }
}

/// A store's units with their vectors under `model`.
pub struct FromStore<'a> {
    pub store: &'a dyn Store,
    pub model: &'a str,
}

impl StoredUnits for FromStore<'_> {
    fn units_at(&self, kind: UnitKind, seqs: &[i64]) -> Result<Vec<UnitVectors>, IndexError> {
        Ok(self.store.unit_vectors_at(self.model, kind, seqs)?)
    }
}

/// Units already in hand (the cards of a card index, tests).
impl StoredUnits for Vec<UnitVectors> {
    fn units_at(&self, kind: UnitKind, seqs: &[i64]) -> Result<Vec<UnitVectors>, IndexError> {
        let wanted: HashSet<i64> = seqs.iter().copied().collect();
        Ok(self
            .iter()
            .filter(|u| u.kind == kind && wanted.contains(&u.seq))
            .cloned()
            .collect())
    }
}

/// A unit held for search: its chunks are rows `rows` of its block.
struct Held {
    id: String,
    seq: i64,
    scope: Scope,
    rows: Range<usize>,
}

/// A small block's units with every chunk vector, row after row (a scan reads memory in order).
#[derive(Default)]
struct Exact {
    units: Vec<Held>,
    rows: Vec<f32>,
    by_id: HashMap<String, usize>,
}

/// What a block holds to be searched.
enum Rows {
    /// Every vector, scanned whole.
    Exact(Exact),
    /// Only the graph. Units pushed wait in `pending` (graph key, vector) until the block is
    /// synced, which every push is followed by before the next search.
    Graph {
        ann: Ann,
        pending: Vec<(u64, Vec<f32>)>,
        /// The last unit pending (store order, id).
        last: (i64, String),
    },
}

/// One user's units of one kind.
struct Block {
    kind: UnitKind,
    dim: usize,
    /// The highest store order held.
    last_seq: i64,
    rows: Rows,
}

impl Block {
    fn exact(kind: UnitKind) -> Self {
        Self {
            kind,
            dim: 0,
            last_seq: 0,
            rows: Rows::Exact(Exact::default()),
        }
    }

    fn graph(kind: UnitKind, ann: Ann) -> Self {
        Self {
            kind,
            dim: ann.dim(),
            last_seq: ann.last_seq,
            rows: Rows::Graph {
                ann,
                pending: Vec::new(),
                last: (0, String::new()),
            },
        }
    }

    /// Takes a unit stored after those held; one a graph already holds is left out.
    fn push(&mut self, unit: UnitVectors) {
        if unit.seq <= self.last_seq && matches!(self.rows, Rows::Graph { .. }) {
            return;
        }
        if self.dim == 0 {
            self.dim = unit.chunks.first().map_or(0, |c| c.vector.len());
        }
        self.last_seq = self.last_seq.max(unit.seq);
        match &mut self.rows {
            Rows::Exact(exact) => {
                let dim = self.dim.max(1);
                let first = exact.rows.len() / dim;
                for c in &unit.chunks {
                    // One model's vectors are loaded together, so every row has its width.
                    debug_assert_eq!(c.vector.len(), self.dim);
                    exact.rows.extend_from_slice(&c.vector);
                }
                let rows = first..exact.rows.len() / dim;
                exact.by_id.insert(unit.id.clone(), exact.units.len());
                exact.units.push(Held {
                    id: unit.id,
                    seq: unit.seq,
                    scope: unit.scope,
                    rows,
                });
            }
            Rows::Graph { pending, last, .. } => {
                for (i, c) in unit
                    .chunks
                    .into_iter()
                    .take(MAX_CHUNKS_PER_UNIT)
                    .enumerate()
                {
                    pending.push((chunk_key(unit.seq, i), c.vector));
                }
                *last = (unit.seq, unit.id);
            }
        }
    }

    fn chunk_count(&self) -> usize {
        match &self.rows {
            Rows::Exact(exact) => exact.rows.len() / self.dim.max(1),
            Rows::Graph { ann, pending, .. } => ann.size() + pending.len(),
        }
    }

    /// Bytes held: the f32 rows of an exact block; about a chunk's 8-bit copy and its links per
    /// chunk of a graph.
    fn bytes(&self) -> usize {
        match &self.rows {
            Rows::Exact(exact) => exact.rows.len() * 4,
            Rows::Graph { .. } => self.chunk_count() * (self.dim + 160),
        }
    }

    fn get(&self, id: &str) -> Option<(&Exact, &Held)> {
        match &self.rows {
            Rows::Exact(exact) => exact.by_id.get(id).map(|&i| (exact, &exact.units[i])),
            Rows::Graph { .. } => None,
        }
    }

    /// Makes what was pushed searchable: pending chunks go into the graph (saved when `save`,
    /// else when enough changed since the last save); an exact block grown to
    /// [`VectorSettings::ann_min_chunks`] gets a graph built, saved, and lets its rows go.
    fn sync(
        &mut self,
        settings: &VectorSettings,
        user: &str,
        model: &str,
        save: bool,
    ) -> Result<(), IndexError> {
        match &mut self.rows {
            Rows::Graph { ann, pending, last } => {
                if pending.is_empty() {
                    return Ok(());
                }
                let chunks: Vec<(u64, &[f32])> =
                    pending.iter().map(|(k, v)| (*k, v.as_slice())).collect();
                ann.add(&chunks, (last.0, &last.1))?;
                pending.clear();
                if save || ann.worth_saving() {
                    ann.save()?;
                }
                Ok(())
            }
            Rows::Exact(exact) => {
                let Some(dir) = &settings.dir else {
                    return Ok(());
                };
                if self.dim == 0 || exact.rows.len() / self.dim < settings.ann_min_chunks {
                    return Ok(());
                }
                tracing::info!(
                    user,
                    kind = self.kind.as_str(),
                    chunks = exact.rows.len() / self.dim,
                    "building the vector graph"
                );
                let owner = AnnOwner {
                    user: user.to_string(),
                    kind: self.kind,
                    model: model.to_string(),
                    dim: self.dim,
                };
                let mut ann = Ann::new(dir, owner)?;
                let (dim, rows) = (self.dim, exact.rows.as_slice());
                let chunks: Vec<(u64, &[f32])> =
                    exact
                        .units
                        .iter()
                        .flat_map(|u| {
                            u.rows.clone().take(MAX_CHUNKS_PER_UNIT).enumerate().map(
                                move |(i, r)| (chunk_key(u.seq, i), &rows[r * dim..(r + 1) * dim]),
                            )
                        })
                        .collect();
                let last = exact
                    .units
                    .last()
                    .map_or((0, ""), |u| (u.seq, u.id.as_str()));
                ann.add(&chunks, last)?;
                ann.save()?;
                drop(chunks);
                *self = Self::graph(self.kind, ann);
                Ok(())
            }
        }
    }

    /// Pushes this block's best units for `query` into `best` (kept at `k`): every unit scored
    /// when it holds its vectors, else the units of the graph's candidate chunks, their vectors
    /// read from `stored`.
    fn search_into<'a>(
        &'a self,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
        stored: &dyn StoredUnits,
        best: &mut BinaryHeap<Scored<'a>>,
    ) -> Result<(), IndexError> {
        let mut offer = |candidate: Scored<'a>| {
            if best.len() < k {
                best.push(candidate);
            } else if best.peek().is_some_and(|worst| candidate < *worst) {
                best.pop();
                best.push(candidate);
            }
        };
        let ann = match &self.rows {
            Rows::Exact(exact) => {
                let dim = self.dim.max(1);
                for unit in exact.units.iter().filter(|u| filter.admits(&u.scope)) {
                    let score = unit
                        .rows
                        .clone()
                        .map(|r| dot(&exact.rows[r * dim..(r + 1) * dim], query))
                        .fold(f32::MIN, f32::max);
                    offer(Scored {
                        score,
                        id: Cow::Borrowed(&unit.id),
                        kind: self.kind,
                    });
                }
                return Ok(());
            }
            Rows::Graph { ann, .. } => ann,
        };
        // A unit has about two chunks: three times `k` chunks name enough distinct units. A
        // filter narrower than the user may drop most of them: then ask for more.
        let narrowed = filter.narrowed();
        let mut count = (3 * k).max(k + 32);
        loop {
            let keys = ann.search(query, count, None)?;
            let mut seen = HashSet::new();
            let seqs: Vec<i64> = keys
                .iter()
                .map(|&key| key_seq(key))
                .filter(|&seq| seen.insert(seq))
                .collect();
            let units: Vec<UnitVectors> = stored
                .units_at(self.kind, &seqs)?
                .into_iter()
                .filter(|u| filter.admits(&u.scope))
                .collect();
            let exhausted = keys.len() < count || count >= ann.size();
            if narrowed && units.len() < k && !exhausted {
                count = (count * 4).min(ann.size());
                continue;
            }
            for unit in units {
                let score = unit
                    .chunks
                    .iter()
                    .map(|c| dot(&c.vector, query))
                    .fold(f32::MIN, f32::max);
                offer(Scored {
                    score,
                    id: Cow::Owned(unit.id),
                    kind: self.kind,
                });
            }
            return Ok(());
        }
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
    /// A user's saved graphs under `model` that fit the store (`stored` holds the unit each
    /// names last), and nothing else yet: the units after them (see [`UserVectors::through`])
    /// are given by [`UserVectors::add`], then made searchable by [`UserVectors::ready`]. Nothing
    /// here takes a lock: a long load or graph build does not stop searches of other users.
    pub fn open(
        settings: &VectorSettings,
        user: &str,
        model: &str,
        stored: &dyn StoredUnits,
    ) -> Self {
        let mut held = Self {
            blocks: Vec::new(),
            model: model.to_string(),
            last_used: AtomicU64::new(0),
        };
        let Some(dir) = &settings.dir else {
            return held;
        };
        for kind in [UnitKind::Turn, UnitKind::Segment] {
            let fits = |seq: i64, id: &str| stored.holds(user, kind, seq, id);
            let min_size = settings.ann_min_chunks;
            if let Some(ann) = Ann::open(dir, (user, kind, model), min_size, fits) {
                held.blocks.push(Block::graph(kind, ann));
            }
        }
        held
    }

    /// The highest store order held of turns and of segments (0: none): the units after them
    /// are what the store still has to give.
    pub fn through(&self) -> (i64, i64) {
        let last = |kind| {
            self.blocks
                .iter()
                .find(|b| b.kind == kind)
                .map_or(0, |b| b.last_seq)
        };
        (last(UnitKind::Turn), last(UnitKind::Segment))
    }

    /// Adds a unit (each kind in store order, after those held) to its block; it is searchable
    /// after [`UserVectors::ready`].
    pub fn add(&mut self, unit: UnitVectors) {
        self.block_mut(unit.kind).push(unit);
    }

    /// Makes what was added searchable: large blocks get their graphs (built and saved, or the
    /// opened ones caught up and saved).
    pub fn ready(mut self, settings: &VectorSettings, user: &str) -> Result<Self, IndexError> {
        self.sync(settings, user, true)?;
        Ok(self)
    }

    fn sync(
        &mut self,
        settings: &VectorSettings,
        user: &str,
        save: bool,
    ) -> Result<(), IndexError> {
        for block in &mut self.blocks {
            block.sync(settings, user, &self.model, save)?;
        }
        Ok(())
    }

    fn block_mut(&mut self, kind: UnitKind) -> &mut Block {
        match self.blocks.iter().position(|b| b.kind == kind) {
            Some(i) => &mut self.blocks[i],
            None => {
                self.blocks.push(Block::exact(kind));
                let last = self.blocks.len() - 1;
                &mut self.blocks[last]
            }
        }
    }

    fn get(&self, id: &str) -> Option<(&Exact, &Held, usize)> {
        self.blocks
            .iter()
            .find_map(|b| b.get(id).map(|(exact, unit)| (exact, unit, b.dim)))
    }

    fn bytes(&self) -> usize {
        self.blocks.iter().map(Block::bytes).sum()
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
        let (turns, segments) = held.through();
        Some((held.model.clone(), turns, segments))
    }

    /// Holds a user's vectors (see [`UserVectors::open`]), replacing what was held.
    pub fn insert_user(&mut self, user_id: &str, held: UserVectors) {
        held.last_used.store(
            self.tick.fetch_add(1, AtomicOrdering::Relaxed),
            AtomicOrdering::Relaxed,
        );
        self.by_user.insert(user_id.to_string(), held);
        self.fit(user_id);
    }

    /// Holds a user's units given whole (every one the store has, each kind in store order):
    /// saved graphs that fit them are opened and caught up, the rest held or built as
    /// [`UserVectors`] does.
    pub fn load_user(
        &mut self,
        user_id: &str,
        model: &str,
        units: Vec<UnitVectors>,
    ) -> Result<(), IndexError> {
        let mut held = UserVectors::open(&self.settings, user_id, model, &units);
        units.into_iter().for_each(|u| held.add(u));
        let held = held.ready(&self.settings, user_id)?;
        self.insert_user(user_id, held);
        Ok(())
    }

    /// Adds a loaded user's units stored after those held (each kind in store order), graphs
    /// included; units it already holds are skipped (the user may have been loaded again since
    /// they were read), and a user not loaded is left for its load. On an error the user is let
    /// go (its next search loads it again from the store and the graphs' last saves).
    pub fn append(&mut self, user_id: &str, units: Vec<UnitVectors>) -> Result<(), IndexError> {
        let Some(held) = self.by_user.get_mut(user_id) else {
            return Ok(());
        };
        let (turns, segments) = held.through();
        units
            .into_iter()
            .filter(|u| match u.kind {
                UnitKind::Turn => u.seq > turns,
                UnitKind::Segment => u.seq > segments,
                UnitKind::Card | UnitKind::Window => true,
            })
            .for_each(|u| held.add(u));
        if let Err(e) = held.sync(&self.settings, user_id, false) {
            self.by_user.remove(user_id);
            return Err(e);
        }
        self.fit(user_id);
        Ok(())
    }

    /// The best cosine between any chunk of unit `a` and any chunk of unit `b`, both held with
    /// their vectors (in a block without a graph: the cards of a card index); 0 when either is
    /// not. One lookup per user held, no scan of units.
    pub fn similarity(&self, a: &str, b: &str) -> f32 {
        let find = |id: &str| self.by_user.values().find_map(|held| held.get(id));
        let (Some((ea, a, da)), Some((eb, b, db))) = (find(a), find(b)) else {
            return 0.0;
        };
        let mut best = 0.0f32;
        for x in a.rows.clone() {
            for y in b.rows.clone() {
                best = best.max(dot(
                    &ea.rows[x * da..(x + 1) * da],
                    &eb.rows[y * db..(y + 1) * db],
                ));
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
    /// `known` admits, naming as its last unit (user, kind, model, store order, id) one
    /// `holds_last` admits. Returns how many were checked.
    pub fn check_files(
        &self,
        known: &dyn Fn(&str) -> bool,
        holds_last: &dyn Fn(&str, UnitKind, &str, i64, &str) -> bool,
    ) -> Result<usize, IndexError> {
        match &self.settings.dir {
            Some(dir) => {
                crate::ann::check_files(dir, &crate::ann::GraphChecks { known, holds_last })
            }
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
    id: Cow<'a, str>,
    kind: UnitKind,
}

impl Ord for Scored<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.id.cmp(&other.id))
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
    /// nothing is cloned or sorted but the `k` returned. A block searched through its graph
    /// reads its candidates' vectors from `stored`.
    pub fn search(
        &self,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
        kinds: &[UnitKind],
        stored: &dyn StoredUnits,
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
            block.search_into(filter, query, k, stored, &mut best)?;
        }
        Ok(best
            .into_sorted_vec()
            .into_iter()
            .map(|s| Hit {
                unit: UnitId::of(s.kind, s.id.into_owned()),
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
            .search(
                &ScopeFilter::user("u"),
                &[0.6, 0.8],
                5,
                &[UnitKind::Turn],
                &Vec::new(),
            )
            .unwrap();
        assert_eq!(
            hits.iter().map(|h| h.unit.as_str()).collect::<Vec<_>>(),
            vec!["b", "a"]
        );
        assert!((hits[0].score - 0.96).abs() < 1e-6);
        assert!(
            idx.search(
                &ScopeFilter::user("v"),
                &[1.0, 0.0],
                5,
                &[UnitKind::Turn],
                &Vec::new()
            )
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
            .search(
                &ScopeFilter::user("u"),
                &query,
                1000,
                &[UnitKind::Turn],
                &Vec::new(),
            )
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
                .search(
                    &ScopeFilter::user("u"),
                    &query,
                    k,
                    &[UnitKind::Turn],
                    &Vec::new(),
                )
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
        idx.search(
            &ScopeFilter::user("a"),
            &[1.0, 0.0],
            1,
            &[UnitKind::Turn],
            &Vec::new(),
        )
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
