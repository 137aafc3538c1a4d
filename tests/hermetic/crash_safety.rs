//! Crash safety of the journal: SIGKILL while events are written at a high
//! rate, then a restart.
//!
//! Two writers are killed mid-stream, many times each:
//!
//! - a child process that appends events through [`Journal`] as fast as
//!   `fsync` allows, into files so small that it rotates every few events,
//!   and prints each event's sequence number once `append` has returned;
//!   this test binary spawns itself as that child (the `journal_writer`
//!   test, with [`WRITER_ENV`] set);
//! - the real daemon, journaling dry-run actions on a crowd of
//!   `headroom-hog`s as fast as its rule allows; an event the API shows was
//!   journaled first (the daemon publishes events after their `fsync`),
//!   but for a user's process events past the user's share, which are
//!   counted instead.
//!
//! After each kill, every event known to be durable must be read back, in
//! order and without gaps, and the next writer must append cleanly after
//! the torn last line the kill may have left. The states a rotation passes
//! through are also laid out by hand, each one as a crash between two of
//! its steps would leave it, and opened, appended to and read.
#![cfg(unix)]

use crate::support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::hog::{Daemon, Running, Sandbox};
use headroom::event::{Event, EventKind};
use headroom::journal::shares::SHARE_EVENTS;
use headroom::journal::{Journal, JournalOptions, ReadOutcome, read_events};
use headroom::model::Timestamp;

/// Set in the child writer's environment: `PATH|MAX_BYTES|KEEP|FIRST_SEQ`.
const WRITER_ENV: &str = "HEADROOM_TEST_JOURNAL_WRITER";

/// Tiny files: a rotation every few events, so kills land inside them.
const SMALL: JournalOptions = JournalOptions {
    max_bytes: 4096,
    // Never drop a file within a test (a few thousand events): every event
    // written stays readable. A rotation renames every file kept, with an
    // fsync of the directory after each, so rotations get slower as files
    // pile up, and more kills land inside one.
    keep: 300,
};

/// The event with sequence number `seq`, its line length varying with it.
fn event(seq: u64) -> Event {
    Event {
        at: Timestamp(1_700_000_000_000 + seq),
        kind: EventKind::ConfigReloaded {
            path: format!("seq-{seq}"),
            error: Some("x".repeat((seq % 97) as usize)),
        },
    }
}

fn seq_of(e: &Event) -> Option<u64> {
    match &e.kind {
        EventKind::ConfigReloaded { path, .. } => path.strip_prefix("seq-")?.parse().ok(),
        _ => None,
    }
}

fn read(path: &Path) -> ReadOutcome {
    read_events(path, None).expect("the journal reads")
}

fn seqs(outcome: &ReadOutcome) -> Vec<u64> {
    outcome.events.iter().filter_map(seq_of).collect()
}

/// The child: append events from `FIRST_SEQ` on until killed, printing
/// `appended N` after each `append` returned. Run without [`WRITER_ENV`],
/// it is a short test of its own: 200 events, read back in order.
#[test]
fn journal_writer() {
    let Ok(spec) = std::env::var(WRITER_ENV) else {
        let dir = support::private_dir();
        let path = dir.path().join("journal.jsonl");
        let mut j = Journal::open(&path, SMALL).expect("open");
        for seq in 0..200 {
            j.append(&event(seq)).expect("append");
        }
        let out = read(&path);
        assert_eq!(seqs(&out), (0..200).collect::<Vec<_>>());
        assert!(out.files.len() > 4, "rotated: {:?}", out.files.len());
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [path, max_bytes, keep, first] = parts[..] else {
        panic!("{WRITER_ENV}={spec}: want PATH|MAX_BYTES|KEEP|FIRST_SEQ");
    };
    let opts = JournalOptions {
        max_bytes: max_bytes.parse().expect("max bytes"),
        keep: keep.parse().expect("keep"),
    };
    let mut j = Journal::open(Path::new(path), opts).expect("open the journal");
    println!("opened");
    // Appends until the test kills this process.
    let mut seq = first.parse::<u64>().expect("first seq");
    loop {
        j.append(&event(seq)).expect("append");
        println!("appended {seq}");
        seq += 1;
    }
}

/// A writer child on `path`, starting at `first`.
fn spawn_writer(path: &Path, opts: JournalOptions, first: u64) -> Child {
    // The test's name in this binary: its module path below the crate.
    let (_, module) = module_path!()
        .split_once("::")
        .expect("a module of the test binary");
    Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            &format!("{module}::journal_writer"),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            WRITER_ENV,
            format!(
                "{}|{}|{}|{first}",
                path.display(),
                opts.max_bytes,
                opts.keep
            ),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the writer")
}

/// Reads the child's `appended N` lines until it is killed; returns the
/// highest N.
struct Writer {
    child: Child,
    reported: std::sync::mpsc::Receiver<u64>,
    opened: std::sync::mpsc::Receiver<()>,
}

impl Writer {
    fn start(path: &Path, opts: JournalOptions, first: u64) -> Writer {
        let mut child = spawn_writer(path, opts, first);
        let stdout = child.stdout.take().expect("stdout");
        let (tx, reported) = std::sync::mpsc::channel();
        let (open_tx, opened) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // libtest's "test journal_writer ... " comes first.
                if line.ends_with("opened") {
                    let _ = open_tx.send(());
                } else if let Some(n) = line.strip_prefix("appended ").and_then(|n| n.parse().ok())
                    && tx.send(n).is_err()
                {
                    break;
                }
            }
        });
        Writer {
            child,
            reported,
            opened,
        }
    }

    /// SIGKILL `after` the journal was opened; the highest sequence number
    /// reported durable before the kill.
    fn kill_after(mut self, after: Duration) -> Option<u64> {
        self.opened
            .recv_timeout(Duration::from_secs(30))
            .expect("the writer opens the journal");
        std::thread::sleep(after);
        self.child.kill().expect("SIGKILL");
        // Lines in the pipe were printed before the kill: drain them.
        self.child.wait().expect("reap");
        let mut last = None;
        while let Ok(n) = self.reported.recv_timeout(Duration::from_millis(500)) {
            last = Some(n);
        }
        last
    }
}

/// Where a kill left the rotation: a gap in the numbers of the rotated
/// files, or no current file.
fn mid_rotation(path: &Path) -> bool {
    let dir = path.parent().expect("dir");
    let name = path.file_name().and_then(|n| n.to_str()).expect("name");
    let mut numbers: Vec<u64> = std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| {
            let e = e.ok()?;
            e.file_name()
                .to_str()?
                .strip_prefix(name)?
                .strip_prefix('.')?
                .parse()
                .ok()
        })
        .collect();
    numbers.sort_unstable();
    let gap = numbers.iter().enumerate().any(|(i, &n)| n != i as u64 + 1);
    gap || !path.exists()
}

#[test]
fn every_fsynced_event_survives_sigkill_and_the_next_writer_appends_cleanly() {
    let dir = support::private_dir();
    let path = dir.path().join("journal.jsonl");
    let mut next = 0u64;
    let mut durable_total = 0;
    let mut torn_seen = 0;
    let mut mid_rotations = 0;
    // Kill times spread over the first milliseconds of a run (open, first
    // rotations) and later ones.
    for round in 0..30u64 {
        let writer = Writer::start(&path, SMALL, next);
        let after = Duration::from_millis(5 + (round * 37) % 200);
        let reported = writer.kill_after(after);
        if mid_rotation(&path) {
            mid_rotations += 1;
        }
        let out = read(&path);
        let found = seqs(&out);
        // Every event the writer reported durable is there; the events are
        // the run so far, in order, without gaps or repeats.
        assert_eq!(
            found,
            (0..found.len() as u64).collect::<Vec<_>>(),
            "round {round}: events out of order or missing"
        );
        if let Some(last) = reported {
            assert!(
                found.last().is_some_and(|&l| l >= last),
                "round {round}: reported {last} durable, journal ends at {:?}",
                found.last()
            );
            durable_total += 1;
        }
        // Nothing but the last line of the current file may be cut short,
        // and complete lines are never corrupt.
        assert!(out.torn <= 1, "round {round}: {} torn lines", out.torn);
        assert_eq!(out.corrupt, 0, "round {round}: {:?}", out.first_corrupt);
        torn_seen += out.torn;
        next = found.last().map_or(0, |l| l + 1);
    }
    // A last, clean run: after all those kills, appending just works.
    let mut j = Journal::open(&path, SMALL).expect("reopen");
    j.append(&event(next)).expect("append");
    let out = read(&path);
    assert_eq!(seqs(&out), (0..=next).collect::<Vec<_>>());
    assert_eq!((out.torn, out.corrupt), (0, 0));
    eprintln!(
        "{next} events in 30 killed runs, {} files; {torn_seen} torn last lines and \
         {mid_rotations} rotations interrupted midway seen after a kill",
        out.files.len()
    );
    assert!(
        durable_total >= 15,
        "too few rounds wrote anything: {durable_total}"
    );
    assert!(next > 300, "only {next} events in 30 rounds");
}

/// The journal's files, `path` and `path.N`, written by hand.
fn lay_out(path: &Path, files: &[(Option<u64>, std::ops::Range<u64>)]) {
    for (n, seqs) in files {
        let file = match n {
            Some(n) => PathBuf::from(format!("{}.{n}", path.display())),
            None => path.to_path_buf(),
        };
        let mut text = String::new();
        for seq in seqs.clone() {
            text.push_str(&serde_json::to_string(&event(seq)).expect("encode"));
            text.push('\n');
        }
        std::fs::write(file, text).expect("write");
    }
}

#[test]
fn each_state_a_rotation_passes_through_opens_reads_and_appends_cleanly() {
    // keep = 4: current, .1, .2, .3. A rotation removes .3 (the oldest),
    // renames .2 → .3, .1 → .2, current → .1, and creates a new current.
    let opts = JournalOptions {
        max_bytes: 1 << 20,
        keep: 4,
    };
    type Layout = Vec<(Option<u64>, std::ops::Range<u64>)>;
    let before: Layout = vec![
        (Some(3), 0..10),
        (Some(2), 10..20),
        (Some(1), 20..30),
        (None, 30..40),
    ];
    // Each crash state, and the events it still holds (the oldest file is
    // dropped on purpose by the rotation's first step).
    let states: Vec<(&str, Layout, std::ops::Range<u64>)> = vec![
        ("before the rotation", before.clone(), 0..40),
        (
            "after the oldest was removed",
            vec![(Some(2), 10..20), (Some(1), 20..30), (None, 30..40)],
            10..40,
        ),
        (
            "after .2 became .3",
            vec![(Some(3), 10..20), (Some(1), 20..30), (None, 30..40)],
            10..40,
        ),
        (
            "after .1 became .2",
            vec![(Some(3), 10..20), (Some(2), 20..30), (None, 30..40)],
            10..40,
        ),
        (
            "after the current file became .1, before a new one",
            vec![(Some(3), 10..20), (Some(2), 20..30), (Some(1), 30..40)],
            10..40,
        ),
    ];
    for (what, layout, held) in states {
        let dir = support::private_dir();
        let path = dir.path().join("journal.jsonl");
        lay_out(&path, &layout);
        let out = read(&path);
        assert_eq!(seqs(&out), held.clone().collect::<Vec<_>>(), "{what}: read");
        let mut j = Journal::open(&path, opts).expect("open");
        j.append(&event(held.end)).expect("append");
        let out = read(&path);
        assert_eq!(
            seqs(&out),
            (held.start..=held.end).collect::<Vec<_>>(),
            "{what}: after an append"
        );
        assert_eq!((out.torn, out.corrupt), (0, 0), "{what}");
    }
}

#[test]
fn a_torn_last_line_is_cut_and_the_next_event_starts_a_line_of_its_own() {
    let dir = support::private_dir();
    let path = dir.path().join("journal.jsonl");
    lay_out(&path, &[(None, 0..5)]);
    let whole = serde_json::to_string(&event(5)).expect("encode");
    // Every cut of the sixth line a crash could leave.
    for cut in 1..whole.len() {
        lay_out(&path, &[(None, 0..5)]);
        let mut text = std::fs::read(&path).expect("read");
        text.extend_from_slice(&whole.as_bytes()[..cut]);
        std::fs::write(&path, &text).expect("write");
        let out = read(&path);
        assert_eq!((seqs(&out), out.torn), ((0..5).collect(), 1), "cut {cut}");
        let mut j = Journal::open(&path, SMALL).expect("open");
        j.append(&event(5)).expect("append");
        j.append(&event(6)).expect("append");
        let out = read(&path);
        assert_eq!(seqs(&out), (0..7).collect::<Vec<_>>(), "cut {cut}");
        assert_eq!((out.torn, out.corrupt), (0, 0), "cut {cut}");
    }
}

/// Identity of an event as the API shows it: (at, event, pid, step).
type EventKey = (u64, String, u64, u64);

/// Whether events named `name` go to the journal's record
/// ([`headroom::journal::FileSet::Record`]), which keeps every one, rather than to the process
/// events, which keep each user's share.
fn in_record(name: &str) -> bool {
    matches!(
        name,
        "started" | "stopped" | "config-reloaded" | "action" | "skipped"
    )
}

fn key(e: &serde_json::Value) -> EventKey {
    (
        e["at"].as_u64().unwrap_or(0),
        e["event"].as_str().unwrap_or_default().to_string(),
        e["process"]["pid"].as_u64().unwrap_or(0),
        e["step"].as_u64().unwrap_or(u64::MAX),
    )
}

#[test]
fn the_daemon_killed_while_journaling_keeps_every_event_it_published() {
    let sb = Sandbox::new("crash");
    let hogs: Vec<Running> = (0..12)
        .map(|_| {
            let mut h = Running::hog(&sb.hog, &["--rate", "max", "--max", "4MiB"]);
            h.expect_line("holding");
            h
        })
        .collect();
    // A dry-run ladder on every hog that starts over every 20 ms; the
    // journal rotates at 64 KiB, the smallest size the config takes.
    let config = sb.config(&format!(
        "[[rule]]\nname = \"crash\"\nroot = true\nother_users = true\ndry_run = true\n\
         footprint = \"1MiB\"\ncooldown = \"20ms\"\n\
         actions = [{{ signal = \"SIGTERM\" }}, {{ signal = \"SIGKILL\", after = \"10ms\" }}]\n\
         [rule.match]\nargv = \"{}\"\n",
        sb.hog_pattern()
    ));
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace(
            "[daemon]\n",
            "[daemon]\njournal_max_size = \"64KiB\"\njournal_files = 100\n",
        ),
    )
    .expect("config");
    let journal = sb.path("journal.jsonl");
    let cfg = config.to_str().expect("utf-8");

    let mut published = BTreeSet::new();
    for round in 0..4u64 {
        let mut d = Running::daemon(&["run", "--config", cfg]);
        let addr = d.http_addr();
        let before = published.len();
        let round_start = published.clone();
        let deadline = Instant::now() + Duration::from_millis(1500 + round * 400);
        while Instant::now() < deadline {
            let (status, body) = support::get(&format!("http://{addr}/api/v1/events"));
            assert_eq!(status, 200, "{body}");
            let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
            for e in v["events"].as_array().expect("events") {
                published.insert(key(e));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        d.child.kill().expect("SIGKILL");
        d.child.wait().expect("reap");
        assert!(published.len() > before + 50, "round {round}: few events");

        let out = read(&journal);
        let journaled: BTreeSet<EventKey> = out
            .events
            .iter()
            .map(|e| key(&serde_json::to_value(e).expect("value")))
            .collect();
        // Every event of the record is journaled. A user's process events
        // (here root's limit crossings, one each time a ladder starts over)
        // are journaled up to the user's share in each minute, and counted
        // past it in a summary that a killed daemon never writes.
        let missing: Vec<_> = published
            .difference(&journaled)
            .filter(|k| in_record(&k.1))
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: published, not journaled: {missing:?}"
        );
        let round_processes: Vec<_> = published
            .difference(&round_start)
            .filter(|k| !in_record(&k.1))
            .collect();
        let kept = round_processes
            .iter()
            .filter(|k| journaled.contains(**k))
            .count();
        let share = usize::try_from(SHARE_EVENTS).expect("a small share");
        assert!(
            kept >= round_processes.len().min(share),
            "round {round}: {kept} of the {} process events published journaled, fewer \
             than the share of {share}",
            round_processes.len()
        );
        assert!(out.torn <= 1, "round {round}");
        assert_eq!(out.corrupt, 0, "round {round}: {:?}", out.first_corrupt);
    }
    // Restarted once more and stopped cleanly: the journal ends with its
    // start and stop, after every event of the killed runs.
    let mut d = Daemon::run(&["run", "--config", cfg]);
    d.signal("TERM");
    assert_eq!(
        d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(0)
    );
    let out = read(&journal);
    assert_eq!((out.torn, out.corrupt), (0, 0));
    let kinds: Vec<&str> = out
        .events
        .iter()
        .map(|e| match e.kind {
            EventKind::Started { .. } => "started",
            EventKind::Stopped => "stopped",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "started").count(), 5);
    // The clean stop is journaled once, after the last start (the actuator's
    // last dry-run actions may follow it).
    let last_start = kinds.iter().rposition(|k| *k == "started");
    let stops: Vec<usize> = (0..kinds.len())
        .filter(|&i| kinds[i] == "stopped")
        .collect();
    assert_eq!(stops.len(), 1, "{kinds:?}");
    assert!(last_start < Some(stops[0]), "{kinds:?}");
    assert!(out.files.len() > 1, "the journal rotated: {:?}", out.files);
    drop(hogs);
}
