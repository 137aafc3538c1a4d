//! The commands' HTTP client of a running daemon (`status`, `explain`):
//! its address made reachable, one timeout for every request, and the
//! answer's status and body, whatever the status.

use std::net::SocketAddr;
use std::time::Duration;

use ureq::http::StatusCode;

/// How long each request to the daemon may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The address to put in a URL: an unspecified address (0.0.0.0, [::]) is
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

/// Why a request got no answer to read.
#[derive(Debug, thiserror::Error)]
pub enum GetError {
    /// Nothing answered: no daemon there, or it took longer than the timeout.
    #[error("no headroom daemon answers at {addr} ({error})")]
    NoAnswer { addr: SocketAddr, error: String },
    /// Something answered, but its body could not be read.
    #[error("cannot read the answer from {url}: {error}")]
    Unreadable { url: String, error: String },
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

    /// GET `path`: the status and the body, an error status included.
    pub fn get(&self, path: &str) -> Result<(StatusCode, String), GetError> {
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
