//! What every source of snapshots and every probe of the machine-wide
//! figures gives, whichever OS or trace it reads: the [`Sampler`] and
//! [`Probe`] traits, their readings and their errors. The OS layer
//! (`os::linux`, `os::macos`) and the replay implement them; `sample` and
//! the daemon use them.

use std::time::{Duration, Instant};

use crate::model::{Collector, PressureLevel, Snapshot};

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
    fn sample(&mut self) -> Result<Snapshot, SampleError>;

    /// Take a light snapshot: the machine-wide figures and the processes
    /// that matter read afresh (those this sampler finds interesting, such
    /// as ML workloads, the largest ones, new ones, and the `watched` pids
    /// the caller names: those matched by a rule with a per-process limit);
    /// every other process carries the values of an earlier sample.
    /// Samplers without a cheaper way take a full sample.
    fn sample_light(&mut self, watched: &[u32]) -> Result<Snapshot, SampleError> {
        let _ = watched;
        self.sample()
    }

    /// A full snapshot, unless `trip` holds while the process table is
    /// read: a rule's machine-wide condition crossed meanwhile, and its
    /// victim must be picked now, not after thousands more reads. Then the
    /// reading stops, the rest of the table is carried as on a light
    /// snapshot (`watched` re-read), and the machine-wide figures are read
    /// again. Returns the snapshot and whether it read every process
    /// afresh. Samplers that cannot stop take a full sample.
    fn sample_unless(
        &mut self,
        watched: &[u32],
        trip: &Tripwire,
    ) -> Result<(Snapshot, bool), SampleError> {
        let _ = (watched, trip);
        self.sample().map(|snap| (snap, true))
    }

    /// The sources inside this sampler that report how they stand (cgroup
    /// limits, proportional shares, NVML, labels), the innermost first,
    /// for the snapshot's collector list and `headroom doctor`
    /// ([`crate::model::collector::gather`]). A wrapper lists its inner
    /// sampler's, then its own, so none is lost on the way out.
    fn collectors(&self) -> Vec<&dyn Collector>;
}

/// A boxed sampler is a sampler, so that wrappers (GPU figures, labels,
/// jobs) take either a concrete one or one chosen at run time.
impl Sampler for Box<dyn Sampler> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        (**self).sample()
    }

    fn sample_light(&mut self, watched: &[u32]) -> Result<Snapshot, SampleError> {
        (**self).sample_light(watched)
    }

    fn sample_unless(
        &mut self,
        watched: &[u32],
        trip: &Tripwire,
    ) -> Result<(Snapshot, bool), SampleError> {
        (**self).sample_unless(watched, trip)
    }

    fn collectors(&self) -> Vec<&dyn Collector> {
        (**self).collectors()
    }
}

/// The machine-wide figures at which a full sample stops reading the
/// process table ([`Sampler::sample_unless`]): one [`TripGate`] per rule
/// condition that does not hold yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tripwire {
    pub gates: Vec<TripGate>,
}

/// One condition of a [`Tripwire`], resolved to bytes: it holds when every
/// figure it names is past its threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TripGate {
    /// Holds while available memory is below this.
    pub available_below: Option<u64>,
    /// Holds while swap used is above this.
    pub swap_used_above: Option<u64>,
}

impl TripGate {
    fn holds(&self, available: u64, swap_used: u64) -> bool {
        (self.available_below.is_some() || self.swap_used_above.is_some())
            && self.available_below.is_none_or(|t| available < t)
            && self.swap_used_above.is_none_or(|t| swap_used > t)
    }
}

impl Tripwire {
    /// Whether there is anything to watch for.
    pub fn is_empty(&self) -> bool {
        self.gates.is_empty()
    }

    /// Whether any gate holds at these figures.
    pub fn tripped(&self, available: u64, swap_used: u64) -> bool {
        self.gates.iter().any(|g| g.holds(available, swap_used))
    }
}

/// One look at the machine-wide figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeReading {
    /// When it was read (monotonic).
    pub at: Instant,
    /// Physical memory, bytes.
    pub total: u64,
    /// Memory available without swapping, bytes.
    pub available: u64,
    /// Swap space, bytes (0: no swap).
    pub swap_total: u64,
    /// Swap in use, bytes.
    pub swap_used: u64,
    /// The pressure level as a sample would report it; from the available
    /// share alone when the probe was asked not to read the kernel's
    /// pressure figures.
    pub pressure: PressureLevel,
    /// How long the source may go on answering with an earlier figure:
    /// zero where every read is fresh (Linux's `/proc/meminfo`, the macOS
    /// page-count sysctls); the rate limit's window where the figures come
    /// from macOS's `host_statistics64` alone, which repeats a cached copy
    /// within it. The trend counts a repeated figure once, at the time it
    /// was first seen, until the repeat outlasts this
    /// (`daemon::cadence::trend`).
    pub cached_for: Duration,
}

impl ProbeReading {
    /// The same figures from a full or light sample taken at `at`. A
    /// sample claims no lag of its own: the sampler reads the same source
    /// as the probe, whose readings say what it may lag by.
    pub fn of(snap: &Snapshot, at: Instant) -> Self {
        Self {
            at,
            total: snap.system.total,
            available: snap.system.available,
            swap_total: snap.swap.total,
            swap_used: snap.swap.used,
            pressure: snap.pressure.level,
            cached_for: Duration::ZERO,
        }
    }
}

/// Reads the machine-wide figures. Called from a blocking thread, never on
/// the async runtime's workers.
pub trait Probe: Send {
    /// Read them now. With `pressure` false the kernel's pressure figures
    /// (Linux PSI) are not read and the level comes from the available
    /// share alone: no rule asks about pressure.
    fn read(&mut self, pressure: bool) -> Result<ProbeReading, SampleError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tripwire_trips_when_every_figure_of_a_gate_is_past_its_threshold() {
        let both = TripGate {
            available_below: Some(100),
            swap_used_above: Some(50),
        };
        let w = Tripwire { gates: vec![both] };
        assert!(!w.tripped(99, 50), "swap not past yet");
        assert!(!w.tripped(100, 51), "available not below yet");
        assert!(w.tripped(99, 51));
        // Either of two gates.
        let w = Tripwire {
            gates: vec![
                both,
                TripGate {
                    available_below: Some(10),
                    swap_used_above: None,
                },
            ],
        };
        assert!(w.tripped(9, 0));
        // A gate with no figure never trips; no gate, nothing.
        assert!(
            !Tripwire {
                gates: vec![TripGate::default()]
            }
            .tripped(0, u64::MAX)
        );
        assert!(!Tripwire::default().tripped(0, u64::MAX));
    }
}
