//! `GET /` and `GET /assets/{file}`: the status page, a single page whose HTML,
//! CSS and JavaScript are compiled into the binary.
//!
//! The page loads nothing from anywhere but the daemon (a Content-Security-Policy
//! says so to the browser): its script fetches `/api/v1/history` and
//! `/api/v1/processes`, follows `/api/v1/stream`, and draws its charts with
//! uPlot 1.6.32 (MIT), vendored from npm under `assets/vendor/` (see the
//! README there).

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::ApiError;

const INDEX_HTML: &str = include_str!("assets/index.html");

/// The files under `/assets/`: name, content type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("assets/style.css"),
    ),
    (
        "uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/vendor/uPlot.iife.min.js"),
    ),
    (
        "uPlot.min.css",
        "text/css; charset=utf-8",
        include_str!("assets/vendor/uPlot.min.css"),
    ),
];

/// Only the daemon itself: no CDN, no inline script, nothing else to talk to.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub async fn index() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        INDEX_HTML,
    )
        .into_response()
}

pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => (
            [
                (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            ],
            *body,
        )
            .into_response(),
        None => ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no asset named {name:?}; the status page is at /"),
        )
        .into_response(),
    }
}
