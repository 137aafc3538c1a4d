//! `dup2(2)` onto stdout and stderr: the daemon's log file, opened or
//! rotated by the daemon itself (`logging::log_file`), becomes descriptors 1
//! and 2, so everything written to them (log records, a panic's message)
//! goes there. Linux and macOS alike.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;

/// Make descriptors 1 and 2 refer to `file`'s open file. Each `dup2`
/// replaces the descriptor atomically: a concurrent write goes to the old
/// file or the new one, never nowhere.
pub fn onto_stdout_and_stderr(file: &File) -> io::Result<()> {
    for target in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        loop {
            // SAFETY: dup2 takes two descriptors and touches no memory;
            // `file`'s descriptor is open for as long as this borrow, and
            // 1 and 2 are the standard descriptors, which no Rust object
            // owns (std's Stdout and Stderr write to whatever they refer
            // to).
            let rc = unsafe { libc::dup2(file.as_raw_fd(), target) };
            if rc != -1 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }
    Ok(())
}
