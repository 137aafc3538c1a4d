//! A signal step with `process_group = true`: the group's members, each
//! checked like a target and signalled on its own.
//!
//! `kill(-pgid)` would reach every process of the group, and a group is
//! not its owner's alone: a job started from a root shell holds root's
//! processes, and in a session two users share one user's process can join
//! the other's group (`setpgid`). So the step reaches only what the target's
//! owner could have started: the actuator lists the members
//! ([`identity::group_members`]) and, for each one:
//!
//! 1. never pid 0 or 1, headroom itself or one of its ancestors;
//! 2. pins it (Linux: `pidfd_open`) and reads its facts after the pin
//!    ([`identity::member`]): a process no longer in the group is not a
//!    member any more, and is neither counted nor signalled;
//! 3. never a kernel thread;
//! 4. its owner must be in the rule's reach (`other_users`, `root`, as
//!    [`crate::policy::protection::owner_allowed`] decides for targets);
//! 5. `[protect]` must not protect it (names and executables, for root's
//!    and system accounts' processes: [`crate::policy::protection::config_protection`]);
//! 6. its owner must be the target's owner ([`Owner`]): a member of another
//!    user, root's included, is left alone whatever the rule's reach, and
//!    so is a member whose owner cannot be read;
//! 7. in a dry run it is counted, not signalled; otherwise the signal goes
//!    through its own pidfd, or with `kill` after its start time is checked
//!    again where there are no pidfds.
//!
//! Members that fail a check are left alone and named in the report, with
//! why (`left alone: pid 17 (uid 1001, not the target's owner uid 1000)`).
//! A member forked after the list is made is not signalled, and a member's
//! owner could change (`setuid`) between its check and its signal.

use std::io;

use super::identity::{self, Member};
use super::signal::Verdict;
use crate::event::Outcome;
use crate::model::SignalName;
use crate::os::native::process::{Pinned, pin};
use crate::policy::protection::{self, Protection};
use crate::policy::{Decision, Reach};
use crate::report::printable;

/// The most members named in a report; the rest are counted.
const NAMED_AT_MOST: usize = 16;

/// What became of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fate {
    /// Signalled (or, in a dry run, would be).
    Sent,
    /// Not signalled: why.
    LeftAlone(String),
    /// The send failed: the error.
    Failed(String),
    /// Gone before it could be signalled, or no longer in the group.
    NotAMember,
}

/// The owner of the step's target, read after its identity was checked:
/// the only owner whose members the step may signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner(u32);

impl Owner {
    /// Why a member owned by `uid` is not the target owner's, if it is not.
    fn refuses(self, uid: Option<u32>) -> Option<String> {
        match uid {
            Some(uid) if uid == self.0 => None,
            Some(uid) => Some(format!(
                "{}, not the target's owner {}",
                uid_name(uid),
                uid_name(self.0)
            )),
            None => Some(format!(
                "its owner cannot be read, so it may not be the target's owner {}",
                uid_name(self.0)
            )),
        }
    }
}

/// `root` or `uid 1000`.
fn uid_name(uid: u32) -> String {
    if uid == 0 {
        "root".into()
    } else {
        format!("uid {uid}")
    }
}

/// Signal (or in a dry run, check) every member of group `pgid` that the
/// target's owner owns, of which `target` (the decision's process, already
/// checked) is one.
pub(super) fn deliver(
    d: &Decision,
    signal: SignalName,
    pgid: u32,
    target: &str,
    lineage: &[u32],
) -> Verdict {
    let owner = match identity::member(d.process.pid) {
        Ok(Some(Member { uid: Some(uid), .. })) => Owner(uid),
        Ok(Some(Member { uid: None, .. })) => {
            return Verdict::Ended(
                Outcome::Refused(format!(
                    "cannot read the owner of {target}, so cannot tell which members of process \
                     group {pgid} are its owner's; nothing sent"
                )),
                String::new(),
            );
        }
        Ok(None) => return Verdict::Ended(Outcome::Gone, String::new()),
        Err(e) => {
            return Verdict::Ended(
                Outcome::Failed(format!("cannot read the owner of {target}: {e}")),
                String::new(),
            );
        }
    };
    let pids = match identity::group_members(pgid) {
        Ok(pids) => pids,
        Err(e) => {
            return Verdict::Ended(
                Outcome::Failed(format!(
                    "cannot list the members of process group {pgid} of {target}: {e}"
                )),
                String::new(),
            );
        }
    };
    if pids.is_empty() {
        return Verdict::Ended(
            Outcome::Failed(format!(
                "found no members of process group {pgid}, though {target} was in it a moment ago"
            )),
            String::new(),
        );
    }
    let fates: Vec<(u32, Fate)> = pids
        .into_iter()
        .map(|pid| {
            let checks = Checks {
                pgid,
                owner,
                reach: &d.reach,
                lineage,
            };
            (pid, fate(pid, signal, &checks, d.dry_run))
        })
        .collect();
    summarize(signal, pgid, &fates, d.dry_run)
}

/// What every member is checked against.
struct Checks<'a> {
    pgid: u32,
    owner: Owner,
    reach: &'a Reach,
    lineage: &'a [u32],
}

/// Check one member and, unless in a dry run, signal it.
fn fate(pid: u32, signal: SignalName, checks: &Checks<'_>, dry_run: bool) -> Fate {
    let Checks {
        pgid,
        owner,
        reach,
        lineage,
    } = *checks;
    // 1. Who must never be signalled.
    if pid <= 1 {
        return Fate::LeftAlone("init".into());
    }
    if pid == std::process::id() {
        return Fate::LeftAlone("headroom itself".into());
    }
    if lineage.contains(&pid) {
        return Fate::LeftAlone("an ancestor of headroom".into());
    }
    // 2. Pin, then read what the checks need.
    let pinned = match pin(pid) {
        Ok(Some(pinned)) => pinned,
        Ok(None) => return Fate::NotAMember,
        Err(e) => return Fate::Failed(format!("cannot open it: {e}")),
    };
    let facts = match identity::member(pid) {
        Ok(Some(facts)) if facts.pgid == pgid => facts,
        Ok(_) => return Fate::NotAMember,
        // What cannot be checked is not signalled.
        Err(e) => return Fate::LeftAlone(format!("cannot read its owner and name: {e}")),
    };
    if let Some(why) = refusal(&facts, owner, reach) {
        return Fate::LeftAlone(why);
    }
    if dry_run {
        return Fate::Sent;
    }
    match send(&pinned, &facts, signal) {
        Ok(()) => Fate::Sent,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Fate::NotAMember,
        Err(e) => Fate::Failed(e.to_string()),
    }
}

/// Why the rule may not touch this member (checks 3 to 6), if it may not.
fn refusal(m: &Member, owner: Owner, reach: &Reach) -> Option<String> {
    if m.kernel_thread {
        return Some("a kernel thread".into());
    }
    if let Some(why) = reach.refuses_owner(m.uid) {
        return Some(why);
    }
    if let Protection::Protected(why) =
        protection::config_protection(&reach.protect, &m.name, m.exe.as_deref(), m.uid)
    {
        return Some(format!("protected: {why}"));
    }
    owner.refuses(m.uid)
}

/// Send through the pin; without a pidfd, only after the start time is
/// found unchanged (a pid reused since the check is not this member).
fn send(pinned: &Pinned, m: &Member, signal: SignalName) -> io::Result<()> {
    if let Some(pid) = pinned.unpinned_pid() {
        match identity::current_start(pid)? {
            Some(start) if start == m.start => {}
            _ => return Err(io::Error::from_raw_os_error(libc::ESRCH)),
        }
    }
    pinned.send(signal.number())
}

/// The verdict and its report: `SIGTERM to 3 of 5 members of process group
/// 4242; left alone: pid 17 (root, rule has root = false), pid 18
/// (protected: …)`.
fn summarize(signal: SignalName, pgid: u32, fates: &[(u32, Fate)], dry_run: bool) -> Verdict {
    let members = fates.iter().filter(|(_, f)| *f != Fate::NotAMember).count();
    let sent = fates.iter().filter(|(_, f)| *f == Fate::Sent).count();
    let mut report = format!("{signal} to {sent} of {members} members of process group {pgid}");
    let left: Vec<String> = fates
        .iter()
        .filter_map(|(pid, f)| match f {
            Fate::LeftAlone(why) => Some(format!("pid {pid} ({})", printable(why))),
            _ => None,
        })
        .collect();
    let failed: Vec<String> = fates
        .iter()
        .filter_map(|(pid, f)| match f {
            Fate::Failed(why) => Some(format!("pid {pid} ({why})")),
            _ => None,
        })
        .collect();
    if !left.is_empty() {
        report.push_str("; left alone: ");
        report.push_str(&named(&left));
    }
    if !failed.is_empty() {
        report.push_str("; failed: ");
        report.push_str(&named(&failed));
    }
    let outcome = if sent > 0 {
        if dry_run {
            Outcome::DryRun
        } else {
            Outcome::Done
        }
    } else if members == 0 {
        Outcome::Gone
    } else if failed.is_empty() {
        Outcome::Refused(format!("no member may be signalled: {report}"))
    } else {
        Outcome::Failed(format!("sent nothing: {report}"))
    };
    Verdict::Group(outcome, report)
}

/// `a, b, c`, at most [`NAMED_AT_MOST`] of them and a count of the rest.
fn named(items: &[String]) -> String {
    let mut text = items
        .iter()
        .take(NAMED_AT_MOST)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > NAMED_AT_MOST {
        text.push_str(&format!(" and {} more", items.len() - NAMED_AT_MOST));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(uid: Option<u32>, name: &str, exe: Option<&str>) -> Member {
        Member {
            pid: 17,
            start: 1,
            pgid: 4242,
            uid,
            name: name.into(),
            exe: exe.map(Into::into),
            kernel_thread: false,
        }
    }

    fn reach(root: bool, other_users: bool) -> Reach {
        Reach {
            other_users,
            root,
            ..Reach::own_user(0)
        }
    }

    const ROOT: Owner = Owner(0);
    const ADA: Owner = Owner(1000);

    #[test]
    fn roots_member_is_refused_when_the_rule_has_root_false() {
        let why = refusal(&member(Some(0), "bash", None), ROOT, &reach(false, true));
        assert_eq!(why.as_deref(), Some("root, rule has root = false"));
    }

    #[test]
    fn a_users_member_is_allowed_with_other_users() {
        assert_eq!(
            refusal(
                &member(Some(1000), "python3", None),
                ADA,
                &reach(false, true)
            ),
            None
        );
        assert!(
            refusal(
                &member(Some(1000), "python3", None),
                ADA,
                &reach(true, false)
            )
            .is_some()
        );
    }

    #[test]
    fn a_member_of_another_user_is_left_alone_whatever_the_reach() {
        let why = refusal(
            &member(Some(1001), "python3", None),
            ADA,
            &reach(true, true),
        );
        assert_eq!(
            why.as_deref(),
            Some("uid 1001, not the target's owner uid 1000")
        );
        let why = refusal(&member(Some(0), "bash", None), ADA, &reach(true, true));
        assert_eq!(
            why.as_deref(),
            Some("root, not the target's owner uid 1000")
        );
        let why = refusal(
            &member(Some(1000), "python3", None),
            ROOT,
            &reach(true, true),
        );
        assert_eq!(
            why.as_deref(),
            Some("uid 1000, not the target's owner root")
        );
    }

    #[test]
    fn a_member_whose_owner_cannot_be_read_is_left_alone() {
        let why = refusal(&member(None, "python3", None), ADA, &reach(true, true)).unwrap();
        assert!(why.starts_with("its owner cannot be read"), "{why}");
    }

    #[test]
    fn a_system_accounts_member_named_sshd_is_protected() {
        let why = refusal(&member(Some(0), "sshd", None), ROOT, &reach(true, true)).unwrap();
        assert!(why.starts_with("protected: \"sshd\""), "{why}");
    }

    #[test]
    fn a_users_member_named_sshd_is_not() {
        assert_eq!(
            refusal(&member(Some(1000), "sshd", None), ADA, &reach(false, true)),
            None
        );
    }

    #[test]
    fn kernel_threads_are_refused_first() {
        let mut m = member(Some(0), "kworker/0:1", None);
        m.kernel_thread = true;
        assert_eq!(
            refusal(&m, ADA, &reach(true, true)).as_deref(),
            Some("a kernel thread")
        );
    }

    #[test]
    fn the_report_counts_members_and_names_those_left_alone() {
        let fates = [
            (10, Fate::Sent),
            (11, Fate::Sent),
            (17, Fate::LeftAlone("root, rule has root = false".into())),
            (19, Fate::NotAMember),
        ];
        let v = summarize(SignalName::Term, 4242, &fates, false);
        assert_eq!(
            v,
            Verdict::Group(
                Outcome::Done,
                "SIGTERM to 2 of 3 members of process group 4242; left alone: pid 17 (root, \
                 rule has root = false)"
                    .into()
            )
        );
    }

    #[test]
    fn nobody_signalled_is_a_refusal_and_nobody_there_is_gone() {
        let left = [(17, Fate::LeftAlone("a kernel thread".into()))];
        assert!(matches!(
            summarize(SignalName::Term, 4242, &left, false),
            Verdict::Group(Outcome::Refused(ref why), _) if why.contains("pid 17 (a kernel thread)")
        ));
        let gone = [(17, Fate::NotAMember)];
        assert!(matches!(
            summarize(SignalName::Term, 4242, &gone, false),
            Verdict::Group(Outcome::Gone, _)
        ));
        let failed = [(17, Fate::Failed("EPERM".into()))];
        assert!(matches!(
            summarize(SignalName::Term, 4242, &failed, false),
            Verdict::Group(Outcome::Failed(_), _)
        ));
    }

    #[test]
    fn a_dry_run_reports_what_it_would_send() {
        let fates = [(10, Fate::Sent)];
        assert_eq!(
            summarize(SignalName::Int, 7, &fates, true),
            Verdict::Group(
                Outcome::DryRun,
                "SIGINT to 1 of 1 members of process group 7".into()
            )
        );
    }

    #[test]
    fn long_lists_are_cut_with_a_count() {
        let items: Vec<String> = (0..20).map(|i| format!("pid {i}")).collect();
        let text = named(&items);
        assert!(text.ends_with("pid 15 and 4 more"), "{text}");
    }
}
