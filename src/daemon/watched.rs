//! Which processes a light tick must re-read besides those the sampler
//! finds interesting on its own (ML workloads, the largest): the ones a
//! rule with a per-process limit (footprint, growth, GPU memory, time to
//! exhaustion) matches, since the policy checks those limits on every
//! sample. Rules gated by a system condition alone need fresh figures only
//! once their condition holds or comes near, and then the cadence reads the
//! whole table ([`super::cadence`]).

use std::sync::Arc;

use crate::config::Rule;
use crate::model::Snapshot;

/// The pids of `snap` that a rule with a per-process limit matches, in
/// snapshot order. Bounded by the number of processes in `snap`.
pub fn watched(rules: &[Rule], snap: &Snapshot) -> Arc<[u32]> {
    let limited: Vec<&Rule> = rules.iter().filter(|r| !r.limits.is_empty()).collect();
    if limited.is_empty() {
        return Arc::from([]);
    }
    snap.processes
        .iter()
        .filter(|p| limited.iter().any(|r| r.matcher.matches(p)))
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
