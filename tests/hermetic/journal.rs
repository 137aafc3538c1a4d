//! The journal on a real file system: round trips, torn and corrupt lines,
//! rotation (also after a rotation cut short), `since`, and permissions.
//! A journal in a directory or file that others can write, or a link, is
//! refused by `Journal::open_checked` and left untouched, whoever runs the
//! tests; the same journal owned by another user, and the real root daemon
//! refusing it, are in the environment tier (`tests/environment/journal.rs`).

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use headroom::event::{Event, EventKind};
use headroom::journal::{Journal, JournalOptions, read_events};
use headroom::model::Timestamp;

use crate::support;
use crate::support::journal::{
    FORGED, assert_refused_untouched, prepared_journal, state_of, untrusted,
};

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

#[test]
fn a_checked_journal_in_a_directory_others_can_write_is_refused_untouched() {
    let dir = support::private_dir();
    let path = prepared_journal(dir.path(), None);
    assert_refused_untouched(
        &path,
        headroom::os::this_process::effective_uid(),
        "is writable by users other than root (mode 0777)",
    );
}

#[test]
fn a_checked_journal_file_others_can_write_is_refused_untouched() {
    let dir = support::private_dir();
    let path = dir.path().join("journal.jsonl");
    std::fs::write(&path, FORGED).unwrap();
    support::chmod(&path, 0o666);
    let before = state_of(&path);
    let uid = headroom::os::this_process::effective_uid();
    let (what, fix) =
        untrusted(Journal::open_checked(&path, JournalOptions::default(), uid).unwrap_err());
    let shown = path.display().to_string();
    assert_eq!(
        what,
        format!("{shown} is writable by users other than root (mode 0666)")
    );
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
    let uid = headroom::os::this_process::effective_uid();
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
    let uid = headroom::os::this_process::effective_uid();
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
    let uid = headroom::os::this_process::effective_uid();
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
