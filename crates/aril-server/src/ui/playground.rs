//! The recall playground: a question (and when it is asked) against one user's memory, showing
//! each retrieval path's ranked list with its own scores, the fused list, what the search
//! returns (as `/v1/search` and Mem0's search do), and the context exactly as `aril ask` and the
//! proxy hand it to a model, with its o200k token count against the budget; with a planner
//! configured, the plan; with a cross-encoder configured, what it did to each path's head.

use std::collections::HashMap;

use aril_core::{CardId, Segment, SegmentId, Turn, TurnId, UnitId, UnitKind};
use aril_engine::{
    AskRequest, Explanation, Recalled, RerankedUnit, SearchRequest, recall_planned_shared,
};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use super::page::{link, page, when};
use super::timeline::{short, speaker};
use super::{UiError, Viewer};
use crate::{ApiError, AppState};

/// Units shown of each path's list, and of the fused list.
const SHOWN: usize = 10;
const FUSED_SHOWN: usize = 20;

#[derive(Deserialize)]
pub(crate) struct RecallQuery {
    u: Option<String>,
    #[serde(default)]
    q: String,
    /// When the question is asked: a day (`YYYY-MM-DD`, its end) or RFC 3339; default now.
    #[serde(default)]
    asked_at: String,
    k: Option<String>,
    budget: Option<String>,
}

/// What the page shows of a recall.
struct Shown {
    explained: Explanation,
    recalled: Recalled,
    turns: HashMap<TurnId, Turn>,
    segments: HashMap<SegmentId, Segment>,
}

/// A number field of the form: empty is the default, anything else must be a positive integer.
fn number(field: Option<&str>, what: &str, default: usize) -> Result<usize, UiError> {
    match field.map(str::trim) {
        None | Some("") => Ok(default),
        Some(s) => s.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| {
            UiError(ApiError::bad_request(format!(
                "{what} must be a whole number of at least 1, got {s:?}"
            )))
        }),
    }
}

/// `YYYY-MM-DD` (the end of that day, UTC) or an RFC 3339 time, as `aril ask --at` reads it;
/// empty is now.
fn asked_at(s: &str) -> Result<DateTime<Utc>, UiError> {
    match s.trim() {
        "" => Ok(Utc::now()),
        s => Ok(aril_engine::parse_asked_at(s)?),
    }
}

pub(crate) async fn playground(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<RecallQuery>,
) -> Result<Response, UiError> {
    let filter = viewer.scope(q.u.clone())?;
    let user = filter.user_id.clone();
    let k = number(q.k.as_deref(), "k", 5)?;
    // The API's bounds on k.
    crate::native::check_k(Some(k))?;
    let budget = number(q.budget.as_deref(), "the budget", 2000)?;
    let question = q.q.trim().to_string();
    let shown = if question.is_empty() {
        None
    } else {
        let at = asked_at(&q.asked_at)?;
        let search = SearchRequest {
            filter: filter.clone(),
            query: question.clone(),
            k: Some(k),
            budget: Some(budget),
            asked_at: Some(at),
            condition: None,
            threshold: None,
        };
        let ask = AskRequest {
            filter,
            question,
            asked_at: Some(at),
            k: Some(k),
            budget: Some(budget),
            single_list: false,
            known_texts: Vec::new(),
        };
        // The planner's call (when one is configured) holds nothing; its record is stored
        // alone, the recall beside other readers: as `aril ask` plans.
        let planner = state.planner.clone();
        let shared = state.clone();
        let recalled = tokio::task::spawn_blocking(move || {
            recall_planned_shared(&shared, &ask, planner.as_deref())
        })
        .await
        .map_err(|e| ApiError::internal(format!("recall task failed: {e}")))?
        .map_err(ApiError::from)?;
        Some(
            state
                .read(move |engine| {
                    let explained = engine.explain(&search)?;
                    let units = explained
                        .trace
                        .lists
                        .iter()
                        .flat_map(|l| l.units.iter().take(SHOWN).map(|u| &u.unit))
                        .chain(
                            explained
                                .trace
                                .fused
                                .iter()
                                .take(FUSED_SHOWN)
                                .map(|f| &f.unit),
                        );
                    let reranked = recalled
                        .reranked
                        .iter()
                        .flat_map(|p| &p.units)
                        .map(rerank_unit);
                    let units: Vec<UnitId> = units.cloned().chain(reranked).collect();
                    let (mut turn_ids, mut segment_ids) = (Vec::new(), Vec::new());
                    for unit in &units {
                        match unit {
                            UnitId::Turn(id) => turn_ids.push(id.clone()),
                            UnitId::Segment(id) => segment_ids.push(id.clone()),
                            UnitId::Card(_) => {}
                        }
                    }
                    let segments: HashMap<SegmentId, Segment> = engine
                        .segments_by_id(&segment_ids)?
                        .into_iter()
                        .map(|s| (s.id.clone(), s))
                        .collect();
                    // A segment is shown by its first turn.
                    turn_ids.extend(segments.values().filter_map(|s| s.turns.first().cloned()));
                    let turns = engine.turns_by_id(&turn_ids)?;
                    Ok(Shown {
                        explained,
                        recalled,
                        turns,
                        segments,
                    })
                })
                .await?,
        )
    };
    let k_field = k.to_string();
    let budget_field = budget.to_string();
    Ok(page(
        &format!("{user}: recall"),
        &viewer,
        Some(&user),
        html! {
            h1 { "Recall playground" }
            form.recall method="get" action="/ui/recall" {
                input type="hidden" name="u" value=(user);
                label.wide { "question " input type="text" name="q" value=(q.q) required
                    placeholder="What is the name of Sam's dog?"; }
                label { "asked at " input type="date" name="asked_at" value=(q.asked_at); }
                label { "k " input type="number" name="k" min="1" max="1000" value=(k_field); }
                label { "budget " input type="number" name="budget" min="1" value=(budget_field); }
                button type="submit" { "Recall" }
            }
            @if let Some(s) = &shown { (explained(s, &user, budget)) }
        },
    )
    .into_response())
}

/// The recall's lists, fused list, results and context.
fn explained(s: &Shown, user: &str, budget: usize) -> Markup {
    let trace = &s.explained.trace;
    let response = &s.explained.response;
    let r = &s.recalled;
    html! {
        section.context {
            h2 { "The context as a model receives it" }
            p.lead {
                (r.context_tokens) " of " (budget) " o200k tokens · " (r.items.len()) " units · "
                @if let Some(note) = &r.plan_note { (note) } @else { "planned: " (r.plan.paths.len()) " paths" }
                " · reranker: " (r.reranker)
            }
            pre.context { (r.context) }
            @if r.plan_note.is_none() {
                h3 { "The plan" }
                ol.plan {
                    @for (n, p) in r.plan.paths.iter().enumerate() {
                        li {
                            strong { (p.goal) } " — searched as “" (p.query) "”"
                            @if !p.entities.is_empty() { " · entities: " (p.entities.join(", ")) }
                            @if !p.topics.is_empty() { " · topics: " (p.topics.join(", ")) }
                            " · " (r.items.iter().filter(|i| i.paths.contains(&(n + 1))).count())
                            " of the chosen units"
                        }
                    }
                }
            }
        }
        @if !r.reranked.is_empty() {
            section.rerank {
                h2 { "What the reranker did" }
                p.muted { "Each path's head as RRF of its lists ranked it (was) and as the
                    cross-encoder reordered it (now), before the paths are fused." }
                @for p in &r.reranked {
                    h3 { "Path " (p.path) }
                    table {
                        thead { tr { th.num { "now" } th.num { "was" } th.num { "score" } th { "unit" } } }
                        tbody { @for u in &p.units { tr {
                            td.num { (u.after) } td.num { (u.before) }
                            td.num { (format!("{:.3}", u.score)) }
                            td { (unit(s, &rerank_unit(u), user)) }
                        } } }
                    }
                }
            }
        }
        section.results {
            h2 { "What the search returns" }
            p.lead { (response.results.len()) " results · " (response.context_tokens) " tokens"
                @if trace.newest_first { " · the question asks about the present: newest first" } }
            ol {
                @for hit in &response.results {
                    li {
                        span.score { (format!("{:.4}", hit.score)) } " "
                        span.time { (when(hit.time)) } " "
                        span.src { (hit.source.turns.join(", ")) } " "
                        a.small href=(link("/ui/memory", &[("id", &hit.id)])) { "memory" }
                        div.text { (hit.text) }
                    }
                }
            }
        }
        section.fused {
            h2 { "Fused (RRF)" }
            ol { @for f in trace.fused.iter().take(FUSED_SHOWN) {
                li { span.score { (format!("{:.4}", f.score)) } " " (unit(s, &f.unit, user)) }
            } }
        }
        section.paths {
            h2 { "Retrieval paths" }
            @for list in &trace.lists {
                div.path {
                    h3 { (list.path) " " span.muted { "weight " (format!("{:.2}", list.weight))
                        " · " (list.units.len()) " ranked" } }
                    ol { @for u in list.units.iter().take(SHOWN) {
                        li { span.score { (format!("{:.3}", u.score)) } " " (unit(s, &u.unit, user)) }
                    } }
                }
            }
        }
    }
}

/// A unit of a list: a turn with its speaker and text, a segment by its first turn.
fn unit(s: &Shown, unit: &UnitId, user: &str) -> Markup {
    let turn = |id: &TurnId| s.turns.get(id);
    match unit {
        UnitId::Turn(id) => match turn(id) {
            Some(t) => html! {
                span.speaker { (speaker(t)) } " " span.time { (when(t.turn.event_time)) } " "
                a.small href=(link("/ui/memory", &[("id", &id.0)])) { (short(&id.0)) }
                span.snippet { (t.turn.text) }
            },
            None => html! { span.muted { "turn " (id.0) " (gone)" } },
        },
        UnitId::Segment(id) => match s.segments.get(id) {
            Some(seg) => html! {
                span.kind { "segment" } " " span.muted { (seg.turns.len()) " turns" } " "
                a.small href=(link("/ui/user", &[("u", user)])) { (short(&id.0)) }
                @if let Some(t) = seg.turns.first().and_then(turn) {
                    span.snippet { (speaker(t)) ": " (t.turn.text) }
                }
            },
            None => html! { span.muted { "segment " (id.0) " (gone)" } },
        },
        UnitId::Card(id) => html! { span.kind { "card" } " " (id.0) },
    }
}

/// A reranked unit as the lists name units.
fn rerank_unit(u: &RerankedUnit) -> UnitId {
    match u.kind {
        UnitKind::Card => UnitId::Card(CardId(u.id.clone())),
        _ => UnitId::Turn(TurnId(u.id.clone())),
    }
}
