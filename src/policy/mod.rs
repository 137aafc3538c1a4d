//! The policy: pure decisions from config, history and the latest snapshot.
//!
//! [`evaluate`] takes the rules, the state the policy keeps between samples
//! ([`PolicyState`]: where each ladder stands, cooldowns), the history, the
//! snapshot and the current time, and returns the [`Decision`]s to carry out
//! plus the events to journal. It does no I/O and reads no clock: time is an
//! argument, so replayed traces test it deterministically.
//!
//! A ladder, per rule and process identity:
//! - when the rule starts to hold (and no cooldown is running), a
//!   `limit-crossed` event and step 0 at once;
//! - step *n* runs `after` step *n − 1*, only while the rule still holds;
//! - when every limit falls back below its hysteresis margin, a
//!   `limit-cleared` event and the ladder is forgotten; the next crossing
//!   starts over at step 0, once the cooldown after the last step is over;
//! - rules gated by a system condition pick one victim (`select`) and keep it
//!   for the whole ladder; they start no ladder on another process within
//!   `cooldown` of the last one (no kill storms).
//!
//! Never silent: when a rule holds for a process it does not act on (its
//! owner is out of the rule's `other_users`/`root`, it is protected, a
//! cooldown runs, a gated rule took another process), the process's
//! [`RuleStatus`] says so and why (`crossed, not acting`, `not_acting`), and
//! the events get one `limit-held-not-acting` per crossing and reason, not
//! one per sample. [`explain()`] judges one process rule by rule with the
//! same pieces ([`assess`]), for `headroom explain`.

pub mod assess;
pub mod decision;
pub mod exhaustion;
pub mod explain;
pub mod limits;
pub mod protection;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::model::{Action, SignalName};
pub use assess::{Hold, NotActing};
pub use decision::Decision;
pub use explain::{RuleVerdict, explain};
pub use protection::{Protection, Reach};

use crate::config::{Config, Select};
use crate::event::{EventKind, ProcessRef};
use crate::history::{History, ProcessTrack};
use crate::model::{ProcessId, ProcessSample, SharedStr, Snapshot, Timestamp};
use assess::{Assessed, RuleRun};

/// Facts about the daemon the policy needs: who it is.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    pub self_pid: u32,
    pub self_uid: u32,
}

/// Where one ladder stands.
#[derive(Debug, Clone, PartialEq)]
struct Ladder {
    /// The next step to take.
    next_step: usize,
    /// When the last step was taken.
    last_step_at: Option<Timestamp>,
    process: ProcessRef,
    /// A step other than a notification was taken; the process the last
    /// one went to.
    acted_on: Option<ProcessId>,
}

/// A gated rule's last victim: no new one within `cooldown` of it.
#[derive(Debug, Clone, PartialEq)]
struct Victim {
    at: Timestamp,
    process: ProcessRef,
}

type Key = (String, ProcessId);

/// What the policy remembers between samples.
#[derive(Debug, Clone, Default)]
pub struct PolicyState {
    ladders: HashMap<Key, Ladder>,
    /// When the rule last took a step on the process: no new ladder
    /// within the rule's `cooldown` of it.
    last_acted: HashMap<Key, Timestamp>,
    /// When the rule last sent the process a notification: a ladder that
    /// starts again within the rule's `cooldown` of it starts past its
    /// leading notifications. A notification alone starts no cooldown, so
    /// an early warning for a load that ended never holds back the signal
    /// for a leak that follows.
    last_noticed: HashMap<Key, Timestamp>,
    /// Gated rules: the last victim, and when; per rule, or per rule and
    /// cgroup for a rule whose condition is read per cgroup.
    last_victim: HashMap<(String, Option<SharedStr>), Victim>,
    /// Crossings journaled as held without acting, and why: one event per
    /// crossing and [`Hold`], until the limit clears.
    not_acting: HashMap<Key, Hold>,
    /// Ladders of an orphaned job (keyed by its ended root, see
    /// `ladder_id`) that cleared after a signal or hook step with steps
    /// left, until the cooldown after that step ends. The step ended the
    /// member standing for the job, which gave its memory back for a few
    /// seconds, not what runs out: if the rule holds again meanwhile, for
    /// another member standing for the job, the ladder goes on at its next
    /// step instead of waiting out the cooldown. (A process that freed
    /// memory on a step and grows again, a kernel whose cell is run again
    /// after its SIGINT, waits out the cooldown as before.)
    paused: HashMap<Key, Ladder>,
}

/// A rule's view of one process, for the API and status page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleStatus {
    pub rule: String,
    pub pid: u32,
    pub start: u64,
    /// `watching`, `near` (within reach), `crossed` (a limit holds),
    /// `held` (a gated rule's condition holds and picked this process),
    /// `step 1/3` (the step just taken), `done` (every step taken); a state
    /// that holds without acting ends in `, not acting`, a dry run's steps
    /// in `, dry run`.
    pub state: String,
    pub detail: String,
    /// Why the rule does not act on the process, or would not if it held:
    /// its owner, its protection, a dry run, a cooldown, a finished ladder.
    /// `None` where it acts.
    #[serde(default)]
    pub not_acting: Option<String>,
    /// The ladder step the rule takes next, from 0; `None` when it takes
    /// none (out of reach, or every step taken).
    #[serde(default)]
    pub next_step: Option<usize>,
    /// Why the next step, a signal or hook, waits though the rule holds:
    /// exhaustion is predicted, but not yet nearer than the rule's lead.
    /// Notifications before it have gone out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<String>,
}

/// The outcome of one evaluation.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    pub decisions: Vec<Decision>,
    pub events: Vec<EventKind>,
    /// A watched process is within reach of a limit, or a ladder is under
    /// way: sample at the fast interval.
    pub within_reach: bool,
    /// The soonest moment, from now, at which a limit is predicted to be
    /// crossed or a ladder's next step falls due: sample then.
    pub next_check: Option<Duration>,
    /// Every rule's state for every process it watches.
    pub statuses: Vec<RuleStatus>,
}

impl Evaluation {
    fn check_at(&mut self, d: Duration) {
        self.next_check = Some(self.next_check.map_or(d, |c| c.min(d)));
    }

    /// Set the status of (rule, process), replacing an earlier one.
    fn set_status(&mut self, status: RuleStatus) {
        self.statuses
            .retain(|s| !(s.rule == status.rule && s.pid == status.pid));
        self.statuses.push(status);
    }
}

/// Decide what to do now.
pub fn evaluate(
    config: &Config,
    state: &mut PolicyState,
    history: &History,
    snap: &Snapshot,
    ctx: Context,
    now: Timestamp,
) -> Evaluation {
    let mut out = Evaluation::default();
    // Worked out only if a rule matches a process.
    let hard = protection::HardProtected::new(snap, ctx.self_pid);

    // What belongs to rules that no longer exist (config reload) is dropped.
    let cooldowns: HashMap<&str, Duration> = config
        .rules
        .iter()
        .map(|r| (r.name.as_str(), r.cooldown))
        .collect();
    let known = |rule: &String| cooldowns.contains_key(rule.as_str());
    state.ladders.retain(|(rule, _), _| known(rule));
    state.not_acting.retain(|(rule, _), _| known(rule));

    for rule in &config.rules {
        let run = RuleRun {
            rule,
            config,
            history,
            snap,
            ctx,
            now,
            hard: &hard,
            ceiling: None,
        };
        evaluate_rule(&run, state, &mut out);
    }

    // What belongs to processes that have gone, and cooldowns that are over.
    if !state.ladders.is_empty() || !state.not_acting.is_empty() {
        // An orphaned job's ladder is its ended root's (see `ladder_id`).
        let present: HashSet<ProcessId> = snap
            .processes
            .iter()
            .map(|p| p.id)
            .chain(
                snap.jobs
                    .iter()
                    .filter_map(|j| j.ended_root.as_ref().map(|e| e.id)),
            )
            .collect();
        state.ladders.retain(|(_, id), _| present.contains(id));
        state.not_acting.retain(|(_, id), _| present.contains(id));
    }
    let running = |rule: &str, at: Timestamp| {
        cooldowns
            .get(rule)
            .is_some_and(|cooldown| now < at.plus(*cooldown))
    };
    state.last_acted.retain(|(rule, _), at| running(rule, *at));
    state
        .paused
        .retain(|(rule, _), l| l.last_step_at.is_some_and(|at| running(rule, at)));
    state
        .last_noticed
        .retain(|(rule, _), at| running(rule, *at));
    state
        .last_victim
        .retain(|(rule, _), victim| running(rule, victim.at));
    out
}

/// A process a rule holds for: why (in words), and the limit.
struct Holding<'a> {
    p: &'a ProcessSample,
    track: Option<&'a ProcessTrack>,
    why: String,
    limit: String,
    /// Why a signal or hook step waits (see [`limits::LimitCheck::signal_waits`]).
    waits: Option<String>,
    /// When it would be due, from now.
    due_in: Option<Duration>,
    /// The job the process stands for, for steps sent to its workers.
    job: Option<&'a crate::model::Job>,
    /// It holds by a prediction of exhaustion alone: a step after a signal
    /// goes only while exhaustion is still due after it.
    by_prediction: bool,
}

/// One rule over the whole snapshot: which processes it holds for, which
/// of them it acts on and which not (and why), and where each ladder goes.
fn evaluate_rule(run: &RuleRun<'_>, state: &mut PolicyState, out: &mut Evaluation) {
    let candidates = run.candidates();
    if !run.per_cgroup() {
        return evaluate_group(run, state, out, &candidates);
    }
    // A condition read per cgroup: each limited cgroup on its own, with
    // the matching processes whose ceiling it is (and those in none, for
    // which it does not hold).
    let mut groups: Vec<(RuleRun<'_>, Vec<assess::Candidate<'_>>)> = Vec::new();
    for c in candidates {
        let in_cgroup = run.in_cgroup_of(&c.p);
        let path = in_cgroup.ceiling.map(|c| &c.path);
        match groups
            .iter_mut()
            .find(|(r, _)| r.ceiling.map(|c| &c.path) == path)
        {
            Some((_, members)) => members.push(c),
            None => groups.push((in_cgroup, vec![c])),
        }
    }
    for (in_cgroup, members) in &groups {
        evaluate_group(in_cgroup, state, out, members);
    }
}

/// One rule over a set of its candidates: all of them, or those of one
/// limited cgroup for a condition read per cgroup.
fn evaluate_group(
    run: &RuleRun<'_>,
    state: &mut PolicyState,
    out: &mut Evaluation,
    candidates: &[assess::Candidate<'_>],
) {
    let assessed: Vec<Assessed<'_>> = candidates.iter().map(|c| run.assess(c)).collect();
    let (holding, cleared) = if run.rule.limits.is_empty() {
        condition_holders(run, state, out, &assessed)
    } else {
        limit_holders(run, state, out, &assessed)
    };
    clear(run, state, out, cleared);
    for held in holding {
        advance(run, state, out, held);
    }
}

/// `text`, and the process's note on a name that does not protect it.
fn with_note(a: &Assessed<'_>, text: String) -> String {
    match &a.note {
        Some(note) => format!("{text}; {note}"),
        None => text,
    }
}

/// A gated rule without per-process limits: while its condition holds, one
/// victim (the one whose ladder is under way, else the one `select`
/// picks). With no process in reach, the one it would pick is held
/// without acting, and says why.
fn condition_holders<'a>(
    run: &RuleRun<'_>,
    state: &mut PolicyState,
    out: &mut Evaluation,
    assessed: &'a [Assessed<'a>],
) -> (Vec<Holding<'a>>, Vec<ProcessId>) {
    let Some(condition) = run.condition() else {
        return (Vec::new(), Vec::new());
    };
    if condition.near && run.per_cgroup() {
        out.within_reach = true;
    }
    if !condition.holds {
        let cleared = if condition.cleared {
            assessed.iter().map(|a| a.p.id).collect()
        } else {
            Vec::new()
        };
        return (Vec::new(), cleared);
    }
    // Memory no process owns holds the shortfall, and more than the one it
    // would pick: no process can give it back, so none is picked; the one it
    // would pick says why.
    let would = {
        let procs: Vec<(&ProcessSample, Option<&ProcessTrack>)> =
            assessed.iter().map(|a| (a.p, a.track)).collect();
        select(run.rule.select.unwrap_or_default(), &procs, run.now)
    };
    if let Some(reason) = run
        .rule
        .when
        .as_ref()
        .and_then(|w| limits::unowned_shortfall(w, run.snap, would.map(|w| w.footprint)))
    {
        let held: Vec<&Assessed<'_>> = assessed
            .iter()
            .filter(|a| {
                state.ladders.contains_key(&key(run, a.p)) || would.is_some_and(|w| w.id == a.p.id)
            })
            .collect();
        for ladder in held {
            let na = NotActing {
                hold: Hold::Unowned,
                reason: reason.clone(),
            };
            state.ladders.remove(&key(run, ladder.p));
            hold_without_acting(run, state, out, ladder.p, "held", &condition.detail, &na);
        }
        return (Vec::new(), Vec::new());
    }
    let in_reach: Vec<&Assessed<'_>> = assessed
        .iter()
        .filter(|a| a.out_of_reach.is_none())
        .collect();
    let ongoing = in_reach
        .iter()
        .find(|a| state.ladders.contains_key(&key(run, a.p)))
        .copied();
    let pick = |among: &[&'a Assessed<'a>]| {
        let procs: Vec<(&ProcessSample, Option<&ProcessTrack>)> =
            among.iter().map(|a| (a.p, a.track)).collect();
        select(run.rule.select.unwrap_or_default(), &procs, run.now)
            .and_then(|v| among.iter().find(|a| a.p.id == v.id).copied())
    };
    if let Some(victim) = ongoing.or_else(|| pick(&in_reach)) {
        let holding = Holding {
            p: victim.p,
            track: victim.track,
            why: with_note(victim, condition.detail.clone()),
            limit: condition.detail,
            waits: None,
            due_in: None,
            job: victim.job,
            by_prediction: false,
        };
        return (vec![holding], Vec::new());
    }
    // Nothing in reach: say why not about the process it would pick.
    let all: Vec<&Assessed<'_>> = assessed.iter().collect();
    if let Some(victim) = pick(&all)
        && let Some(na) = &victim.out_of_reach
    {
        hold_without_acting(run, state, out, victim.p, "held", &condition.detail, na);
    }
    (Vec::new(), Vec::new())
}

/// A rule with per-process limits: a status for every matching process,
/// the processes it holds for and may act on (one at a time for a gated
/// rule), and those it holds for and does not act on, said so.
fn limit_holders<'a>(
    run: &RuleRun<'_>,
    state: &mut PolicyState,
    out: &mut Evaluation,
    assessed: &'a [Assessed<'a>],
) -> (Vec<Holding<'a>>, Vec<ProcessId>) {
    let condition = run.condition();
    if condition.as_ref().is_some_and(|c| c.near) && run.per_cgroup() {
        out.within_reach = true;
    }
    let gated_holds = condition.as_ref().is_none_or(|c| c.holds);
    let system_cleared = condition.as_ref().is_some_and(|c| c.cleared);
    let dry_run = run.dry_run();
    let mut holding = Vec::new();
    let mut cleared = Vec::new();
    for a in assessed {
        let Some(check) = &a.check else { continue };
        let holds = check.exceeded.is_some() && gated_holds;
        if a.out_of_reach.is_none() {
            if check.within_reach && gated_holds {
                out.within_reach = true;
            }
            if let Some(d) = check.predicted_crossing
                && gated_holds
            {
                out.check_at(d);
            }
        }
        let state_word = if holds {
            "crossed"
        } else if check.within_reach {
            "near"
        } else {
            "watching"
        };
        let not_acting = a
            .out_of_reach
            .as_ref()
            .map(|na| na.reason.clone())
            .or_else(|| dry_run.clone());
        out.set_status(RuleStatus {
            rule: run.rule.name.clone(),
            pid: a.p.id.pid,
            start: a.p.id.start,
            state: state_word.to_string(),
            detail: with_note(
                a,
                check
                    .exceeded
                    .clone()
                    .unwrap_or_else(|| check.limit.clone()),
            ),
            next_step: match (&a.out_of_reach, state.ladders.get(&key(run, a.p))) {
                (Some(_), _) => None,
                (None, None) => Some(0),
                (None, Some(ladder)) => {
                    Some(ladder.next_step).filter(|n| *n < run.rule.actions.len())
                }
            },
            not_acting,
            waits: None,
        });
        match &check.exceeded {
            Some(why) if gated_holds => {
                let why = match &condition {
                    Some(c) => format!("{why} while {}", c.detail),
                    None => why.clone(),
                };
                match &a.out_of_reach {
                    Some(na) => hold_without_acting(run, state, out, a.p, "crossed", &why, na),
                    None => holding.push(Holding {
                        p: a.p,
                        track: a.track,
                        why: with_note(a, why),
                        limit: check.limit.clone(),
                        waits: check.signal_waits.clone(),
                        due_in: check.due_in,
                        job: a.job,
                        by_prediction: check.by_prediction,
                    }),
                }
            }
            _ => {
                if check.cleared || system_cleared {
                    cleared.push(a.p.id);
                }
            }
        }
    }
    if run.rule.when.is_some() && holding.len() > 1 {
        holding = one_at_a_time(run, state, out, holding);
    }
    (holding, cleared)
}

/// A gated rule with limits acts on one process at a time: the one whose
/// ladder is under way, else the one `select` picks. The others hold
/// without acting, and say which one it took.
fn one_at_a_time<'a>(
    run: &RuleRun<'_>,
    state: &mut PolicyState,
    out: &mut Evaluation,
    mut holding: Vec<Holding<'a>>,
) -> Vec<Holding<'a>> {
    let current = holding
        .iter()
        .position(|h| state.ladders.contains_key(&key(run, h.p)));
    let keep = current.or_else(|| {
        let procs: Vec<(&ProcessSample, Option<&ProcessTrack>)> =
            holding.iter().map(|h| (h.p, h.track)).collect();
        select(run.rule.select.unwrap_or_default(), &procs, run.now)
            .and_then(|v| holding.iter().position(|h| h.p.id == v.id))
    });
    let Some(keep) = keep else {
        return Vec::new();
    };
    let chosen = holding.swap_remove(keep);
    for other in holding {
        let na = NotActing {
            hold: Hold::OneAtATime,
            reason: format!(
                "the rule has a [rule.when] condition and acts on one process at a time; \
                 select = {} took {} (pid {})",
                run.rule.select.unwrap_or_default(),
                crate::report::printable(&chosen.p.name),
                chosen.p.id.pid
            ),
        };
        hold_without_acting(run, state, out, other.p, "crossed", &other.why, &na);
    }
    vec![chosen]
}

/// The rule holds for `p` and does not act: its status says why, and the
/// journal gets one event per crossing and reason.
fn hold_without_acting(
    run: &RuleRun<'_>,
    state: &mut PolicyState,
    out: &mut Evaluation,
    p: &ProcessSample,
    word: &str,
    detail: &str,
    na: &NotActing,
) {
    out.set_status(RuleStatus {
        rule: run.rule.name.clone(),
        pid: p.id.pid,
        start: p.id.start,
        state: format!("{word}, not acting"),
        detail: format!("{detail}; not acting: {}", na.reason),
        not_acting: Some(na.reason.clone()),
        next_step: None,
        waits: None,
    });
    if state.not_acting.insert(key(run, p), na.hold) != Some(na.hold) {
        out.events.push(EventKind::LimitHeldNotActing {
            rule: run.rule.name.clone(),
            process: ProcessRef::of(p),
            detail: detail.to_string(),
            reason: na.reason.clone(),
        });
    }
}

fn key(run: &RuleRun<'_>, p: &ProcessSample) -> Key {
    (run.rule.name.clone(), ladder_id(run.snap, p.id))
}

/// Whose ladder, cooldown and hold a process carries: its own, or where it
/// stands for the ended root of an orphaned job, that root's, so that the
/// rule's steps go on when the member standing for it ends (a SIGINT ends
/// a worker) and another takes its place.
fn ladder_id(snap: &Snapshot, id: ProcessId) -> ProcessId {
    snap.job(id.pid)
        .filter(|j| j.root == id)
        .and_then(|j| j.ended_root.as_ref())
        .map_or(id, |ended| ended.id)
}

/// Forget the ladders and held crossings whose limit fell back below the
/// margin, and say so.
fn clear(run: &RuleRun<'_>, state: &mut PolicyState, out: &mut Evaluation, ids: Vec<ProcessId>) {
    for id in ids {
        // The ended root of an orphaned job, still listed as a zombie: its
        // ladder is its orphans' now, and theirs to clear.
        if run
            .snap
            .jobs
            .iter()
            .any(|j| j.root != id && j.ended_root.as_ref().is_some_and(|e| e.id == id))
        {
            continue;
        }
        let key = (run.rule.name.clone(), ladder_id(run.snap, id));
        let ladder = state.ladders.remove(&key);
        if let Some(l) = ladder.as_ref().filter(|l| {
            key.1 != id
                && l.last_step_at.is_some()
                && l.next_step < run.rule.actions.len()
                && l.acted_on.is_some()
        }) {
            state.paused.insert(key.clone(), l.clone());
        }
        let held = state.not_acting.remove(&key).is_some();
        if ladder.is_none() && !held {
            continue;
        }
        let process = run
            .snap
            .processes
            .iter()
            .find(|p| p.id == id)
            .map(ProcessRef::of)
            .or_else(|| ladder.map(|l| l.process));
        if let Some(process) = process {
            out.events.push(EventKind::LimitCleared {
                rule: run.rule.name.clone(),
                process,
                detail: "back below the limit by the hysteresis margin".to_string(),
            });
        }
    }
}

/// Why a rule may not start a ladder on `p` now: its own cooldown on this
/// process, or (gated rules) its cooldown since its last victim.
fn in_cooldown(run: &RuleRun<'_>, state: &PolicyState, p: &ProcessSample) -> Option<NotActing> {
    let rule = run.rule;
    if let Some(&last) = state.last_acted.get(&key(run, p))
        && run.now < last.plus(rule.cooldown)
    {
        return Some(NotActing {
            hold: Hold::Cooldown,
            reason: assess::cooldown_reason(rule, last, run.now),
        });
    }
    let victim = state.last_victim.get(&run.victim_key())?;
    if rule.when.is_none() || run.now >= victim.at.plus(rule.cooldown) {
        return None;
    }
    Some(NotActing {
        hold: Hold::OneAtATime,
        reason: format!(
            "cooldown: the rule has a [rule.when] condition and took {} (pid {}) {} ago; it \
             takes a new process no sooner than cooldown = {} after that (in {})",
            crate::report::printable(&victim.process.name),
            victim.process.pid,
            assess::seconds(run.now.since(victim.at)),
            humantime::format_duration(rule.cooldown),
            assess::seconds(victim.at.plus(rule.cooldown).since(run.now))
        ),
    })
}

/// Take `held` one step along its ladder: start it (or say why not),
/// take the step that is due, or wait.
fn advance(run: &RuleRun<'_>, state: &mut PolicyState, out: &mut Evaluation, held: Holding<'_>) {
    let Holding {
        p,
        track,
        why,
        limit,
        waits,
        due_in,
        job,
        by_prediction,
    } = held;
    let rule = run.rule;
    let key = key(run, p);
    let word = if rule.limits.is_empty() {
        "held"
    } else {
        "crossed"
    };
    // An orphaned job held again within the cooldown of a step that ended
    // the member standing for it: on from where it stopped.
    if !state.ladders.contains_key(&key)
        && let Some(paused) = state.paused.remove(&key).filter(|l| {
            l.last_step_at
                .is_some_and(|last| run.now < last.plus(rule.cooldown))
                && l.acted_on.is_some_and(|on| on != p.id)
        })
    {
        out.events.push(EventKind::LimitCrossed {
            rule: rule.name.clone(),
            process: ProcessRef::of(p),
            detail: format!(
                "{why} (again, {} after step {} of {}, which did not stop it: the ladder goes on \
                 at step {})",
                assess::seconds(run.now.since(paused.last_step_at.unwrap_or(run.now))),
                paused.next_step,
                rule.actions.len(),
                paused.next_step + 1
            ),
        });
        state.not_acting.remove(&key);
        state.ladders.insert(key.clone(), paused);
    }
    if !state.ladders.contains_key(&key) {
        if let Some(na) = in_cooldown(run, state, p) {
            hold_without_acting(run, state, out, p, word, &why, &na);
            return;
        }
        state.not_acting.remove(&key);
        out.events.push(EventKind::LimitCrossed {
            rule: rule.name.clone(),
            process: ProcessRef::of(p),
            detail: why.clone(),
        });
        // Told already, within the cooldown: the warning is not repeated.
        let noticed = state
            .last_noticed
            .get(&key)
            .is_some_and(|at| run.now < at.plus(rule.cooldown));
        let next_step = if noticed {
            rule.actions
                .iter()
                .position(|s| !matches!(s.action, Action::Notify))
                .unwrap_or(rule.actions.len())
        } else {
            0
        };
        state.ladders.insert(
            key.clone(),
            Ladder {
                next_step,
                last_step_at: None,
                process: ProcessRef::of(p),
                acted_on: None,
            },
        );
    }
    let Some(ladder) = state.ladders.get_mut(&key) else {
        return;
    };
    ladder.process = ProcessRef::of(p);
    if ladder.next_step >= rule.actions.len()
        && ladder
            .last_step_at
            .is_some_and(|last| run.now >= last.plus(rule.cooldown))
    {
        // Still over the limit a whole cooldown after the last step:
        // climb the ladder again.
        out.events.push(EventKind::LimitCrossed {
            rule: rule.name.clone(),
            process: ProcessRef::of(p),
            detail: format!(
                "{why} (still, {} after the last action)",
                humantime::format_duration(rule.cooldown)
            ),
        });
        ladder.next_step = 0;
        ladder.last_step_at = None;
    }
    let dry_run = run.dry_run();
    let status = |state: String, detail: String, not_acting, next_step| RuleStatus {
        rule: rule.name.clone(),
        pid: p.id.pid,
        start: p.id.start,
        state,
        detail,
        not_acting,
        next_step,
        waits: None,
    };
    let dry = |word: &str| match dry_run {
        Some(_) => format!("{word}, dry run"),
        None => word.to_string(),
    };
    let Some(step) = rule.actions.get(ladder.next_step) else {
        // Ladder done: hold until it clears or the cooldown is over.
        let last = ladder.last_step_at.unwrap_or(run.now);
        let again = last.plus(rule.cooldown);
        out.check_at(again.since(run.now));
        let done = format!(
            "every step has run, the last {} ago; the ladder starts again after cooldown = {} \
             (in {}) if the rule still holds",
            assess::seconds(run.now.since(last)),
            humantime::format_duration(rule.cooldown),
            assess::seconds(again.since(run.now))
        );
        let reason = match &dry_run {
            Some(d) => format!("{d}; {done}"),
            None => done,
        };
        out.set_status(status(dry("done"), why, Some(reason), None));
        return;
    };
    out.within_reach = true;
    let due = match ladder.last_step_at {
        None => run.now,
        Some(last) => last.plus(step.after),
    };
    if run.now < due {
        out.check_at(due.since(run.now));
        let taken = ladder.next_step;
        out.set_status(status(
            dry(&format!("step {taken}/{}", rule.actions.len())),
            why,
            dry_run.clone(),
            Some(ladder.next_step),
        ));
        return;
    }
    // Warn early, act just in time: a signal or hook for a prediction waits
    // until it is due; a notification speaks at once. After a signal or
    // hook, the next one goes only if the memory keeps running out once
    // that one had time to take effect.
    let acts = !matches!(step.action, Action::Notify);
    let after_signal = ladder
        .next_step
        .checked_sub(1)
        .and_then(|i| rule.actions.get(i))
        .is_some_and(|s| !matches!(s.action, Action::Notify));
    let waits = match (waits, ladder.last_step_at) {
        (Some(w), _) => Some(w),
        (None, Some(last)) if acts && by_prediction && after_signal => {
            let lead = rule.lead_or(run.config.daemon.fast_interval);
            let limit = rule.limits.time_to_exhaustion.unwrap_or_default();
            match exhaustion::due_after_step(
                run.history,
                run.snap,
                p,
                track,
                last,
                run.now,
                limit,
                lead,
            ) {
                exhaustion::Due::Now(_) => None,
                exhaustion::Due::Waits { why, in_time } => {
                    if let Some(d) = in_time {
                        out.check_at(d);
                    }
                    Some(why)
                }
            }
        }
        _ => None,
    };
    if let Some(wait) = waits.filter(|_| acts) {
        if let Some(d) = due_in {
            out.check_at(d);
        }
        let taken = ladder.next_step;
        let word = if taken == 0 {
            "crossed".to_string()
        } else {
            format!("step {taken}/{}", rule.actions.len())
        };
        let mut s = status(dry(&word), why, dry_run.clone(), Some(taken));
        s.waits = Some(wait);
        out.set_status(s);
        return;
    }
    // A step sent to a job's workers: each worker it may reach, checked
    // as the rule checks any process; none to reach skips the step.
    let targets: Vec<ProcessRef> = match step.to {
        crate::config::Target::Process => vec![ProcessRef::of(p)],
        crate::config::Target::Workers => workers_in_reach(run, job),
    };
    let first = Decision {
        rule: rule.name.clone(),
        process: ProcessRef::of(p),
        step: ladder.next_step,
        action: step.action.clone(),
        dry_run: dry_run.is_some(),
        replayed: run.snap.replayed,
        limit,
        reason: why.clone(),
        reach: Reach::of_rule(rule, &run.config.protect, run.ctx.self_uid),
    };
    let decisions: Vec<Decision> = targets
        .into_iter()
        .map(|process| {
            let mut d = first.clone();
            if process.pid != p.id.pid {
                d.reason = format!(
                    "{} (worker of the job of {} (pid {}))",
                    first.reason,
                    crate::report::printable(&p.name),
                    p.id.pid
                );
            }
            d.process = process;
            d
        })
        .collect();
    let decision = first;
    ladder.next_step += 1;
    ladder.last_step_at = Some(run.now);
    let next = rule.actions.get(ladder.next_step);
    if let Some(next) = next {
        out.check_at(next.after);
    }
    if matches!(decision.action, Action::Notify) {
        state.last_noticed.insert(key, run.now);
    } else {
        ladder.acted_on = Some(p.id);
        state.last_acted.insert(key, run.now);
    }
    if decision.step == 0 && rule.when.is_some() {
        state.last_victim.insert(
            run.victim_key(),
            Victim {
                at: run.now,
                process: ProcessRef::of(p),
            },
        );
    }
    out.set_status(status(
        dry(&format!(
            "step {}/{}",
            decision.step + 1,
            rule.actions.len()
        )),
        why,
        dry_run,
        next.map(|_| decision.step + 1),
    ));
    out.decisions.extend(decisions);
}

/// The workers of `job` (every member but its root) that the rule may act
/// on: alive in the snapshot, its owner within the rule's reach, not
/// protected.
fn workers_in_reach(run: &RuleRun<'_>, job: Option<&crate::model::Job>) -> Vec<ProcessRef> {
    let Some(job) = job else {
        return Vec::new();
    };
    job.worker_pids()
        .filter_map(|pid| run.snap.process(pid))
        .filter(|w| run.may_act_on(w))
        .map(ProcessRef::of)
        .collect()
}

/// Pick one process by the rule's `select`, each candidate with its series
/// (a job root standing for its job: the job's total and its series, so
/// that jobs are weighed with their memory counted once).
fn select<'a>(
    how: Select,
    candidates: &[(&'a ProcessSample, Option<&ProcessTrack>)],
    now: Timestamp,
) -> Option<&'a ProcessSample> {
    type Pair<'x, 'y> = (&'x ProcessSample, Option<&'y ProcessTrack>);
    let tie = |a: &Pair<'_, '_>, b: &Pair<'_, '_>| b.0.id.pid.cmp(&a.0.id.pid);
    let chosen = match how {
        Select::Largest => candidates
            .iter()
            .max_by(|a, b| a.0.footprint.cmp(&b.0.footprint).then(tie(a, b))),
        Select::Newest => candidates
            .iter()
            .max_by(|a, b| a.0.id.start.cmp(&b.0.id.start).then(tie(a, b))),
        Select::FastestGrowing => {
            let growth = |(p, track): &Pair<'_, '_>| {
                track
                    .and_then(|t| t.trend(now, limits::PREDICTION_WINDOW, p.started_at))
                    .unwrap_or(f64::NEG_INFINITY)
            };
            candidates
                .iter()
                .max_by(|a, b| growth(a).total_cmp(&growth(b)).then(tie(a, b)))
        }
    };
    chosen.map(|c| c.0)
}
