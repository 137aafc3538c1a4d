//! The per-process tracker of the Linux sampler: what is known of each
//! process identity, and the full tick that lists `/proc` and reads it.
//!
//! A full tick reads `statm` of every listed process (kept open where the
//! budget allows: [`default_held_budget`]), reads a new pid in full
//! ([`Io::first_sight`]), gives exact detail to the [`TOP_EXACT`] largest
//! and to the interesting and watched processes a light tick would re-read
//! (every large or moving one, each user's small, still ones in turn:
//! looking like ML work costs a user a bounded share of the tick), re-checks
//! the identity of those in this tick's round-robin slot ([`VERIFY_PERIOD`])
//! and re-scans the libraries
//! of Python processes that may have imported a framework since
//! ([`super::library_rescan`], read by a thread of their own). The light
//! tick is in [`super::light_tick`]. A full tick given a tripwire
//! ([`TickDepth::FullUnless`]) looks at the machine's figures every
//! [`TRIP_CHECK_EVERY`] while it reads; once a rule's machine-wide
//! condition holds, it carries the rest of the table and finishes as a light
//! tick, so that a crossing waits for no read of thousands of processes.
//! Both end in [`ProcessTracker::end_tick`] and
//! become samples in [`ProcessTracker::build_processes`]. The module doc of
//! [`super`] explains why.
//!
//! `exec` keeps the identity (pid and start time) and changes the program,
//! so the tracker watches for it in what it reads anyway: the code size in
//! `statm`, read every tick ([`Statm::other_program`]), and where `stat` is
//! read, the name and `PF_FORKNOEXEC`. Any of them changed, the process is
//! read again as at first sight and classified from what it runs now, with
//! its peak and its kept `statm` file, and a note of what it ran before
//! ([`EarlierProgram`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::time::{Duration, Instant};

use crate::model::sampling::Tripwire;

use crate::model::{
    Argv, CollectorErrors, Detail, ProcessId, ProcessSample, SharedStr, Timestamp, Workload,
    WorkloadKind,
};
use crate::os::linux::parse::procfs::{self, Statm, Status};
use crate::workload::{self, EarlierProgram, ProcessFacts};

use super::copy_estimate::{CopyLedger, CopyWatch};
use super::library_rescan::{LibraryScan, ScanBudget};
use super::library_worker::LibraryWorker;
use super::process_reads::Io;
use super::pss::{PssBudget, PssRead, PssWorker};
use crate::os::read_failure::ReadFailure;

/// Beyond the ML processes, this many of the largest processes (by `statm`
/// resident size) are read in full every tick.
pub const TOP_EXACT: usize = 32;

/// A full tick that may be cut short looks at the machine's figures at most
/// this often…
pub const TRIP_CHECK_EVERY: Duration = Duration::from_millis(5);
/// …and asks the clock whether it is time once in this many processes.
pub const TRIP_CHECK_PIDS: usize = 32;

/// How much of the process table a tick reads.
#[derive(Debug, Clone, Copy)]
pub(super) enum TickDepth<'a> {
    /// Every process afresh.
    Full,
    /// Every process afresh, unless the tripwire trips meanwhile.
    FullUnless(&'a Tripwire),
    /// The processes that matter afresh, the rest carried.
    Light,
}

/// A full tick's tripwire and when it last looked.
pub(super) struct TripCheck<'a> {
    wire: &'a Tripwire,
    /// `None` until the first look, which comes before the first process.
    last: Option<Instant>,
}

impl<'a> TripCheck<'a> {
    fn new(wire: &'a Tripwire) -> Self {
        Self { wire, last: None }
    }

    /// Whether the wire holds, looking at most every [`TRIP_CHECK_EVERY`].
    fn tripped(&mut self, io: &mut Io) -> bool {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < TRIP_CHECK_EVERY)
        {
            return false;
        }
        self.last = Some(now);
        io.tripped(self.wire)
    }
}

/// Processes not read in full every tick have their identity (start time)
/// re-checked once in this many ticks.
pub const VERIFY_PERIOD: u64 = 20;
/// While a process's `statm` reads as it did at its last `status` read (the
/// same size, resident and shared pages, through the file kept open for
/// that identity), that `status` stands for this tick's, for up to this
/// many ticks: its `RssAnon`, `RssShmem` and `VmSwap` move only with pages
/// mapped, touched, swapped or freed, which move `statm` too (swapped
/// pages freed by `madvise` aside, hence the bound). A process that sleeps
/// costs `statm` and `stat` (its identity) a tick, not `status` as well.
pub const STATUS_STANDS_FOR: u64 = 16;

/// Open files kept back for the rest of the daemon (sockets, the journal,
/// GPU libraries) when sizing the number of `statm` files kept open.
const FD_RESERVE: u64 = 256;
/// At most this many `statm` files are kept open by default: each costs the
/// kernel a `struct file` and a seq_file page (about 4.5 KiB).
const MAX_HELD_FILES: u64 = 4096;

/// Every process identity known, and the tick's bookkeeping.
#[derive(Debug)]
pub(super) struct ProcessTracker {
    /// By pid: walked in pid order to build a snapshot, entries side by
    /// side in memory (a hash table's order is scattered, and with a few
    /// hundred bytes per process each lookup there missed the cache).
    pub(super) tracked: BTreeMap<u32, TrackedProcess>,
    pub(super) tick: u64,
    pub(super) scratch: Scratch,
    /// How many `statm` files may be kept open, and how many are.
    pub(super) held_budget: usize,
    pub(super) held: usize,
    /// The tick the processes were last listed (0: never; light ticks
    /// follow the first listing). A tracked process belongs to this tick's
    /// snapshot if it was seen at that listing or since (`seen >=
    /// listed_at`), so a light tick that does not list carries every known
    /// process without touching its entry.
    pub(super) listed_at: u64,
    /// Kernel threads counted at that listing, counted again by the light
    /// ticks that carry it.
    pub(super) listed_kernel_threads: u64,
    /// The last pid handed out (`/proc/loadavg`) when the processes were
    /// last listed.
    pub(super) last_pid: Option<u32>,
    /// What proportional-share reads may cost, and what they did.
    pub(super) pss_budget: PssBudget,
    /// The machine's side of the copy-on-access estimate.
    pub(super) copy_ledger: CopyLedger,
    /// The thread that makes them, once a family has been due.
    pub(super) pss_worker: Option<PssWorker>,
    /// What library scans (`maps`) may cost, and what they did.
    pub(super) library_budget: ScanBudget,
    /// The thread that makes them, once one has been due.
    pub(super) library_worker: Option<LibraryWorker>,
}

/// Reused per-tick lists, kept to avoid reallocating them every tick.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    pub(super) pids: Vec<u32>,
    /// (statm resident pages, pid) of every user process seen this tick.
    pub(super) ranking: Vec<(u64, u32)>,
    /// Classified ML / Python processes: exact every tick.
    pub(super) interesting: Vec<u32>,
    /// A light tick's listing, kept apart until it succeeds.
    pub(super) listing: Vec<u32>,
    /// Processes in this tick's identity-check slot.
    pub(super) verify: Vec<u32>,
    /// Python processes still waiting for a framework to show up.
    pub(super) rescan: Vec<u32>,
    /// The pids a light tick re-reads.
    pub(super) light: Vec<u32>,
}

impl Scratch {
    /// File a user process seen this tick into the per-tick lists.
    fn note(&mut self, pid: u32, t: &TrackedProcess, verify_now: bool) {
        self.ranking.push((t.statm.resident, pid));
        if is_interesting(&t.workload) {
            self.interesting.push(pid);
        }
        // An interesting one given exact detail this tick is skipped there.
        if verify_now {
            self.verify.push(pid);
        }
        if t.scan
            .is_some_and(|scan| !scan.blocked && t.workload.frameworks.is_empty())
        {
            self.rescan.push(pid);
        }
    }
}

/// What is known of one process identity.
#[derive(Debug, Default)]
pub(super) struct TrackedProcess {
    pub(super) start: u64,
    /// The tick this pid was last listed and read; older entries are dropped.
    pub(super) seen: u64,
    pub(super) kernel_thread: bool,
    pub(super) ppid: u32,
    pub(super) uid: Option<u32>,
    /// The text every snapshot shares while the identity lives.
    pub(super) user: Option<SharedStr>,
    pub(super) name: SharedStr,
    pub(super) exe: Option<SharedStr>,
    pub(super) argv: Argv,
    pub(super) started_at: Option<Timestamp>,
    pub(super) workload: Workload,
    pub(super) libraries: Vec<String>,
    /// The `site-packages` directories of those libraries (the library
    /// scan's), shared with each snapshot.
    pub(super) site_packages: Vec<SharedStr>,
    /// Present for processes the classifier wants library scans of.
    pub(super) scan: Option<LibraryScan>,
    pub(super) statm: Statm,
    /// The tick `statm` was last read.
    pub(super) statm_tick: u64,
    /// Its resident or total size changed at that read.
    pub(super) statm_moved: bool,
    /// The tick it last had its turn among its user's small, still
    /// interesting processes (`light_tick.rs`, `choose_light`).
    pub(super) light_turn: u64,
    /// The tick `status` was last actually read (`status_tick` also moves
    /// when that read stands for a later tick's).
    pub(super) status_read_tick: u64,
    /// `statm` as it was when `status` was last read: while it reads the
    /// same, so does `status` (see [`STATUS_STANDS_FOR`]).
    pub(super) status_statm: Option<Statm>,
    /// `statm`, kept open and re-read each tick, while the budget allows.
    pub(super) statm_file: Option<File>,
    /// The memory-cgroup path, shared with the other processes of its
    /// cgroup (`cgroup_paths.rs`).
    pub(super) cgroup: Option<SharedStr>,
    /// The last full `status` read.
    pub(super) status: Option<Status>,
    /// The tick of that read; equal to the current tick means exact.
    pub(super) status_tick: u64,
    /// Largest footprint seen for this identity, bytes.
    pub(super) peak: u64,
    /// Forked and not exec'd since (`PF_FORKNOEXEC`): it shares its
    /// parent's pages.
    pub(super) forked: bool,
    /// In a family that shares memory (see `pss.rs`) as of the last full tick.
    pub(super) shares: bool,
    /// Its last proportional-share read, while it shares.
    pub(super) pss: Option<PssRead>,
    /// For a forked child: its own figure when first seen. Until its share
    /// is read, it counts only what it added since (its parent's share
    /// holds the pages they share), not every shared page again.
    pub(super) fork_baseline: Option<u64>,
    /// The pages it is estimated to have copied on access since its share
    /// was last read (`copy_estimate.rs`).
    pub(super) copies: CopyWatch,
    /// What it ran before, if it has changed program (or name) since it was
    /// first read: kept in its evidence through every classification.
    pub(super) earlier: Option<EarlierProgram>,
}

impl TrackedProcess {
    /// Whether the last `status` stands for this tick's without a read
    /// (see [`STATUS_STANDS_FOR`]), once `stat` confirmed the identity:
    /// `statm` was read this tick through the file kept open for this
    /// identity, it reads as it did then, the read is recent, and this is
    /// not the tick of the round-robin check of `pid`.
    fn status_would_stand(&self, tick: u64, pid: u32) -> bool {
        self.statm_file.is_some()
            && self.statm_tick == tick
            && self.status.is_some()
            && tick.saturating_sub(self.status_read_tick) < STATUS_STANDS_FOR
            && u64::from(pid) % VERIFY_PERIOD != tick % VERIFY_PERIOD
            && self.status_statm.is_some_and(|then| {
                then.size == self.statm.size
                    && then.resident == self.statm.resident
                    && then.shared == self.statm.shared
            })
    }

    /// [`Self::status_would_stand`], and if it does, mark the last `status`
    /// as this tick's.
    fn status_stands(&mut self, tick: u64, pid: u32) -> bool {
        if self.status_would_stand(tick, pid) {
            self.status_tick = tick;
            return true;
        }
        false
    }

    /// Its own footprint this tick (RssAnon + RssShmem + VmSwap where
    /// `status` was read this tick, else `statm`'s resident − shared plus
    /// the last VmSwap), its resident size and how exact they are; `page`
    /// is the page size.
    pub(super) fn own_footprint(&self, tick: u64, page: u64) -> (u64, u64, Detail) {
        let statm_resident = self.statm.resident.saturating_mul(page);
        let last_swap = self.status.and_then(|s| s.vm_swap);
        match self.status {
            Some(status) if self.status_tick == tick => (
                status.footprint(),
                status.vm_rss.unwrap_or(statm_resident),
                Detail::Exact,
            ),
            // statm resident − shared = RssAnon (task_statm() in
            // fs/proc/task_mmu.c counts shared as file + shmem pages);
            // swap is the VmSwap of the last full read.
            _ => (
                self.statm
                    .anon()
                    .saturating_mul(page)
                    .saturating_add(last_swap.unwrap_or(0)),
                statm_resident,
                Detail::Estimated,
            ),
        }
    }

    /// The workload its name, executable, argv and libraries show, with
    /// the note of what it ran before, if anything.
    pub(super) fn classify(&self) -> Workload {
        let mut w = workload::classify(&ProcessFacts {
            name: &self.name,
            exe: self.exe.as_deref(),
            argv: &self.argv,
            libraries: &self.libraries,
        });
        if let Some(earlier) = &self.earlier {
            earlier.note(&mut w);
        }
        w
    }
}

impl ProcessTracker {
    pub(super) fn new() -> Self {
        Self {
            tracked: BTreeMap::new(),
            tick: 0,
            scratch: Scratch::default(),
            held_budget: default_held_budget(),
            held: 0,
            listed_at: 0,
            listed_kernel_threads: 0,
            last_pid: None,
            pss_budget: PssBudget::default(),
            copy_ledger: CopyLedger::default(),
            pss_worker: None,
            library_budget: ScanBudget::default(),
            library_worker: None,
        }
    }

    /// Read this tick's processes as `depth` asks, with the `watched` pids
    /// re-read (the first tick is full whatever is asked). Returns whether
    /// every process was read afresh: a full tick cut short by its
    /// tripwire finishes light.
    pub(super) fn sample(
        &mut self,
        io: &mut Io,
        depth: TickDepth<'_>,
        watched: &[u32],
        errors: &mut CollectorErrors,
    ) -> bool {
        match depth {
            TickDepth::Light if self.listed_at > 0 => {
                self.sample_light(io, watched, errors);
                false
            }
            // The first tick has nothing to carry: it reads everything.
            TickDepth::FullUnless(trip) if self.listed_at > 0 && !trip.is_empty() => {
                let mut check = TripCheck::new(trip);
                self.sample_full(io, watched, Some(&mut check), errors)
            }
            _ => self.sample_full(io, watched, None, errors),
        }
    }

    /// A full tick: every listed pid's `statm` (and a new one read in full),
    /// exact detail for the largest and for the interesting and `watched`
    /// ones a light tick would re-read ([`Self::choose_light`]), the
    /// round-robin identity checks, library scans and proportional shares.
    /// With a `trip` check that fires while the table is read, the rest of
    /// it is carried and the tick finishes light: returns false.
    fn sample_full(
        &mut self,
        io: &mut Io,
        watched: &[u32],
        mut trip: Option<&mut TripCheck<'_>>,
        errors: &mut CollectorErrors,
    ) -> bool {
        let tick = self.tick;
        self.last_pid = io.read_last_pid();
        self.listed_at = tick;
        let mut s = std::mem::take(&mut self.scratch);
        if io.reader.list_pids(&mut s.pids).is_err() {
            self.last_pid = None;
            errors.unreadable += 1;
        }
        s.ranking.clear();
        s.interesting.clear();
        s.verify.clear();
        s.rescan.clear();

        // Every listed pid: statm, and the full first-sight read if new.
        let pids = std::mem::take(&mut s.pids);
        let mut tripped = false;
        for (i, &pid) in pids.iter().enumerate() {
            if !tripped && i % TRIP_CHECK_PIDS == 0 && trip.as_mut().is_some_and(|t| t.tripped(io))
            {
                tripped = true;
            }
            if tripped {
                self.carry(io, pid, &mut s, errors);
            } else {
                self.observe(io, pid, &mut s, errors);
            }
        }
        s.pids = pids;
        self.listed_kernel_threads = errors.kernel_threads;

        // Exact detail for the largest, and for the interesting and watched
        // ones as a light tick chooses them: every large or moving one, each
        // user's small, still ones in turn (their identity is checked in
        // the round-robin below).
        if s.ranking.len() > TOP_EXACT {
            s.ranking
                .select_nth_unstable_by(TOP_EXACT - 1, |a, b| b.0.cmp(&a.0));
            s.ranking.truncate(TOP_EXACT);
        }
        s.light.clear();
        self.choose_light(&mut s, watched, io.page_size);
        let chosen = s.light.len();
        s.light.extend(s.ranking.iter().map(|r| r.1));
        let exact = std::mem::take(&mut s.light);
        for (i, &pid) in exact.iter().enumerate() {
            if !tripped && i % TRIP_CHECK_PIDS == 0 && trip.as_mut().is_some_and(|t| t.tripped(io))
            {
                tripped = true;
            }
            // Carried past a trip: its statm first, as on a light tick.
            if self.tracked.get(&pid).is_some_and(|t| t.statm_tick != tick) {
                self.reread_statm(io, pid, errors);
            }
            if i < chosen {
                if let Some(t) = self.tracked.get_mut(&pid) {
                    t.light_turn = tick;
                }
            } else if tripped {
                // One of the largest, once tripped: its statm is enough.
                continue;
            }
            self.refresh_exact(io, pid, errors);
        }
        s.light = exact;
        if tripped {
            // Cut short for a crossing: what a light tick does from here.
            self.scan_libraries(io, &s.rescan, errors);
            let page = io.page_size;
            self.light_shares(io, page);
            self.end_tick(io, s, true);
            return false;
        }

        // Round-robin identity check of the others.
        for &pid in &s.verify {
            if self
                .tracked
                .get(&pid)
                .is_some_and(|t| t.seen >= self.listed_at && t.status_tick != tick)
            {
                self.check_identity(io, pid, errors);
            }
        }

        // Python processes that may have imported a framework since.
        self.scan_libraries(io, &s.rescan, errors);

        // Proportional shares of the families that share memory.
        let page = io.page_size;
        self.read_shares(io, page);

        self.end_tick(io, s, true);
        true
    }

    /// A listed pid of a full tick cut short: carried as a light tick
    /// carries it (filed with its last figures), or read in full if new.
    fn carry(&mut self, io: &mut Io, pid: u32, s: &mut Scratch, errors: &mut CollectorErrors) {
        match self.tracked.get_mut(&pid) {
            Some(t) => {
                t.seen = self.tick;
                if t.kernel_thread {
                    errors.kernel_threads += 1;
                } else {
                    s.note(pid, t, false);
                }
            }
            None => self.observe(io, pid, s, errors),
        }
    }

    /// After a listing, forget what it did not list and count the files
    /// kept by the rest; put the scratch space back.
    pub(super) fn end_tick(&mut self, io: &mut Io, s: Scratch, listed: bool) {
        if listed {
            let listed_at = self.listed_at;
            let mut held = 0;
            self.tracked.retain(|_, t| {
                let keep = t.seen >= listed_at;
                held += usize::from(keep && t.statm_file.is_some());
                keep
            });
            self.held = held;
            io.cgroups.prune();
        }
        io.reader.trim();
        self.scratch = s;
    }

    /// Forget a process found gone.
    pub(super) fn forget(&mut self, pid: u32) {
        if self
            .tracked
            .remove(&pid)
            .is_some_and(|t| t.statm_file.is_some())
        {
            self.held = self.held.saturating_sub(1);
        }
    }

    /// One listed pid: read statm (and everything else if the pid is new),
    /// or recognise a known kernel thread.
    pub(super) fn observe(
        &mut self,
        io: &mut Io,
        pid: u32,
        s: &mut Scratch,
        errors: &mut CollectorErrors,
    ) {
        let tick = self.tick;
        let verify_now = u64::from(pid) % VERIFY_PERIOD == tick % VERIFY_PERIOD;

        if let Some(t) = self.tracked.get_mut(&pid) {
            if !t.kernel_thread {
                let read = match &t.statm_file {
                    Some(file) => io.read_held_statm(file),
                    None => io.read_statm(pid).map(|(statm, file)| {
                        if self.held < self.held_budget {
                            t.statm_file = Some(file);
                            self.held += 1;
                        }
                        statm
                    }),
                };
                match read {
                    Ok(statm) => {
                        let other_program = t.statm.other_program(&statm);
                        t.statm_moved =
                            t.statm.resident != statm.resident || t.statm.size != statm.size;
                        t.statm = statm;
                        t.statm_tick = tick;
                        t.seen = tick;
                        if verify_now {
                            // Processes are moved between cgroups.
                            t.cgroup = io.cgroups.read(&mut io.reader, pid, t.cgroup.as_ref());
                        }
                        // Another executable's code: it called exec. Read
                        // it again before it is filed by what it runs.
                        if other_program {
                            self.check_program(io, pid, true, errors);
                        }
                        if let Some(t) = self.tracked.get(&pid) {
                            s.note(pid, t, verify_now);
                        }
                        return;
                    }
                    // The process the kept file was opened for is gone, yet
                    // its pid is listed: reused, or it exited just now. The
                    // path read below tells which.
                    Err(ReadFailure::Vanished) if t.statm_file.is_some() => {
                        self.tracked.remove(&pid);
                    }
                    Err(f) => return f.count(errors),
                }
            } else if !verify_now {
                t.seen = tick;
                errors.kernel_threads += 1;
                return;
            } else {
                match io.read_stat_identity(pid) {
                    Ok((start, _, true)) if start == t.start => {
                        t.seen = tick;
                        errors.kernel_threads += 1;
                        return;
                    }
                    // The kernel thread is gone and a process took its pid.
                    Ok(_) => {
                        self.tracked.remove(&pid);
                    }
                    Err(f) => return f.count(errors),
                }
            }
        }

        let (statm, file) = match io.read_statm(pid) {
            Ok(read) => read,
            Err(f) => return f.count(errors),
        };
        let Some(mut t) = io.first_sight(pid, statm, tick, errors) else {
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
    pub(super) fn refresh_exact(&mut self, io: &mut Io, pid: u32, errors: &mut CollectorErrors) {
        let tick = self.tick;
        if !self
            .tracked
            .get(&pid)
            .is_some_and(|t| t.seen >= self.listed_at && t.status_tick != tick && !t.kernel_thread)
        {
            return;
        }
        if !self.check_identity(io, pid, errors) {
            return; // gone, or replaced by a new identity read in full
        }
        if self
            .tracked
            .get_mut(&pid)
            .is_some_and(|t| t.status_stands(tick, pid))
        {
            return;
        }
        let Some(t) = self.tracked.get_mut(&pid) else {
            return;
        };
        match io.reader.read_pid(pid, "status") {
            Ok(data) => match procfs::parse_status(data) {
                Some(status) => io.set_status(t, status, tick),
                None => ReadFailure::Unreadable.count(errors),
            },
            Err(ReadFailure::Vanished) => {
                self.forget(pid);
                ReadFailure::Vanished.count(errors);
            }
            Err(f) => f.count(errors),
        }
    }

    /// Re-read `stat` of a tracked process. Returns true if the identity and
    /// its program are unchanged; false if the entry was replaced by a fresh
    /// read (pid reuse: a new identity; exec or a new name: the same
    /// identity running another program, [`Self::reread_program`]), or if
    /// the process is gone (forgotten).
    pub(super) fn check_identity(
        &mut self,
        io: &mut Io,
        pid: u32,
        errors: &mut CollectorErrors,
    ) -> bool {
        self.check_program(io, pid, false, errors)
    }

    /// [`Self::check_identity`], told whether `statm` already showed
    /// another executable's code (`exec_seen`).
    pub(super) fn check_program(
        &mut self,
        io: &mut Io,
        pid: u32,
        exec_seen: bool,
        errors: &mut CollectorErrors,
    ) -> bool {
        let tick = self.tick;
        let Some(t) = self.tracked.get_mut(&pid) else {
            return false;
        };
        let change = match io.reader.read_pid(pid, "stat") {
            Ok(data) => match procfs::parse_stat(data) {
                Some(st) if st.start_ticks == t.start => {
                    let change = program_change(
                        &t.name,
                        t.forked,
                        st.comm,
                        st.forked_without_exec(),
                        exec_seen,
                    );
                    t.ppid = st.ppid;
                    t.forked = st.forked_without_exec();
                    match change {
                        None => return true,
                        Some(exec) => Some(exec),
                    }
                }
                Some(_) => None,
                None => {
                    ReadFailure::Unreadable.count(errors);
                    return true;
                }
            },
            Err(ReadFailure::Vanished) => {
                self.forget(pid);
                ReadFailure::Vanished.count(errors);
                return false;
            }
            Err(f) => {
                f.count(errors);
                return true;
            }
        };
        match change {
            Some(exec) => self.reread_program(io, pid, exec, errors),
            // A new start time: another process took the pid.
            None => {
                let statm = t.statm;
                self.forget(pid);
                if let Some(fresh) = io.first_sight(pid, statm, tick, errors) {
                    self.tracked.insert(pid, fresh);
                }
            }
        }
        false
    }

    /// The same identity runs another program (`exec`: true) or goes by
    /// another name: read it again as at first sight and classify it from
    /// what it runs now. What belongs to the process, not the program, is
    /// kept: its peak and its kept `statm` file (which reads the process,
    /// whatever it runs). Its proportional share and fork baseline go: an
    /// exec'd process shares no pages with its parent any more.
    fn reread_program(&mut self, io: &mut Io, pid: u32, exec: bool, errors: &mut CollectorErrors) {
        let tick = self.tick;
        let Some(mut old) = self.tracked.remove(&pid) else {
            return;
        };
        match io.first_sight(pid, old.statm, tick, errors) {
            Some(mut fresh) if fresh.start == old.start && !fresh.kernel_thread => {
                let exec = exec || fresh.exe != old.exe;
                let earlier = EarlierProgram {
                    name: old.name.to_string(),
                    exec,
                    noticed: Timestamp::now(),
                };
                earlier.note(&mut fresh.workload);
                fresh.earlier = Some(earlier);
                fresh.peak = fresh.peak.max(old.peak);
                fresh.statm_file = old.statm_file.take();
                self.tracked.insert(pid, fresh);
            }
            // Between the two reads the process ended and its pid was
            // taken again: a new identity.
            Some(fresh) => {
                if old.statm_file.is_some() {
                    self.held = self.held.saturating_sub(1);
                }
                self.tracked.insert(pid, fresh);
            }
            None => {
                if old.statm_file.is_some() {
                    self.held = self.held.saturating_sub(1);
                }
            }
        }
    }

    /// The processes of this tick, in pid order, as samples; `page` is the
    /// page size in bytes.
    pub(super) fn build_processes(&mut self, page: u64) -> Vec<ProcessSample> {
        let tick = self.tick;
        // Forked children of ML or Python work whose share is not read
        // yet, beside a live parent: few, and listed first so that the pass
        // below can ask. (Their families are read at the next full tick.)
        let pending: Vec<u32> = self
            .tracked
            .iter()
            .filter(|(_, t)| t.forked && t.pss.is_none() && t.fork_baseline.is_some())
            .filter(|(_, t)| {
                self.tracked.get(&t.ppid).is_some_and(|parent| {
                    parent.seen >= self.listed_at
                        && !parent.kernel_thread
                        && (is_interesting(&t.workload) || is_interesting(&parent.workload))
                })
            })
            .map(|(pid, _)| *pid)
            .collect();
        let mut out = Vec::with_capacity(self.tracked.len());
        for (pid, t) in &mut self.tracked {
            if t.seen < self.listed_at || t.kernel_thread {
                continue;
            }
            let last_swap = t.status.and_then(|s| s.vm_swap);
            let (own, resident, detail) = t.own_footprint(tick, page);
            // A process that shares pages counts its proportional share.
            // A process that shares pages counts its proportional share,
            // plus what it is estimated to have copied on access since that
            // was read, never more than its own figure.
            let copied = |shown: u64| shown.saturating_add(t.copies.since_read).min(own);
            let (footprint, basis) = match (t.pss.filter(|_| t.shares), t.fork_baseline) {
                (Some(read), _) => (copied(read.now(own)), crate::model::Basis::Pss),
                // A new forked child, its share not read yet: what it added
                // since it appeared; the pages it shares are its parent's.
                (None, Some(baseline)) if pending.binary_search(pid).is_ok() => (
                    copied(own.saturating_sub(baseline)),
                    crate::model::Basis::Pss,
                ),
                _ => (own, crate::model::Basis::Rss),
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
                basis,
                held_open: 0,
                job: None,
                forked: t.forked,
                cgroup: t.cgroup.clone(),
                workload: t.workload.clone(),
                labels: None,
                site_packages: t.site_packages.clone(),
            });
        }
        out
    }
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

/// What a fresh `stat` of a known identity says of its program: `None` if
/// it is unchanged; `Some(true)` if it called `exec` (`exec_seen`, from
/// `statm`'s code size, or `PF_FORKNOEXEC` cleared: the kernel clears it
/// at exec, `begin_new_exec` in `fs/exec.c`, and sets it only at fork);
/// `Some(false)` if only its name changed, which a process can do by itself
/// (`prctl(PR_SET_NAME)`, a write to `/proc/self/comm`) and which exec does
/// too (the new `comm` is the executable's file name): the caller reads the
/// executable again to tell.
pub(super) fn program_change(
    known_name: &str,
    known_forked: bool,
    comm: &[u8],
    forked_now: bool,
    exec_seen: bool,
) -> Option<bool> {
    let exec = exec_seen || (known_forked && !forked_now);
    if exec {
        Some(true)
    } else if *String::from_utf8_lossy(comm) != *known_name {
        Some(false)
    } else {
        None
    }
}

/// ML and Python processes are read in full every tick.
pub(super) fn is_interesting(w: &Workload) -> bool {
    w.kind != WorkloadKind::Other || !w.frameworks.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sampling::Sampler;
    use crate::os::linux::fake_proc::FakeProc;

    /// The evidence line that says what `p` ran before, if any.
    fn change(p: &ProcessSample) -> Option<&str> {
        workload::program_change(&p.workload)
    }

    /// A small `sleep` (not among the largest, not in this tick's identity
    /// check: its `stat` is not read) calls exec into a PyTorch job: the
    /// next full tick sees the new code size in `statm`, reads the process
    /// again and classifies it by what it runs now. Same identity; its peak
    /// stays.
    #[test]
    fn an_exec_seen_in_statm_is_read_again_and_classified_anew() {
        let tree = FakeProc::busy();
        let mut sampler = tree.sampler();
        sampler.sample().unwrap();
        let before = sampler.sample().unwrap();
        let was = before.process(1005).unwrap().clone();
        assert_eq!(
            (was.name.as_str(), was.workload.kind),
            ("sleep", WorkloadKind::Other)
        );
        assert_eq!(
            was.detail,
            Detail::Estimated,
            "its stat and status are not read"
        );
        // python3 (1 page of code, as the fixtures' `basic/6441`), smaller.
        let code = "import torch; torch.ones(1)";
        tree.exec(1005, "python3", &["python3", "-c", code], 1);
        tree.memory(1005, 10, 40);
        let after = sampler.sample().unwrap();
        let p = after.process(1005).unwrap();
        assert_eq!(p.id, was.id, "the same identity");
        assert_eq!(p.name, "python3");
        assert_eq!(p.argv, ["python3", "-c", code]);
        assert_eq!(p.workload.kind, WorkloadKind::Pytorch);
        assert!(
            change(p).is_some_and(|e| e.starts_with("exec'd from sleep (noticed ")),
            "{:?}",
            p.workload.evidence
        );
        assert_eq!((p.footprint, p.detail), (40 << 10, Detail::Exact));
        assert!(p.peak_footprint >= Some(was.footprint), "its peak stays");
        // Read in full every tick from now on; the note stays.
        tree.memory(1005, 20, 80);
        let next = sampler.sample().unwrap();
        let p = next.process(1005).unwrap();
        assert_eq!((p.footprint, p.detail), (80 << 10, Detail::Exact));
        assert!(change(p).is_some());
    }

    #[test]
    fn a_light_tick_notices_an_exec_among_the_largest() {
        let tree = FakeProc::busy();
        let mut sampler = tree.sampler();
        sampler.sample().unwrap();
        tree.exec(1039, "python3", &["python3", "train.py"], 1);
        let light = sampler.sample_light(&[]).unwrap();
        let p = light.process(1039).unwrap();
        assert_eq!(p.name, "python3");
        assert_eq!(p.workload.kind, WorkloadKind::Python);
        assert!(change(p).is_some_and(|e| e.starts_with("exec'd from sleep")));
    }

    /// A forked child of a Jupyter kernel carries the kernel's command line
    /// until it execs; `multiprocessing`'s "spawn" method execs the same
    /// `python3` (same name, same code size): `PF_FORKNOEXEC` cleared says
    /// so, and the child is classified by its new command line.
    #[test]
    fn a_forked_child_that_execs_the_same_program_is_read_again() {
        let tree = FakeProc::new();
        let kernel = [
            "python3",
            "-m",
            "ipykernel_launcher",
            "-f",
            "/run/kernel-4a1f.json",
        ];
        tree.process(100, "python3", 5000, 20_000);
        tree.forked(200, "python3", 4000, 400);
        tree.argv(100, &kernel);
        tree.argv(200, &kernel);
        let mut sampler = tree.sampler();
        let before = sampler.sample().unwrap();
        let child = before.process(200).unwrap();
        assert!(child.forked);
        assert_eq!(child.workload.kernel_id.as_deref(), Some("4a1f"));
        let spawn = [
            "python3",
            "-c",
            "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)",
            "--multiprocessing-fork",
        ];
        tree.exec(200, "python3", &spawn, 5);
        let after = sampler.sample().unwrap();
        let p = after.process(200).unwrap();
        assert!(!p.forked);
        assert_eq!(p.argv, spawn);
        assert_eq!(p.workload.kernel_id, None);
        assert_eq!(p.workload.kind, WorkloadKind::Python);
        assert!(change(p).is_some_and(|e| e.starts_with("exec'd from python3")));
    }

    /// `status` is read again only when `statm` moved, or once its read is
    /// [`STATUS_STANDS_FOR`] ticks old: a Python process that sleeps is not
    /// read in full every tick, and one that grows is.
    #[test]
    fn status_is_read_again_when_statm_moves_or_the_read_grows_old() {
        let tree = FakeProc::busy();
        let mut sampler = tree.sampler();
        let footprint = |s: &mut crate::os::linux::LinuxSampler| {
            s.sample_light(&[]).unwrap().process(100).unwrap().footprint
        };
        assert_eq!(footprint(&mut sampler), 20_000 * 1024);
        // status alone says more: the read of it stands while statm holds.
        let d = tree.0.path().join("100/status");
        let text = std::fs::read_to_string(&d).unwrap();
        std::fs::write(&d, text.replace("RssAnon:\t20000", "RssAnon:\t30000")).unwrap();
        assert_eq!(footprint(&mut sampler), 20_000 * 1024);
        // statm moves: status is read at once.
        tree.memory(100, 5001, 30_000);
        assert_eq!(footprint(&mut sampler), 30_000 * 1024);
        // A read that has stood for STATUS_STANDS_FOR ticks is made again.
        let text = std::fs::read_to_string(&d).unwrap();
        std::fs::write(&d, text.replace("RssAnon:\t30000", "RssAnon:\t31000")).unwrap();
        let seen: Vec<u64> = (0..STATUS_STANDS_FOR + 1)
            .map(|_| footprint(&mut sampler) / 1024)
            .collect();
        assert_eq!(seen.last(), Some(&31_000), "{seen:?}");
        assert!(seen.contains(&30_000), "{seen:?}");
    }

    /// A process that renames itself (`prctl(PR_SET_NAME)`, as Ray's
    /// workers do) is read again too, and its evidence says only that the
    /// name changed: its executable and code are the same.
    #[test]
    fn a_renamed_process_is_read_again_and_says_its_name_changed() {
        let tree = FakeProc::busy();
        let mut sampler = tree.sampler();
        sampler.sample().unwrap();
        tree.rename(100, "ray::IDLE");
        let snap = sampler.sample().unwrap();
        let p = snap.process(100).unwrap();
        assert_eq!(p.name, "ray::IDLE");
        assert!(
            change(p).is_some_and(|e| e.starts_with("name changed from python3 (noticed ")),
            "{:?}",
            p.workload.evidence
        );
    }

    #[test]
    fn a_program_change_is_told_from_stat_and_statm() {
        // Nothing changed.
        assert_eq!(program_change("sh", false, b"sh", false, false), None);
        // Another name alone: maybe a rename, maybe exec.
        assert_eq!(
            program_change("sh", false, b"python3", false, false),
            Some(false)
        );
        // statm showed another executable's code, whatever the name.
        assert_eq!(program_change("sh", false, b"sh", false, true), Some(true));
        // A forked child that exec'd (PF_FORKNOEXEC cleared) the same
        // program: `python3` forking and exec'ing `python3` (the
        // multiprocessing "spawn" method) keeps name and code size.
        assert_eq!(
            program_change("python3", true, b"python3", false, false),
            Some(true)
        );
        // Still forked, not exec'd.
        assert_eq!(
            program_change("python3", true, b"python3", true, false),
            None
        );
        // A name that is not UTF-8 compares as the sampler stores it.
        assert_eq!(
            program_change("a\u{fffd}", false, b"a\xff", false, false),
            None
        );
    }

    #[test]
    fn a_full_tick_cut_short_by_its_tripwire_carries_the_rest_and_reads_the_crossing() {
        use crate::model::Snapshot;
        use crate::model::sampling::{TripGate, Tripwire};
        // A Python process (100), 40 sleeps (1000–1039, 100 + i pages).
        let tree = FakeProc::busy();
        let mut sampler = tree.sampler();
        let page = sampler.io.page_size;
        sampler.sample().unwrap();
        let grow = |tree: &FakeProc| {
            for i in 0..40 {
                tree.memory(1000 + i, 200 + u64::from(i), 800);
            }
            tree.memory(100, 6000, 24_000);
        };
        grow(&tree);
        // Memory falls below the wire's threshold as the tick begins.
        tree.meminfo("MemAvailable:", 1024);
        let wire = |below: u64| Tripwire {
            gates: vec![TripGate {
                available_below: Some(below),
                swap_used_above: None,
            }],
        };
        let (snap, full) = sampler.sample_unless(&[1001], &wire(2 << 20)).unwrap();
        assert!(!full, "the wire held: the tick stops and finishes light");
        assert_eq!(snap.system.available, 1 << 20, "the figures that crossed");
        let p = |snap: &Snapshot, pid| snap.process(pid).unwrap().clone();
        // The interesting one and the watched one, fresh and exact.
        assert_eq!(
            (p(&snap, 100).footprint, p(&snap, 100).detail),
            (24_000 << 10, Detail::Exact)
        );
        assert_eq!(
            (p(&snap, 1001).footprint, p(&snap, 1001).detail),
            (800 << 10, Detail::Exact)
        );
        // The largest have their statm re-read…
        assert_eq!(p(&snap, 1039).footprint, 239 * page);
        // …and a small one nobody watches is carried from the last tick.
        assert_eq!(p(&snap, 1002).footprint, 102 * page);
        assert_eq!(snap.processes.len(), 41, "every listed process is in it");

        // A wire that does not hold: every process afresh.
        let (snap, full) = sampler.sample_unless(&[1001], &wire(512 << 10)).unwrap();
        assert!(full);
        assert_eq!(p(&snap, 1002).footprint, 202 * page);
    }

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
}
