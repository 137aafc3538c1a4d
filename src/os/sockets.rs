//! Who owns a TCP socket on this machine.
//!
//! Two callers need it. Jupyter discovery sends a server's token only to a
//! listener that belongs to the user who owns the runtime file; the HTTP
//! server tells a loopback client's user from the client's end of the
//! connection, so that it shows other users' command lines only to root or
//! to their owner.
//!
//! On Linux the kernel's socket diagnostics answer both questions
//! ([`super::linux::parse::sock_diag`]: the listeners on one port, or one connection by
//! its four-tuple) in microseconds. Where they are missing or fail, the
//! kernel's tables are read instead: `/proc/net/tcp` and `/proc/net/tcp6`
//! list every TCP socket of the network namespace with its state and its
//! owner's uid (`get_tcp4_sock` and `get_tcp6_sock` in `net/ipv4/tcp_ipv4.c`
//! and `net/ipv6/tcp_ipv6.c`), read line by line and never held whole (a
//! user with many connections makes them long), at the cost of a walk of
//! the whole connection hash table per read. On macOS neither is available
//! and the functions answer `Ok(None)` / an empty list.
//!
//! A client's socket counts only while it is open in some process (it has
//! an inode): a closed one lingers as a `TIME_WAIT` or orphaned entry that
//! the kernel lists as uid 0, and must not make its client root.
//!
//! macOS lists no such table; it lists each process's descriptors instead
//! (libproc, [`super::macos::libproc`]). [`listeners`] gives what the OS at
//! hand can tell about who listens on a port: every listener's uid (Linux),
//! or whether a given process listens there (macOS).

use std::io::{self, BufRead as _, BufReader, Read as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// `TCP_ESTABLISHED` in the tables' `st` column (`include/net/tcp_states.h`).
pub const TCP_ESTABLISHED: u8 = 0x01;
/// `TCP_LISTEN`.
pub const TCP_LISTEN: u8 = 0x0A;

/// Lines of one table read at most: far more sockets than a machine holds,
/// a bound on what a flood of connections can make one lookup cost.
pub const MAX_LINES: usize = 1 << 20;

/// One row of `/proc/net/tcp{,6}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpEntry {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// The `st` column: [`TCP_LISTEN`], [`TCP_ESTABLISHED`], …
    pub state: u8,
    /// The uid of the socket's owner (who created it).
    pub uid: u32,
    pub inode: u64,
}

/// Parse one data line of `/proc/net/tcp` or `/proc/net/tcp6`; `None` for the
/// header and anything malformed.
///
/// ```text
///   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
///    0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1665 1 …
/// ```
pub fn parse_line(line: &str) -> Option<TcpEntry> {
    let mut fields = line.split_ascii_whitespace();
    let slot = fields.next()?;
    if !slot.ends_with(':') {
        return None;
    }
    let local = parse_addr(fields.next()?)?;
    let remote = parse_addr(fields.next()?)?;
    let state = u8::from_str_radix(fields.next()?, 16).ok()?;
    // tx_queue:rx_queue, tr:tm->when, retrnsmt
    let mut fields = fields.skip(3);
    let uid = fields.next()?.parse().ok()?;
    let _timeout = fields.next()?;
    let inode = fields.next()?.parse().ok()?;
    Some(TcpEntry {
        local,
        remote,
        state,
        uid,
        inode,
    })
}

/// `0100007F:2601` → `127.0.0.1:9729`. The kernel prints each 32-bit word of
/// the address as a native-endian integer (`%08X`), and the port in host
/// order (`%04X`).
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(addr)?.to_ne_bytes())),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.as_chunks_mut::<4>().0.iter_mut().enumerate() {
                *chunk = word(addr.get(i * 8..i * 8 + 8)?)?.to_ne_bytes();
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

fn word(hex: &str) -> Option<u32> {
    if hex.len() != 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

/// The same address in both families' spellings: `::ffff:127.0.0.1` and
/// `127.0.0.1` are one endpoint (a dual-stack socket lists the first).
fn same_endpoint(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && canonical(a.ip()) == canonical(b.ip())
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Every entry of the tables under `proc_root` (`/proc`) for which `keep`
/// holds, at most `limit` of them. A missing table (no IPv6) is empty.
pub fn scan(
    proc_root: &Path,
    limit: usize,
    mut keep: impl FnMut(&TcpEntry) -> bool,
) -> io::Result<Vec<TcpEntry>> {
    let mut found = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        let path = proc_root.join(table);
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot read {}: {e}", path.display()),
                ));
            }
        };
        let mut reader = BufReader::new(file);
        let mut line = String::new();
        for _ in 0..MAX_LINES {
            line.clear();
            // Each line is 150 bytes; a longer one is not the kernel's.
            match reader.by_ref().take(4096).read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot read {}: {e}", path.display()),
                    ));
                }
            }
            if let Some(entry) = parse_line(&line)
                && keep(&entry)
            {
                found.push(entry);
                if found.len() >= limit {
                    return Ok(found);
                }
            }
        }
    }
    Ok(found)
}

/// Whether the tables exist here (Linux); elsewhere the functions below
/// know nothing.
fn tables_available() -> bool {
    cfg!(target_os = "linux")
}

/// The uids of the sockets listening on `port` of an address that `ip`
/// reaches (the address itself, or a wildcard). Empty when none listens;
/// `Ok(None)` where the OS keeps no such table.
pub fn listener_uids(ip: IpAddr, port: u16) -> io::Result<Option<Vec<u32>>> {
    if !tables_available() {
        return Ok(None);
    }
    let ip = canonical(ip);
    let keep = |e: &TcpEntry| {
        e.state == TCP_LISTEN
            && e.local.port() == port
            && (canonical(e.local.ip()) == ip || e.local.ip().is_unspecified())
    };
    let found = match diagnosed_listeners(port) {
        Some(listening) => listening.into_iter().filter(keep).take(64).collect(),
        None => scan(Path::new("/proc"), 64, keep)?,
    };
    Ok(Some(found.iter().map(|e| e.uid).collect()))
}

/// Every TCP socket listening on local `port`, from the kernel's socket
/// diagnostics; `None` where they are not available or failed (the caller
/// reads the tables).
fn diagnosed_listeners(port: u16) -> Option<Vec<TcpEntry>> {
    #[cfg(target_os = "linux")]
    {
        use crate::os::linux::parse::sock_diag::{Family, listeners_request};
        let mut found = Vec::new();
        for family in [Family::V4, Family::V6] {
            let seq = next_seq();
            let answers = diagnosed(&listeners_request(family, port, seq), seq, MAX_LINES, true)?;
            if answers.error.is_some() || !answers.done {
                return None;
            }
            found.extend(answers.sockets);
        }
        Some(found)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = port;
        None
    }
}

/// The connection whose local end is `client` and remote end `server`,
/// from the kernel's socket diagnostics: `Some(None)` if there is none,
/// `None` where the diagnostics are not available or failed.
fn diagnosed_connection(client: SocketAddr, server: SocketAddr) -> Option<Option<TcpEntry>> {
    #[cfg(target_os = "linux")]
    {
        use crate::os::linux::parse::sock_diag::{Family, exact_request};
        let (c, s) = (canonical_addr(client), canonical_addr(server));
        let family = if c.is_ipv4() && s.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        };
        let seq = next_seq();
        let answers = diagnosed(&exact_request(family, c, s, seq), seq, 4, false)?;
        match answers.error {
            Some(libc::ENOENT) => Some(None),
            Some(_) => None,
            None => Some(
                answers
                    .sockets
                    .into_iter()
                    .find(|e| same_endpoint(e.local, client) && same_endpoint(e.remote, server)),
            ),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (client, server);
        None
    }
}

/// One request to the socket diagnostics; `None` (logged at debug) when
/// they cannot answer or answered nonsense.
#[cfg(target_os = "linux")]
fn diagnosed(
    request: &[u8],
    seq: u32,
    limit: usize,
    dump: bool,
) -> Option<crate::os::linux::parse::sock_diag::Answers> {
    match crate::os::linux::ffi::sock_diag::ask(request, seq, limit, dump) {
        Ok(answers) if !answers.malformed => Some(answers),
        Ok(_) => {
            tracing::debug!(
                "socket diagnostics answered a malformed message; reading /proc/net/tcp"
            );
            None
        }
        Err(e) => {
            tracing::debug!("socket diagnostics: {e}; reading /proc/net/tcp");
            None
        }
    }
}

/// A sequence number for the next request, so that a late answer to an
/// earlier one is not taken for this one's.
#[cfg(target_os = "linux")]
fn next_seq() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(1);
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// `addr` with a v4-mapped IPv6 address written as IPv4.
#[cfg(target_os = "linux")]
fn canonical_addr(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(canonical(addr.ip()), addr.port())
}

/// What this OS tells about the sockets listening where a connection to
/// `ip`:`port` arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listeners {
    /// The uid of every socket listening there (Linux); empty when none
    /// does.
    Owners(Vec<u32>),
    /// Whether the process asked about holds such a socket (macOS, where
    /// only a process's own descriptors can be listed).
    HeldByPid(bool),
    /// This OS tells neither.
    Unknown,
}

/// Who listens where a connection to `ip`:`port` arrives; on macOS, whether
/// process `pid` does (its descriptors must be readable: the caller's own
/// process, or any as root).
pub fn listeners(ip: IpAddr, port: u16, pid: u32) -> io::Result<Listeners> {
    #[cfg(target_os = "macos")]
    {
        crate::os::macos::libproc::pid_listens(pid, ip, port).map(Listeners::HeldByPid)
    }
    #[cfg(not(target_os = "macos"))]
    {
        let _ = pid;
        Ok(match listener_uids(ip, port)? {
            Some(uids) => Listeners::Owners(uids),
            None => Listeners::Unknown,
        })
    }
}

/// The uid that owns the client end of a TCP connection from `client` to
/// `server` on this machine (both as the server sees them). `Ok(None)` when
/// no such socket is listed (the client left) or the OS keeps no table.
pub fn client_uid(client: SocketAddr, server: SocketAddr) -> io::Result<Option<u32>> {
    if !tables_available() {
        return Ok(None);
    }
    let found = match diagnosed_connection(client, server) {
        Some(found) => found,
        None => scan(Path::new("/proc"), 1, |e| {
            same_endpoint(e.local, client) && same_endpoint(e.remote, server)
        })?
        .into_iter()
        .next(),
    };
    Ok(found.and_then(open_socket_owner))
}

/// The owner of a client's socket while a process holds it open; `None`
/// for a closed one (no inode: `TIME_WAIT`, or orphaned while closing),
/// which the kernel lists as uid 0.
fn open_socket_owner(entry: TcpEntry) -> Option<u32> {
    (entry.inode != 0).then_some(entry.uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    // /proc/net/tcp and /proc/net/tcp6 as read on this project's x86_64
    // Debian 12 build machine (Linux 6.18) on 2026-11-23, while
    // `python3 -m http.server 9729 --bind 127.0.0.1` and
    // `python3 -m http.server 9730 --bind ::` ran as nobody (uid 65534) and a
    // root Python process held one connection to each; 0.0.0.0:2024 is a
    // service of the machine's own.
    const TCP4: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2601 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 9557 1 000000009b0f4aa5 100 0 0 10 0
   1: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1665 1 00000000e79d3d1b 100 0 0 10 0
   2: 0100007F:2601 0100007F:8100 01 00000000:00000000 00:00000000 00000000 65534        0 8536 1 00000000f25ea884 20 0 0 10 -1
   3: 0100007F:8100 0100007F:2601 01 00000000:00000000 00:00000000 00000000     0        0 9626 2 00000000179fdfe5 20 0 0 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:2602 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 8515 1 00000000d26c1cb8 100 0 0 10 0
   1: 00000000000000000000000001000000:2602 00000000000000000000000001000000:D21E 01 00000000:00000000 00:00000000 00000000 65534        0 8537 1 000000001adef4e2 20 0 0 10 -1
   2: 00000000000000000000000001000000:D21E 00000000000000000000000001000000:2602 01 00000000:00000000 00:00000000 00000000     0        0 9627 2 00000000f12a13ae 20 0 0 10 -1
";

    fn entries(text: &str) -> Vec<TcpEntry> {
        text.lines().filter_map(parse_line).collect()
    }

    #[test]
    fn ipv4_rows_give_addresses_state_and_owner() {
        let rows = entries(TCP4);
        assert_eq!(rows.len(), 4, "the header is not a row");
        assert_eq!(rows[0].local, "127.0.0.1:9729".parse().unwrap());
        assert_eq!(rows[0].state, TCP_LISTEN);
        assert_eq!((rows[0].uid, rows[0].inode), (65534, 9557));
        assert_eq!(rows[1].local, "0.0.0.0:2024".parse().unwrap());
        assert_eq!(rows[3].local, "127.0.0.1:33024".parse().unwrap());
        assert_eq!(rows[3].remote, "127.0.0.1:9729".parse().unwrap());
        assert_eq!((rows[3].state, rows[3].uid), (TCP_ESTABLISHED, 0));
    }

    #[test]
    fn ipv6_rows() {
        let rows = entries(TCP6);
        assert_eq!(rows[0].local, "[::]:9730".parse().unwrap());
        assert_eq!((rows[0].state, rows[0].uid), (TCP_LISTEN, 65534));
        assert_eq!(rows[2].local, "[::1]:53790".parse().unwrap());
        assert_eq!(rows[2].remote, "[::1]:9730".parse().unwrap());
        assert_eq!(rows[2].uid, 0);
    }

    #[test]
    fn mapped_addresses_are_the_same_endpoint() {
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:9729".parse().unwrap();
        assert!(same_endpoint(mapped, "127.0.0.1:9729".parse().unwrap()));
        assert!(!same_endpoint(mapped, "127.0.0.1:9730".parse().unwrap()));
        assert!(!same_endpoint(mapped, "127.0.0.2:9729".parse().unwrap()));
    }

    #[test]
    fn malformed_lines_are_skipped() {
        for bad in [
            "",
            "garbage",
            "   0: 0100007F:2601",
            "   0: 0100007G:2601 00000000:0000 0A 0:0 0:0 0 1 0 5",
            "   0: 0100007F:2601 00000000:0000 0A 0:0 0:0 0 -1 0 5",
            "   0: 01007F:2601 00000000:0000 0A 0:0 0:0 0 1 0 5",
            "   0 0100007F:2601 00000000:0000 0A 0:0 0:0 0 1 0 5",
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn scan_reads_both_tables_and_stops_at_the_limit() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("net")).unwrap();
        std::fs::write(root.path().join("net/tcp"), TCP4).unwrap();
        std::fs::write(root.path().join("net/tcp6"), TCP6).unwrap();
        let listening = scan(root.path(), 10, |e| e.state == TCP_LISTEN).unwrap();
        assert_eq!(listening.len(), 3);
        assert_eq!(scan(root.path(), 1, |_| true).unwrap().len(), 1);
        let missing = tempfile::tempdir().unwrap();
        assert!(scan(missing.path(), 10, |_| true).unwrap().is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_real_listener_and_connection_are_ours() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let uid = euid_from_proc();
        assert_eq!(
            listener_uids(server.ip(), server.port()).unwrap(),
            Some(vec![uid])
        );
        let client = std::net::TcpStream::connect(server).unwrap();
        let (_accepted, seen_client) = listener.accept().unwrap();
        assert_eq!(seen_client, client.local_addr().unwrap());
        assert_eq!(client_uid(seen_client, server).unwrap(), Some(uid));
        drop(client);
        drop(listener);
        let gone: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(client_uid(gone, server).unwrap(), None);
    }

    /// The kernel's socket diagnostics answer what the tables answer, on
    /// real sockets of both families, and a listener dump holds only the
    /// port asked about (the in-kernel filter works).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_socket_diagnostics_agree_with_the_tables() {
        let uid = euid_from_proc();
        for host in ["127.0.0.1:0", "[::1]:0"] {
            let listener = std::net::TcpListener::bind(host).unwrap();
            let other = std::net::TcpListener::bind(host).unwrap();
            let server = listener.local_addr().unwrap();
            let listening = diagnosed_listeners(server.port()).expect("socket diagnostics");
            assert!(
                listening
                    .iter()
                    .any(|e| e.local == server && e.uid == uid && e.state == TCP_LISTEN),
                "{host}: {listening:?}"
            );
            let other_port = other.local_addr().unwrap().port();
            assert!(
                listening.iter().all(|e| e.local.port() == server.port()),
                "{host}: port {other_port} listed too: {listening:?}"
            );
            let client = std::net::TcpStream::connect(server).unwrap();
            let (_accepted, seen) = listener.accept().unwrap();
            let diagnosed = diagnosed_connection(seen, server)
                .expect("socket diagnostics")
                .expect("the connection");
            let scanned = scan(Path::new("/proc"), 1, |e| {
                same_endpoint(e.local, seen) && same_endpoint(e.remote, server)
            })
            .unwrap();
            assert_eq!(scanned.first(), Some(&diagnosed), "{host}");
            assert_eq!(diagnosed.uid, uid);
            assert_ne!(diagnosed.inode, 0);
            drop(client);
        }
    }

    /// A v4 client of a dual-stack listener is seen at a v4-mapped address.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_client_seen_at_a_mapped_address_is_found() {
        let listener = std::net::TcpListener::bind("[::]:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (accepted, seen) = listener.accept().unwrap();
        let server = accepted.local_addr().unwrap();
        assert!(seen.is_ipv6(), "{seen}");
        assert_eq!(client_uid(seen, server).unwrap(), Some(euid_from_proc()));
        drop(client);
    }

    /// A client that closed first leaves its end in TIME_WAIT, which the
    /// kernel lists as uid 0: it must not make the client root.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_closed_clients_lingering_socket_names_no_one() {
        use std::io::Read as _;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(server).unwrap();
        let (mut accepted, seen) = listener.accept().unwrap();
        drop(client);
        // The server reads the client's FIN, then closes: the client's end
        // goes to TIME_WAIT.
        assert_eq!(accepted.read(&mut [0u8; 1]).unwrap(), 0);
        drop(accepted);
        let lingering = (0..100).find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            diagnosed_connection(seen, server)
                .expect("socket diagnostics")
                .filter(|e| e.state == 0x06)
        });
        let lingering = lingering.expect("the client's end in TIME_WAIT");
        assert_eq!((lingering.uid, lingering.inode), (0, 0));
        assert_eq!(client_uid(seen, server).unwrap(), None);
    }

    /// This process's effective uid, from `/proc/self/status` (no FFI here).
    #[cfg(target_os = "linux")]
    fn euid_from_proc() -> u32 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    }
}
