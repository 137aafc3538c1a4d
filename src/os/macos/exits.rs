//! How an ended process ended, on macOS, for post-mortems.
//!
//! A process that has exited stays in the process table as a zombie until
//! its parent reaps it. While it does:
//!
//! - `proc_pid_rusage` answers from the copy `proc_exit` saved
//!   (`bsd/kern/kern_exit.c`), with `ri_proc_exit_abstime` set: the moment
//!   it ended, in mach ticks. The sampler treats a non-zero value as "ended"
//!   and lists a process it knew with no memory, as a zombie holds none.
//! - `sysctl(KERN_PROC_PID)` still answers (it walks the zombie list too),
//!   with `p_stat` = `SZOMB`, the start time that identifies the process,
//!   and `p_xstat`: the status its parent's `waitpid` will get
//!   (`W_EXITCODE(code, signal)`, `WCOREFLAG` 0x80; `bsd/sys/wait.h`), but
//!   clamped: `struct proc` holds a `u_int` and `fill_user64_externproc`
//!   (`bsd/kern/kern_sysctl.c`, xnu-8792.41.9 to xnu-11417.121.6) copies
//!   `MIN(p->p_xstat, USHRT_MAX)` into the `u_short`, where `waitpid`
//!   takes the low 16 bits. `exit(256)` or `exit(-1)` (`code << 8` past
//!   0xffff) reads as 0xffff, which [`decode_xstat`] says is a code out of
//!   range rather than a stopped process. It is readable without
//!   privileges.
//!
//! The kqueue exit watch ([`super::exit_watch`]) gets the status from the
//! kernel as the process exits, unclamped; this is its fallback for the
//! processes it could not watch. `read_ended` (macOS) looks at the
//! processes the post-mortem code suspects (those listed with no memory)
//! and returns the ones that are zombies of the same
//! identity, with the status decoded ([`decode`]) and, where
//! `proc_pid_rusage` still answers, the moment they ended named in the
//! record's source. Jetsam's reasons are not here: only the unified log
//! has them.

use crate::model::Timestamp;
use crate::model::exit::ExitStatus;

/// How the sampler takes a pid's `proc_pid_rusage` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Alive, and its identity read before (same start, settled): listed
    /// from what was read then.
    Known,
    /// Alive, and new, reused or not settled: read it (again).
    Read,
    /// Ended, of an identity known alive: listed with no memory until its
    /// parent reaps it.
    Ended,
    /// Ended before it was ever read: left out, and no collector error.
    Skip,
}

/// What the sampler does with a pid, from the answer's start and exit
/// times (`ri_proc_start_abstime`, `ri_proc_exit_abstime`: non-zero once
/// the process has ended) and, if the pid is known, the start time
/// recorded for it and whether that reading was settled.
pub fn listing(start_abstime: u64, exit_abstime: u64, known: Option<(u64, bool)>) -> Listing {
    let same = known.filter(|&(start, _)| start == start_abstime);
    match (exit_abstime != 0, same) {
        (true, Some(_)) => Listing::Ended,
        (true, None) => Listing::Skip,
        (false, Some((_, true))) => Listing::Known,
        (false, _) => Listing::Read,
    }
}

/// Darwin's signal names by number (`bsd/sys/signal.h`; several differ from
/// Linux's: SIGBUS is 10, SIGUSR1 30).
const SIGNALS: [&str; 31] = [
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGEMT",
    "SIGFPE",
    "SIGKILL",
    "SIGBUS",
    "SIGSEGV",
    "SIGSYS",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGURG",
    "SIGSTOP",
    "SIGTSTP",
    "SIGCONT",
    "SIGCHLD",
    "SIGTTIN",
    "SIGTTOU",
    "SIGIO",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGINFO",
    "SIGUSR1",
    "SIGUSR2",
];

#[cfg(target_os = "macos")]
const _: () = {
    assert!(libc::SIGBUS == 10 && libc::SIGKILL == 9 && libc::SIGSEGV == 11);
    assert!(libc::SIGUSR1 == 30 && libc::SIGUSR2 == 31 && libc::SIGINFO == 29);
};

/// A `waitpid` status as `p_xstat` holds it, in words. `None` for a status
/// that is no exit (a stopped process: signal bits 0x7f).
pub fn decode(status: u16) -> Option<ExitStatus> {
    let signal = status & 0x7f;
    match signal {
        0 => Some(ExitStatus::Code(i32::from(status >> 8))),
        0x7f => None,
        n => Some(ExitStatus::Signal {
            name: SIGNALS
                .get(usize::from(n) - 1)
                .map_or_else(|| format!("signal {n}"), |s| (*s).to_owned()),
            core_dumped: status & 0x80 != 0,
        }),
    }
}

/// `kinfo_proc`'s `p_xstat` in words: [`decode`], except that 0xffff, the
/// value every status past `USHRT_MAX` is clamped to, is an exit with a
/// code outside 0–255 (no real wait status is 0xffff: its signal bits 0x7f
/// would mean stopped, by signal 255, which does not exist).
pub fn decode_xstat(xstat: u16) -> Option<ExitStatus> {
    if xstat == u16::MAX {
        return Some(ExitStatus::LargeCode);
    }
    decode(xstat)
}

/// Where a zombie's status was read, with the moment it ended where known.
pub fn source(pid: u32, ended_at: Option<Timestamp>) -> String {
    match ended_at {
        Some(at) => format!(
            "kinfo_proc of pid {pid} (it ended at {at}, by proc_pid_rusage's ri_proc_exit_abstime)"
        ),
        None => format!("kinfo_proc of pid {pid}"),
    }
}

/// Of `suspects`, those that are zombies now of the same identity (pid and
/// start time), with how they ended. A process that is still alive, gone,
/// or whose pid now belongs to another process is left out.
#[cfg(target_os = "macos")]
pub fn read_ended(suspects: &[crate::model::ProcessId]) -> Vec<crate::model::exit::Ended> {
    use crate::os::macos::ffi::proc as ffi_proc;
    use crate::os::macos::parse::{kinfo, proc_info as macos_proc_info};

    let mut out = Vec::new();
    for id in suspects {
        let Some(pid) = macos_proc_info::darwin_pid(id.pid) else {
            continue;
        };
        let Ok(Ok(Some(k))) = ffi_proc::kinfo_proc(pid).map(|b| kinfo::parse(&b)) else {
            continue;
        };
        if !k.zombie || k.start_micros != id.start {
            continue;
        }
        let Some(status) = decode_xstat(k.xstat) else {
            continue;
        };
        let ended_at = ffi_proc::rusage(pid)
            .ok()
            .filter(|u| u.exit_abstime != 0)
            .map(|u| ffi_proc::abstime_to_wall(u.exit_abstime));
        out.push(crate::model::exit::Ended {
            id: *id,
            status,
            source: source(id.pid, ended_at),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_process_that_ends_stays_listed_as_ended() {
        // Seen alive (start 1000, settled); now its rusage carries an exit.
        assert_eq!(listing(1000, 5000, Some((1000, true))), Listing::Ended);
        // Also if the reading was not settled yet: it ended, not re-read.
        assert_eq!(listing(1000, 5000, Some((1000, false))), Listing::Ended);
    }

    #[test]
    fn a_zombie_never_seen_alive_is_skipped_every_time() {
        // Not a vanished process, tick after tick: nothing to read.
        assert_eq!(listing(1000, 5000, None), Listing::Skip);
        // The pid was known, but for an earlier process (another start).
        assert_eq!(listing(2000, 5000, Some((1000, true))), Listing::Skip);
    }

    #[test]
    fn the_living_are_read_once_and_again_when_reused_or_unsettled() {
        assert_eq!(listing(1000, 0, None), Listing::Read);
        assert_eq!(listing(1000, 0, Some((1000, true))), Listing::Known);
        assert_eq!(listing(1000, 0, Some((1000, false))), Listing::Read);
        assert_eq!(listing(2000, 0, Some((1000, true))), Listing::Read);
    }

    #[test]
    fn an_exit_code_is_the_high_byte() {
        // exit(1): W_EXITCODE(1, 0) = 0x100.
        assert_eq!(decode(0x100), Some(ExitStatus::Code(1)));
        assert_eq!(decode(0), Some(ExitStatus::Code(0)));
        assert_eq!(decode(0xff00), Some(ExitStatus::Code(255)));
    }

    #[test]
    fn a_signal_is_named_with_darwins_numbers() {
        // W_EXITCODE(0, SIGKILL) = 9: jetsam and `kill -9`.
        assert_eq!(
            decode(9),
            Some(ExitStatus::Signal {
                name: "SIGKILL".into(),
                core_dumped: false
            })
        );
        // SIGBUS (10 on Darwin, 7 on Linux) with WCOREFLAG.
        assert_eq!(
            decode(10 | 0x80),
            Some(ExitStatus::Signal {
                name: "SIGBUS".into(),
                core_dumped: true
            })
        );
        assert_eq!(
            decode(30),
            Some(ExitStatus::Signal {
                name: "SIGUSR1".into(),
                core_dumped: false
            })
        );
        // A number past Darwin's signals is named by number.
        assert_eq!(
            decode(40),
            Some(ExitStatus::Signal {
                name: "signal 40".into(),
                core_dumped: false
            })
        );
    }

    #[test]
    fn a_clamped_xstat_is_a_code_out_of_range() {
        // exit(256): p_xstat = W_EXITCODE(256, 0) = 0x10000, copied into
        // kinfo_proc as MIN(0x10000, USHRT_MAX) = 0xffff
        // (fill_user64_externproc, bsd/kern/kern_sysctl.c, xnu-11417.101.15).
        // exit(-1): (uint32_t)-1 << 8 = 0xffffff00, clamped alike.
        assert_eq!(decode_xstat(0xffff), Some(ExitStatus::LargeCode));
        // As a wait status 0xffff would read as stopped: no exit at all.
        assert_eq!(decode(0xffff), None);
        // Everything under the clamp reads as before.
        assert_eq!(decode_xstat(0xff00), Some(ExitStatus::Code(255)));
        assert_eq!(
            decode_xstat(9),
            Some(ExitStatus::Signal {
                name: "SIGKILL".into(),
                core_dumped: false
            })
        );
    }

    #[test]
    fn a_stopped_status_is_no_exit() {
        // W_STOPCODE(SIGSTOP) = (17 << 8) | 0x7f.
        assert_eq!(decode((17 << 8) | 0x7f), None);
    }

    #[test]
    fn the_source_names_the_moment_it_ended() {
        let at = Timestamp(1_732_246_411_250);
        let s = source(4242, Some(at));
        assert!(s.starts_with("kinfo_proc of pid 4242"), "{s}");
        assert!(s.contains(&at.to_string()), "{s}");
        assert_eq!(source(4242, None), "kinfo_proc of pid 4242");
    }

    /// On a Mac: a child that exits stays a zombie until it is reaped, and
    /// its status and end are read back as the post-mortem would.
    #[cfg(target_os = "macos")]
    #[test]
    fn a_zombie_child_is_read_with_its_status_and_end() {
        use crate::os::macos::{ffi::proc as ffi_proc, parse::kinfo};
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let ipid = i32::try_from(pid).unwrap();
        // Not reaped yet: wait until it has exited.
        let mut zombie = None;
        for _ in 0..200 {
            let k = kinfo::parse(&ffi_proc::kinfo_proc(ipid).unwrap())
                .unwrap()
                .unwrap();
            if k.zombie {
                zombie = Some(k);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let k = zombie.expect("the child became a zombie");
        let usage = ffi_proc::rusage(ipid).unwrap();
        assert_ne!(usage.exit_abstime, 0, "a zombie's rusage carries its end");
        assert_eq!(usage.footprint, 0, "a zombie holds no memory");
        let id = crate::model::ProcessId {
            pid,
            start: k.start_micros,
        };
        let ended = read_ended(&[id]);
        child.wait().unwrap();
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].status, ExitStatus::Code(3));
        assert!(
            ended[0].source.contains("it ended at"),
            "{}",
            ended[0].source
        );
        // Once reaped, nothing is left to read.
        assert!(read_ended(&[id]).is_empty());
    }
}
