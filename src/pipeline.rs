//! The downstream half of the data flow: decisions go to the actuator thread,
//! every event (the policy's, the actuator's, the daemon's own) goes to the
//! journal thread, which appends it durably and then hands it back to the
//! daemon loop for the shared state.
//!
//! Both threads block (signals, hooks' start, fsync), so neither runs on the
//! async workers, and a slow disk never delays a signal: the actuator does
//! not wait for the journal.
//!
//! The journal thread writes each event to its file set ([`Journals`]),
//! a user's process events within that user's share ([`Shares`]): the
//! events past it are counted, and the summary written when the user's
//! window ends (the thread wakes for it) or before the daemon's `stopped`.
//! Every event, written or counted, goes on to the daemon loop: the
//! metrics count them all.
//!
//! A journal that cannot be opened (a root daemon refuses one a user could
//! change, see [`Journals::open_checked`]) never stops the daemon: the
//! refusal is logged as an error, events are kept in memory only (they still
//! reach the shared state), every event not written is counted, and the
//! journal is tried again every [`JOURNAL_RETRY`], so a fixed one is taken
//! up without a restart. [`Pipeline::journal_health`] says how it stands.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tracing::{error, info, warn};

use crate::act::{Actuator, ActuatorOptions};
use crate::event::{Event, EventKind};
use crate::journal::shares::Shares;
use crate::journal::{JournalOptions, Journals};
use crate::model::Timestamp;
use crate::policy::Decision;
use crate::report::rate_limit::RateLimit;

/// How long after a failed open the journal is tried again (at the next
/// event after that).
pub const JOURNAL_RETRY: Duration = Duration::from_secs(60);

/// How the journal stands, shared between the journal thread and readers.
#[derive(Debug, Default)]
pub struct JournalHealth {
    /// Why events are not being written, while they are not (the open
    /// failed or was refused); `None` while the journal is written.
    problem: Mutex<Option<String>>,
    /// Events that were not written: no journal, or a failed write.
    unwritten: AtomicU64,
    /// Times the journal could not be opened (refusals included).
    open_failures: AtomicU64,
}

impl JournalHealth {
    /// Why events are not being written, if they are not.
    pub fn problem(&self) -> Option<String> {
        self.problem.lock().map_or(None, |p| p.clone())
    }

    /// Events not written to the journal so far.
    pub fn unwritten(&self) -> u64 {
        self.unwritten.load(Ordering::Relaxed)
    }

    /// Failed or refused attempts to open the journal so far.
    pub fn open_failures(&self) -> u64 {
        self.open_failures.load(Ordering::Relaxed)
    }

    fn set_problem(&self, problem: Option<String>) {
        if let Ok(mut p) = self.problem.lock() {
            *p = problem;
        }
    }
}

/// Opens the journal as the daemon's user requires: checked as root.
struct Opener {
    /// `None`: no journal is kept (a replay not told where to keep one).
    path: Option<PathBuf>,
    opts: JournalOptions,
    /// A replay's journal: every line marked as a replay.
    replay: bool,
    /// `Some(0)` for a root daemon: only root may be able to change it.
    trusted_uid: Option<u32>,
    /// How long after a failed open to try again.
    retry: Duration,
}

impl Opener {
    fn open(&self, health: &JournalHealth) -> Option<Journals> {
        let path = self.path.as_deref()?;
        let opened = match self.trusted_uid {
            Some(uid) => Journals::open_checked(path, self.opts, uid),
            None => Journals::open(path, self.opts),
        };
        match opened {
            Ok(j) => {
                health.set_problem(None);
                Some(if self.replay { j.marked_as_replay() } else { j })
            }
            Err(e) => {
                health.open_failures.fetch_add(1, Ordering::Relaxed);
                health.set_problem(Some(e.to_string()));
                None
            }
        }
    }
}

/// The running threads and the ends of their channels the daemon holds.
pub struct Pipeline {
    decisions: Option<mpsc::Sender<Decision>>,
    events: Option<mpsc::Sender<Event>>,
    /// Events after they were journaled, for the shared state.
    pub journaled: UnboundedReceiver<Event>,
    actuator: Option<JoinHandle<()>>,
    journal: Option<JoinHandle<()>>,
    health: Arc<JournalHealth>,
}

impl Pipeline {
    /// Start the actuator and journal threads. The journal is opened
    /// checked when headroom runs as root ([`Journals::open_checked`]); one
    /// that cannot be opened is logged, and events are then kept in memory
    /// only until a later try succeeds. `None` keeps no journal.
    pub fn start(journal_path: Option<PathBuf>, journal_opts: JournalOptions) -> Self {
        let trusted_uid = crate::os::this_process::running_as_root().then_some(0);
        Self::start_inner(
            Mode::Live,
            journal_path,
            journal_opts,
            trusted_uid,
            JOURNAL_RETRY,
        )
    }

    /// The pipeline of a replay: its actuator carries out nothing
    /// ([`ActuatorOptions::replay`]), and its journal, if it keeps one
    /// (`journal_path`), marks every line as a replay.
    pub fn start_replay(journal_path: Option<PathBuf>, journal_opts: JournalOptions) -> Self {
        let trusted_uid = crate::os::this_process::running_as_root().then_some(0);
        Self::start_inner(
            Mode::Replay,
            journal_path,
            journal_opts,
            trusted_uid,
            JOURNAL_RETRY,
        )
    }

    /// [`Pipeline::start`] with the journal's check chosen by the caller:
    /// `trusted_uid` `Some(uid)` opens it with [`Journals::open_checked`].
    pub fn start_with(
        journal_path: PathBuf,
        journal_opts: JournalOptions,
        trusted_uid: Option<u32>,
    ) -> Self {
        Self::start_inner(
            Mode::Live,
            Some(journal_path),
            journal_opts,
            trusted_uid,
            JOURNAL_RETRY,
        )
    }

    fn start_inner(
        mode: Mode,
        journal_path: Option<PathBuf>,
        journal_opts: JournalOptions,
        trusted_uid: Option<u32>,
        retry: Duration,
    ) -> Self {
        let (events_tx, events_rx) = mpsc::channel::<Event>();
        let (decisions_tx, decisions_rx) = mpsc::channel::<Decision>();
        let (journaled_tx, journaled) = unbounded_channel();

        let health = Arc::new(JournalHealth::default());
        let replay = mode == Mode::Replay;
        let opener = Opener {
            path: journal_path,
            opts: journal_opts,
            replay,
            trusted_uid,
            retry,
        };
        let journal = opener.open(&health);
        match (&journal, health.problem(), &opener.path) {
            (Some(_), _, Some(path)) if replay => {
                info!(
                    "journal: {} (every line marked as a replay)",
                    path.display()
                );
            }
            (Some(_), _, Some(path)) => info!("journal: {}", path.display()),
            (_, _, None) => info!("no journal: events are kept in memory only"),
            (None, problem, Some(_)) => error!(
                "{}; events are kept in memory only, and the journal is tried again every {}",
                problem.unwrap_or_default(),
                crate::config::format_duration(opener.retry)
            ),
        }
        let thread_health = Arc::clone(&health);
        let journal = std::thread::Builder::new()
            .name("headroom-journal".into())
            .spawn(move || {
                journal_thread(opener, journal, events_rx, journaled_tx, &thread_health);
            })
            .map_err(|e| error!("cannot start the journal thread: {e}"))
            .ok();

        let actuator_events = events_tx.clone();
        let actuator = std::thread::Builder::new()
            .name("headroom-actuator".into())
            .spawn(move || {
                let opts = ActuatorOptions {
                    replay,
                    ..ActuatorOptions::default()
                };
                let mut actuator = Actuator::new(opts, actuator_events);
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
            health,
        }
    }

    /// How the journal stands: why it is not written (if it is not), and
    /// how many events were not written.
    pub fn journal_health(&self) -> Arc<JournalHealth> {
        Arc::clone(&self.health)
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

/// A live daemon's pipeline, or a replay's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Live,
    Replay,
}

fn journal_thread(
    opener: Opener,
    mut journal: Option<Journals>,
    events: mpsc::Receiver<Event>,
    journaled: UnboundedSender<Event>,
    health: &JournalHealth,
) {
    let mut writer = Writer {
        failures: 0,
        failure_log: RateLimit::default(),
        health,
    };
    let mut shares = Shares::default();
    let mut last_try = Instant::now();
    loop {
        for summary in shares.due(Timestamp::now()) {
            writer.write(&mut journal, &summary);
        }
        let next = shares.next_due();
        let received = match next {
            Some(due) => events.recv_timeout(due.since(Timestamp::now())),
            None => events
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        let event = match received {
            Ok(event) => event,
            // A summary is due.
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        if journal.is_none() && opener.path.is_some() && last_try.elapsed() >= opener.retry {
            last_try = Instant::now();
            let before = health.problem();
            journal = opener.open(health);
            match (&journal, health.problem()) {
                (Some(_), _) => info!(
                    "journal: {} can be written now; events from here on are kept",
                    opener.path.as_deref().unwrap_or(Path::new("")).display()
                ),
                // Said once per problem, not every minute.
                (None, Some(now)) if before.as_deref() != Some(now.as_str()) => {
                    error!("{now}; events are kept in memory only");
                }
                (None, _) => {}
            }
        }
        if matches!(event.kind, EventKind::Stopped) {
            // The counts of the windows still open go before the stop.
            for summary in shares.drain(event.at) {
                writer.write(&mut journal, &summary);
            }
        }
        // Shares follow the events' own times, so that a summary's span
        // holds the events it counts.
        if shares.admit(&event, event.at) {
            writer.write(&mut journal, &event);
        }
        // The daemon loop may have stopped first at shutdown: nothing to do.
        let _ = journaled.send(event);
    }
    for summary in shares.drain(Timestamp::now()) {
        writer.write(&mut journal, &summary);
    }
}

/// Writes events to the journal, counting and logging (rate-limited) the
/// ones that could not be written.
struct Writer<'a> {
    failures: u64,
    failure_log: RateLimit,
    health: &'a JournalHealth,
}

impl Writer<'_> {
    fn write(&mut self, journal: &mut Option<Journals>, event: &Event) {
        let written = match journal.as_mut() {
            Some(j) => match j.append(event) {
                Ok(()) => true,
                Err(e) => {
                    self.failures += 1;
                    if self.failure_log.due(Instant::now()).is_some() {
                        warn!("journal write failed ({} so far): {e}", self.failures);
                    }
                    false
                }
            },
            None => false,
        };
        if !written {
            self.health.unwritten.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn stopped() -> EventKind {
        EventKind::Stopped
    }

    fn ended(uid: u32, pid: u32) -> EventKind {
        EventKind::Exited {
            process: crate::event::ProcessRef {
                pid,
                start: 1,
                name: "python3".into(),
                user: Some("mallory".into()),
                uid: Some(uid),
                workload: crate::model::WorkloadKind::Jupyter,
                footprint: 10,
                kernel_id: None,
                notebook: None,
                labels: None,
            },
            last_action: None,
            peak_footprint: 10,
            last_growth_bytes_per_second: None,
            headroom_action: None,
            cause: None,
            job: None,
            worker_of: None,
        }
    }

    #[test]
    fn a_users_flood_of_post_mortems_leaves_the_record_whole_and_is_summarised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let opts = JournalOptions {
            max_bytes: 64 * 1024,
            keep: 2,
        };
        let mut p =
            Pipeline::start_inner(Mode::Live, Some(path.clone()), opts, None, JOURNAL_RETRY);
        let t0 = Timestamp::now();
        let at = |ms: u64| t0.plus(Duration::from_millis(ms));
        p.record_at(
            at(0),
            EventKind::Started {
                version: "1".into(),
                config: None,
                dry_run: false,
            },
        );
        for pid in 0..5000 {
            p.record_at(at(1 + u64::from(pid) / 100), ended(999, pid));
        }
        p.record_at(at(50), ended(1000, 1));
        p.record_at(at(100), stopped());
        let mut handed_back = 0;
        while handed_back < 5003 {
            assert!(p.journaled.blocking_recv().is_some());
            handed_back += 1;
        }
        p.shut_down();
        let read = crate::journal::read_events(&path, None).unwrap();
        let names: Vec<&str> = read.events.iter().map(|e| e.kind.name()).collect();
        assert_eq!(names.first(), Some(&"started"));
        assert_eq!(names.last(), Some(&"stopped"));
        let full = |uid| {
            read.events
                .iter()
                .filter(|e| matches!(&e.kind, EventKind::Exited { process, .. } if process.uid == Some(uid)))
                .count()
        };
        assert_eq!(full(999), 100);
        assert_eq!(full(1000), 1);
        let summaries: Vec<_> = read
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::EventsSummarized { uid, left_out, .. } => Some((*uid, left_out.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(summaries.len(), 1);
        assert_eq!(summaries[0].0, Some(999));
        assert_eq!(summaries[0].1.get("exited"), Some(&4900));
        // The summary is written before the stop.
        assert_eq!(names[names.len() - 2], "events-summarized");
    }

    #[test]
    fn a_refused_journal_loses_no_event_for_the_daemon_and_is_taken_up_once_fixed() {
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(&base).unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, "forged\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let uid = crate::os::this_process::effective_uid();

        let mut p = Pipeline::start_inner(
            Mode::Live,
            Some(path.clone()),
            JournalOptions::default(),
            Some(uid),
            Duration::ZERO,
        );
        let health = p.journal_health();
        let problem = health.problem().expect("the journal is refused");
        assert!(
            problem.contains(&format!(
                "{} is writable by users other than root (mode 0666)",
                path.display()
            )),
            "{problem}"
        );
        assert_eq!(health.open_failures(), 1);
        p.record(stopped());
        // The daemon still gets the event, for its state.
        assert!(p.journaled.blocking_recv().is_some());
        assert_eq!(health.unwritten(), 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "forged\n");

        // Fixed as the message says: the next event reopens and is written.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        p.record(stopped());
        assert!(p.journaled.blocking_recv().is_some());
        assert_eq!(health.problem(), None);
        assert_eq!(health.unwritten(), 1);
        p.shut_down();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.starts_with("forged\n{"), "{text}");
    }
}
