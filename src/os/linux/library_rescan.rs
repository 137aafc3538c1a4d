//! Library scans of the Linux sampler: which frameworks' shared objects a
//! process has mapped (`/proc/[pid]/maps`), for the processes the
//! classifier asks it of (Python interpreters and Jupyter kernels whose
//! command line names no framework).
//!
//! Python processes import their frameworks seconds after start, so one
//! whose framework has not shown up yet is scanned when first seen, then
//! re-scanned when it grows by half and by 64 MiB since the last scan, or
//! every 30 s, until one turns up. A process whose `maps` is refused
//! (another user's) is not asked again.
//!
//! A process's owner decides how long its `maps` is, and any user can name
//! a process `python3`: 65 000 mappings of a file with a 3.8 KB path make
//! 250 MB, which the kernel takes about 3 s to render. So the scans stay
//! off the sampler's path and within bounds:
//!
//! - they are read by a thread of their own (`library_worker.rs`), each
//!   read cut after a prefix of the file or a time, whichever comes first:
//!   a tick hands the thread the processes due and takes its answers up at
//!   a later tick (and the answer applies only to the identity it was read
//!   for); only the first tick waits for them (at most [`FIRST_WAIT`]), so
//!   that a one-shot sample is classified;
//! - a process whose read was cut is re-scanned after 60 s, then 120 s,
//!   240 s, … up to [`MAX_BACKOFF`], and its growth no longer hastens it;
//! - the reads are paid from a budget of [`BUDGET_SHARE`] of one core (a
//!   token bucket refilled with wall time, starting empty and holding at
//!   most [`BURST`]): a scan is handed out while the bucket holds its
//!   predicted cost (what its last read took), and a process never scanned
//!   may overdraw the bucket by [`OVERDRAFT`]. Processes never scanned go
//!   first, then those scanned longest ago.

use std::time::{Duration, Instant};

use crate::model::{CollectorErrors, CollectorStatus, SharedStr};

use super::library_worker::{LibraryReply, LibraryWorker, Listing};
use super::process_reads::Io;
use super::tracker::{ProcessTracker, TrackedProcess};
use crate::os::read_failure::ReadFailure;

/// A Python process without a known framework is re-scanned when its
/// resident size has grown by this share (percent) since the last scan…
const RESCAN_GROWTH_PERCENT: u64 = 50;
/// …and by at least this many bytes,
const RESCAN_GROWTH_BYTES: u64 = 64 << 20;
/// or when this long has passed since the last scan.
const RESCAN_INTERVAL: Duration = Duration::from_secs(30);
/// The longest wait between scans of a process whose reads were cut.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// Share of one core the reads may take, on average.
pub(super) const BUDGET_SHARE: f64 = 0.02;
/// Most read time saved up while nothing was due.
pub(super) const BURST: Duration = Duration::from_millis(250);
/// How far scans of processes never scanned may take the bucket below
/// empty: their first scan classifies them.
pub(super) const OVERDRAFT: Duration = Duration::from_secs(1);
/// What a read is predicted to cost before any was measured.
const FIRST_COST: Duration = Duration::from_millis(2);
/// How long the first tick waits for the scans it handed out.
const FIRST_WAIT: Duration = Duration::from_secs(2);

/// Where a process's library scans stand.
#[derive(Debug, Clone, Copy)]
pub(super) struct LibraryScan {
    /// Its resident size at the last scan, bytes.
    pub(super) resident_at: u64,
    /// When the last scan was taken up; `None`: never scanned.
    pub(super) at: Option<Instant>,
    /// `maps` refused (another user's process): stop trying.
    pub(super) blocked: bool,
    /// Scans in a row cut at their bound: its `maps` is huge.
    pub(super) cut: u32,
    /// Handed to the library thread, its answer not taken up yet. An entry
    /// made since (the process exec'd and was read again) is not waiting
    /// for one, so the answer about the program it ran then is not taken
    /// for the one it runs now.
    pub(super) pending: bool,
    /// What its last read took.
    pub(super) cost: Duration,
}

impl LibraryScan {
    /// A process to be scanned for the first time.
    pub(super) fn first() -> Self {
        Self {
            resident_at: 0,
            at: None,
            blocked: false,
            cut: 0,
            pending: false,
            cost: Duration::ZERO,
        }
    }

    /// Whether a scan is due at `now`, with `resident` bytes resident.
    fn due(&self, resident: u64, now: Instant) -> bool {
        match self.at {
            None => true,
            Some(at) if self.cut > 0 => now.saturating_duration_since(at) >= backoff(self.cut),
            Some(at) => rescan_due(
                self.resident_at,
                resident,
                now.saturating_duration_since(at),
            ),
        }
    }
}

/// The wait before scanning again a process whose last `cut` scans were
/// cut: [`RESCAN_INTERVAL`] doubled for each, up to [`MAX_BACKOFF`].
fn backoff(cut: u32) -> Duration {
    RESCAN_INTERVAL
        .saturating_mul(1u32 << cut.min(16))
        .min(MAX_BACKOFF)
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

/// The read budget and what was spent.
#[derive(Debug)]
pub(super) struct ScanBudget {
    /// Seconds of reading that may be spent now.
    allowance: f64,
    last_refill: Option<Instant>,
    /// When the sampler started: the share is of its whole life.
    started: Instant,
    reads: u64,
    cut: u64,
    failures: u64,
    spent: Duration,
}

impl Default for ScanBudget {
    fn default() -> Self {
        Self {
            allowance: 0.0,
            last_refill: None,
            started: Instant::now(),
            reads: 0,
            cut: 0,
            failures: 0,
            spent: Duration::ZERO,
        }
    }
}

impl ScanBudget {
    /// Add what the time since the last refill earned, up to [`BURST`].
    fn refill(&mut self, now: Instant) {
        if let Some(last) = self.last_refill {
            let earned = now.saturating_duration_since(last).as_secs_f64() * BUDGET_SHARE;
            self.allowance = (self.allowance + earned).min(BURST.as_secs_f64());
        }
        self.last_refill = Some(now);
    }

    /// Whether a read predicted to cost `cost` may be handed out now, given
    /// `planned` seconds already handed out this tick; `first`: of a
    /// process never scanned.
    fn affords(&self, planned: f64, cost: Duration, first: bool) -> bool {
        let left = self.allowance - planned;
        if first {
            left > -OVERDRAFT.as_secs_f64()
        } else {
            left >= cost.as_secs_f64()
        }
    }

    fn spend(&mut self, reply: &LibraryReply) {
        self.allowance -= reply.took.as_secs_f64();
        self.spent += reply.took;
        self.reads += 1;
        match &reply.listing {
            Ok(Listing { cut: true, .. }) => self.cut += 1,
            Ok(_) | Err(ReadFailure::Vanished) => {}
            Err(_) => self.failures += 1,
        }
    }

    /// What a read of a process never read is predicted to cost: the mean
    /// of the reads so far.
    fn mean_cost(&self) -> Duration {
        match u32::try_from(self.reads) {
            Ok(n) if n > 0 => self.spent / n,
            _ => FIRST_COST,
        }
    }
}

impl crate::model::Collector for ScanBudget {
    fn name(&self) -> &'static str {
        "libraries"
    }

    /// The scans as a collector, for `headroom doctor`, `/metrics` and the
    /// API: how many, what they cost, how many were cut.
    fn status(&self) -> Option<CollectorStatus> {
        if self.reads == 0 {
            return None;
        }
        let running = self.started.elapsed().as_secs_f64();
        let share = if running > 0.0 {
            self.spent.as_secs_f64() / running * 100.0
        } else {
            0.0
        };
        Some(CollectorStatus {
            name: "libraries".to_string(),
            up: true,
            detail: format!(
                "{} scans of Python processes' mapped libraries, {:.1} ms in all, {share:.2}% of \
                 one core since the sampler started (budget {:.0}%); {} cut at their bound \
                 (their processes are scanned less and less often)",
                self.reads,
                self.spent.as_secs_f64() * 1e3,
                BUDGET_SHARE * 100.0,
                self.cut,
            ),
            errors: self.failures,
            applicable: true,
        })
    }
}

impl ProcessTracker {
    /// Take up the library thread's answers, then hand it the processes
    /// among `candidates` (the Python processes still without a framework)
    /// whose scan is due, within the budget. The first tick waits for them.
    pub(super) fn scan_libraries(
        &mut self,
        io: &mut Io,
        candidates: &[u32],
        errors: &mut CollectorErrors,
    ) {
        let page = io.page_size;
        self.take_library_replies(page, None, errors);
        if self.library_worker.as_ref().is_some_and(|w| w.in_flight) {
            return;
        }
        let now = Instant::now();
        let listed_at = self.listed_at;
        let mut due: Vec<(Option<Instant>, u32, Duration)> = candidates
            .iter()
            .filter_map(|&pid| {
                let t = self.tracked.get(&pid)?;
                let scan = t.scan?;
                let wanted = t.seen >= listed_at
                    && !t.kernel_thread
                    && !scan.blocked
                    && t.workload.frameworks.is_empty()
                    && scan.due(t.statm.resident.saturating_mul(page), now);
                wanted.then_some((scan.at, pid, scan.cost))
            })
            .collect();
        if due.is_empty() {
            return;
        }
        // Never scanned first (`None` sorts first), then the oldest scans.
        due.sort_unstable();
        due.dedup_by_key(|d| d.1);
        self.library_budget.refill(now);
        let mean = self.library_budget.mean_cost();
        let mut planned = 0.0;
        let mut batch = Vec::new();
        for (at, pid, cost) in due {
            let cost = if at.is_none() { mean } else { cost };
            if !self.library_budget.affords(planned, cost, at.is_none()) {
                // The ones behind wait too, so that the first in line is
                // not starved by cheaper ones.
                break;
            }
            planned += cost.as_secs_f64();
            batch.push(pid);
        }
        if batch.is_empty() {
            return;
        }
        if self.library_worker.is_none() {
            self.library_worker = LibraryWorker::start(io.reader.root().to_path_buf());
        }
        let Some(worker) = self.library_worker.as_mut() else {
            return;
        };
        for pid in &batch {
            if let Some(scan) = self.tracked.get_mut(pid).and_then(|t| t.scan.as_mut()) {
                scan.pending = true;
            }
        }
        if !worker.send(batch) {
            self.library_worker = None;
            return;
        }
        if self.library_budget.reads == 0 {
            // The first scans: wait for them (bounded), so that the first
            // sample is classified.
            self.take_library_replies(page, Some(FIRST_WAIT), errors);
        }
    }

    /// Apply the library thread's answer, if one is in: waiting up to
    /// `wait` for it, or not at all.
    fn take_library_replies(
        &mut self,
        page: u64,
        wait: Option<Duration>,
        errors: &mut CollectorErrors,
    ) {
        let Some(worker) = self.library_worker.as_mut() else {
            return;
        };
        let replies = match worker.take(wait) {
            Ok(Some(replies)) => replies,
            Ok(None) => return,
            Err(_) => {
                self.library_worker = None;
                return;
            }
        };
        let now = Instant::now();
        for reply in replies {
            self.library_budget.spend(&reply);
            if let Some(t) = self.tracked.get_mut(&reply.pid)
                && answers(&reply, t)
            {
                take_scan(t, reply, now, page, errors);
            }
        }
    }
}

/// Whether `reply` is the answer `t` waits for: the same identity (start
/// time), and an entry that was handed out, not one made since (after an
/// exec, whose `maps` is another program's).
fn answers(reply: &LibraryReply, t: &TrackedProcess) -> bool {
    reply.start == Some(t.start) && t.scan.is_some_and(|scan| scan.pending)
}

/// Apply one process's scan to its entry and classify it again.
fn take_scan(
    t: &mut TrackedProcess,
    reply: LibraryReply,
    now: Instant,
    page: u64,
    errors: &mut CollectorErrors,
) {
    let resident = t.statm.resident.saturating_mul(page);
    let Some(scan) = t.scan.as_mut() else {
        return;
    };
    scan.pending = false;
    scan.resident_at = resident;
    scan.at = Some(now);
    scan.cost = reply.took;
    match reply.listing {
        Ok(listing) => {
            scan.cut = if listing.cut {
                scan.cut.saturating_add(1)
            } else {
                0
            };
            if !listing.libraries.is_empty() {
                t.libraries = listing.libraries;
                t.site_packages = listing
                    .site_packages
                    .into_iter()
                    .map(SharedStr::from)
                    .collect();
                t.workload = t.classify();
            }
        }
        Err(ReadFailure::Denied) => {
            scan.blocked = true;
            ReadFailure::Denied.count(errors);
        }
        // Vanished: the next statm read will notice.
        Err(ReadFailure::Vanished) => {}
        Err(f) => f.count(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sampling::Sampler;
    use crate::model::{Framework, WorkloadKind};
    use crate::os::linux::LinuxSampler;

    const MIB: u64 = 1 << 20;

    #[test]
    fn rescan_after_half_and_64_mib_growth_or_30_s() {
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
    fn a_process_whose_scans_were_cut_is_scanned_less_and_less_often() {
        let t0 = Instant::now();
        let scan = |cut| LibraryScan {
            resident_at: 100 * MIB,
            at: Some(t0),
            blocked: false,
            cut,
            pending: false,
            cost: Duration::ZERO,
        };
        let after = |s| t0 + Duration::from_secs(s);
        assert!(LibraryScan::first().due(0, t0), "never scanned: due");
        assert!(scan(0).due(100 * MIB, after(30)));
        assert!(!scan(1).due(100 * MIB, after(59)));
        assert!(scan(1).due(100 * MIB, after(60)));
        assert!(!scan(3).due(100 * MIB, after(239)));
        assert!(scan(3).due(100 * MIB, after(240)));
        assert!(!scan(30).due(100 * MIB, after(3599)));
        assert!(scan(30).due(100 * MIB, after(3600)));
        // Growth hastens an ordinary scan, not one of a huge maps.
        assert!(scan(0).due(300 * MIB, after(1)));
        assert!(!scan(1).due(300 * MIB, after(1)));
    }

    #[test]
    fn the_budget_refills_at_its_share_up_to_the_burst_and_first_scans_overdraw_it() {
        let mut b = ScanBudget::default();
        let t0 = Instant::now();
        b.refill(t0);
        let ms = Duration::from_millis;
        assert!(!b.affords(0.0, ms(1), false), "it starts empty");
        assert!(b.affords(0.0, ms(1), true), "a first scan may overdraw");
        assert!(b.affords(0.9, ms(1), true));
        assert!(!b.affords(1.0, ms(1), true), "by at most the overdraft");
        b.refill(t0 + Duration::from_secs(5));
        assert!((b.allowance - 0.1).abs() < 1e-9, "{}", b.allowance);
        assert!(b.affords(0.05, ms(50), false));
        assert!(!b.affords(0.06, ms(50), false));
        b.refill(t0 + Duration::from_secs(1000));
        assert!((b.allowance - BURST.as_secs_f64()).abs() < 1e-9);
    }

    #[test]
    fn a_refused_scan_is_not_tried_again_and_a_cut_one_counts_its_cuts() {
        let reply = |listing| LibraryReply {
            pid: 1,
            start: Some(0),
            listing,
            took: Duration::from_millis(3),
        };
        let mut errors = CollectorErrors::default();
        let mut t = TrackedProcess {
            scan: Some(LibraryScan::first()),
            ..TrackedProcess::default()
        };
        let cut = Listing {
            libraries: Vec::new(),
            site_packages: Vec::new(),
            cut: true,
        };
        take_scan(
            &mut t,
            reply(Ok(cut.clone())),
            Instant::now(),
            4096,
            &mut errors,
        );
        take_scan(&mut t, reply(Ok(cut)), Instant::now(), 4096, &mut errors);
        let scan = t.scan.unwrap();
        assert_eq!((scan.cut, scan.cost), (2, Duration::from_millis(3)));
        take_scan(
            &mut t,
            reply(Err(ReadFailure::Denied)),
            Instant::now(),
            4096,
            &mut errors,
        );
        assert!(t.scan.unwrap().blocked);
        assert_eq!(errors.permission_denied, 1);
    }

    /// An answer applies to the entry that was handed out: not to another
    /// identity, and not to the entry made when the process exec'd after
    /// it was handed out (the `maps` read may be the old program's).
    #[test]
    fn an_answer_applies_only_to_the_entry_handed_out() {
        let reply = LibraryReply {
            pid: 1,
            start: Some(7),
            listing: Ok(Listing {
                libraries: vec!["libtorch_cpu.so".into()],
                site_packages: Vec::new(),
                cut: false,
            }),
            took: Duration::from_millis(1),
        };
        let handed_out = TrackedProcess {
            start: 7,
            scan: Some(LibraryScan {
                pending: true,
                ..LibraryScan::first()
            }),
            ..TrackedProcess::default()
        };
        assert!(answers(&reply, &handed_out));
        let reused = TrackedProcess {
            start: 8,
            scan: handed_out.scan,
            ..TrackedProcess::default()
        };
        assert!(!answers(&reply, &reused));
        let exec_d = TrackedProcess {
            start: 7,
            scan: Some(LibraryScan::first()),
            ..TrackedProcess::default()
        };
        assert!(!answers(&reply, &exec_d));
        let mut t = handed_out;
        take_scan(
            &mut t,
            reply,
            Instant::now(),
            4096,
            &mut CollectorErrors::default(),
        );
        assert!(!t.scan.unwrap().pending, "taken up");
    }

    /// A `/proc` tree with the system files of the `basic` fixture and one
    /// process named `python3` whose `maps` is `maps`.
    fn python_tree(pid: u32, maps: &[u8]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let basic = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/proc/basic");
        for f in ["meminfo", "vmstat", "stat"] {
            std::fs::copy(format!("{basic}/{f}"), dir.path().join(f)).unwrap();
        }
        let d = dir.path().join(pid.to_string());
        std::fs::create_dir(&d).unwrap();
        std::fs::write(
            d.join("stat"),
            format!("{pid} (python3) S 1 {pid} {pid} 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 777 2990080 402 0\n"),
        )
        .unwrap();
        std::fs::copy(format!("{basic}/6441/status"), d.join("status")).unwrap();
        std::fs::write(d.join("statm"), "900 402 0 5 0 89 0\n").unwrap();
        std::fs::write(d.join("cmdline"), "python3\0train.py\0").unwrap();
        std::fs::write(d.join("maps"), maps).unwrap();
        dir
    }

    #[test]
    fn the_first_sample_is_classified_from_the_libraries() {
        let maps = b"7f00-7f01 r-xp 00000000 08:01 12 /venv/torch/lib/libtorch_cpu.so\n";
        let dir = python_tree(4242, maps);
        let mut sampler = LinuxSampler::new(dir.path());
        let snap = sampler.sample().unwrap();
        let p = snap.process(4242).expect("the python process");
        assert_eq!(p.workload.kind, WorkloadKind::Pytorch);
        assert_eq!(p.workload.frameworks, [Framework::Pytorch]);
        let statuses = crate::model::collector::gather(&sampler.collectors());
        let status = statuses.iter().find(|c| c.name == "libraries");
        assert!(
            status.is_some_and(|c| c.detail.starts_with("1 scans")),
            "{status:?}"
        );
    }

    #[test]
    fn a_process_with_a_huge_maps_is_read_in_part_and_backed_off_from() {
        let path = format!("/srv/{}/f.so", "p".repeat(3800));
        let mut maps = Vec::new();
        for i in 0..1_000u64 {
            maps.extend_from_slice(format!("{i:x}000-{i:x}fff r--p 0 08:01 9 {path}\n").as_bytes());
        }
        let dir = python_tree(4243, &maps);
        let mut sampler = LinuxSampler::new(dir.path());
        sampler.sample().unwrap();
        let scan = sampler.tracker.tracked[&4243].scan.unwrap();
        assert_eq!(scan.cut, 1, "{scan:?}");
        // Not scanned again on the next ticks: it waits a minute.
        for _ in 0..3 {
            sampler.sample().unwrap();
        }
        assert_eq!(sampler.tracker.library_budget.reads, 1);
    }
}
