//! Getting the HTTP listener when its address is not free.
//!
//! Any local user can listen on the configured port before the daemon does
//! (on loopback no privilege is needed above port 1023). Enforcement never
//! waits for the port: `headroom run` samples and acts whatever became of
//! the bind, and the server's own thread tries again with a growing delay
//! ([`retry_delay`], at most [`MAX_RETRY_DELAY`]) until the port is free,
//! saying in the log who holds it ([`explained`]) and, once it listens, how
//! long that took ([`Listening`], also in `/healthz`).

use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::oneshot;

use super::BindError;
use crate::model::Timestamp;
use crate::report::rate_limit::RateLimit;

/// The first wait before listening is tried again.
pub const FIRST_RETRY_DELAY: Duration = Duration::from_secs(1);
/// The longest wait between two tries: a port freed is taken within this.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);

/// How long to wait after `failures` failed tries (1 or more) before the
/// next: [`FIRST_RETRY_DELAY`], doubling, at most [`MAX_RETRY_DELAY`].
pub fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_RETRY_DELAY
        .saturating_mul(1 << doublings)
        .min(MAX_RETRY_DELAY)
}

/// How the server came to listen, for `/healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listening {
    /// When the listener was bound.
    pub since: Timestamp,
    /// The tries that failed before it (0: bound at start).
    pub bind_failures: u64,
    /// Why the last of them failed.
    pub last_bind_error: Option<String>,
}

impl Listening {
    /// Bound at the first try, now.
    pub fn at_once() -> Self {
        Self {
            since: Timestamp::now(),
            bind_failures: 0,
            last_bind_error: None,
        }
    }
}

/// `failed`, and who listens on the port where a connection to its address
/// arrives, in words for the log (`…; the port is held by uid 999 (alice)`),
/// where the OS tells.
pub fn explained(failed: &BindError) -> String {
    let addr = failed.addr();
    let holders = match crate::os::sockets::listener_uids(addr.ip(), addr.port()) {
        Ok(Some(uids)) => describe_holders(&uids, crate::os::user_names::user_name),
        Ok(None) => String::new(),
        Err(e) => format!(" — who holds the port cannot be read: {e}"),
    };
    format!("{failed}{holders}")
}

/// The end of a bind error that names who holds the port (` — the port is
/// held by uid 1000 (ann)`), from the uids listening there, each named by
/// `name`; empty when there are none.
pub fn describe_holders(uids: &[u32], name: impl Fn(u32) -> Option<String>) -> String {
    let mut distinct: Vec<u32> = uids.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let named: Vec<String> = distinct
        .into_iter()
        .map(|uid| match name(uid) {
            Some(user) => format!("uid {uid} ({})", crate::model::printable(&user)),
            None => format!("uid {uid}"),
        })
        .collect();
    if named.is_empty() {
        String::new()
    } else {
        format!(" — the port is held by {}", named.join(" and "))
    }
}

/// Try to listen on `addr` until it works or `stopped` fires (`None`),
/// waiting [`retry_delay`] between tries; `first` is the failure of the try
/// already made. Failures are logged at most once a minute, with who holds
/// the port.
pub async fn bind_with_retry(
    addr: SocketAddr,
    first: &BindError,
    stopped: &mut oneshot::Receiver<()>,
) -> Option<(std::net::TcpListener, Listening)> {
    let mut failures: u32 = 1;
    let mut last = explained(first);
    let mut log = RateLimit::default();
    // The first failure was logged where it happened.
    let _ = log.due(std::time::Instant::now());
    loop {
        tokio::select! {
            _ = &mut *stopped => return None,
            () = tokio::time::sleep(retry_delay(failures)) => {}
        }
        match super::bind(addr) {
            Ok(listener) => {
                let listening = Listening {
                    since: Timestamp::now(),
                    bind_failures: u64::from(failures),
                    last_bind_error: Some(last),
                };
                tracing::info!(
                    "HTTP: listening on {addr} after {failures} failed tries (the last: {})",
                    listening.last_bind_error.as_deref().unwrap_or_default()
                );
                return Some((listener, listening));
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                last = explained(&e);
                if let Some(more) = log.due(std::time::Instant::now()) {
                    tracing::warn!(
                        "still no HTTP listener ({failures} tries): {last}; sampling and acting go \
                         on, trying again every {} s{more}",
                        MAX_RETRY_DELAY.as_secs()
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_from_one_second_up_to_five() {
        let delays: Vec<u64> = (1..=6).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5, 5]);
        assert_eq!(retry_delay(0), FIRST_RETRY_DELAY);
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_DELAY);
    }

    #[test]
    fn holders_are_named_once_each() {
        let name = |uid| (uid == 999).then(|| "mallory".to_string());
        assert_eq!(
            describe_holders(&[999, 999], name),
            " — the port is held by uid 999 (mallory)"
        );
        assert_eq!(
            describe_holders(&[1001, 999], name),
            " — the port is held by uid 999 (mallory) and uid 1001"
        );
        assert_eq!(describe_holders(&[], name), "");
    }

    #[test]
    fn a_holders_name_is_escaped() {
        let name = |_| Some("evil\n\u{1b}[31m".to_string());
        let said = describe_holders(&[5], name);
        assert!(!said.contains('\n') && !said.contains('\u{1b}'), "{said}");
    }
}
