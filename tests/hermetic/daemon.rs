//! The real `headroom` binary as users run it: the daemon starts on the
//! embedded default or a file, samples, reloads on SIGHUP, rejects a broken
//! file on reload and keeps running, and exits 0 on SIGTERM. Also the
//! one-shot commands and their exit codes, the HTTP server as `run` starts it
//! and `headroom status` asking it.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::support;
use crate::support::hog::{Daemon, HEADROOM, Running, stop_cleanly};

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write config");
}

/// `headroom ARGS` run to its end.
fn headroom(args: &[&str]) -> Output {
    Command::new(HEADROOM)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run headroom {args:?}: {e}"))
}

/// `headroom ARGS`, which must exit with `code`: its stderr.
#[track_caller]
fn fails(args: &[&str], code: i32) -> String {
    let out = headroom(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "headroom {args:?}: {err}");
    err
}

/// `headroom ARGS`, which must succeed: its stdout.
#[track_caller]
fn succeeds(args: &[&str]) -> String {
    let out = headroom(args);
    assert!(
        out.status.success(),
        "headroom {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn runs_on_the_embedded_default_and_stops_on_sigterm() {
    let mut d = Running::daemon(&["run"]);
    d.expect_line("config from the embedded default");
    d.expect_line("first sample:");
    d.signal("HUP");
    d.expect_line("nothing to reload");
    stop_cleanly(&mut d, "TERM");
    d.expect_line("headroom stopped");
}

#[test]
fn reloads_on_sighup_and_keeps_the_old_config_when_the_new_one_is_broken() {
    let dir = support::private_dir();
    let cfg = dir.path().join("headroom.toml");
    write(
        &cfg,
        "[daemon]\ninterval = \"100ms\"\nfast_interval = \"50ms\"\n",
    );
    let cfg_arg = cfg.to_str().expect("utf-8 path");
    let mut d = Running::daemon(&["run", "--config", cfg_arg]);
    d.expect_line("every 100ms");
    d.expect_line("first sample:");

    write(
        &cfg,
        "[daemon]\ninterval = \"200ms\"\nfast_interval = \"50ms\"\n",
    );
    d.signal("HUP");
    let line = d.expect_line("config reloaded");
    assert!(line.contains("every 200ms"), "{line}");

    write(
        &cfg,
        "[daemon]\ninterval = \"200ms\"\nfast_interval = \"5 parsecs\"\n",
    );
    d.signal("HUP");
    let line = d.expect_line("config reload rejected");
    assert!(
        line.contains("headroom.toml:3"),
        "error names file and line: {line}"
    );
    assert!(
        line.contains("fast_interval"),
        "error names the key: {line}"
    );
    assert!(line.contains("5 parsecs"), "error names the value: {line}");

    // Still sampling after the rejected reload.
    d.expect_line("sample:");
    d.expect_line("sample:");
    stop_cleanly(&mut d, "TERM");
}

#[test]
fn sigint_stops_the_daemon_cleanly_too() {
    let mut d = Running::daemon(&["run", "--log-format", "json"]);
    let line = d.expect_line("first sample:");
    let parsed: serde_json::Value = serde_json::from_str(&line).expect("JSON log line");
    assert_eq!(parsed["level"], "INFO");
    stop_cleanly(&mut d, "INT");
}

#[test]
fn a_bad_config_at_start_exits_2_and_names_the_file() {
    let dir = support::private_dir();
    let cfg = dir.path().join("bad.toml");
    write(&cfg, "[daemon]\nintervall = \"1s\"\n");
    let err = fails(&["run", "--config", cfg.to_str().expect("utf-8")], 2);
    assert!(err.contains("bad.toml:2"), "{err}");
    assert!(err.contains("intervall"), "{err}");
}

#[test]
fn a_missing_config_exits_2() {
    let err = fails(&["run", "--config", "/nonexistent/headroom.toml"], 2);
    assert!(err.contains("/nonexistent/headroom.toml"), "{err}");
}

#[test]
fn bad_usage_exits_2() {
    fails(&["snapshot", "--bogus"], 2);
}

#[test]
fn the_printed_default_config_checks_clean() {
    let printed = succeeds(&["print-config"]);
    let dir = support::private_dir();
    let cfg = dir.path().join("default.toml");
    write(&cfg, &printed);
    let text = succeeds(&["check-config", cfg.to_str().expect("utf-8")]);
    assert!(text.contains("interval"), "{text}");
}

#[test]
fn check_config_rejects_an_invalid_file_with_exit_2() {
    let dir = support::private_dir();
    let cfg = dir.path().join("broken.toml");
    write(&cfg, "[daemon]\ninterval = \"0s\"\n");
    let err = fails(&["check-config", cfg.to_str().expect("utf-8")], 2);
    assert!(err.contains("broken.toml:2"), "{err}");
    assert!(err.contains("daemon.interval"), "{err}");
}

#[test]
fn check_config_warns_that_a_file_without_rules_replaces_the_default_rules() {
    let dir = support::private_dir();
    let cfg = dir.path().join("no-rules.toml");
    write(&cfg, "[daemon]\ninterval = \"2s\"\n");
    let out = headroom(&["check-config", cfg.to_str().expect("utf-8")]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.starts_with(&format!(
            "# {}: valid, but it has no rules: headroom will act on nothing.",
            cfg.display()
        )),
        "{stdout}"
    );
    assert!(!stdout.contains(": valid. Effective"), "{stdout}");
    for name in [
        "pressure-warning",
        "ml-process-over-half-ram",
        "notebook-runaway",
    ] {
        assert!(stderr.contains(&format!("\"{name}\"")), "{name}: {stderr}");
    }
    assert!(stderr.starts_with("headroom: warning: "), "{stderr}");
    assert!(
        stderr.contains("replaces the embedded default's 3 rules"),
        "{stderr}"
    );
    assert!(stderr.contains("`headroom print-config`"), "{stderr}");

    // A file with a rule of its own is valid without a warning.
    write(
        &cfg,
        "[[rule]]\nname = \"cap\"\nfootprint = \"8GiB\"\nactions = [{ signal = \"SIGTERM\" }]\n",
    );
    let out = headroom(&["check-config", cfg.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(String::from_utf8_lossy(&out.stdout).contains(": valid. Effective config:"));
}

#[test]
fn snapshot_json_lists_this_test_process() {
    let snap: headroom::model::Snapshot =
        serde_json::from_str(&succeeds(&["snapshot", "--json"])).expect("snapshot JSON");
    let me = snap
        .process(std::process::id())
        .expect("the test process is in the snapshot");
    assert!(me.footprint > 0);
    assert!(snap.system.total > 0);
    assert!(snap.system.available <= snap.system.total);
}

#[test]
fn snapshot_table_shows_memory_and_the_largest_processes() {
    let text = succeeds(&["snapshot", "--top", "5"]);
    assert!(text.starts_with("memory "), "{text}");
    assert!(text.contains("FOOTPRINT"), "{text}");
    let rows = text
        .lines()
        .skip_while(|l| !l.contains("FOOTPRINT"))
        .skip(1)
        .take_while(|l| !l.starts_with('…') && !l.starts_with('~'))
        // A job's line under its root's row is no row of its own.
        .filter(|l| !l.trim_start().starts_with("job:"))
        .count();
    assert_eq!(rows, 5, "{text}");
}

#[test]
fn record_writes_a_trace_that_replays() {
    let dir = support::private_dir();
    let trace = dir.path().join("t.jsonl");
    succeeds(&[
        "record",
        "--out",
        trace.to_str().expect("utf-8"),
        "--duration",
        "1s",
        "--interval",
        "250ms",
    ]);
    let snaps = headroom::sample::replay::read_trace(&trace).expect("trace reads back");
    assert!((4..=5).contains(&snaps.len()), "{} snapshots", snaps.len());
    assert!(snaps.windows(2).all(|w| w[0].taken_at < w[1].taken_at));
}

#[test]
fn record_says_how_far_it_is_and_keeps_an_existing_trace_unless_forced() {
    let dir = support::private_dir();
    let trace = dir.path().join("t.jsonl");
    let path = trace.to_str().expect("utf-8");
    let once = ["record", "--out", path, "--duration", "0s"];
    let out = headroom(&once);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.starts_with(&format!(
            "headroom: recording to {path} for 0s, a snapshot every 1s\n"
        )),
        "{err}"
    );
    assert!(
        err.ends_with(&format!("headroom: wrote 1 snapshot to {path}\n")),
        "{err}"
    );
    let recorded = std::fs::read(&trace).expect("the trace");

    // A second recording to the same file is refused, and the trace kept.
    let err = fails(&once, 2);
    assert!(
        err.contains(&format!(
            "{path} already exists; pass --force to replace it"
        )),
        "{err}"
    );
    assert_eq!(std::fs::read(&trace).expect("the trace"), recorded);

    // With --force it is replaced.
    let out = headroom(&[
        "record",
        "--out",
        path,
        "--duration",
        "500ms",
        "--interval",
        "250ms",
        "--force",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("wrote 3 snapshots to {path}")),
        "{err}"
    );
    let snaps = headroom::sample::replay::read_trace(&trace).expect("trace reads back");
    assert_eq!(snaps.len(), 3);
}

#[test]
fn sigterm_stops_the_daemon_while_an_event_stream_is_open() {
    let d = Daemon::run(&["run"]);
    let url = d.url("/api/v1/stream");
    let reader = std::thread::spawn(move || {
        let mut res = ureq::get(&url).call().expect("the stream answers");
        let mut body = String::new();
        let _ = std::io::Read::read_to_string(&mut res.body_mut().as_reader(), &mut body);
        body
    });
    std::thread::sleep(Duration::from_millis(1500));
    d.stop_with("TERM");
    let body = reader.join().expect("reader thread");
    assert!(body.contains("event: sample\ndata: {"), "{body}");
}

#[test]
fn the_daemon_says_where_its_status_page_is_and_serves_it() {
    let d = Daemon::run(&["run"]);
    let text = succeeds(&["status", "--address", &d.addr.to_string(), "--top", "3"]);
    assert!(text.starts_with("memory "), "{text}");
    assert!(text.contains("FOOTPRINT"), "{text}");
    d.stop_with("TERM");
}

#[test]
fn metrics_count_how_late_the_loop_woke_for_each_scheduled_sample() {
    let dir = support::private_dir();
    let d = Daemon::start(
        dir.path(),
        &format!(
            "[daemon]\ninterval = \"100ms\"\njournal = \"{}\"\n",
            dir.path().join("journal.jsonl").display()
        ),
    );
    std::thread::sleep(Duration::from_millis(800));
    let (code, body) = d.get("/metrics");
    assert_eq!(code, 200, "/metrics answers: {body}");
    let value = |name: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{body}"))
    };
    // Every sample after the first was woken by the timer (the first, at
    // once, too): as many wakes as samples, give or take the one in flight.
    let wakes = value("headroom_wake_lateness_seconds_count");
    let samples = value("headroom_samples_total");
    assert!(samples >= 4.0, "{samples} samples in 0.8 s at 100 ms");
    assert!(
        (wakes - samples).abs() <= 1.0,
        "{wakes} wakes, {samples} samples"
    );
    d.stop_with("TERM");
}

#[test]
fn a_port_in_use_holds_back_http_not_sampling_and_is_listened_on_once_free() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let dir = support::private_dir();
    let cfg = dir.path().join("headroom.toml");
    write(
        &cfg,
        &format!(
            "[daemon]\ninterval = \"200ms\"\njournal = \"{}\"\n",
            dir.path().join("journal.jsonl").display()
        ),
    );
    let mut d = Running::daemon(&[
        "run",
        "--listen",
        &addr,
        "--config",
        cfg.to_str().expect("utf-8 path"),
    ]);
    let said = d.expect_line(&format!("cannot listen on {addr}"));
    assert!(said.contains("already in use"), "{said}");
    assert!(said.contains("Sampling and acting go on"), "{said}");
    d.expect_line("first sample:");
    drop(taken);
    d.expect_line(&format!("status page: http://{addr}/"));
    let (code, body) = support::get(&format!("http://{addr}/healthz"));
    assert_eq!(code, 200, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert!(
        health["http_bind_failures"].as_u64() >= Some(1),
        "/healthz counts the failed tries: {body}"
    );
    assert!(
        health["http_last_bind_error"]
            .as_str()
            .is_some_and(|e| e.contains("already in use")),
        "{body}"
    );
    stop_cleanly(&mut d, "TERM");
}

#[test]
fn healthz_of_a_daemon_that_listened_at_once_counts_no_failed_tries() {
    let d = Daemon::run(&["run"]);
    let (code, body) = d.get("/healthz");
    assert_eq!(code, 200, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(health["http_bind_failures"], 0, "{body}");
    assert!(health["http_listening_since"].is_u64(), "{body}");
    assert!(health["http_last_bind_error"].is_null(), "{body}");
    d.stop_with("TERM");
}

#[test]
fn a_remote_listen_address_needs_allow_remote() {
    let err = fails(&["run", "--listen", "0.0.0.0:0"], 2);
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(err.contains("--allow-remote"), "{err}");
}

#[test]
fn status_without_a_daemon_exits_1_and_says_so() {
    let free = format!("127.0.0.1:{}", support::free_port());
    let err = fails(&["status", "--address", &free], 1);
    assert!(
        err.contains(&format!("no headroom daemon answers at {free}")),
        "{err}"
    );
}
