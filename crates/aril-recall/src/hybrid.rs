//! The LLM-free read path: the question is embedded once, then ranked lists are taken inside the
//! scope (cosine over turn chunks, BM25 over the dense roles' turns, cosine over segment chunks,
//! BM25 over each turn's lexical window, BM25 over segments when weighted) and fused with RRF; a
//! question naming one of the scope's speakers adds three more ([`crate::focus`]), one naming a
//! day, month or year, or a past time relative to when it is asked, three more
//! ([`crate::dated`]), one that counts or sums ("how many …", "… in total") three more
//! ([`crate::counting`]), and one about the asker's own age three more ([`crate::age`]); one
//! asking about the present ranks the fused candidates once more, newest first
//! ([`crate::present`]). By default a segment's rank is credited to each of its turns
//! (`SegmentUse::RankTurns`): the segment's context lifts the turns it holds, and only turns are
//! shown. The fused units are packed into `k` and an optional token budget; no turn is shown
//! twice (a segment shown as a unit shows only the turns a better-ranked unit has not). Session
//! search ([`Recall::search_sessions`]) ranks sessions instead: each session's best unit, plus
//! one more RRF list ranking the sessions by how many of their turns are near the question.
//!
//! Cost per query: one embedding (no cache write; [`aril_embed::embed_question`]), two passes
//! over the user's chunk vectors, two or three tantivy queries (the BM25 turn list keeps the
//! dense roles' turns inside its query), a few store reads; each focus (speaker, date, age) adds
//! one embedding, one pass and two tantivy queries, `focus_depth` times deeper; the counting
//! focus the same at the first lists' depth. The first BM25 lists run on two scoped threads
//! while the question embeds ([`Recall::prefetched`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use aril_core::{
    Condition, Metadata, Role, ScopeFilter, SegmentId, Subject, Turn, TurnId, UnitId, UnitKind,
    tokens,
};
use aril_embed::{Embedder, embed_question};
use aril_index::{Hit, UnitSearch};
use aril_store::{Store, TurnFacts};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::explain::{Explanation, FusedUnit, PathList, PathUnit, Trace};
use crate::{
    LexicalTurnRoles, RecallConfig, RecallError, SegmentUse, pack, present, replies, rrf_ranked,
};

/// The read path over one memory: its store, the search over the store's units and the
/// embedder, with recall's settings. Cheap to make (references and a shared embedder), so each
/// read makes its own;
/// every method takes `&self`, so any number run at once.
pub struct Recall<'a> {
    pub store: &'a dyn Store,
    pub search: &'a dyn UnitSearch,
    pub embedder: Arc<dyn Embedder>,
    pub config: &'a RecallConfig,
    /// The roles whose turns have vectors (the BM25 turn list keeps them when
    /// `lexical_turn_roles` says so).
    pub dense_roles: &'a [Role],
}

/// A question to recall for.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub filter: ScopeFilter,
    pub query: String,
    /// Units to return at most (default: `recall.default_k`).
    pub k: Option<usize>,
    /// o200k tokens the returned texts may use together.
    pub budget: Option<usize>,
    /// When the question is asked: relative dates in it ("last week") resolve against this.
    /// Without it they focus nothing (the servers and the CLI pass the time of the request).
    pub asked_at: Option<DateTime<Utc>>,
    /// Only memories that meet it (metadata, times: Mem0's filter language) are returned: when
    /// few meet it (`recall.prefilter_max`) they are all ranked, else the search reads deeper
    /// until `k` do (`recall.filtered_depth_max`), and ranks them all when its lists, read that
    /// deep, hold fewer.
    pub condition: Option<Condition>,
    /// Only turns whose own vector is at least this similar to the question (cosine, 0–1, as
    /// Mem0's `threshold`) are returned; a turn without a vector of its own (a role not embedded)
    /// never is.
    pub threshold: Option<f32>,
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
    /// The metadata its clients attached to the turns it shows (merged when several have some).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
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

/// What a search has read before its fusion, which the fusion uses rather than reads again.
struct Prefetched {
    /// The dense turn list, best first, at least `candidates` deep where the scope has that
    /// many (only its first `candidates` take part in the fusion).
    dense_turns: Vec<Hit>,
    /// What the answer leaves out.
    hiding: Hiding,
    /// The turns read so far.
    read: TurnsById,
    /// The BM25 lists.
    lexical: LexicalLists,
    /// The date focus's lists ([`Recall::date_focus`]).
    dated: FocusLists,
}

/// The turn lists of a focus, speaker, date or counting (empty when the question has none).
#[derive(Default)]
struct FocusLists {
    dense: Vec<Hit>,
    lexical: Vec<Hit>,
    windows: Vec<Hit>,
}

/// The BM25 lists a search takes: turns always, segments and windows when asked, each `depth`
/// deep.
#[derive(Clone, Copy)]
struct Wanted {
    depth: usize,
    segments: bool,
    windows: bool,
}

/// BM25 over turns, segments and windows, in that order.
type LexicalLists = (Vec<Hit>, Vec<Hit>, Vec<Hit>);

/// A unit with its rank in one list (from 1).
type Ranked = (UnitId, usize);

/// One ranked list the fusion takes: what it searches (named for an explanation), its hits,
/// its weight, and whether it ranks segments (whose rank `SegmentUse::RankTurns` credits to
/// their turns).
struct FusionPath<'h> {
    name: &'static str,
    hits: &'h [Hit],
    weight: f32,
    segments: bool,
}

impl<'h> FusionPath<'h> {
    fn new(name: &'static str, hits: &'h [Hit], weight: f32, segments: bool) -> Self {
        Self {
            name,
            hits,
            weight,
            segments,
        }
    }
}

/// A fused unit with its current turns.
pub struct Candidate {
    pub unit: UnitId,
    pub score: f32,
    pub turns: Vec<Turn>,
}

impl Recall<'_> {
    /// Recalls the units most relevant to a question inside a scope.
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResponse, RecallError> {
        let (query, k) = checked(request, self.config.default_k)?;
        let condition = request.condition.as_ref();
        let admitted = match condition {
            Some(c) => Some(self.admitted(&request.filter, c, request.asked_at)?),
            None => None,
        };
        if let Some(admitted) = &admitted
            && admitted.len() <= self.config.prefilter_max
        {
            return self.search_admitted(request, query, None, k, admitted);
        }
        let mut config = self.config.clone();
        let mut qv: Option<Vec<f32>> = None;
        loop {
            let depth = config.candidates;
            let recall = Recall {
                config: &config,
                embedder: self.embedder.clone(),
                ..*self
            };
            let (vector, pre) = recall.prefetched(
                &request.filter,
                query,
                qv.as_deref(),
                request.asked_at,
                depth,
            )?;
            // Lists shorter than asked for hold every turn of the scope they can.
            let exhausted = pre.dense_turns.len() < depth && pre.lexical.0.len() < depth;
            // No turn past the dense list is more similar than its last one.
            let similar_deeper = match (request.threshold, pre.dense_turns.last()) {
                (Some(t), Some(last)) => last.score >= t,
                _ => false,
            };
            let mut candidates = without_repeats(recall.fused_candidates(
                &request.filter,
                query,
                &vector,
                pre,
                condition,
                None,
            )?);
            if let Some(threshold) = request.threshold {
                candidates = recall.similar_enough(candidates, &vector, threshold)?;
            }
            let deeper = (depth * 4).min(self.config.filtered_depth_max.max(depth));
            let may_find_more = condition.is_some() || similar_deeper;
            if !may_find_more || candidates.len() >= k || exhausted {
                return Ok(respond(query, &candidates, k, request.budget));
            }
            if deeper == depth {
                // Read as deep as a filtered search goes, the lists hold fewer than k of the
                // memories the filter admits: those are ranked all, exactly.
                return match &admitted {
                    Some(admitted) => {
                        self.search_admitted(request, query, Some(&vector), k, admitted)
                    }
                    None => Ok(respond(query, &candidates, k, request.budget)),
                };
            }
            qv = Some(vector);
            config.candidates = deeper;
        }
    }

    /// The current turns of the scope that meet `condition` and still hold when the question is
    /// asked, in store order: read without their text, those of the condition's span of
    /// creation times only.
    fn admitted(
        &self,
        filter: &ScopeFilter,
        condition: &Condition,
        asked_at: Option<DateTime<Utc>>,
    ) -> Result<Vec<TurnFacts>, RecallError> {
        let asked_at = asked_at.unwrap_or_else(Utc::now);
        let mut facts = self.store.current_turn_facts_meeting(filter, condition)?;
        facts.retain(|f| f.valid_to.is_none_or(|to| to > asked_at));
        Ok(facts)
    }

    /// [`Recall::search`] when few memories meet the condition (`recall.prefilter_max`): the dense
    /// turn list is every admitted turn, ranked by the cosine of its best chunk to the question
    /// (those without vectors, of roles not embedded, after them, newest first); the other
    /// lists are searched as usual and keep what meets the condition. One round, whatever the
    /// scope's size. `qv`: the question's vector when a search made it already.
    fn search_admitted(
        &self,
        request: &SearchRequest,
        query: &str,
        qv: Option<&[f32]>,
        k: usize,
        admitted: &[TurnFacts],
    ) -> Result<SearchResponse, RecallError> {
        // Lists at least k deep: the fusion takes that much of the exact list.
        let config = RecallConfig {
            candidates: self.config.candidates.max(k),
            ..self.config.clone()
        };
        let this = Recall {
            config: &config,
            embedder: self.embedder.clone(),
            ..*self
        };
        // No dense search of the scope: the admitted turns' own list replaces it.
        let (qv, mut pre) = this.prefetched(&request.filter, query, qv, request.asked_at, 0)?;
        let seqs: Vec<i64> = admitted.iter().map(|f| f.seq).collect();
        let similarity = this.similarity(&seqs, &qv)?;
        let mut ranked: Vec<(&TurnFacts, Option<f32>)> = admitted
            .iter()
            .map(|f| (f, similarity.get(&f.seq).copied()))
            .collect();
        ranked.sort_by(|(a, x), (b, y)| match (x, y) {
            (Some(x), Some(y)) => y.total_cmp(x).then(b.seq.cmp(&a.seq)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => b.seq.cmp(&a.seq),
        });
        pre.dense_turns = ranked
            .into_iter()
            .map(|(f, score)| Hit {
                unit: UnitId::Turn(f.id.clone()),
                score: score.unwrap_or(-1.0),
            })
            .collect();
        // The admitted set is the condition's answer (a later version's `created_at` is its
        // memory's): the other lists keep what it holds.
        let ids: HashSet<&TurnId> = admitted.iter().map(|f| &f.id).collect();
        let mut candidates = this.fused_candidates(&request.filter, query, &qv, pre, None, None)?;
        for c in &mut candidates {
            c.turns.retain(|t| ids.contains(&t.id));
        }
        candidates.retain(|c| !c.turns.is_empty());
        let mut candidates = without_repeats(candidates);
        if let Some(threshold) = request.threshold {
            candidates = near_enough(candidates, &similarity, threshold);
        }
        Ok(respond(query, &candidates, k, request.budget))
    }

    /// The cosine of each turn's best chunk (by store order) to the question `qv`; turns without
    /// vectors under the model are left out.
    fn similarity(&self, seqs: &[i64], qv: &[f32]) -> Result<HashMap<i64, f32>, RecallError> {
        Ok(self
            .store
            .unit_vectors_at(self.embedder.name(), UnitKind::Turn, seqs)?
            .into_iter()
            .map(|u| {
                let best = u
                    .chunks
                    .iter()
                    .map(|c| aril_embed::dot(qv, &c.vector))
                    .fold(f32::MIN, f32::max);
                (u.seq, best)
            })
            .collect())
    }

    /// The candidates with a turn whose own chunk vectors come at least `threshold` near the
    /// question `qv` (cosine), read from the store.
    fn similar_enough(
        &self,
        candidates: Vec<Candidate>,
        qv: &[f32],
        threshold: f32,
    ) -> Result<Vec<Candidate>, RecallError> {
        let seqs: Vec<i64> = candidates
            .iter()
            .flat_map(|c| c.turns.iter().map(|t| t.seq))
            .collect();
        let similarity = self.similarity(&seqs, qv)?;
        Ok(near_enough(candidates, &similarity, threshold))
    }

    /// Recalls the sessions most relevant to a question inside a scope: one hit per session (a
    /// conversation without sessions counts as one), its best unit, best session first. A
    /// session's score is its best unit's fused score plus, by RRF (weight
    /// `recall.w_sessions`), its rank in a session list: the sessions ordered by the mean
    /// cosine of their best `recall.session_turns` dense turns, so a session that speaks of the
    /// question in several turns rises above one that mentions it once. Only sessions with two
    /// turns or more among the question's `recall.session_depth` nearest are listed (a session
    /// with one is the dense turn list's entry already). A question about the assistant's own
    /// replies gets no session list ([`crate::replies`]). `k` and `budget` bound the sessions
    /// returned as they bound units.
    pub fn search_sessions(&self, request: &SearchRequest) -> Result<SearchResponse, RecallError> {
        let (query, k) = checked(request, self.config.default_k)?;
        let r = self.config;
        // One dense turn search serves both: the session list reads its first `session_depth`,
        // the fusion its first `candidates` (the same turns a search that shallow finds: hits
        // are ordered by score, then id).
        let depth = if r.w_sessions > 0.0 {
            r.candidates.max(r.session_depth)
        } else {
            r.candidates
        };
        let (qv, mut pre) =
            self.prefetched(&request.filter, query, None, request.asked_at, depth)?;
        let condition = request.condition.as_ref();
        // The session list counts the user's turns; a question about the assistant's replies
        // is answered by what the assistant said ([`crate::replies`]).
        let listed = if replies::asks_about_replies(query) {
            Vec::new()
        } else {
            self.session_list(&pre.hiding, condition, &pre.dense_turns, &mut pre.read)?
        };
        let candidates =
            self.fused_candidates(&request.filter, query, &qv, pre, condition, None)?;
        let rank_of: HashMap<&SessionKey, usize> = listed.iter().zip(1..).collect();
        let mut seen = HashSet::new();
        let mut best: Vec<Candidate> = Vec::new();
        for mut c in candidates {
            let Some(key) = c.turns.first().map(session_key) else {
                continue;
            };
            if let Some(rank) = rank_of.get(&key) {
                c.score += r.w_sessions / (r.rrf_k + *rank as f32);
            }
            if seen.insert(key) {
                best.push(c);
            }
        }
        // Stable: equal scores keep the fused order.
        best.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(respond(query, &best, k, request.budget))
    }

    /// The session list of [`Recall::search_sessions`]: the sessions with at least two of the
    /// first `session_depth` of `dense_turns`' current turns, best first by the mean cosine of
    /// their best `session_turns` turns. A turn the answer leaves out (`hiding`: say a newer
    /// version of its memory replaces it) does not count, as turn search does not show it. The
    /// turns read go into `read`.
    fn session_list(
        &self,
        hiding: &Hiding,
        condition: Option<&Condition>,
        dense_turns: &[Hit],
        read: &mut TurnsById,
    ) -> Result<Vec<SessionKey>, RecallError> {
        let r = self.config;
        if r.w_sessions <= 0.0 {
            return Ok(Vec::new());
        }
        let dense_turns = &dense_turns[..dense_turns.len().min(r.session_depth)];
        self.read_hit_turns(&[dense_turns], read)?;
        // Hits come best first, so each session's scores are gathered in descending order.
        let mut scores: Vec<(SessionKey, Vec<f32>)> = Vec::new();
        for h in dense_turns {
            let Some(turn) = h.unit.turn().and_then(|id| read.get(id)) else {
                continue;
            };
            if hiding.hides(turn, condition) {
                continue;
            }
            let key = session_key(turn);
            match scores.iter_mut().find(|(k, _)| *k == key) {
                Some((_, s)) => s.push(h.score),
                None => scores.push((key, vec![h.score])),
            }
        }
        let n = r.session_turns.max(1);
        let mut ranked: Vec<(f32, SessionKey)> = scores
            .into_iter()
            .filter(|(_, s)| s.len() > 1)
            .map(|(key, s)| {
                let best = &s[..s.len().min(n)];
                (best.iter().sum::<f32>() / best.len() as f32, key)
            })
            .collect();
        // Stable: equal means keep the order of the sessions' best turns.
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        Ok(ranked.into_iter().map(|(_, key)| key).collect())
    }

    /// The question's vector (`qv`, else the question embedded) and what a search reads before
    /// its fusion ([`Prefetched`]: the dense turn list `dense_depth` deep, the BM25 lists, the
    /// date focus, what the answer leaves out). The BM25 lists are searched while the question embeds
    /// ([`Recall::beside_lexical`]); a dated question's focus, which needs nothing of the first
    /// lists, is searched on a thread of its own meanwhile (its deep lists would otherwise
    /// follow them, and a lone search leaves a core idle while its longest list runs).
    fn prefetched(
        &self,
        filter: &ScopeFilter,
        query: &str,
        qv: Option<&[f32]>,
        asked_at: Option<DateTime<Utc>>,
        dense_depth: usize,
    ) -> Result<(Vec<f32>, Prefetched), RecallError> {
        let r = self.config;
        let wanted = Wanted {
            depth: r.candidates,
            segments: r.w_lexical_segments > 0.0,
            windows: r.w_lexical_windows > 0.0,
        };
        let dated = (r.w_dated > 0.0)
            .then(|| crate::dated::dated_question(query, asked_at))
            .flatten();
        let (first, focus) = std::thread::scope(|scope| {
            let focus = dated.map(|dated| {
                scope.spawn(move || -> Result<(FocusLists, TurnsById), RecallError> {
                    let mut read = TurnsById::new();
                    let lists = self.date_focus(filter, &dated, &mut read)?;
                    Ok((lists, read))
                })
            });
            let first = self.beside_lexical(filter, query, wanted, || {
                self.dense_list(filter, query, qv, dense_depth)
            });
            (first, focus.map(joined))
        });
        let ((qv, dense_turns), lexical) = first?;
        let now = Utc::now();
        let (dated, read) = focus.transpose()?.unwrap_or_default();
        Ok((
            qv,
            Prefetched {
                dense_turns,
                hiding: Hiding {
                    superseded: self.store.superseded(&filter.user_id)?,
                    now,
                    asked_at: asked_at.unwrap_or(now),
                },
                read,
                lexical,
                dated,
            },
        ))
    }

    /// The question's vector (`qv`, else `query` embedded) and its `depth` nearest turns.
    fn dense_list(
        &self,
        filter: &ScopeFilter,
        query: &str,
        qv: Option<&[f32]>,
        depth: usize,
    ) -> Result<(Vec<f32>, Vec<Hit>), RecallError> {
        let qv = match qv {
            Some(qv) => qv.to_vec(),
            None => self.embed_query(query)?,
        };
        if depth == 0 {
            return Ok((qv, Vec::new()));
        }
        let hits = self.dense_hits(filter, &qv, depth, UnitKind::Turn)?;
        Ok((qv, hits))
    }

    /// `main` (the question embedded, its dense list) run while the BM25 lists `wanted` are
    /// searched on two more threads (the window list alone: it is the largest in a large scope),
    /// since they need no vector. On a busy server the threads only share the cores; alone, a
    /// search takes about as long as its longest part.
    fn beside_lexical<T: Send>(
        &self,
        filter: &ScopeFilter,
        query: &str,
        wanted: Wanted,
        main: impl FnOnce() -> Result<T, RecallError>,
    ) -> Result<(T, LexicalLists), RecallError> {
        let depth = wanted.depth;
        std::thread::scope(|scope| {
            let windows = scope.spawn(|| match wanted.windows {
                true => self.window_hits(filter, query, depth),
                false => Ok(Vec::new()),
            });
            let turns = scope.spawn(|| -> Result<_, RecallError> {
                let turns = self.lexical_hits(filter, query, depth, UnitKind::Turn)?;
                let segments = match wanted.segments {
                    true => self.lexical_hits(filter, query, depth, UnitKind::Segment)?,
                    false => Vec::new(),
                };
                Ok((turns, segments))
            });
            let main = main();
            let windows = joined(windows);
            let (turns, segments) = joined(turns)?;
            Ok((main?, (turns, segments, windows?)))
        })
    }

    /// The question embedded as one unit vector (chunk vectors summed, normalised).
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>, RecallError> {
        Ok(embed_question(self.embedder.as_ref(), query)?)
    }

    /// The ranked lists of the LLM-free recall for `query` (embedded as `qv`, asked at
    /// `asked_at`), fused and resolved to their current turns, best first.
    pub fn hybrid_candidates(
        &self,
        filter: &ScopeFilter,
        query: &str,
        qv: &[f32],
        asked_at: Option<DateTime<Utc>>,
    ) -> Result<Vec<Candidate>, RecallError> {
        let (_, pre) =
            self.prefetched(filter, query, Some(qv), asked_at, self.config.candidates)?;
        self.fused_candidates(filter, query, qv, pre, None, None)
    }

    /// [`Recall::search`] for a request without a condition or threshold, with the lists that
    /// made its answer ([`Explanation`]).
    pub fn explain(&self, request: &SearchRequest) -> Result<Explanation, RecallError> {
        if request.condition.is_some() || request.threshold.is_some() {
            return Err(aril_core::InvalidInput(
                "an explained search takes no filters and no threshold: ask without them".into(),
            )
            .into());
        }
        let (query, k) = checked(request, self.config.default_k)?;
        let (qv, pre) = self.prefetched(
            &request.filter,
            query,
            None,
            request.asked_at,
            self.config.candidates,
        )?;
        let mut trace = Trace::default();
        let candidates = without_repeats(self.fused_candidates(
            &request.filter,
            query,
            &qv,
            pre,
            None,
            Some(&mut trace),
        )?);
        Ok(Explanation {
            trace,
            response: respond(query, &candidates, k, request.budget),
        })
    }

    /// [`Recall::hybrid_candidates`] with what the search has read already ([`Prefetched`]).
    fn fused_candidates(
        &self,
        filter: &ScopeFilter,
        query: &str,
        qv: &[f32],
        pre: Prefetched,
        condition: Option<&Condition>,
        mut trace: Option<&mut Trace>,
    ) -> Result<Vec<Candidate>, RecallError> {
        let Prefetched {
            mut dense_turns,
            hiding,
            mut read,
            lexical,
            dated,
        } = pre;
        let r = self.config;
        let c = r.candidates;
        dense_turns.truncate(c);
        let dense_segments = self.dense_hits(filter, qv, c, UnitKind::Segment)?;
        let (lexical_turns, lexical_segments, lexical_windows) = lexical;
        let focus = if r.w_focus > 0.0 {
            self.speaker_focus(
                filter,
                query,
                &[&dense_turns, &lexical_turns, &lexical_windows],
                &mut read,
            )?
        } else {
            FocusLists::default()
        };
        let counting = self.counting_focus(filter, query, &mut read)?;
        let age = self.age_focus(filter, query, &mut read)?;
        // Every path once, for the fusion and for an explanation alike.
        let path = FusionPath::new;
        let paths = [
            path("dense turns", &dense_turns, r.w_dense_turns, false),
            path("BM25 turns", &lexical_turns, r.w_lexical_turns, false),
            path("dense segments", &dense_segments, r.w_dense_segments, true),
            path(
                "BM25 segments",
                &lexical_segments,
                r.w_lexical_segments,
                true,
            ),
            path("BM25 windows", &lexical_windows, r.w_lexical_windows, false),
            path("speaker focus: dense", &focus.dense, r.w_focus, false),
            path("speaker focus: BM25", &focus.lexical, r.w_focus, false),
            path("speaker focus: windows", &focus.windows, r.w_focus, false),
            path("date focus: dense", &dated.dense, r.w_dated, false),
            path("date focus: BM25", &dated.lexical, r.w_dated, false),
            path("date focus: windows", &dated.windows, r.w_dated, false),
            path(
                "counting focus: dense",
                &counting.dense,
                r.w_counting,
                false,
            ),
            path(
                "counting focus: BM25",
                &counting.lexical,
                r.w_counting,
                false,
            ),
            path(
                "counting focus: windows",
                &counting.windows,
                r.w_counting,
                false,
            ),
            path("age focus: statements", &age, r.w_age, false),
        ];
        let lists = paths
            .iter()
            .map(|p| match (p.segments, r.segments) {
                (true, SegmentUse::RankTurns) => self.member_turns(p.hits),
                _ => Ok(p
                    .hits
                    .iter()
                    .take(c)
                    .map(|h| h.unit.clone())
                    .zip(1..)
                    .collect::<Vec<Ranked>>()),
            })
            .collect::<Result<Vec<_>, RecallError>>()?;
        let weighted: Vec<(&[Ranked], f32)> = lists
            .iter()
            .zip(&paths)
            .map(|(list, p)| (list.as_slice(), p.weight))
            .collect();
        let fused = rrf_ranked(&weighted, r.rrf_k);
        if let Some(trace) = trace.as_deref_mut() {
            trace.lists = paths
                .iter()
                .filter(|p| p.weight > 0.0 && !p.hits.is_empty())
                .map(|p| PathList {
                    path: p.name,
                    weight: p.weight,
                    units: p
                        .hits
                        .iter()
                        .take(c)
                        .zip(1..)
                        .map(|(h, rank)| PathUnit {
                            unit: h.unit.clone(),
                            rank,
                            score: h.score,
                        })
                        .collect(),
                })
                .collect();
        }
        let mut candidates = self.resolve(&fused, &hiding, condition, read)?;
        let newest_first = r.w_present > 0.0 && present::asks_about_present(query, r.present_tense);
        if newest_first {
            present::newest_first(&mut candidates, c, r.w_present, r.rrf_k);
        }
        if let Some(trace) = trace {
            trace.newest_first = newest_first;
            trace.fused = candidates
                .iter()
                .map(|c| FusedUnit {
                    unit: c.unit.clone(),
                    score: c.score,
                })
                .collect();
        }
        Ok(candidates)
    }

    /// BM25 over the turns' lexical windows; a window hit is its turn's ([`UnitId::of`]).
    fn window_hits(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
    ) -> Result<Vec<Hit>, RecallError> {
        self.lexical_hits(filter, query, k, UnitKind::Window)
    }

    /// Speaker focus ([`crate::focus`]): when the question names speakers of the candidate
    /// turns, the dense, BM25 and window turn lists searched again for the question without
    /// their names (`focus_depth` times deeper), each keeping those speakers' turns only.
    /// The speakers are learnt from the candidates' turns only (whatever else `read` holds); every
    /// turn read to learn them goes into `read`, which [`Recall::resolve`] then need not read
    /// again.
    fn speaker_focus(
        &self,
        filter: &ScopeFilter,
        query: &str,
        candidates: &[&[Hit]],
        read: &mut TurnsById,
    ) -> Result<FocusLists, RecallError> {
        self.read_hit_turns(candidates, read)?;
        let speakers = candidates
            .iter()
            .flat_map(|l| l.iter())
            .filter_map(|h| h.unit.turn().and_then(|id| read.get(id)))
            .filter_map(|t| t.turn.speaker.as_deref());
        let names: Vec<String> = crate::focus::named_speakers(query, speakers)
            .into_iter()
            .map(str::to_string)
            .collect();
        if names.is_empty() {
            return Ok(FocusLists::default());
        }
        let asked = crate::focus::without_names(
            query,
            &names.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        self.restricted_lists(filter, &asked, read, |t| {
            t.turn
                .speaker
                .as_deref()
                .is_some_and(|s| names.iter().any(|n| n == s))
        })
    }

    /// Date focus ([`crate::dated`]): for a question that names one day, month or year, or one
    /// past time relative to when it is asked, the dense, BM25 and window turn lists searched
    /// again for the question without the date (`focus_depth` times deeper), each keeping the
    /// turns said in that period.
    fn date_focus(
        &self,
        filter: &ScopeFilter,
        dated: &crate::dated::DatedQuestion,
        read: &mut TurnsById,
    ) -> Result<FocusLists, RecallError> {
        self.restricted_lists(filter, &dated.asked, read, |t| {
            t.turn
                .event_time
                .is_some_and(|when| dated.period.contains(when))
        })
    }

    /// Counting focus ([`crate::counting`]): for a question that counts or sums, the dense, BM25
    /// and window turn lists searched again for the question without its counting words,
    /// `candidates` deep (nothing is filtered out, so nothing deeper is needed).
    fn counting_focus(
        &self,
        filter: &ScopeFilter,
        query: &str,
        read: &mut TurnsById,
    ) -> Result<FocusLists, RecallError> {
        if self.config.w_counting <= 0.0 {
            return Ok(FocusLists::default());
        }
        match crate::counting::without_counting(query) {
            Some(asked) => self.focus_lists(filter, &asked, self.config.candidates, read, |_| true),
            None => Ok(FocusLists::default()),
        }
    }

    /// Age focus ([`crate::age`]): for a question about the asker's own age, the user's turns
    /// that state an age, found by the dense, BM25 and window turn lists for how people state
    /// their age (`focus_depth` times deeper), as one list: each at its best rank in any of them.
    /// Which search found a statement says nothing of it ("I'm 32, so I'm in my 30s" shares no
    /// word with the searched text, and only the dense list finds it), so every statement found
    /// gets the focus's whole vote.
    fn age_focus(
        &self,
        filter: &ScopeFilter,
        query: &str,
        read: &mut TurnsById,
    ) -> Result<Vec<Hit>, RecallError> {
        if self.config.w_age <= 0.0 || !crate::age::asks_own_age(query) {
            return Ok(Vec::new());
        }
        let found = self.restricted_lists(filter, crate::age::AGE_STATEMENT, read, |t| {
            t.turn.role == Role::User && crate::age::states_an_age(&t.turn.text)
        })?;
        Ok(crate::fusion::best_rank_union(
            &[&found.dense, &found.lexical, &found.windows],
            |h| h.unit.clone(),
        ))
    }

    /// The dense, BM25 and window turn lists for `asked`, searched `focus_depth` times deeper
    /// than `candidates`, each keeping the turns `keep` admits. The turns read go into `read`.
    fn restricted_lists(
        &self,
        filter: &ScopeFilter,
        asked: &str,
        read: &mut TurnsById,
        keep: impl Fn(&Turn) -> bool,
    ) -> Result<FocusLists, RecallError> {
        let depth = self.config.candidates * self.config.focus_depth.max(1);
        self.focus_lists(filter, asked, depth, read, keep)
    }

    /// The dense, BM25 and window turn lists for `asked`, `depth` deep, each keeping the turns
    /// `keep` admits. The turns read go into `read`.
    fn focus_lists(
        &self,
        filter: &ScopeFilter,
        asked: &str,
        depth: usize,
        read: &mut TurnsById,
        keep: impl Fn(&Turn) -> bool,
    ) -> Result<FocusLists, RecallError> {
        let wanted = Wanted {
            depth,
            segments: false,
            windows: true,
        };
        let ((_, dense), (lexical, _, windows)) =
            self.beside_lexical(filter, asked, wanted, || {
                self.dense_list(filter, asked, None, depth)
            })?;
        self.read_hit_turns(&[&dense, &lexical, &windows], read)?;
        Ok(FocusLists {
            dense: kept_hits(dense, read, &keep),
            lexical: kept_hits(lexical, read, &keep),
            windows: kept_hits(windows, read, &keep),
        })
    }

    /// The turns of `lists`' hits, read into `read` where it does not hold them yet.
    fn read_hit_turns(&self, lists: &[&[Hit]], read: &mut TurnsById) -> Result<(), RecallError> {
        let ids = lists
            .iter()
            .flat_map(|l| l.iter())
            .filter_map(|h| h.unit.turn().cloned());
        self.read_turns(ids, read)
    }

    /// Reads the turns `ids` names that `read` does not hold yet into it, in one store read.
    fn read_turns(
        &self,
        ids: impl IntoIterator<Item = TurnId>,
        read: &mut TurnsById,
    ) -> Result<(), RecallError> {
        let missing: Vec<TurnId> = ids
            .into_iter()
            .filter(|id| !read.contains_key(id))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        read.extend(
            self.store
                .turns(&missing)?
                .into_iter()
                .map(|t| (t.id.clone(), t)),
        );
        Ok(())
    }

    /// The `k` turns or segments nearest `qv` inside the filter.
    fn dense_hits(
        &self,
        filter: &ScopeFilter,
        qv: &[f32],
        k: usize,
        kind: UnitKind,
    ) -> Result<Vec<Hit>, RecallError> {
        Ok(self
            .search
            .dense(self.store, self.embedder.name(), filter, qv, k, kind)?)
    }

    /// The `k` units of `kind` BM25 ranks best for `query` inside the filter. Turns are those
    /// of the roles `recall.lexical_turn_roles` admits; windows and segments are every turn's.
    fn lexical_hits(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
        kind: UnitKind,
    ) -> Result<Vec<Hit>, RecallError> {
        let roles = match (kind, self.config.lexical_turn_roles) {
            (UnitKind::Turn, LexicalTurnRoles::DenseRoles) => Some(self.dense_roles),
            _ => None,
        };
        Ok(self.search.lexical(filter, query, k, kind, roles)?)
    }

    /// A segment ranking turned into a turn ranking: every member turn takes its segment's rank.
    fn member_turns(&self, hits: &[Hit]) -> Result<Vec<Ranked>, RecallError> {
        let ids: Vec<SegmentId> = hits
            .iter()
            .filter_map(|h| h.unit.segment().cloned())
            .collect();
        let segments = self.store.segments(&ids)?;
        let by_id: HashMap<&SegmentId, &aril_core::Segment> =
            segments.iter().map(|s| (&s.id, s)).collect();
        Ok(hits
            .iter()
            .zip(1..)
            .filter_map(|(h, rank)| {
                let segment = h.unit.segment().and_then(|id| by_id.get(id))?;
                Some((segment, rank))
            })
            .flat_map(|(s, rank)| s.turns.iter().map(move |t| (UnitId::Turn(t.clone()), rank)))
            .collect())
    }

    /// Reads the fused units' turns from the store; units the store no longer has are dropped, and
    /// so are the turns the answer leaves out ([`Hiding::hides`]: a newer version replaces them,
    /// their memory expired or was forgotten, they fail the condition). `read` holds turns this
    /// query has already read from the store.
    fn resolve(
        &self,
        fused: &[(UnitId, f32)],
        hiding: &Hiding,
        condition: Option<&Condition>,
        mut read: TurnsById,
    ) -> Result<Vec<Candidate>, RecallError> {
        let segment_ids: Vec<SegmentId> = fused
            .iter()
            .filter_map(|(unit, _)| unit.segment().cloned())
            .collect();
        let segments: HashMap<SegmentId, Vec<TurnId>> = self
            .store
            .segments(&segment_ids)?
            .into_iter()
            .map(|s| (s.id, s.turns))
            .collect();
        let turn_ids = fused
            .iter()
            .filter_map(|(unit, _)| unit.turn().cloned())
            .chain(segments.values().flatten().cloned());
        self.read_turns(turn_ids, &mut read)?;
        let turns: TurnsById = read
            .into_iter()
            .filter(|(_, t)| !hiding.hides(t, condition))
            .collect();
        let mut out = Vec::with_capacity(fused.len());
        for (unit, score) in fused {
            let members: Option<Vec<Turn>> = match unit {
                UnitId::Turn(id) => turns.get(id).map(|t| vec![t.clone()]),
                UnitId::Segment(id) => segments
                    .get(id)
                    .map(|ids| ids.iter().filter_map(|t| turns.get(t).cloned()).collect()),
                // Cards are recalled by the planned path (`ask`), not here.
                UnitId::Card(_) => None,
            };
            if let Some(members) = members.filter(|m| !m.is_empty()) {
                out.push(Candidate {
                    unit: unit.clone(),
                    score: *score,
                    turns: members,
                });
            }
        }
        Ok(out)
    }
}

/// The candidates with a turn whose best chunk's cosine to the question (`similarity`, by
/// store order) is at least `threshold`.
fn near_enough(
    mut candidates: Vec<Candidate>,
    similarity: &HashMap<i64, f32>,
    threshold: f32,
) -> Vec<Candidate> {
    candidates.retain(|c| {
        c.turns
            .iter()
            .any(|t| similarity.get(&t.seq).is_some_and(|s| *s >= threshold))
    });
    candidates
}

/// What recall leaves out of one answer.
struct Hiding {
    /// The user's turns that newer versions of their memories replace.
    superseded: HashSet<TurnId>,
    /// When the search runs: memories expired by then are left out (the sweep deletes them).
    now: DateTime<Utc>,
    /// When the question is asked (else `now`): memories forgotten by then no longer hold.
    asked_at: DateTime<Utc>,
}

impl Hiding {
    /// Whether recall skips a turn: a newer version of its memory replaces it, its memory has
    /// expired, it no longer holds when the question is asked (a forgetting), or it does not
    /// meet the request's `condition`.
    fn hides(&self, turn: &Turn, condition: Option<&Condition>) -> bool {
        let life = &turn.turn.lifecycle;
        self.superseded.contains(&turn.id)
            || life.expired(self.now)
            || life.invalid_at(self.asked_at)
            || condition.is_some_and(|c| !c.admits(&subject(turn)))
    }
}

/// A turn as a filter sees it: its metadata, when it was said (else stored), when stored.
fn subject(turn: &Turn) -> Subject<'_> {
    Subject {
        metadata: turn.turn.metadata.as_ref(),
        created_at: turn.turn.event_time.unwrap_or(turn.ingest_time),
        updated_at: turn.ingest_time,
    }
}

/// What a scoped thread returned; its panic goes on in the caller.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The query, trimmed, and the `k` of a request, or an error saying what is wrong with them.
fn checked(request: &SearchRequest, default_k: usize) -> Result<(&str, usize), RecallError> {
    let query = request.query.trim();
    if query.is_empty() {
        return Err(aril_core::InvalidInput("the query is empty".into()).into());
    }
    let k = request.k.unwrap_or(default_k);
    if k == 0 {
        return Err(aril_core::InvalidInput("k must be at least 1".into()).into());
    }
    if let Some(t) = request.threshold.filter(|t| !(0.0..=1.0).contains(t)) {
        return Err(aril_core::InvalidInput(format!(
            "threshold must be between 0 and 1 (a cosine similarity), got {t}"
        ))
        .into());
    }
    Ok((query, k))
}

/// A session of a scope: its conversation and session name (none: the whole conversation).
type SessionKey = (String, Option<String>);

fn session_key(turn: &Turn) -> SessionKey {
    (turn.turn.conversation.clone(), turn.turn.session.clone())
}

/// The candidates less each single turn that repeats a better one word for word (the same
/// speaker saying the same text again, in any conversation of the scope): the repeat adds
/// nothing to a context, so its place and its tokens go to the next candidate. The store keeps
/// every repeat; only this answer leaves it out.
fn without_repeats(candidates: Vec<Candidate>) -> Vec<Candidate> {
    let mut said = HashSet::new();
    candidates
        .into_iter()
        .filter(|c| match c.turns.as_slice() {
            [turn] => said.insert(turn.rendered()),
            _ => true,
        })
        .collect()
}

/// The candidates packed into `k` units and the token `budget`, as a response to `query`.
fn respond(
    query: &str,
    candidates: &[Candidate],
    k: usize,
    budget: Option<usize>,
) -> SearchResponse {
    let by_id: HashMap<&TurnId, &Turn> = candidates
        .iter()
        .flat_map(|c| &c.turns)
        .map(|t| (&t.id, t))
        .collect();
    let units: Vec<Vec<TurnId>> = candidates
        .iter()
        .map(|c| c.turns.iter().map(|t| t.id.clone()).collect())
        .collect();
    // Each turn costs its rendered tokens plus the newline that joins it to the next.
    let packed = pack(
        &units,
        |id| {
            by_id
                .get(id)
                .map_or(0, |t| tokens::count(&t.rendered()) + 1)
        },
        k,
        budget,
    );
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
                kind: c.unit.kind(),
                id: c.unit.as_str().to_string(),
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
                tokens: shown.iter().map(|t| packed.costs[t]).sum(),
                metadata: Metadata::merged(turns.iter().filter_map(|t| t.turn.metadata.as_ref())),
            }
        })
        .collect();
    SearchResponse {
        query: query.to_string(),
        results,
        context_tokens: packed.tokens,
    }
}

/// The hits whose turn `read` holds and `keep` admits, in their order.
fn kept_hits(hits: Vec<Hit>, read: &TurnsById, keep: impl Fn(&Turn) -> bool) -> Vec<Hit> {
    hits.into_iter()
        .filter(|h| h.unit.turn().and_then(|id| read.get(id)).is_some_and(&keep))
        .collect()
}
