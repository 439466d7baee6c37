//! Why a recall found what it found: each retrieval path's ranked list as it went into the
//! fusion, with its weight and its own scores (cosine or BM25), the fused list, and the context
//! the search returned. [`crate::Recall::explain`] makes one; the inspector's recall playground
//! shows it. It is the LLM-free search itself, run once with its lists kept, not a second
//! implementation of it.

use aril_core::UnitId;
use serde::Serialize;

use crate::SearchResponse;

/// One retrieval path's list, best first, as long as the fusion read it.
#[derive(Debug, Clone, Serialize)]
pub struct PathList {
    /// What the path searches, e.g. `dense turns`, `BM25 windows`, `speaker focus: dense`.
    pub path: &'static str,
    /// Its RRF weight (a path of weight 0 takes no part and is not listed).
    pub weight: f32,
    pub units: Vec<PathUnit>,
}

/// A unit in a path's list.
#[derive(Debug, Clone, Serialize)]
pub struct PathUnit {
    pub unit: UnitId,
    /// From 1.
    pub rank: usize,
    /// The path's own score: cosine for the dense paths, BM25 for the lexical ones.
    pub score: f32,
}

/// A unit of the fused list, with its RRF score.
#[derive(Debug, Clone, Serialize)]
pub struct FusedUnit {
    pub unit: UnitId,
    pub score: f32,
}

/// The lists of one search, kept while it runs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Trace {
    pub lists: Vec<PathList>,
    /// The fused list resolved to current, visible units, best first, before the answer packs
    /// it into `k` and the budget.
    pub fused: Vec<FusedUnit>,
    /// Whether the question asks about the present, so the fused candidates were ranked once
    /// more, newest first.
    pub newest_first: bool,
}

/// A search and the lists that made it.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    #[serde(flatten)]
    pub trace: Trace,
    /// What the search returned (the same as [`crate::Recall::search`] for the request).
    pub response: SearchResponse,
}
