//! Each user's share of the journal's process events.
//!
//! Post-mortems and limit crossings are about users' processes, and a user
//! decides how many processes they start: a thousand short-lived processes
//! that look like Jupyter kernels are a thousand post-mortems a second.
//! Written in full, one user's flood would fill the process-event files
//! (see [`crate::journal`]) and push every other user's post-mortems out of
//! them, and cost an fsync each. So each user (by uid, the kernel's word
//! for who owns a process) gets [`SHARE_EVENTS`] process events in full per
//! [`SHARE_WINDOW`], counted from that user's first event; past its share,
//! the user's events are counted, and when the window ends one
//! `events-summarized` event says how many of each kind were left out (and
//! the post-mortems among them by cause). A daemon stopped mid-window writes
//! the summaries first ([`Shares::drain`]); one killed loses that window's
//! count.
//!
//! Outside the shares: the record's events (actions, skipped steps, the
//! daemon's start, stop and reloads: [`FileSet::Record`]), and the
//! post-mortem of a process headroom acted on (there is one per action at
//! most, and it says what the action did).
//!
//! Pure: the time is passed in.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::FileSet;
use crate::event::{Event, EventKind, ProcessRef};
use crate::model::Timestamp;

/// How long a user's share lasts before it starts again.
pub const SHARE_WINDOW: Duration = Duration::from_secs(60);
/// Process events of one user written in full per [`SHARE_WINDOW`].
pub const SHARE_EVENTS: u64 = 100;
/// Users with a window open at once; the events of users beyond it share
/// the share of processes whose owner is unknown. Far more than a machine
/// has users: a user cannot start processes under uids of their choosing.
const MAX_USERS: usize = 4096;

/// One user's window.
#[derive(Debug, Clone)]
struct Share {
    since: Timestamp,
    user: Option<String>,
    written: u64,
    left_out: BTreeMap<&'static str, u64>,
    causes: BTreeMap<&'static str, u64>,
}

impl Share {
    fn left_out(&self) -> u64 {
        self.left_out.values().fold(0, |a, n| a.saturating_add(*n))
    }

    fn summary(self, uid: Option<u32>, at: Timestamp) -> Event {
        let names = |m: BTreeMap<&'static str, u64>| {
            m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        };
        Event {
            at,
            kind: EventKind::EventsSummarized {
                uid,
                user: self.user,
                since: self.since,
                written: self.written,
                left_out: names(self.left_out),
                causes: names(self.causes),
            },
        }
    }
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Shares {
    window: Duration,
    events: u64,
    users: HashMap<Option<u32>, Share>,
}

impl Default for Shares {
    /// [`SHARE_EVENTS`] per [`SHARE_WINDOW`].
    fn default() -> Self {
        Self::new(SHARE_WINDOW, SHARE_EVENTS)
    }
}

impl Shares {
    /// `events` in full per user and `window`.
    pub fn new(window: Duration, events: u64) -> Self {
        Self {
            window,
            events,
            users: HashMap::new(),
        }
    }

    /// Whether to write `event`, which arrives at `now`, in full: `true` for
    /// an event outside the shares, and for a user's process event while the
    /// user's share lasts; otherwise `false`, and the event is counted for
    /// the user's summary.
    pub fn admit(&mut self, event: &Event, now: Timestamp) -> bool {
        let Some(process) = shared(&event.kind) else {
            return true;
        };
        let full = self.users.len() >= MAX_USERS;
        let key = match process.uid {
            Some(uid) if !full || self.users.contains_key(&Some(uid)) => Some(uid),
            _ => None,
        };
        let share = self.users.entry(key).or_insert_with(|| Share {
            since: now,
            user: if key.is_some() {
                process.user.clone()
            } else {
                None
            },
            written: 0,
            left_out: BTreeMap::new(),
            causes: BTreeMap::new(),
        });
        if share.written < self.events {
            share.written += 1;
            return true;
        }
        *share.left_out.entry(event.kind.name()).or_default() += 1;
        if let EventKind::Exited {
            cause: Some(cause), ..
        } = &event.kind
        {
            *share.causes.entry(cause.kind.as_str()).or_default() += 1;
        }
        false
    }

    /// The summaries of the windows that have ended by `now` with events
    /// left out, oldest first; every ended window is forgotten, so the
    /// user's next event starts a new one.
    pub fn due(&mut self, now: Timestamp) -> Vec<Event> {
        let window = self.window;
        let ended = |s: &Share| now < s.since || now.since(s.since) >= window;
        let keys: Vec<Option<u32>> = self
            .users
            .iter()
            .filter(|(_, s)| ended(s))
            .map(|(k, _)| *k)
            .collect();
        self.summaries(keys, now)
    }

    /// When the next summary falls due, if any is pending.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.users
            .values()
            .filter(|s| s.left_out() > 0)
            .map(|s| s.since.plus(self.window))
            .min()
    }

    /// The summaries of every window with events left out, ended or not
    /// (the daemon is stopping), oldest first; every window is forgotten.
    pub fn drain(&mut self, now: Timestamp) -> Vec<Event> {
        let keys: Vec<Option<u32>> = self.users.keys().copied().collect();
        self.summaries(keys, now)
    }

    fn summaries(&mut self, keys: Vec<Option<u32>>, now: Timestamp) -> Vec<Event> {
        let mut ended: Vec<(Option<u32>, Share)> = keys
            .into_iter()
            .filter_map(|k| self.users.remove(&k).map(|s| (k, s)))
            .filter(|(_, s)| s.left_out() > 0)
            .collect();
        ended.sort_by_key(|(uid, s)| (s.since, *uid));
        ended
            .into_iter()
            .map(|(uid, s)| s.summary(uid, now))
            .collect()
    }
}

/// The process whose owner's share `kind` counts against, if it is one of
/// the shared events: a process event ([`FileSet::Processes`]) but for the
/// post-mortem of a process headroom acted on.
fn shared(kind: &EventKind) -> Option<&ProcessRef> {
    if FileSet::of(kind) != FileSet::Processes {
        return None;
    }
    match kind {
        EventKind::Exited {
            headroom_action: Some(_),
            ..
        }
        | EventKind::Exited {
            last_action: Some(_),
            ..
        } => None,
        EventKind::Exited { process, .. }
        | EventKind::LimitCrossed { process, .. }
        | EventKind::LimitHeldNotActing { process, .. }
        | EventKind::LimitCleared { process, .. } => Some(process),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ActionTaken, ExitCause, ExitCauseKind, Outcome};
    use crate::model::WorkloadKind;

    const MINUTE: Duration = Duration::from_secs(60);

    fn process(uid: Option<u32>) -> ProcessRef {
        ProcessRef {
            pid: 7,
            start: 1,
            name: "python3".into(),
            user: uid.map(|u| format!("user{u}")),
            uid,
            workload: WorkloadKind::Jupyter,
            footprint: 10,
            kernel_id: None,
            notebook: None,
            labels: None,
        }
    }

    fn exited(uid: Option<u32>) -> Event {
        Event {
            at: Timestamp(0),
            kind: EventKind::Exited {
                process: process(uid),
                last_action: None,
                peak_footprint: 10,
                last_growth_bytes_per_second: None,
                headroom_action: None,
                cause: Some(ExitCause {
                    kind: ExitCauseKind::Unknown,
                    ..ExitCause::default()
                }),
                job: None,
                worker_of: None,
            },
        }
    }

    fn crossed(uid: Option<u32>) -> Event {
        Event {
            at: Timestamp(0),
            kind: EventKind::LimitCrossed {
                rule: "r".into(),
                process: process(uid),
                detail: "footprint".into(),
            },
        }
    }

    fn at(s: u64) -> Timestamp {
        Timestamp(1_000_000 + s * 1000)
    }

    #[expect(clippy::type_complexity, reason = "a summary's fields, for comparing")]
    fn summary(
        e: &Event,
    ) -> (
        Option<u32>,
        Timestamp,
        u64,
        Vec<(&str, u64)>,
        Vec<(&str, u64)>,
    ) {
        let EventKind::EventsSummarized {
            uid,
            since,
            written,
            left_out,
            causes,
            ..
        } = &e.kind
        else {
            panic!("{e:?}")
        };
        fn pairs(m: &BTreeMap<String, u64>) -> Vec<(&str, u64)> {
            m.iter().map(|(k, v)| (k.as_str(), *v)).collect()
        }
        (*uid, *since, *written, pairs(left_out), pairs(causes))
    }

    #[test]
    fn a_user_gets_its_share_in_full_then_is_counted() {
        let mut s = Shares::new(MINUTE, 3);
        let admitted: Vec<bool> = (0..5).map(|i| s.admit(&exited(Some(1)), at(i))).collect();
        assert_eq!(admitted, [true, true, true, false, false]);
        assert!(!s.admit(&crossed(Some(1)), at(6)));
        assert_eq!(s.next_due(), Some(at(60)));
        assert!(s.due(at(59)).is_empty());
        let due = s.due(at(60));
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].at, at(60));
        assert_eq!(
            summary(&due[0]),
            (
                Some(1),
                at(0),
                3,
                vec![("exited", 2), ("limit-crossed", 1)],
                vec![("unknown", 2)]
            )
        );
        let EventKind::EventsSummarized { user, .. } = &due[0].kind else {
            unreachable!()
        };
        assert_eq!(user.as_deref(), Some("user1"));
        // A new window, a new share.
        assert_eq!(s.next_due(), None);
        assert!(s.admit(&exited(Some(1)), at(61)));
    }

    #[test]
    fn one_users_flood_leaves_another_users_share_whole() {
        let mut s = Shares::new(MINUTE, 2);
        for i in 0..1000 {
            s.admit(&exited(Some(1)), at(i % 50));
        }
        assert!(s.admit(&exited(Some(2)), at(50)));
        assert!(s.admit(&exited(Some(2)), at(51)));
        let due = s.due(at(120));
        assert_eq!(due.len(), 1, "only the flooding user is summarised");
        assert_eq!(summary(&due[0]).3, vec![("exited", 998)]);
    }

    #[test]
    fn a_window_that_left_nothing_out_is_forgotten_without_a_summary() {
        let mut s = Shares::new(MINUTE, 5);
        assert!(s.admit(&exited(Some(1)), at(0)));
        assert_eq!(s.next_due(), None);
        assert!(s.due(at(60)).is_empty());
        assert!(s.users.is_empty());
    }

    #[test]
    fn the_record_and_posts_mortems_of_acted_on_processes_are_outside_the_shares() {
        let mut s = Shares::new(MINUTE, 0);
        let action = Event {
            at: Timestamp(0),
            kind: EventKind::Action {
                rule: "r".into(),
                process: process(Some(1)),
                step: 0,
                action: "SIGTERM".into(),
                outcome: Outcome::Done,
                dry_run: false,
                detail: String::new(),
            },
        };
        assert!(s.admit(&action, at(0)));
        assert!(s.admit(
            &Event {
                at: Timestamp(0),
                kind: EventKind::Started {
                    version: "1".into(),
                    config: None,
                    dry_run: false
                }
            },
            at(0)
        ));
        let mut acted = exited(Some(1));
        if let EventKind::Exited {
            headroom_action, ..
        } = &mut acted.kind
        {
            *headroom_action = Some(ActionTaken {
                rule: "r".into(),
                step: 0,
                action: "SIGTERM".into(),
                at: Timestamp(0),
            });
        }
        assert!(s.admit(&acted, at(0)));
        assert!(!s.admit(&exited(Some(1)), at(0)));
    }

    #[test]
    fn a_stop_summarises_the_open_windows_oldest_first() {
        let mut s = Shares::new(MINUTE, 0);
        s.admit(&exited(Some(2)), at(5));
        s.admit(&exited(None), at(1));
        let due = s.drain(at(10));
        let who: Vec<Option<u32>> = due.iter().map(|e| summary(e).0).collect();
        assert_eq!(who, [None, Some(2)]);
        assert!(s.users.is_empty());
    }

    #[test]
    fn a_clock_that_goes_back_ends_the_window() {
        let mut s = Shares::new(MINUTE, 0);
        s.admit(&exited(Some(1)), at(30));
        assert_eq!(s.due(at(10)).len(), 1);
    }

    #[test]
    fn users_beyond_the_limit_share_the_unknown_owners_share() {
        let mut s = Shares::new(MINUTE, 1);
        for uid in 0..MAX_USERS as u32 {
            s.admit(&exited(Some(uid)), at(0));
        }
        assert_eq!(s.users.len(), MAX_USERS);
        assert!(s.admit(&exited(Some(100_000)), at(0)));
        assert!(!s.admit(&exited(Some(100_001)), at(0)));
        assert_eq!(s.users.len(), MAX_USERS + 1);
        let unknown = s.users.get(&None).expect("the shared window");
        assert_eq!(unknown.user, None);
    }
}
