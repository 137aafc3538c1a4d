//! The commands' HTTP client of a running daemon (`status`, `explain`):
//! its address made reachable, one timeout for every request, and the
//! answer's status and body, whatever the status.
//!
//! Any local user can listen on the daemon's port while the daemon does
//! not (before it starts, or while it waits for the port), and answer in
//! its place. So before each request the client asks the OS who listens
//! there ([`crate::os::sockets::listener_uids`]), and sends nothing to a
//! listener of any uid but root's (a system daemon) or the client's own (a
//! daemon the user runs): it refuses, naming the port, the holder and what
//! to do ([`judge_listeners`]). Where the OS does not list sockets' owners
//! to this user (macOS), the request goes out unchecked.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use ureq::http::StatusCode;

/// How long each request to the daemon may take.
const TIMEOUT: Duration = Duration::from_secs(5);

pub use crate::http::browsable;

/// Why a request got no answer to read.
#[derive(Debug, thiserror::Error)]
pub enum GetError {
    /// Nothing answered: no daemon there, or it took longer than the timeout.
    #[error("no headroom daemon answers at {addr} ({error})")]
    NoAnswer { addr: SocketAddr, error: String },
    /// Something answered, but its body could not be read.
    #[error("cannot read the answer from {url}: {error}")]
    Unreadable { url: String, error: String },
    /// A process of another user holds the port: its answers would be
    /// anyone's, so nothing was sent.
    #[error(
        "port {port} on {ip} is held by uid {uid}{user}, not by root or by you (uid {me}): \
         a headroom daemon there runs as one of those, so this is another user's program \
         and nothing was asked of it; stop it (`ss -ltnp 'sport = :{port}'` as root shows \
         it), or give the daemon another port (`http.listen`, `headroom run --listen`) and \
         pass that --address",
        ip = addr.ip(),
        port = addr.port(),
        user = user.as_deref().map(|u| format!(" ({u})")).unwrap_or_default()
    )]
    NotTheDaemon {
        addr: SocketAddr,
        uid: u32,
        user: Option<String>,
        me: u32,
    },
    /// Who holds the port could not be read, so nothing was sent.
    #[error(
        "cannot tell who listens on port {port} ({error}), so nothing was asked of it: \
         its answers might be another user's; run the command again, or as root",
        port = addr.port()
    )]
    HolderUnknown { addr: SocketAddr, error: String },
}

/// Whose listener answers at the daemon's address, as far as the OS says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortHolder {
    /// A socket of this uid (root or the client's own) listens there.
    Trusted(u32),
    /// Nothing listens there: a request gets no answer.
    Nobody,
    /// The OS does not list sockets' owners (to this user).
    Unknown,
}

/// Whether a request may go to `addr`, from the uids listening there
/// (`Ok(None)`: the OS does not say) and the client's own uid `me`: every
/// listener must be root's or `me`'s. `name` names a refused uid.
pub fn judge_listeners(
    addr: SocketAddr,
    listeners: io::Result<Option<Vec<u32>>>,
    me: u32,
    name: impl Fn(u32) -> Option<String>,
) -> Result<PortHolder, GetError> {
    match listeners {
        Ok(None) => Ok(PortHolder::Unknown),
        Ok(Some(uids)) => match uids.iter().find(|&&uid| uid != 0 && uid != me) {
            Some(&uid) => Err(GetError::NotTheDaemon {
                addr,
                uid,
                user: name(uid).map(|u| crate::model::printable(&u).into_owned()),
                me,
            }),
            None => Ok(uids
                .first()
                .map_or(PortHolder::Nobody, |&uid| PortHolder::Trusted(uid))),
        },
        Err(e) => Err(GetError::HolderUnknown {
            addr,
            error: e.to_string(),
        }),
    }
}

/// Requests to the daemon at one address.
pub struct DaemonClient {
    agent: ureq::Agent,
    addr: SocketAddr,
}

impl DaemonClient {
    /// A client of the daemon listening on `addr` ([`browsable`] applied).
    pub fn new(addr: SocketAddr) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        Self {
            agent,
            addr: browsable(addr),
        }
    }

    /// The address requests go to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL of `path` (`/api/v1/snapshot`) on the daemon.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Who holds the daemon's address now; an error where it is another
    /// user ([`judge_listeners`]).
    pub fn holder(&self) -> Result<PortHolder, GetError> {
        judge_listeners(
            self.addr,
            crate::os::sockets::listener_uids(self.addr.ip(), self.addr.port()),
            crate::os::this_process::effective_uid(),
            crate::os::user_names::user_name,
        )
    }

    /// GET `path`: the status and the body, an error status included.
    /// Nothing is sent to a listener of another user ([`Self::holder`]).
    pub fn get(&self, path: &str) -> Result<(StatusCode, String), GetError> {
        self.holder()?;
        let url = self.url(path);
        let mut response = self
            .agent
            .get(&url)
            .call()
            .map_err(|e| GetError::NoAnswer {
                addr: self.addr,
                error: e.to_string(),
            })?;
        let status = response.status();
        let body = response
            .body_mut()
            .read_to_string()
            .map_err(|e| GetError::Unreadable {
                url,
                error: e.to_string(),
            })?;
        Ok((status, body))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn an_unspecified_address_is_reached_through_loopback() {
        let v4: SocketAddr = "0.0.0.0:9717".parse().unwrap();
        assert_eq!(browsable(v4), "127.0.0.1:9717".parse().unwrap());
        let v6: SocketAddr = "[::]:9717".parse().unwrap();
        assert_eq!(browsable(v6), "[::1]:9717".parse().unwrap());
        let lan: SocketAddr = "192.0.2.7:9717".parse().unwrap();
        assert_eq!(browsable(lan), lan);
    }

    const ADDR: &str = "127.0.0.1:9717";

    fn judged(listeners: io::Result<Option<Vec<u32>>>, me: u32) -> Result<PortHolder, GetError> {
        let name = |uid| (uid == 999).then(|| "mallory".to_string());
        judge_listeners(ADDR.parse().unwrap(), listeners, me, name)
    }

    #[test]
    fn a_listener_of_root_or_of_the_client_is_trusted() {
        assert_eq!(
            judged(Ok(Some(vec![0])), 1000).unwrap(),
            PortHolder::Trusted(0)
        );
        assert_eq!(
            judged(Ok(Some(vec![1000, 1000])), 1000).unwrap(),
            PortHolder::Trusted(1000)
        );
        assert_eq!(
            judged(Ok(Some(vec![0])), 0).unwrap(),
            PortHolder::Trusted(0)
        );
    }

    #[test]
    fn a_listener_of_another_user_is_refused_naming_port_uid_and_user() {
        let e = judged(Ok(Some(vec![999])), 0).unwrap_err();
        let said = e.to_string();
        assert!(
            matches!(e, GetError::NotTheDaemon { uid: 999, .. }),
            "{said}"
        );
        assert!(
            said.starts_with(
                "port 9717 on 127.0.0.1 is held by uid 999 (mallory), not by root or by you (uid 0)"
            ),
            "{said}"
        );
        assert!(said.contains("--address"), "{said}");
        // One of several listeners is enough (a wildcard and a loopback one).
        let e = judged(Ok(Some(vec![0, 1001])), 1000).unwrap_err();
        assert!(e.to_string().contains("uid 1001, not"), "{e}");
    }

    #[test]
    fn a_root_client_refuses_a_users_listener() {
        let e = judged(Ok(Some(vec![1000])), 0).unwrap_err();
        assert!(
            matches!(
                e,
                GetError::NotTheDaemon {
                    uid: 1000,
                    user: None,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn nobody_listening_or_an_os_that_does_not_say_lets_the_request_go() {
        assert_eq!(judged(Ok(Some(vec![])), 1000).unwrap(), PortHolder::Nobody);
        assert_eq!(judged(Ok(None), 1000).unwrap(), PortHolder::Unknown);
    }

    #[test]
    fn an_unreadable_socket_table_sends_nothing() {
        let e = judged(Err(io::Error::other("EACCES")), 1000).unwrap_err();
        assert!(matches!(e, GetError::HolderUnknown { .. }), "{e}");
        assert!(e.to_string().contains("port 9717 (EACCES)"), "{e}");
    }

    #[test]
    fn an_error_status_comes_back_with_its_body() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).unwrap();
            let body = r#"{"error":"no sample yet"}"#;
            write!(
                stream,
                "HTTP/1.1 503 Service Unavailable\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        });
        let (status, body) = DaemonClient::new(addr).get("/api/v1/snapshot").unwrap();
        server.join().unwrap();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, r#"{"error":"no sample yet"}"#);
    }

    #[test]
    fn no_listener_is_no_answer_naming_the_address() {
        // A port that was free a moment ago: bound, then released.
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = DaemonClient::new(addr).get("/healthz").unwrap_err();
        assert!(matches!(err, GetError::NoAnswer { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("no headroom daemon answers at {addr} (")),
            "{err}"
        );
    }
}
