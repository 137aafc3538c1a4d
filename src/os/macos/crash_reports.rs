//! Finding the crash reports of processes that just ended (compiled on
//! every OS: plain files, tested on Linux with real reports in a temporary
//! directory).
//!
//! [`CrashReportScanner::scan`] lists the report directories
//! ([`report_dirs`]), reads each `.ips` file written since the daemon
//! started that it has not read yet (at most [`MAX_NEW_PER_SCAN`] a scan),
//! parses it ([`super::parse::crash_report::parse_ips`]) and hands back a
//! [`Crash`] per report; the post-mortems match them to the dead by pid and
//! name. The files in a user's `~/Library/Logs/DiagnosticReports` are that
//! user's: they are read with [`crate::regular_file::read_untrusted`] (no
//! links followed, no FIFO opened, at most
//! [`super::parse::crash_report::MAX_REPORT_BYTES`]), and a report is believed
//! only about that user's own processes (its `userID` must be the file's
//! owner, unless root owns the file), so nobody can write a report that
//! blames a crash on someone else's process. A file that is not a crash
//! report, or a truncated one, is counted and its reason kept, never
//! guessed at.

use std::collections::{HashSet, VecDeque};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::parse::crash_report::{CrashReport, MAX_REPORT_BYTES, parse_ips};
use crate::model::Timestamp;
use crate::model::exit::Crash;

/// Reports read in one scan, at most; the rest wait for the next.
pub const MAX_NEW_PER_SCAN: usize = 64;
/// Directory entries looked at in one directory, at most.
const MAX_ENTRIES: usize = 4096;
/// Home directories looked at, at most.
const MAX_USERS: usize = 256;
/// Report paths remembered as read.
const MAX_SEEN: usize = 4096;

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

/// See the module documentation.
#[derive(Debug)]
pub struct CrashReportScanner {
    dirs: Vec<PathBuf>,
    since: SystemTime,
    seen: HashSet<PathBuf>,
    seen_order: VecDeque<PathBuf>,
    /// Files that could not be used, since the scanner was made.
    pub errors: u64,
    /// The last of them, and why.
    pub last_error: Option<String>,
}

impl CrashReportScanner {
    /// Scan `dirs` for reports written at or after `since`.
    pub fn new(dirs: Vec<PathBuf>, since: SystemTime) -> Self {
        Self {
            dirs,
            since,
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            errors: 0,
            last_error: None,
        }
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The crashes reported since the last scan; `read_at` stamps them.
    pub fn scan(&mut self, read_at: Timestamp) -> Vec<Crash> {
        let mut out = Vec::new();
        let mut budget = MAX_NEW_PER_SCAN;
        for dir in self.dirs.clone() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.map_while(Result::ok).take(MAX_ENTRIES) {
                if budget == 0 {
                    return out;
                }
                let path = entry.path();
                if path.extension().is_none_or(|e| e != "ips") || self.seen.contains(&path) {
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
                budget -= 1;
                self.remember(path.clone());
                match read_report(&path) {
                    Ok((report, owner)) => match believed(&report, owner) {
                        Ok(()) => out.push(crash_of(&report, &path, read_at)),
                        Err(why) => self.fail(&path, &why),
                    },
                    Err(why) => self.fail(&path, &why),
                }
            }
        }
        out
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

/// Read and parse one report; the owner of the file read.
fn read_report(path: &Path) -> Result<(CrashReport, u32), String> {
    let (bytes, meta) =
        crate::regular_file::read_untrusted(path, MAX_REPORT_BYTES).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&bytes);
    let report = parse_ips(&text).map_err(|e| e.to_string())?;
    Ok((report, meta.uid()))
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
        let mut crashes = scanner.scan(Timestamp(5));
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
        assert!(scanner.scan(Timestamp(6)).is_empty(), "read once");
        assert_eq!(scanner.errors, 0);
    }

    #[test]
    fn reports_older_than_the_scanner_are_skipped() {
        let dir = dir_with(&[("old.ips", &owned(ROSETTA_SIGILL))]);
        let later = SystemTime::now() + std::time::Duration::from_secs(3600);
        let mut scanner = CrashReportScanner::new(vec![dir.path().to_path_buf()], later);
        assert!(scanner.scan(Timestamp(0)).is_empty());
    }

    #[test]
    fn a_truncated_report_is_counted_with_its_reason() {
        let cut = &ROSETTA_SIGILL[..ROSETTA_SIGILL.len() / 3];
        let dir = dir_with(&[("cut.ips", cut)]);
        let mut scanner =
            CrashReportScanner::new(vec![dir.path().to_path_buf()], SystemTime::UNIX_EPOCH);
        assert!(scanner.scan(Timestamp(0)).is_empty());
        assert_eq!(scanner.errors, 1);
        let why = scanner.last_error.clone().unwrap();
        assert!(
            why.contains("cut.ips") && why.contains("truncated"),
            "{why}"
        );
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
        assert!(scanner.scan(Timestamp(0)).is_empty());
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
        assert!(scanner.scan(Timestamp(0)).is_empty());
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
