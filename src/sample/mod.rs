//! Samplers: where snapshots come from.
//!
//! One [`Sampler`] implementation per OS, chosen at compile time in
//! [`platform_sampler`] (the only place that names an OS), plus the
//! sysinfo-backed [`fallback`] sampler for other OSes and the [`replay`]
//! sampler that plays back a recorded trace for tests and simulations.
//! [`doctor_checks`] and [`doctor_facts`] pick, the same way, what
//! `headroom doctor` checks on this OS, and [`exit_causes`] opens this OS's
//! record of how processes end (the OOM killer's lines in `/dev/kmsg`, a
//! zombie's exit status) for post-mortems.

pub mod exit_causes;
pub mod fallback;
#[cfg(unix)]
pub mod gpu;
pub mod jobs;
pub mod labels;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod macos;
pub mod probe;
#[cfg(target_os = "linux")]
pub mod psi_trigger;
pub mod replay;
pub mod user_names;

pub use exit_causes::{
    Crash, Ended, ExitCauses, ExitStatus, GpuFault, Killer, MemoryKill, Observed, exit_causes,
};

/// Why a whole sample failed. Per-process failures never get here: they are
/// counted in [`crate::model::CollectorErrors`].
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// A system-wide source (e.g. `/proc/meminfo`) could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A system-wide source was read but did not parse.
    #[error("cannot parse {path}: {reason}")]
    Parse { path: String, reason: String },
    /// A replayed trace has no more snapshots.
    #[error("the trace has no more snapshots")]
    EndOfTrace,
    /// A replayed trace holds a line that is not a snapshot.
    #[error("{path}:{line}: not a snapshot: {reason}")]
    Trace {
        path: String,
        line: usize,
        reason: String,
    },
}

/// Produces snapshots. Called from a blocking thread, never on the async
/// runtime's workers.
pub trait Sampler: Send {
    /// Short name for logs and `Snapshot::source`.
    fn name(&self) -> &'static str;

    /// Take one snapshot of the machine, every process read afresh.
    fn sample(&mut self) -> Result<crate::model::Snapshot, SampleError>;

    /// Take a light snapshot: the machine-wide figures and the processes
    /// that matter read afresh (those this sampler finds interesting, such
    /// as ML workloads, the largest ones, new ones, and the `watched` pids
    /// the caller names: those matched by a rule with a per-process limit);
    /// every other process carries the values of an earlier sample.
    /// Samplers without a cheaper way take a full sample.
    fn sample_light(&mut self, watched: &[u32]) -> Result<crate::model::Snapshot, SampleError> {
        let _ = watched;
        self.sample()
    }
}

/// The native sampler for the OS this binary was built for, with GPU
/// figures joined in where `gpu_settings` ask for them and the OS has a collector
/// (NVML on Linux), its processes labelled with who they belong to where
/// their cgroups say ([`labels`], as `label_settings` ask) and grouped
/// into jobs ([`jobs`]).
pub fn platform_sampler(
    gpu_settings: &crate::config::GpuConfig,
    label_settings: &crate::config::LabelsConfig,
) -> Box<dyn Sampler> {
    #[cfg(target_os = "linux")]
    {
        jobs::with_jobs(labels::with_labels(
            gpu::wrap(linux::LinuxSampler::new("/proc"), gpu_settings),
            label_settings,
        ))
    }
    #[cfg(target_os = "macos")]
    {
        // NVML is Linux-only; the Mac's GPU is read by the sampler itself
        // through IOKit, which needs no settings.
        // No cgroups on macOS: nothing to label.
        let _ = (gpu_settings, label_settings);
        jobs::with_jobs(Box::new(macos::MacSampler::new()))
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = label_settings;
        jobs::with_jobs(gpu::wrap(fallback::SysinfoSampler::new(), gpu_settings))
    }
}

/// This OS's collector checks for `headroom doctor`, each run once, and
/// what post-mortems can learn here ([`exit_causes::doctor_check`]).
pub fn doctor_checks() -> Vec<crate::model::Check> {
    #[cfg(target_os = "linux")]
    let mut checks = linux::doctor::checks();
    #[cfg(target_os = "macos")]
    let mut checks = macos::doctor::checks();
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    let mut checks = vec![fallback::doctor_check()];
    checks.push(exit_causes::doctor_check());
    checks
}

/// Facts about this machine for the head of `headroom doctor`'s report
/// (OS release, kernel, hardware), as (label, value).
pub fn doctor_facts() -> Vec<(&'static str, String)> {
    #[cfg(target_os = "linux")]
    {
        linux::doctor::facts()
    }
    #[cfg(target_os = "macos")]
    {
        macos::doctor::facts()
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        Vec::new()
    }
}

/// The OS's "memory is getting tight" notification, awaited by the daemon
/// loop so it samples at once instead of at its next tick.
///
/// Linux: a PSI trigger. macOS: a dispatch memory-pressure source.
/// Elsewhere: none, and the loop polls.
pub struct PressureEvents {
    #[cfg(target_os = "linux")]
    trigger: Option<psi_trigger::PsiTrigger>,
    #[cfg(target_os = "macos")]
    source: Option<macos::pressure_source::MemoryPressureSource>,
    /// What was set up, or why nothing was, for [`PressureEvents::status`].
    detail: String,
}

impl PressureEvents {
    /// Set up the notification. The second value describes what was set up,
    /// or why nothing was (to be logged once; polling still works).
    /// Must be called inside a tokio runtime.
    pub fn open() -> (Self, Result<String, String>) {
        #[cfg(target_os = "linux")]
        {
            let path = std::path::Path::new("/proc/pressure/memory");
            match psi_trigger::PsiTrigger::register(path) {
                Ok(t) => {
                    let note = format!("PSI trigger \"{}\" on {}", t.spec(), path.display());
                    let detail = note.clone();
                    (
                        Self {
                            trigger: Some(t),
                            detail,
                        },
                        Ok(note),
                    )
                }
                Err(e) => (
                    Self {
                        trigger: None,
                        detail: format!("{e}; the daemon polls every tick instead"),
                    },
                    Err(e.to_string()),
                ),
            }
        }
        #[cfg(target_os = "macos")]
        {
            let source = macos::pressure_source::MemoryPressureSource::open();
            let note =
                "a dispatch memory-pressure source (the pressure sysctl is still read every tick)";
            (
                Self {
                    source: Some(source),
                    detail: note.to_string(),
                },
                Ok(note.to_string()),
            )
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        {
            let why = "no memory-pressure notification on this OS; polling every tick";
            (
                Self {
                    detail: why.to_string(),
                },
                Err(why.to_string()),
            )
        }
    }

    /// A source that never fires (tests, replayed traces).
    pub fn none() -> Self {
        Self {
            #[cfg(target_os = "linux")]
            trigger: None,
            #[cfg(target_os = "macos")]
            source: None,
            detail: "no memory-pressure notification was set up; polling every tick".to_string(),
        }
    }

    /// How the notification stands, for `/metrics` and the API. Not
    /// applicable where the OS has none, or (Linux) when the kernel refused
    /// a trigger to a daemon that is not root.
    pub fn status(&self) -> crate::model::CollectorStatus {
        let up = self.is_active();
        let possible = cfg!(any(target_os = "linux", target_os = "macos"))
            && crate::sys::this_process::running_as_root();
        crate::model::CollectorStatus {
            name: "pressure-events".to_string(),
            up,
            detail: self.detail.clone(),
            errors: 0,
            applicable: up || possible,
        }
    }

    /// True if an OS notification is registered.
    pub fn is_active(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.trigger.is_some()
        }
        #[cfg(target_os = "macos")]
        {
            self.source.is_some()
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        {
            false
        }
    }

    /// Wait for the next notification; never returns if none is registered.
    /// The level is the least the event stands for, to be reported on the
    /// sample it wakes (the figures read then may lag it): Linux
    /// [`psi_trigger::TRIGGER_LEVEL`]; macOS the level the dispatch source
    /// names (`normal` when pressure went back down). An error disables
    /// the source (the caller logs it once).
    pub async fn next(&mut self) -> Result<Option<crate::model::PressureLevel>, String> {
        #[cfg(target_os = "linux")]
        if let Some(t) = self.trigger.as_mut() {
            let result = t.wait().await;
            if let Err(e) = result {
                self.trigger = None;
                return Err(format!(
                    "PSI trigger stopped working: {e}; polling every tick"
                ));
            }
            return Ok(Some(psi_trigger::TRIGGER_LEVEL));
        }
        #[cfg(target_os = "macos")]
        if let Some(source) = self.source.as_ref() {
            let flags = source.wait().await;
            let level = macos::pressure::level_from_dispatch_mask(flags);
            if let Some(level) = level {
                tracing::debug!("memory-pressure event: {level}");
            }
            return Ok(level);
        }
        std::future::pending().await
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
