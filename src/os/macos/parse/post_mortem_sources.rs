//! What post-mortems learn from macOS's records, and who reads which (pure,
//! so that it is tested everywhere): a jetsam kill, from the unified log or
//! a JetsamEvent report, as a [`MemoryKill`];
//! who may follow jetsam kills with `log stream` ([`follower`]: root, or a
//! member of group `admin`, as `log` requires) and whether `log` refused
//! ([`refusal`]); which kills a user's agent keeps ([`OwnProcesses`]: its
//! own user's); and `headroom doctor`'s check of it all ([`macos_check`]).

use std::collections::HashMap;

use crate::model::exit::{Killer, MemoryKill};
use crate::model::{Snapshot, Timestamp};

/// The gid of group `admin`, whose members macOS calls administrators
/// (`/etc/group`: `admin:*:80:root`; Directory Services holds the members,
/// and "Allow user to administer this computer" adds and removes them). A
/// user's account may also have it as its primary group
/// (MagerValp/CreateUserPkg#9).
pub const ADMIN_GID: u32 = 80;

/// The exit status of `log stream` refusing a user who is not an
/// administrator: `EX_NOPERM` (`sysexits.h`), with "log: Must be admin to
/// run 'stream' command" on stderr (timrogers/litra-autotoggle#119).
pub const LOG_REFUSED_STATUS: i32 = 77;

/// A jetsam kill as a [`MemoryKill`]: its footprint as resident memory
/// where the line has one (not a compressed size, which the words give),
/// its owner as `uid` where known.
pub fn jetsam_kill(
    k: super::jetsam::JetsamKill,
    read_at: Timestamp,
    uid: Option<u32>,
) -> MemoryKill {
    let scope = super::jetsam::kill_words(&k);
    MemoryKill {
        pid: k.pid,
        name: k.name,
        uid,
        killer: Killer::Jetsam,
        source: "the unified log (log stream)".to_string(),
        message: k.message,
        resident_bytes: k.footprint_bytes,
        scope,
        read_at,
        memcg: None,
    }
}

/// The kills a JetsamEvent report records, as [`MemoryKill`]s: one per
/// killed entry with a pid. `source` is the report's path; `uid` the owner
/// the kills are restricted to (`None` for a report only root could write:
/// a user's own file is believed only about that user's processes).
pub fn jetsam_report_kills(
    report: &super::jetsam_report::JetsamReport,
    source: &str,
    uid: Option<u32>,
    read_at: Timestamp,
) -> Vec<MemoryKill> {
    let when = report
        .captured
        .as_deref()
        .map(|c| format!(" of {c}"))
        .unwrap_or_default();
    let largest = match (&report.largest_process, &report.largest) {
        (Some(name), _) => format!("; the largest process then: {name}"),
        (None, Some(p)) => format!("; the largest process then: {}", p.name),
        (None, None) => String::new(),
    };
    report
        .killed
        .iter()
        .filter_map(|p| {
            let pid = p.pid?;
            let reason = p.reason.as_deref().unwrap_or("");
            let pages = p
                .rpages
                .map(|r| format!(", {r} pages resident"))
                .unwrap_or_default();
            Some(MemoryKill {
                pid,
                name: p.name.clone(),
                uid,
                killer: Killer::Jetsam,
                source: format!("the JetsamEvent report {source}"),
                message: format!(
                    "JetsamEvent{when}: {} [{pid}] killed ({reason}){pages}{largest}",
                    p.name
                ),
                resident_bytes: report.bytes(p.rpages),
                scope: format!("{} ({reason})", super::jetsam::reason_words(reason)),
                read_at,
                memcg: None,
            })
        })
        .collect()
}

/// Who this headroom is, for following jetsam kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follower {
    /// Root (a LaunchDaemon): follows every kill.
    Root,
    /// A member of group `admin` (a LaunchAgent of an administrator, the
    /// usual account of a personal Mac): `log stream` shows it the kernel's
    /// entries, so it follows and keeps its own user's kills.
    Admin,
    /// Any other user: `log stream` refuses it, so it is not started.
    NotAdmin,
}

/// Who a process with effective uid `euid`, effective gid `egid` and
/// supplementary groups `groups` (the kernel's list and the directory's,
/// `getgroups` and `getgrouplist`) is, for `log stream`.
pub fn follower(euid: u32, egid: u32, groups: &[u32]) -> Follower {
    if euid == 0 {
        Follower::Root
    } else if egid == ADMIN_GID || groups.contains(&ADMIN_GID) {
        Follower::Admin
    } else {
        Follower::NotAdmin
    }
}

/// `log`'s refusal in its words, if its exit status or its complaints say
/// it refused this user (not a crash or a kill, which a restart mends).
pub fn refusal(exit_code: Option<i32>, complaint: Option<&str>) -> Option<String> {
    let says = complaint.is_some_and(|c| c.contains("Must be admin"));
    if exit_code != Some(LOG_REFUSED_STATUS) && !says {
        return None;
    }
    let status = exit_code.map_or_else(String::new, |c| format!(" (exit status {c})"));
    Some(format!(
        "{}{status}",
        complaint.unwrap_or("`log` gave no reason")
    ))
}

/// How following jetsam kills stands, for [`macos_check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Following {
    /// `log stream` writes the kernel's entries.
    Followed,
    /// Started, and not (yet) seen to follow: its state in words.
    NotYet(String),
    /// `log stream` refused or failed: its words.
    Failed(String),
    /// Not tried: this user is no administrator.
    NotAdmin,
}

/// The words for the collector status of a user's daemon that does not
/// follow (not an administrator).
pub fn not_followed() -> String {
    "not followed: headroom runs as a user who is not an administrator (not in group admin), \
     and `log stream` shows the kernel's jetsam kills only to an administrator; installed as a \
     LaunchDaemon (root) it follows them. A jetsam kill of a watched process of yours is still \
     seen from the flag on its exit (kqueue NOTE_EXIT_MEMORY), but a low-swap kill carries no \
     flag and is then a post-mortem with an unknown cause; find it afterwards with `log show --last 10m --predicate \
     'processID == 0 AND (eventMessage CONTAINS \"memorystatus: killing\" OR eventMessage \
     BEGINSWITH \"low swap: killing\")'` (as an administrator)"
        .to_string()
}

/// The macOS check: as root, jetsam kills and everyone's crash reports; as
/// an administrator, jetsam kills of this user's processes (as `log
/// stream` answered) and this user's crash reports; as another user, only
/// that user's crash reports; as any user, the jetsam flag on the exits of
/// that user's watched processes.
pub fn macos_check(who: Follower, following: &Following) -> crate::model::Check {
    use crate::model::Check;
    let reports = match who {
        Follower::Root => {
            "crash reports and JetsamEvent reports read from /Library/Logs/DiagnosticReports, crash reports from every user's ~/Library/Logs/DiagnosticReports"
        }
        Follower::Admin | Follower::NotAdmin => {
            "only your own crash reports are read (~/Library/Logs/DiagnosticReports), and the JetsamEvent reports in /Library/Logs/DiagnosticReports you may read"
        }
    };
    let install = || {
        format!(
            "install the system service to follow every jetsam kill: {}",
            crate::os::this_process::sudo_command("service install --system")
        )
    };
    let kq = "jetsam kills of your watched processes are seen as they exit (kqueue's NOTE_EXIT_MEMORY; a low-swap kill carries no flag and reads as SIGKILL with an unknown sender)";
    let whose = match who {
        Follower::Root => "every process's",
        _ => "your own processes'",
    };
    match following {
        Following::Followed => Check::ok(
            "post-mortems",
            format!(
                "jetsam kills followed as the kernel logs them (log stream), {whose} kills used; {reports}"
            ),
        ),
        Following::NotYet(state) => Check::warn(
            "post-mortems",
            format!("jetsam kills: {state}; {reports}"),
            "run `headroom doctor` again; if it stays so, see the daemon's log".to_string(),
        ),
        Following::Failed(why) => Check::warn(
            "post-mortems",
            format!("jetsam's log lines are not followed: {why}; {kq}; {reports}"),
            match who {
                Follower::Root => "see whether `/usr/bin/log stream` runs here".to_string(),
                _ => install(),
            },
        ),
        Following::NotAdmin => Check::warn(
            "post-mortems",
            format!(
                "as a user who is not an administrator (not in group admin), {reports}; jetsam kills of your watched processes are seen as they exit (kqueue's NOTE_EXIT_MEMORY; a low-swap kill carries no flag and reads as SIGKILL with an unknown sender); jetsam's log lines are not followed (log stream shows the kernel's entries only to an administrator), so a low-swap kill is a post-mortem with an unknown cause"
            ),
            install(),
        ),
    }
}

/// How long a process's owner is remembered after it was last sampled:
/// longer than a kill line takes to arrive and a post-mortem waits for it.
pub const OWNER_MEMORY: std::time::Duration = std::time::Duration::from_secs(60);

/// The owners of the pids recently sampled, so that a user's agent keeps
/// only kills of its own user's processes: a kill line names a pid and a
/// name, not an owner, and an administrator's `log stream` shows every
/// user's. Bounded by the pids that exist (at most 99 999 on macOS,
/// `PID_MAX` in `bsd/sys/proc_internal.h`) and pruned past
/// [`OWNER_MEMORY`].
#[derive(Debug)]
pub struct OwnProcesses {
    uid: u32,
    /// pid → (owner, when last sampled).
    owners: HashMap<u32, (Option<u32>, Timestamp)>,
    pruned_at: Timestamp,
}

impl OwnProcesses {
    /// Keep the kills of `uid`'s processes.
    pub fn new(uid: u32) -> Self {
        Self {
            uid,
            owners: HashMap::new(),
            pruned_at: Timestamp(0),
        }
    }

    /// Note the owners of `snap`'s processes.
    pub fn note(&mut self, snap: &Snapshot) {
        let now = snap.taken_at;
        for p in &snap.processes {
            self.owners.insert(p.id.pid, (p.uid, now));
        }
        if now.since(self.pruned_at) >= OWNER_MEMORY {
            self.owners
                .retain(|_, (_, seen)| now.since(*seen) < OWNER_MEMORY);
            self.pruned_at = now;
        }
    }

    /// The owner of the kill's pid if that is this user (the kill is then
    /// kept, with it), `None` if it was another user's or never sampled.
    pub fn owner(&self, pid: u32) -> Option<u32> {
        match self.owners.get(&pid) {
            Some((Some(uid), _)) if *uid == self.uid => Some(*uid),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CheckStatus;
    use crate::model::build::{process, snapshot};

    /// The groups of an administrator as `id` printed them on a Mac
    /// (cloudstreet-dev.github.io/macOS-and-Unix, part 8, "User and Group
    /// Management": `uid=501(david) gid=20(staff) groups=20(staff),
    /// 12(everyone),61(localaccounts),79(_appserverusr),80(admin),
    /// 81(_appserveradm),98(_lpadmin),701(com.apple.sharepoint.group.1),
    /// 33(_appstore),100(_lpoperator),204(_developer),250(_analyticsusers),
    /// 395(com.apple.access_ftp),398(com.apple.access_screensharing),
    /// 399(com.apple.access_ssh)`).
    const ADMIN_GROUPS: [u32; 15] = [
        20, 12, 61, 79, 80, 81, 98, 701, 33, 100, 204, 250, 395, 398, 399,
    ];

    #[test]
    fn root_and_administrators_follow_and_other_users_do_not() {
        assert_eq!(follower(0, 0, &[]), Follower::Root);
        assert_eq!(follower(501, 20, &ADMIN_GROUPS), Follower::Admin);
        // The groups every local account has (staff, everyone,
        // localaccounts: the same capture's first three), and no admin.
        assert_eq!(follower(502, 20, &ADMIN_GROUPS[..3]), Follower::NotAdmin);
        // An account made with admin as its primary group
        // (MagerValp/CreateUserPkg#9).
        assert_eq!(follower(503, ADMIN_GID, &[]), Follower::Admin);
    }

    #[test]
    fn log_s_refusal_is_told_from_an_ending_a_restart_mends() {
        // timrogers/litra-autotoggle#119: a user who is not an
        // administrator, `log stream` as a user's background process.
        let words = "log: Must be admin to run 'stream' command";
        assert_eq!(
            refusal(Some(77), Some(words)).as_deref(),
            Some("log: Must be admin to run 'stream' command (exit status 77)")
        );
        assert!(refusal(None, Some(words)).is_some());
        assert!(refusal(Some(77), None).is_some());
        assert_eq!(refusal(Some(0), None), None);
        assert_eq!(refusal(None, Some("log: lost connection to logd")), None);
    }

    #[test]
    fn the_doctor_says_what_each_account_gets() {
        let root = macos_check(Follower::Root, &Following::Followed);
        assert_eq!(root.status, CheckStatus::Ok);
        assert!(
            root.detail.contains("every process's kills"),
            "{}",
            root.detail
        );
        let admin = macos_check(Follower::Admin, &Following::Followed);
        assert_eq!(admin.status, CheckStatus::Ok);
        assert!(
            admin.detail.contains("your own processes' kills"),
            "{}",
            admin.detail
        );
        let refused = macos_check(
            Follower::Admin,
            &Following::Failed(
                refusal(Some(77), Some("log: Must be admin to run 'stream' command")).unwrap(),
            ),
        );
        assert_eq!(refused.status, CheckStatus::Warn);
        assert!(
            refused.detail.contains(
                "not followed: log: Must be admin to run 'stream' command (exit status 77)"
            ),
            "{}",
            refused.detail
        );
        let user = macos_check(Follower::NotAdmin, &Following::NotAdmin);
        assert_eq!(user.status, CheckStatus::Warn);
        assert!(user.detail.contains("jetsam's log lines are not followed"));
        assert!(user.detail.contains("NOTE_EXIT_MEMORY"), "{}", user.detail);
        assert!(
            user.detail.contains("low-swap kill carries no flag"),
            "{}",
            user.detail
        );
        assert!(not_followed().contains("not an administrator"));
    }

    #[test]
    fn a_jetsam_report_s_kills_name_the_reason_size_and_largest() {
        // wifianalyticsd killed at its high-water mark (tests/fixtures/ips/README.md).
        let report = super::super::jetsam_report::parse_jetsam_event(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/ips/JetsamEvent-wifianalyticsd-highwater.ips"
        )))
        .unwrap();
        let kills = jetsam_report_kills(&report, "/r/JetsamEvent-x.ips", Some(501), Timestamp(9));
        assert_eq!(kills.len(), 1);
        let k = &kills[0];
        assert_eq!(
            (k.pid, k.name.as_str(), k.killer),
            (2527, "wifianalyticsd", Killer::Jetsam)
        );
        assert_eq!(k.uid, Some(501));
        assert_eq!(k.resident_bytes, Some(382 * 16384));
        assert_eq!(k.scope, "it went over its high-water mark (highwater)");
        assert_eq!(k.source, "the JetsamEvent report /r/JetsamEvent-x.ips");
        assert_eq!(
            k.message,
            "JetsamEvent of 2020-10-15 17:29:58.79 +0100: wifianalyticsd [2527] killed (highwater), 382 pages resident; the largest process then: AppStore"
        );
    }

    #[test]
    fn a_jetsam_kill_says_why_in_words() {
        let k = super::super::jetsam::parse_kill_message(
            "memorystatus: killing_top_process pid 901 [Python] (vm-pageshortage 0 86s rf:-) 1024KB - memorystatus_available_pages: 5",
        )
        .unwrap();
        let m = jetsam_kill(k, Timestamp(3), Some(501));
        assert_eq!((m.pid, m.killer, m.uid), (901, Killer::Jetsam, Some(501)));
        assert_eq!(
            m.scope,
            "the machine ran short of free memory pages (vm-pageshortage)"
        );
        assert_eq!(m.resident_bytes, Some(1 << 20));
    }

    #[test]
    fn a_low_swap_kill_is_a_memory_kill_with_its_compressed_size_in_words() {
        // xnu-8792.81.2 bsd/kern/kern_proc.c:4568 and :4349, filled in.
        let largest = super::super::jetsam::parse_kill_message(
            "low swap: killing largest compressed process with pid 4242 (Python) and size 30720 MB",
        )
        .unwrap();
        let m = jetsam_kill(largest, Timestamp(3), None);
        assert_eq!((m.pid, m.name.as_str()), (4242, "Python"));
        assert_eq!(m.resident_bytes, None, "compressed memory is not resident");
        assert_eq!(
            m.scope,
            "swap space ran out and it held the most compressed memory (30720 MiB in the compressor) (low-swap)"
        );
        let marked =
            super::super::jetsam::parse_kill_message("low swap: killing pid 4243 (Python)")
                .unwrap();
        assert_eq!(
            jetsam_kill(marked, Timestamp(3), None).scope,
            "swap space ran out and it was marked to be killed when that happens (by its spawner or itself) (low-swap)"
        );
    }

    #[test]
    fn an_agent_keeps_only_its_own_user_s_kills() {
        let mut own = OwnProcesses::new(501);
        let mut snap = snapshot(1_000)
            .process(process(10).uid(501))
            .process(process(11).uid(502))
            .process(process(12))
            .build();
        own.note(&snap);
        assert_eq!(own.owner(10), Some(501));
        assert_eq!(own.owner(11), None, "another user's");
        assert_eq!(own.owner(12), None, "an owner not read");
        assert_eq!(own.owner(13), None, "never sampled");
        // Gone from later samples, remembered a while, then forgotten.
        snap.processes.clear();
        snap.taken_at = Timestamp(30_000);
        own.note(&snap);
        assert_eq!(own.owner(10), Some(501));
        snap.taken_at = Timestamp(1_000 + 61_000);
        own.note(&snap);
        assert_eq!(own.owner(10), None);
        // A pid another user took over is theirs.
        snap.processes = vec![process(10).uid(502).build()];
        own.note(&snap);
        assert_eq!(own.owner(10), None);
    }
}
