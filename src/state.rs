//! The daemon's shared state: the latest snapshot, the recent history and the
//! effective config, published through a tokio `watch` channel after every
//! sample. Readers (the CLI's status command, HTTP handlers) only read it and
//! clone the `Arc`s they need, so they never hold up the sampler.

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::Config;
use crate::history::History;
use crate::model::{Snapshot, Timestamp};

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
}

/// Monotonic counts since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub samples: u64,
    pub sample_failures: u64,
    pub pressure_events: u64,
    pub reloads: u64,
    pub reload_failures: u64,
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
        }
    }

    /// Take in a new snapshot: record it in the history and make it the latest.
    ///
    /// The history is copied only if a reader still holds the previous one.
    pub fn publish(&mut self, snap: Snapshot) {
        let mut history = std::mem::take(&mut self.history);
        Arc::make_mut(&mut history).record(&snap);
        self.history = history;
        self.snapshot = Some(Arc::new(snap));
        self.counters.samples += 1;
        self.last_error = None;
    }

    /// Apply a reloaded config.
    pub fn replace_config(&mut self, config: Config) {
        Arc::make_mut(&mut self.history).set_retention(config.daemon.history);
        self.config = Arc::new(config);
        self.counters.reloads += 1;
    }
}
