//! `flock(2)` on an open file: the advisory whole-file lock one daemon holds
//! on its state directory (`journal::state_lock`). The kernel releases it
//! when the last descriptor of the open file closes, so a process that ends,
//! however it ends, holds nothing. Linux and macOS (and every BSD) have it.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;

/// How the lock is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One holder (`LOCK_EX`): the daemon.
    Exclusive,
    /// Any number of holders, none exclusive (`LOCK_SH`): a reader asking
    /// whether a daemon holds it.
    Shared,
}

/// Take the lock on `file` without waiting: `Ok(true)` taken, `Ok(false)`
/// held by another open file (`EWOULDBLOCK`).
pub fn try_lock(file: &File, kind: Kind) -> io::Result<bool> {
    let operation = match kind {
        Kind::Exclusive => libc::LOCK_EX,
        Kind::Shared => libc::LOCK_SH,
    } | libc::LOCK_NB;
    loop {
        // SAFETY: flock takes a descriptor and flags and touches no memory;
        // the descriptor is `file`'s, open for as long as this borrow.
        let rc = unsafe { libc::flock(file.as_raw_fd(), operation) };
        if rc == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(e),
        }
    }
}
