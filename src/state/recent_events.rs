//! The recent events the published state keeps for readers
//! (`/api/v1/events`; the journal keeps them all), bounded by bytes and
//! shared out by whose process each event is about.
//!
//! Every user can make events happen: a short-lived Jupyter kernel gets a
//! post-mortem when it ends, a process that crosses a limit gets a crossing.
//! So the events are kept within [`RECENT_EVENTS_BYTES`], and each
//! [`Keeper`] (the daemon's own events; the actions taken on one uid's
//! processes; what was seen of one uid's processes) within
//! [`KEEPER_SHARE_BYTES`]. A new event first pushes out the oldest of its
//! own keeper's past its share; past the whole budget, the keeper of seen
//! events that holds the most gives up its oldest, then, only where no seen
//! event is left, the keeper of actions that holds the most. The daemon's
//! own events (start, stop, config reloads) are never pushed out by
//! anyone else's, and its actions never by what it saw: a user who makes a
//! thousand kernels die pushes out their own post-mortems, not the signals
//! the daemon sent or anyone else's events.
//!
//! Each event is encoded once, when it is kept, in the two forms the API
//! serves ([`KeptEvent::full`] and [`KeptEvent::redacted`]); an answer is a
//! list of slices of those buffers, however many clients ask.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

use crate::event::Event;
use crate::model::Timestamp;

/// The most bytes the kept events may take, both forms of each counted.
pub const RECENT_EVENTS_BYTES: usize = 4 << 20;

/// The most bytes one [`Keeper`]'s events may take.
pub const KEEPER_SHARE_BYTES: usize = 512 << 10;

/// What one kept event costs besides its two encodings (its entry, its
/// place in its keeper's queue).
const ENTRY_OVERHEAD: usize = 128;

/// Whose share an event is kept in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Keeper {
    /// The daemon's own events: started, stopped, config reloaded.
    Daemon,
    /// Steps of a ladder carried out or skipped on a process of this uid
    /// (`None`: an owner the platform does not tell).
    Acted(Option<u32>),
    /// Everything else seen of a process of this uid: crossings, held
    /// crossings, clearings, post-mortems.
    Seen(Option<u32>),
}

impl Keeper {
    /// The keeper of `event`.
    pub fn of(event: &Event) -> Keeper {
        use crate::event::EventKind;
        match (&event.kind, event.about_uid()) {
            (_, None) => Keeper::Daemon,
            (EventKind::Action { .. } | EventKind::Skipped { .. }, Some(uid)) => Keeper::Acted(uid),
            (_, Some(uid)) => Keeper::Seen(uid),
        }
    }
}

/// One kept event, encoded.
#[derive(Debug)]
pub struct KeptEvent {
    pub at: Timestamp,
    /// The uid of the process it is about; `None` for the daemon's own
    /// events, `Some(None)` for a process of unknown owner.
    pub about: Option<Option<u32>>,
    /// The event as journaled, plus `message` (the line `headroom events`
    /// prints for it), as a JSON object.
    pub full: Bytes,
    /// The event as a viewer who does not own its process sees it
    /// ([`Event::redacted`]), with `"redacted": true` in its `process`;
    /// empty for the daemon's own events, which nobody sees redacted.
    pub redacted: Bytes,
    cost: usize,
}

impl KeptEvent {
    /// `event` encoded in both forms.
    pub fn encode(event: &Event) -> KeptEvent {
        let about = event.about_uid();
        let full = Bytes::from(encode_shown(event, false));
        let redacted = match about {
            None => Bytes::new(),
            Some(_) => Bytes::from(encode_shown(&event.redacted(), true)),
        };
        let cost = full.len() + redacted.len() + ENTRY_OVERHEAD;
        KeptEvent {
            at: event.at,
            about,
            full,
            redacted,
            cost,
        }
    }

    /// The bytes it is counted for.
    pub fn cost(&self) -> usize {
        self.cost
    }
}

/// `event` as a JSON object with its `message`, and `"redacted": true` in
/// its processes when `redacted`.
fn encode_shown(event: &Event, redacted: bool) -> Vec<u8> {
    let message = crate::event_line::render(event, "").trim().to_string();
    let mut value = match serde_json::to_value(event) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("cannot encode a {} event: {e}", event.kind.name());
            serde_json::json!({"at": event.at, "event": event.kind.name()})
        }
    };
    if let Some(obj) = value.as_object_mut() {
        obj.insert("message".into(), message.into());
        if redacted {
            for key in ["process", "worker_of"] {
                if let Some(p) = obj.get_mut(key).and_then(|p| p.as_object_mut()) {
                    p.insert("redacted".into(), true.into());
                }
            }
        }
    }
    serde_json::to_vec(&value).unwrap_or_else(|_| b"{}".to_vec())
}

/// A keeper's events, oldest first, and what they cost.
#[derive(Debug, Clone, Default)]
struct Tally {
    bytes: usize,
    seqs: VecDeque<u64>,
}

/// The kept events, oldest first: see the module documentation.
#[derive(Debug, Clone)]
pub struct RecentEvents {
    entries: BTreeMap<u64, Arc<KeptEvent>>,
    keepers: HashMap<Keeper, Tally>,
    next: u64,
    bytes: usize,
    budget: usize,
    share: usize,
}

impl Default for RecentEvents {
    fn default() -> Self {
        Self::with_budget(RECENT_EVENTS_BYTES, KEEPER_SHARE_BYTES)
    }
}

impl RecentEvents {
    /// Events kept within `budget` bytes, each keeper within `share`.
    pub fn with_budget(budget: usize, share: usize) -> Self {
        Self {
            entries: BTreeMap::new(),
            keepers: HashMap::new(),
            next: 0,
            bytes: 0,
            budget,
            share,
        }
    }

    /// Keep `event`, pushing out older events as the module documentation
    /// says.
    pub fn push(&mut self, event: &Event) {
        let keeper = Keeper::of(event);
        let kept = Arc::new(KeptEvent::encode(event));
        let seq = self.next;
        self.next += 1;
        self.bytes += kept.cost;
        let tally = self.keepers.entry(keeper).or_default();
        tally.bytes += kept.cost;
        tally.seqs.push_back(seq);
        self.entries.insert(seq, kept);
        while self
            .keepers
            .get(&keeper)
            .is_some_and(|t| t.bytes > self.share)
        {
            if !self.drop_oldest(keeper) {
                break;
            }
        }
        while self.bytes > self.budget {
            let Some(victim) = self
                .largest(|k| matches!(k, Keeper::Seen(_)))
                .or_else(|| self.largest(|k| matches!(k, Keeper::Acted(_))))
            else {
                break;
            };
            if !self.drop_oldest(victim) {
                break;
            }
        }
    }

    /// The keeper holding the most bytes among those `which` picks.
    fn largest(&self, which: impl Fn(&Keeper) -> bool) -> Option<Keeper> {
        self.keepers
            .iter()
            .filter(|(k, t)| which(k) && t.bytes > 0)
            .max_by_key(|(_, t)| t.bytes)
            .map(|(k, _)| *k)
    }

    /// Push out `keeper`'s oldest event; whether there was one.
    fn drop_oldest(&mut self, keeper: Keeper) -> bool {
        let Some(tally) = self.keepers.get_mut(&keeper) else {
            return false;
        };
        let Some(seq) = tally.seqs.pop_front() else {
            self.keepers.remove(&keeper);
            return false;
        };
        if let Some(gone) = self.entries.remove(&seq) {
            tally.bytes = tally.bytes.saturating_sub(gone.cost);
            self.bytes = self.bytes.saturating_sub(gone.cost);
        }
        if tally.seqs.is_empty() {
            self.keepers.remove(&keeper);
        }
        true
    }

    /// The kept events, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Arc<KeptEvent>> {
        self.entries.values()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What the kept events cost, bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// What `keeper`'s kept events cost, bytes.
    pub fn bytes_of(&self, keeper: Keeper) -> usize {
        self.keepers.get(&keeper).map_or(0, |t| t.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, ExitCause, ExitCauseKind, Outcome, ProcessRef};
    use crate::model::WorkloadKind;

    fn process(uid: u32, notebook: &str) -> ProcessRef {
        ProcessRef {
            pid: 40 + uid,
            start: 1,
            name: "python3".into(),
            user: None,
            uid: Some(uid),
            workload: WorkloadKind::Jupyter,
            footprint: 1 << 20,
            kernel_id: Some("3f2a".into()),
            notebook: Some(notebook.into()),
            labels: None,
        }
    }

    fn exited(at: u64, uid: u32, notebook: &str) -> Event {
        Event {
            at: Timestamp(at),
            kind: EventKind::Exited {
                process: process(uid, notebook),
                last_action: None,
                peak_footprint: 1 << 20,
                last_growth_bytes_per_second: None,
                headroom_action: None,
                cause: Some(ExitCause {
                    kind: ExitCauseKind::Crashed,
                    how: "the kernel log (/dev/kmsg) recorded a crash: segfault in libsecret.so"
                        .into(),
                    detail: Some("python3[42]: segfault at 0 ip 00007f01 in libsecret.so".into()),
                    signal: Some("SIGSEGV".into()),
                    library: Some("libsecret.so".into()),
                    not_memory: true,
                    ..ExitCause::default()
                }),
                job: None,
                worker_of: None,
            },
        }
    }

    fn action(at: u64, uid: u32) -> Event {
        Event {
            at: Timestamp(at),
            kind: EventKind::Action {
                rule: "runaway".into(),
                process: process(uid, "n.ipynb"),
                step: 0,
                action: "SIGTERM".into(),
                outcome: Outcome::Done,
                dry_run: false,
                detail: "footprint 2 GiB > 1 GiB".into(),
            },
        }
    }

    fn started(at: u64) -> Event {
        Event {
            at: Timestamp(at),
            kind: EventKind::Started {
                version: "0".into(),
                config: None,
                dry_run: false,
            },
        }
    }

    fn ats(events: &RecentEvents) -> Vec<u64> {
        events.iter().map(|e| e.at.0).collect()
    }

    #[test]
    fn both_forms_are_json_with_their_message_and_the_redacted_one_hides_the_record() {
        let kept = KeptEvent::encode(&exited(5, 1000, "secret/plans.ipynb"));
        let full: serde_json::Value = serde_json::from_slice(&kept.full).unwrap();
        assert_eq!(full["process"]["notebook"], "secret/plans.ipynb");
        assert_eq!(full["cause"]["library"], "libsecret.so");
        assert!(full["message"].as_str().unwrap().contains("post-mortem"));
        let text = std::str::from_utf8(&kept.redacted).unwrap();
        let redacted: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(redacted["process"]["redacted"], true);
        assert_eq!(redacted["cause"]["kind"], "crashed");
        assert_eq!(redacted["cause"]["signal"], "SIGSEGV");
        for secret in ["plans.ipynb", "3f2a", "libsecret", "segfault", "00007f01"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(kept.about, Some(Some(1000)));
        assert_eq!(
            kept.cost(),
            kept.full.len() + kept.redacted.len() + ENTRY_OVERHEAD
        );
    }

    #[test]
    fn the_daemons_own_events_have_no_redacted_form() {
        let kept = KeptEvent::encode(&started(1));
        assert_eq!(kept.about, None);
        assert!(kept.redacted.is_empty());
        assert_eq!(Keeper::of(&started(1)), Keeper::Daemon);
        assert_eq!(Keeper::of(&action(1, 7)), Keeper::Acted(Some(7)));
        assert_eq!(Keeper::of(&exited(1, 7, "n")), Keeper::Seen(Some(7)));
    }

    #[test]
    fn the_budget_and_each_share_hold() {
        // The largest of the events pushed (`at` has up to three digits).
        let one = KeptEvent::encode(&exited(999, 1000, "n.ipynb")).cost();
        let mut events = RecentEvents::with_budget(one * 10, one * 4);
        for at in 0..100 {
            events.push(&exited(at, 1000 + (at as u32 % 2), "n.ipynb"));
            assert!(events.bytes() <= one * 10);
            assert!(events.bytes_of(Keeper::Seen(Some(1000))) <= one * 4);
        }
        assert_eq!(ats(&events), [92, 93, 94, 95, 96, 97, 98, 99]);
    }

    #[test]
    fn one_users_flood_pushes_out_only_their_own_events() {
        let one = KeptEvent::encode(&exited(0, 1000, "n.ipynb")).cost();
        let mut events = RecentEvents::with_budget(one * 8, one * 4);
        events.push(&started(1));
        events.push(&exited(2, 1001, "victim.ipynb"));
        events.push(&action(3, 1001));
        events.push(&action(4, 1000));
        for at in 10..1000 {
            events.push(&exited(at, 1000, &"x".repeat(200)));
        }
        let kept = ats(&events);
        assert_eq!(&kept[..4], [1, 2, 3, 4], "{kept:?}");
        assert!(kept.len() > 4 && kept.ends_with(&[999]), "{kept:?}");
        assert!(events.bytes() <= one * 8 + one);
    }

    #[test]
    fn seen_events_go_before_actions_when_the_budget_is_short() {
        let one = KeptEvent::encode(&action(0, 1000)).cost();
        let mut events = RecentEvents::with_budget(one * 4, one * 3);
        events.push(&action(1, 1000));
        events.push(&action(2, 1001));
        events.push(&exited(3, 1002, "n"));
        events.push(&exited(4, 1003, "n"));
        events.push(&exited(5, 1004, "n"));
        let kept = ats(&events);
        assert!(kept.starts_with(&[1, 2]), "actions stay: {kept:?}");
        assert!(events.bytes() <= one * 4 + one, "{}", events.bytes());
    }

    #[test]
    fn the_largest_keeper_of_actions_gives_way_when_only_actions_are_left() {
        let one = KeptEvent::encode(&action(99, 1000)).cost();
        let mut events = RecentEvents::with_budget(one * 4, one * 3);
        events.push(&action(1, 1001));
        for at in 10..20 {
            events.push(&action(at, 1000));
        }
        let kept = ats(&events);
        assert_eq!(kept[0], 1, "the other user's action stays: {kept:?}");
        assert_eq!(kept.len(), 4, "{kept:?}");
    }
}
