//! Consolidation: closed segments wait in a persistent queue (filled by ingest, in the same commit
//! as the segment), and each is written into cards with one encoder call. A reply that stays
//! unusable marks the segment failed with the reason (its turns stay searchable; `retry_failed`
//! tries again); an endpoint that cannot be reached stops the run and leaves the segment queued.
//! A restart resumes from the queue.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

use aril_cards::{EncodeConfig, Encoded, EncoderState, RecentCard, encode_segment};
use aril_core::ScopeFilter;
use aril_embed::embed_chunked;
use aril_llm::{CallRecord, ChatModel, LlmError};
use aril_store::{CardBatch, CardVectors};
use serde::Serialize;

use crate::metered::{CallCost, Metered};
use crate::shared::Alone;
use crate::{Engine, EngineError, Progress, SharedEngine};

/// Cards of the scope the encoder is shown as "recent" (cut further to its token budget).
const RECENT_CARDS: usize = 24;

/// What a consolidation run takes.
#[derive(Debug, Clone)]
pub struct ConsolidateOptions {
    /// Segments to encode at most in this run.
    pub limit: usize,
    /// Also retry segments whose encoding failed before.
    pub retry_failed: bool,
    pub encode: EncodeConfig,
}

impl Default for ConsolidateOptions {
    fn default() -> Self {
        Self {
            limit: usize::MAX,
            retry_failed: false,
            encode: EncodeConfig::default(),
        }
    }
}

/// What a consolidation run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConsolidateReport {
    pub segments_done: usize,
    pub segments_failed: usize,
    pub cards_added: usize,
    /// The model calls this run made, with their tokens (also stored for `aril stats`).
    pub cost: CallCost,
    /// The reasons of this run's failures, one per failed segment.
    pub failures: Vec<String>,
    pub interrupted: bool,
}

/// One queued segment's encoding input, read with the engine and encoded without it, so a server
/// can run the model call while other requests use the engine.
pub struct EncodeJob {
    segment: aril_core::Segment,
    turns: Vec<aril_core::Turn>,
    state: EncoderState,
    recent: Vec<RecentCard>,
}

/// A job's model reply with the calls it paid for.
pub struct EncodeAttempt {
    result: Result<Encoded, LlmError>,
    calls: Vec<CallRecord>,
}

/// What became of one segment.
#[derive(Debug, Clone, PartialEq)]
pub enum EncodeOutcome {
    /// Its cards are stored.
    Done { cards: usize },
    /// The reply stayed unusable; the segment is marked failed with the reason.
    Failed(String),
    /// The segment was deleted or rebuilt while it was being encoded; nothing was stored.
    Gone,
}

impl EncodeJob {
    pub fn segment(&self) -> &aril_core::SegmentId {
        &self.segment.id
    }

    /// The model call (two after a repair). Needs no engine.
    pub fn encode(&self, model: &dyn ChatModel, config: &EncodeConfig) -> EncodeAttempt {
        let metered = Metered::new(model);
        let result = encode_segment(
            &metered,
            &self.segment,
            &self.turns,
            &self.state,
            &self.recent,
            config,
        );
        EncodeAttempt {
            result,
            calls: metered.take(),
        }
    }
}

/// How long a claim on a queued segment lasts: longer than any encoder call with its retries
/// (a dead process's claims lapse after it, and the segment is queued for anyone again).
pub const CLAIM_LEASE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

impl Engine {
    /// Claims the oldest queued segment (failed ones too with `retry_failed`) for this process's
    /// encoder, so no other process sharing the store encodes it meanwhile; `None` when every
    /// queued segment is taken or none waits. The claim ends with [`Engine::finish_encode`] or
    /// [`Engine::release_claim`], or lapses after [`CLAIM_LEASE`].
    pub fn claim_next(
        &mut self,
        retry_failed: bool,
    ) -> Result<Option<aril_core::SegmentId>, EngineError> {
        Ok(self
            .store
            .claim(None, 1, retry_failed, CLAIM_LEASE)?
            .into_iter()
            .next())
    }

    /// Claims those of `ids` that are queued (or failed, with `retry_failed`) and free (see
    /// [`Engine::claim_next`]).
    pub fn claim_segments(
        &mut self,
        ids: &[aril_core::SegmentId],
        retry_failed: bool,
    ) -> Result<Vec<aril_core::SegmentId>, EngineError> {
        Ok(self
            .store
            .claim(Some(ids), ids.len(), retry_failed, CLAIM_LEASE)?)
    }

    /// Gives a claimed segment back to the queue without an outcome (the encoder could not be
    /// reached).
    pub fn release_claim(&mut self, id: &aril_core::SegmentId) -> Result<(), EngineError> {
        Ok(self.store.release(id)?)
    }

    /// Segments waiting for consolidation (with `retry_failed`, failed ones too), oldest first.
    pub fn queued_segments(
        &self,
        limit: usize,
        retry_failed: bool,
    ) -> Result<Vec<aril_core::SegmentId>, EngineError> {
        Ok(self.store.queued_segments(limit, retry_failed)?)
    }

    /// The encoding input of a segment: its turns, its conversation's encoder state and the
    /// user's recent cards; `None` when the segment no longer exists.
    pub fn encode_job(&self, id: &aril_core::SegmentId) -> Result<Option<EncodeJob>, EngineError> {
        let Some(segment) = self.store.segments(std::slice::from_ref(id))?.pop() else {
            return Ok(None);
        };
        let turns = self.store.turns(&segment.turns)?;
        let state: EncoderState = match self
            .store
            .encoder_state(&segment.scope, &segment.conversation)?
        {
            Some(v) => serde_json::from_value(v)
                .map_err(|e| aril_store::StoreError::Corrupt(format!("encoder state: {e}")))?,
            None => EncoderState::default(),
        };
        // What the user said anywhere may be updated here, so recent cards span the user.
        let filter = ScopeFilter::user(segment.scope.user_id.clone());
        let cards = self.store.cards(&filter, true)?;
        let recent: Vec<RecentCard> = cards
            .iter()
            .skip(cards.len().saturating_sub(RECENT_CARDS))
            .map(|c| RecentCard {
                id: c.id.clone(),
                kind: c.kind,
                text: c.text.clone(),
            })
            .collect();
        Ok(Some(EncodeJob {
            segment,
            turns,
            state,
            recent,
        }))
    }

    /// Stores an attempt: its calls always; its cards (with their vectors, the new encoder state
    /// and the segment marked done) when the segment is still as the job read it; the failure
    /// reason when the reply stayed unusable. An unreachable endpoint is returned as the error and
    /// leaves the segment queued.
    pub fn finish_encode(
        &mut self,
        job: EncodeJob,
        attempt: EncodeAttempt,
    ) -> Result<EncodeOutcome, EngineError> {
        self.store_records(attempt.calls)?;
        let segment = job.segment;
        let current = self
            .store
            .segments(std::slice::from_ref(&segment.id))?
            .pop();
        if current.is_none_or(|c| c.turns != segment.turns) {
            return Ok(EncodeOutcome::Gone);
        }
        match attempt.result {
            Ok(encoded) => {
                let cards = encoded.cards.len();
                let vectors = self.card_vectors(&encoded.cards)?;
                let stored = self.store.commit_cards(CardBatch {
                    segment: segment.id.clone(),
                    cards: encoded.cards,
                    scope: segment.scope.clone(),
                    conversation: segment.conversation.clone(),
                    state: serde_json::to_value(&encoded.state).map_err(|e| {
                        aril_store::StoreError::Corrupt(format!("encoder state: {e}"))
                    })?,
                    vectors,
                });
                match stored {
                    Ok(()) => {}
                    // Another encoder wrote this segment's cards first (its claim had lapsed).
                    Err(aril_store::StoreError::Conflict(_)) => return Ok(EncodeOutcome::Gone),
                    Err(e) => return Err(e.into()),
                }
                self.drop_card_index(&segment.scope.user_id);
                Ok(EncodeOutcome::Done { cards })
            }
            Err(LlmError::InvalidReply { reason }) => {
                tracing::warn!(segment = %segment.id, %reason, "consolidation failed");
                self.store.mark_failed(&segment.id, &reason)?;
                Ok(EncodeOutcome::Failed(reason))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Encodes queued segments into cards, oldest first, one model call each (two after a
    /// repair), and stores the cards with their vectors: [`consolidate_shared`] over an engine
    /// nobody else holds.
    pub fn consolidate(
        &mut self,
        model: &dyn ChatModel,
        options: &ConsolidateOptions,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<ConsolidateReport, EngineError> {
        consolidate_shared(&Alone(RefCell::new(self)), model, options, progress, cancel)
    }

    /// The vectors of new cards under the engine's embedder.
    pub(crate) fn card_vectors(
        &self,
        cards: &[aril_core::Card],
    ) -> Result<Vec<CardVectors>, EngineError> {
        if cards.is_empty() {
            return Ok(Vec::new());
        }
        let embedder = self.embedder()?;
        let texts: Vec<&str> = cards.iter().map(|c| c.text.as_str()).collect();
        let embedded = embed_chunked(embedder.as_ref(), &texts)?;
        self.model_work
            .count(embedded.iter().map(|e| (e.chunks.len(), e.pieces)));
        Ok(cards
            .iter()
            .zip(embedded)
            .map(|(c, e)| CardVectors {
                card: c.id.clone(),
                model: embedder.name().to_string(),
                chunks: crate::embedding::stored_chunks(e.chunks),
            })
            .collect())
    }

    /// The cards of a scope in store order; with `current_only`, those no newer card supersedes.
    pub fn cards(
        &self,
        filter: &ScopeFilter,
        current_only: bool,
    ) -> Result<Vec<aril_core::Card>, EngineError> {
        Ok(self.store.cards(filter, current_only)?)
    }
}

/// Writes one segment the caller claimed into cards: its input read beside other readers, the
/// encoder called holding nothing, the outcome stored alone. A failure that leaves no outcome (an
/// unreachable endpoint) gives the claim back. Returns the outcome and what the calls cost.
pub fn encode_claimed(
    shared: &impl SharedEngine,
    model: &dyn ChatModel,
    config: &EncodeConfig,
    segment: &aril_core::SegmentId,
) -> Result<(EncodeOutcome, CallCost), EngineError> {
    let outcome = (|| {
        let Some(job) = shared.read(|e| e.encode_job(segment))? else {
            return Ok((EncodeOutcome::Gone, CallCost::default()));
        };
        let attempt = job.encode(model, config);
        let cost = CallCost::of(&attempt.calls);
        Ok((shared.write(|e| e.finish_encode(job, attempt))?, cost))
    })();
    if outcome.is_err()
        && let Err(e) = shared.write(|e| e.release_claim(segment))
    {
        tracing::error!(%segment, "could not give the claim back (it lapses by itself): {e}");
    }
    outcome
}

/// [`Engine::consolidate`] on a shared engine: each queued segment claimed (so processes sharing
/// a store split the queue), then [`encode_claimed`]. Checks `cancel` between segments; an
/// unreachable endpoint stops the run with the segment queued again.
pub fn consolidate_shared(
    shared: &impl SharedEngine,
    model: &dyn ChatModel,
    options: &ConsolidateOptions,
    progress: &mut dyn FnMut(Progress),
    cancel: &AtomicBool,
) -> Result<ConsolidateReport, EngineError> {
    let queue = shared.read(|e| {
        Ok(e.store
            .queued_segments(options.limit, options.retry_failed)?)
    })?;
    let total = queue.len();
    let mut report = ConsolidateReport::default();
    progress(Progress { done: 0, total });
    for (i, id) in queue.iter().enumerate() {
        if cancel.load(Ordering::SeqCst) {
            report.interrupted = true;
            break;
        }
        let claimed =
            shared.write(|e| e.claim_segments(std::slice::from_ref(id), options.retry_failed))?;
        if claimed.is_empty() {
            continue; // another encoder holds it, or it is gone
        }
        let (outcome, cost) = encode_claimed(shared, model, &options.encode, id)?;
        report.cost.add(cost);
        match outcome {
            EncodeOutcome::Done { cards } => {
                report.cards_added += cards;
                report.segments_done += 1;
            }
            EncodeOutcome::Failed(reason) => {
                report.segments_failed += 1;
                report.failures.push(format!("{id}: {reason}"));
            }
            EncodeOutcome::Gone => {}
        }
        progress(Progress { done: i + 1, total });
    }
    Ok(report)
}
