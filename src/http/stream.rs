//! `GET /api/v1/stream`: server-sent events, one `sample` event per published
//! sample, carrying [`SampleEvent`] as JSON.
//!
//! Each client gets its own clone of the state receiver and waits for the
//! next change; a slow client only delays itself (it skips to the newest
//! sample rather than queueing old ones). The stream ends when the daemon
//! stops publishing, which lets the server shut down gracefully.
//!
//! Streams hold their connection for as long as the client likes, so they
//! have a cap of their own ([`Gates::stream`]): past it a new one gets 503,
//! and the other connections stay free for scrapes and the API.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{RawQuery, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};

use super::api::SampleEvent;
use super::gates::{Gates, Permit};
use super::viewer::Viewer;
use super::{ApiError, Shared, query};
use crate::model::Timestamp;

/// How often an idle stream sends a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub async fn stream(
    State(shared): State<Shared>,
    Extension(gates): Extension<Arc<Gates>>,
    viewer: Viewer,
    RawQuery(q): RawQuery,
) -> Response {
    if let Err(e) = query::none(q.as_deref()) {
        return ApiError::from(e).into_response();
    }
    let permit = match gates.stream(viewer.key().await) {
        Ok(permit) => permit,
        Err(e) => return e.into_response(),
    };
    Sse::new(samples(shared, permit))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// One event per new snapshot: the current one at once (if any), then each
/// newer one as it is published. Changes that bring no new snapshot
/// (counters, a config reload) send nothing. The stream's permit is let go
/// when the stream is dropped.
fn samples(mut rx: Shared, permit: Permit) -> impl Stream<Item = Result<Event, Infallible>> {
    rx.mark_changed();
    let state = (rx, None::<Timestamp>, permit);
    stream::unfold(state, |(mut rx, mut last, permit)| async move {
        loop {
            // An error means the daemon dropped its sender: it is stopping.
            rx.changed().await.ok()?;
            let event = {
                let state = rx.borrow_and_update().clone();
                match state.snapshot.as_deref() {
                    Some(snap) if Some(snap.taken_at) != last => {
                        last = Some(snap.taken_at);
                        Some(encode(&SampleEvent::of(&state, snap)))
                    }
                    _ => None,
                }
            };
            if let Some(event) = event {
                return Some((Ok(event), (rx, last, permit)));
            }
        }
    })
}

fn encode(sample: &SampleEvent<'_>) -> Event {
    match serde_json::to_string(sample) {
        Ok(json) => Event::default().event("sample").data(json),
        Err(e) => Event::default()
            .event("error")
            .data(format!("cannot encode the sample: {e}")),
    }
}
