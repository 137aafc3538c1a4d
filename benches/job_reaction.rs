//! How far past a job-level limit a job grows before headroom's signal
//! reaches its root, when the growth is copy-on-write in forked workers.
//!
//! A `headroom-hog` started as `torchrun` (so that it is ML work and the
//! root of a job) through a link named `hog-job` grows to 1 GiB at once,
//! then forks 4 children that each write to every page it holds at
//! 200 MiB/s: each write turns a shared page into a private copy, so the
//! job grows by about 800 MiB/s while no process's RSS moves. The daemon
//! (release build, interval 1 s, fast interval 250 ms) has one rule on the
//! job: `footprint = "2560MiB"`, `SIGTERM`, judged on the job's total
//! (`scope = "job"`, the default). The hog catches SIGTERM and prints when
//! it arrived.
//!
//! What the job holds is read from the machine: the fall of `MemAvailable`
//! since just before the hog started, read every 5 ms on a thread of its
//! own. The crossing is the first reading at or above the limit, and the
//! figure at the signal is the last reading before the hog's signal line
//! arrived. Other processes move `MemAvailable` too, so a quiet machine
//! matters.
//! On a VM whose `MemAvailable` lags allocation (as in the run recorded in
//! `BENCHMARKS.md`) those columns are not usable; the time from the hog's
//! start to the signal is.
//!
//! For comparison the same daemon, rule and link with a hog that grows on
//! its own, unforked, at 800 MiB/s: the per-process path (its RSS moves).
//!
//! Run: `cargo bench --bench job_reaction` (`HEADROOM_BENCH_RUNS=N` runs of
//! each, default 3).

mod common;

use common::{env_usize, median};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HEADROOM: &str = env!("CARGO_BIN_EXE_headroom");
const HOG: &str = env!("CARGO_BIN_EXE_headroom-hog");
const MIB: f64 = 1024.0 * 1024.0;
const LIMIT_MIB: u64 = 2560;

struct Proc {
    child: Child,
    lines: Receiver<(Instant, String)>,
}

impl Proc {
    fn spawn(mut cmd: Command, stderr: bool) -> Proc {
        if stderr {
            cmd.stderr(Stdio::piped()).stdout(Stdio::null());
        } else {
            cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        }
        let mut child = cmd.stdin(Stdio::null()).spawn().expect("spawn");
        let (tx, lines) = channel();
        let stream: Box<dyn std::io::Read + Send> = if stderr {
            Box::new(child.stderr.take().expect("stderr"))
        } else {
            Box::new(child.stdout.take().expect("stdout"))
        };
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines }
    }

    fn wait_for(&self, needle: &str, within: Duration) -> Option<(Instant, String)> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok((at, line)) = self.lines.recv_timeout(Duration::from_millis(50))
                && line.contains(needle)
            {
                return Some((at, line));
            }
        }
        None
    }

    /// Every line received so far.
    fn drain(&self) -> Vec<(Instant, String)> {
        self.lines.try_iter().collect()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `MemAvailable` in bytes.
fn available() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

/// Reads `MemAvailable` every 5 ms until dropped.
struct Watcher {
    readings: Arc<Mutex<Vec<(Instant, u64)>>>,
    stop: Arc<AtomicBool>,
}

impl Watcher {
    fn start() -> Watcher {
        let readings = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (readings.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let v = available();
                r.lock().expect("readings").push((Instant::now(), v));
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Watcher { readings, stop }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

struct Run {
    /// What the job held at the signal, MiB (fall of MemAvailable).
    at_signal: f64,
    /// From the crossing to the signal, ms (NaN: the signal came first).
    delay_ms: f64,
    /// From the hog's start to the signal, ms.
    since_start_ms: f64,
    /// Growth rate around the limit, MiB/s.
    rate: f64,
    /// Daemon samples from the hog's start to the signal.
    samples: usize,
    /// The `pss` collector's account after the signal.
    pss: String,
}

fn one_run(forked: bool, i: usize) -> Result<Run, String> {
    // Not under /tmp: as root, the daemon refuses a config others could change.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).map_err(|e| e.to_string())?;
    let link = dir.path().join("hog-job");
    std::os::unix::fs::symlink(HOG, &link).map_err(|e| e.to_string())?;
    let cfg = dir.path().join("headroom.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\ninterval = \"1s\"\nfast_interval = \"250ms\"\njournal = \"{}\"\n\n\
             [[rule]]\nname = \"job\"\nfootprint = \"{LIMIT_MIB}MiB\"\nroot = true\nother_users = true\n\
             actions = [{{ signal = \"SIGTERM\" }}]\n[rule.match]\nname = \"^hog-job$\"\n",
            dir.path().join("journal.jsonl").display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let mut cmd = Command::new(HEADROOM);
    cmd.args(["run", "--listen", "127.0.0.1:0", "--config"])
        .arg(&cfg)
        .env("HEADROOM_LOG", "debug");
    let daemon = Proc::spawn(cmd, true);
    let (_, line) = daemon
        .wait_for("status page: http://", Duration::from_secs(20))
        .ok_or("no status page line")?;
    let addr = line
        .split("status page: http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .ok_or("no address")?
        .to_owned();
    daemon
        .wait_for("first sample:", Duration::from_secs(20))
        .ok_or("no first sample")?;
    std::thread::sleep(Duration::from_secs(2));
    daemon.drain();

    let watcher = Watcher::start();
    std::thread::sleep(Duration::from_millis(500));
    let before: Vec<f64> = watcher
        .readings
        .lock()
        .expect("readings")
        .iter()
        .map(|r| r.1 as f64)
        .collect();
    let base = median(&before);
    let mut cmd = Command::new(&link);
    cmd.arg0("torchrun");
    if forked {
        cmd.args([
            "--rate",
            "max",
            "--max",
            "1GiB",
            "--fork",
            "4",
            "--fork-write",
            "200MiB/s",
            "--catch",
            "TERM",
        ]);
    } else {
        cmd.args(["--rate", "800MiB/s", "--max", "6GiB", "--catch", "TERM"]);
    }
    let started = Instant::now();
    let hog = Proc::spawn(cmd, false);
    let (at, _) = hog
        .wait_for("signal SIGTERM", Duration::from_secs(30))
        .ok_or_else(|| format!("run {i}: no signal within 30 s"))?;
    let readings = watcher.readings.clone();
    drop(watcher);
    let samples = daemon
        .drain()
        .iter()
        .filter(|(t, l)| *t >= started && *t <= at && l.contains("sample: "))
        .count();
    let pss = fetch_pss(&addr).unwrap_or_else(|| "(not listed)".into());
    drop(hog);

    // What the job held: the fall of MemAvailable since before it started.
    let limit = LIMIT_MIB as f64 * MIB;
    let readings = readings.lock().expect("readings").clone();
    let held: Vec<(Instant, f64)> = readings
        .iter()
        .filter(|r| r.0 >= started)
        .map(|&(t, v)| (t, base - v as f64))
        .collect();
    let at_signal = held
        .iter()
        .rev()
        .find(|r| r.0 <= at)
        .ok_or_else(|| format!("run {i}: no reading before the signal"))?;
    // The signal may come before the crossing: a job judged on its members'
    // RSS before their first proportional-share read counts shared pages
    // once per process.
    let crossing = held.iter().find(|r| r.1 >= limit && r.0 <= at);
    // The rate around the limit: from 1 GiB below it to the crossing.
    let rate = crossing.map_or(f64::NAN, |crossing| {
        let from = held
            .iter()
            .find(|r| r.1 >= limit - 1024.0 * MIB)
            .unwrap_or(crossing);
        let span = crossing.0.saturating_duration_since(from.0).as_secs_f64();
        (crossing.1 - from.1) / MIB / span
    });
    let delay_ms = crossing.map_or(f64::NAN, |c| {
        at.saturating_duration_since(c.0).as_secs_f64() * 1e3
    });
    Ok(Run {
        at_signal: at_signal.1 / MIB,
        delay_ms,
        since_start_ms: at.saturating_duration_since(started).as_secs_f64() * 1e3,
        rate,
        samples,
        pss,
    })
}

/// The `pss` collector's detail from the daemon's snapshot.
fn fetch_pss(addr: &str) -> Option<String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let body = agent
        .get(&format!("http://{addr}/api/v1/snapshot"))
        .call()
        .ok()?
        .body_mut()
        .read_to_string()
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let collectors = v
        .get("collectors")
        .or_else(|| v.get("snapshot")?.get("collectors"))?;
    collectors
        .as_array()?
        .iter()
        .find(|c| c.get("name").and_then(|n| n.as_str()) == Some("pss"))
        .and_then(|c| c.get("detail")?.as_str().map(str::to_owned))
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("job_reaction: run with `cargo bench --bench job_reaction`");
        return;
    }
    let runs = env_usize("HEADROOM_BENCH_RUNS", 3);
    println!(
        "job_reaction: limit {LIMIT_MIB} MiB on the job, SIGTERM to its root; {runs} runs of each"
    );
    println!(
        "| run | growth | MiB/s near the limit | start → signal ms | held at the signal MiB | past the limit MiB | crossing → signal ms | daemon samples from start to signal |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let mut last_pss = String::new();
    for (forked, what) in [
        (true, "job: 4 forked children copy-on-write"),
        (false, "one process, unforked"),
    ] {
        let (mut over, mut delay) = (Vec::new(), Vec::new());
        for i in 0..runs {
            match one_run(forked, i) {
                Ok(r) => {
                    println!(
                        "| {i} | {what} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} |",
                        r.rate,
                        r.since_start_ms,
                        r.at_signal,
                        r.at_signal - LIMIT_MIB as f64,
                        r.delay_ms,
                        r.samples
                    );
                    over.push(r.at_signal - LIMIT_MIB as f64);
                    delay.push(r.delay_ms);
                    if forked {
                        last_pss = r.pss;
                    }
                }
                Err(e) => println!("| {i} | {what} | failed: {e} | | | | | |"),
            }
            std::thread::sleep(Duration::from_secs(2));
        }
        println!(
            "| median | {what} | | | | {:.0} | {:.0} | |",
            median(&over),
            median(&delay)
        );
    }
    println!();
    println!("pss collector at the last forked run's signal: {last_pss}");
}
