//! The live views without a terminal: `headroom status --watch` against a
//! real daemon (refreshes, a refresh that fails, Ctrl-C), and what
//! `headroom top` says where it has no terminal or a bad interval. Its
//! drawing in a real terminal is in the environment tier (`top.rs`, tmux).

use std::process::Command;
use std::time::Duration;

use crate::support::hog::{HEADROOM, Running, Sandbox};

/// `headroom ARGS` with stdout and stderr on one captured stream (the
/// shell `exec`s it, so signals reach headroom itself).
fn watched(args: &str) -> Running {
    let mut command = Command::new("sh");
    command.args(["-c", &format!("exec {HEADROOM} {args} 2>&1")]);
    Running::hog_command(command)
}

#[test]
fn status_watch_refreshes_outlives_a_failed_refresh_and_exits_0_on_sigint() {
    let sb = Sandbox::new("watch");
    let daemon = sb.start("", &[]);
    let addr = daemon.addr;
    let mut watch = watched(&format!(
        "status --watch --interval 200ms --address {addr} --top 3"
    ));
    let heading = format!("every 200ms: headroom status, daemon at {addr}");
    for _ in 0..2 {
        watch.expect_line(&heading);
        watch.expect_line("memory ");
        watch.expect_line("FOOTPRINT");
    }
    daemon.stop_with("TERM");
    watch.expect_line(&format!("headroom: no headroom daemon answers at {addr}"));
    // And on it goes.
    watch.expect_line(&heading);
    assert!(watch.alive(), "status --watch ended after a failed refresh");
    watch.signal("INT");
    let status = watch
        .wait_exit(Duration::from_secs(10))
        .expect("status --watch did not stop on SIGINT");
    assert_eq!(status.code(), Some(0), "{}", watch.seen.join("\n"));
    // Not a terminal: no screen clearing, blocks one after another.
    assert!(
        !watch.seen.iter().any(|l| l.contains('\x1b')),
        "{}",
        watch.seen.join("\n")
    );
}

#[test]
fn status_watch_json_prints_one_snapshot_a_line() {
    let sb = Sandbox::new("watch-json");
    let daemon = sb.start("", &[]);
    let mut watch = watched(&format!(
        "status --watch --json --interval 100ms --address {}",
        daemon.addr
    ));
    let mut taken = Vec::new();
    for _ in 0..3 {
        let line = watch.expect_line("taken_at");
        let snap: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        taken.push(snap["taken_at"].as_u64().expect("taken_at"));
    }
    assert!(taken.windows(2).all(|w| w[0] <= w[1]), "{taken:?}");
    watch.signal("TERM");
    let status = watch.wait_exit(Duration::from_secs(10)).expect("exit");
    assert_eq!(status.code(), Some(0));
    // Every line is a JSON document: no headings in JSON Lines.
    assert!(
        watch
            .seen
            .iter()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{}",
        watch.seen.join("\n")
    );
    daemon.stop_with("TERM");
}

fn headroom(args: &[&str]) -> std::process::Output {
    Command::new(HEADROOM)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run headroom")
}

#[test]
fn an_interval_without_watch_or_too_short_is_a_usage_error() {
    let out = headroom(&["status", "--interval", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--watch"));
    for args in [
        &["status", "--watch", "--interval", "10ms"][..],
        &["top", "--interval", "10ms"][..],
    ] {
        let out = headroom(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--interval 10ms is too short"), "{err}");
    }
}

#[test]
fn top_without_a_terminal_says_what_to_use_instead() {
    // --local: no daemon is asked, whatever listens on the default port.
    let out = headroom(&["top", "--local"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("headroom top needs a terminal") && err.contains("headroom status --watch"),
        "{err}"
    );
}
