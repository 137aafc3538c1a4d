//! Process facts on platforms without a native actuator module, through
//! sysinfo: the start time in sysinfo's seconds since the epoch (what the
//! fallback sampler records as `ProcessId::start`), the parent, and the
//! kernel-thread flag. Nothing here can see a process's signal handlers, so a
//! `require_handler` step is skipped rather than risked, nor a process's
//! group, so a `process_group` step is refused.

use std::io;

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System, ThreadKind};

use super::identity::{Member, ProcStat};

/// Read one process; `Ok(None)` if it does not exist.
pub fn stat(pid: u32) -> io::Result<Option<ProcStat>> {
    let mut system =
        System::new().map_err(|e| io::Error::other(format!("sysinfo could not start: {e}")))?;
    let target = Pid::from_u32(pid);
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[target]),
        true,
        ProcessRefreshKind::nothing().without_tasks(),
    );
    Ok(system.process(target).map(|p| ProcStat {
        ppid: p.parent().map_or(0, Pid::as_u32),
        start: p.start_time(),
        kernel_thread: p.thread_kind() == Some(ThreadKind::Kernel),
    }))
}

/// Handlers cannot be read here: always an `Unsupported` error.
pub fn catches_signal(pid: u32, signal: i32) -> io::Result<bool> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "this platform's actuator cannot read the signal handlers of pid {pid} (signal {signal})"
        ),
    ))
}

/// Process groups cannot be listed here: always an `Unsupported` error.
pub fn group_pids(pgid: u32) -> io::Result<Vec<u32>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("this platform's actuator cannot list the members of process group {pgid}"),
    ))
}

/// Group members cannot be checked here: always an `Unsupported` error.
pub fn member(pid: u32) -> io::Result<Option<Member>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("this platform's actuator cannot check pid {pid} as a process group member"),
    ))
}
