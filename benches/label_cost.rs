//! What labelling processes with who they belong to costs
//! (`sample/labels/`), in CPU time of this process per call, against a
//! floor measured in the same run: opening, reading and closing
//! `/proc/self/statm` once per process, the cheapest read a full tick does
//! for every process anyway.
//!
//! The setup: `HEADROOM_BENCH_PROCESSES` processes (default 1000) spread
//! over `HEADROOM_BENCH_CGROUPS` Kubernetes pod containers (default 50,
//! cgroupfs form), and a kubelet's directories naming those pods and
//! containers among `HEADROOM_BENCH_PODS` pods (default 110, a node's
//! default maximum), in the checkout's `target/tmp`. Rows, interleaved:
//!
//! - **floor**: `/proc/self/statm` opened, read and closed once per process.
//! - **steady**: one sample's labelling once every cgroup is known: a table
//!   look-up and a pointer copy per process; nothing read.
//! - **first**: a new labeller's first sample: every cgroup's path parsed
//!   and its names looked up (both directories listed once, then a table
//!   look-up per cgroup).
//! - **changed**: a known labeller's sample after the kubelet changed its
//!   directories (a pod added) and a new cgroup appeared: both directories
//!   listed again, one cgroup looked up.
//!
//! Run: `cargo bench --bench label_cost`. `HEADROOM_BENCH_ITERS` sets the
//! number of rounds (default 50).

mod common;

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

use common::{Row, env_usize, print_against_floor, time_interleaved};
use headroom::config::LabelsConfig;
use headroom::model::build::{process, snapshot};
use headroom::model::{ProcessSample, SharedStr, Snapshot};
use headroom::sample::labels::Labeller;

fn uid(i: usize) -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", i, i)
}

fn container_id(i: usize) -> String {
    format!("{:064x}", i + 1)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("label_cost: run with `cargo bench --bench label_cost`");
        return;
    }
    let iters = env_usize("HEADROOM_BENCH_ITERS", 50).max(1);
    let n_processes = env_usize("HEADROOM_BENCH_PROCESSES", 1000);
    let n_cgroups = env_usize("HEADROOM_BENCH_CGROUPS", 50).max(1);
    let n_pods = env_usize("HEADROOM_BENCH_PODS", 110).max(n_cgroups);

    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
    std::fs::create_dir_all(&base).expect("target/tmp");
    let root = tempfile::tempdir_in(&base).expect("tempdir");
    let pods = root.path().join("pods");
    let containers = root.path().join("containers");
    std::fs::create_dir(&pods).unwrap();
    std::fs::create_dir(&containers).unwrap();
    for i in 0..n_pods {
        std::fs::create_dir(pods.join(format!("ml_train-{i}_{}", uid(i)))).unwrap();
        std::fs::write(
            containers.join(format!("train-{i}_ml_trainer-{}.log", container_id(i))),
            "",
        )
        .unwrap();
    }
    let config = LabelsConfig {
        enabled: true,
        pods_log_dir: pods.clone(),
        containers_log_dir: containers.clone(),
        docker_containers_dir: Default::default(),
    };
    let trusted = headroom::os::this_process::effective_uid();

    // Interned as the sampler interns them: one string per cgroup.
    let paths: Vec<SharedStr> = (0..n_cgroups)
        .map(|i| {
            SharedStr::from(format!(
                "/kubepods/burstable/pod{}/{}",
                uid(i),
                container_id(i)
            ))
        })
        .collect();
    let mut b = snapshot(0);
    for i in 0..n_processes {
        let mut p: ProcessSample = process(1000 + i as u32).into();
        p.cgroup = Some(paths[i % n_cgroups].clone());
        b = b.process(p);
    }
    let snap: Snapshot = b.build();

    // Named once, to check the setup does what it says.
    let mut check = Labeller::new(&config, trusted);
    let mut named = snap.clone();
    check.label(&mut named, Instant::now());
    let with_names = named
        .processes
        .iter()
        .filter(|p| p.labels.as_ref().is_some_and(|l| l.container.is_some()))
        .count();
    assert_eq!(
        with_names, n_processes,
        "every process named (is target/tmp below a directory others can write?)"
    );

    let steady = Rc::new(RefCell::new((
        Labeller::new(&config, trusted),
        snap.clone(),
    )));
    {
        let (l, s) = &mut *steady.borrow_mut();
        l.label(s, Instant::now());
    }
    let changing = Rc::new(RefCell::new((
        Labeller::new(&config, trusted),
        snap.clone(),
    )));
    {
        let (l, s) = &mut *changing.borrow_mut();
        l.label(s, Instant::now());
    }
    let added = Rc::new(Cell::new(0usize));
    let first_snap = snap.clone();
    let first_config = config.clone();
    let pods_dir = pods.clone();
    let mut rows = vec![
        Row::new("floor", "statm read once per process", move || {
            for _ in 0..n_processes {
                std::hint::black_box(std::fs::read("/proc/self/statm").expect("statm"));
            }
        }),
        Row::new("steady", "label a sample, every cgroup known", {
            let steady = steady.clone();
            move || {
                let (l, s) = &mut *steady.borrow_mut();
                l.label(s, Instant::now());
            }
        }),
        Row::new(
            "first",
            "new labeller: parse and name every cgroup",
            move || {
                let mut l = Labeller::new(&first_config, trusted);
                let mut s = first_snap.clone();
                l.label(&mut s, Instant::now());
                std::hint::black_box(&s);
            },
        ),
        Row::new("changed", "directories changed, one new cgroup", {
            let changing = changing.clone();
            move || {
                let k = n_pods + added.get();
                added.set(added.get() + 1);
                std::fs::create_dir(pods_dir.join(format!("ml_new-{k}_{}", uid(k)))).unwrap();
                let (l, s) = &mut *changing.borrow_mut();
                // The newest process moves to the new pod's cgroup.
                let last = s.processes.len() - 1;
                s.processes[last].cgroup = Some(SharedStr::from(format!(
                    "/kubepods/burstable/pod{}/{}",
                    uid(k),
                    container_id(k)
                )));
                l.label(s, Instant::now());
            }
        }),
    ];
    time_interleaved(&mut rows, iters, 1);

    println!(
        "label_cost: {n_processes} processes in {n_cgroups} pod cgroups, {n_pods} pods in the kubelet's directories, {iters} rounds"
    );
    println!();
    print_against_floor(&rows, 44);
    println!();
    println!(
        "per distinct cgroup at first sight: {:.2} µs; per process in steady state: {:.3} µs",
        rows[2].median() / n_cgroups as f64,
        rows[1].median() / n_processes as f64
    );
}
