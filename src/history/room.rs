//! The room left in a memory that can run out, over time: the machine's
//! (available memory plus free swap) and each limited memory cgroup's (room
//! under its limit plus the swap it may still use). Time to exhaustion is
//! predicted from how fast *this* figure falls, whoever takes it: the pages a
//! forked worker copies on access, a second task of the same Slurm job and
//! the page cache a load leaves behind all show here, where no single
//! process's footprint shows them.
//!
//! Two rates: [`RoomSeries::consumption`] over a rule's window (the figure a
//! limit holds on, robust to a one-off spike), and
//! [`RoomSeries::recent_consumption`] over the last few seconds (the figure a
//! signal waits for: it follows a load that has just started or just
//! stopped).

use std::collections::VecDeque;
use std::time::Duration;

use super::trend::{MAX_GROWTH_POINTS, pairwise_median, theil_sen_slope, thin};
use crate::model::Timestamp;

/// Two points closer than this make no recent rate.
const MIN_RECENT_SPAN: Duration = Duration::from_millis(200);

/// The room left in one memory, one point per sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoomSeries {
    points: VecDeque<(Timestamp, u64)>,
}

impl RoomSeries {
    /// Add the room left at `at`.
    pub(super) fn push(&mut self, at: Timestamp, room: u64) {
        self.points.push_back((at, room));
    }

    /// Drop the points older than `window` before `now`; `false` once none
    /// is left.
    pub(super) fn prune(&mut self, now: Timestamp, window: Duration) -> bool {
        while self
            .points
            .front()
            .is_some_and(|(at, _)| now.since(*at) > window)
        {
            self.points.pop_front();
        }
        !self.points.is_empty()
    }

    /// The latest room, and when it was read.
    pub fn last(&self) -> Option<(Timestamp, u64)> {
        self.points.back().copied()
    }

    /// `(seconds before now, room)` of the points within `window` before `now`.
    fn recent(&self, now: Timestamp, window: Duration) -> Vec<(f64, f64)> {
        self.points
            .iter()
            .filter(|(at, _)| *at <= now && now.since(*at) <= window)
            .map(|(at, room)| (-(now.since(*at).as_millis() as f64) / 1000.0, *room as f64))
            .collect()
    }

    /// How fast the room is being taken over the `window` before `now`, in
    /// bytes per second (negative while it grows back): the Theil–Sen slope
    /// of the room, negated. `None` with fewer than `min_points` points or
    /// when they span less than half of the window, as for a process's
    /// growth.
    pub fn consumption(&self, now: Timestamp, window: Duration, min_points: usize) -> Option<f64> {
        let recent = self.recent(now, window);
        if recent.len() < min_points.max(2) {
            return None;
        }
        let span = recent[recent.len() - 1].0 - recent[0].0;
        if span < (window / 2).as_secs_f64() {
            return None;
        }
        theil_sen_slope(&thin(&recent, MAX_GROWTH_POINTS)).map(|s| -s)
    }

    /// How fast the room is being taken over the last `window` (a few
    /// seconds), from two points on if they lie at least 200 ms apart: the
    /// median of the pairwise slopes, negated. Follows a load that has just
    /// started, or just stopped, within a sample or two.
    pub fn recent_consumption(&self, now: Timestamp, window: Duration) -> Option<f64> {
        let recent = self.recent(now, window);
        match recent.as_slice() {
            [first, .., last] if last.0 - first.0 >= MIN_RECENT_SPAN.as_secs_f64() => {
                pairwise_median(&thin(&recent, MAX_GROWTH_POINTS)).map(|s| -s)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn series(points: &[(u64, u64)]) -> RoomSeries {
        let mut s = RoomSeries::default();
        for &(at, room) in points {
            s.push(Timestamp(at), room);
        }
        s
    }

    #[test]
    fn room_falling_steadily_is_consumed_at_that_pace() {
        let s = series(
            &(0..11)
                .map(|i| (i * 1000, 4096 * MIB - i * 100 * MIB))
                .collect::<Vec<_>>(),
        );
        let rate = s
            .consumption(Timestamp(10_000), Duration::from_secs(10), 3)
            .unwrap();
        assert!((rate - (100 * MIB) as f64).abs() < 1.0, "{rate}");
    }

    #[test]
    fn room_coming_back_is_negative_consumption() {
        let s = series(&[(0, 100), (1000, 200), (2000, 300)]);
        assert_eq!(
            s.consumption(Timestamp(2000), Duration::from_secs(2), 3),
            Some(-100.0)
        );
    }

    #[test]
    fn the_window_rate_needs_half_the_window_the_recent_one_two_points() {
        let s = series(&[(0, 1000 * MIB), (500, 900 * MIB)]);
        assert_eq!(
            s.consumption(Timestamp(500), Duration::from_secs(10), 3),
            None
        );
        let recent = s
            .recent_consumption(Timestamp(500), Duration::from_secs(3))
            .unwrap();
        assert!((recent - (200 * MIB) as f64).abs() < 1.0, "{recent}");
        let close = series(&[(0, 1000), (100, 900)]);
        assert_eq!(
            close.recent_consumption(Timestamp(100), Duration::from_secs(3)),
            None
        );
    }

    #[test]
    fn a_load_that_stopped_stops_the_recent_rate_within_its_window() {
        // 200 MiB/s for 5 s, then flat for 3 s, sampled every 250 ms.
        let mut points: Vec<(u64, u64)> = (0..=20)
            .map(|i| (i * 250, 4096 * MIB - i * 50 * MIB))
            .collect();
        points.extend((21..=32).map(|i| (i * 250, 3096 * MIB)));
        let s = series(&points);
        let now = Timestamp(8000);
        assert_eq!(s.recent_consumption(now, Duration::from_secs(2)), Some(0.0));
        // The window's rate still sees the load.
        assert!(s.consumption(now, Duration::from_secs(10), 3).unwrap() > 0.0);
    }

    #[test]
    fn old_points_are_pruned_and_an_empty_series_goes() {
        let mut s = series(&[(0, 1), (5000, 2)]);
        assert!(s.prune(Timestamp(6000), Duration::from_secs(2)));
        assert_eq!(s.last(), Some((Timestamp(5000), 2)));
        assert!(!s.prune(Timestamp(9000), Duration::from_secs(2)));
    }
}
