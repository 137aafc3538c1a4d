//! What one system probe costs, against the bare read of `/proc/meminfo`.
//!
//! The daemon probes the machine-wide figures between samples while a
//! rule's system condition comes near, up to every 20 ms, so a probe must
//! cost microseconds. Each row is timed over a batch of reads, in CPU time
//! of this process (user + system: the kernel renders `/proc` files on our
//! time), batches interleaved so that drift hits every row alike; the table
//! gives the median per read:
//!
//! - **bare**: `std::fs::read("/proc/meminfo")`: open, read, close, and a
//!   new buffer each time. What a simple poller such as earlyoom does.
//! - **reopen**: open, read into a reused buffer, close.
//! - **pread**: `/proc/meminfo` kept open and re-read with `pread` at offset
//!   0 into a reused buffer (what the probe does), no parsing.
//! - **probe**: `LinuxProbe::read(false)`: the pread and the parse.
//! - **probe+psi**: `LinuxProbe::read(true)`: also `/proc/pressure/memory`.
//! - **vmstat**: `/proc/vmstat` kept open and re-read, for comparison: the
//!   file the probe leaves out.
//!
//! Run: `cargo bench --bench probe_cost`. `HEADROOM_BENCH_ITERS` sets the
//! number of batches (default 30) and `HEADROOM_BENCH_BATCH` the reads per
//! batch (default 2000).

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("probe_cost measures the Linux /proc probe; nothing to do on this OS");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::common::{Row, env_usize, quantile, time_interleaved};
    use std::fs::File;
    use std::hint::black_box;
    use std::io::Read;
    use std::os::unix::fs::FileExt;
    use std::path::Path;

    use headroom::os::linux::probe::LinuxProbe;
    use headroom::sample::probe::Probe;

    pub fn main() {
        if !std::env::args().any(|a| a == "--bench") {
            println!("probe_cost: run with `cargo bench --bench probe_cost`");
            return;
        }
        let iters = env_usize("HEADROOM_BENCH_ITERS", 30).max(1);
        let batch = env_usize("HEADROOM_BENCH_BATCH", 2000).max(1);

        let mut buf = vec![0u8; 16 * 1024];
        let mut buf2 = vec![0u8; 16 * 1024];
        let mut buf3 = vec![0u8; 16 * 1024];
        let kept = File::open("/proc/meminfo").expect("open /proc/meminfo");
        let vmstat = File::open("/proc/vmstat").expect("open /proc/vmstat");
        let mut probe = LinuxProbe::open(Path::new("/proc")).expect("probe");
        let mut probe_psi = LinuxProbe::open(Path::new("/proc")).expect("probe");
        let mut rows = vec![
            Row::new("bare", "std::fs::read(\"/proc/meminfo\")", || {
                black_box(std::fs::read("/proc/meminfo").expect("read"));
            }),
            Row::new("reopen", "open + read (reused buffer) + close", move || {
                let mut f = File::open("/proc/meminfo").expect("open");
                black_box(f.read(&mut buf).expect("read"));
            }),
            Row::new("pread", "kept open, pread at 0", move || {
                black_box(kept.read_at(&mut buf2, 0).expect("pread"));
            }),
            Row::new(
                "probe",
                "LinuxProbe::read(false): pread + parse",
                move || {
                    black_box(probe.read(false).expect("probe"));
                },
            ),
            Row::new("probe+psi", "LinuxProbe::read(true): + PSI", move || {
                black_box(probe_psi.read(true).expect("probe"));
            }),
            Row::new("vmstat", "/proc/vmstat kept open, pread at 0", move || {
                let mut at = 0;
                loop {
                    let n = vmstat.read_at(&mut buf3, 0).expect("pread");
                    at += n;
                    if n < buf3.len() {
                        break;
                    }
                    buf3.resize(buf3.len() * 2, 0);
                }
                black_box(at);
            }),
        ];

        time_interleaved(&mut rows, iters, batch);

        let bare = quantile(&rows[0].micros, 0.5);
        println!("probe_cost: {iters} batches of {batch} reads; CPU time per read (user + system)");
        println!();
        println!(
            "| {:<9} | {:<40} | {:>9} | {:>9} | {:>7} |",
            "", "what", "median µs", "p90 µs", "× bare"
        );
        println!(
            "|{:-<11}|{:-<42}|{:->11}|{:->11}|{:->9}|",
            "", "", "", "", ""
        );
        for row in &rows {
            let m = quantile(&row.micros, 0.5);
            println!(
                "| {:<9} | {:<40} | {:>9.2} | {:>9.2} | {:>6.2}× |",
                row.name,
                row.what,
                m,
                quantile(&row.micros, 0.9),
                m / bare
            );
        }
        let probe = quantile(&rows[3].micros, 0.5);
        println!();
        println!(
            "probe / bare read = {:.2}×; 50 probes a second (every 20 ms) cost {:.2} % of a core",
            probe / bare,
            probe * 50.0 / 1e6 * 100.0
        );
    }
}
