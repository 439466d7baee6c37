//! Body and query extractors whose failures are [`ApiError`]s (JSON with a code), not axum's
//! plain-text rejections.

use axum::extract::{FromRequest, FromRequestParts};

use crate::ApiError;

/// A JSON body; a malformed, oversized or mistyped one is a JSON error.
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// A query string; a malformed one is a JSON error.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);
