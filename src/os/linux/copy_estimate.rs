//! Pages copied on access between proportional-share reads.
//!
//! A forked worker that writes to a page it shares with its parent gets a
//! private copy of it: a `DataLoader` worker does so just by reading a
//! Python list, since each object's reference count is written
//! (pytorch/pytorch#13246). Its `RssAnon` does not move (the page was
//! counted before and after), so between two reads of `smaps_rollup`
//! (`pss.rs`, dear, paced by a budget) the job's figure would stand still
//! while the machine runs out.
//!
//! Each copy is one minor fault of the writer (`do_wp_page` in
//! `mm/memory.c`), and `stat`'s field 10 (`minflt`) costs what `statm`
//! costs. But a minor fault is also the first touch of a new page, a
//! page-cache hit of a mapped file, or a page that is freed again soon
//! after: faults bound the copies from above, they do not measure them. The
//! machine tells the rest: a copy takes a new anonymous page, so the
//! machine's `AnonPages` (+ swap in use) grows by it while no process's own
//! figure does. Each tick:
//!
//! 1. the growth of the machine's anonymous memory that the processes' own
//!    figures do not explain is worked out ([`unexplained`]);
//! 2. each process of a sharing family (its share read, or a new forked
//!    child) whose faults since the last tick exceed its own figure's
//!    growth is a candidate for that much copying, at most the pages it
//!    still shares (its own figure less what it is shown holding);
//! 3. the unexplained growth is shared among the candidates in proportion
//!    to their bounds, never more than each bound ([`attribute`]).
//!
//! The estimate is added to the process's share until its next read, which
//! replaces it (`pss.rs`). A full tick, which reads every process, settles
//! the ticks since the one before: copies estimated beyond what the machine
//! grew without explanation over that whole stretch (growth of a process a
//! light tick did not re-read, taken for copies) are taken back. A pool that
//! only reads, or that frees what it allocates, faults without the machine
//! growing and is never estimated to copy.

use std::collections::BTreeMap;

use super::process_reads::Io;
use super::tracker::ProcessTracker;
use crate::os::linux::parse::procfs;

/// At most this many processes' faults are read a tick, the largest first:
/// a process can copy no more than it maps, so the large ones are those
/// whose copies matter.
pub(super) const MAX_FAULT_READS: usize = 256;

/// One process's part in the estimate.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct CopyWatch {
    /// Bytes it is estimated to have turned private since its share was
    /// last read (or since it appeared, for a child not read yet).
    pub(super) since_read: u64,
    /// Of those, the bytes estimated since the last full tick, which that
    /// tick may take back.
    since_full: u64,
    /// Its minor faults when last read (the tick's, or its share read's).
    last_minflt: Option<u64>,
    /// Its own figure at the last tick, bytes.
    last_own: Option<u64>,
}

impl CopyWatch {
    /// Its share was read: the share holds every copy made until then, and
    /// the faults from `minflt` on are what the estimate counts next.
    pub(super) fn read_at(&mut self, minflt: Option<u64>) {
        self.since_read = 0;
        self.since_full = 0;
        if minflt.is_some() {
            self.last_minflt = minflt;
        }
    }
}

/// The machine's side of the estimate, across ticks.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct CopyLedger {
    /// The machine's anonymous memory at the last tick, bytes.
    last_anon: Option<u64>,
    /// Growth of it that no figure explained since the last full tick,
    /// bytes, signed: the growth a full tick finds in processes a light
    /// tick did not re-read comes off it.
    unexplained_since_full: i128,
}

/// The growth of the machine's anonymous memory (`anon_now − anon_before`)
/// that the processes' own figures (`explained`, their changes added up)
/// do not show, bytes, signed.
pub fn unexplained(anon_before: u64, anon_now: u64, explained: i128) -> i128 {
    i128::from(anon_now) - i128::from(anon_before) - explained
}

/// One candidate for copies this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Its minor faults since the last tick, in bytes (faults × page size).
    pub faulted: u64,
    /// Its own figure's change since the last tick, bytes.
    pub grew: i128,
    /// The pages it still shares: its own figure less what it is shown
    /// holding, bytes. It cannot copy more.
    pub room: u64,
}

impl Candidate {
    /// The most it can have copied this tick: the faults its own figure's
    /// growth does not account for, within its room.
    pub fn bound(&self) -> u64 {
        let grew = u64::try_from(self.grew.max(0)).unwrap_or(u64::MAX);
        self.faulted.saturating_sub(grew).min(self.room)
    }
}

/// Share `unexplained` bytes among the candidates in proportion to their
/// bounds, none more than its bound: the bytes each is estimated to have
/// copied this tick.
pub fn attribute(candidates: &[Candidate], unexplained: u64) -> Vec<u64> {
    let bounds: Vec<u64> = candidates.iter().map(Candidate::bound).collect();
    let total: u128 = bounds.iter().map(|&b| u128::from(b)).sum();
    if total == 0 || unexplained == 0 {
        return vec![0; bounds.len()];
    }
    let give = u128::from(unexplained).min(total);
    bounds
        .iter()
        .map(|&b| u64::try_from(u128::from(b) * give / total).unwrap_or(u64::MAX))
        .collect()
}

/// How much of what was estimated since the last full tick stands, given
/// the growth no figure explained over that stretch: the factor (0–1) each
/// estimate since then is kept at.
pub fn settle(estimated: u64, unexplained_since_full: i128) -> f64 {
    if estimated == 0 {
        return 1.0;
    }
    let stands = u64::try_from(unexplained_since_full.max(0)).unwrap_or(u64::MAX);
    (stands as f64 / estimated as f64).min(1.0)
}

impl ProcessTracker {
    /// This tick's estimate of the pages copied on access (see the module
    /// doc); `machine_anon` is the machine's `AnonPages` plus swap in use,
    /// `full` whether every process was read this tick, `page` the page
    /// size.
    pub(super) fn follow_copies(&mut self, io: &mut Io, page: u64, machine_anon: u64, full: bool) {
        let tick = self.tick;
        let listed = self.listed_at;
        // 1. What the processes' own figures explain.
        let mut explained: i128 = 0;
        let mut grew: BTreeMap<u32, i128> = BTreeMap::new();
        for (&pid, t) in self.tracked.iter_mut() {
            if t.seen < listed || t.kernel_thread {
                continue;
            }
            let own = t.own_footprint(tick, page).0;
            let change = match t.copies.last_own {
                Some(before) => i128::from(own) - i128::from(before),
                // A child forked since: the pages it maps are its parent's.
                None if t.forked => 0,
                // A new program: all of it is new.
                None => i128::from(own),
            };
            t.copies.last_own = Some(own);
            explained += change;
            grew.insert(pid, change);
        }
        let this_tick = match self.copy_ledger.last_anon {
            Some(before) => unexplained(before, machine_anon, explained),
            None => 0,
        };
        self.copy_ledger.last_anon = Some(machine_anon);
        self.copy_ledger.unexplained_since_full += this_tick;

        // 2. The candidates, the largest first.
        let mut sharing: Vec<(u64, u32)> = self
            .tracked
            .iter()
            .filter(|(_, t)| t.seen >= listed && !t.kernel_thread)
            .filter(|(_, t)| {
                (t.shares && t.pss.is_some())
                    || (t.forked && t.pss.is_none() && t.fork_baseline.is_some())
            })
            .map(|(&pid, t)| (t.own_footprint(tick, page).0, pid))
            .collect();
        sharing.sort_unstable_by(|a, b| b.cmp(a));
        sharing.truncate(MAX_FAULT_READS);
        let mut pids = Vec::with_capacity(sharing.len());
        let mut candidates = Vec::with_capacity(sharing.len());
        for (own, pid) in sharing {
            let Some(minflt) = read_minflt(io, pid, self.tracked.get(&pid).map(|t| t.start)) else {
                continue;
            };
            let Some(t) = self.tracked.get_mut(&pid) else {
                continue;
            };
            let faults = t
                .copies
                .last_minflt
                .map_or(0, |before| minflt.saturating_sub(before));
            t.copies.last_minflt = Some(minflt);
            let shown = match t.pss {
                Some(read) => read.now(own),
                None => own.saturating_sub(t.fork_baseline.unwrap_or(own)),
            };
            candidates.push(Candidate {
                faulted: faults.saturating_mul(page),
                grew: grew.get(&pid).copied().unwrap_or(0),
                room: own.saturating_sub(shown.saturating_add(t.copies.since_read)),
            });
            pids.push(pid);
        }

        // 3. The unexplained growth, shared among them.
        let give = u64::try_from(this_tick.max(0)).unwrap_or(u64::MAX);
        for (pid, bytes) in pids.iter().zip(attribute(&candidates, give)) {
            if let Some(t) = self.tracked.get_mut(pid) {
                t.copies.since_read = t.copies.since_read.saturating_add(bytes);
                t.copies.since_full = t.copies.since_full.saturating_add(bytes);
            }
        }

        if full {
            // Settle the stretch since the last full tick: no more copies
            // stand than the machine grew without explanation over it.
            let estimated = self
                .tracked
                .values()
                .fold(0u64, |sum, t| sum.saturating_add(t.copies.since_full));
            let keep = settle(estimated, self.copy_ledger.unexplained_since_full);
            for t in self.tracked.values_mut() {
                let c = &mut t.copies;
                let taken_back = c.since_full - (c.since_full as f64 * keep) as u64;
                c.since_read = c.since_read.saturating_sub(taken_back);
                c.since_full = 0;
            }
            self.copy_ledger.unexplained_since_full = 0;
        }
    }

    /// The bytes estimated copied since the last share reads, added up: a
    /// read shows whether they were.
    pub(super) fn copies_unread(&self) -> u64 {
        self.tracked
            .values()
            .fold(0u64, |sum, t| sum.saturating_add(t.copies.since_read))
    }
}

/// `minflt` of `pid` from its `stat`, if it is still the process that
/// started at `start`.
fn read_minflt(io: &mut Io, pid: u32, start: Option<u64>) -> Option<u64> {
    let data = io.reader.read_pid(pid, "stat").ok()?;
    let stat = procfs::parse_stat(data)?;
    (Some(stat.start_ticks) == start).then_some(stat.minflt)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn worker(faulted: u64, grew: i128, room: u64) -> Candidate {
        Candidate {
            faulted,
            grew,
            room,
        }
    }

    #[test]
    fn faults_beyond_the_own_growth_bound_the_copies_within_the_shared_pages() {
        // 100 MiB of faults, 30 MiB of which its RSS shows as new pages.
        assert_eq!(worker(100 * MIB, (30 * MIB).into(), GIB).bound(), 70 * MIB);
        // Shrinking does not make the faults count for more.
        assert_eq!(
            worker(100 * MIB, -i128::from(50 * MIB), GIB).bound(),
            100 * MIB
        );
        // No more than it still shares.
        assert_eq!(worker(100 * MIB, 0, 10 * MIB).bound(), 10 * MIB);
    }

    const GIB: u64 = 1 << 30;

    #[test]
    fn growth_no_figure_explains_goes_to_the_workers_that_faulted_in_proportion() {
        // 8 workers copying 25 MiB each in a tick; the machine grew 200 MiB
        // that no RSS shows.
        let workers = vec![worker(25 * MIB, 0, GIB); 8];
        assert_eq!(attribute(&workers, 200 * MIB), vec![25 * MIB; 8]);
        // Two faulted, one three times more: the machine's growth is split
        // 3:1.
        let two = [worker(30 * MIB, 0, GIB), worker(10 * MIB, 0, GIB)];
        assert_eq!(attribute(&two, 20 * MIB), vec![15 * MIB, 5 * MIB]);
    }

    #[test]
    fn faults_without_the_machine_growing_are_no_copies() {
        // A pool that reads mapped files or frees what it allocates: many
        // faults, the machine's anonymous memory flat.
        let churning = vec![worker(500 * MIB, 0, GIB); 8];
        assert_eq!(attribute(&churning, 0), vec![0; 8]);
    }

    #[test]
    fn no_worker_gets_more_than_its_faults_whatever_the_machine_grew() {
        // A process no light tick re-read grew 1 GiB: the workers that
        // faulted 4 MiB each take no more than that.
        let workers = vec![worker(4 * MIB, 0, GIB); 2];
        assert_eq!(attribute(&workers, GIB), vec![4 * MIB; 2]);
    }

    #[test]
    fn growth_the_figures_explain_is_not_unexplained() {
        // The machine took 300 MiB, the processes' RSS shows 100 MiB.
        assert_eq!(
            unexplained(GIB, GIB + 300 * MIB, (100 * MIB).into()),
            i128::from(200 * MIB)
        );
        // A fork: the child's RSS counts pages the machine already gave.
        assert!(unexplained(GIB, GIB, GIB.into()) < 0);
    }

    #[test]
    fn a_full_tick_keeps_no_more_copies_than_the_machine_grew_unexplained() {
        // Light ticks took 400 MiB for copies; the full tick found 300 MiB
        // of it in a process they had not re-read.
        assert!((settle(400 * MIB, (100 * MIB).into()) - 0.25).abs() < 1e-9);
        assert_eq!(settle(400 * MIB, (500 * MIB).into()), 1.0);
        assert_eq!(settle(400 * MIB, -i128::from(MIB)), 0.0);
        assert_eq!(settle(0, 0), 1.0);
    }

    /// A kernel holding 1 GiB and four forked workers that share it, their
    /// shares read once (each 1/5 of it), then never again (the reads
    /// fail), so what the light ticks show is the estimate alone. Each
    /// tick every worker faults `faults_kib` and the machine's anonymous
    /// memory grows `machine_kib`. The job's total after each tick.
    fn family_under_copying(faults_kib: u64, machine_kib: u64) -> Vec<u64> {
        use crate::model::sampling::Sampler;
        use crate::os::linux::fake_proc::FakeProc;
        let tree = FakeProc::new();
        let gib_kib = 1024 * 1024;
        tree.process(100, "python3", gib_kib / 4, gib_kib);
        for pid in 101..=104 {
            tree.child_of(pid, 100, "python3", gib_kib / 4, gib_kib);
        }
        for pid in 100..=104 {
            tree.shares(pid, Some(gib_kib / 5));
        }
        let mut sampler = tree.sampler();
        let total = |snap: &crate::model::Snapshot| -> u64 {
            (100..=104)
                .map(|pid| snap.process(pid).map_or(0, |p| p.footprint))
                .sum()
        };
        let first = sampler.sample().unwrap();
        assert!(total(&first).abs_diff(GIB) < MIB, "{}", total(&first));
        for pid in 100..=104 {
            tree.shares(pid, None);
        }
        let mut anon = 306_140;
        let mut faults = 128;
        let mut totals = Vec::new();
        for _ in 0..8 {
            faults += faults_kib / 4;
            anon += machine_kib;
            for pid in 101..=104 {
                tree.faults(pid, faults);
            }
            tree.anon_pages(anon);
            totals.push(total(&sampler.sample_light(&[]).unwrap()));
        }
        totals
    }

    #[test]
    fn copies_on_access_show_in_the_job_at_the_tick_they_are_made() {
        // Each tick every worker copies 25 MiB: the machine gives out
        // 100 MiB that no RSS shows.
        let totals = family_under_copying(25 * 1024, 100 * 1024);
        for (i, &t) in totals.iter().enumerate() {
            let expected = GIB + (i as u64 + 1) * 100 * MIB;
            assert!(
                t.abs_diff(expected) < 2 * MIB,
                "tick {i}: {} MiB, expected {} MiB ({totals:?})",
                t / MIB,
                expected / MIB
            );
        }
    }

    #[test]
    fn a_pool_that_faults_while_the_machine_holds_still_is_not_growing() {
        // The same faults (mapped files read, batches freed), the machine's
        // anonymous memory flat.
        let totals = family_under_copying(25 * 1024, 0);
        assert!(totals.iter().all(|&t| t.abs_diff(GIB) < MIB), "{totals:?}");
    }

    #[test]
    fn no_worker_is_shown_holding_more_than_it_maps() {
        // Copying far more than the pages they share: each worker ends at
        // its whole 1 GiB, the kernel keeps its share.
        let totals = family_under_copying(512 * 1024, 2048 * 1024);
        let last = *totals.last().unwrap();
        assert!(last <= 4 * GIB + GIB / 5 + MIB, "{} MiB", last / MIB);
        assert!(last >= 4 * GIB, "{} MiB", last / MIB);
    }

    #[test]
    fn a_read_replaces_the_estimate() {
        let mut w = CopyWatch {
            since_read: 300 * MIB,
            since_full: 100 * MIB,
            last_minflt: Some(10),
            last_own: Some(GIB),
        };
        w.read_at(Some(90_000));
        assert_eq!(w.since_read, 0);
        assert_eq!(w.since_full, 0);
        assert_eq!(w.last_minflt, Some(90_000));
        // A read whose fault count failed keeps the last one.
        w.read_at(None);
        assert_eq!(w.last_minflt, Some(90_000));
    }
}
