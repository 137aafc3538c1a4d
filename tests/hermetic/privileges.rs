//! Privilege and config security of the real daemon that hold for whoever
//! runs it: a relative hook is refused, the journal's directory and file are
//! created 0700 and 0600, a non-loopback `--listen` needs the explicit
//! setting, and no endpoint changes state. What only root's daemon refuses
//! (files other users can change) and the daemon run as another user are in
//! the environment tier (`tests/environment/privileges.rs`).
#![cfg(target_os = "linux")]

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support;
use crate::support::hog::{Daemon, HEADROOM};
use crate::support::private_dir;

use crate::support::privileges::{headroom, stderr, write_config};

#[test]
fn a_relative_hook_is_refused_for_everyone() {
    let dir = private_dir();
    let config = dir.path().join("headroom.toml");
    write_config(
        &config,
        dir.path(),
        "[[rule]]\nname = \"save\"\nfootprint = \"1TiB\"\nactions = [{ hook = [\"save.sh\"] }]\n",
    );
    let out = headroom(&["run", "--config", config.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "rule[0] (\"save\").actions[0].hook: a hook is a list whose first item is an absolute path"
        ),
        "{}",
        stderr(&out)
    );
}

/// Modes (without file type) of the journal's new directory and file.
fn journal_modes(journal: &Path) -> (u32, u32) {
    let dir_mode = std::fs::metadata(journal.parent().expect("dir"))
        .expect("dir")
        .mode()
        & 0o7777;
    let file_mode = std::fs::metadata(journal).expect("journal").mode() & 0o7777;
    (dir_mode, file_mode)
}

#[test]
fn the_journal_directory_and_file_are_created_private() {
    let dir = private_dir();
    let journal = dir.path().join("state/headroom/journal.jsonl");
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval = \"100ms\"\njournal = \"{}\"\n",
            journal.display()
        ),
    )
    .expect("write config");
    let mut d = Daemon::run(&["run", "--config", config.to_str().expect("utf-8")]);
    d.signal("TERM");
    d.wait_exit(Duration::from_secs(10));
    assert_eq!(journal_modes(&journal), (0o700, 0o600));
    let parent = dir.path().join("state");
    assert_eq!(
        std::fs::metadata(&parent).expect("state").mode() & 0o7777,
        0o700,
        "directories created on the way are private too"
    );
}

#[test]
fn a_non_loopback_listen_needs_the_explicit_setting() {
    let out = Command::new(HEADROOM)
        .args(["run", "--listen", "0.0.0.0:0"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--allow-remote"), "{}", stderr(&out));
    let dir = private_dir();
    let config = dir.path().join("headroom.toml");
    std::fs::write(&config, "[http]\nlisten = \"[::]:9717\"\n").expect("write");
    let out = Command::new(HEADROOM)
        .args(["run", "--config", config.to_str().expect("utf-8")])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("http.listen: [::]:9717 is not a loopback address"),
        "{}",
        stderr(&out)
    );
    // With the setting, the same address is accepted.
    std::fs::write(
        &config,
        "[http]\nlisten = \"[::]:9717\"\nallow_remote = true\n",
    )
    .expect("write");
    let out = Command::new(HEADROOM)
        .args(["check-config", config.to_str().expect("utf-8")])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn no_endpoint_changes_state() {
    let dir = private_dir();
    let config = dir.path().join("headroom.toml");
    write_config(&config, dir.path(), "");
    let mut d = Daemon::run(&["run", "--config", config.to_str().expect("utf-8")]);
    let addr = d.addr;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let (_, config_before) = support::get(&format!("http://{addr}/api/v1/config"));
    for path in [
        "/",
        "/metrics",
        "/healthz",
        "/api/v1/snapshot",
        "/api/v1/processes",
        "/api/v1/processes/1",
        "/api/v1/history",
        "/api/v1/events",
        "/api/v1/config",
        "/api/v1/stream",
    ] {
        let url = format!("http://{addr}{path}");
        let body = "[daemon]\ndry_run = true\n";
        let answers = [
            ("POST", agent.post(&url).send(body)),
            ("PUT", agent.put(&url).send(body)),
            ("PATCH", agent.patch(&url).send(body)),
            ("DELETE", agent.delete(&url).call()),
        ];
        for (method, answer) in answers {
            let status = answer.expect("an answer").status().as_u16();
            assert_eq!(status, 405, "{method} {path}");
        }
    }
    let (_, config_after) = support::get(&format!("http://{addr}/api/v1/config"));
    assert_eq!(config_before, config_after);
    assert!(d.alive());
}
