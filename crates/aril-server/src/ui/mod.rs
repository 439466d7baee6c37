//! The memory inspector: server-rendered pages under `/ui` that show what aril remembers (users,
//! a conversation's segments and the cards they produced, cards and their history), why a recall
//! found what it found (the recall playground), what it cost, and let a user correct or delete
//! it. Every page reads through the same engine calls as the API ([`AppState::read`] and the
//! API's own helpers), under the same keys: a user key sees its own memory, an admin key every
//! user's.
//!
//! The browser presents its key once, on the login page; it is kept in an `HttpOnly`,
//! `SameSite=Strict` cookie scoped to `/ui`, so another site can neither read it nor make the
//! browser send it; a form another site's page posts is refused in any case ([`same_site_forms`]:
//! a server without keys has no cookie to withhold). Pages are plain HTML forms: no
//! script at all, so the Content-Security-Policy forbids every script, and nothing is loaded
//! from anywhere but this server. Every list is paged; no page reads a whole memory.

mod cards;
mod cost;
mod edit;
mod home;
mod page;
mod playground;
mod timeline;

use aril_engine::{Grant, ScopeFilter};
use axum::Router;
use axum::extract::{Form, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum_extra::extract::CookieJar;
use axum_extra::extract::cookie::{Cookie, SameSite};
use serde::Deserialize;

use crate::auth::Caller;
use crate::{ApiError, AppState};

pub(crate) use page::UiError;

/// The cookie that carries the browser's API key.
const KEY_COOKIE: &str = "aril_key";

/// Nothing but this server's own stylesheet and forms; no script, no frame, no other origin.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

/// The inspector's routes, under `/ui`.
pub fn routes(state: AppState) -> Router {
    let pages = Router::new()
        .route("/", get(home::home))
        .route("/style.css", get(stylesheet))
        .route("/login", get(login_form).post(login))
        .route("/logout", axum::routing::post(logout))
        .route("/user", get(timeline::timeline))
        .route("/cards", get(cards::cards))
        .route("/recall", get(playground::playground))
        .route("/cost", get(cost::cost))
        .route("/memory", get(edit::memory).post(edit::update))
        .route("/delete", get(edit::confirm_delete).post(edit::delete))
        .route(
            "/delete-session",
            get(edit::confirm_delete_session).post(edit::delete_session),
        )
        .route(
            "/delete-user",
            get(edit::confirm_delete_user).post(edit::delete_user),
        )
        .fallback(|| async { UiError::not_found("no such page") });
    Router::new()
        .nest("/ui", pages)
        .layer(axum::middleware::from_fn(same_site_forms))
        .layer(axum::middleware::map_response(secure_headers))
        .with_state(state)
}

/// The headers every inspector response carries.
async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Refuses a form another site's page sends (cross-site request forgery): the key cookie is
/// `SameSite=Strict`, but a server without keys (`aril ui`) has no cookie to withhold, and a
/// plain form post needs no CORS preflight. A browser says where a post comes from
/// (`Sec-Fetch-Site`, `Origin`); a post from a page of this server, or from no page (a script),
/// passes.
async fn same_site_forms(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.method() == axum::http::Method::POST {
        let headers = request.headers();
        let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        // The fetch metadata decides where a browser sends it; else the origin, where given.
        let same_site = match text(header::HeaderName::from_static("sec-fetch-site")) {
            Some(site) => site == "same-origin" || site == "none",
            None => text(header::ORIGIN).is_none_or(|origin| {
                origin
                    .split_once("://")
                    .is_some_and(|(_, host)| Some(host) == text(header::HOST))
            }),
        };
        if !same_site {
            return UiError(ApiError::forbidden(
                "this form was sent by a page of another site: open the inspector itself and \
                 send it from there",
            ))
            .into_response();
        }
    }
    next.run(request).await
}

async fn stylesheet() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("style.css"),
    )
}

/// The caller of an inspector page: from the key cookie (or an admin when the server runs
/// without keys). Without a valid key, the page answers with the login page's address.
pub(crate) struct Viewer {
    pub caller: Caller,
    /// Signed in with a key (not a server without keys): the page offers to sign out.
    pub keyed: bool,
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        if !state.auth {
            return Ok(Viewer {
                caller: Caller {
                    grant: Grant::Admin,
                },
                keyed: false,
            });
        }
        let jar = CookieJar::from_headers(&parts.headers);
        let Some(key) = jar.get(KEY_COOKIE).map(|c| c.value().to_string()) else {
            return Err(Redirect::to("/ui/login").into_response());
        };
        match state.check_key(&key).await {
            Ok(Some(grant)) => Ok(Viewer {
                caller: Caller { grant },
                keyed: true,
            }),
            Ok(None) => Err(Redirect::to("/ui/login?expired=1").into_response()),
            Err(e) => Err(UiError::from(e).into_response()),
        }
    }
}

impl Viewer {
    /// The scope of user `user` (a user key: its own user only).
    pub(crate) fn scope(&self, user: Option<String>) -> Result<ScopeFilter, UiError> {
        Ok(self.caller.filter(user, None, None)?)
    }

    pub(crate) fn is_admin(&self) -> bool {
        self.caller.grant == Grant::Admin
    }
}

#[derive(Deserialize)]
struct LoginQuery {
    expired: Option<u8>,
}

async fn login_form(
    State(state): State<AppState>,
    axum::extract::Query(q): axum::extract::Query<LoginQuery>,
) -> Response {
    if !state.auth {
        return Redirect::to("/ui").into_response();
    }
    let note = q
        .expired
        .map(|_| "That key is not (or no longer) known to this server: sign in again.");
    page::login(note, StatusCode::OK).into_response()
}

#[derive(Deserialize)]
struct LoginForm {
    key: String,
}

/// Checks the key and keeps it in the cookie; a wrong key gets the form again, with why.
async fn login(
    State(state): State<AppState>,
    jar: CookieJar,
    Form(form): Form<LoginForm>,
) -> Response {
    let key = form.key.trim().to_string();
    match state.check_key(&key).await {
        Ok(Some(_)) => {
            let cookie = Cookie::build((KEY_COOKIE, key))
                .path("/ui")
                .http_only(true)
                .same_site(SameSite::Strict)
                .build();
            (jar.add(cookie), Redirect::to("/ui")).into_response()
        }
        Ok(None) => page::login(
            Some("This key is not known to this server: make one with `aril keys create`."),
            StatusCode::UNAUTHORIZED,
        )
        .into_response(),
        Err(e) => UiError::from(e).into_response(),
    }
}

async fn logout(jar: CookieJar) -> Response {
    let gone = Cookie::build((KEY_COOKIE, "")).path("/ui").build();
    (jar.remove(gone), Redirect::to("/ui/login")).into_response()
}

impl From<ApiError> for UiError {
    fn from(e: ApiError) -> Self {
        UiError(e)
    }
}

/// The page size of every list, unless the page asks for fewer.
pub(crate) const PAGE: u64 = 20;
