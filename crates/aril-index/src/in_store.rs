//! [`UnitSearch`] for a store that indexes what it stores (PostgreSQL): every search is a query
//! to the store, and every write already indexed what it stored, so nothing is held here and
//! there is nothing to keep in step.

use aril_core::{Role, ScopeFilter, TurnId, UnitId, UnitKind};
use aril_store::{Hit, PgSearch, Store, StoreStats};

use crate::{IndexError, UnitSearch};

/// PostgreSQL's own search (pgvector HNSW, BM25 in SQL) behind the seam.
pub struct InStore {
    search: PgSearch,
}

impl InStore {
    pub fn new(search: PgSearch) -> Self {
        Self { search }
    }
}

impl UnitSearch for InStore {
    fn dense(
        &self,
        _store: &dyn Store,
        model: &str,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
        kind: UnitKind,
    ) -> Result<Vec<Hit>, IndexError> {
        Ok(self.search.dense(model, filter, query, k, kind)?)
    }

    fn lexical(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
        kind: UnitKind,
        roles: Option<&[Role]>,
    ) -> Result<Vec<Hit>, IndexError> {
        Ok(self.search.lexical(filter, query, k, kind, roles)?)
    }

    fn indexes_cards(&self) -> bool {
        true
    }

    /// Every turn, its window and every segment have a `tsvector`.
    fn documents(&self, stats: &StoreStats) -> u64 {
        2 * stats.turns + stats.segments
    }

    fn committed(&self, _store: &dyn Store, _user_id: &str) -> Result<(), IndexError> {
        Ok(())
    }

    fn imported(&mut self, _store: &dyn Store) -> Result<(), IndexError> {
        Ok(())
    }

    fn deleting(&self, _user_id: &str) -> Result<(), IndexError> {
        Ok(())
    }

    fn deleted_scope(&mut self, _filter: &ScopeFilter) -> Result<(), IndexError> {
        Ok(())
    }

    fn deleted_units(
        &mut self,
        _store: &dyn Store,
        _users: &[&str],
        _gone: &[UnitId],
        _rewindowed: &[TurnId],
    ) -> Result<(), IndexError> {
        Ok(())
    }

    /// The postings are written with their units; the BM25 statistics kept from them are
    /// counted again.
    fn rebuild(&mut self, _store: &dyn Store) -> Result<(), IndexError> {
        Ok(self.search.recount_statistics()?)
    }

    /// The store's own integrity check covers its rows; the BM25 statistics its triggers keep
    /// are checked against the postings here.
    fn check(&self, _store: &dyn Store) -> Result<(), IndexError> {
        match self.search.statistics_mismatches()? {
            (0, 0) => Ok(()),
            (terms, totals) => Err(IndexError::Corrupt(format!(
                "the BM25 statistics disagree with the postings in {terms} word counts and \
                 {totals} unit totals"
            ))),
        }
    }
}
