//! Proportional shares for processes that share memory, read against
//! their cost.
//!
//! A forked child (`PF_FORKNOEXEC`: a `multiprocessing` or `DataLoader`
//! worker) maps its parent's anonymous pages copy-on-write, and `RssAnon`
//! counts each whole in the parent and every child. `smaps_rollup`'s
//! `Pss_Anon + Pss_Shmem + SwapPss` counts a page shared by n processes 1/n
//! in each, so a job's members add up to what it holds. But it walks the
//! page tables, thousands of times dearer than `status` (`BENCHMARKS.md`,
//! "Jobs and shared memory"). So:
//!
//! - only **families** are read (a parent and its children forked without
//!   exec, with an ML or Python member or [`RELEVANT_KIB`] resident), each
//!   **as a whole** so that its shares add up;
//! - reads are paid from a **budget** of [`BUDGET_SHARE`] of one core (a
//!   token bucket of at most [`BURST`], a never-read family may overdraw by
//!   [`OVERDRAFT`]; [`URGENT_SHARE`] for 10 s while the machine gives out
//!   memory faster than the figures grow). A family's cost is predicted from
//!   its members' last reads, or from their size and the cost per KiB seen
//!   so far; never-read families go first, then the stalest;
//! - a thread of its own reads them ([`PssWorker`]), so no read holds up a
//!   sample; only the first reads are waited for (at most [`FIRST_WAIT`]);
//! - a child forked since the last read counts only what it added since
//!   first seen (else a job would seem to double, and a job limit fire, at
//!   the fork);
//! - between reads a member's figure is its share plus the change in its
//!   `RssAnon + RssShmem + VmSwap`, plus the pages it is found to have
//!   turned private by a write since (`copy_estimate.rs`: its minor faults,
//!   as far as the machine's anonymous memory grew without any process's
//!   figure showing it), never more than its own figure; the next read
//!   replaces the estimate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, sync_channel};
use std::time::{Duration, Instant};

use crate::model::CollectorStatus;
use crate::os::linux::parse::procfs;

use super::proc_reader::ProcReader;
use super::process_reads::Io;
use super::tracker::{ProcessTracker, TrackedProcess, is_interesting};

/// Share of one core the reads may take, on average.
pub const BUDGET_SHARE: f64 = 0.01;
/// Share they may take while the machine's memory is being taken faster
/// than the processes' figures grow by [`UNEXPLAINED_RATE`]: growth that
/// only a read can show (copy-on-write), when it matters most.
pub const URGENT_SHARE: f64 = 0.10;
/// Bytes a second of unexplained growth that make the reads urgent.
const UNEXPLAINED_RATE: f64 = 32.0 * 1024.0 * 1024.0;
/// How long the reads stay urgent after unexplained growth was seen.
const URGENT_FOR: Duration = Duration::from_secs(10);
/// Most read time saved up while nothing was due: lets a family of a few
/// GiB be read at once when it appears.
pub const BURST: Duration = Duration::from_millis(250);
/// How far a family never read may take the bucket below empty: its first
/// read is needed to count it once, but families that keep appearing (a
/// pool forked anew every epoch) are paid for like the rest. The bucket
/// starts empty, so a daemon's first reads are paid back before the next.
const OVERDRAFT: Duration = Duration::from_secs(1);
/// Cost per KiB of resident memory assumed before any read was measured:
/// 60 ms for 4 GiB.
const FIRST_NS_PER_KIB: f64 = 60e6 / (4.0 * 1024.0 * 1024.0);
/// A family of other programs is read once its members' resident sizes
/// add up to this much (KiB): below it, double counting misleads no one.
const RELEVANT_KIB: u64 = 64 * 1024;
/// A family read this many ticks ago or less is not read again, whatever
/// the budget, unless a member was never read.
const MIN_TICKS_BETWEEN: u64 = 2;

/// One proportional-share read of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PssRead {
    /// Pss_Anon + Pss_Shmem + SwapPss, bytes.
    pub(super) footprint: u64,
    /// Its `RssAnon`-based footprint when read, bytes: what later changes
    /// of it are measured from.
    pub(super) own_at_read: u64,
    pub(super) tick: u64,
    /// What the read cost: the next read of this process is predicted to
    /// cost as much, whatever other processes' reads cost (many mappings
    /// make a read dear for little resident memory).
    pub(super) took: Duration,
}

impl PssRead {
    /// The share now: the share read, moved by the change of the process's
    /// own figure since.
    pub(super) fn now(&self, own: u64) -> u64 {
        let moved = i128::from(own) - i128::from(self.own_at_read);
        u64::try_from((i128::from(self.footprint) + moved).max(0)).unwrap_or(u64::MAX)
    }
}

/// The read budget and what was spent.
#[derive(Debug)]
pub(super) struct PssBudget {
    /// Seconds of reading that may be spent now.
    allowance: f64,
    last_refill: Option<Instant>,
    /// When the sampler started: the share is of its whole life.
    started: Instant,
    ns_per_kib: f64,
    reads: u64,
    spent: Duration,
    failures: u64,
    /// The machine's memory taken and the processes' figures added up, at
    /// the last comparison.
    machine: Option<(Instant, u64, u64)>,
    /// The reads are urgent until then.
    urgent_until: Option<Instant>,
}

impl Default for PssBudget {
    fn default() -> Self {
        Self {
            allowance: 0.0,
            last_refill: None,
            started: Instant::now(),
            ns_per_kib: FIRST_NS_PER_KIB,
            reads: 0,
            spent: Duration::ZERO,
            failures: 0,
            machine: None,
            urgent_until: None,
        }
    }
}

impl PssBudget {
    /// Compare the memory the machine has given out (`taken`: total −
    /// available + swap used) with the processes' figures added up
    /// (`counted`): when the first grows faster than the second by
    /// [`UNEXPLAINED_RATE`], the reads become urgent for [`URGENT_FOR`].
    pub(super) fn note_machine(&mut self, now: Instant, taken: u64, counted: u64) {
        if let Some((at, taken0, counted0)) = self.machine {
            let secs = now.saturating_duration_since(at).as_secs_f64();
            if secs < 0.5 {
                return;
            }
            let unexplained = (taken as f64 - taken0 as f64) - (counted as f64 - counted0 as f64);
            if unexplained / secs >= UNEXPLAINED_RATE {
                self.urgent_until = Some(now + URGENT_FOR);
            }
        }
        self.machine = Some((now, taken, counted));
    }

    /// Whether the reads are urgent now.
    fn urgent(&self, now: Instant) -> bool {
        self.urgent_until.is_some_and(|until| now < until)
    }

    /// The share of one core the reads may take now.
    fn share(&self, now: Instant) -> f64 {
        match self.urgent_until {
            Some(until) if now < until => URGENT_SHARE,
            _ => BUDGET_SHARE,
        }
    }

    /// Add what the time since the last refill earned, up to `cap`
    /// seconds saved (at least [`BURST`]: as much as the dearest family
    /// due costs, so that it is read once the bucket holds its cost).
    fn refill(&mut self, now: Instant, cap: f64) {
        if let Some(last) = self.last_refill {
            let earned = now.saturating_duration_since(last).as_secs_f64() * self.share(now);
            let cap = cap.max(BURST.as_secs_f64());
            self.allowance = (self.allowance + earned).min(cap);
        }
        self.last_refill = Some(now);
    }

    /// What reading `kib` of resident memory is expected to cost, seconds.
    fn predict(&self, kib: u64) -> f64 {
        kib as f64 * self.ns_per_kib / 1e9
    }

    fn spend(&mut self, took: Duration, kib: u64) {
        self.allowance -= took.as_secs_f64();
        self.spent += took;
        self.reads += 1;
        if kib >= 1024 {
            // A moving average: the cost per KiB depends on the kernel and
            // the machine, and on how the memory is mapped.
            let measured = took.as_nanos() as f64 / kib as f64;
            self.ns_per_kib = 0.8 * self.ns_per_kib + 0.2 * measured;
        }
    }
}

impl crate::model::Collector for PssBudget {
    fn name(&self) -> &'static str {
        "pss"
    }

    /// The reads as a collector, for `headroom doctor`, `/metrics` and the
    /// API: how many, what they cost, against what budget.
    fn status(&self) -> Option<CollectorStatus> {
        if self.reads == 0 && self.failures == 0 {
            return None;
        }
        let running = self.started.elapsed().as_secs_f64();
        let share = if running > 0.0 {
            self.spent.as_secs_f64() / running * 100.0
        } else {
            0.0
        };
        Some(CollectorStatus {
            name: "pss".to_string(),
            up: true,
            detail: format!(
                "{} proportional-share reads of processes that share memory, {:.1} ms in all, \
                 {share:.2}% of one core since the sampler started (budget {:.0}%, {:.0}% while \
                 memory grows that only a read shows), {:.1} ms per GiB resident",
                self.reads,
                self.spent.as_secs_f64() * 1e3,
                BUDGET_SHARE * 100.0,
                URGENT_SHARE * 100.0,
                self.ns_per_kib * 1024.0 * 1024.0 / 1e6
            ),
            errors: self.failures,
            applicable: true,
        })
    }
}

/// A parent and the children it forked that have not exec'd.
#[derive(Debug)]
struct Family {
    members: Vec<u32>,
    /// Its predicted cost, seconds: each member's last read, or for a
    /// member never read the learned cost per KiB of its resident memory.
    cost: f64,
    unread: bool,
    /// The oldest read among its members.
    oldest: u64,
}

/// The thread that reads `smaps_rollup`, so that a read of a large family
/// (hundreds of milliseconds for tens of GiB) never holds up a sample: the
/// sampler hands it the pids of the families due and takes its answers up
/// on a later tick.
#[derive(Debug)]
pub(super) struct PssWorker {
    requests: SyncSender<Vec<u32>>,
    replies: Receiver<Vec<Reply>>,
    /// A request is being read: no other is sent until it is answered.
    in_flight: bool,
}

/// One process as the worker read it.
#[derive(Debug)]
struct Reply {
    pid: u32,
    /// Its start time from `stat`, read just before: the tracker applies
    /// the share only to the same identity.
    start: Option<u64>,
    pss: Option<procfs::Pss>,
    /// Its RssAnon + RssShmem + VmSwap from `status`, read just after.
    own: Option<u64>,
    /// Its minor faults from `stat`, read just after: the copies counted
    /// from then on are those the share does not hold.
    minflt: Option<u64>,
    took: Duration,
}

impl PssWorker {
    /// Start the thread over the `/proc` tree at `root`; `None` (and the
    /// reads are not made) if the thread cannot be started.
    fn start(root: PathBuf) -> Option<Self> {
        let (requests, incoming) = sync_channel::<Vec<u32>>(1);
        let (answer, replies) = sync_channel::<Vec<Reply>>(1);
        std::thread::Builder::new()
            .name("headroom-pss".to_string())
            .spawn(move || {
                crate::os::this_process::run_in_background();
                let mut reader = ProcReader::new(root);
                for pids in incoming {
                    let read: Vec<Reply> = pids
                        .into_iter()
                        .map(|pid| read_one(&mut reader, pid))
                        .collect();
                    if answer.send(read).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(Self {
            requests,
            replies,
            in_flight: false,
        })
    }
}

/// One process's identity, proportional share and own figure.
fn read_one(reader: &mut ProcReader, pid: u32) -> Reply {
    let start = reader
        .read_pid(pid, "stat")
        .ok()
        .and_then(procfs::parse_stat)
        .map(|st| st.start_ticks);
    let began = Instant::now();
    let pss = reader
        .read_pid(pid, "smaps_rollup")
        .ok()
        .and_then(procfs::parse_smaps_rollup);
    let took = began.elapsed();
    let own = reader
        .read_pid(pid, "status")
        .ok()
        .and_then(procfs::parse_status)
        .map(|st| st.footprint());
    let minflt = reader
        .read_pid(pid, "stat")
        .ok()
        .and_then(|data| procfs::parse_stat(data).map(|st| (st.start_ticks, st.minflt)))
        .filter(|(again, _)| Some(*again) == start)
        .map(|(_, minflt)| minflt);
    Reply {
        pid,
        start,
        pss,
        own,
        minflt,
        took,
    }
}

/// How long a tick waits for the reads it asked for while they are urgent.
const URGENT_WAIT: Duration = Duration::from_millis(100);

/// How long the first full tick waits for its family reads, so that a
/// one-shot sample (`headroom snapshot`) and a daemon's first sample
/// count shared memory once from the start.
const FIRST_WAIT: Duration = Duration::from_secs(2);

impl ProcessTracker {
    /// After a light tick: take up the worker's answers and, while the
    /// reads are urgent, plan the next ones as a full tick does.
    pub(super) fn light_shares(&mut self, io: &mut Io, page: u64) {
        if self.pss_budget.urgent(Instant::now()) {
            self.read_shares(io, page);
        } else {
            self.take_replies(page, None);
        }
    }

    /// After a full tick's reads: take up the worker's answers, find the
    /// families that share memory, forget the shares of processes that no
    /// longer share, and hand the families that are due, within the
    /// budget, to the worker. `page` is the page size.
    pub(super) fn read_shares(&mut self, io: &mut Io, page: u64) {
        self.take_replies(page, None);
        let tick = self.tick;
        let listed = self.listed_at;
        let alive = |t: &TrackedProcess| t.seen >= listed && !t.kernel_thread;
        let mut by_parent: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (&pid, t) in &self.tracked {
            if alive(t) && t.forked && t.ppid != pid && self.tracked.get(&t.ppid).is_some_and(alive)
            {
                by_parent.entry(t.ppid).or_default().push(pid);
            }
        }
        let mut families = Vec::new();
        let mut sharing = BTreeSet::new();
        for (parent, kids) in by_parent {
            let members: Vec<u32> = std::iter::once(parent).chain(kids).collect();
            let mut kib = 0u64;
            let mut cost = 0.0;
            let mut unread = false;
            let mut oldest = u64::MAX;
            for pid in &members {
                if let Some(t) = self.tracked.get(pid) {
                    let own_kib = t.statm.resident.saturating_mul(page) / 1024;
                    kib = kib.saturating_add(own_kib);
                    match t.pss {
                        Some(r) => {
                            oldest = oldest.min(r.tick);
                            cost += r.took.as_secs_f64();
                        }
                        None => {
                            unread = true;
                            cost += self.pss_budget.predict(own_kib);
                        }
                    }
                }
            }
            let relevant = kib >= RELEVANT_KIB
                || members
                    .iter()
                    .filter_map(|pid| self.tracked.get(pid))
                    .any(|t| is_interesting(&t.workload));
            if !relevant {
                continue;
            }
            sharing.extend(members.iter().copied());
            families.push(Family {
                members,
                cost,
                unread,
                oldest,
            });
        }
        for (pid, t) in self.tracked.iter_mut() {
            t.shares = sharing.contains(pid);
            if !t.shares {
                t.pss = None;
            }
        }
        if families.is_empty() || self.pss_worker.as_ref().is_some_and(|w| w.in_flight) {
            return;
        }
        families.sort_by_key(|f| (!f.unread, f.oldest));
        let now = Instant::now();
        let dearest = families.iter().map(|f| f.cost).fold(0.0, f64::max);
        self.pss_budget.refill(now, dearest);
        // Urgent, a family is read again as soon as the budget allows.
        let spacing = if self.pss_budget.urgent(now) {
            0
        } else {
            MIN_TICKS_BETWEEN
        };
        let mut due = BTreeSet::new();
        let mut allowance = self.pss_budget.allowance;
        for family in families {
            if !family.unread && tick.saturating_sub(family.oldest) <= spacing {
                continue;
            }
            let predicted = family.cost;
            let first_read = family.unread && allowance > -OVERDRAFT.as_secs_f64();
            if predicted > allowance && !first_read {
                // Wait for the budget; the families behind it wait too, so
                // that the one first in line is not starved by cheaper ones.
                // (The bucket holds up to the dearest family's cost.) A
                // family never read is read at once, its shares needed to
                // count it once, while the bucket owes less than the
                // overdraft.
                break;
            }
            allowance -= predicted;
            due.extend(family.members);
        }
        if due.is_empty() {
            return;
        }
        if self.pss_worker.is_none() {
            self.pss_worker = PssWorker::start(io.reader.root().to_path_buf());
        }
        let Some(worker) = self.pss_worker.as_mut() else {
            return;
        };
        if worker.requests.send(due.into_iter().collect()).is_err() {
            self.pss_worker = None;
            return;
        }
        worker.in_flight = true;
        if self.pss_budget.reads == 0 {
            // The first reads: wait for them (bounded), so that the first
            // sample already counts shared memory once.
            self.take_replies(page, Some(FIRST_WAIT));
        } else if self.pss_budget.urgent(now) {
            // Growth only a read shows is under way: a read that is quick
            // enough is waited for, so that this sample already has it.
            self.take_replies(page, Some(URGENT_WAIT));
        }
    }

    /// Apply the worker's answer, if one is in: waiting up to `wait` for
    /// it, or not at all.
    fn take_replies(&mut self, page: u64, wait: Option<Duration>) {
        let Some(worker) = self.pss_worker.as_mut() else {
            return;
        };
        if !worker.in_flight {
            return;
        }
        let got = match wait {
            Some(d) => worker.replies.recv_timeout(d).map_err(|e| match e {
                RecvTimeoutError::Timeout => TryRecvError::Empty,
                RecvTimeoutError::Disconnected => TryRecvError::Disconnected,
            }),
            None => worker.replies.try_recv(),
        };
        let replies = match got {
            Ok(replies) => replies,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => {
                self.pss_worker = None;
                return;
            }
        };
        worker.in_flight = false;
        let tick = self.tick;
        for r in replies {
            let Some(t) = self.tracked.get_mut(&r.pid) else {
                continue;
            };
            let kib = t.statm.resident.saturating_mul(page) / 1024;
            self.pss_budget.spend(r.took, kib);
            match (r.pss, r.own, r.start) {
                (Some(pss), Some(own), Some(start)) if start == t.start => {
                    t.pss = Some(PssRead {
                        footprint: pss.footprint(),
                        own_at_read: own,
                        tick,
                        took: r.took,
                    });
                    // The share holds every copy made until the read.
                    t.copies.read_at(r.minflt);
                }
                // Gone, reused, refused, or a kernel without Pss_Anon: its
                // own figure stands, and the read is counted as failed.
                _ => self.pss_budget.failures += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Collector;

    #[test]
    fn a_share_follows_the_processs_own_figure_between_reads() {
        let r = PssRead {
            footprint: 100,
            own_at_read: 400,
            tick: 1,
            took: Duration::ZERO,
        };
        assert_eq!(r.now(400), 100);
        assert_eq!(r.now(450), 150, "new private pages count whole");
        assert_eq!(r.now(350), 50);
        assert_eq!(r.now(0), 0, "never below nothing");
    }

    #[test]
    fn the_budget_refills_at_its_share_of_wall_time_up_to_the_burst() {
        let mut b = PssBudget::default();
        let t0 = Instant::now();
        b.refill(t0, 0.0);
        assert!(b.allowance.abs() < 1e-9, "it starts empty");
        b.spend(Duration::from_millis(250), 4 << 20);
        assert!((b.allowance + 0.25).abs() < 1e-9);
        b.refill(t0 + Duration::from_secs(25), 0.0);
        assert!(b.allowance.abs() < 1e-6, "paid back: {}", b.allowance);
        b.refill(t0 + Duration::from_secs(35), 0.0);
        assert!((b.allowance - 0.1).abs() < 1e-6, "{}", b.allowance);
        b.refill(t0 + Duration::from_secs(1000), 0.0);
        assert!((b.allowance - BURST.as_secs_f64()).abs() < 1e-9);
    }

    #[test]
    fn growth_the_processes_do_not_show_makes_the_reads_urgent_for_a_while() {
        const MIB: u64 = 1 << 20;
        let mut b = PssBudget::default();
        let t0 = Instant::now();
        b.note_machine(t0, 1000 * MIB, 900 * MIB);
        // The processes grew as much as the machine: nothing unexplained.
        b.note_machine(t0 + Duration::from_secs(1), 1100 * MIB, 1000 * MIB);
        assert_eq!(b.share(t0 + Duration::from_secs(1)), BUDGET_SHARE);
        // 200 MiB more taken, the figures still: copy-on-write.
        b.note_machine(t0 + Duration::from_secs(2), 1300 * MIB, 1000 * MIB);
        assert_eq!(b.share(t0 + Duration::from_secs(3)), URGENT_SHARE);
        assert_eq!(b.share(t0 + Duration::from_secs(13)), BUDGET_SHARE);
    }

    #[test]
    fn the_cost_per_kib_is_learned_from_the_reads() {
        let mut b = PssBudget::default();
        for _ in 0..40 {
            b.spend(Duration::from_millis(10), 4 << 20);
        }
        let per_gib_ms = b.ns_per_kib * 1024.0 * 1024.0 / 1e6;
        assert!((per_gib_ms - 2.5).abs() < 0.1, "{per_gib_ms}");
        let status = b.status().unwrap();
        assert!(
            status.detail.starts_with("40 proportional-share reads"),
            "{}",
            status.detail
        );
    }
}
