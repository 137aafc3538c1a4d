//! The connections under the router: accepted by our own loop and served by
//! hyper's HTTP/1, within bounds that no client can push the daemon past.
//!
//! - **A cap on open connections** ([`ServerLimits::max_connections`], kept within
//!   the share of the open-file limit left after the descriptors reserved
//!   for enforcement, [`crate::os::fd_limit`]). At the cap the connection idle the longest
//!   (no request under way) is closed to make room, so a crowd of idle
//!   sockets cannot lock out `/healthz`; when every connection is busy the
//!   newcomer gets a canned 503 and is closed at once, so no descriptor
//!   piles up and the listen backlog keeps draining.
//! - **Timeouts**: the request head must arrive within
//!   [`ServerLimits::header_read_timeout`] (hyper's timer, which also runs while a
//!   kept-alive connection waits for its next request); a connection on which
//!   nothing moves either way for [`ServerLimits::idle_timeout`] is closed, which
//!   also ends an answer its client stopped reading.
//! - **Small buffers**: at most [`ServerLimits::max_buf_size`] of request head is
//!   buffered per connection; a longer head gets 431 and the connection ends.
//! - **Gates** ([`super::gates`]): event streams and large answers each have
//!   a fixed number of permits, and each viewer only a share of them, so
//!   they cannot take all connections or memory, nor one user all of them.
//!
//! Each request carries the client's address (`ConnectInfo<SocketAddr>`),
//! the server's ([`LocalAddr`]) and the connection's [`Peer`], whose uid is
//! looked up once per connection when a handler first needs it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt as _;

use super::viewer::{LocalAddr, Peer};
use crate::config::HttpConfig;
use crate::os::fd_limit;
use crate::report::rate_limit::RateLimit;

/// The bounds the server keeps. [`ServerLimits::default`] for tests and the
/// router alone; [`ServerLimits::for_config`] for the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// `/api/v1/stream` clients at once.
    pub max_streams: usize,
    /// Of those, the streams one viewer may hold.
    pub streams_per_viewer: usize,
    /// Answers that carry process lists (snapshot, processes) under way at once.
    pub max_large_responses: usize,
    /// Of those, the answers one viewer may have under way.
    pub large_responses_per_viewer: usize,
    /// How long a request waits for a large-answer permit before a 503.
    pub large_response_wait: Duration,
    /// Time allowed for a request head, from when the server starts reading it.
    pub header_read_timeout: Duration,
    /// A connection on which nothing is read or written for this long is closed.
    pub idle_timeout: Duration,
    /// Request head buffered per connection (hyper's minimum is 8 KiB). 32 KiB
    /// holds any browser's head and a 16 KiB query string, which then gets
    /// its 400 naming the parameter; a longer head gets 431.
    pub max_buf_size: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_connections: HttpConfig::DEFAULT_MAX_CONNECTIONS,
            max_streams: 16,
            streams_per_viewer: 4,
            max_large_responses: 4,
            large_responses_per_viewer: 1,
            large_response_wait: Duration::from_secs(2),
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            max_buf_size: 32 * 1024,
        }
    }
}

impl ServerLimits {
    /// The limits for `http`, with the connection cap kept within what
    /// `open_files` (the soft open-file limit, where known) leaves after the
    /// reserve; the second value says why the configured cap was lowered.
    pub fn for_config(
        http: &HttpConfig,
        open_files: Option<u64>,
    ) -> (ServerLimits, Option<String>) {
        let configured = http.max_connections;
        let (cap, why) = match open_files {
            Some(soft) => {
                let budget = fd_limit::http_connection_budget(soft);
                if budget < configured {
                    (
                        budget,
                        Some(format!(
                            "http.max_connections lowered from {configured} to {budget}: the open-file \
                             limit is {soft}, {} descriptors are kept for sampling and actions and \
                             half the rest for the sampler's open files; raise the limit \
                             (LimitNOFILE= in the systemd unit, ulimit -n) to allow more",
                            fd_limit::RESERVED_FDS
                        )),
                    )
                } else {
                    (configured, None)
                }
            }
            None => (configured, None),
        };
        let limits = ServerLimits {
            max_connections: cap.max(1),
            ..ServerLimits::default()
        };
        (limits, why)
    }
}

/// What a connection refused at the cap reads before it is closed.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 82\r\n\
\r\n\
{\"error\":\"too many connections: every connection is busy; try again in a moment\"}\n";

/// The open connections, and which one to close when a new one needs room.
#[derive(Debug)]
pub struct Registry {
    cap: usize,
    inner: Mutex<Open>,
    evicted: AtomicU64,
    refused: AtomicU64,
}

#[derive(Debug, Default)]
struct Open {
    next: u64,
    slots: HashMap<u64, Slot>,
}

#[derive(Debug)]
struct Slot {
    /// Requests under way, until their answer is sent or dropped.
    busy: u32,
    /// When the connection opened or its last answer ended.
    idle_since: Instant,
    evict: Arc<Notify>,
}

/// A connection let in: its id and what tells it to close.
struct Admitted {
    id: u64,
    evict: Arc<Notify>,
}

impl Registry {
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            inner: Mutex::new(Open::default()),
            evicted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Let a connection in, closing the longest-idle one at the cap; `None`
    /// when every open connection is busy.
    fn admit(&self) -> Option<Admitted> {
        let mut open = self.lock();
        if open.slots.len() >= self.cap {
            let idlest = open
                .slots
                .iter()
                .filter(|(_, s)| s.busy == 0)
                .min_by_key(|(id, s)| (s.idle_since, **id))
                .map(|(id, _)| *id);
            let slot = idlest.and_then(|id| open.slots.remove(&id));
            match slot {
                Some(slot) => {
                    slot.evict.notify_one();
                    self.evicted.fetch_add(1, Ordering::Relaxed);
                }
                None => {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
            }
        }
        let id = open.next;
        open.next += 1;
        let evict = Arc::new(Notify::new());
        open.slots.insert(
            id,
            Slot {
                busy: 0,
                idle_since: Instant::now(),
                evict: Arc::clone(&evict),
            },
        );
        Some(Admitted { id, evict })
    }

    fn set_busy(&self, id: u64, start: bool) {
        let mut open = self.lock();
        if let Some(slot) = open.slots.get_mut(&id) {
            if start {
                slot.busy += 1;
            } else {
                slot.busy = slot.busy.saturating_sub(1);
                slot.idle_since = Instant::now();
            }
        }
    }

    fn leave(&self, id: u64) {
        self.lock().slots.remove(&id);
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.lock().slots.len()
    }

    /// Idle connections closed to make room, since start.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Connections refused because every one was busy, since start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// Marks a connection busy while a request and its answer are under way.
struct Busy {
    registry: Arc<Registry>,
    id: u64,
}

impl Busy {
    fn start(registry: &Arc<Registry>, id: u64) -> Self {
        registry.set_busy(id, true);
        Self {
            registry: Arc::clone(registry),
            id,
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.registry.set_busy(self.id, false);
    }
}

/// Takes a connection out of the registry however its task ends.
struct Leave {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        self.registry.leave(self.id);
    }
}

/// An answer's body that keeps its connection marked busy until it is sent
/// or dropped.
struct BusyBody {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for BusyBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A socket that fails with `TimedOut` once nothing has been read from or
/// written to it for `idle` while the server waits on it.
struct IdleTimeout<T> {
    io: T,
    idle: Duration,
    last: Instant,
    timer: Pin<Box<Sleep>>,
}

impl<T> IdleTimeout<T> {
    fn new(io: T, idle: Duration) -> Self {
        let now = Instant::now();
        Self {
            io,
            idle,
            last: now,
            timer: Box::pin(tokio::time::sleep_until(now + idle)),
        }
    }

    /// Called when the socket is not ready: pending until the idle time is
    /// up, then the error that ends the connection.
    fn pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let deadline = self.last + self.idle;
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("nothing sent or received for {:?}", self.idle),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleTimeout<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.last = Instant::now();
                }
                Poll::Ready(result)
            }
            Poll::Pending => this.pending(cx),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write(cx, data) {
            Poll::Ready(result) => {
                if matches!(result, Ok(n) if n > 0) {
                    this.last = Instant::now();
                }
                Poll::Ready(result)
            }
            Poll::Pending => this.pending(cx).map(|r| r.map(|()| 0)),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => {
                if matches!(result, Ok(n) if n > 0) {
                    this.last = Instant::now();
                }
                Poll::Ready(result)
            }
            Poll::Pending => this.pending(cx).map(|r| r.map(|()| 0)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_flush(cx) {
            Poll::Ready(result) => Poll::Ready(result),
            Poll::Pending => this.pending(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Serve `router` on `listener` within `limits` until `shutdown` completes,
/// then let open requests finish (event streams end when the daemon stops).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let server = listener.local_addr()?;
    let limits = Arc::new(limits);
    let (stop, stopping) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut refusals = RateLimit::default();
    let mut accept_errors = RateLimit::default();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, client)) => match registry.admit() {
                    Some(admitted) => {
                        tasks.spawn(connection(
                            stream,
                            client,
                            server,
                            router.clone(),
                            Arc::clone(&registry),
                            admitted,
                            Arc::clone(&limits),
                            stopping.clone(),
                        ));
                    }
                    None => {
                        // Best effort: the socket is closed whatever happens.
                        let _ = stream.try_write(REFUSED);
                        drop(stream);
                        if let Some(more) = refusals.due(Instant::now().into_std()) {
                            tracing::warn!(
                                "HTTP connection from {client} refused: all {} connections are busy \
                                 (http.max_connections){more}",
                                limits.max_connections,
                            );
                        }
                    }
                },
                Err(e) => {
                    if !is_per_connection(&e) {
                        if let Some(more) = accept_errors.due(Instant::now().into_std()) {
                            tracing::warn!("cannot accept HTTP connections on {server}: {e}{more}");
                        }
                        // Out of descriptors or memory: let enforcement have them.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// Errors of one connection that came and went, not of the listener.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

#[expect(clippy::too_many_arguments, reason = "one connection's whole context")]
async fn connection(
    stream: TcpStream,
    client: SocketAddr,
    server: SocketAddr,
    router: Router,
    registry: Arc<Registry>,
    admitted: Admitted,
    limits: Arc<ServerLimits>,
    mut stopping: watch::Receiver<bool>,
) {
    let id = admitted.id;
    let _leave = Leave {
        registry: Arc::clone(&registry),
        id,
    };
    // Small answers go out at once rather than after the peer's delayed ACK.
    let _ = stream.set_nodelay(true);
    let peer = Peer::new(client, server);
    let service = service_fn(move |mut request: hyper::Request<Incoming>| {
        let extensions = request.extensions_mut();
        extensions.insert(ConnectInfo(client));
        extensions.insert(LocalAddr(server));
        extensions.insert(peer.clone());
        let busy = Busy::start(&registry, id);
        let router = router.clone();
        async move {
            let response = match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(response.map(|body| BusyBody { body, _busy: busy }))
        }
    });
    let io = TokioIo::new(IdleTimeout::new(stream, limits.idle_timeout));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_buf_size.max(8192))
        .keep_alive(true);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut draining = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!("HTTP connection from {client} ended: {e}");
                }
                break;
            }
            () = admitted.evict.notified() => {
                tracing::debug!("HTTP connection from {client} closed to make room for a new one");
                break;
            }
            _ = stopping.changed(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_answer() {
        let text = std::str::from_utf8(REFUSED).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("too many connections")
        );
    }

    #[test]
    fn the_cap_follows_the_open_file_limit() {
        let http = HttpConfig::default();
        let (limits, why) = ServerLimits::for_config(&http, Some(1024));
        assert_eq!((limits.max_connections, why), (256, None));
        let (limits, why) = ServerLimits::for_config(&http, Some(512));
        assert_eq!(limits.max_connections, 128);
        let why = why.expect("a reason");
        assert!(
            why.contains("lowered from 256 to 128") && why.contains("512"),
            "{why}"
        );
        let (limits, _) = ServerLimits::for_config(&http, Some(100));
        assert_eq!(limits.max_connections, fd_limit::MIN_HTTP_CONNECTIONS);
        let (limits, why) = ServerLimits::for_config(&http, None);
        assert_eq!((limits.max_connections, why), (256, None));
    }

    #[tokio::test]
    async fn at_the_cap_the_longest_idle_connection_makes_room() {
        let registry = Arc::new(Registry::new(2));
        let first = registry.admit().unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
        let second = registry.admit().unwrap();
        let _busy = Busy::start(&registry, second.id);
        let third = registry.admit().expect("room made");
        assert_eq!(registry.open(), 2);
        assert_eq!(registry.evicted(), 1);
        // The first was told to close; it is no longer counted.
        tokio::time::timeout(Duration::from_secs(1), first.evict.notified())
            .await
            .expect("the idlest connection is told to close");
        let _busy3 = Busy::start(&registry, third.id);
        assert!(registry.admit().is_none(), "every connection is busy");
        assert_eq!(registry.refused(), 1);
    }

    #[tokio::test]
    async fn a_connection_that_ends_leaves_the_registry() {
        let registry = Arc::new(Registry::new(4));
        let a = registry.admit().unwrap();
        drop(Leave {
            registry: Arc::clone(&registry),
            id: a.id,
        });
        assert_eq!(registry.open(), 0);
    }

    #[tokio::test]
    async fn a_silent_socket_times_out() {
        let (client, server) = tokio::io::duplex(64);
        let mut io = IdleTimeout::new(server, Duration::from_millis(50));
        let mut buf = [0u8; 8];
        let started = std::time::Instant::now();
        let e = tokio::io::AsyncReadExt::read(&mut io, &mut buf)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(50));
        drop(client);
    }
}
