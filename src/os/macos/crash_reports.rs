//! Finding the reports of processes that just ended: crash reports and
//! JetsamEvent reports (compiled on every OS: plain files, tested on Linux
//! with real reports in a temporary directory).
//!
//! [`CrashReportScanner::scan`] lists the report directories
//! ([`report_dirs`]) and looks at each `.ips` file written since the daemon
//! started that it has not read yet (at most [`MAX_NEW_PER_SCAN`] a scan):
//! [`look`] reads its first line alone and decides by its `bug_type`
//! ([`super::parse::report_kind`]). A crash report is parsed
//! ([`super::parse::crash_report::parse_ips`]) into a [`Crash`]; a
//! JetsamEvent report ([`super::parse::jetsam_report`]) into a
//! [`MemoryKill`] per killed process, so that a jetsam kill has its cause
//! without `log stream`; the post-mortems match both to the dead by pid and
//! name. Every other kind (stackshots, panics, resource reports) is
//! counted as skipped, never as an error, and files other than `.ips`
//! (`.diag`, `.spin`, `.shutdownStall`) are not opened.
//!
//! A report still being written (an empty file, a header not ended, JSON
//! that ends early) is not remembered as read: it is looked at again on
//! later scans, re-read only when its size or modification time changed,
//! until it parses or [`RETRY_FOR`] after it was first seen, and only then
//! counted as an error.
//!
//! The files in a user's `~/Library/Logs/DiagnosticReports` are that
//! user's: they are read with [`crate::regular_file::read_untrusted`] (no
//! links followed, no FIFO opened, at most
//! [`super::parse::crash_report::MAX_REPORT_BYTES`] or
//! [`super::parse::jetsam_report::MAX_JETSAM_REPORT_BYTES`]), and a report
//! is believed only about that user's own processes: a crash report's
//! `userID` must be the file's owner, and the kills of a JetsamEvent report
//! in a file not owned by root are restricted to its owner's processes
//! (the report names no user), unless root owns the file. A file of a kind
//! read here that cannot be used is counted and its reason kept, never
//! guessed at; one this user may not read is counted apart, with why.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::parse::crash_report::{CrashReport, IpsError, MAX_REPORT_BYTES, parse_ips};
use super::parse::jetsam_report::{
    JetsamReport, JetsamReportError, MAX_JETSAM_REPORT_BYTES, parse_jetsam_event,
};
use super::parse::post_mortem_sources::jetsam_report_kills;
use super::parse::report_kind::{Head, MAX_HEADER_BYTES, ReportKind, kind_of_head, opened_by_name};
use crate::model::Timestamp;
use crate::model::exit::{Crash, MemoryKill};

/// Reports read in one scan, at most; the rest wait for the next.
pub const MAX_NEW_PER_SCAN: usize = 64;
/// Directory entries looked at in one directory, at most.
const MAX_ENTRIES: usize = 4096;
/// Home directories looked at, at most.
const MAX_USERS: usize = 256;
/// Report paths remembered as read.
const MAX_SEEN: usize = 4096;
/// How long a report still being written is looked at again after it was
/// first seen, before it counts as an error.
pub const RETRY_FOR: Duration = Duration::from_secs(30);
/// Reports being written that are waited for at once, at most; past that
/// a new one that does not parse is an error at once.
const MAX_PENDING: usize = 64;

/// The directories ReportCrash writes to that this process may read: the
/// system's, and as root every user's under `users` (normally `/Users`);
/// otherwise this user's (`home`).
pub fn report_dirs(system: &Path, users: &Path, home: Option<&Path>, root: bool) -> Vec<PathBuf> {
    let mut dirs = vec![system.to_path_buf()];
    let tail = Path::new("Library/Logs/DiagnosticReports");
    if root {
        if let Ok(entries) = std::fs::read_dir(users) {
            dirs.extend(
                entries
                    .map_while(Result::ok)
                    .take(MAX_USERS)
                    .map(|e| e.path().join(tail)),
            );
        }
    } else if let Some(home) = home {
        dirs.push(home.join(tail));
    }
    dirs
}

/// What one report file is, once looked at ([`look`]).
#[derive(Debug)]
pub enum Look {
    /// A crash report, and the owner of the file read.
    Crash { report: CrashReport, owner: u32 },
    /// A JetsamEvent report, and the owner of the file read.
    Jetsam { report: JetsamReport, owner: u32 },
    /// A kind not read here (or not a report at all): why.
    Skipped(String),
    /// Not complete yet (being written): why; to be looked at again.
    Incomplete(String),
    /// This user may not read it: why.
    Unreadable(String),
    /// A report of a kind read here that cannot be used: why.
    Failed(String),
}

/// Look at one `.ips` file: its first line, then, for a kind read here,
/// the whole report (bounded, links refused).
pub fn look(path: &Path) -> Look {
    let (head, meta) = match crate::regular_file::read_untrusted_prefix(path, MAX_HEADER_BYTES) {
        Ok((head, meta, _)) => (head, meta),
        Err(e) => return unread(&e),
    };
    let whole = meta.len() <= head.len() as u64;
    let kind = match kind_of_head(&head, whole) {
        Head::Read(kind) => kind,
        Head::Skipped(bug_type) => {
            return Look::Skipped(format!("a report of another kind (bug_type {bug_type})"));
        }
        Head::NotAReport(why) => return Look::Skipped(why),
        Head::Incomplete(why) => return Look::Incomplete(why.to_string()),
    };
    let (bytes, owner) = if whole {
        (head, meta.uid())
    } else {
        let max = match kind {
            ReportKind::Crash => MAX_REPORT_BYTES,
            ReportKind::JetsamEvent => MAX_JETSAM_REPORT_BYTES,
        };
        match crate::regular_file::read_untrusted(path, max) {
            Ok((bytes, meta)) => (bytes, meta.uid()),
            Err(e) => return unread(&e),
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    match kind {
        ReportKind::Crash => match parse_ips(&text) {
            Ok(report) => Look::Crash { report, owner },
            Err(e @ (IpsError::Truncated(_) | IpsError::Empty)) => Look::Incomplete(e.to_string()),
            Err(e) => Look::Failed(e.to_string()),
        },
        ReportKind::JetsamEvent => match parse_jetsam_event(&text) {
            Ok(report) => Look::Jetsam { report, owner },
            Err(e @ JetsamReportError::Truncated(_)) => Look::Incomplete(e.to_string()),
            Err(e) => Look::Failed(e.to_string()),
        },
    }
}

/// What a failed open or read means.
fn unread(e: &std::io::Error) -> Look {
    match e.kind() {
        ErrorKind::PermissionDenied => Look::Unreadable(e.to_string()),
        // Removed (or rotated into `Retired/`) between listing and reading.
        ErrorKind::NotFound => Look::Skipped("removed before it was read".to_string()),
        _ => Look::Failed(e.to_string()),
    }
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct Found {
    pub crashes: Vec<Crash>,
    /// Jetsam kills from JetsamEvent reports.
    pub kills: Vec<MemoryKill>,
}

/// A report still being written, waited for.
#[derive(Debug)]
struct Pending {
    first_seen: Timestamp,
    len: u64,
    modified: Option<SystemTime>,
    why: String,
}

/// See the module documentation.
#[derive(Debug)]
pub struct CrashReportScanner {
    dirs: Vec<PathBuf>,
    since: SystemTime,
    seen: HashSet<PathBuf>,
    seen_order: VecDeque<PathBuf>,
    pending: HashMap<PathBuf, Pending>,
    /// Reports of a kind read here that could not be used, since the
    /// scanner was made.
    pub errors: u64,
    /// The last of them, and why.
    pub last_error: Option<String>,
    /// `.ips` files of other kinds (stackshots, panics, …), not read.
    pub skipped: u64,
    /// Files this user may not read, and the last of them with why.
    pub unreadable: u64,
    pub last_unreadable: Option<String>,
    /// JetsamEvent reports read.
    pub jetsam_reports: u64,
}

impl CrashReportScanner {
    /// Scan `dirs` for reports written at or after `since`.
    pub fn new(dirs: Vec<PathBuf>, since: SystemTime) -> Self {
        Self {
            dirs,
            since,
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            pending: HashMap::new(),
            errors: 0,
            last_error: None,
            skipped: 0,
            unreadable: 0,
            last_unreadable: None,
            jetsam_reports: 0,
        }
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Reports being written, waited for.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The crashes and jetsam kills reported since the last scan; `read_at`
    /// stamps them and times the wait for reports being written.
    pub fn scan(&mut self, read_at: Timestamp) -> Found {
        let mut out = Found::default();
        let mut budget = MAX_NEW_PER_SCAN;
        // Reports waited for that are still there.
        let mut listed: HashSet<PathBuf> = HashSet::new();
        for dir in self.dirs.clone() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.map_while(Result::ok).take(MAX_ENTRIES) {
                if budget == 0 {
                    return out;
                }
                let path = entry.path();
                let named = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(opened_by_name);
                if !named || self.seen.contains(&path) {
                    continue;
                }
                let Ok(meta) = entry.metadata() else {
                    continue;
                };
                if meta.modified().is_ok_and(|m| m < self.since) {
                    // Older than the daemon: never read, never looked at again.
                    self.remember(path);
                    continue;
                }
                let modified = meta.modified().ok();
                if self.pending.contains_key(&path) {
                    listed.insert(path.clone());
                }
                if let Some(p) = self.pending.get(&path)
                    && p.len == meta.len()
                    && p.modified == modified
                {
                    // Unchanged since the last look: not read again.
                    if read_at.since(p.first_seen) >= RETRY_FOR {
                        let why = format!(
                            "still incomplete {} s after it appeared: {}",
                            RETRY_FOR.as_secs(),
                            p.why
                        );
                        self.pending.remove(&path);
                        self.remember(path.clone());
                        self.fail(&path, &why);
                    }
                    continue;
                }
                budget -= 1;
                match look(&path) {
                    Look::Incomplete(why) => {
                        listed.insert(path.clone());
                        self.wait_for(path, &meta, read_at, why);
                    }
                    done => {
                        self.pending.remove(&path);
                        self.remember(path.clone());
                        self.take(done, &path, read_at, &mut out);
                    }
                }
            }
        }
        // A report waited for that is gone (removed, or renamed into a
        // name of its own) is no longer waited for.
        self.pending.retain(|path, _| listed.contains(path));
        out
    }

    /// A report being written: looked at again until [`RETRY_FOR`] after
    /// it was first seen.
    fn wait_for(&mut self, path: PathBuf, meta: &std::fs::Metadata, now: Timestamp, why: String) {
        let first_seen = self.pending.get(&path).map_or(now, |p| p.first_seen);
        if now.since(first_seen) >= RETRY_FOR
            || (!self.pending.contains_key(&path) && self.pending.len() >= MAX_PENDING)
        {
            self.pending.remove(&path);
            self.remember(path.clone());
            let why = format!(
                "still incomplete {} s after it appeared: {why}",
                now.since(first_seen).as_secs()
            );
            self.fail(&path, &why);
            return;
        }
        self.pending.insert(
            path,
            Pending {
                first_seen,
                len: meta.len(),
                modified: meta.modified().ok(),
                why,
            },
        );
    }

    /// Take what a finished look found.
    fn take(&mut self, look: Look, path: &Path, read_at: Timestamp, out: &mut Found) {
        match look {
            Look::Crash { report, owner } => match believed(&report, owner) {
                Ok(()) => out.crashes.push(crash_of(&report, path, read_at)),
                Err(why) => self.fail(path, &why),
            },
            Look::Jetsam { report, owner } => {
                self.jetsam_reports += 1;
                out.kills.extend(jetsam_report_kills(
                    &report,
                    &path.display().to_string(),
                    kills_restricted_to(owner),
                    read_at,
                ));
            }
            Look::Skipped(_) => self.skipped += 1,
            Look::Unreadable(why) => {
                self.unreadable += 1;
                self.last_unreadable = Some(format!("{}: {why}", path.display()));
            }
            Look::Failed(why) | Look::Incomplete(why) => self.fail(path, &why),
        }
    }

    fn remember(&mut self, path: PathBuf) {
        if self.seen_order.len() >= MAX_SEEN
            && let Some(old) = self.seen_order.pop_front()
        {
            self.seen.remove(&old);
        }
        self.seen.insert(path.clone());
        self.seen_order.push_back(path);
    }

    fn fail(&mut self, path: &Path, why: &str) {
        self.errors += 1;
        self.last_error = Some(format!("{}: {why}", path.display()));
    }
}

/// Whose processes a JetsamEvent report in a file of `owner` may name: any
/// (`None`) where root wrote it; otherwise the owner's alone (the report
/// names no user, so a user's file is believed only about that user).
fn kills_restricted_to(owner: u32) -> Option<u32> {
    (owner != 0).then_some(owner)
}

/// A report is about its writer's own processes: a user's file about
/// another user's process is refused.
fn believed(report: &CrashReport, owner: u32) -> Result<(), String> {
    match report.uid {
        _ if owner == 0 => Ok(()),
        Some(uid) if uid == owner => Ok(()),
        Some(uid) => Err(format!(
            "a report about uid {uid}'s process in a file owned by uid {owner}: refused"
        )),
        None => Err(format!(
            "a report with no userID in a file owned by uid {owner}: refused"
        )),
    }
}

/// The [`Crash`] a report tells of.
pub fn crash_of(report: &CrashReport, path: &Path, read_at: Timestamp) -> Crash {
    let mut notes = Vec::new();
    if report.translated == Some(true) {
        notes.push(format!(
            "it ran translated by Rosetta ({} code on Apple silicon)",
            report.cpu_type.as_deref().unwrap_or("x86_64")
        ));
    }
    if let Some(own) = &report.first_own_library {
        notes.push(format!(
            "the first frame of the crashing thread outside macOS's own libraries is in {own}"
        ));
    }
    notes.extend(report.messages.iter().take(3).map(|m| {
        format!(
            "the report says: {}",
            m.chars().take(300).collect::<String>()
        )
    }));
    let fault = match (&report.exception, &report.signal, &report.subtype) {
        (Some(e), Some(s), Some(sub)) => format!("{e} ({s}): {sub}"),
        (Some(e), Some(s), None) => format!("{e} ({s})"),
        (Some(e), None, _) => e.clone(),
        (None, Some(s), _) => s.clone(),
        (None, None, _) => "a crash".to_string(),
    };
    Crash {
        pid: report.pid,
        name: report.name.clone(),
        uid: report.uid,
        thread: None,
        signal: report.signal.clone(),
        fault,
        library: report.library.clone(),
        source: path.display().to_string(),
        message: format!(
            "{} [{}] {}{}",
            report.name,
            report.pid,
            report.exception.as_deref().unwrap_or("crash"),
            report
                .captured
                .as_deref()
                .map(|c| format!(" at {c}"))
                .unwrap_or_default()
        ),
        notes,
        memory: report.gpu_out_of_memory().map(|m| {
            format!(
                "its Metal command buffer failed for want of GPU memory (the report says: {})",
                m.chars().take(300).collect::<String>()
            )
        }),
        read_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROSETTA_SIGILL: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ips/monero-gui-3806-translated-sigill.ips"
    ));
    const PYTHON_SIGABRT: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ips/suzuki-analyze2-python-sigabrt.ips"
    ));
    /// wifianalyticsd killed at its high-water mark (faisalmemon/ios-crash-dump-analysis-book,
    /// markdown/SystemDiagnostics.md; tests/fixtures/ips/README.md).
    const JETSAM_HIGHWATER: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ips/JetsamEvent-wifianalyticsd-highwater.ips"
    ));
    /// A header naming bug_type 385, the kind of the report posted in
    /// Lessica/TrollRecorder#76 (not read here).
    const OTHER_KIND: &str = "{\"bug_type\":\"385\",\"timestamp\":\"2024-06-16 13:00:26.00 +0700\"}\n{\n  \"procName\" : \"TRCallMonitor\",\n  \"bug_type\" : \"385\"\n}\n";

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    fn me() -> u32 {
        crate::os::this_process::effective_uid()
    }

    /// The report with its userID set to whoever runs the tests (the
    /// owner of the files they write).
    fn owned(text: &str) -> String {
        text.replacen("\"userID\" : 501", &format!("\"userID\" : {}", me()), 1)
    }

    #[test]
    fn new_reports_are_read_once_each() {
        let dir = dir_with(&[
            (
                "monero-wallet-gui-2021-12-15-115109.ips",
                &owned(ROSETTA_SIGILL),
            ),
            ("Python-2026-08-16-151218.ips", &owned(PYTHON_SIGABRT)),
            ("notes.txt", "not a report"),
        ]);
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        let mut crashes = scanner.scan(Timestamp(5)).crashes;
        crashes.sort_by_key(|c| c.pid);
        assert_eq!(crashes.len(), 2, "{crashes:#?}");
        let sigill = &crashes[0];
        assert_eq!(
            (sigill.pid, sigill.name.as_str()),
            (5657, "monero-wallet-gui")
        );
        assert_eq!(sigill.signal.as_deref(), Some("SIGILL"));
        assert_eq!(sigill.fault, "EXC_BAD_INSTRUCTION (SIGILL)");
        assert!(
            sigill.notes[0].starts_with("it ran translated by Rosetta (X86-64 code"),
            "{:?}",
            sigill.notes
        );
        assert!(
            sigill
                .source
                .ends_with("monero-wallet-gui-2021-12-15-115109.ips")
        );
        let abort = &crashes[1];
        assert_eq!(abort.library.as_deref(), Some("libsystem_kernel.dylib"));
        assert!(
            abort
                .notes
                .iter()
                .any(|n| n.ends_with("is in _tkinter.cpython-39-darwin.so"))
        );
        assert_eq!(abort.read_at, Timestamp(5));
        assert!(scanner.scan(Timestamp(6)).crashes.is_empty(), "read once");
        assert_eq!(scanner.errors, 0);
    }

    #[test]
    fn reports_older_than_the_scanner_are_skipped() {
        let dir = dir_with(&[("old.ips", &owned(ROSETTA_SIGILL))]);
        let later = SystemTime::now() + std::time::Duration::from_secs(3600);
        let mut scanner = CrashReportScanner::new(vec![dir.path().to_path_buf()], later);
        assert!(scanner.scan(Timestamp(0)).crashes.is_empty());
    }

    #[test]
    fn a_report_that_stays_truncated_is_retried_then_counted_with_its_reason() {
        let cut = &ROSETTA_SIGILL[..ROSETTA_SIGILL.len() / 3];
        let dir = dir_with(&[("cut.ips", cut)]);
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        assert!(scanner.scan(Timestamp(1_000)).crashes.is_empty());
        assert_eq!((scanner.errors, scanner.pending()), (0, 1), "waited for");
        // Unchanged ten seconds later: still waited for, not read again.
        assert!(scanner.scan(Timestamp(11_000)).crashes.is_empty());
        assert_eq!((scanner.errors, scanner.pending()), (0, 1));
        // Thirty seconds after it appeared: an error, with why.
        assert!(scanner.scan(Timestamp(31_000)).crashes.is_empty());
        assert_eq!((scanner.errors, scanner.pending()), (1, 0));
        let why = scanner.last_error.clone().unwrap();
        assert!(
            why.contains("cut.ips")
                && why.contains("still incomplete 30 s after it appeared")
                && why.contains("ends before its JSON does"),
            "{why}"
        );
        assert!(scanner.scan(Timestamp(40_000)).crashes.is_empty());
        assert_eq!(scanner.errors, 1, "counted once");
    }

    #[test]
    fn a_report_still_being_written_is_read_once_it_is_complete() {
        let full = owned(ROSETTA_SIGILL);
        let dir = dir_with(&[("monero-wallet-gui.ips", "")]);
        let path = dir.path().join("monero-wallet-gui.ips");
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        // Empty, then the header alone, then half the body: each waited for.
        assert!(scanner.scan(Timestamp(0)).crashes.is_empty());
        std::fs::write(&path, &full[..full.find('\n').unwrap()]).unwrap();
        assert!(scanner.scan(Timestamp(1_000)).crashes.is_empty());
        std::fs::write(&path, &full[..full.len() / 2]).unwrap();
        assert!(scanner.scan(Timestamp(2_000)).crashes.is_empty());
        assert_eq!((scanner.errors, scanner.pending()), (0, 1));
        std::fs::write(&path, &full).unwrap();
        let crashes = scanner.scan(Timestamp(3_000)).crashes;
        assert_eq!(crashes.len(), 1, "{:?}", scanner.last_error);
        assert_eq!(crashes[0].pid, 5657);
        assert_eq!((scanner.errors, scanner.pending()), (0, 0));
    }

    #[test]
    fn a_report_waited_for_that_is_removed_is_no_longer_waited_for() {
        let dir = dir_with(&[("gone.ips", "")]);
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        scanner.scan(Timestamp(0));
        assert_eq!(scanner.pending(), 1);
        std::fs::remove_file(dir.path().join("gone.ips")).unwrap();
        scanner.scan(Timestamp(1_000));
        assert_eq!((scanner.pending(), scanner.errors), (0, 0));
    }

    #[test]
    fn reports_of_other_kinds_are_skipped_not_errors() {
        let dir = dir_with(&[
            ("TRCallMonitor-2024-06-16-130026.ips", OTHER_KIND),
            ("notes.ips", "Process: not an .ips header\n"),
            // Files of kinds that are not .ips are not opened at all.
            (
                "shutdown_stall_2026-05-15-204455_jimmym1.shutdownStall",
                "x",
            ),
            ("ResetCounter-2026-05-15-220955.diag", "x"),
            ("Python_2026-05-15-220000_mac.cpu_resource.diag", "x"),
        ]);
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        let found = scanner.scan(Timestamp(0));
        assert!(found.crashes.is_empty() && found.kills.is_empty());
        assert_eq!(scanner.errors, 0, "{:?}", scanner.last_error);
        assert_eq!((scanner.skipped, scanner.pending()), (2, 0));
        scanner.scan(Timestamp(1_000));
        assert_eq!(scanner.skipped, 2, "looked at once");
    }

    #[test]
    fn a_jetsam_event_report_gives_each_kill_with_its_reason() {
        let dir = dir_with(&[("JetsamEvent-2020-10-15-172958.ips", JETSAM_HIGHWATER)]);
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        let found = scanner.scan(Timestamp(7));
        assert_eq!((scanner.errors, scanner.jetsam_reports), (0, 1));
        assert_eq!(found.kills.len(), 1);
        let k = &found.kills[0];
        assert_eq!((k.pid, k.name.as_str()), (2527, "wifianalyticsd"));
        assert_eq!(k.scope, "it went over its high-water mark (highwater)");
        assert_eq!(k.resident_bytes, Some(382 * 16384));
        assert!(k.source.ends_with("JetsamEvent-2020-10-15-172958.ips"));
        assert!(k.message.contains("the largest process then: AppStore"));
        assert_eq!(k.read_at, Timestamp(7));
        // The file's owner: whoever runs the tests (root, as a daemon
        // would see a report the system wrote).
        assert_eq!(k.uid, kills_restricted_to(me()));
        assert!(scanner.scan(Timestamp(8)).kills.is_empty(), "read once");
    }

    #[test]
    fn a_user_s_jetsam_report_is_believed_only_about_that_user() {
        assert_eq!(kills_restricted_to(0), None, "root's: anyone's");
        assert_eq!(kills_restricted_to(501), Some(501));
        if me() != 0 {
            return;
        }
        // As root: a report in a file another user owns names only that
        // user's processes.
        let dir = dir_with(&[("JetsamEvent-forged.ips", JETSAM_HIGHWATER)]);
        let path = dir.path().join("JetsamEvent-forged.ips");
        std::os::unix::fs::chown(&path, Some(4242), None).unwrap();
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        let kills = scanner.scan(Timestamp(0)).kills;
        assert_eq!(kills.len(), 1);
        assert_eq!(kills[0].uid, Some(4242));
    }

    #[test]
    fn a_truncated_jetsam_event_report_is_waited_for() {
        let cut = &JETSAM_HIGHWATER[..JETSAM_HIGHWATER.len() / 2];
        let dir = dir_with(&[("JetsamEvent-x.ips", cut)]);
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        assert!(scanner.scan(Timestamp(0)).kills.is_empty());
        assert_eq!((scanner.errors, scanner.pending()), (0, 1));
        std::fs::write(dir.path().join("JetsamEvent-x.ips"), JETSAM_HIGHWATER).unwrap();
        assert_eq!(scanner.scan(Timestamp(1_000)).kills.len(), 1);
        assert_eq!((scanner.errors, scanner.pending()), (0, 0));
    }

    #[test]
    fn a_file_this_user_may_not_read_is_counted_apart() {
        let denied = std::io::Error::from(ErrorKind::PermissionDenied);
        assert!(matches!(unread(&denied), Look::Unreadable(_)));
        let gone = std::io::Error::from(ErrorKind::NotFound);
        assert!(matches!(unread(&gone), Look::Skipped(_)));
        let other = std::io::Error::from(ErrorKind::InvalidData);
        assert!(matches!(unread(&other), Look::Failed(_)));
    }

    #[test]
    fn a_report_about_another_users_process_is_refused() {
        if me() == 0 {
            // Root's files are believed about anyone: the rule concerns
            // users' own directories.
            assert!(believed(&parse_ips(ROSETTA_SIGILL).unwrap(), 0).is_ok());
            assert!(believed(&parse_ips(ROSETTA_SIGILL).unwrap(), 1000).is_err());
            return;
        }
        let dir = dir_with(&[("forged.ips", ROSETTA_SIGILL)]);
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        assert!(scanner.scan(Timestamp(0)).crashes.is_empty());
        assert!(scanner.last_error.unwrap().contains("refused"));
    }

    #[test]
    fn links_are_not_followed() {
        let dir = dir_with(&[]);
        let target = dir.path().join("real.txt");
        std::fs::write(&target, owned(ROSETTA_SIGILL)).unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("link.ips")).unwrap();
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        assert!(scanner.scan(Timestamp(0)).crashes.is_empty());
        assert!(scanner.last_error.unwrap().contains("symbolic link"));
    }

    /// On a Mac: a process that dies of SIGSEGV leaves a report that the
    /// scanner finds and matches to its pid.
    #[cfg(target_os = "macos")]
    #[test]
    fn a_real_crash_on_this_mac_is_found_by_its_pid() {
        let since = SystemTime::now();
        let status = std::process::Command::new("/bin/sh")
            .args(["-c", "kill -SEGV $$"])
            .status()
            .unwrap();
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        assert_eq!(signal, Some(libc::SIGSEGV));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let dirs = report_dirs(
            Path::new("/Library/Logs/DiagnosticReports"),
            Path::new("/Users"),
            home.as_deref(),
            me() == 0,
        );
        let mut scanner = CrashReportScanner::new(dirs, since);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        loop {
            let found = scanner
                .scan(Timestamp(0))
                .crashes
                .into_iter()
                .find(|c| c.name == "sh" && c.signal.as_deref() == Some("SIGSEGV"));
            if let Some(c) = found {
                assert!(c.source.ends_with(".ips"), "{c:?}");
                assert!(c.fault.starts_with("EXC_"), "{c:?}");
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no crash report for sh within 90 s (errors: {:?})",
                scanner.last_error
            );
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }

    /// On a Mac: every `.ips` file in the real report directories is read,
    /// skipped as another kind, waited for, or unreadable with a reason;
    /// none of a kind not read here is an error.
    #[cfg(target_os = "macos")]
    #[test]
    fn no_report_of_a_kind_not_read_is_an_error_on_this_mac() {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let dirs = report_dirs(
            Path::new("/Library/Logs/DiagnosticReports"),
            Path::new("/Users"),
            home.as_deref(),
            me() == 0,
        );
        let mut tally: HashMap<&str, usize> = HashMap::new();
        for dir in &dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.map_while(Result::ok).take(MAX_ENTRIES) {
                let path = entry.path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if !opened_by_name(name) {
                    *tally.entry("not opened").or_default() += 1;
                    continue;
                }
                if name.starts_with("JetsamEvent")
                    && let Ok(meta) = std::fs::symlink_metadata(&path)
                {
                    // Who may read the system's JetsamEvent reports.
                    eprintln!(
                        "{}: mode {:o}, uid {}, gid {}",
                        path.display(),
                        meta.mode() & 0o7777,
                        meta.uid(),
                        meta.gid()
                    );
                }
                let what = match look(&path) {
                    Look::Crash { .. } => "crash",
                    Look::Jetsam { .. } => "jetsam",
                    Look::Skipped(_) => "skipped",
                    Look::Incomplete(_) => "being written",
                    Look::Unreadable(why) => {
                        assert!(!why.is_empty(), "{}", path.display());
                        "unreadable"
                    }
                    Look::Failed(why) => {
                        let head =
                            crate::regular_file::read_untrusted_prefix(&path, MAX_HEADER_BYTES)
                                .map(|(h, _, _)| h)
                                .unwrap_or_default();
                        assert!(
                            matches!(kind_of_head(&head, false), Head::Read(_)),
                            "{} is not of a kind read here, yet an error: {why}",
                            path.display()
                        );
                        "failed"
                    }
                };
                *tally.entry(what).or_default() += 1;
            }
        }
        eprintln!("report files in {dirs:?}: {tally:?}");
        // The scanner the daemon runs: its last error, if any, is a report
        // of a kind read here.
        let mut scanner = CrashReportScanner::new(dirs, SystemTime::UNIX_EPOCH);
        for _ in 0..(MAX_SEEN / MAX_NEW_PER_SCAN) {
            scanner.scan(Timestamp::now());
        }
        if let Some(err) = &scanner.last_error {
            let path = Path::new(err.split(": ").next().unwrap_or(""));
            let head = crate::regular_file::read_untrusted_prefix(path, MAX_HEADER_BYTES)
                .map(|(h, _, _)| h)
                .unwrap_or_default();
            assert!(
                head.is_empty() || matches!(kind_of_head(&head, false), Head::Read(_)),
                "an error for a report of a kind not read here: {err}"
            );
        }
    }

    #[test]
    fn the_directories_are_the_systems_and_the_users() {
        let users = tempfile::tempdir().unwrap();
        std::fs::create_dir(users.path().join("ada")).unwrap();
        let system = Path::new("/Library/Logs/DiagnosticReports");
        let as_root = report_dirs(system, users.path(), None, true);
        assert_eq!(as_root[0], system);
        assert_eq!(
            as_root[1],
            users.path().join("ada/Library/Logs/DiagnosticReports")
        );
        let as_user = report_dirs(system, users.path(), Some(Path::new("/Users/bo")), false);
        assert_eq!(
            as_user[1],
            Path::new("/Users/bo/Library/Logs/DiagnosticReports")
        );
    }
}
