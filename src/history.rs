//! The recent past: bounded, time-windowed series of system memory and of the
//! footprint of the processes worth watching.
//!
//! The daemon records every snapshot here. Memory stays bounded two ways:
//! points older than the retention window are dropped, and per-process series
//! are kept only for processes that matter (ML workloads and the largest
//! processes of each sample), and forgotten once they have exited and aged
//! out of the window.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use serde::Serialize;

use crate::model::{PressureLevel, ProcessId, Snapshot, Timestamp};

/// How many of the largest processes of each sample get a series, besides
/// every ML workload.
pub const TRACKED_LARGEST: usize = 32;

/// One point of the system series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SystemPoint {
    pub at: Timestamp,
    pub total: u64,
    pub available: u64,
    pub used: u64,
    pub app: Option<u64>,
    pub wired: Option<u64>,
    pub compressed: Option<u64>,
    pub cached: Option<u64>,
    pub swap_used: u64,
    pub pressure: PressureLevel,
    /// PSI `some` avg10 where the OS has it.
    pub psi_some_avg10: Option<f64>,
    /// Sum of GPU memory used over all devices, where known.
    pub gpu_used: Option<u64>,
}

impl SystemPoint {
    fn of(snap: &Snapshot) -> Self {
        let gpu_used = snap
            .gpus
            .iter()
            .filter_map(|g| g.memory_used)
            .reduce(|a, b| a.saturating_add(b));
        Self {
            at: snap.taken_at,
            total: snap.system.total,
            available: snap.system.available,
            used: snap.system.used,
            app: snap.system.app,
            wired: snap.system.wired,
            compressed: snap.system.compressed,
            cached: snap.system.cached,
            swap_used: snap.swap.used,
            pressure: snap.pressure.level,
            psi_some_avg10: snap.pressure.psi.map(|p| p.some.avg10),
            gpu_used,
        }
    }
}

/// One point of a process's series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProcessPoint {
    pub at: Timestamp,
    pub footprint: u64,
    pub gpu_memory: Option<u64>,
}

/// The series of one process identity.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcessTrack {
    pub points: VecDeque<ProcessPoint>,
    /// Largest footprint seen while tracked.
    pub peak_footprint: u64,
    pub last_seen: Option<Timestamp>,
}

/// At most this many points enter a growth estimate (evenly thinned beyond),
/// keeping the pairwise estimator's cost bounded at fast intervals.
const MAX_GROWTH_POINTS: usize = 64;

/// Two points closer than this make no trend (timing noise dominates).
const MIN_TREND_SPAN: Duration = Duration::from_millis(200);

impl ProcessTrack {
    /// Growth of the footprint in bytes per second over the `window` before
    /// `now`: the Theil–Sen estimator, the median of the slopes between every
    /// pair of points. A one-off spike moves a minority of the pairwise slopes
    /// and so leaves the median where the steady trend is; a least-squares
    /// or first-to-last slope would follow the spike.
    ///
    /// `None` with fewer than `min_points` points in the window, or when they
    /// span less than half the window (too little to call it a trend).
    pub fn growth(&self, now: Timestamp, window: Duration, min_points: usize) -> Option<f64> {
        let recent: Vec<&ProcessPoint> = self
            .points
            .iter()
            .filter(|p| p.at <= now && now.since(p.at) <= window)
            .collect();
        if recent.len() < min_points.max(2) {
            return None;
        }
        let span = recent[recent.len() - 1].at.since(recent[0].at);
        if span < window / 2 {
            return None;
        }
        let step = recent.len().div_ceil(MAX_GROWTH_POINTS);
        let thinned: Vec<(f64, f64)> = recent
            .iter()
            .step_by(step)
            .map(|p| (p.at.as_millis() as f64 / 1000.0, p.footprint as f64))
            .collect();
        theil_sen(&thinned)
    }

    /// A short-term trend for predicting when a limit will be crossed, in
    /// bytes per second: the Theil–Sen slope of the points within `window`
    /// (two are enough, 200 ms apart), or, for a process seen once and
    /// younger than `window`, its footprint divided by its age (it grew from
    /// about nothing since it started). Cruder than [`Self::growth`], and used
    /// only to decide when to sample next, never to act.
    pub fn trend(
        &self,
        now: Timestamp,
        window: Duration,
        started_at: Option<Timestamp>,
    ) -> Option<f64> {
        let recent: Vec<&ProcessPoint> = self
            .points
            .iter()
            .filter(|p| p.at <= now && now.since(p.at) <= window)
            .collect();
        match recent.as_slice() {
            [] => None,
            [only] => {
                let age = only.at.since(started_at?);
                (age > Duration::ZERO && age <= window)
                    .then(|| only.footprint as f64 / age.as_secs_f64())
            }
            [first, .., last] => {
                if last.at.since(first.at) < MIN_TREND_SPAN {
                    return None;
                }
                let step = recent.len().div_ceil(MAX_GROWTH_POINTS);
                let thinned: Vec<(f64, f64)> = recent
                    .iter()
                    .step_by(step)
                    .map(|p| (p.at.as_millis() as f64 / 1000.0, p.footprint as f64))
                    .collect();
                theil_sen(&thinned)
            }
        }
    }

    /// The latest point.
    pub fn last(&self) -> Option<&ProcessPoint> {
        self.points.back()
    }
}

/// Median of the pairwise slopes of `(x, y)` points; `None` when no two
/// points differ in `x`.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<f64> {
    let mut slopes = Vec::with_capacity(points.len() * points.len().saturating_sub(1) / 2);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            let dx = b.0 - a.0;
            if dx > 0.0 {
                slopes.push((b.1 - a.1) / dx);
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    slopes.sort_by(f64::total_cmp);
    let mid = slopes.len() / 2;
    Some(if slopes.len() % 2 == 1 {
        slopes[mid]
    } else {
        (slopes[mid - 1] + slopes[mid]) / 2.0
    })
}

/// How long until `headroom` bytes are used up at `growth` bytes per second;
/// `None` when not growing.
pub fn time_to_exhaustion(headroom: u64, growth: f64) -> Option<Duration> {
    if growth.is_nan() || growth <= 0.0 {
        return None;
    }
    let secs = headroom as f64 / growth;
    Duration::try_from_secs_f64(secs).ok()
}

/// Recent system and per-process series.
#[derive(Debug, Clone, Default)]
pub struct History {
    retention: Duration,
    system: VecDeque<SystemPoint>,
    processes: HashMap<ProcessId, ProcessTrack>,
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

        let mut largest: Vec<(u64, ProcessId)> =
            snap.processes.iter().map(|p| (p.footprint, p.id)).collect();
        let cut = largest.len().min(TRACKED_LARGEST);
        if cut > 0 && cut < largest.len() {
            largest.select_nth_unstable_by(cut - 1, |a, b| b.0.cmp(&a.0));
        }
        largest.truncate(cut);
        let is_largest = |id: &ProcessId| largest.iter().any(|(_, l)| l == id);

        for p in &snap.processes {
            let watched = p.workload.is_ml() || is_largest(&p.id);
            if !watched && !self.processes.contains_key(&p.id) {
                continue;
            }
            let track = self.processes.entry(p.id).or_default();
            track.points.push_back(ProcessPoint {
                at: now,
                footprint: p.footprint,
                gpu_memory: p.gpu_memory,
            });
            track.peak_footprint = track.peak_footprint.max(p.footprint);
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
        self.processes.retain(|_, track| {
            while track.points.front().is_some_and(|p| expired(p.at)) {
                track.points.pop_front();
            }
            !track.points.is_empty()
        });
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
    use crate::model::*;

    fn process(pid: u32, footprint: u64, kind: WorkloadKind) -> ProcessSample {
        ProcessSample {
            id: ProcessId { pid, start: 1 },
            ppid: 1,
            uid: Some(1000),
            user: None,
            name: format!("p{pid}"),
            exe: None,
            argv: vec![],
            started_at: None,
            footprint,
            peak_footprint: None,
            resident: footprint,
            swapped: None,
            gpu_memory: None,
            gpu_client: false,
            detail: Detail::Exact,
            workload: Workload {
                kind,
                ..Workload::default()
            },
        }
    }

    fn snapshot(at_ms: u64, processes: Vec<ProcessSample>) -> Snapshot {
        Snapshot {
            taken_at: Timestamp(at_ms),
            source: "test".into(),
            sample_micros: 0,
            system: SystemMemory {
                total: 100,
                available: 50,
                used: 50,
                free: 10,
                ..SystemMemory::default()
            },
            swap: Swap::default(),
            pressure: Pressure::default(),
            gpus: vec![],
            processes,
            errors: CollectorErrors::default(),
            collectors: vec![],
            notes: vec![],
        }
    }

    #[test]
    fn points_older_than_the_window_are_dropped() {
        let mut h = History::new(Duration::from_secs(10));
        for s in 0..30 {
            h.record(&snapshot(s * 1000, vec![]));
        }
        assert_eq!(h.system().len(), 11);
        assert_eq!(h.system().front().map(|p| p.at), Some(Timestamp(19_000)));
    }

    #[test]
    fn ml_processes_are_tracked_even_when_small() {
        let mut h = History::new(Duration::from_secs(60));
        let mut procs: Vec<_> = (0..100)
            .map(|i| process(1000 + i, 1 << 30, WorkloadKind::Other))
            .collect();
        procs.push(process(7, 10, WorkloadKind::Jupyter));
        h.record(&snapshot(0, procs));
        assert!(h.process(&ProcessId { pid: 7, start: 1 }).is_some());
        assert_eq!(h.tracked_processes(), TRACKED_LARGEST + 1);
    }

    #[test]
    fn small_other_processes_are_not_tracked() {
        let mut h = History::new(Duration::from_secs(60));
        let mut procs: Vec<_> = (0..40)
            .map(|i| process(1000 + i, 1 << 30, WorkloadKind::Other))
            .collect();
        procs.push(process(7, 10, WorkloadKind::Other));
        h.record(&snapshot(0, procs));
        assert!(h.process(&ProcessId { pid: 7, start: 1 }).is_none());
    }

    #[test]
    fn exited_processes_are_forgotten_after_the_window() {
        let mut h = History::new(Duration::from_secs(5));
        h.record(&snapshot(0, vec![process(7, 10, WorkloadKind::Pytorch)]));
        h.record(&snapshot(3_000, vec![]));
        assert!(h.process(&ProcessId { pid: 7, start: 1 }).is_some());
        h.record(&snapshot(6_000, vec![]));
        assert!(h.process(&ProcessId { pid: 7, start: 1 }).is_none());
    }

    #[test]
    fn peak_footprint_is_the_maximum_seen() {
        let mut h = History::new(Duration::from_secs(60));
        for (t, f) in [(0, 10), (1000, 50), (2000, 20)] {
            h.record(&snapshot(t, vec![process(7, f, WorkloadKind::Jax)]));
        }
        let track = h
            .process(&ProcessId { pid: 7, start: 1 })
            .map(|t| t.peak_footprint);
        assert_eq!(track, Some(50));
    }

    fn track(points: &[(u64, u64)]) -> ProcessTrack {
        ProcessTrack {
            points: points
                .iter()
                .map(|&(at, footprint)| ProcessPoint {
                    at: Timestamp(at),
                    footprint,
                    gpu_memory: None,
                })
                .collect(),
            ..ProcessTrack::default()
        }
    }

    #[test]
    fn steady_growth_is_measured_exactly() {
        let t = track(&(0..11).map(|s| (s * 1000, s * 100)).collect::<Vec<_>>());
        let g = t.growth(Timestamp(10_000), Duration::from_secs(10), 3);
        assert_eq!(g, Some(100.0));
    }

    #[test]
    fn a_single_spike_does_not_move_the_growth() {
        let mut pts: Vec<(u64, u64)> = (0..11).map(|s| (s * 1000, 1000)).collect();
        pts[9].1 = 1_000_000;
        let g = track(&pts).growth(Timestamp(10_000), Duration::from_secs(10), 3);
        assert_eq!(g, Some(0.0));
    }

    #[test]
    fn too_few_points_or_too_short_a_span_is_unknown() {
        let t = track(&[(0, 0), (1000, 100)]);
        assert_eq!(t.growth(Timestamp(1000), Duration::from_secs(10), 3), None);
        let t = track(&[(0, 0), (500, 100), (1000, 200)]);
        assert_eq!(t.growth(Timestamp(1000), Duration::from_secs(10), 3), None);
        assert!(
            t.growth(Timestamp(1000), Duration::from_secs(2), 3)
                .is_some()
        );
    }

    #[test]
    fn points_outside_the_window_are_ignored() {
        let mut pts: Vec<(u64, u64)> = vec![(0, 0), (1000, 1_000_000)];
        pts.extend((20..31).map(|s| (s * 1000, 5000)));
        let g = track(&pts).growth(Timestamp(30_000), Duration::from_secs(10), 3);
        assert_eq!(g, Some(0.0));
    }

    #[test]
    fn a_trend_needs_only_two_points() {
        let t = track(&[(0, 0), (1000, 1 << 30)]);
        let g = t.trend(Timestamp(1000), Duration::from_secs(3), None);
        assert_eq!(g, Some((1u64 << 30) as f64));
        let close = track(&[(0, 0), (100, 1 << 30)]);
        assert_eq!(
            close.trend(Timestamp(100), Duration::from_secs(3), None),
            None
        );
    }

    #[test]
    fn a_young_process_seen_once_trends_by_its_age() {
        let t = track(&[(2000, 1 << 30)]);
        let g = t.trend(
            Timestamp(2000),
            Duration::from_secs(3),
            Some(Timestamp(1000)),
        );
        assert_eq!(g, Some((1u64 << 30) as f64));
        let old = t.trend(Timestamp(2000), Duration::from_secs(3), Some(Timestamp(0)));
        assert_eq!(old, Some((1u64 << 29) as f64));
        let older = t.trend(Timestamp(9000), Duration::from_secs(3), Some(Timestamp(0)));
        assert_eq!(older, None, "the point is out of the window");
        assert_eq!(
            t.trend(Timestamp(2000), Duration::from_secs(1), Some(Timestamp(0))),
            None
        );
    }

    #[test]
    fn exhaustion_needs_growth() {
        assert_eq!(time_to_exhaustion(1000, 0.0), None);
        assert_eq!(time_to_exhaustion(1000, -5.0), None);
        assert_eq!(time_to_exhaustion(1000, f64::NAN), None);
        assert_eq!(
            time_to_exhaustion(1000, 100.0),
            Some(Duration::from_secs(10))
        );
    }

    #[test]
    fn system_since_limits_to_the_window() {
        let mut h = History::new(Duration::from_secs(600));
        for s in 0..100 {
            h.record(&snapshot(s * 1000, vec![]));
        }
        assert_eq!(h.system_since(Duration::from_secs(9)).count(), 10);
    }
}
