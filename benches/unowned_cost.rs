//! What a scan of memory no process owns costs on Linux, against a full
//! sample, in CPU time of this process (user + system: the kernel renders
//! `/proc` files and directories on our time), and its wall time, which is
//! what an enforcement tick waits for.
//!
//! Spawns `HEADROOM_BENCH_CHILDREN` idle processes (default 300, `sleep
//! 3600`), every tenth with a `/dev/shm` file as its stdin (so that its fd
//! is `stat`ed and its `maps` read), and writes `HEADROOM_BENCH_FILES`
//! files of 4 KiB into `/dev/shm/headroom-bench-<pid>/` (default 1000) for
//! the walk. Children are killed and reaped and the files removed at the
//! end, also on panic. Rows, interleaved:
//!
//! - **sample**: one `LinuxSampler::sample()` in steady state, no scan due.
//! - **scan**: `LinuxSampler::scan_unowned()`: the whole scan at once
//!   (tmpfs walk, every process's fds and, where they suggest shared
//!   memory, `maps`, `/proc/sysvipc/shm`), whatever the per-tick budget.
//!
//! Run: `cargo bench --bench unowned_cost`. `HEADROOM_BENCH_ITERS` sets the
//! number of rounds (default 30).

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("unowned_cost measures the Linux scan of /proc and tmpfs; nothing to do on this OS");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::common::{Children, Row, env_usize, quantile, time_interleaved};
    use std::cell::RefCell;
    use std::path::PathBuf;
    use std::process::{Command, Stdio};
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use headroom::os::linux::LinuxSampler;
    use headroom::sample::Sampler;

    /// Removes the bench's directory in /dev/shm when dropped.
    struct Files(PathBuf);

    impl Drop for Files {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    pub fn main() {
        if !std::env::args().any(|a| a == "--bench") {
            println!("unowned_cost: run with `cargo bench --bench unowned_cost`");
            return;
        }
        let iters = env_usize("HEADROOM_BENCH_ITERS", 30).max(1);
        let n_children = env_usize("HEADROOM_BENCH_CHILDREN", 300);
        let n_files = env_usize("HEADROOM_BENCH_FILES", 1000);

        let dir = PathBuf::from(format!("/dev/shm/headroom-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the bench's /dev/shm directory");
        let files = Files(dir.clone());
        for i in 0..n_files {
            std::fs::write(dir.join(format!("f{i}")), [0x5au8; 4096]).expect("write");
        }
        let mut children = Children(Vec::with_capacity(n_children));
        for i in 0..n_children {
            let stdin = if i % 10 == 0 {
                let f = std::fs::File::open(dir.join("f0")).expect("open");
                Stdio::from(f)
            } else {
                Stdio::null()
            };
            let child = Command::new("sleep")
                .arg("3600")
                .stdin(stdin)
                .spawn()
                .expect("spawn sleep");
            children.0.push(child);
        }
        std::thread::sleep(Duration::from_millis(300));

        let sampler = Rc::new(RefCell::new(LinuxSampler::new("/proc")));
        // The first sample runs the first scan; later ones find none due.
        sampler.borrow_mut().sample().expect("sample");
        let processes = sampler
            .borrow_mut()
            .sample()
            .expect("sample")
            .processes
            .len();

        let walls = Rc::new(RefCell::new(Vec::new()));
        let (s1, s2, w) = (sampler.clone(), sampler.clone(), walls.clone());
        let mut rows = vec![
            Row::new("sample", "LinuxSampler::sample(), no scan due", move || {
                std::hint::black_box(s1.borrow_mut().sample().expect("sample"));
            }),
            Row::new("scan", "LinuxSampler::scan_unowned(), whole", move || {
                let t0 = Instant::now();
                s2.borrow_mut().scan_unowned();
                w.borrow_mut().push(t0.elapsed().as_secs_f64() * 1e3);
            }),
        ];
        time_interleaved(&mut rows, iters, 1);

        let snap = sampler.borrow_mut().sample().expect("sample");
        println!(
            "unowned_cost: {processes} processes ({n_children} spawned, every tenth holding a /dev/shm file), \
             {n_files} files of 4 KiB in /dev/shm, {} tmpfs files reported, {iters} rounds",
            snap.unowned.tmpfs_files.len()
        );
        println!();
        println!(
            "| {:<6} | {:<40} | {:>11} | {:>11} |",
            "", "what", "median µs", "p90 µs"
        );
        println!("|{:-<8}|{:-<42}|{:->13}|{:->13}|", "", "", "", "");
        for row in &rows {
            println!(
                "| {:<6} | {:<40} | {:>11.0} | {:>11.0} |",
                row.name,
                row.what,
                row.median(),
                quantile(&row.micros, 0.9)
            );
        }
        let scan = rows[1].median();
        let walls = walls.borrow();
        println!();
        println!(
            "scan wall time: median {:.1} ms, p90 {:.1} ms, max {:.1} ms (the per-tick budget is 20 ms)",
            quantile(&walls, 0.5),
            quantile(&walls, 0.9),
            walls.iter().copied().fold(0.0, f64::max)
        );
        println!(
            "scan / sample = {:.1}×; one scan every 10 s costs {:.3} % of a core, every 60 s {:.4} %",
            scan / rows[0].median(),
            scan / 10e6 * 100.0,
            scan / 60e6 * 100.0
        );
        drop(children);
        drop(files);
    }
}
