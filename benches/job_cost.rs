//! What counting a job's shared memory once costs.
//!
//! A `headroom-hog` grows to 2600 MiB and forks 8 children that share it
//! copy-on-write: 9 processes whose `RssAnon` adds up to about 23 GiB on a
//! machine that holds 2.6 GiB for them. Its `argv[0]` is `torchrun`, so the
//! sampler takes it for ML work (read in full every tick) and the family
//! is a job. Two parts:
//!
//! - **reads**: the cost of one `smaps_rollup` read of the parent and of a
//!   child, against one `status` read of the same process, in CPU time
//!   (user + system of this process: the kernel walks the page tables on
//!   the reader's time) and wall time; the cost per GiB resident;
//! - **ticks**: `LinuxSampler::sample()` (and the job grouping the daemon
//!   runs after it) at the daemon's default 1 s interval, one tick a second
//!   of wall time, since the proportional-share reads are paid from a budget
//!   that refills with wall time. First with the job, then with the
//!   per-process path: the same hog without forks and 8 separate small hogs
//!   (9 ML processes that share nothing, read in full every tick, no
//!   proportional-share read). CPU time of the `sample()` calls over the
//!   run's wall time is the share of one core; the `pss` collector's own
//!   account is printed too.
//!
//! Run: `cargo bench --bench job_cost` (builds the hog). Knobs:
//! `HEADROOM_BENCH_TICKS` (60 per part), `HEADROOM_BENCH_HOLD_MIB` (2600),
//! `HEADROOM_BENCH_FORKS` (8), `HEADROOM_BENCH_READS` (20 `smaps_rollup`
//! reads per process).

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!(
        "job_cost measures the Linux sampler's proportional-share reads; nothing to do on this OS"
    );
}

#[cfg(target_os = "linux")]
mod linux {

    use crate::common::{Children, cpu_time, env_usize, median, quantile};
    use headroom::os::linux::LinuxSampler;
    use headroom::sample::Sampler;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::sync::mpsc::{Receiver, channel};
    use std::time::{Duration, Instant};

    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

    /// Start a hog that looks like `torchrun`; its stdout lines come on the
    /// receiver.
    fn hog(args: &[String]) -> (std::process::Child, Receiver<String>) {
        let mut child = Command::new(crate::common::hog_program::hog_path())
            .arg0("torchrun")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn headroom-hog");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        (child, rx)
    }

    /// The value after `prefix` on the first line that has it, within `within`.
    fn wait_for(rx: &Receiver<String>, prefix: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(v) = line.strip_prefix(prefix) {
                        return Some(v.trim().to_owned());
                    }
                }
                Err(_) => return None,
            }
        }
        None
    }

    /// A `kB` field of `/proc/PID/status`, in KiB.
    fn status_kib(pid: u32, key: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
            })
            .unwrap_or(0)
    }

    /// A field of `/proc/meminfo`, in KiB.
    fn meminfo_kib(key: &str) -> u64 {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
            })
            .unwrap_or(0)
    }

    /// CPU and wall µs per read of `/proc/PID/FILE`, medians over `n` reads.
    fn time_reads(pid: u32, file: &str, n: usize) -> (f64, f64) {
        let path = format!("/proc/{pid}/{file}");
        let (mut cpu, mut wall) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let (c0, w0) = (cpu_time(), Instant::now());
            let text = std::fs::read(&path).expect("read");
            std::hint::black_box(text);
            wall.push(w0.elapsed().as_secs_f64() * 1e6);
            cpu.push(cpu_time().saturating_sub(c0).as_secs_f64() * 1e6);
        }
        (median(&cpu), median(&wall))
    }

    /// The job's members' proportional shares added up, bytes, from
    /// `smaps_rollup` (what the sampler's reads should add up to).
    fn pss_total(pids: &[u32]) -> u64 {
        pids.iter()
            .map(|pid| {
                let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
                    .unwrap_or_default();
                ["Pss_Anon:", "Pss_Shmem:", "SwapPss:"]
                    .iter()
                    .map(|key| {
                        text.lines()
                            .find_map(|l| l.strip_prefix(key))
                            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                            .unwrap_or(0)
                    })
                    .sum::<u64>()
                    * 1024
            })
            .sum()
    }

    struct Ticks {
        /// CPU ms of each `sample()` call (job grouping included).
        cpu_ms: Vec<f64>,
        /// Wall ms of each.
        wall_ms: Vec<f64>,
        /// Wall seconds from the first tick's start to the end of the last
        /// tick's second.
        span_s: f64,
        /// The `pss` collector's account after the last tick, if any.
        pss: Option<String>,
        /// Reads counted by the `pss` collector after each tick.
        reads_after: Vec<u64>,
        /// The biggest job's footprint and basis at the last tick.
        job: Option<(u64, String, usize)>,
        /// This process's CPU over the whole run, ms: the sampler's thread
        /// and the thread that reads proportional shares between ticks.
        process_cpu_ms: f64,
    }

    /// `n` samples, one a second.
    fn run_ticks(n: usize) -> Ticks {
        let mut sampler = LinuxSampler::new("/proc");
        let start = Instant::now();
        let cpu_start = cpu_time();
        let mut t = Ticks {
            process_cpu_ms: 0.0,
            cpu_ms: Vec::new(),
            wall_ms: Vec::new(),
            span_s: 0.0,
            pss: None,
            reads_after: Vec::new(),
            job: None,
        };
        for i in 0..n {
            let at = start + Duration::from_secs(i as u64);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            let (c0, w0) = (cpu_time(), Instant::now());
            let mut snap = sampler.sample().expect("sample");
            headroom::sample::jobs::assemble(&mut snap);
            t.wall_ms.push(w0.elapsed().as_secs_f64() * 1e3);
            t.cpu_ms
                .push(cpu_time().saturating_sub(c0).as_secs_f64() * 1e3);
            let pss = snap.collectors.iter().find(|c| c.name == "pss");
            t.reads_after.push(
                pss.and_then(|c| c.detail.split_whitespace().next()?.parse().ok())
                    .unwrap_or(0),
            );
            t.pss = pss.map(|c| c.detail.clone());
            t.job = snap
                .jobs
                .first()
                .map(|j| (j.footprint, j.basis.to_string(), j.members.len()));
        }
        // The last tick's second, so that reads it started are counted.
        let end = start + Duration::from_secs(n as u64);
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        t.process_cpu_ms = cpu_time().saturating_sub(cpu_start).as_secs_f64() * 1e3;
        t.span_s = start.elapsed().as_secs_f64().max(n as f64);
        drop(sampler);
        t
    }

    fn report_ticks(name: &str, t: &Ticks) {
        let total = t.process_cpu_ms;
        let share = total / (t.span_s * 1e3) * 100.0;
        let read_ticks: Vec<usize> = t
            .reads_after
            .iter()
            .enumerate()
            .filter(|(i, n)| **n > if *i == 0 { 0 } else { t.reads_after[i - 1] })
            .map(|(i, _)| i)
            .collect();
        println!(
            "| {name} | {} | {total:.0} | **{share:.2} %** | {:.1} | {:.1} | {:.1} | {:.1} | {read_ticks:?} |",
            t.cpu_ms.len(),
            median(&t.cpu_ms),
            quantile(&t.cpu_ms, 1.0),
            median(&t.wall_ms),
            quantile(&t.wall_ms, 1.0),
        );
    }

    pub fn main() {
        if !std::env::args().any(|a| a == "--bench") {
            println!("job_cost: run with `cargo bench --bench job_cost`");
            return;
        }
        let ticks = env_usize("HEADROOM_BENCH_TICKS", 60);
        let hold = env_usize("HEADROOM_BENCH_HOLD_MIB", 2600);
        let forks = env_usize("HEADROOM_BENCH_FORKS", 8);
        let reads = env_usize("HEADROOM_BENCH_READS", 20);

        // The job: one hog, forked.
        let avail0 = meminfo_kib("MemAvailable:");
        let (child, rx) = hog(&[
            "--rate".into(),
            "max".into(),
            "--max".into(),
            format!("{hold}MiB"),
            "--fork".into(),
            forks.to_string(),
        ]);
        let job_hog = Children(vec![child]);
        let parent: u32 = wait_for(&rx, "ready pid=", Duration::from_secs(30))
            .and_then(|v| v.parse().ok())
            .expect("hog ready");
        let mut pids = vec![parent];
        for _ in 0..forks {
            let pid = wait_for(&rx, "forked pid=", Duration::from_secs(120))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .expect("forked child");
            pids.push(pid);
        }
        std::thread::sleep(Duration::from_secs(2));
        let rss_anon: u64 = pids.iter().map(|p| status_kib(*p, "RssAnon:")).sum();
        let held = avail0.saturating_sub(meminfo_kib("MemAvailable:"));
        println!(
            "job_cost: {} processes, RssAnon added up {:.2} GiB, proportional shares added up {:.2} GiB, \
         MemAvailable down {:.2} GiB",
            pids.len(),
            rss_anon as f64 * 1024.0 / GIB,
            pss_total(&pids) as f64 / GIB,
            held as f64 * 1024.0 / GIB
        );

        // One read of each file, directly.
        println!();
        println!(
            "| read | process | resident GiB | CPU µs per read, median | wall µs | CPU ms per GiB resident |"
        );
        println!("|---|---|---:|---:|---:|---:|");
        for (who, pid) in [("parent", parent), ("child", pids[pids.len().min(2) - 1])] {
            let rss_gib = status_kib(pid, "VmRSS:") as f64 * 1024.0 / GIB;
            for (file, n) in [("smaps_rollup", reads), ("status", reads * 10)] {
                let (cpu, wall) = time_reads(pid, file, n);
                println!(
                    "| {file} | {who} | {rss_gib:.2} | {cpu:.0} | {wall:.0} | {:.2} |",
                    cpu / 1e3 / rss_gib
                );
            }
        }

        println!();
        println!(
            "| path | ticks | process CPU ms over the run (both threads) | share of one core | CPU ms per tick, median | max | wall ms per tick, median | max | ticks with proportional-share reads |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
        let job = run_ticks(ticks);
        report_ticks(&format!("job: 1 + {forks} forked, shared"), &job);
        drop(job_hog);
        std::thread::sleep(Duration::from_secs(2));

        // The per-process path: the same count of ML processes, nothing shared.
        let mut spawned = Vec::new();
        let mut lines = Vec::new();
        for i in 0..=forks {
            let max = if i == 0 {
                format!("{hold}MiB")
            } else {
                "1MiB".into()
            };
            let (child, rx) = hog(&["--rate".into(), "max".into(), "--max".into(), max]);
            spawned.push(child);
            lines.push(rx);
        }
        let separate = Children(spawned);
        for rx in &lines {
            wait_for(rx, "holding ", Duration::from_secs(120)).expect("hog holding");
        }
        std::thread::sleep(Duration::from_secs(2));
        let alone = run_ticks(ticks);
        report_ticks(
            &format!("per-process: {} separate, nothing shared", forks + 1),
            &alone,
        );
        drop(separate);

        let share = |t: &Ticks| t.process_cpu_ms / (t.span_s * 1e3) * 100.0;
        println!();
        println!(
            "job / per-process: {:.2} × the CPU; difference {:.2} % of one core",
            share(&job) / share(&alone),
            share(&job) - share(&alone)
        );
        if let Some((footprint, basis, members)) = &job.job {
            println!(
                "job at the last tick: {members} members, footprint {:.2} GiB ({basis})",
                *footprint as f64 / GIB
            );
        }
        println!(
            "pss collector after the job's ticks: {}",
            job.pss.as_deref().unwrap_or("(none)")
        );
        println!(
            "pss collector after the per-process ticks: {}",
            alone.pss.as_deref().unwrap_or("(none)")
        );
    }
}
