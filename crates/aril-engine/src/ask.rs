//! The planned read path (seed 000, BRIEF §1.4): one planner call splits the question into paths,
//! and the question as asked is always one of them ([`Plan::with_question`]: a plan adds what
//! the question alone would miss, it cannot lose what the question finds); each path ranks cards
//! (dense and BM25 over the user's current cards, the entity / topic / entity+topic indexes, the
//! date index for its time window) and verbatim turns (the LLM-free hybrid recall, with turns
//! inside the window credited twice), fused with RRF inside the path.
//! Paths are fused with RRF, a diversity-preserving selection keeps every path a share and drops
//! near-duplicate cards, and the chosen units are packed into the token budget: cards with their
//! dates and source-turn snippets. The context is shown newest first, and the answer prompt tells
//! the model to prefer the most recent information.
//!
//! A cross-encoder, when one is configured ([`Engine::set_reranker`], an endpoint of the user's:
//! no registry package carries weights), reorders the head of each path's list before the paths
//! are fused; the output names it, or says why none ran ([`Recalled::reranker`]), and keeps what
//! it moved ([`Recalled::reranked`]). Without a planner the question itself is the one path, and
//! the output says that too ([`Recalled::plan_note`]).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use aril_core::UnitKind;
use aril_core::{Card, CardId, CardKind, Role, ScopeFilter, Turn, TurnId, tokens};
use aril_llm::{ChatModel, ChatRequest, LlmError, Message, Purpose, Reranker, ResponseFormat};
use aril_plan::{Plan, PlanConfig, PlanPath, TimeWindow, Want, plan_question};
use aril_recall::{rrf, rrf_ranked, select_diverse};
use aril_store::CardLookup;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::metered::{CallCost, Metered};
use crate::shared::Alone;
use crate::{Engine, EngineError, SharedEngine};

/// Units fused and chosen by default.
const DEFAULT_K: usize = 12;
/// o200k tokens of context by default.
pub const DEFAULT_BUDGET: usize = 2000;
/// Candidates each list of a path contributes at least (twice `k` when that is more).
const PER_LIST: usize = 30;
/// Cards this similar (best chunk cosine) are near-duplicates; the better-ranked one stays.
const NEAR_DUPLICATE: f32 = 0.95;
/// Source-turn snippets shown under a card, and their length in characters.
const SNIPPETS: usize = 2;
const SNIPPET_CHARS: usize = 240;

const NO_RERANKER: &str = "none: no cross-encoder endpoint is configured (offline, no registry \
package carries cross-encoder weights); each path is ranked by RRF of its lists";

/// What recall chose, before packing.
struct Chosen {
    plan: Plan,
    plan_note: Option<String>,
    cost: CallCost,
    /// Units in the order they are offered to the context.
    chosen: Vec<Unit>,
    /// Each path's list, to say which paths found a unit.
    path_lists: Vec<Vec<Unit>>,
    scores: HashMap<Unit, f32>,
    /// What reranked the paths (or why nothing did).
    reranker: String,
    /// What the reranker did to each path it reordered.
    reranked: Vec<PathRerank>,
}

/// A question to recall (and answer) for.
#[derive(Debug, Clone)]
pub struct AskRequest {
    pub filter: ScopeFilter,
    pub question: String,
    /// When the question is asked: relative dates in it resolve against this (default: now).
    pub asked_at: Option<DateTime<Utc>>,
    /// Units to choose at most (default 12).
    pub k: Option<usize>,
    /// o200k tokens the context may take (default 2000).
    pub budget: Option<usize>,
    /// Ablation (the paper's "no fusion, rerank or diversity"): the first path's dense card list
    /// alone, in its own order. For measuring what fusion buys, not for use.
    pub single_list: bool,
    /// Texts the caller's prompt holds already (the messages of a chat): a turn saying exactly
    /// one of them is not recalled again, and its place goes to the next unit.
    pub known_texts: Vec<String>,
}

/// One unit of the recalled context.
#[derive(Debug, Clone, Serialize)]
pub struct ContextItem {
    pub rank: usize,
    /// `card` or `turn`.
    pub kind: UnitKind,
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card_kind: Option<CardKind>,
    /// The block shown in the context (a card with its date and source-turn snippets, or a turn).
    pub text: String,
    /// When it holds or was said.
    pub time: Option<DateTime<Utc>>,
    /// The turns it is, or cites (aril ids).
    pub turns: Vec<TurnId>,
    /// The same turns in the source's own ids (LoCoMo `D1:3`) where it had them.
    pub source_turns: Vec<String>,
    /// The session of its (first) turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The plan paths (from 1) that found it.
    pub paths: Vec<usize>,
    pub score: f32,
    pub tokens: usize,
}

/// What the planned recall found.
#[derive(Debug, Clone, Serialize)]
pub struct Recalled {
    pub plan: Plan,
    /// Set when the plan is the question itself: no planner configured, or its reply unusable.
    pub plan_note: Option<String>,
    /// Which cross-encoder reranked the paths, or why none did.
    pub reranker: String,
    /// What the cross-encoder did to each path's head (empty when none ran).
    pub reranked: Vec<PathRerank>,
    /// The chosen units, best first.
    pub items: Vec<ContextItem>,
    /// The context as the answerer sees it: the items newest first.
    pub context: String,
    pub context_tokens: usize,
    /// The planner's calls.
    pub cost: CallCost,
}

/// What a cross-encoder did to the head of one plan path's list: each unit with its rank before
/// (by RRF of the path's lists) and after, and its score, in the new order.
#[derive(Debug, Clone, Serialize)]
pub struct PathRerank {
    /// The plan path (from 1).
    pub path: usize,
    pub units: Vec<RerankedUnit>,
}

/// One unit of a reranked head.
#[derive(Debug, Clone, Serialize)]
pub struct RerankedUnit {
    /// `card` or `turn`.
    pub kind: UnitKind,
    pub id: String,
    /// Ranks from 1.
    pub before: usize,
    pub after: usize,
    pub score: f32,
}

/// An answer with the context it was given and what it cost.
#[derive(Debug, Clone, Serialize)]
pub struct AskResponse {
    pub question: String,
    pub answer: String,
    pub recalled: Recalled,
    /// Planner and answerer calls together.
    pub cost: CallCost,
}

/// A unit a path can rank.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Unit {
    Card(CardId),
    Turn(TurnId),
}

/// One list of a path: units with their rank (from 1; members of one segment share a rank).
type RankedList = Vec<(Unit, usize)>;

const ANSWER_INSTRUCTIONS: &str = "You answer questions from a long-term memory of past \
conversations. Use only the memory below. Entries are dated and listed newest first; where they \
conflict, prefer the most recent information. Resolve relative dates against each entry's date. \
If the memory does not contain the answer, say that you do not know. Answer in one or two short \
sentences.";

/// What aril knows of a user for "what do I prefer" questions: see [`Engine::profile`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct Profile {
    pub preferences: Vec<Card>,
    /// Facts the user stated about themselves or their world.
    pub traits: Vec<Card>,
}

/// Sorts cards newest first by their time (cards without one last), then by id.
fn newest_first(cards: &mut [Card]) {
    cards.sort_by(|a, b| {
        let when = |c: &Card| c.time.as_ref().and_then(|t| t.start);
        when(b).cmp(&when(a)).then_with(|| a.id.0.cmp(&b.id.0))
    });
}

/// Units of a path the cross-encoder reorders (the rest keep their RRF order after them).
const RERANK_TOP: usize = 30;

impl Engine {
    /// Sets the cross-encoder that planned recall reranks each path with (`None`: RRF order).
    pub fn set_reranker(&mut self, reranker: Option<Arc<dyn Reranker>>) {
        self.reranker = reranker;
    }

    /// The user profile of a scope, derived from its current cards (superseded ones left out), so
    /// it is refreshed whenever cards arrive: the preference cards, and the stable traits — fact
    /// cards drawn from something a user said (not an assistant or a tool). Each list newest first.
    pub fn profile(&self, filter: &ScopeFilter) -> Result<Profile, EngineError> {
        let index = self.card_index(&filter.user_id)?;
        let mut preferences = Vec::new();
        let mut facts = Vec::new();
        for card in index.cards().values().filter(|c| filter.admits(&c.scope)) {
            match card.kind {
                CardKind::Preference => preferences.push(card.clone()),
                CardKind::Fact => facts.push(card.clone()),
                _ => {}
            }
        }
        let cited: Vec<TurnId> = facts
            .iter()
            .flat_map(|c| c.source_turns.iter().cloned())
            .collect();
        let said_by_user: HashSet<TurnId> = self
            .store
            .turns(&cited)?
            .into_iter()
            .filter(|t| t.turn.role == Role::User)
            .map(|t| t.id)
            .collect();
        let mut traits: Vec<Card> = facts
            .into_iter()
            .filter(|c| c.source_turns.iter().any(|t| said_by_user.contains(t)))
            .collect();
        newest_first(&mut preferences);
        newest_first(&mut traits);
        Ok(Profile {
            preferences,
            traits,
        })
    }

    /// The configured cross-encoder's model, or why there is none.
    pub fn reranker_name(&self) -> String {
        match &self.reranker {
            Some(r) => r.model().to_string(),
            None => NO_RERANKER.to_string(),
        }
    }

    /// Reorders the head of a path's list by the cross-encoder's scores for the path's query,
    /// and says how (`None` when no cross-encoder is configured).
    fn rerank_path(
        &self,
        filter: &ScopeFilter,
        query: &str,
        list: &mut [Unit],
    ) -> Result<Option<Vec<RerankedUnit>>, EngineError> {
        let Some(reranker) = self.reranker.clone() else {
            return Ok(None);
        };
        let head = list.len().min(RERANK_TOP);
        let turn_ids: Vec<TurnId> = list[..head]
            .iter()
            .filter_map(|u| match u {
                Unit::Turn(t) => Some(t.clone()),
                Unit::Card(_) => None,
            })
            .collect();
        let turns = self.turns_by_id(&turn_ids)?;
        let index = self.card_index(&filter.user_id)?;
        let texts: Vec<String> = list[..head]
            .iter()
            .map(|u| match u {
                Unit::Card(id) => index.cards().get(id).map(|c| c.text.clone()),
                Unit::Turn(id) => turns.get(id).map(|t| t.rendered()),
            })
            .map(Option::unwrap_or_default)
            .collect();
        let scores = reranker.rerank(query, &texts)?;
        let mut scored: Vec<(usize, Unit, f32)> = list[..head]
            .iter()
            .cloned()
            .zip(scores)
            .enumerate()
            .map(|(before, (u, score))| (before, u, score))
            .collect();
        scored.sort_by(|a, b| b.2.total_cmp(&a.2));
        let mut moved = Vec::with_capacity(scored.len());
        for (after, (slot, (before, u, score))) in list[..head].iter_mut().zip(scored).enumerate() {
            let (kind, id) = match &u {
                Unit::Card(c) => (UnitKind::Card, c.0.clone()),
                Unit::Turn(t) => (UnitKind::Turn, t.0.clone()),
            };
            moved.push(RerankedUnit {
                kind,
                id,
                before: before + 1,
                after: after + 1,
                score,
            });
            *slot = u;
        }
        Ok(Some(moved))
    }

    /// Plans the question (one call with `planner`, else the question itself is the one path),
    /// ranks cards and turns per path, fuses, selects with diversity and packs the context.
    /// Mutable only to store the planner's call records: [`recall_planned_shared`] is the same
    /// on an engine others share, [`Engine::recall_unplanned`] the same without a planner.
    pub fn recall_planned(
        &mut self,
        request: &AskRequest,
        planner: Option<&dyn ChatModel>,
    ) -> Result<Recalled, EngineError> {
        recall_planned_shared(&Alone(RefCell::new(self)), request, planner)
    }

    /// [`Engine::recall_planned`] without a planner: the question as asked is the one path.
    pub fn recall_unplanned(&self, request: &AskRequest) -> Result<Recalled, EngineError> {
        let question = checked_question(request)?;
        self.recall_plan(
            request,
            Plan::single(question),
            Some("no planner model is configured: the question was searched as asked".into()),
            CallCost::default(),
        )
    }

    /// Ranks cards and turns per path of `plan`, fuses, selects with diversity and packs.
    fn recall_plan(
        &self,
        request: &AskRequest,
        plan: Plan,
        plan_note: Option<String>,
        cost: CallCost,
    ) -> Result<Recalled, EngineError> {
        let k = request.k.unwrap_or(DEFAULT_K);
        let budget = request.budget.unwrap_or(DEFAULT_BUDGET);
        let asked_at = request.asked_at.unwrap_or_else(Utc::now);
        if request.single_list {
            return self.recall_single_list(request, plan, plan_note, cost, k, budget);
        }
        let filter = &request.filter;
        let mut path_lists: Vec<Vec<Unit>> = Vec::with_capacity(plan.paths.len());
        let per_list = PER_LIST.max(2 * k);
        let mut rerank_failure: Option<String> = None;
        let mut reranked: Vec<PathRerank> = Vec::new();
        for (n, path) in plan.paths.iter().enumerate() {
            let lists = self.path_lists(filter, path, per_list, asked_at)?;
            let views: Vec<(&[(Unit, usize)], f32)> =
                lists.iter().map(|l| (l.as_slice(), 1.0)).collect();
            let fused = rrf_ranked(&views, self.config.recall.rrf_k);
            let mut list: Vec<Unit> = fused.into_iter().map(|(u, _)| u).collect();
            match self.rerank_path(filter, &path.query, &mut list) {
                Ok(Some(units)) => reranked.push(PathRerank { path: n + 1, units }),
                Ok(None) => {}
                Err(e) => {
                    rerank_failure.get_or_insert_with(|| e.to_string());
                }
            }
            path_lists.push(list);
        }
        let reranker = match (&self.reranker, rerank_failure) {
            (None, _) => NO_RERANKER.to_string(),
            (Some(r), None) => format!(
                "{}: the top {RERANK_TOP} of each path reordered by the cross-encoder",
                r.model()
            ),
            (Some(r), Some(e)) => format!(
                "{} failed ({e}): paths ranked by RRF of their lists",
                r.model()
            ),
        };
        let views: Vec<(&[Unit], f32)> = path_lists.iter().map(|l| (l.as_slice(), 1.0)).collect();
        let fused = rrf(&views, self.config.recall.rrf_k);
        let scores: HashMap<Unit, f32> = fused.iter().cloned().collect();
        let order: Vec<Unit> = fused.into_iter().map(|(u, _)| u).collect();
        let share = (k / (2 * path_lists.len().max(1))).max(1);
        let index = self.card_index(&filter.user_id)?;
        let near = |a: &Unit, b: &Unit| match (a, b) {
            (Unit::Card(x), Unit::Card(y)) => {
                let same_text = match (index.cards().get(x), index.cards().get(y)) {
                    (Some(p), Some(q)) => p.text.trim().eq_ignore_ascii_case(q.text.trim()),
                    _ => false,
                };
                same_text || index.similarity(x, y) >= NEAR_DUPLICATE
            }
            _ => false,
        };
        // Choose more than k so that turns a chosen card already shows can give way.
        let chosen = select_diverse(&order, &path_lists, k * 2, share, near);
        self.pack(
            request,
            Chosen {
                plan,
                plan_note,
                cost,
                chosen,
                path_lists,
                scores,
                reranker,
                reranked,
            },
            k,
            budget,
        )
    }

    /// The ablation without fusion: the first path's dense card list alone.
    fn recall_single_list(
        &self,
        request: &AskRequest,
        plan: Plan,
        plan_note: Option<String>,
        cost: CallCost,
        k: usize,
        budget: usize,
    ) -> Result<Recalled, EngineError> {
        let query = plan
            .paths
            .first()
            .map(|p| p.query.clone())
            .unwrap_or_else(|| request.question.trim().to_string());
        let qv = self.recall()?.embed_query(&query)?;
        let index = self.card_index(&request.filter.user_id)?;
        let chosen: Vec<Unit> = index
            .dense(&request.filter, &qv, k * 2)?
            .into_iter()
            .filter_map(|h| h.unit.card().cloned().map(Unit::Card))
            .collect();
        let scores = chosen
            .iter()
            .enumerate()
            .map(|(i, u)| (u.clone(), 1.0 / (i + 1) as f32))
            .collect();
        self.pack(
            request,
            Chosen {
                plan,
                plan_note,
                cost,
                path_lists: vec![chosen.clone()],
                chosen,
                scores,
                reranker: "none: the single-list ablation reranks nothing".into(),
                reranked: Vec::new(),
            },
            k,
            budget,
        )
    }

    /// Packs the chosen units into at most `k` items within `budget` tokens and renders them.
    fn pack(
        &self,
        request: &AskRequest,
        c: Chosen,
        k: usize,
        budget: usize,
    ) -> Result<Recalled, EngineError> {
        let filter = &request.filter;
        let known: HashSet<&str> = request.known_texts.iter().map(|t| t.trim()).collect();
        let index = self.card_index(&filter.user_id)?;
        let cards: HashMap<CardId, Card> = c
            .chosen
            .iter()
            .filter_map(|u| match u {
                Unit::Card(id) => index.cards().get(id).map(|c| (id.clone(), c.clone())),
                Unit::Turn(_) => None,
            })
            .collect();
        let found_by = |u: &Unit| -> Vec<usize> {
            c.path_lists
                .iter()
                .enumerate()
                .filter(|(_, l)| l.contains(u))
                .map(|(i, _)| i + 1)
                .collect()
        };
        let mut turn_ids: Vec<TurnId> = Vec::new();
        for u in &c.chosen {
            match u {
                Unit::Turn(t) => turn_ids.push(t.clone()),
                Unit::Card(c) => {
                    if let Some(card) = cards.get(c) {
                        turn_ids.extend(card.source_turns.iter().cloned());
                    }
                }
            }
        }
        let turns = self.turns_by_id(&turn_ids)?;
        let mut items: Vec<ContextItem> = Vec::new();
        let mut shown: HashSet<TurnId> = HashSet::new();
        let mut used = 0usize;
        for unit in &c.chosen {
            if items.len() >= k {
                break;
            }
            let item = match unit {
                Unit::Card(id) => cards.get(id).map(|c| card_item(c, &turns)),
                Unit::Turn(id) => {
                    if shown.contains(id) {
                        continue; // a c.chosen card already shows it
                    }
                    match turns.get(id) {
                        // The caller's prompt holds it already.
                        Some(t) if known.contains(t.turn.text.trim()) => continue,
                        t => t.map(turn_item),
                    }
                }
            };
            let Some(mut item) = item else { continue };
            item.tokens = tokens::count(&item.text) + 1;
            if used + item.tokens > budget {
                continue;
            }
            used += item.tokens;
            shown.extend(item.turns.iter().cloned());
            item.rank = items.len() + 1;
            item.paths = found_by(unit);
            item.score = c.scores.get(unit).copied().unwrap_or(0.0);
            items.push(item);
        }
        let context = render_context(&items);
        Ok(Recalled {
            plan: c.plan,
            plan_note: c.plan_note,
            reranker: c.reranker,
            reranked: c.reranked,
            items,
            context_tokens: tokens::count(&context),
            context,
            cost: c.cost,
        })
    }

    /// Recalls with [`Engine::recall_planned`] and answers from the context with one call
    /// ([`ask_shared`] on an engine nobody else holds).
    pub fn ask(
        &mut self,
        request: &AskRequest,
        planner: Option<&dyn ChatModel>,
        answerer: &dyn ChatModel,
    ) -> Result<AskResponse, EngineError> {
        ask_shared(&Alone(RefCell::new(self)), request, planner, answerer)
    }

    /// The ranked lists of one path.
    fn path_lists(
        &self,
        filter: &ScopeFilter,
        path: &PlanPath,
        per_list: usize,
        asked_at: DateTime<Utc>,
    ) -> Result<Vec<RankedList>, EngineError> {
        let mut lists: Vec<RankedList> = Vec::new();
        let recall = self.recall()?;
        let qv = recall.embed_query(&path.query)?;
        if path.wants.contains(&Want::Turns) {
            let candidates = recall.hybrid_candidates(filter, &path.query, &qv, Some(asked_at))?;
            let mut turns: RankedList = Vec::new();
            for (rank, c) in candidates.iter().take(per_list).enumerate() {
                for t in &c.turns {
                    turns.push((Unit::Turn(t.id.clone()), rank + 1));
                }
            }
            if let Some(w) = path.window {
                let times: HashMap<&TurnId, Option<DateTime<Utc>>> = candidates
                    .iter()
                    .flat_map(|c| &c.turns)
                    .map(|t| (&t.id, t.turn.event_time))
                    .collect();
                let inside: RankedList = turns
                    .iter()
                    .filter(|(u, _)| match u {
                        Unit::Turn(id) => times
                            .get(id)
                            .copied()
                            .flatten()
                            .is_some_and(|t| within(&w, t)),
                        Unit::Card(_) => false,
                    })
                    .cloned()
                    .collect();
                lists.push(renumbered(inside));
            }
            lists.push(turns);
        }
        if path.wants.contains(&Want::Cards) {
            let structured = self.structured_lookups(filter, path)?;
            let during = match path.window {
                Some(w) => self.store.lookup_cards(
                    filter,
                    &CardLookup::During(
                        w.from.unwrap_or(DateTime::<Utc>::MIN_UTC),
                        w.to.unwrap_or(DateTime::<Utc>::MAX_UTC),
                    ),
                )?,
                None => Vec::new(),
            };
            let mut lexical_query = path.query.clone();
            for extra in path.entities.iter().chain(&path.topics) {
                lexical_query.push(' ');
                lexical_query.push_str(extra);
            }
            let index = self.card_index(&filter.user_id)?;
            let current = |id: &CardId| index.cards().contains_key(id);
            let as_list = |ids: Vec<CardId>| -> RankedList {
                ids.into_iter()
                    .filter(|id| current(id))
                    .take(per_list)
                    .zip(1..)
                    .map(|(id, r)| (Unit::Card(id), r))
                    .collect()
            };
            let hits = |hits: Vec<aril_index::Hit>| -> Vec<CardId> {
                hits.iter().filter_map(|h| h.unit.card().cloned()).collect()
            };
            let dense = hits(index.dense(filter, &qv, per_list)?);
            // The user profile: the preference cards among the dense hits get a list of their
            // own, a second vote for "what do I like" questions (the paper's named weakness).
            let profile: Vec<CardId> = dense
                .iter()
                .filter(|id| {
                    index
                        .cards()
                        .get(*id)
                        .is_some_and(|c| c.kind == CardKind::Preference)
                })
                .cloned()
                .collect();
            lists.push(as_list(dense));
            lists.push(as_list(profile));
            lists.push(as_list(hits(index.lexical(
                filter,
                &lexical_query,
                per_list,
            )?)));
            lists.push(as_list(structured));
            // Newest first: the store lists in store order.
            lists.push(as_list(during.into_iter().rev().collect()));
        }
        lists.retain(|l| !l.is_empty());
        Ok(lists)
    }

    /// Cards the entity, topic and entity+topic indexes find for a path, the ones more lookups
    /// agree on first, then the newest.
    fn structured_lookups(
        &self,
        filter: &ScopeFilter,
        path: &PlanPath,
    ) -> Result<Vec<CardId>, EngineError> {
        let mut lookups: Vec<CardLookup> = Vec::new();
        lookups.extend(path.entities.iter().map(|e| CardLookup::Entity(e.clone())));
        lookups.extend(path.topics.iter().map(|t| CardLookup::Topic(t.clone())));
        for e in &path.entities {
            for t in &path.topics {
                lookups.push(CardLookup::EntityTopic(e.clone(), t.clone()));
            }
        }
        // (hits, newest position) per card.
        let mut found: HashMap<CardId, (usize, usize)> = HashMap::new();
        for lookup in &lookups {
            for (pos, id) in self
                .store
                .lookup_cards(filter, lookup)?
                .into_iter()
                .enumerate()
            {
                let e = found.entry(id).or_insert((0, 0));
                e.0 += 1;
                e.1 = e.1.max(pos);
            }
        }
        let mut ranked: Vec<(CardId, (usize, usize))> = found.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(ranked.into_iter().map(|(id, _)| id).collect())
    }
}

fn within(w: &TimeWindow, t: DateTime<Utc>) -> bool {
    w.from.is_none_or(|f| t >= f) && w.to.is_none_or(|e| t < e)
}

/// Ranks from 1 again, keeping shared ranks shared.
fn renumbered(list: RankedList) -> RankedList {
    let mut out = Vec::with_capacity(list.len());
    let (mut last, mut rank) = (0usize, 0usize);
    for (u, r) in list {
        if r != last {
            rank += 1;
            last = r;
        }
        out.push((u, rank));
    }
    out
}

fn day(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d").to_string()
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

fn source_ids(turns: &[&Turn]) -> Vec<String> {
    turns
        .iter()
        .map(|t| t.turn.source_id.clone().unwrap_or_else(|| t.id.0.clone()))
        .collect()
}

fn card_item(card: &Card, turns: &HashMap<TurnId, Turn>) -> ContextItem {
    let sources: Vec<&Turn> = card
        .source_turns
        .iter()
        .filter_map(|t| turns.get(t))
        .collect();
    let said = sources.iter().filter_map(|t| t.turn.event_time).min();
    let time = card.time.as_ref().and_then(|t| t.start).or(said);
    let mut text = match time {
        Some(t) => format!("[{}] {}", day(t), card.text),
        None => card.text.clone(),
    };
    for t in sources.iter().take(SNIPPETS) {
        let when = t
            .turn
            .event_time
            .map(|at| format!(" ({})", day(at)))
            .unwrap_or_default();
        text.push_str(&format!(
            "\n  said{when}: {}",
            cut(&t.rendered(), SNIPPET_CHARS)
        ));
    }
    ContextItem {
        rank: 0,
        kind: UnitKind::Card,
        id: card.id.0.clone(),
        card_kind: Some(card.kind),
        text,
        time,
        turns: card.source_turns.clone(),
        source_turns: source_ids(&sources),
        session: sources.first().and_then(|t| t.turn.session.clone()),
        paths: Vec::new(),
        score: 0.0,
        tokens: 0,
    }
}

fn turn_item(turn: &Turn) -> ContextItem {
    let text = match turn.turn.event_time {
        Some(t) => format!("[{}] {}", day(t), turn.rendered()),
        None => turn.rendered(),
    };
    ContextItem {
        rank: 0,
        kind: UnitKind::Turn,
        id: turn.id.0.clone(),
        card_kind: None,
        text,
        time: turn.turn.event_time,
        turns: vec![turn.id.clone()],
        source_turns: source_ids(&[turn]),
        session: turn.turn.session.clone(),
        paths: Vec::new(),
        score: 0.0,
        tokens: 0,
    }
}

/// [`Engine::recall_planned`] on a shared engine: the planner called holding nothing, its calls
/// stored alone, the recall beside other readers.
pub fn recall_planned_shared(
    shared: &impl SharedEngine,
    request: &AskRequest,
    planner: Option<&dyn ChatModel>,
) -> Result<Recalled, EngineError> {
    let Some(planner) = planner else {
        return shared.read(|e| e.recall_unplanned(request));
    };
    let question = checked_question(request)?;
    let asked_at = request.asked_at.unwrap_or_else(Utc::now);
    let metered = Metered::new(planner);
    let planned = plan_question(&metered, question, asked_at, &PlanConfig::default());
    let cost = shared.write(|e| e.store_calls(&metered))?;
    let (plan, plan_note) = match planned {
        Ok(p) => (p.plan.with_question(question), None),
        Err(LlmError::InvalidReply { reason }) => {
            tracing::warn!(%reason, "the planner's reply is unusable; searching the question as asked");
            (
                Plan::single(question),
                Some(format!(
                    "the planner's reply was unusable ({reason}): the question was searched as \
                     asked"
                )),
            )
        }
        Err(e) => return Err(e.into()),
    };
    shared.read(|e| e.recall_plan(request, plan, plan_note, cost))
}

/// [`Engine::ask`] on a shared engine: recalled as [`recall_planned_shared`] does, answered with
/// one call holding nothing, the answerer's call stored alone.
pub fn ask_shared(
    shared: &impl SharedEngine,
    request: &AskRequest,
    planner: Option<&dyn ChatModel>,
    answerer: &dyn ChatModel,
) -> Result<AskResponse, EngineError> {
    let recalled = recall_planned_shared(shared, request, planner)?;
    let asked_at = request.asked_at.unwrap_or_else(Utc::now);
    let answerer = Metered::new(answerer);
    let reply = answerer.chat(
        Purpose::Answer,
        &ChatRequest {
            messages: vec![
                Message::system(ANSWER_INSTRUCTIONS),
                Message::user(format!(
                    "Today is {}.\n\nMemory:\n{}\n\nQuestion: {}",
                    asked_at.format("%Y-%m-%d"),
                    if recalled.context.is_empty() {
                        "(nothing found)"
                    } else {
                        &recalled.context
                    },
                    request.question.trim()
                )),
            ],
            max_tokens: 256,
            temperature: 0.0,
            format: ResponseFormat::Text,
        },
    );
    let mut cost = recalled.cost;
    cost.add(shared.write(|e| e.store_calls(&answerer))?);
    let answer = reply?.content.trim().to_string();
    if answer.is_empty() {
        return Err(LlmError::InvalidReply {
            reason: "the answer was empty".into(),
        }
        .into());
    }
    Ok(AskResponse {
        question: request.question.trim().to_string(),
        answer,
        recalled,
        cost,
    })
}

/// The request's question, trimmed; an empty question, or a `k` or budget of 0, is refused.
fn checked_question(request: &AskRequest) -> Result<&str, EngineError> {
    let question = request.question.trim();
    if question.is_empty() {
        return Err(aril_core::InvalidInput("the question is empty".into()).into());
    }
    if request.k == Some(0) || request.budget == Some(0) {
        return Err(aril_core::InvalidInput("k and budget must be at least 1".into()).into());
    }
    Ok(question)
}

/// The items newest first (undated ones last, in rank order), one block each.
fn render_context(items: &[ContextItem]) -> String {
    let mut ordered: Vec<&ContextItem> = items.iter().collect();
    ordered.sort_by(|a, b| match (a.time, b.time) {
        (Some(x), Some(y)) => y.cmp(&x).then(a.rank.cmp(&b.rank)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.rank.cmp(&b.rank),
    });
    ordered
        .iter()
        .map(|i| i.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renumbering_keeps_shared_ranks_and_closes_gaps() {
        let t = |s: &str| Unit::Turn(TurnId(s.into()));
        let list = vec![(t("a"), 2), (t("b"), 2), (t("c"), 5), (t("d"), 9)];
        let ranks: Vec<usize> = renumbered(list).into_iter().map(|(_, r)| r).collect();
        assert_eq!(ranks, vec![1, 1, 2, 3]);
    }

    #[test]
    fn a_window_includes_its_start_and_excludes_its_end() {
        let at = |d| chrono::TimeZone::with_ymd_and_hms(&Utc, 2023, 5, d, 0, 0, 0).unwrap();
        let w = TimeWindow {
            from: Some(at(8)),
            to: Some(at(15)),
        };
        assert!(within(&w, at(8)) && within(&w, at(14)));
        assert!(!within(&w, at(15)) && !within(&w, at(7)));
        let open = TimeWindow {
            from: None,
            to: Some(at(15)),
        };
        assert!(within(&open, at(1)));
    }

    #[test]
    fn cut_marks_what_it_cuts() {
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
