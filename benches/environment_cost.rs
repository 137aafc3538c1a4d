//! What reading ML processes' framework environments costs
//! (`sample/environment/`), in CPU time of this process, against a floor
//! measured in the same run: opening, reading and closing
//! `/proc/self/statm` once per process, the cheapest read a full tick does
//! for every process anyway.
//!
//! The setup: `HEADROOM_BENCH_PROCESSES` processes (default 1000), of which
//! `HEADROOM_BENCH_ML` (default 40) are PyTorch processes spread over
//! `HEADROOM_BENCH_ENVS` virtual environments (default 4), each a
//! `<prefix>/bin/python3.12` and a `lib/python3.12/site-packages` holding
//! `HEADROOM_BENCH_PACKAGES` packages (default 1000, about what a large
//! PyTorch, JAX and Jupyter environment holds) among them the real records
//! of `tests/fixtures/pypi/h100-venv`, in the checkout's `target/tmp`.
//! Rows, interleaved:
//!
//! - **floor**: `/proc/self/statm` opened, read and closed once per process.
//! - **bare**: a sample of a sampler that hands back a copy of the same
//!   snapshot (what the wrapper is given).
//! - **wrapped**: the same sampler wrapped by `with_environments`, every
//!   environment already read: each ML process's directories looked up,
//!   its verdict taken from the memo and its evidence lines added.
//! - **read**: one environment read from scratch, as the reading thread
//!   does at first sight or after the directory changed: its entries
//!   listed, the framework packages' `METADATA` and `WHEEL` read and parsed.
//!
//! The sampler's own cost is `wrapped` less `bare`; `read` happens on the
//! reading thread, at most once per directory per `RECHECK` (30 s) and only
//! when the directory changed.
//!
//! Run: `cargo bench --bench environment_cost`. `HEADROOM_BENCH_ITERS` sets
//! the number of rounds (default 50).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Row, env_usize, print_against_floor, time_interleaved};
use headroom::model::build::{process, snapshot};
use headroom::model::sampling::{SampleError, Sampler};
use headroom::model::{Collector, ProcessSample, Snapshot, WorkloadKind};
use headroom::sample::environment::{HOLDS, reader, with_environments};

/// A sampler that hands back a copy of one snapshot.
struct Fixed(Snapshot);

impl Sampler for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        Ok(self.0.clone())
    }

    fn collectors(&self) -> Vec<&dyn Collector> {
        Vec::new()
    }
}

/// A virtual environment under `root` with `packages` packages, the real
/// records of the fixture environment among them; its interpreter's path.
fn make_env(root: &Path, k: usize, packages: usize) -> String {
    let prefix = root.join(format!("venv-{k}"));
    let site = prefix.join("lib/python3.12/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    let python = prefix.join("bin/python3.12");
    std::fs::write(&python, b"").unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pypi/h100-venv");
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let entry = entry.unwrap();
        let to = site.join(entry.file_name());
        std::fs::create_dir(&to).unwrap();
        for file in std::fs::read_dir(entry.path()).unwrap() {
            let file = file.unwrap();
            std::fs::copy(file.path(), to.join(file.file_name())).unwrap();
        }
    }
    for i in 0..packages {
        let dist = site.join(format!("package_{i}-1.{i}.0.dist-info"));
        std::fs::create_dir(&dist).unwrap();
        std::fs::write(
            dist.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: package-{i}\nVersion: 1.{i}.0\n\n"),
        )
        .unwrap();
        std::fs::create_dir(site.join(format!("package_{i}"))).unwrap();
    }
    python.to_str().unwrap().to_owned()
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("environment_cost: run with `cargo bench --bench environment_cost`");
        return;
    }
    let iters = env_usize("HEADROOM_BENCH_ITERS", 50).max(1);
    let n_processes = env_usize("HEADROOM_BENCH_PROCESSES", 1000);
    let n_ml = env_usize("HEADROOM_BENCH_ML", 40).min(n_processes);
    let n_envs = env_usize("HEADROOM_BENCH_ENVS", 4).max(1);
    let n_packages = env_usize("HEADROOM_BENCH_PACKAGES", 1000);

    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
    std::fs::create_dir_all(&base).expect("target/tmp");
    let root = tempfile::tempdir_in(&base).expect("tempdir");
    let pythons: Vec<String> = (0..n_envs)
        .map(|k| make_env(root.path(), k, n_packages))
        .collect();
    let uid = headroom::os::this_process::effective_uid();

    let mut b = snapshot(0);
    for i in 0..n_processes {
        let pid = 1000 + i as u32;
        let p: ProcessSample = if i < n_ml {
            let python = &pythons[i % n_envs];
            process(pid)
                .uid(uid)
                .name("python3.12")
                .exe(python.as_str())
                .argv(vec![python.clone(), "train.py".to_string()])
                .kind(WorkloadKind::Pytorch)
                .into()
        } else {
            process(pid).uid(uid).into()
        };
        b = b.process(p);
    }
    let snap: Snapshot = b.build();

    // Every environment read once, and checked to be: each ML process's
    // evidence lists its directory's packages.
    let mut wrapped = with_environments(Box::new(Fixed(snap.clone())));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = wrapped.sample().expect("a sample");
        let listed = s
            .processes
            .iter()
            .filter(|p| p.workload.evidence.iter().any(|e| e.starts_with(HOLDS)))
            .count();
        if listed == n_ml {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {listed} of {n_ml} ML processes had their environment read in 30 s \
             (is target/tmp below a directory others can write?)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut bare = Fixed(snap.clone());
    let site = Path::new(&pythons[0])
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("lib/python3.12/site-packages");
    let site = site.to_str().unwrap().to_owned();
    let read_once = reader::read(&site, uid);
    assert!(
        read_once.problem.is_none(),
        "the environment reads: {:?}",
        read_once.problem
    );
    let mut rows = vec![
        Row::new("floor", "statm read once per process", move || {
            for _ in 0..n_processes {
                std::hint::black_box(std::fs::read("/proc/self/statm").expect("statm"));
            }
        }),
        Row::new("bare", "a copy of the snapshot, unwrapped", move || {
            std::hint::black_box(bare.sample().expect("a sample"));
        }),
        Row::new("wrapped", "the same, environments added", move || {
            std::hint::black_box(wrapped.sample().expect("a sample"));
        }),
        Row::new("read", "one environment read from scratch", move || {
            std::hint::black_box(reader::read(&site, uid));
        }),
    ];
    time_interleaved(&mut rows, iters, 1);

    println!(
        "environment_cost: {n_processes} processes, {n_ml} of them ML in {n_envs} environments of {n_packages} packages, {iters} rounds"
    );
    println!();
    print_against_floor(&rows, 40);
    println!();
    let added = rows[2].median() - rows[1].median();
    println!(
        "the wrapper's own cost per sample: {added:.1} µs ({:.3}× the floor), {:.2} µs per ML process",
        added / rows[0].median(),
        added / n_ml.max(1) as f64
    );
}
