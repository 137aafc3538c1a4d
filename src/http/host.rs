//! The `Host` header, parsed strictly, for the DNS-rebinding guard.
//!
//! A web page that rebinds its own DNS name to 127.0.0.1 reaches the daemon
//! with that name in `Host`; refusing every name but `localhost` defeats it.
//! The check must see the same host a browser or proxy would: `Host` is an
//! RFC 3986 `authority` without userinfo (RFC 9110 §7.2), so it is parsed as
//! `host [ ":" port ]` and anything else is refused: userinfo
//! (`localhost:9717@evil.example`), text after an IPv6 literal
//! (`[::1]evil.example`), a second colon (`127.0.0.1:80:80`), an empty or
//! non-numeric port (`localhost:`, `localhost:http`), a port above 65535.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The host part of a `Host` header that names this machine without DNS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalHost {
    /// `localhost`, in any case.
    Localhost,
    /// An IPv4 literal or a bracketed IPv6 literal.
    Ip(IpAddr),
}

/// Parse `Host` as `host[:port]` where host is `localhost`, an IPv4 literal or
/// `[IPv6]`; `None` for anything else, including a DNS name.
pub fn parse(host: &[u8]) -> Option<(LocalHost, Option<u16>)> {
    let host = std::str::from_utf8(host).ok()?;
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (literal, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            _ => Some(port(after.strip_prefix(':')?)?),
        };
        // RFC 3986 also allows `[v1.…]` (IPvFuture); no browser sends it.
        let v6: Ipv6Addr = literal.parse().ok()?;
        return Some((LocalHost::Ip(IpAddr::V6(v6)), port));
    } else {
        match host.split_once(':') {
            Some((name, p)) => (name, Some(port(p)?)),
            None => (host, None),
        }
    };
    if name.eq_ignore_ascii_case("localhost") {
        return Some((LocalHost::Localhost, port));
    }
    // std's parser takes the dotted-quad form only: no `0x7f.1`, no `127.1`,
    // no leading zeros, which some resolvers would read as octal.
    let v4: Ipv4Addr = name.parse().ok()?;
    Some((LocalHost::Ip(IpAddr::V4(v4)), port))
}

/// A port as RFC 3986 writes it, all digits, at most 65535 (and not empty,
/// which RFC 3986 allows but no client sends on purpose).
fn port(text: &str) -> Option<u16> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `Host` names this machine by an IP literal or `localhost`, with or
/// without a port.
pub fn is_local(host: &[u8]) -> bool {
    parse(host).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(host: &str) -> (LocalHost, Option<u16>) {
        parse(host.as_bytes()).unwrap_or_else(|| panic!("{host:?} should be accepted"))
    }

    fn refused(host: &str) {
        assert_eq!(parse(host.as_bytes()), None, "{host:?} should be refused");
    }

    #[test]
    fn ipv4_with_and_without_port() {
        let lo = LocalHost::Ip("127.0.0.1".parse().unwrap());
        assert_eq!(ok("127.0.0.1:9717"), (lo, Some(9717)));
        assert_eq!(ok("127.0.0.1"), (lo, None));
        assert!(is_local(b"10.1.2.3:80"));
    }

    #[test]
    fn localhost_in_any_case() {
        assert_eq!(ok("localhost:9717"), (LocalHost::Localhost, Some(9717)));
        assert_eq!(ok("LOCALHOST"), (LocalHost::Localhost, None));
    }

    #[test]
    fn bracketed_ipv6() {
        let v6 = LocalHost::Ip("::1".parse().unwrap());
        assert_eq!(ok("[::1]:9717"), (v6, Some(9717)));
        assert_eq!(ok("[::1]"), (v6, None));
    }

    #[test]
    fn dns_names_are_refused() {
        refused("evil.example:9717");
        refused("localhost.evil.example");
        refused("localhost.");
        refused("");
    }

    #[test]
    fn userinfo_is_refused() {
        refused("localhost:9717@evil.com");
        refused("127.0.0.1@evil.com");
        refused("user@localhost");
        refused("[::1]@evil.com");
    }

    #[test]
    fn text_after_an_ipv6_literal_is_refused() {
        refused("[::1]evil.com");
        refused("[::1].evil.com");
        refused("[::1]:9717evil");
        refused("[::1]]:80");
    }

    #[test]
    fn unbracketed_or_unclosed_ipv6_is_refused() {
        refused("::1");
        refused("[::1");
        refused("[evil.com]");
        refused("[]");
    }

    #[test]
    fn a_second_colon_is_refused() {
        refused("127.0.0.1:80:80");
        refused("a:b:c");
        refused("localhost::80");
    }

    #[test]
    fn ports_must_be_digits_up_to_65535() {
        refused("localhost:");
        refused("localhost:http");
        refused("localhost:+80");
        refused("localhost:-1");
        refused("localhost:65536");
        refused("localhost:999999");
        refused("[::1]:");
        assert_eq!(ok("localhost:65535").1, Some(65535));
        assert_eq!(ok("localhost:0").1, Some(0));
    }

    #[test]
    fn odd_ipv4_spellings_are_refused() {
        refused("127.1");
        refused("0x7f.0.0.1");
        refused("0177.0.0.1");
        refused("2130706433");
        refused("127.0.0.1.");
        refused(" 127.0.0.1");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused() {
        assert!(!is_local(b"127.0.0.1\xff"));
    }
}
