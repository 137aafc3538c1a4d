//! Limits and actions as root, with processes of an unprivileged user:
//! protection by name and by `[protect]` covers root's processes and never
//! a user's, a process-group step leaves root's and protected members
//! alone, and a rule without `root = true` holds root's process and says
//! why. A process of the user (uid 65534, through `setpriv`) runs a copy of
//! the hog named `sshd`, and a process group holds both root's processes
//! and the user's.
//!
//! Every test needs root and fails without it.
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support;
use crate::support::hog::{Daemon, HEADROOM, ROOT_REASON, Running, Sandbox, hog_path, rule_status};
use crate::support::{NOBODY, need_root, need_tools};

#[test]
fn a_protected_process_is_never_signalled() {
    need_root();
    let sb = Sandbox::new("protected");
    // The positive control: the same hog, under a name the pattern does not
    // cover, matched by the same rule.
    let control = sb.path("hog-control");
    std::os::unix::fs::symlink(hog_path(), &control).expect("link the control hog");
    let _d = sb.start(
        &format!(
            "{}\n[protect]\npatterns = [\"^hog-protected\"]\n",
            over_100mib("hog", true, SIGTERM, &[&sb.hog, &control])
        ),
        &[],
    );
    let mut hog = Running::hog(&sb.hog, &HOG_ARGS);
    let mut unprotected = Running::hog(&control, &HOG_ARGS);
    hog.expect_line("holding");
    unprotected.expect_line("signal SIGTERM");
    assert_eq!(sb.first_action_on(unprotected.pid())["outcome"], "done");
    // The protected one: a whole 1.5 s more of samples over the limit.
    let later = hog.drain(Duration::from_millis(1500));
    assert!(later.iter().all(|l| !l.starts_with("signal")), "{later:?}");
    assert!(hog.alive());
    assert!(sb.actions_on(hog.pid()).is_empty());
}

/// A directory under /tmp that every user can enter, for programs an
/// unprivileged user runs (the sandbox lies in the build's private
/// `target/tmp`).
fn shared_dir(tag: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("headroom-{tag}-"))
        .tempdir_in("/tmp")
        .expect("tempdir in /tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod 0755");
    dir
}

/// A copy of the hog at `dir/name`, owned by `owner` (else root's) and
/// executable by all: a user's program that names its process `name`.
fn hog_copy(dir: &Path, name: &str, owner: Option<u32>) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy(hog_path(), &path).expect("copy the hog");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    if let Some(uid) = owner {
        std::os::unix::fs::chown(&path, Some(uid), Some(uid)).expect("chown");
    }
    path
}

/// `program` run as the unprivileged user (`setpriv` execs it in its own
/// place: same pid).
fn as_nobody(program: &Path) -> Command {
    need_tools(&[("setpriv", "util-linux")]);
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        "--clear-groups",
        "--",
    ])
    .arg(program);
    c
}

/// A `[rule.match] argv` pattern for a process started from one of `paths`.
fn argv_of(paths: &[&Path]) -> String {
    let alternatives: Vec<String> = paths
        .iter()
        .map(|p| regex::escape(&p.display().to_string()))
        .collect();
    format!("^({}) ", alternatives.join("|")).replace('\\', "\\\\")
}

const HOG_ARGS: [&str; 6] = ["--rate", "max", "--max", "200MiB", "--catch", "TERM"];

const SIGTERM: &str = "{ signal = \"SIGTERM\" }";
const SIGTERM_TO_GROUP: &str = "{ signal = \"SIGTERM\", process_group = true }";

/// A rule `name` with a footprint limit of 100 MiB and one step, `action`,
/// on processes started from one of `paths` whoever owns them (root's only
/// if `root`).
fn over_100mib(name: &str, root: bool, action: &str, paths: &[&Path]) -> String {
    format!(
        "[[rule]]\nname = \"{name}\"\nroot = {root}\nother_users = true\nfootprint = \"100MiB\"\n\
         actions = [{action}]\n[rule.match]\nargv = \"{}\"\n",
        argv_of(paths)
    )
}

#[test]
fn a_users_process_named_sshd_is_signalled_and_roots_is_protected() {
    need_root();
    let sb = Sandbox::new("renamed");
    let shared = shared_dir("renamed");
    // The user's program, in a directory of their own, named sshd.
    let user_dir = shared.path().join("user");
    std::fs::create_dir(&user_dir).expect("mkdir");
    std::fs::set_permissions(&user_dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let user_sshd = hog_copy(&user_dir, "sshd", Some(NOBODY));
    // Root's, named the same (the positive control).
    let root_sshd = hog_copy(sb.dir.path(), "sshd", None);
    let d = sb.start(
        &over_100mib("renamed", true, SIGTERM, &[&user_sshd, &root_sshd]),
        &[],
    );
    let addr = d.addr;

    let mut user = Running::hog_command({
        let mut c = as_nobody(&user_sshd);
        c.args(HOG_ARGS);
        c
    });
    let mut root = Running::hog(&root_sshd, &HOG_ARGS);
    user.expect_line("ready");
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", user.pid())).expect("comm");
    assert_eq!(comm.trim(), "sshd", "the user's process is named sshd");

    // The user's sshd gets the signal, and the journal says why the name
    // did not protect it.
    user.expect_line("signal SIGTERM");
    let action = sb.first_action_on(user.pid());
    assert_eq!(action["outcome"], "done", "{action}");
    let detail = action["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(&format!(
            "not protected: named \"sshd\" but owned by uid {NOBODY}: name protection covers \
             root and system accounts"
        )),
        "{detail}"
    );

    root.expect_line("holding");
    // Root's sshd: a whole second of samples over the limit, no signal.
    let later = root.drain(Duration::from_secs(1));
    assert!(later.iter().all(|l| !l.starts_with("signal")), "{later:?}");
    assert!(root.alive());
    assert!(sb.actions_on(root.pid()).is_empty());
    // The API says why.
    let (status, body) = support::get(&format!("http://{addr}/api/v1/processes/{}", root.pid()));
    assert_eq!(status, 200, "{body}");
    let row: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let rule = &row["process"]["rules"][0];
    let why = "protected: \"sshd\" is protected by [protect] and runs as root";
    assert_eq!(rule["state"], "crossed, not acting", "{row}");
    assert_eq!(rule["not_acting"], why, "{row}");
    // And the journal, once for all those samples.
    let held: Vec<serde_json::Value> = sb
        .journal()
        .into_iter()
        .filter(|e| e["event"] == "limit-held-not-acting" && e["process"]["pid"] == root.pid())
        .collect();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["reason"], why);
}

/// A process group led by `leader` (started here in a group of its own)
/// that the user's hog joins.
struct Group {
    leader: support::Reaped,
    hog: Running,
}

impl Group {
    fn start(leader: &Path, hog: &Path) -> Self {
        use std::os::unix::process::CommandExt as _;
        let leader = support::Reaped(
            Command::new(leader)
                .arg("300")
                .process_group(0)
                .spawn()
                .expect("spawn the group leader"),
        );
        let pgid = i32::try_from(leader.0.id()).expect("pid");
        let hog = Running::hog_command({
            let mut c = as_nobody(hog);
            c.args(HOG_ARGS).process_group(pgid);
            c
        });
        Self { leader, hog }
    }

    fn pgid(&self) -> u32 {
        self.leader.0.id()
    }

    fn leader_alive(&mut self) -> bool {
        matches!(self.leader.0.try_wait(), Ok(None))
    }
}

/// A process-group step that has been taken, and what it said.
struct GroupStep {
    group: Group,
    pgid: u32,
    /// The group leader's pid.
    leader: u32,
    /// The journal's detail of the action on the hog.
    detail: String,
    /// Kept until the test ends.
    _daemon: Daemon,
    _dirs: (Sandbox, tempfile::TempDir),
}

/// A sandbox tagged `tag`, a daemon on a rule with a process-group step
/// (on root's processes only if `root`) on the user's hog, and a group led
/// by root's `leader` (a program the closure puts in place) that the hog
/// joins, once the hog has had its SIGTERM and the journal says it was done.
fn group_step(tag: &str, root: bool, leader: impl FnOnce(&Sandbox) -> PathBuf) -> GroupStep {
    need_root();
    let sb = Sandbox::new(tag);
    let shared = shared_dir(tag);
    let user_hog = hog_copy(shared.path(), &format!("hog-{tag}"), Some(NOBODY));
    let leader = leader(&sb);
    let daemon = sb.start(
        &over_100mib("group", root, SIGTERM_TO_GROUP, &[&user_hog]),
        &[],
    );
    let mut group = Group::start(&leader, &user_hog);
    let (pgid, leader) = (group.pgid(), group.leader.0.id());
    group.hog.expect_line("signal SIGTERM");
    let action = sb.first_action_on(group.hog.pid());
    assert_eq!(action["outcome"], "done", "{action}");
    let detail = action["detail"].as_str().unwrap_or_default().to_string();
    GroupStep {
        group,
        pgid,
        leader,
        detail,
        _daemon: daemon,
        _dirs: (sb, shared),
    }
}

#[test]
fn a_process_group_step_leaves_roots_member_alone() {
    // Root's `sleep` leads the group; the user's hog is in it.
    let GroupStep {
        mut group,
        pgid,
        leader,
        detail,
        ..
    } = group_step("group-root", false, |_| PathBuf::from("/bin/sleep"));
    assert!(
        group.leader_alive(),
        "root's member of the group was killed"
    );
    assert!(group.hog.alive(), "the hog catches SIGTERM");
    assert!(
        detail.contains(&format!(
            "sent SIGTERM to 1 of 2 members of process group {pgid}; left alone: pid {leader} \
             (root, rule has root = false)"
        )),
        "{detail}"
    );
}

#[test]
fn a_process_group_step_leaves_a_protected_member_alone() {
    // Root's `sleep`, under a protected name.
    let GroupStep {
        mut group,
        pgid,
        leader,
        detail,
        ..
    } = group_step("group-protected", true, |sb| {
        let root_sshd = sb.path("sshd");
        std::fs::copy("/bin/sleep", &root_sshd).expect("copy sleep");
        root_sshd
    });
    assert!(group.leader_alive(), "the protected member was killed");
    assert!(
        detail.contains(&format!(
            "sent SIGTERM to 1 of 2 members of process group {pgid}; left alone: pid {leader} \
             (protected: \"sshd\" is protected by [protect] and runs as root)"
        )),
        "{detail}"
    );
}

#[test]
fn a_rule_without_root_holds_roots_process_and_says_why_once() {
    need_root();
    let sb = Sandbox::new("held-root");
    let mut d = sb.start(
        &over_100mib("hog", false, "{ signal = \"SIGINT\" }", &[&sb.hog]),
        &[],
    );
    let addr = d.addr;
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "max", "--max", "200MiB", "--catch", "INT"],
    );
    hog.expect_line("holding");
    let status = rule_status(addr, hog.pid(), "hog", "crossed");
    assert_eq!(status["state"], "crossed, not acting", "{status}");
    assert_eq!(status["not_acting"], ROOT_REASON);
    assert!(
        status["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&format!("; not acting: {ROOT_REASON}"))),
        "{status}"
    );
    // Many samples later (every 50 ms): no signal, and one event.
    let later = hog.drain(Duration::from_millis(1500));
    assert!(later.iter().all(|l| !l.starts_with("signal")), "{later:?}");
    let held: Vec<serde_json::Value> = sb
        .journal()
        .into_iter()
        .filter(|e| e["event"] == "limit-held-not-acting" && e["process"]["pid"] == hog.pid())
        .collect();
    assert_eq!(held.len(), 1, "one event per crossing: {held:?}");
    assert_eq!(held[0]["rule"], "hog");
    assert_eq!(held[0]["reason"], ROOT_REASON);
    assert!(sb.actions_on(hog.pid()).is_empty());
    // The log says it once, with the reason.
    let line = d.expect_line("crossed its limit and the rule does not act");
    assert!(line.contains(ROOT_REASON), "{line}");
    // `headroom events` says it in one line.
    let out = Command::new(HEADROOM)
        .args(["events", "--journal"])
        .arg(sb.path("journal.jsonl"))
        .output()
        .expect("headroom events");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(
            |l| l.contains(&format!("(pid {})  rule \"hog\": footprint", hog.pid()))
                && l.ends_with(&format!("[not acting: {ROOT_REASON}]"))
        ),
        "{text}"
    );
}
