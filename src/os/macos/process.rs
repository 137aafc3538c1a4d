//! macOS identity checks. The start time is `p_start` (microseconds since
//! the epoch, the value the macOS sampler records), re-read with
//! `proc_pidinfo(PROC_PIDTBSDINFO)`; for another user's process, which that
//! call refuses to a non-root caller, from `kinfo_proc`, which copies the
//! same `p_start`. `exec` keeps `p_start` (`bsd/kern/kern_fork.c` copies it
//! into the process `exec` makes) and changes the name, which the same
//! calls give ([`current`]). Handlers are `kinfo_proc.kp_proc.p_sigcatch`, bit `n - 1`
//! for signal `n`. A pid above `i32::MAX` is no Darwin pid: no such process
//! (`Ok(None)`), as the identity functions promise.
//!
//! The members of a process group come from `proc_listpids(PROC_PGRP_ONLY,
//! pgid)` (`ffi/proc.rs`).

use std::io;

use crate::os::macos::ffi::proc as ffi_proc;
use crate::os::macos::parse::{kinfo, proc_info};
use crate::os::posix;
use crate::os::process_facts::{Current, Member, ProcStat};
use crate::os::read_failure::ReadFailure;

/// The most members one group is listed with: far more than a group holds;
/// a bound on the buffer whatever the kernel's estimate says.
const MAX_GROUP_PIDS: usize = 1 << 16;

/// The pids in process group `pgid`, from `proc_listpids(PROC_PGRP_ONLY)`.
pub fn group_pids(pgid: u32) -> io::Result<Vec<u32>> {
    // A pgid is a pid_t: one past i32::MAX names no group.
    if proc_info::darwin_pid(pgid).is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{pgid} is not a macOS process group"),
        ));
    }
    let buf = ffi_proc::group_pids(pgid, MAX_GROUP_PIDS)?;
    // pid 0 (kernel_task) is in no user's group; a zero is an unused slot.
    Ok(buf
        .into_iter()
        .filter_map(|pid| u32::try_from(pid).ok())
        .filter(|&pid| pid > 0)
        .collect())
}

/// What a group member is checked by: start, owner and `p_comm` from
/// `kinfo_proc` (which answers for every user), the name as the sampler
/// records it (`PROC_PIDTBSDINFO` where that answers, else the same name
/// rebuilt from `p_comm` and the executable, [`proc_info::fallback_name`]),
/// the executable from `proc_pidpath`, the group from `getpgid`.
/// `Ok(None)` if it does not exist or is a zombie.
pub fn member(pid: u32) -> io::Result<Option<Member>> {
    let Some(ipid) = proc_info::darwin_pid(pid) else {
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
    let exe = ffi_proc::pid_path(ipid).ok();
    let name = ffi_proc::bsd_info(ipid).map_or_else(
        |_| proc_info::fallback_name(&k.comm, exe.as_deref()),
        |info| info.name,
    );
    Ok(Some(Member {
        pid,
        start: k.start_micros,
        pgid,
        uid: Some(k.uid),
        name,
        exe,
        kernel_thread: pid == 0,
    }))
}

fn errno_error(pid: u32, what: &str, errno: i32) -> io::Error {
    let e = io::Error::from_raw_os_error(errno);
    io::Error::new(e.kind(), format!("cannot read process {pid}'s {what}: {e}"))
}

/// The process's `kinfo_proc`, `Ok(None)` if it does not exist (a pid no
/// Darwin process can have included).
fn kinfo_facts(pid: u32) -> io::Result<Option<kinfo::KinfoFacts>> {
    let Some(ipid) = proc_info::darwin_pid(pid) else {
        return Ok(None);
    };
    let bytes =
        ffi_proc::kinfo_proc(ipid).map_err(|errno| errno_error(pid, "kinfo_proc", errno))?;
    kinfo::parse(&bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("process {pid}: {e}")))
}

/// The start time of `pid` now; `Ok(None)` if no such process exists (a
/// pid above `i32::MAX` included) or it is a zombie.
pub fn current_start(pid: u32) -> io::Result<Option<u64>> {
    current(pid).map(|c| c.map(|c| c.start))
}

/// The start time and name of `pid` now, as the sampler records them: from
/// `PROC_PIDTBSDINFO`, or for another user's process, which that call
/// refuses to a non-root caller, from `kinfo_proc` (`p_start`, `p_comm`)
/// and `proc_pidpath` ([`proc_info::fallback_name`]). `Ok(None)` if no
/// such process exists (a pid above `i32::MAX` included) or it is a zombie.
pub fn current(pid: u32) -> io::Result<Option<Current>> {
    let Some(ipid) = proc_info::darwin_pid(pid) else {
        return Ok(None);
    };
    match ffi_proc::bsd_info(ipid) {
        Ok(info) => Ok(Some(Current {
            start: info.start_micros,
            name: info.name,
        })),
        Err(errno) => match proc_info::libproc_failure(errno) {
            ReadFailure::Vanished => Ok(None),
            // Another user's process: kinfo_proc answers everyone.
            ReadFailure::Denied => Ok(kinfo_facts(pid)?.filter(|k| !k.zombie).map(|k| {
                let exe = ffi_proc::pid_path(ipid).ok();
                Current {
                    start: k.start_micros,
                    name: proc_info::fallback_name(&k.comm, exe.as_deref()),
                }
            })),
            ReadFailure::Unreadable => Err(errno_error(pid, "start time", errno)),
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

/// A process held for signalling. macOS has no pidfds: the pid, whose
/// start time the caller checks again right before the signal.
#[derive(Debug)]
pub struct Pinned(u32);

impl Pinned {
    /// The pid: its identity must be checked again right before the signal.
    pub fn unpinned_pid(&self) -> Option<u32> {
        Some(self.0)
    }

    /// Send `signal` to the pid.
    pub fn send(&self, signal: i32) -> io::Result<()> {
        posix::kill(self.0, signal)
    }
}

/// Pin `pid` (by its pid alone: see [`Pinned`]).
pub fn pin(pid: u32) -> io::Result<Option<Pinned>> {
    Ok(Some(Pinned(pid)))
}

/// `headroom doctor`'s check that the actuator can read what it checks
/// before every signal: this process's start time, from `kinfo_proc` and
/// `proc_bsdinfo` alike, and its caught signals.
pub fn signals_check() -> crate::model::Check {
    use crate::model::Check;
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let k = match ffi_proc::kinfo_proc(me).map(|b| kinfo::parse(&b)) {
        Ok(Ok(Some(k))) => k,
        Ok(Ok(None)) => {
            return Check::fail(
                "signals",
                "kinfo_proc says this process does not exist",
                "please report this output",
            );
        }
        Ok(Err(e)) => return Check::fail("signals", e.to_string(), "please report this output"),
        Err(errno) => {
            return Check::fail(
                "signals",
                format!(
                    "sysctl KERN_PROC_PID failed: {}",
                    std::io::Error::from_raw_os_error(errno)
                ),
                "please report this output",
            );
        }
    };
    match ffi_proc::bsd_info(me) {
        Ok(b) if b.start_micros == k.start_micros => Check::ok(
            "signals",
            format!(
                "process identity (start time) and caught signals readable; kinfo_proc and proc_bsdinfo agree ({} handlers here)",
                k.sigcatch.count_ones()
            ),
        ),
        Ok(b) => Check::fail(
            "signals",
            format!(
                "start times disagree: kinfo_proc {} µs, proc_bsdinfo {} µs",
                k.start_micros, b.start_micros
            ),
            "signals are not sent safely on this macOS; please report this output",
        ),
        Err(errno) => Check::fail(
            "signals",
            format!(
                "proc_pidinfo(PROC_PIDTBSDINFO) failed for this process: {}",
                std::io::Error::from_raw_os_error(errno)
            ),
            "please report this output",
        ),
    }
}

#[cfg(test)]
mod tests {
    //! These run on a Mac only (the module is macOS's); the pure pieces are
    //! tested with `os::macos::parse::proc_info`.

    use super::*;

    #[test]
    fn a_pid_above_i32_max_is_no_process_everywhere() {
        for pid in [i32::MAX as u32 + 1, u32::MAX] {
            assert_eq!(current_start(pid).unwrap(), None);
            assert_eq!(stat(pid).unwrap(), None);
            assert_eq!(member(pid).unwrap(), None);
            let err = catches_signal(pid, libc::SIGINT).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::NotFound);
        }
        assert_eq!(
            group_pids(u32::MAX).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    /// exec keeps the start time (the identity) and changes the name that
    /// [`current`] reads: what the actuator checks before a signal. The
    /// shell execs once the test has read it (it waits for a file).
    #[test]
    fn exec_keeps_the_start_time_and_changes_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let go = dir.path().join("go");
        let mut child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(r#"while [ ! -e "$0" ]; do sleep 0.05; done; exec /bin/sleep 30"#)
            .arg(&go)
            .spawn()
            .unwrap();
        let pid = child.id();
        let before = current(pid).unwrap();
        std::fs::write(&go, b"").unwrap();
        let mut after = None;
        for _ in 0..500 {
            after = current(pid).unwrap();
            if after.as_ref().is_some_and(|c| c.name == "sleep") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let (before, after) = (before.expect("the shell"), after.expect("the exec'd shell"));
        assert_eq!(before.name, "sh");
        assert_eq!(after.name, "sleep");
        assert_eq!(after.start, before.start);
    }

    #[test]
    fn a_group_members_name_is_the_samplers() {
        let mut child = std::process::Command::new("/bin/sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let m = member(child.id()).unwrap();
        let info = ffi_proc::bsd_info(i32::try_from(child.id()).unwrap()).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let m = m.expect("the child exists");
        assert_eq!(m.name, info.name);
        assert_eq!(m.name, "sleep");
    }
}
