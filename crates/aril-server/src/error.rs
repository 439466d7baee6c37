//! Errors as the API shows them: an HTTP status, a stable machine-readable code and a message that
//! says what to fix. Every failure of every route goes through [`ApiError`], so a client never
//! sees a bare text body or a panic.

use aril_engine::EngineError;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A failed request.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable across releases: clients may match on it.
    pub code: &'static str,
    pub message: String,
}

/// The JSON body of an error. `detail` repeats the message where Mem0 clients look for it.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody<'a> {
    error: ErrorFields<'a>,
    detail: &'a str,
}

/// A stable machine-readable code and a message that says what to fix.
#[derive(Serialize, utoipa::ToSchema)]
struct ErrorFields<'a> {
    code: &'a str,
    message: &'a str,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_input", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(code = self.code, message = %self.message, "request failed");
        }
        let body = ErrorBody {
            error: ErrorFields {
                code: self.code,
                message: &self.message,
            },
            detail: &self.message,
        };
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        use aril_engine::StoreError;
        use aril_engine::embed::EmbedError;
        let message = e.to_string();
        match e {
            EngineError::InvalidInput(_) => Self::bad_request(message),
            EngineError::Store(StoreError::UnknownScope(_))
            | EngineError::UnknownMemory(_)
            | EngineError::UnknownSession { .. } => Self::not_found(message),
            EngineError::ImmutableMemory(_) => {
                Self::new(StatusCode::CONFLICT, "immutable_memory", message)
            }
            EngineError::Embed(EmbedError::ModelMissing { .. }) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "model_missing", message)
            }
            _ => Self::internal(message),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let status = r.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            _ => "invalid_json",
        };
        Self::new(status, code, format!("{}: {}", r.body_text(), hint(status)))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        Self::bad_request(format!("bad query string: {}", r.body_text()))
    }
}

fn hint(status: StatusCode) -> &'static str {
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => "send fewer turns per request",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "send `Content-Type: application/json`",
        _ => "the body must be JSON of the documented shape",
    }
}
