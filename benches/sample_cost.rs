//! What one sampling pass costs on Linux, in CPU time, against the floor of
//! reading `/proc` at all and against sysinfo's memory-only refresh.
//!
//! Spawns 1000 idle processes (`sleep 3600`; killed and reaped at the end,
//! also on panic), warms each contender up, then measures the CPU time of
//! the whole process (user + system: the kernel renders `/proc` files on our
//! time) for each iteration, interleaving the contenders so that drift hits
//! all of them alike, and prints the medians:
//!
//! - **floor**: list `/proc` and open/read/close `/proc/[pid]/statm` for
//!   every pid, nothing else. No sampler that looks at every process each
//!   tick can be cheaper.
//! - **headroom**: one `LinuxSampler::sample()` in steady state.
//! - **light**: one `LinuxSampler::sample_light(&[])`: the machine-wide
//!   files, the largest and interesting processes re-read, the rest carried
//!   (the daemon's usual tick between full reads).
//! - **reopen**: the same with `with_held_files(0)`, i.e. `statm` opened,
//!   read and closed every tick instead of kept open and re-read.
//! - **sysinfo**: `System::refresh_processes_specifics(All, true,
//!   ProcessRefreshKind::nothing().with_memory())`.
//!
//! Two more rows (every pid's `stat`, every pid's `status`) show what those
//! files cost per tick if read for all processes; they are why the sampler
//! reads them only for the processes that matter.
//!
//! Run: `cargo bench --bench sample_cost`. `HEADROOM_BENCH_CHILDREN` and
//! `HEADROOM_BENCH_ITERS` override the 1000 processes and 30 iterations;
//! `HEADROOM_BENCH_ONLY=headroom` (or another row's name) runs just that row,
//! for profiling it with `perf record`.

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("sample_cost measures the Linux /proc sampler; nothing to do on this OS");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::common::{Children, cpu_time, env_usize, quantile};
    use std::fs::File;
    use std::hint::black_box;
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    use std::path::PathBuf;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use headroom::os::linux::LinuxSampler;
    use headroom::sample::Sampler;
    use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System};

    /// Open, read and close `/proc/[pid]/<file>` for every pid listed in
    /// `/proc`, the way the sampler does (one reused path and buffer).
    fn read_all(file: &str, path: &mut PathBuf, buf: &mut [u8]) -> usize {
        let mut bytes = 0;
        for entry in std::fs::read_dir("/proc").expect("list /proc").flatten() {
            let name = entry.file_name();
            let name = name.as_bytes();
            if name.is_empty() || !name.iter().all(u8::is_ascii_digit) {
                continue;
            }
            let s = path.as_mut_os_string();
            s.clear();
            s.push("/proc/");
            s.push(std::ffi::OsStr::from_bytes(name));
            s.push("/");
            s.push(file);
            if let Ok(mut f) = File::open(&*path) {
                bytes += f.read(buf).unwrap_or(0);
            }
        }
        bytes
    }

    struct Row {
        name: &'static str,
        what: &'static str,
        micros: Vec<f64>,
    }

    impl Row {
        fn new(name: &'static str, what: &'static str) -> Self {
            Self {
                name,
                what,
                micros: Vec::new(),
            }
        }

        fn time(&mut self, f: impl FnOnce()) {
            if !self.enabled() {
                return;
            }
            let t0 = cpu_time();
            f();
            let t1 = cpu_time();
            self.micros.push(t1.saturating_sub(t0).as_secs_f64() * 1e6);
        }

        fn enabled(&self) -> bool {
            std::env::var("HEADROOM_BENCH_ONLY").map_or(true, |only| only == self.name)
        }

        fn median(&self) -> f64 {
            quantile(&self.micros, 0.5)
        }
    }

    pub fn main() {
        let n_children = env_usize("HEADROOM_BENCH_CHILDREN", 1000);
        let iters = env_usize("HEADROOM_BENCH_ITERS", 30).max(1);

        let mut children = Children(Vec::with_capacity(n_children));
        for _ in 0..n_children {
            let child = Command::new("sleep")
                .arg("3600")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn sleep");
            children.0.push(child);
        }
        // Let the children finish exec so every one is a settled `sleep`.
        std::thread::sleep(Duration::from_millis(500));

        let mut path = PathBuf::with_capacity(64);
        let mut buf = vec![0u8; 16 * 1024];
        let mut sampler = LinuxSampler::new("/proc");
        let mut reopening = LinuxSampler::new("/proc").with_held_files(0);
        let mut lightly = LinuxSampler::new("/proc");
        let mut sys = System::new().expect("sysinfo System");
        let refresh = |sys: &mut System| {
            sys.refresh_processes_specifics(
                ProcessesToUpdate::All,
                true,
                ProcessRefreshKind::nothing().with_memory(),
            )
        };

        // Warm-up: identities cached, sysinfo's process table built, page
        // cache and dentries hot. More than one identity-check period.
        let only = std::env::var("HEADROOM_BENCH_ONLY").ok();
        let warm = |name: &str| only.as_deref().is_none_or(|o| o == name);
        let mut processes = 0;
        for _ in 0..25 {
            if warm("floor") {
                black_box(read_all("statm", &mut path, &mut buf));
            }
            if warm("headroom") {
                processes = sampler.sample().expect("sample").processes.len();
            }
            if warm("reopen") {
                black_box(reopening.sample().expect("sample"));
            }
            if warm("light") {
                black_box(lightly.sample().expect("sample"));
            }
            if warm("sysinfo") {
                black_box(refresh(&mut sys));
            }
        }
        let pids = std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().as_bytes().iter().all(u8::is_ascii_digit))
                    .count()
            })
            .unwrap_or(0);

        let mut floor = Row::new("floor", "readdir + statm of every pid");
        let mut headroom = Row::new("headroom", "LinuxSampler::sample()");
        let mut reopen = Row::new("reopen", "the same, statm reopened every tick");
        let mut light = Row::new("light", "LinuxSampler::sample_light(&[])");
        let mut sysinfo = Row::new("sysinfo", "refresh_processes_specifics(memory)");
        let mut stat = Row::new("stat", "readdir + stat of every pid");
        let mut status = Row::new("status", "readdir + status of every pid");
        let mut wall_micros = Vec::new();
        let mut exact = 0;
        for _ in 0..iters {
            floor.time(|| {
                black_box(read_all("statm", &mut path, &mut buf));
            });
            headroom.time(|| {
                let snap = sampler.sample().expect("sample");
                wall_micros.push(snap.sample_micros as f64);
                exact = snap
                    .processes
                    .iter()
                    .filter(|p| p.detail == headroom::model::Detail::Exact)
                    .count();
                black_box(snap);
            });
            reopen.time(|| {
                black_box(reopening.sample().expect("sample"));
            });
            light.time(|| {
                black_box(lightly.sample_light(&[]).expect("sample"));
            });
            sysinfo.time(|| {
                black_box(refresh(&mut sys));
            });
            stat.time(|| {
                black_box(read_all("stat", &mut path, &mut buf));
            });
            status.time(|| {
                black_box(read_all("status", &mut path, &mut buf));
            });
        }

        let f = floor.median();
        let h = headroom.median();
        let s = sysinfo.median();
        println!(
            "sample_cost: {n_children} idle children, {pids} pids in /proc \
             ({processes} user processes sampled, {exact} exact), {iters} iterations"
        );
        println!("CPU time per iteration (user + system), median and p90:");
        println!();
        println!(
            "| {:<9} | {:<37} | {:>10} | {:>10} | {:>9} |",
            "", "what", "median µs", "p90 µs", "× floor"
        );
        println!(
            "|{:-<11}|{:-<39}|{:->12}|{:->12}|{:->11}|",
            "", "", "", "", ""
        );
        for row in [&floor, &headroom, &light, &reopen, &sysinfo, &stat, &status] {
            println!(
                "| {:<9} | {:<37} | {:>10.0} | {:>10.0} | {:>8.2}× |",
                row.name,
                row.what,
                row.median(),
                quantile(&row.micros, 0.9),
                row.median() / f
            );
        }
        println!();
        println!(
            "headroom / floor   = {:.2}×  (goal ≤ 1.5×: {})",
            h / f,
            if h / f <= 1.5 { "met" } else { "MISSED" }
        );
        println!(
            "sysinfo / headroom = {:.2}×  (goal ≥ 4×: {})",
            s / h,
            if s / h >= 4.0 { "met" } else { "MISSED" }
        );
        println!(
            "headroom wall time (Snapshot::sample_micros), median: {:.0} µs",
            quantile(&wall_micros, 0.5)
        );
        drop(children);
    }
}
