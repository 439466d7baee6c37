//! Consolidation: closed segments wait in a persistent queue (filled by ingest, in the same commit
//! as the segment), and each is written into cards with one encoder call. A reply that stays
//! unusable marks the segment failed with the reason (its turns stay searchable; `retry_failed`
//! tries again); an endpoint that cannot be reached stops the run and leaves the segment queued.
//! A restart resumes from the queue.

use std::sync::atomic::{AtomicBool, Ordering};

use aril_cards::{EncodeConfig, EncoderState, RecentCard, encode_segment};
use aril_core::ScopeFilter;
use aril_embed::embed_chunked;
use aril_llm::{ChatModel, LlmError};
use aril_store::{CardBatch, CardVectors, StoredChunk};
use serde::Serialize;

use crate::metered::{CallCost, Metered};
use crate::{Engine, EngineError, Progress};

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

impl Engine {
    /// Encodes queued segments into cards, oldest first, one model call each (two after a
    /// repair), and stores the cards with their vectors. Checks `cancel` between segments.
    pub fn consolidate(
        &mut self,
        model: &dyn ChatModel,
        options: &ConsolidateOptions,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<ConsolidateReport, EngineError> {
        let queue = self
            .store
            .queued_segments(options.limit, options.retry_failed)?;
        let model = Metered::new(model);
        let mut report = ConsolidateReport::default();
        progress(Progress {
            done: 0,
            total: queue.len(),
        });
        for (i, id) in queue.iter().enumerate() {
            if cancel.load(Ordering::SeqCst) {
                report.interrupted = true;
                break;
            }
            let Some(segment) = self.store.segments(std::slice::from_ref(id))?.pop() else {
                continue; // deleted meanwhile
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
            let encoded =
                encode_segment(&model, &segment, &turns, &state, &recent, &options.encode);
            report.cost.add(self.store_calls(&model)?);
            match encoded {
                Ok(encoded) => {
                    report.cards_added += encoded.cards.len();
                    report.segments_done += 1;
                    let vectors = self.card_vectors(&encoded.cards)?;
                    self.store.commit_cards(CardBatch {
                        segment: segment.id.clone(),
                        cards: encoded.cards,
                        scope: segment.scope.clone(),
                        conversation: segment.conversation.clone(),
                        state: serde_json::to_value(&encoded.state).map_err(|e| {
                            aril_store::StoreError::Corrupt(format!("encoder state: {e}"))
                        })?,
                        vectors,
                    })?;
                    self.drop_card_index(&segment.scope.user_id);
                }
                Err(LlmError::InvalidReply { reason }) => {
                    report.segments_failed += 1;
                    tracing::warn!(segment = %segment.id, %reason, "consolidation failed");
                    self.store.mark_failed(&segment.id, &reason)?;
                    report.failures.push(format!("{}: {reason}", segment.id));
                }
                Err(e) => return Err(e.into()),
            }
            progress(Progress {
                done: i + 1,
                total: queue.len(),
            });
        }
        Ok(report)
    }

    /// The vectors of new cards under the engine's embedder.
    pub(crate) fn card_vectors(
        &mut self,
        cards: &[aril_core::Card],
    ) -> Result<Vec<CardVectors>, EngineError> {
        if cards.is_empty() {
            return Ok(Vec::new());
        }
        let embedder = self.embedder()?;
        let texts: Vec<&str> = cards.iter().map(|c| c.text.as_str()).collect();
        let embedded = embed_chunked(embedder.as_ref(), &texts)?;
        Ok(cards
            .iter()
            .zip(embedded)
            .map(|(c, e)| CardVectors {
                card: c.id.clone(),
                model: embedder.name().to_string(),
                chunks: e
                    .chunks
                    .into_iter()
                    .map(|ch| StoredChunk {
                        start: ch.start as u32,
                        end: ch.end as u32,
                        vector: ch.vector,
                    })
                    .collect(),
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
