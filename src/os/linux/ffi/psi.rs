//! A PSI trigger's descriptor handed to tokio's reactor, which wakes the
//! waiter when the kernel raises `POLLPRI` on it (`os::linux::psi_trigger`
//! writes the trigger and decides what a wake means).

use std::fs::File;
use std::io;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Register `file` with the current tokio runtime for priority events.
/// Must be called inside a tokio runtime.
pub fn watch_priority(file: File) -> io::Result<AsyncFd<File>> {
    // SAFETY: `file` is an open descriptor that AsyncFd takes ownership of:
    // a `File` always returns the same descriptor, which stays open, and
    // refers to the same pressure file, until the AsyncFd (and the File in
    // it) is dropped, which also deregisters it.
    let registered = unsafe { AsyncFd::register_with_interest(file, Interest::PRIORITY) };
    registered.map_err(io::Error::from)
}
