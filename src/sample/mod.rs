//! Samplers: where snapshots come from.
//!
//! One [`Sampler`] per OS (`os::linux`, `os::macos`, the one built picked
//! in `os`), wrapped in [`platform_sampler`] with GPU figures ([`gpu`]),
//! labels ([`labels`]) and jobs ([`jobs`]), and the [`replay`] sampler that
//! plays back a recorded trace for tests and simulations.
//! [`doctor_checks`] and [`doctor_facts`] pick, the same way, what
//! `headroom doctor` checks on this OS, and [`exit_causes()`] opens this OS's
//! record of how processes end (the OOM killer's lines in `/dev/kmsg`, a
//! zombie's exit status) for post-mortems.

pub mod exit_causes;
pub mod gpu;
pub mod jobs;
pub mod labels;
pub mod probe;
pub mod replay;

pub use exit_causes::{
    Crash, Ended, ExitCauses, ExitStatus, GpuFault, Killer, MemoryKill, Observed, exit_causes,
};

pub use crate::model::sampling::{SampleError, Sampler};
use crate::os::native as os;

/// The native sampler for the OS this binary was built for, with GPU
/// figures joined in where `gpu_settings` ask for them and the OS has a collector
/// (NVML on Linux), its processes labelled with who they belong to where
/// their cgroups say ([`labels`], as `label_settings` ask) and grouped
/// into jobs ([`jobs`]).
pub fn platform_sampler(
    gpu_settings: &crate::config::GpuConfig,
    label_settings: &crate::config::LabelsConfig,
) -> Box<dyn Sampler> {
    jobs::with_jobs(labels::with_labels(
        gpu::wrap(os::open_sampler(), gpu_settings),
        label_settings,
    ))
}

/// This OS's collector checks for `headroom doctor`, each run once, the GPU
/// collector's where the OS has one, and what post-mortems can learn here
/// ([`exit_causes::doctor_check`]).
pub fn doctor_checks() -> Vec<crate::model::Check> {
    let mut checks = os::doctor::checks();
    checks.extend(gpu::doctor_check());
    checks.push(exit_causes::doctor_check());
    checks
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

    /// How the notification stands, for `/metrics` and the API. Not
    /// applicable when (Linux) the kernel refused a trigger to a daemon
    /// that is not root.
    pub fn status(&self) -> crate::model::CollectorStatus {
        let up = self.is_active();
        crate::model::CollectorStatus {
            name: "pressure-events".to_string(),
            up,
            detail: self.detail.clone(),
            errors: 0,
            applicable: up || crate::os::this_process::running_as_root(),
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
