//! The downstream half of the data flow: decisions go to the actuator thread,
//! every event (the policy's, the actuator's, the daemon's own) goes to the
//! journal thread, which appends it durably and then hands it back to the
//! daemon loop for the shared state.
//!
//! Both threads block (signals, hooks' start, fsync), so neither runs on the
//! async workers, and a slow disk never delays a signal: the actuator does
//! not wait for the journal.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tracing::{error, info, warn};

use crate::act::{Actuator, ActuatorOptions};
use crate::event::{Event, EventKind};
use crate::journal::{Journal, JournalOptions};
use crate::model::Timestamp;
use crate::policy::Decision;

/// Log a failing journal write at most once per this many failures.
const JOURNAL_FAILURE_LOG_EVERY: u64 = 100;

/// The running threads and the ends of their channels the daemon holds.
pub struct Pipeline {
    decisions: Option<mpsc::Sender<Decision>>,
    events: Option<mpsc::Sender<Event>>,
    /// Events after they were journaled, for the shared state.
    pub journaled: UnboundedReceiver<Event>,
    actuator: Option<JoinHandle<()>>,
    journal: Option<JoinHandle<()>>,
}

impl Pipeline {
    /// Start the actuator and journal threads. A journal that cannot be
    /// opened is logged and events are then kept in memory only.
    pub fn start(journal_path: PathBuf, journal_opts: JournalOptions) -> Self {
        let (events_tx, events_rx) = mpsc::channel::<Event>();
        let (decisions_tx, decisions_rx) = mpsc::channel::<Decision>();
        let (journaled_tx, journaled) = unbounded_channel();

        let journal = match Journal::open(&journal_path, journal_opts) {
            Ok(j) => {
                info!("journal: {}", journal_path.display());
                Some(j)
            }
            Err(e) => {
                error!("cannot open the journal, events are kept in memory only: {e}");
                None
            }
        };
        let journal = std::thread::Builder::new()
            .name("headroom-journal".into())
            .spawn(move || journal_thread(journal, events_rx, journaled_tx))
            .map_err(|e| error!("cannot start the journal thread: {e}"))
            .ok();

        let actuator_events = events_tx.clone();
        let actuator = std::thread::Builder::new()
            .name("headroom-actuator".into())
            .spawn(move || {
                let mut actuator = Actuator::new(ActuatorOptions::default(), actuator_events);
                for d in decisions_rx {
                    actuator.execute(&d);
                }
            })
            .map_err(|e| error!("cannot start the actuator thread: {e}"))
            .ok();

        Self {
            decisions: Some(decisions_tx),
            events: Some(events_tx),
            journaled,
            actuator,
            journal,
        }
    }

    /// Hand a decision to the actuator.
    pub fn act(&self, d: Decision) {
        if let Some(tx) = &self.decisions
            && tx.send(d).is_err()
        {
            error!("the actuator thread has stopped: a decision was dropped");
        }
    }

    /// Journal an event that happened now.
    pub fn record(&self, kind: EventKind) {
        self.record_at(Timestamp::now(), kind);
    }

    /// Journal an event that happened at `at`.
    pub fn record_at(&self, at: Timestamp, kind: EventKind) {
        if let Some(tx) = &self.events
            && tx.send(Event { at, kind }).is_err()
        {
            error!("the journal thread has stopped: an event was dropped");
        }
    }

    /// Stop both threads after they have done what was queued: pending
    /// decisions are carried out and every event is journaled.
    pub fn shut_down(mut self) {
        self.decisions = None;
        if let Some(h) = self.actuator.take()
            && h.join().is_err()
        {
            error!("the actuator thread panicked");
        }
        self.events = None;
        if let Some(h) = self.journal.take()
            && h.join().is_err()
        {
            error!("the journal thread panicked");
        }
    }
}

fn journal_thread(
    mut journal: Option<Journal>,
    events: mpsc::Receiver<Event>,
    journaled: UnboundedSender<Event>,
) {
    let mut failures = 0u64;
    for event in events {
        if let Some(j) = journal.as_mut()
            && let Err(e) = j.append(&event)
        {
            failures += 1;
            if failures == 1 || failures.is_multiple_of(JOURNAL_FAILURE_LOG_EVERY) {
                warn!("journal write failed ({failures} so far): {e}");
            }
        }
        // The daemon loop may have stopped first at shutdown: nothing to do.
        let _ = journaled.send(event);
    }
}
