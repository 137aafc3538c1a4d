//! What one `Actuator::execute` of a signal step costs in wall time: every
//! safety check (headroom's own parent chain, pidfd, start time, kernel-thread
//! flag, `SigCgt`) plus the delivery, against a real `headroom-hog` that
//! catches SIGUSR1. The daemon loop calls `execute` inline, so this is the
//! time a decision holds up the loop.
//!
//! Rows, interleaved so that drift hits them alike:
//! - **deliver**: SIGUSR1 with `require_handler`, sent through the pidfd.
//! - **dry run**: the same decision as a dry run: every check, no delivery.
//! - **gone**: a decision for a pid that has exited (the cheapest refusal).
//!
//! Run: `cargo bench --bench act_cost` (it builds the `headroom-hog`
//! example first if it is not fresh). `HEADROOM_BENCH_ITERS` overrides the
//! 5000 iterations per row.

mod common;

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use headroom::act::{Actuator, ActuatorOptions, identity};
use headroom::event::ProcessRef;
use headroom::model::WorkloadKind;
use headroom::policy::{Action, Decision, Reach, SignalName};

fn main() {
    let iters: usize = std::env::var("HEADROOM_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let hog_path = common::hog_program::hog_path();
    let mut hog = Command::new(hog_path)
        .args(["--max", "1MiB", "--catch", "USR1"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", hog_path.display()));
    // Wait for its handler to be installed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !identity::catches_signal(hog.id(), libc_sigusr1()).unwrap_or(false) {
        assert!(Instant::now() < deadline, "the hog never caught SIGUSR1");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut gone = Command::new("true").spawn().expect("run true");
    let gone_ref = process(gone.id());
    gone.wait().expect("reap true");

    let deliver = decision(process(hog.id()), false);
    let dry = decision(process(hog.id()), true);
    let gone_d = decision(gone_ref, false);

    let (tx, rx) = mpsc::channel();
    let mut act = Actuator::new(ActuatorOptions::default(), tx);
    let rows: [(&str, &Decision); 3] =
        [("deliver", &deliver), ("dry run", &dry), ("gone", &gone_d)];
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(iters); rows.len()];
    for round in 0..iters + 100 {
        for (i, (_, d)) in rows.iter().enumerate() {
            let began = Instant::now();
            act.execute(d);
            let took = began.elapsed();
            if round >= 100 {
                times[i].push(took);
            }
        }
        rx.try_iter().for_each(drop);
    }
    let _ = hog.kill();
    let _ = hog.wait();

    println!("{iters} iterations per row (after 100 warm-up rounds), wall time per execute():");
    println!(
        "{:<8} {:>10} {:>10} {:>10}",
        "row", "median µs", "p90 µs", "p99 µs"
    );
    for ((name, _), t) in rows.iter().zip(&mut times) {
        t.sort_unstable();
        let q = |p: f64| t[((t.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
        println!(
            "{name:<8} {:>10.1} {:>10.1} {:>10.1}",
            q(0.5),
            q(0.9),
            q(0.99)
        );
    }
}

fn libc_sigusr1() -> i32 {
    SignalName::Usr1.number()
}

fn process(pid: u32) -> ProcessRef {
    ProcessRef {
        pid,
        start: identity::current_start(pid)
            .ok()
            .flatten()
            .expect("the process exists"),
        name: "headroom-hog".into(),
        user: None,
        uid: None,
        workload: WorkloadKind::Other,
        footprint: 1 << 20,
        kernel_id: None,
        notebook: None,
        labels: None,
    }
}

fn decision(process: ProcessRef, dry_run: bool) -> Decision {
    Decision {
        rule: "bench".into(),
        process,
        step: 0,
        action: Action::Signal {
            signal: SignalName::Usr1,
            require_handler: true,
            process_group: false,
        },
        dry_run,
        replayed: false,
        limit: "footprint > 0".into(),
        reason: "benchmark".into(),
        reach: Reach::own_user(headroom::os::this_process::effective_uid()),
    }
}
