//! The first page: for an admin key, every user with what their memory holds; a user key goes
//! straight to its own timeline.

use aril_engine::{EngineError, Grant, ScopeFilter};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use super::page::{kib, link, page, pager, when};
use super::{PAGE, UiError, Viewer};
use crate::AppState;

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
                .map(|u| {
                    Ok::<_, EngineError>((
                        u.clone(),
                        engine.scope_summary(&ScopeFilter::user(u.as_str()))?,
                    ))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, EngineError>((stats, total, shown))
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
                (s.segments_failed) " failed · " (kib(s.bytes)) " KiB on disk"
            }
            table {
                thead { tr { th { "user" } th.num { "turns" } th.num { "segments" }
                             th.num { "waiting" } th.num { "failed" } th.num { "cards" }
                             th.num { "text KiB" } th { "last write" } } }
                tbody {
                    @for (user, u) in &users {
                        tr {
                            td { a href=(link("/ui/user", &[("u", user)])) { (user) } }
                            td.num { (u.turns) } td.num { (u.segments) }
                            td.num { (u.segments_pending) } td.num { (u.segments_failed) }
                            td.num { (u.current_cards) } td.num { (kib(u.text_bytes)) }
                            td { (when(u.last_write)) }
                        }
                    }
                }
            }
            p.muted { "Waiting: closed segments not yet written into cards; failed: those whose
                encoding failed (aril consolidate --retry-failed tries again). Text: the turns'
                and cards' own bytes; vectors and indexes are shared and counted in the total." }
            (pager(offset, PAGE, total, |o| link("/ui", &[("offset", &o.to_string())])))
        },
    )
    .into_response())
}
