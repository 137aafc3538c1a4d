//! The light tick of the Linux sampler (see the module doc of [`super`]):
//! list the processes only when a pid was handed out since the last
//! listing, carry the known ones, read the new ones in full, and re-read
//! `statm` of the largest, the interesting and the watched processes and
//! exact detail of the interesting and watched. A process whose `statm`
//! shows another executable's code is read again and classified anew, as
//! on a full tick.

use crate::model::CollectorErrors;

/// A light tick re-reads every interesting or watched process of at least
/// this resident size, whoever runs it and however many there are (their
/// number is bounded by the machine's memory).
pub const LIGHT_ALWAYS_BYTES: u64 = 64 << 20;
/// Of each user's smaller interesting or watched processes whose `statm`
/// did not move, a light tick re-reads at most this many, in turn.
pub const LIGHT_PER_USER: usize = 64;

use super::process_reads::Io;
use super::tracker::{ProcessTracker, Scratch};
use crate::os::read_failure::ReadFailure;

impl ProcessTracker {
    /// A light tick: list the processes, carry the known ones and read the
    /// new ones in full, re-read `statm` of the largest, the interesting and
    /// the `watched` ones and exact detail of the interesting and watched,
    /// and forget what is no longer listed.
    pub(super) fn sample_light(
        &mut self,
        io: &mut Io,
        watched: &[u32],
        errors: &mut CollectorErrors,
    ) {
        let tick = self.tick;
        let mut s = std::mem::take(&mut self.scratch);
        let last_pid = io.read_last_pid();
        // No pid handed out since the last listing: no process was created.
        let unchanged = last_pid.is_some() && last_pid == self.last_pid;
        let listed = !unchanged && io.reader.list_pids(&mut s.listing).is_ok();
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
                    None => self.observe(io, pid, &mut s, errors),
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
        self.choose_light(&mut s, watched, io.page_size);
        for &pid in &s.light {
            if let Some(t) = self.tracked.get_mut(&pid) {
                t.light_turn = tick;
            }
        }
        let exact = s.light.len();
        s.light.extend(s.ranking.iter().map(|r| r.1));
        let (exact, largest) = s.light.split_at_mut(exact);
        exact.sort_unstable();
        largest.sort_unstable();
        for &pid in largest.iter() {
            if exact.binary_search(&pid).is_err() {
                self.reread_statm(io, pid, errors);
            }
        }
        let mut previous = None;
        for &pid in exact.iter() {
            if previous != Some(pid) {
                self.reread_statm(io, pid, errors);
                self.refresh_exact(io, pid, errors);
            }
            previous = Some(pid);
        }

        // Library scans read since are taken up, and new ones handed out.
        self.scan_libraries(io, &s.rescan, errors);

        // Shares read since are taken up; while growth that only a read can
        // show is under way, families are read on light ticks too.
        let page = io.page_size;
        self.light_shares(io, page);
        self.end_tick(io, s, listed);
    }

    /// The interesting and `watched` processes this light tick re-reads in
    /// full, into `s.light`: every one that holds [`LIGHT_ALWAYS_BYTES`] or
    /// more, or whose `statm` moved at its last read; of the rest (small and
    /// still), at most [`LIGHT_PER_USER`] of each user's a tick, those whose
    /// turn was longest ago first (a full tick chooses the same way).
    /// A process only has to look like ML work (be named `python3`) to be
    /// interesting, and any user can start thousands: they must not make
    /// every tick, and with it the reaction to a crossing, thousands of
    /// reads long. A small process that starts to grow moves its `statm`
    /// at its next turn, at the next full tick, or when the machine's
    /// available memory moves enough to call for one.
    pub(super) fn choose_light(&self, s: &mut Scratch, watched: &[u32], page: u64) {
        let listed_at = self.listed_at;
        let page = page.max(1);
        let always_pages = LIGHT_ALWAYS_BYTES / page;
        // Each user's small, still ones: (last statm read, pid).
        let mut small: std::collections::BTreeMap<u32, Vec<(u64, u32)>> = Default::default();
        let mut candidates: Vec<u32> = s.interesting.iter().chain(watched).copied().collect();
        candidates.sort_unstable();
        candidates.dedup();
        for pid in candidates {
            let Some(t) = self.tracked.get(&pid).filter(|t| t.seen >= listed_at) else {
                // New since the listing, or not tracked: read as before.
                s.light.push(pid);
                continue;
            };
            if t.statm.resident >= always_pages || t.statm_moved {
                s.light.push(pid);
            } else {
                small
                    .entry(t.uid.unwrap_or(u32::MAX))
                    .or_default()
                    .push((t.light_turn, pid));
            }
        }
        // The ones read longest ago go first.
        for mut pids in small.into_values() {
            if pids.len() > LIGHT_PER_USER {
                pids.select_nth_unstable(LIGHT_PER_USER - 1);
                pids.truncate(LIGHT_PER_USER);
            }
            s.light.extend(pids.into_iter().map(|(_, pid)| pid));
        }
    }

    /// Re-read `statm` of a process carried into this light tick (one
    /// listed for the first time was just read in full).
    pub(super) fn reread_statm(&mut self, io: &mut Io, pid: u32, errors: &mut CollectorErrors) {
        let listed_at = self.listed_at;
        let Some(t) = self
            .tracked
            .get_mut(&pid)
            .filter(|t| t.seen >= listed_at && !t.kernel_thread)
        else {
            return;
        };
        let read = match &t.statm_file {
            Some(file) => io.read_held_statm(file),
            None => io.read_statm(pid).map(|(statm, _)| statm),
        };
        match read {
            Ok(statm) => {
                let other_program = t.statm.other_program(&statm);
                t.statm_moved = t.statm.resident != statm.resident || t.statm.size != statm.size;
                t.statm = statm;
                t.statm_tick = self.tick;
                // Another executable's code: it called exec since.
                if other_program {
                    self.check_program(io, pid, true, errors);
                }
            }
            // Gone (or, through a kept file, its pid reused): out of this
            // snapshot; a process that took the pid is read in full when
            // listed.
            Err(ReadFailure::Vanished) => {
                self.forget(pid);
                ReadFailure::Vanished.count(errors);
            }
            Err(f) => f.count(errors),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::Detail;
    use crate::model::sampling::Sampler;
    use crate::os::linux::fake_proc::FakeProc;

    #[test]
    fn a_users_many_small_python_processes_are_re_read_in_turn_and_large_ones_every_tick() {
        // 200 small `python3` of one user (root here) and one of 1 GiB.
        let tree = FakeProc::new();
        for i in 0..200 {
            tree.process(2000 + i, "python3", 1000, 4000);
        }
        tree.process(100, "python3", 262_144, 1 << 20);
        let mut sampler = tree.sampler();
        sampler.sample().unwrap();
        // Everything grows a little; each light tick sees the large one and
        // the next LIGHT_PER_USER small ones.
        for i in 0..200 {
            tree.memory(2000 + i, 1001, 4004);
        }
        tree.memory(100, 262_145, (1 << 20) + 4);
        let mut seen = std::collections::BTreeSet::new();
        let mut ticks = 0;
        while seen.len() < 200 {
            let snap = sampler.sample_light(&[]).unwrap();
            ticks += 1;
            assert_eq!(
                snap.process(100).unwrap().footprint,
                ((1 << 20) + 4) * 1024,
                "the large one, every tick"
            );
            let fresh: Vec<u32> = (2000..2200)
                .filter(|&pid| snap.process(pid).unwrap().footprint == 4004 * 1024)
                .collect();
            // The small ones' turn, and the largest's statm (TOP_EXACT of
            // them, whatever they run).
            let new = fresh.iter().filter(|pid| !seen.contains(*pid)).count();
            assert!(
                new <= super::LIGHT_PER_USER + crate::os::linux::TOP_EXACT,
                "{new} read in one tick"
            );
            seen.extend(fresh);
            assert!(
                ticks <= 4,
                "every one read within 200 / 64 ticks: {}",
                seen.len()
            );
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
}
