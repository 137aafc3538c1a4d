//! What the daemon loop says in its log about each sample and each policy
//! event: changes rather than states (the first sample, a pressure level
//! that moved, an ML process seen for the first time, sampling that failed
//! or works again), with failures throttled.

use std::collections::HashSet;

use tracing::{debug, error, info, warn};

use crate::daemon::cadence::Depth;
use crate::event::EventKind;
use crate::model::{PressureLevel, ProcessId, Snapshot};
use crate::report::rate_limit::RateLimit;
use crate::report::{format_bytes, printable};
use crate::sample::SampleError;

/// Remembers enough between samples to log changes rather than states.
#[derive(Default)]
pub struct Tracker {
    samples: u64,
    consecutive_failures: u64,
    failure_log: RateLimit,
    level: Option<PressureLevel>,
    ml: HashSet<ProcessId>,
}

impl Tracker {
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
        for p in snap.processes.iter().filter(|p| p.workload.is_ml()) {
            seen.insert(p.id);
            if !self.ml.contains(&p.id) {
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

/// Policy events in the log: crossings at warn, the rest at info.
pub fn log_policy_event(kind: &EventKind) {
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
