//! The policy on recorded traces and on constructed snapshots: a steady
//! process never triggers, a runaway does at the predicted moment, a spike
//! does not, a ladder escalates step by step only while its limit holds,
//! cooldown holds, protected processes are never chosen, and `select` picks
//! the right victim.

use std::path::Path;
use std::time::Duration;

use headroom::config::Config;
use headroom::event::EventKind;
use headroom::history::History;
use headroom::model::build;
use headroom::model::*;
use headroom::policy::{Action, Context, Decision, PolicyState, RuleStatus, SignalName, evaluate};
use headroom::sample::replay::read_trace;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

fn config(text: &str) -> Config {
    Config::from_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn trace(name: &str) -> Vec<Snapshot> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/traces")
        .join(name);
    read_trace(&path).unwrap()
}

/// The daemon as seen by the policy: not any process in the traces.
const ROOT_DAEMON: Context = Context {
    self_pid: 999_999,
    self_uid: 0,
};

/// Runs the policy over snapshots as the daemon does; returns every decision
/// with the index of the snapshot that produced it, and all events.
struct Run {
    config: Config,
    state: PolicyState,
    history: History,
    ctx: Context,
    decisions: Vec<(usize, Decision)>,
    events: Vec<(usize, EventKind)>,
    predictions: Vec<(usize, Option<Duration>)>,
    /// The statuses of the last evaluation.
    statuses: Vec<RuleStatus>,
}

impl Run {
    fn new(config: Config, ctx: Context) -> Self {
        Self {
            config,
            state: PolicyState::default(),
            history: History::new(Duration::from_secs(900)),
            ctx,
            decisions: vec![],
            events: vec![],
            predictions: vec![],
            statuses: vec![],
        }
    }

    fn feed(&mut self, i: usize, snap: &Snapshot) {
        self.history.record(snap);
        let ev = evaluate(
            &self.config,
            &mut self.state,
            &self.history,
            snap,
            self.ctx,
            snap.taken_at,
        );
        self.decisions
            .extend(ev.decisions.into_iter().map(|d| (i, d)));
        self.events.extend(ev.events.into_iter().map(|e| (i, e)));
        self.predictions.push((i, ev.next_check));
        self.statuses = ev.statuses;
    }

    /// The last status of `rule` for `pid`.
    fn status(&self, rule: &str, pid: u32) -> &RuleStatus {
        self.statuses
            .iter()
            .find(|s| s.rule == rule && s.pid == pid)
            .unwrap_or_else(|| panic!("no status of {rule} for pid {pid}: {:?}", self.statuses))
    }

    /// The `limit-held-not-acting` events: (tick, pid, reason).
    fn held(&self) -> Vec<(usize, u32, String)> {
        self.events
            .iter()
            .filter_map(|(i, e)| match e {
                EventKind::LimitHeldNotActing {
                    process, reason, ..
                } => Some((*i, process.pid, reason.clone())),
                _ => None,
            })
            .collect()
    }

    fn count(&self, f: impl Fn(&EventKind) -> bool) -> usize {
        self.events.iter().filter(|(_, e)| f(e)).count()
    }

    fn replay(mut self, snaps: &[Snapshot]) -> Self {
        for (i, s) in snaps.iter().enumerate() {
            self.feed(i, s);
        }
        self
    }
}

fn script_pid(snaps: &[Snapshot], script: &str) -> ProcessId {
    snaps
        .iter()
        .flat_map(|s| &s.processes)
        .find(|p| p.argv.iter().any(|a| a.ends_with(script)))
        .map(|p| p.id)
        .expect("script in trace")
}

fn footprint_of(s: &Snapshot, id: ProcessId) -> u64 {
    s.processes
        .iter()
        .find(|p| p.id == id)
        .map_or(0, |p| p.footprint)
}

const SIGINT_STEP: &str = "actions = [{ signal = \"SIGINT\" }]";

#[test]
fn a_steady_machine_never_triggers() {
    let cfg = config(&format!(
        "[[rule]]\nname = \"big\"\nfootprint = \"1GiB\"\ngrowth = \"50MiB/10s\"\nother_users = true\nroot = true\n{SIGINT_STEP}\n"
    ));
    let run = Run::new(cfg, ROOT_DAEMON).replay(&trace("idle-linux-6.18.jsonl"));
    assert!(run.decisions.is_empty(), "{:?}", run.decisions);
    assert!(run.events.is_empty(), "{:?}", run.events);
}

#[test]
fn a_runaway_triggers_at_the_snapshot_where_it_crosses_and_was_predicted() {
    let snaps = trace("growth-linux-6.18.jsonl");
    let id = script_pid(&snaps, "grow.py");
    let cfg = config(&format!(
        "[[rule]]\nname = \"runaway\"\nfootprint = \"1GiB\"\nroot = true\n{SIGINT_STEP}\n[rule.match]\nargv = \"grow\\\\.py\"\n"
    ));
    let run = Run::new(cfg, ROOT_DAEMON).replay(&snaps);
    let first_over = snaps
        .iter()
        .position(|s| footprint_of(s, id) > GIB)
        .expect("crosses 1 GiB");
    assert_eq!(run.decisions.len(), 1, "one SIGINT: {:?}", run.decisions);
    let (at, d) = &run.decisions[0];
    assert_eq!(*at, first_over);
    assert_eq!(d.process.pid, id.pid);
    assert!(matches!(
        d.action,
        Action::Signal {
            signal: SignalName::Int,
            ..
        }
    ));
    assert!(d.reason.contains("footprint"), "{}", d.reason);

    // The snapshot before predicted the crossing within the next sampling
    // interval or two (it grows 128 MiB/s at 0.5 s per sample).
    let before = first_over - 1;
    let predicted = run.predictions[before].1.expect("a predicted crossing");
    let actual = snaps[first_over].taken_at.since(snaps[before].taken_at);
    assert!(
        predicted <= actual + Duration::from_millis(500),
        "{predicted:?} vs {actual:?}"
    );
}

#[test]
fn a_spike_does_not_set_off_a_growth_limit() {
    let snaps = trace("spike-linux-6.18.jsonl");
    let id = script_pid(&snaps, "spike.py");
    let peak = snaps.iter().map(|s| footprint_of(s, id)).max().unwrap_or(0);
    assert!(peak > GIB, "the trace really spikes: {peak}");
    let cfg = config(&format!(
        "[[rule]]\nname = \"grower\"\ngrowth = \"200MiB/10s\"\nroot = true\n{SIGINT_STEP}\n[rule.match]\nargv = \"spike\\\\.py\"\n"
    ));
    let run = Run::new(cfg, ROOT_DAEMON).replay(&snaps);
    assert!(run.decisions.is_empty(), "{:?}", run.decisions);

    // The same trace set against a size limit does trigger: the limit is
    // real, the spike just is not growth.
    let cfg = config(&format!(
        "[[rule]]\nname = \"size\"\nfootprint = \"1GiB\"\nroot = true\n{SIGINT_STEP}\n[rule.match]\nargv = \"spike\\\\.py\"\n"
    ));
    let run = Run::new(cfg, ROOT_DAEMON).replay(&snaps);
    assert_eq!(run.decisions.len(), 1);
}

#[test]
fn the_growth_trace_sets_off_a_growth_limit() {
    let snaps = trace("growth-linux-6.18.jsonl");
    let cfg = config(&format!(
        "[[rule]]\nname = \"grower\"\ngrowth = \"500MiB/5s\"\nroot = true\n{SIGINT_STEP}\n[rule.match]\nargv = \"grow\\\\.py\"\n"
    ));
    let run = Run::new(cfg, ROOT_DAEMON).replay(&snaps);
    assert_eq!(run.decisions.len(), 1, "{:?}", run.decisions);
    assert!(run.decisions[0].1.reason.contains("growing"));
}

// ---------------------------------------------------------------------------
// Constructed snapshots
// ---------------------------------------------------------------------------

/// ana's Jupyter kernel, pid `pid` started at 100, of `footprint` bytes.
fn anas_kernel(pid: u32, footprint: u64) -> ProcessSample {
    build::kernel(pid)
        .start(100)
        .uid(1000)
        .user("ana")
        .exe("/usr/bin/python3")
        .footprint(footprint)
        .resident(footprint)
        .build()
}

/// A 64 GiB machine, half of it available, `at_secs` into the run.
fn at(at_secs: u64, processes: Vec<ProcessSample>) -> Snapshot {
    build::snapshot(1_000_000 + at_secs * 1000)
        .memory(64 * GIB, 32 * GIB)
        .free(16 * GIB)
        .processes(processes)
        .build()
}

const USER_DAEMON: Context = Context {
    self_pid: 5,
    self_uid: 1000,
};

const LADDER: &str = "[[rule]]\nname = \"nb\"\nfootprint = \"8GiB\"\ncooldown = \"60s\"\nactions = [{ signal = \"SIGINT\" }, { signal = \"SIGTERM\", after = \"5s\" }, { signal = \"SIGKILL\", after = \"5s\" }]\n";

fn signals(run: &Run) -> Vec<(usize, SignalName)> {
    run.decisions
        .iter()
        .filter_map(|(i, d)| match d.action {
            Action::Signal { signal, .. } => Some((*i, signal)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_ladder_escalates_on_schedule_while_the_limit_holds() {
    let mut run = Run::new(config(LADDER), USER_DAEMON);
    for t in 0..20 {
        run.feed(t as usize, &at(t, vec![anas_kernel(10, 9 * GIB)]));
    }
    assert_eq!(
        signals(&run),
        vec![
            (0, SignalName::Int),
            (5, SignalName::Term),
            (10, SignalName::Kill)
        ]
    );
    let crossed = run
        .events
        .iter()
        .filter(|(_, e)| matches!(e, EventKind::LimitCrossed { .. }))
        .count();
    assert_eq!(crossed, 1);
}

#[test]
fn a_ladder_waits_while_the_limit_does_not_hold_and_resets_when_it_clears() {
    let mut run = Run::new(config(LADDER), USER_DAEMON);
    // Over at 0..3; just under (inside the 10% margin) at 3..9; over again.
    for t in 0..12 {
        let f = if (3..9).contains(&t) {
            7800 * MIB
        } else {
            9 * GIB
        };
        run.feed(t as usize, &at(t, vec![anas_kernel(10, f)]));
    }
    assert_eq!(
        signals(&run),
        vec![(0, SignalName::Int), (9, SignalName::Term)]
    );

    // Far below (past the margin): cleared; the next crossing is inside
    // the cooldown, so nothing happens until 60 s after the last step.
    run.feed(12, &at(12, vec![anas_kernel(10, GIB)]));
    assert!(
        run.events
            .iter()
            .any(|(i, e)| *i == 12 && matches!(e, EventKind::LimitCleared { .. }))
    );
    for t in 13..80 {
        run.feed(t as usize, &at(t, vec![anas_kernel(10, 9 * GIB)]));
    }
    let after: Vec<_> = signals(&run).into_iter().filter(|(i, _)| *i > 12).collect();
    assert_eq!(after.first(), Some(&(69, SignalName::Int)), "{after:?}");
}

#[test]
fn protected_processes_and_the_daemons_ancestors_are_never_chosen() {
    let cfg = config(
        "[[rule]]\nname = \"any\"\nfootprint = \"1GiB\"\nother_users = true\nroot = true\nactions = [{ signal = \"SIGTERM\" }]\n[protect]\nnames = [\"postgres\"]\n",
    );
    let named = |pid: u32, ppid: u32, name: &str, uid: u32| {
        let mut p = anas_kernel(pid, 40 * GIB);
        p.ppid = ppid;
        p.name = name.into();
        p.uid = Some(uid);
        p
    };
    let procs = vec![
        named(1, 0, "systemd", 0),
        named(20, 1, "sshd", 0),
        named(30, 20, "bash", 1000),
        named(40, 30, "headroom", 0),
        // A system account's postgres: protected by name.
        named(50, 1, "postgres", 113),
        named(60, 30, "python3", 1000),
        // A user's process renamed to a protected name: not protected.
        named(70, 30, "sshd", 1000),
        named(80, 30, "postgres", 1001),
        // Root's own sshd, not an ancestor: protected by name.
        named(90, 1, "sshd", 0),
    ];
    let ctx = Context {
        self_pid: 40,
        self_uid: 0,
    };
    let mut run = Run::new(cfg.clone(), ctx);
    run.feed(0, &at(0, procs.clone()));
    let targets: Vec<u32> = run.decisions.iter().map(|(_, d)| d.process.pid).collect();
    assert_eq!(targets, vec![60, 70, 80]);

    // Why the renamed one is not protected, in its decision's reason.
    let (_, renamed) = &run.decisions[1];
    assert!(
        renamed.reason.contains(
            "not protected: named \"sshd\" but owned by uid 1000: name protection covers root \
             and system accounts (uid ≤ 999) only"
        ),
        "{}",
        renamed.reason
    );
    assert!(!run.decisions[0].1.reason.contains("not protected"));

    // Why the protected ones are, in their statuses.
    let mut state = PolicyState::default();
    let mut history = History::new(Duration::from_secs(60));
    let snap = at(0, procs);
    history.record(&snap);
    let out = evaluate(&cfg, &mut state, &history, &snap, ctx, snap.taken_at);
    let status = |pid: u32| {
        out.statuses
            .iter()
            .find(|s| s.pid == pid)
            .unwrap_or_else(|| panic!("no status for pid {pid}: {:?}", out.statuses))
    };
    // Each is over the limit: held without acting, and why.
    let why = |pid: u32| status(pid).not_acting.clone().unwrap_or_default();
    assert_eq!(status(90).state, "crossed, not acting");
    assert_eq!(
        why(90),
        "protected: \"sshd\" is protected by [protect] and runs as root"
    );
    assert!(
        status(90).detail.ends_with(
            "; not acting: protected: \"sshd\" is protected by [protect] and runs as root"
        ),
        "{}",
        status(90).detail
    );
    assert_eq!(status(50).state, "crossed, not acting");
    assert!(why(50).contains("system account uid 113"));
    assert_eq!(why(40), "protected: it is headroom itself");
    assert!(why(20).contains("ancestor of headroom"));
    assert_eq!(why(1), "protected: pid 1 is the init process");
    assert_eq!(status(70).state, "step 1/1");
    assert_eq!(status(70).not_acting, None);
    assert!(status(70).detail.contains("not protected: named \"sshd\""));
}

#[test]
fn exe_protection_holds_for_system_accounts_only() {
    let cfg = config(
        "[[rule]]\nname = \"any\"\nfootprint = \"1GiB\"\nother_users = true\nroot = true\nactions = [{ signal = \"SIGTERM\" }]\n[protect]\ndefaults = false\nexes = [\"/usr/sbin/sshd\"]\n",
    );
    let with_exe = |pid: u32, uid: u32| {
        let mut p = anas_kernel(pid, 40 * GIB);
        p.name = "sshd-session".into();
        p.exe = Some("/usr/sbin/sshd".into());
        p.uid = Some(uid);
        p
    };
    let mut run = Run::new(cfg, ROOT_DAEMON);
    run.feed(0, &at(0, vec![with_exe(10, 0), with_exe(11, 1000)]));
    let targets: Vec<u32> = run.decisions.iter().map(|(_, d)| d.process.pid).collect();
    // A user can make /proc/PID/exe show a root-owned path: their process
    // is not protected by it.
    assert_eq!(targets, vec![11]);
    assert!(
        run.decisions[0]
            .1
            .reason
            .contains("path protection covers root and system accounts"),
        "{}",
        run.decisions[0].1.reason
    );
}

#[test]
fn a_decision_carries_its_rules_reach_for_the_actuator() {
    let cfg = config(
        "[[rule]]\nname = \"group\"\nfootprint = \"1GiB\"\nother_users = true\nroot = false\nactions = [{ signal = \"SIGTERM\", process_group = true }]\n[protect]\nnames = [\"my-db\"]\n",
    );
    let mut run = Run::new(cfg.clone(), ROOT_DAEMON);
    run.feed(0, &at(0, vec![anas_kernel(10, 9 * GIB)]));
    assert_eq!(run.decisions.len(), 1);
    let reach = &run.decisions[0].1.reach;
    assert!(reach.other_users && !reach.root);
    assert_eq!(reach.self_uid, 0);
    assert_eq!(reach.protect, cfg.protect);
    assert_eq!(
        reach.refuses_owner(Some(0)).as_deref(),
        Some("root, rule has root = false")
    );
}

#[test]
fn other_users_and_root_need_the_rule_to_say_so() {
    let cfg = config(LADDER);
    let mut mine = anas_kernel(10, 9 * GIB);
    mine.uid = Some(1000);
    let mut theirs = anas_kernel(11, 9 * GIB);
    theirs.uid = Some(1001);
    let mut roots = anas_kernel(12, 9 * GIB);
    roots.uid = Some(0);
    let mut run = Run::new(cfg, USER_DAEMON);
    run.feed(0, &at(0, vec![mine, theirs, roots]));
    let targets: Vec<u32> = run.decisions.iter().map(|(_, d)| d.process.pid).collect();
    assert_eq!(targets, vec![10]);
}

fn gated(select: &str) -> Config {
    config(&format!(
        "[[rule]]\nname = \"tight\"\nselect = \"{select}\"\ncooldown = \"30s\"\nactions = [{{ signal = \"SIGTERM\" }}]\n[rule.match]\nworkload = [\"jupyter\"]\n[rule.when]\npressure = \"critical\"\n"
    ))
}

fn critical(mut s: Snapshot) -> Snapshot {
    s.pressure.level = PressureLevel::Critical;
    s
}

#[test]
fn select_largest_newest_and_fastest_growing() {
    let mut old_big = anas_kernel(10, 20 * GIB);
    old_big.id.start = 100;
    let mut new_small = anas_kernel(11, 2 * GIB);
    new_small.id.start = 900;
    let grower = |t: u64| {
        let mut p = anas_kernel(12, 4 * GIB + t * GIB);
        p.id.start = 500;
        p
    };

    let mut run = Run::new(gated("largest"), USER_DAEMON);
    run.feed(
        0,
        &critical(at(0, vec![old_big.clone(), new_small.clone()])),
    );
    assert_eq!(run.decisions[0].1.process.pid, 10);

    let mut run = Run::new(gated("newest"), USER_DAEMON);
    run.feed(
        0,
        &critical(at(0, vec![old_big.clone(), new_small.clone()])),
    );
    assert_eq!(run.decisions[0].1.process.pid, 11);

    let mut run = Run::new(gated("fastest-growing"), USER_DAEMON);
    for t in 0..4 {
        let mut s = at(t, vec![old_big.clone(), new_small.clone(), grower(t)]);
        if t == 3 {
            s = critical(s);
        }
        run.feed(t as usize, &s);
    }
    assert_eq!(run.decisions.len(), 1);
    assert_eq!(run.decisions[0].1.process.pid, 12);
}

#[test]
fn a_gated_rule_takes_one_victim_per_cooldown() {
    let mut run = Run::new(gated("largest"), USER_DAEMON);
    let a = anas_kernel(10, 20 * GIB);
    let b = anas_kernel(11, 10 * GIB);
    // Pressure stays critical; the first victim exits at t=2.
    for t in 0..40 {
        let procs = if t < 2 {
            vec![a.clone(), b.clone()]
        } else {
            vec![b.clone()]
        };
        run.feed(t as usize, &critical(at(t, procs)));
    }
    let victims: Vec<(usize, u32)> = run
        .decisions
        .iter()
        .map(|(i, d)| (*i, d.process.pid))
        .collect();
    assert_eq!(victims, vec![(0, 10), (30, 11)]);
    // The victim's end is reported by the post-mortems (src/postmortem.rs),
    // not by the policy.
    assert!(
        !run.events
            .iter()
            .any(|(_, e)| matches!(e, EventKind::Exited { .. }))
    );
}

#[test]
fn dry_run_is_carried_in_the_decision() {
    let mut cfg = config(LADDER);
    cfg.daemon.dry_run = true;
    let mut run = Run::new(cfg, USER_DAEMON);
    run.feed(0, &at(0, vec![anas_kernel(10, 9 * GIB)]));
    assert!(run.decisions[0].1.dry_run);
}

#[test]
fn time_to_exhaustion_holds_early_and_signals_just_in_time() {
    let cfg = config(
        "[[rule]]\nname = \"tte\"\ntime_to_exhaustion = \"30s\"\nwindow = \"5s\"\nactions = [{ signal = \"SIGINT\" }]\n",
    );
    let mut run = Run::new(cfg, USER_DAEMON);
    // Growing 1 GiB/s with 40 GiB available: exhausted in 40 s, then less.
    for t in 0..40 {
        let mut s = at(t, vec![anas_kernel(10, t * GIB)]);
        s.system.available = (40 - t) * GIB;
        run.feed(t as usize, &s);
        if t == 10 {
            // 30 GiB left at 1 GiB/s: the limit holds and says so, the
            // signal waits (the 5 s window needs points spanning 2.5 s).
            let status = run.status("tte", 10);
            assert_eq!(status.state, "crossed");
            assert!(
                status.detail.contains("exhausted in 30.0s"),
                "{}",
                status.detail
            );
            let waits = status.waits.as_deref().unwrap_or_default();
            assert!(
                waits
                    .starts_with("a signal waits until exhaustion is nearer than the lead (550ms)"),
                "{waits}"
            );
            assert!(run.decisions.is_empty());
        }
    }
    let (at, d) = &run.decisions[0];
    // Under 5% of 64 GiB (3.2 GiB) is left from t = 37 on, and at 1 GiB/s
    // that is within the 30 s limit.
    assert_eq!(*at, 37, "{}", d.reason);
    assert!(
        d.reason
            .contains("3.0 GiB available plus free swap: exhausted in 3.0s"),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("due now:"), "{}", d.reason);
}

// ---------------------------------------------------------------------------
// A rule that holds and does not act says why: in the process's status on
// every sample, in the journal once per crossing.
// ---------------------------------------------------------------------------

/// `process` owned by `uid` (named `root` for 0, `ana` else).
fn owned(pid: u32, uid: u32, footprint: u64) -> ProcessSample {
    let mut p = anas_kernel(pid, footprint);
    p.uid = Some(uid);
    p.user = Some(if uid == 0 { "root" } else { "ana" }.into());
    p
}

/// The embedded default's notebook rule as it was, with `root = false`.
const NOTEBOOK_ROOT_FALSE: &str = "[[rule]]\nname = \"notebook-runaway\"\nfootprint = \"80%\"\n\
    time_to_exhaustion = \"30s\"\ncooldown = \"60s\"\nother_users = true\nroot = false\n\
    actions = [{ signal = \"SIGINT\", require_handler = true }, { notify = true, after = \"2s\" }]\n\
    [rule.match]\nworkload = [\"jupyter\"]\n";

const ROOT_REASON: &str = "owned by root and the rule has root = false; add root = true to act on \
                           root's processes";

#[test]
fn a_roots_kernel_under_a_rule_without_root_is_held_and_says_why_once_per_crossing() {
    let mut run = Run::new(config(NOTEBOOK_ROOT_FALSE), ROOT_DAEMON);
    // Over 80% of 64 GiB for ten samples, then back down, then over again.
    for t in 0..10 {
        run.feed(t, &at(t as u64, vec![owned(10, 0, 55 * GIB)]));
        let s = run.status("notebook-runaway", 10);
        assert_eq!(s.state, "crossed, not acting", "at {t}");
        assert_eq!(s.not_acting.as_deref(), Some(ROOT_REASON));
        assert!(
            s.detail
                .starts_with("footprint 55.0 GiB > 51.2 GiB; not acting: owned by root"),
            "{}",
            s.detail
        );
        assert_eq!(s.next_step, None);
    }
    assert!(run.decisions.is_empty(), "{:?}", run.decisions);
    assert_eq!(run.held(), vec![(0, 10, ROOT_REASON.to_string())]);
    assert_eq!(
        run.count(|e| matches!(e, EventKind::LimitCrossed { .. })),
        0
    );

    run.feed(10, &at(10, vec![owned(10, 0, GIB)]));
    assert_eq!(run.status("notebook-runaway", 10).state, "watching");
    assert_eq!(
        run.status("notebook-runaway", 10).not_acting.as_deref(),
        Some(ROOT_REASON),
        "said ahead, too"
    );
    assert_eq!(
        run.count(|e| matches!(e, EventKind::LimitCleared { .. })),
        1
    );
    for t in 11..15 {
        run.feed(t, &at(t as u64, vec![owned(10, 0, 55 * GIB)]));
    }
    let held = run.held();
    assert_eq!(held.len(), 2, "a second crossing, a second event: {held:?}");
    assert_eq!(held[1].0, 11);
}

#[test]
fn another_users_process_under_a_rule_without_other_users_is_held_and_says_why() {
    let cfg = config(
        "[[rule]]\nname = \"big\"\nfootprint = \"8GiB\"\nroot = true\nother_users = false\n\
         actions = [{ signal = \"SIGTERM\" }]\n",
    );
    let mut run = Run::new(cfg, ROOT_DAEMON);
    for t in 0..5 {
        run.feed(t, &at(t as u64, vec![owned(10, 1000, 9 * GIB)]));
    }
    assert!(run.decisions.is_empty());
    let s = run.status("big", 10);
    assert_eq!(s.state, "crossed, not acting");
    let reason = s.not_acting.clone().unwrap_or_default();
    assert_eq!(
        reason,
        "owned by ana (uid 1000), not by the user headroom runs as (root), and the rule has \
         other_users = false; add other_users = true to act on other users' processes"
    );
    assert_eq!(run.held(), vec![(0, 10, reason)]);
}

#[test]
fn a_protected_process_over_a_limit_is_held_and_says_why_once() {
    let cfg = config(
        "[[rule]]\nname = \"big\"\nfootprint = \"8GiB\"\nroot = true\nother_users = true\n\
         actions = [{ signal = \"SIGTERM\" }]\n[protect]\nnames = [\"postgres\"]\n",
    );
    let mut db = owned(20, 0, 9 * GIB);
    db.name = "postgres".into();
    // The shell that started the daemon (pid 30 → 40).
    let mut shell = owned(30, 0, 9 * GIB);
    shell.name = "bash".into();
    let mut me = owned(40, 0, MIB);
    me.ppid = 30;
    me.name = "headroom".into();
    let ctx = Context {
        self_pid: 40,
        self_uid: 0,
    };
    let mut run = Run::new(cfg, ctx);
    for t in 0..6 {
        run.feed(
            t,
            &at(t as u64, vec![db.clone(), shell.clone(), me.clone()]),
        );
    }
    assert!(run.decisions.is_empty(), "{:?}", run.decisions);
    assert_eq!(run.status("big", 20).state, "crossed, not acting");
    let db_reason = "protected: \"postgres\" is protected by [protect] and runs as root";
    assert_eq!(run.status("big", 20).not_acting.as_deref(), Some(db_reason));
    let shell_reason = "protected: it is an ancestor of headroom (its supervisor)";
    assert_eq!(
        run.status("big", 30).not_acting.as_deref(),
        Some(shell_reason)
    );
    assert_eq!(
        run.held(),
        vec![
            (0, 20, db_reason.to_string()),
            (0, 30, shell_reason.to_string())
        ]
    );
}

#[test]
fn a_dry_run_says_so_in_the_status_and_journals_one_crossing() {
    let cfg = config(
        "[[rule]]\nname = \"nb\"\nfootprint = \"8GiB\"\ndry_run = true\n\
         actions = [{ signal = \"SIGINT\" }, { signal = \"SIGTERM\", after = \"3s\" }]\n",
    );
    let mut run = Run::new(cfg, USER_DAEMON);
    run.feed(0, &at(0, vec![anas_kernel(10, 9 * GIB)]));
    let s = run.status("nb", 10).clone();
    assert_eq!(s.state, "step 1/2, dry run");
    let dry = s.not_acting.clone().unwrap_or_default();
    assert!(
        dry.starts_with("dry run: the rule has dry_run = true"),
        "{dry}"
    );
    assert_eq!(s.next_step, Some(1));
    for t in 1..8 {
        run.feed(t, &at(t as u64, vec![anas_kernel(10, 9 * GIB)]));
    }
    let s = run.status("nb", 10);
    assert_eq!(s.state, "done, dry run");
    assert!(
        s.not_acting
            .as_deref()
            .is_some_and(|n| n.starts_with(&dry) && n.contains("every step has run")),
        "{s:?}"
    );
    assert!(run.decisions.iter().all(|(_, d)| d.dry_run));
    assert_eq!(run.decisions.len(), 2);
    assert_eq!(
        run.count(|e| matches!(e, EventKind::LimitCrossed { .. })),
        1
    );
    assert!(run.held().is_empty(), "the dry-run steps are journaled");
}

#[test]
fn a_crossing_within_the_cooldown_is_held_and_says_until_when() {
    let cfg = config(
        "[[rule]]\nname = \"nb\"\nfootprint = \"8GiB\"\ncooldown = \"60s\"\n\
         actions = [{ signal = \"SIGINT\" }]\n",
    );
    let mut run = Run::new(cfg, USER_DAEMON);
    run.feed(0, &at(0, vec![anas_kernel(10, 9 * GIB)]));
    run.feed(1, &at(1, vec![anas_kernel(10, GIB)]));
    for t in 2..40 {
        run.feed(t, &at(t as u64, vec![anas_kernel(10, 9 * GIB)]));
    }
    assert_eq!(run.decisions.len(), 1, "one SIGINT, at 0");
    let s = run.status("nb", 10);
    assert_eq!(s.state, "crossed, not acting");
    assert_eq!(
        s.not_acting.as_deref(),
        Some(
            "cooldown: the rule acted on it 39s ago and starts again no sooner than cooldown = \
             1m after that (in 21s)"
        )
    );
    let held = run.held();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].0, 2);
    assert!(
        held[0]
            .2
            .starts_with("cooldown: the rule acted on it 2s ago")
    );

    // The cooldown over and the limit still held: a new ladder.
    for t in 40..61 {
        run.feed(t, &at(t as u64, vec![anas_kernel(10, 9 * GIB)]));
    }
    let starts: Vec<usize> = run.decisions.iter().map(|(i, _)| *i).collect();
    assert_eq!(starts, vec![0, 60]);
    assert_eq!(run.status("nb", 10).state, "step 1/1");
    assert_eq!(run.status("nb", 10).not_acting, None);
}

#[test]
fn a_finished_ladder_says_when_it_starts_again_and_journals_nothing_more() {
    let cfg = config(
        "[[rule]]\nname = \"nb\"\nfootprint = \"8GiB\"\ncooldown = \"60s\"\n\
         actions = [{ notify = true }]\n",
    );
    let mut run = Run::new(cfg, USER_DAEMON);
    for t in 0..10 {
        run.feed(t, &at(t as u64, vec![anas_kernel(10, 9 * GIB)]));
    }
    let s = run.status("nb", 10);
    assert_eq!(s.state, "done");
    assert_eq!(
        s.not_acting.as_deref(),
        Some(
            "every step has run, the last 9s ago; the ladder starts again after cooldown = 1m \
             (in 51s) if the rule still holds"
        )
    );
    assert_eq!(s.next_step, None);
    assert_eq!(run.decisions.len(), 1);
    assert_eq!(run.events.len(), 1, "one crossing: {:?}", run.events);
}

/// The embedded default's pressure rule as it was, with `root = false`.
const PRESSURE_ROOT_FALSE: &str = "[[rule]]\nname = \"pressure-warning\"\nselect = \"largest\"\n\
    cooldown = \"5m\"\nother_users = true\nroot = false\nactions = [{ notify = true }]\n\
    [rule.match]\nworkload = [\"any-ml\"]\n[rule.when]\npressure = \"warn\"\n";

fn warn(mut s: Snapshot) -> Snapshot {
    s.pressure.level = PressureLevel::Warn;
    s
}

#[test]
fn a_gated_rule_with_nobody_in_reach_holds_the_one_it_would_pick_and_says_why() {
    // A container: everything runs as root.
    let procs = vec![owned(10, 0, 4 * GIB), owned(11, 0, 2 * GIB)];
    let mut run = Run::new(config(PRESSURE_ROOT_FALSE), ROOT_DAEMON);
    for t in 0..5 {
        run.feed(t, &warn(at(t as u64, procs.clone())));
    }
    assert!(run.decisions.is_empty());
    let s = run.status("pressure-warning", 10);
    assert_eq!(s.state, "held, not acting");
    assert_eq!(s.not_acting.as_deref(), Some(ROOT_REASON));
    assert!(
        s.detail.starts_with("pressure warn (rule: at least warn)"),
        "{}",
        s.detail
    );
    assert_eq!(run.held(), vec![(0, 10, ROOT_REASON.to_string())]);

    // Pressure back to normal, then up again: a second crossing.
    run.feed(5, &at(5, procs.clone()));
    run.feed(6, &warn(at(6, procs.clone())));
    assert_eq!(run.held().len(), 2);
}

#[test]
fn a_gated_rule_in_its_cooldown_holds_the_next_victim_and_says_whom_it_took() {
    let mut run = Run::new(gated("largest"), USER_DAEMON);
    let a = anas_kernel(10, 20 * GIB);
    let b = anas_kernel(11, 10 * GIB);
    for t in 0..10 {
        let procs = if t < 2 {
            vec![a.clone(), b.clone()]
        } else {
            vec![b.clone()]
        };
        run.feed(t, &critical(at(t as u64, procs)));
    }
    assert_eq!(run.decisions.len(), 1);
    let s = run.status("tight", 11);
    assert_eq!(s.state, "held, not acting");
    assert_eq!(
        s.not_acting.as_deref(),
        Some(
            "cooldown: the rule has a [rule.when] condition and took python3 (pid 10) 9s ago; \
             it takes a new process no sooner than cooldown = 30s after that (in 21s)"
        )
    );
    let held = run.held();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!((held[0].0, held[0].1), (2, 11));
}

#[test]
fn a_gated_rule_with_limits_holds_the_processes_it_did_not_pick() {
    let cfg = config(
        "[[rule]]\nname = \"gate\"\nfootprint = \"8GiB\"\nselect = \"largest\"\n\
         actions = [{ signal = \"SIGTERM\" }]\n[rule.when]\npressure = \"critical\"\n",
    );
    let mut run = Run::new(cfg, USER_DAEMON);
    for t in 0..4 {
        run.feed(
            t,
            &critical(at(
                t as u64,
                vec![anas_kernel(10, 20 * GIB), anas_kernel(11, 10 * GIB)],
            )),
        );
    }
    assert_eq!(run.decisions.len(), 1);
    assert_eq!(run.decisions[0].1.process.pid, 10);
    let s = run.status("gate", 11);
    assert_eq!(s.state, "crossed, not acting");
    assert_eq!(
        s.not_acting.as_deref(),
        Some(
            "the rule has a [rule.when] condition and acts on one process at a time; select = \
             largest took python3 (pid 10)"
        )
    );
    assert_eq!(run.held().len(), 1);
}

/// The embedded default acts in each common setup: a user's daemon on the
/// user's notebook (a Mac LaunchAgent, a desktop), a root daemon on a
/// user's notebook (a shared GPU box), a root daemon on root's notebook (a
/// container or cloud image, Jupyter run as root).
#[test]
fn the_default_rules_act_on_users_and_roots_notebooks_alike() {
    let setups = [
        ("user daemon, user's kernel", USER_DAEMON, 1000),
        ("root daemon, a user's kernel", ROOT_DAEMON, 1000),
        ("root daemon, root's kernel", ROOT_DAEMON, 0),
    ];
    for (setup, ctx, uid) in setups {
        let default = Config::embedded_default();
        // Over 80% of 64 GiB: the notebook rule interrupts it, and the
        // half-RAM rule tells about it.
        let mut run = Run::new(default.clone(), ctx);
        run.feed(0, &at(0, vec![owned(10, uid, 55 * GIB)]));
        run.feed(1, &at(1, vec![owned(10, uid, 55 * GIB)]));
        let acted: Vec<(usize, &str, String)> = run
            .decisions
            .iter()
            .map(|(i, d)| (*i, d.rule.as_str(), d.action.label()))
            .collect();
        assert_eq!(
            acted,
            vec![
                (0, "ml-process-over-half-ram", "notify".to_string()),
                (0, "notebook-runaway", "notify".to_string()),
                (1, "notebook-runaway", "SIGINT".to_string())
            ],
            "{setup}"
        );
        assert!(
            matches!(
                run.decisions[2].1.action,
                Action::Signal {
                    require_handler: true,
                    ..
                }
            ),
            "{setup}: SIGINT only where the kernel catches it"
        );
        assert!(run.held().is_empty(), "{setup}: {:?}", run.held());
        // Memory pressure: the largest ML process is named.
        let mut run = Run::new(default, ctx);
        run.feed(0, &warn(at(0, vec![owned(10, uid, 4 * GIB)])));
        assert_eq!(run.decisions.len(), 1, "{setup}");
        assert_eq!(run.decisions[0].1.rule, "pressure-warning", "{setup}");
    }
}

/// An orphaned job at `at_secs`: its kernel (pid 100) ended, its members
/// (pid, GiB) re-parented to init, the first standing as the job's root.
fn orphaned_job(at_secs: u64, members: &[(u32, u64)]) -> Snapshot {
    let procs: Vec<ProcessSample> = members
        .iter()
        .map(|&(pid, gib)| {
            build::kernel(pid)
                .ppid(1)
                .start(u64::from(pid))
                .uid(1000)
                .user("ana")
                .kind(WorkloadKind::Pytorch)
                .footprint(gib * GIB)
                .resident(gib * GIB)
                .job(members[0].0)
                .build()
        })
        .collect();
    let mut snap = build::snapshot(1_000_000 + at_secs * 1000)
        .memory(64 * GIB, 32 * GIB)
        .processes(procs)
        .job_of(members[0].0, Basis::Rss)
        .build();
    snap.jobs[0].ended_root = Some(EndedRoot {
        id: ProcessId { pid: 100, start: 1 },
        name: "python3".into(),
        kind: WorkloadKind::Jupyter,
    });
    snap
}

#[test]
fn an_orphaned_jobs_ladder_goes_on_when_its_step_ends_the_member_standing_for_it() {
    let mut run = Run::new(
        config(
            "[[rule]]\nname = \"nb\"\nfootprint = \"8GiB\"\ncooldown = \"60s\"\n\
             actions = [{ signal = \"SIGINT\" }, { signal = \"SIGTERM\", to = \"workers\", after = \"1s\" }]\n\
             [rule.match]\nworkload = [\"jupyter\"]\n",
        ),
        USER_DAEMON,
    );
    // The job (9 GiB) matches as the kernel it was: SIGINT to the eldest.
    run.feed(0, &orphaned_job(0, &[(201, 3), (200, 3), (202, 3)]));
    // It ends and gives its 3 GiB back: the job is under the limit...
    run.feed(1, &orphaned_job(1, &[(200, 3), (202, 3)]));
    // ...and over it again a second later: the ladder goes on, the cooldown
    // notwithstanding, and every member left gets the workers' SIGTERM.
    run.feed(2, &orphaned_job(2, &[(200, 5), (202, 4)]));
    let sent: Vec<(usize, u32, SignalName)> = run
        .decisions
        .iter()
        .filter_map(|(i, d)| match d.action {
            Action::Signal { signal, .. } => Some((*i, d.process.pid, signal)),
            _ => None,
        })
        .collect();
    assert_eq!(
        sent,
        vec![
            (0, 201, SignalName::Int),
            (2, 200, SignalName::Term),
            (2, 202, SignalName::Term)
        ],
        "{:#?}",
        run.events
    );
}
