//! A bound on what the log says about each user's processes.
//!
//! The daemon logs a line when it starts watching an ML process, when one
//! ends (its post-mortem) and when one crosses or clears a limit. A user
//! decides how many processes they start: a thousand short-lived processes
//! that look like Jupyter kernels a second would be two thousand lines a
//! second, and a log that grows without bound (launchd's log file is never
//! rotated). So the lines about processes are limited per source, the
//! processes' owner (by uid): [`LINES`] lines per [`EVERY`], counted from
//! the source's first line. The first line left out is followed (at the
//! daemon's next sample) by a notice that says so, and the window's end by
//! one that says how many were left out:
//!
//! ```text
//! more than 30 lines in 60 s about the processes of uid 999 (mallory): further ones are suppressed until the 60 s end, and counted
//! 5123 more lines about the processes of uid 999 (mallory) suppressed in the last 60 s
//! ```
//!
//! What headroom does (signals, hooks, skipped steps) is not limited here:
//! the rules bound it, and the journal keeps all of it.
//!
//! Pure: the time is passed in.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use super::printable;

/// How long a source's window lasts.
pub const EVERY: Duration = Duration::from_secs(60);
/// Lines about one source's processes per [`EVERY`].
pub const LINES: u32 = 30;
/// Sources with a window open at once; lines about the processes of
/// sources beyond it share the window of processes whose owner is unknown.
const MAX_SOURCES: usize = 4096;

/// One source's window.
#[derive(Debug, Clone)]
struct Window {
    started: Instant,
    user: Option<String>,
    logged: u32,
    suppressed: u64,
    /// The notice that lines are being suppressed was handed out.
    announced: bool,
}

/// A line for the log about a source whose lines are left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The source's lines are left out from now to the end of its window.
    Suppressing {
        uid: Option<u32>,
        user: Option<String>,
        lines: u32,
        every: Duration,
    },
    /// How many of the source's lines were left out, over how long.
    Suppressed {
        uid: Option<u32>,
        user: Option<String>,
        count: u64,
        over: Duration,
    },
}

/// `uid 999 (mallory)`, `uid 999`, or `an unknown owner`.
fn source(uid: Option<u32>, user: Option<&str>) -> String {
    match (uid, user) {
        (Some(uid), Some(user)) => format!("uid {uid} ({})", printable(user)),
        (Some(uid), None) => format!("uid {uid}"),
        (None, _) => "an unknown owner".to_string(),
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::Suppressing {
                uid,
                user,
                lines,
                every,
            } => write!(
                f,
                "more than {lines} lines in {} s about the processes of {}: further ones are \
                 suppressed until the {} s end, and counted",
                every.as_secs(),
                source(*uid, user.as_deref()),
                every.as_secs()
            ),
            Notice::Suppressed {
                uid,
                user,
                count,
                over,
            } => write!(
                f,
                "{count} more lines about the processes of {} suppressed in the last {} s",
                source(*uid, user.as_deref()),
                over.as_secs()
            ),
        }
    }
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct SourceLimit {
    every: Duration,
    lines: u32,
    sources: HashMap<Option<u32>, Window>,
}

impl Default for SourceLimit {
    /// [`LINES`] per [`EVERY`].
    fn default() -> Self {
        Self::new(EVERY, LINES)
    }
}

impl SourceLimit {
    /// `lines` per source and `every`.
    pub fn new(every: Duration, lines: u32) -> Self {
        Self {
            every,
            lines,
            sources: HashMap::new(),
        }
    }

    /// Whether to log a line about a process of `uid` (named `user`) at
    /// `now`; a line left out is counted.
    pub fn admit(&mut self, uid: Option<u32>, user: Option<&str>, now: Instant) -> bool {
        let every = self.every;
        let full = self.sources.len() >= MAX_SOURCES;
        let key = match uid {
            Some(uid) if !full || self.sources.contains_key(&Some(uid)) => Some(uid),
            _ => None,
        };
        let window = self.sources.entry(key).or_insert_with(|| Window {
            started: now,
            user: key.and(user).map(str::to_string),
            logged: 0,
            suppressed: 0,
            announced: false,
        });
        let mut ended = now.saturating_duration_since(window.started) >= every;
        if ended && window.suppressed == 0 {
            // Nothing to tell of the last window: start a new one.
            window.started = now;
            window.logged = 0;
            window.announced = false;
            ended = false;
        }
        // An ended window with lines left out counts on until `notices`
        // tells its count.
        if !ended && window.logged < self.lines {
            window.logged += 1;
            return true;
        }
        window.suppressed = window.suppressed.saturating_add(1);
        false
    }

    /// The notices due at `now`: a source whose lines started being left
    /// out, and a window that ended with lines left out. Ended windows are
    /// forgotten, so a source's next line starts a new one.
    pub fn notices(&mut self, now: Instant) -> Vec<Notice> {
        let every = self.every;
        let lines = self.lines;
        let mut out = Vec::new();
        let mut ended = Vec::new();
        for (uid, w) in &mut self.sources {
            let over = now.saturating_duration_since(w.started);
            if over >= every {
                ended.push(*uid);
                continue;
            }
            if w.suppressed > 0 && !w.announced {
                w.announced = true;
                out.push((
                    w.started,
                    Notice::Suppressing {
                        uid: *uid,
                        user: w.user.clone(),
                        lines,
                        every,
                    },
                ));
            }
        }
        for uid in ended {
            if let Some(w) = self.sources.remove(&uid)
                && w.suppressed > 0
            {
                out.push((w.started, suppressed(uid, w, now)));
            }
        }
        out.sort_by_key(|(started, _)| *started);
        out.into_iter().map(|(_, n)| n).collect()
    }

    /// The counts of every window with lines left out, ended or not (the
    /// daemon is stopping); every window is forgotten.
    pub fn drain(&mut self, now: Instant) -> Vec<Notice> {
        let mut windows: Vec<(Option<u32>, Window)> = self.sources.drain().collect();
        windows.sort_by_key(|(_, w)| w.started);
        windows
            .into_iter()
            .filter(|(_, w)| w.suppressed > 0)
            .map(|(uid, w)| suppressed(uid, w, now))
            .collect()
    }
}

fn suppressed(uid: Option<u32>, w: Window, now: Instant) -> Notice {
    Notice::Suppressed {
        uid,
        user: w.user,
        count: w.suppressed,
        over: now.saturating_duration_since(w.started),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn secs(t0: Instant, s: u64) -> Instant {
        t0 + Duration::from_secs(s)
    }

    #[test]
    fn a_source_gets_its_lines_then_is_counted_and_told() {
        let t0 = Instant::now();
        let mut limit = SourceLimit::new(MINUTE, 2);
        let admitted: Vec<bool> = (0..5)
            .map(|_| limit.admit(Some(999), Some("mallory"), t0))
            .collect();
        assert_eq!(admitted, [true, true, false, false, false]);
        let notices = limit.notices(secs(t0, 1));
        assert_eq!(
            notices,
            [Notice::Suppressing {
                uid: Some(999),
                user: Some("mallory".into()),
                lines: 2,
                every: MINUTE
            }]
        );
        assert_eq!(
            notices[0].to_string(),
            "more than 2 lines in 60 s about the processes of uid 999 (mallory): further ones \
             are suppressed until the 60 s end, and counted"
        );
        // Said once per window.
        assert!(!limit.admit(Some(999), Some("mallory"), secs(t0, 2)));
        assert!(limit.notices(secs(t0, 3)).is_empty());
        let ended = limit.notices(secs(t0, 61));
        assert_eq!(
            ended[0].to_string(),
            "4 more lines about the processes of uid 999 (mallory) suppressed in the last 61 s"
        );
        assert!(limit.admit(Some(999), Some("mallory"), secs(t0, 62)));
    }

    #[test]
    fn one_sources_flood_leaves_another_source_its_lines() {
        let t0 = Instant::now();
        let mut limit = SourceLimit::new(MINUTE, 3);
        for _ in 0..10_000 {
            limit.admit(Some(999), None, t0);
        }
        assert!(limit.admit(Some(1000), None, t0));
        assert!(limit.admit(None, None, t0));
    }

    #[test]
    fn a_window_with_nothing_left_out_ends_without_a_notice() {
        let t0 = Instant::now();
        let mut limit = SourceLimit::new(MINUTE, 3);
        limit.admit(Some(1), None, t0);
        assert!(limit.notices(secs(t0, 60)).is_empty());
        assert!(limit.sources.is_empty());
    }

    #[test]
    fn a_window_ended_before_its_notice_counts_on_until_it_is_told() {
        let t0 = Instant::now();
        let mut limit = SourceLimit::new(MINUTE, 1);
        limit.admit(Some(1), None, t0);
        limit.admit(Some(1), None, t0);
        assert!(!limit.admit(Some(1), None, secs(t0, 70)));
        let told = limit.notices(secs(t0, 71));
        assert_eq!(
            told,
            [Notice::Suppressed {
                uid: Some(1),
                user: None,
                count: 2,
                over: Duration::from_secs(71)
            }]
        );
        assert!(limit.admit(Some(1), None, secs(t0, 72)));
    }

    #[test]
    fn an_ended_window_with_nothing_left_out_starts_again_at_once() {
        let t0 = Instant::now();
        let mut limit = SourceLimit::new(MINUTE, 1);
        assert!(limit.admit(Some(1), None, t0));
        assert!(limit.admit(Some(1), None, secs(t0, 60)));
        assert!(!limit.admit(Some(1), None, secs(t0, 61)));
    }

    #[test]
    fn a_stop_tells_every_count() {
        let t0 = Instant::now();
        let mut limit = SourceLimit::new(MINUTE, 0);
        limit.admit(None, Some("ignored"), t0);
        limit.admit(Some(5), None, secs(t0, 1));
        let drained: Vec<String> = limit
            .drain(secs(t0, 2))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            drained,
            [
                "1 more lines about the processes of an unknown owner suppressed in the last 2 s",
                "1 more lines about the processes of uid 5 suppressed in the last 1 s"
            ]
        );
    }

    #[test]
    fn a_hostile_user_name_is_escaped() {
        let n = Notice::Suppressed {
            uid: Some(1),
            user: Some("a\nb".into()),
            count: 1,
            over: MINUTE,
        };
        assert!(n.to_string().contains("uid 1 (a\\nb)"), "{n}");
    }

    #[test]
    fn sources_beyond_the_limit_share_one_window() {
        let t0 = Instant::now();
        let mut limit = SourceLimit::new(MINUTE, 1);
        for uid in 0..MAX_SOURCES as u32 {
            limit.admit(Some(uid), None, t0);
        }
        assert!(limit.admit(Some(100_000), Some("x"), t0));
        assert!(!limit.admit(Some(100_001), None, t0));
        assert_eq!(limit.sources.len(), MAX_SOURCES + 1);
    }
}
