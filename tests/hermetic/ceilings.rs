//! Ceilings without a real cgroup: the policy on snapshots whose processes
//! run under memory-cgroup limits (time to exhaustion against the limit,
//! `footprint = "80% of limit"`, a `per = "cgroup"` condition picking its
//! victim inside the cgroup near its limit, the config's errors), and the
//! Linux sampler's ceiling collector on a cgroup tree made of files
//! captured from real cgroups (`tests/fixtures/cgroup/`). The tests with a
//! real cgroup and a real OOM killer are in `tests/environment/ceilings.rs`.

use std::time::Duration;

use headroom::config::Config;
use headroom::history::History;
use headroom::model::build::{process, snapshot};
use headroom::model::{Ceiling, CgroupVersion, Snapshot};
use headroom::policy::{Context, PolicyState, RuleVerdict, evaluate, explain};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

const ROOT: Context = Context {
    self_pid: 999_999,
    self_uid: 0,
};

fn config(text: &str) -> Config {
    Config::from_toml_str(text, "ceilings.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// A v1 ceiling at `path` limited to `limit`, with `usage` charged and no
/// reclaimable cache, the ceiling of the processes in `cgroups`.
fn ceiling(path: &str, limit: u64, usage: u64, cgroups: &[&str]) -> Ceiling {
    Ceiling {
        path: path.into(),
        version: CgroupVersion::V1,
        max: Some(limit),
        high: None,
        usage,
        reclaimable: 0,
        swap_max: None,
        swap_used: None,
        limit_hits: Some(0),
        oom_kills: Some(0),
        cgroups: cgroups.iter().map(|c| (*c).into()).collect(),
    }
}

/// A 24 GiB machine with 22.5 GiB available (the figures) and one
/// process in `/lab`, a cgroup limited to 2 GiB that holds `footprint`.
fn lab(at_ms: u64, footprint: u64) -> Snapshot {
    snapshot(at_ms)
        .memory(24 * GIB, 22 * GIB + GIB / 2)
        .process(
            process(42)
                .name("python3")
                .uid(1000)
                .user("ada")
                .footprint(footprint)
                .cgroup("/lab"),
        )
        .ceilings([ceiling("/lab", 2 * GIB, footprint + 8 * MIB, &["/lab"])])
        .build()
}

fn verdicts(c: &Config, history: &History, s: &Snapshot, pid: u32) -> Vec<RuleVerdict> {
    explain(c, history, s, ROOT, s.taken_at, s.process(pid).unwrap())
}

#[test]
fn time_to_exhaustion_is_predicted_against_the_cgroups_limit() {
    let c = config(
        "[[rule]]\nname = \"runaway\"\ntime_to_exhaustion = \"30s\"\nfootprint = \"80%\"\n\
         other_users = true\nactions = [{ signal = \"SIGTERM\" }]\n",
    );
    let mut history = History::new(Duration::from_secs(900));
    let mut state = PolicyState::default();
    // Growing 100 MiB/s from 200 MiB: 1.8 GiB of room is 18 s away. The
    // rule holds as soon as that is within 30 s, and its signal waits until
    // the room is nearly gone.
    let mut acted_at = None;
    let mut waited = false;
    for i in 0..20u64 {
        let s = lab(1_000 + i * 1_000, 200 * MIB + i * 100 * MIB);
        history.record(&s);
        let ev = evaluate(&c, &mut state, &history, &s, ROOT, s.taken_at);
        if let Some(status) = ev.statuses.iter().find(|st| st.waits.is_some()) {
            assert_eq!(status.state, "crossed");
            assert!(
                status
                    .detail
                    .contains("left under the memory cgroup /lab's limit"),
                "{}",
                status.detail
            );
            waited = true;
        }
        if let Some(d) = ev.decisions.first() {
            assert!(
                d.reason
                    .contains("left under the memory cgroup /lab's limit of 2.0 GiB"),
                "{}",
                d.reason
            );
            acted_at = Some(i);
            break;
        }
    }
    let i = acted_at.expect("the rule acts before the cgroup's limit");
    assert!(
        waited,
        "the rule held and said its signal waits before it acted"
    );
    let at = 200 * MIB + i * 100 * MIB;
    assert!(at < 2 * GIB, "acted while under the limit");
    assert!(
        at > 2 * GIB - 2 * GIB / 20 - 100 * MIB,
        "acted only with the last 5% of the limit left, not 30 s ahead: {at}"
    );
    // The machine alone (22.5 GiB available) is 200 s away at this pace.
    let s = lab(20_000, 600 * MIB);
    let free = Snapshot {
        ceilings: Vec::new(),
        ..s.clone()
    };
    assert_eq!(
        headroom::history::exhaustion_headroom_for(&s, s.process(42).unwrap()).0,
        2 * GIB - 608 * MIB
    );
    assert_eq!(
        headroom::history::exhaustion_headroom_for(&free, free.process(42).unwrap()).0,
        22 * GIB + GIB / 2
    );
}

#[test]
fn explain_shows_the_ceiling_where_no_rule_acts() {
    let c =
        config("[[rule]]\nname = \"big\"\nfootprint = \"20GiB\"\nactions = [{ notify = true }]\n");
    let s = lab(1_000, GIB);
    let p = s.process(42).unwrap();
    let words = headroom::policy::limits::ceiling_reading(&s, p).expect("a ceiling");
    assert!(
        words.starts_with(
            "the memory cgroup /lab's limit of 2.0 GiB (memory.limit_in_bytes): 1.0 GiB charged"
        ),
        "{words}"
    );
    assert!(
        words.contains("less than the machine's 22.5 GiB available"),
        "{words}"
    );
    let v = &verdicts(&c, &History::new(Duration::from_secs(60)), &s, 42)[0];
    assert!(!v.holds);
}

#[test]
fn eighty_percent_of_limit_is_of_the_cgroups_limit_and_eighty_percent_of_memory() {
    let c = config(
        "[[rule]]\nname = \"of-limit\"\nfootprint = \"80% of limit\"\nother_users = true\n\
         actions = [{ notify = true }]\n\
         [[rule]]\nname = \"of-memory\"\nfootprint = \"80%\"\nother_users = true\n\
         actions = [{ notify = true }]\n",
    );
    let s = lab(1_000, 1700 * MIB);
    let history = History::new(Duration::from_secs(60));
    let v = verdicts(&c, &history, &s, 42);
    assert!(v[0].holds, "{v:?}");
    assert_eq!(
        v[0].limits[0].threshold,
        "> 80% of limit of 2.0 GiB memory cgroup /lab's limit of 2.0 GiB (memory.limit_in_bytes) \
         = 1.6 GiB"
    );
    assert!(!v[1].holds, "80% is of the machine's 24 GiB");
    assert_eq!(
        v[1].limits[0].threshold,
        "> 80% of 24.0 GiB memory = 19.2 GiB"
    );
    // Without a ceiling, "of limit" falls back to the machine's memory.
    let free = Snapshot {
        ceilings: Vec::new(),
        ..s
    };
    let v = verdicts(&c, &history, &free, 42);
    assert!(!v[0].holds);
    assert!(
        v[0].limits[0]
            .threshold
            .contains("no memory-cgroup limit above it"),
        "{v:?}"
    );
}

/// Two Slurm jobs, each in a cgroup limited to 4 GiB: job 1 (pids 10, 11)
/// has 3.8 GiB charged, job 2 (pids 20, 21) 1 GiB. The largest process on
/// the machine is in job 2.
fn two_jobs(at_ms: u64) -> Snapshot {
    let job = |pid: u32, cgroup: &str, footprint: u64| {
        process(pid)
            .name("python3")
            .uid(1000)
            .footprint(footprint)
            .cgroup(cgroup)
    };
    snapshot(at_ms)
        .memory(64 * GIB, 40 * GIB)
        .processes([
            job(10, "/slurm/uid_1000/job_1/step_0", 3 * GIB),
            job(11, "/slurm/uid_1000/job_1/step_0", 700 * MIB),
            job(20, "/slurm/uid_1000/job_2/step_0", 3 * GIB + GIB / 2),
            job(21, "/slurm/uid_1000/job_2/step_0", 100 * MIB),
        ])
        .ceilings([
            ceiling(
                "/slurm/uid_1000/job_1",
                4 * GIB,
                3 * GIB + 800 * MIB,
                &["/slurm/uid_1000/job_1/step_0"],
            ),
            ceiling(
                "/slurm/uid_1000/job_2",
                4 * GIB,
                GIB,
                &["/slurm/uid_1000/job_2/step_0"],
            ),
        ])
        .build()
}

#[test]
fn a_per_cgroup_condition_picks_its_victim_inside_the_cgroup_near_its_limit() {
    let c = config(
        "[[rule]]\nname = \"job-near-limit\"\nother_users = true\nselect = \"largest\"\n\
         actions = [{ signal = \"SIGTERM\" }]\n[rule.when]\nper = \"cgroup\"\n\
         available_below = \"10%\"\n",
    );
    let s = two_jobs(1_000);
    let mut history = History::new(Duration::from_secs(60));
    history.record(&s);
    let mut state = PolicyState::default();
    let ev = evaluate(&c, &mut state, &history, &s, ROOT, s.taken_at);
    let victims: Vec<u32> = ev.decisions.iter().map(|d| d.process.pid).collect();
    assert_eq!(
        victims,
        [10],
        "the largest inside job 1, not pid 20: {:?}",
        ev.statuses
    );
    assert!(
        ev.decisions[0]
            .reason
            .contains("memory cgroup /slurm/uid_1000/job_1: room 224 MiB < 410 MiB"),
        "{}",
        ev.decisions[0].reason
    );
    // The machine-wide form of the same rule holds nowhere: 40 GiB is free.
    let machine = config(
        "[[rule]]\nname = \"machine\"\nother_users = true\nactions = [{ signal = \"SIGTERM\" }]\n\
         [rule.when]\navailable_below = \"10%\"\n",
    );
    let ev = evaluate(
        &machine,
        &mut PolicyState::default(),
        &history,
        &s,
        ROOT,
        s.taken_at,
    );
    assert!(ev.decisions.is_empty());
    // Explain says which one it takes, and the condition in the cgroup.
    let v = &verdicts(&c, &history, &s, 11)[0];
    assert_eq!(
        v.selected,
        Some(headroom::policy::explain::Selection::Other {
            pid: 10,
            name: "python3".into()
        })
    );
    assert_eq!(v.conditions[0].what, "room under the cgroup's limit");
    let v = &verdicts(&c, &history, &s, 20)[0];
    assert!(!v.holds, "job 2 has room: {v:?}");
}

#[test]
fn the_config_refuses_of_limit_where_it_means_nothing_and_pressure_per_cgroup() {
    let err = |text: &str| {
        Config::from_toml_str(text, "c.toml")
            .unwrap_err()
            .to_string()
    };
    let e = err(
        "[[rule]]\nname = \"g\"\ngpu_memory = \"90% of limit\"\nactions = [{ notify = true }]\n",
    );
    assert!(
        e.contains("a gpu_memory percentage is of the GPU's memory"),
        "{e}"
    );
    let e = err(
        "[[rule]]\nname = \"p\"\nactions = [{ notify = true }]\n[rule.when]\nper = \"cgroup\"\n\
         pressure = \"warn\"\n",
    );
    assert!(e.contains("pressure is the machine's"), "{e}");
    let e = err(
        "[[rule]]\nname = \"m\"\nactions = [{ notify = true }]\n[rule.when]\n\
         available_below = \"10% of limit\"\n",
    );
    assert!(e.contains("add per = \"cgroup\""), "{e}");
    let e = err(
        "[[rule]]\nname = \"x\"\nactions = [{ notify = true }]\n[rule.when]\nper = \"pod\"\n\
         available_below = \"10%\"\n",
    );
    assert!(e.contains("expected \"machine\""), "{e}");
    // What is accepted is written back as it reads.
    let c = config(
        "[[rule]]\nname = \"ok\"\nfootprint = \"80% of limit\"\nactions = [{ notify = true }]\n\
         [rule.when]\nper = \"cgroup\"\navailable_below = \"10% of limit\"\n",
    );
    let json = serde_json::to_value(&c.rules[0]).unwrap();
    assert_eq!(json["footprint"], "80% of limit");
    assert_eq!(
        json["when"]["available_below"], "10%",
        "of the cgroup's limit, per cgroup"
    );
    assert_eq!(json["when"]["per"], "cgroup");
}

// --- the collector, on captured cgroup files ---------------------------------

/// The Linux sampler's collector (Linux only; the policy tests above run
/// everywhere).
#[cfg(target_os = "linux")]
mod collector {
    use super::*;
    use headroom::os::linux::LinuxSampler;
    use headroom::os::linux::parse::cgroupfs::{CgroupMount, CgroupMounts};
    use headroom::sample::Sampler;
    use std::path::{Path, PathBuf};

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
    }

    /// A v1 cgroup directory at `dir` holding the files captured from the
    /// 2 GiB cgroup, its limit replaced by `limit` (`None`: unlimited) and its
    /// usage by `usage`.
    fn v1_cgroup(dir: &Path, limit: Option<u64>, usage: u64) {
        std::fs::create_dir_all(dir).unwrap();
        let captured = fixtures().join("cgroup");
        for name in [
            "memory.memsw.limit_in_bytes",
            "memory.memsw.usage_in_bytes",
            "memory.failcnt",
            "memory.oom_control",
            "memory.stat",
            "memory.use_hierarchy",
        ] {
            std::fs::copy(captured.join(format!("v1-2g-{name}")), dir.join(name)).unwrap();
        }
        let limit = limit.map_or_else(|| "9223372036854771712".to_string(), |l| l.to_string());
        std::fs::write(dir.join("memory.limit_in_bytes"), format!("{limit}\n")).unwrap();
        std::fs::write(dir.join("memory.usage_in_bytes"), format!("{usage}\n")).unwrap();
    }

    /// A copy of the `basic` `/proc` fixture whose processes 6441 and 6443 are
    /// in `cgroup_a` and `cgroup_b`.
    fn proc_tree(dir: &Path, cgroup_a: &str, cgroup_b: &str) {
        let copy = std::process::Command::new("cp")
            .arg("-a")
            .arg(fixtures().join("proc/basic"))
            .arg(dir)
            .status()
            .unwrap();
        assert!(copy.success());
        for (pid, cgroup) in [(6441, cgroup_a), (6443, cgroup_b)] {
            std::fs::write(
                dir.join(format!("{pid}/cgroup")),
                format!("4:memory:{cgroup}\n1:cpu:/\n0::/\n"),
            )
            .unwrap();
        }
    }

    /// The Linux sampler on these trees, its snapshots listing how its
    /// collectors stand.
    fn sampler(proc_root: &Path, cgroup_root: &Path) -> Box<dyn Sampler> {
        headroom::sample::with_statuses(Box::new(LinuxSampler::new(proc_root).with_cgroup_mounts(
            CgroupMounts {
                v1_memory: Some(CgroupMount {
                    root: "/".into(),
                    point: cgroup_root.to_path_buf(),
                }),
                v2: None,
            },
        )))
    }

    fn ceiling_of(s: &Snapshot, pid: u32) -> Option<&Ceiling> {
        s.ceiling_of(s.process(pid).unwrap())
    }

    #[test]
    fn the_collector_finds_the_tightest_level_by_room_with_its_cache() {
        let dir = tempfile::tempdir().unwrap();
        let cg = dir.path().join("cg");
        // /pod: 3 GiB limit, 2.5 GiB charged (0.5 GiB + 64 MiB cache of room);
        // /pod/a: 2 GiB limit, 400 MiB charged: more room, so /pod binds.
        // /pod/b: no limit of its own.
        v1_cgroup(&cg.join("pod"), Some(3 * GIB), 2 * GIB + GIB / 2);
        v1_cgroup(&cg.join("pod/a"), Some(2 * GIB), 400 * MIB);
        v1_cgroup(&cg.join("pod/b"), None, GIB);
        let procs = dir.path().join("proc");
        proc_tree(&procs, "/pod/a", "/pod/b");
        let mut reader = sampler(&procs, &cg);
        let s = reader.sample().unwrap();
        let a = ceiling_of(&s, 6441).expect("a ceiling for pid 6441");
        assert_eq!(a.path, "/pod");
        assert_eq!(a.limit(), 3 * GIB);
        // total_inactive_file of the captured cgroup: 67112960 bytes.
        assert_eq!(a.reclaimable, 67_112_960);
        assert_eq!(a.room(), GIB / 2 + 67_112_960);
        assert_eq!(a.swap_max, None, "memsw unlimited in the capture");
        assert_eq!(a.oom_kills, Some(0));
        // Both processes' cgroups share the one ceiling, read once.
        assert_eq!(ceiling_of(&s, 6441), ceiling_of(&s, 6443));
        assert_eq!(s.ceilings.len(), 1);
        assert_eq!(s.ceilings[0].cgroups.len(), 2);
        // A process with no cgroup file has no ceiling.
        assert_eq!(ceiling_of(&s, 6445), None);
        let status = s.collectors.iter().find(|c| c.name == "cgroups").unwrap();
        assert!(status.up, "{status:?}");
        // Two limited levels of 8 files, one unlimited of 1.
        assert!(
            status.detail.contains(
                "1 limited cgroup is the ceiling of 2 process cgroups (3 levels visited, 17 files \
                 read this sample)"
            ),
            "{status:?}"
        );
        // The next samples read the limited levels' usage, cache and swap only.
        let s = reader.sample().unwrap();
        let status = s.collectors.iter().find(|c| c.name == "cgroups").unwrap();
        assert!(
            status
                .detail
                .contains("(3 levels visited, 6 files read this sample)"),
            "{status:?}"
        );
        // A limit lowered is seen within LIMITS_EVERY samples.
        std::fs::write(
            cg.join("pod/a/memory.limit_in_bytes"),
            format!("{}\n", GIB / 2),
        )
        .unwrap();
        let mut seen = None;
        for _ in 0..headroom::os::linux::LIMITS_EVERY {
            seen = Some(ceiling_of(&reader.sample().unwrap(), 6441).unwrap().limit());
        }
        assert_eq!(seen, Some(GIB / 2));
        // /pod's usage drops: /pod/a, with less room now, binds.
        std::fs::write(cg.join("pod/memory.usage_in_bytes"), "100\n").unwrap();
        std::fs::write(
            cg.join("pod/a/memory.usage_in_bytes"),
            format!("{}\n", 1900 * MIB),
        )
        .unwrap();
        let s = sampler(&procs, &cg).sample().unwrap();
        assert_eq!(ceiling_of(&s, 6441).unwrap().path, "/pod/a");
        assert_eq!(ceiling_of(&s, 6443).unwrap().path, "/pod");
    }

    #[test]
    fn limits_at_or_above_the_machines_memory_and_hostile_paths_are_no_ceiling() {
        let dir = tempfile::tempdir().unwrap();
        let cg = dir.path().join("cg");
        v1_cgroup(&cg.join("huge"), Some(1 << 50), GIB);
        std::fs::create_dir_all(cg.join("bad")).unwrap();
        std::fs::write(cg.join("bad/memory.limit_in_bytes"), "lots\n").unwrap();
        let procs = dir.path().join("proc");
        // A path reaching out of the hierarchy is never followed.
        proc_tree(&procs, "/huge", "/../../etc");
        let s = sampler(&procs, &cg).sample().unwrap();
        assert!(s.ceilings.is_empty(), "{:?}", s.ceilings);
        // A limit file that does not parse: counted and named, never fatal.
        std::fs::write(procs.join("6441/cgroup"), "4:memory:/bad\n").unwrap();
        let mut sampler = sampler(&procs, &cg);
        let s = sampler.sample().unwrap();
        let status = s.collectors.iter().find(|c| c.name == "cgroups").unwrap();
        assert_eq!(status.errors, 1);
        assert!(
            status.detail.contains("bad/memory.limit_in_bytes"),
            "{status:?}"
        );
        assert!(
            status.detail.contains("\"lots\" is not a number of bytes"),
            "{status:?}"
        );
    }

    #[test]
    fn a_v2_cgroup_reads_max_high_events_and_swap() {
        let dir = tempfile::tempdir().unwrap();
        let cg = dir.path().join("cg");
        let pod = cg.join("kubepods/pod1");
        std::fs::create_dir_all(&pod).unwrap();
        // The Docker container of tests/fixtures/cgroup/README.md (memory.stat,
        // memory.current and memory.max as captured), with memory.high,
        // memory.events and swap files in the kernel's format.
        std::fs::copy(
            fixtures().join("cgroup/v2-docker-memory-9000000.stat"),
            pod.join("memory.stat"),
        )
        .unwrap();
        for (name, text) in [
            ("memory.max", "8998912\n"),
            ("memory.high", "max\n"),
            ("memory.current", "4718592\n"),
            ("memory.events", "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n"),
            ("memory.swap.max", "0\n"),
            ("memory.swap.current", "0\n"),
        ] {
            std::fs::write(pod.join(name), text).unwrap();
        }
        std::fs::write(cg.join("kubepods/memory.max"), "max\n").unwrap();
        std::fs::write(cg.join("kubepods/memory.high"), "max\n").unwrap();
        let procs = dir.path().join("proc");
        proc_tree(&procs, "/kubepods/pod1", "/kubepods");
        for pid in [6441, 6443] {
            let path = if pid == 6441 {
                "/kubepods/pod1"
            } else {
                "/kubepods"
            };
            std::fs::write(procs.join(format!("{pid}/cgroup")), format!("0::{path}\n")).unwrap();
        }
        let s = LinuxSampler::new(&procs)
            .with_cgroup_mounts(CgroupMounts {
                v1_memory: None,
                v2: Some(CgroupMount {
                    root: "/".into(),
                    point: cg.clone(),
                }),
            })
            .sample()
            .unwrap();
        let c = ceiling_of(&s, 6441).expect("the pod's ceiling");
        assert_eq!(c.version, CgroupVersion::V2);
        assert_eq!((c.max, c.high), (Some(8_998_912), None));
        assert_eq!(c.room(), 8_998_912 - 4_718_592);
        assert_eq!((c.limit_hits, c.oom_kills), (Some(7), Some(1)));
        assert_eq!((c.swap_max, c.swap_used), (Some(0), Some(0)));
        assert_eq!(c.headroom(8 * GIB), c.room(), "no swap allowed");
        assert_eq!(ceiling_of(&s, 6443), None);
    }

    #[test]
    fn a_snapshot_read_back_finds_ceilings_by_path() {
        // The API and traces carry no shared strings: lookups by text.
        let s = lab(1_000, GIB);
        let json = serde_json::to_string(&s).unwrap();
        let back: Snapshot = serde_json::from_str(&json).unwrap();
        assert_eq!(ceiling_of(&back, 42).unwrap().path, "/lab");
        assert_eq!(
            back.available_to(back.process(42).unwrap()),
            2 * GIB - GIB - 8 * MIB
        );
    }
}
