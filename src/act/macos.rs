//! macOS identity checks. The start time is `p_start` (microseconds since
//! the epoch, the value the macOS sampler records), re-read with
//! `proc_pidinfo(PROC_PIDTBSDINFO)`; for another user's process, which that
//! call refuses to a non-root caller, from `kinfo_proc`, which copies the
//! same `p_start`. Handlers are `kinfo_proc.kp_proc.p_sigcatch`, bit `n - 1`
//! for signal `n`.
//!
//! The members of a process group come from `proc_listpids(PROC_PGRP_ONLY,
//! pgid)`, the one FFI call of this file.

use std::ffi::c_void;
use std::io;
use std::mem::size_of;

use super::identity::{Member, ProcStat};
use super::posix;
use crate::sys::{macos_ffi_proc as ffi_proc, macos_kinfo as kinfo, macos_proc_info as proc_info};

/// `PROC_PGRP_ONLY` from `<sys/proc_info.h>` (`PROC_ALL_PIDS` 1,
/// `PROC_PGRP_ONLY` 2, `PROC_TTY_ONLY` 3, …): list the processes whose
/// process group is `typeinfo`. The libc crate does not define it.
const PROC_PGRP_ONLY: u32 = 2;

/// The most members one group is listed with: far more than a group holds;
/// a bound on the buffer whatever the kernel's estimate says.
const MAX_GROUP_PIDS: usize = 1 << 16;

/// The pids in process group `pgid`, from `proc_listpids(PROC_PGRP_ONLY)`.
pub fn group_pids(pgid: u32) -> io::Result<Vec<u32>> {
    // A pgid is a pid_t: one past i32::MAX names no group.
    if i32::try_from(pgid).is_err() {
        return Err(no_pid(pgid));
    }
    // libproc.c's proc_listpids answers in BYTES (its proc_listpgrppids
    // divides by sizeof(int)), and 0 (not -1) when the call fails, with
    // errno set: an empty answer is checked by the caller, which knows the
    // group is not empty.
    // SAFETY: with a null buffer and size 0, proc_listpids only returns the
    // number of bytes the answer needs now; it writes nothing.
    let estimate = unsafe { libc::proc_listpids(PROC_PGRP_ONLY, pgid, std::ptr::null_mut(), 0) };
    if estimate < 0 {
        return Err(io::Error::last_os_error());
    }
    // Room for members that join between the two calls.
    let capacity =
        (usize::try_from(estimate).unwrap_or(0) / size_of::<i32>() + 16).min(MAX_GROUP_PIDS);
    let mut buf = vec![0i32; capacity];
    let bytes = i32::try_from(capacity * size_of::<i32>()).unwrap_or(i32::MAX);
    // SAFETY: `buf` holds `capacity` i32, `bytes` bytes, and the call writes
    // at most `bytes` bytes; it returns the number of bytes written.
    let n = unsafe {
        libc::proc_listpids(
            PROC_PGRP_ONLY,
            pgid,
            buf.as_mut_ptr().cast::<c_void>(),
            bytes,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let count = (usize::try_from(n).unwrap_or(0) / size_of::<i32>()).min(capacity);
    buf.truncate(count);
    // pid 0 (kernel_task) is in no user's group; a zero is an unused slot.
    Ok(buf
        .into_iter()
        .filter_map(|pid| u32::try_from(pid).ok())
        .filter(|&pid| pid > 0)
        .collect())
}

/// What a group member is checked by: start, owner and `p_comm` from
/// `kinfo_proc` (which answers for every user), the name as the sampler
/// records it from `PROC_PIDTBSDINFO` where that answers, the executable
/// from `proc_pidpath`, the group from `getpgid`. `Ok(None)` if it does not
/// exist or is a zombie.
pub fn member(pid: u32) -> io::Result<Option<Member>> {
    let Ok(ipid) = i32::try_from(pid) else {
        return Ok(None);
    };
    let Some(k) = kinfo_facts(pid)?.filter(|k| !k.zombie) else {
        return Ok(None);
    };
    let pgid = match posix::process_group_of(pid) {
        Ok(pgid) => pgid,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
        Err(e) => return Err(e),
    };
    let name = ffi_proc::bsd_info(ipid).map_or_else(|_| k.comm.clone(), |info| info.name);
    Ok(Some(Member {
        pid,
        start: k.start_micros,
        pgid,
        uid: Some(k.uid),
        name,
        exe: ffi_proc::pid_path(ipid).ok(),
        kernel_thread: pid == 0,
    }))
}

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

/// Read one process from `kinfo_proc` (which answers for every user);
/// `Ok(None)` if it does not exist or is a zombie.
pub fn stat(pid: u32) -> io::Result<Option<ProcStat>> {
    Ok(kinfo_facts(pid)?.filter(|k| !k.zombie).map(|k| ProcStat {
        ppid: k.ppid,
        start: k.start_micros,
        kernel_thread: pid == 0,
    }))
}
