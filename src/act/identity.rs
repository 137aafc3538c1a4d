//! Process identity and signal handlers, checked right before a signal.
//!
//! A pid alone is reused by the kernel; a pid and its start time are not
//! ([`crate::model::ProcessId`]). Before sending a signal the actuator
//! re-reads the start time with [`current_start`] and compares it with the
//! sampled identity. Some signals (SIGUSR1, SIGINFO) terminate a process
//! that does not handle them, so those are sent only where
//! [`catches_signal`] says a handler is installed.
//!
//! The start-time values are the samplers' own: clock ticks since boot on
//! Linux (`/proc/[pid]/stat` field 22), microseconds since the epoch on
//! macOS (`p_start`). Compare them, never interpret them.

use std::io;

/// The start time of process `pid` as its sampler records it, or
/// `Ok(None)` if there is no such process (any more).
pub fn current_start(pid: u32) -> io::Result<Option<u64>> {
    #[cfg(target_os = "linux")]
    {
        super::linux::current_start(pid)
    }
    #[cfg(target_os = "macos")]
    {
        super::macos::current_start(pid)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        Err(unsupported(pid))
    }
}

/// Whether process `pid` has a handler installed for `signal` (neither the
/// default action nor ignored). An error names the pid when the process is
/// gone or cannot be inspected, and rejects numbers that are not signals.
pub fn catches_signal(pid: u32, signal: i32) -> io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        super::linux::catches_signal(pid, signal)
    }
    #[cfg(target_os = "macos")]
    {
        super::macos::catches_signal(pid, signal)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = signal;
        Err(unsupported(pid))
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn unsupported(pid: u32) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("cannot check process {pid}: no identity check on this OS"),
    )
}

/// The error for a signal number outside `1..nsig`.
pub(crate) fn bad_signal(signal: i32) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{signal} is not a signal number on this OS"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn this_process_has_a_stable_start_time() {
        let me = std::process::id();
        let a = current_start(me).unwrap().expect("this process exists");
        let b = current_start(me).unwrap().expect("still exists");
        assert_eq!(a, b);
    }

    #[test]
    fn a_reaped_child_has_no_start_time() {
        let mut child = Command::new("sleep")
            .arg("30")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(current_start(pid).unwrap().is_some());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(current_start(pid).unwrap(), None);
    }

    #[test]
    fn a_later_process_has_a_later_start_time() {
        let me = current_start(std::process::id()).unwrap().unwrap();
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let theirs = current_start(child.id()).unwrap().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(theirs >= me, "{theirs} < {me}");
    }

    #[test]
    fn handlers_are_seen_only_where_installed() {
        // A shell that traps USR1 and INT, ignores TERM, and then waits.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("trap 'exit 0' USR1 INT; trap '' TERM; echo ready; while :; do sleep 1; done")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the traps are set.
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let pid = child.id();
        let caught = catches_signal(pid, libc::SIGUSR1).unwrap();
        let int = catches_signal(pid, libc::SIGINT).unwrap();
        let term = catches_signal(pid, libc::SIGTERM).unwrap();
        let usr2 = catches_signal(pid, libc::SIGUSR2).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(caught && int, "USR1 {caught}, INT {int}");
        assert!(!term, "an ignored signal is not caught");
        assert!(!usr2, "no trap for USR2");
    }

    #[test]
    fn not_a_signal_is_rejected_and_a_gone_process_is_an_error() {
        let me = std::process::id();
        let err = catches_signal(me, 0).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains('0'), "{err}");
        assert!(catches_signal(me, 200).is_err());
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let err = catches_signal(pid, libc::SIGINT).unwrap_err();
        assert!(err.to_string().contains(&pid.to_string()), "{err}");
    }
}
