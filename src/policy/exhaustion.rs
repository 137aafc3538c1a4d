//! Where a process's memory runs out, how soon, who takes the blame, and
//! whether a signal is due yet: warn early, act just in time.
//!
//! The memory that runs out is the machine's (available memory plus free
//! swap) or, where tighter, the memory cgroup's room under its limit. Its
//! time to exhaustion comes from how fast *that* room falls
//! ([`crate::history::RoomSeries`]), so a second task of the same job, the
//! pages a forked worker copies on access and the page cache a load leaves
//! behind all count, and a load that ends well below the limit stops the
//! clock as soon as it ends. A process (or job) takes the blame only for
//! growth of its own that accounts for at least [`BLAME_SHARE`] of the
//! room's fall: a process that merely shares the cgroup with the grower is
//! not its cause.
//!
//! A `time_to_exhaustion` limit *holds* (the status, `explain`, the journal
//! and notification steps speak) as soon as that prediction is within the
//! rule's limit. A signal or hook waits until it is *due*
//! ([`Outlook::due`]): the room's recent fall would use it up within the
//! rule's lead (the time the action needs to take effect, plus a sample),
//! or only [`ROOM_FLOOR`] of the memory is left and it is still falling.
//! A fast load that ends at 70% of a container's limit is never due; a leak
//! at the same pace is due a lead before it would hit the limit.

use std::time::Duration;

use crate::history::{History, ProcessTrack, RoomSeries, exhaustion_headroom_for};
use crate::model::{Ceiling, ProcessSample, Snapshot, Timestamp};
use crate::report::format_bytes;

/// The share of the room's fall a process's own growth must account for to
/// take the blame for it (two tasks filling one cgroup at the same pace
/// each take it; a process that sits beside a leak does not).
pub const BLAME_SHARE: f64 = 0.25;

/// With this share of the memory or less left (of the cgroup's limit, or of
/// the machine's memory and swap), a signal is due while the room still
/// falls fast enough to be used up within the rule's `time_to_exhaustion`.
pub const ROOM_FLOOR: f64 = 0.05;

/// The window of the recent fall a signal waits for: a few samples at the
/// fast interval, so that it follows a load that starts or stops.
pub const RECENT_WINDOW: Duration = Duration::from_secs(2);

/// The memory a process can run out of, and how fast it is being taken.
#[derive(Debug, Clone, Copy)]
pub struct Outlook<'s> {
    /// What is left: the machine's available memory plus free swap, or the
    /// cgroup's room plus the swap it may still use.
    pub room: u64,
    /// The cgroup whose limit binds, where tighter than the machine.
    pub ceiling: Option<&'s Ceiling>,
    /// What [`ROOM_FLOOR`] is a share of: the cgroup's limit, or the
    /// machine's memory plus swap.
    pub capacity: u64,
    /// How fast the room falls over the rule's window (bytes per second);
    /// `None` until the window has enough points.
    pub falls: Option<f64>,
    /// How fast it falls over [`RECENT_WINDOW`].
    pub recently: Option<f64>,
}

/// Where `p` runs out and how fast that memory is being taken, from the
/// history's room series (the cgroup's or the machine's) over `window`.
pub fn outlook<'s>(
    history: &History,
    snap: &'s Snapshot,
    p: &ProcessSample,
    window: Duration,
    now: Timestamp,
    min_points: usize,
) -> Outlook<'s> {
    let (room, ceiling) = exhaustion_headroom_for(snap, p);
    let series: Option<&RoomSeries> = match ceiling {
        Some(c) => history.ceiling_room(&c.path),
        None => Some(history.machine_room()),
    };
    let capacity = match ceiling {
        Some(c) => c.limit(),
        None => snap.system.total.saturating_add(snap.swap.total),
    };
    Outlook {
        room,
        ceiling,
        capacity,
        falls: series.and_then(|s| s.consumption(now, window, min_points)),
        recently: series.and_then(|s| s.recent_consumption(now, RECENT_WINDOW)),
    }
}

/// Whether a signal is still due after a step taken at `step_at`: the
/// fall and the process's growth counted only from the moment that step had
/// time to take effect (`step_at` + [`crate::config::SIGNAL_TAKES_EFFECT`]),
/// so that the next step goes only if the memory keeps running out despite
/// it. Until a few points lie past that moment, it waits.
#[expect(
    clippy::too_many_arguments,
    reason = "the same inputs as outlook and due"
)]
pub fn due_after_step(
    history: &History,
    snap: &Snapshot,
    p: &ProcessSample,
    track: Option<&ProcessTrack>,
    step_at: Timestamp,
    now: Timestamp,
    limit: Duration,
    lead: Duration,
) -> Due {
    let since = step_at.plus(crate::config::SIGNAL_TAKES_EFFECT);
    if now <= since {
        return Due::Waits {
            why: "the last step is still taking effect".to_string(),
            in_time: Some(since.since(now)),
        };
    }
    let window = now.since(since);
    let (room, ceiling) = exhaustion_headroom_for(snap, p);
    let series = match ceiling {
        Some(c) => history.ceiling_room(&c.path),
        None => Some(history.machine_room()),
    };
    let outlook = Outlook {
        room,
        ceiling,
        capacity: match ceiling {
            Some(c) => c.limit(),
            None => snap.system.total.saturating_add(snap.swap.total),
        },
        falls: None,
        recently: series.and_then(|s| s.recent_consumption(now, window)),
    };
    let own = track.and_then(|t| t.trend(now, window, None));
    match outlook.due(limit, lead, own) {
        Due::Now(why) => Due::Now(format!("{why}, still after the last step")),
        Due::Waits { why, in_time } => Due::Waits {
            why: format!("since the last step took effect: {why}"),
            in_time,
        },
    }
}

/// How a process's growth stands against the fall of its room.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Blame {
    /// It grows, and its growth is at least [`BLAME_SHARE`] of the fall:
    /// the room runs out at `pace` (the fall, or its own growth where the
    /// fall is not known yet or is slower).
    Takes { pace: f64 },
    /// The room falls, but this process's growth is too small a part of it.
    Bystander { own: f64, fall: f64 },
    /// It does not grow, or the room does not fall.
    NotGrowing { pace: f64 },
}

/// Whether `own` growth takes the blame for a room falling at `fall`.
pub fn blame(own: f64, fall: Option<f64>) -> Blame {
    match fall {
        _ if own <= 0.0 => Blame::NotGrowing { pace: own },
        None => Blame::Takes { pace: own },
        Some(f) if f <= 0.0 => Blame::NotGrowing { pace: f },
        Some(f) if own < BLAME_SHARE * f => Blame::Bystander { own, fall: f },
        // Its own growth is faster than the room falls (something else
        // gave memory back): the room's pace is when it runs out.
        Some(f) => Blame::Takes { pace: f },
    }
}

/// Whether a signal is due now, or when it will be.
#[derive(Debug, Clone, PartialEq)]
pub enum Due {
    /// Now, and why.
    Now(String),
    /// Not yet: why it waits, and when it would be due at the recent pace.
    Waits {
        why: String,
        in_time: Option<Duration>,
    },
}

impl Outlook<'_> {
    /// Whether a signal for a `time_to_exhaustion` limit of `limit` is due,
    /// with `lead` the rule's lead and `own_recent` the process's own
    /// recent growth (it must still be growing).
    pub fn due(&self, limit: Duration, lead: Duration, own_recent: Option<f64>) -> Due {
        let falls = self.recently.or(self.falls);
        let lead_words = humantime::format_duration(round_ms(lead));
        let waits = |why: String, in_time| Due::Waits { why, in_time };
        let Some(rate) = falls.filter(|r| *r > 0.0) else {
            return waits(
                format!(
                    "a signal waits until exhaustion is nearer than the lead ({lead_words}); \
                     the room is not falling now (or too few samples say how fast it falls)"
                ),
                None,
            );
        };
        if own_recent.is_some_and(|g| g <= 0.0) {
            return waits(
                format!(
                    "a signal waits until exhaustion is nearer than the lead ({lead_words}); \
                     the process has stopped growing"
                ),
                None,
            );
        }
        let secs = self.room as f64 / rate;
        let floor = (self.capacity as f64 * ROOM_FLOOR) as u64;
        let recent = format!(
            "{} left, falling {}/s over the last {}s",
            format_bytes(self.room),
            format_bytes(rate as u64),
            RECENT_WINDOW.as_secs()
        );
        if secs <= lead.as_secs_f64() {
            return Due::Now(format!(
                "{recent}: exhausted in {secs:.1}s, within the lead ({lead_words})"
            ));
        }
        if self.room <= floor && secs <= limit.as_secs_f64() {
            return Due::Now(format!(
                "{recent}: under {}% of {} is left",
                (ROOM_FLOOR * 100.0).round(),
                format_bytes(self.capacity)
            ));
        }
        let in_time = Duration::try_from_secs_f64(secs - lead.as_secs_f64()).ok();
        waits(
            format!(
                "a signal waits until exhaustion is nearer than the lead ({lead_words}) or under \
                 {}% of {} is left; now {recent}: exhausted in {secs:.1}s",
                (ROOM_FLOOR * 100.0).round(),
                format_bytes(self.capacity)
            ),
            in_time,
        )
    }
}

/// How long before exhaustion a rule's first signal (or hook) must go out
/// so that its later steps still have time: `lead` for the first, then
/// for each later one its `after` and `lead` again. A step sent to a job's
/// workers counts only while `workers_grow`: a kernel's DataLoader workers
/// that keep copying outlive the kernel's SIGINT, and their SIGTERM must
/// come before the memory is gone; a kernel growing on its own needs only
/// the first step's lead, so a fast load is not interrupted early.
pub fn ladder_lead(steps: &[crate::config::Step], lead: Duration, workers_grow: bool) -> Duration {
    use crate::config::Target;
    use crate::policy::Action;
    let acts = |s: &&crate::config::Step| !matches!(s.action, Action::Notify);
    let mut signals = steps.iter().filter(acts);
    if signals.next().is_none() {
        return lead;
    }
    signals
        .filter(|s| s.to != Target::Workers || workers_grow)
        .fold(lead, |total, s| {
            total.saturating_add(s.after).saturating_add(lead)
        })
}

/// Whether a job's workers, not its root alone, make it grow: their recent
/// growth added up is positive and at least a quarter of the job's.
pub fn workers_grow(
    history: &History,
    snap: &Snapshot,
    job: &crate::model::Job,
    now: Timestamp,
) -> bool {
    let workers: f64 = job
        .members
        .iter()
        .filter(|&&pid| pid != job.pid())
        .filter_map(|&pid| snap.process(pid))
        .filter_map(|p| {
            history
                .process(&p.id)?
                .trend(now, RECENT_WINDOW, p.started_at)
        })
        .sum();
    let total = history
        .job(&job.root)
        .and_then(|t| t.trend(now, RECENT_WINDOW, None));
    workers > 0.0 && total.is_none_or(|t| workers >= t * BLAME_SHARE)
}

/// A duration to whole milliseconds, for words.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The recent growth of a process or job, for [`Outlook::due`]: its
/// short-term trend over [`RECENT_WINDOW`].
pub fn own_recent(track: Option<&ProcessTrack>, p: &ProcessSample, now: Timestamp) -> Option<f64> {
    track.and_then(|t| t.trend(now, RECENT_WINDOW, p.started_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn outlook(room: u64, capacity: u64, recently: f64) -> Outlook<'static> {
        Outlook {
            room,
            ceiling: None,
            capacity,
            falls: Some(recently),
            recently: Some(recently),
        }
    }

    const LEAD: Duration = Duration::from_millis(550);
    const LIMIT: Duration = Duration::from_secs(30);

    fn step(
        action: crate::policy::Action,
        after_ms: u64,
        to: crate::config::Target,
    ) -> crate::config::Step {
        crate::config::Step {
            action,
            after: Duration::from_millis(after_ms),
            to,
        }
    }

    #[test]
    fn the_first_signal_leads_by_what_the_steps_after_it_need() {
        use crate::config::Target;
        use crate::policy::{Action, SignalName};
        let int = Action::Signal {
            signal: SignalName::Int,
            require_handler: true,
            process_group: false,
        };
        let term = Action::Signal {
            signal: SignalName::Term,
            require_handler: false,
            process_group: false,
        };
        let lead = Duration::from_millis(550);
        // The embedded default's ladder: notify, SIGINT, SIGTERM to the
        // workers 1 s later.
        let ladder = [
            step(Action::Notify, 0, Target::Process),
            step(int.clone(), 0, Target::Process),
            step(term.clone(), 1000, Target::Workers),
        ];
        assert_eq!(
            ladder_lead(&ladder, lead, true),
            Duration::from_millis(2100)
        );
        // A kernel growing on its own: the workers' step will not be needed.
        assert_eq!(ladder_lead(&ladder, lead, false), lead);
        // Notifications alone, or one signal: the lead.
        assert_eq!(ladder_lead(&ladder[..1], lead, true), lead);
        assert_eq!(ladder_lead(&ladder[..2], lead, true), lead);
        // Two steps to the process itself count whoever grows.
        let own = [
            step(int, 0, Target::Process),
            step(term, 2000, Target::Process),
        ];
        assert_eq!(ladder_lead(&own, lead, false), Duration::from_millis(3100));
    }

    #[test]
    fn a_load_that_leaves_a_third_of_a_container_is_never_due_at_two_gib_a_second() {
        // 4 GiB container, 70% used, the recent pace 2 GiB/s: 0.6 s to go.
        let o = outlook(4 * GIB * 3 / 10, 4 * GIB, (2 * GIB) as f64);
        assert!(matches!(o.due(LIMIT, LEAD, Some(1.0)), Due::Waits { .. }));
    }

    #[test]
    fn a_leak_is_due_a_lead_before_the_limit() {
        let o = outlook(GIB, 4 * GIB, (2 * GIB) as f64);
        let Due::Now(why) = o.due(LIMIT, LEAD, Some(1.0)) else {
            panic!("not due")
        };
        assert_eq!(
            why,
            "1.0 GiB left, falling 2.0 GiB/s over the last 2s: exhausted in 0.5s, within the \
             lead (550ms)"
        );
    }

    #[test]
    fn a_slow_fall_is_due_only_under_the_floor() {
        let slow = (20 * MIB) as f64;
        let o = outlook(300 * MIB, 4 * GIB, slow);
        let Due::Waits { why, in_time } = o.due(LIMIT, LEAD, Some(1.0)) else {
            panic!("due above the floor")
        };
        assert!(why.contains("exhausted in 15.0s"), "{why}");
        assert_eq!(in_time.map(|d| d.as_millis()), Some(14_450));
        let o = outlook(200 * MIB, 4 * GIB, slow);
        assert!(matches!(o.due(LIMIT, LEAD, Some(1.0)), Due::Now(_)));
        // Under the floor, but the fall would take longer than the limit.
        let o = outlook(200 * MIB, 4 * GIB, (MIB / 2) as f64);
        assert!(matches!(o.due(LIMIT, LEAD, Some(1.0)), Due::Waits { .. }));
    }

    #[test]
    fn nothing_is_due_once_the_room_or_the_process_stops() {
        let o = outlook(100 * MIB, 4 * GIB, 0.0);
        assert!(matches!(o.due(LIMIT, LEAD, Some(1.0)), Due::Waits { .. }));
        let o = outlook(100 * MIB, 4 * GIB, (GIB) as f64);
        assert!(matches!(o.due(LIMIT, LEAD, Some(0.0)), Due::Waits { .. }));
    }

    #[test]
    fn blame_goes_to_growth_that_is_a_real_share_of_the_fall() {
        let mib = MIB as f64;
        // Two tasks at 84 MiB/s fill a cgroup at 174 MiB/s: each takes it,
        // at the cgroup's pace.
        assert_eq!(
            blame(84.0 * mib, Some(174.0 * mib)),
            Blame::Takes { pace: 174.0 * mib }
        );
        assert_eq!(
            blame(10.0 * mib, Some(400.0 * mib)),
            Blame::Bystander {
                own: 10.0 * mib,
                fall: 400.0 * mib
            }
        );
        assert_eq!(
            blame(-1.0, Some(400.0 * mib)),
            Blame::NotGrowing { pace: -1.0 }
        );
        assert_eq!(
            blame(10.0 * mib, Some(-5.0)),
            Blame::NotGrowing { pace: -5.0 }
        );
        assert_eq!(blame(10.0 * mib, None), Blame::Takes { pace: 10.0 * mib });
    }
}
