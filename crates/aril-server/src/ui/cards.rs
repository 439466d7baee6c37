//! A user's cards, filtered by type, entity, topic and date (current ones, or every version),
//! a page at a time, with the profile (preferences and stable traits) on the first page.

use aril_core::{Card, CardKind};
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

/// The filter of the page, checked.
struct CardFilter {
    kind: Option<CardKind>,
    entity: String,
    topic: String,
    from: Option<NaiveDate>,
    to: Option<NaiveDate>,
}

impl CardFilter {
    fn parse(q: &CardsQuery) -> Result<Self, UiError> {
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
        Ok(CardFilter {
            kind,
            entity: q.entity.trim().to_lowercase(),
            topic: q.topic.trim().to_lowercase(),
            from: day(&q.from, "from")?,
            to: day(&q.to, "to")?,
        })
    }

    fn admits(&self, c: &Card) -> bool {
        let day = c
            .time
            .as_ref()
            .and_then(|t| t.start)
            .map(|t| t.date_naive());
        self.kind.is_none_or(|k| c.kind == k)
            && (self.entity.is_empty()
                || c.entities.iter().any(|e| e.to_lowercase() == self.entity))
            && (self.topic.is_empty() || c.topics.iter().any(|t| t.to_lowercase() == self.topic))
            && self.from.is_none_or(|from| day.is_some_and(|d| d >= from))
            && self.to.is_none_or(|to| day.is_some_and(|d| d <= to))
    }
}

pub(crate) async fn cards(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<CardsQuery>,
) -> Result<Response, UiError> {
    let filter = viewer.scope(q.u.clone())?;
    let user = filter.user_id.clone();
    let wanted = CardFilter::parse(&q)?;
    let every_version = q.versions == "all";
    let offset = q.offset;
    let (profile, total, shown) = state
        .read(move |engine| {
            let profile = if offset == 0 {
                Some(engine.profile(&filter)?)
            } else {
                None
            };
            let cards: Vec<Card> = engine
                .cards(&filter, !every_version)?
                .into_iter()
                .filter(|c| wanted.admits(c))
                .collect();
            let total = cards.len() as u64;
            let shown: Vec<Card> = cards
                .into_iter()
                .skip(offset as usize)
                .take(PAGE as usize)
                .collect();
            Ok((profile, total, shown))
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
                        @if !p.preferences.is_empty() {
                            h3 { "Preferences" }
                            ul { @for c in &p.preferences { li { (c.text) } } }
                        }
                        @if !p.traits.is_empty() {
                            h3 { "Stable traits" }
                            ul { @for c in &p.traits { li { (c.text) } } }
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
