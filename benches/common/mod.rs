//! Shared by the benchmarks: CPU time of this process, spawned children that
//! are always reaped, environment knobs and order statistics.

#![allow(dead_code, reason = "each benchmark uses a different part")]

/// The `headroom-hog` program, built on first use, as the tests find it.
#[path = "../../tests/support/hog_program.rs"]
pub mod hog_program;

use std::process::Child;
use std::time::Duration;

/// Kills and reaps the spawned processes when dropped, panics included.
pub struct Children(pub Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

/// CPU time consumed by this process so far, all threads, user + system.
pub fn cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID, "CLOCK_PROCESS_CPUTIME_ID")
}

/// CPU time consumed by the calling thread so far, user + system.
pub fn thread_cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID, "CLOCK_THREAD_CPUTIME_ID")
}

/// The CPU-time clock `id` (named `name` for the panic) read now.
fn cpu_clock(id: libc::clockid_t, name: &str) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call;
    // the process and thread CPU-time clocks are supported on Linux and
    // macOS.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({name}) failed");
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of the CPU
/// times in `/proc/PID/stat`.
pub fn clock_ticks_per_second() -> Option<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|h| *h > 0)
}

/// An integer from the environment, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `q` quantile (0–1, nearest rank) of `v`; NaN when empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i]
}

/// The median of `v` (the mean of the middle two for an even count); NaN
/// when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One contender of a benchmark timed in CPU time per call.
pub struct Row {
    pub name: &'static str,
    pub what: &'static str,
    pub run: Box<dyn FnMut()>,
    /// CPU µs per call, one figure per batch.
    pub micros: Vec<f64>,
}

impl Row {
    pub fn new(name: &'static str, what: &'static str, run: impl FnMut() + 'static) -> Self {
        Self {
            name,
            what,
            run: Box::new(run),
            micros: Vec::new(),
        }
    }

    /// The median CPU µs per call.
    pub fn median(&self) -> f64 {
        quantile(&self.micros, 0.5)
    }
}

/// Time every row: one warm-up batch each, then `iters` rounds in which
/// every row runs `batch` calls in turn, so that drift in the machine's
/// load hits every row alike.
pub fn time_interleaved(rows: &mut [Row], iters: usize, batch: usize) {
    for row in rows.iter_mut() {
        for _ in 0..batch {
            (row.run)();
        }
    }
    for _ in 0..iters {
        for row in rows.iter_mut() {
            let t0 = cpu_time();
            for _ in 0..batch {
                (row.run)();
            }
            let spent = cpu_time().saturating_sub(t0);
            row.micros.push(spent.as_secs_f64() * 1e6 / batch as f64);
        }
    }
}

/// Print `rows` as a table of median and p90 CPU µs per call, each row's
/// median divided by the first row's (the floor), the "what" column
/// `what_width` characters wide.
pub fn print_against_floor(rows: &[Row], what_width: usize) {
    println!(
        "| {:<8} | {:<what_width$} | {:>10} | {:>10} | {:>9} |",
        "row", "what", "median µs", "p90 µs", "÷ floor"
    );
    println!(
        "|{:-<10}|{:-<w$}|{:->12}|{:->12}|{:->11}|",
        "",
        "",
        "",
        "",
        "",
        w = what_width + 2
    );
    let floor = rows[0].median();
    for row in rows {
        println!(
            "| {:<8} | {:<what_width$} | {:>10.1} | {:>10.1} | {:>8.3}× |",
            row.name,
            row.what,
            row.median(),
            quantile(&row.micros, 0.9),
            row.median() / floor
        );
    }
}
