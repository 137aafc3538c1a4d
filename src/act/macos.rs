//! macOS identity checks. The start time is `p_start` (microseconds since
//! the epoch, the value the macOS sampler records), re-read with
//! `proc_pidinfo(PROC_PIDTBSDINFO)`; for another user's process, which that
//! call refuses to a non-root caller, from `kinfo_proc`, which copies the
//! same `p_start`. Handlers are `kinfo_proc.kp_proc.p_sigcatch`, bit `n - 1`
//! for signal `n`.

use std::io;

use crate::sample::macos::{ffi_proc, kinfo, proc_info};

fn errno_error(pid: u32, what: &str, errno: i32) -> io::Error {
    let e = io::Error::from_raw_os_error(errno);
    io::Error::new(e.kind(), format!("cannot read process {pid}'s {what}: {e}"))
}

/// The process's `kinfo_proc`, `Ok(None)` if it does not exist.
fn kinfo_facts(pid: u32) -> io::Result<Option<kinfo::KinfoFacts>> {
    let ipid = i32::try_from(pid).map_err(|_| no_pid(pid))?;
    let bytes =
        ffi_proc::kinfo_proc(ipid).map_err(|errno| errno_error(pid, "kinfo_proc", errno))?;
    kinfo::parse(&bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("process {pid}: {e}")))
}

fn no_pid(pid: u32) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{pid} is not a macOS pid"),
    )
}

pub fn current_start(pid: u32) -> io::Result<Option<u64>> {
    let ipid = i32::try_from(pid).map_err(|_| no_pid(pid))?;
    match ffi_proc::bsd_info(ipid) {
        Ok(info) => Ok(Some(info.start_micros)),
        Err(errno) => match proc_info::libproc_failure(errno) {
            proc_info::Failure::Vanished => Ok(None),
            // Another user's process: kinfo_proc answers everyone.
            proc_info::Failure::Denied => Ok(kinfo_facts(pid)?
                .filter(|k| !k.zombie)
                .map(|k| k.start_micros)),
            proc_info::Failure::Unreadable => Err(errno_error(pid, "start time", errno)),
        },
    }
}

pub fn catches_signal(pid: u32, signal: i32) -> io::Result<bool> {
    let Some(k) = kinfo_facts(pid)? else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("process {pid} is gone"),
        ));
    };
    kinfo::in_mask(k.sigcatch, signal).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{signal} is not a signal number on this OS"),
        )
    })
}

/// What the actuator needs of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub ppid: u32,
    /// `p_start` in microseconds since the epoch, as the sampler records it.
    pub start: u64,
    /// macOS has no kernel threads in the process table; pid 0 is
    /// kernel_task.
    pub kernel_thread: bool,
}

/// Read one process from `kinfo_proc` (which answers for every user);
/// `Ok(None)` if it does not exist or is a zombie.
pub fn stat(pid: u32) -> io::Result<Option<ProcStat>> {
    Ok(kinfo_facts(pid)?.filter(|k| !k.zombie).map(|k| ProcStat {
        ppid: k.ppid,
        start: k.start_micros,
        kernel_thread: pid == 0,
    }))
}
