//! Who is calling and what they may touch. A request presents an API key (`Authorization: Token
//! KEY`, `Authorization: Bearer KEY` or `X-API-Key: KEY`); a user key reaches one user's memories
//! only, an admin key any user's. Every scope a handler uses comes from [`Caller::filter`], so no
//! route can read or delete outside the caller's grant.

use aril_engine::{Grant, ScopeFilter};
use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;

use crate::{ApiError, AppState};

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub grant: Grant,
}

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    AppState: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let state = AppState::from_ref(state);
        if !state.auth {
            return Ok(Caller {
                grant: Grant::Admin,
            });
        }
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let presented = header("authorization")
            .and_then(|v| {
                v.strip_prefix("Token ")
                    .or_else(|| v.strip_prefix("Bearer "))
            })
            .or_else(|| header("x-api-key"))
            .ok_or_else(|| {
                ApiError::unauthorized(
                    "no API key: send `Authorization: Token KEY` (make one with `aril keys create`)",
                )
            })?;
        match state.check_key(presented).await? {
            Some(grant) => Ok(Caller { grant }),
            None => Err(ApiError::unauthorized("unknown API key")),
        }
    }
}

impl Caller {
    /// The scope a request may act on: the user it names (a user key may name only its own user,
    /// or none), narrowed by agent and run when given.
    pub fn filter(
        &self,
        user_id: Option<String>,
        agent_id: Option<String>,
        run_id: Option<String>,
    ) -> Result<ScopeFilter, ApiError> {
        let user_id = match (&self.grant, user_id) {
            (Grant::User(own), None) => own.clone(),
            (Grant::User(own), Some(asked)) if &asked == own => asked,
            (Grant::User(_), Some(asked)) => {
                return Err(ApiError::forbidden(format!(
                    "this API key is bound to another user than {asked:?}"
                )));
            }
            (Grant::Admin, Some(asked)) => asked,
            (Grant::Admin, None) => {
                return Err(ApiError::bad_request(
                    "user_id is required (an admin key is bound to no user)",
                ));
            }
        };
        let nonempty = |v: Option<String>| v.filter(|s| !s.is_empty());
        let filter = ScopeFilter {
            user_id,
            agent_id: nonempty(agent_id),
            run_id: nonempty(run_id),
        };
        if filter.user_id.trim().is_empty() {
            return Err(ApiError::bad_request("user_id must not be empty"));
        }
        Ok(filter)
    }

    /// Whether this caller may act for `user_id`.
    pub fn may_access(&self, user_id: &str) -> bool {
        match &self.grant {
            Grant::Admin => true,
            Grant::User(own) => own == user_id,
        }
    }
}
