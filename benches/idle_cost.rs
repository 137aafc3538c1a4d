//! What the daemon costs on an idle machine with many processes: CPU time of
//! a running `headroom run` over a minute, on the embedded default config
//! (its three rules, the default 1 s interval), with 1000 idle processes.
//!
//! Spawns 1000 `sleep 3600` (killed and reaped at the end, also on panic),
//! starts the daemon built with this bench (and, if `HEADROOM_BEFORE` names
//! another `headroom` binary, that one too, side by side, so both see the
//! same machine), lets them settle, and reads each one's utime + stime from
//! `/proc/PID/stat` before and after the measured window. In the same
//! window a thread of this bench does the floor once a second: list `/proc`
//! and open, read and close every pid's `statm` (no sampler that reads every
//! process each tick can do less), timed with its thread CPU clock. The
//! table gives each as a share of one core and as a ratio to the floor.
//!
//! Run: `cargo bench --bench idle_cost` (or `scripts/bench-idle.sh`, which
//! also builds the previous version). `HEADROOM_BENCH_CHILDREN` (default
//! 1000) and `HEADROOM_BENCH_SECONDS` (default 60) change the setup.

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("idle_cost reads /proc/PID/stat; nothing to do on this OS");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::common::{Children, clock_ticks_per_second, env_usize};
    use std::fs::File;
    use std::hint::black_box;
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc::channel;
    use std::time::{Duration, Instant};

    const HEADROOM: &str = env!("CARGO_BIN_EXE_headroom");

    /// utime + stime of a process, in clock ticks (proc(5) fields 14, 15).
    fn cpu_ticks(pid: u32) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        Some(utime + stime)
    }

    /// CPU time of the calling thread.
    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec that outlives the call.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
        Duration::new(
            u64::try_from(ts.tv_sec).unwrap_or(0),
            u32::try_from(ts.tv_nsec).unwrap_or(0),
        )
    }

    /// List `/proc` and open, read and close every pid's `statm`.
    fn floor_pass(path: &mut PathBuf, buf: &mut [u8]) -> usize {
        let mut n = 0;
        for entry in std::fs::read_dir("/proc").expect("list /proc").flatten() {
            let name = entry.file_name();
            let name = name.as_bytes();
            if name.is_empty() || !name.iter().all(u8::is_ascii_digit) {
                continue;
            }
            let s = path.as_mut_os_string();
            s.clear();
            s.push("/proc/");
            s.push(std::ffi::OsStr::from_bytes(name));
            s.push("/statm");
            if let Ok(mut f) = File::open(&*path) {
                n += f.read(buf).unwrap_or(0);
            }
        }
        n
    }

    /// A daemon on the embedded default config, journaling into `dir`.
    struct Daemon {
        label: String,
        child: Child,
    }

    impl Drop for Daemon {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn start(label: &str, binary: &Path, dir: &Path) -> Daemon {
        let printed = Command::new(binary)
            .arg("print-config")
            .output()
            .expect("headroom print-config");
        let journal = dir.join(format!("{label}.jsonl"));
        let config = String::from_utf8_lossy(&printed.stdout).replacen(
            "[daemon]\n",
            &format!("[daemon]\njournal = \"{}\"\n", journal.display()),
            1,
        );
        let cfg = dir.join(format!("{label}.toml"));
        std::fs::write(&cfg, config).expect("write config");
        let mut child = Command::new(binary)
            .args(["run", "--listen", "127.0.0.1:0", "--config"])
            .arg(&cfg)
            .env("HEADROOM_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn headroom run");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("first sample:") {
                    let _ = tx.send(line);
                }
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{label}: no first sample within 30 s"));
        println!(
            "{label}: {}",
            first.split("first sample: ").nth(1).unwrap_or("")
        );
        Daemon {
            label: label.to_string(),
            child,
        }
    }

    pub fn main() {
        if !std::env::args().any(|a| a == "--bench") {
            println!("idle_cost: run with `cargo bench --bench idle_cost`");
            return;
        }
        let n_children = env_usize("HEADROOM_BENCH_CHILDREN", 1000);
        let seconds = env_usize("HEADROOM_BENCH_SECONDS", 60).max(1) as u64;
        let hz = clock_ticks_per_second().expect("clock ticks per second") as f64;

        let mut children = Children(Vec::with_capacity(n_children));
        for _ in 0..n_children {
            let child = Command::new("sleep")
                .arg("3600")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn sleep");
            children.0.push(child);
        }
        std::thread::sleep(Duration::from_millis(500));

        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
        let mut daemons = vec![start("this build", Path::new(HEADROOM), dir.path())];
        if let Some(before) = std::env::var_os("HEADROOM_BEFORE") {
            daemons.push(start("before", Path::new(&before), dir.path()));
        }
        // Settle: the first samples read every process in full.
        std::thread::sleep(Duration::from_secs(5));

        let before: Vec<Option<u64>> = daemons.iter().map(|d| cpu_ticks(d.child.id())).collect();
        let t0 = Instant::now();
        let floor = std::thread::spawn(move || {
            let mut path = PathBuf::with_capacity(64);
            let mut buf = vec![0u8; 4096];
            let mut spent = Duration::ZERO;
            for i in 0..seconds {
                let c0 = thread_cpu();
                black_box(floor_pass(&mut path, &mut buf));
                spent += thread_cpu().saturating_sub(c0);
                let next = t0 + Duration::from_secs(i + 1);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            spent
        });
        let floor = floor.join().expect("floor thread");
        let wall = t0.elapsed().as_secs_f64();
        let after: Vec<Option<u64>> = daemons.iter().map(|d| cpu_ticks(d.child.id())).collect();

        let floor_share = floor.as_secs_f64() / wall * 100.0;
        println!();
        println!(
            "idle_cost: {n_children} idle children, {wall:.0} s window, default config (interval 1s)"
        );
        println!();
        println!("| process | CPU s | % of one core | × floor |");
        println!("|---|---|---|---|");
        println!(
            "| floor (readdir + statm of every pid, once a second) | {:.3} | {:.3} % | 1.00× |",
            floor.as_secs_f64(),
            floor_share
        );
        for (i, d) in daemons.iter().enumerate() {
            match (before[i], after[i]) {
                (Some(b), Some(a)) => {
                    let cpu = (a - b) as f64 / hz;
                    let share = cpu / wall * 100.0;
                    println!(
                        "| headroom run ({}) | {:.2} | {:.3} % | {:.2}× |",
                        d.label,
                        cpu,
                        share,
                        share / floor_share
                    );
                }
                _ => println!("| headroom run ({}) | exited | | |", d.label),
            }
        }
        println!();
        println!("goal: ≤ 0.25 % of one core for this build");
        drop(daemons);
        drop(children);
    }
}
