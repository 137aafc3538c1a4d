//! The Linux sampler: `/proc` into a [`Snapshot`].
//!
//! This file wires the parts together: system figures (`system_files.rs`:
//! `/proc/meminfo`, whose failure alone fails the sample, `/proc/vmstat`,
//! PSI), the per-process state and the full tick (`tracker.rs`), the light
//! tick (`light_tick.rs`), one process's reads (`process_reads.rs` through
//! `proc_reader.rs`), library scans (`library_rescan.rs`,
//! `library_worker.rs`), memory no process owns (`unowned.rs`), cgroup
//! paths and the limits above them (`cgroup_paths.rs`, `ceilings.rs`).
//!
//! What a tick reads was chosen by measurement (`benches/sample_cost.rs`,
//! figures in `BENCHMARKS.md`, "Sampling cost"):
//!
//! - Every full tick lists `/proc` and reads `statm` of every process. It is
//!   kept open and re-read with `pread`; a kept file stays bound to its
//!   process, so a reused pid fails with ESRCH and is noticed the next tick.
//!   The number kept open is bounded ([`LinuxSampler::with_held_files`]).
//! - First sight of a pid reads `stat`, `status`, `cmdline` (at most
//!   [`crate::model::ARGV_MAX_BYTES`]), `exe` and `cgroup`, cached per
//!   identity (pid + start time); kernel threads are remembered, not re-read.
//! - Exact detail (`stat` + `status`) only for ML and Python processes and
//!   the [`TOP_EXACT`] largest; the rest are [`Detail::Estimated`] from
//!   `statm` and a round-robin `stat` check catches a reused pid or a new
//!   name within [`VERIFY_PERIOD`] ticks.
//! - `exec` keeps the identity and changes the program: `statm`'s code size
//!   shows it the tick after (and `stat`, where read, a new name or
//!   `PF_FORKNOEXEC` cleared). The process is then read as at first sight
//!   and classified again, keeping its history (see `tracker.rs`).
//! - [`Sampler::sample_light`] lists `/proc` only when a pid was handed out
//!   (the last field of `/proc/loadavg`) and re-reads only the largest, the
//!   ML / Python processes and the pids the caller watches; the others carry
//!   their last values. The daemon picks light ticks; the first is full.
//! - Python processes' `maps` are read by a thread of their own within a
//!   CPU budget, never on this path: a user decides how long `maps` is.
//!
//! Per-process failures never fail the sample: a process gone is counted as
//! vanished, EACCES/EPERM as permission denied (kept with what was read),
//! anything else as unreadable.
//!
//! [`Detail::Estimated`]: crate::model::Detail::Estimated

use std::path::PathBuf;

use super::ffi::sysconf as sys;
use super::{ceilings, cgroup_paths, proc_reader, process_reads, tracker, unowned};
use std::time::Instant;

use crate::model::sampling::{SampleError, Sampler, Tripwire};
use crate::model::{CollectorErrors, Snapshot, Timestamp, Unowned};
use crate::os::user_names::UserNames;

pub use ceilings::{CeilingReader, LIMITS_EVERY};
use proc_reader::ProcReader;
use process_reads::Io;
use tracker::{ProcessTracker, TickDepth};
pub use tracker::{TOP_EXACT, VERIFY_PERIOD};
use unowned::UnownedScan;

/// Samples a Linux machine through a `/proc` tree.
#[derive(Debug)]
pub struct LinuxSampler {
    pub(super) io: Io,
    pub(super) tracker: ProcessTracker,
    pub(super) unowned: UnownedScan,
    pub(super) ceilings: CeilingReader,
}

impl LinuxSampler {
    /// A sampler reading the `/proc` tree at `root` (`/proc` in production,
    /// a fixture tree in tests). User names come from `/etc/passwd`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        Self {
            ceilings: CeilingReader::new(&root),
            unowned: UnownedScan::new(root.clone()),
            io: Io {
                reader: ProcReader::new(root),
                page_size: sys::page_size(),
                clock_ticks: sys::clock_ticks(),
                boot_time: None,
                users: UserNames::system(),
                cgroups: cgroup_paths::CgroupPaths::default(),
            },
            tracker: ProcessTracker::new(),
        }
    }

    /// Keep at most `max` `statm` files open between ticks (default: half
    /// the open-file soft limit above a reserve of 256, at most 4096). With 0
    /// every read opens and closes its file.
    pub fn with_held_files(mut self, max: usize) -> Self {
        self.tracker.held_budget = max;
        self
    }

    /// Read memory-cgroup limits from these hierarchies instead of those
    /// `<root>/self/mountinfo` lists (tests, benchmarks).
    pub fn with_cgroup_mounts(
        mut self,
        mounts: crate::os::linux::parse::cgroupfs::CgroupMounts,
    ) -> Self {
        self.ceilings = CeilingReader::with_mounts(mounts);
        self
    }

    /// Resolve user names from this passwd file instead of `/etc/passwd`.
    pub fn with_passwd(mut self, path: impl Into<PathBuf>) -> Self {
        self.io.users = UserNames::passwd_file(path);
        self
    }

    /// Number of process identities currently remembered (kernel threads
    /// included); bounded by the number of live processes.
    pub fn tracked_count(&self) -> usize {
        self.tracker.tracked.len()
    }

    /// How many scans of memory no process owns have completed (they run
    /// now and then, on full ticks: see `os/linux/unowned.rs`).
    pub fn unowned_scans(&self) -> u64 {
        self.unowned.completed()
    }

    /// Scan memory no process owns now, from start to end, whatever the
    /// schedule and the per-tick budget, for the processes of the last
    /// tick; the next snapshots carry its result. For the benchmark and
    /// tests: the daemon leaves it to the schedule.
    pub fn scan_unowned(&mut self) {
        let ids: Vec<_> = self
            .tracker
            .tracked
            .iter()
            .filter(|(_, t)| !t.kernel_thread && t.seen >= self.tracker.listed_at)
            .map(|(pid, t)| crate::model::ProcessId {
                pid: *pid,
                start: t.start,
            })
            .collect();
        self.unowned.scan_now(&ids, &mut self.io.users);
    }

    /// One tick at `depth`, with the `watched` pids re-read (the first tick
    /// is full whatever is asked); and whether it read every process.
    fn take(
        &mut self,
        depth: TickDepth<'_>,
        watched: &[u32],
    ) -> Result<(Snapshot, bool), SampleError> {
        let started = Instant::now();
        let taken_at = Timestamp::now();
        self.tracker.tick += 1;
        self.io.users.start_sample();
        let mut errors = CollectorErrors::default();
        let mut system = self.io.read_system(&mut errors)?;
        let full = self
            .tracker
            .sample(&mut self.io, depth, watched, &mut errors);
        if !full && matches!(depth, TickDepth::FullUnless(_)) {
            // Cut short by a crossing: the figures that crossed, not the
            // ones read before it.
            system = self.io.read_system(&mut errors)?;
        }
        // Pages copied on access since the shares were read: the machine's
        // anonymous memory (and swap) against the processes' own figures.
        let machine_anon = system
            .memory
            .app
            .unwrap_or(0)
            .saturating_add(system.swap.used);
        let page = self.io.page_size;
        self.tracker
            .follow_copies(&mut self.io, page, machine_anon, full);
        let mut processes = self.tracker.build_processes(self.io.page_size);
        let mapped_shmem = self.mapped_shmem();
        let mut unowned =
            self.unowned_tick(full, &mut processes, system.memory.shmem, mapped_shmem);
        // Every tick: shared memory that neither the processes' mappings
        // nor the last scan account for, whatever the scan has seen.
        let held_open = processes
            .iter()
            .fold(0u64, |sum, p| sum.saturating_add(p.held_open));
        unowned.unexplained_shmem = system.memory.shmem.filter(|_| unowned.known).map(|shmem| {
            shmem
                .saturating_sub(mapped_shmem)
                .saturating_sub(held_open)
                .saturating_sub(unowned.bytes())
        });
        // Memory the machine gives out that no process's figure shows
        // (copy-on-write in a family read a while ago) hastens the next
        // proportional-share reads. Shared memory is left out of both
        // sides: a tmpfs file nobody maps is no process's, and a read
        // would not show it.
        let shmem = system.memory.shmem.unwrap_or(0);
        let taken = system
            .memory
            .total
            .saturating_sub(system.memory.available)
            .saturating_add(system.swap.used)
            .saturating_sub(shmem);
        // Copies estimated since the last reads are not counted here: only
        // a read confirms them, and it should come soon.
        let counted = processes
            .iter()
            .fold(0u64, |sum, p| {
                sum.saturating_add(p.footprint.saturating_sub(p.held_open))
            })
            .saturating_sub(self.tracker.copies_unread());
        self.tracker
            .pss_budget
            .note_machine(Instant::now(), taken, counted);
        let ceilings = self.ceilings.read(&processes, system.memory.total);
        Ok((
            Snapshot {
                taken_at,
                source: self.name().to_owned(),
                replayed: false,
                sample_micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
                system: system.memory,
                swap: system.swap,
                pressure: system.pressure,
                gpus: Vec::new(),
                processes,
                jobs: Vec::new(),
                unowned,
                ceilings,
                errors,
                collectors: Vec::new(),
                notes: Vec::new(),
            },
            full,
        ))
    }
}

impl LinuxSampler {
    /// Memory no process owns: the scan advances on full ticks (within its
    /// budget), and every tick carries the last complete result, the
    /// processes' `held_open` included.
    fn unowned_tick(
        &mut self,
        full: bool,
        processes: &mut [crate::model::ProcessSample],
        shmem: Option<u64>,
        mapped_shmem: u64,
    ) -> Unowned {
        if !full {
            return self.unowned.carry(processes);
        }
        self.unowned
            .tick(processes, shmem, mapped_shmem, &mut self.io.users)
    }

    /// RssShmem of each process's last `status` read, added up: pages
    /// mapped by several processes count in each, so it can only make the
    /// shared memory nothing accounts for look smaller.
    fn mapped_shmem(&self) -> u64 {
        let listed_at = self.tracker.listed_at;
        self.tracker
            .tracked
            .values()
            .filter(|t| t.seen >= listed_at)
            .filter_map(|t| t.status.and_then(|s| s.rss_shmem))
            .fold(0u64, u64::saturating_add)
    }
}

impl Sampler for LinuxSampler {
    fn name(&self) -> &'static str {
        "linux"
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        self.take(TickDepth::Full, &[]).map(|(snap, _)| snap)
    }

    fn sample_light(&mut self, watched: &[u32]) -> Result<Snapshot, SampleError> {
        self.take(TickDepth::Light, watched).map(|(snap, _)| snap)
    }

    fn sample_unless(
        &mut self,
        watched: &[u32],
        trip: &Tripwire,
    ) -> Result<(Snapshot, bool), SampleError> {
        self.take(TickDepth::FullUnless(trip), watched)
    }

    /// The proportional-share reads and the library scans once they have
    /// read something, then the cgroup limits.
    fn collectors(&self) -> Vec<&dyn crate::model::Collector> {
        vec![
            &self.tracker.pss_budget,
            &self.tracker.library_budget,
            &self.ceilings,
        ]
    }
}
