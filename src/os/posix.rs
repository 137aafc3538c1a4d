//! The POSIX calls the actuator needs on every Unix: `kill` and process
//! groups, with the pids each may address: `kill` never takes 0 or a
//! negative pid (which address groups), and only groups above 1 are
//! signalled whole. The calls themselves are in `os::ffi::signal`.

use std::io;

use crate::os::ffi::signal as ffi;

/// A pid as the C calls take it; pids above `i32::MAX` do not exist.
fn c_pid(pid: u32) -> io::Result<libc::pid_t> {
    libc::pid_t::try_from(pid).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("pid {pid} is out of range for this platform"),
        )
    })
}

/// `kill(pid, signal)` for one process. Refuses pid 0 and negative values,
/// which would address groups (`kill` with 0 signals the caller's own group).
pub fn kill(pid: u32, signal: i32) -> io::Result<()> {
    let pid = c_pid(pid)?;
    if pid <= 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "pid 0 addresses a process group, not a process",
        ));
    }
    // The pid is positive, so it addresses exactly one process.
    ffi::kill(pid, signal)
}

/// `kill(-pgid, signal)`: every process of group `pgid`. Refuses groups 0 and
/// 1 (the caller's own group and init's). Only for groups headroom made
/// itself (a hook and its children): a rule's `process_group` step checks
/// and signals member by member (`group.rs`), since a group can hold
/// processes the rule may not touch.
pub fn kill_group(pgid: u32, signal: i32) -> io::Result<()> {
    let pgid = c_pid(pgid)?;
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("process group {pgid} is never signalled"),
        ));
    }
    // -pgid with pgid > 1 addresses that one group.
    ffi::kill(-pgid, signal)
}

/// The process group of `pid` (`getpgid`); `ESRCH` if it does not exist.
pub fn process_group_of(pid: u32) -> io::Result<u32> {
    let pid = c_pid(pid)?;
    if pid <= 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "pid 0 means the caller to getpgid; ask for a real pid",
        ));
    }
    let pgid = ffi::getpgid(pid)?;
    u32::try_from(pgid).map_err(|_| {
        io::Error::other(format!(
            "getpgid({pid}) answered {pgid}, not a process group"
        ))
    })
}

/// This process's own process group (`getpgrp`, which cannot fail).
pub fn own_process_group() -> u32 {
    u32::try_from(ffi::getpgrp()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_zero_probes_a_live_process() {
        kill(std::process::id(), 0).unwrap();
    }

    #[test]
    fn pid_zero_and_group_one_are_refused() {
        assert_eq!(kill(0, 0).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            kill_group(1, 0).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            kill_group(0, 0).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn own_group_is_the_group_of_our_pid() {
        assert_eq!(
            process_group_of(std::process::id()).unwrap(),
            own_process_group()
        );
    }

    #[test]
    fn a_pid_beyond_the_range_is_invalid_input() {
        assert_eq!(
            kill(u32::MAX, 0).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
