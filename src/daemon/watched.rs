//! Which processes a light tick must re-read besides those the sampler
//! finds interesting on its own (ML workloads, the largest): the ones a
//! rule with a per-process limit (footprint, growth, GPU memory, time to
//! exhaustion) matches, since the policy checks those limits on every
//! sample. Rules gated by a system condition alone need fresh figures only
//! once their condition holds or comes near, and then the cadence reads the
//! whole table ([`super::cadence`]).

use std::collections::HashSet;
use std::sync::Arc;

use crate::config::{Rule, Scope};
use crate::model::Snapshot;
use crate::policy::assess::rule_matches;

/// The pids of `snap` that a rule with a per-process limit matches, and
/// the members of every job whose root a job-scoped one matches (the job's
/// total is judged on every sample), in snapshot order. Bounded by the
/// number of processes in `snap`.
pub fn watched(rules: &[Rule], snap: &Snapshot) -> Arc<[u32]> {
    let limited: Vec<&Rule> = rules.iter().filter(|r| !r.limits.is_empty()).collect();
    if limited.is_empty() {
        return Arc::from([]);
    }
    let by_job: Vec<&Rule> = limited
        .iter()
        .copied()
        .filter(|r| r.scope == Scope::Job)
        .collect();
    let judged_roots: HashSet<u32> = snap
        .jobs
        .iter()
        .filter(|j| j.workers() > 0)
        .filter(|j| {
            snap.process(j.pid())
                .is_some_and(|root| by_job.iter().any(|r| rule_matches(r, snap, root)))
        })
        .map(|j| j.pid())
        .collect();
    snap.processes
        .iter()
        .filter(|p| {
            p.job.is_some_and(|root| judged_roots.contains(&root))
                || limited.iter().any(|r| rule_matches(r, snap, p))
        })
        .map(|p| p.id.pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::build;

    fn rules(toml: &str) -> Vec<Rule> {
        Config::from_toml_str(toml, "test.toml").unwrap().rules
    }

    #[test]
    fn processes_matched_by_a_rule_with_a_limit_are_watched() {
        let snap = build::snapshot(0)
            .process(build::process(1).name("trainer"))
            .process(build::process(2).name("cron"))
            .process(build::process(3).name("trainer-2"))
            .build();
        let r = rules(
            "[[rule]]\nname = \"t\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n[rule.match]\nname = \"^trainer\"\n",
        );
        assert_eq!(&*watched(&r, &snap), &[1, 3]);
    }

    #[test]
    fn every_member_of_a_job_whose_root_a_rule_matches_is_watched() {
        let mut snap = build::snapshot(0)
            .process(build::kernel(10).ppid(1))
            .process(build::process(11).ppid(10).name("sh"))
            .process(build::process(12).ppid(11).name("python3"))
            .process(build::process(20).ppid(1).name("cron"))
            .build();
        crate::sample::jobs::assemble(&mut snap);
        let job = rules(
            "[[rule]]\nname = \"nb\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n[rule.match]\nworkload = [\"jupyter\"]\n",
        );
        assert_eq!(&*watched(&job, &snap), &[10, 11, 12]);
        let alone = rules(
            "[[rule]]\nname = \"nb\"\nscope = \"process\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n[rule.match]\nworkload = [\"jupyter\"]\n",
        );
        assert_eq!(&*watched(&alone, &snap), &[10]);
    }

    #[test]
    fn a_rule_gated_by_a_system_condition_alone_watches_nothing() {
        let snap = build::snapshot(0)
            .process(build::process(1).name("trainer"))
            .build();
        let r = rules(
            "[[rule]]\nname = \"t\"\nactions = [{ notify = true }]\n[rule.match]\nname = \"^trainer\"\n[rule.when]\navailable_below = \"1GiB\"\n",
        );
        assert!(watched(&r, &snap).is_empty());
    }
}
