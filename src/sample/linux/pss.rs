//! Proportional shares for processes that share memory, read against
//! their cost.
//!
//! A forked child (`PF_FORKNOEXEC` in `stat`: a `multiprocessing` fork
//! worker, a `DataLoader` worker) maps its parent's anonymous pages
//! copy-on-write, and `RssAnon` counts each such page whole in the parent
//! and in every child: a 2 GiB kernel with four idle workers shows five
//! processes of 2 GiB on a machine that holds 2.6 GiB. `smaps_rollup`'s
//! `Pss_Anon + Pss_Shmem + SwapPss` counts a page shared by n processes
//! 1/n in each, so the members of a job add up to what the job holds.
//!
//! But `smaps_rollup` walks the page tables: about 60 ms of CPU for a
//! 4 GiB process against 32 µs for `status`. So:
//!
//! - only **families** are read: a parent and its children forked without
//!   exec, where one of them is an ML or Python process (the processes the
//!   sampler reads in full anyway) or their resident sizes add up to
//!   [`RELEVANT_KIB`]; a process that shares nothing keeps its
//!   `RssAnon`-based figure, which is then its own memory exactly;
//! - a family is read **as a whole**, so that its shares add up (a child
//!   read alone would leave its parent's older, larger share in place);
//! - reads are paid from a **budget** of [`BUDGET_SHARE`] of one core
//!   (a token bucket refilled with wall time, at most [`BURST`] saved up):
//!   the cost of a family is predicted from its members' resident size and
//!   the cost per KiB measured on the reads so far, families with a member
//!   never read go first, then the one read longest ago;
//! - between reads each member's figure follows its own cheap reads: the
//!   share read plus the change in its `RssAnon + RssShmem + VmSwap` since
//!   (a new private page is counted whole in both). Pages turned from
//!   shared into private by a write (copy-on-write, and Python's reference
//!   counts write to every object a worker reads) move no RSS: the next
//!   read of the family shows them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::model::CollectorStatus;
use crate::sys::procfs;

use super::process_reads::Io;
use super::tracker::{Tracked, Tracker, is_interesting};

/// Share of one core the reads may take, on average.
pub const BUDGET_SHARE: f64 = 0.01;
/// Most read time saved up while nothing was due: lets a family of a few
/// GiB be read at once when it appears.
pub const BURST: Duration = Duration::from_millis(250);
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
    started: Option<Instant>,
    ns_per_kib: f64,
    reads: u64,
    spent: Duration,
    failures: u64,
}

impl Default for PssBudget {
    fn default() -> Self {
        Self {
            allowance: BURST.as_secs_f64(),
            last_refill: None,
            started: None,
            ns_per_kib: FIRST_NS_PER_KIB,
            reads: 0,
            spent: Duration::ZERO,
            failures: 0,
        }
    }
}

impl PssBudget {
    fn refill(&mut self, now: Instant) {
        self.started.get_or_insert(now);
        if let Some(last) = self.last_refill {
            let earned = now.saturating_duration_since(last).as_secs_f64() * BUDGET_SHARE;
            self.allowance = (self.allowance + earned).min(BURST.as_secs_f64());
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

    /// The reads as a collector, for `headroom doctor`, `/metrics` and the
    /// API: how many, what they cost, against what budget.
    pub(super) fn status(&self) -> Option<CollectorStatus> {
        if self.reads == 0 && self.failures == 0 {
            return None;
        }
        let running = self
            .started
            .zip(self.last_refill)
            .map(|(a, b)| b.saturating_duration_since(a).as_secs_f64())
            .unwrap_or(0.0);
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
                 {share:.2}% of one core (budget {:.0}%), {:.1} ms per GiB resident",
                self.reads,
                self.spent.as_secs_f64() * 1e3,
                BUDGET_SHARE * 100.0,
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
    /// Resident KiB of all members: the predicted cost's measure.
    kib: u64,
    unread: bool,
    /// The oldest read among its members.
    oldest: u64,
}

impl Tracker {
    /// After a full tick's reads: find the families that share memory,
    /// forget the shares of processes that no longer share, and read the
    /// families that are due, within the budget. `page` is the page size.
    pub(super) fn read_shares(&mut self, io: &mut Io, page: u64) {
        let tick = self.tick;
        let listed = self.listed_at;
        let alive = |t: &Tracked| t.seen >= listed && !t.kernel_thread;
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
            let mut unread = false;
            let mut oldest = u64::MAX;
            for pid in &members {
                if let Some(t) = self.tracked.get(pid) {
                    kib = kib.saturating_add(t.statm.resident.saturating_mul(page) / 1024);
                    match t.pss {
                        Some(r) => oldest = oldest.min(r.tick),
                        None => unread = true,
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
                kib,
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
        if families.is_empty() {
            return;
        }
        families.sort_by_key(|f| (!f.unread, f.oldest));
        self.pss_budget.refill(Instant::now());
        let mut read_now = BTreeSet::new();
        for family in families {
            if !family.unread && tick.saturating_sub(family.oldest) <= MIN_TICKS_BETWEEN {
                continue;
            }
            let predicted = self.pss_budget.predict(family.kib);
            let full = self.pss_budget.allowance >= BURST.as_secs_f64() - 1e-9;
            if predicted > self.pss_budget.allowance && !full {
                // Wait for the budget; the families behind it wait too, so
                // that the one first in line is not starved by cheaper ones.
                break;
            }
            for pid in family.members {
                if read_now.insert(pid) {
                    self.read_share(io, pid, page);
                }
            }
        }
    }

    /// Read one process's `smaps_rollup`, timed.
    fn read_share(&mut self, io: &mut Io, pid: u32, page: u64) {
        let tick = self.tick;
        let Some(t) = self.tracked.get_mut(&pid) else {
            return;
        };
        let kib = t.statm.resident.saturating_mul(page) / 1024;
        let own = t.own_footprint(tick, page).0;
        let started = Instant::now();
        let read = io
            .reader
            .read_pid(pid, "smaps_rollup")
            .ok()
            .and_then(procfs::parse_smaps_rollup);
        let took = started.elapsed();
        self.pss_budget.spend(took, kib);
        match read {
            Some(pss) => {
                t.pss = Some(PssRead {
                    footprint: pss.footprint(),
                    own_at_read: own,
                    tick,
                });
            }
            None => {
                // Gone, refused, or a kernel without Pss_Anon: its own
                // figure stands, and the read is counted as failed.
                self.pss_budget.failures += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_follows_the_processs_own_figure_between_reads() {
        let r = PssRead {
            footprint: 100,
            own_at_read: 400,
            tick: 1,
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
        b.refill(t0);
        b.spend(Duration::from_millis(250), 4 << 20);
        assert!(b.allowance.abs() < 1e-9);
        b.refill(t0 + Duration::from_secs(10));
        assert!((b.allowance - 0.1).abs() < 1e-6, "{}", b.allowance);
        b.refill(t0 + Duration::from_secs(1000));
        assert!((b.allowance - BURST.as_secs_f64()).abs() < 1e-9);
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
