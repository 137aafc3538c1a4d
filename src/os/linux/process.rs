//! Linux process facts and pinned signal delivery: `pidfd_open` and
//! `pidfd_send_signal` (called through `ffi/pidfd.rs`), the start time, parent and
//! kernel-thread flag from `/proc/[pid]/stat`, and the caught-signal mask
//! `SigCgt` from `/proc/[pid]/status`; the members of a process group (a
//! scan of `/proc/*/stat`) and each one's owner, name and executable; and
//! the per-thread nice value (`getpriority`/`setpriority`).
//!
//! A pidfd refers to one process for as long as it is open: a signal sent
//! through it reaches that process or fails with `ESRCH`, never a newcomer
//! that inherited the pid. The actuator opens the pidfd first and reads the
//! start time after, so a matching start time proves the pidfd holds the
//! process the policy meant (see `signal.rs`).

use std::io;
use std::os::fd::{AsFd as _, OwnedFd};

use crate::os::linux::ffi::pidfd;
use crate::os::linux::parse::procfs;
use crate::os::posix;
use crate::os::process_facts::{Current, Member, ProcStat};

/// Read `/proc/[pid]/stat`; `Ok(None)` if the process does not exist.
pub fn stat(pid: u32) -> io::Result<Option<ProcStat>> {
    with_stat(pid, |s| ProcStat {
        ppid: s.ppid,
        start: s.start_ticks,
        kernel_thread: kernel_thread(pid, s),
    })
}

/// `f` of `/proc/[pid]/stat` read and parsed once; `Ok(None)` if the
/// process does not exist, an error if the file does not parse.
fn with_stat<T>(pid: u32, f: impl FnOnce(&procfs::Stat<'_>) -> T) -> io::Result<Option<T>> {
    let Some(data) = read_proc(pid, "stat")? else {
        return Ok(None);
    };
    let s = procfs::parse_stat(&data).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/stat does not parse"),
        )
    })?;
    Ok(Some(f(&s)))
}

/// Field 5 of `/proc/[pid]/stat`, the process group: the second field after
/// the command name, which ends at the line's last `)` (see
/// [`procfs::parse_stat`]).
pub fn parse_pgrp(stat: &[u8]) -> Option<u32> {
    let close = stat.iter().rposition(|&c| c == b')')?;
    let field = stat[close + 1..]
        .split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .nth(2)?;
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// The pids whose `/proc/[pid]/stat` names `pgid` as their group. A process
/// that exits during the scan is left out; one whose stat does not parse
/// too (it is not a process this can judge).
pub fn group_pids(pgid: u32) -> io::Result<Vec<u32>> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(Some(data)) = read_proc(pid, "stat")
            && parse_pgrp(&data) == Some(pgid)
        {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// What a process group member is checked by, from `stat`, `status` and
/// the `exe` link; `Ok(None)` if it does not exist or is a zombie. An owner
/// or executable that cannot be read is `None` (the checks then treat the
/// process as one they cannot place).
pub fn member(pid: u32) -> io::Result<Option<Member>> {
    let Some(data) = read_proc(pid, "stat")? else {
        return Ok(None);
    };
    let unparsable = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/stat does not parse"),
        )
    };
    let st = procfs::parse_stat(&data).ok_or_else(unparsable)?;
    if st.state == b'Z' {
        return Ok(None);
    }
    let pgid = parse_pgrp(&data).ok_or_else(unparsable)?;
    let uid = match read_proc(pid, "status")? {
        Some(status) => procfs::parse_status(&status).map(|s| s.uid),
        None => return Ok(None),
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|t| {
            let t = t.to_string_lossy();
            t.strip_suffix(" (deleted)").unwrap_or(&t).to_string()
        });
    Ok(Some(Member {
        pid,
        start: st.start_ticks,
        pgid,
        uid,
        name: String::from_utf8_lossy(st.comm).into_owned(),
        exe,
        kernel_thread: kernel_thread(pid, &st),
    }))
}

/// True if the process of this stat is a kernel thread (see
/// [`pid_2_is_kthreadd`]).
fn kernel_thread(pid: u32, st: &procfs::Stat<'_>) -> bool {
    st.is_kernel_thread() || ((st.ppid == 2 || pid == 2) && pid_2_is_kthreadd())
}

/// PF_KTHREAD is the kernel's own mark. As a second check, children of
/// kthreadd (pid 2 outside containers) count too; inside a pid namespace pid 2
/// is an ordinary process, so its children are only excluded when pid 2
/// carries PF_KTHREAD itself.
fn pid_2_is_kthreadd() -> bool {
    matches!(read_proc(2, "stat"), Ok(Some(data))
        if procfs::parse_stat(&data).is_some_and(|s| s.is_kernel_thread()))
}

/// The `SigCgt` mask of `/proc/[pid]/status`; `Ok(None)` if the process does
/// not exist.
pub fn caught_signals(pid: u32) -> io::Result<Option<u64>> {
    let Some(data) = read_proc(pid, "status")? else {
        return Ok(None);
    };
    parse_sig_cgt(&data).map(Some).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/status has no readable SigCgt line"),
        )
    })
}

/// `SigCgt:\t0000000000004a02` → the mask; bit `n - 1` is signal `n`
/// (proc(5): "Masks ... of signals being ... caught").
pub fn parse_sig_cgt(status: &[u8]) -> Option<u64> {
    let line = status
        .split(|&c| c == b'\n')
        .find_map(|l| l.strip_prefix(b"SigCgt:"))?;
    let hex = std::str::from_utf8(line).ok()?.trim();
    // The mask is 64 bits on every architecture Linux runs on today; a longer
    // one (hypothetical) keeps its low 64 bits, which hold the signals we send.
    let low = hex.get(hex.len().saturating_sub(16)..)?;
    u64::from_str_radix(low, 16).ok()
}

/// True if the mask says `signal` is caught.
pub fn mask_has(mask: u64, signal: i32) -> bool {
    match u32::try_from(signal) {
        Ok(n @ 1..=64) => mask & (1u64 << (n - 1)) != 0,
        _ => false,
    }
}

fn read_proc(pid: u32, file: &str) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(format!("/proc/{pid}/{file}")) {
        Ok(data) => Ok(Some(data)),
        // ESRCH: the process exited while the file was open.
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// An open pidfd.
#[derive(Debug)]
pub struct PidFd(OwnedFd);

/// What `pidfd_open` gave.
#[derive(Debug)]
pub enum Opened {
    Fd(PidFd),
    /// The process does not exist (`ESRCH`).
    Gone,
    /// The kernel has no pidfds (before 5.3: `ENOSYS`).
    Unsupported,
}

/// `pidfd_open(pid, 0)`.
pub fn pidfd_open(pid: u32) -> io::Result<Opened> {
    let Ok(c_pid) = libc::pid_t::try_from(pid) else {
        return Ok(Opened::Gone);
    };
    if c_pid <= 0 {
        return Ok(Opened::Gone);
    }
    match pidfd::open(c_pid) {
        Ok(fd) => Ok(Opened::Fd(PidFd(fd))),
        Err(err) => match err.raw_os_error() {
            Some(libc::ESRCH) => Ok(Opened::Gone),
            Some(libc::ENOSYS) => Ok(Opened::Unsupported),
            _ => Err(err),
        },
    }
}

/// The start time of `pid` now (clock ticks since boot, field 22 of
/// `/proc/[pid]/stat`); `Ok(None)` if no such process exists.
pub fn current_start(pid: u32) -> io::Result<Option<u64>> {
    stat(pid).map(|s| s.map(|s| s.start))
}

/// The start time and name (`comm`, as the sampler records it) of `pid`
/// now, from one read of `/proc/[pid]/stat`; `Ok(None)` if no such process
/// exists.
pub fn current(pid: u32) -> io::Result<Option<Current>> {
    with_stat(pid, |s| Current {
        start: s.start_ticks,
        name: String::from_utf8_lossy(s.comm).into_owned(),
    })
}

/// True if `pid` has a handler installed for `signal` (`SigCgt`); an error
/// if the process is gone.
pub fn catches_signal(pid: u32, signal: i32) -> io::Result<bool> {
    match caught_signals(pid)? {
        Some(mask) => Ok(mask_has(mask, signal)),
        None => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("pid {pid} does not exist"),
        )),
    }
}

/// A process held for signalling: through a pidfd, or (a kernel without
/// pidfds) by its pid, whose start time the caller checks again right
/// before the signal.
#[derive(Debug)]
pub enum Pinned {
    Fd(PidFd),
    Pid(u32),
}

impl Pinned {
    /// The pid where no pidfd holds the process: its identity must be
    /// checked again right before the signal.
    pub fn unpinned_pid(&self) -> Option<u32> {
        match self {
            Pinned::Fd(_) => None,
            Pinned::Pid(pid) => Some(*pid),
        }
    }

    /// Send `signal` to the pinned process.
    pub fn send(&self, signal: i32) -> io::Result<()> {
        match self {
            Pinned::Fd(fd) => fd.send(signal),
            Pinned::Pid(pid) => posix::kill(*pid, signal),
        }
    }
}

/// Pin `pid` with a pidfd; `Ok(None)` if it does not exist.
pub fn pin(pid: u32) -> io::Result<Option<Pinned>> {
    Ok(match pidfd_open(pid)? {
        Opened::Fd(fd) => Some(Pinned::Fd(fd)),
        Opened::Gone => None,
        Opened::Unsupported => Some(Pinned::Pid(pid)),
    })
}

impl PidFd {
    /// `pidfd_send_signal(fd, signal, NULL, 0)`: `ESRCH` once the process has
    /// exited, even if its pid was reused.
    pub fn send(&self, signal: i32) -> io::Result<()> {
        pidfd::send_signal(self.0.as_fd(), signal)
    }
}

/// `headroom doctor`'s check that the actuator can read what it checks
/// before every signal: this process's start time and caught signals.
pub fn signals_check() -> crate::model::Check {
    use crate::model::Check;
    let me = std::process::id();
    match (current_start(me), catches_signal(me, libc::SIGUSR1)) {
        (Ok(Some(_)), Ok(_)) => Check::ok(
            "signals",
            "process identity (stat start time) and handlers (SigCgt) readable",
        ),
        (Ok(None), _) => Check::fail(
            "signals",
            "this process has no /proc entry",
            "please report this output",
        ),
        (Err(e), _) | (_, Err(e)) => {
            Check::fail("signals", e.to_string(), "please report this output")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From a Jupyter kernel (python3 with ipykernel) on Linux 6.8: it catches
    /// SIGINT (2), SIGTERM (15), SIGCHLD (17) and a few others.
    const KERNEL_STATUS: &[u8] = b"Name:\tpython3\nState:\tS (sleeping)\n\
        SigQ:\t0/63344\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n\
        SigBlk:\t0000000000000000\nSigIgn:\t0000000001001000\n\
        SigCgt:\t0000000100014002\nCapInh:\t0000000000000000\n";

    #[test]
    fn sig_cgt_is_read_as_hex() {
        let mask = parse_sig_cgt(KERNEL_STATUS).unwrap();
        assert_eq!(mask, 0x1_0001_4002);
        assert!(mask_has(mask, libc::SIGINT));
        assert!(mask_has(mask, libc::SIGTERM));
        assert!(!mask_has(mask, libc::SIGUSR1));
        assert!(!mask_has(mask, 0));
        assert!(!mask_has(mask, 65));
    }

    #[test]
    fn missing_or_garbled_sig_cgt_is_none() {
        assert_eq!(parse_sig_cgt(b"Name:\tx\n"), None);
        assert_eq!(parse_sig_cgt(b"SigCgt:\tzz\n"), None);
    }

    #[test]
    fn the_group_is_the_fifth_stat_field_even_after_a_hostile_name() {
        let stat = b"4242 (a) 1 2 (x) S 1 4241 4241 0 -1 4194560 0 0\n";
        assert_eq!(parse_pgrp(stat), Some(4241));
        assert_eq!(parse_pgrp(b"4242 (x) S 1"), None);
        assert_eq!(parse_pgrp(b"garbage"), None);
    }

    #[test]
    fn our_own_group_is_read_from_stat() {
        let data = read_proc(std::process::id(), "stat").unwrap().unwrap();
        assert_eq!(
            parse_pgrp(&data),
            Some(crate::os::posix::own_process_group())
        );
    }

    #[test]
    fn our_own_stat_reads() {
        let s = stat(std::process::id()).unwrap().unwrap();
        assert!(!s.kernel_thread);
        assert_eq!(s.ppid, std::os::unix::process::parent_id());
    }

    #[test]
    fn kthreadd_and_its_children_are_kernel_threads() {
        // In a pid namespace (a container) there is no kthreadd to look at.
        if !pid_2_is_kthreadd() {
            return;
        }
        assert!(stat(2).unwrap().unwrap().kernel_thread);
        let children = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| Some((pid, stat(pid).ok()??)))
            .filter(|(_, s)| s.ppid == 2);
        for (pid, s) in children {
            assert!(s.kernel_thread, "pid {pid} is a child of kthreadd");
        }
    }

    #[test]
    fn a_pid_that_cannot_exist_is_gone() {
        assert!(matches!(pidfd_open(u32::MAX).unwrap(), Opened::Gone));
        assert_eq!(stat(u32::MAX).unwrap(), None);
    }

    #[test]
    fn signal_zero_through_a_pidfd_probes_ourselves() {
        match pidfd_open(std::process::id()).unwrap() {
            Opened::Fd(fd) => fd.send(0).unwrap(),
            Opened::Unsupported => {} // a kernel before 5.3: kill is used instead
            Opened::Gone => panic!("we exist"),
        }
    }
}
