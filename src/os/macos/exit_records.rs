//! macOS's record of how processes end: the exits of the processes
//! post-mortems watch, with their status and jetsam's `NOTE_EXIT_MEMORY`,
//! as the kernel reports them to a kqueue ([`super::exit_watch`]; as root
//! or as a user, for that user's processes); the exit status and end of a
//! zombie ([`super::exits`]: `kinfo_proc`'s `p_xstat`,
//! `proc_pid_rusage`'s `ri_proc_exit_abstime`), read for the suspects the
//! watch did not answer for;
//! as root, jetsam's kills as the kernel writes them to the unified log,
//! followed by a long-lived `log stream` child ([`super::jetsam_stream`]);
//! and crash reports, the `.ips` files ReportCrash writes to
//! `/Library/Logs/DiagnosticReports` and each user's
//! `~/Library/Logs/DiagnosticReports` ([`super::crash_reports`]), looked for
//! while a watched process has just ended (a report takes seconds to
//! appear: post-mortems wait for it, `Observed::record_lag`). As a user (a
//! LaunchAgent): that user's crash reports, and jetsam kills of that
//! user's watched processes through the kqueue only (`log stream` shows
//! the kernel's entries only to an administrator), which the collector
//! status and the post-mortems say.
//! `sample::exit_causes` holds it as this OS's [`ExitRecords`]; Linux
//! exports the same names.

use std::collections::HashSet;

use super::parse::post_mortem_sources::{jetsam_kill, macos_check};
use crate::model::exit::Observed;
use crate::model::{Check, Collector, CollectorStatus, ProcessId, Snapshot};

/// The jetsam stream and crash reports, when opened.
pub struct ExitRecords {
    mac: Option<MacSources>,
}

/// macOS's sources: the exit watch, the jetsam stream (root only) and the
/// crash reports.
struct MacSources {
    exits: super::exit_watch::ExitWatch,
    jetsam: Jetsam,
    reports: super::crash_reports::CrashReportScanner,
    /// Scan for crash reports until then (a watched process just ended).
    scan_until: Option<std::time::Instant>,
}

/// How long crash reports are looked for after a watched process ends,
/// and how long a post-mortem waits for one.
const REPORT_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

impl ExitRecords {
    /// Records that report nothing (beyond the suspects' exit statuses);
    /// `why` is what that means, which no collector reports here.
    pub fn none(why: &str) -> Self {
        let _ = why;
        Self { mac: None }
    }

    /// Start following jetsam kills (as root) and crash reports. Gives the
    /// records, what the absence of a record of a process's end means here,
    /// and what was opened or why not (to be logged once).
    pub fn open() -> (Self, String, Result<String, String>) {
        use super::{crash_reports, jetsam_stream};
        let root = crate::os::this_process::running_as_root();
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let dirs = crash_reports::report_dirs(
            std::path::Path::new("/Library/Logs/DiagnosticReports"),
            std::path::Path::new("/Users"),
            home.as_deref(),
            root,
        );
        let reports = crash_reports::CrashReportScanner::new(dirs, std::time::SystemTime::now());
        let jetsam = if root {
            jetsam_stream::JetsamStream::start()
                .map_err(|e| format!("cannot start the log stream thread: {e}"))
        } else {
            Err(jetsam_stream::not_followed())
        };
        let (silence, note) = match &jetsam {
            Ok(_) => (
                "no jetsam kill of it in the unified log and no crash report for it".to_string(),
                Ok("jetsam kills followed with `log stream`; crash reports read from DiagnosticReports".to_string()),
            ),
            Err(why) => (
                "no crash report for it and no jetsam flag on its exit, and the unified log's jetsam kills are not followed here (headroom runs as a user: see `headroom doctor`)".to_string(),
                Err(format!("jetsam kills: {why}; crash reports read from this user's DiagnosticReports")),
            ),
        };
        (
            Self {
                mac: Some(MacSources {
                    exits: super::exit_watch::ExitWatch::start(),
                    jetsam: Jetsam(jetsam),
                    reports,
                    scan_until: None,
                }),
            },
            silence,
            note,
        )
    }

    /// The sources that report how they stand: the exit watch, the jetsam
    /// stream, the crash reports; none for records that report nothing.
    pub fn collectors(&self) -> Vec<&dyn Collector> {
        match &self.mac {
            Some(mac) => vec![&mac.exits, &mac.jetsam, &mac.reports],
            None => Vec::new(),
        }
    }

    /// What was recorded since the last poll, and how the `suspects` that
    /// are zombies ended; see `sample::exit_causes::ExitCauses::poll`.
    pub fn poll(
        &mut self,
        snap: &Snapshot,
        tracked: &HashSet<ProcessId>,
        suspects: &[ProcessId],
    ) -> Observed {
        let now = snap.taken_at;
        // The watched processes' exits, then a zombie's exit status, read
        // only for the suspects the watch did not answer for.
        let (mut ended, watched_kills) = match self.mac.as_mut() {
            Some(mac) => mac.exits.poll(snap, tracked),
            None => (Vec::new(), Vec::new()),
        };
        let unanswered: Vec<ProcessId> = suspects
            .iter()
            .filter(|id| !ended.iter().any(|e| e.id == **id))
            .copied()
            .collect();
        if !unanswered.is_empty() {
            ended.extend(super::exits::read_ended(&unanswered));
        }
        let Some(mac) = self.mac.as_mut() else {
            return Observed {
                ended,
                ..Observed::default()
            };
        };
        let mut kills: Vec<_> = match &mac.jetsam.0 {
            Ok(stream) => stream
                .drain()
                .into_iter()
                .map(|k| jetsam_kill(k, now))
                .collect(),
            Err(_) => Vec::new(),
        };
        kills.extend(watched_kills);
        // A watched process gone from this sample: its crash report, if
        // any, is written in the next seconds.
        let instant = std::time::Instant::now();
        let present: HashSet<ProcessId> = snap.processes.iter().map(|p| p.id).collect();
        if tracked.iter().any(|p| !present.contains(p)) {
            mac.scan_until = Some(instant + REPORT_WAIT);
        }
        let crashes = match mac.scan_until {
            Some(until) if instant <= until => mac.reports.scan(now),
            _ => Vec::new(),
        };
        Observed {
            kills,
            crashes,
            ended,
            record_lag: REPORT_WAIT,
            ..Observed::default()
        }
    }
}

/// The jetsam stream, or why it is not followed.
struct Jetsam(Result<super::jetsam_stream::JetsamStream, String>);

impl Collector for Jetsam {
    fn name(&self) -> &'static str {
        "jetsam-log"
    }

    fn status(&self) -> Option<CollectorStatus> {
        Some(match &self.0 {
            Ok(stream) => {
                let s = stream.status();
                let detail = match (&s.down_because, s.pid) {
                    (_, Some(pid)) if s.up => format!(
                        "following the kernel's memorystatus kills with `log stream` (pid {pid})"
                    ),
                    (Some(why), _) => why.clone(),
                    _ => "starting `log stream`".to_string(),
                };
                CollectorStatus {
                    name: "jetsam-log".into(),
                    up: s.up,
                    detail,
                    errors: s.invalid_lines + s.refused_lines + s.dropped + s.restarts,
                    applicable: true,
                }
            }
            // Not followed as a user: `log stream` shows the kernel's
            // entries to an administrator only.
            Err(why) => CollectorStatus {
                name: "jetsam-log".into(),
                up: false,
                detail: why.clone(),
                errors: 0,
                applicable: crate::os::this_process::running_as_root(),
            },
        })
    }

    /// What post-mortems can learn here, jetsam kills and crash reports
    /// alike ([`doctor_check`]).
    fn doctor_check(&self) -> Option<Check> {
        Some(doctor_check())
    }
}

impl Collector for super::crash_reports::CrashReportScanner {
    fn name(&self) -> &'static str {
        "crash-reports"
    }

    fn status(&self) -> Option<CollectorStatus> {
        let dirs: Vec<String> = self
            .dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        let mut detail = format!("crash reports read from {}", dirs.join(", "));
        if let Some(why) = &self.last_error {
            detail.push_str(&format!("; the last one refused: {why}"));
        }
        Some(CollectorStatus {
            name: "crash-reports".into(),
            up: true,
            detail,
            errors: self.errors,
            applicable: true,
        })
    }

    /// None of its own: the jetsam log's check covers what post-mortems
    /// learn from both.
    fn doctor_check(&self) -> Option<Check> {
        None
    }
}

/// `headroom doctor`'s check of what post-mortems can learn on this machine.
pub fn doctor_check() -> Check {
    macos_check(crate::os::this_process::running_as_root())
}
