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
//! What the job holds is worked out on the hog's own clock: it prints when
//! it forked each child (`forked pid=N at_ms=M`) and when the signal came
//! (`signal SIGTERM footprint=B at_ms=M`); each child copies at its paced
//! 200 MiB/s, up to the 1 GiB, so the job holds 1 GiB plus what the
//! children have copied by then, and crossed the limit when that reached
//! it. (`MemAvailable`, read beside it, lagged allocation by up to 1.9 GiB
//! on a VM, and other processes move it.)
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
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const HEADROOM: &str = env!("CARGO_BIN_EXE_headroom");
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

struct Run {
    /// What the job held at the signal, MiB, from the hog's own account.
    at_signal: f64,
    /// From the crossing to the signal, ms (negative: the signal came
    /// before the crossing).
    delay_ms: f64,
    /// From the hog's start to the signal, ms (the hog's clock).
    since_start_ms: f64,
    /// Growth rate around the limit, MiB/s.
    rate: f64,
    /// Daemon samples from the hog's start to the signal.
    samples: usize,
    /// The `pss` collector's account after the signal.
    pss: String,
}

/// The children's write rate, MiB/s each, and what each can copy, MiB.
const WRITE_MIB_S: f64 = 200.0;
const HELD_MIB: f64 = 1024.0;
/// The unforked hog's rate, MiB/s.
const GROW_MIB_S: f64 = 800.0;

/// What the forked job holds `t` ms after the hog started, MiB: the 1 GiB
/// it holds, plus what each child has copied since it was forked at
/// `forks[i]` ms (at its paced write rate, up to the 1 GiB).
fn forked_job(forks: &[f64], t: f64) -> f64 {
    HELD_MIB
        + forks
            .iter()
            .map(|&f| ((t - f).max(0.0) / 1e3 * WRITE_MIB_S).min(HELD_MIB))
            .sum::<f64>()
}

/// `at_ms=N` of a hog line.
fn at_ms(line: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("at_ms="))?
        .parse()
        .ok()
}

fn one_run(forked: bool, i: usize) -> Result<Run, String> {
    // Not under /tmp: as root, the daemon refuses a config others could change.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).map_err(|e| e.to_string())?;
    let link = dir.path().join("hog-job");
    std::os::unix::fs::symlink(crate::common::hog_program::hog_path(), &link)
        .map_err(|e| e.to_string())?;
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
    // The hog's own lines: when each child was forked, and the signal.
    let mut forks = Vec::new();
    let deadline = started + Duration::from_secs(30);
    let (at, signal) = loop {
        let left = deadline
            .checked_duration_since(Instant::now())
            .ok_or_else(|| format!("run {i}: no signal within 30 s"))?;
        let (at, line) = hog
            .lines
            .recv_timeout(left)
            .map_err(|_| format!("run {i}: no signal within 30 s"))?;
        if line.starts_with("forked pid=") {
            forks.push(at_ms(&line).ok_or("a fork line without at_ms")?);
        } else if line.starts_with("signal SIGTERM") {
            break (at, line);
        }
    };
    let signal_ms = at_ms(&signal).ok_or("a signal line without at_ms")?;
    let samples = daemon
        .drain()
        .iter()
        .filter(|(t, l)| *t >= started && *t <= at && l.contains("sample: "))
        .count();
    let pss = fetch_pss(&addr).unwrap_or_else(|| "(not listed)".into());
    drop(hog);

    let limit = LIMIT_MIB as f64;
    let (held, crossing_ms, rate) = if forked {
        if forks.len() < 4 {
            return Err(format!(
                "run {i}: signalled after {} of 4 forks, at {signal_ms} ms",
                forks.len()
            ));
        }
        // The first millisecond at which the job holds the limit.
        let first_fork = forks.iter().copied().fold(f64::INFINITY, f64::min);
        let crossing = (0..60_000)
            .map(|k| first_fork + f64::from(k))
            .find(|&t| forked_job(&forks, t) >= limit)
            .unwrap_or(f64::NAN);
        (
            forked_job(&forks, signal_ms),
            crossing,
            WRITE_MIB_S * forks.len() as f64,
        )
    } else {
        // The hog says what it held when the signal came.
        let footprint: f64 = signal
            .split_whitespace()
            .find_map(|w| w.strip_prefix("footprint="))
            .and_then(|v| v.parse().ok())
            .ok_or("a signal line without footprint")?;
        let held = footprint / MIB;
        (
            held,
            signal_ms - (held - limit) / GROW_MIB_S * 1e3,
            GROW_MIB_S,
        )
    };
    Ok(Run {
        at_signal: held,
        delay_ms: signal_ms - crossing_ms,
        since_start_ms: signal_ms,
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
