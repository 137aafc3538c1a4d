//! The journal on a real file system: round trips, torn and corrupt lines,
//! rotation (also after a rotation cut short), `since`, and permissions.
//! A journal a user prepared for a root daemon (their directory, their
//! 0666 file of forged lines, a link) is refused and left untouched, by
//! `Journal::open_checked` and by the real daemon, which samples on.

mod support;

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::time::Duration;

use support::hog::Running;

use headroom::event::{Event, EventKind};
use headroom::journal::{Journal, JournalError, JournalOptions, read_events};
use headroom::model::Timestamp;

fn event(at: u64) -> Event {
    Event {
        at: Timestamp(at),
        kind: EventKind::ConfigReloaded {
            path: format!("/etc/headroom-{at}.toml"),
            error: None,
        },
    }
}

fn opts(max_bytes: u64, keep: usize) -> JournalOptions {
    JournalOptions { max_bytes, keep }
}

fn ats(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.at.0).collect()
}

fn append_all(path: &Path, o: JournalOptions, range: std::ops::Range<u64>) {
    let mut j = Journal::open(path, o).unwrap();
    for at in range {
        j.append(&event(at)).unwrap();
    }
}

#[test]
fn events_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let mut j = Journal::open(&path, JournalOptions::default()).unwrap();
    let written = vec![
        event(1),
        Event {
            at: Timestamp(2),
            kind: EventKind::Started {
                version: "0.1.0".into(),
                config: None,
                dry_run: true,
            },
        },
        Event {
            at: Timestamp(3),
            kind: EventKind::Stopped,
        },
    ];
    for e in &written {
        j.append(e).unwrap();
    }
    let read = read_events(&path, None).unwrap();
    assert_eq!(read.events, written);
    assert_eq!(read.files, vec![path.clone()]);
    assert_eq!((read.torn, read.corrupt), (0, 0));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(text.ends_with('\n'));
}

#[test]
fn a_reopened_journal_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    append_all(&path, JournalOptions::default(), 0..2);
    append_all(&path, JournalOptions::default(), 2..4);
    assert_eq!(ats(&read_events(&path, None).unwrap().events), [0, 1, 2, 3]);
}

#[test]
fn a_torn_last_line_is_skipped_and_cut_before_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    append_all(&path, JournalOptions::default(), 0..2);
    // A crash in the middle of writing the third event.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(br#"{"at":2,"event":"config-rel"#).unwrap();
    drop(f);

    let read = read_events(&path, None).unwrap();
    assert_eq!(ats(&read.events), [0, 1]);
    assert_eq!((read.torn, read.corrupt), (1, 0));

    append_all(&path, JournalOptions::default(), 3..4);
    let read = read_events(&path, None).unwrap();
    assert_eq!(ats(&read.events), [0, 1, 3]);
    assert_eq!((read.torn, read.corrupt), (0, 0));
    assert!(
        !std::fs::read_to_string(&path)
            .unwrap()
            .contains("config-rel\"")
    );
}

#[test]
fn a_file_that_is_all_torn_line_is_emptied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    std::fs::write(&path, b"{\"at\":1,").unwrap();
    append_all(&path, JournalOptions::default(), 5..6);
    let read = read_events(&path, None).unwrap();
    assert_eq!(ats(&read.events), [5]);
    assert_eq!(read.torn, 0);
}

#[test]
fn a_corrupt_middle_line_is_reported_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let line = |at| serde_json::to_string(&event(at)).unwrap();
    std::fs::write(
        &path,
        format!("{}\nnot json at all\n{}\n{{\"at\":7}}\n", line(1), line(2)),
    )
    .unwrap();
    let read = read_events(&path, None).unwrap();
    assert_eq!(ats(&read.events), [1, 2]);
    assert_eq!(read.corrupt, 2);
    let first = read.first_corrupt.unwrap();
    assert_eq!((first.path.as_path(), first.line), (path.as_path(), 2));
    assert!(first.error.contains("expected"), "{}", first.error);
}

#[test]
fn invalid_utf8_is_corrupt_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    std::fs::write(&path, b"\xff\xfe\n").unwrap();
    let read = read_events(&path, None).unwrap();
    assert_eq!((read.events.len(), read.corrupt), (0, 1));
}

#[test]
fn rotation_keeps_the_newest_files_and_reads_them_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let line_len = serde_json::to_string(&event(100)).unwrap().len() as u64 + 1;
    // Three events per file.
    let o = opts(3 * line_len, 3);
    append_all(&path, o, 100..120);

    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["journal.jsonl", "journal.jsonl.1", "journal.jsonl.2"]
    );
    for name in &names {
        let len = std::fs::metadata(dir.path().join(name)).unwrap().len();
        assert!(len <= 3 * line_len, "{name} has {len} bytes");
    }

    let read = read_events(&path, None).unwrap();
    // 20 events, 3 per file, 3 files: the last 2 in the current file, 6 before.
    assert_eq!(ats(&read.events), (112..120).collect::<Vec<_>>());
    assert_eq!(
        read.files,
        [
            path.with_file_name("journal.jsonl.2"),
            path.with_file_name("journal.jsonl.1"),
            path.clone()
        ]
    );
}

#[test]
fn keeping_one_file_starts_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let line_len = serde_json::to_string(&event(100)).unwrap().len() as u64 + 1;
    append_all(&path, opts(2 * line_len, 1), 100..105);
    assert_eq!(ats(&read_events(&path, None).unwrap().events), [104]);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn files_beyond_keep_are_dropped_at_the_next_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let line_len = serde_json::to_string(&event(100)).unwrap().len() as u64 + 1;
    // Written with five files kept, then reopened keeping two.
    append_all(&path, opts(line_len, 5), 100..105);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 5);
    append_all(&path, opts(line_len, 2), 105..106);
    assert_eq!(ats(&read_events(&path, None).unwrap().events), [104, 105]);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn a_rotation_cut_short_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let line = |at| serde_json::to_string(&event(at)).unwrap() + "\n";
    // The state a crash leaves after `.2`→`.3` and before `.1`→`.2` and
    // current→`.1`: a gap at `.2`.
    std::fs::write(path.with_file_name("journal.jsonl.3"), line(1) + &line(2)).unwrap();
    std::fs::write(path.with_file_name("journal.jsonl.1"), line(3) + &line(4)).unwrap();
    std::fs::write(&path, line(5)).unwrap();
    assert_eq!(
        ats(&read_events(&path, None).unwrap().events),
        [1, 2, 3, 4, 5]
    );

    // A crash after the last rename: no current file at all.
    std::fs::rename(
        path.with_file_name("journal.jsonl.1"),
        path.with_file_name("journal.jsonl.2"),
    )
    .unwrap();
    std::fs::rename(&path, path.with_file_name("journal.jsonl.1")).unwrap();
    assert_eq!(
        ats(&read_events(&path, None).unwrap().events),
        [1, 2, 3, 4, 5]
    );

    // The next start carries on; with five files kept, its rotation drops nothing.
    let line_len = line(9).len() as u64;
    append_all(&path, opts(2 * line_len, 5), 6..9);
    assert_eq!(
        ats(&read_events(&path, None).unwrap().events),
        [1, 2, 3, 4, 5, 6, 7, 8]
    );
}

#[test]
fn since_keeps_later_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    append_all(&path, JournalOptions::default(), 10..20);
    let read = read_events(&path, Some(Timestamp(15))).unwrap();
    assert_eq!(ats(&read.events), [15, 16, 17, 18, 19]);
}

#[test]
fn directories_and_file_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/headroom/journal.jsonl");
    append_all(&path, JournalOptions::default(), 0..1);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.path().join("state")), 0o700);
    assert_eq!(mode(&dir.path().join("state/headroom")), 0o700);
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn a_symlink_in_place_of_the_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "").unwrap();
    let path = dir.path().join("journal.jsonl");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let err = Journal::open(&path, JournalOptions::default()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot open {}: ", path.display())),
        "{err}"
    );
}

#[test]
fn a_missing_journal_reads_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    let read = read_events(&dir.path().join("none/journal.jsonl"), None).unwrap();
    assert!(read.events.is_empty() && read.files.is_empty());
}

fn is_root() -> bool {
    headroom::sys::this_process::effective_uid() == 0
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A uid that is not root's, for files "another user" made.
const NOBODY: u32 = 65534;

/// Lines a user would forge, ending in a torn line that an accepted
/// journal's open would cut.
const FORGED: &str = "{\"at\":1,\"event\":\"stopped\"}\n{\"at\":2,\"event\":\"sto";

/// Owner, mode and content of a file.
fn state_of(path: &Path) -> (u32, u32, Vec<u8>) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    (
        meta.uid(),
        meta.mode() & 0o7777,
        std::fs::read(path).unwrap(),
    )
}

/// A directory and journal file as a user would prepare them for root:
/// `dir/state` 0777 and `dir/state/journal.jsonl` 0666 with forged lines,
/// owned by another user when the tests run as root.
fn users_journal(dir: &Path) -> std::path::PathBuf {
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    chmod(&state, 0o777);
    let path = state.join("journal.jsonl");
    std::fs::write(&path, FORGED).unwrap();
    chmod(&path, 0o666);
    if is_root() {
        std::os::unix::fs::chown(&state, Some(NOBODY), Some(NOBODY)).unwrap();
        std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    path
}

fn untrusted(e: JournalError) -> (String, String) {
    match e {
        JournalError::Untrusted { what, fix, .. } => (what, fix),
        other => panic!("expected a refusal, got {other}"),
    }
}

#[test]
fn a_checked_journal_in_a_directory_others_can_write_is_refused_untouched() {
    let dir = support::private_dir();
    let path = users_journal(dir.path());
    let before = state_of(&path);
    let uid = headroom::sys::this_process::effective_uid();
    let e = Journal::open_checked(&path, JournalOptions::default(), uid).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "refusing to write the journal {} as root: ",
            path.display()
        )),
        "{text}"
    );
    let (what, fix) = untrusted(e);
    let state = path.parent().unwrap().display().to_string();
    if is_root() {
        assert_eq!(
            what,
            format!("{state} is owned by uid {NOBODY}, not by root")
        );
    } else {
        assert_eq!(
            what,
            format!("{state} is writable by users other than root (mode 0777)")
        );
    }
    assert!(fix.contains(&format!("chown root:root {state}")), "{fix}");
    assert!(fix.contains("/var/lib/headroom/"), "{fix}");
    // Not cut, not appended to, not chmodded.
    assert_eq!(state_of(&path), before);
}

#[test]
fn a_checked_journal_file_a_user_made_is_refused_untouched() {
    let dir = support::private_dir();
    let path = dir.path().join("journal.jsonl");
    std::fs::write(&path, FORGED).unwrap();
    chmod(&path, 0o666);
    if is_root() {
        std::os::unix::fs::chown(&path, Some(NOBODY), None).unwrap();
    }
    let before = state_of(&path);
    let uid = headroom::sys::this_process::effective_uid();
    let (what, fix) =
        untrusted(Journal::open_checked(&path, JournalOptions::default(), uid).unwrap_err());
    let shown = path.display().to_string();
    if is_root() {
        assert_eq!(
            what,
            format!("{shown} is owned by uid {NOBODY}, not by root")
        );
    } else {
        assert_eq!(
            what,
            format!("{shown} is writable by users other than root (mode 0666)")
        );
    }
    assert!(fix.contains(&format!("rm {shown}")), "{fix}");
    assert!(
        fix.contains(&format!("chown root:root {shown} && chmod 600 {shown}")),
        "{fix}"
    );
    assert_eq!(state_of(&path), before);

    // Removed, as the message says: headroom makes its own.
    std::fs::remove_file(&path).unwrap();
    let mut j = Journal::open_checked(&path, JournalOptions::default(), uid).unwrap();
    j.append(&event(1)).unwrap();
    let (owner, mode, _) = state_of(&path);
    assert_eq!((owner, mode), (uid, 0o600));
    assert_eq!(ats(&read_events(&path, None).unwrap().events), [1]);
}

#[test]
fn a_checked_journal_that_is_a_link_is_refused_and_its_target_untouched() {
    let dir = support::private_dir();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "root's file\n").unwrap();
    let path = dir.path().join("journal.jsonl");
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    let uid = headroom::sys::this_process::effective_uid();
    let (what, fix) =
        untrusted(Journal::open_checked(&path, JournalOptions::default(), uid).unwrap_err());
    assert_eq!(what, format!("{} is a symbolic link", path.display()));
    assert!(fix.contains("rm "), "{fix}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file\n");
}

#[test]
fn a_checked_journal_is_created_private_in_a_new_directory() {
    let dir = support::private_dir();
    let path = dir.path().join("a/b/journal.jsonl");
    let uid = headroom::sys::this_process::effective_uid();
    let mut j = Journal::open_checked(&path, JournalOptions::default(), uid).unwrap();
    j.append(&event(7)).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&dir.path().join("a")), 0o700);
    assert_eq!(mode(&dir.path().join("a/b")), 0o700);
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn rotation_does_not_write_through_a_link_at_a_rotated_name() {
    let dir = support::private_dir();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me\n").unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let path = logs.join("journal.jsonl");
    for n in 1..=3 {
        std::os::unix::fs::symlink(&victim, logs.join(format!("journal.jsonl.{n}"))).unwrap();
    }
    let line_len = serde_json::to_string(&event(100)).unwrap().len() as u64 + 1;
    let uid = headroom::sys::this_process::effective_uid();
    let mut j = Journal::open_checked(&path, opts(line_len, 3), uid).unwrap();
    for at in 100..110 {
        j.append(&event(at)).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
    // The links were renamed over or removed, never followed.
    for n in 1..=2 {
        let meta = std::fs::symlink_metadata(logs.join(format!("journal.jsonl.{n}"))).unwrap();
        assert!(meta.is_file(), "journal.jsonl.{n} is still a link");
    }
    assert_eq!(
        ats(&read_events(&path, None).unwrap().events),
        [107, 108, 109]
    );
}

/// `taken_at` of the daemon's latest snapshot, from its API.
fn taken_at(addr: std::net::SocketAddr) -> u64 {
    let (status, body) = support::get(&format!("http://{addr}/api/v1/snapshot"));
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["taken_at"]
        .as_u64()
        .unwrap_or_else(|| panic!("no taken_at in {body}"))
}

#[test]
fn a_root_daemon_refuses_a_journal_a_user_prepared_and_samples_on() {
    let dir = support::private_dir();
    let path = users_journal(dir.path());
    let before = state_of(&path);
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval = \"100ms\"\nfast_interval = \"50ms\"\njournal = \"{}\"\n",
            path.display()
        ),
    )
    .unwrap();
    chmod(&config, 0o644);
    let mut d = Running::daemon(&["run", "--config", config.to_str().unwrap()]);
    let addr = d.http_addr();
    d.expect_line("first sample:");
    if is_root() {
        let refused = d
            .seen
            .iter()
            .find(|l| l.contains("refusing to write the journal"))
            .cloned()
            .unwrap_or_else(|| d.expect_line("refusing to write the journal"));
        assert!(refused.contains(&path.display().to_string()), "{refused}");
        assert!(
            refused.contains(&format!("is owned by uid {NOBODY}, not by root")),
            "{refused}"
        );
        assert!(
            refused.contains("events are kept in memory only"),
            "{refused}"
        );
    }
    // Sampling goes on.
    let first = taken_at(addr);
    support::wait_for(Duration::from_secs(10), "a later sample", || {
        (taken_at(addr) > first).then_some(())
    });
    // The refusal is visible where monitoring looks: /healthz and /metrics.
    let (_, health) = support::get(&format!("http://{addr}/healthz"));
    let health: serde_json::Value = serde_json::from_str(&health).unwrap();
    let (_, metrics) = support::get(&format!("http://{addr}/metrics"));
    if is_root() {
        let why = health["journal_error"].as_str().unwrap_or_default();
        assert!(why.contains(&path.display().to_string()), "{health}");
        assert!(
            metrics.contains("headroom_collector_up{collector=\"journal\"} 0"),
            "{metrics}"
        );
        assert!(
            !metrics.contains("headroom_journal_unwritten_events_total 0\n"),
            "the started event was not written: {metrics}"
        );
    } else {
        assert!(health["journal_error"].is_null(), "{health}");
        assert!(metrics.contains("headroom_collector_up{collector=\"journal\"} 1"));
    }
    d.signal("TERM");
    assert_eq!(
        d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(0)
    );
    if is_root() {
        // Not one byte of root's: no started or stopped event, no cut.
        assert_eq!(state_of(&path), before);
    } else {
        // A user's daemon writes its user's own journal.
        let (_, _, now) = state_of(&path);
        assert!(now.len() > before.2.len());
    }
}
