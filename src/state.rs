//! The daemon's shared state: the latest snapshot, the recent history and the
//! effective config, published through a tokio `watch` channel after every
//! sample. Readers (the CLI's status command, HTTP handlers) only read it and
//! clone the `Arc`s they need, so they never hold up the sampler.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::Config;
use crate::event::{Event, EventKind};
use crate::history::History;
use crate::model::{CollectorErrors, Snapshot, Timestamp};
use crate::policy::RuleStatus;

/// What the daemon knows right now.
#[derive(Debug, Clone)]
pub struct State {
    pub started_at: Timestamp,
    pub config: Arc<Config>,
    /// Where the config came from; `None` for the embedded default.
    pub config_path: Option<PathBuf>,
    /// The latest snapshot; `None` until the first sample succeeds.
    pub snapshot: Option<Arc<Snapshot>>,
    pub history: Arc<History>,
    pub counters: Counters,
    /// Sampling at the fast interval because pressure is elevated.
    pub fast_mode: bool,
    /// The last sampling error, cleared by the next good sample.
    pub last_error: Option<String>,
    /// The most recent events, oldest first (at most [`RECENT_EVENTS`]).
    pub events: Arc<VecDeque<Event>>,
    /// Every rule's state for every process it watches, from the last sample.
    pub rule_statuses: Arc<Vec<RuleStatus>>,
    /// What headroom did, counted since start.
    pub actions: ActionCounts,
}

/// How many recent events the state keeps (the journal keeps them all).
pub const RECENT_EVENTS: usize = 1000;

/// Counts of limit crossings and actions, for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionCounts {
    /// Crossings by rule.
    pub crossings: BTreeMap<String, u64>,
    /// Actions by (rule, action, outcome); skipped steps have outcome `skipped`.
    pub actions: BTreeMap<(String, String, String), u64>,
    /// Post-mortems by cause (`oom-killer`, `signal-by-headroom`, `unknown`, ...).
    pub exits: BTreeMap<String, u64>,
}

/// Monotonic counts since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub samples: u64,
    pub sample_failures: u64,
    pub pressure_events: u64,
    pub reloads: u64,
    pub reload_failures: u64,
    /// Per-sample [`CollectorErrors`] added up over every published sample.
    pub collector_errors: CollectorErrors,
    /// How long the published samples took.
    pub sample_durations: DurationHistogram,
}

/// A cumulative histogram of durations with fixed buckets, for the
/// `headroom_sample_duration_seconds` metric: counts only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DurationHistogram {
    /// `counts[i]`: observations no longer than `BOUNDS_MICROS[i]` (not cumulative).
    pub counts: [u64; DurationHistogram::BOUNDS_MICROS.len()],
    /// Observations longer than the last bound.
    pub overflow: u64,
    pub sum_micros: u64,
    pub count: u64,
}

impl DurationHistogram {
    /// Upper bounds of the buckets, in microseconds: 0.5 ms to 1 s.
    pub const BOUNDS_MICROS: [u64; 11] = [
        500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    ];

    pub fn observe(&mut self, micros: u64) {
        match Self::BOUNDS_MICROS.iter().position(|&b| micros <= b) {
            Some(i) => self.counts[i] += 1,
            None => self.overflow += 1,
        }
        self.sum_micros = self.sum_micros.saturating_add(micros);
        self.count += 1;
    }
}

impl State {
    pub fn new(config: Config, config_path: Option<PathBuf>, started_at: Timestamp) -> Self {
        let history = History::new(config.daemon.history);
        Self {
            started_at,
            config: Arc::new(config),
            config_path,
            snapshot: None,
            history: Arc::new(history),
            counters: Counters::default(),
            fast_mode: false,
            last_error: None,
            events: Arc::new(VecDeque::new()),
            rule_statuses: Arc::new(Vec::new()),
            actions: ActionCounts::default(),
        }
    }

    /// Take in a new snapshot: record it in the history and make it the latest.
    ///
    /// The history is copied only if a reader still holds the previous one.
    pub fn publish(&mut self, snap: Snapshot) {
        let (snap_errors, snap_micros) = (snap.errors, snap.sample_micros);
        let mut history = std::mem::take(&mut self.history);
        Arc::make_mut(&mut history).record(&snap);
        self.history = history;
        self.snapshot = Some(Arc::new(snap));
        self.counters.samples += 1;
        let e = &mut self.counters.collector_errors;
        let new = snap_errors;
        e.vanished += new.vanished;
        e.permission_denied += new.permission_denied;
        e.unreadable += new.unreadable;
        e.kernel_threads += new.kernel_threads;
        self.counters.sample_durations.observe(snap_micros);
        self.last_error = None;
    }

    /// Take in an event after it was journaled.
    pub fn add_event(&mut self, event: Event) {
        match &event.kind {
            EventKind::LimitCrossed { rule, .. } => {
                *self.actions.crossings.entry(rule.clone()).or_default() += 1;
            }
            EventKind::Action {
                rule,
                action,
                outcome,
                ..
            } => {
                let key = (
                    rule.clone(),
                    action_kind(action),
                    outcome.as_str().to_string(),
                );
                *self.actions.actions.entry(key).or_default() += 1;
            }
            EventKind::Skipped { rule, action, .. } => {
                let key = (rule.clone(), action_kind(action), "skipped".to_string());
                *self.actions.actions.entry(key).or_default() += 1;
            }
            EventKind::Exited {
                cause: Some(cause), ..
            } => {
                let key = cause.kind.as_str().to_string();
                *self.actions.exits.entry(key).or_default() += 1;
            }
            _ => {}
        }
        let events = Arc::make_mut(&mut self.events);
        if events.len() >= RECENT_EVENTS {
            events.pop_front();
        }
        events.push_back(event);
    }

    /// Apply a reloaded config.
    pub fn replace_config(&mut self, config: Config) {
        Arc::make_mut(&mut self.history).set_retention(config.daemon.history);
        self.config = Arc::new(config);
        self.counters.reloads += 1;
    }
}

/// The metric label of an action: `hook /x/y` → `hook`, `SIGINT` stays.
fn action_kind(label: &str) -> String {
    label.split_whitespace().next().unwrap_or(label).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_by_upper_bound() {
        let mut h = DurationHistogram::default();
        for micros in [0, 500, 501, 1_000_000, 1_000_001] {
            h.observe(micros);
        }
        assert_eq!(h.counts[0], 2, "0 and 500 µs are within 0.5 ms");
        assert_eq!(h.counts[1], 1);
        assert_eq!(h.counts[10], 1);
        assert_eq!(h.overflow, 1);
        assert_eq!((h.count, h.sum_micros), (5, 2_001_002));
    }
}
