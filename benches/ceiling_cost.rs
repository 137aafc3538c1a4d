//! What reading the processes' memory-cgroup ceilings costs per sample on
//! Linux, against its floor: the bare reads of the same cgroup files.
//!
//! Needs root and the v1 memory hierarchy (or v2 with the memory
//! controller). Makes a cgroup `headroom-bench-<pid>` at the top of the
//! memory hierarchy, limited to 16 GiB, with `HEADROOM_BENCH_CGROUPS`
//! children (default 50), each limited to 1 GiB (a pod and its containers,
//! a Slurm job and its steps), and puts `HEADROOM_BENCH_CHILDREN` idle
//! processes (default 1000, `sleep 3600`) into them, spread evenly. The
//! processes are killed and reaped and the cgroups removed at the end, also
//! on panic. Rows, interleaved, CPU time of this process per call (user +
//! system: the kernel renders cgroup files on our time):
//!
//! - **all files**: open, read and close every file the collector reads of
//!   every limited cgroup when it reads one in full (8 files each with v1:
//!   `memory.limit_in_bytes`, `usage_in_bytes`, `stat`,
//!   `memsw.limit_in_bytes`, `memsw.usage_in_bytes`, `failcnt`,
//!   `oom_control`, `use_hierarchy`; 7 with v2), once: reading everything
//!   every sample.
//! - **floor**: the same for the files whose figures change from sample to
//!   sample (usage, `memory.stat`, swap usage: 3 per cgroup): what fresh
//!   figures cannot cost less than.
//! - **ceilings**: `CeilingReader::read` over one sample's processes in
//!   steady state: the levels above every distinct process cgroup walked,
//!   each level's usage read once, its limits every tenth sample, the
//!   tightest chosen.
//! - **sample**: one whole `LinuxSampler::sample()`, the ceilings
//!   included, for their share of a sample.
//!
//! Run: `cargo bench --bench ceiling_cost` as root. `HEADROOM_BENCH_ITERS`
//! sets the number of rounds (default 30).

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("ceiling_cost measures Linux memory cgroups; nothing to do on this OS");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::common::{Children, Row, env_usize, quantile, time_interleaved};
    use std::cell::RefCell;
    use std::io::Read as _;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::rc::Rc;
    use std::time::Duration;

    use headroom::os::linux::parse::cgroupfs;
    use headroom::os::linux::{CeilingReader, LinuxSampler};
    use headroom::sample::Sampler;

    const V1_FILES: [&str; 8] = [
        "memory.limit_in_bytes",
        "memory.usage_in_bytes",
        "memory.stat",
        "memory.memsw.limit_in_bytes",
        "memory.memsw.usage_in_bytes",
        "memory.failcnt",
        "memory.oom_control",
        "memory.use_hierarchy",
    ];
    const V1_CHANGING: [&str; 3] = [
        "memory.usage_in_bytes",
        "memory.stat",
        "memory.memsw.usage_in_bytes",
    ];
    const V2_CHANGING: [&str; 3] = ["memory.current", "memory.stat", "memory.swap.current"];
    const V2_FILES: [&str; 7] = [
        "memory.max",
        "memory.high",
        "memory.current",
        "memory.stat",
        "memory.events",
        "memory.swap.max",
        "memory.swap.current",
    ];

    /// The bench's cgroups, removed (children first) when dropped, after
    /// the processes in them are gone.
    struct Cgroups {
        top: PathBuf,
        children: Vec<PathBuf>,
        procs: Children,
    }

    impl Drop for Cgroups {
        fn drop(&mut self) {
            drop(std::mem::replace(&mut self.procs, Children(Vec::new())));
            for dir in self.children.iter().chain(std::iter::once(&self.top)) {
                for _ in 0..50 {
                    if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    pub fn main() {
        if !std::env::args().any(|a| a == "--bench") {
            println!("ceiling_cost: run with `cargo bench --bench ceiling_cost`");
            return;
        }
        if headroom::os::this_process::effective_uid() != 0 {
            eprintln!("ceiling_cost: run as root: it makes memory cgroups");
            std::process::exit(1);
        }
        let iters = env_usize("HEADROOM_BENCH_ITERS", 30).max(1);
        let n_cgroups = env_usize("HEADROOM_BENCH_CGROUPS", 50).max(1);
        let n_children = env_usize("HEADROOM_BENCH_CHILDREN", 1000);

        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let mounts = cgroupfs::parse_mountinfo(&mountinfo);
        let (hierarchy, mount) = mounts.memory().expect("a memory cgroup hierarchy");
        let (v1, point) = (hierarchy == cgroupfs::Hierarchy::V1, mount.point.clone());
        let limit_file = if v1 {
            "memory.limit_in_bytes"
        } else {
            "memory.max"
        };
        let top = point.join(format!("headroom-bench-{}", std::process::id()));
        std::fs::create_dir(&top).expect("make the bench's cgroup (root?)");
        let mut cgroups = Cgroups {
            top: top.clone(),
            children: Vec::new(),
            procs: Children(Vec::with_capacity(n_children)),
        };
        std::fs::write(top.join(limit_file), (16u64 << 30).to_string()).expect("limit");
        if !v1 {
            let _ = std::fs::write(top.join("cgroup.subtree_control"), "+memory");
        }
        for i in 0..n_cgroups {
            let dir = top.join(format!("c{i}"));
            std::fs::create_dir(&dir).expect("make a child cgroup");
            std::fs::write(dir.join(limit_file), (1u64 << 30).to_string()).expect("limit");
            cgroups.children.push(dir);
        }
        for i in 0..n_children {
            let child = Command::new("sleep")
                .arg("3600")
                .stdin(Stdio::null())
                .spawn()
                .expect("spawn sleep");
            let dir = &cgroups.children[i % n_cgroups];
            std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).expect("enter");
            cgroups.procs.0.push(child);
        }
        std::thread::sleep(Duration::from_millis(300));

        let sampler = Rc::new(RefCell::new(LinuxSampler::new("/proc")));
        let snap = sampler.borrow_mut().sample().expect("sample");
        let snap = Rc::new(snap);
        let total = snap.system.total;

        let files_of = |names: &'static [&'static str]| -> Vec<PathBuf> {
            std::iter::once(&top)
                .chain(&cgroups.children)
                .flat_map(|dir| names.iter().map(move |f| dir.join(f)))
                .filter(|f| f.exists())
                .collect()
        };
        let all = files_of(if v1 { &V1_FILES } else { &V2_FILES });
        let changing = files_of(if v1 { &V1_CHANGING } else { &V2_CHANGING });
        let (n_all, n_changing) = (all.len(), changing.len());
        let reader = Rc::new(RefCell::new(CeilingReader::with_mounts(mounts.clone())));
        let (r, s, s2) = (reader.clone(), snap.clone(), sampler.clone());
        let bare = |files: Vec<PathBuf>| {
            let mut buf = String::with_capacity(4096);
            move || {
                for f in &files {
                    buf.clear();
                    read(f, &mut buf);
                    std::hint::black_box(&buf);
                }
            }
        };
        let mut rows = vec![
            Row::new("all files", "every file of every limited cgroup", bare(all)),
            Row::new(
                "floor",
                "the changing files of every limited cgroup",
                bare(changing),
            ),
            Row::new("ceilings", "CeilingReader::read, one sample", move || {
                std::hint::black_box(r.borrow_mut().read(&s.processes, total));
            }),
            Row::new(
                "sample",
                "LinuxSampler::sample(), ceilings included",
                move || {
                    std::hint::black_box(s2.borrow_mut().sample().expect("sample"));
                },
            ),
        ];
        time_interleaved(&mut rows, iters, 1);

        reader.borrow_mut().read(&snap.processes, total);
        let status = reader.borrow().status();
        let in_cgroups = snap
            .processes
            .iter()
            .filter(|p| snap.ceiling_of(p).is_some())
            .count();
        println!(
            "ceiling_cost: {} processes sampled, {in_cgroups} of them in {n_cgroups} limited \
             cgroups below one limited parent ({} hierarchy); {n_all} cgroup files, \
             {n_changing} of them changing; {iters} rounds",
            snap.processes.len(),
            if v1 { "v1" } else { "v2" }
        );
        println!("collector: {}", status.detail);
        println!();
        println!(
            "| {:<9} | {:<43} | {:>11} | {:>11} |",
            "", "what", "median µs", "p90 µs"
        );
        println!("|{:-<11}|{:-<45}|{:->13}|{:->13}|", "", "", "", "");
        for row in &rows {
            println!(
                "| {:<9} | {:<43} | {:>11.0} | {:>11.0} |",
                row.name,
                row.what,
                row.median(),
                quantile(&row.micros, 0.9)
            );
        }
        let (all, floor, ceil, sample) = (
            rows[0].median(),
            rows[1].median(),
            rows[2].median(),
            rows[3].median(),
        );
        println!();
        println!(
            "ceilings / floor = {:.2}×; ceilings / all files = {:.2}×; ceilings / sample = {:.0} % \
             (of a sample that includes them)",
            ceil / floor,
            ceil / all,
            ceil / sample * 100.0
        );
        drop(rows);
        drop(cgroups);
    }

    fn read(path: &Path, buf: &mut String) {
        if let Ok(f) = std::fs::File::open(path) {
            let _ = f.take(64 * 1024).read_to_string(buf);
        }
    }
}
