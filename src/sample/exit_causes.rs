//! What the OS records about how a process ended, read cheaply enough to
//! poll after every sample: kills for want of memory, crashes, GPU faults
//! and exit statuses.
//!
//! - Linux: the kernel log, `/dev/kmsg`: the OOM killer's lines
//!   ([`super::linux::kmsg`]), fatal faults and NVIDIA Xid errors
//!   ([`super::linux::kmsg_crash`]). Needs `CAP_SYSLOG` where
//!   `kernel.dmesg_restrict = 1` (root has it unless a unit or container
//!   drops it); without it, those go unseen and the daemon says so once at
//!   start, with what to do ([`kmsg_step`]). Fault lines are printed only while
//!   `debug.exception-trace` is 1 (the default on x86_64, not on arm64); the collector status says
//!   so when it is 0. A fault in a thread names the thread: the threads of
//!   the watched processes are remembered ([`super::linux::threads`]) to
//!   find its process. And the exit status a zombie keeps in
//!   `/proc/[pid]/stat` until its parent reaps it ([`super::linux::zombie`]),
//!   read only for the processes the caller suspects (listed, but with no
//!   memory left).
//! - macOS: the exit status and end of a zombie ([`super::macos::exits`]:
//!   `kinfo_proc`'s `p_xstat`, `proc_pid_rusage`'s `ri_proc_exit_abstime`),
//!   read only for the suspects. As root: jetsam's kills as the kernel writes them to the
//!   unified log, followed by a long-lived `log stream` child
//!   ([`super::macos::jetsam`]); and crash reports, the `.ips` files
//!   ReportCrash writes to `/Library/Logs/DiagnosticReports` and each
//!   user's `~/Library/Logs/DiagnosticReports`
//!   ([`super::macos::crash_reports`]), looked for while a watched process
//!   has just ended (a report takes seconds to appear: post-mortems wait
//!   for it, [`Observed::record_lag`]). As a user (a LaunchAgent): that
//!   user's crash reports only; jetsam kills are not followed (`log stream`
//!   shows the kernel's entries only to an administrator), which the
//!   collector status and the post-mortems say.
//! - Elsewhere: nothing.
//!
//! [`ExitCauses`] is the one platform-neutral handle: [`exit_causes`] opens
//! this OS's sources, [`ExitCauses::poll`] returns what was recorded since
//! the last poll and the exit statuses of the suspects,
//! [`ExitCauses::collectors`] how each source is doing, and
//! [`ExitCauses::silence`] what the absence of a record means here, for a
//! post-mortem that found none.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::model::{CollectorStatus, ProcessId, Timestamp};

/// Which part of the OS killed a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Killer {
    /// The Linux kernel's OOM killer (the machine's or a memory cgroup's).
    OomKiller,
    /// macOS's jetsam.
    Jetsam,
}

/// A process the OS killed for want of memory, as the OS recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryKill {
    pub pid: u32,
    /// The command name as the OS wrote it (at most 15 bytes on Linux).
    pub name: String,
    pub uid: Option<u32>,
    pub killer: Killer,
    /// Where the record was read (`/dev/kmsg`).
    pub source: String,
    /// The OS's own words about the kill.
    pub message: String,
    /// Resident memory of the victim when it was killed, where recorded.
    pub resident_bytes: Option<u64>,
    /// What ran out, in words: `the machine ran out of memory`, `the memory
    /// cgroup /lab reached its limit`.
    pub scope: String,
    /// The memory cgroup whose limit was reached, as the kernel names it
    /// (`oom_memcg=` of its `oom-kill:` line): a cgroup's OOM killer, not
    /// the machine's. `None` for the machine's, and where not recorded.
    pub memcg: Option<String>,
    /// When headroom read the record: the kill happened before.
    pub read_at: Timestamp,
}

/// How a process ended, as `waitpid` would have told its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (`SIGKILL`, `SIGSEGV`, …).
    Signal { name: String, core_dumped: bool },
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Code(code) => write!(f, "exited with status {code}"),
            ExitStatus::Signal { name, core_dumped } => write!(
                f,
                "killed by {name}{}",
                if *core_dumped { " (core dumped)" } else { "" }
            ),
        }
    }
}

/// A suspect found dead, with its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub id: ProcessId,
    pub status: ExitStatus,
    /// Where the status was read (`/proc/4242/stat`).
    pub source: String,
}

/// A process the OS recorded crashing: a fatal fault in its own code (a
/// segfault, an illegal instruction, a general protection fault), or a
/// fatal signal the OS logged as unexpected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Crash {
    /// The process (thread group) id. A record of a thread other than the
    /// main one names the thread's id; the reader turns it into its
    /// process's where it knew the thread (see `thread`).
    pub pid: u32,
    /// The command name as the record gives it (the thread's name for a
    /// crash in another thread).
    pub name: String,
    /// Whose process it was, where the record says.
    pub uid: Option<u32>,
    /// The thread that faulted, where it is not the main thread: its id and
    /// name.
    pub thread: Option<(u32, String)>,
    /// The signal that ended it (`SIGSEGV`), where the record says.
    pub signal: Option<String>,
    /// What happened, in the record's words: `segfault at 0 … error 4`,
    /// `trap invalid opcode`, `EXC_BAD_ACCESS (SIGSEGV)`.
    pub fault: String,
    /// The library or program that held the faulting instruction.
    pub library: Option<String>,
    /// Where the record was read (`/dev/kmsg`, a crash report's path).
    pub source: String,
    /// The record's own words.
    pub message: String,
    /// Further facts from the record, each in words ("translated by
    /// Rosetta: an x86_64 program on Apple silicon").
    pub notes: Vec<String>,
    /// Where the record shows memory was involved after all (a Metal
    /// command buffer that failed for want of GPU memory), in words.
    pub memory: Option<String>,
    /// When headroom read the record: the crash happened before.
    pub read_at: Timestamp,
}

/// A fault the GPU driver recorded in a process's GPU work (an NVIDIA Xid
/// naming its pid). The process may live on, or end after.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuFault {
    pub pid: u32,
    /// The command name as the driver wrote it.
    pub name: String,
    /// The driver's error number (the Xid).
    pub code: u32,
    /// What the number means, from NVIDIA's Xid catalogue, where known.
    pub meaning: Option<&'static str>,
    /// The GPU, as the driver names it (`PCI:0000:3b:00`).
    pub device: String,
    /// Where the record was read (`/dev/kmsg`).
    pub source: String,
    /// The record's own words.
    pub message: String,
    pub read_at: Timestamp,
}

/// What one poll learned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Memory kills recorded since the last poll.
    pub kills: Vec<MemoryKill>,
    /// Crashes recorded since the last poll.
    pub crashes: Vec<Crash>,
    /// GPU faults recorded since the last poll.
    pub gpu_faults: Vec<GpuFault>,
    /// Suspects found dead, awaiting their parent.
    pub ended: Vec<Ended>,
    /// How long after a process ends its record may still arrive from this
    /// OS's sources (a crash report takes seconds to write); a post-mortem
    /// without a record waits this long before it says "unknown".
    pub record_lag: std::time::Duration,
}

/// This OS's record of how processes end; see the module documentation.
pub struct ExitCauses {
    #[cfg(target_os = "linux")]
    kmsg: Option<Kmsg>,
    #[cfg(target_os = "linux")]
    threads: super::linux::threads::Threads,
    #[cfg(target_os = "macos")]
    mac: Option<MacSources>,
    silence: String,
}

/// The kernel log reader and what it has logged about itself.
#[cfg(target_os = "linux")]
struct Kmsg {
    reader: super::linux::kmsg::KmsgReader,
    read_failures: u64,
    last_failure: Option<String>,
    read_failure_log: crate::report::rate_limit::RateLimit,
    /// The count of overwritten records last logged.
    lost_logged: u64,
    lost_log: crate::report::rate_limit::RateLimit,
    /// `debug.exception-trace` when opened: fault lines are printed only
    /// when it is 1.
    exception_trace: Option<bool>,
}

/// Where `debug.exception-trace` (`show_unhandled_signals`) is read.
#[cfg(target_os = "linux")]
pub const EXCEPTION_TRACE: &str = "/proc/sys/debug/exception-trace";

/// `/proc/sys/debug/exception-trace` as read: `Some(true)` when the kernel
/// logs unhandled faults.
pub fn parse_exception_trace(text: &str) -> Option<bool> {
    match text.trim() {
        "0" => Some(false),
        "" => None,
        n => n.parse::<i64>().ok().map(|v| v != 0),
    }
}

#[cfg(target_os = "linux")]
impl Kmsg {
    fn poll(&mut self, now: Timestamp) -> super::linux::kmsg::KernelRecords {
        let records = match self.reader.read_new(now) {
            Ok(records) => records,
            Err(e) => {
                self.read_failures += 1;
                let n = self.read_failures;
                self.last_failure = Some(e.to_string());
                if self
                    .read_failure_log
                    .due(std::time::Instant::now())
                    .is_some()
                {
                    tracing::warn!(
                        "reading {} failed ({n} so far): {e}",
                        self.reader.path().display()
                    );
                }
                Default::default()
            }
        };
        if self.reader.lost > self.lost_logged
            && self.lost_log.due(std::time::Instant::now()).is_some()
        {
            tracing::warn!(
                "{} kernel log records were overwritten before headroom read them; an OOM kill or a crash among them would go unseen",
                self.reader.lost - self.lost_logged
            );
            self.lost_logged = self.reader.lost;
        }
        records
    }

    fn status(&self) -> CollectorStatus {
        let path = self.reader.path().display();
        let mut detail = format!("OOM kills, crashes and NVIDIA Xid errors read from {path}");
        if self.exception_trace == Some(false) {
            detail.push_str(&format!(
                "; crashes go unrecorded: {EXCEPTION_TRACE} is 0 (the kernel logs unhandled faults only when it is 1: sysctl debug.exception-trace=1)"
            ));
        }
        if let Some(why) = &self.last_failure {
            detail.push_str(&format!("; the last read failed: {why}"));
        }
        CollectorStatus {
            name: "kernel-log".into(),
            up: self.last_failure.is_none(),
            detail,
            errors: self.read_failures,
            applicable: true,
        }
    }
}

/// macOS's sources: the jetsam stream (root only) and the crash reports.
#[cfg(target_os = "macos")]
struct MacSources {
    jetsam: Result<super::macos::jetsam_stream::JetsamStream, String>,
    reports: super::macos::crash_reports::CrashReportScanner,
    /// Scan for crash reports until then (a watched process just ended).
    scan_until: Option<std::time::Instant>,
}

/// How long crash reports are looked for after a watched process ends,
/// and how long a post-mortem waits for one.
#[cfg(target_os = "macos")]
const REPORT_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Open this OS's record of how processes end. The second value says what
/// was opened, or why nothing could be (to be logged once).
pub fn exit_causes() -> (ExitCauses, Result<String, String>) {
    #[cfg(target_os = "linux")]
    {
        let path = std::path::Path::new("/dev/kmsg");
        let exception_trace = std::fs::read_to_string(EXCEPTION_TRACE)
            .ok()
            .and_then(|t| parse_exception_trace(&t));
        match super::linux::kmsg::KmsgReader::open(path) {
            Ok(reader) => {
                let kmsg = Kmsg {
                    reader,
                    read_failures: 0,
                    last_failure: None,
                    read_failure_log: crate::report::rate_limit::RateLimit::default(),
                    lost_logged: 0,
                    lost_log: crate::report::rate_limit::RateLimit::default(),
                    exception_trace,
                };
                let note = kmsg.status().detail;
                (
                    ExitCauses {
                        kmsg: Some(kmsg),
                        threads: Default::default(),
                        silence: format!(
                            "no OOM-killer or crash record for it in {}",
                            path.display()
                        ),
                    },
                    Ok(note),
                )
            }
            Err(e) => {
                let why = format!(
                    "{} is not readable ({e}), so an OOM kill or a crash would go unseen: {}",
                    path.display(),
                    kmsg_step(crate::sys::this_process::running_as_root())
                );
                (ExitCauses::none(&why), Err(why))
            }
        }
    }
    #[cfg(target_os = "macos")]
    {
        use super::macos::{crash_reports, jetsam_stream};
        let root = crate::sys::this_process::running_as_root();
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
                "no crash report for it, and jetsam kills are not followed here (headroom runs as a user: see `headroom doctor`)".to_string(),
                Err(format!("jetsam kills: {why}; crash reports read from this user's DiagnosticReports")),
            ),
        };
        (
            ExitCauses {
                mac: Some(MacSources {
                    jetsam,
                    reports,
                    scan_until: None,
                }),
                silence,
            },
            note,
        )
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let why = "this OS keeps no record of memory kills that headroom can read";
        (ExitCauses::none(why), Err(why.to_string()))
    }
}

impl ExitCauses {
    /// A source that never reports a kill; `why` is what that means, for
    /// post-mortems (tests, replayed traces, OSes without a record).
    pub fn none(why: &str) -> Self {
        Self {
            #[cfg(target_os = "linux")]
            kmsg: None,
            #[cfg(target_os = "linux")]
            threads: Default::default(),
            #[cfg(target_os = "macos")]
            mac: None,
            silence: why.to_string(),
        }
    }

    /// What it means that no kill of a process was recorded: the words a
    /// post-mortem with an unknown cause gives as `how`.
    pub fn silence(&self) -> &str {
        &self.silence
    }

    /// How each source is doing, for the snapshot's collector list.
    pub fn collectors(&self) -> Vec<CollectorStatus> {
        #[cfg(target_os = "linux")]
        {
            match &self.kmsg {
                Some(k) => vec![k.status()],
                // Not open: the kernel log needs CAP_SYSLOG where
                // dmesg_restrict is set, so a daemon without it has
                // nothing to read here.
                None => vec![CollectorStatus {
                    name: "kernel-log".into(),
                    up: false,
                    detail: self.silence.clone(),
                    errors: 0,
                    applicable: crate::sys::this_process::running_as_root(),
                }],
            }
        }
        #[cfg(target_os = "macos")]
        {
            let Some(mac) = &self.mac else {
                return Vec::new();
            };
            let jetsam = match &mac.jetsam {
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
                    applicable: crate::sys::this_process::running_as_root(),
                },
            };
            let dirs: Vec<String> = mac
                .reports
                .dirs()
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            let mut detail = format!("crash reports read from {}", dirs.join(", "));
            if let Some(why) = &mac.reports.last_error {
                detail.push_str(&format!("; the last one refused: {why}"));
            }
            let reports = CollectorStatus {
                name: "crash-reports".into(),
                up: true,
                detail,
                errors: mac.reports.errors,
                applicable: true,
            };
            vec![jetsam, reports]
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        {
            Vec::new()
        }
    }

    /// What was recorded since the last poll (stamped as read at the time
    /// `snap` was taken), and which of `suspects` (processes listed with no
    /// memory left) are dead and how they ended. `tracked` are the
    /// processes post-mortems watch. Never blocks; a failing read is counted
    /// and logged, never fatal.
    pub fn poll(
        &mut self,
        snap: &crate::model::Snapshot,
        tracked: &HashSet<ProcessId>,
        suspects: &[ProcessId],
    ) -> Observed {
        let now = snap.taken_at;
        #[cfg(target_os = "linux")]
        {
            let records = self.kmsg.as_mut().map(|k| k.poll(now)).unwrap_or_default();
            let pids: HashSet<u32> = tracked.iter().map(|p| p.pid).collect();
            let mut crashes = records.crashes;
            for crash in &mut crashes {
                if pids.contains(&crash.pid) {
                    continue;
                }
                if let Some(owner) = self.threads.owner(crash.pid) {
                    crash.thread = Some((crash.pid, std::mem::take(&mut crash.name)));
                    crash.pid = owner;
                }
            }
            if self.kmsg.is_some() {
                self.threads
                    .refresh(std::path::Path::new("/proc"), pids.iter().copied());
            }
            let ended = if suspects.is_empty() {
                Vec::new()
            } else {
                super::linux::zombie::read_ended(std::path::Path::new("/proc"), suspects)
            };
            Observed {
                kills: records.kills,
                crashes,
                gpu_faults: records.gpu_faults,
                ended,
                record_lag: std::time::Duration::ZERO,
            }
        }
        #[cfg(target_os = "macos")]
        {
            // A zombie's exit status and end, read only for the suspects.
            let ended = if suspects.is_empty() {
                Vec::new()
            } else {
                super::macos::exits::read_ended(suspects)
            };
            let Some(mac) = self.mac.as_mut() else {
                return Observed {
                    ended,
                    ..Observed::default()
                };
            };
            let kills = match &mac.jetsam {
                Ok(stream) => stream
                    .drain()
                    .into_iter()
                    .map(|k| jetsam_kill(k, now))
                    .collect(),
                Err(_) => Vec::new(),
            };
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
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        {
            let _ = (now, tracked, suspects);
            Observed::default()
        }
    }
}

/// A jetsam kill as a [`MemoryKill`].
pub fn jetsam_kill(k: super::macos::jetsam::JetsamKill, read_at: Timestamp) -> MemoryKill {
    let scope = match &k.reason {
        Some(r) => format!("{} ({r})", super::macos::jetsam::reason_words(r)),
        None => "jetsam named no reason".to_string(),
    };
    MemoryKill {
        pid: k.pid,
        name: k.name,
        uid: None,
        killer: Killer::Jetsam,
        source: "the unified log (log stream)".to_string(),
        message: k.message,
        resident_bytes: k.footprint_bytes,
        scope,
        read_at,
        memcg: None,
    }
}

/// `headroom doctor`'s check of what post-mortems can learn on this machine.
pub fn doctor_check() -> crate::model::Check {
    #[cfg(target_os = "linux")]
    {
        let kmsg = super::linux::kmsg::KmsgReader::open(std::path::Path::new("/dev/kmsg"))
            .map(|_| ())
            .map_err(|e| e.to_string());
        let trace = std::fs::read_to_string(EXCEPTION_TRACE)
            .ok()
            .and_then(|t| parse_exception_trace(&t));
        linux_check(kmsg, trace, crate::sys::this_process::running_as_root())
    }
    #[cfg(target_os = "macos")]
    {
        macos_check(crate::sys::this_process::running_as_root())
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        crate::model::Check::not_applicable(
            "post-mortems",
            "this OS keeps no record of how processes end that headroom can read",
        )
    }
}

/// What to do when `/dev/kmsg` cannot be read, for a daemon that is root
/// or not. Reading it needs `CAP_SYSLOG` where `kernel.dmesg_restrict = 1`
/// (Debian's and Ubuntu's default): root has it unless a systemd unit or a
/// container drops it, and systemd's `ProtectKernelLogs=` hides the device.
pub fn kmsg_step(root: bool) -> String {
    if root {
        "keep CAP_SYSLOG in the daemon's capabilities (CapabilityBoundingSet= in a systemd unit; \
         a container's granted capabilities) and leave ProtectKernelLogs= off, as the unit that \
         `headroom service install --system` writes does"
            .to_owned()
    } else {
        format!(
            "run the daemon as root ({}) or give it CAP_SYSLOG",
            crate::sys::this_process::sudo_command("service install --system")
        )
    }
}

/// The Linux check from what was found: whether `/dev/kmsg` opened,
/// `debug.exception-trace`, and whether the daemon is root.
pub fn linux_check(
    kmsg: Result<(), String>,
    exception_trace: Option<bool>,
    root: bool,
) -> crate::model::Check {
    use crate::model::Check;
    match (kmsg, exception_trace) {
        (Err(e), _) => Check::warn(
            "post-mortems",
            format!(
                "/dev/kmsg is not readable ({e}): OOM kills, crashes and GPU faults of watched processes go unrecorded and their post-mortems say \"cause unknown\""
            ),
            kmsg_step(root),
        ),
        (Ok(()), Some(false)) => Check::warn(
            "post-mortems",
            "OOM kills and NVIDIA Xid errors are read from /dev/kmsg, but debug.exception-trace is 0 (the default on arm64 kernels): the kernel logs no segfaults or illegal instructions, so crashes are not recorded",
            "sysctl debug.exception-trace=1 (and debug.exception-trace = 1 in /etc/sysctl.d/ to keep it)",
        ),
        (Ok(()), _) => Check::ok(
            "post-mortems",
            "OOM kills, crashes (segfaults, illegal instructions, general protection faults) and NVIDIA Xid errors are read from /dev/kmsg",
        ),
    }
}

/// The macOS check: as root, jetsam kills and everyone's crash reports;
/// as a user, only that user's crash reports.
pub fn macos_check(root: bool) -> crate::model::Check {
    use crate::model::Check;
    if root {
        Check::ok(
            "post-mortems",
            "jetsam kills followed as the kernel logs them (log stream); crash reports read from /Library/Logs/DiagnosticReports and every user's ~/Library/Logs/DiagnosticReports",
        )
    } else {
        Check::warn(
            "post-mortems",
            "as a user, only your own crash reports are read: jetsam kills are not followed (log stream shows the kernel's entries only to an administrator), so a jetsam kill is a post-mortem with an unknown cause",
            format!(
                "install the system service to follow jetsam kills: {}",
                crate::sys::this_process::sudo_command("service install --system")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doctor_says_what_post_mortems_miss_and_what_to_do() {
        use crate::model::CheckStatus;
        let ok = linux_check(Ok(()), Some(true), true);
        assert_eq!(ok.status, CheckStatus::Ok);
        let off = linux_check(Ok(()), Some(false), true);
        assert_eq!(off.status, CheckStatus::Warn);
        assert!(
            off.next
                .unwrap()
                .starts_with("sysctl debug.exception-trace=1")
        );
        let denied = linux_check(
            Err("Permission denied (os error 13)".into()),
            Some(true),
            false,
        );
        assert!(denied.detail.contains("Permission denied"));
        assert!(denied.next.unwrap().starts_with("run the daemon as root"));
        // Root refused: its capabilities were cut, and saying "run as
        // root" would not help.
        let cut = linux_check(
            Err("Operation not permitted (os error 1)".into()),
            None,
            true,
        );
        assert_eq!(cut.status, CheckStatus::Warn);
        let next = cut.next.unwrap();
        assert!(
            next.contains("CAP_SYSLOG") && next.contains("ProtectKernelLogs="),
            "{next}"
        );
        assert!(!next.starts_with("run the daemon as root"), "{next}");
        assert_eq!(macos_check(true).status, CheckStatus::Ok);
        assert!(
            macos_check(false)
                .detail
                .contains("jetsam kills are not followed")
        );
    }

    #[test]
    fn exception_trace_is_read_as_on_or_off() {
        assert_eq!(parse_exception_trace("1\n"), Some(true));
        assert_eq!(parse_exception_trace("0\n"), Some(false));
        assert_eq!(parse_exception_trace("\n"), None);
        assert_eq!(parse_exception_trace("x"), None);
    }

    #[test]
    fn a_jetsam_kill_says_why_in_words() {
        let k = super::super::macos::jetsam::parse_kill_message(
            "memorystatus: killing_top_process pid 901 [Python] (vm-pageshortage 0 86s rf:-) 1024KB - memorystatus_available_pages: 5",
        )
        .unwrap();
        let m = jetsam_kill(k, Timestamp(3));
        assert_eq!((m.pid, m.killer), (901, Killer::Jetsam));
        assert_eq!(
            m.scope,
            "the machine ran short of free memory pages (vm-pageshortage)"
        );
        assert_eq!(m.resident_bytes, Some(1 << 20));
    }
}
