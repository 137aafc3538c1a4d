//! Machine-wide rules and light ticks end to end: the real daemon with its
//! system probe, real `headroom-hog` processes that really allocate memory,
//! and the signals they receive.
#![cfg(target_os = "linux")]

use crate::support;

use std::path::Path;
use std::time::Duration;

use crate::support::hog::{Daemon, Running, Sandbox, parse_signal_line};

const MIB: u64 = 1 << 20;

/// `MemAvailable` now, bytes.
fn available_now() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").expect("read /proc/meminfo");
    text.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .expect("MemAvailable in /proc/meminfo")
        * 1024
}

/// A config at the daemon's default 1 s interval (so the probe, not the
/// tick, does the fast looking), journaling into the sandbox.
fn config(sb: &Sandbox, rules: &str) -> std::path::PathBuf {
    let path = sb.path("headroom.toml");
    let text = format!(
        "[daemon]\ninterval = \"1s\"\nfast_interval = \"250ms\"\njournal = \"{}\"\n\n{rules}",
        sb.path("journal.jsonl").display()
    );
    std::fs::write(&path, text).expect("write config");
    path
}

fn start(cfg: &Path) -> Daemon {
    Daemon::run(&["run", "--config", cfg.to_str().expect("utf-8")])
}

#[test]
fn an_available_below_rule_signals_the_hog_when_memory_runs_low() {
    let sb = Sandbox::new("available");
    // 512 MiB below what is available now (more than any test beside it
    // takes): the hog's growth crosses it, even if the tests and builds
    // beside it let go of up to 2.5 GiB meanwhile.
    let threshold = available_now().saturating_sub(512 * MIB) / MIB;
    let cfg = config(
        &sb,
        &format!(
            "[[rule]]\nname = \"low-memory\"\nselect = \"largest\"\nroot = true\nother_users = true\n\
             actions = [{{ signal = \"SIGINT\" }}]\n[rule.match]\nargv = \"{}\"\n\
             [rule.when]\navailable_below = \"{threshold}MiB\"\n",
            sb.hog_pattern()
        ),
    );
    let mut d = start(&cfg);
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "256MiB/s", "--max", "3GiB", "--catch", "INT"],
    );
    let line = hog.expect_line("signal SIGINT");
    let (_, footprint, _) = parse_signal_line(&line).expect("a signal line");
    // What the hog had allocated when the signal came: the figure reported.
    assert!(footprint > 0, "{line}");
    assert!(
        footprint < 3 << 30,
        "signalled only once fully grown: {line}"
    );
    let crossed = d.expect_line("crossed its limit");
    assert!(crossed.contains("available"), "{crossed}");
    std::thread::sleep(Duration::from_millis(300));
    let events = sb.journal();
    let action = events
        .iter()
        .find(|e| e["event"] == "action")
        .expect("an action event");
    assert_eq!(action["action"], "SIGINT");
    assert_eq!(action["process"]["pid"], hog.pid());
}

/// More processes larger than the hog than a light tick re-reads for being
/// large, so that only being matched by the rule keeps the hog fresh.
fn decoys(sb: &Sandbox) -> Vec<Running> {
    let decoy = sb.path("decoy");
    std::os::unix::fs::symlink(support::hog::hog_path(), &decoy).expect("link the decoy");
    let mut decoys: Vec<Running> = (0..=headroom::os::linux::TOP_EXACT)
        .map(|_| Running::hog(&decoy, &["--rate", "max", "--max", "8MiB"]))
        .collect();
    for d in &mut decoys {
        d.expect_line("holding");
    }
    decoys
}

/// A footprint rule on this sandbox's hog.
fn footprint_rule(sb: &Sandbox) -> std::path::PathBuf {
    config(
        sb,
        &format!(
            "[[rule]]\nname = \"hog\"\nfootprint = \"16MiB\"\nroot = true\nother_users = true\n\
             actions = [{{ signal = \"SIGINT\" }}]\n[rule.match]\nargv = \"{}\"\n",
            sb.hog_pattern()
        ),
    )
}

/// The hog, growing 8 MiB/s up to 256 MiB once continued, held still.
fn stopped_hog(sb: &Sandbox) -> Running {
    let mut hog = Running::hog(
        &sb.hog,
        &["--rate", "8MiB/s", "--max", "256MiB", "--catch", "INT"],
    );
    hog.expect_line("ready pid=");
    support::signal(hog.pid(), "STOP");
    hog
}

/// Continue the hog, and check that its crossing was seen on a light tick
/// and signalled.
fn crosses_on_a_light_tick(d: &mut Running, hog: &mut Running) {
    support::signal(hog.pid(), "CONT");
    let line = hog.expect_line("signal SIGINT");
    let (_, footprint, _) = parse_signal_line(&line).expect("a signal line");
    assert!(footprint > 0, "{line}");
    let crossed = d.expect_line("crossed its limit");
    assert!(crossed.contains(&format!("pid {}", hog.pid())), "{crossed}");
    let at = d.seen.len() - 1;
    let sample = d.seen[..at]
        .iter()
        .rev()
        .find(|l| l.contains("sample:"))
        .expect("the sample before the crossing");
    assert!(
        sample.ends_with(", light"),
        "the crossing was seen on a light tick: {sample}"
    );
}

#[test]
fn a_light_tick_catches_a_rule_matched_process_crossing_its_footprint_limit() {
    let sb = Sandbox::new("light");
    let _decoys = decoys(&sb);
    // Listed small by the first (full) tick; it grows past its limit within
    // the light ticks before the next full one (every 10 s).
    let mut hog = stopped_hog(&sb);
    let mut d = start(&footprint_rule(&sb));
    crosses_on_a_light_tick(&mut d, &mut hog);
}

#[test]
fn a_process_first_seen_on_a_light_tick_is_reread_on_the_light_ticks_after() {
    let sb = Sandbox::new("light-new");
    let _decoys = decoys(&sb);
    let mut d = start(&footprint_rule(&sb));
    // Started after the first (full) tick: the next, light, tick sees it
    // first; it must be re-read on the light ticks after that, though the
    // last full tick did not rank it among the largest.
    let mut hog = stopped_hog(&sb);
    let first = d.expect_line("sample:");
    assert!(first.ends_with(", light"), "{first}");
    crosses_on_a_light_tick(&mut d, &mut hog);
}
