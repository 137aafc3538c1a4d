//! How far a job's figure lags its real memory while its forked workers
//! copy on access, and what following that costs.
//!
//! A `headroom-hog` started as `torchrun` (ML work, a job's root) holds
//! 2 GiB, then forks 8 children that each write to every page it holds at
//! 50 MiB/s: each write turns a shared page into a private copy, as a
//! `DataLoader` worker's reference counts do, so the job grows about
//! 400 MiB/s while no process's RSS moves. A `LinuxSampler` ticks as the
//! daemon does (a full tick every second, light ticks every 250 ms between)
//! for 10 s, and at each tick the job's figure (its members' footprints
//! added up) is set against what the job really holds, worked out on the
//! hog's clock: 2 GiB plus what each child has copied at its paced rate
//! since it was forked. The lag is the shortfall divided by the job's
//! growth: how many seconds old the figure is.
//!
//! The family is large on purpose: a read of its proportional shares
//! (`smaps_rollup`, 9 × 2 GiB resident) costs about 300 ms of CPU, so the
//! reads' budget allows one every few seconds even while urgent.
//!
//! Run: `cargo bench --bench copy_lag` (`HEADROOM_BENCH_RUNS=N` runs,
//! default 3).

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!(
        "copy_lag measures the Linux sampler's copy-on-access estimate; nothing to do on this OS"
    );
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::common::{self, env_usize, median, quantile, thread_cpu_time};
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc::{Receiver, channel};
    use std::time::{Duration, Instant};

    use headroom::os::linux::LinuxSampler;
    use headroom::sample::Sampler;

    const MIB: f64 = 1024.0 * 1024.0;
    /// What the parent holds, MiB, and each child's write rate, MiB/s.
    const HELD_MIB: f64 = 2048.0;
    const WRITE_MIB_S: f64 = 50.0;
    const CHILDREN: usize = 8;
    const SECONDS: u64 = 10;

    struct Hog {
        child: Child,
        lines: Receiver<String>,
    }

    impl Drop for Hog {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn at_ms(line: &str) -> Option<f64> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix("at_ms="))?
            .parse()
            .ok()
    }

    fn field(line: &str, key: &str) -> Option<u32> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))?
            .parse()
            .ok()
    }

    struct Run {
        lags: Vec<f64>,
        final_ratio: f64,
        /// The job's growth by its shares read, MiB/s.
        rate: f64,
        cpu_share: f64,
        pss: String,
    }

    /// Pss_Anon + Pss_Shmem + SwapPss of `pid`, MiB.
    fn pss_mib(pid: u32) -> f64 {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        text.lines()
            .filter(|l| {
                l.starts_with("Pss_Anon:")
                    || l.starts_with("Pss_Shmem:")
                    || l.starts_with("SwapPss:")
            })
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .sum::<f64>()
            / 1024.0
    }

    fn one_run(i: usize) -> Result<Run, String> {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).map_err(|e| e.to_string())?;
        let link = dir.path().join("torchrun");
        std::os::unix::fs::symlink(common::hog_program::hog_path(), &link)
            .map_err(|e| e.to_string())?;
        let mut sampler = LinuxSampler::new("/proc");
        sampler.sample().map_err(|e| e.to_string())?;

        let mut cmd = Command::new(&link);
        cmd.arg0("torchrun").args([
            "--rate",
            "max",
            "--max",
            "2GiB",
            "--fork",
            &CHILDREN.to_string(),
            "--fork-write",
            &format!("{WRITE_MIB_S}MiB/s"),
        ]);
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let hog = Hog { child, lines };
        let mut root = None;
        let mut forks = Vec::new();
        while forks.len() < CHILDREN {
            let line = hog
                .lines
                .recv_timeout(Duration::from_secs(30))
                .map_err(|_| format!("run {i}: the hog forked {} children", forks.len()))?;
            if line.starts_with("ready") {
                root = field(&line, "pid=");
            } else if line.starts_with("forked") {
                forks.push((
                    field(&line, "pid=").ok_or("fork line")?,
                    at_ms(&line).ok_or("fork at")?,
                ));
            }
        }
        let root = root.ok_or("no ready line")?;
        let mut pids: Vec<u32> = forks.iter().map(|f| f.0).collect();
        pids.push(root);
        // Ticks as the daemon's, 250 ms apart; after every other one the
        // job's real shares are read (what `smaps_rollup` says, about
        // 300 ms for the family) and set against the figure just taken.
        let mut points: Vec<(f64, f64, f64)> = Vec::new();
        let mut sampler_cpu = Duration::ZERO;
        let wall0 = Instant::now();
        let mut next = Instant::now();
        for tick in 0..(SECONDS * 4) {
            next += Duration::from_millis(250);
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let cpu0 = thread_cpu_time();
            let snap = if tick % 4 == 3 {
                sampler.sample()
            } else {
                sampler.sample_light(&pids)
            }
            .map_err(|e| e.to_string())?;
            sampler_cpu += thread_cpu_time().saturating_sub(cpu0);
            if tick % 2 == 1 {
                let shown: f64 = pids
                    .iter()
                    .map(|&p| snap.process(p).map_or(0, |p| p.footprint) as f64 / MIB)
                    .sum();
                let real: f64 = pids.iter().map(|&p| pss_mib(p)).sum();
                points.push((wall0.elapsed().as_secs_f64(), shown, real));
            }
        }
        let wall = wall0.elapsed().as_secs_f64();
        let (first, last) = (points[0], points[points.len() - 1]);
        let rate = (last.2 - first.2) / (last.0 - first.0);
        let lags: Vec<f64> = points
            .iter()
            .map(|&(_, shown, real)| ((real - shown) / rate).max(0.0))
            .collect();
        let final_ratio = last.1 / last.2;
        let pss = sampler
            .collectors()
            .iter()
            .filter_map(|c| c.status())
            .find(|s| s.name == "pss")
            .map_or("(none)".to_string(), |s| s.detail);
        drop(hog);
        Ok(Run {
            lags,
            final_ratio,
            rate,
            cpu_share: sampler_cpu.as_secs_f64() / wall,
            pss,
        })
    }

    pub fn main() {
        let runs = env_usize("HEADROOM_BENCH_RUNS", 3);
        println!(
            "copy_lag: a job of 1 + {CHILDREN} forked workers copying {HELD_MIB} MiB on access at \
             {WRITE_MIB_S} MiB/s each ({} MiB/s together), {SECONDS} s at a full tick a second and \
             light ticks every 250 ms",
            WRITE_MIB_S * CHILDREN as f64
        );
        println!(
            "| run | lag s, median | lag s, p90 | lag s, max | figure / real at the end | job growth, MiB/s | sampler thread CPU, share of a core | pss collector |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---|");
        for i in 0..runs {
            match one_run(i) {
                Ok(r) => println!(
                    "| {i} | {:.2} | {:.2} | {:.2} | {:.3} | {:.0} | {:.2} % | {} |",
                    median(&r.lags),
                    quantile(&r.lags, 0.9),
                    r.lags.iter().copied().fold(0.0, f64::max),
                    r.final_ratio,
                    r.rate,
                    r.cpu_share * 100.0,
                    r.pss
                ),
                Err(e) => println!("| {i} | failed: {e} | | | | | |"),
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }
}
