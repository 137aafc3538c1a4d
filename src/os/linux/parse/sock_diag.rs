//! The kernel's socket diagnostics (`NETLINK_SOCK_DIAG`, what `ss` asks):
//! the messages headroom sends and the answers it reads, as bytes.
//!
//! Reading `/proc/net/tcp` costs a walk of the whole established-connection
//! hash table (`established_get_first` in `net/ipv4/tcp_ipv4.c`), tens of
//! thousands of buckets even when they are empty: about 3 ms of CPU per
//! table on a 24 GiB machine, for every loopback HTTP client and every
//! Jupyter lookup, and more the more connections the machine holds. Socket
//! diagnostics answer the same two questions without that walk:
//!
//! - [`listeners_request`]: a dump of the sockets in `LISTEN` only, filtered
//!   in the kernel to one local port (a bytecode program: local port ≥ PORT
//!   and ≤ PORT, as `ss 'sport >= :PORT and sport <= :PORT'` sends); the
//!   kernel then skips the
//!   established table entirely (`inet_diag_dump_icsk` in
//!   `net/ipv4/inet_diag.c`).
//! - [`exact_request`]: one socket looked up by its four-tuple
//!   (`inet_diag_find_one_icsk`), a hash lookup.
//!
//! Every layout below is the one `include/uapi/linux/netlink.h` and
//! `include/uapi/linux/inet_diag.h` define; they are written and read by
//! offset here, so they are compiled and tested on every OS
//! (`os::linux::ffi_sock_diag` sends and receives them on Linux).
//! Answers are read with bounds: a message whose length does not fit the
//! buffer or is too short for its type ends the parse as malformed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::os::sockets::{TCP_LISTEN, TcpEntry};

/// `NETLINK_SOCK_DIAG`, the protocol of the netlink socket.
pub const NETLINK_SOCK_DIAG: i32 = 4;
/// `SOCK_DIAG_BY_FAMILY`: the request and answer message type.
pub const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_ROOT | NLM_F_MATCH`.
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 0x2;
const NLMSG_DONE: u16 = 0x3;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const IPPROTO_TCP: u8 = 6;
/// `INET_DIAG_REQ_BYTECODE`, the request attribute carrying a filter.
const INET_DIAG_REQ_BYTECODE: u16 = 1;
/// `INET_DIAG_BC_S_GE` and `INET_DIAG_BC_S_LE`: the socket's local port is
/// at least / at most the next op's `no` (in every kernel with socket
/// diagnostics; `INET_DIAG_BC_S_EQ` came only in 4.16).
const INET_DIAG_BC_S_GE: u8 = 2;
const INET_DIAG_BC_S_LE: u8 = 3;

/// `struct nlmsghdr`: len u32, type u16, flags u16, seq u32, pid u32.
const NLMSG_HDR: usize = 16;
/// `struct inet_diag_sockid`: sport, dport (big-endian u16), src, dst
/// (4 × big-endian u32 each), if u32, cookie 2 × u32.
const SOCKID: usize = 48;
/// `struct inet_diag_req_v2`: family, protocol, ext, pad (u8 each), states
/// u32, then the sockid.
const REQ_V2: usize = 8 + SOCKID;
/// `struct inet_diag_msg`: family, state, timer, retrans (u8 each), the
/// sockid, expires, rqueue, wqueue, uid, inode (u32 each).
const DIAG_MSG: usize = 4 + SOCKID + 20;
/// Offsets in `struct inet_diag_msg`.
const MSG_UID: usize = 4 + SOCKID + 12;
const MSG_INODE: usize = MSG_UID + 4;

/// Which address family to ask about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    fn code(self) -> u8 {
        match self {
            Family::V4 => AF_INET,
            Family::V6 => AF_INET6,
        }
    }
}

/// A request for every TCP socket of `family` listening on local `port`.
pub fn listeners_request(family: Family, port: u16, seq: u32) -> Vec<u8> {
    // The filter program, four `struct inet_diag_bc_op { u8 code, yes; u16
    // no }`: { S_GE, yes 8, no 20 }, { 0, 0, port }, { S_LE, yes 8, no 12 },
    // { 0, 0, port }. `yes`/`no` are jumps in bytes from the op; landing
    // exactly on the end accepts the socket, past it rejects it.
    let mut program = Vec::with_capacity(16);
    for (code, no) in [(INET_DIAG_BC_S_GE, 20u16), (INET_DIAG_BC_S_LE, 12)] {
        program.extend_from_slice(&[code, 8]);
        program.extend_from_slice(&no.to_ne_bytes());
        program.extend_from_slice(&[0, 0]);
        program.extend_from_slice(&port.to_ne_bytes());
    }
    let attribute_len = 4 + program.len();
    let mut msg = header(
        NLMSG_HDR + REQ_V2 + attribute_len,
        NLM_F_REQUEST | NLM_F_DUMP,
        seq,
    );
    push_request(&mut msg, family, 1 << TCP_LISTEN, None);
    msg.extend_from_slice(&u16::try_from(attribute_len).unwrap_or(0).to_ne_bytes());
    msg.extend_from_slice(&INET_DIAG_REQ_BYTECODE.to_ne_bytes());
    msg.extend_from_slice(&program);
    msg
}

/// A request for the one TCP socket of `family` whose local end is `local`
/// and whose remote end is `remote`, in any state.
pub fn exact_request(family: Family, local: SocketAddr, remote: SocketAddr, seq: u32) -> Vec<u8> {
    let mut msg = header(NLMSG_HDR + REQ_V2, NLM_F_REQUEST, seq);
    push_request(&mut msg, family, u32::MAX, Some((local, remote)));
    msg
}

fn header(len: usize, flags: u16, seq: u32) -> Vec<u8> {
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_ne_bytes());
    msg.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    // The sender's port id: 0, the kernel fills it in.
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg
}

fn push_request(
    msg: &mut Vec<u8>,
    family: Family,
    states: u32,
    ends: Option<(SocketAddr, SocketAddr)>,
) {
    msg.extend_from_slice(&[family.code(), IPPROTO_TCP, 0, 0]);
    msg.extend_from_slice(&states.to_ne_bytes());
    let (local, remote) = ends.map_or((None, None), |(l, r)| (Some(l), Some(r)));
    msg.extend_from_slice(&local.map_or(0, |a| a.port()).to_be_bytes());
    msg.extend_from_slice(&remote.map_or(0, |a| a.port()).to_be_bytes());
    msg.extend_from_slice(&address_bytes(local.map(|a| a.ip())));
    msg.extend_from_slice(&address_bytes(remote.map(|a| a.ip())));
    // Any interface.
    msg.extend_from_slice(&0u32.to_ne_bytes());
    // INET_DIAG_NOCOOKIE: no cookie to check.
    msg.extend_from_slice(&u32::MAX.to_ne_bytes());
    msg.extend_from_slice(&u32::MAX.to_ne_bytes());
}

/// An address as the 16 bytes of a sockid field: IPv4 in the first four.
fn address_bytes(ip: Option<IpAddr>) -> [u8; 16] {
    let mut out = [0u8; 16];
    match ip {
        Some(IpAddr::V4(v4)) => out[..4].copy_from_slice(&v4.octets()),
        Some(IpAddr::V6(v6)) => out.copy_from_slice(&v6.octets()),
        None => {}
    }
    out
}

/// What one datagram of answers held.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answers {
    /// The sockets it described.
    pub sockets: Vec<TcpEntry>,
    /// `NLMSG_DONE` (a dump ended) or an error ended the answer.
    pub done: bool,
    /// The errno of an `NLMSG_ERROR` (positive; `ENOENT` for an exact
    /// request that found nothing).
    pub error: Option<i32>,
    /// A message that did not fit or was too short for its type.
    pub malformed: bool,
}

/// Read one datagram of answers to the request numbered `seq`. Messages
/// for another sequence number are skipped.
pub fn parse(datagram: &[u8], seq: u32) -> Answers {
    let mut answers = Answers::default();
    let mut rest = datagram;
    while rest.len() >= NLMSG_HDR {
        let len = read_u32(rest, 0) as usize;
        let kind = read_u16(rest, 4);
        let msg_seq = read_u32(rest, 8);
        if len < NLMSG_HDR || len > rest.len() {
            answers.malformed = true;
            return answers;
        }
        let body = &rest[NLMSG_HDR..len];
        if msg_seq == seq {
            match kind {
                NLMSG_DONE => {
                    answers.done = true;
                    return answers;
                }
                NLMSG_ERROR => {
                    answers.done = true;
                    if body.len() < 4 {
                        answers.malformed = true;
                    } else {
                        let code = i32::from_ne_bytes([body[0], body[1], body[2], body[3]]);
                        if code != 0 {
                            answers.error = Some(code.saturating_neg());
                        }
                    }
                    return answers;
                }
                SOCK_DIAG_BY_FAMILY => match socket(body) {
                    Some(entry) => answers.sockets.push(entry),
                    None => {
                        answers.malformed = true;
                        return answers;
                    }
                },
                _ => {}
            }
        }
        // Messages are aligned to 4 bytes.
        let next = len.next_multiple_of(4).min(rest.len());
        rest = &rest[next..];
    }
    answers
}

/// One `struct inet_diag_msg`.
fn socket(body: &[u8]) -> Option<TcpEntry> {
    if body.len() < DIAG_MSG {
        return None;
    }
    let family = body[0];
    let state = body[1];
    let id = &body[4..4 + SOCKID];
    let sport = u16::from_be_bytes([id[0], id[1]]);
    let dport = u16::from_be_bytes([id[2], id[3]]);
    let (src, dst) = (&id[4..20], &id[20..36]);
    let ip = |bytes: &[u8]| -> Option<IpAddr> {
        match family {
            AF_INET => Some(IpAddr::V4(Ipv4Addr::new(
                bytes[0], bytes[1], bytes[2], bytes[3],
            ))),
            AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(bytes).ok()?,
            ))),
            _ => None,
        }
    };
    Some(TcpEntry {
        local: SocketAddr::new(ip(src)?, sport),
        remote: SocketAddr::new(ip(dst)?, dport),
        state,
        uid: read_u32(body, MSG_UID),
        inode: u64::from(read_u32(body, MSG_INODE)),
    })
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn read_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([bytes[at], bytes[at + 1]])
}

#[cfg(target_os = "linux")]
mod pinned {
    //! The netlink constants above, against the libc crate's.
    use super::*;
    const _: () = assert!(NETLINK_SOCK_DIAG == libc::NETLINK_SOCK_DIAG);
    const _: () = assert!(NLM_F_REQUEST as i32 == libc::NLM_F_REQUEST);
    const _: () = assert!(NLM_F_DUMP as i32 == libc::NLM_F_DUMP);
    const _: () = assert!(NLMSG_ERROR as i32 == libc::NLMSG_ERROR);
    const _: () = assert!(NLMSG_DONE as i32 == libc::NLMSG_DONE);
    const _: () = assert!(AF_INET as i32 == libc::AF_INET);
    const _: () = assert!(AF_INET6 as i32 == libc::AF_INET6);
    const _: () = assert!(IPPROTO_TCP as i32 == libc::IPPROTO_TCP);
    const _: () = assert!(NLMSG_HDR == std::mem::size_of::<libc::nlmsghdr>());
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXACT_V4: &str = "127.0.0.1:50412";
    const SERVER_V4: &str = "127.0.0.1:9100";

    #[test]
    fn an_exact_request_is_a_header_and_a_v2_request_with_the_four_tuple() {
        let client: SocketAddr = EXACT_V4.parse().unwrap();
        let server: SocketAddr = SERVER_V4.parse().unwrap();
        let msg = exact_request(Family::V4, client, server, 7);
        assert_eq!(msg.len(), NLMSG_HDR + REQ_V2);
        assert_eq!(read_u32(&msg, 0) as usize, msg.len());
        assert_eq!(read_u16(&msg, 4), SOCK_DIAG_BY_FAMILY);
        assert_eq!(read_u16(&msg, 6), NLM_F_REQUEST);
        assert_eq!(read_u32(&msg, 8), 7);
        let req = &msg[NLMSG_HDR..];
        assert_eq!(&req[..4], &[AF_INET, IPPROTO_TCP, 0, 0]);
        assert_eq!(read_u32(req, 4), u32::MAX);
        // Ports big-endian, then the addresses.
        assert_eq!(&req[8..10], &50412u16.to_be_bytes());
        assert_eq!(&req[10..12], &9100u16.to_be_bytes());
        assert_eq!(&req[12..16], &[127, 0, 0, 1]);
        assert_eq!(&req[28..32], &[127, 0, 0, 1]);
        assert_eq!(&req[48..56], &[0xff; 8], "no cookie");
    }

    #[test]
    fn a_listeners_request_dumps_listen_only_filtered_to_the_port() {
        let msg = listeners_request(Family::V6, 8888, 3);
        assert_eq!(read_u32(&msg, 0) as usize, msg.len());
        assert_eq!(read_u16(&msg, 6), NLM_F_REQUEST | NLM_F_DUMP);
        let req = &msg[NLMSG_HDR..];
        assert_eq!(req[0], AF_INET6);
        assert_eq!(read_u32(req, 4), 1 << 10);
        let attr = &req[REQ_V2..];
        assert_eq!(read_u16(attr, 0), 20, "attribute header and 16 bytes");
        assert_eq!(read_u16(attr, 2), INET_DIAG_REQ_BYTECODE);
        assert_eq!(&attr[4..6], &[INET_DIAG_BC_S_GE, 8]);
        assert_eq!(read_u16(attr, 6), 20, "a port below: past the end");
        assert_eq!(read_u16(attr, 10), 8888);
        assert_eq!(&attr[12..14], &[INET_DIAG_BC_S_LE, 8]);
        assert_eq!(read_u16(attr, 14), 12, "a port above: past the end");
        assert_eq!(read_u16(attr, 18), 8888);
    }

    /// One `inet_diag_msg` answer as the kernel writes it.
    fn answer(seq: u32, family: u8, state: u8, local: SocketAddr, remote: SocketAddr) -> Vec<u8> {
        let mut body = vec![family, state, 0, 0];
        body.extend_from_slice(&local.port().to_be_bytes());
        body.extend_from_slice(&remote.port().to_be_bytes());
        body.extend_from_slice(&address_bytes(Some(local.ip())));
        body.extend_from_slice(&address_bytes(Some(remote.ip())));
        body.extend_from_slice(&[0; 12]);
        body.extend_from_slice(&[0; 12]);
        body.extend_from_slice(&65534u32.to_ne_bytes());
        body.extend_from_slice(&4242u32.to_ne_bytes());
        let mut msg = header(NLMSG_HDR + body.len(), 0, seq);
        msg.extend_from_slice(&body);
        msg
    }

    fn done(seq: u32, kind: u16, code: i32) -> Vec<u8> {
        let mut msg = header(NLMSG_HDR + 4, 0, seq);
        msg[4..6].copy_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(&code.to_ne_bytes());
        msg
    }

    #[test]
    fn answers_become_entries_until_done() {
        let l: SocketAddr = "[::1]:8888".parse().unwrap();
        let any: SocketAddr = "[::]:0".parse().unwrap();
        let mut datagram = answer(3, AF_INET6, TCP_LISTEN, l, any);
        datagram.extend(answer(
            3,
            AF_INET6,
            TCP_LISTEN,
            "[::]:8888".parse().unwrap(),
            any,
        ));
        datagram.extend(done(3, NLMSG_DONE, 0));
        let got = parse(&datagram, 3);
        assert!(got.done && !got.malformed && got.error.is_none());
        assert_eq!(got.sockets.len(), 2);
        assert_eq!(got.sockets[0].local, l);
        assert_eq!(got.sockets[0].uid, 65534);
        assert_eq!(got.sockets[0].inode, 4242);
        assert_eq!(got.sockets[0].state, TCP_LISTEN);
    }

    #[test]
    fn an_exact_request_that_found_nothing_is_enoent() {
        let got = parse(&done(9, NLMSG_ERROR, -2), 9);
        assert_eq!(got.error, Some(2));
        assert!(got.done && got.sockets.is_empty());
    }

    #[test]
    fn answers_to_another_request_are_skipped() {
        let c: SocketAddr = EXACT_V4.parse().unwrap();
        let s: SocketAddr = SERVER_V4.parse().unwrap();
        let mut datagram = answer(1, AF_INET, 1, c, s);
        datagram.extend(answer(2, AF_INET, 1, c, s));
        let got = parse(&datagram, 2);
        assert_eq!(got.sockets.len(), 1);
        assert!(!got.done);
    }

    #[test]
    fn lengths_that_lie_end_the_parse_as_malformed() {
        let c: SocketAddr = EXACT_V4.parse().unwrap();
        let s: SocketAddr = SERVER_V4.parse().unwrap();
        let good = answer(1, AF_INET, 1, c, s);
        // Longer than the datagram.
        let mut long = good.clone();
        long[..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(parse(&long, 1).malformed);
        // Shorter than a header.
        let mut short = good.clone();
        short[..4].copy_from_slice(&8u32.to_ne_bytes());
        assert!(parse(&short, 1).malformed);
        // A socket message cut before its uid.
        let mut cut = good[..NLMSG_HDR + 40].to_vec();
        let cut_len = u32::try_from(cut.len()).unwrap();
        cut[..4].copy_from_slice(&cut_len.to_ne_bytes());
        assert!(parse(&cut, 1).malformed);
        // An unknown family.
        let mut odd = good;
        odd[NLMSG_HDR] = 99;
        assert!(parse(&odd, 1).malformed);
        // Truncated headers and empty input end quietly.
        assert_eq!(parse(&[0; 7], 1), Answers::default());
    }

    proptest::proptest! {
        /// Whatever the bytes, parsing ends without a panic, and every
        /// socket it reports came from a whole message.
        #[test]
        fn any_bytes_parse_to_an_answer(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            seq in 0u32..4,
        ) {
            let got = parse(&bytes, seq);
            proptest::prop_assert!(got.sockets.len() * (NLMSG_HDR + DIAG_MSG) <= bytes.len());
        }

        /// A real answer with any byte changed: the same.
        #[test]
        fn a_changed_answer_parses_to_an_answer(at in 0usize..200, to in proptest::prelude::any::<u8>()) {
            let c: SocketAddr = EXACT_V4.parse().unwrap();
            let s: SocketAddr = SERVER_V4.parse().unwrap();
            let mut datagram = answer(1, AF_INET, 1, c, s);
            datagram.extend(done(1, NLMSG_DONE, 0));
            let at = at % datagram.len();
            datagram[at] = to;
            let got = parse(&datagram, 1);
            proptest::prop_assert!(got.sockets.len() <= 1);
        }
    }
}
