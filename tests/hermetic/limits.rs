//! Limits and actions end to end: the real daemon, real `headroom-hog`
//! processes that really allocate memory, and the signals they receive;
//! `headroom explain` on them. The hogs are the tests' user's own, so every
//! test here holds for whoever runs it. Protection of root's processes
//! against a user's, which needs root and a second user, is in the
//! environment tier (`tests/environment/limits.rs`).
#![cfg(target_os = "linux")]

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support;
use crate::support::hog::{
    HEADROOM, ROOT_REASON, Running, Sandbox, parse_signal_line, rule_status,
};

const MIB: u64 = 1 << 20;

fn event_count(sb: &Sandbox, event: &str, field: &str, value: &str) -> usize {
    sb.journal()
        .iter()
        .filter(|e| e["event"] == event && e[field] == value)
        .count()
}

#[test]
fn an_absolute_limit_sends_sigint() {
    let (sb, _d) = Sandbox::with_rule(
        "absolute",
        "footprint = \"300MiB\"\nactions = [{ signal = \"SIGINT\" }]",
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
    let (sb, _d) = Sandbox::with_rule(
        "ladder",
        "footprint = \"200MiB\"\nactions = [{ signal = \"SIGINT\" }, { signal = \"SIGTERM\", after = \"1s\" }, { signal = \"SIGKILL\", after = \"1s\" }]",
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
    let (sb, mut d) = Sandbox::with_rule(
        "usr1-skip",
        "footprint = \"100MiB\"\nactions = [{ signal = \"SIGUSR1\", require_handler = true }]",
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
    let (sb, _d) = Sandbox::with_rule(
        "usr1-deliver",
        "footprint = \"100MiB\"\nactions = [{ signal = \"SIGUSR1\", require_handler = true }]",
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
    let d = sb.start(
        &sb.rule("footprint = \"100MiB\"\nactions = [{ signal = \"SIGTERM\" }]"),
        &["--dry-run"],
    );
    let addr = d.addr;
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
    let status = rule_status(addr, hog.pid(), "hog", "done, dry run");
    assert!(
        status["not_acting"].as_str().is_some_and(|n| n.starts_with(
            "dry run: headroom runs with dry_run (daemon.dry_run = true or --dry-run)"
        )),
        "{status}"
    );
}

#[test]
fn cooldown_spaces_repeated_ladders() {
    let (sb, _d) = Sandbox::with_rule(
        "cooldown",
        "footprint = \"100MiB\"\ncooldown = \"2s\"\nactions = [{ signal = \"SIGINT\" }]",
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
    let good = sb.rule("footprint = \"100MiB\"\nactions = [{ signal = \"SIGINT\" }]");
    let mut d = sb.start(&good, &[]);
    let cfg = sb.path("headroom.toml");
    sb.write_config(
        &cfg,
        &sb.rule("footprint = \"100MiB\"\nactions = [{ signal = \"SIGSEGV\" }]"),
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
    let (sb, _d) = Sandbox::with_rule(
        "group",
        "footprint = \"100MiB\"\nactions = [{ signal = \"SIGTERM\", process_group = true }]",
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
                Command::new("/bin/sh")
                    .arg0("sh")
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
    let mut sampler = headroom::os::linux::LinuxSampler::new("/proc");
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

fn is_root() -> bool {
    headroom::os::this_process::effective_uid() == 0
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
    let d = sb.start(&explain_rules(&sb), &[]);
    let addr = d.addr;
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "max", "--max", "200MiB", "--catch", "INT"],
    );
    hog.expect_line("signal SIGINT");
    rule_status(addr, hog.pid(), "acts", "step");
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
            headroom::os::this_process::effective_uid()
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
