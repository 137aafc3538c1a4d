//! The recent past: bounded, time-windowed series of system memory and of the
//! footprint of the processes worth watching.
//!
//! The daemon records every snapshot here. Memory stays bounded two ways:
//! points older than the retention window are dropped, and per-process series
//! are kept only for processes that matter (ML workloads and the largest
//! processes of each sample), and forgotten once they have exited and aged
//! out of the window.
//!
//! The points themselves ([`SystemPoint`], [`ProcessTrack`]) are kept in
//! `history/series.rs`; what they say about growth ("how fast is this
//! process growing, and when does the machine run out at that pace":
//! [`ProcessTrack::growth_bytes_per_second`], [`time_to_exhaustion`]) is
//! worked out in `history/trend.rs`, for the HTTP API and for limits alike.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::model::{ProcessId, SharedStr, Snapshot, Timestamp};

mod room;
mod series;
mod trend;
pub use room::RoomSeries;
pub use series::{ProcessPoint, ProcessTrack, SystemPoint};
pub use trend::{
    GROWTH_WINDOW, MAX_GROWTH_POINTS, MIN_GROWTH_POINTS, exhaustion_headroom,
    exhaustion_headroom_for, theil_sen_slope, time_to_exhaustion,
};

/// How many of the largest processes of each sample get a series, besides
/// every ML workload.
pub const TRACKED_LARGEST: usize = 32;

/// Recent system and per-process series.
#[derive(Debug, Clone, Default)]
pub struct History {
    retention: Duration,
    system: VecDeque<SystemPoint>,
    processes: HashMap<ProcessId, ProcessTrack>,
    /// The totals of jobs with workers, by their root's identity.
    jobs: HashMap<ProcessId, ProcessTrack>,
    /// The machine's room: available memory plus free swap.
    machine_room: RoomSeries,
    /// Each limited memory cgroup's room (under its limit, plus the swap it
    /// may still use), by the ceiling's path.
    ceiling_rooms: HashMap<SharedStr, RoomSeries>,
}

impl History {
    /// A history that keeps `retention` worth of points.
    pub fn new(retention: Duration) -> Self {
        Self {
            retention,
            ..Self::default()
        }
    }

    pub fn retention(&self) -> Duration {
        self.retention
    }

    /// Change the window (on config reload); older points go at the next record.
    pub fn set_retention(&mut self, retention: Duration) {
        self.retention = retention;
    }

    /// Add a snapshot and drop what fell out of the window.
    pub fn record(&mut self, snap: &Snapshot) {
        let now = snap.taken_at;
        self.system.push_back(SystemPoint::of(snap));
        self.machine_room.push(now, exhaustion_headroom(snap));
        let free_swap = snap.swap.total.saturating_sub(snap.swap.used);
        for c in &snap.ceilings {
            self.ceiling_rooms
                .entry(c.path.clone())
                .or_default()
                .push(now, c.headroom(free_swap));
        }

        let mut largest: Vec<(u64, ProcessId)> =
            snap.processes.iter().map(|p| (p.footprint, p.id)).collect();
        let cut = largest.len().min(TRACKED_LARGEST);
        if cut > 0 && cut < largest.len() {
            largest.select_nth_unstable_by(cut - 1, |a, b| b.0.cmp(&a.0));
        }
        largest.truncate(cut);
        // Sorted identities, searched by bisection: per process a few
        // comparisons instead of a scan of the largest and a hash lookup.
        let mut largest: Vec<ProcessId> = largest.into_iter().map(|(_, id)| id).collect();
        largest.sort_unstable();
        let mut known: Vec<ProcessId> = self.processes.keys().copied().collect();
        known.sort_unstable();

        for p in &snap.processes {
            let watched = p.workload.is_ml() || largest.binary_search(&p.id).is_ok();
            if !watched && known.binary_search(&p.id).is_err() {
                continue;
            }
            let track = self.processes.entry(p.id).or_default();
            track.points.push_back(ProcessPoint {
                at: now,
                footprint: p.footprint,
                gpu_memory: p.gpu_memory,
                detail: p.detail,
            });
            track.peak_footprint = track.peak_footprint.max(p.footprint);
            track.last_seen = Some(now);
        }
        // A job's total is one series whatever its members do: a worker
        // that starts or ends moves it like any other growth. Its points
        // are all of one kind, so that growth compares them all.
        for job in snap.jobs.iter().filter(|j| j.workers() > 0) {
            let track = self.jobs.entry(job.root).or_default();
            track.points.push_back(ProcessPoint {
                at: now,
                footprint: job.footprint,
                gpu_memory: job.gpu_memory,
                detail: crate::model::Detail::Exact,
            });
            track.peak_footprint = track.peak_footprint.max(job.footprint);
            track.last_seen = Some(now);
        }
        self.prune(now);
    }

    fn prune(&mut self, now: Timestamp) {
        let window = self.retention;
        let expired = |at: Timestamp| now.since(at) > window;
        while self.system.front().is_some_and(|p| expired(p.at)) {
            self.system.pop_front();
        }
        self.machine_room.prune(now, window);
        self.ceiling_rooms
            .retain(|_, series| series.prune(now, window));
        for tracks in [&mut self.processes, &mut self.jobs] {
            tracks.retain(|_, track| {
                while track.points.front().is_some_and(|p| expired(p.at)) {
                    track.points.pop_front();
                }
                !track.points.is_empty()
            });
        }
    }

    /// The series of the total of the job rooted at `root`, if it has had
    /// workers within the window.
    pub fn job(&self, root: &ProcessId) -> Option<&ProcessTrack> {
        self.jobs.get(root)
    }

    /// How fast the machine's memory is being taken, in bytes per second
    /// over the `window` before `now`: the Theil–Sen slope of swap used
    /// minus available memory, the two figures [`exhaustion_headroom`]
    /// is made of. `None` with fewer than `min_points` points spanning
    /// half of the window.
    pub fn machine_growth(
        &self,
        now: Timestamp,
        window: Duration,
        min_points: usize,
    ) -> Option<f64> {
        let points: Vec<(f64, f64)> = self
            .system
            .iter()
            .filter(|p| p.at <= now && now.since(p.at) <= window)
            .map(|p| {
                let before = now.since(p.at).as_secs_f64();
                (-before, p.swap_used as f64 - p.available as f64)
            })
            .collect();
        if points.len() < min_points.max(2) {
            return None;
        }
        let span = points[points.len() - 1].0 - points[0].0;
        if span < (window / 2).as_secs_f64() {
            return None;
        }
        theil_sen_slope(&trend::thin(&points, MAX_GROWTH_POINTS))
    }

    /// The machine's room (available memory plus free swap) over time.
    pub fn machine_room(&self) -> &RoomSeries {
        &self.machine_room
    }

    /// A limited memory cgroup's room over time, by its ceiling's path.
    pub fn ceiling_room(&self, path: &str) -> Option<&RoomSeries> {
        self.ceiling_rooms.get(path)
    }

    /// The system series, oldest first.
    pub fn system(&self) -> &VecDeque<SystemPoint> {
        &self.system
    }

    /// The system points taken within `window` of the newest one.
    pub fn system_since(&self, window: Duration) -> impl Iterator<Item = &SystemPoint> {
        let newest = self.system.back().map(|p| p.at);
        self.system
            .iter()
            .filter(move |p| newest.is_some_and(|n| n.since(p.at) <= window))
    }

    /// The series of one process identity, if it is tracked.
    pub fn process(&self, id: &ProcessId) -> Option<&ProcessTrack> {
        self.processes.get(id)
    }

    /// How many process identities have a series.
    pub fn tracked_processes(&self) -> usize {
        self.processes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::build::{process, snapshot};
    use crate::model::{ProcessId, WorkloadKind};

    #[test]
    fn points_older_than_the_window_are_dropped() {
        let mut h = History::new(Duration::from_secs(10));
        for s in 0..30 {
            h.record(&snapshot(s * 1000).build());
        }
        assert_eq!(h.system().len(), 11);
        assert_eq!(h.system().front().map(|p| p.at), Some(Timestamp(19_000)));
    }

    #[test]
    fn ml_processes_are_tracked_even_when_small() {
        let mut h = History::new(Duration::from_secs(60));
        let mut procs: Vec<_> = (0..100)
            .map(|i| {
                process(1000 + i)
                    .footprint(1 << 30)
                    .kind(WorkloadKind::Other)
            })
            .collect();
        procs.push(process(7).footprint(10).kind(WorkloadKind::Jupyter));
        h.record(&snapshot(0).processes(procs).build());
        assert!(h.process(&ProcessId { pid: 7, start: 1 }).is_some());
        assert_eq!(h.tracked_processes(), TRACKED_LARGEST + 1);
    }

    #[test]
    fn small_other_processes_are_not_tracked() {
        let mut h = History::new(Duration::from_secs(60));
        let mut procs: Vec<_> = (0..40)
            .map(|i| {
                process(1000 + i)
                    .footprint(1 << 30)
                    .kind(WorkloadKind::Other)
            })
            .collect();
        procs.push(process(7).footprint(10).kind(WorkloadKind::Other));
        h.record(&snapshot(0).processes(procs).build());
        assert!(h.process(&ProcessId { pid: 7, start: 1 }).is_none());
    }

    #[test]
    fn exited_processes_are_forgotten_after_the_window() {
        let mut h = History::new(Duration::from_secs(5));
        h.record(
            &snapshot(0)
                .process(process(7).footprint(10).kind(WorkloadKind::Pytorch))
                .build(),
        );
        h.record(&snapshot(3_000).build());
        assert!(h.process(&ProcessId { pid: 7, start: 1 }).is_some());
        h.record(&snapshot(6_000).build());
        assert!(h.process(&ProcessId { pid: 7, start: 1 }).is_none());
    }

    #[test]
    fn peak_footprint_is_the_maximum_seen() {
        let mut h = History::new(Duration::from_secs(60));
        for (t, f) in [(0, 10), (1000, 50), (2000, 20)] {
            h.record(
                &snapshot(t)
                    .process(process(7).footprint(f).kind(WorkloadKind::Jax))
                    .build(),
            );
        }
        let track = h
            .process(&ProcessId { pid: 7, start: 1 })
            .map(|t| t.peak_footprint);
        assert_eq!(track, Some(50));
    }

    #[test]
    fn system_since_limits_to_the_window() {
        let mut h = History::new(Duration::from_secs(600));
        for s in 0..100 {
            h.record(&snapshot(s * 1000).build());
        }
        assert_eq!(h.system_since(Duration::from_secs(9)).count(), 10);
    }
}
