//! One Jupyter server's `/api/sessions`: which notebook each kernel runs.
//!
//! [`sessions_url`] turns a server's url into the address to ask, and
//! refuses any that is not on this machine: the request carries the
//! server's token, a credential that must not leave the host. [`fetch`] asks
//! with a short timeout, no proxy and no redirects; [`parse_sessions`] reads
//! the answer, keeping the sessions that have a kernel.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use serde::Deserialize;

use super::runtime::ServerInfo;
use crate::model::text_caps::{NAME_MAX, PATH_MAX, cap, cap_opt};

/// How long one server may take to answer.
pub const TIMEOUT: Duration = Duration::from_secs(1);

/// The largest answer read (a session is a few hundred bytes).
const MAX_BODY: u64 = 4 << 20;

/// One kernel of a server's sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSession {
    pub kernel_id: String,
    /// The notebook (or console, or file) path, relative to the server's root.
    pub path: String,
    /// The kernel spec's name (`python3`), where given.
    pub kernel_name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawSession {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    notebook: Option<RawNotebook>,
    #[serde(default)]
    kernel: Option<RawKernel>,
}

#[derive(Debug, Deserialize)]
struct RawNotebook {
    #[serde(default)]
    path: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawKernel {
    id: String,
    #[serde(default)]
    name: Option<String>,
}

/// Parse the body of `GET /api/sessions`: a JSON array of sessions. The path
/// is the session's `path` (jupyter_server, Notebook ≥ 5) or its
/// `notebook.path` (older servers). Sessions without a kernel or a path are
/// left out, and so are those whose kernel id is longer than a file name
/// (no kernel's connection file can carry it). The server is another
/// user's: a path is kept to [`PATH_MAX`] bytes and a kernel spec's name to
/// [`NAME_MAX`] (see [`crate::model::text_caps`]).
pub fn parse_sessions(body: &str) -> Result<Vec<KernelSession>, String> {
    let raw: Vec<RawSession> = serde_json::from_str(body).map_err(|e| {
        let start: String = body.chars().take(80).collect();
        format!("the answer is not a list of sessions ({e}); it starts with {start:?}")
    })?;
    Ok(raw
        .into_iter()
        .filter_map(|s| {
            let kernel = s.kernel.filter(|k| k.id.len() <= NAME_MAX)?;
            let path = s
                .path
                .filter(|p| !p.is_empty())
                .or_else(|| s.notebook.and_then(|n| n.path))
                .filter(|p| !p.is_empty())?;
            Some(KernelSession {
                kernel_id: kernel.id,
                path: cap(path, PATH_MAX),
                kernel_name: cap_opt(kernel.name.filter(|n| !n.is_empty()), NAME_MAX),
            })
        })
        .collect())
}

/// Where a server is asked: the loopback address and port the request
/// goes to, and the full `/api/sessions` url.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub ip: IpAddr,
    pub port: u16,
    pub url: String,
}

/// The `/api/sessions` address of a server at `url`, with the host pinned to
/// a loopback address. A server listening on every interface (`0.0.0.0`,
/// `::`) is asked on loopback; `localhost` is asked as `127.0.0.1` (never
/// through name resolution). Anything else is refused, with the reason.
pub fn sessions_url(url: &str) -> Result<String, String> {
    target(url).map(|t| t.url)
}

/// [`sessions_url`], with the address and port it goes to.
pub fn target(url: &str) -> Result<Target, String> {
    let rest = match url.split_once("://") {
        Some(("http", rest)) => rest,
        Some(("https", _)) => {
            return Err(
                "the server speaks https, which headroom does not query (its HTTP client has no TLS)"
                    .to_string(),
            );
        }
        _ => return Err(format!("{url:?} is not an http:// url")),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(format!("{url:?} carries user information; refused"));
    }
    let (host, port) = split_host_port(authority)
        .ok_or_else(|| format!("{url:?} has no host and port that headroom can read"))?;
    let ip = match host {
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        literal => literal.parse::<IpAddr>().map_err(|_| not_loopback(url))?,
    };
    let ip = match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip if ip.is_loopback() => ip,
        _ => return Err(not_loopback(url)),
    };
    let host = match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    // The base url (path) is kept: a server may live under /jupyter/.
    let path = path.split(['?', '#']).next().unwrap_or("/");
    let base = path.trim_end_matches('/');
    Ok(Target {
        ip,
        port,
        url: format!("http://{host}:{port}{base}/api/sessions"),
    })
}

fn not_loopback(url: &str) -> String {
    format!(
        "{url:?} is not a loopback address; headroom sends a server's token only to this machine"
    )
}

/// `127.0.0.1:8888` → (`127.0.0.1`, 8888); `[::1]:8888` → (`::1`, 8888).
fn split_host_port(authority: &str) -> Option<(&str, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        (host, after.strip_prefix(':')?)
    } else {
        authority.rsplit_once(':')?
    };
    let port = port.parse().ok()?;
    (!host.is_empty()).then_some((host, port))
}

/// Why a server's sessions could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// No answer: nothing listens (a stale runtime file), or it timed out.
    #[error("no answer from {url}: {why}")]
    NoAnswer { url: String, why: String },
    /// An answer with an error status: 403 for a token that does not work.
    #[error("{url} answered {status}{hint}")]
    Status {
        url: String,
        status: u16,
        hint: String,
    },
    /// An answer that is not a list of sessions.
    #[error("{url}: {why}")]
    Garbage { url: String, why: String },
}

/// Ask `server` for its sessions at `target` (its url's [`target`]). The
/// caller has checked that the token may go there.
pub fn fetch(
    server: &ServerInfo,
    target: &Target,
    timeout: Duration,
) -> Result<Vec<KernelSession>, FetchError> {
    let url = target.url.clone();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        // The token must reach the server itself: no proxy from the
        // environment, no redirect elsewhere.
        .proxy(None)
        .max_redirects(0)
        .build()
        .into();
    let mut request = agent.get(&url).header("Accept", "application/json");
    if !server.token.is_empty() {
        request = request.header("Authorization", format!("token {}", server.token));
    }
    let mut response = request.call().map_err(|e| FetchError::NoAnswer {
        url: url.clone(),
        why: match e {
            ureq::Error::Timeout(_) => {
                format!("nothing within {}", humantime::format_duration(timeout))
            }
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
                "connection refused: the server has stopped and left its runtime file behind, \
                 or listens elsewhere now"
                    .to_string()
            }
            other => other.to_string(),
        },
    })?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        let hint = match status {
            401 | 403 if server.token.is_empty() => {
                ": the server uses a password, not a token, so headroom cannot ask it".to_string()
            }
            401 | 403 => format!(": the token in {} was not accepted", server.file.display()),
            _ => String::new(),
        };
        return Err(FetchError::Status { url, status, hint });
    }
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .map_err(|e| FetchError::Garbage {
            url: url.clone(),
            why: format!("cannot read the answer: {e}"),
        })?;
    parse_sessions(&body).map_err(|why| FetchError::Garbage { url, why })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `GET /api/sessions` of jupyter_server 2.21.1 after `POST /api/sessions`
    /// with `{"path": "work/train.ipynb", "type": "notebook", "kernel":
    /// {"name": "python3"}}`.
    const SESSIONS: &str = r#"[{"id": "48357285-7c78-47ed-9e94-907ba22952bb", "path": "work/train.ipynb", "name": "train.ipynb", "type": "notebook", "kernel": {"id": "e0ba03a1-6bb7-409e-a3a5-0ed5604315ad", "name": "python3", "last_activity": "2026-11-22T04:43:20.575568Z", "execution_state": "starting", "connections": 0}, "notebook": {"path": "work/train.ipynb", "name": "train.ipynb"}}]"#;

    #[test]
    fn sessions_give_kernel_path_and_spec() {
        let s = parse_sessions(SESSIONS).unwrap();
        assert_eq!(
            s,
            vec![KernelSession {
                kernel_id: "e0ba03a1-6bb7-409e-a3a5-0ed5604315ad".into(),
                path: "work/train.ipynb".into(),
                kernel_name: Some("python3".into()),
            }]
        );
    }

    #[test]
    fn long_paths_are_cut_and_ids_no_kernel_can_have_are_left_out() {
        let path = "p".repeat(3_900_000);
        let name = "n".repeat(1000);
        let body = serde_json::json!([
            {"path": path, "kernel": {"id": "k1", "name": name}},
            {"path": "x.ipynb", "kernel": {"id": "i".repeat(NAME_MAX + 1)}},
        ])
        .to_string();
        let s = parse_sessions(&body).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].kernel_id, "k1");
        assert_eq!(s[0].path.len(), PATH_MAX);
        assert!(s[0].kernel_name.as_ref().unwrap().len() <= NAME_MAX);
    }

    #[test]
    fn old_servers_name_the_path_under_notebook() {
        let body = r#"[{"id": "s", "notebook": {"path": "old.ipynb"}, "kernel": {"id": "k"}}]"#;
        let s = parse_sessions(body).unwrap();
        assert_eq!(s[0].path, "old.ipynb");
        assert_eq!(s[0].kernel_name, None);
    }

    #[test]
    fn sessions_without_kernel_or_path_are_left_out() {
        let body = r#"[{"id": "a", "path": "x.ipynb", "kernel": null},
                       {"id": "b", "path": "", "kernel": {"id": "k"}}]"#;
        assert!(parse_sessions(body).unwrap().is_empty());
    }

    #[test]
    fn garbage_is_described_with_its_start() {
        let e = parse_sessions("<html>login</html>").unwrap_err();
        assert!(e.contains("not a list of sessions"), "{e}");
        assert!(e.contains("<html>login"), "{e}");
        assert!(parse_sessions(r#"{"message": "Forbidden"}"#).is_err());
    }

    #[test]
    fn loopback_urls_keep_their_base() {
        assert_eq!(
            sessions_url("http://127.0.0.1:42425/").unwrap(),
            "http://127.0.0.1:42425/api/sessions"
        );
        assert_eq!(
            sessions_url("http://localhost:8888/jupyter/").unwrap(),
            "http://127.0.0.1:8888/jupyter/api/sessions"
        );
        assert_eq!(
            sessions_url("http://[::1]:8888").unwrap(),
            "http://[::1]:8888/api/sessions"
        );
        assert_eq!(
            sessions_url("http://127.0.0.2:1/x/?token=abc").unwrap(),
            "http://127.0.0.2:1/x/api/sessions"
        );
    }

    #[test]
    fn servers_on_every_interface_are_asked_on_loopback() {
        assert_eq!(
            sessions_url("http://0.0.0.0:8888/").unwrap(),
            "http://127.0.0.1:8888/api/sessions"
        );
        assert_eq!(
            sessions_url("http://[::]:8888/").unwrap(),
            "http://[::1]:8888/api/sessions"
        );
    }

    #[test]
    fn other_hosts_are_refused() {
        for url in [
            "http://10.0.0.5:8888/",
            "http://gpu-box:8888/",
            "http://example.com:80/",
            "http://user@127.0.0.1:8888/",
            "ftp://127.0.0.1:21/",
            "http://127.0.0.1/",
        ] {
            assert!(sessions_url(url).is_err(), "{url} was accepted");
        }
        let e = sessions_url("http://10.0.0.5:8888/").unwrap_err();
        assert!(e.contains("not a loopback address"), "{e}");
        let e = sessions_url("https://127.0.0.1:8888/").unwrap_err();
        assert!(e.contains("https"), "{e}");
    }
}
