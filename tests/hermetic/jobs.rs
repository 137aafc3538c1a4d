//! Jobs under the policy: a notebook kernel whose forked workers together
//! run the machine out is judged on the job's total and gets the signal
//! itself; `scope = "process"` judges each process alone; machine-wide
//! `select` weighs jobs; and a machine-wide rule picks no process when
//! memory no process owns holds the shortfall.

use std::time::Duration;

use headroom::config::Config;
use headroom::event::EventKind;
use headroom::history::History;
use headroom::model::build::{self, kernel, process};
use headroom::model::*;
use headroom::policy::{Context, Decision, PolicyState, RuleStatus, evaluate};
use headroom::sample::jobs::assemble;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

const ROOT_DAEMON: Context = Context {
    self_pid: 999_999,
    self_uid: 0,
};

fn config(text: &str) -> Config {
    Config::from_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// The embedded default's rules.
fn default_rules() -> Config {
    Config::embedded_default()
}

/// Feeds snapshots through history and policy as the daemon does.
struct Run {
    config: Config,
    state: PolicyState,
    history: History,
    decisions: Vec<Decision>,
    events: Vec<EventKind>,
    statuses: Vec<RuleStatus>,
}

impl Run {
    fn new(config: Config) -> Self {
        Self {
            config,
            state: PolicyState::default(),
            history: History::new(Duration::from_secs(900)),
            decisions: Vec::new(),
            events: Vec::new(),
            statuses: Vec::new(),
        }
    }

    fn feed(&mut self, mut snap: Snapshot) {
        assemble(&mut snap);
        self.history.record(&snap);
        let ev = evaluate(
            &self.config,
            &mut self.state,
            &self.history,
            &snap,
            ROOT_DAEMON,
            snap.taken_at,
        );
        self.decisions.extend(ev.decisions);
        self.events.extend(ev.events);
        self.statuses = ev.statuses;
    }
}

/// A 24 GiB machine at `ms`: a root-owned kernel 100 of 300 MiB under a
/// Jupyter server, with `workers` forked copies of it of `each` bytes, and
/// available memory what the workers leave of 20 GiB.
fn notebook(ms: u64, workers: u32, each: u64) -> Snapshot {
    let used = u64::from(workers) * each;
    let mut s = build::snapshot(ms)
        .memory(24 * GIB, (20 * GIB).saturating_sub(used))
        .process(process(50).ppid(1).uid(0).user("root").name("jupyter-lab"))
        .process(
            kernel(100)
                .ppid(50)
                .uid(0)
                .user("root")
                .kernel_id("k-1")
                .notebook("train.ipynb")
                .footprint(300 * MIB)
                .basis(Basis::Pss),
        );
    for i in 0..workers {
        s = s.process(
            kernel(200 + i)
                .ppid(100)
                .uid(0)
                .user("root")
                .kernel_id("k-1")
                .footprint(each)
                .basis(Basis::Pss),
        );
    }
    s.build()
}

/// A DataLoader under the embedded default: 8 workers copying their
/// kernel's pages at 50 MiB/s each (400 MiB/s together) from 12 GiB
/// available, sampled every 250 ms. The copying stops 100 ms after the
/// first `stop_on` signal the rule sends. Returns the run and the time of
/// each decision.
fn dataloader(stop_on: SignalName) -> (Run, Vec<(u64, Decision)>) {
    let mut run = Run::new(default_rules());
    let mut timed = Vec::new();
    let mut stopped: Option<u64> = None;
    for tick in 0..160u64 {
        let ms = tick * 250;
        let copying_ms = stopped.unwrap_or(ms);
        let each = GIB + 50 * MIB * copying_ms / 1000;
        let seen = run.decisions.len();
        run.feed(notebook(ms, 8, each));
        timed.extend(run.decisions[seen..].iter().map(|d| (ms, d.clone())));
        if stopped.is_none() && !signals(&timed, stop_on).is_empty() {
            stopped = Some(ms + 100);
        }
        let available = (20 * GIB).saturating_sub(8 * each);
        assert!(available > 0, "the machine ran out at {ms} ms: {timed:?}");
    }
    (run, timed)
}

fn signals(timed: &[(u64, Decision)], signal: SignalName) -> Vec<(u64, u32)> {
    timed
        .iter()
        .filter(|(_, d)| matches!(d.action, Action::Signal { signal: s, .. } if s == signal))
        .map(|(ms, d)| (*ms, d.process.pid))
        .collect()
}

#[test]
fn the_default_notebook_rule_warns_early_interrupts_just_in_time_then_stops_the_workers() {
    // The copying goes on whatever the kernel does (the workers outlive the
    // interrupted iterator) until the workers end.
    let (run, timed) = dataloader(SignalName::Term);
    // The user is told first, while most of the memory is still there.
    let (notified_at, notice) = timed.first().expect("a notification").clone();
    assert!(matches!(notice.action, Action::Notify), "{notice:?}");
    assert_eq!(notice.process.pid, 100, "the kernel, not a worker");
    assert!(
        notice
            .reason
            .contains("job of 9 (100 + 8 workers, counted by pss)"),
        "{}",
        notice.reason
    );
    // The kernel's SIGINT waits until the room is nearly gone: 5% of the
    // machine (1.2 GiB) at 400 MiB/s is 3 s before it runs out at 30.7 s.
    let sigint = signals(&timed, SignalName::Int);
    assert_eq!(sigint.len(), 1, "{timed:?}");
    let (interrupted_at, pid) = sigint[0];
    assert_eq!(pid, 100);
    assert!(
        interrupted_at >= notified_at + 10_000,
        "SIGINT at {interrupted_at} ms, notice at {notified_at} ms"
    );
    assert!(
        (27_000..28_000).contains(&interrupted_at),
        "{interrupted_at}"
    );
    // The memory keeps running out: a second later each worker gets
    // SIGTERM, the kernel does not.
    let sigterm = signals(&timed, SignalName::Term);
    let mut pids: Vec<u32> = sigterm.iter().map(|(_, pid)| *pid).collect();
    pids.sort_unstable();
    assert_eq!(pids, (200..208).collect::<Vec<u32>>(), "{timed:?}");
    assert!(
        sigterm
            .iter()
            .all(|(ms, _)| (interrupted_at + 1_000..interrupted_at + 1_600).contains(ms)),
        "{sigterm:?} after SIGINT at {interrupted_at}"
    );
    let worker_term = &timed.iter().find(|(_, d)| d.process.pid == 200).unwrap().1;
    assert!(
        worker_term
            .reason
            .contains("(worker of the job of python3 (pid 100))"),
        "{}",
        worker_term.reason
    );
    // Nothing is said about the workers on their own.
    assert!(
        run.statuses
            .iter()
            .filter(|s| s.rule == "notebook-runaway")
            .all(|s| s.pid == 100),
        "{:?}",
        run.statuses
    );
    // The crossing names the job's total.
    let crossed = run.events.iter().find_map(|e| match e {
        EventKind::LimitCrossed {
            process, detail, ..
        } => Some((process.pid, detail.clone())),
        _ => None,
    });
    let (pid, detail) = crossed.expect("a crossing is journaled");
    assert_eq!(pid, 100);
    assert!(detail.contains("exhausted in"), "{detail}");
}

#[test]
fn an_interrupt_that_stops_the_copying_leaves_the_workers_alone() {
    // The copying stops 100 ms after the kernel's SIGINT.
    let (run, timed) = dataloader(SignalName::Int);
    assert_eq!(signals(&timed, SignalName::Int).len(), 1, "{timed:?}");
    assert!(
        signals(&timed, SignalName::Term).is_empty(),
        "the memory stopped running out, yet: {timed:?}"
    );
    // The status says why the next step waits.
    let status = run
        .statuses
        .iter()
        .find(|s| s.rule == "notebook-runaway" && s.pid == 100)
        .expect("the kernel's status");
    if let Some(w) = &status.waits {
        assert!(w.contains("since the last step took effect"), "{w}");
    }
}

#[test]
fn scope_process_judges_each_worker_on_its_own() {
    let text = "[[rule]]\nname = \"big\"\nscope = \"process\"\nfootprint = \"1GiB\"\nroot = true\n\
                actions = [{ notify = true }]\n[rule.match]\nworkload = [\"any-ml\"]\n";
    let mut run = Run::new(config(text));
    run.feed(notebook(0, 4, 600 * MIB));
    assert!(run.decisions.is_empty(), "each process is under 1 GiB");

    let text = text.replace("scope = \"process\"\n", "");
    let mut run = Run::new(config(&text));
    run.feed(notebook(0, 4, 600 * MIB));
    let pids: Vec<u32> = run.decisions.iter().map(|d| d.process.pid).collect();
    assert_eq!(
        pids,
        vec![100],
        "the job (2.6 GiB) is over 1 GiB; its root gets it"
    );
}

#[test]
fn a_worker_of_a_job_whose_root_does_not_match_is_judged_alone() {
    // The rule names pytorch; the kernel above the worker is plain Jupyter.
    let mut s = notebook(0, 1, 2 * GIB);
    s.processes[2].workload.frameworks = vec![Framework::Pytorch];
    let text = "[[rule]]\nname = \"torch\"\nfootprint = \"1GiB\"\nroot = true\n\
                actions = [{ notify = true }]\n[rule.match]\nworkload = [\"pytorch\"]\n";
    let mut run = Run::new(config(text));
    run.feed(s);
    let pids: Vec<u32> = run.decisions.iter().map(|d| d.process.pid).collect();
    assert_eq!(pids, vec![200]);
}

#[test]
fn machine_wide_select_weighs_jobs_with_memory_counted_once() {
    // A 3 GiB process alone against a job of 1 + 4 × 1 GiB.
    let s = build::snapshot(0)
        .memory(24 * GIB, GIB)
        .pressure_level(PressureLevel::Critical)
        .process(
            process(10)
                .ppid(1)
                .uid(1000)
                .name("python3")
                .kind(WorkloadKind::Pytorch)
                .footprint(3 * GIB),
        )
        .process(
            process(20)
                .ppid(1)
                .uid(1000)
                .name("torchrun")
                .kind(WorkloadKind::Pytorch)
                .footprint(GIB),
        )
        .processes((0..4).map(|i| {
            process(21 + i)
                .ppid(20)
                .uid(1000)
                .name("python3")
                .kind(WorkloadKind::Pytorch)
                .footprint(GIB)
        }))
        .build();
    let text = "[[rule]]\nname = \"tight\"\nother_users = true\nactions = [{ signal = \"SIGTERM\" }]\n\
                [rule.match]\nworkload = [\"any-ml\"]\n[rule.when]\npressure = \"critical\"\n";
    let mut run = Run::new(config(text));
    run.feed(s);
    let pids: Vec<u32> = run.decisions.iter().map(|d| d.process.pid).collect();
    assert_eq!(pids, vec![20], "the job of 5 GiB, through its root");
}

/// `fallocate -l 5G /dev/shm/blob` by mallory, nobody mapping it.
fn blob() -> Unowned {
    Unowned {
        known: true,
        tmpfs_bytes: 5 * GIB,
        sysv_orphan_bytes: 0,
        tmpfs_files: vec![TmpfsFile {
            path: "/dev/shm/blob".into(),
            bytes: 5 * GIB,
            uid: Some(1001),
            user: Some("mallory".into()),
            mapped_by: Vec::new(),
            open_by: Vec::new(),
            redacted: false,
        }],
        sysv_segments: Vec::new(),
        cut_short: None,
        unexplained_shmem: Some(0),
    }
}

#[test]
fn a_machine_wide_rule_picks_no_victim_when_unowned_memory_holds_the_shortfall() {
    let text = "[[rule]]\nname = \"low\"\nselect = \"largest\"\nother_users = true\n\
                actions = [{ signal = \"SIGTERM\" }]\n[rule.when]\navailable_below = \"20GiB\"\n";
    let snap = |ms| {
        build::snapshot(ms)
            .memory(24 * GIB, 18 * GIB)
            .unowned(blob())
            .process(
                process(300)
                    .ppid(1)
                    .uid(1002)
                    .user("victim")
                    .name("python3")
                    .footprint(300 * MIB),
            )
            .process(
                process(301)
                    .ppid(1)
                    .uid(1002)
                    .user("victim")
                    .name("sh")
                    .footprint(MIB),
            )
            .build()
    };
    let mut run = Run::new(config(text));
    for t in 0..5 {
        run.feed(snap(t * 1000));
    }
    assert!(run.decisions.is_empty(), "{:?}", run.decisions);
    let status = run
        .statuses
        .iter()
        .find(|s| s.rule == "low")
        .expect("the process it would pick has a status");
    let reason = status.not_acting.as_deref().unwrap_or_default();
    assert!(
        reason.contains("memory no process owns holds 5.0 GiB"),
        "{reason}"
    );
    assert!(
        reason.contains("/dev/shm/blob 5.0 GiB of mallory"),
        "{reason}"
    );
    let held: Vec<&EventKind> = run
        .events
        .iter()
        .filter(|e| matches!(e, EventKind::LimitHeldNotActing { .. }))
        .collect();
    assert_eq!(held.len(), 1, "said once: {:?}", run.events);

    // With 1 GiB of unowned memory against a 2 GiB shortfall, processes
    // hold part of it: the rule picks the largest.
    let mut small = blob();
    small.tmpfs_bytes = GIB;
    small.tmpfs_files[0].bytes = GIB;
    let mut run = Run::new(config(text));
    let mut s = snap(0);
    s.unowned = small;
    run.feed(s);
    let pids: Vec<u32> = run.decisions.iter().map(|d| d.process.pid).collect();
    assert_eq!(pids, vec![300]);
}

/// A `select = "largest"` rule short of 2 GiB, an innocent 300 MiB
/// process the largest, and `unowned` as the sampler found it: the pids
/// signalled and the innocent's status.
fn shortfall_with(unowned: Unowned) -> (Vec<u32>, String) {
    let text = "[[rule]]\nname = \"low\"\nselect = \"largest\"\nother_users = true\n\
                actions = [{ signal = \"SIGTERM\" }]\n[rule.when]\navailable_below = \"20GiB\"\n";
    let mut run = Run::new(config(text));
    for t in 0..3 {
        let s = build::snapshot(t * 1000)
            .memory(24 * GIB, 18 * GIB)
            .unowned(unowned.clone())
            .process(
                process(300)
                    .ppid(1)
                    .uid(1002)
                    .user("victim")
                    .name("python3")
                    .footprint(300 * MIB),
            )
            .build();
        run.feed(s);
    }
    let pids = run.decisions.iter().map(|d| d.process.pid).collect();
    let reason = run
        .statuses
        .iter()
        .find(|s| s.rule == "low")
        .and_then(|s| s.not_acting.clone())
        .unwrap_or_default();
    (pids, reason)
}

#[test]
fn a_scan_that_stopped_short_picks_no_victim_while_shmem_it_missed_covers_the_shortfall() {
    // The blob lies 9 directories deep, or behind 50,001 empty files: the
    // walk found nothing and said it stopped short; Shmem has the blob.
    let hidden = |unexplained| Unowned {
        known: true,
        cut_short: Some("the walk of tmpfs stopped at 50000 entries".into()),
        unexplained_shmem: Some(unexplained),
        ..Unowned::default()
    };
    let (pids, reason) = shortfall_with(hidden(4 * GIB));
    assert!(pids.is_empty(), "{pids:?}");
    assert!(
        reason.contains(
            "nor found by the last scan (the last scan stopped short: the walk of tmpfs stopped at 50000 entries)"
        ),
        "{reason}"
    );
    // Cut short with nothing unexplained (a process with thousands of
    // descriptors, none of them shared memory): the rule acts.
    let (pids, _) = shortfall_with(hidden(0));
    assert_eq!(pids, vec![300]);
}

#[test]
fn shared_memory_nothing_accounts_for_picks_no_victim_while_it_covers_the_shortfall() {
    // A 4 GiB memfd in flight on a socket, or made after the last scan:
    // Shmem has it, no mapping and no scan does.
    let unseen = |bytes| Unowned {
        known: true,
        unexplained_shmem: Some(bytes),
        ..Unowned::default()
    };
    let (pids, reason) = shortfall_with(unseen(4 * GIB));
    assert!(pids.is_empty(), "{pids:?}");
    assert!(
        reason.contains("4.0 GiB of shared memory (Shmem) is neither mapped by a process"),
        "{reason}"
    );
    // 1 GiB of it against the 2 GiB shortfall: processes hold the rest.
    let (pids, _) = shortfall_with(unseen(GIB));
    assert_eq!(pids, vec![300]);
    // Found and unexplained together cover it.
    let mut both = blob();
    both.tmpfs_bytes = GIB;
    both.tmpfs_files[0].bytes = GIB;
    both.unexplained_shmem = Some(GIB + MIB);
    let (pids, reason) = shortfall_with(both);
    assert!(pids.is_empty(), "{pids:?}");
    assert!(
        reason.contains("memory no process owns holds 1.0 GiB"),
        "{reason}"
    );
}

#[test]
fn a_job_series_grows_with_its_members_and_time_to_exhaustion_uses_the_total() {
    let text = "[[rule]]\nname = \"tte\"\ntime_to_exhaustion = \"30s\"\nroot = true\n\
                actions = [{ notify = true }]\n[rule.match]\nworkload = [\"jupyter\"]\n";
    let mut run = Run::new(config(text));
    // 4 workers at 200 MiB/s each: 800 MiB/s against about 16 GiB.
    for t in 0..8u64 {
        run.feed(notebook(t * 1000, 4, GIB + t * 200 * MIB));
    }
    let d = run
        .decisions
        .first()
        .expect("the job's growth predicts exhaustion");
    assert_eq!(d.process.pid, 100);
    assert!(d.reason.contains("growing 800 MiB/s"), "{}", d.reason);
}
