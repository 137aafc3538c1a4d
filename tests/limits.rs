//! Limits and actions end to end: the real daemon, real `headroom-hog`
//! processes that really allocate memory, and the signals they receive.
#![cfg(target_os = "linux")]

mod support;

use std::time::Duration;

use support::hog::{Running, Sandbox, parse_signal_line};

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
    let _d = start(
        &sb,
        &rule(
            &sb,
            "footprint = \"100MiB\"\nactions = [{ signal = \"SIGUSR1\", require_handler = true }]",
        ),
        &[],
    );
    let mut hog = Running::hog(&sb.hog, &["--rate", "max", "--max", "200MiB"]);
    hog.expect_line("holding");
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
    let _d = start(
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
                "footprint = \"100MiB\"\nactions = [{ signal = \"SIGKILL\" }]"
            )
        ),
        &[],
    );
    let mut hog = Running::hog(&sb.hog, &["--rate", "max", "--max", "200MiB"]);
    hog.expect_line("holding");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(hog.alive());
    assert!(sb.journal().iter().all(|e| e["event"] != "action"));
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
