//! Linux's record of how processes end: the OOM killer's lines, fatal
//! faults and NVIDIA Xid errors in the kernel log (`/dev/kmsg`, read by
//! [`super::kmsg`] and [`super::kmsg_crash`]; a fault in a thread is mapped
//! to its process through [`super::threads`]), and the exit status a zombie
//! keeps until its parent reaps it ([`super::zombie`]). `sample::exit_causes`
//! holds it as this OS's [`ExitRecords`]; macOS exports the same names.

use std::collections::HashSet;
use std::path::Path;

use super::parse::kmsg_access::{EXCEPTION_TRACE, kmsg_step, linux_check, parse_exception_trace};
use crate::model::Timestamp;
use crate::model::exit::Observed;
use crate::model::{Check, Collector, CollectorStatus, ProcessId, Snapshot};

/// The kernel log (when it opened) and the threads of watched processes.
pub struct ExitRecords {
    kmsg: Option<Kmsg>,
    /// Why the kernel log is not open, when it is not.
    closed: String,
    threads: super::threads::Threads,
}

/// The kernel log reader and what it has logged about itself.
struct Kmsg {
    reader: super::kmsg::KmsgReader,
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

impl Kmsg {
    fn poll(&mut self, now: Timestamp) -> super::kmsg::KernelRecords {
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

impl ExitRecords {
    /// Records that report nothing; `why` is what that means, for the
    /// collector's status.
    pub fn none(why: &str) -> Self {
        Self {
            kmsg: None,
            closed: why.to_string(),
            threads: Default::default(),
        }
    }

    /// Open the kernel log. Gives the records, what the absence of a record
    /// of a process's end means here, and what was opened or why nothing
    /// could be (to be logged once).
    pub fn open() -> (Self, String, Result<String, String>) {
        let path = Path::new("/dev/kmsg");
        let exception_trace = std::fs::read_to_string(EXCEPTION_TRACE)
            .ok()
            .and_then(|t| parse_exception_trace(&t));
        match super::kmsg::KmsgReader::open(path) {
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
                let silence = format!("no OOM-killer or crash record for it in {}", path.display());
                (
                    Self {
                        kmsg: Some(kmsg),
                        closed: String::new(),
                        threads: Default::default(),
                    },
                    silence,
                    Ok(note),
                )
            }
            Err(e) => {
                let why = format!(
                    "{} is not readable ({e}), so an OOM kill or a crash would go unseen: {}",
                    path.display(),
                    kmsg_step(crate::os::this_process::running_as_root())
                );
                (Self::none(&why), why.clone(), Err(why))
            }
        }
    }

    /// The sources that report how they stand: the kernel log.
    pub fn collectors(&self) -> Vec<&dyn Collector> {
        vec![self]
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
                .refresh(Path::new("/proc"), pids.iter().copied());
        }
        let ended = if suspects.is_empty() {
            Vec::new()
        } else {
            super::zombie::read_ended(Path::new("/proc"), suspects)
        };
        Observed {
            kills: records.kills,
            crashes,
            gpu_faults: records.gpu_faults,
            ended,
            record_lag: std::time::Duration::ZERO,
        }
    }
}

/// The kernel log as a collector.
impl Collector for ExitRecords {
    fn name(&self) -> &'static str {
        "kernel-log"
    }

    fn status(&self) -> Option<CollectorStatus> {
        Some(match &self.kmsg {
            Some(k) => k.status(),
            // Not open: the kernel log needs CAP_SYSLOG where
            // dmesg_restrict is set, so a daemon without it has
            // nothing to read here.
            None => CollectorStatus {
                name: "kernel-log".into(),
                up: false,
                detail: self.closed.clone(),
                errors: 0,
                applicable: crate::os::this_process::running_as_root(),
            },
        })
    }

    /// What post-mortems can learn here: the kernel log opened afresh
    /// and its settings ([`doctor_check`]).
    fn doctor_check(&self) -> Option<Check> {
        Some(doctor_check())
    }
}

/// `headroom doctor`'s check of what post-mortems can learn on this machine.
pub fn doctor_check() -> Check {
    let kmsg = super::kmsg::KmsgReader::open(Path::new("/dev/kmsg"))
        .map(|_| ())
        .map_err(|e| e.to_string());
    let trace = std::fs::read_to_string(EXCEPTION_TRACE)
        .ok()
        .and_then(|t| parse_exception_trace(&t));
    linux_check(kmsg, trace, crate::os::this_process::running_as_root())
}
