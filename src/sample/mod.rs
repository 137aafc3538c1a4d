//! Samplers: where snapshots come from.
//!
//! One [`Sampler`] implementation per OS, chosen at compile time in
//! [`platform_sampler`] (the only place that names an OS), plus the
//! sysinfo-backed [`fallback`] sampler for other OSes and the [`replay`]
//! sampler that plays back a recorded trace for tests and simulations.

pub mod fallback;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod replay;

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

    /// Take one snapshot of the machine.
    fn sample(&mut self) -> Result<crate::model::Snapshot, SampleError>;
}

/// The native sampler for the OS this binary was built for.
pub fn platform_sampler() -> Box<dyn Sampler> {
    #[cfg(target_os = "linux")]
    {
        Box::new(linux::LinuxSampler::new("/proc"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Box::new(fallback::SysinfoSampler::new())
    }
}
