//! The one C call the tests make themselves: `kill(2)` on a test's own child
//! (std's `Child::kill` sends only SIGKILL). An FFI file: a thin, safe
//! wrapper that panics where the call fails.

/// `kill(pid, signal)` on one of the tests' own children; panics if it fails.
pub fn kill(pid: u32, signal: libc::c_int) {
    let c_pid = libc::pid_t::try_from(pid).expect("pid");
    assert!(c_pid > 0, "pid {pid} would address a process group");
    // SAFETY: kill has no memory-safety preconditions; the pid is positive,
    // so it addresses exactly one process, a child a test started.
    let rc = unsafe { libc::kill(c_pid, signal) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {signal}): {}",
        std::io::Error::last_os_error()
    );
}
