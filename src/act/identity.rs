//! What the actuator asks about a process before it signals it, in
//! OS-neutral terms: its start time (the second half of a
//! [`crate::model::ProcessId`]) and name ([`current`]: `exec` keeps the
//! start time and changes the name), whether it catches a signal, its
//! parent, whether it is a kernel thread; and, for a process group step,
//! the group's members and each one's owner, name and executable
//! ([`group_members`], [`member`]).
//!
//! Each function forwards to this OS's `os::<os>::process` (`/proc` on
//! Linux; `proc_pidinfo` and `kinfo_proc` on macOS). Start times are in the
//! unit of the OS's sampler, so they compare equal with the `start` the
//! sampler recorded.

use std::io;

use crate::os::native::process as platform;
pub use crate::os::process_facts::{Current, Member, ProcStat};

/// The start time of `pid` now; `Ok(None)` if no such process exists.
pub fn current_start(pid: u32) -> io::Result<Option<u64>> {
    platform::current_start(pid)
}

/// The start time and name of `pid` now, from one read; `Ok(None)` if no
/// such process exists.
pub fn current(pid: u32) -> io::Result<Option<Current>> {
    platform::current(pid)
}

/// True if `pid` has a handler installed for `signal` (not default, not
/// ignored). An error if the process is gone or the OS cannot tell.
pub fn catches_signal(pid: u32, signal: i32) -> io::Result<bool> {
    platform::catches_signal(pid, signal)
}

/// The parent of `pid`; `Ok(None)` if no such process exists.
pub fn parent(pid: u32) -> io::Result<Option<u32>> {
    platform::stat(pid).map(|s| s.map(|s| s.ppid))
}

/// True if `pid` is a kernel thread (it has no user space to signal);
/// `Ok(None)` if no such process exists.
pub fn is_kernel_thread(pid: u32) -> io::Result<Option<bool>> {
    platform::stat(pid).map(|s| s.map(|s| s.kernel_thread))
}

/// The pids of the processes in group `pgid` now (Linux: every
/// `/proc/[pid]/stat` whose `pgrp` is `pgid`; macOS:
/// `proc_listpids(PROC_PGRP_ONLY)`). A process that joins the group after
/// the list was made is not in it.
pub fn group_members(pgid: u32) -> io::Result<Vec<u32>> {
    platform::group_pids(pgid)
}

/// The facts of `pid` a group member is checked by; `Ok(None)` if no such
/// process exists (or it is a zombie).
pub fn member(pid: u32) -> io::Result<Option<Member>> {
    platform::member(pid)
}

/// This process and its ancestors, nearest first, up to (not including) pid 1
/// or 0. A parent that exits while the chain is walked ends it there.
pub fn own_lineage() -> io::Result<Vec<u32>> {
    let mut chain = vec![std::process::id()];
    let mut pid = std::process::id();
    // A cycle cannot happen in a real process tree; the bound keeps a
    // misreading from looping.
    for _ in 0..4096 {
        match parent(pid)? {
            Some(ppid) if ppid > 1 && !chain.contains(&ppid) => {
                chain.push(ppid);
                pid = ppid;
            }
            _ => break,
        }
    }
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_start_is_stable() {
        let pid = std::process::id();
        let a = current_start(pid).unwrap().unwrap();
        let b = current_start(pid).unwrap().unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn our_lineage_starts_with_us_and_our_parent() {
        let chain = own_lineage().unwrap();
        assert_eq!(chain[0], std::process::id());
        let parent = std::os::unix::process::parent_id();
        if parent > 1 {
            assert_eq!(chain[1], parent);
        }
        assert!(!chain.contains(&1));
    }

    #[test]
    fn our_current_start_and_name_are_the_samplers() {
        let me = std::process::id();
        let now = current(me).unwrap().expect("this process");
        assert_eq!(Some(now.start), current_start(me).unwrap());
        let mut sampler = crate::os::native::open_sampler();
        let snap = sampler.sample().unwrap();
        assert_eq!(
            now.name,
            snap.process(me).expect("this process").name.as_str()
        );
    }

    #[test]
    fn a_pid_that_cannot_exist_has_no_start() {
        assert_eq!(current(u32::MAX).unwrap(), None);
        assert_eq!(current_start(u32::MAX).unwrap(), None);
        assert_eq!(parent(u32::MAX).unwrap(), None);
    }

    /// One past `i32::MAX` is no `pid_t` on any platform: "no such
    /// process" from every question, not an error about the input.
    #[test]
    fn a_pid_past_pid_t_is_no_process_for_every_question() {
        let pid = i32::MAX as u32 + 1;
        assert_eq!(current_start(pid).unwrap(), None);
        assert_eq!(parent(pid).unwrap(), None);
        assert_eq!(is_kernel_thread(pid).unwrap(), None);
        // Elsewhere members and handlers cannot be read at all (Unsupported).
        {
            assert_eq!(member(pid).unwrap(), None);
            let err = catches_signal(pid, libc::SIGINT).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        }
    }

    #[test]
    fn a_reaped_child_has_no_start_time() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(current_start(pid).unwrap().is_some());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(current_start(pid).unwrap(), None);
    }

    #[test]
    fn handlers_are_seen_only_where_installed() {
        use std::io::BufRead;
        // A shell that traps USR1 and ALRM, ignores TERM, and then waits.
        // (Not INT: a shell started with INT ignored, as every job that a
        // non-interactive shell puts in the background is, cannot trap it.)
        let mut child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg("trap 'exit 0' USR1 ALRM; trap '' TERM; echo ready; while :; do sleep 1; done")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pid = child.id();
        let usr1 = catches_signal(pid, libc::SIGUSR1).unwrap();
        let alrm = catches_signal(pid, libc::SIGALRM).unwrap();
        let term = catches_signal(pid, libc::SIGTERM).unwrap();
        let usr2 = catches_signal(pid, libc::SIGUSR2).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(usr1 && alrm, "USR1 {usr1}, ALRM {alrm}");
        assert!(!term, "an ignored signal is not caught");
        assert!(!usr2, "no trap for USR2");
    }

    #[test]
    fn we_are_not_a_kernel_thread() {
        assert_eq!(is_kernel_thread(std::process::id()).unwrap(), Some(false));
    }

    #[test]
    fn a_group_lists_its_members_and_each_reads_back() {
        use std::os::unix::process::CommandExt as _;
        let mut leader = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = leader.id();
        let mut follower = std::process::Command::new("sleep")
            .arg("30")
            .process_group(i32::try_from(pgid).unwrap())
            .spawn()
            .unwrap();
        let mut pids = group_members(pgid).unwrap();
        pids.sort_unstable();
        let facts = member(follower.id()).unwrap();
        leader.kill().unwrap();
        follower.kill().unwrap();
        leader.wait().unwrap();
        follower.wait().unwrap();
        let mut expected = vec![leader.id(), follower.id()];
        expected.sort_unstable();
        assert_eq!(pids, expected);
        let facts = facts.expect("the follower exists");
        assert_eq!(facts.pgid, pgid);
        assert_eq!(facts.uid, Some(crate::os::this_process::effective_uid()));
        assert_eq!(facts.name, "sleep");
        assert!(facts.exe.is_some_and(|e| e.ends_with("sleep")));
        assert!(!facts.kernel_thread);
    }

    #[test]
    fn a_pid_that_cannot_exist_is_no_member() {
        assert_eq!(member(u32::MAX).unwrap(), None);
    }
}
