//! [`UnitSearch`] for an embedded store: the BM25 index (tantivy, in the data directory) and
//! the vectors of the users searched so far (small blocks in memory, large ones as a saved graph
//! whose candidates' vectors are read from the store), both
//! derived from the store and caught up with it after every commit.

use std::sync::{Mutex, PoisonError, RwLock};

use aril_core::{Role, ScopeFilter, TurnId, UnitId, UnitKind, WINDOW_SPAN};
use aril_store::{Hit, Store, StoreStats};

use crate::vector::{FromStore, StoredUnits};
use crate::{IndexError, LexicalIndex, UnitSearch, UserVectors, VectorIndex, VectorSettings};

/// Turns (and segments) the lexical catch-up reads and commits at a time.
const CATCH_UP_PAGE: usize = 20_000;

/// The indexes beside an embedded store.
pub struct EmbeddedIndex {
    lexical: LexicalIndex,
    /// Each user's vectors, loaded by the first search that needs them (a reader), kept up by
    /// appends after commits, dropped by deletions.
    vectors: RwLock<VectorIndex>,
    /// Held by a catch-up from its watermark to its commit, so two never index the same units.
    catching_up: Mutex<()>,
}

impl EmbeddedIndex {
    /// The indexes over `store`, brought up to it, then caught up with the units committed
    /// after the lexical index's watermark (a crash between the store's commit and the index's
    /// loses nothing). Only when a deletion was marked and not cleared (interrupted between the
    /// store and the index, or refused by the store) are the two counted against each other:
    /// an index holding more units than the store is rebuilt. An ordinary open reads nothing
    /// in proportion to the memory.
    pub fn open(
        mut lexical: LexicalIndex,
        settings: VectorSettings,
        store: &dyn Store,
    ) -> Result<Self, IndexError> {
        if lexical.deletion_marked() {
            let stats = store.stats()?;
            // Each turn is indexed twice (itself and its window), each segment once.
            if lexical.len() > 2 * stats.turns + stats.segments {
                tracing::warn!("lexical index holds units the store lacks; rebuilding it");
                lexical.clear()?;
            }
            lexical.clear_deletion_mark()?;
        }
        let index = Self {
            lexical,
            vectors: RwLock::new(VectorIndex::new(settings)),
            catching_up: Mutex::new(()),
        };
        index.catch_up_lexical(store)?;
        Ok(index)
    }

    /// Adds to the lexical index the units committed after its watermark, with the windows the
    /// new turns widen, a page of [`CATCH_UP_PAGE`] turns and segments per commit (so a rebuild
    /// of a large memory holds one page in RAM, and an interrupted one goes on from its last
    /// page). Cost: proportional to what is new.
    fn catch_up_lexical(&self, store: &dyn Store) -> Result<(), IndexError> {
        self.catch_up_lexical_by(store, CATCH_UP_PAGE)
    }

    fn catch_up_lexical_by(&self, store: &dyn Store, page: usize) -> Result<(), IndexError> {
        let _alone = self
            .catching_up
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut pages = 0usize;
        while self.catch_up_lexical_page(store, page)? {
            pages += 1;
            if pages > 1 {
                tracing::info!("lexical index: {} units indexed", self.lexical.len());
            }
        }
        Ok(())
    }

    /// One page of [`EmbeddedIndex::catch_up_lexical`]; false when nothing was left.
    fn catch_up_lexical_page(&self, store: &dyn Store, page: usize) -> Result<bool, IndexError> {
        let mark = self.lexical.watermark()?;
        let mut units = store.units_after(mark.turn_seq, mark.segment_seq, page)?;
        if units.is_empty() {
            return Ok(false);
        }
        let mut next = mark;
        next.windows = true;
        let mut new_turns = Vec::new();
        for u in &units {
            match u.kind {
                UnitKind::Turn => {
                    next.turn_seq = next.turn_seq.max(u.seq);
                    new_turns.push(TurnId(u.id.clone()));
                }
                UnitKind::Segment => next.segment_seq = next.segment_seq.max(u.seq),
                UnitKind::Card | UnitKind::Window => {}
            }
        }
        // New turns window themselves and widen the windows of the turns before them.
        units.extend(aril_store::windows_widened(&new_turns, |ids| {
            store.session_neighbourhoods(ids, WINDOW_SPAN)
        })?);
        self.lexical.add(&units, next)?;
        Ok(true)
    }

    /// Brings a held user's vectors (and graphs) up to the store: the units stored after those
    /// held are read (beside searches) and appended (searches wait for the append alone). A
    /// user not held is read whole on its next search.
    fn catch_up_vectors(&self, store: &dyn Store, user_id: &str) -> Result<(), IndexError> {
        let _alone = self
            .catching_up
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let held = self.vectors.read().unwrap_or_else(PoisonError::into_inner);
        let Some((model, turns, segments)) = held.held_through(user_id) else {
            return Ok(());
        };
        drop(held);
        let units = store.unit_vectors(&model, user_id, turns, segments)?;
        self.vectors
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .append(user_id, units)
    }

    fn vectors_mut(&mut self) -> &mut VectorIndex {
        self.vectors
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl UnitSearch for EmbeddedIndex {
    /// Searches the user's vectors held in memory, loading them from the store on first use.
    fn dense(
        &self,
        store: &dyn Store,
        model: &str,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
        kind: UnitKind,
    ) -> Result<Vec<Hit>, IndexError> {
        let stored = FromStore { store, model };
        let held = self.vectors.read().unwrap_or_else(PoisonError::into_inner);
        if held.has_user(&filter.user_id) {
            return held.search(filter, query, k, &[kind], &stored);
        }
        let settings = held.settings().clone();
        drop(held);
        // Read from the store and build outside the lock (a large user's graph may be built
        // here), so searches of other users go on; of two searches loading the same user at
        // once, the second keeps the first's copy. A saved graph that fits is opened, and only
        // the units stored after it are read.
        let mut loading = UserVectors::open(&settings, &filter.user_id, model, &stored);
        let (turns, segments) = loading.through();
        store.each_unit_vectors(model, &filter.user_id, turns, segments, &mut |unit| {
            loading.add(unit)
        })?;
        let loaded = loading.ready(&settings, &filter.user_id)?;
        let mut vectors = self.vectors.write().unwrap_or_else(PoisonError::into_inner);
        if !vectors.has_user(&filter.user_id) {
            vectors.insert_user(&filter.user_id, loaded);
        }
        vectors.search(filter, query, k, &[kind], &stored)
    }

    fn lexical(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
        kind: UnitKind,
        roles: Option<&[Role]>,
    ) -> Result<Vec<Hit>, IndexError> {
        self.lexical.search(filter, query, k, &[kind], roles)
    }

    /// A user's cards are few: the engine indexes them in memory.
    fn indexes_cards(&self) -> bool {
        false
    }

    fn documents(&self, _stats: &StoreStats) -> u64 {
        self.lexical.len()
    }

    fn committed(&self, store: &dyn Store, user_id: &str) -> Result<(), IndexError> {
        self.catch_up_lexical(store)?;
        self.catch_up_vectors(store, user_id)
    }

    /// Held vectors and graphs are dropped (read again on use); the lexical index catches up.
    fn imported(&mut self, store: &dyn Store) -> Result<(), IndexError> {
        self.vectors_mut().clear()?;
        self.catch_up_lexical(store)
    }

    /// Removes the user's graph files and marks the lexical index (cleared once the deletion
    /// is applied to it; found at open after a crash in between).
    fn deleting(&self, user_id: &str) -> Result<(), IndexError> {
        self.vectors
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .remove_files(user_id)?;
        self.lexical.mark_deleting()
    }

    fn deletion_refused(&self) -> Result<(), IndexError> {
        self.lexical.clear_deletion_mark()
    }

    fn deleted_scope(&mut self, filter: &ScopeFilter) -> Result<(), IndexError> {
        self.lexical.delete(filter)?;
        self.vectors_mut().evict(&filter.user_id);
        self.lexical.clear_deletion_mark()
    }

    fn deleted_units(
        &mut self,
        store: &dyn Store,
        users: &[&str],
        gone: &[UnitId],
        rewindowed: &[TurnId],
    ) -> Result<(), IndexError> {
        let ids: Vec<&str> = gone.iter().map(UnitId::as_str).collect();
        self.lexical.delete_units(&ids)?;
        let windows = aril_store::session_windows(store, rewindowed)?;
        let mark = self.lexical.watermark()?;
        self.lexical.add(&windows, mark)?;
        self.catch_up_lexical(store)?;
        for user in users {
            self.vectors_mut().evict(user);
        }
        self.lexical.clear_deletion_mark()
    }

    fn rebuild(&mut self, store: &dyn Store) -> Result<(), IndexError> {
        self.vectors_mut().clear()?;
        self.lexical.clear()?;
        self.catch_up_lexical(store)?;
        self.lexical.clear_deletion_mark()
    }

    /// The saved vector graphs: each whole, none of a user the store does not hold, each naming
    /// as its last unit one the store holds.
    fn check(&self, store: &dyn Store) -> Result<(), IndexError> {
        let users: std::collections::HashSet<String> = store.users()?.into_iter().collect();
        let holds_last = |user: &str, kind, model: &str, seq, id: &str| {
            FromStore { store, model }.holds(user, kind, seq, id)
        };
        self.vectors
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .check_files(&|user| users.contains(user), &holds_last)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aril_core::{NewTurn, Scope, Turn};
    use aril_store::{SqliteStore, TurnRecord, WriteBatch};

    fn turn(n: usize, text: &str) -> TurnRecord {
        let t = NewTurn {
            scope: Scope::user("u").unwrap(),
            conversation: "c".into(),
            session: Some("s1".into()),
            role: Role::User,
            speaker: None,
            text: text.into(),
            event_time: None,
            source_id: Some(format!("D1:{n}")),
            metadata: None,
            lifecycle: Default::default(),
        };
        TurnRecord {
            turn: Turn {
                id: t.id(),
                seq: 0,
                turn: t,
                ingest_time: chrono::Utc::now(),
            },
            text_hash: format!("h{n}"),
        }
    }

    #[test]
    fn a_catch_up_page_by_page_indexes_what_one_read_of_everything_does() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(&dir.path().join("s.sqlite")).unwrap();
        let texts = [
            "my zebra is called stripes",
            "we went to the lake",
            "the lake was cold",
            "stripes the zebra swam",
            "then we had coffee",
        ];
        store
            .commit(WriteBatch {
                turns: texts.iter().enumerate().map(|(n, t)| turn(n, t)).collect(),
                ..Default::default()
            })
            .unwrap();
        let index = |page| {
            let index = EmbeddedIndex {
                lexical: LexicalIndex::in_memory().unwrap(),
                vectors: RwLock::new(VectorIndex::new(VectorSettings::default())),
                catching_up: Mutex::new(()),
            };
            index.catch_up_lexical_by(&store, page).unwrap();
            index
        };
        let (paged, whole) = (index(2), index(100));
        assert_eq!(
            paged.lexical.watermark().unwrap(),
            whole.lexical.watermark().unwrap()
        );
        assert_eq!(paged.lexical.len(), whole.lexical.len());
        for kind in [UnitKind::Turn, UnitKind::Window] {
            let find = |index: &EmbeddedIndex| {
                index
                    .lexical
                    .search(
                        &ScopeFilter::user("u"),
                        "zebra lake coffee",
                        10,
                        &[kind],
                        None,
                    )
                    .unwrap()
            };
            let found = find(&paged);
            assert_eq!(found.len(), texts.len());
            assert_eq!(found, find(&whole));
        }
    }
}
