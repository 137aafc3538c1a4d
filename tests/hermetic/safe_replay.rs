//! `headroom run --replay` on a trace recorded from a process that still
//! runs: the replay acts on nothing of this machine (the live process, whose
//! pid and start time match the recorded one, gets no signal), marks what
//! it logs and writes as a replay, and leaves the live daemon's state
//! directory (its journal, its lock) exactly as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::hog::{HEADROOM, Running, Sandbox, stop_cleanly};

/// Every file of `dir` and its bytes.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("read the state directory")
        .map(|e| {
            let path = e.expect("entry").path();
            let bytes = std::fs::read(&path).expect("read a state file");
            (path, bytes)
        })
        .collect()
}

/// The lines of both file sets of the journal at `path` (the record and
/// the process events), as written.
fn raw_lines(path: &Path) -> Vec<serde_json::Value> {
    let processes = headroom::journal::processes_path(path);
    [path.to_path_buf(), processes]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|text| {
            text.lines()
                .map(|l| serde_json::from_str(l).expect("a journal line is JSON"))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_replay_never_signals_the_live_process_it_recorded_nor_writes_the_live_journal() {
    let sb = Sandbox::new("replayed");
    // The live process: 300 MiB, reporting every signal it gets (a caught
    // signal is printed, and it lives on).
    let mut hog = Running::hog(
        &sb.hog,
        &["--max", "300MiB", "--catch", "INT,TERM,USR1,USR2"],
    );
    hog.expect_line("holding ");
    let trace = sb.path("trace.jsonl");
    let recorded = Command::new(HEADROOM)
        .args(["record", "--duration", "2s", "--interval", "500ms", "--out"])
        .arg(&trace)
        .output()
        .expect("run headroom record");
    assert!(
        recorded.status.success(),
        "{}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    let trace_text = std::fs::read_to_string(&trace).expect("the trace");
    assert!(
        trace_text.contains(&format!("\"pid\":{}", hog.pid())),
        "the trace holds the live hog"
    );

    // The live daemon's state directory: its journal, with a line of its own.
    let live = sb.path("live");
    std::fs::create_dir(&live).expect("mkdir live");
    let live_journal = live.join("journal.jsonl");
    std::fs::write(
        &live_journal,
        "{\"at\":1764062205120,\"event\":\"started\",\"version\":\"0.1.0\",\"config\":null,\"dry_run\":false}\n",
    )
    .expect("the live journal");
    let before = contents(&live);
    // A config that acts for real (no dry run) on the hog over 100 MiB, and
    // journals into the live state directory.
    let config = sb.path("headroom.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval = \"100ms\"\nfast_interval = \"50ms\"\njournal = \"{}\"\n\n{}",
            live_journal.display(),
            sb.rule("footprint = \"100MiB\"\nactions = [{ signal = \"SIGTERM\" }]")
        ),
    )
    .expect("write the config");
    let cfg = config.to_str().expect("utf-8");
    let trace_arg = trace.to_str().expect("utf-8");

    let mut replay = Running::daemon(&["run", "--config", cfg, "--replay", trace_arg]);
    let start = replay.expect_line("a dry run whatever the config or the command line say");
    assert!(start.starts_with("[replay] "), "{start}");
    assert!(start.contains("it keeps no journal"), "{start}");
    let decided = replay.expect_line(&format!(
        "dry run: replay: would send SIGTERM to pid {}",
        hog.pid()
    ));
    assert!(decided.starts_with("[replay] "), "{decided}");
    // More passes of the looped trace (one recorded snapshot a tick), for
    // whatever would come late.
    replay.drain(Duration::from_secs(2));
    for line in &replay.seen {
        assert!(
            line.starts_with("[replay] "),
            "a log line not marked: {line}"
        );
        assert!(!line.contains(": done"), "a replay acted: {line}");
    }
    stop_cleanly(&mut replay, "TERM");

    let heard: Vec<String> = hog
        .drain(Duration::from_millis(200))
        .into_iter()
        .chain(hog.seen.iter().cloned())
        .filter(|l| l.starts_with("signal "))
        .collect();
    assert!(heard.is_empty(), "the live process got {heard:?}");
    assert!(hog.alive(), "the live process died");
    assert_eq!(
        contents(&live),
        before,
        "the live state directory changed (journal, process events or lock)"
    );

    // Told where to journal, outside the live state directory: every line
    // is marked, the decision among them as a dry run.
    let elsewhere = sb.path("replays");
    let replay_journal = elsewhere.join("incident.jsonl");
    let journal_arg = replay_journal.to_str().expect("utf-8");
    let mut replay = Running::daemon(&[
        "run",
        "--config",
        cfg,
        "--replay",
        trace_arg,
        "--journal",
        journal_arg,
    ]);
    replay.expect_line(&format!(
        "dry run: replay: would send SIGTERM to pid {}",
        hog.pid()
    ));
    stop_cleanly(&mut replay, "TERM");
    let lines = raw_lines(&replay_journal);
    assert!(lines.len() >= 3, "{lines:?}");
    for line in &lines {
        assert_eq!(line["replay"], true, "{line}");
    }
    let action = lines
        .iter()
        .find(|l| l["event"] == "action" && l["process"]["pid"] == hog.pid())
        .unwrap_or_else(|| panic!("no action on the hog in {lines:?}"));
    assert_eq!(action["outcome"], "dry-run", "{action}");
    assert_eq!(action["dry_run"], true, "{action}");
    assert!(hog.alive(), "the live process died");
    assert_eq!(contents(&live), before, "the live state directory changed");

    // And never into the live state directory.
    let into_live = live.join("replay.jsonl");
    let out = Command::new(HEADROOM)
        .args([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--config",
            cfg,
            "--replay",
        ])
        .arg(&trace)
        .arg("--journal")
        .arg(&into_live)
        .output()
        .expect("run headroom");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the live daemon's state directory"), "{err}");
    assert_eq!(contents(&live), before, "the live state directory changed");
}
