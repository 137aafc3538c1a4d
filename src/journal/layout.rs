//! The journal's two file sets, and reading them as one.
//!
//! The journal at `journal.jsonl` (the `[daemon] journal` path) is two sets
//! of rotated files in the same directory, each rotated on its own
//! ([`JournalOptions`] apply to each):
//!
//! - the **record**, `journal.jsonl` (`.1`, `.2`, ...): what headroom did
//!   and how it ran: actions, skipped steps, and the daemon's start, stop
//!   and reloads ([`FileSet::Record`]). Their number follows from the rules
//!   (a ladder's steps per crossing, cooldowns), not from how many
//!   processes anyone starts;
//! - the **process events**, `journal.processes.jsonl` (`.1`, `.2`, ...):
//!   what happened to processes: post-mortems, limits crossed, held and
//!   cleared ([`FileSet::Processes`]). Each user gets a share of them
//!   ([`super::shares`]).
//!
//! However many processes a user starts and ends, their post-mortems
//! rotate only the process-event files: the record keeps every action and
//! configuration event for as long as its own files last.
//!
//! [`read_events`] reads both sets and merges them by time, so readers
//! (`headroom events`, the tests' replay of a journal) see one journal; a
//! journal written before the split is one set, read as before.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};

use super::{Journal, JournalError, JournalOptions, ReadOutcome, read_file_set};
use crate::event::{Event, EventKind};
use crate::model::Timestamp;

/// Which of the journal's file sets an event goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileSet {
    /// Actions, skipped steps, the daemon's start, stop and reloads.
    Record,
    /// Post-mortems, limits crossed, held and cleared.
    Processes,
}

impl FileSet {
    /// Where `kind` is written.
    pub fn of(kind: &EventKind) -> Self {
        match kind {
            EventKind::Started { .. }
            | EventKind::Stopped
            | EventKind::ConfigReloaded { .. }
            | EventKind::Action { .. }
            | EventKind::Skipped { .. } => FileSet::Record,
            EventKind::LimitCrossed { .. }
            | EventKind::LimitHeldNotActing { .. }
            | EventKind::LimitCleared { .. }
            | EventKind::Exited { .. }
            | EventKind::EventsSummarized { .. } => FileSet::Processes,
        }
    }
}

/// The current file of the process events next to the record at `path`:
/// `journal.processes.jsonl` for `journal.jsonl`, `j.processes` for `j`.
pub fn processes_path(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().as_bytes();
    // The last dot that is not the first byte starts the extension.
    let (stem, ext) = match name.iter().rposition(|&b| b == b'.') {
        Some(i) if i > 0 => name.split_at(i),
        _ => (name, &b""[..]),
    };
    let mut new = stem.to_vec();
    new.extend_from_slice(b".processes");
    new.extend_from_slice(ext);
    path.with_file_name(OsString::from_vec(new))
}

/// Both file sets open for appending.
#[derive(Debug)]
pub struct Journals {
    record: Journal,
    processes: Journal,
    /// Mark every line as a replay's ([`Journals::marked_as_replay`]).
    replay: bool,
}

/// An event as a replay writes it: `"replay":true` first, then the event.
#[derive(serde::Serialize)]
struct Replayed<'a> {
    replay: bool,
    #[serde(flatten)]
    event: &'a Event,
}

impl Journals {
    /// [`Journal::open`] for both sets of the journal at `path`.
    pub fn open(path: &Path, opts: JournalOptions) -> Result<Self, JournalError> {
        Ok(Self {
            record: Journal::open(path, opts)?,
            processes: Journal::open(&processes_path(path), opts)?,
            replay: false,
        })
    }

    /// [`Journal::open_checked`] for both sets of the journal at `path`.
    pub fn open_checked(
        path: &Path,
        opts: JournalOptions,
        trusted_uid: u32,
    ) -> Result<Self, JournalError> {
        Ok(Self {
            record: Journal::open_checked(path, opts, trusted_uid)?,
            processes: Journal::open_checked(&processes_path(path), opts, trusted_uid)?,
            replay: false,
        })
    }

    /// Write every event with `"replay": true` (a replayed trace's events),
    /// so that no line of a replay's journal reads as this machine's.
    pub fn marked_as_replay(mut self) -> Self {
        self.replay = true;
        self
    }

    /// Append `e` to its file set ([`FileSet::of`]) and make it durable.
    pub fn append(&mut self, e: &Event) -> Result<(), JournalError> {
        let file = match FileSet::of(&e.kind) {
            FileSet::Record => &mut self.record,
            FileSet::Processes => &mut self.processes,
        };
        if self.replay {
            file.append(&Replayed {
                replay: true,
                event: e,
            })
        } else {
            file.append(e)
        }
    }
}

/// Read the journal at `path`, both file sets, each oldest first, merged by
/// time, keeping events at or after `since`. At the same time the process
/// events come first: a limit crossed before the action it set off, a
/// summary before the stop that wrote it. Torn last lines are
/// skipped and counted, corrupt lines counted and the first reported, as
/// [`read_file_set`] does; neither is an error.
pub fn read_events(path: &Path, since: Option<Timestamp>) -> Result<ReadOutcome, JournalError> {
    let record = read_file_set(path, since)?;
    let processes = read_file_set(&processes_path(path), since)?;
    Ok(merge(record, processes))
}

/// One outcome of two: events merged by time, each side's order kept.
pub(super) fn merge(record: ReadOutcome, processes: ReadOutcome) -> ReadOutcome {
    let mut events = Vec::with_capacity(record.events.len() + processes.events.len());
    let mut a = record.events.into_iter().peekable();
    let mut b = processes.events.into_iter().peekable();
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.at < y.at,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_a { a.next() } else { b.next() };
        events.extend(next);
    }
    let mut files = record.files;
    files.extend(processes.files);
    ReadOutcome {
        events,
        files,
        torn: record.torn + processes.torn,
        corrupt: record.corrupt + processes.corrupt,
        first_corrupt: record.first_corrupt.or(processes.first_corrupt),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_events_sit_next_to_the_record() {
        let p = |s: &str| processes_path(Path::new(s));
        assert_eq!(
            p("/var/lib/headroom/journal.jsonl"),
            Path::new("/var/lib/headroom/journal.processes.jsonl")
        );
        assert_eq!(p("/j/events"), Path::new("/j/events.processes"));
        assert_eq!(p("/j/.journal"), Path::new("/j/.journal.processes"));
        assert_eq!(p("/j/a.b.jsonl"), Path::new("/j/a.b.processes.jsonl"));
        assert_eq!(p("journal.jsonl"), Path::new("journal.processes.jsonl"));
    }

    #[test]
    fn the_process_events_are_not_rotated_files_of_the_record() {
        let dir = tempfile::tempdir().unwrap();
        for path in ["j", "j.jsonl"] {
            let record = dir.path().join(path);
            let processes = processes_path(&record);
            std::fs::write(&processes, "").unwrap();
            let mut rotated = processes.into_os_string();
            rotated.push(".1");
            std::fs::write(&rotated, "").unwrap();
            assert!(super::super::rotated_files(&record).is_empty(), "{path}");
        }
    }

    #[test]
    fn actions_and_the_daemons_own_events_go_to_the_record() {
        let record = [
            r#"{"event":"started","version":"1","config":null,"dry_run":false}"#,
            r#"{"event":"stopped"}"#,
            r#"{"event":"config-reloaded","path":"/c","error":null}"#,
        ];
        for json in record {
            let kind: EventKind = serde_json::from_str(json).unwrap();
            assert_eq!(FileSet::of(&kind), FileSet::Record, "{json}");
        }
        let summary: EventKind = serde_json::from_str(
            r#"{"event":"events-summarized","uid":1,"user":null,"since":0,"written":1,"left_out":{}}"#,
        )
        .unwrap();
        assert_eq!(FileSet::of(&summary), FileSet::Processes);
    }

    fn events(ats: &[u64], kind: &EventKind) -> ReadOutcome {
        ReadOutcome {
            events: ats
                .iter()
                .map(|&at| Event {
                    at: Timestamp(at),
                    kind: kind.clone(),
                })
                .collect(),
            ..ReadOutcome::default()
        }
    }

    #[test]
    fn a_merge_orders_by_time_and_keeps_each_sides_order() {
        let stopped = EventKind::Stopped;
        let summary: EventKind = serde_json::from_str(
            r#"{"event":"events-summarized","uid":1,"user":null,"since":0,"written":1,"left_out":{}}"#,
        )
        .unwrap();
        // The process events' 5 before the record's 5; a side that is out
        // of order (a post-mortem dated at its end) stays as written.
        let merged = merge(
            events(&[1, 5, 9], &stopped),
            events(&[2, 5, 4, 10], &summary),
        );
        let got: Vec<(u64, bool)> = merged
            .events
            .iter()
            .map(|e| (e.at.0, e.kind == stopped))
            .collect();
        assert_eq!(
            got,
            [
                (1, true),
                (2, false),
                (5, false),
                (4, false),
                (5, true),
                (9, true),
                (10, false)
            ]
        );
    }
}
