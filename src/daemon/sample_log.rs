//! What the daemon loop says in its log about each sample, each policy
//! event and each post-mortem: changes rather than states (the first
//! sample, a pressure level that moved, an ML process seen for the first
//! time, sampling that failed or works again), with failures throttled and
//! the lines about each user's processes bounded ([`SourceLimit`]: a user
//! who starts a thousand processes a second gets a bounded number of lines
//! and a count of the rest).

use std::collections::HashSet;
use std::time::Instant;

use tracing::{debug, error, info, warn};

use crate::daemon::cadence::Depth;
use crate::event::{EventKind, ProcessRef};
use crate::model::{PressureLevel, ProcessId, Snapshot};
use crate::report::rate_limit::RateLimit;
use crate::report::source_limit::{Notice, SourceLimit};
use crate::report::{format_bytes, printable};
use crate::sample::SampleError;

/// Remembers enough between samples to log changes rather than states.
#[derive(Default)]
pub struct SampleLog {
    samples: u64,
    consecutive_failures: u64,
    failure_log: RateLimit,
    level: Option<PressureLevel>,
    ml: HashSet<ProcessId>,
    /// The lines about each user's processes.
    sources: SourceLimit,
}

impl SampleLog {
    /// Log what changed with this sample: the first sample, a pressure
    /// level, an ML process seen for the first time, sampling working again.
    pub fn observe(&mut self, snap: &Snapshot, depth: Depth) {
        self.samples += 1;
        if self.consecutive_failures > 0 {
            info!(
                "sampling works again after {} failed attempts",
                self.consecutive_failures
            );
            self.consecutive_failures = 0;
            self.failure_log.reset();
        }
        let m = &snap.system;
        if self.samples == 1 {
            let ml = snap.processes.iter().filter(|p| p.workload.is_ml()).count();
            let swap = if snap.swap.total == 0 {
                "no swap".to_string()
            } else {
                format!(
                    "swap {} used of {}",
                    format_bytes(snap.swap.used),
                    format_bytes(snap.swap.total)
                )
            };
            info!(
                "first sample: {} used of {}, {} available, {swap}, pressure {}; {} processes, {} ML workloads; took {} ms",
                format_bytes(m.used),
                format_bytes(m.total),
                format_bytes(m.available),
                snap.pressure.level,
                snap.processes.len(),
                ml,
                snap.sample_micros / 1000,
            );
        } else {
            debug!(
                "sample: {} used, {} available, pressure {}, {} processes, {} µs{}",
                format_bytes(m.used),
                format_bytes(m.available),
                snap.pressure.level,
                snap.processes.len(),
                snap.sample_micros,
                if depth == Depth::Light { ", light" } else { "" }
            );
        }
        let level = snap.pressure.level;
        if let Some(prev) = self.level
            && prev != level
        {
            let msg = format!(
                "memory pressure {level} (was {prev}): {} available of {}",
                format_bytes(m.available),
                format_bytes(m.total)
            );
            if level > prev {
                warn!("{msg}");
            } else {
                info!("{msg}");
            }
        }
        self.level = Some(level);

        let mut seen = HashSet::new();
        let now = Instant::now();
        for p in snap.processes.iter().filter(|p| p.workload.is_ml()) {
            seen.insert(p.id);
            if !self.ml.contains(&p.id) && self.sources.admit(p.uid, p.user.as_deref(), now) {
                info!(
                    pid = p.id.pid,
                    workload = p.workload.kind.as_str(),
                    "watching {} {} (pid {}), footprint {}{}",
                    p.workload.kind,
                    printable(&p.name),
                    p.id.pid,
                    format_bytes(p.footprint),
                    p.workload
                        .evidence
                        .first()
                        .map(|e| format!(": {}", printable(e)))
                        .unwrap_or_default()
                );
            }
        }
        self.ml = seen;
    }

    /// Log a failed sample, at most once per throttle period.
    pub fn failed(&mut self, e: &SampleError) {
        self.consecutive_failures += 1;
        let n = self.consecutive_failures;
        if self.failure_log.due(std::time::Instant::now()).is_some() {
            error!("sampling failed ({n} in a row): {e}");
        }
    }
}

impl SampleLog {
    /// A policy event in the log, within its process owner's lines.
    pub fn policy_event(&mut self, kind: &EventKind) {
        let process = match kind {
            EventKind::LimitCrossed { process, .. }
            | EventKind::LimitHeldNotActing { process, .. }
            | EventKind::LimitCleared { process, .. } => process,
            _ => return,
        };
        if self.admits(process) {
            log_policy_event(kind);
        }
    }

    /// A post-mortem's sentence in the log, within its process owner's lines.
    pub fn postmortem(&mut self, process: &ProcessRef, sentence: &str) {
        if self.admits(process) {
            info!(pid = process.pid, "{sentence}");
        }
    }

    fn admits(&mut self, process: &ProcessRef) -> bool {
        self.sources
            .admit(process.uid, process.user.as_deref(), Instant::now())
    }

    /// Log the notices of users whose lines are left out, and the counts of
    /// their windows that ended.
    pub fn notices(&mut self) {
        for notice in self.sources.notices(Instant::now()) {
            log_notice(&notice);
        }
    }

    /// At a stop: log the counts of every window with lines left out.
    pub fn drain(&mut self) {
        for notice in self.sources.drain(Instant::now()) {
            log_notice(&notice);
        }
    }
}

fn log_notice(notice: &Notice) {
    match notice {
        Notice::Suppressing { uid, .. } => warn!(uid = *uid, "{notice}"),
        Notice::Suppressed { uid, .. } => info!(uid = *uid, "{notice}"),
    }
}

/// Policy events in the log: crossings at warn, the rest at info.
fn log_policy_event(kind: &EventKind) {
    match kind {
        EventKind::LimitCrossed {
            rule,
            process,
            detail,
        } => warn!(
            rule = %rule,
            pid = process.pid,
            "rule {rule}: {} (pid {}) crossed its limit: {detail}",
            printable(&process.name),
            process.pid
        ),
        EventKind::LimitHeldNotActing {
            rule,
            process,
            reason,
            ..
        } => warn!(
            rule = %rule,
            pid = process.pid,
            "rule {rule}: {} (pid {}) crossed its limit and the rule does not act: {reason}",
            printable(&process.name),
            process.pid
        ),
        EventKind::LimitCleared { rule, process, .. } => info!(
            rule = %rule,
            pid = process.pid,
            "rule {rule}: {} (pid {}) is back below its limit",
            printable(&process.name),
            process.pid
        ),
        _ => {}
    }
}
