//! Reads for looking inside a memory (the inspector's pages): one scope's counts, the cost and
//! the writes per day, a filtered page of cards. Each is answered by the store's own queries,
//! so none reads a whole memory.

use aril_core::{Card, ScopeFilter};
use aril_store::{CardQuery, DailyTurns, DailyUsage, ScopeSummary};

use crate::{Engine, EngineError};

impl Engine {
    /// What one scope's memory holds: turns, segments, current cards, segments waiting for or
    /// failed at encoding, text bytes, the last write.
    pub fn scope_summary(&self, filter: &ScopeFilter) -> Result<ScopeSummary, EngineError> {
        Ok(self.store.scope_summary(filter)?)
    }

    /// Model calls and tokens per UTC day, purpose and model (every user's: the calls are not
    /// kept per user).
    pub fn llm_usage_by_day(&self) -> Result<Vec<DailyUsage>, EngineError> {
        Ok(self.store.llm_usage_by_day()?)
    }

    /// Turns stored per UTC day and role, across the store.
    pub fn turns_by_day(&self) -> Result<Vec<DailyTurns>, EngineError> {
        Ok(self.store.turns_by_day()?)
    }

    /// One page of the cards a query admits in a scope, and how many it admits in all.
    pub fn find_cards(
        &self,
        filter: &ScopeFilter,
        query: &CardQuery,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Card>, u64), EngineError> {
        Ok(self.store.find_cards(filter, query, offset, limit)?)
    }
}
