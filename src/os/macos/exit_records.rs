//! macOS's record of how processes end: the exits of the processes
//! post-mortems watch, with their status and jetsam's `NOTE_EXIT_MEMORY`,
//! as the kernel reports them to a kqueue ([`super::exit_watch`]; as root
//! or as a user, for that user's processes); the exit status and end of a
//! zombie ([`super::exits`]: `kinfo_proc`'s `p_xstat`,
//! `proc_pid_rusage`'s `ri_proc_exit_abstime`), read for the suspects the
//! watch did not answer for; as root or an administrator, jetsam's kills as
//! the kernel writes them to the unified log, followed by a long-lived `log
//! stream` child ([`super::jetsam_stream`]); and the reports in
//! `/Library/Logs/DiagnosticReports` and each user's
//! `~/Library/Logs/DiagnosticReports` ([`super::crash_reports`]): crash
//! reports, and JetsamEvent reports for jetsam kills without `log stream`,
//! looked for while a watched process has just ended (a report takes
//! seconds to appear, longer under memory pressure: post-mortems wait for
//! it, `Observed::record_lag`, as long as [`super::report_wait`] says). As a
//! user (a LaunchAgent): that user's crash reports and the JetsamEvent
//! reports it may read, and jetsam kills of that user's watched processes
//! through the kqueue; the unified log's kills of that user's processes if
//! the user is an administrator (`log stream` shows the kernel's entries
//! only to one), whether `log` followed or refused said by the collector
//! status; for anyone else not followed, which the collector status and the
//! post-mortems say.
//! `sample::exit_causes` holds it as this OS's [`ExitRecords`]; Linux
//! exports the same names.

use std::collections::HashSet;

use super::parse::post_mortem_sources::{
    Follower, Following, OwnProcesses, jetsam_kill, macos_check,
};
use crate::model::exit::Observed;
use crate::model::{Check, Collector, CollectorStatus, ProcessId, Snapshot};

/// The jetsam stream and crash reports, when opened.
pub struct ExitRecords {
    mac: Option<MacSources>,
}

/// macOS's sources: the exit watch, the jetsam stream (root, or an
/// administrator's) and the crash reports.
struct MacSources {
    exits: super::exit_watch::ExitWatch,
    jetsam: Jetsam,
    reports: super::crash_reports::CrashReportScanner,
    /// When a watched process was last found ended: reports are looked for
    /// until the wait after it has passed.
    last_end: Option<std::time::Instant>,
    /// How long reports are looked for after an end, and how long a
    /// post-mortem waits for one.
    wait: super::report_wait::ReportWait,
}

impl ExitRecords {
    /// Records that report nothing (beyond the suspects' exit statuses);
    /// `why` is what that means, which no collector reports here.
    pub fn none(why: &str) -> Self {
        let _ = why;
        Self { mac: None }
    }

    /// Start following jetsam kills (as root or an administrator) and crash
    /// reports. Gives the records, what the absence of a record of a
    /// process's end means here, and what was opened or why not (to be
    /// logged once).
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
        let who = jetsam_stream::who();
        let jetsam = if who == Follower::NotAdmin {
            Err(jetsam_stream::not_followed())
        } else {
            jetsam_stream::JetsamStream::start()
                .map_err(|e| format!("cannot start the log stream thread: {e}"))
        };
        let (silence, note) = match &jetsam {
            Ok(_) => (
                "no jetsam kill of it in the unified log and no crash report for it".to_string(),
                Ok("jetsam kills followed with `log stream` (its state: see `headroom doctor`); crash reports read from DiagnosticReports".to_string()),
            ),
            Err(why) => (
                "no crash report for it and no jetsam flag on its exit, and the unified log's jetsam kills are not followed here (see `headroom doctor`)".to_string(),
                Err(format!("jetsam kills: {why}; crash reports read from this user's DiagnosticReports")),
            ),
        };
        let own = (who == Follower::Admin)
            .then(|| OwnProcesses::new(crate::os::this_process::effective_uid()));
        (
            Self {
                mac: Some(MacSources {
                    exits: super::exit_watch::ExitWatch::start(),
                    jetsam: Jetsam {
                        stream: jetsam,
                        who,
                        own,
                    },
                    reports,
                    last_end: None,
                    wait: super::report_wait::ReportWait::default(),
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
        let mut kills = mac.jetsam.kills(snap);
        kills.extend(watched_kills);
        // A watched process gone from this sample: its report, if any, is
        // written in the next seconds (longer under pressure).
        let instant = std::time::Instant::now();
        let present: HashSet<ProcessId> = snap.processes.iter().map(|p| p.id).collect();
        if tracked.iter().any(|p| !present.contains(p)) {
            mac.last_end = Some(instant);
        }
        let wait = mac
            .wait
            .update(snap.pressure.level, now, mac.reports.pending());
        let looking = mac.last_end.is_some_and(|end| instant <= end + wait);
        let found = if looking || mac.reports.pending() > 0 {
            mac.reports.scan(now)
        } else {
            super::crash_reports::Found::default()
        };
        kills.extend(found.kills);
        Observed {
            kills,
            crashes: found.crashes,
            ended,
            record_lag: wait,
            ..Observed::default()
        }
    }
}

/// The jetsam stream, or why it is not followed; who follows; for an
/// administrator's agent, the owners of the pids it sampled.
struct Jetsam {
    stream: Result<super::jetsam_stream::JetsamStream, String>,
    who: Follower,
    own: Option<OwnProcesses>,
}

impl Jetsam {
    /// The kills read since the last poll, as memory kills: all of them as
    /// root, those of this user's processes as an administrator.
    fn kills(&mut self, snap: &Snapshot) -> Vec<crate::model::exit::MemoryKill> {
        let Ok(stream) = &self.stream else {
            return Vec::new();
        };
        if let Some(own) = &mut self.own {
            own.note(snap);
        }
        let own = self.own.as_ref();
        stream
            .drain()
            .into_iter()
            .filter_map(|k| match own {
                None => Some(jetsam_kill(k, snap.taken_at, None)),
                Some(own) => {
                    let uid = own.owner(k.pid)?;
                    Some(jetsam_kill(k, snap.taken_at, Some(uid)))
                }
            })
            .collect()
    }
}

impl Collector for Jetsam {
    fn name(&self) -> &'static str {
        "jetsam-log"
    }

    fn status(&self) -> Option<CollectorStatus> {
        Some(match &self.stream {
            Ok(stream) => {
                let s = stream.status();
                let (up, detail) = s.state();
                CollectorStatus {
                    name: "jetsam-log".into(),
                    up,
                    detail,
                    errors: s.invalid_lines
                        + s.refused_lines
                        + s.dropped
                        + s.restarts
                        + s.complaint_lines
                        + u64::from(s.refused.is_some()),
                    applicable: true,
                }
            }
            // Not followed: a user who is not an administrator, or no
            // thread for the stream.
            Err(why) => CollectorStatus {
                name: "jetsam-log".into(),
                up: false,
                detail: why.clone(),
                errors: 0,
                applicable: self.who != Follower::NotAdmin,
            },
        })
    }

    /// What post-mortems can learn here, jetsam kills and crash reports
    /// alike, with what `log stream` did once it had a moment to write or
    /// refuse.
    fn doctor_check(&self) -> Option<Check> {
        let following = match &self.stream {
            Ok(stream) => stream.settled(super::jetsam_stream::SETTLE),
            Err(_) if self.who == Follower::NotAdmin => Following::NotAdmin,
            Err(why) => Following::Failed(why.clone()),
        };
        Some(macos_check(self.who, &following))
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
        let mut detail = format!(
            "crash and JetsamEvent reports read from {}; {} JetsamEvent report(s) read, {} report(s) of other kinds skipped",
            dirs.join(", "),
            self.jetsam_reports,
            self.skipped
        );
        if self.pending() > 0 {
            detail.push_str(&format!("; {} being written, waited for", self.pending()));
        }
        if let Some(why) = &self.last_unreadable {
            detail.push_str(&format!(
                "; {} not readable by this user, the last: {why}",
                self.unreadable
            ));
        }
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

/// `headroom doctor`'s check of what post-mortems can learn on this
/// machine, without starting the stream: what this user gets.
pub fn doctor_check() -> Check {
    let who = super::jetsam_stream::who();
    let following = match who {
        Follower::NotAdmin => Following::NotAdmin,
        _ => Following::NotYet("not started by this check".to_string()),
    };
    macos_check(who, &following)
}
