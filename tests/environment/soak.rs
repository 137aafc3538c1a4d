//! Soak under churn and load: the real daemon, sampling at its fast interval
//! (250 ms), while three loads run together for the whole run:
//!
//! - churn: a few hundred short-lived processes a second, spawned and
//!   reaped, many with odd names (spaces, parentheses, a newline, bytes
//!   that are not UTF-8, 200 characters) and some with a long argv (80 KB);
//! - memory: `headroom-hog` growing to 256 MiB at 256 MiB/s, holding for a
//!   second, exiting, again and again;
//! - HTTP: two `wrk`s hammering `/metrics` and `/api/v1/processes`.
//!
//! It reports samples taken against expected, the sampling duration and the
//! interval jitter (percentiles of the gaps between samples in the daemon's
//! debug log, extra samples taken when the machine moves included), wrk's requests and errors, the daemon's RSS at
//! start, after warm-up and at the end, collector errors by kind, and
//! panics; and asserts the goals: no panic, no HTTP error, RSS growth after
//! warm-up under 2 MiB, p99 of how late the daemon woke for its scheduled
//! samples (`headroom_wake_lateness_seconds`) under 50 ms, and every expected sample
//! taken (95 %).
//!
//! The daemon and the hog are release builds, as shipped: the goals are
//! about the program users run, and a debug build samples ten times slower.
//! Built as part of `cargo test --release`, this test uses the binaries
//! cargo built with it; built in debug, it builds them first (`cargo build
//! --release`, into the same target directory).
//!
//! It runs for 60 s in the test suite, alone (`cargo test --test environment
//! soak::`, after the rest of the tier: other tests beside it would show as
//! jitter); `scripts/soak.sh DURATION` runs it longer
//! (`HEADROOM_SOAK_DURATION`, e.g. `10m`). The report is printed and written
//! to `target/soak/`.
#![cfg(target_os = "linux")]

use crate::support;

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::support::hog::{HEADROOM, hog_path};

/// The daemon and the hog, release builds.
fn release_binaries() -> (PathBuf, PathBuf) {
    if !cfg!(debug_assertions) {
        // This test is a release build: so are the binaries built with it.
        return (PathBuf::from(HEADROOM), hog_path().to_path_buf());
    }
    // target/debug/deps/soak-… → target
    let exe = std::env::current_exe().expect("this test binary");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("the target directory above target/debug/deps")
        .to_path_buf();
    let built = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--locked",
            "--bin",
            "headroom",
            "--example",
            "headroom-hog",
        ])
        .arg("--target-dir")
        .arg(&target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build --release");
    assert!(built.success(), "cargo build --release failed");
    let release = target.join("release");
    (
        release.join("headroom"),
        release.join("examples").join("headroom-hog"),
    )
}

const INTERVAL: Duration = Duration::from_millis(250);
/// Churn processes started per second (aimed at; the report says how many).
const CHURN_PER_SECOND: u64 = 300;
/// Churn processes alive at once, at most.
const CHURN_IN_FLIGHT: usize = 400;
const MIB: u64 = 1 << 20;

fn duration() -> Duration {
    match std::env::var("HEADROOM_SOAK_DURATION") {
        Ok(text) => headroom::config::parse_duration(&text)
            .unwrap_or_else(|e| panic!("HEADROOM_SOAK_DURATION: {e}")),
        Err(_) => Duration::from_secs(60),
    }
}

/// The daemon's history window: full after it, so RSS levels off.
const HISTORY: &str = "15s";

/// RSS is compared from here on: history full (twice over), caches warm.
fn warm_up(total: Duration) -> Duration {
    (total / 2).min(Duration::from_secs(60))
}

// ---------------------------------------------------------------------------
// Loads
// ---------------------------------------------------------------------------

/// A load on a thread of its own, stopped through `stop`.
struct Load {
    name: &'static str,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<String>>,
}

impl Load {
    fn start(
        name: &'static str,
        work: impl FnOnce(Arc<AtomicBool>) -> String + Send + 'static,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || work(flag))
            .expect("start a load");
        Load {
            name,
            stop,
            thread: Some(thread),
        }
    }

    /// Stop and return its summary line.
    fn finish(mut self) -> String {
        self.stop.store(true, Ordering::SeqCst);
        let summary = self
            .thread
            .take()
            .expect("running")
            .join()
            .unwrap_or_else(|_| panic!("the {} load panicked", self.name));
        format!("{}: {summary}", self.name)
    }
}

/// Links to `sleep` and `sh` whose names are hard on a parser of `/proc`:
/// the kernel takes a process's name from the file it runs.
fn odd_links(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let names: [&[u8]; 6] = [
        b"odd (name) x",
        b"new\nline)(",
        b"caf\xe9 \xff\xfe",
        b"a)b(c) d",
        b"  spaces  ",
        &[b'L'; 200],
    ];
    names
        .iter()
        .map(|name| {
            let link = dir.join(OsStr::from_bytes(name));
            std::os::unix::fs::symlink("/bin/sleep", &link).expect("link to sleep");
            (link, name.to_vec())
        })
        .collect()
}

/// The churn: spawn at [`CHURN_PER_SECOND`], reap as they exit.
fn churn(dir: PathBuf, stop: Arc<AtomicBool>) -> String {
    let links = odd_links(&dir);
    let sh = dir.join("sh with (long) argv");
    std::os::unix::fs::symlink("/bin/sh", &sh).expect("link to sh");
    let long_args: Vec<String> = (0..40)
        .map(|i| format!("{i}:{}", "z".repeat(2000)))
        .collect();
    let mut children: Vec<Child> = Vec::new();
    let (mut spawned, mut failed) = (0u64, 0u64);
    let started = Instant::now();
    let period = Duration::from_secs(1) / CHURN_PER_SECOND as u32;
    let mut next = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let n = spawned + failed;
        let mut command = match n % 8 {
            // Odd names, each living 20-300 ms.
            0..=5 => {
                let (link, name) = &links[(n / 8) as usize % links.len()];
                let mut c = Command::new(link);
                c.arg0(OsStr::from_bytes(name))
                    .arg(["0.02", "0.05", "0.1", "0.3"][(n % 4) as usize]);
                c
            }
            // A long argv, and an exec that changes the name mid-life.
            6 => {
                let mut c = Command::new(&sh);
                c.arg0("sh (long argv)")
                    .args(["-c", "exec sleep 0.2", "sh"])
                    .args(&long_args);
                c
            }
            // Gone before anyone looks.
            _ => Command::new("/bin/true"),
        };
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match command.spawn() {
            Ok(child) => {
                children.push(child);
                spawned += 1;
            }
            Err(_) => failed += 1,
        }
        children.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        while children.len() > CHURN_IN_FLIGHT {
            let mut oldest = children.remove(0);
            let _ = oldest.wait();
        }
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
    let secs = started.elapsed().as_secs_f64();
    format!(
        "{spawned} processes spawned and reaped ({:.0}/s), {failed} spawns failed",
        spawned as f64 / secs
    )
}

/// The memory load: the hog grows to 256 MiB, holds 1 s, exits; again.
fn memory(hog: PathBuf, stop: Arc<AtomicBool>) -> String {
    let mut rounds = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let mut hog = Command::new(&hog)
            .args(["--rate", "256MiB/s", "--max", "256MiB", "--hold", "1s"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn headroom-hog");
        loop {
            if stop.load(Ordering::SeqCst) {
                let _ = hog.kill();
            }
            if hog.try_wait().expect("try_wait").is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        rounds += 1;
    }
    format!("{rounds} rounds of growing to 256 MiB and freeing it")
}

/// What wrk reported.
#[derive(Debug, Default)]
struct WrkResult {
    requests: u64,
    per_second: f64,
    non_2xx: u64,
    socket_errors: u64,
    p99: String,
    raw: String,
}

fn wrk(url: String, seconds: u64) -> WrkResult {
    let wrk = support::tool("wrk", "HEADROOM_WRK", "wrk");
    let out = Command::new(wrk)
        .args(["-t1", "-c4", "--latency", "--timeout", "5s"])
        .arg(format!("-d{seconds}s"))
        .arg(&url)
        .output()
        .expect("run wrk");
    let raw = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "wrk {url}: {raw}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut r = WrkResult {
        raw: raw.clone(),
        ..WrkResult::default()
    };
    for line in raw.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            r.non_2xx = rest.trim().parse().unwrap_or(u64::MAX);
        } else if line.starts_with("Socket errors:") {
            // Socket errors: connect 0, read 0, write 0, timeout 0
            r.socket_errors = line
                .split([',', ':'])
                .filter_map(|p| p.split_whitespace().last()?.parse::<u64>().ok())
                .sum();
        } else if line.starts_with("Requests/sec:") {
            r.per_second = words.get(1).and_then(|w| w.parse().ok()).unwrap_or(0.0);
        } else if words.get(1) == Some(&"requests") {
            r.requests = words[0].parse().unwrap_or(0);
        } else if words.first() == Some(&"99%") {
            r.p99 = words.get(1).map(|s| s.to_string()).unwrap_or_default();
        }
    }
    r
}

// ---------------------------------------------------------------------------
// The daemon and what it says
// ---------------------------------------------------------------------------

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("daemon status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// One `sample: …, N µs` (or `…, N µs, light`) debug line of the daemon's
/// JSON log: when the sample started, and how long it took.
fn sample_line(line: &str) -> Option<(SystemTime, Duration)> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let message = v["message"].as_str()?;
    // A light tick (the process table carried over) ends in ", light".
    let message = message.strip_suffix(", light").unwrap_or(message);
    let micros = message
        .strip_prefix("sample: ")?
        .strip_suffix(" µs")?
        .rsplit(", ")
        .next()?
        .parse::<u64>()
        .ok()?;
    let logged = humantime::parse_rfc3339(v["timestamp"].as_str()?).ok()?;
    let took = Duration::from_micros(micros);
    Some((logged.checked_sub(took)?, took))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(d: f64) -> String {
    format!("{d:.1} ms")
}

#[test]
fn the_daemon_soaks_up_churn_memory_and_http_load() {
    let total = duration();
    let warm = warm_up(total);
    let (headroom, hog) = release_binaries();
    let dir = support::private_dir();
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval = \"250ms\"\nfast_interval = \"250ms\"\nhistory = \"{HISTORY}\"\n\
             journal = \"{}\"\n",
            dir.path().join("journal.jsonl").display()
        ),
    )
    .expect("config");
    let log_path = dir.path().join("daemon.log");
    let log = File::create(&log_path).expect("log file");
    let mut daemon = support::Reaped(
        Command::new(&headroom)
            .args([
                "run",
                "--log-format",
                "json",
                "--listen",
                "127.0.0.1:0",
                "--config",
            ])
            .arg(&config)
            .env("HEADROOM_LOG", "info,headroom::daemon=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn the daemon"),
    );
    let pid = daemon.0.id();
    let addr = support::wait_for(Duration::from_secs(30), "the status page line", || {
        let text = std::fs::read_to_string(&log_path).ok()?;
        let rest = text.split("status page: http://").nth(1)?;
        rest.split('/').next().map(str::to_string)
    });
    support::wait_for(Duration::from_secs(30), "/healthz 200", || {
        (support::get(&format!("http://{addr}/healthz")).0 == 200).then_some(())
    });
    let rss_start = rss_bytes(pid);
    let started = Instant::now();

    let churn_dir = dir.path().join("churn");
    std::fs::create_dir(&churn_dir).expect("churn dir");
    let loads = vec![
        Load::start("churn", move |stop| churn(churn_dir, stop)),
        Load::start("memory", move |stop| memory(hog, stop)),
    ];
    let seconds = total.as_secs().max(1);
    let wrk_metrics = {
        let url = format!("http://{addr}/metrics");
        std::thread::spawn(move || wrk(url, seconds))
    };
    let wrk_processes = {
        let url = format!("http://{addr}/api/v1/processes");
        std::thread::spawn(move || wrk(url, seconds))
    };

    // RSS once a second; after warm-up, the baseline.
    let mut rss_series: Vec<(f64, u64)> = Vec::new();
    let mut rss_warm = None;
    while started.elapsed() < total {
        std::thread::sleep(Duration::from_secs(1));
        let rss = rss_bytes(pid);
        rss_series.push((started.elapsed().as_secs_f64(), rss));
        if rss_warm.is_none() && started.elapsed() >= warm {
            rss_warm = Some(rss);
        }
    }
    let rss_end = rss_bytes(pid);
    let load_lines: Vec<String> = loads.into_iter().map(Load::finish).collect();
    let wrk_m = wrk_metrics.join().expect("wrk /metrics");
    let wrk_p = wrk_processes.join().expect("wrk /api/v1/processes");
    let elapsed = started.elapsed();

    let (_, health) = support::get(&format!("http://{addr}/healthz"));
    let (_, metrics) = support::get(&format!("http://{addr}/metrics"));
    let alive = matches!(daemon.0.try_wait(), Ok(None));
    let kill = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let exit = daemon.0.wait().expect("wait for the daemon");

    // --- What the log says ---------------------------------------------------
    let log = std::fs::read_to_string(&log_path).expect("log");
    let panics: Vec<&str> = log.lines().filter(|l| l.contains("panicked")).collect();
    let window_start = SystemTime::now() - elapsed - Duration::from_secs(2);
    let samples: Vec<(SystemTime, Duration)> = log
        .lines()
        .filter_map(sample_line)
        .filter(|(at, _)| *at >= window_start)
        .collect();
    let mut durations: Vec<f64> = samples.iter().map(|(_, d)| d.as_secs_f64() * 1e3).collect();
    durations.sort_by(f64::total_cmp);
    let mut jitter: Vec<f64> = samples
        .windows(2)
        .filter_map(|w| w[1].0.duration_since(w[0].0).ok())
        .map(|gap| (gap.as_secs_f64() - INTERVAL.as_secs_f64()).abs() * 1e3)
        .collect();
    jitter.sort_by(f64::total_cmp);
    let expected = (elapsed.as_secs_f64() / INTERVAL.as_secs_f64()).floor() as usize;
    let health: serde_json::Value = serde_json::from_str(&health).unwrap_or_default();
    let collector_errors: Vec<String> = metrics
        .lines()
        .filter(|l| l.starts_with("headroom_collector_errors_total{"))
        .map(|l| {
            l.trim_start_matches("headroom_collector_errors_total")
                .to_string()
        })
        .collect();
    let rss_warm = rss_warm.unwrap_or(rss_start);
    let growth = rss_end as i64 - rss_warm as i64;
    let rss_max = rss_series.iter().map(|(_, r)| *r).max().unwrap_or(rss_end);

    let mut report = String::new();
    let _ = writeln!(
        report,
        "soak: {:.0} s, sampling every {} ms",
        elapsed.as_secs_f64(),
        INTERVAL.as_millis()
    );
    let _ = writeln!(
        report,
        "samples: {} taken in the run (log), {} expected; daemon total {}",
        samples.len(),
        expected,
        health["samples"]
    );
    let _ = writeln!(
        report,
        "sample duration: p50 {} p90 {} p99 {} max {}",
        ms(percentile(&durations, 50.0)),
        ms(percentile(&durations, 90.0)),
        ms(percentile(&durations, 99.0)),
        ms(percentile(&durations, 100.0))
    );
    let _ = writeln!(
        report,
        "interval jitter: p50 {} p90 {} p99 {} max {}",
        ms(percentile(&jitter, 50.0)),
        ms(percentile(&jitter, 90.0)),
        ms(percentile(&jitter, 99.0)),
        ms(percentile(&jitter, 100.0))
    );
    for (name, w) in [("/metrics", &wrk_m), ("/api/v1/processes", &wrk_p)] {
        let _ = writeln!(
            report,
            "http {name}: {} requests ({:.0}/s), p99 latency {}, non-2xx {}, socket errors {}",
            w.requests, w.per_second, w.p99, w.non_2xx, w.socket_errors
        );
    }
    let _ = writeln!(
        report,
        "rss: start {:.1} MiB, after {} s warm-up {:.1} MiB, end {:.1} MiB, max {:.1} MiB; growth after warm-up {:+.0} KiB",
        rss_start as f64 / MIB as f64,
        warm.as_secs(),
        rss_warm as f64 / MIB as f64,
        rss_end as f64 / MIB as f64,
        rss_max as f64 / MIB as f64,
        growth as f64 / 1024.0
    );
    let _ = writeln!(report, "collector errors: {}", collector_errors.join(" "));
    for line in &load_lines {
        let _ = writeln!(report, "load {line}");
    }
    let _ = writeln!(report, "panics: {}", panics.len());
    let _ = writeln!(
        report,
        "daemon alive at the end: {alive}; exit on SIGTERM: {exit}"
    );
    print!("{report}");
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/soak");
    std::fs::create_dir_all(&out_dir).expect("target/soak");
    let name = format!("report-{}s.txt", total.as_secs());
    std::fs::write(out_dir.join(&name), &report).expect("write the report");
    let series: String = rss_series
        .iter()
        .map(|(t, r)| format!("{t:.0} {r}\n"))
        .collect();
    std::fs::write(
        out_dir.join(format!("rss-{}s.txt", total.as_secs())),
        series,
    )
    .expect("rss");

    // --- The goals -----------------------------------------------------------
    assert!(panics.is_empty(), "panics:\n{}", panics.join("\n"));
    assert!(alive, "the daemon died:\n{report}");
    assert_eq!(exit.code(), Some(0), "{report}");
    for w in [&wrk_m, &wrk_p] {
        assert_eq!((w.non_2xx, w.socket_errors), (0, 0), "{}", w.raw);
        assert!(w.requests > 0, "{}", w.raw);
    }
    assert!(
        samples.len() * 100 >= expected * 95,
        "{} of {expected} samples:\n{report}",
        samples.len()
    );
    // Jitter is how late the daemon woke for its scheduled samples, from
    // its own histogram: the gaps between logged samples also count the
    // extra samples it takes at once when the machine moves, which are on
    // purpose.
    let late_p99 = wake_lateness_p99_ms(&metrics)
        .unwrap_or_else(|| panic!("no headroom_wake_lateness_seconds in /metrics:\n{metrics}"));
    assert!(
        late_p99 < 50.0,
        "p99 wake lateness up to {late_p99:.1} ms:\n{report}"
    );
    assert!(
        growth < 2 * MIB as i64,
        "RSS grew {growth} bytes after warm-up:\n{report}"
    );
    let churned = load_lines
        .iter()
        .any(|l| l.starts_with("churn: ") && !l.starts_with("churn: 0 "));
    assert!(churned, "{report}");
    // Processes seen to vanish mid-read were counted, not fatal.
    assert!(health["status"] == "ok", "{health}");
}

/// The upper bound of the bucket that holds the 99th percentile of
/// `headroom_wake_lateness_seconds`, in milliseconds; `None` without the
/// histogram or with no wakes counted.
fn wake_lateness_p99_ms(metrics: &str) -> Option<f64> {
    let mut buckets: Vec<(f64, f64)> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("headroom_wake_lateness_seconds_bucket{le=\""))
        .filter_map(|rest| {
            let (le, count) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, count.trim().parse().ok()?))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    buckets
        .iter()
        .find(|(_, cumulative)| *cumulative >= total * 0.99)
        .map(|(le, _)| le * 1e3)
}

#[test]
fn the_lateness_percentile_is_read_from_the_buckets() {
    let text = "headroom_wake_lateness_seconds_bucket{le=\"0.001\"} 90\n\
                headroom_wake_lateness_seconds_bucket{le=\"0.01\"} 99\n\
                headroom_wake_lateness_seconds_bucket{le=\"0.05\"} 100\n\
                headroom_wake_lateness_seconds_bucket{le=\"+Inf\"} 100\n";
    assert_eq!(wake_lateness_p99_ms(text), Some(10.0));
    assert_eq!(wake_lateness_p99_ms(""), None);
}
