//! A user's conversation timeline: closed segments a page at a time in store order, each with its
//! turns verbatim (speaker, time), the boundary that closed it (reason and score) and the cards
//! it produced beside it, each card linking to its source turns. A new session is marked where
//! it starts.

use aril_core::{Card, Segment, Turn, TurnId};
use aril_engine::ScopeSummary;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::page::{kib, link, page, pager, when};
use super::{PAGE, UiError, Viewer};
use crate::AppState;

#[derive(Deserialize)]
pub(crate) struct TimelineQuery {
    u: Option<String>,
    #[serde(default)]
    offset: u64,
    done: Option<String>,
}

/// The newest turns looked at for those not yet in a closed segment.
const OPEN_SHOWN: u64 = 50;

/// A segment with what the page shows of it.
struct Shown {
    segment: Segment,
    turns: Vec<Turn>,
    cards: Vec<Card>,
}

pub(crate) async fn timeline(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<TimelineQuery>,
) -> Result<Response, UiError> {
    let filter = viewer.scope(q.u)?;
    let user = filter.user_id.clone();
    let offset = q.offset;
    let (about, total, shown, open) = state
        .read(move |engine| {
            let about = engine.scope_summary(&filter)?;
            let (segments, total) = engine.segments(&filter, offset, PAGE)?;
            let ids: Vec<TurnId> = segments.iter().flat_map(|s| s.turns.clone()).collect();
            let mut by_id = engine.turns_by_id(&ids)?;
            let shown = segments
                .into_iter()
                .map(|segment| {
                    let turns = segment
                        .turns
                        .iter()
                        .filter_map(|id| by_id.remove(id))
                        .collect();
                    let cards = engine.segment_cards(&segment.id)?;
                    Ok(Shown {
                        segment,
                        turns,
                        cards,
                    })
                })
                .collect::<Result<Vec<_>, aril_engine::EngineError>>()?;
            // The turns after the last closed segment, on the last page.
            let open = if offset + PAGE >= total {
                engine.unsegmented_turns(&filter, OPEN_SHOWN)?
            } else {
                Vec::new()
            };
            Ok((about, total, shown, open))
        })
        .await?;
    let to = |o: u64| link("/ui/user", &[("u", &user), ("offset", &o.to_string())]);
    Ok(page(
        &format!("{user}: timeline"),
        &viewer,
        Some(&user),
        html! {
            @if let Some(done) = &q.done { p.done { (done) } }
            h1 { "Timeline of " (user) }
            (overview(&about))
            p.actions {
                a.danger href=(link("/ui/delete-user", &[("u", &user)])) { "Delete this user…" }
            }
            @if shown.is_empty() && open.is_empty() {
                p { "Nothing stored yet." }
            }
            (pager(offset, PAGE, total, to))
            @for (heading, s) in with_headings(&shown) {
                @if let Some(start) = heading { (start.heading(&user)) }
                (segment(s, &user))
            }
            @if !open.is_empty() {
                h2.session { "Not yet in a closed segment" }
                p.muted { "A conversation's last segment closes when the topic changes, its
                    session ends or a client flushes it (the newest " (OPEN_SHOWN) " turns are
                    looked at)." }
                article.segment.open { div.turns { @for t in &open { (turn(t)) } } }
            }
            (pager(offset, PAGE, total, to))
        },
    )
    .into_response())
}

/// Where a session starts on the page: its conversation, its name (if it has one) and the
/// start of its first segment shown.
struct SessionStart<'a> {
    conversation: &'a str,
    session: Option<&'a str>,
    segment: &'a Segment,
}

impl SessionStart<'_> {
    /// The heading, with the link to delete the session.
    fn heading(&self, user: &str) -> Markup {
        let mut to = vec![("u", user), ("c", self.conversation)];
        if let Some(s) = self.session {
            to.push(("s", s));
        }
        html! {
            h2.session {
                (self.conversation)
                @if let Some(s) = self.session { " · " (s) }
                " · " (when(self.segment.start_time))
                " " a.danger.small href=(link("/ui/delete-session", &to)) { "Delete this session…" }
            }
        }
    }
}

/// The segments, each with the session it starts, if it starts one.
fn with_headings(shown: &[Shown]) -> Vec<(Option<SessionStart<'_>>, &Shown)> {
    let mut last: Option<(&str, Option<&str>)> = None;
    shown
        .iter()
        .map(|s| {
            let here = (
                s.segment.conversation.as_str(),
                s.turns.first().and_then(|t| t.turn.session.as_deref()),
            );
            let start = (last != Some(here)).then_some(SessionStart {
                conversation: here.0,
                session: here.1,
                segment: &s.segment,
            });
            last = Some(here);
            (start, s)
        })
        .collect()
}

/// The counts at the top of a user's pages.
fn overview(u: &ScopeSummary) -> Markup {
    html! {
        p.lead {
            (u.turns) " turns · " (u.segments) " closed segments ("
            (u.segments_pending) " waiting for cards, " (u.segments_failed) " failed) · "
            (u.current_cards) " current cards · " (kib(u.text_bytes)) " KiB of text · last write "
            (when(u.last_write))
        }
    }
}

/// One segment: its turns, its cards beside them, and the boundary that closed it.
fn segment(s: &Shown, user: &str) -> Markup {
    let seg = &s.segment;
    html! {
        article.segment id=(format!("s-{}", seg.id.0)) {
            div.turns {
                @for t in &s.turns { (turn(t)) }
            }
            aside.cards {
                @if s.cards.is_empty() {
                    p.muted { "No cards (written once an encoder is configured)." }
                }
                @for c in &s.cards { (card(c, user, true)) }
            }
            div.boundary {
                "segment closed: " strong { (seg.reason.as_str()) }
                " · boundary score " (format!("{:.2}", seg.boundary_score))
                " · " (seg.turns.len()) " turns · " (seg.tokens) " tokens"
            }
        }
    }
}

/// A turn verbatim, with who said it and when, and a link to its memory.
fn turn(t: &Turn) -> Markup {
    html! {
        div.turn id=(format!("t-{}", t.id.0)) {
            div.meta {
                span.speaker { (speaker(t)) }
                " " span.time { (when(t.turn.event_time)) }
                @if let Some(src) = &t.turn.source_id { " " span.src { (src) } }
                " " a.small href=(link("/ui/memory", &[("id", &t.id.0)])) { "memory" }
            }
            div.text { (t.turn.text) }
        }
    }
}

/// The speaker's name, else the role.
pub(crate) fn speaker(t: &Turn) -> String {
    t.turn
        .speaker
        .clone()
        .unwrap_or_else(|| t.turn.role.as_str().to_string())
}

/// A card: its type, text, entities, topics and date, and its source turns (as anchors on the
/// timeline when `on_timeline`, else as memory pages).
pub(crate) fn card(c: &Card, user: &str, on_timeline: bool) -> Markup {
    html! {
        div.card id=(format!("c-{}", c.id.0)) {
            div.meta {
                span.kind { (c.kind.as_str()) }
                @if let Some(t) = c.time.as_ref().and_then(|t| t.start) {
                    " " span.time { (t.format("%Y-%m-%d")) }
                }
                @if c.valid_to.is_some() { " " span.muted { "no longer holds from " (when(c.valid_to)) } }
                " " a.small href=(link("/ui/memory", &[("id", &c.id.0)])) { "history" }
            }
            div.text { (c.text) }
            div.tags {
                @for e in &c.entities {
                    a.entity href=(link("/ui/cards", &[("u", user), ("entity", e)])) { (e) }
                }
                @for t in &c.topics {
                    a.topic href=(link("/ui/cards", &[("u", user), ("topic", t)])) { (t) }
                }
            }
            div.sources {
                "from "
                @for t in &c.source_turns {
                    @if on_timeline {
                        a href=(format!("#t-{}", t.0)) { (short(&t.0)) } " "
                    } @else {
                        a href=(link("/ui/memory", &[("id", &t.0)])) { (short(&t.0)) } " "
                    }
                }
            }
        }
    }
}

/// The first characters of an id, for a link's label.
pub(crate) fn short(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}
