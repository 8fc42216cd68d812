//! Errors as the protocol returns them: an HTTP status and `{"error": "..."}` (KServe's and
//! Triton's body), or the matching gRPC status code.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A request's failure: what the client did wrong (4xx) or why the server cannot answer (5xx).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The message, one line.
    pub message: String,
}

impl ApiError {
    /// 400: the request is malformed or does not fit the model.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404: no such model (or version, or route).
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 503: the server cannot take it now (not ready, shutting down, queue full).
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// An error with `status`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// `Request for unknown model: 'm' is not found`, Triton's words.
    pub fn unknown_model(name: &str) -> ApiError {
        ApiError::not_found(format!("Request for unknown model: '{name}' is not found"))
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.message });
        (self.status, axum::Json(body)).into_response()
    }
}
