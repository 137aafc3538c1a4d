//! The `[http]` section, validated: whether the daemon serves HTTP, on which address,
//! whether a non-loopback address is allowed, how many per-process metric series
//! `/metrics` may carry, how many connections may be open at once, and whether every
//! client sees every user's command lines.

use std::net::SocketAddr;

use serde::Serialize;
use toml::Spanned;

use super::error::{ConfigError, Source};
use super::raw::RawHttp;

/// The HTTP server inside `headroom run`: `/metrics`, the JSON API and the status page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpConfig {
    /// Serve HTTP at all. Default true.
    pub enabled: bool,
    /// Address and port to listen on. Default `127.0.0.1:9717`; port 0 picks a free one.
    #[serde(serialize_with = "addr_as_string")]
    pub listen: SocketAddr,
    /// Allow `listen` to be an address other than loopback. Default false.
    pub allow_remote: bool,
    /// Most processes with their own series in `/metrics` (the largest first).
    /// Default 50; 0..=10000.
    pub max_process_series: usize,
    /// Most connections open at once; more are refused (or the longest-idle one
    /// is closed for the newcomer). Lowered at start to fit the open-file limit
    /// (`crate::os::fd_limit::http_connection_budget`). Default 256; 1..=65536.
    pub max_connections: usize,
    /// Show every process's command line, executable and notebook to every client.
    /// Default false: a client that is not root sees them only for its own user's
    /// processes (as `ps` does under `hidepid=2`).
    pub show_all_users: bool,
}

impl HttpConfig {
    pub const DEFAULT_LISTEN: &str = "127.0.0.1:9717";
    pub const DEFAULT_MAX_PROCESS_SERIES: usize = 50;
    pub const MAX_PROCESS_SERIES_LIMIT: usize = 10_000;
    pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
    pub const MAX_CONNECTIONS_LIMIT: usize = 65_536;

    /// Whether the server may listen on `addr`: loopback always, anything else only
    /// with `allow_remote`. The error says what to do.
    pub fn check_listen(addr: SocketAddr, allow_remote: bool) -> Result<(), String> {
        if addr.ip().is_loopback() || allow_remote {
            return Ok(());
        }
        Err(format!(
            "{addr} is not a loopback address: anyone who can reach it could read this \
             machine's process list; listen on 127.0.0.1 (or [::1]), or set allow_remote = true \
             (on the command line: --allow-remote) to serve the network on purpose"
        ))
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::from(([127, 0, 0, 1], 9717)),
            allow_remote: false,
            max_process_series: Self::DEFAULT_MAX_PROCESS_SERIES,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            show_all_users: false,
        }
    }
}

fn addr_as_string<S: serde::Serializer>(addr: &SocketAddr, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(addr)
}

/// Parses an `ADDRESS:PORT` as users write it: an IP address (IPv6 in brackets) and a
/// port. Host names are refused: the daemon must not depend on name resolution.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse::<SocketAddr>().map_err(|_| {
        "must be an IP address and a port such as \"127.0.0.1:9717\" or \"[::1]:9717\" \
         (host names such as localhost are not resolved)"
            .to_string()
    })
}

/// Checks `[http]` and fills in defaults.
pub(crate) fn validate(raw: RawHttp, source: &Source<'_>) -> Result<HttpConfig, ConfigError> {
    let defaults = HttpConfig::default();
    let allow_remote = raw.allow_remote.unwrap_or(defaults.allow_remote);
    let listen = match raw.listen {
        Some(text) => validate_listen(source, text, allow_remote)?,
        None => defaults.listen,
    };
    let max_process_series = match raw.max_process_series {
        Some(n) => {
            let span = n.span();
            let n = *n.get_ref();
            match usize::try_from(n) {
                Ok(n) if n <= HttpConfig::MAX_PROCESS_SERIES_LIMIT => n,
                _ => {
                    return Err(source.error_at(
                        span,
                        "http.max_process_series",
                        format!(
                            "must be a whole number from 0 to {}; use e.g. 50",
                            HttpConfig::MAX_PROCESS_SERIES_LIMIT
                        ),
                    ));
                }
            }
        }
        None => defaults.max_process_series,
    };
    let max_connections = match raw.max_connections {
        Some(n) => {
            let span = n.span();
            let n = *n.get_ref();
            match usize::try_from(n) {
                Ok(n) if (1..=HttpConfig::MAX_CONNECTIONS_LIMIT).contains(&n) => n,
                _ => {
                    return Err(source.error_at(
                        span,
                        "http.max_connections",
                        format!(
                            "must be a whole number from 1 to {}; use e.g. {}",
                            HttpConfig::MAX_CONNECTIONS_LIMIT,
                            HttpConfig::DEFAULT_MAX_CONNECTIONS
                        ),
                    ));
                }
            }
        }
        None => defaults.max_connections,
    };
    Ok(HttpConfig {
        enabled: raw.enabled.unwrap_or(defaults.enabled),
        listen,
        allow_remote,
        max_process_series,
        max_connections,
        show_all_users: raw.show_all_users.unwrap_or(defaults.show_all_users),
    })
}

fn validate_listen(
    source: &Source<'_>,
    text: Spanned<String>,
    allow_remote: bool,
) -> Result<SocketAddr, ConfigError> {
    let span = text.span();
    let addr = parse_listen(text.get_ref())
        .map_err(|why| source.error_at(span.clone(), "http.listen", why))?;
    HttpConfig::check_listen(addr, allow_remote)
        .map_err(|why| source.error_at(span, "http.listen", why))?;
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn http(body: &str) -> Result<HttpConfig, ConfigError> {
        Config::from_toml_str(&format!("[http]\n{body}"), "t.toml").map(|c| c.http)
    }

    fn message(body: &str) -> String {
        http(body).unwrap_err().to_string()
    }

    #[test]
    fn empty_section_takes_defaults() {
        assert_eq!(http("").unwrap(), HttpConfig::default());
        assert_eq!(
            HttpConfig::default().listen.to_string(),
            HttpConfig::DEFAULT_LISTEN
        );
    }

    #[test]
    fn loopback_addresses_need_no_permission() {
        assert!(http("listen = \"127.0.0.1:9000\"").is_ok());
        assert!(http("listen = \"[::1]:9000\"").is_ok());
        assert!(http("listen = \"127.0.0.1:0\"").is_ok());
    }

    #[test]
    fn a_remote_address_needs_allow_remote() {
        let m = message("listen = \"0.0.0.0:9717\"");
        assert!(
            m.starts_with("t.toml:2:10: http.listen: 0.0.0.0:9717 is not a loopback"),
            "{m}"
        );
        assert!(m.contains("allow_remote = true"), "{m}");
        let ok = http("listen = \"0.0.0.0:9717\"\nallow_remote = true").unwrap();
        assert!(ok.allow_remote);
    }

    #[test]
    fn host_names_are_refused() {
        assert!(message("listen = \"localhost:9717\"").contains("not resolved"));
        assert!(message("listen = \"127.0.0.1\"").contains("and a port"));
    }

    #[test]
    fn max_process_series_bounds() {
        assert_eq!(
            http("max_process_series = 0").unwrap().max_process_series,
            0
        );
        assert!(http("max_process_series = 10000").is_ok());
        assert!(message("max_process_series = 10001").contains("from 0 to 10000"));
        assert!(message("max_process_series = -1").contains("from 0 to 10000"));
    }

    #[test]
    fn max_connections_bounds() {
        assert_eq!(http("max_connections = 1").unwrap().max_connections, 1);
        assert_eq!(
            http("max_connections = 65536").unwrap().max_connections,
            65536
        );
        let m = message("max_connections = 0");
        assert!(
            m.starts_with("t.toml:2:19: http.max_connections:") && m.contains("from 1 to 65536"),
            "{m}"
        );
        assert!(message("max_connections = 65537").contains("from 1 to 65536"));
        assert!(message("max_connections = -5").contains("from 1 to 65536"));
    }

    #[test]
    fn show_all_users_is_off_unless_asked() {
        assert!(!http("").unwrap().show_all_users);
        assert!(http("show_all_users = true").unwrap().show_all_users);
        assert!(message("show_all_users = \"yes\"").contains("show_all_users"));
    }
}
