//! A user's cards, filtered by type, entity, topic and date (current ones, or every version),
//! a page at a time, with the profile (preferences and stable traits) on the first page.

use aril_core::CardKind;
use aril_engine::CardQuery;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use chrono::NaiveDate;
use maud::html;
use serde::Deserialize;

use super::page::{link, page, pager};
use super::timeline::card;
use super::{PAGE, UiError, Viewer};
use crate::{ApiError, AppState};

#[derive(Deserialize)]
pub(crate) struct CardsQuery {
    u: Option<String>,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    entity: String,
    #[serde(default)]
    topic: String,
    /// Cards whose time starts on or after this day (`YYYY-MM-DD`).
    #[serde(default)]
    from: String,
    /// … and on or before this one.
    #[serde(default)]
    to: String,
    /// `all`: superseded versions too.
    #[serde(default)]
    versions: String,
    #[serde(default)]
    offset: u64,
}

/// The page's filter, checked, as the store's card query.
fn card_query(q: &CardsQuery) -> Result<CardQuery, UiError> {
    let day = |s: &str, what: &str| -> Result<Option<NaiveDate>, UiError> {
        match s.trim() {
            "" => Ok(None),
            s => NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .map(Some)
                .map_err(|_| {
                    UiError(ApiError::bad_request(format!(
                        "{what} must be a date as YYYY-MM-DD, got {s:?}"
                    )))
                }),
        }
    };
    let kind = match q.kind.as_str() {
        "" => None,
        k => Some(
            CardKind::parse(k)
                .ok_or_else(|| UiError(ApiError::bad_request(format!("no card type {k:?}"))))?,
        ),
    };
    let text = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    Ok(CardQuery {
        kind,
        entity: text(&q.entity),
        topic: text(&q.topic),
        from: day(&q.from, "from")?,
        to: day(&q.to, "to")?,
        current_only: q.versions != "all",
    })
}

/// How many preferences and traits the profile shows (the type filter lists them all).
const PROFILE_SHOWN: usize = 20;

pub(crate) async fn cards(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<CardsQuery>,
) -> Result<Response, UiError> {
    let filter = viewer.scope(q.u.clone())?;
    let user = filter.user_id.clone();
    let wanted = card_query(&q)?;
    let every_version = !wanted.current_only;
    let offset = q.offset;
    let (profile, (shown, total)) = state
        .read(move |engine| {
            let profile = if offset == 0 {
                Some(engine.profile(&filter)?)
            } else {
                None
            };
            Ok((profile, engine.find_cards(&filter, &wanted, offset, PAGE)?))
        })
        .await?;
    let here = |o: u64| {
        link(
            "/ui/cards",
            &[
                ("u", &user),
                ("kind", &q.kind),
                ("entity", &q.entity),
                ("topic", &q.topic),
                ("from", &q.from),
                ("to", &q.to),
                ("versions", &q.versions),
                ("offset", &o.to_string()),
            ],
        )
    };
    Ok(page(
        &format!("{user}: cards"),
        &viewer,
        Some(&user),
        html! {
            h1 { "Cards of " (user) }
            form.filters method="get" action="/ui/cards" {
                input type="hidden" name="u" value=(user);
                label { "type "
                    select name="kind" {
                        option value="" { "any" }
                        @for k in CardKind::ALL {
                            option value=(k.as_str()) selected[q.kind == k.as_str()] { (k.as_str()) }
                        }
                    }
                }
                label { "entity " input type="text" name="entity" value=(q.entity); }
                label { "topic " input type="text" name="topic" value=(q.topic); }
                label { "from " input type="date" name="from" value=(q.from); }
                label { "to " input type="date" name="to" value=(q.to); }
                label { input type="checkbox" name="versions" value="all" checked[every_version];
                        " superseded versions too" }
                button type="submit" { "Filter" }
            }
            @if let Some(p) = &profile {
                @if !p.preferences.is_empty() || !p.traits.is_empty() {
                    section.profile {
                        h2 { "Profile" }
                        @for (title, list) in [("Preferences", &p.preferences), ("Stable traits", &p.traits)] {
                            @if !list.is_empty() {
                                h3 { (title) }
                                ul { @for c in list.iter().take(PROFILE_SHOWN) { li { (c.text) } } }
                                @if list.len() > PROFILE_SHOWN {
                                    p.muted { "… and " (list.len() - PROFILE_SHOWN) " more, newest first." }
                                }
                            }
                        }
                    }
                }
            }
            h2 { (total) " cards" }
            @if total == 0 {
                p.muted { "No cards match. Cards are written from closed segments by an encoder
                           model (ARIL_LLM_*, then `aril serve` or `aril consolidate`)." }
            }
            div.cardlist { @for c in &shown { (card(c, &user, false)) } }
            (pager(offset, PAGE, total, here))
        },
    )
    .into_response())
}
