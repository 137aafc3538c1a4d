//! The Linux sampler: `/proc` into a [`Snapshot`].
//!
//! System figures come from `/proc/meminfo` (the only source whose failure
//! fails the sample), `/proc/vmstat` (swap paging) and `/proc/pressure/memory`
//! (PSI; absent on kernels built without it, which is not an error).
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
//!   [`procfs::parse_cmdline`]), the `exe` link and, where the classifier asks for it,
//!   `maps`. All of it is cached per identity (pid + start time).
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
//! Python processes whose frameworks are imported after start are re-scanned
//! (`maps`) when they grow by half and by 64 MiB, or every 30 s, until a
//! framework turns up.
//!
//! Per-process failures never fail the sample: a process gone between the
//! listing and the read is skipped and counted as vanished, EACCES/EPERM
//! as permission denied (the process is kept with what could be read), and
//! anything else as unreadable. Identities no longer listed are forgotten.

pub mod doctor;
pub mod kmsg;
pub mod kmsg_crash;
mod proc_reader;
mod sys;
pub mod threads;
pub mod zombie;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::model::{
    Argv, CollectorErrors, Detail, Pressure, ProcessId, ProcessSample, SharedStr, Snapshot,
    Timestamp, Workload, WorkloadKind,
};
use crate::sample::{SampleError, Sampler};
use crate::workload::{self, ProcessFacts};

use crate::sys::procfs::{self, Statm, Status};
use proc_reader::{Failure, ProcReader};

/// Beyond the ML processes, this many of the largest processes (by `statm`
/// resident size) are read in full every tick.
pub const TOP_EXACT: usize = 32;

/// Processes not read in full every tick have their identity (start time)
/// re-checked once in this many ticks.
pub const VERIFY_PERIOD: u64 = 20;

/// Open files kept back for the rest of the daemon (sockets, the journal,
/// GPU libraries) when sizing the number of `statm` files kept open.
const FD_RESERVE: u64 = 256;
/// At most this many `statm` files are kept open by default: each costs the
/// kernel a `struct file` and a seq_file page (about 4.5 KiB).
const MAX_HELD_FILES: u64 = 4096;

/// A Python process without a known framework is re-scanned when its
/// resident size has grown by this share (percent) since the last scan…
const RESCAN_GROWTH_PERCENT: u64 = 50;
/// …and by at least this many bytes,
const RESCAN_GROWTH_BYTES: u64 = 64 << 20;
/// or when this long has passed since the last scan.
const RESCAN_INTERVAL: Duration = Duration::from_secs(30);

/// Samples a Linux machine through a `/proc` tree.
#[derive(Debug)]
pub struct LinuxSampler {
    io: Io,
    /// By pid: walked in pid order to build a snapshot, entries side by
    /// side in memory (a hash table's order is scattered, and with a few
    /// hundred bytes per process each lookup there missed the cache).
    tracked: BTreeMap<u32, Tracked>,
    tick: u64,
    scratch: Scratch,
    /// How many `statm` files may be kept open, and how many are.
    held_budget: usize,
    held: usize,
    /// The tick the processes were last listed (0: never; light ticks
    /// follow the first listing). A tracked process belongs to this tick's
    /// snapshot if it was seen at that listing or since (`seen >=
    /// listed_at`), so a light tick that does not list carries every known
    /// process without touching its entry.
    listed_at: u64,
    /// Kernel threads counted at that listing, counted again by the light
    /// ticks that carry it.
    listed_kernel_threads: u64,
    /// The last pid handed out (`/proc/loadavg`) when the processes were
    /// last listed.
    last_pid: Option<u32>,
}

/// Reused per-tick lists, kept to avoid reallocating them every tick.
#[derive(Debug, Default)]
struct Scratch {
    pids: Vec<u32>,
    /// (statm resident pages, pid) of every user process seen this tick.
    ranking: Vec<(u64, u32)>,
    /// Classified ML / Python processes: exact every tick.
    interesting: Vec<u32>,
    /// A light tick's listing, kept apart until it succeeds.
    listing: Vec<u32>,
    /// Processes in this tick's identity-check slot.
    verify: Vec<u32>,
    /// Python processes still waiting for a framework to show up.
    rescan: Vec<u32>,
    /// The pids a light tick re-reads.
    light: Vec<u32>,
}

impl Scratch {
    /// File a user process seen this tick into the per-tick lists.
    fn note(&mut self, pid: u32, t: &Tracked, verify_now: bool) {
        self.ranking.push((t.statm.resident, pid));
        if is_interesting(&t.workload) {
            self.interesting.push(pid);
        } else if verify_now {
            self.verify.push(pid);
        }
        if t.scan
            .is_some_and(|scan| !scan.blocked && t.workload.frameworks.is_empty())
        {
            self.rescan.push(pid);
        }
    }
}

/// Everything that reads: the `/proc` reader and what is read once.
#[derive(Debug)]
struct Io {
    reader: ProcReader,
    page_size: u64,
    clock_ticks: u64,
    /// `btime` of `/proc/stat`, seconds since the epoch; read on the first
    /// sample (outer `None` until then).
    boot_time: Option<Option<u64>>,
    users: UserNames,
}

/// What is known of one process identity.
#[derive(Debug, Default)]
struct Tracked {
    start: u64,
    /// The tick this pid was last listed and read; older entries are dropped.
    seen: u64,
    kernel_thread: bool,
    ppid: u32,
    uid: Option<u32>,
    /// The text every snapshot shares while the identity lives.
    user: Option<SharedStr>,
    name: SharedStr,
    exe: Option<SharedStr>,
    argv: Argv,
    started_at: Option<Timestamp>,
    workload: Workload,
    libraries: Vec<String>,
    /// Present for processes the classifier wants library scans of.
    scan: Option<LibraryScan>,
    statm: Statm,
    /// `statm`, kept open and re-read each tick, while the budget allows.
    statm_file: Option<File>,
    /// The last full `status` read.
    status: Option<Status>,
    /// The tick of that read; equal to the current tick means exact.
    status_tick: u64,
    /// Largest footprint seen for this identity, bytes.
    peak: u64,
}

#[derive(Debug, Clone, Copy)]
struct LibraryScan {
    resident_at: u64,
    at: Instant,
    /// `maps` refused (another user's process): stop trying.
    blocked: bool,
}

impl LinuxSampler {
    /// A sampler reading the `/proc` tree at `root` (`/proc` in production,
    /// a fixture tree in tests). User names come from `/etc/passwd`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            io: Io {
                reader: ProcReader::new(root.into()),
                page_size: sys::page_size(),
                clock_ticks: sys::clock_ticks(),
                boot_time: None,
                users: UserNames::new(PathBuf::from("/etc/passwd")),
            },
            tracked: BTreeMap::new(),
            tick: 0,
            scratch: Scratch::default(),
            held_budget: default_held_budget(),
            held: 0,
            listed_at: 0,
            listed_kernel_threads: 0,
            last_pid: None,
        }
    }

    /// Keep at most `max` `statm` files open between ticks (default: half
    /// the open-file soft limit above a reserve of 256, at most 4096). With 0
    /// every read opens and closes its file.
    pub fn with_held_files(mut self, max: usize) -> Self {
        self.held_budget = max;
        self
    }

    /// Resolve user names from this passwd file instead of `/etc/passwd`.
    pub fn with_passwd(mut self, path: impl Into<PathBuf>) -> Self {
        self.io.users = UserNames::new(path.into());
        self
    }

    /// Number of process identities currently remembered (kernel threads
    /// included); bounded by the number of live processes.
    pub fn tracked_count(&self) -> usize {
        self.tracked.len()
    }

    fn sample_processes(&mut self, errors: &mut CollectorErrors) {
        let tick = self.tick;
        self.last_pid = self.read_last_pid();
        self.listed_at = tick;
        let mut s = std::mem::take(&mut self.scratch);
        if self.io.reader.list_pids(&mut s.pids).is_err() {
            self.last_pid = None;
            errors.unreadable += 1;
        }
        s.ranking.clear();
        s.interesting.clear();
        s.verify.clear();
        s.rescan.clear();

        // Every listed pid: statm, and the full first-sight read if new.
        let pids = std::mem::take(&mut s.pids);
        for &pid in &pids {
            self.observe(pid, &mut s, errors);
        }
        s.pids = pids;
        self.listed_kernel_threads = errors.kernel_threads;

        // Exact detail for the largest and the interesting processes.
        if s.ranking.len() > TOP_EXACT {
            s.ranking
                .select_nth_unstable_by(TOP_EXACT - 1, |a, b| b.0.cmp(&a.0));
            s.ranking.truncate(TOP_EXACT);
        }
        for pid in s
            .ranking
            .iter()
            .map(|r| r.1)
            .chain(s.interesting.iter().copied())
        {
            self.refresh_exact(pid, errors);
        }

        // Round-robin identity check of the others.
        for &pid in &s.verify {
            if self
                .tracked
                .get(&pid)
                .is_some_and(|t| t.seen >= self.listed_at && t.status_tick != tick)
            {
                self.check_identity(pid, errors);
            }
        }

        // Python processes that may have imported a framework since.
        for &pid in &s.rescan {
            if let Some(t) = self
                .tracked
                .get_mut(&pid)
                .filter(|t| t.seen >= self.listed_at)
            {
                self.io.rescan_if_due(pid, t, errors);
            }
        }

        self.end_tick(s, true);
    }

    /// A light tick (see the module doc): list the processes, carry the
    /// known ones and read the new ones in full, re-read `statm` of the
    /// largest, the interesting and the `watched` ones and exact detail of
    /// the interesting and watched, and forget what is no longer listed.
    fn sample_light_processes(&mut self, watched: &[u32], errors: &mut CollectorErrors) {
        let tick = self.tick;
        let mut s = std::mem::take(&mut self.scratch);
        let last_pid = self.read_last_pid();
        // No pid handed out since the last listing: no process was created.
        let unchanged = last_pid.is_some() && last_pid == self.last_pid;
        let listed = !unchanged && self.io.reader.list_pids(&mut s.listing).is_ok();
        if listed {
            self.last_pid = last_pid;
            self.listed_at = tick;
            std::mem::swap(&mut s.pids, &mut s.listing);
            let pids = std::mem::take(&mut s.pids);
            for &pid in &pids {
                match self.tracked.get_mut(&pid) {
                    Some(t) => {
                        t.seen = tick;
                        if t.kernel_thread {
                            errors.kernel_threads += 1;
                        }
                    }
                    None => self.observe(pid, &mut s, errors),
                }
            }
            s.pids = pids;
            self.listed_kernel_threads = errors.kernel_threads;
        } else {
            if !unchanged {
                errors.unreadable += 1;
                self.last_pid = None;
            }
            // What the last listing had is carried: its entries are still
            // seen at or after `listed_at`, and its pids in `s.pids`.
            errors.kernel_threads += self.listed_kernel_threads;
        }
        s.light.clear();
        s.light.extend(s.interesting.iter().copied());
        s.light.extend(watched.iter().copied());
        let exact = s.light.len();
        s.light.extend(s.ranking.iter().map(|r| r.1));
        let (exact, largest) = s.light.split_at_mut(exact);
        exact.sort_unstable();
        largest.sort_unstable();
        for &pid in largest.iter() {
            if exact.binary_search(&pid).is_err() {
                self.reread_statm(pid, errors);
            }
        }
        let mut previous = None;
        for &pid in exact.iter() {
            if previous != Some(pid) {
                self.reread_statm(pid, errors);
                self.refresh_exact(pid, errors);
            }
            previous = Some(pid);
        }

        self.end_tick(s, listed);
    }

    /// After a listing, forget what it did not list and count the files
    /// kept by the rest; put the scratch space back.
    fn end_tick(&mut self, s: Scratch, listed: bool) {
        if listed {
            let listed_at = self.listed_at;
            let mut held = 0;
            self.tracked.retain(|_, t| {
                let keep = t.seen >= listed_at;
                held += usize::from(keep && t.statm_file.is_some());
                keep
            });
            self.held = held;
        }
        self.io.reader.trim();
        self.scratch = s;
    }

    /// Forget a process found gone.
    fn forget(&mut self, pid: u32) {
        if self
            .tracked
            .remove(&pid)
            .is_some_and(|t| t.statm_file.is_some())
        {
            self.held = self.held.saturating_sub(1);
        }
    }

    /// The last pid handed out, from `/proc/loadavg`; `None` if unreadable.
    fn read_last_pid(&mut self) -> Option<u32> {
        self.io
            .reader
            .read_root("loadavg")
            .ok()
            .and_then(procfs::parse_last_pid)
    }

    /// Re-read `statm` of a process carried into this light tick (one
    /// listed for the first time was just read in full).
    fn reread_statm(&mut self, pid: u32, errors: &mut CollectorErrors) {
        let listed_at = self.listed_at;
        let Some(t) = self
            .tracked
            .get_mut(&pid)
            .filter(|t| t.seen >= listed_at && !t.kernel_thread)
        else {
            return;
        };
        let read = match &t.statm_file {
            Some(file) => self.io.read_held_statm(file),
            None => self.io.read_statm(pid).map(|(statm, _)| statm),
        };
        match read {
            Ok(statm) => t.statm = statm,
            // Gone (or, through a kept file, its pid reused): out of this
            // snapshot; a process that took the pid is read in full when
            // listed.
            Err(Failure::Vanished) => {
                self.forget(pid);
                count(errors, Failure::Vanished);
            }
            Err(f) => count(errors, f),
        }
    }

    /// One listed pid: read statm (and everything else if the pid is new),
    /// or recognise a known kernel thread.
    fn observe(&mut self, pid: u32, s: &mut Scratch, errors: &mut CollectorErrors) {
        let tick = self.tick;
        let verify_now = u64::from(pid) % VERIFY_PERIOD == tick % VERIFY_PERIOD;

        if let Some(t) = self.tracked.get_mut(&pid) {
            if !t.kernel_thread {
                let read = match &t.statm_file {
                    Some(file) => self.io.read_held_statm(file),
                    None => self.io.read_statm(pid).map(|(statm, file)| {
                        if self.held < self.held_budget {
                            t.statm_file = Some(file);
                            self.held += 1;
                        }
                        statm
                    }),
                };
                match read {
                    Ok(statm) => {
                        t.statm = statm;
                        t.seen = tick;
                        s.note(pid, t, verify_now);
                        return;
                    }
                    // The process the kept file was opened for is gone, yet
                    // its pid is listed: reused, or it exited just now. The
                    // path read below tells which.
                    Err(Failure::Vanished) if t.statm_file.is_some() => {
                        self.tracked.remove(&pid);
                    }
                    Err(f) => return count(errors, f),
                }
            } else if !verify_now {
                t.seen = tick;
                errors.kernel_threads += 1;
                return;
            } else {
                match self.io.read_stat_identity(pid) {
                    Ok((start, _, true)) if start == t.start => {
                        t.seen = tick;
                        errors.kernel_threads += 1;
                        return;
                    }
                    // The kernel thread is gone and a process took its pid.
                    Ok(_) => {
                        self.tracked.remove(&pid);
                    }
                    Err(f) => return count(errors, f),
                }
            }
        }

        let (statm, file) = match self.io.read_statm(pid) {
            Ok(read) => read,
            Err(f) => return count(errors, f),
        };
        let Some(mut t) = self.io.first_sight(pid, statm, tick, errors) else {
            return;
        };
        if t.kernel_thread {
            errors.kernel_threads += 1;
        } else {
            if self.held < self.held_budget {
                t.statm_file = Some(file);
                self.held += 1;
            }
            s.note(pid, &t, verify_now);
        }
        self.tracked.insert(pid, t);
    }

    /// Read `stat` (identity) and `status` (exact memory) of a process seen
    /// this tick, unless that was already done this tick.
    fn refresh_exact(&mut self, pid: u32, errors: &mut CollectorErrors) {
        let tick = self.tick;
        if !self
            .tracked
            .get(&pid)
            .is_some_and(|t| t.seen >= self.listed_at && t.status_tick != tick && !t.kernel_thread)
        {
            return;
        }
        if !self.check_identity(pid, errors) {
            return; // gone, or replaced by a new identity read in full
        }
        let Some(t) = self.tracked.get_mut(&pid) else {
            return;
        };
        match self.io.reader.read_pid(pid, "status") {
            Ok(data) => match procfs::parse_status(data) {
                Some(status) => self.io.set_status(t, status, tick),
                None => count(errors, Failure::Unreadable),
            },
            Err(Failure::Vanished) => {
                self.forget(pid);
                count(errors, Failure::Vanished);
            }
            Err(f) => count(errors, f),
        }
    }

    /// Re-read `stat` of a tracked process. Returns true if the identity is
    /// unchanged; on a new identity (pid reuse, or exec under a new name) the
    /// entry is replaced by a fresh first-sight read and false is returned;
    /// if the process is gone it is forgotten and false is returned.
    fn check_identity(&mut self, pid: u32, errors: &mut CollectorErrors) -> bool {
        let tick = self.tick;
        let Some(t) = self.tracked.get_mut(&pid) else {
            return false;
        };
        let start = match self.io.reader.read_pid(pid, "stat") {
            Ok(data) => match procfs::parse_stat(data) {
                Some(st)
                    if st.start_ticks == t.start
                        && *String::from_utf8_lossy(st.comm) == *t.name =>
                {
                    t.ppid = st.ppid;
                    return true;
                }
                Some(st) => st.start_ticks,
                None => {
                    count(errors, Failure::Unreadable);
                    return true;
                }
            },
            Err(Failure::Vanished) => {
                self.forget(pid);
                count(errors, Failure::Vanished);
                return false;
            }
            Err(f) => {
                count(errors, f);
                return true;
            }
        };
        // Same start time but a new name: the process called exec. Keep its
        // peak, since it is the same process; a new start time is a new one.
        let peak = if start == t.start { t.peak } else { 0 };
        let statm = t.statm;
        match self.io.first_sight(pid, statm, tick, errors) {
            Some(mut fresh) => {
                fresh.peak = fresh.peak.max(peak);
                self.tracked.insert(pid, fresh);
            }
            None => {
                self.tracked.remove(&pid);
            }
        }
        false
    }

    /// The processes of this tick, in pid order, as samples.
    fn build_processes(&mut self) -> Vec<ProcessSample> {
        let tick = self.tick;
        let page = self.io.page_size;
        let mut out = Vec::with_capacity(self.tracked.len());
        for (pid, t) in &mut self.tracked {
            if t.seen < self.listed_at || t.kernel_thread {
                continue;
            }
            let statm_resident = t.statm.resident.saturating_mul(page);
            let last_swap = t.status.and_then(|s| s.vm_swap);
            let (footprint, resident, detail) = match t.status {
                Some(status) if t.status_tick == tick => (
                    status.footprint(),
                    status.vm_rss.unwrap_or(statm_resident),
                    Detail::Exact,
                ),
                // statm resident − shared = RssAnon (task_statm() in
                // fs/proc/task_mmu.c counts shared as file + shmem pages);
                // swap is the VmSwap of the last full read.
                _ => (
                    t.statm
                        .anon()
                        .saturating_mul(page)
                        .saturating_add(last_swap.unwrap_or(0)),
                    statm_resident,
                    Detail::Estimated,
                ),
            };
            t.peak = t.peak.max(footprint);
            out.push(ProcessSample {
                id: ProcessId {
                    pid: *pid,
                    start: t.start,
                },
                ppid: t.ppid,
                uid: t.uid,
                user: t.user.clone(),
                name: t.name.clone(),
                exe: t.exe.clone(),
                argv: t.argv.clone(),
                started_at: t.started_at,
                footprint,
                peak_footprint: Some(t.peak),
                resident,
                swapped: last_swap,
                gpu_memory: None,
                gpu_client: false,
                detail,
                workload: t.workload.clone(),
            });
        }
        out
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
}

impl LinuxSampler {
    /// One tick: full, or light with the `watched` pids re-read (the first
    /// tick is full whatever is asked).
    fn take(&mut self, light: Option<&[u32]>) -> Result<Snapshot, SampleError> {
        let started = Instant::now();
        let taken_at = Timestamp::now();
        self.tick += 1;
        let mut errors = CollectorErrors::default();

        let meminfo = match self.io.reader.read_root("meminfo") {
            Ok(text) => procfs::parse_meminfo(text).map_err(|reason| SampleError::Parse {
                path: self.io.root_file("meminfo"),
                reason,
            })?,
            Err(source) => {
                return Err(SampleError::Read {
                    path: self.io.root_file("meminfo"),
                    source,
                });
            }
        };
        let vmstat = match self.io.reader.read_root("vmstat") {
            Ok(text) => procfs::parse_vmstat(text),
            Err(_) => {
                errors.unreadable += 1;
                procfs::VmstatSwap::default()
            }
        };
        let psi = match self.io.reader.read_root("pressure/memory") {
            Ok(text) => {
                let psi = procfs::parse_psi(text);
                if psi.is_none() {
                    errors.unreadable += 1;
                }
                psi
            }
            // No file: kernel without CONFIG_PSI. EOPNOTSUPP: booted with psi=0.
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => None,
            Err(_) => {
                errors.unreadable += 1;
                None
            }
        };
        if self.io.boot_time.is_none() {
            self.io.boot_time = Some(
                self.io
                    .reader
                    .read_root("stat")
                    .ok()
                    .and_then(procfs::parse_btime),
            );
        }

        match light {
            Some(watched) if self.listed_at > 0 => {
                self.sample_light_processes(watched, &mut errors)
            }
            _ => self.sample_processes(&mut errors),
        }
        let processes = self.build_processes();

        let system = procfs::system_memory(&meminfo);
        let level = procfs::pressure_level(psi.as_ref(), system.available, system.total);
        Ok(Snapshot {
            taken_at,
            source: self.name().to_owned(),
            sample_micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            system,
            swap: procfs::swap(&meminfo, &vmstat, self.io.page_size),
            pressure: Pressure {
                level,
                psi,
                free_percent: None,
            },
            gpus: Vec::new(),
            processes,
            errors,
            collectors: Vec::new(),
            notes: Vec::new(),
        })
    }
}

impl Io {
    /// A system file's path, for error messages.
    fn root_file(&self, rel: &str) -> String {
        self.reader.root().join(rel).display().to_string()
    }

    /// `statm` of a pid, in pages, and the open file for keeping.
    fn read_statm(&mut self, pid: u32) -> Result<(Statm, File), Failure> {
        let file = self.reader.open_pid(pid, "statm")?;
        let statm = self.read_held_statm(&file)?;
        Ok((statm, file))
    }

    /// `statm` re-read through a kept file.
    fn read_held_statm(&mut self, file: &File) -> Result<Statm, Failure> {
        let data = self.reader.read_held(file)?;
        procfs::parse_statm(data).ok_or(Failure::Unreadable)
    }

    /// `stat` of a pid: (start ticks, ppid, is kernel thread).
    fn read_stat_identity(&mut self, pid: u32) -> Result<(u64, u32, bool), Failure> {
        let data = self.reader.read_pid(pid, "stat")?;
        let st = procfs::parse_stat(data).ok_or(Failure::Unreadable)?;
        Ok((st.start_ticks, st.ppid, st.is_kernel_thread()))
    }

    /// Everything read once per identity. `None` if the process vanished or
    /// its `stat`/`status` could not be read or parsed (counted).
    fn first_sight(
        &mut self,
        pid: u32,
        statm: Statm,
        tick: u64,
        errors: &mut CollectorErrors,
    ) -> Option<Tracked> {
        let (start, ppid, name, kernel_thread) = match self.reader.read_pid(pid, "stat") {
            Ok(data) => match procfs::parse_stat(data) {
                Some(st) => (
                    st.start_ticks,
                    st.ppid,
                    SharedStr::from(String::from_utf8_lossy(st.comm).into_owned()),
                    st.is_kernel_thread(),
                ),
                None => {
                    count(errors, Failure::Unreadable);
                    return None;
                }
            },
            Err(f) => {
                count(errors, f);
                return None;
            }
        };
        if kernel_thread {
            return Some(Tracked {
                start,
                seen: tick,
                kernel_thread,
                ppid,
                name,
                ..Tracked::default()
            });
        }
        let status = match self.reader.read_pid(pid, "status") {
            Ok(data) => match procfs::parse_status(data) {
                Some(status) => Some(status),
                None => {
                    count(errors, Failure::Unreadable);
                    return None;
                }
            },
            // Keep the process with what statm and stat gave.
            Err(Failure::Denied) => {
                count(errors, Failure::Denied);
                None
            }
            Err(f) => {
                count(errors, f);
                return None;
            }
        };
        // Bounded: a user can give a process megabytes of arguments.
        let argv = match self
            .reader
            .read_pid_prefix(pid, "cmdline", procfs::CMDLINE_READ)
        {
            Ok(data) => Argv::from(procfs::parse_cmdline(data)),
            Err(Failure::Vanished) => {
                count(errors, Failure::Vanished);
                return None;
            }
            Err(f) => {
                count(errors, f);
                Argv::default()
            }
        };
        // Unreadable for other users' processes unless root, and for
        // zombies: that is normal, not a collector error.
        let exe = self
            .reader
            .read_pid_link(pid, "exe")
            .ok()
            .map(SharedStr::from);
        let uid = status.map(|s| s.uid);
        let user = uid.and_then(|uid| self.users.name(uid));
        let started_at = self.boot_time.flatten().map(|boot| {
            // proc(5) stat field 22: start time in clock ticks after boot.
            let ms = start.saturating_mul(1000) / self.clock_ticks;
            Timestamp(boot.saturating_mul(1000).saturating_add(ms))
        });
        let mut t = Tracked {
            start,
            seen: tick,
            ppid,
            uid,
            user,
            name,
            exe,
            argv,
            started_at,
            statm,
            ..Tracked::default()
        };
        if let Some(status) = status {
            self.set_status(&mut t, status, tick);
        }
        let wants_scan = workload::wants_library_scan(&ProcessFacts {
            name: &t.name,
            exe: t.exe.as_deref(),
            argv: &t.argv,
            libraries: &[],
        });
        if wants_scan {
            t.scan = Some(LibraryScan {
                resident_at: 0,
                at: Instant::now(),
                blocked: false,
            });
            self.scan_libraries(pid, &mut t, errors);
        }
        t.workload = classify(&t);
        Some(t)
    }

    /// Record a full `status` read.
    fn set_status(&mut self, t: &mut Tracked, status: Status, tick: u64) {
        if t.uid != Some(status.uid) {
            t.uid = Some(status.uid);
            t.user = self.users.name(status.uid);
        }
        t.status = Some(status);
        t.status_tick = tick;
    }

    /// Read the libraries mapped into a process.
    fn scan_libraries(&mut self, pid: u32, t: &mut Tracked, errors: &mut CollectorErrors) {
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
                count(errors, Failure::Denied);
            }
            // Vanished: the next statm read will notice.
            Err(Failure::Vanished) => {}
            Err(f) => count(errors, f),
        }
    }

    /// Re-scan a Python process's libraries once it has grown enough or
    /// enough time has passed, and classify it again.
    fn rescan_if_due(&mut self, pid: u32, t: &mut Tracked, errors: &mut CollectorErrors) {
        let Some(scan) = t.scan else {
            return;
        };
        if scan.blocked || !t.workload.frameworks.is_empty() {
            return;
        }
        let resident = t.statm.resident.saturating_mul(self.page_size);
        if rescan_due(scan.resident_at, resident, scan.at.elapsed()) {
            self.scan_libraries(pid, t, errors);
            t.workload = classify(t);
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

/// Half of the open-file soft limit above [`FD_RESERVE`], at most
/// [`MAX_HELD_FILES`]; 0 if the limit cannot be read.
fn default_held_budget() -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| procfs::parse_max_open_files(&text))
        .unwrap_or(0);
    let budget = (soft.saturating_sub(FD_RESERVE) / 2).min(MAX_HELD_FILES);
    usize::try_from(budget).unwrap_or(0)
}

fn classify(t: &Tracked) -> Workload {
    workload::classify(&ProcessFacts {
        name: &t.name,
        exe: t.exe.as_deref(),
        argv: &t.argv,
        libraries: &t.libraries,
    })
}

/// ML and Python processes are read in full every tick.
fn is_interesting(w: &Workload) -> bool {
    w.kind != WorkloadKind::Other || !w.frameworks.is_empty()
}

fn count(errors: &mut CollectorErrors, f: Failure) {
    let slot = match f {
        Failure::Vanished => &mut errors.vanished,
        Failure::Denied => &mut errors.permission_denied,
        Failure::Unreadable => &mut errors.unreadable,
    };
    *slot = slot.saturating_add(1);
}

/// uid → user name from a passwd file, read once and again only when a uid
/// is missing and the file changed since.
#[derive(Debug)]
struct UserNames {
    path: PathBuf,
    names: HashMap<u32, SharedStr>,
    loaded: bool,
    modified: Option<SystemTime>,
}

impl UserNames {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            names: HashMap::new(),
            loaded: false,
            modified: None,
        }
    }

    fn load(&mut self) {
        self.loaded = true;
        self.modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        self.names = std::fs::read_to_string(&self.path)
            .map(|text| {
                procfs::parse_passwd(&text)
                    .into_iter()
                    .map(|(uid, name)| (uid, SharedStr::from(name)))
                    .collect()
            })
            .unwrap_or_default();
    }

    /// The name of `uid`; every process of one user shares its text.
    fn name(&mut self, uid: u32) -> Option<SharedStr> {
        if !self.loaded {
            self.load();
        }
        if let Some(name) = self.names.get(&uid) {
            return Some(name.clone());
        }
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        if modified != self.modified {
            self.load();
            return self.names.get(&uid).cloned();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interesting_means_classified() {
        assert!(!is_interesting(&Workload::default()));
        assert!(is_interesting(&Workload {
            kind: WorkloadKind::Python,
            ..Workload::default()
        }));
        assert!(is_interesting(&Workload {
            frameworks: vec![crate::model::Framework::Cuda],
            ..Workload::default()
        }));
    }

    /// A `/proc` tree written by hand for the light-tick tests: one
    /// process per call, with `resident` pages (none shared) in `statm` and
    /// `anon_kb` of RssAnon in `status`.
    struct FakeProc(tempfile::TempDir);

    impl FakeProc {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let basic = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/proc/basic");
            for f in ["meminfo", "vmstat", "stat"] {
                std::fs::copy(format!("{basic}/{f}"), dir.path().join(f)).unwrap();
            }
            Self(dir)
        }

        fn process(&self, pid: u32, name: &str, resident: u64, anon_kb: u64) {
            let d = self.0.path().join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("stat"),
                format!("{pid} ({name}) S 1 6438 3887 0 -1 4194304 128 0 0 0 0 0 0 0 20 0 1 0 30134 2990080 402 0\n"),
            )
            .unwrap();
            std::fs::write(d.join("cmdline"), format!("{name}\0run\0")).unwrap();
            self.memory(pid, resident, anon_kb);
        }

        fn memory(&self, pid: u32, resident: u64, anon_kb: u64) {
            let d = self.0.path().join(pid.to_string());
            std::fs::write(d.join("statm"), format!("900 {resident} 0 5 0 89 0\n")).unwrap();
            std::fs::write(
                d.join("status"),
                format!(
                    "Name:\tx\nUid:\t0\t0\t0\t0\nVmRSS:\t{anon_kb} kB\nRssAnon:\t{anon_kb} kB\nRssFile:\t0 kB\nRssShmem:\t0 kB\nVmSwap:\t0 kB\n"
                ),
            )
            .unwrap();
        }

        /// A Python process (read in full every tick) and 40 small `sleep`s,
        /// pids 1000–1039 with 100 + i pages: the 13 smallest are not among
        /// the [`TOP_EXACT`] largest.
        fn busy() -> Self {
            let tree = Self::new();
            tree.process(100, "python3", 5000, 20_000);
            for i in 0..40 {
                tree.process(1000 + i, "sleep", 100 + u64::from(i), 400);
            }
            tree
        }

        fn sampler(&self) -> LinuxSampler {
            LinuxSampler::new(self.0.path()).with_passwd("/nonexistent/passwd")
        }
    }

    #[test]
    fn a_light_tick_rereads_the_interesting_the_watched_and_the_largest() {
        let tree = FakeProc::busy();
        let mut sampler = tree.sampler();
        let page = sampler.io.page_size;
        sampler.sample().unwrap();
        tree.memory(100, 6000, 24_000); // Python: interesting
        tree.memory(1001, 50, 800); // watched by the caller
        tree.memory(1039, 300, 400); // among the largest
        let snap = sampler.sample_light(&[1001]).unwrap();
        let p = |pid| snap.process(pid).unwrap();
        assert_eq!(
            (p(100).footprint, p(100).detail),
            (24_000 << 10, Detail::Exact)
        );
        assert_eq!(
            (p(1001).footprint, p(1001).detail),
            (800 << 10, Detail::Exact)
        );
        assert_eq!(p(1039).footprint, 300 * page);
        assert_eq!(p(1039).detail, Detail::Estimated);
    }

    #[test]
    fn a_light_tick_carries_the_rest_and_the_next_full_tick_reads_them() {
        let tree = FakeProc::busy();
        let mut sampler = tree.sampler();
        let page = sampler.io.page_size;
        sampler.sample().unwrap();
        let second = sampler.sample().unwrap();
        assert_eq!(second.process(1002).unwrap().footprint, 102 * page);
        tree.memory(1002, 90, 360);
        let light = sampler.sample_light(&[]).unwrap();
        assert_eq!(light.processes.len(), second.processes.len());
        assert_eq!(light.process(1002).unwrap().footprint, 102 * page);
        let full = sampler.sample().unwrap();
        assert_eq!(full.process(1002).unwrap().footprint, 90 * page);
    }

    #[test]
    fn a_light_tick_reads_a_new_process_in_full() {
        let tree = FakeProc::busy();
        let mut sampler = tree.sampler();
        sampler.sample().unwrap();
        tree.process(2000, "python3", 100, 4000);
        let light = sampler.sample_light(&[]).unwrap();
        let p = light.process(2000).expect("listed on a light tick");
        assert_eq!((p.footprint, p.detail), (4000 << 10, Detail::Exact));
        // Python: re-read exactly on the light ticks that follow.
        tree.memory(2000, 200, 8000);
        let next = sampler.sample_light(&[]).unwrap();
        assert_eq!(next.process(2000).unwrap().footprint, 8000 << 10);
    }

    #[test]
    fn a_light_tick_lists_only_when_a_pid_was_handed_out() {
        let tree = FakeProc::busy();
        let loadavg = tree.0.path().join("loadavg");
        std::fs::write(&loadavg, "0.00 0.00 0.00 1/41 1039\n").unwrap();
        let mut sampler = tree.sampler();
        sampler.sample().unwrap();
        // A process appears, but the last pid says none was created: a
        // fixture cannot fork, the kernel's figure would have moved.
        tree.process(2000, "sleep", 100, 400);
        assert!(sampler.sample_light(&[]).unwrap().process(2000).is_none());
        std::fs::write(&loadavg, "0.00 0.00 0.00 1/42 2000\n").unwrap();
        assert!(sampler.sample_light(&[]).unwrap().process(2000).is_some());
    }

    #[test]
    fn light_ticks_without_a_listing_carry_it_and_leave_out_what_they_find_gone() {
        let tree = FakeProc::busy();
        std::fs::write(tree.0.path().join("loadavg"), "0.00 0.00 0.00 1/41 1039\n").unwrap();
        // A kernel thread (PF_KTHREAD in the flags): counted, never listed.
        tree.process(2, "kthreadd", 0, 0);
        let stat = tree.0.path().join("2/stat");
        let text = std::fs::read_to_string(&stat).unwrap();
        std::fs::write(&stat, text.replace(" 4194304 ", " 2129984 ")).unwrap();
        let mut sampler = tree.sampler().with_held_files(0);
        let full = sampler.sample().unwrap();
        assert_eq!(full.errors.kernel_threads, 1);
        for _ in 0..3 {
            let light = sampler.sample_light(&[]).unwrap();
            assert_eq!(light.processes.len(), full.processes.len());
            assert_eq!(light.errors.kernel_threads, 1);
        }
        // The Python process is re-read on light ticks: found gone, it is
        // left out from then on, and forgotten.
        std::fs::remove_file(tree.0.path().join("100/statm")).unwrap();
        let before = sampler.tracked_count();
        for _ in 0..2 {
            let light = sampler.sample_light(&[]).unwrap();
            assert!(light.process(100).is_none());
            assert_eq!(light.processes.len(), full.processes.len() - 1);
        }
        assert_eq!(sampler.tracked_count(), before - 1);
    }

    #[test]
    fn a_pid_found_gone_on_a_light_tick_and_reused_is_a_new_process() {
        let tree = FakeProc::busy();
        let loadavg = tree.0.path().join("loadavg");
        std::fs::write(&loadavg, "0.00 0.00 0.00 1/41 1039\n").unwrap();
        let mut sampler = tree.sampler().with_held_files(0);
        sampler.sample().unwrap();
        std::fs::remove_dir_all(tree.0.path().join("100")).unwrap();
        assert!(sampler.sample_light(&[]).unwrap().process(100).is_none());
        // Another process gets pid 100 (a later start time).
        tree.process(100, "node", 100, 400);
        let stat = tree.0.path().join("100/stat");
        let text = std::fs::read_to_string(&stat).unwrap();
        std::fs::write(&stat, text.replace(" 30134 ", " 99999 ")).unwrap();
        std::fs::write(&loadavg, "0.00 0.00 0.00 1/41 100\n").unwrap();
        let light = sampler.sample_light(&[]).unwrap();
        let p = light.process(100).expect("the new process is listed");
        assert_eq!((p.name.as_str(), p.id.start), ("node", 99999));
    }

    #[test]
    fn a_process_gone_before_a_light_tick_is_forgotten() {
        let tree = FakeProc::busy();
        let mut sampler = tree.sampler();
        sampler.sample().unwrap();
        let before = sampler.tracked_count();
        std::fs::remove_dir_all(tree.0.path().join("100")).unwrap();
        std::fs::remove_dir_all(tree.0.path().join("1003")).unwrap();
        let light = sampler.sample_light(&[]).unwrap();
        assert!(light.process(100).is_none());
        assert!(light.process(1003).is_none());
        assert_eq!(sampler.tracked_count(), before - 2);
    }

    #[test]
    fn a_process_that_exits_between_listing_and_reread_is_left_out() {
        let tree = FakeProc::busy();
        // Files re-opened each time: a kept fixture file would still read.
        let mut sampler = tree.sampler().with_held_files(0);
        sampler.sample().unwrap();
        // Listed, but its statm is gone by the time it is re-read.
        std::fs::remove_file(tree.0.path().join("100/statm")).unwrap();
        let light = sampler.sample_light(&[]).unwrap();
        assert!(light.process(100).is_none());
        assert!(light.errors.vanished >= 1);
    }

    #[test]
    fn the_first_tick_is_full_even_when_light_is_asked() {
        let tree = FakeProc::busy();
        let snap = tree.sampler().sample_light(&[]).unwrap();
        assert_eq!(snap.processes.len(), 41);
    }

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
    fn library_scan_lists_mapped_shared_objects_and_stops_when_refused() {
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
    fn user_names_reload_when_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passwd");
        std::fs::write(&path, "root:x:0:0::/:/bin/sh\n").unwrap();
        let mut users = UserNames::new(path.clone());
        assert_eq!(users.name(0).as_deref(), Some("root"));
        assert_eq!(users.name(1000), None);
        std::fs::write(&path, "root:x:0:0::/:/bin/sh\nann:x:1000:1000::/:/bin/sh\n").unwrap();
        // Make sure the modification time differs on coarse file systems.
        let later = SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(later))
            .unwrap();
        assert_eq!(users.name(1000).as_deref(), Some("ann"));
    }

    #[test]
    fn missing_passwd_gives_no_names() {
        let mut users = UserNames::new(PathBuf::from("/nonexistent/passwd"));
        assert_eq!(users.name(0), None);
    }
}
