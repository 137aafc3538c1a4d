//! Samplers: where snapshots come from.
//!
//! One [`Sampler`] per OS (`os::linux`, `os::macos`, the one built picked
//! in `os`), wrapped in [`platform_sampler`] with GPU figures ([`gpu`]),
//! labels ([`labels`]), each ML process's framework environment
//! ([`environment`]) and jobs ([`jobs`]), each snapshot carrying the
//! status of every [`Collector`] inside, and the [`replay`] sampler that
//! plays back a recorded trace for tests and simulations.
//! [`doctor_checks`] and [`doctor_facts`] pick, the same way, what
//! `headroom doctor` checks on this OS, and [`exit_causes()`] opens this OS's
//! record of how processes end (the OOM killer's lines in `/dev/kmsg`, a
//! zombie's exit status) for post-mortems.

pub mod environment;
pub mod exit_causes;
pub mod gpu;
pub mod jobs;
pub mod labels;
pub mod probe;
pub mod replay;

pub use exit_causes::{
    Crash, Ended, ExitCauses, ExitStatus, GpuFault, Killer, MemoryKill, Observed, exit_causes,
};

use crate::model::collector::gather;
pub use crate::model::sampling::{SampleError, Sampler};
use crate::model::{Collector, CollectorStatus, Snapshot};
use crate::os::native as os;

/// The native sampler for the OS this binary was built for, with GPU
/// figures joined in where `gpu_settings` ask for them and the OS has a collector
/// (NVML on Linux), its processes labelled with who they belong to where
/// their cgroups say ([`labels`], as `label_settings` ask), the versions
/// of the frameworks each ML process loads in its evidence
/// ([`environment`]) and grouped into jobs ([`jobs`]). Each snapshot lists
/// the status of the sampler's collectors ([`Sampler::collectors`]: cgroup
/// limits, proportional shares, library scans, NVML, labels,
/// environments), in that order.
pub fn platform_sampler(
    gpu_settings: &crate::config::GpuConfig,
    label_settings: &crate::config::LabelsConfig,
) -> Box<dyn Sampler> {
    with_statuses(jobs::with_jobs(environment::with_environments(
        labels::with_labels(gpu::wrap(os::open_sampler(), gpu_settings), label_settings),
    )))
}

/// `sampler` with each snapshot listing how its collectors stand
/// (`Snapshot::collectors`, after what the snapshot lists already: a
/// replayed one's recorded list), the one place a sampler's collectors
/// are gathered.
pub fn with_statuses(sampler: Box<dyn Sampler>) -> Box<dyn Sampler> {
    Box::new(Reporting(sampler))
}

/// See [`with_statuses`].
struct Reporting(Box<dyn Sampler>);

impl Reporting {
    fn report(&self, mut snap: Snapshot) -> Snapshot {
        snap.collectors.extend(gather(&self.0.collectors()));
        snap
    }
}

impl Sampler for Reporting {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        let snap = self.0.sample()?;
        Ok(self.report(snap))
    }

    fn sample_light(&mut self, watched: &[u32]) -> Result<Snapshot, SampleError> {
        let snap = self.0.sample_light(watched)?;
        Ok(self.report(snap))
    }

    fn sample_unless(
        &mut self,
        watched: &[u32],
        trip: &crate::model::sampling::Tripwire,
    ) -> Result<(Snapshot, bool), SampleError> {
        let (snap, full) = self.0.sample_unless(watched, trip)?;
        Ok((self.report(snap), full))
    }

    fn collectors(&self) -> Vec<&dyn Collector> {
        self.0.collectors()
    }
}

/// The checks of this OS for `headroom doctor` that are no collector's
/// (`/proc`, PSI, permissions, open files, the container), each run once.
pub fn doctor_checks() -> Vec<crate::model::Check> {
    os::doctor::checks()
}

/// Facts about this machine for the head of `headroom doctor`'s report
/// (OS release, kernel, hardware), as (label, value).
pub fn doctor_facts() -> Vec<(&'static str, String)> {
    os::doctor::facts()
}

/// The OS's "memory is getting tight" notification, awaited by the daemon
/// loop so it samples at once instead of at its next tick: a PSI trigger
/// on Linux, a dispatch memory-pressure source on macOS
/// (`os::<os>::wake`).
pub struct PressureEvents {
    wake: os::wake::PressureWake,
    /// What was set up, or why nothing was, for [`PressureEvents::status`].
    detail: String,
}

impl PressureEvents {
    /// Set up the notification. The second value describes what was set up,
    /// or why nothing was (to be logged once; polling still works).
    /// Must be called inside a tokio runtime.
    pub fn open() -> (Self, Result<String, String>) {
        let (wake, note) = os::wake::PressureWake::open();
        let detail = match &note {
            Ok(what) => what.clone(),
            Err(why) => format!("{why}; the daemon polls every tick instead"),
        };
        (Self { wake, detail }, note)
    }

    /// No notification: the loop polls.
    pub fn none() -> Self {
        Self {
            wake: os::wake::PressureWake::none(),
            detail: "no memory-pressure notification was set up; polling every tick".to_string(),
        }
    }

    /// True if an OS notification is registered.
    pub fn is_active(&self) -> bool {
        self.wake.is_active()
    }

    /// Wait for the next notification; never returns if none is registered.
    /// The level is the least the event stands for, to be reported on the
    /// sample it wakes (the figures read then may lag it): on Linux the
    /// level a PSI trigger stands for; on macOS the level the dispatch
    /// source names (`normal` when pressure went back down). An error
    /// disables the source (the caller logs it once).
    pub async fn next(&mut self) -> Result<Option<crate::model::PressureLevel>, String> {
        self.wake.next().await
    }
}

impl Collector for PressureEvents {
    fn name(&self) -> &'static str {
        "pressure-events"
    }

    /// How the notification stands, for `/metrics` and the API. Not
    /// applicable when (Linux) the kernel refused a trigger to a daemon
    /// that is not root.
    fn status(&self) -> Option<CollectorStatus> {
        let up = self.is_active();
        Some(CollectorStatus {
            name: "pressure-events".to_string(),
            up,
            detail: self.detail.clone(),
            errors: 0,
            applicable: up || crate::os::this_process::running_as_root(),
        })
    }

    /// Whether this OS registers the notification for this process: a
    /// trigger or source set up and dropped at once (`os::<os>::doctor`).
    fn doctor_check(&self) -> Option<crate::model::Check> {
        Some(os::doctor::pressure_events())
    }
}

/// For tests of parsers fed from published captures: the lines of `text`
/// after the `#` comment line that names `source`, up to the next blank or
/// comment line. Fails the test if no comment names `source`.
#[cfg(test)]
pub(crate) fn fixture_block(text: &'static str, source: &str) -> Vec<&'static str> {
    let mut lines = text.lines();
    let found = lines
        .by_ref()
        .any(|l| l.starts_with('#') && l.contains(source));
    assert!(found, "no block from {source}");
    lines
        .skip_while(|l| l.starts_with('#'))
        .take_while(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}
