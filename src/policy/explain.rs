//! Why each rule does or does not act on one process: the data behind
//! `headroom explain PID`.
//!
//! [`explain`] judges one process with the same pieces [`super::evaluate`]
//! uses: the matcher's clauses ([`crate::config::Matcher::clauses`], the
//! predicates of `matches`), the rule's reach ([`super::assess`]), its
//! limits and conditions ([`super::limits`]) and its `select`. It keeps no
//! state: a ladder under way and a cooldown are what the daemon knows
//! (its [`super::RuleStatus`]); here every rule is judged as if it had
//! not acted yet.

use super::assess::{self, RuleRun, View};
use super::limits::Reading;
use super::{Context, select};
use crate::config::Config;
use crate::config::rules::ClauseCheck;
use crate::history::History;
use crate::model::{ProcessSample, Snapshot, Timestamp};

/// Which process a rule gated by `[rule.when]` picks with `select`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// This one.
    This,
    /// Another one.
    Other { pid: u32, name: String },
    /// None: no process it holds for is in its reach.
    Nobody,
}

/// One rule's verdict on one process.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleVerdict {
    pub rule: String,
    /// Each `[rule.match]` clause against the process; empty when the rule
    /// gives none (it matches every process).
    pub clauses: Vec<ClauseCheck>,
    pub matches: bool,
    /// Each per-process limit; the rule holds when any one does.
    pub limits: Vec<Reading>,
    /// Each `[rule.when]` condition; all must hold.
    pub conditions: Vec<Reading>,
    /// The rule's limits and conditions hold for the process (for a gated
    /// rule without limits: its conditions hold).
    pub holds: bool,
    /// For a rule gated by `[rule.when]`, whom `select` picks among the
    /// processes it holds for and may act on.
    pub selected: Option<Selection>,
    /// Why a listed name or path does not protect the process.
    pub note: Option<String>,
    /// Why the rule may not act on the process at all: its owner, its
    /// protection.
    pub out_of_reach: Option<String>,
    /// Why its steps would be journaled and not carried out, if they would.
    pub dry_run: Option<String>,
    /// The process is a worker of the job rooted at this pid, which the rule
    /// matches too: under `scope = "job"` the rule judges that job as a
    /// whole (see the root's verdict) and not this process on its own.
    pub judged_with_job: Option<u32>,
    /// The process is the root of a job with workers and the rule judges
    /// it on the job's totals: (members, basis of the total).
    pub stands_for_job: Option<(usize, crate::model::Basis)>,
    /// The ladder, step by step, in words.
    pub ladder: Vec<String>,
}

impl RuleVerdict {
    /// The first clause the process fails, if any.
    pub fn failed_clause(&self) -> Option<&ClauseCheck> {
        self.clauses.iter().find(|c| !c.holds)
    }
}

/// Every rule of `config` judged against `p`, a process of `snap`, by a
/// daemon with `ctx`, at `now`, with what `history` knows of its growth.
pub fn explain(
    config: &Config,
    history: &History,
    snap: &Snapshot,
    ctx: Context,
    now: Timestamp,
    p: &ProcessSample,
) -> Vec<RuleVerdict> {
    let hard = super::protection::HardProtected::new(snap, ctx.self_pid);
    config
        .rules
        .iter()
        .map(|rule| {
            let run = RuleRun {
                rule,
                config,
                history,
                snap,
                ctx,
                now,
                hard: &hard,
                ceiling: None,
            }
            .in_cgroup_of(p);
            verdict(&run, p)
        })
        .collect()
}

fn verdict(run: &RuleRun<'_>, p: &ProcessSample) -> RuleVerdict {
    let rule = run.rule;
    let clauses = rule.matcher.clauses(p);
    let matches = run.matches(p);
    let (candidate, judged_with_job) = match run.view(p) {
        View::Judged(c) => (*c, None),
        // Judged with its job: its own figures are still shown.
        View::WithJob(job) => (
            assess::Candidate {
                p: std::borrow::Cow::Borrowed(p),
                track: run.history.process(&p.id),
                job: None,
            },
            Some(job.pid()),
        ),
    };
    let me = run.assess(&candidate);
    let stands_for_job = me.job.map(|j| (j.members.len(), j.basis));
    let condition = run.condition();
    let conditions_hold = condition.as_ref().is_none_or(|c| c.holds);
    let limits_hold = me.check.as_ref().is_none_or(|c| c.exceeded.is_some());
    let holds = matches && judged_with_job.is_none() && conditions_hold && limits_hold;
    let selected = (rule.when.is_some() && holds).then(|| {
        // The processes the rule holds for and may act on, as evaluate
        // gathers them, and the one `select` takes.
        let all: Vec<_> = run
            .candidates()
            .into_iter()
            .filter(|c| !run.per_cgroup() || same_ceiling(run, &c.p))
            .collect();
        let candidates: Vec<(&ProcessSample, Option<&crate::history::ProcessTrack>)> = all
            .iter()
            .map(|c| run.assess(c))
            .filter(|a| {
                a.out_of_reach.is_none() && a.check.as_ref().is_none_or(|c| c.exceeded.is_some())
            })
            .map(|a| (a.p, a.track))
            .collect();
        match select(rule.select.unwrap_or_default(), &candidates, run.now) {
            Some(v) if v.id == p.id => Selection::This,
            Some(v) => Selection::Other {
                pid: v.id.pid,
                name: v.name.to_string(),
            },
            None => Selection::Nobody,
        }
    });
    RuleVerdict {
        rule: rule.name.clone(),
        clauses,
        matches,
        limits: me.check.map(|c| c.readings).unwrap_or_default(),
        conditions: condition.map(|c| c.readings).unwrap_or_default(),
        holds,
        selected,
        note: me.note,
        out_of_reach: me.out_of_reach.map(|na| na.reason),
        dry_run: run.dry_run(),
        judged_with_job,
        stands_for_job,
        ladder: (0..rule.actions.len())
            .filter_map(|i| assess::numbered_step(rule, i))
            .collect(),
    }
}

/// Whether `p`'s ceiling is the one `run` reads its condition in.
fn same_ceiling(run: &RuleRun<'_>, p: &ProcessSample) -> bool {
    run.snap.ceiling_of(p).map(|c| &c.path) == run.ceiling.map(|c| &c.path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::rules::Clause;
    use crate::model::build::{ProcessBuilder, kernel, snapshot};
    use crate::model::*;

    const GIB: u64 = 1 << 30;

    fn config(text: &str) -> Config {
        Config::from_toml_str(text, "t.toml").unwrap_or_else(|e| panic!("{e}"))
    }

    /// A kernel of `uid` (root or ana) whose footprint is `footprint`.
    fn owned_kernel(pid: u32, uid: u32, footprint: u64) -> ProcessBuilder {
        let user = if uid == 0 { "root" } else { "ana" };
        kernel(pid).uid(uid).user(user).footprint(footprint)
    }

    /// `processes` on a 20 GiB machine with half of it available.
    fn on_20_gib(processes: impl IntoIterator<Item = ProcessBuilder>) -> Snapshot {
        snapshot(1_000)
            .memory(20 * GIB, 10 * GIB)
            .processes(processes)
            .build()
    }

    const ROOT: Context = Context {
        self_pid: 99_999,
        self_uid: 0,
    };

    fn one(config: &Config, s: &Snapshot, pid: u32) -> Vec<RuleVerdict> {
        let p = s.process(pid).unwrap();
        explain(
            config,
            &History::new(std::time::Duration::from_secs(60)),
            s,
            ROOT,
            s.taken_at,
            p,
        )
    }

    #[test]
    fn a_failed_clause_is_named_with_what_was_wanted_and_found() {
        let c = config(
            "[[rule]]\nname = \"pg\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n\
             [rule.match]\nworkload = [\"jupyter\"]\nname = \"^postgres\"\n",
        );
        let s = on_20_gib([owned_kernel(10, 1000, GIB)]);
        let v = &one(&c, &s, 10)[0];
        assert!(!v.matches);
        assert_eq!(v.clauses[0].clause, Clause::Workload);
        assert!(v.clauses[0].holds);
        let failed = v.failed_clause().unwrap();
        assert_eq!(failed.clause, Clause::Name);
        assert_eq!(failed.wanted, "\"^postgres\"");
        assert_eq!(failed.found, "\"python3\"");
        assert!(!v.holds);
    }

    #[test]
    fn a_footprint_limit_is_read_against_its_resolved_threshold() {
        let c = config(
            "[[rule]]\nname = \"nb\"\nfootprint = \"80%\"\nroot = true\nactions = [{ signal = \
             \"SIGINT\", require_handler = true }, { notify = true, after = \"2s\" }]\n",
        );
        let s = on_20_gib([owned_kernel(10, 0, 17 * GIB)]);
        let v = &one(&c, &s, 10)[0];
        assert!(v.matches && v.holds, "{v:?}");
        assert_eq!(v.limits[0].what, "footprint");
        assert_eq!(v.limits[0].value, "17.0 GiB");
        assert_eq!(v.limits[0].threshold, "> 80% of 20.0 GiB memory = 16.0 GiB");
        assert!(v.limits[0].holds);
        assert_eq!((v.out_of_reach.as_ref(), v.dry_run.as_ref()), (None, None));
        assert_eq!(v.ladder.len(), 2);
    }

    #[test]
    fn growth_limits_without_history_say_so() {
        let c = config(
            "[[rule]]\nname = \"tte\"\ntime_to_exhaustion = \"30s\"\nroot = true\nactions = [{ notify = true }]\n",
        );
        let s = on_20_gib([owned_kernel(10, 0, GIB)]);
        let v = &one(&c, &s, 10)[0];
        assert!(!v.holds);
        assert!(v.limits[0].value.starts_with("not known"), "{v:?}");
    }

    #[test]
    fn a_rule_that_does_not_reach_the_owner_says_which_setting_to_change() {
        let c = config(
            "[[rule]]\nname = \"nb\"\nfootprint = \"1GiB\"\nother_users = true\nactions = [{ notify = true }]\n",
        );
        let s = on_20_gib([owned_kernel(10, 0, 2 * GIB)]);
        let v = &one(&c, &s, 10)[0];
        assert!(v.holds);
        assert_eq!(
            v.out_of_reach.as_deref(),
            Some(
                "owned by root and the rule has root = false; add root = true to act on root's \
                 processes"
            )
        );
    }

    #[test]
    fn a_gated_rule_says_whom_select_picks() {
        let c = config(
            "[[rule]]\nname = \"tight\"\nroot = true\nother_users = true\nactions = [{ notify = \
             true }]\n[rule.match]\nworkload = [\"jupyter\"]\n[rule.when]\npressure = \"warn\"\n",
        );
        let mut s = on_20_gib([owned_kernel(10, 0, GIB), owned_kernel(11, 1000, 3 * GIB)]);
        let v = &one(&c, &s, 10)[0];
        assert!(!v.holds, "pressure normal");
        assert_eq!(v.conditions[0].value, "normal");
        assert_eq!(v.selected, None);
        s.pressure.level = PressureLevel::Warn;
        let v = &one(&c, &s, 10)[0];
        assert_eq!(
            v.selected,
            Some(Selection::Other {
                pid: 11,
                name: "python3".into()
            })
        );
        assert_eq!(one(&c, &s, 11)[0].selected, Some(Selection::This));
    }
}
