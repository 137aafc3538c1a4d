//! `kill(2)` and the process-group calls, as C takes them: which pids may
//! be addressed (never 0, -1 or init's group) is decided in `os::posix`,
//! the only caller.

use std::io;

/// `kill(pid, signal)`: a positive `pid` is one process, a negative one the
/// group `-pid`.
pub fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes two integers and touches no memory of ours.
    let rc = unsafe { libc::kill(pid, signal) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getpgid(pid)`: the process group of `pid`; `ESRCH` if it does not exist.
pub fn getpgid(pid: libc::pid_t) -> io::Result<libc::pid_t> {
    // SAFETY: getpgid takes an integer and returns one; no memory is shared.
    let rc = unsafe { libc::getpgid(pid) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

/// `getpgrp()`: this process's own group (it cannot fail).
pub fn getpgrp() -> libc::pid_t {
    // SAFETY: getpgrp takes no arguments and always succeeds.
    unsafe { libc::getpgrp() }
}
