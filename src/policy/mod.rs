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

pub mod decision;
pub mod limits;
pub mod protection;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde::Serialize;

pub use decision::{Action, Decision, SignalName};
pub use protection::{Protection, Reach};

use crate::config::{Config, Rule, Select};
use crate::event::{EventKind, ProcessRef};
use crate::history::History;
use crate::model::{ProcessId, ProcessSample, Snapshot, Timestamp};

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
}

/// What the policy remembers between samples.
#[derive(Debug, Clone, Default)]
pub struct PolicyState {
    ladders: HashMap<(String, ProcessId), Ladder>,
    /// No new ladder for (rule, process) before this time.
    cooldown_until: HashMap<(String, ProcessId), Timestamp>,
    /// Gated rules: no new victim before this time.
    rule_cooldown_until: HashMap<String, Timestamp>,
}

/// A rule's view of one process, for the API and status page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleStatus {
    pub rule: String,
    pub pid: u32,
    pub start: u64,
    /// `watching`, `near` (within reach), `crossed`, `step 1/3`, `done`.
    pub state: String,
    pub detail: String,
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
    let hard = protection::hard_protected(snap, ctx.self_pid);
    let present: HashSet<ProcessId> = snap.processes.iter().map(|p| p.id).collect();

    // Ladders of rules that no longer exist (config reload) are dropped.
    let names: HashSet<&str> = config.rules.iter().map(|r| r.name.as_str()).collect();
    state
        .ladders
        .retain(|(rule, _), _| names.contains(rule.as_str()));

    for rule in &config.rules {
        evaluate_rule(
            rule, config, state, history, snap, ctx, now, &hard, &mut out,
        );
    }

    // Ladders of processes that have gone.
    state.ladders.retain(|(_, id), _| present.contains(id));
    state.cooldown_until.retain(|_, until| *until > now);
    state.rule_cooldown_until.retain(|_, until| *until > now);
    out
}

#[expect(
    clippy::too_many_arguments,
    reason = "one rule's slice of evaluate's inputs"
)]
fn evaluate_rule(
    rule: &Rule,
    config: &Config,
    state: &mut PolicyState,
    history: &History,
    snap: &Snapshot,
    ctx: Context,
    now: Timestamp,
    hard: &HashSet<u32>,
    out: &mut Evaluation,
) {
    // The processes the rule may act on. A protected one gets a status that
    // says why; one whose listed name or path does not protect it (another
    // user's process named `sshd`) carries a note that says why not, into
    // its status, its events and the decision's reason.
    let mut candidates: Vec<&ProcessSample> = Vec::new();
    let mut notes: HashMap<ProcessId, String> = HashMap::new();
    for p in snap.processes.iter().filter(|p| rule.matcher.matches(p)) {
        if !protection::user_allowed(rule, p, ctx.self_uid) {
            continue;
        }
        match protection::protection(p, &config.protect, hard, ctx.self_pid) {
            Protection::Protected(why) => out.statuses.push(RuleStatus {
                rule: rule.name.clone(),
                pid: p.id.pid,
                start: p.id.start,
                state: "protected".to_string(),
                detail: why,
            }),
            Protection::Unprotected(note) => {
                if let Some(note) = note {
                    notes.insert(p.id, format!("not protected: {note}"));
                }
                candidates.push(p);
            }
        }
    }
    let with_note = |p: &ProcessSample, text: String| match notes.get(&p.id) {
        Some(note) => format!("{text}; {note}"),
        None => text,
    };

    let condition = rule
        .when
        .as_ref()
        .map(|w| limits::check_condition(w, snap, rule.hysteresis));
    let gated_holds = condition.as_ref().is_none_or(|c| c.holds);

    // Which processes the rule holds for now, and why.
    let mut holding: Vec<(&ProcessSample, String, String)> = Vec::new();
    let mut cleared: HashSet<ProcessId> = HashSet::new();
    if rule.limits.is_empty() {
        // Gated rule without per-process limits: one victim while the
        // condition holds; keep the victim of a ladder under way.
        if gated_holds {
            let current = candidates
                .iter()
                .find(|p| state.ladders.contains_key(&(rule.name.clone(), p.id)));
            let victim = current
                .copied()
                .or_else(|| select(rule.select.unwrap_or_default(), &candidates, history, now));
            if let Some(v) = victim {
                let detail = condition
                    .as_ref()
                    .map(|c| c.detail.clone())
                    .unwrap_or_default();
                holding.push((v, detail.clone(), detail));
            }
        } else if condition.as_ref().is_some_and(|c| c.cleared) {
            cleared.extend(candidates.iter().map(|p| p.id));
        }
    } else {
        for p in &candidates {
            let check = limits::check(rule, p, history.process(&p.id), snap, now);
            if check.within_reach && gated_holds {
                out.within_reach = true;
            }
            if let Some(d) = check.predicted_crossing
                && gated_holds
            {
                out.check_at(d);
            }
            let state_word = if check.exceeded.is_some() && gated_holds {
                "crossed"
            } else if check.within_reach {
                "near"
            } else {
                "watching"
            };
            out.statuses.push(RuleStatus {
                rule: rule.name.clone(),
                pid: p.id.pid,
                start: p.id.start,
                state: state_word.to_string(),
                detail: with_note(
                    p,
                    check
                        .exceeded
                        .clone()
                        .unwrap_or_else(|| check.limit.clone()),
                ),
            });
            match check.exceeded {
                Some(why) if gated_holds => {
                    let why = match &condition {
                        Some(c) => format!("{why} while {}", c.detail),
                        None => why,
                    };
                    holding.push((p, why, check.limit));
                }
                _ => {
                    let system_cleared = condition.as_ref().is_some_and(|c| c.cleared);
                    if check.cleared || system_cleared {
                        cleared.insert(p.id);
                    }
                }
            }
        }
        if rule.when.is_some() && !holding.is_empty() {
            // A gated rule with limits acts on one process at a time too.
            let current = holding
                .iter()
                .position(|(p, _, _)| state.ladders.contains_key(&(rule.name.clone(), p.id)));
            let keep = match current {
                Some(i) => Some(i),
                None => {
                    let procs: Vec<&ProcessSample> = holding.iter().map(|(p, _, _)| *p).collect();
                    select(rule.select.unwrap_or_default(), &procs, history, now)
                        .and_then(|v| holding.iter().position(|(p, _, _)| p.id == v.id))
                }
            };
            holding = keep
                .map(|i| vec![holding.swap_remove(i)])
                .unwrap_or_default();
        }
    }

    // Clear ladders whose limit fell back below the margin.
    for id in cleared {
        let key = (rule.name.clone(), id);
        if let Some(ladder) = state.ladders.remove(&key) {
            let process = snap
                .processes
                .iter()
                .find(|p| p.id == id)
                .map_or(ladder.process.clone(), ProcessRef::of);
            out.events.push(EventKind::LimitCleared {
                rule: rule.name.clone(),
                process,
                detail: "back below the limit by the hysteresis margin".to_string(),
            });
        }
    }

    for (p, why, limit) in holding {
        let why = with_note(p, why);
        let key = (rule.name.clone(), p.id);
        if !state.ladders.contains_key(&key) {
            if state.cooldown_until.get(&key).is_some_and(|t| now < *t) {
                continue;
            }
            if rule.when.is_some()
                && state
                    .rule_cooldown_until
                    .get(&rule.name)
                    .is_some_and(|t| now < *t)
            {
                continue;
            }
            out.events.push(EventKind::LimitCrossed {
                rule: rule.name.clone(),
                process: ProcessRef::of(p),
                detail: why.clone(),
            });
            state.ladders.insert(
                key.clone(),
                Ladder {
                    next_step: 0,
                    last_step_at: None,
                    process: ProcessRef::of(p),
                },
            );
        }
        let Some(ladder) = state.ladders.get_mut(&key) else {
            continue;
        };
        ladder.process = ProcessRef::of(p);
        if ladder.next_step >= rule.actions.len()
            && ladder
                .last_step_at
                .is_some_and(|last| now >= last.plus(rule.cooldown))
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
        let Some(step) = rule.actions.get(ladder.next_step) else {
            // Ladder done: hold until it clears or the cooldown is over.
            if let Some(last) = ladder.last_step_at {
                out.check_at(last.plus(rule.cooldown).since(now));
            }
            out.statuses
                .retain(|s| !(s.rule == rule.name && s.pid == p.id.pid));
            out.statuses.push(RuleStatus {
                rule: rule.name.clone(),
                pid: p.id.pid,
                start: p.id.start,
                state: "done".to_string(),
                detail: why,
            });
            continue;
        };
        out.within_reach = true;
        let due = match ladder.last_step_at {
            None => now,
            Some(last) => last.plus(step.after),
        };
        if now < due {
            out.check_at(due.since(now));
            continue;
        }
        let decision = Decision {
            rule: rule.name.clone(),
            process: ProcessRef::of(p),
            step: ladder.next_step,
            action: step.action.clone(),
            dry_run: rule.dry_run || config.daemon.dry_run,
            limit: limit.clone(),
            reason: why.clone(),
            reach: Reach::of_rule(rule, &config.protect, ctx.self_uid),
        };
        ladder.next_step += 1;
        ladder.last_step_at = Some(now);
        if let Some(next) = rule.actions.get(ladder.next_step) {
            out.check_at(next.after);
        }
        state
            .cooldown_until
            .insert(key.clone(), now.plus(rule.cooldown));
        if decision.step == 0 && rule.when.is_some() {
            state
                .rule_cooldown_until
                .insert(rule.name.clone(), now.plus(rule.cooldown));
        }
        out.statuses
            .retain(|s| !(s.rule == rule.name && s.pid == p.id.pid));
        out.statuses.push(RuleStatus {
            rule: rule.name.clone(),
            pid: p.id.pid,
            start: p.id.start,
            state: format!("step {}/{}", decision.step + 1, rule.actions.len()),
            detail: why,
        });
        out.decisions.push(decision);
    }
}

/// Pick one process by the rule's `select`.
fn select<'a>(
    how: Select,
    candidates: &[&'a ProcessSample],
    history: &History,
    now: Timestamp,
) -> Option<&'a ProcessSample> {
    let tie = |a: &&ProcessSample, b: &&ProcessSample| b.id.pid.cmp(&a.id.pid);
    match how {
        Select::Largest => candidates
            .iter()
            .copied()
            .max_by(|a, b| a.footprint.cmp(&b.footprint).then(tie(a, b))),
        Select::Newest => candidates
            .iter()
            .copied()
            .max_by(|a, b| a.id.start.cmp(&b.id.start).then(tie(a, b))),
        Select::FastestGrowing => {
            let growth = |p: &ProcessSample| {
                history
                    .process(&p.id)
                    .and_then(|t| t.trend(now, limits::PREDICTION_WINDOW, p.started_at))
                    .unwrap_or(f64::NEG_INFINITY)
            };
            candidates
                .iter()
                .copied()
                .max_by(|a, b| growth(a).total_cmp(&growth(b)).then(tie(a, b)))
        }
    }
}
