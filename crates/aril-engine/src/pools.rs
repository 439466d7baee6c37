//! The pools of an ingest's new turns whose texts the model embeds in one pass: a pool is sorted
//! by length so the model's batches pad little, and the next pool is embedded on a thread of its
//! own while the current one's batches are segmented and committed (that work is mostly one
//! core's, and the model would otherwise wait for it). A pool begins with the first commit batch
//! that reaches past the pool before and holds [`EMBED_POOL`] turns (at least that batch).
//!
//! The next pool asks the model for exactly what it would ask once the current pool's batches
//! before it had committed: the texts the store lacks then, which are those it lacks now less
//! the current pool's entries for the turns before the next pool (those batches commit them).
//! So an ingest embeds the same texts in the same passes, whether or not pools overlap.

use std::collections::HashSet;
use std::thread::JoinHandle;

use aril_core::{NewTurn, TurnId};
use aril_store::Embedding;

use crate::ingest::Prepared;
use crate::{Engine, EngineError};

/// Turns whose texts are embedded in one pass, taken across conversations in ingest order: the
/// more texts one pass sorts by length, the less its batches pad (measured with
/// `examples/ingest_speed`: a pool per LongMemEval haystack ran at 68–72% of the bare model's
/// speed, pools across them at 75%).
const EMBED_POOL: usize = 1024;

/// An ingest's pools, and the one being embedded ahead.
pub(crate) struct EmbedPools<'a> {
    /// Every new turn, in ingest order.
    turns: Vec<&'a NewTurn>,
    /// Each pool: `[start, end)` of `turns`.
    bounds: Vec<(usize, usize)>,
    /// The pool to take next.
    next: usize,
    /// A pool being embedded ahead, and its thread.
    ahead: Option<(usize, EmbeddingAhead)>,
}

/// The thread embedding a pool ahead: its new cache entries.
type EmbeddingAhead = JoinHandle<Result<Vec<Embedding>, EngineError>>;

impl<'a> EmbedPools<'a> {
    /// The pools of `groups` (each conversation's new turns, in ingest order) committed in
    /// batches of `batch` turns.
    pub(crate) fn plan(groups: &'a [Vec<(TurnId, NewTurn)>], batch: usize) -> Self {
        let turns: Vec<&NewTurn> = groups.iter().flatten().map(|(_, t)| t).collect();
        let mut bounds = Vec::new();
        let (mut done, mut pooled) = (0, 0);
        for chunk in groups.iter().flat_map(|g| g.chunks(batch.max(1))) {
            if done + chunk.len() > pooled {
                pooled = (done + EMBED_POOL.max(chunk.len())).min(turns.len());
                bounds.push((done, pooled));
            }
            done += chunk.len();
        }
        Self {
            turns,
            bounds,
            next: 0,
            ahead: None,
        }
    }

    /// The pool that begins at turn `done` of the ingest order, if one does.
    pub(crate) fn starting_at(&self, done: usize) -> Option<usize> {
        self.bounds
            .get(self.next)
            .filter(|(start, _)| *start == done)
            .map(|_| self.next)
    }

    /// Pool `i`'s cache entries (the texts the cache lacks, embedded, and those made `ahead` of
    /// the ingest; not committed: each batch commits those it uses). Starts embedding pool
    /// `i + 1` on a thread of its own.
    pub(crate) fn take(
        &mut self,
        engine: &Engine,
        i: usize,
        ahead: &Prepared,
    ) -> Result<Vec<Embedding>, EngineError> {
        let fresh = match self.ahead.take() {
            Some((pool, thread)) if pool == i => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
            _ => {
                let lookup = engine.cache_misses(&self.texts(engine, i), &ahead.embeddings)?;
                lookup.work.run()?
            }
        };
        self.next = i + 1;
        if let Some(&(next_start, _)) = self.bounds.get(i + 1) {
            let start = self.bounds[i].0;
            let committed_before: HashSet<String> = self.turns[start..next_start]
                .iter()
                .filter(|t| engine.is_dense(t.role))
                .map(|t| engine.vector_key(&t.rendered()))
                .collect();
            let mut pending = ahead.embeddings.clone();
            pending.extend(
                fresh
                    .iter()
                    .filter(|e| committed_before.contains(&e.text_hash))
                    .cloned(),
            );
            let work = engine
                .cache_misses(&self.texts(engine, i + 1), &pending)?
                .work;
            self.ahead = Some((i + 1, std::thread::spawn(move || work.run())));
        }
        let mut prepared = fresh;
        prepared.extend(ahead.embeddings.iter().cloned());
        Ok(prepared)
    }

    /// The dense texts of pool `i`'s turns, in order.
    fn texts(&self, engine: &Engine, i: usize) -> Vec<String> {
        let (start, end) = self.bounds[i];
        self.turns[start..end]
            .iter()
            .filter(|t| engine.is_dense(t.role))
            .map(|t| t.rendered())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aril_core::{Role, Scope};

    fn group(conversation: &str, n: usize) -> Vec<(TurnId, NewTurn)> {
        (0..n)
            .map(|i| {
                let t = NewTurn {
                    scope: Scope::user("u").unwrap(),
                    conversation: conversation.into(),
                    session: None,
                    role: Role::User,
                    speaker: None,
                    text: format!("turn {i}"),
                    event_time: None,
                    source_id: Some(format!("{i}")),
                    metadata: None,
                    lifecycle: Default::default(),
                };
                (t.id(), t)
            })
            .collect()
    }

    #[test]
    fn a_pool_begins_with_the_batch_that_reaches_past_the_last_and_spans_conversations() {
        // 100 + 2,000 + 50 turns in batches of 64: batches start at 0, 64, 100 (the second
        // conversation), 164, …, 2,084, 2,100 (the third).
        let groups = vec![group("a", 100), group("b", 2000), group("c", 50)];
        let pools = EmbedPools::plan(&groups, 64);
        assert_eq!(pools.turns.len(), 2150);
        // The first pool takes 1,024 turns from 0; the batch [996, 1060) of "b" (it starts at
        // 100 + 14·64) reaches past 1,024, so the next pool begins there, overlapping the first;
        // the batch [2020, 2084) begins just where that one ends; the last pool is cut at the
        // end of the ingest.
        assert_eq!(pools.bounds, vec![(0, 1024), (996, 2020), (2020, 2150)]);
        // A pool is found only where it begins, in order.
        assert_eq!(pools.starting_at(0), Some(0));
        assert_eq!(pools.starting_at(996), None, "pool 0 is taken first");
    }
}
