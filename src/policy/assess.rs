//! One rule's view of one process, shared by [`super::evaluate`] and
//! [`super::explain()`]: whether the rule may act on it (its owner, its
//! protection), its limits read against the latest sample, and why a rule
//! that holds does not act, in words that say what to change.
//!
//! Nothing here keeps state: the ladder and the cooldowns live in
//! [`super::PolicyState`], which only `evaluate` touches.

use std::borrow::Cow;
use std::time::Duration;

use super::Context;
use super::limits::{self, ConditionCheck, LimitCheck};
use super::protection::{self, HardProtected, Protection};
use crate::config::{Config, Rule, Scope, Step};
use crate::history::{History, ProcessTrack};
use crate::model::Action;
use crate::model::{Ceiling, Job, ProcessSample, Snapshot, Timestamp};

/// Why a rule that holds for a process does not act on it. One journal
/// event per crossing and kind: a new kind within the same crossing (the
/// cooldown ran out, the config changed) is journaled again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hold {
    /// The rule's `other_users` / `root` do not cover its owner.
    Owner,
    /// PID 1, headroom, an ancestor of headroom, or `[protect]`.
    Protected,
    /// The rule acted on it less than `cooldown` ago.
    Cooldown,
    /// A rule gated by `[rule.when]` took another process less than
    /// `cooldown` ago, or holds for another one now.
    OneAtATime,
    /// The memory that is short is held by no process (tmpfs files nobody
    /// maps, orphaned SysV segments): signalling one would free none of it.
    Unowned,
}

/// A rule holds (or would hold) for a process and does not act, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotActing {
    pub hold: Hold,
    pub reason: String,
}

/// Everything one evaluation shares across one rule's processes.
#[derive(Clone, Copy)]
pub(super) struct RuleRun<'a> {
    pub rule: &'a Rule,
    pub config: &'a Config,
    pub history: &'a History,
    pub snap: &'a Snapshot,
    pub ctx: Context,
    pub now: Timestamp,
    /// The hard-wired protected pids (see [`protection::hard_protected`]).
    pub hard: &'a HardProtected<'a>,
    /// For a rule whose `[rule.when]` is read per cgroup: the limited
    /// cgroup this run reads it in and picks a victim among (`None`: the
    /// processes in no limited cgroup).
    pub ceiling: Option<&'a Ceiling>,
}

/// What a rule judges: a process, or a job root standing for its job
/// (footprint and GPU memory the job's totals, growth its total's series).
pub(super) struct Candidate<'a> {
    pub p: Cow<'a, ProcessSample>,
    pub track: Option<&'a ProcessTrack>,
    /// The job it stands for, when it is a root judged on its job.
    pub job: Option<&'a Job>,
}

/// How a rule sees a process it matches, under its `scope`.
pub(super) enum View<'a> {
    /// Judged as itself, or as its job.
    Judged(Box<Candidate<'a>>),
    /// A worker of a job whose root the rule also matches: judged with
    /// that job, not on its own.
    WithJob(&'a Job),
}

/// One matching process as the rule sees it.
pub(super) struct Assessed<'a> {
    pub p: &'a ProcessSample,
    /// Its series (its job's, for a root standing for its job).
    pub track: Option<&'a ProcessTrack>,
    /// The job it stands for, when it is a root judged on its job.
    pub job: Option<&'a Job>,
    /// Why the rule may not act on it at all (owner, protection).
    pub out_of_reach: Option<NotActing>,
    /// Why a listed name or path does not protect it (`not protected: …`).
    pub note: Option<String>,
    /// Its per-process limits; `None` for a rule without any.
    pub check: Option<LimitCheck>,
}

/// Whether `rule` matches `p` of `snap`: by what it is, or, where `p`
/// stands for the ended root of an orphaned job
/// ([`crate::model::Job::ended_root`]), by what that root was (its kind;
/// the rest a forked worker shares with it: name, command line, user,
/// cgroup).
pub fn rule_matches(rule: &Rule, snap: &Snapshot, p: &ProcessSample) -> bool {
    if rule.matcher.matches(p) {
        return true;
    }
    let Some(ended) = snap
        .job_of(p)
        .filter(|j| j.root == p.id)
        .and_then(|j| j.ended_root.as_ref())
    else {
        return false;
    };
    let mut as_root = p.clone();
    as_root.workload.kind = ended.kind;
    rule.matcher.matches(&as_root)
}

impl<'a> RuleRun<'a> {
    /// How the rule sees `p`, which it must match: a job root with workers
    /// stands for its job (scope = "job"), a worker of a job whose root the
    /// rule matches is judged with that job, anything else as itself.
    pub fn view(&self, p: &'a ProcessSample) -> View<'a> {
        let own = || Candidate {
            p: Cow::Borrowed(p),
            track: self.history.process(&p.id),
            job: None,
        };
        if self.rule.scope == Scope::Process {
            return View::Judged(Box::new(own()));
        }
        let Some(job) = self.snap.job_of(p).filter(|j| j.workers() > 0) else {
            return View::Judged(Box::new(own()));
        };
        if job.root != p.id {
            let root_matches = self
                .snap
                .process(job.pid())
                .is_some_and(|root| self.matches(root));
            return if root_matches {
                View::WithJob(job)
            } else {
                View::Judged(Box::new(own()))
            };
        }
        let mut stand_in = p.clone();
        stand_in.footprint = job.footprint;
        stand_in.gpu_memory = job.gpu_memory;
        View::Judged(Box::new(Candidate {
            p: Cow::Owned(stand_in),
            track: self.history.job(&p.id),
            job: Some(job),
        }))
    }

    /// Whether the rule matches `p`: by what it is, or, standing for the
    /// ended root of an orphaned job ([`crate::model::Job::ended_root`]),
    /// by what that root was (its kind; the rest a forked worker shares
    /// with it: name, command line, user, cgroup).
    pub fn matches(&self, p: &ProcessSample) -> bool {
        rule_matches(self.rule, self.snap, p)
    }

    /// Every process the rule matches, as it judges them (see
    /// [`Self::view`]), in snapshot order.
    pub fn candidates(&self) -> Vec<Candidate<'a>> {
        self.snap
            .processes
            .iter()
            .filter(|p| self.matches(p))
            .filter_map(|p| match self.view(p) {
                View::Judged(c) => Some(*c),
                View::WithJob(_) => None,
            })
            .collect()
    }

    /// The rule's view of a candidate.
    pub fn assess<'c>(&self, c: &'c Candidate<'a>) -> Assessed<'c>
    where
        'a: 'c,
    {
        let p: &'c ProcessSample = &c.p;
        let (out_of_reach, note) = self.reach(p);
        let check = (!self.rule.limits.is_empty()).then(|| {
            let outlook = self.rule.limits.time_to_exhaustion.map(|_| {
                super::exhaustion::outlook(
                    self.history,
                    self.snap,
                    p,
                    self.rule.window,
                    self.now,
                    limits::MIN_GROWTH_POINTS,
                )
            });
            limits::check(
                self.rule,
                p,
                c.track,
                self.snap,
                self.now,
                limits::Scale {
                    job: c.job,
                    outlook,
                    lead: super::exhaustion::ladder_lead(
                        &self.rule.actions,
                        self.rule.lead_or(self.config.daemon.fast_interval),
                        c.job.is_some_and(|job| {
                            super::exhaustion::workers_grow(self.history, self.snap, job, self.now)
                        }),
                    ),
                },
            )
        });
        Assessed {
            p,
            track: c.track,
            job: c.job,
            out_of_reach,
            note,
            check,
        }
    }

    /// The rule may act on `p`: its owner is in reach, and it is not
    /// protected.
    pub fn may_act_on(&self, p: &ProcessSample) -> bool {
        self.reach(p).0.is_none()
    }

    /// Whether the rule may act on `p`: why not, or a note on a listed
    /// name that does not protect it.
    fn reach(&self, p: &ProcessSample) -> (Option<NotActing>, Option<String>) {
        let rule = self.rule;
        if let Some(reason) = protection::owner_refusal(
            rule.other_users,
            rule.root,
            p.uid,
            p.user.as_deref(),
            self.ctx.self_uid,
        ) {
            return (
                Some(NotActing {
                    hold: Hold::Owner,
                    reason,
                }),
                None,
            );
        }
        match protection::protection(p, &self.config.protect, self.hard.get(), self.ctx.self_pid) {
            Protection::Protected(why) => (
                Some(NotActing {
                    hold: Hold::Protected,
                    reason: format!("protected: {why}"),
                }),
                None,
            ),
            Protection::Unprotected(note) => (None, note.map(|n| format!("not protected: {n}"))),
        }
    }

    /// The rule's `[rule.when]`, read against the sample (per cgroup:
    /// against this run's cgroup).
    pub fn condition(&self) -> Option<ConditionCheck> {
        self.rule
            .when
            .as_ref()
            .map(|w| limits::check_condition(w, self.snap, self.ceiling, self.rule.hysteresis))
    }

    /// Whether the rule's `[rule.when]` is read in each limited cgroup.
    pub fn per_cgroup(&self) -> bool {
        self.rule
            .when
            .as_ref()
            .is_some_and(|w| w.per == crate::config::Per::Cgroup)
    }

    /// This run for the limited cgroup that is `p`'s ceiling, where the
    /// rule reads its condition per cgroup.
    pub fn in_cgroup_of(self, p: &ProcessSample) -> Self {
        if !self.per_cgroup() {
            return self;
        }
        Self {
            ceiling: self.snap.ceiling_of(p),
            ..self
        }
    }

    /// The victim scope of a gated rule: the rule, and per cgroup the
    /// cgroup it picks in.
    pub fn victim_key(&self) -> (String, Option<crate::model::SharedStr>) {
        (self.rule.name.clone(), self.ceiling.map(|c| c.path.clone()))
    }

    /// Why the rule's steps are journaled and not carried out, if they
    /// are: a replayed snapshot first (nothing it holds is a process of
    /// this machine), then the rule's or the daemon's dry run.
    pub fn dry_run(&self) -> Option<String> {
        if self.snap.replayed {
            return Some(REPLAY_DRY_RUN.to_string());
        }
        dry_run_reason(self.rule, self.config)
    }
}

/// Why a replayed snapshot's steps are never carried out.
pub const REPLAY_DRY_RUN: &str = "dry run: replaying a recorded trace (run --replay), so steps \
     are journaled and logged, never carried out on this machine's processes";

/// Why `rule`'s steps are journaled and not carried out under `config`, if
/// they are: the rule's `dry_run`, or the daemon's.
pub fn dry_run_reason(rule: &Rule, config: &Config) -> Option<String> {
    if rule.dry_run {
        Some(
            "dry run: the rule has dry_run = true, so its steps are journaled and not carried \
             out; remove dry_run to act"
                .to_string(),
        )
    } else if config.daemon.dry_run {
        Some(
            "dry run: headroom runs with dry_run (daemon.dry_run = true or --dry-run), so steps \
             are journaled and not carried out"
                .to_string(),
        )
    } else {
        None
    }
}

/// `12s`, `4m 50s`: a duration rounded to whole seconds, as people read it.
pub fn seconds(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// Why a rule that acted on the process waits: `cooldown` after `last`.
pub fn cooldown_reason(rule: &Rule, last: Timestamp, now: Timestamp) -> String {
    let until = last.plus(rule.cooldown);
    format!(
        "cooldown: the rule acted on it {} ago and starts again no sooner than cooldown = {} \
         after that (in {})",
        seconds(now.since(last)),
        humantime::format_duration(rule.cooldown),
        seconds(until.since(now))
    )
}

/// One step of a ladder in words: `SIGINT (only if it catches SIGINT)`,
/// `SIGTERM to its process group`, `hook /usr/local/bin/save (timeout
/// 10s)`, `notify`.
pub fn step_words(step: &Step) -> String {
    match &step.action {
        Action::Signal {
            signal,
            require_handler,
            process_group,
        } => {
            let mut s = format!("send {signal}");
            if *process_group {
                s.push_str(" to its process group");
            }
            if *require_handler {
                s.push_str(&format!(
                    " (only if it catches {signal}; skipped otherwise)"
                ));
            }
            s
        }
        Action::Hook {
            command, timeout, ..
        } => format!(
            "run the hook {} (timeout {})",
            command.display(),
            humantime::format_duration(*timeout)
        ),
        Action::Notify => "show a desktop notification".to_string(),
    }
}

/// Step `i` of `rule`'s ladder, numbered for people: `step 2 of 2, 2s
/// after step 1: show a desktop notification`.
pub fn numbered_step(rule: &Rule, i: usize) -> Option<String> {
    let step = rule.actions.get(i)?;
    let when = if i == 0 {
        String::new()
    } else {
        format!(
            ", {} after step {i}",
            humantime::format_duration(step.after)
        )
    };
    Some(format!(
        "step {} of {}{when}: {}",
        i + 1,
        rule.actions.len(),
        step_words(step)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> (Config, Rule) {
        let config = Config::from_toml_str(text, "t").unwrap();
        let rule = config.rules[0].clone();
        (config, rule)
    }

    #[test]
    fn a_rule_on_kernels_matches_the_job_of_an_ended_kernel_by_its_stand_in() {
        use crate::model::build::{kernel, process, snapshot};
        use crate::model::{EndedRoot, ProcessId, WorkloadKind};
        let (_, r) = rule(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n\
             [rule.match]\nworkload = [\"jupyter\"]\n",
        );
        let worker = |pid| kernel(pid).ppid(1).kind(WorkloadKind::Python).job(201);
        let mut snap = snapshot(0)
            .process(worker(200))
            .process(worker(201))
            .process(process(300).kind(WorkloadKind::Python))
            .job_of(201, crate::model::Basis::Rss)
            .build();
        assert_eq!(snap.jobs.len(), 1);
        assert!(
            !rule_matches(&r, &snap, snap.process(201).unwrap()),
            "a job with a live root: its workers are not kernels"
        );
        snap.jobs[0].ended_root = Some(EndedRoot {
            id: ProcessId { pid: 100, start: 1 },
            name: "python3".into(),
            kind: WorkloadKind::Jupyter,
        });
        assert!(
            rule_matches(&r, &snap, snap.process(201).unwrap()),
            "the stand-in"
        );
        assert!(
            !rule_matches(&r, &snap, snap.process(200).unwrap()),
            "a worker"
        );
        assert!(
            !rule_matches(&r, &snap, snap.process(300).unwrap()),
            "no one's"
        );
    }

    #[test]
    fn steps_read_as_what_they_do() {
        let (_, r) = rule(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ signal = \"SIGINT\", \
             require_handler = true }, { signal = \"SIGTERM\", process_group = true, after = \
             \"5s\" }, { notify = true, after = \"2s\" }]\n",
        );
        assert_eq!(
            numbered_step(&r, 0).unwrap(),
            "step 1 of 3: send SIGINT (only if it catches SIGINT; skipped otherwise)"
        );
        assert_eq!(
            numbered_step(&r, 1).unwrap(),
            "step 2 of 3, 5s after step 1: send SIGTERM to its process group"
        );
        assert_eq!(
            numbered_step(&r, 2).unwrap(),
            "step 3 of 3, 2s after step 2: show a desktop notification"
        );
        assert_eq!(numbered_step(&r, 3), None);
    }

    #[test]
    fn a_dry_run_says_whose_it_is() {
        let (mut config, r) = rule(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\ndry_run = true\nactions = [{ notify = true }]\n",
        );
        assert!(
            dry_run_reason(&r, &config)
                .unwrap()
                .contains("the rule has dry_run = true")
        );
        let (_, plain) =
            rule("[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n");
        assert_eq!(dry_run_reason(&plain, &config), None);
        config.daemon.dry_run = true;
        assert!(
            dry_run_reason(&plain, &config)
                .unwrap()
                .contains("--dry-run")
        );
    }

    #[test]
    fn a_cooldown_says_when_it_ends() {
        let (_, r) = rule(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\ncooldown = \"60s\"\nactions = [{ notify = true }]\n",
        );
        let reason = cooldown_reason(&r, Timestamp(10_000), Timestamp(22_500));
        assert_eq!(
            reason,
            "cooldown: the rule acted on it 12s ago and starts again no sooner than cooldown = \
             1m after that (in 47s)"
        );
    }
}
