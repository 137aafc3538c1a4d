//! What notebook names and post-mortems add to the daemon, per row:
//!
//! - **annotate**: `jupyter::apply` on a real snapshot of this machine,
//!   padded to 1000 processes with copies, in which 20 processes are made
//!   Jupyter kernels with a mapped id: the work the daemon loop does on every
//!   sample (no I/O).
//! - **observe**: `PostMortems::observe` on the same snapshot, steady state
//!   (nothing ended) after a minute of history in which the kernels grew:
//!   also on every sample.
//! - **poll**: `ExitCauses::poll` with nothing new in `/dev/kmsg` and no
//!   suspects: the read that returns `EAGAIN` and, as root, the listing of
//!   the watched kernels' threads (`/proc/[pid]/task`), on the sampler's
//!   blocking thread after every sample (without root: the no-op).
//! - **lookup**: `jupyter::look_up` of one runtime directory with one server
//!   (a loopback HTTP server answering 20 sessions): what the lookup thread
//!   does when a new kernel appears, never on the sample path.
//!
//! Run: `cargo bench --bench notebook_cost`. `HEADROOM_BENCH_ITERS` overrides
//! the 2000 iterations per row (lookup: a tenth of them).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use headroom::config::GpuConfig;
use headroom::history::History;
use headroom::jupyter::{Kernel, Mapped, apply, look_up};
use headroom::model::WorkloadKind;
use headroom::postmortem::PostMortems;
use headroom::sample::{Observed, exit_causes, platform_sampler};

fn main() {
    let iters: usize = std::env::var("HEADROOM_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut snap = platform_sampler(
        &GpuConfig::default(),
        &headroom::config::LabelsConfig::default(),
    )
    .sample()
    .expect("sample this machine");
    // A busy desktop has about a thousand processes: copies of this
    // machine's, under pids no process has, make up the difference.
    let real = snap.processes.clone();
    let mut next_pid = u32::MAX - 100_000;
    while snap.processes.len() < 1000 {
        for p in &real {
            let mut copy = p.clone();
            copy.id.pid = next_pid;
            next_pid += 1;
            snap.processes.push(copy);
        }
    }
    snap.processes.truncate(1000);
    // Only the 20 made below are kernels (this machine may run real ones).
    for p in &mut snap.processes {
        p.workload.kernel_id = None;
    }
    let mut map = HashMap::new();
    for (i, p) in snap.processes.iter_mut().take(20).enumerate() {
        let id = format!("{i:08x}-0000-4000-8000-000000000000");
        p.workload.kind = WorkloadKind::Jupyter;
        p.workload.kernel_id = Some(id.clone());
        map.insert(
            Kernel::new(id, p.uid),
            Mapped {
                notebook: format!("experiments/run-{i}.ipynb"),
                kernel_name: Some("python3".into()),
                owner_uid: p.uid,
                server: "http://127.0.0.1:8888/".into(),
            },
        );
    }
    println!(
        "{} processes in the snapshot, 20 of them kernels",
        snap.processes.len()
    );

    let annotate = time(iters, || {
        let mut s = snap.clone();
        let started = Instant::now();
        let (present, unknown) = apply(&map, &mut s);
        let took = started.elapsed();
        assert!(!unknown && present.len() == 20);
        took
    });

    // 60 samples a second apart, the kernels growing: growth rates come
    // from full windows.
    let mut history = History::new(Duration::from_secs(900));
    let mut pm = PostMortems::default();
    for t in 0..60u64 {
        let mut s = snap.clone();
        s.taken_at = headroom::model::Timestamp(snap.taken_at.0 + t * 1000);
        for p in s.processes.iter_mut().take(20) {
            p.footprint += t << 20;
        }
        history.record(&s);
        pm.observe(&s, &history, Observed::default(), "none");
        snap = s;
    }
    let observe = time(iters, || {
        let started = Instant::now();
        let ended = pm.observe(&snap, &history, Observed::default(), "none");
        let took = started.elapsed();
        assert!(ended.is_empty());
        took
    });

    let (mut causes, note) = exit_causes();
    println!("exit causes: {note:?}");
    // With the kernels the post-mortems watch: as root, their threads are
    // listed each poll to tell which process a crashing thread belongs to.
    let tracked = pm.tracked();
    let poll = time(iters, || {
        let started = Instant::now();
        let _ = causes.poll(&snap, &tracked, &[]);
        started.elapsed()
    });

    let dir = tempfile::tempdir().expect("tempdir");
    serve_sessions(dir.path(), 20);
    let lookup = time((iters / 10).max(1), || {
        let started = Instant::now();
        let (found, problems) = look_up(
            &[dir.path().to_path_buf()],
            Some(headroom::os::this_process::effective_uid()),
            Duration::from_secs(1),
        );
        let took = started.elapsed();
        // Problems with no message are "cleared" markers: this file and
        // its server are fine again.
        assert_eq!(found.len(), 20, "{problems:?}");
        assert!(
            problems.iter().all(|p| p.message.is_empty()),
            "{problems:?}"
        );
        took
    });

    println!("| row | median | p99 | max |");
    println!("|---|---|---|---|");
    for (name, t) in [
        ("annotate", annotate),
        ("observe", observe),
        ("poll", poll),
        ("lookup", lookup),
    ] {
        println!("| {name} | {} | {} | {} |", us(t.0), us(t.1), us(t.2));
    }
}

/// Median, 99th percentile and maximum of `n` runs of `f`.
fn time(n: usize, mut f: impl FnMut() -> Duration) -> (Duration, Duration, Duration) {
    let mut v: Vec<Duration> = (0..n).map(|_| f()).collect();
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99), v[v.len() - 1])
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// A loopback server answering `n` sessions, and its runtime file in `dir`.
fn serve_sessions(dir: &std::path::Path, n: usize) {
    let sessions: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"id": "s{i}", "path": "experiments/run-{i}.ipynb", "type": "notebook", "kernel": {{"id": "{i:08x}-0000-4000-8000-000000000000", "name": "python3", "execution_state": "idle", "connections": 1}}, "notebook": {{"path": "experiments/run-{i}.ipynb"}}}}"#
            )
        })
        .collect();
    let body = format!("[{}]", sessions.join(", "));
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                line.clear();
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    // The server is this process: the token goes only to a live pid of the
    // file's owner that holds the port.
    let pid = std::process::id();
    std::fs::write(
        dir.join(format!("jpserver-{port}.json")),
        format!(
            r#"{{"url": "http://127.0.0.1:{port}/", "token": "t", "pid": {pid}, "root_dir": "/tmp"}}"#
        ),
    )
    .expect("runtime file");
}
