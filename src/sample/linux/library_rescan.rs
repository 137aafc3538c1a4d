//! Library scans of the Linux sampler: which shared objects a process has
//! mapped (`/proc/[pid]/maps`), for the processes the classifier asks it of.
//!
//! Python processes import their frameworks seconds after start, so one
//! whose framework has not shown up yet is re-scanned when it grows by half
//! and by 64 MiB since the last scan, or every 30 s, until one turns up. A
//! process whose `maps` is refused (another user's) is not asked again.

use std::time::{Duration, Instant};

use crate::model::CollectorErrors;
use crate::sys::procfs;

use super::proc_reader::Failure;
use super::process_reads::Io;
use super::tracker::Tracked;

/// A Python process without a known framework is re-scanned when its
/// resident size has grown by this share (percent) since the last scan…
const RESCAN_GROWTH_PERCENT: u64 = 50;
/// …and by at least this many bytes,
const RESCAN_GROWTH_BYTES: u64 = 64 << 20;
/// or when this long has passed since the last scan.
const RESCAN_INTERVAL: Duration = Duration::from_secs(30);

/// When a process's libraries were last listed.
#[derive(Debug, Clone, Copy)]
pub(super) struct LibraryScan {
    pub(super) resident_at: u64,
    pub(super) at: Instant,
    /// `maps` refused (another user's process): stop trying.
    pub(super) blocked: bool,
}

impl LibraryScan {
    /// A process about to be scanned for the first time.
    pub(super) fn first() -> Self {
        Self {
            resident_at: 0,
            at: Instant::now(),
            blocked: false,
        }
    }
}

impl Io {
    /// Read the libraries mapped into a process.
    pub(super) fn scan_libraries(
        &mut self,
        pid: u32,
        t: &mut Tracked,
        errors: &mut CollectorErrors,
    ) {
        let resident = t.statm.resident.saturating_mul(self.page_size);
        let Some(scan) = t.scan.as_mut() else {
            return;
        };
        scan.resident_at = resident;
        scan.at = Instant::now();
        match self.reader.read_pid_to_end(pid, "maps") {
            Ok(data) => t.libraries = procfs::parse_maps_libraries(data),
            Err(Failure::Denied) => {
                scan.blocked = true;
                Failure::Denied.count(errors);
            }
            // Vanished: the next statm read will notice.
            Err(Failure::Vanished) => {}
            Err(f) => f.count(errors),
        }
    }

    /// Re-scan a Python process's libraries once it has grown enough or
    /// enough time has passed, and classify it again.
    pub(super) fn rescan_if_due(
        &mut self,
        pid: u32,
        t: &mut Tracked,
        errors: &mut CollectorErrors,
    ) {
        let Some(scan) = t.scan else {
            return;
        };
        if scan.blocked || !t.workload.frameworks.is_empty() {
            return;
        }
        let resident = t.statm.resident.saturating_mul(self.page_size);
        if rescan_due(scan.resident_at, resident, scan.at.elapsed()) {
            self.scan_libraries(pid, t, errors);
            t.workload = t.classify();
        }
    }
}

/// Whether a Python process's libraries are worth listing again: frameworks
/// are imported seconds after start and show up as growth, so rescan after
/// growth by [`RESCAN_GROWTH_PERCENT`] and [`RESCAN_GROWTH_BYTES`] since the
/// last scan, and otherwise every [`RESCAN_INTERVAL`].
fn rescan_due(resident_at_scan: u64, resident: u64, since_scan: Duration) -> bool {
    let growth = resident.saturating_sub(resident_at_scan);
    let grown = growth >= RESCAN_GROWTH_BYTES
        && u128::from(growth) * 100
            >= u128::from(resident_at_scan) * u128::from(RESCAN_GROWTH_PERCENT);
    grown || since_scan >= RESCAN_INTERVAL
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::linux::LinuxSampler;

    #[test]
    fn rescan_after_half_and_64_mib_growth_or_30_s() {
        const MIB: u64 = 1 << 20;
        let soon = Duration::from_secs(1);
        // 200 MiB → 299 MiB: 49.5 %, not yet; 300 MiB: due.
        assert!(!rescan_due(200 * MIB, 299 * MIB, soon));
        assert!(rescan_due(200 * MIB, 300 * MIB, soon));
        // +50 % but only 50 MiB.
        assert!(!rescan_due(100 * MIB, 150 * MIB, soon));
        // 10 MiB → 70 MiB is +600 % but under 64 MiB of growth.
        assert!(!rescan_due(10 * MIB, 70 * MIB, soon));
        assert!(rescan_due(10 * MIB, 74 * MIB, soon));
        // Shrinking never triggers; time does.
        assert!(!rescan_due(500 * MIB, 100 * MIB, soon));
        assert!(rescan_due(500 * MIB, 100 * MIB, Duration::from_secs(30)));
    }

    #[test]
    fn library_scan_lists_mapped_shared_objects_and_a_gone_process_counts_nothing() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/proc/basic");
        let mut sampler = LinuxSampler::new(root);
        let mut errors = CollectorErrors::default();
        let mut t = Tracked {
            scan: Some(LibraryScan {
                resident_at: 0,
                at: Instant::now(),
                blocked: false,
            }),
            ..Tracked::default()
        };
        sampler.io.scan_libraries(6441, &mut t, &mut errors);
        assert!(t.libraries.iter().any(|l| l == "libpython3.11.so.1.0"));
        assert_eq!(errors, CollectorErrors::default());
        // A process without maps (gone): nothing counted, nothing found.
        let mut gone = Tracked {
            scan: t.scan,
            ..Tracked::default()
        };
        sampler.io.scan_libraries(99999, &mut gone, &mut errors);
        assert!(gone.libraries.is_empty());
        assert_eq!(errors, CollectorErrors::default());
    }

    #[test]
    fn a_process_whose_maps_was_refused_is_not_scanned_again() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/proc/basic");
        let mut sampler = LinuxSampler::new(root);
        let mut errors = CollectorErrors::default();
        let long_ago = Instant::now()
            .checked_sub(RESCAN_INTERVAL * 2)
            .unwrap_or_else(Instant::now);
        let scan = |blocked| LibraryScan {
            resident_at: 0,
            at: long_ago,
            blocked,
        };
        // Due by time, maps readable: the positive control scans.
        let mut open = Tracked {
            scan: Some(scan(false)),
            ..Tracked::default()
        };
        sampler.io.rescan_if_due(6441, &mut open, &mut errors);
        assert!(open.libraries.iter().any(|l| l == "libpython3.11.so.1.0"));
        // The same process once refused: left alone.
        let mut refused = Tracked {
            scan: Some(scan(true)),
            ..Tracked::default()
        };
        sampler.io.rescan_if_due(6441, &mut refused, &mut errors);
        assert!(refused.libraries.is_empty());
        assert_eq!(errors, CollectorErrors::default());
    }
}
