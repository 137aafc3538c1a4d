//! Permits for the answers that hold resources for long, event streams and
//! answers carrying process lists, shared out between viewers.
//!
//! Each kind has a fixed number of permits for the whole server
//! ([`ServerLimits::max_streams`], [`ServerLimits::max_large_responses`]), so that
//! together they cannot take every connection or much memory. Each viewer
//! ([`ViewerKey`]: the uid owning the client's socket, a remote client's
//! address, or every unidentified loopback client together) may hold only a
//! share of them ([`ServerLimits::streams_per_viewer`],
//! [`ServerLimits::large_responses_per_viewer`]). A local user who opens streams,
//! or asks for snapshots and never reads them, so holds at most their own
//! share and cannot lock anyone else out of the status page or the API.
//!
//! A viewer's share is taken before a server-wide permit, so requests
//! waiting on their own share hold nothing that others need.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::ApiError;
use super::server::ServerLimits;
use super::viewer::ViewerKey;

/// The two gates the router's handlers pass through.
#[derive(Debug)]
pub struct Gates {
    streams: Pool,
    large: Pool,
    large_wait: Duration,
}

/// A permit held: the viewer's share and the server-wide permit, let go
/// together when the answer is sent or dropped.
#[derive(Debug)]
pub struct Permit {
    _share: OwnedSemaphorePermit,
    _all: OwnedSemaphorePermit,
}

impl Gates {
    pub fn new(limits: &ServerLimits) -> Arc<Gates> {
        Arc::new(Gates {
            streams: Pool::new(limits.max_streams, limits.streams_per_viewer),
            large: Pool::new(
                limits.max_large_responses,
                limits.large_responses_per_viewer,
            ),
            large_wait: limits.large_response_wait,
        })
    }

    /// A permit for one event stream, or 503 when the viewer's share or
    /// the server's streams are all taken.
    pub fn stream(&self, viewer: ViewerKey) -> Result<Permit, ApiError> {
        let pool = &self.streams;
        let share = pool.share_of(viewer).try_acquire_owned().map_err(|_| {
            busy(format!(
                "{viewer} already has as many event streams open as one viewer gets ({}); \
                 close one (a status page tab) or try again later",
                pool.share
            ))
        })?;
        let all = Arc::clone(&pool.all).try_acquire_owned().map_err(|_| {
            busy(format!(
                "{} event streams are open already, the most this daemon serves at once; \
                 close one (a status page tab) or try again later",
                pool.max
            ))
        })?;
        Ok(Permit {
            _share: share,
            _all: all,
        })
    }

    /// A permit for one large answer, waiting a little for the viewer's
    /// share and then a server-wide permit to free up.
    pub async fn large(&self, viewer: ViewerKey) -> Result<Permit, ApiError> {
        let pool = &self.large;
        let deadline = Instant::now() + self.large_wait;
        let share = pool.share_of(viewer).acquire_owned();
        let share = match tokio::time::timeout_at(deadline, share).await {
            Ok(Ok(permit)) => permit,
            _ => {
                return Err(busy(format!(
                    "{viewer} already has as many answers with process lists under way as \
                     one viewer gets at once ({}); read or close them, or try again in a moment",
                    pool.share
                )));
            }
        };
        let all = Arc::clone(&pool.all).acquire_owned();
        let all = match tokio::time::timeout_at(deadline, all).await {
            Ok(Ok(permit)) => permit,
            _ => {
                return Err(busy(format!(
                    "{} answers with process lists are being sent already, the most at once; \
                     try again in a moment",
                    pool.max
                )));
            }
        };
        Ok(Permit {
            _share: share,
            _all: all,
        })
    }

    /// Event streams open now.
    pub fn streams_open(&self) -> usize {
        self.streams.in_use()
    }

    /// Large answers under way now.
    pub fn large_under_way(&self) -> usize {
        self.large.in_use()
    }
}

fn busy(message: String) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
}

/// One kind of permit: a server-wide count, and each viewer's share of it.
#[derive(Debug)]
struct Pool {
    all: Arc<Semaphore>,
    max: usize,
    share: usize,
    /// The shares of viewers seen; one with nothing held or awaited is
    /// forgotten when a new viewer comes, so this holds at most the viewers
    /// with a request under way, plus one.
    viewers: Mutex<HashMap<ViewerKey, Arc<Semaphore>>>,
}

impl Pool {
    fn new(max: usize, share: usize) -> Self {
        let max = max.max(1);
        Self {
            all: Arc::new(Semaphore::new(max)),
            max,
            share: share.max(1),
            viewers: Mutex::new(HashMap::new()),
        }
    }

    /// `viewer`'s share, made on its first request.
    fn share_of(&self, viewer: ViewerKey) -> Arc<Semaphore> {
        let mut viewers = self.viewers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(share) = viewers.get(&viewer) {
            return Arc::clone(share);
        }
        // A permit held or a wait under way keeps a second reference.
        viewers.retain(|_, share| Arc::strong_count(share) > 1);
        let share = Arc::new(Semaphore::new(self.share));
        viewers.insert(viewer, Arc::clone(&share));
        share
    }

    fn in_use(&self) -> usize {
        self.max.saturating_sub(self.all.available_permits())
    }

    #[cfg(test)]
    fn viewers_known(&self) -> usize {
        self.viewers.lock().map(|v| v.len()).unwrap_or(0)
    }
}

impl fmt::Display for ViewerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViewerKey::Uid(uid) => write!(f, "uid {uid}"),
            ViewerKey::Remote(ip) => write!(f, "client {ip}"),
            ViewerKey::Unidentified => write!(f, "the unidentified local clients"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    fn gates(max: usize, share: usize) -> Arc<Gates> {
        Gates::new(&ServerLimits {
            max_streams: max,
            streams_per_viewer: share,
            max_large_responses: max,
            large_responses_per_viewer: share,
            large_response_wait: Duration::from_millis(20),
            ..ServerLimits::default()
        })
    }

    const ALICE: ViewerKey = ViewerKey::Uid(1000);
    const BOB: ViewerKey = ViewerKey::Uid(1001);
    const ROOT: ViewerKey = ViewerKey::Uid(0);

    #[tokio::test]
    async fn one_viewer_holding_its_share_leaves_the_rest_to_others() {
        let gates = gates(4, 1);
        let alices = gates.large(ALICE).await.unwrap();
        let refused = gates.large(ALICE).await.unwrap_err();
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refused
                .message
                .contains("uid 1000 already has as many answers"),
            "{}",
            refused.message
        );
        let bobs = gates.large(BOB).await.expect("bob's share is his own");
        let roots = gates.large(ROOT).await.expect("root's share too");
        drop(alices);
        let again = gates.large(ALICE).await.expect("alice's share is back");
        drop((bobs, roots, again));
    }

    #[tokio::test]
    async fn the_server_wide_cap_still_holds_across_viewers() {
        let gates = gates(2, 1);
        let a = gates.large(ALICE).await.unwrap();
        let b = gates.large(BOB).await.unwrap();
        let refused = gates.large(ROOT).await.unwrap_err();
        assert!(
            refused
                .message
                .contains("2 answers with process lists are being sent"),
            "{}",
            refused.message
        );
        drop(a);
        let r = gates.large(ROOT).await.expect("a permit freed up");
        drop((b, r));
    }

    #[tokio::test]
    async fn a_waiting_request_gets_its_share_when_it_frees_within_the_wait() {
        let gates = Gates::new(&ServerLimits {
            large_response_wait: Duration::from_secs(5),
            ..ServerLimits::default()
        });
        let held = gates.large(ALICE).await.unwrap();
        let waiter = {
            let gates = Arc::clone(&gates);
            tokio::spawn(async move { gates.large(ALICE).await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second waits for the first");
        drop(held);
        waiter
            .await
            .unwrap()
            .expect("served once the first is sent");
    }

    #[tokio::test]
    async fn streams_are_shared_out_the_same_way() {
        let gates = gates(3, 2);
        let a1 = gates.stream(ALICE).unwrap();
        let a2 = gates.stream(ALICE).unwrap();
        let refused = gates.stream(ALICE).unwrap_err();
        assert!(
            refused
                .message
                .contains("uid 1000 already has as many event streams open as one viewer gets (2)"),
            "{}",
            refused.message
        );
        assert_eq!(gates.streams_open(), 2);
        let b1 = gates.stream(BOB).unwrap();
        let refused = gates.stream(ROOT).unwrap_err();
        assert!(
            refused.message.contains("3 event streams are open already"),
            "{}",
            refused.message
        );
        drop(a1);
        assert!(gates.stream(ROOT).is_ok());
        drop((a2, b1));
        assert_eq!(gates.streams_open(), 0);
    }

    #[tokio::test]
    async fn viewers_with_nothing_under_way_are_forgotten() {
        let gates = gates(4, 1);
        for uid in 0..1000 {
            drop(gates.stream(ViewerKey::Uid(uid)).unwrap());
        }
        assert!(gates.streams.viewers_known() <= 1);
        let held = gates.stream(ALICE).unwrap();
        drop(gates.stream(ViewerKey::Remote(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5)))));
        drop(gates.stream(ViewerKey::Unidentified));
        assert_eq!(
            gates.streams.viewers_known(),
            2,
            "alice, holding a stream, and the last newcomer"
        );
        drop(held);
    }

    #[test]
    fn a_share_is_at_least_one() {
        assert_eq!(Pool::new(4, 0).share, 1);
    }

    #[test]
    fn viewers_are_named_in_refusals() {
        assert_eq!(ALICE.to_string(), "uid 1000");
        assert_eq!(
            ViewerKey::Remote(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5))).to_string(),
            "client 10.0.0.5"
        );
        assert_eq!(
            ViewerKey::Unidentified.to_string(),
            "the unidentified local clients"
        );
    }
}
