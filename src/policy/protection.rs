//! Who may never be acted on: PID 0 and 1, the daemon itself and every one of
//! its ancestors (its supervisor, the shell that started it), processes the
//! config protects by name or executable path, and processes of users a rule
//! does not cover.
//!
//! Protection by name or path covers only processes of root and system
//! accounts (see [`Protect`]): a user who names a process `sshd` gets no
//! protection from it, and the status says so. The actuator checks the
//! hard-wired part again right before each signal, and checks every member
//! of a process group it signals against the rule's [`Reach`].

use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::config::{Protect, Rule};
use crate::model::{ProcessSample, Snapshot};

/// The pids that are protected whatever the config says: 0, 1, `self_pid`
/// and its ancestors as far as the snapshot's parent links reach.
pub fn hard_protected(snap: &Snapshot, self_pid: u32) -> HashSet<u32> {
    let parents: HashMap<u32, u32> = snap.processes.iter().map(|p| (p.id.pid, p.ppid)).collect();
    let mut set: HashSet<u32> = [0, 1, self_pid].into_iter().collect();
    let mut pid = self_pid;
    // The chain is bounded by the number of processes; a cycle in bad data
    // stops at the first repeat.
    while let Some(&parent) = parents.get(&pid) {
        if !set.insert(parent) && parent != pid {
            break;
        }
        if parent == pid || parent <= 1 {
            break;
        }
        pid = parent;
    }
    set
}

/// [`hard_protected`] of one snapshot, worked out when first asked for:
/// most evaluations match no process a rule could act on, and then the walk
/// up the process tree (a map of every process's parent) is not needed.
pub struct HardProtected<'a> {
    snap: &'a Snapshot,
    self_pid: u32,
    set: OnceCell<HashSet<u32>>,
}

impl<'a> HardProtected<'a> {
    pub fn new(snap: &'a Snapshot, self_pid: u32) -> Self {
        Self {
            snap,
            self_pid,
            set: OnceCell::new(),
        }
    }

    /// The protected pids (see [`hard_protected`]).
    pub fn get(&self) -> &HashSet<u32> {
        self.set
            .get_or_init(|| hard_protected(self.snap, self.self_pid))
    }

    /// Whether the set was worked out.
    #[cfg(test)]
    fn is_known(&self) -> bool {
        self.set.get().is_some()
    }
}

/// Whether `[protect]` protects a process, and why (or why not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protection {
    /// Never to be signalled: the reason, e.g. `"sshd" is protected by
    /// [protect] and runs as root`.
    Protected(String),
    /// May be signalled. The note says why a listed name or path does not
    /// protect it (`named "sshd" but owned by uid 1000: …`); `None` when
    /// nothing in `[protect]` names it.
    Unprotected(Option<String>),
}

/// How `[protect]` judges a process with this name, executable path and
/// owner. A listed name or path protects root's and system accounts'
/// processes, and a process whose owner is unknown (it cannot be told
/// apart from one of those); anyone else's process it does not protect.
pub fn config_protection(
    protect: &Protect,
    name: &str,
    exe: Option<&str>,
    uid: Option<u32>,
) -> Protection {
    let listed = match exe.filter(|e| protect.protects_exe(e)) {
        Some(exe) => Some((format!("executable {exe:?}"), "path")),
        None if protect.protects_name(name) => Some((format!("{name:?}"), "name")),
        None => None,
    };
    let Some((what, by)) = listed else {
        return Protection::Unprotected(None);
    };
    match uid {
        None => Protection::Protected(format!(
            "{what} is protected by [protect] and its owner is unknown"
        )),
        Some(0) => {
            Protection::Protected(format!("{what} is protected by [protect] and runs as root"))
        }
        Some(uid) if protect.covers_owner(uid) => Protection::Protected(format!(
            "{what} is protected by [protect] and runs as system account uid {uid}"
        )),
        Some(uid) => {
            let named = if by == "path" { "runs" } else { "named" };
            Protection::Unprotected(Some(format!(
                "{named} {what} but owned by uid {uid}: {by} protection covers root and system \
                 accounts (uid ≤ {}) only",
                protect.system_uid_max
            )))
        }
    }
}

/// Whether `p` is protected, hard-wired or by `[protect]`, and why.
pub fn protection(
    p: &ProcessSample,
    protect: &Protect,
    hard: &HashSet<u32>,
    self_pid: u32,
) -> Protection {
    let pid = p.id.pid;
    if pid <= 1 {
        return Protection::Protected(format!("pid {pid} is the init process"));
    }
    if pid == self_pid {
        return Protection::Protected("it is headroom itself".to_string());
    }
    if hard.contains(&pid) {
        return Protection::Protected("it is an ancestor of headroom (its supervisor)".to_string());
    }
    config_protection(protect, &p.name, p.exe.as_deref(), p.uid)
}

/// Why `p` is protected, if it is (see [`protection`]).
pub fn protection_reason(
    p: &ProcessSample,
    protect: &Protect,
    hard: &HashSet<u32>,
    self_pid: u32,
) -> Option<String> {
    match protection(p, protect, hard, self_pid) {
        Protection::Protected(why) => Some(why),
        Protection::Unprotected(_) => None,
    }
}

/// Whether a rule with these settings may act on a process of `owner`,
/// given the daemon's own uid: another user's processes need
/// `other_users`, root's need `root`, and a process whose owner is unknown
/// needs both.
pub fn owner_allowed(other_users: bool, root: bool, owner: Option<u32>, self_uid: u32) -> bool {
    match owner {
        None => other_users && root,
        Some(0) => root && (self_uid == 0 || other_users),
        Some(uid) => uid == self_uid || other_users,
    }
}

/// Why a rule with these settings does not act on a process of `owner`
/// (whose user name is `user`, where known), given the daemon's own uid,
/// in words that say which setting to change; `None` when it may (see
/// [`owner_allowed`]).
pub fn owner_refusal(
    other_users: bool,
    root: bool,
    owner: Option<u32>,
    user: Option<&str>,
    self_uid: u32,
) -> Option<String> {
    if owner_allowed(other_users, root, owner, self_uid) {
        return None;
    }
    let who = |uid: u32| match user {
        Some(name) => format!("{name} (uid {uid})"),
        None => format!("uid {uid}"),
    };
    Some(match owner {
        None => "its owner is unknown, and the rule acts on such a process only with \
                 other_users = true and root = true"
            .to_string(),
        Some(0) if !root => "owned by root and the rule has root = false; add root = true to \
                             act on root's processes"
            .to_string(),
        Some(0) => format!(
            "owned by root, not by the user headroom runs as (uid {self_uid}), and the rule has \
             other_users = false; add other_users = true (only a headroom running as root can \
             signal root's processes)"
        ),
        Some(uid) => format!(
            "owned by {}, not by the user headroom runs as ({}), and the rule has \
             other_users = false; add other_users = true to act on other users' processes",
            who(uid),
            if self_uid == 0 {
                "root".to_string()
            } else {
                format!("uid {self_uid}")
            }
        ),
    })
}

/// Whether `rule` may act on `p`, given the daemon's own uid (see
/// [`owner_allowed`]).
pub fn user_allowed(rule: &Rule, p: &ProcessSample, self_uid: u32) -> bool {
    owner_allowed(rule.other_users, rule.root, p.uid, self_uid)
}

/// Whom a signal step may reach: the rule's user settings, `[protect]` and
/// the daemon's uid, carried in each [`super::Decision`] so that the
/// actuator can check every member of a process group as the policy checked
/// the target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reach {
    /// The rule's `other_users`.
    pub other_users: bool,
    /// The rule's `root`.
    pub root: bool,
    /// The uid headroom runs as.
    pub self_uid: u32,
    pub protect: Protect,
}

impl Reach {
    /// What `rule` may reach under `protect`, for a daemon running as `self_uid`.
    pub fn of_rule(rule: &Rule, protect: &Protect, self_uid: u32) -> Self {
        Self {
            other_users: rule.other_users,
            root: rule.root,
            self_uid,
            protect: protect.clone(),
        }
    }

    /// The daemon's own user's processes only, under the default
    /// `[protect]`: for decisions that come from no rule.
    pub fn own_user(self_uid: u32) -> Self {
        Self {
            other_users: false,
            root: self_uid == 0,
            self_uid,
            protect: Protect::default(),
        }
    }

    /// Why a process of `owner` is out of reach, or `None` if it is not.
    pub fn refuses_owner(&self, owner: Option<u32>) -> Option<String> {
        if owner_allowed(self.other_users, self.root, owner, self.self_uid) {
            return None;
        }
        Some(match owner {
            None => "owner unknown, rule needs other_users = true and root = true".to_string(),
            Some(0) if !self.root => "root, rule has root = false".to_string(),
            Some(0) => "root, rule has other_users = false".to_string(),
            Some(uid) => format!("uid {uid}, rule has other_users = false"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::build::{process, snapshot};

    #[test]
    fn ancestors_of_the_daemon_are_protected() {
        let s = snapshot(0)
            .processes([
                process(1).ppid(0).name("systemd"),
                process(50).name("sshd"),
                process(60).ppid(50).name("bash"),
                process(70).ppid(60).name("headroom"),
                process(80).ppid(60).name("python3"),
            ])
            .build();
        let hard = hard_protected(&s, 70);
        assert!(hard.contains(&60) && hard.contains(&50) && hard.contains(&1));
        assert!(!hard.contains(&80), "a sibling is not an ancestor");
    }

    #[test]
    fn the_lazy_set_is_worked_out_on_first_use_and_is_the_same() {
        let s = snapshot(0)
            .processes([
                process(1).ppid(0).name("systemd"),
                process(60).name("bash"),
                process(70).ppid(60).name("headroom"),
            ])
            .build();
        let lazy = HardProtected::new(&s, 70);
        assert!(!lazy.is_known());
        assert_eq!(lazy.get(), &hard_protected(&s, 70));
        assert!(lazy.is_known());
    }

    #[test]
    fn a_parent_cycle_in_bad_data_terminates() {
        let s = snapshot(0)
            .processes([
                process(10).ppid(20).name("a"),
                process(20).ppid(10).name("b"),
            ])
            .build();
        let hard = hard_protected(&s, 10);
        assert!(hard.contains(&20));
    }

    #[test]
    fn users_need_the_rule_to_say_so() {
        let config = crate::config::Config::from_toml_str(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n",
            "t",
        )
        .unwrap();
        let mut rule = config.rules[0].clone();
        let mut p = process(10).uid(1000).name("python3").build();
        assert!(user_allowed(&rule, &p, 1000));
        assert!(!user_allowed(&rule, &p, 0), "root daemon, user process");
        rule.other_users = true;
        assert!(user_allowed(&rule, &p, 0));
        p.uid = Some(0);
        assert!(
            !user_allowed(&rule, &p, 0),
            "root's processes need root = true"
        );
        rule.root = true;
        assert!(user_allowed(&rule, &p, 0));
        p.uid = None;
        assert!(user_allowed(&rule, &p, 0));
        rule.root = false;
        assert!(!user_allowed(&rule, &p, 0));
    }

    #[test]
    fn an_owner_refusal_names_the_setting_to_change() {
        let root_off = owner_refusal(true, false, Some(0), Some("root"), 0).unwrap();
        assert_eq!(
            root_off,
            "owned by root and the rule has root = false; add root = true to act on root's \
             processes"
        );
        let other = owner_refusal(false, true, Some(1001), Some("bo"), 0).unwrap();
        assert!(
            other.starts_with("owned by bo (uid 1001), not by the user headroom runs as (root)"),
            "{other}"
        );
        assert!(other.contains("add other_users = true"), "{other}");
        let unknown = owner_refusal(true, false, None, None, 0).unwrap();
        assert!(unknown.contains("owner is unknown"), "{unknown}");
        assert_eq!(owner_refusal(false, false, Some(1000), None, 1000), None);
        assert_eq!(owner_refusal(true, true, Some(0), None, 0), None);
    }

    fn protect(text: &str) -> Protect {
        crate::config::Config::from_toml_str(text, "t")
            .unwrap()
            .protect
    }

    #[test]
    fn a_users_process_named_sshd_is_not_protected_and_says_why() {
        let p = protect("");
        match config_protection(&p, "sshd", Some("/home/ana/sshd"), Some(1000)) {
            Protection::Unprotected(Some(note)) => {
                assert!(
                    note.contains("named \"sshd\" but owned by uid 1000"),
                    "{note}"
                );
                assert!(note.contains("root and system accounts"), "{note}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn roots_and_system_accounts_processes_named_sshd_are_protected() {
        let p = protect("");
        let root = config_protection(&p, "sshd", None, Some(0));
        assert_eq!(
            root,
            Protection::Protected("\"sshd\" is protected by [protect] and runs as root".into())
        );
        let system = config_protection(&p, "dbus-daemon", None, Some(101));
        assert!(matches!(system, Protection::Protected(ref why) if why.contains("uid 101")));
    }

    #[test]
    fn an_unknown_owner_keeps_name_protection() {
        let p = protect("");
        assert!(matches!(
            config_protection(&p, "sshd", None, None),
            Protection::Protected(_)
        ));
    }

    #[test]
    fn an_unlisted_process_has_no_note() {
        let p = protect("");
        assert_eq!(
            config_protection(&p, "python3", Some("/usr/bin/python3"), Some(1000)),
            Protection::Unprotected(None)
        );
    }

    #[test]
    fn exe_protection_covers_system_accounts_only() {
        let p = protect("[protect]\ndefaults = false\nexes = [\"/usr/sbin/sshd\"]\n");
        assert!(matches!(
            config_protection(&p, "sshd-session", Some("/usr/sbin/sshd"), Some(0)),
            Protection::Protected(ref why) if why.contains("executable \"/usr/sbin/sshd\"")
        ));
        // A user can make /proc/PID/exe show that path (a bind mount in a
        // mount namespace of their own): no protection for their process.
        match config_protection(&p, "x", Some("/usr/sbin/sshd"), Some(1000)) {
            Protection::Unprotected(Some(note)) => {
                assert!(note.contains("path protection covers"), "{note}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            config_protection(&p, "sshd", Some("/usr/bin/sshd"), Some(0)),
            Protection::Unprotected(None),
            "defaults off: the name alone is not listed"
        );
    }

    #[test]
    fn the_system_uid_bound_comes_from_the_config() {
        let p = protect("[protect]\nsystem_uid_max = 99\n");
        assert!(matches!(
            config_protection(&p, "sshd", None, Some(99)),
            Protection::Protected(_)
        ));
        assert!(matches!(
            config_protection(&p, "sshd", None, Some(100)),
            Protection::Unprotected(Some(_))
        ));
    }

    #[test]
    fn hard_protection_comes_before_the_config() {
        let s = snapshot(0)
            .processes([process(70).name("headroom")])
            .build();
        let hard = hard_protected(&s, 70);
        let me = process(70).uid(1000).name("headroom").build();
        assert_eq!(
            protection(&me, &protect(""), &hard, 70),
            Protection::Protected("it is headroom itself".into())
        );
        let user_sshd = process(80).uid(1000).name("sshd").build();
        assert_eq!(protection_reason(&user_sshd, &protect(""), &hard, 70), None);
    }

    #[test]
    fn a_reach_names_what_it_refuses() {
        let config = crate::config::Config::from_toml_str(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nother_users = true\nactions = [{ notify = true }]\n",
            "t",
        )
        .unwrap();
        let reach = Reach::of_rule(&config.rules[0], &config.protect, 0);
        assert_eq!(reach.refuses_owner(Some(1000)), None);
        assert_eq!(
            reach.refuses_owner(Some(0)).as_deref(),
            Some("root, rule has root = false")
        );
        assert!(reach.refuses_owner(None).is_some());
        let own = Reach::own_user(1000);
        assert_eq!(own.refuses_owner(Some(1000)), None);
        assert_eq!(
            own.refuses_owner(Some(1001)).as_deref(),
            Some("uid 1001, rule has other_users = false")
        );
    }
}
