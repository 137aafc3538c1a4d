//! How fast headroom reacts: a `headroom-hog` grows as fast as it can, up to
//! 1 GiB/s, toward a 2 GiB footprint limit whose rule sends SIGINT. The hog
//! reports what it had allocated when the signal arrived; the overshoot past
//! the limit, divided by the rate it achieved, is the reaction in
//! milliseconds of growth. The median of several runs is reported.
//!
//! Before each run the idle daemon is watched for a few seconds, to show it
//! stays at its normal 1 s interval until something comes within reach.
//!
//! Run: `cargo bench --bench reaction` (HEADROOM_BENCH_RUNS=N changes the
//! number of runs, default 7).

mod common;

use common::median;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const HEADROOM: &str = env!("CARGO_BIN_EXE_headroom");
const MIB: f64 = 1024.0 * 1024.0;
const LIMIT: u64 = 2 << 30;
const IDLE_WATCH: Duration = Duration::from_secs(4);

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

    fn count(&self, needle: &str, during: Duration) -> usize {
        let deadline = Instant::now() + during;
        let mut n = 0;
        while Instant::now() < deadline {
            if let Ok((_, line)) = self.lines.recv_timeout(Duration::from_millis(20))
                && line.contains(needle)
            {
                n += 1;
            }
        }
        n
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Run {
    idle_samples: usize,
    footprint_at_signal: u64,
    rate: f64,
}

fn one_run(i: usize) -> Option<Run> {
    // Not under /tmp: as root, the daemon refuses a config others could change.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let hog = dir.path().join(format!("reaction-hog-{i}"));
    std::os::unix::fs::symlink(crate::common::hog_program::hog_path(), &hog).expect("link");
    let pattern = regex::escape(&hog.display().to_string()).replace('\\', "\\\\");
    let cfg = dir.path().join("headroom.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\ninterval = \"1s\"\nfast_interval = \"250ms\"\njournal = \"{}\"\n\n\
             [[rule]]\nname = \"reaction\"\nfootprint = \"2GiB\"\nroot = true\nother_users = true\n\
             actions = [{{ signal = \"SIGINT\" }}]\n[rule.match]\nargv = \"{pattern}\"\n",
            dir.path().join("journal.jsonl").display()
        ),
    )
    .expect("config");
    let mut cmd = Command::new(HEADROOM);
    cmd.args(["run", "--listen", "127.0.0.1:0", "--config", cfg.to_str()?])
        .env("HEADROOM_LOG", "debug");
    let daemon = Proc::spawn(cmd, true);
    daemon.wait_for("first sample:", Duration::from_secs(10))?;
    let idle_samples = daemon.count(" sample: ", IDLE_WATCH);

    let mut cmd = Command::new(&hog);
    cmd.args(["--rate", "1GiB/s", "--max", "4GiB", "--catch", "INT"]);
    let hog = Proc::spawn(cmd, false);
    // The hog's own footprint before it allocates (its runtime): the
    // allocation it reports plus this is its footprint.
    let (_, ready) = hog.wait_for("ready pid=", Duration::from_secs(10))?;
    let pid = ready.trim().strip_prefix("ready pid=")?;
    let baseline = footprint_of(pid).unwrap_or(0);
    let (_, line) = hog.wait_for("signal SIGINT", Duration::from_secs(30))?;
    // signal SIGINT footprint=N at_ms=M
    let mut fields = line.split_whitespace().skip(2);
    let footprint: u64 = fields.next()?.strip_prefix("footprint=")?.parse().ok()?;
    let at_ms: u64 = fields.next()?.strip_prefix("at_ms=")?.parse().ok()?;
    let rate = footprint as f64 / (at_ms as f64 / 1000.0);
    Some(Run {
        idle_samples,
        footprint_at_signal: footprint + baseline,
        rate,
    })
}

/// RssAnon + RssShmem + VmSwap of a process, from `/proc/PID/status`.
fn footprint_of(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Some((kb("RssAnon:") + kb("RssShmem:") + kb("VmSwap:")) * 1024)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` would pass
    // nothing: only run for real under `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        println!("reaction: run with `cargo bench --bench reaction`");
        return;
    }
    let runs: usize = std::env::var("HEADROOM_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    println!(
        "reaction: hog grows toward a {} MiB footprint limit (rule sends SIGINT), {runs} runs",
        LIMIT as f64 / MIB
    );
    println!(
        "| run | idle samples in {}s | rate MiB/s | footprint at signal MiB | overshoot MiB | ms of growth past the limit |",
        IDLE_WATCH.as_secs()
    );
    println!("|---|---|---|---|---|---|");
    let mut overshoots = Vec::new();
    let mut millis = Vec::new();
    let mut rates = Vec::new();
    for i in 0..runs {
        let Some(r) = one_run(i) else {
            println!("| {i} | run failed (no signal within 30 s) | | | | |");
            continue;
        };
        let over = r.footprint_at_signal as f64 - LIMIT as f64;
        let ms = over / r.rate * 1000.0;
        println!(
            "| {i} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
            r.idle_samples,
            r.rate / MIB,
            r.footprint_at_signal as f64 / MIB,
            over / MIB,
            ms
        );
        overshoots.push(over / MIB);
        millis.push(ms);
        rates.push(r.rate / MIB);
    }
    println!();
    println!(
        "median: rate {:.0} MiB/s, overshoot {:.0} MiB, {:.0} ms of growth past the limit (goal ≤ 100 ms)",
        median(&rates),
        median(&overshoots),
        median(&millis)
    );
}
