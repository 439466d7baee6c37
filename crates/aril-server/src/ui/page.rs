//! The frame every inspector page shares (title, navigation, who is signed in), its error page,
//! and the small pieces pages are built from: links with query strings, pagers, dates.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use super::Viewer;
use crate::ApiError;

/// A rendered page with its status.
pub(crate) struct Page {
    pub status: StatusCode,
    pub markup: Markup,
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        (self.status, self.markup).into_response()
    }
}

/// A failed page: the API's error (status and message), shown as HTML.
#[derive(Debug)]
pub(crate) struct UiError(pub ApiError);

impl UiError {
    pub(crate) fn not_found(message: &str) -> Self {
        UiError(ApiError::not_found(message))
    }
}

impl From<aril_engine::EngineError> for UiError {
    fn from(e: aril_engine::EngineError) -> Self {
        UiError(ApiError::from(e))
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let e = self.0;
        // The error page may be a signed-in viewer's: it offers to sign out (with another key).
        let markup = frame(
            "Error",
            None,
            true,
            html! {
                h1 { "Error " (e.status.as_u16()) }
                p.error { (e.message) }
                p { a href="/ui" { "Back to the memory" } }
            },
        );
        (e.status, markup).into_response()
    }
}

/// `path?k=v&…`, the values encoded.
pub(crate) fn link(path: &str, params: &[(&str, &str)]) -> String {
    let params: Vec<(&str, &str)> = params
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .copied()
        .collect();
    match serde_urlencoded::to_string(&params) {
        Ok(q) if !q.is_empty() => format!("{path}?{q}"),
        _ => path.to_string(),
    }
}

/// A page inside the frame, for a signed-in viewer.
pub(crate) fn page(title: &str, viewer: &Viewer, user: Option<&str>, body: Markup) -> Page {
    Page {
        status: StatusCode::OK,
        markup: frame(title, Some((viewer, user)), viewer.keyed, body),
    }
}

/// The HTML document: head, navigation (for a viewer; for a user, that user's pages) and body.
fn frame(
    title: &str,
    nav: Option<(&Viewer, Option<&str>)>,
    signed_in: bool,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · aril" }
                link rel="stylesheet" href="/ui/style.css";
            }
            body {
                header {
                    a.brand href="/ui" { "aril" }
                    @if let Some((viewer, user)) = nav {
                        nav {
                            @if viewer.is_admin() {
                                a href="/ui" { "Users" }
                            }
                            @if let Some(u) = user {
                                a href=(link("/ui/user", &[("u", u)])) { "Timeline" }
                                a href=(link("/ui/cards", &[("u", u)])) { "Cards" }
                                a href=(link("/ui/recall", &[("u", u)])) { "Recall" }
                            }
                            @if viewer.is_admin() {
                                a href="/ui/cost" { "Cost" }
                            }
                        }
                        span.who {
                            @match &viewer.caller.grant {
                                aril_engine::Grant::Admin => "admin",
                                aril_engine::Grant::User(u) => { "user " (u) },
                            }
                        }
                        @if viewer.keyed { (sign_out()) }
                    } @else if signed_in {
                        nav {}
                        (sign_out())
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The button that forgets the key cookie.
fn sign_out() -> Markup {
    html! {
        form.inline method="post" action="/ui/logout" {
            button type="submit" { "Sign out" }
        }
    }
}

/// The login page (with a note when a key was refused or has expired).
pub(crate) fn login(note: Option<&str>, status: StatusCode) -> Page {
    Page {
        status,
        markup: frame(
            "Sign in",
            None,
            false,
            html! {
                h1 { "Sign in" }
                @if let Some(note) = note { p.error { (note) } }
                p { "Present an API key of this server (" code { "aril keys create --user USER" }
                    " or " code { "--admin" } "). It is kept in a cookie for this site only." }
                form method="post" action="/ui/login" {
                    label for="key" { "API key" }
                    input #key type="password" name="key" autocomplete="off" required;
                    button type="submit" { "Sign in" }
                }
            },
        ),
    }
}

/// Links to the previous and next page of a list of `total` items shown `per` at a time from
/// `offset`; `to(offset)` is a page's address.
pub(crate) fn pager(offset: u64, per: u64, total: u64, to: impl Fn(u64) -> String) -> Markup {
    let last = total.saturating_sub(1) / per.max(1) * per;
    html! {
        nav.pager {
            @if offset > 0 {
                a href=(to(0)) { "« first" }
                a href=(to(offset.saturating_sub(per))) { "‹ earlier" }
            }
            span { (offset.min(total).saturating_add(if total > 0 { 1 } else { 0 })) "–"
                   ((offset + per).min(total)) " of " (total) }
            @if offset + per < total {
                a href=(to(offset + per)) rel="next" { "later ›" }
                a href=(to(last)) { "last »" }
            }
        }
    }
}

/// `2024-01-08 19:05` (UTC), or a dash.
pub(crate) fn when(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| "—".into())
}

/// Bytes as KiB, one decimal below 10 KiB (`0.4`, `12`).
pub(crate) fn kib(bytes: u64) -> String {
    let k = bytes as f64 / 1024.0;
    if k < 10.0 {
        format!("{k:.1}")
    } else {
        format!("{k:.0}")
    }
}
