//! The HTTP server inside `headroom run`: `/metrics` for Prometheus, the JSON
//! API under `/api/v1/`, server-sent events, `/healthz` and the status page.
//!
//! [`router`] builds the whole application from a receiver of the daemon's
//! [`DaemonState`]; tests drive it with `oneshot`, no socket needed. Handlers
//! only read: each takes a copy of the state (`Arc`s) and lets go of the
//! channel at once. [`Server::start`] runs the router on a thread and tokio
//! runtime of its own, so that HTTP load (a scrape, a stream of clients)
//! never competes with the sampling loop for the daemon's runtime, and
//! within bounds ([`server`]): a connection cap kept inside the open-file
//! limit, header and idle timeouts, small buffers, and event streams and
//! large answers capped, each viewer to a share of them ([`gates`]).
//!
//! What each client sees follows what the OS would show it ([`viewer`]):
//! other users' command lines and notebooks only to root and their owner.
//! The snapshot's JSON is encoded once per sample and shared
//! ([`snapshot_json`]).
//!
//! Listening beyond loopback needs `http.allow_remote`; on loopback, requests
//! whose `Host` is not an IP literal or `localhost` ([`host`]) are refused,
//! so that a web page cannot read the process list through DNS rebinding.
//!
//! A port another user holds keeps the server from listening, never the
//! daemon from sampling and acting: [`Server::start_when_free`] tries again
//! on the server's own thread until the port is free ([`binding`]).
//!
//! API reference with examples: `docs/api.md`.

pub mod api;
pub mod binding;
pub mod gates;
pub mod host;
pub mod query;
pub mod server;
pub mod snapshot_json;
pub mod status_page;
pub mod stream;
pub mod viewer;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde::Serialize;
use tokio::sync::{oneshot, watch};

pub use binding::Listening;
pub use gates::Gates;
pub use server::{Registry, ServerLimits};

use crate::state::State as DaemonState;

/// What every handler gets: the daemon's published state.
pub type Shared = watch::Receiver<DaemonState>;

/// A copy of the current state; the channel is released before returning.
pub(crate) fn current(shared: &Shared) -> DaemonState {
    shared.borrow().clone()
}

/// The whole application, with the default [`ServerLimits`]' gates.
pub fn router(state: Shared) -> Router {
    router_with(state, Gates::new(&ServerLimits::default()))
}

/// The whole application, its event streams and large answers limited by
/// `gates`.
pub fn router_with(state: Shared, gates: Arc<Gates>) -> Router {
    Router::new()
        .route("/", get(status_page::index))
        .route("/assets/{file}", get(status_page::asset))
        .route("/metrics", get(api::metrics))
        .route("/healthz", get(api::healthz))
        .route("/api/v1/snapshot", get(api::snapshot))
        .route("/api/v1/processes", get(api::processes))
        .route("/api/v1/processes/{pid}", get(api::process))
        .route("/api/v1/history", get(api::history))
        .route("/api/v1/events", get(api::events))
        .route("/api/v1/config", get(api::config))
        .route("/api/v1/stream", get(stream::stream))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(Extension(gates))
        .with_state(state)
}

/// An error answer: a status and `{"error": "...", "parameter": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The query or path parameter at fault, for 400s.
    pub parameter: Option<String>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameter: Option<&'a str>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            parameter: None,
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// 503 before the first sample, saying why.
    pub fn no_sample(state: &DaemonState) -> Self {
        let why = match &state.last_error {
            Some(e) => format!("sampling failed: {e}"),
            None => "the first sample is not finished yet; try again in a moment".to_string(),
        };
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "no sample yet (daemon started at {}): {why}",
                state.started_at
            ),
        )
    }
}

impl From<query::QueryError> for ApiError {
    fn from(e: query::QueryError) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: e.to_string(),
            parameter: Some(e.parameter),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: &self.message,
            parameter: self.parameter.as_deref(),
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

async fn not_found(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "no such endpoint: {}; see / (status page), /metrics, /healthz and /api/v1/{{snapshot,processes,history,events,config,stream}}",
            request.uri().path()
        ),
    )
}

async fn method_not_allowed(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} is not allowed on {}: the API is read-only, use GET",
            request.method(),
            request.uri().path()
        ),
    )
}

/// Refuses requests whose `Host` is not an IP literal or `localhost` (with an
/// optional port, nothing else: [`host::parse`]) unless `http.allow_remote`
/// is set, and marks every answer as not to be sniffed or cached.
async fn guard(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let allow_remote = shared.borrow().config.http.allow_remote;
    if !allow_remote
        && let Some(host) = request.headers().get(header::HOST)
        && !host::is_local(host.as_bytes())
    {
        return ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "Host {:?} is not an IP address or localhost with an optional port; headroom \
                 answers only to those unless http.allow_remote is set",
                String::from_utf8_lossy(host.as_bytes())
            ),
        )
        .into_response();
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// Serve `router(state)` on `listener` within `limits` until `shutdown`
/// completes, then wait for open requests to finish (event streams end when
/// the daemon stops).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Shared,
    limits: ServerLimits,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_listening(
        listener,
        state,
        limits,
        registry,
        Listening::at_once(),
        shutdown,
    )
    .await
}

/// [`serve`], with how the listener came to be bound (for `/healthz`).
async fn serve_listening(
    listener: tokio::net::TcpListener,
    state: Shared,
    limits: ServerLimits,
    registry: Arc<Registry>,
    listening: Listening,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let app = router_with(state, Gates::new(&limits)).layer(Extension(Arc::new(listening)));
    server::serve(listener, app, limits, registry, shutdown).await
}

/// Why the server could not listen.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error(
        "cannot listen on {0}: the address is already in use (is another headroom running?); \
         pick a free port with --listen 127.0.0.1:PORT or http.listen in the config"
    )]
    InUse(SocketAddr),
    #[error(
        "cannot listen on {0}: permission denied (ports below 1024 need root); \
         pick another with --listen 127.0.0.1:PORT"
    )]
    Denied(SocketAddr),
    #[error("cannot listen on {0}: {1}; pick another address with --listen")]
    Other(SocketAddr, #[source] io::Error),
}

/// The address to put in a URL: an unspecified address (`0.0.0.0`, `[::]`) is
/// reached through loopback.
pub fn browsable(addr: SocketAddr) -> SocketAddr {
    let mut addr = addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    addr
}

impl BindError {
    /// The address that could not be bound.
    pub fn addr(&self) -> SocketAddr {
        match self {
            BindError::InUse(a) | BindError::Denied(a) | BindError::Other(a, _) => *a,
        }
    }
}

/// Bind the listening socket (non-blocking, for the server's runtime).
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, BindError> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => BindError::InUse(addr),
        io::ErrorKind::PermissionDenied => BindError::Denied(addr),
        _ => BindError::Other(addr, e),
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| BindError::Other(addr, e))?;
    Ok(listener)
}

/// Threads the HTTP server's runtime may start for blocking work.
const HTTP_BLOCKING_THREADS: usize = 4;

/// Nice levels the HTTP server's thread runs below the daemon's others.
const HTTP_NICE: i32 = 10;

/// Where the server's listener comes from.
enum Source {
    /// Bound already.
    Bound(std::net::TcpListener),
    /// Not bound yet: the first try failed with this error; the server's
    /// thread tries again until it works.
    Retry(BindError),
}

/// The server running on its own thread and single-threaded runtime, at a
/// lower CPU priority than the sampling loop (`HTTP_NICE`, where the OS
/// has per-thread priorities).
pub struct Server {
    addr: SocketAddr,
    /// Whether the listener was bound when the server started.
    bound_at_start: bool,
    registry: Arc<Registry>,
    stop: Option<oneshot::Sender<()>>,
    done: mpsc::Receiver<io::Result<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Start serving on `listener` (from [`bind`]) within the limits of the
    /// config's `[http]`, the connection cap kept within the open-file limit
    /// less the descriptors reserved for enforcement.
    pub fn start(listener: std::net::TcpListener, state: Shared) -> io::Result<Server> {
        let limits = Self::limits(&state);
        Self::spawn(Source::Bound(listener), state, limits)
    }

    /// Start the server for `addr`, whose first bind failed with `failed`:
    /// its thread tries again ([`binding::bind_with_retry`]) until the
    /// address is free, then serves it as [`Server::start`] does. Nothing
    /// else waits for it.
    pub fn start_when_free(failed: BindError, state: Shared) -> io::Result<Server> {
        let limits = Self::limits(&state);
        Self::spawn(Source::Retry(failed), state, limits)
    }

    /// The limits of the config's `[http]`, the connection cap kept within
    /// the open-file limit less the descriptors reserved for enforcement.
    fn limits(state: &Shared) -> ServerLimits {
        let http = state.borrow().config.http.clone();
        let open_files = match crate::os::fd_limit::open_files_limit() {
            Ok(soft) => Some(soft),
            Err(e) => {
                tracing::warn!(
                    "cannot read the open-file limit: {e}; HTTP connections capped at http.max_connections alone"
                );
                None
            }
        };
        let (limits, lowered) = ServerLimits::for_config(&http, open_files);
        if let Some(why) = lowered {
            tracing::warn!("{why}");
        }
        tracing::debug!(
            "HTTP: at most {} connections, {} event streams, {} large answers at once",
            limits.max_connections,
            limits.max_streams,
            limits.max_large_responses
        );
        limits
    }

    /// Start serving on `listener` within `limits`.
    pub fn start_with(
        listener: std::net::TcpListener,
        state: Shared,
        limits: ServerLimits,
    ) -> io::Result<Server> {
        Self::spawn(Source::Bound(listener), state, limits)
    }

    fn spawn(source: Source, state: Shared, limits: ServerLimits) -> io::Result<Server> {
        let addr = match &source {
            Source::Bound(listener) => {
                listener.set_nonblocking(true)?;
                listener.local_addr()?
            }
            Source::Retry(failed) => failed.addr(),
        };
        let bound_at_start = matches!(source, Source::Bound(_));
        // Blocking work (encoding a snapshot, looking up a client's user) runs
        // on a few threads, however many clients ask at once.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .max_blocking_threads(HTTP_BLOCKING_THREADS)
            .build()?;
        let registry = Arc::new(Registry::new(limits.max_connections));
        let (stop, stopped) = oneshot::channel::<()>();
        let (done_tx, done) = mpsc::channel();
        let served = Arc::clone(&registry);
        let thread = std::thread::Builder::new()
            .name("headroom-http".into())
            .spawn(move || {
                // Sampling and acting come first on a busy machine.
                match crate::os::this_process::lower_this_thread_priority(HTTP_NICE) {
                    Ok(Some(nice)) => tracing::debug!("the HTTP server thread runs at nice {nice}"),
                    Ok(None) => {}
                    Err(e) => tracing::debug!("cannot lower the HTTP thread's priority: {e}"),
                }
                let result = runtime.block_on(async move {
                    let mut stopped = stopped;
                    let (listener, listening) = match source {
                        Source::Bound(listener) => (listener, Listening::at_once()),
                        Source::Retry(failed) => {
                            match binding::bind_with_retry(addr, &failed, &mut stopped).await {
                                Some(bound) => bound,
                                // Stopped before the port was free.
                                None => return Ok(()),
                            }
                        }
                    };
                    if listening.bind_failures > 0 {
                        tracing::info!(
                            "status page: http://{}/ (metrics at /metrics)",
                            browsable(addr)
                        );
                    }
                    let listener = tokio::net::TcpListener::from_std(listener)?;
                    serve_listening(listener, state, limits, served, listening, async {
                        // A dropped sender stops the server too.
                        let _ = stopped.await;
                    })
                    .await
                });
                if let Err(e) = &result {
                    tracing::error!("the HTTP server on {addr} stopped: {e}");
                }
                let _ = done_tx.send(result);
            })?;
        Ok(Server {
            addr,
            bound_at_start,
            registry,
            stop: Some(stop),
            done,
            thread: Some(thread),
        })
    }

    /// The address actually bound (the port, when 0 was asked for); the
    /// address asked for while it is not bound yet.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether the server listened from its start (else its thread waits
    /// for the address to be free, and says when it listens).
    pub fn listening_at_start(&self) -> bool {
        self.bound_at_start
    }

    /// The server's open connections, and those it closed or refused at the
    /// cap.
    pub fn connections(&self) -> &Registry {
        &self.registry
    }

    /// Stop accepting, let open requests finish for at most `grace`, and
    /// return the server's error, if it had one.
    pub fn stop(mut self, grace: Duration) -> io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.done.recv_timeout(grace) {
            Ok(result) => {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
                result
            }
            // Still draining: leave the thread; the process is exiting.
            Err(_) => Ok(()),
        }
    }
}
