//! Rate-limited logging: at most one message per interval for a condition
//! that recurs (a failing read, a refused connection, a journal that cannot
//! be written), the first at once, with the count of the ones left out.
//!
//! A condition that a local user can provoke at will (connections, bad
//! files) or that repeats every tick must not flood the log, and the log
//! must still say that it goes on. Each call site keeps one [`RateLimit`]
//! per condition and asks it before logging:
//!
//! ```
//! # use std::time::{Duration, Instant};
//! # use headroom::report::rate_limit::RateLimit;
//! let mut refusals = RateLimit::new(Duration::from_secs(60));
//! if let Some(more) = refusals.due(Instant::now()) {
//!     tracing::warn!("connection refused: all connections are busy{more}");
//! }
//! ```
//!
//! The time is passed in, so the limit is tested without waiting.

use std::fmt;
use std::time::{Duration, Instant};

/// How often a recurring condition is logged unless a call site says
/// otherwise: once a minute.
pub const EVERY: Duration = Duration::from_secs(60);

/// The state of one rate-limited message: when it was last logged and how
/// many times it was left out since.
#[derive(Debug, Clone)]
pub struct RateLimit {
    every: Duration,
    last: Option<Instant>,
    left_out: u64,
}

impl RateLimit {
    /// At most one message per `every`.
    pub const fn new(every: Duration) -> Self {
        Self {
            every,
            last: None,
            left_out: 0,
        }
    }

    /// Whether to log the condition at `now`: `Some` with the count of the
    /// messages left out since the last one logged (which then starts
    /// again from zero), or `None` to stay quiet, counting this one.
    pub fn due(&mut self, now: Instant) -> Option<LeftOut> {
        if self
            .last
            .is_some_and(|at| now.saturating_duration_since(at) < self.every)
        {
            self.left_out = self.left_out.saturating_add(1);
            return None;
        }
        self.last = Some(now);
        Some(LeftOut(std::mem::take(&mut self.left_out)))
    }

    /// The condition ended (a read works again): its next occurrence is
    /// logged at once. The count of messages left out is kept, so the next
    /// message still reports them.
    pub fn reset(&mut self) {
        self.last = None;
    }
}

impl Default for RateLimit {
    /// At most one message per [`EVERY`].
    fn default() -> Self {
        Self::new(EVERY)
    }
}

/// How many messages were left out before this one. Displays as nothing
/// when none were, else as ` (N more since the last such message)`, to end
/// the message with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeftOut(pub u64);

impl fmt::Display for LeftOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " ({n} more since the last such message)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn the_first_occurrence_is_logged_at_once() {
        let mut limit = RateLimit::new(MINUTE);
        assert_eq!(limit.due(Instant::now()), Some(LeftOut(0)));
    }

    #[test]
    fn occurrences_within_the_interval_are_left_out_and_counted() {
        let t0 = Instant::now();
        let mut limit = RateLimit::new(MINUTE);
        assert!(limit.due(t0).is_some());
        assert_eq!(limit.due(t0 + Duration::from_secs(1)), None);
        assert_eq!(limit.due(t0 + Duration::from_secs(59)), None);
        assert_eq!(limit.due(t0 + MINUTE), Some(LeftOut(2)));
    }

    #[test]
    fn the_count_starts_again_after_each_message() {
        let t0 = Instant::now();
        let mut limit = RateLimit::new(MINUTE);
        limit.due(t0);
        limit.due(t0 + Duration::from_secs(10));
        assert_eq!(limit.due(t0 + MINUTE), Some(LeftOut(1)));
        assert_eq!(limit.due(t0 + 2 * MINUTE), Some(LeftOut(0)));
    }

    #[test]
    fn the_interval_runs_from_the_last_message_logged() {
        let t0 = Instant::now();
        let mut limit = RateLimit::new(MINUTE);
        limit.due(t0);
        // Left out at 50 s: the next message is due 60 s after t0, not
        // after 50 s.
        assert_eq!(limit.due(t0 + Duration::from_secs(50)), None);
        assert!(limit.due(t0 + Duration::from_secs(61)).is_some());
    }

    #[test]
    fn a_reset_logs_the_next_occurrence_at_once_with_the_count() {
        let t0 = Instant::now();
        let mut limit = RateLimit::new(MINUTE);
        limit.due(t0);
        limit.due(t0 + Duration::from_secs(1));
        limit.reset();
        assert_eq!(limit.due(t0 + Duration::from_secs(2)), Some(LeftOut(1)));
        assert_eq!(limit.due(t0 + Duration::from_secs(3)), None);
    }

    #[test]
    fn a_clock_that_goes_back_keeps_the_limit() {
        let t0 = Instant::now() + MINUTE;
        let mut limit = RateLimit::new(MINUTE);
        limit.due(t0);
        assert_eq!(limit.due(t0 - Duration::from_secs(5)), None);
    }

    #[test]
    fn the_default_is_once_a_minute() {
        let t0 = Instant::now();
        let mut limit = RateLimit::default();
        limit.due(t0);
        assert_eq!(limit.due(t0 + EVERY - Duration::from_millis(1)), None);
        assert!(limit.due(t0 + EVERY).is_some());
    }

    #[test]
    fn the_left_out_count_ends_a_message_only_when_there_is_one() {
        assert_eq!(format!("refused{}", LeftOut(0)), "refused");
        assert_eq!(
            format!("refused{}", LeftOut(3)),
            "refused (3 more since the last such message)"
        );
    }
}
