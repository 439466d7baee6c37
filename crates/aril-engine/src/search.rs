//! The LLM-free read path: the question is embedded once, then four ranked lists are taken inside
//! the scope (cosine over turn chunks, BM25 over turns, cosine over segment chunks, BM25 over
//! segments) and fused with RRF. By default a segment's rank is credited to each of its turns
//! (`SegmentUse::RankTurns`): the segment's context lifts the turns it holds, and only turns are
//! shown. The fused units are packed into `k` and an optional token budget; no turn is shown twice
//! (a segment shown as a unit shows only the turns a better-ranked unit has not).
//!
//! Cost per query: one embedding (no cache write), one pass over the user's chunk vectors, two
//! tantivy queries, three store reads.

use std::collections::HashMap;

use aril_core::{ScopeFilter, SegmentId, Turn, TurnId, tokens};
use aril_embed::embed_chunked;
use aril_index::{Hit, VectorSearch};
use aril_recall::{pack, rrf_ranked};
use aril_store::UnitKind;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::{Engine, EngineError, SegmentUse};

/// A question to recall for.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub filter: ScopeFilter,
    pub query: String,
    /// Units to return at most (default: `recall.default_k`).
    pub k: Option<usize>,
    /// o200k tokens the returned texts may use together.
    pub budget: Option<usize>,
}

/// Where a result comes from, in the source's own ids.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceRef {
    pub conversation: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Source ids of the turns shown (LoCoMo `D1:3`), or aril turn ids when the source had none.
    pub turns: Vec<String>,
}

/// One recalled unit.
#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    pub rank: usize,
    pub kind: UnitKind,
    pub id: String,
    /// The unit's turns not already shown by a better-ranked unit, `Speaker: text`, one per line.
    pub text: String,
    pub source: SourceRef,
    /// When it was said (a segment: when it started).
    pub time: Option<DateTime<Utc>>,
    /// Fused RRF score.
    pub score: f32,
    pub tokens: usize,
}

/// The recalled context.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResponse {
    pub query: String,
    pub results: Vec<SearchHit>,
    pub context_tokens: usize,
}

/// Turns read from the store, by id.
type TurnsById = HashMap<TurnId, Turn>;

/// A unit key with its rank in one list (from 1).
type Ranked = ((UnitKind, String), usize);

/// A fused unit with its current turns.
pub(crate) struct Candidate {
    pub kind: UnitKind,
    pub id: String,
    pub score: f32,
    pub turns: Vec<Turn>,
}

impl Engine {
    /// Recalls the units most relevant to a question inside a scope.
    pub fn search(&mut self, request: &SearchRequest) -> Result<SearchResponse, EngineError> {
        let query = request.query.trim();
        if query.is_empty() {
            return Err(aril_core::InvalidInput("the query is empty".into()).into());
        }
        let k = request.k.unwrap_or(self.config.recall.default_k);
        if k == 0 {
            return Err(aril_core::InvalidInput("k must be at least 1".into()).into());
        }
        let qv = self.embed_query(query)?;
        let candidates = self.hybrid_candidates(&request.filter, query, &qv)?;
        // Each turn costs its rendered tokens plus the newline that joins it to the next.
        let mut cost: HashMap<TurnId, usize> = HashMap::new();
        let units: Vec<Vec<(TurnId, usize)>> = candidates
            .iter()
            .map(|c| {
                c.turns
                    .iter()
                    .map(|t| {
                        let n = *cost
                            .entry(t.id.clone())
                            .or_insert_with(|| tokens::count(&t.rendered()) + 1);
                        (t.id.clone(), n)
                    })
                    .collect()
            })
            .collect();
        let packed = pack(&units, k, request.budget);
        let results = packed
            .chosen
            .iter()
            .enumerate()
            .map(|(rank, (i, shown))| {
                let c = &candidates[*i];
                let turns: Vec<&Turn> = c.turns.iter().filter(|t| shown.contains(&t.id)).collect();
                let first = &turns[0].turn;
                SearchHit {
                    rank: rank + 1,
                    kind: c.kind,
                    id: c.id.clone(),
                    text: turns
                        .iter()
                        .map(|t| t.rendered())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    source: SourceRef {
                        conversation: first.conversation.clone(),
                        session: first.session.clone(),
                        turns: turns
                            .iter()
                            .map(|t| t.turn.source_id.clone().unwrap_or_else(|| t.id.0.clone()))
                            .collect(),
                    },
                    time: turns.iter().filter_map(|t| t.turn.event_time).min(),
                    score: c.score,
                    tokens: shown.iter().map(|t| cost[t]).sum(),
                }
            })
            .collect();
        Ok(SearchResponse {
            query: query.to_string(),
            results,
            context_tokens: packed.tokens,
        })
    }

    /// The question embedded as one unit vector (chunk vectors summed, normalised).
    pub(crate) fn embed_query(&mut self, query: &str) -> Result<Vec<f32>, EngineError> {
        let embedder = self.embedder()?;
        let chunked = embed_chunked(embedder.as_ref(), &[query])?;
        let mut qv = vec![0.0f32; embedder.dim()];
        for c in chunked.iter().flat_map(|t| &t.chunks) {
            qv.iter_mut().zip(&c.vector).for_each(|(a, b)| *a += b);
        }
        aril_embed::normalize(&mut qv);
        Ok(qv)
    }

    /// The four ranked lists of the LLM-free recall for `query` (embedded as `qv`), fused and
    /// resolved to their current turns, best first.
    pub(crate) fn hybrid_candidates(
        &mut self,
        filter: &ScopeFilter,
        query: &str,
        qv: &[f32],
    ) -> Result<Vec<Candidate>, EngineError> {
        let c = self.config.recall.candidates;
        // Deeper turn lists when speaker focus may restrict them to one speaker's turns.
        let focusing = self.config.recall.w_focus > 0.0;
        let turn_depth = if focusing {
            c * self.config.recall.focus_depth.max(1)
        } else {
            c
        };
        let r = self.config.recall.clone();
        let dense_turns = self.dense_hits(filter, qv, turn_depth, UnitKind::Turn)?;
        let dense_segments = self.dense_hits(filter, qv, c, UnitKind::Segment)?;
        let lexical_turns = self.lexical_hits(filter, query, turn_depth, UnitKind::Turn)?;
        let lexical_segments = if r.w_lexical_segments > 0.0 {
            self.lexical_hits(filter, query, c, UnitKind::Segment)?
        } else {
            Vec::new()
        };
        // A window hit stands for its turn.
        let lexical_windows: Vec<Hit> = if r.w_lexical_windows > 0.0 {
            self.lexical_hits(filter, query, turn_depth, UnitKind::Window)?
                .into_iter()
                .map(|h| Hit {
                    kind: UnitKind::Turn,
                    ..h
                })
                .collect()
        } else {
            Vec::new()
        };
        let (focus, read) = if focusing {
            self.speaker_focus(query, &[&dense_turns, &lexical_turns, &lexical_windows])?
        } else {
            (None, HashMap::new())
        };
        let ranked = |hits: &[Hit]| -> Vec<Ranked> {
            hits.iter()
                .take(c)
                .map(|h| (h.kind, h.id.clone()))
                .zip(1..)
                .collect()
        };
        let (dt, lt, lw) = (
            ranked(&dense_turns),
            ranked(&lexical_turns),
            ranked(&lexical_windows),
        );
        // The named speaker's own turns among the deeper lists, ranked again from 1.
        let (fdt, flt, flw) = match &focus {
            Some(theirs) => {
                let only = |hits: &[Hit]| -> Vec<Hit> {
                    hits.iter()
                        .filter(|h| theirs.contains(&h.id))
                        .cloned()
                        .collect()
                };
                (
                    ranked(&only(&dense_turns)),
                    ranked(&only(&lexical_turns)),
                    ranked(&only(&lexical_windows)),
                )
            }
            None => (Vec::new(), Vec::new(), Vec::new()),
        };
        let (ds, ls) = match r.segments {
            SegmentUse::Units => (ranked(&dense_segments), ranked(&lexical_segments)),
            SegmentUse::RankTurns => (
                self.member_turns(&dense_segments)?,
                self.member_turns(&lexical_segments)?,
            ),
        };
        let fused = rrf_ranked(
            &[
                (&dt, r.w_dense_turns),
                (&lt, r.w_lexical_turns),
                (&ds, r.w_dense_segments),
                (&ls, r.w_lexical_segments),
                (&lw, r.w_lexical_windows),
                (&fdt, r.w_focus),
                (&flt, r.w_focus),
                (&flw, r.w_focus),
            ],
            r.rrf_k,
        );
        self.resolve(&fused, &filter.user_id, read)
    }

    /// The ids of the candidate turns spoken by the one speaker the question names, if it names
    /// exactly one of the speakers among them ([`crate::focus`]); and the candidate turns read to
    /// learn their speakers, which [`Engine::resolve`] then need not read again.
    fn speaker_focus(
        &self,
        query: &str,
        lists: &[&[Hit]],
    ) -> Result<(Option<std::collections::HashSet<String>>, TurnsById), EngineError> {
        let ids: Vec<TurnId> = lists
            .iter()
            .flat_map(|l| l.iter())
            .map(|h| TurnId(h.id.clone()))
            .collect::<std::collections::HashSet<_>>()
            .into_iter()
            .collect();
        let turns = self.store.turns(&ids)?;
        let named = crate::focus::named_speaker(
            query,
            turns.iter().filter_map(|t| t.turn.speaker.as_deref()),
        );
        let theirs = named.map(|name| {
            turns
                .iter()
                .filter(|t| t.turn.speaker.as_deref() == Some(name))
                .map(|t| t.id.0.clone())
                .collect()
        });
        Ok((
            theirs,
            turns.into_iter().map(|t| (t.id.clone(), t)).collect(),
        ))
    }

    /// The `k` turns or segments nearest `qv` inside the filter: the store's search when it has
    /// one, else the user's vectors held in memory (loaded from the store on first use).
    pub(crate) fn dense_hits(
        &mut self,
        filter: &ScopeFilter,
        qv: &[f32],
        k: usize,
        kind: UnitKind,
    ) -> Result<Vec<Hit>, EngineError> {
        let embedder = self.embedder()?;
        match (self.store.search(), &mut self.local) {
            (Some(search), _) => Ok(search.dense(embedder.name(), filter, qv, k, kind)?),
            (None, Some(local)) => {
                if !local.vectors.has_user(&filter.user_id) {
                    let units = self.store.unit_vectors(embedder.name(), &filter.user_id)?;
                    local.vectors.load_user(&filter.user_id, units);
                }
                Ok(local.vectors.search(filter, qv, k, &[kind]))
            }
            (None, None) => Err(EngineError::NoIndex),
        }
    }

    /// The `k` turns or segments BM25 ranks best for `query` inside the filter: the store's
    /// search when it has one, else the data directory's tantivy index.
    pub(crate) fn lexical_hits(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
        kind: UnitKind,
    ) -> Result<Vec<Hit>, EngineError> {
        match (self.store.search(), &self.local) {
            (Some(search), _) => Ok(search.lexical(filter, query, k, kind)?),
            (None, Some(local)) => Ok(local.lexical.search(filter, query, k, &[kind])?),
            (None, None) => Err(EngineError::NoIndex),
        }
    }

    /// A segment ranking turned into a turn ranking: every member turn takes its segment's rank.
    fn member_turns(&self, hits: &[Hit]) -> Result<Vec<Ranked>, EngineError> {
        let ids: Vec<SegmentId> = hits.iter().map(|h| SegmentId(h.id.clone())).collect();
        let segments = self.store.segments(&ids)?;
        let by_id: HashMap<&str, &aril_core::Segment> =
            segments.iter().map(|s| (s.id.0.as_str(), s)).collect();
        Ok(hits
            .iter()
            .zip(1..)
            .filter_map(|(h, rank)| by_id.get(h.id.as_str()).map(|s| (s, rank)))
            .flat_map(|(s, rank)| {
                s.turns
                    .iter()
                    .map(move |t| ((UnitKind::Turn, t.0.clone()), rank))
            })
            .collect())
    }

    /// Reads the fused units' turns from the store; units the store no longer has are dropped, and
    /// so are turns a newer version of their memory replaces (recall shows what holds now).
    /// `read` holds turns this query has already read from the store.
    fn resolve(
        &self,
        fused: &[((UnitKind, String), f32)],
        user_id: &str,
        mut read: TurnsById,
    ) -> Result<Vec<Candidate>, EngineError> {
        let segment_ids: Vec<SegmentId> = fused
            .iter()
            .filter(|((k, _), _)| *k == UnitKind::Segment)
            .map(|((_, id), _)| SegmentId(id.clone()))
            .collect();
        let segments: HashMap<String, Vec<TurnId>> = self
            .store
            .segments(&segment_ids)?
            .into_iter()
            .map(|s| (s.id.0, s.turns))
            .collect();
        let mut turn_ids: Vec<TurnId> = fused
            .iter()
            .filter(|((k, _), _)| *k == UnitKind::Turn)
            .map(|((_, id), _)| TurnId(id.clone()))
            .collect();
        turn_ids.extend(segments.values().flatten().cloned());
        turn_ids.retain(|id| !read.contains_key(id));
        read.extend(
            self.store
                .turns(&turn_ids)?
                .into_iter()
                .map(|t| (t.id.clone(), t)),
        );
        let superseded = self.store.superseded(user_id)?;
        let turns: TurnsById = read
            .into_iter()
            .filter(|(id, _)| !superseded.contains(id))
            .collect();
        let mut out = Vec::with_capacity(fused.len());
        for ((kind, id), score) in fused {
            let members: Option<Vec<Turn>> = match kind {
                UnitKind::Turn => turns.get(&TurnId(id.clone())).map(|t| vec![t.clone()]),
                UnitKind::Segment => segments
                    .get(id)
                    .map(|ids| ids.iter().filter_map(|t| turns.get(t).cloned()).collect()),
                // Cards are recalled by the planned path (`ask`), not here; window hits were
                // turned into their turns before fusion.
                UnitKind::Card | UnitKind::Window => None,
            };
            if let Some(members) = members.filter(|m| !m.is_empty()) {
                out.push(Candidate {
                    kind: *kind,
                    id: id.clone(),
                    score: *score,
                    turns: members,
                });
            }
        }
        Ok(out)
    }
}
