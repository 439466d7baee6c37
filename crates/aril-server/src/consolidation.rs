//! Consolidation in the background of a serving process: one thread claims the oldest queued
//! segment (so servers sharing a store never encode one twice), reads its encoding input with the
//! engine, runs the encoder call **without** holding the engine (requests go on meanwhile), and
//! stores the outcome with the engine again. The queue is the store's (`consolidation` table), so
//! it is bounded by what ingest closed, survives a restart, and a segment deleted or rebuilt during
//! its call is left alone. An endpoint that cannot be reached leaves the segment queued and the
//! worker waits before it tries again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use aril_engine::llm::ChatModel;
use aril_engine::{EncodeConfig, EncodeOutcome, EngineError, SegmentId, encode_claimed};

use crate::AppState;

/// How long the worker sleeps when the queue is empty, and after an unreachable endpoint.
const IDLE: Duration = Duration::from_millis(500);
const BACKOFF: Duration = Duration::from_secs(15);

/// The background worker; stops (after the call in flight) when dropped or stopped.
pub struct Consolidator {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Consolidator {
    /// Starts the worker over the state's engine.
    pub fn start(state: AppState, model: Arc<dyn ChatModel>, config: EncodeConfig) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("aril-consolidate".into())
            .spawn(move || work(&state, model.as_ref(), &config, &flag))
            .ok();
        if thread.is_none() {
            tracing::error!("could not start the consolidation thread; run `aril consolidate`");
        }
        Self { stop, thread }
    }

    /// Stops the worker and waits for the call in flight (its segment stays queued if cut short).
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Consolidator {
    fn drop(&mut self) {
        self.halt();
    }
}

fn pause(stop: &AtomicBool, total: Duration) {
    let step = Duration::from_millis(100);
    let mut waited = Duration::ZERO;
    while waited < total && !stop.load(Ordering::SeqCst) {
        std::thread::sleep(step);
        waited += step;
    }
}

fn work(state: &AppState, model: &dyn ChatModel, config: &EncodeConfig, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        let next = state.with_engine(|e| e.claim_next(false));
        let segment = match next {
            Ok(Some(segment)) => segment,
            Ok(None) => {
                pause(stop, IDLE);
                continue;
            }
            Err(e) => {
                tracing::error!("consolidation cannot read its queue: {e}");
                pause(stop, BACKOFF);
                continue;
            }
        };
        match encode_one(state, model, config, &segment) {
            Ok(EncodeOutcome::Done { cards }) => {
                tracing::info!(%segment, cards, "segment written into cards");
            }
            Ok(EncodeOutcome::Failed(reason)) => {
                tracing::warn!(%segment, %reason, "segment failed (aril consolidate --retry-failed)");
            }
            Ok(EncodeOutcome::Gone) => {}
            Err(EngineError::Llm(e)) => {
                tracing::warn!(%segment, "encoder unreachable, the segment stays queued: {e}");
                pause(stop, BACKOFF);
            }
            Err(e) => {
                tracing::error!(%segment, "consolidation failed: {e}");
                pause(stop, BACKOFF);
            }
        }
    }
}

/// Writes one segment this process claimed into cards ([`encode_claimed`] on the server's
/// state: the encoder called without holding the engine). Blocking.
pub(crate) fn encode_one(
    state: &AppState,
    model: &dyn ChatModel,
    config: &EncodeConfig,
    segment: &SegmentId,
) -> Result<EncodeOutcome, EngineError> {
    encode_claimed(state, model, config, segment).map(|(outcome, _)| outcome)
}
