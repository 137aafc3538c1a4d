//! `headroom events` on the real binary, reading journals this test writes
//! with the journal's own writer, and the journal and log of a real daemon
//! that met a process with a hostile name: neither holds a raw control
//! character.

use crate::support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::hog::Running;

use headroom::event::{Event, EventKind, Outcome, ProcessRef};
use headroom::journal::{Journal, JournalOptions};
use headroom::local_time::format_with_offset;
use headroom::model::{Timestamp, WorkloadKind};

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

fn kernel() -> ProcessRef {
    ProcessRef {
        pid: 48113,
        start: 123,
        name: "python3".into(),
        user: Some("ada".into()),
        uid: Some(1000),
        workload: WorkloadKind::Jupyter,
        footprint: 9 << 30,
        kernel_id: Some("3f2a9c1e".into()),
        notebook: None,
        labels: None,
    }
}

fn sigint(at: Timestamp) -> Event {
    Event {
        at,
        kind: EventKind::Action {
            rule: "notebook-runaway".into(),
            process: kernel(),
            step: 0,
            action: "SIGINT".into(),
            outcome: Outcome::Done,
            dry_run: false,
            detail: "footprint 9 GiB > 8 GiB".into(),
        },
    }
}

fn reload(at: Timestamp) -> Event {
    Event {
        at,
        kind: EventKind::ConfigReloaded {
            path: "/etc/headroom.toml".into(),
            error: None,
        },
    }
}

fn write_journal(path: &Path, events: &[Event]) {
    let mut j = Journal::open(path, JournalOptions::default()).unwrap();
    for e in events {
        j.append(e).unwrap();
    }
}

/// Run `headroom events ARGS` in UTC (or the given POSIX `TZ`).
fn events(args: &[&str], tz: &str) -> Output {
    Command::new(BIN)
        .arg("events")
        .args(args)
        .env("TZ", tz)
        .output()
        .expect("run headroom")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn ago(d: Duration) -> Timestamp {
    Timestamp(Timestamp::now().as_millis() - d.as_millis() as u64)
}

#[test]
fn events_print_one_readable_line_each() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let (old, new) = (
        ago(Duration::from_secs(7200)),
        ago(Duration::from_secs(600)),
    );
    write_journal(&path, &[reload(old), sigint(new)]);
    let text = stdout(&events(&["--journal", path.to_str().unwrap()], "UTC0"));
    assert_eq!(
        text,
        format!(
            "{} +00:00  reload  /etc/headroom.toml: applied\n\
             {} +00:00  SIGINT  → python3 (pid 48113, jupyter kernel 3f2a…)  rule \"notebook-runaway\": \
             footprint 9 GiB > 8 GiB  [done]\n",
            format_with_offset(old, 0),
            format_with_offset(new, 0)
        )
    );
}

#[test]
fn times_are_shown_in_the_local_zone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    write_journal(&path, &[reload(Timestamp(1_700_000_000_000))]);
    // A POSIX TZ string needs no zone database: 5h30m east of UTC.
    let text = stdout(&events(&["--journal", path.to_str().unwrap()], "IST-5:30"));
    assert!(
        text.starts_with("2023-11-15 03:43:20 +05:30  reload"),
        "{text}"
    );
}

#[test]
fn since_filters_and_json_prints_the_stored_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let new = sigint(ago(Duration::from_secs(60)));
    write_journal(
        &path,
        &[reload(ago(Duration::from_secs(7200))), new.clone()],
    );
    let text = stdout(&events(
        &[
            "--journal",
            path.to_str().unwrap(),
            "--since",
            "1h",
            "--json",
        ],
        "UTC0",
    ));
    let lines: Vec<Event> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, vec![new]);
}

#[test]
fn a_journal_named_but_missing_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none/journal.jsonl");
    let out = events(&["--journal", path.to_str().unwrap()], "UTC0");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "headroom: --journal {}: there is no journal there (no such file)",
            path.display()
        )),
        "{err}"
    );
}

#[test]
fn a_journal_the_daemon_has_not_made_yet_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none/journal.jsonl");
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!("[daemon]\njournal = {:?}\n", path.to_str().unwrap()),
    )
    .unwrap();
    let text = stdout(&events(&["--config", config.to_str().unwrap()], "UTC0"));
    assert!(
        text.starts_with(&format!(
            "no events yet (journal at {} does not exist)",
            path.display()
        )),
        "{text}"
    );
}

/// New York's rules as a POSIX `TZ` string, which needs no zone database.
const NEW_YORK: &str = "EST5EDT,M3.2.0,M11.1.0";

#[test]
fn printed_times_pasted_into_since_select_from_that_event_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    // Whole seconds, a minute apart, the last in summer time (UTC−4), the
    // others in winter time (UTC−5).
    let at = [
        1_700_000_000_000, // 2023-11-14 17:13:20 -05:00
        1_700_000_060_000,
        1_700_000_120_000,
        1_705_510_800_000, // 2024-01-17 12:00:00 -05:00
        1_720_000_000_000, // 2024-07-03 05:46:40 -04:00
    ]
    .map(Timestamp);
    let journal: Vec<Event> = at.iter().map(|&t| reload(t)).collect();
    write_journal(&path, &journal);
    let journal_arg = path.to_str().unwrap();
    let text = stdout(&events(&["--journal", journal_arg], NEW_YORK));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), at.len(), "{text}");
    assert!(
        lines[0].starts_with("2023-11-14 17:13:20 -05:00  reload"),
        "{text}"
    );
    assert!(
        lines[4].starts_with("2024-07-03 05:46:40 -04:00  reload"),
        "{text}"
    );
    for (i, line) in lines.iter().enumerate() {
        // The time as printed, with its zone and without it.
        let printed = &line[..line.find("  ").unwrap()];
        let wall = &printed[..19];
        for since in [printed, wall] {
            let out = stdout(&events(
                &["--journal", journal_arg, "--since", since],
                NEW_YORK,
            ));
            assert_eq!(
                out.lines().collect::<Vec<_>>(),
                lines[i..],
                "--since {since:?}"
            );
        }
    }
    // RFC 3339 in UTC and a time an hour before the first event.
    let out = stdout(&events(
        &["--journal", journal_arg, "--since", "2023-11-14T22:13:21Z"],
        NEW_YORK,
    ));
    assert_eq!(out.lines().collect::<Vec<_>>(), lines[1..]);
    let out = stdout(&events(
        &["--journal", journal_arg, "--since", "2023-11-14 16:13:20"],
        NEW_YORK,
    ));
    assert_eq!(out.lines().count(), at.len());
}

#[test]
fn the_config_names_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    write_journal(&path, &[reload(Timestamp(1_700_000_000_000))]);
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!("[daemon]\njournal = {:?}\n", path.to_str().unwrap()),
    )
    .unwrap();
    let text = stdout(&events(&["--config", config.to_str().unwrap()], "UTC0"));
    assert_eq!(
        text,
        "2023-11-14 22:13:20 +00:00  reload  /etc/headroom.toml: applied\n"
    );
}

#[test]
fn a_bad_config_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("headroom.toml");
    std::fs::write(&config, "[daemon]\njournal = \"relative.jsonl\"\n").unwrap();
    let out = events(&["--config", config.to_str().unwrap()], "UTC0");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("daemon.journal"));
}

#[test]
fn corrupt_and_torn_lines_are_reported_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let good = serde_json::to_string(&reload(Timestamp(1_700_000_000_000))).unwrap();
    std::fs::write(&path, format!("garbage\n{good}\n{{\"at\":1")).unwrap();
    let out = events(&["--journal", path.to_str().unwrap()], "UTC0");
    assert_eq!(
        stdout(&out),
        "2023-11-14 22:13:20 +00:00  reload  /etc/headroom.toml: applied\n"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("skipped 1 torn last line"), "{err}");
    assert!(
        err.contains(&format!(
            "skipped 1 line(s) that are not events; the first: {}:1: ",
            path.display()
        )),
        "{err}"
    );
}

#[test]
fn a_bad_since_is_a_usage_error() {
    let out = events(
        &["--journal", "/nonexistent/j.jsonl", "--since", "soon"],
        "UTC0",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--since \"soon\""));
}

/// A process name as hostile as a user can make it: a colour escape, a
/// newline that would start a forged log line, a bell, and markup.
const HOSTILE: &str = "\u{1b}[31mRED\n\u{7}<b>";
const HOSTILE_ESCAPED: &str = "\\u{1b}[31mRED\\n\\u{7}<b>";

#[test]
fn a_hostile_process_name_reaches_neither_log_nor_events_raw() {
    let dir = support::private_dir();
    // `sleep` under a file name that is the hostile string: the kernel
    // takes the process's name (comm) from it.
    let sleep = ["/bin/sleep", "/usr/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("a sleep program");
    let program = dir.path().join(HOSTILE);
    std::fs::copy(sleep, &program).unwrap();
    let mut child = support::Reaped(
        Command::new(&program)
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    // Until the exec is done, the child goes by the test thread's name.
    support::wait_for(Duration::from_secs(10), "the hostile name", || {
        let comm = std::fs::read(format!("/proc/{pid}/comm")).ok()?;
        (comm == format!("{HOSTILE}\n").as_bytes()).then_some(())
    });

    let journal = dir.path().join("journal.jsonl");
    let pattern = regex::escape(&dir.path().display().to_string()).replace('\\', "\\\\");
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval = \"100ms\"\nfast_interval = \"50ms\"\njournal = \"{}\"\n\n\
             [[rule]]\nname = \"hostile\"\nfootprint = \"1KiB\"\nroot = true\nother_users = true\n\
             dry_run = true\nactions = [{{ notify = true }}]\n[rule.match]\nargv = \"{pattern}\"\n",
            journal.display()
        ),
    )
    .unwrap();
    let mut d = Running::daemon(&["run", "--config", config.to_str().unwrap()]);
    let line = d.expect_line("dry run: would show");
    d.signal("TERM");
    d.wait_exit(Duration::from_secs(10));
    let _ = child.0.kill();

    // The log: the name escaped, within its one line.
    assert!(
        line.contains(&format!("{HOSTILE_ESCAPED} (pid {pid})")),
        "{line}"
    );
    for l in &d.seen {
        assert!(
            !l.chars().any(char::is_control),
            "raw control character in {l:?}"
        );
    }

    // `headroom events`: one line per event, the name escaped.
    let text = stdout(&events(&["--journal", journal.to_str().unwrap()], "UTC0"));
    let notify = text
        .lines()
        .find(|l| l.contains("  notify  → "))
        .unwrap_or_else(|| panic!("no notify event in:\n{text}"));
    assert!(
        notify.contains(&format!(
            "{HOSTILE_ESCAPED} (pid {pid})  rule \"hostile\": would show"
        )),
        "{notify}"
    );
    assert!(notify.ends_with("[dry-run]"), "{notify}");
    for l in text.lines() {
        assert!(
            !l.chars().any(char::is_control),
            "raw control character in {l:?}"
        );
        // Every line is an event's: it starts with its date.
        assert!(l.starts_with("20"), "a line that is not an event's: {l:?}");
    }
}

/// `headroom events --follow ARGS` running, its stdout read line by line.
struct Following {
    child: support::Reaped,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Following {
    fn start(args: &[&str]) -> Self {
        use std::io::BufRead as _;
        let mut child = Command::new(BIN)
            .args(["events", "--follow"])
            .args(args)
            .env("TZ", "UTC0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run headroom events --follow");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child: support::Reaped(child),
            lines,
        }
    }

    /// The next line printed; panics if none comes within a minute.
    #[track_caller]
    fn next(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a line from events --follow")
    }
}

fn crossing(at: Timestamp, detail: &str) -> Event {
    Event {
        at,
        kind: EventKind::LimitCrossed {
            rule: "notebook-runaway".into(),
            process: kernel(),
            detail: detail.into(),
        },
    }
}

#[test]
fn follow_prints_new_events_of_both_file_sets_across_rotations() {
    use headroom::journal::Journals;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    // Room for about two events per file: appending rotates often.
    let opts = JournalOptions {
        max_bytes: 2 * serde_json::to_string(&sigint(Timestamp(0))).unwrap().len() as u64 + 2,
        keep: 3,
    };
    let mut journal = Journals::open(&path, opts).unwrap();
    journal
        .append(&reload(ago(Duration::from_secs(7200))))
        .unwrap();
    journal
        .append(&reload(ago(Duration::from_secs(60))))
        .unwrap();
    // --since leaves out the event of two hours ago, now and later.
    let follow = Following::start(&["--journal", path.to_str().unwrap(), "--since", "1h"]);
    let first = follow.next();
    assert!(
        first.ends_with("  reload  /etc/headroom.toml: applied"),
        "{first}"
    );
    for n in 0..8u64 {
        let at = ago(Duration::from_secs(30 - n));
        journal.append(&sigint(at)).unwrap();
        journal
            .append(&crossing(at, &format!("footprint {n} GiB > 8 GiB")))
            .unwrap();
        journal
            .append(&reload(ago(Duration::from_secs(7200))))
            .unwrap();
        // The crossing and the action (in either order: the two files may
        // be read between the two appends); the old reload never.
        let mut two = [follow.next(), follow.next()];
        two.sort_by_key(|l| !l.contains("  SIGINT  "));
        let [signalled, crossed] = two;
        assert!(
            signalled.contains("  SIGINT  → python3 (pid 48113"),
            "event {n}: {signalled}"
        );
        assert!(
            signalled.starts_with(&format_with_offset(at, 0)),
            "{signalled}"
        );
        assert!(
            crossed.contains("rule \"notebook-runaway\"")
                && crossed.contains(&format!("footprint {n} GiB > 8 GiB")),
            "event {n}: {crossed}"
        );
    }
    assert!(
        dir.path().join("journal.jsonl.2").exists(),
        "the record rotated"
    );
    assert!(
        dir.path().join("journal.processes.jsonl.2").exists(),
        "the process events rotated"
    );
    // Nothing came between: the next line is the next event's.
    journal
        .append(&Event {
            at: ago(Duration::ZERO),
            kind: EventKind::ConfigReloaded {
                path: "/etc/headroom-last.toml".into(),
                error: None,
            },
        })
        .unwrap();
    let last = follow.next();
    assert!(last.ends_with("/etc/headroom-last.toml: applied"), "{last}");
    drop(follow.child);
}

#[test]
fn follow_waits_for_a_journal_not_made_yet_and_prints_json_as_stored() {
    use headroom::journal::Journals;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("later/journal.jsonl");
    let follow = Following::start(&["--journal", path.to_str().unwrap(), "--json"]);
    std::fs::create_dir(dir.path().join("later")).unwrap();
    let event = sigint(ago(Duration::from_secs(1)));
    let mut journal = Journals::open(&path, JournalOptions::default()).unwrap();
    journal.append(&event).unwrap();
    let line = follow.next();
    let printed: Event = serde_json::from_str(&line).unwrap();
    assert_eq!(printed, event);
}
