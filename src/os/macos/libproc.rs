//! macOS: whether a process listens on a TCP port, from libproc.
//!
//! macOS keeps no world-readable table of sockets with their owners (Linux's
//! `/proc/net/tcp`); what it offers is each process's file descriptors.
//! `proc_pidinfo(pid, PROC_PIDLISTFDS)` lists them as `struct proc_fdinfo`,
//! and `proc_pidfdinfo(pid, fd, PROC_PIDFDSOCKETINFO)` describes a socket as
//! `struct socket_fdinfo` (both in XNU's `bsd/sys/proc_info.h`, filled by
//! `fill_socketinfo` in `bsd/kern/socket_info.c`). libc declares
//! `proc_fdinfo`, `vinfo_stat` and the two calls; the socket structures are
//! mirrored here, each with compile-time size and offset assertions against
//! the C layout.
//!
//! [`listening_port`] reads one `socket_fdinfo` (a pure function, tested on
//! every OS); the FFI wrapper (`pid_listens`) exists on macOS only. Who
//! a process runs as comes from `ffi_proc::bsd_info`, the one
//! caller of `proc_pidinfo(PROC_PIDTBSDINFO)`.

use std::mem::{align_of, offset_of, size_of};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `PROC_PIDFDSOCKETINFO`, the `proc_pidfdinfo` flavor that fills a
/// `struct socket_fdinfo` (`bsd/sys/proc_info.h`; not in libc).
pub const PROC_PIDFDSOCKETINFO: i32 = 3;
/// `SOCKINFO_TCP` of `socket_info.soi_kind` (`bsd/sys/proc_info.h`).
pub const SOCKINFO_TCP: i32 = 2;
/// `TSI_S_LISTEN` of `tcp_sockinfo.tcpsi_state` (`bsd/sys/proc_info.h`).
pub const TSI_S_LISTEN: i32 = 1;
/// `INI_IPV4` and `INI_IPV6` of `in_sockinfo.insi_vflag`
/// (`bsd/sys/proc_info.h`); a dual-stack socket may carry both.
pub const INI_IPV4: u8 = 0x1;
pub const INI_IPV6: u8 = 0x2;

/// File descriptors of one process looked at, at most: a bound on what a
/// process with very many descriptors makes one check cost.
pub const MAX_FDS: usize = 1 << 16;

/// `struct proc_fileinfo` (`bsd/sys/proc_info.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcFileinfo {
    pub fi_openflags: u32,
    pub fi_status: u32,
    pub fi_offset: i64,
    pub fi_type: i32,
    pub fi_guardflags: u32,
}

/// `struct sockbuf_info` (`bsd/sys/proc_info.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SockbufInfo {
    pub sbi_cc: u32,
    pub sbi_hiwat: u32,
    pub sbi_mbcnt: u32,
    pub sbi_mbmax: u32,
    pub sbi_lowat: u32,
    pub sbi_flags: i16,
    pub sbi_timeo: i16,
}

/// The address unions of `struct in_sockinfo` (`union { struct in4in6_addr
/// ina_46; struct in6_addr ina_6; }`): 16 bytes, 4-aligned. An IPv6 address
/// fills them; an IPv4 address is the last 4 (`in4in6_addr` is three
/// 32-bit pads, then `struct in_addr`). Both in network byte order.
#[repr(C, align(4))]
#[derive(Debug, Clone, Copy, Default)]
pub struct InsiAddr(pub [u8; 16]);

/// The anonymous `insi_v6` struct of `struct in_sockinfo`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct InsiV6 {
    pub in6_hlim: u8,
    pub in6_cksum: i32,
    pub in6_ifindex: u16,
    pub in6_hops: i16,
}

/// `struct in_sockinfo` (`bsd/sys/proc_info.h`). The ports are the
/// kernel's `u_short` in network byte order, stored in an `int`
/// (`insi->insi_lport = inp->inp_lport` in `fill_socketinfo`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct InSockinfo {
    pub insi_fport: i32,
    pub insi_lport: i32,
    pub insi_gencnt: u64,
    pub insi_flags: u32,
    pub insi_flow: u32,
    pub insi_vflag: u8,
    pub insi_ip_ttl: u8,
    pub rfu_1: u32,
    pub insi_faddr: InsiAddr,
    pub insi_laddr: InsiAddr,
    /// `struct { u_char in4_tos; } insi_v4`.
    pub insi_v4: u8,
    pub insi_v6: InsiV6,
}

/// `TSI_T_NTIMERS` (`bsd/sys/proc_info.h`).
pub const TSI_T_NTIMERS: usize = 4;

/// `struct tcp_sockinfo` (`bsd/sys/proc_info.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpSockinfo {
    pub tcpsi_ini: InSockinfo,
    pub tcpsi_state: i32,
    pub tcpsi_timer: [i32; TSI_T_NTIMERS],
    pub tcpsi_mss: i32,
    pub tcpsi_flags: u32,
    pub rfu_1: u32,
    pub tcpsi_tp: u64,
}

/// Bytes of the `soi_proto` union of `struct socket_info`: its largest
/// member is `struct un_sockinfo` (two `uint64_t` handles and two 255-byte
/// address unions, `SOCK_MAXADDRLEN`), 526 bytes padded to 8.
pub const SOI_PROTO_SIZE: usize = 528;

/// The `soi_proto` union of `struct socket_info`, as the one member headroom
/// reads: `pri_tcp` (for `SOCKINFO_TCP`; its first member is `pri_in`),
/// then the rest of the union's bytes. Every member of a C union starts at
/// offset 0, so this has the union's layout without a Rust `union`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SoiProto {
    pub pri_tcp: TcpSockinfo,
    pub rest: [u8; SOI_PROTO_SIZE - size_of::<TcpSockinfo>()],
}

impl Default for SoiProto {
    fn default() -> Self {
        Self {
            pri_tcp: TcpSockinfo::default(),
            rest: [0; SOI_PROTO_SIZE - size_of::<TcpSockinfo>()],
        }
    }
}

/// `struct vinfo_stat`: 136 opaque bytes of its size and alignment (libc's
/// on macOS, checked below); headroom reads nothing of it.
pub type VinfoStat = [i64; 17];

/// `struct socket_info` (`bsd/sys/proc_info.h`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct SocketInfo {
    pub soi_stat: VinfoStat,
    pub soi_so: u64,
    pub soi_pcb: u64,
    pub soi_type: i32,
    pub soi_protocol: i32,
    pub soi_family: i32,
    pub soi_options: i16,
    pub soi_linger: i16,
    pub soi_state: i16,
    pub soi_qlen: i16,
    pub soi_incqlen: i16,
    pub soi_qlimit: i16,
    pub soi_timeo: i16,
    pub soi_error: u16,
    pub soi_oobmark: u32,
    pub soi_rcv: SockbufInfo,
    pub soi_snd: SockbufInfo,
    pub soi_kind: i32,
    pub rfu_1: u32,
    pub soi_proto: SoiProto,
}

/// `struct socket_fdinfo` (`bsd/sys/proc_info.h`): what
/// `proc_pidfdinfo(PROC_PIDFDSOCKETINFO)` fills. Every field is an integer
/// or an array of them, so any bytes the kernel writes are a valid value.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct SocketFdinfo {
    pub pfi: ProcFileinfo,
    pub psi: SocketInfo,
}

impl SocketFdinfo {
    /// All zero: the buffer the kernel fills.
    pub fn zeroed() -> Self {
        Self::default()
    }
}

// The C layouts, from `bsd/sys/proc_info.h` on LP64 (both Apple
// architectures): sizes and the offsets of every field this file reads or
// that a slip in the fields before it would move.
const _: () = {
    assert!(size_of::<ProcFileinfo>() == 24);
    assert!(offset_of!(ProcFileinfo, fi_offset) == 8);
    assert!(offset_of!(ProcFileinfo, fi_type) == 16);
    assert!(offset_of!(ProcFileinfo, fi_guardflags) == 20);

    assert!(size_of::<SockbufInfo>() == 24);
    assert!(offset_of!(SockbufInfo, sbi_flags) == 20);

    assert!(size_of::<InsiAddr>() == 16 && align_of::<InsiAddr>() == 4);
    assert!(size_of::<InsiV6>() == 12);
    assert!(offset_of!(InsiV6, in6_cksum) == 4);
    assert!(offset_of!(InsiV6, in6_ifindex) == 8);
    assert!(offset_of!(InsiV6, in6_hops) == 10);

    assert!(size_of::<InSockinfo>() == 80 && align_of::<InSockinfo>() == 8);
    assert!(offset_of!(InSockinfo, insi_fport) == 0);
    assert!(offset_of!(InSockinfo, insi_lport) == 4);
    assert!(offset_of!(InSockinfo, insi_gencnt) == 8);
    assert!(offset_of!(InSockinfo, insi_flags) == 16);
    assert!(offset_of!(InSockinfo, insi_flow) == 20);
    assert!(offset_of!(InSockinfo, insi_vflag) == 24);
    assert!(offset_of!(InSockinfo, insi_ip_ttl) == 25);
    assert!(offset_of!(InSockinfo, rfu_1) == 28);
    assert!(offset_of!(InSockinfo, insi_faddr) == 32);
    assert!(offset_of!(InSockinfo, insi_laddr) == 48);
    assert!(offset_of!(InSockinfo, insi_v4) == 64);
    assert!(offset_of!(InSockinfo, insi_v6) == 68);

    assert!(size_of::<TcpSockinfo>() == 120);
    assert!(offset_of!(TcpSockinfo, tcpsi_state) == 80);
    assert!(offset_of!(TcpSockinfo, tcpsi_timer) == 84);
    assert!(offset_of!(TcpSockinfo, tcpsi_mss) == 100);
    assert!(offset_of!(TcpSockinfo, tcpsi_flags) == 104);
    assert!(offset_of!(TcpSockinfo, tcpsi_tp) == 112);

    assert!(size_of::<SoiProto>() == SOI_PROTO_SIZE && align_of::<SoiProto>() == 8);

    assert!(size_of::<VinfoStat>() == 136 && align_of::<VinfoStat>() == 8);

    assert!(size_of::<SocketInfo>() == 768);
    assert!(offset_of!(SocketInfo, soi_so) == 136);
    assert!(offset_of!(SocketInfo, soi_type) == 152);
    assert!(offset_of!(SocketInfo, soi_family) == 160);
    assert!(offset_of!(SocketInfo, soi_options) == 164);
    assert!(offset_of!(SocketInfo, soi_error) == 178);
    assert!(offset_of!(SocketInfo, soi_oobmark) == 180);
    assert!(offset_of!(SocketInfo, soi_rcv) == 184);
    assert!(offset_of!(SocketInfo, soi_snd) == 208);
    assert!(offset_of!(SocketInfo, soi_kind) == 232);
    assert!(offset_of!(SocketInfo, soi_proto) == 240);

    // PROC_PIDFDSOCKETINFO_SIZE.
    assert!(size_of::<SocketFdinfo>() == 792);
    assert!(offset_of!(SocketFdinfo, psi) == 24);
};

#[cfg(target_os = "macos")]
const _: () = {
    // libc's vinfo_stat, which the opaque `VinfoStat` stands in for.
    assert!(size_of::<libc::vinfo_stat>() == size_of::<VinfoStat>());
    assert!(align_of::<libc::vinfo_stat>() == align_of::<VinfoStat>());
    // libc's proc_fdinfo: `int32_t proc_fd; uint32_t proc_fdtype;`.
    assert!(size_of::<libc::proc_fdinfo>() == 8);
    assert!(offset_of!(libc::proc_fdinfo, proc_fdtype) == 4);
};

/// A socket that listens: where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListeningSocket {
    /// The local address; unspecified for a wildcard (`0.0.0.0`, `::`).
    pub ip: IpAddr,
    pub port: u16,
}

/// If `info` describes a TCP socket in the LISTEN state, its local address
/// and port; `None` for anything else (a connection, UDP, a Unix socket).
pub fn listening_port(info: &SocketFdinfo) -> Option<ListeningSocket> {
    if info.psi.soi_kind != SOCKINFO_TCP {
        return None;
    }
    let tcp = &info.psi.soi_proto.pri_tcp;
    if tcp.tcpsi_state != TSI_S_LISTEN {
        return None;
    }
    let ini = &tcp.tcpsi_ini;
    // The u_short in network order, widened to int by the kernel: its low
    // 16 bits are the port's bytes as they lie in memory.
    let port = u16::from_be(ini.insi_lport as u16);
    let bytes = ini.insi_laddr.0;
    let ip = if ini.insi_vflag & INI_IPV6 != 0 {
        let v6 = Ipv6Addr::from(bytes);
        v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
    } else if ini.insi_vflag & INI_IPV4 != 0 {
        IpAddr::V4(Ipv4Addr::new(bytes[12], bytes[13], bytes[14], bytes[15]))
    } else {
        return None;
    };
    Some(ListeningSocket { ip, port })
}

/// Whether `listening` accepts connections made to `ip`:`port` (its own
/// address, or a wildcard). A dual-stack wildcard (`::`) accepts IPv4 too.
pub fn reaches(listening: ListeningSocket, ip: IpAddr, port: u16) -> bool {
    listening.port == port && (listening.ip.is_unspecified() || listening.ip == canonical(ip))
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether process `pid` holds a TCP socket listening where a connection to
/// `ip`:`port` arrives. Err when its descriptors cannot be listed (gone, or
/// another user's without root).
#[cfg(target_os = "macos")]
pub fn pid_listens(pid: u32, ip: IpAddr, port: u16) -> std::io::Result<bool> {
    use crate::os::macos::ffi::proc as ffi;
    let pid = i32::try_from(pid)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "pid out of range"))?;
    let sockets = ffi::fd_list(pid, MAX_FDS)?
        .into_iter()
        .filter(|f| i64::from(f.proc_fdtype) == i64::from(libc::PROX_FDTYPE_SOCKET));
    for fd in sockets {
        // A descriptor closed since the listing is no listener.
        let Some(info) = ffi::socket_fdinfo(pid, fd.proc_fd) else {
            continue;
        };
        if listening_port(&info).is_some_and(|l| reaches(l, ip, port)) {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `socket_fdinfo` as `fill_socketinfo` writes it for a TCP socket:
    /// `soi_kind`, the TCP state, `insi_vflag`, the local address bytes and
    /// the port as the kernel stores it (network order in an int).
    fn tcp(state: i32, vflag: u8, laddr: [u8; 16], port: u16) -> SocketFdinfo {
        let mut info = SocketFdinfo::zeroed();
        info.psi.soi_kind = SOCKINFO_TCP;
        info.psi.soi_family = if vflag & INI_IPV6 != 0 { 30 } else { 2 };
        let tcp = &mut info.psi.soi_proto.pri_tcp;
        tcp.tcpsi_state = state;
        tcp.tcpsi_ini.insi_vflag = vflag;
        tcp.tcpsi_ini.insi_laddr = InsiAddr(laddr);
        tcp.tcpsi_ini.insi_lport = i32::from(u16::from_ne_bytes(port.to_be_bytes()));
        info
    }

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut bytes = [0; 16];
        bytes[12..].copy_from_slice(&a);
        bytes
    }

    #[test]
    fn a_loopback_listener_gives_its_address_and_port() {
        let l = listening_port(&tcp(TSI_S_LISTEN, INI_IPV4, v4([127, 0, 0, 1]), 8888)).unwrap();
        assert_eq!(l.ip, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(l.port, 8888);
        assert!(reaches(l, "127.0.0.1".parse().unwrap(), 8888));
        assert!(!reaches(l, "127.0.0.1".parse().unwrap(), 8889));
        assert!(!reaches(l, "127.0.0.2".parse().unwrap(), 8888));
    }

    #[test]
    fn the_port_is_read_in_network_order() {
        // 8888 = 0x22B8: the int holds the bytes 22 B8 as they lie in memory.
        let info = tcp(TSI_S_LISTEN, INI_IPV4, v4([127, 0, 0, 1]), 0x22B8);
        let raw = info.psi.soi_proto.pri_tcp.tcpsi_ini.insi_lport;
        assert_eq!((raw as u16).to_ne_bytes(), [0x22, 0xB8]);
        assert_eq!(listening_port(&info).unwrap().port, 8888);
    }

    #[test]
    fn a_dual_stack_wildcard_reaches_both_loopbacks() {
        let l = listening_port(&tcp(TSI_S_LISTEN, INI_IPV4 | INI_IPV6, [0; 16], 9000)).unwrap();
        assert!(l.ip.is_unspecified());
        assert!(reaches(l, "127.0.0.1".parse().unwrap(), 9000));
        assert!(reaches(l, "::1".parse().unwrap(), 9000));
        let mut v6_loopback = [0; 16];
        v6_loopback[15] = 1;
        let l = listening_port(&tcp(TSI_S_LISTEN, INI_IPV6, v6_loopback, 9000)).unwrap();
        assert_eq!(l.ip, IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert!(!reaches(l, "127.0.0.1".parse().unwrap(), 9000));
    }

    #[test]
    fn connections_and_other_sockets_are_not_listeners() {
        // TSI_S_ESTABLISHED = 4.
        assert_eq!(
            listening_port(&tcp(4, INI_IPV4, v4([127, 0, 0, 1]), 8888)),
            None
        );
        let mut unix = tcp(TSI_S_LISTEN, INI_IPV4, v4([127, 0, 0, 1]), 8888);
        unix.psi.soi_kind = 3; // SOCKINFO_UN
        assert_eq!(listening_port(&unix), None);
        assert_eq!(
            listening_port(&tcp(TSI_S_LISTEN, 0, [0; 16], 8888)),
            None,
            "neither family flag"
        );
    }

    /// On a Mac: this test process listens on a port, and libproc says so.
    #[cfg(target_os = "macos")]
    #[test]
    fn this_process_is_seen_listening() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(pid_listens(me, loopback, port).unwrap());
        drop(listener);
        assert!(!pid_listens(me, loopback, port).unwrap());
    }
}
