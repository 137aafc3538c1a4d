//! Limits and actions end to end: the real daemon, real `headroom-hog`
//! processes that really allocate memory, and the signals they receive.
//!
//! The protection tests replay attacks by a local user: as root, a process
//! of an unprivileged user (uid 65534, through `setpriv`) runs a copy of the
//! hog named `sshd`, and a process group holds both root's processes and
//! the user's. Run as a user, each of them asserts what holds for that user
//! (their own processes, no root's to protect).
#![cfg(target_os = "linux")]

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::hog::{HEADROOM, HOG, Running, Sandbox, parse_signal_line};

const MIB: u64 = 1 << 20;

/// A rule on this sandbox's hog only, acting as root may on root's processes
/// (the tests run as whoever runs them; `root = true` covers root).
fn rule(sb: &Sandbox, body: &str) -> String {
    format!(
        "[[rule]]\nname = \"hog\"\nroot = true\nother_users = true\n{body}\n[rule.match]\nargv = \"{}\"\n",
        sb.hog_pattern()
    )
}

fn start(sb: &Sandbox, config_rest: &str, extra: &[&str]) -> Running {
    let cfg = sb.config(config_rest);
    let mut args = vec!["run", "--config", cfg.to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    let mut d = Running::daemon(&args);
    d.expect_line("first sample:");
    d
}

fn event_count(sb: &Sandbox, event: &str, field: &str, value: &str) -> usize {
    sb.journal()
        .iter()
        .filter(|e| e["event"] == event && e[field] == value)
        .count()
}

#[test]
fn an_absolute_limit_sends_sigint() {
    let sb = Sandbox::new("absolute");
    let _d = start(
        &sb,
        &rule(
            &sb,
            "footprint = \"300MiB\"\nactions = [{ signal = \"SIGINT\" }]",
        ),
        &[],
    );
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "200MiB/s", "--max", "1GiB", "--catch", "INT"],
    );
    let line = hog.expect_line("signal SIGINT");
    let (_, footprint, _) = parse_signal_line(&line).expect("signal line");
    // The hog reports what it allocated; its footprint also holds its own
    // few MiB of runtime, so the limit is reached a little earlier.
    assert!(
        footprint >= 280 * MIB,
        "signalled at {footprint} bytes, well below the limit"
    );
    assert!(
        footprint < 600 * MIB,
        "signalled late, at {footprint} bytes"
    );
    assert!(hog.alive(), "a caught SIGINT keeps the hog alive");
    // The journal says what happened.
    std::thread::sleep(Duration::from_millis(300));
    let events = sb.journal();
    let action = events
        .iter()
        .find(|e| e["event"] == "action")
        .expect("an action event");
    assert_eq!(action["action"], "SIGINT");
    assert_eq!(action["outcome"], "done");
    assert_eq!(action["process"]["pid"], hog.pid());
    assert!(events.iter().any(|e| e["event"] == "limit-crossed"));
}

#[test]
fn an_ignored_sigint_escalates_to_sigterm_then_sigkill_on_schedule() {
    let sb = Sandbox::new("ladder");
    let _d = start(
        &sb,
        &rule(
            &sb,
            "footprint = \"200MiB\"\nactions = [{ signal = \"SIGINT\" }, { signal = \"SIGTERM\", after = \"1s\" }, { signal = \"SIGKILL\", after = \"1s\" }]",
        ),
        &[],
    );
    let mut hog = Running::hog(
        &sb.hog,
        &[
            "--rate", "400MiB/s", "--max", "300MiB", "--ignore", "INT,TERM",
        ],
    );
    let int = parse_signal_line(&hog.expect_line("signal SIGINT")).expect("SIGINT");
    let term = parse_signal_line(&hog.expect_line("signal SIGTERM")).expect("SIGTERM");
    // `after` runs from sample to sample; the hog sees each signal when its
    // own signal thread runs, so on a loaded machine the gap it measures
    // moves by a few hundred ms either way. What must hold: about a second,
    // never at once, never late by another whole step.
    let gap = term.2 - int.2;
    assert!((500..=2000).contains(&gap), "SIGTERM {gap} ms after SIGINT");
    let status = hog.wait_exit(Duration::from_secs(5)).expect("killed");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "ended by SIGKILL: {status:?}");
    std::thread::sleep(Duration::from_millis(300));
    let actions: Vec<String> = sb
        .journal()
        .iter()
        .filter(|e| e["event"] == "action")
        .map(|e| e["action"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(actions, ["SIGINT", "SIGTERM", "SIGKILL"]);
}

#[test]
fn sigusr1_with_require_handler_skips_a_process_that_does_not_catch_it() {
    let sb = Sandbox::new("usr1-skip");
    let mut d = start(
        &sb,
        &rule(
            &sb,
            "footprint = \"100MiB\"\nactions = [{ signal = \"SIGUSR1\", require_handler = true }]",
        ),
        &[],
    );
    let mut hog = Running::hog(&sb.hog, &["--rate", "max", "--max", "200MiB"]);
    hog.expect_line("holding");
    // The actuator decides and says so: in the log, and once in the journal
    // however many samples follow (the one-step ladder is done).
    let line = d.expect_line("skipped SIGUSR1");
    assert!(
        line.contains(&format!("pid {} does not catch SIGUSR1", hog.pid())),
        "{line}"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(hog.alive(), "an uncaught SIGUSR1 would have killed it");
    assert_eq!(event_count(&sb, "skipped", "action", "SIGUSR1"), 1);
    let skipped = sb
        .journal()
        .into_iter()
        .find(|e| e["event"] == "skipped")
        .expect("skipped");
    assert!(
        skipped["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("does not catch"),
        "{skipped}"
    );
}

#[test]
fn sigusr1_with_require_handler_reaches_a_process_that_catches_it() {
    let sb = Sandbox::new("usr1-deliver");
    let _d = start(
        &sb,
        &rule(
            &sb,
            "footprint = \"100MiB\"\nactions = [{ signal = \"SIGUSR1\", require_handler = true }]",
        ),
        &[],
    );
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "max", "--max", "200MiB", "--catch", "USR1"],
    );
    hog.expect_line("signal SIGUSR1");
    assert!(hog.alive());
}

#[test]
fn dry_run_sends_nothing_and_journals_everything() {
    let sb = Sandbox::new("dry");
    let (_d, addr) = start_with_addr(
        &sb,
        &rule(
            &sb,
            "footprint = \"100MiB\"\nactions = [{ signal = \"SIGTERM\" }]",
        ),
        &["--dry-run"],
    );
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "max", "--max", "200MiB", "--catch", "TERM"],
    );
    hog.expect_line("holding");
    let later = hog.drain(Duration::from_millis(1500));
    assert!(later.iter().all(|l| !l.starts_with("signal")), "{later:?}");
    let events = sb.journal();
    let action = events
        .iter()
        .find(|e| e["event"] == "action")
        .expect("an action event even in a dry run");
    assert_eq!(action["outcome"], "dry-run");
    assert_eq!(action["dry_run"], true);
    assert!(events.iter().any(|e| e["event"] == "limit-crossed"));
    // The process's status says the step was a dry run, and whose.
    let status = status_of(addr, hog.pid(), "hog", "done, dry run");
    assert!(
        status["not_acting"].as_str().is_some_and(|n| n.starts_with(
            "dry run: headroom runs with dry_run (daemon.dry_run = true or --dry-run)"
        )),
        "{status}"
    );
}

#[test]
fn a_protected_process_is_never_signalled() {
    let sb = Sandbox::new("protected");
    let _d = start(
        &sb,
        &format!(
            "{}\n[protect]\npatterns = [\"^hog-protected\"]\n",
            rule(
                &sb,
                "footprint = \"100MiB\"\nactions = [{ signal = \"SIGTERM\" }]"
            )
        ),
        &[],
    );
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "max", "--max", "200MiB", "--catch", "TERM"],
    );
    hog.expect_line("holding");
    if !system_account() {
        // Run by a user: a name protects only root's and system accounts'
        // processes, and this hog is the user's.
        hog.expect_line("signal SIGTERM");
        return;
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert!(hog.alive());
    assert!(sb.journal().iter().all(|e| e["event"] != "action"));
}

/// The uid unprivileged processes run as in these tests.
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    headroom::sys::this_process::effective_uid() == 0
}

/// Whether the tests run as root or a system account, whose processes
/// `[protect]` names cover.
fn system_account() -> bool {
    headroom::sys::this_process::effective_uid() <= headroom::sys::accounts::SYSTEM_UID_MAX
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

/// A copy of the hog at `dir/name`, owned by `owner` (as root) and
/// executable by all: a user's program that names its process `name`.
fn hog_copy(dir: &Path, name: &str, owner: Option<u32>) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy(HOG, &path).expect("copy the hog");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    if let Some(uid) = owner.filter(|_| is_root()) {
        std::os::unix::fs::chown(&path, Some(uid), Some(uid)).expect("chown");
    }
    path
}

/// `program` run as the unprivileged user where the tests run as root
/// (`setpriv` execs it in its own place: same pid), else as the tests' user.
fn as_nobody(program: &Path) -> Command {
    if !is_root() {
        return Command::new(program);
    }
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

fn actions_on(sb: &Sandbox, pid: u32) -> Vec<serde_json::Value> {
    sb.journal()
        .into_iter()
        .filter(|e| e["event"] == "action" && e["process"]["pid"] == pid)
        .collect()
}

/// The first action on `pid` in the journal, once it is there (the
/// journal is written after the signal is sent).
fn first_action_on(sb: &Sandbox, pid: u32) -> serde_json::Value {
    support::wait_for(Duration::from_secs(10), "an action in the journal", || {
        actions_on(sb, pid).into_iter().next()
    })
}

const HOG_ARGS: [&str; 6] = ["--rate", "max", "--max", "200MiB", "--catch", "TERM"];

#[test]
fn a_users_process_named_sshd_is_signalled_and_roots_is_protected() {
    let sb = Sandbox::new("renamed");
    let shared = shared_dir("renamed");
    // The user's program, in a directory of their own, named sshd.
    let user_dir = shared.path().join("user");
    std::fs::create_dir(&user_dir).expect("mkdir");
    std::fs::set_permissions(&user_dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let user_sshd = hog_copy(&user_dir, "sshd", Some(NOBODY));
    // Root's, named the same (the positive control).
    let root_sshd = hog_copy(sb.dir.path(), "sshd", None);
    let cfg = sb.config(&format!(
        "[[rule]]\nname = \"renamed\"\nroot = true\nother_users = true\nfootprint = \"100MiB\"\n\
             actions = [{{ signal = \"SIGTERM\" }}]\n[rule.match]\nargv = \"{}\"\n",
        argv_of(&[&user_sshd, &root_sshd])
    ));
    let mut d = Running::daemon(&["run", "--config", cfg.to_str().expect("utf-8")]);
    let addr = d.http_addr();
    d.expect_line("first sample:");

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
    let uid = if is_root() {
        NOBODY
    } else {
        headroom::sys::this_process::effective_uid()
    };
    let action = first_action_on(&sb, user.pid());
    assert_eq!(action["outcome"], "done", "{action}");
    if !system_account() || is_root() {
        let detail = action["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(&format!(
                "not protected: named \"sshd\" but owned by uid {uid}: name protection covers \
                 root and system accounts"
            )),
            "{detail}"
        );
    }

    root.expect_line("holding");
    if !system_account() {
        // Run by a user, both are the user's: both are signalled.
        root.expect_line("signal SIGTERM");
        return;
    }
    // Root's sshd: a whole second of samples over the limit, no signal.
    let later = root.drain(Duration::from_secs(1));
    assert!(later.iter().all(|l| !l.starts_with("signal")), "{later:?}");
    assert!(root.alive());
    assert!(actions_on(&sb, root.pid()).is_empty());
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

#[test]
fn a_process_group_step_leaves_roots_member_alone() {
    let sb = Sandbox::new("group-root");
    let shared = shared_dir("group-root");
    let user_hog = hog_copy(shared.path(), "hog-group-root", Some(NOBODY));
    let _d = start(
        &sb,
        &format!(
            "[[rule]]\nname = \"group\"\nroot = false\nother_users = true\nfootprint = \"100MiB\"\n\
             actions = [{{ signal = \"SIGTERM\", process_group = true }}]\n[rule.match]\nargv = \"{}\"\n",
            argv_of(&[&user_hog])
        ),
        &[],
    );
    // Root's `sleep` leads the group; the user's hog is in it.
    let mut group = Group::start(Path::new("/bin/sleep"), &user_hog);
    let (pgid, leader) = (group.pgid(), group.leader.0.id());
    group.hog.expect_line("signal SIGTERM");
    let action = first_action_on(&sb, group.hog.pid());
    assert_eq!(action["outcome"], "done", "{action}");
    let detail = action["detail"].as_str().unwrap_or_default();
    if !is_root() {
        // Run by a user, the leader is theirs too: both get the signal.
        assert!(
            detail.contains(&format!(
                "sent SIGTERM to 2 of 2 members of process group {pgid}"
            )),
            "{detail}"
        );
        return;
    }
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
    let sb = Sandbox::new("group-protected");
    let shared = shared_dir("group-protected");
    let user_hog = hog_copy(shared.path(), "hog-group-protected", Some(NOBODY));
    // Root's `sleep`, under a protected name.
    let root_sshd = sb.path("sshd");
    std::fs::copy("/bin/sleep", &root_sshd).expect("copy sleep");
    let _d = start(
        &sb,
        &format!(
            "[[rule]]\nname = \"group\"\nroot = true\nother_users = true\nfootprint = \"100MiB\"\n\
             actions = [{{ signal = \"SIGTERM\", process_group = true }}]\n[rule.match]\nargv = \"{}\"\n",
            argv_of(&[&user_hog])
        ),
        &[],
    );
    let mut group = Group::start(&root_sshd, &user_hog);
    let (pgid, leader) = (group.pgid(), group.leader.0.id());
    group.hog.expect_line("signal SIGTERM");
    let action = first_action_on(&sb, group.hog.pid());
    let detail = action["detail"].as_str().unwrap_or_default();
    if !system_account() {
        // Run by a user, the leader named sshd is theirs: not protected.
        assert!(detail.contains("2 of 2 members"), "{detail}");
        return;
    }
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
fn cooldown_spaces_repeated_ladders() {
    let sb = Sandbox::new("cooldown");
    let _d = start(
        &sb,
        &rule(
            &sb,
            "footprint = \"100MiB\"\ncooldown = \"2s\"\nactions = [{ signal = \"SIGINT\" }]",
        ),
        &[],
    );
    // Catches SIGINT and keeps its memory: the limit keeps holding, so the
    // ladder restarts once per cooldown, never sooner.
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "max", "--max", "200MiB", "--catch", "INT"],
    );
    let first = parse_signal_line(&hog.expect_line("signal SIGINT")).expect("first");
    let second = parse_signal_line(&hog.expect_line("signal SIGINT")).expect("second");
    let gap = second.2 - first.2;
    // The cooldown runs from sample to sample; see the ladder test for the
    // slack a loaded machine needs.
    assert!((1500..=3200).contains(&gap), "second SIGINT after {gap} ms");
}

#[test]
fn a_reload_that_breaks_the_rules_keeps_the_old_ones() {
    let sb = Sandbox::new("reload");
    let good = rule(
        &sb,
        "footprint = \"100MiB\"\nactions = [{ signal = \"SIGINT\" }]",
    );
    let mut d = start(&sb, &good, &[]);
    let cfg = sb.path("headroom.toml");
    sb.write_config(
        &cfg,
        &rule(
            &sb,
            "footprint = \"100MiB\"\nactions = [{ signal = \"SIGSEGV\" }]",
        ),
    );
    d.signal("HUP");
    let line = d.expect_line("config reload rejected");
    assert!(line.contains("SIGSEGV"), "{line}");
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "max", "--max", "200MiB", "--catch", "INT"],
    );
    hog.expect_line("signal SIGINT");
    let rejected = sb
        .journal()
        .into_iter()
        .find(|e| e["event"] == "config-reloaded")
        .expect("the rejected reload is journaled");
    assert!(
        rejected["error"]
            .as_str()
            .unwrap_or_default()
            .contains("SIGSEGV")
    );
}

#[test]
fn a_process_group_step_reaches_the_hogs_child() {
    let sb = Sandbox::new("group");
    let _d = start(
        &sb,
        &rule(
            &sb,
            "footprint = \"100MiB\"\nactions = [{ signal = \"SIGTERM\", process_group = true }]",
        ),
        &[],
    );
    // The hog leads a group of its own: the test harness's group is also
    // headroom's, which headroom never signals.
    let mut hog =
        Running::hog_in_own_group(&sb.hog, &["--rate", "max", "--max", "200MiB", "--child"]);
    let child_line = hog.expect_line("child pid=");
    let child: u32 = child_line
        .trim_start_matches("child pid=")
        .trim()
        .parse()
        .expect("child pid");
    hog.wait_exit(Duration::from_secs(10))
        .expect("the hog got SIGTERM");
    // The child (a `sleep` in the same group) is gone too.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{child}")).exists()
        && std::fs::read_to_string(format!("/proc/{child}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "child {child} survived"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Forty processes with 1 MiB of arguments each: every one is sampled with
/// the start of its command line, within the cap and visibly cut, so the
/// snapshot stays small (it would otherwise hold 40 MiB of arguments).
#[test]
fn megabytes_of_arguments_are_cut_in_the_snapshot() {
    use headroom::model::{ARGV_MAX_ARGS, ARGV_MAX_BYTES, ARGV_TRUNCATED};
    use headroom::sample::Sampler as _;
    // 16 arguments of 64 KiB (one argument may hold at most 128 KiB).
    let chunk = "y".repeat(64 << 10);
    let children: Vec<support::Reaped> = (0..40)
        .map(|_| {
            support::Reaped(
                Command::new("sh")
                    .args(["-c", "sleep 60; :"])
                    .args(std::iter::repeat_n(&chunk, 16))
                    .stdin(std::process::Stdio::null())
                    .spawn()
                    .expect("spawn sh"),
            )
        })
        .collect();
    // Each child's argument area is set up a moment after its spawn returns.
    for c in &children {
        support::wait_for(Duration::from_secs(10), "the child's cmdline", || {
            let mut f = std::fs::File::open(format!("/proc/{}/cmdline", c.0.id())).ok()?;
            let mut b = [0u8; 2];
            std::io::Read::read(&mut f, &mut b).ok().filter(|&n| n > 0)
        });
    }
    let mut sampler = headroom::sample::linux::LinuxSampler::new("/proc");
    let snap = sampler.sample().expect("a sample");
    for c in &children {
        let p = snap.process(c.0.id()).expect("the child is sampled");
        assert_eq!(
            p.argv[..3],
            ["sh", "-c", "sleep 60; :"],
            "the front is kept"
        );
        let (mark, kept) = p.argv.split_last().expect("arguments");
        assert_eq!(
            mark,
            &format!("{ARGV_TRUNCATED}over {ARGV_MAX_BYTES} bytes]")
        );
        let bytes: usize = kept.iter().map(|a| a.len() + 1).sum();
        assert!(bytes <= ARGV_MAX_BYTES, "{bytes} bytes kept");
        assert!(p.argv.len() <= ARGV_MAX_ARGS);
    }
    let json = serde_json::to_string(&snap).expect("JSON");
    assert!(
        json.len() < 2 << 20,
        "the snapshot takes {} bytes of JSON",
        json.len()
    );
}

// ---------------------------------------------------------------------------
// A rule that holds and does not act says why, and `headroom explain`.
// ---------------------------------------------------------------------------

const ROOT_REASON: &str = "owned by root and the rule has root = false; add root = true to act on \
                           root's processes";

/// The daemon on `config_rest` and its HTTP address.
fn start_with_addr(
    sb: &Sandbox,
    config_rest: &str,
    extra: &[&str],
) -> (Running, std::net::SocketAddr) {
    let cfg = sb.config(config_rest);
    let mut args = vec!["run", "--config", cfg.to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    let mut d = Running::daemon(&args);
    let addr = d.http_addr();
    d.expect_line("first sample:");
    (d, addr)
}

/// The daemon's status of `rule` for `pid`, once it has one whose state
/// starts with `state`.
fn status_of(addr: std::net::SocketAddr, pid: u32, rule: &str, state: &str) -> serde_json::Value {
    support::wait_for(
        Duration::from_secs(20),
        &format!("rule {rule} {state}"),
        || {
            let (code, body) = support::get(&format!("http://{addr}/api/v1/processes/{pid}"));
            if code != 200 {
                return None;
            }
            let row: serde_json::Value = serde_json::from_str(&body).ok()?;
            row["process"]["rules"]
                .as_array()?
                .iter()
                .find(|r| {
                    r["rule"] == rule && r["state"].as_str().is_some_and(|s| s.starts_with(state))
                })
                .cloned()
        },
    )
}

#[test]
fn a_rule_without_root_holds_roots_process_and_says_why_once() {
    let sb = Sandbox::new("held-root");
    let (mut d, addr) = start_with_addr(
        &sb,
        &format!(
            "[[rule]]\nname = \"hog\"\nroot = false\nother_users = true\nfootprint = \"100MiB\"\n\
             actions = [{{ signal = \"SIGINT\" }}]\n[rule.match]\nargv = \"{}\"\n",
            sb.hog_pattern()
        ),
        &[],
    );
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "max", "--max", "200MiB", "--catch", "INT"],
    );
    hog.expect_line("holding");
    if !is_root() {
        // Run by a user, the hog is theirs: root = false does not matter.
        hog.expect_line("signal SIGINT");
        return;
    }
    let status = status_of(addr, hog.pid(), "hog", "crossed");
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
    assert!(actions_on(&sb, hog.pid()).is_empty());
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

/// `headroom explain` with no daemon at the address.
fn explain_alone(pid: u32, config: &Path) -> std::process::Output {
    let nobody_there = format!("127.0.0.1:{}", support::free_port());
    Command::new(HEADROOM)
        .args([
            "explain",
            &pid.to_string(),
            "--address",
            &nobody_there,
            "--config",
        ])
        .arg(config)
        .output()
        .expect("run headroom explain")
}

/// Three rules on the sandbox's hog: one that acts, one that matches
/// nothing of it, one that matches and does not act (root = false, for a
/// root's hog; a dry run for a user's).
fn explain_rules(sb: &Sandbox) -> String {
    let held_back = if is_root() {
        "root = false\nother_users = true"
    } else {
        "dry_run = true"
    };
    format!(
        "[[rule]]\nname = \"acts\"\nroot = true\nother_users = true\nfootprint = \"100MiB\"\n\
         actions = [{{ signal = \"SIGINT\", require_handler = true }}, {{ notify = true, after = \"10m\" }}]\n\
         [rule.match]\nargv = \"{pattern}\"\n\n\
         [[rule]]\nname = \"postgres-only\"\nroot = true\nfootprint = \"100MiB\"\n\
         actions = [{{ signal = \"SIGTERM\" }}]\n[rule.match]\nargv = \"{pattern}\"\nname = \"^postgres$\"\n\n\
         [[rule]]\nname = \"held-back\"\n{held_back}\nfootprint = \"100MiB\"\n\
         actions = [{{ signal = \"SIGTERM\" }}]\n[rule.match]\nargv = \"{pattern}\"\n",
        pattern = sb.hog_pattern()
    )
}

#[test]
fn explain_says_which_rule_matches_which_clause_fails_and_why_a_rule_does_not_act() {
    let sb = Sandbox::new("explain");
    let cfg = sb.config(&explain_rules(&sb));
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "max", "--max", "200MiB", "--catch", "INT"],
    );
    hog.expect_line("holding");
    let out = explain_alone(hog.pid(), &cfg);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let name: String = std::fs::read_to_string(format!("/proc/{}/comm", hog.pid()))
        .expect("comm")
        .trim()
        .to_string();
    assert!(
        text.starts_with(&format!("pid {} ({name}), ", hog.pid())),
        "{text}"
    );
    assert!(
        text.contains("judged here from one sample of this machine"),
        "{text}"
    );
    assert!(
        text.contains("it catches SIGINT: a require_handler step sends it"),
        "{text}"
    );
    // The rule that acts: its clause, its limit against the threshold, the
    // step it takes.
    let rule = |name: &str| -> Vec<&str> {
        text.split("\n\n")
            .find(|b| b.starts_with(&format!("rule \"{name}\"")))
            .unwrap_or_else(|| panic!("no rule {name}: {text}"))
            .lines()
            .collect()
    };
    let acts = rule("acts");
    assert_eq!(acts[0], "rule \"acts\": matches", "{text}");
    assert!(acts[1].starts_with("  argv matches \""), "{text}");
    assert!(
        acts.iter().any(|l| l.starts_with("  limit footprint: ")
            && l.ends_with(", acts at > 100 MiB — crossed")),
        "{text}"
    );
    assert!(acts.contains(&"  holds: yes"), "{text}");
    assert!(
        acts.contains(
            &"  next: step 1 of 2: send SIGINT (only if it catches SIGINT; skipped otherwise), now"
        ),
        "{text}"
    );
    assert!(!acts.iter().any(|l| l.contains("not acting")), "{text}");
    // The rule that does not match: which clause, what it wanted and found.
    assert_eq!(
        rule("postgres-only"),
        [format!(
            "rule \"postgres-only\": does not match: name does not match \"^postgres$\": found \
             \"{name}\""
        )],
        "{text}"
    );
    // The rule that matches and does not act: why.
    let held = rule("held-back");
    if is_root() {
        assert!(
            held.contains(&format!("  not acting: {ROOT_REASON}").as_str()),
            "{text}"
        );
        assert!(held.contains(&"  next: nothing"), "{text}");
    } else {
        assert!(
            held.iter()
                .any(|l| l.starts_with("  dry run: the rule has dry_run = true")),
            "{text}"
        );
    }
}

#[test]
fn explain_asks_the_running_daemon_for_its_statuses() {
    let sb = Sandbox::new("explain-daemon");
    let (_d, addr) = start_with_addr(&sb, &explain_rules(&sb), &[]);
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "max", "--max", "200MiB", "--catch", "INT"],
    );
    hog.expect_line("signal SIGINT");
    status_of(addr, hog.pid(), "acts", "step");
    let out = Command::new(HEADROOM)
        .args([
            "explain",
            &hog.pid().to_string(),
            "--address",
            &addr.to_string(),
        ])
        .output()
        .expect("run headroom explain");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "judged by the headroom daemon at {addr} (running as uid {}, config ",
            headroom::sys::this_process::effective_uid()
        )),
        "{text}"
    );
    // Its ladder is under way: the daemon's state, and its next step.
    assert!(
        text.lines()
            .any(|l| l.starts_with("  daemon: step 1/2: footprint ")),
        "{text}"
    );
    assert!(
        text.contains(
            "  next: step 2 of 2, 10m after step 1: show a desktop notification, when due\n"
        ),
        "{text}"
    );
    if is_root() {
        assert!(
            text.lines()
                .any(|l| l.starts_with("  daemon: crossed, not acting: footprint ")),
            "{text}"
        );
        assert!(
            text.contains(&format!("  not acting: {ROOT_REASON}\n")),
            "{text}"
        );
    }
}

#[test]
fn explain_of_a_pid_that_does_not_exist_exits_1() {
    // Linux pids stay below 2^22 (PID_MAX_LIMIT).
    let out = Command::new(HEADROOM)
        .args([
            "explain",
            "4194305",
            "--address",
            &format!("127.0.0.1:{}", support::free_port()),
        ])
        .output()
        .expect("run headroom explain");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no process with pid 4194305 on this machine"),
        "{err}"
    );
}
