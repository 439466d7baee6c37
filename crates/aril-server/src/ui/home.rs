//! The first page: for an admin key, every user with what their memory holds; a user key goes
//! straight to its own timeline.

use aril_engine::{Engine, EngineError, Grant, ScopeFilter};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use maud::html;
use serde::Deserialize;

use super::page::{link, page, pager, when};
use super::{PAGE, UiError, Viewer};
use crate::AppState;

/// What one user's memory holds.
pub(crate) struct UserSummary {
    pub user: String,
    pub turns: u64,
    pub segments: u64,
    /// Current cards (none until an encoder has written some).
    pub cards: u64,
    /// When the newest turn was stored.
    pub last_write: Option<DateTime<Utc>>,
}

/// Counts of `user`'s memory, each from a paged read of one item (no read of the whole memory
/// but the cards, which are counted).
pub(crate) fn summary(engine: &Engine, user: &str) -> Result<UserSummary, EngineError> {
    let filter = ScopeFilter {
        user_id: user.to_string(),
        agent_id: None,
        run_id: None,
    };
    let (_, turns) = engine.list_turns(&filter, 0, 0)?;
    let (last, _) = engine.list_turns(&filter, turns.saturating_sub(1), 1)?;
    let (_, segments) = engine.segments(&filter, 0, 0)?;
    let cards = engine.cards(&filter, true)?.len() as u64;
    Ok(UserSummary {
        user: user.to_string(),
        turns,
        segments,
        cards,
        last_write: last.first().map(|t| t.ingest_time),
    })
}

#[derive(Deserialize)]
pub(crate) struct HomeQuery {
    #[serde(default)]
    offset: u64,
    done: Option<String>,
}

pub(crate) async fn home(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<HomeQuery>,
) -> Result<Response, UiError> {
    if let Grant::User(own) = &viewer.caller.grant {
        return Ok(Redirect::to(&link("/ui/user", &[("u", own)])).into_response());
    }
    let offset = q.offset;
    let (stats, total, users) = state
        .read(move |engine| {
            let stats = engine.stats()?;
            let users = engine.users()?;
            let total = users.len() as u64;
            let shown = users
                .iter()
                .skip(offset as usize)
                .take(PAGE as usize)
                .map(|u| summary(engine, u))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((stats, total, shown))
        })
        .await?;
    let s = &stats.store;
    Ok(page(
        "Users",
        &viewer,
        None,
        html! {
            @if let Some(done) = &q.done { p.done { (done) } }
            h1 { "Users" }
            p.lead {
                (s.turns) " turns of " (s.users) " users in " (stats.backend) " · "
                (s.segments) " closed segments · " (s.cards) " cards · "
                (s.segments_pending) " segments waiting for cards · "
                (s.segments_failed) " failed · " (s.bytes / 1024) " KiB"
            }
            table {
                thead { tr { th { "user" } th.num { "turns" } th.num { "segments" }
                             th.num { "cards" } th { "last write" } } }
                tbody {
                    @for u in &users {
                        tr {
                            td { a href=(link("/ui/user", &[("u", &u.user)])) { (u.user) } }
                            td.num { (u.turns) } td.num { (u.segments) } td.num { (u.cards) }
                            td { (when(u.last_write)) }
                        }
                    }
                }
            }
            (pager(offset, PAGE, total, |o| link("/ui", &[("offset", &o.to_string())])))
        },
    )
    .into_response())
}
