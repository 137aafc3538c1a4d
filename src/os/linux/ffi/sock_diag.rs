//! The netlink socket behind [`super::super::parse::sock_diag`] on Linux: open one, send a
//! request, read the kernel's answers. The bytes are made and read in
//! `sock_diag.rs`; this file only moves them.
//!
//! Only datagrams the kernel sent (source port id 0) are read: another
//! process may send to a netlink socket's port id, and a forged answer must
//! not name a socket's owner. A wait for the answer is bounded
//! ([`RECEIVE_TIMEOUT`]), and so is what one answer may hold (`limit`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::os::linux::parse::sock_diag::{self, Answers, NETLINK_SOCK_DIAG};

/// The receive buffer: larger than any datagram the kernel sends a dump in
/// (`netlink_dump` caps them at 32 KiB).
const DATAGRAM: usize = 64 * 1024;

/// How long to wait for the kernel's next datagram, and for the whole
/// answer.
pub const RECEIVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Send `request` (numbered `seq`) and read the answers: for a `dump`,
/// until the kernel says it is done, an error ends them, or `limit` sockets
/// were read; otherwise the one datagram that answers it.
///
/// `Unsupported` when this kernel has no socket diagnostics (the caller
/// falls back to `/proc/net/tcp`).
pub fn ask(request: &[u8], seq: u32, limit: usize, dump: bool) -> io::Result<Answers> {
    let socket = open()?;
    send(&socket, request)?;
    let mut buf = vec![0u8; DATAGRAM];
    let mut all = Answers::default();
    let deadline = Instant::now() + RECEIVE_TIMEOUT;
    loop {
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the kernel's socket diagnostics did not finish within {} s",
                    RECEIVE_TIMEOUT.as_secs()
                ),
            ));
        }
        let Some(n) = receive_from_kernel(&socket, &mut buf)? else {
            continue;
        };
        if n == 0 {
            return Ok(all);
        }
        let answers = sock_diag::parse(&buf[..n], seq);
        let answered = answers.done || answers.malformed || !answers.sockets.is_empty();
        all.sockets.extend(answers.sockets);
        all.error = answers.error;
        all.malformed |= answers.malformed;
        all.done = answers.done;
        if all.sockets.len() >= limit {
            all.sockets.truncate(limit);
            return Ok(all);
        }
        if all.done || all.malformed || (answered && !dump) {
            return Ok(all);
        }
    }
}

fn open() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call with constant arguments; the returned
    // descriptor is checked before use and owned by the OwnedFd below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPROTONOSUPPORT | libc::EAFNOSUPPORT) => io::Error::new(
                io::ErrorKind::Unsupported,
                format!("this kernel has no socket diagnostics (NETLINK_SOCK_DIAG): {e}"),
            ),
            _ => e,
        });
    }
    // SAFETY: `fd` was just returned by socket(2) and nothing else owns it.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let timeout = libc::timeval {
        tv_sec: libc::time_t::try_from(RECEIVE_TIMEOUT.as_secs()).unwrap_or(2),
        tv_usec: 0,
    };
    // SAFETY: `timeout` is a valid timeval that outlives the call, and its
    // size is passed with it.
    let set = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            std::ptr::from_ref(&timeout).cast(),
            socklen_of::<libc::timeval>(),
        )
    };
    if set != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(socket)
}

fn send(socket: &OwnedFd, request: &[u8]) -> io::Result<()> {
    // SAFETY: an all-zero sockaddr_nl is valid (port id 0: the kernel).
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `request` and `kernel` are valid for the lengths passed and
    // outlive the call.
    let sent = unsafe {
        libc::sendto(
            socket.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
            std::ptr::from_ref(&kernel).cast(),
            socklen_of::<libc::sockaddr_nl>(),
        )
    };
    match usize::try_from(sent) {
        Ok(n) if n == request.len() => Ok(()),
        Ok(n) => Err(io::Error::other(format!(
            "netlink sent {n} of {} bytes",
            request.len()
        ))),
        Err(_) => Err(io::Error::last_os_error()),
    }
}

/// One datagram into `buf`: `Some(length)` if the kernel sent it, `None`
/// for a datagram from anyone else (dropped). A wait past the timeout is
/// an error.
fn receive_from_kernel(socket: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: an all-zero sockaddr_nl is a valid place for the sender.
    let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    let mut from_len = socklen_of::<libc::sockaddr_nl>();
    // SAFETY: `buf` is valid for `buf.len()` bytes, `from` for `from_len`,
    // and both outlive the call.
    let n = unsafe {
        libc::recvfrom(
            socket.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            std::ptr::from_mut(&mut from).cast(),
            &raw mut from_len,
        )
    };
    let Ok(n) = usize::try_from(n) else {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EINTR) => Ok(None),
            Some(libc::EAGAIN) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the kernel's socket diagnostics did not answer within {} s",
                    RECEIVE_TIMEOUT.as_secs()
                ),
            )),
            _ => Err(e),
        };
    };
    Ok((from.nl_pid == 0).then_some(n))
}

fn socklen_of<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(std::mem::size_of::<T>()).unwrap_or(0)
}
