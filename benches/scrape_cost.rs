//! What one `/metrics` scrape costs, in CPU time, with 1000 processes on the
//! machine, against node_exporter's scrape on the same machine.
//!
//! Spawns 1000 idle processes (killed and reaped at the end, also on panic):
//! 950 `sleep 3600` and 50 `tail -f …/kernel-N.json`, which headroom counts
//! as Jupyter kernels, so that the per-process families are filled up to the
//! default cap of 50 series. It samples the machine 40 times into a daemon
//! state (as the daemon does, so every kernel has a history and a growth
//! rate), then measures the CPU time (user + system, whole process) of:
//!
//! - **render**: `metrics::render(&state)`, building the registry and
//!   encoding the text;
//! - **GET /metrics**: the same request through the whole router
//!   (`oneshot`: routing, the host check, headers, the body), no socket;
//! - **GET /api/v1/processes**: the default process table (50 rows, JSON);
//! - **node_exporter**: if `prometheus-node-exporter` is installed, one
//!   scrape of it over loopback with its default collectors, measured as the
//!   CPU time its process used (from `/proc/PID/stat`) over all scrapes.
//!
//! Run: `cargo bench --bench scrape_cost`. `HEADROOM_BENCH_CHILDREN`,
//! `HEADROOM_BENCH_KERNELS` and `HEADROOM_BENCH_ITERS` override 1000, 50 and
//! 200.

mod common;

use std::hint::black_box;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, header};
use common::{Children, clock_ticks_per_second, cpu_time, env_usize, quantile};
use headroom::config::Config;
use headroom::daemon::Working;
use headroom::model::Timestamp;
use headroom::sample::platform_sampler;
use http_body_util::BodyExt;
use tower::ServiceExt;

fn spawn(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a child")
}

/// CPU time a process has used, from `/proc/PID/stat` (utime + stime, in
/// clock ticks). `None` where there is no such file.
fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let hz = clock_ticks_per_second()?;
    Some(Duration::from_micros((utime + stime) * 1_000_000 / hz))
}

/// Median CPU time of one node_exporter scrape, if it is installed.
fn node_exporter(iters: usize) -> Option<(f64, usize)> {
    let bin = [
        "/usr/bin/prometheus-node-exporter",
        "/usr/bin/node_exporter",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).is_file())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .ok()?
        .port();
    let child = spawn(Command::new(bin).arg(format!("--web.listen-address=127.0.0.1:{port}")));
    let pid = child.id();
    let _guard = Children(vec![child]);
    let url = format!("http://127.0.0.1:{port}/metrics");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let scrape = || -> Option<usize> {
        let mut res = agent.get(&url).call().ok()?;
        res.body_mut().read_to_string().ok().map(|b| b.len())
    };
    let mut bytes = None;
    for _ in 0..50 {
        bytes = scrape();
        if bytes.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for _ in 0..5 {
        scrape();
    }
    let before = process_cpu(pid)?;
    for _ in 0..iters {
        bytes = scrape();
    }
    let used = process_cpu(pid)?.saturating_sub(before);
    Some((used.as_secs_f64() * 1e6 / iters as f64, bytes.unwrap_or(0)))
}

fn main() {
    let n_children = env_usize("HEADROOM_BENCH_CHILDREN", 1000);
    let n_kernels = env_usize("HEADROOM_BENCH_KERNELS", 50).min(n_children);
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this as a
    // smoke test, with a few iterations.
    let measuring = std::env::args().any(|a| a == "--bench");
    let default_iters = if measuring { 200 } else { 3 };
    let iters = env_usize("HEADROOM_BENCH_ITERS", default_iters).max(1);
    let samples = if measuring { 40 } else { 5 };

    let dir = tempfile::tempdir().expect("tempdir");
    let mut children = Children(Vec::with_capacity(n_children));
    for i in 0..n_kernels {
        let file = dir.path().join(format!("kernel-bench-{i}.json"));
        std::fs::write(&file, "{}\n").expect("connection file");
        children
            .0
            .push(spawn(Command::new("tail").arg("-f").arg(&file)));
    }
    for _ in n_kernels..n_children {
        children.0.push(spawn(Command::new("sleep").arg("3600")));
    }
    std::thread::sleep(Duration::from_millis(500));

    // A daemon's state after 40 samples, 250 ms apart (5 in a smoke test).
    let mut sampler = platform_sampler(
        &headroom::config::GpuConfig::default(),
        &headroom::config::LabelsConfig::default(),
    );
    let mut working = Working::new(Config::default());
    let mut state = working.initial_state(None, Timestamp::now());
    for _ in 0..samples {
        working.record(
            std::sync::Arc::new(sampler.sample().expect("sample")),
            &mut state,
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let snap = state.snapshot.clone().expect("a snapshot");
    let ml = snap.processes.iter().filter(|p| p.workload.is_ml()).count();

    let text = headroom::metrics::render(&state).expect("render");
    let series = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count();
    let process_series = text
        .lines()
        .filter(|l| l.starts_with("headroom_process_footprint_bytes{"))
        .count();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (_tx, rx) = tokio::sync::watch::channel(state.clone());
    let app = headroom::http::router(rx);
    let request = |uri: &str| {
        Request::get(uri)
            .header(header::HOST, "127.0.0.1:9717")
            .body(Body::empty())
            .expect("request")
    };
    let call = |uri: &str| -> usize {
        runtime.block_on(async {
            let res = app.clone().oneshot(request(uri)).await.expect("infallible");
            assert!(res.status().is_success(), "{uri}: {}", res.status());
            res.into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes()
                .len()
        })
    };
    let processes_bytes = call("/api/v1/processes");

    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        ("render", Vec::new()),
        ("GET /metrics", Vec::new()),
        ("GET /api/v1/processes", Vec::new()),
    ];
    for _ in 0..iters.min(20) {
        black_box(headroom::metrics::render(&state).expect("render"));
        black_box(call("/metrics"));
        black_box(call("/api/v1/processes"));
    }
    for _ in 0..iters {
        let t0 = cpu_time();
        black_box(headroom::metrics::render(&state).expect("render"));
        let t1 = cpu_time();
        black_box(call("/metrics"));
        let t2 = cpu_time();
        black_box(call("/api/v1/processes"));
        let t3 = cpu_time();
        rows[0].1.push((t1 - t0).as_secs_f64() * 1e6);
        rows[1].1.push((t2 - t1).as_secs_f64() * 1e6);
        rows[2].1.push((t3 - t2).as_secs_f64() * 1e6);
    }

    println!(
        "scrape_cost: {} processes sampled ({ml} ML), {series} series in /metrics \
         ({process_series} per-process footprint series, {} bytes), \
         /api/v1/processes {processes_bytes} bytes; {iters} iterations",
        snap.processes.len(),
        text.len()
    );
    println!();
    println!("| what | CPU µs, median | p90 | p99 |");
    println!("|---|---:|---:|---:|");
    for (name, v) in &rows {
        println!(
            "| {name} | {:.0} | {:.0} | {:.0} |",
            quantile(v, 0.5),
            quantile(v, 0.9),
            quantile(v, 0.99)
        );
    }
    match node_exporter(iters.min(100)) {
        Some((micros, bytes)) => println!(
            "| node_exporter scrape (its own CPU, mean; {bytes} bytes) | {micros:.0} | | |"
        ),
        None => println!(
            "(node_exporter not installed: `apt-get install prometheus-node-exporter` adds a comparison row)"
        ),
    }
}
