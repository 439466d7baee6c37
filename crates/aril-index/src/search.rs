//! The search seam: dense and lexical search over a memory's units, and what keeps that search
//! in step with the store. Two implementations: [`EmbeddedIndex`](crate::EmbeddedIndex), the
//! indexes an engine derives beside an embedded store (tantivy and the vectors it holds), and
//! [`InStore`](crate::InStore), a store that indexes each unit in the commit that stores it
//! (PostgreSQL), where keeping in step is nothing to do.

use aril_core::{Role, ScopeFilter, TurnId, UnitId, UnitKind};
use aril_store::{Hit, Store, StoreStats};

use crate::IndexError;

/// Search over the units of one store. Readers (`&self`) run in parallel; the engine calls the
/// writers (`&mut self`) after the store has changed, and [`UnitSearch::deleting`] before.
/// `store` is the store searched: an index beside it reads what it has not loaded yet from it.
pub trait UnitSearch: Send + Sync {
    /// The `k` units of `kind` inside the filter whose best chunk vector under `model` is
    /// nearest `query` (cosine), best first (equal scores by id). A window has no vectors.
    fn dense(
        &self,
        store: &dyn Store,
        model: &str,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
        kind: UnitKind,
    ) -> Result<Vec<Hit>, IndexError>;

    /// The `k` units of `kind` inside the filter with the best BM25 score for the words of
    /// `query` (statistics over the filter's units of that kind), best first. With `roles`, only
    /// turns and windows of turns of those roles are returned; the statistics still count every
    /// unit of the kind. A window hit is its turn's.
    fn lexical(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
        kind: UnitKind,
        roles: Option<&[Role]>,
    ) -> Result<Vec<Hit>, IndexError>;

    /// Whether cards are searched here too; when not, the engine keeps a user's cards in an
    /// index of its own.
    fn indexes_cards(&self) -> bool;

    /// Documents BM25 searches (each turn, its window and each segment).
    fn documents(&self, stats: &StoreStats) -> u64;

    /// After a commit that stored units of `user_id`: what the store holds now is searchable.
    /// Runs beside searches (and may run after a later commit: it catches up with whatever the
    /// store holds then).
    fn committed(&self, store: &dyn Store, user_id: &str) -> Result<(), IndexError>;

    /// After rows were written into the store from elsewhere (an import): whatever was held is
    /// read again.
    fn imported(&mut self, store: &dyn Store) -> Result<(), IndexError>;

    /// Before a deletion of `user_id`'s units reaches the store: nothing derived that outlives a
    /// crash may keep their vectors (files are removed now; rebuilt from what is left).
    fn deleting(&self, user_id: &str) -> Result<(), IndexError>;

    /// After the store refused a deletion announced by [`UnitSearch::deleting`] (its
    /// transaction rolled back): nothing derived needs repair.
    fn deletion_refused(&self) -> Result<(), IndexError> {
        Ok(())
    }

    /// After the store deleted everything `filter` admits.
    fn deleted_scope(&mut self, filter: &ScopeFilter) -> Result<(), IndexError>;

    /// After the store deleted single units of `users` (`gone`: turns and the segments that
    /// held them); `rewindowed` are the turns whose windows held deleted words.
    fn deleted_units(
        &mut self,
        store: &dyn Store,
        users: &[&str],
        gone: &[UnitId],
        rewindowed: &[TurnId],
    ) -> Result<(), IndexError>;

    /// Rebuilds everything derived from the store (`aril reindex`).
    fn rebuild(&mut self, store: &dyn Store) -> Result<(), IndexError>;

    /// Checks what is derived against the store; the error says what is wrong.
    fn check(&self, store: &dyn Store) -> Result<(), IndexError>;
}
