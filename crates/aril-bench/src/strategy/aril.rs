//! The `aril` strategy: the engine itself (verbatim turns, LLM-free segments, hybrid recall with
//! RRF), ingesting each haystack into its own scope of a data directory kept in the bench cache,
//! so a re-run ingests nothing.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use aril_core::{NewTurn, Scope, ScopeFilter};
use aril_engine::datasets::parse_longmemeval_time;
use aril_engine::{Config, Engine, IngestOptions, SearchRequest, StoreAt};
use chrono::{DateTime, Utc};

use super::{Embeddings, Strategy, Unit};
use crate::BenchError;
use crate::data::Case;
use crate::report::ModelCost;

pub struct Aril {
    engine: Engine,
    /// Turns this run stored (those the store lacked).
    turns_stored: usize,
}

impl Aril {
    /// The engine over `dir` (derived indexes, and the store when `store` is embedded).
    pub fn open(
        dir: &Path,
        store: &StoreAt,
        embeddings: Embeddings,
        config: Config,
    ) -> Result<Self, BenchError> {
        let engine = Engine::open_at(dir, store, config, Some(embeddings.model()))?;
        Ok(Self {
            engine,
            turns_stored: 0,
        })
    }
}

/// The search request for a case's question inside its haystack.
fn request(case: &Case, k: usize) -> SearchRequest {
    SearchRequest {
        filter: ScopeFilter::user(case.haystack_key.clone()),
        query: case.question.clone(),
        k: Some(k),
        budget: None,
        // The question's own date when the file gives one (LongMemEval); else relative
        // dates focus nothing (LoCoMo, HotpotQA have none).
        asked_at: case.question_date.as_deref().and_then(parse_date),
        condition: None,
        threshold: None,
    }
}

/// A response's hits as bench units.
fn units(response: aril_engine::SearchResponse) -> Vec<Unit> {
    response
        .results
        .into_iter()
        .map(|h| Unit {
            session: h.source.session.unwrap_or_default(),
            turns: h.source.turns,
            text: h.text,
        })
        .collect()
}

/// A session or question date as the benchmark writes it.
pub(super) fn parse_date(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|d| d.with_timezone(&Utc))
        .ok()
        .or_else(|| parse_longmemeval_time(s).ok())
}

impl Aril {
    pub(super) fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    pub(super) fn engine_ref(&self) -> &Engine {
        &self.engine
    }
}

impl Strategy for Aril {
    fn name(&self) -> &'static str {
        "aril"
    }

    fn index(&mut self, case: &Case) -> Result<(), BenchError> {
        let scope = Scope::user(case.haystack_key.clone())
            .map_err(|e| BenchError::data(Path::new(&case.haystack_key), e.0))?;
        let turns: Vec<NewTurn> = case
            .sessions
            .iter()
            .flat_map(|s| {
                let when = s.date.as_deref().and_then(parse_date);
                let scope = scope.clone();
                s.turns
                    .iter()
                    .filter(|t| !t.text.trim().is_empty())
                    .map(move |t| NewTurn {
                        scope: scope.clone(),
                        conversation: case.haystack_key.clone(),
                        session: Some(s.id.clone()),
                        role: t.role,
                        speaker: t.speaker.clone(),
                        text: t.text.clone(),
                        event_time: when,
                        source_id: Some(t.id.clone()),
                        metadata: None,
                        lifecycle: Default::default(),
                    })
            })
            .collect();
        let report = self.engine.ingest(
            turns,
            &IngestOptions {
                flush: true,
                ..Default::default()
            },
            &mut |_| {},
            &AtomicBool::new(false),
        )?;
        self.turns_stored += report.turns_added;
        Ok(())
    }

    fn rank(&mut self, case: &Case, k: usize) -> Result<Vec<Unit>, BenchError> {
        Ok(units(self.engine.search(&request(case, k))?))
    }

    /// The engine's session search: one unit per session, the session's best.
    fn rank_sessions(&mut self, case: &Case, k: usize) -> Result<Vec<Unit>, BenchError> {
        Ok(units(self.engine.search_sessions(&request(case, k))?))
    }

    fn embedded_texts(&self) -> usize {
        self.engine.model_work().texts as usize
    }

    fn model_work(&self) -> Option<ModelCost> {
        let done = self.engine.model_work();
        Some(ModelCost {
            passes: done.passes,
            pieces: done.pieces,
            turns_stored: self.turns_stored,
        })
    }

    /// The encoder calls the memory would cost with cards: its closed segments.
    fn details(&mut self) -> serde_json::Value {
        self.engine
            .stats()
            .map_or(serde_json::Value::Null, |s| segment_details(&s))
    }
}

/// A memory's closed segments, each one encoder call when cards are written: how many, and
/// the turns and o200k tokens one call reads.
pub(super) fn segment_details(stats: &aril_engine::Stats) -> serde_json::Value {
    serde_json::json!({
        "segments": stats.store.segments,
        "turns": stats.store.turns,
        "turns_per_segment": stats.turns_per_segment,
        "tokens_per_segment": stats.tokens_per_segment,
    })
}
