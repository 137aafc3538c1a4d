//! Sending one signal safely: the checks that run before every signal, in
//! this order, and the delivery itself.
//!
//! 0. Never for a replayed snapshot: its pid is the trace's, and the
//!    process that has it on this machine is another (the actuator stops
//!    such a decision before it gets here; this is the last guard).
//! 1. Never pid 0 or 1, never headroom itself or one of its ancestors.
//! 2. Pin the process (Linux: `pidfd_open`), then read its start time and
//!    name. The pidfd is opened before the read, and the expected start
//!    time predates both, so a match proves the pidfd holds the process the
//!    policy saw: a process that took over the pid later would have a later
//!    start time. No process → `Gone`; another start time →
//!    `IdentityChanged`. `exec` keeps the start time (and the pidfd) and
//!    changes the program: another name than the decision's → refused, as
//!    the rule judged the program it ran then (a wrapper that has since
//!    exec'd into a job the rule does not cover, or the other way round);
//!    the next sample classifies what it runs now and the policy judges it
//!    again ([`program_changed`]). Once per process only
//!    ([`ProgramChanges`]): a Linux process may rename itself at will
//!    (`prctl(PR_SET_NAME)`, `setproctitle`), and one that did so before
//!    every signal would otherwise never be signalled.
//! 3. Never a kernel thread.
//! 4. `require_handler`: skip unless the process catches the signal (an
//!    uncaught SIGUSR1 kills its target).
//! 5. `process_group`: never group 0 or 1, headroom's own group, or a group
//!    led by one of its ancestors. The group is never signalled as a whole
//!    (`kill(-pgid)` would reach root's processes and protected ones in it
//!    too, and any process of the session may join the group): only the
//!    members the target's owner owns may be signalled, each checked like a
//!    target and signalled through a pidfd of its own; the others are left
//!    alone and named in the report (see [`group`]).
//! 6. Dry run stops here: everything was checked, nothing is sent.
//! 7. Send: through the pidfd (Linux 5.3+), otherwise `kill` after the
//!    identity check.

use std::collections::HashSet;
use std::io;

use super::{group, identity};
use crate::event::Outcome;
use crate::model::SignalName;
use crate::model::text_caps::{NAME_MAX, capped};
use crate::os::native::process::pin;
use crate::os::posix;
use crate::policy::Decision;

/// Whether the process the decision named `decided` (its name as the
/// event records it, cut to [`NAME_MAX`]) goes by another name `now`: it
/// runs another program than the one the rule judged.
pub(super) fn program_changed(decided: &str, now: &str) -> bool {
    capped(now, NAME_MAX) != decided
}

/// The processes (pid and start time) already refused once because they
/// went by another name at the signal than in the decision: the next
/// program change of the same process is signalled all the same, so a
/// process that renames itself over and over delays its signal by one
/// sample at most. Bounded: past [`ProgramChanges::CAP`] identities the
/// set starts over, which can only grant one more refusal each.
#[derive(Debug, Default)]
pub struct ProgramChanges {
    refused: HashSet<(u32, u64)>,
}

impl ProgramChanges {
    /// The most identities remembered.
    pub const CAP: usize = 4096;

    /// True the first time `pid` with `start` is seen to have changed its
    /// program (refuse it); false after (signal it all the same).
    pub fn first(&mut self, pid: u32, start: u64) -> bool {
        if self.refused.len() >= Self::CAP && !self.refused.contains(&(pid, start)) {
            self.refused.clear();
        }
        self.refused.insert((pid, start))
    }
}

/// How a signal step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `Done` or `DryRun` with what was (or would have been) sent,
    /// e.g. `SIGINT to pid 1234 (python3)`; or a refusal or failure.
    Ended(Outcome, String),
    /// A process group step: the outcome and who got the signal and who
    /// was left alone, e.g. `SIGTERM to 3 of 5 members of process group
    /// 4242; left alone: pid 17 (root, rule has root = false)`.
    Group(Outcome, String),
    /// The step does not apply (no handler): the reason.
    Skipped(String),
}

/// Carry out (or in a dry run, check) one signal step.
pub fn deliver(
    d: &Decision,
    signal: SignalName,
    require_handler: bool,
    process_group: bool,
    changes: &mut ProgramChanges,
) -> Verdict {
    let p = &d.process;
    let pid = p.pid;
    let target = format!("pid {pid} ({})", crate::report::printable(&p.name));
    let refused = |why: String| Verdict::Ended(Outcome::Refused(why), String::new());
    let failed = |why: String| Verdict::Ended(Outcome::Failed(why), String::new());
    let ended = |o: Outcome| Verdict::Ended(o, String::new());

    // 0. A replay acts on nothing of this machine's.
    if d.replayed {
        return Verdict::Ended(Outcome::DryRun, format!("{signal} to {target} (replay)"));
    }

    // 1. Who must never be signalled.
    match pid {
        0 => return refused("pid 0 is the kernel's scheduler, never signalled".into()),
        1 => return refused("pid 1 is init; headroom never signals it".into()),
        _ => {}
    }
    if pid == std::process::id() {
        return refused(format!("{target} is headroom itself"));
    }
    let lineage = match identity::own_lineage() {
        Ok(lineage) => lineage,
        Err(e) => {
            return refused(format!(
                "cannot read headroom's own parent chain ({e}), so cannot rule out that {target} \
                 is one of its ancestors"
            ));
        }
    };
    if lineage.contains(&pid) {
        return refused(format!(
            "{target} is an ancestor of headroom (pid {})",
            std::process::id()
        ));
    }

    // 2. Pin, then check the identity.
    let pinned = match pin(pid) {
        Ok(Some(pinned)) => pinned,
        Ok(None) => return ended(Outcome::Gone),
        Err(e) => return failed(format!("cannot open {target}: {e}")),
    };
    match identity::current(pid) {
        Ok(None) => return ended(Outcome::Gone),
        Ok(Some(now)) if now.start != p.start => return ended(Outcome::IdentityChanged),
        Ok(Some(now)) if program_changed(&p.name, &now.name) && changes.first(pid, now.start) => {
            return refused(format!(
                "{target} now goes by {}: it exec'd (or renamed itself) after the sample this \
                 decision judged, so it is not signalled for what it ran then; the next sample \
                 classifies what it runs now",
                crate::report::printable(&now.name)
            ));
        }
        Ok(Some(_)) => {}
        Err(e) => return failed(format!("cannot read the start time of {target}: {e}")),
    }

    // 3. Kernel threads have no user space to interrupt.
    match identity::is_kernel_thread(pid) {
        Ok(Some(false)) => {}
        Ok(Some(true)) => return refused(format!("{target} is a kernel thread")),
        Ok(None) => return ended(Outcome::Gone),
        Err(e) => {
            return failed(format!(
                "cannot tell whether {target} is a kernel thread: {e}"
            ));
        }
    }

    // 4. Only where a handler waits for it (the target's handler: the
    //    members of its group get the signal as a group would).
    if require_handler {
        if !signal.catchable() {
            return Verdict::Skipped(format!(
                "{signal} cannot be caught, so require_handler never holds for it"
            ));
        }
        match identity::catches_signal(pid, signal.number()) {
            Ok(true) => {}
            Ok(false) => {
                return Verdict::Skipped(format!(
                    "pid {pid} does not catch {signal} (its default action would kill it)"
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return ended(Outcome::Gone),
            Err(e) => {
                return Verdict::Skipped(format!(
                    "cannot tell whether pid {pid} catches {signal} ({e}); not sending it"
                ));
            }
        }
    }

    // 5. The group, if asked for: its members one by one.
    if process_group {
        let pgid = match posix::process_group_of(pid) {
            Ok(pgid) => pgid,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return ended(Outcome::Gone),
            Err(e) => return failed(format!("cannot read the process group of {target}: {e}")),
        };
        if pgid <= 1 {
            return refused(format!(
                "{target} is in process group {pgid}, never signalled"
            ));
        }
        if pgid == posix::own_process_group() {
            return refused(format!(
                "{target} is in headroom's own process group {pgid}"
            ));
        }
        if lineage.contains(&pgid) {
            return refused(format!(
                "{target} is in process group {pgid}, led by an ancestor of headroom"
            ));
        }
        return group::deliver(d, signal, pgid, &target, &lineage);
    }

    // 6. A dry run has checked everything and sends nothing.
    let what = format!("{signal} to {target}");
    if d.dry_run {
        return Verdict::Ended(Outcome::DryRun, what);
    }

    // 7. Send.
    match pinned.send(signal.number()) {
        Ok(()) => Verdict::Ended(Outcome::Done, what),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => ended(Outcome::Gone),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => failed(format!(
            "permission denied sending {what}: it belongs to another user; run headroom as \
             root to act on other users' processes"
        )),
        Err(e) => failed(format!("cannot send {what}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_refused_for_a_new_name_once() {
        let mut changes = ProgramChanges::default();
        assert!(changes.first(4242, 7), "the first change is refused");
        assert!(!changes.first(4242, 7), "a second change is signalled");
        // Another process on the same pid is another identity.
        assert!(changes.first(4242, 8));
        assert!(changes.first(4243, 7));
    }

    #[test]
    fn the_refused_set_is_bounded() {
        let mut changes = ProgramChanges::default();
        for pid in 0..ProgramChanges::CAP as u32 {
            assert!(changes.first(pid, 1));
        }
        assert_eq!(changes.refused.len(), ProgramChanges::CAP);
        // A remembered one stays remembered at the cap.
        assert!(!changes.first(0, 1));
        // A new one past the cap starts the set over.
        assert!(changes.first(u32::MAX, 1));
        assert_eq!(changes.refused.len(), 1);
    }

    #[test]
    fn a_new_name_is_another_program() {
        assert!(!program_changed("python3", "python3"));
        // `sh -c '… exec python3 train.py'`, between the sample and the signal.
        assert!(program_changed("sh", "python3"));
        assert!(program_changed("python3", "sh"));
    }

    /// The decision's name is cut to the event's cap (`ProcessRef::of`); a
    /// longer name now, cut alike, is the same.
    #[test]
    fn a_name_past_the_cap_compares_as_the_event_keeps_it() {
        let long = "n".repeat(NAME_MAX + 40);
        let decided = capped(&long, NAME_MAX).into_owned();
        assert!(!program_changed(&decided, &long));
        assert!(program_changed(&decided, &"m".repeat(NAME_MAX + 40)));
    }
}
