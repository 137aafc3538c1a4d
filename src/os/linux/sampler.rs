//! The Linux sampler: `/proc` into a [`Snapshot`].
//!
//! System figures come from `/proc/meminfo` (the only source whose failure
//! fails the sample), `/proc/vmstat` (swap paging) and `/proc/pressure/memory`
//! (PSI; absent on kernels built without it, which is not an error):
//! `system_files.rs`.
//!
//! This file wires the parts together. Each has its own file: the per-process
//! state and the full tick (`tracker.rs`), the light tick (`light_tick.rs`),
//! the reads of one process (`process_reads.rs`, through `proc_reader.rs`),
//! library scans of Python processes (`library_rescan.rs`, read by
//! `library_worker.rs`), memory no
//! process owns and memory held open without a mapping (`unowned.rs`, on
//! full ticks, rarely and within a time budget), each process's
//! memory-cgroup path (`cgroup_paths.rs`) and the limits above it
//! (`ceilings.rs`: each distinct cgroup read once per tick, full or light),
//! and user names (the shared [`crate::os::user_names`], from
//! `/etc/passwd`).
//!
//! # The per-process hot path
//!
//! The kernel renders a `/proc` file on every read, and opening one walks
//! the path (`/proc`, the pid directory, the file) each time. What a tick
//! reads was chosen by measurement (`benches/sample_cost.rs`, figures in
//! `BENCHMARKS.md`; 1000 idle processes, CPU time per tick, relative to
//! listing `/proc` and opening, reading and closing every `statm`):
//! `stat` of every pid costs 1.5× that, `status` 2.2×, sysinfo's
//! memory-only refresh (stat + statm + status per pid) 5.7×.
//!
//! - Every tick: list the numeric entries of `/proc` and read `statm` of
//!   every known process: the cheapest memory file (seven numbers).
//! - `statm` is opened once and kept open: each tick re-reads it with
//!   `pread` at offset 0, which skips the path walk, `open` and `close` and
//!   makes the whole sample cheaper than the open/read/close floor (0.9×
//!   instead of 1.4×). A kept `/proc/[pid]` file stays bound to its process:
//!   once that process is reaped the read fails with ESRCH even if the pid
//!   was reused, so reuse is noticed the next tick. The number kept open is
//!   bounded ([`LinuxSampler::with_held_files`]); beyond it, `statm` is
//!   opened and closed each tick.
//! - First sight of a pid: `stat` (start time = identity, ppid, name, and the
//!   `PF_KTHREAD` flag: kernel threads are remembered and not read again
//!   apart from the identity check below), `status` (uid, RssAnon, RssShmem,
//!   VmSwap), `cmdline` (its first [`crate::model::ARGV_MAX_BYTES`] only: see
//!   [`procfs::parse_cmdline`]), the `exe` link and `cgroup` (the memory-cgroup
//!   path, re-read in the process's round-robin slot below since processes
//!   are moved: `cgroup_paths.rs`); where the classifier asks for `maps`, the
//!   library thread reads it (below). All of it is cached per identity (pid +
//!   start time).
//! - Every tick, exact detail (`stat` + `status`) only for the processes that
//!   matter: ML or Python ones as classified, and the [`TOP_EXACT`] largest by
//!   `statm` resident size. Their `stat` read doubles as an identity check
//!   (start time, and the name, which changes on `exec`).
//! - The rest get footprint = (resident − shared) from `statm` (= RssAnon)
//!   plus the VmSwap of the last full read, marked [`Detail::Estimated`], and
//!   a round-robin identity check: each tick re-reads `stat` of those whose
//!   pid falls in this tick's slot (pid mod [`VERIFY_PERIOD`]), so a reused
//!   pid (without a kept file) or an `exec` is noticed within
//!   [`VERIFY_PERIOD`] ticks. Kernel threads take part, so a user process
//!   never hides behind a dead kernel thread's pid.
//!
//! # Light ticks
//!
//! [`Sampler::sample_light`] lists the processes (unless no pid was handed
//! out since the last listing: the last field of `/proc/loadavg`, a few
//! bytes, tells; listing 1000 processes costs the kernel more than the rest
//! of a light tick) but skips the `statm` of every known one: it re-reads `statm` of the [`TOP_EXACT`] largest of the
//! last full tick, and `statm` plus exact detail of the ML / Python
//! processes and of the pids the caller watches (those a rule with a
//! per-process limit matches). A process listed for the first time gets its
//! first-sight read (so a new notebook kernel is seen at once) and its
//! `statm` re-read on the light ticks after, until a full tick ranks it; one no
//! longer listed, or found gone when re-read, is forgotten (one that exits
//! while no pid is handed out and is not re-read is dropped at the next
//! listing), and every other one is reported with the values read before
//! ([`Detail::Estimated`] unless they were exact): a tick that does not list
//! carries the last listing as it stands, without a pass over every
//! process. The
//! round-robin identity check waits for the next full tick, so a pid reused
//! in between (without a kept `statm` file that would tell) keeps the old
//! identity until then. The daemon decides which ticks are light
//! (`daemon::cadence`); the first tick is always full.
//!
//! The libraries of Python processes (`maps`) are read by a thread of their
//! own, never on this path: when first seen, then when they grow by half and
//! by 64 MiB, or every 30 s, until a framework turns up; each read is cut
//! after a prefix and a time, a process whose read was cut is scanned less
//! and less often, and the reads have a CPU budget (`library_rescan.rs`,
//! `library_worker.rs`). A user decides how long their process's `maps` is.
//!
//! Per-process failures never fail the sample: a process gone between the
//! listing and the read is skipped and counted as vanished, EACCES/EPERM
//! as permission denied (the process is kept with what could be read), and
//! anything else as unreadable. Identities no longer listed are forgotten.
//!
//! [`Detail::Estimated`]: crate::model::Detail::Estimated
//! [`procfs::parse_cmdline`]: crate::os::linux::parse::procfs::parse_cmdline

use std::path::PathBuf;

use super::ffi::sysconf as sys;
use super::{ceilings, cgroup_paths, proc_reader, process_reads, tracker, unowned};
use std::time::Instant;

use crate::model::sampling::{SampleError, Sampler};
use crate::model::{CollectorErrors, Snapshot, Timestamp, Unowned};
use crate::os::user_names::UserNames;

pub use ceilings::{CeilingReader, LIMITS_EVERY};
use proc_reader::ProcReader;
use process_reads::Io;
use tracker::ProcessTracker;
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

    /// One tick: full, or light with the `watched` pids re-read (the first
    /// tick is full whatever is asked).
    fn take(&mut self, light: Option<&[u32]>) -> Result<Snapshot, SampleError> {
        let started = Instant::now();
        let taken_at = Timestamp::now();
        self.tracker.tick += 1;
        self.io.users.start_sample();
        let mut errors = CollectorErrors::default();
        let system = self.io.read_system(&mut errors)?;
        self.tracker.sample(&mut self.io, light, &mut errors);
        let mut processes = self.tracker.build_processes(self.io.page_size);
        let unowned = self.unowned_tick(light.is_none(), &mut processes, system.memory.shmem);
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
        let counted = processes.iter().fold(0u64, |sum, p| {
            sum.saturating_add(p.footprint.saturating_sub(p.held_open))
        });
        self.tracker
            .pss_budget
            .note_machine(Instant::now(), taken, counted);
        let ceilings = self.ceilings.read(&processes, system.memory.total);
        Ok(Snapshot {
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
        })
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
    ) -> Unowned {
        if !full {
            return self.unowned.carry(processes);
        }
        // RssShmem of each process's last `status` read: pages mapped by
        // several processes count in each.
        let listed_at = self.tracker.listed_at;
        let mapped_shmem = self
            .tracker
            .tracked
            .values()
            .filter(|t| t.seen >= listed_at)
            .filter_map(|t| t.status.and_then(|s| s.rss_shmem))
            .fold(0u64, u64::saturating_add);
        self.unowned
            .tick(processes, shmem, mapped_shmem, &mut self.io.users)
    }
}

impl Sampler for LinuxSampler {
    fn name(&self) -> &'static str {
        "linux"
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        self.take(None)
    }

    fn sample_light(&mut self, watched: &[u32]) -> Result<Snapshot, SampleError> {
        self.take(Some(watched))
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
