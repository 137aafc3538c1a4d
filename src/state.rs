//! The daemon's published state: the latest snapshot, the recent history,
//! the effective config, the rules' statuses, counters and recent events,
//! published through a tokio `watch` channel for readers (the CLI's status
//! command, HTTP handlers, metrics). Readers only read it and clone the
//! `Arc`s they need, so they never hold up the sampler.
//!
//! Who owns what: the snapshot, the history and the config belong to the
//! daemon loop (`daemon::Working`), which hands them to the policy itself
//! and publishes copies of its `Arc`s here ([`State::publish`],
//! [`State::replace_config`]); it never reads them back from the state.
//! The counters, the events the journal handed back and the action counts
//! exist only here, for readers.
//!
//! The snapshot's JSON is made at most once per form and per sample, on
//! first use, and shared by every reader ([`SnapshotJson`]): a hundred slow
//! clients of a large snapshot hold one copy of it, not a hundred. The
//! recent events are kept encoded, within a byte budget shared out by whose
//! process each is about ([`RecentEvents`]).

mod recent_events;
pub use recent_events::{KEEPER_SHARE_BYTES, Keeper, KeptEvent, RECENT_EVENTS_BYTES, RecentEvents};

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use bytes::Bytes;

use crate::config::Config;
use crate::event::{Event, EventKind};
use crate::history::History;
use crate::model::{CollectorErrors, Snapshot, Timestamp};
use crate::pipeline::JournalHealth;
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
    /// The most recent events, oldest first, encoded ([`RecentEvents`]).
    pub events: Arc<RecentEvents>,
    /// Every rule's state for every process it watches, from the last sample.
    pub rule_statuses: Arc<Vec<RuleStatus>>,
    /// What headroom did, counted since start.
    pub actions: ActionCounts,
    /// The JSON of [`State::snapshot`], made on first use; replaced with
    /// every new snapshot.
    pub snapshot_json: Arc<SnapshotJson>,
    /// Whether events reach the journal, and why not when they do not (a
    /// journal a root daemon refused, a full disk).
    pub journal: Arc<JournalHealth>,
}

/// One JSON encoding of a snapshot: the whole document, and where each
/// process's object lies in it, so that a reader can serve the document or
/// pick processes out of it without encoding them again.
#[derive(Debug)]
pub struct EncodedSnapshot {
    /// The snapshot encoded.
    pub of: Weak<Snapshot>,
    pub json: Bytes,
    /// The inside of the process list, between its `[` and `]`.
    pub list: Range<usize>,
    /// Each process's object (`{…}`) in `json`, in the snapshot's order;
    /// consecutive objects are separated by one comma.
    pub processes: Vec<Range<usize>>,
}

/// The two forms of a snapshot's JSON the API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonForm {
    /// Every field of every process.
    Full,
    /// Every process with its command line, executable and notebook left out.
    Redacted,
}

/// The latest snapshot's JSON in each [`JsonForm`], each encoded at most
/// once, when first asked for, and shared by every reader of that snapshot.
#[derive(Debug, Default)]
pub struct SnapshotJson {
    full: OnceLock<Arc<EncodedSnapshot>>,
    redacted: OnceLock<Arc<EncodedSnapshot>>,
    encodings: AtomicU64,
}

impl SnapshotJson {
    /// The encoding of `snap` in `form`: the cached one, or `encode`'s (kept
    /// for the next reader). A snapshot other than the one cached first is
    /// encoded without being kept.
    pub fn get(
        &self,
        snap: &Arc<Snapshot>,
        form: JsonForm,
        encode: impl FnOnce(&Arc<Snapshot>) -> EncodedSnapshot,
    ) -> Arc<EncodedSnapshot> {
        let cell = match form {
            JsonForm::Full => &self.full,
            JsonForm::Redacted => &self.redacted,
        };
        let mut encode = Some(encode);
        let cached = cell.get_or_init(|| self.encode(snap, &mut encode));
        if Weak::ptr_eq(&cached.of, &Arc::downgrade(snap)) {
            return Arc::clone(cached);
        }
        self.encode(snap, &mut encode)
    }

    fn encode(
        &self,
        snap: &Arc<Snapshot>,
        encode: &mut Option<impl FnOnce(&Arc<Snapshot>) -> EncodedSnapshot>,
    ) -> Arc<EncodedSnapshot> {
        self.encodings.fetch_add(1, Ordering::Relaxed);
        match encode.take() {
            Some(f) => Arc::new(f(snap)),
            // Unreachable: each call encodes at most once.
            None => Arc::new(EncodedSnapshot {
                of: Arc::downgrade(snap),
                json: Bytes::new(),
                list: 0..0,
                processes: Vec::new(),
            }),
        }
    }

    /// How many encodings were made, in both forms.
    pub fn encodings(&self) -> u64 {
        self.encodings.load(Ordering::Relaxed)
    }
}

/// Counts of limit crossings and actions, for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionCounts {
    /// Crossings by rule.
    pub crossings: BTreeMap<String, u64>,
    /// Crossings the rule did not act on (another user's or root's process,
    /// a protected one, a cooldown...), by rule.
    pub held_not_acting: BTreeMap<String, u64>,
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
    /// How late the loop woke for its scheduled ticks and probes, against
    /// their schedule (published with each sample).
    pub wake_lateness: DurationHistogram,
}

/// A cumulative histogram of durations with fixed buckets, for the
/// `headroom_sample_duration_seconds` and `headroom_wake_lateness_seconds`
/// metrics: counts only grow.
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
    /// The state before the first sample, with a config and an empty
    /// history of its own: for readers and their tests. The daemon starts
    /// from [`State::starting`] with the loop's own.
    pub fn new(config: Config, config_path: Option<PathBuf>, started_at: Timestamp) -> Self {
        let history = Arc::new(History::new(config.daemon.history));
        Self::starting(Arc::new(config), history, config_path, started_at)
    }

    /// The state before the first sample, publishing the loop's `config`
    /// and `history`.
    pub fn starting(
        config: Arc<Config>,
        history: Arc<History>,
        config_path: Option<PathBuf>,
        started_at: Timestamp,
    ) -> Self {
        Self {
            started_at,
            config,
            config_path,
            snapshot: None,
            history,
            counters: Counters::default(),
            fast_mode: false,
            last_error: None,
            events: Arc::default(),
            rule_statuses: Arc::new(Vec::new()),
            actions: ActionCounts::default(),
            snapshot_json: Arc::default(),
            journal: Arc::default(),
        }
    }

    /// Publish a new snapshot and the history the loop recorded it in; the
    /// snapshot becomes the latest, and the sample is counted.
    ///
    /// Only `Arc`s change hands: the loop keeps its own. Returns the
    /// snapshot this one replaced, for the caller to let go of where it
    /// suits (the daemon does so on the sampler's thread).
    pub fn publish(&mut self, snap: Arc<Snapshot>, history: Arc<History>) -> Option<Arc<Snapshot>> {
        let (snap_errors, snap_micros) = (snap.errors, snap.sample_micros);
        self.history = history;
        let replaced = self.snapshot.replace(snap);
        self.snapshot_json = Arc::default();
        self.counters.samples += 1;
        let e = &mut self.counters.collector_errors;
        let new = snap_errors;
        e.vanished += new.vanished;
        e.permission_denied += new.permission_denied;
        e.unreadable += new.unreadable;
        e.kernel_threads += new.kernel_threads;
        self.counters.sample_durations.observe(snap_micros);
        self.last_error = None;
        replaced
    }

    /// Let go of the published history, so that the loop, recording into
    /// its own next, copies it only if a reader still holds it. The state
    /// holds an empty history until the next [`State::publish`].
    pub fn release_history(&mut self) {
        self.history = Arc::default();
    }

    /// Take in an event after it was journaled.
    pub fn add_event(&mut self, event: Event) {
        match &event.kind {
            EventKind::LimitCrossed { rule, .. } => {
                *self.actions.crossings.entry(rule.clone()).or_default() += 1;
            }
            EventKind::LimitHeldNotActing { rule, .. } => {
                *self
                    .actions
                    .held_not_acting
                    .entry(rule.clone())
                    .or_default() += 1;
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
        Arc::make_mut(&mut self.events).push(&event);
    }

    /// Publish a reloaded config, and the history the loop applied its
    /// retention to.
    pub fn replace_config(&mut self, config: Arc<Config>, history: Arc<History>) {
        self.config = config;
        self.history = history;
        self.counters.reloads += 1;
    }
}

/// The metric label of an action: `hook /x/y` → `hook`, `SIGINT` stays.
fn action_kind(label: &str) -> String {
    label.split_whitespace().next().unwrap_or(label).to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn encoding(snap: &Arc<Snapshot>, text: &'static str) -> EncodedSnapshot {
        EncodedSnapshot {
            of: Arc::downgrade(snap),
            json: Bytes::from_static(text.as_bytes()),
            list: 0..0,
            processes: Vec::new(),
        }
    }

    #[test]
    fn snapshot_json_is_encoded_once_per_form() {
        let json = SnapshotJson::default();
        let snap = Arc::new(Snapshot::default());
        let a = json.get(&snap, JsonForm::Full, |s| encoding(s, "full"));
        let b = json.get(&snap, JsonForm::Full, |_| panic!("encoded twice"));
        assert!(Arc::ptr_eq(&a, &b));
        let r = json.get(&snap, JsonForm::Redacted, |s| encoding(s, "redacted"));
        assert_eq!(&r.json[..], b"redacted");
        assert_eq!(json.encodings(), 2);
    }

    #[test]
    fn another_snapshot_is_not_served_from_the_cache() {
        let json = SnapshotJson::default();
        let first = Arc::new(Snapshot::default());
        let second = Arc::new(Snapshot::default());
        json.get(&first, JsonForm::Full, |s| encoding(s, "first"));
        let got = json.get(&second, JsonForm::Full, |s| encoding(s, "second"));
        assert_eq!(&got.json[..], b"second");
    }

    /// Publish `snap` with the state's own history, as a reader's test would.
    fn publish(state: &mut State, snap: Snapshot) -> Option<Arc<Snapshot>> {
        let history = Arc::clone(&state.history);
        state.publish(Arc::new(snap), history)
    }

    #[test]
    fn a_new_snapshot_gets_a_new_cache() {
        let mut state = State::new(Config::default(), None, Timestamp(0));
        publish(&mut state, Snapshot::default());
        let before = Arc::clone(&state.snapshot_json);
        state.add_event(Event {
            at: Timestamp(1),
            kind: EventKind::Stopped,
        });
        assert!(Arc::ptr_eq(&before, &state.snapshot_json), "same snapshot");
        publish(&mut state, Snapshot::default());
        assert!(!Arc::ptr_eq(&before, &state.snapshot_json));
    }

    #[test]
    fn publishing_hands_back_the_snapshot_it_replaced() {
        let mut state = State::new(Config::default(), None, Timestamp(0));
        assert!(publish(&mut state, Snapshot::default()).is_none());
        let first = state.snapshot.clone().expect("published");
        let replaced = publish(
            &mut state,
            Snapshot {
                taken_at: Timestamp(1),
                ..Snapshot::default()
            },
        );
        assert!(replaced.is_some_and(|r| Arc::ptr_eq(&r, &first)));
        assert_eq!(
            state.snapshot.as_ref().map(|s| s.taken_at),
            Some(Timestamp(1))
        );
    }

    #[test]
    fn publishing_stores_the_loops_history_and_counts_the_sample() {
        let mut state = State::new(Config::default(), None, Timestamp(0));
        let mut history = History::new(Duration::from_secs(60));
        let snap = Snapshot {
            taken_at: Timestamp(5),
            sample_micros: 700,
            errors: CollectorErrors {
                vanished: 2,
                ..CollectorErrors::default()
            },
            ..Snapshot::default()
        };
        history.record(&snap);
        let history = Arc::new(history);
        state.last_error = Some("an earlier failure".into());
        state.publish(Arc::new(snap), Arc::clone(&history));
        assert!(Arc::ptr_eq(&state.history, &history), "not a copy");
        assert_eq!(state.history.system().len(), 1);
        assert_eq!(state.counters.samples, 1);
        assert_eq!(state.counters.collector_errors.vanished, 2);
        assert_eq!(state.counters.sample_durations.count, 1);
        assert_eq!(state.last_error, None, "a good sample clears the error");
    }

    #[test]
    fn releasing_the_history_drops_the_states_reference() {
        let mut state = State::new(Config::default(), None, Timestamp(0));
        let held = Arc::clone(&state.history);
        assert_eq!(Arc::strong_count(&held), 2);
        state.release_history();
        assert_eq!(Arc::strong_count(&held), 1);
    }

    #[test]
    fn a_replaced_config_is_published_with_its_history_and_counted() {
        let mut state = State::new(Config::default(), None, Timestamp(0));
        let mut config = Config::default();
        config.daemon.dry_run = !state.config.daemon.dry_run;
        let config = Arc::new(config);
        let history = Arc::new(History::new(Duration::from_secs(7)));
        state.replace_config(Arc::clone(&config), Arc::clone(&history));
        assert!(Arc::ptr_eq(&state.config, &config));
        assert!(Arc::ptr_eq(&state.history, &history));
        assert_eq!(state.counters.reloads, 1);
    }

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
