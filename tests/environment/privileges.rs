//! Privilege and config security of the real daemon, as root. `headroom
//! run` refuses a config file, or a directory above it, that a user other
//! than root can change, and hook programs likewise, with exit 2 and a
//! message that says how to fix the permissions; a SIGHUP reload to such a
//! file is rejected and the daemon runs on. Run as the unprivileged system
//! user `headroom-test` (created here with `useradd`, switched to with
//! `setpriv`), the daemon takes the same files: it can signal only its
//! user's processes.
//!
//! Every test needs root and fails without it. Linux only: the
//! unprivileged user comes from `useradd` and `setpriv`.
#![cfg(target_os = "linux")]

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::support;
use crate::support::hog::{Daemon, HEADROOM, Running};
use crate::support::{chmod, need_root, need_tools, private_dir};

/// The unprivileged account the daemon runs as here.
const USER: &str = "headroom-test";

use crate::support::privileges::{headroom, stderr, write_config};

/// A hook program: a shell script that exits 0.
fn write_hook(path: &Path, mode: u32) {
    std::fs::write(path, "#!/bin/sh\nexit 0\n").expect("write hook");
    chmod(path, mode);
}

fn hook_rule(hook: &Path) -> String {
    format!(
        "[[rule]]\nname = \"save\"\nfootprint = \"1TiB\"\nactions = [{{ hook = [\"{}\"] }}]\n",
        hook.display()
    )
}

/// Run the daemon on `config` and say whether it started (its first
/// sample); if it did not, its exit code and log.
fn starts(config: &Path) -> Result<(), (Option<i32>, String)> {
    let mut d = Running::daemon(&["run", "--config", config.to_str().expect("utf-8")]);
    if d.wait_line("first sample:", Duration::from_secs(20))
        .is_some()
    {
        d.signal("TERM");
        return Ok(());
    }
    let code = d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code());
    Err((code, d.seen.join("\n")))
}

/// The root daemon refuses `config` with exit 2 and a message holding
/// every one of `needles`.
fn check_refusal(config: &Path, needles: &[&str]) {
    let out = headroom(&["run", "--config", config.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
}

#[test]
fn a_config_file_others_can_write_is_refused() {
    need_root();
    let dir = private_dir();
    let config = dir.path().join("headroom.toml");
    write_config(&config, dir.path(), "");
    chmod(&config, 0o666);
    let shown = config.display().to_string();
    check_refusal(
        &config,
        &[
            &format!("{shown}: refusing to run as root with this config"),
            "writable by users other than root (mode 0666)",
            &format!("chown root:root {shown} && chmod go-w {shown}"),
        ],
    );
    // Fixed as the message says, it runs.
    chmod(&config, 0o644);
    assert_eq!(starts(&config), Ok(()));
}

#[test]
fn a_group_writable_directory_above_the_config_is_refused() {
    need_root();
    let dir = private_dir();
    let conf_dir = dir.path().join("etc");
    std::fs::create_dir(&conf_dir).expect("mkdir");
    chmod(&conf_dir, 0o775);
    let config = conf_dir.join("headroom.toml");
    write_config(&config, dir.path(), "");
    chmod(&config, 0o600);
    let shown = conf_dir.display().to_string();
    check_refusal(
        &config,
        &[
            &format!("{shown} is writable by users other than root (mode 0775)"),
            &format!("chmod go-w {shown}"),
        ],
    );
}

#[test]
fn a_config_under_the_shared_tmp_is_refused() {
    need_root();
    // tempfile's default place: /tmp (sticky, writable by everyone).
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("headroom.toml");
    write_config(&config, dir.path(), "");
    chmod(&config, 0o600);
    let tmp = std::env::temp_dir();
    let tmp_is_shared = std::fs::metadata(&tmp).expect("stat tmp").mode() & 0o1002 == 0o1002;
    assert!(
        tmp_is_shared,
        "{} is expected to be sticky and open",
        tmp.display()
    );
    check_refusal(
        &config,
        &[
            "is a shared directory that every user can write to (mode 1777)",
            "keep the file in a directory only root can write, such as /etc/headroom/",
        ],
    );
}

#[test]
fn a_config_owned_by_another_user_is_refused() {
    need_root();
    let dir = private_dir();
    let config = dir.path().join("headroom.toml");
    write_config(&config, dir.path(), "");
    chmod(&config, 0o644);
    std::os::unix::fs::chown(&config, Some(65534), None).expect("chown");
    check_refusal(
        &config,
        &[
            "is owned by uid 65534, not by root",
            &format!("chown root:root {}", config.display()),
        ],
    );
}

#[test]
fn a_link_into_an_open_directory_is_refused() {
    need_root();
    let dir = private_dir();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    chmod(&open, 0o777);
    let real = open.join("real.toml");
    write_config(&real, dir.path(), "");
    chmod(&real, 0o600);
    let link = dir.path().join("headroom.toml");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    check_refusal(
        &link,
        &[&format!(
            "{} is writable by users other than root (mode 0777)",
            open.display()
        )],
    );
}

#[test]
fn a_hook_others_can_write_is_refused() {
    need_root();
    let dir = private_dir();
    let hook = dir.path().join("save.sh");
    write_hook(&hook, 0o777);
    let config = dir.path().join("headroom.toml");
    write_config(&config, dir.path(), &hook_rule(&hook));
    check_refusal(
        &config,
        &[
            "rule[0] (\"save\").actions[0].hook: refusing to run hook",
            &format!(
                "{} is writable by users other than root (mode 0777)",
                hook.display()
            ),
            "chmod go-w",
        ],
    );
    chmod(&hook, 0o755);
    assert_eq!(starts(&config), Ok(()));
}

#[test]
fn a_hook_in_an_open_directory_is_refused() {
    need_root();
    let dir = private_dir();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    chmod(&bin, 0o1777);
    let hook = bin.join("save.sh");
    write_hook(&hook, 0o755);
    let config = dir.path().join("headroom.toml");
    write_config(&config, dir.path(), &hook_rule(&hook));
    check_refusal(
        &config,
        &[
            &format!("{} is a shared directory", bin.display()),
            "such as /usr/local/libexec/headroom/",
        ],
    );
}

#[test]
fn a_reload_to_a_file_others_can_write_is_rejected_and_the_daemon_runs_on() {
    need_root();
    let dir = private_dir();
    let config = dir.path().join("headroom.toml");
    write_config(&config, dir.path(), "");
    chmod(&config, 0o644);
    let mut d = Daemon::run(&["run", "--config", config.to_str().expect("utf-8")]);
    let addr = d.addr;
    chmod(&config, 0o666);
    d.signal("HUP");
    let line = d.expect_line("config reload rejected");
    assert!(line.contains("writable by users other than root"), "{line}");
    assert!(d.alive(), "the daemon runs on");
    support::wait_for(Duration::from_secs(10), "/healthz 200", || {
        (support::get(&format!("http://{addr}/healthz")).0 == 200).then_some(())
    });
    d.signal("TERM");
    assert_eq!(
        d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(0)
    );
    let journal = std::fs::read_to_string(dir.path().join("journal.jsonl")).expect("journal");
    let reload = journal
        .lines()
        .find(|l| l.contains("\"config-reloaded\""))
        .expect("a config-reloaded event");
    assert!(
        reload.contains("writable by users other than root"),
        "{reload}"
    );
}

/// The unprivileged account, created once (idempotently).
fn unprivileged_user() -> &'static str {
    static CREATED: OnceLock<()> = OnceLock::new();
    CREATED.get_or_init(|| {
        need_tools(&[("useradd", "passwd"), ("setpriv", "util-linux")]);
        let exists = Command::new("id")
            .arg(USER)
            .output()
            .is_ok_and(|o| o.status.success());
        if !exists {
            let out = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    USER,
                ])
                .output()
                .expect("useradd (Debian package passwd; scripts/test.sh installs it)");
            // 9: created meanwhile by a test binary running beside this one.
            assert!(
                out.status.success() || out.status.code() == Some(9),
                "useradd {USER}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    });
    USER
}

/// `headroom ARGS` as the unprivileged user, through `setpriv`
/// (util-linux), which execs the daemon in its own place, so that signals
/// and the exit status are the daemon's own.
fn as_user(args: &[&str]) -> Command {
    let user = unprivileged_user();
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={user}"),
        &format!("--regid={user}"),
        "--init-groups",
        "--",
        HEADROOM,
    ])
    .args(args);
    c
}

/// A directory the unprivileged user owns, open to everyone (0777), inside
/// a world-readable one: exactly what root refuses.
fn open_dir_for_user() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    chmod(dir.path(), 0o755);
    let open = dir.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    chmod(&open, 0o777);
    (dir, open)
}

#[test]
fn an_unprivileged_daemon_takes_a_config_anyone_can_write() {
    need_root();
    let (_dir, open) = open_dir_for_user();
    let config = open.join("headroom.toml");
    let hook = open.join("save.sh");
    write_hook(&hook, 0o777);
    write_config(&config, &open, &hook_rule(&hook));
    chmod(&config, 0o666);
    let mut d = Daemon::run_command(as_user(&[
        "run",
        "--config",
        config.to_str().expect("utf-8"),
    ]));
    let addr = d.addr;
    support::wait_for(Duration::from_secs(10), "/healthz 200", || {
        (support::get(&format!("http://{addr}/healthz")).0 == 200).then_some(())
    });
    // The user's journal: created private, owned by the user.
    let journal = open.join("journal.jsonl");
    support::wait_for(Duration::from_secs(10), "the journal", || {
        journal.exists().then_some(())
    });
    let meta = std::fs::metadata(&journal).expect("journal");
    assert_eq!(meta.mode() & 0o7777, 0o600);
    assert_ne!(meta.uid(), 0, "written by the unprivileged user");
    d.signal("TERM");
    assert_eq!(
        d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(0)
    );
}

#[test]
fn an_unprivileged_daemon_still_refuses_a_relative_hook() {
    need_root();
    let (_dir, open) = open_dir_for_user();
    let config = open.join("headroom.toml");
    write_config(
        &config,
        &open,
        "[[rule]]\nname = \"save\"\nfootprint = \"1TiB\"\nactions = [{ hook = [\"save.sh\"] }]\n",
    );
    chmod(&config, 0o644);
    let out = as_user(&[
        "run",
        "--listen",
        "127.0.0.1:0",
        "--config",
        config.to_str().expect("utf-8"),
    ])
    .output()
    .expect("run as the user");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("absolute path"), "{}", stderr(&out));
}
