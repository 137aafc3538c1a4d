//! How fast a process grows and when the machine runs out at that pace:
//! [`ProcessTrack::growth_bytes_per_second`] is a robust slope (Theil–Sen)
//! over the recent points, [`ProcessTrack::growth`] the same with the span a
//! limit needs before acting, [`ProcessTrack::trend`] a cruder figure for
//! deciding when to sample next, and [`time_to_exhaustion`] divides the
//! headroom left by a rate. All are pure functions of the recorded points.

use std::time::Duration;

use super::series::{ProcessPoint, ProcessTrack};
use crate::model::{ProcessSample, Snapshot, Timestamp};

/// The window [`ProcessTrack::growth_bytes_per_second`] is usually asked about:
/// long enough to see through allocator noise, short enough to follow a loop
/// that has just started allocating.
pub const GROWTH_WINDOW: Duration = Duration::from_secs(30);

/// Fewest points a growth rate is computed from.
pub const MIN_GROWTH_POINTS: usize = 3;

/// Most points a growth rate looks at; longer windows (or fast sampling) are
/// thinned evenly, which bounds the pairwise work at `n(n-1)/2` = 780 pairs.
pub const MAX_GROWTH_POINTS: usize = 40;

/// Two points closer than this make no trend (timing noise dominates).
const MIN_TREND_SPAN: Duration = Duration::from_millis(200);

impl ProcessTrack {
    /// The points within `window` before `now` whose [`Detail`](crate::model::Detail) is that of the
    /// newest of them: an estimated footprint and an exact one of the same
    /// process differ by more than growth, so they are never compared. As
    /// `(seconds before now, footprint)`, small numbers that keep the f64
    /// arithmetic exact.
    fn recent(&self, now: Timestamp, window: Duration) -> Vec<(f64, f64)> {
        let in_window = |p: &&ProcessPoint| p.at <= now && now.since(p.at) <= window;
        let Some(detail) = self.points.iter().rev().find(in_window).map(|p| p.detail) else {
            return Vec::new();
        };
        self.points
            .iter()
            .filter(in_window)
            .filter(|p| p.detail == detail)
            .map(|p| {
                let before = now.since(p.at).as_millis() as f64 / 1000.0;
                (-before, p.footprint as f64)
            })
            .collect()
    }

    /// Growth of the footprint in bytes per second (negative when it
    /// shrinks) over the `window` before `now`: the Theil–Sen estimator, the
    /// median of the slopes between every pair of points. A one-off spike (a
    /// temporary buffer, a sampling glitch) moves a minority of the pairwise
    /// slopes and so leaves the median where the steady trend is; a
    /// least-squares or first-to-last slope would follow the spike.
    ///
    /// `None` with fewer than `min_points` comparable points in the window,
    /// or when they span less than half the window (too little to call it a
    /// trend). This is the figure limits act on.
    pub fn growth(&self, now: Timestamp, window: Duration, min_points: usize) -> Option<f64> {
        self.slope(now, window, min_points, window / 2)
    }

    /// The Theil–Sen slope over the `window` before the newest point, from
    /// [`MIN_GROWTH_POINTS`] points on, however short their span: the figure
    /// the API and metrics show (a limit waits for [`Self::growth`]'s span).
    pub fn growth_bytes_per_second(&self, window: Duration) -> Option<f64> {
        let newest = self.points.back()?.at;
        self.slope(newest, window, MIN_GROWTH_POINTS, Duration::ZERO)
    }

    fn slope(
        &self,
        now: Timestamp,
        window: Duration,
        min_points: usize,
        min_span: Duration,
    ) -> Option<f64> {
        let recent = self.recent(now, window);
        if recent.len() < min_points.max(2) {
            return None;
        }
        let span = recent[recent.len() - 1].0 - recent[0].0;
        if span < min_span.as_secs_f64() {
            return None;
        }
        theil_sen_slope(&thin(&recent, MAX_GROWTH_POINTS))
    }

    /// When the machine runs out of memory if this process keeps growing at
    /// its current pace: `headroom_bytes` (usually available memory plus free
    /// swap, see [`exhaustion_headroom`]) divided by
    /// [`growth_bytes_per_second`](Self::growth_bytes_per_second) over `window`.
    /// `None` when the process is not growing or its rate is unknown.
    pub fn time_to_exhaustion(&self, window: Duration, headroom_bytes: u64) -> Option<Duration> {
        time_to_exhaustion(headroom_bytes, self.growth_bytes_per_second(window)?)
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
        let recent = self.recent(now, window);
        match recent.as_slice() {
            [] => None,
            [_only] => {
                let point = self.points.iter().rev().find(|p| p.at <= now)?;
                let age = point.at.since(started_at?);
                (age > Duration::ZERO && age <= window)
                    .then(|| point.footprint as f64 / age.as_secs_f64())
            }
            [first, .., last] => {
                if last.0 - first.0 < MIN_TREND_SPAN.as_secs_f64() {
                    return None;
                }
                pairwise_median(&thin(&recent, MAX_GROWTH_POINTS))
            }
        }
    }
}

/// The memory a growing process can still take before the machine is out:
/// available memory plus free swap.
pub fn exhaustion_headroom(snap: &Snapshot) -> u64 {
    snap.system
        .available
        .saturating_add(snap.swap.total.saturating_sub(snap.swap.used))
}

/// The memory `p` can still take before it runs out, and the ceiling that
/// bounds it where that is tighter than the machine: the smaller of the
/// machine's [`exhaustion_headroom`] and its memory cgroup's room plus the
/// swap the cgroup may still use ([`crate::model::Ceiling::headroom`]).
pub fn exhaustion_headroom_for<'s>(
    snap: &'s Snapshot,
    p: &ProcessSample,
) -> (u64, Option<&'s crate::model::Ceiling>) {
    let machine = exhaustion_headroom(snap);
    let free_swap = snap.swap.total.saturating_sub(snap.swap.used);
    match snap.ceiling_of(p) {
        Some(c) if c.headroom(free_swap) < machine => (c.headroom(free_swap), Some(c)),
        _ => (machine, None),
    }
}

/// `headroom_bytes` ÷ `bytes_per_second`: how long until that much memory is
/// used up at that pace. `None` unless the rate is positive and finite; a
/// result too large for a `Duration` saturates at `Duration::MAX`.
pub fn time_to_exhaustion(headroom_bytes: u64, bytes_per_second: f64) -> Option<Duration> {
    if !(bytes_per_second.is_finite() && bytes_per_second > 0.0) {
        return None;
    }
    let secs = headroom_bytes as f64 / bytes_per_second;
    Some(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX))
}

/// The Theil–Sen estimator: the median of the slopes `(y_j − y_i) / (x_j − x_i)`
/// over all pairs `i < j` with distinct `x`. `None` with fewer than
/// [`MIN_GROWTH_POINTS`] points or no pair with distinct `x`.
pub fn theil_sen_slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < MIN_GROWTH_POINTS {
        return None;
    }
    pairwise_median(points)
}

/// The median of the pairwise slopes, from two points on.
pub(super) fn pairwise_median(points: &[(f64, f64)]) -> Option<f64> {
    let mut slopes = Vec::with_capacity(points.len() * points.len().saturating_sub(1) / 2);
    for (i, &(x1, y1)) in points.iter().enumerate() {
        for &(x2, y2) in &points[i + 1..] {
            let dx = x2 - x1;
            if dx != 0.0 {
                let slope = (y2 - y1) / dx;
                if slope.is_finite() {
                    slopes.push(slope);
                }
            }
        }
    }
    median(&mut slopes)
}

/// The median, averaging the middle two of an even count. Reorders `values`.
fn median(values: &mut [f64]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mid = n / 2;
    let (_, upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower = values[..mid]
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    Some((lower + upper) / 2.0)
}

/// At most `max` of `points`, evenly spaced, the first and last always kept.
pub(super) fn thin(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    let n = points.len();
    if n <= max || max < 2 {
        return points.to_vec();
    }
    (0..max).map(|k| points[k * (n - 1) / (max - 1)]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Detail;
    use crate::model::build::snapshot;

    const MIB: u64 = 1 << 20;

    fn track(points: &[(u64, u64)]) -> ProcessTrack {
        ProcessTrack {
            points: points
                .iter()
                .map(|&(at, footprint)| ProcessPoint {
                    at: Timestamp(at),
                    footprint,
                    gpu_memory: None,
                    detail: Detail::Exact,
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
        assert_eq!(time_to_exhaustion(u64::MAX, 1e-300), Some(Duration::MAX));
    }

    #[test]
    fn steady_growth_gives_its_rate() {
        let t = track(
            &(0..30)
                .map(|s| (s * 1000, 100 * MIB + s * MIB))
                .collect::<Vec<_>>(),
        );
        let rate = t.growth_bytes_per_second(GROWTH_WINDOW).unwrap();
        assert!((rate - MIB as f64).abs() < 1.0, "{rate}");
    }

    #[test]
    fn one_spike_barely_moves_the_rate() {
        let mut points: Vec<_> = (0..30).map(|s| (s * 1000, 100 * MIB + s * MIB)).collect();
        points[20].1 += 4096 * MIB;
        let rate = track(&points)
            .growth_bytes_per_second(GROWTH_WINDOW)
            .unwrap();
        // Least squares over these points would say about 58 MiB/s.
        assert!((rate / MIB as f64 - 1.0).abs() < 0.1, "{rate}");
    }

    #[test]
    fn a_flat_footprint_with_one_spike_is_not_growing() {
        let mut points: Vec<_> = (0..20).map(|s| (s * 1000, 500 * MIB)).collect();
        points[19].1 = 9000 * MIB;
        let rate = track(&points)
            .growth_bytes_per_second(GROWTH_WINDOW)
            .unwrap();
        assert_eq!(rate, 0.0);
    }

    #[test]
    fn shrinking_gives_a_negative_rate_and_no_exhaustion() {
        let t = track(
            &(0..10)
                .map(|s| (s * 1000, 100 * MIB - s * MIB))
                .collect::<Vec<_>>(),
        );
        assert!(t.growth_bytes_per_second(GROWTH_WINDOW).unwrap() < 0.0);
        assert_eq!(t.time_to_exhaustion(GROWTH_WINDOW, 10 * MIB), None);
    }

    #[test]
    fn only_points_within_the_window_count() {
        // Grew fast long ago, flat for the last 30 s.
        let mut points: Vec<_> = (0..30).map(|s| (s * 1000, s * 100 * MIB)).collect();
        points.extend((30..61).map(|s| (s * 1000, 3000 * MIB)));
        let t = track(&points);
        assert_eq!(
            t.growth_bytes_per_second(Duration::from_secs(30)),
            Some(0.0)
        );
        assert!(t.growth_bytes_per_second(Duration::from_secs(60)).unwrap() > 0.0);
    }

    #[test]
    fn exact_and_estimated_points_are_not_compared() {
        // Exact reads say 10 MiB, steady; estimates in between say 1 MiB.
        let mut t = track(&(0..20).map(|s| (s * 1000, 10 * MIB)).collect::<Vec<_>>());
        for (i, p) in t.points.iter_mut().enumerate() {
            if i % 3 != 0 {
                p.footprint = MIB;
                p.detail = Detail::Estimated;
            }
        }
        t.points.back_mut().unwrap().detail = Detail::Exact;
        t.points.back_mut().unwrap().footprint = 10 * MIB;
        assert_eq!(t.growth_bytes_per_second(GROWTH_WINDOW), Some(0.0));
    }

    #[test]
    fn too_few_points_give_no_rate() {
        assert_eq!(track(&[]).growth_bytes_per_second(GROWTH_WINDOW), None);
        assert_eq!(
            track(&[(0, 1), (1000, 2)]).growth_bytes_per_second(GROWTH_WINDOW),
            None
        );
        assert_eq!(
            track(&[(0, 1), (0, 2), (0, 3)]).growth_bytes_per_second(GROWTH_WINDOW),
            None
        );
    }

    #[test]
    fn fast_sampling_is_thinned_but_keeps_the_rate() {
        // 250 ms apart over 30 s: 121 points, thinned to MAX_GROWTH_POINTS.
        let t = track(&(0..121).map(|i| (i * 250, i * MIB)).collect::<Vec<_>>());
        let rate = t.growth_bytes_per_second(GROWTH_WINDOW).unwrap();
        assert!((rate - 4.0 * MIB as f64).abs() < 1.0, "{rate}");
    }

    #[test]
    fn exhaustion_is_headroom_over_rate() {
        let t = track(&(0..30).map(|s| (s * 1000, s * MIB)).collect::<Vec<_>>());
        let eta = t.time_to_exhaustion(GROWTH_WINDOW, 600 * MIB).unwrap();
        assert_eq!(eta.as_secs(), 600);
        assert_eq!(time_to_exhaustion(1, 0.0), None);
        assert_eq!(time_to_exhaustion(1, f64::NAN), None);
        assert_eq!(time_to_exhaustion(u64::MAX, 1e-300), Some(Duration::MAX));
    }

    #[test]
    fn exhaustion_headroom_adds_free_swap() {
        let snap = snapshot(0).memory(100, 50).swap(30, 10).build();
        assert_eq!(exhaustion_headroom(&snap), 50 + 20);
    }

    #[test]
    fn median_of_even_count_averages_the_middle_two() {
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&mut []), None);
    }
}
