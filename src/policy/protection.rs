//! Who may never be acted on: PID 0 and 1, the daemon itself and every one of
//! its ancestors (its supervisor, the shell that started it), processes the
//! config protects by name, and processes of users a rule does not cover.
//! The actuator checks the hard-wired part again right before each signal.

use std::collections::{HashMap, HashSet};

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

/// Why `p` is protected, if it is.
pub fn protection_reason(
    p: &ProcessSample,
    protect: &Protect,
    hard: &HashSet<u32>,
    self_pid: u32,
) -> Option<String> {
    let pid = p.id.pid;
    if pid <= 1 {
        return Some(format!("pid {pid} is the init process"));
    }
    if pid == self_pid {
        return Some("it is headroom itself".to_string());
    }
    if hard.contains(&pid) {
        return Some("it is an ancestor of headroom (its supervisor)".to_string());
    }
    if protect.protects_name(&p.name) {
        return Some(format!("\"{}\" is protected by [protect]", p.name));
    }
    None
}

/// Whether `rule` may act on `p`, given the daemon's own uid: another user's
/// processes need `other_users`, root's need `root`, and a process whose
/// owner is unknown needs both.
pub fn user_allowed(rule: &Rule, p: &ProcessSample, self_uid: u32) -> bool {
    match p.uid {
        None => rule.other_users && rule.root,
        Some(0) => rule.root && (self_uid == 0 || rule.other_users),
        Some(uid) => uid == self_uid || rule.other_users,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn proc(pid: u32, ppid: u32, name: &str) -> ProcessSample {
        ProcessSample {
            uid: Some(1000),
            ..ProcessSample::new(ProcessId { pid, start: 1 }, ppid, name)
        }
    }

    fn snap(processes: Vec<ProcessSample>) -> Snapshot {
        Snapshot {
            taken_at: Timestamp(0),
            source: "test".into(),
            processes,
            ..Snapshot::default()
        }
    }

    #[test]
    fn ancestors_of_the_daemon_are_protected() {
        let s = snap(vec![
            proc(1, 0, "systemd"),
            proc(50, 1, "sshd"),
            proc(60, 50, "bash"),
            proc(70, 60, "headroom"),
            proc(80, 60, "python3"),
        ]);
        let hard = hard_protected(&s, 70);
        assert!(hard.contains(&60) && hard.contains(&50) && hard.contains(&1));
        assert!(!hard.contains(&80), "a sibling is not an ancestor");
    }

    #[test]
    fn a_parent_cycle_in_bad_data_terminates() {
        let s = snap(vec![proc(10, 20, "a"), proc(20, 10, "b")]);
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
        let mut p = proc(10, 1, "python3");
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
}
