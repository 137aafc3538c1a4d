//! How fast a machine-wide rule reacts, against earlyoom on the same
//! machine in the same run.
//!
//! **Memory.** A `headroom-hog` (named `bench-hog`) grows as fast as the
//! machine lets it (`HEADROOM_BENCH_RATE`, default `max`). The threshold is
//! what is available when the run starts less `HEADROOM_BENCH_MARGIN_MIB`
//! (default 3072): earlyoom runs with `-M <threshold KiB> -s 100 --prefer
//! '^bench-hog$' -r 0` (act on memory alone, prefer the hog); headroom with
//! the embedded default `[daemon]` (1 s interval) and one rule:
//! `available_below = "<threshold>"`, `select = "largest"` among processes
//! named `bench-hog`, action SIGTERM. Both send SIGTERM, on which the hog
//! reports what it had allocated and exits. An observer thread, at
//! `SCHED_FIFO` priority 50 when the bench may (else nice -20), reads
//! `/proc/meminfo` and the hog's `statm` and `status` every millisecond;
//! the crossing is the first reading below the threshold, the signal the
//! first reading that finds SIGTERM pending for the hog (`SigPnd` or
//! `ShdPnd`), or the hog's signal line if that comes first. So neither end
//! waits for the hog to get a CPU on a saturated machine. Reported per
//! run: the time from the crossing to the signal, and the hog's growth in
//! that time (its anonymous memory at the signal less that at the
//! crossing). A run in which the hog's growth falls short of the margin
//! by more than 512 MiB (other processes on the machine took memory
//! meanwhile, and made the crossing with it) is shown and discarded. Contenders alternate until each has
//! `HEADROOM_BENCH_RUNS` valid runs (default 3).
//!
//! **Swap.** Only with swap and `HEADROOM_BENCH_SWAP=1` (it pushes memory
//! into swap; `scripts/bench-earlyoom.sh` with `HEADROOM_BENCH_SWAPFILE=4G`
//! provides the swap and sets it). A ballast, a second `headroom-hog` named
//! `bench-ballast` with its memory locked (`--lock`), takes all but
//! `HEADROOM_BENCH_LEFT_MIB` (default 1536) of the available memory for the
//! swap and thrash scenarios, so that the hog's growth goes to swap once it
//! has filled what is left. Threshold = swap used now + 256 MiB; earlyoom
//! `-m 99 -S <free KiB> --avoid '^bench-ballast$'` (memory always low
//! enough: swap decides), headroom `swap_used_above`. The hog's growth is its
//! anonymous memory resident and swapped (`statm` and `VmSwap`). The
//! contender is stopped as soon as the hog's signal arrives: the threshold
//! stays crossed after the hog is gone (other processes' pages stay in
//! swap), and earlyoom would go on to its next victim.
//!
//! **Thrash.** The same ballast; the hog (`--thrash`: after each new block
//! it writes one of the blocks it holds again, so that its pages go out to
//! swap and come back in) at full speed into swap, past swap used now +
//! `HEADROOM_BENCH_THRASH_MIB` (default 1024). Reported besides the
//! reaction: how late headroom's loop woke for its scheduled samples and
//! probes meanwhile (p50 and p99, from the `headroom_wake_lateness_seconds`
//! histogram scraped before the hog starts and when the signal arrives: the
//! upper bound of the bucket each quantile falls in), and the wakes counted.
//!
//! Every child dies with the bench (`PR_SET_PDEATHSIG`), the bench with
//! its parent, the ballast also by itself after 15 minutes (`--hold`), and
//! every run ends within 60 s.
//!
//! **PSI.** headroom alone (earlyoom 1.7 reads no pressure): eight Python
//! processes with `bench-thrash` among their arguments read random pages of
//! a 512 MiB file in a memory cgroup (v1 `memory.limit_in_bytes` or v2
//! `memory.max`) of 96 MiB, stalling on refaults and reclaim; the rule is
//! `pressure = "warn"`. Reported: the time from headroom's log line of the
//! kernel's notification (its PSI trigger) to the signal's arrival, the same
//! by the daemon's own log timestamps up to the signal sent, and the time
//! from the thrashers' start (which includes the kernel's own wait for the
//! trigger's stall threshold). Needs a writable memory cgroup and python3;
//! skipped (with the reason) otherwise.
//!
//! **A busy machine.** `HEADROOM_BENCH_LOAD` puts a load on the machine for
//! the whole run, comma-separated: `cpu` (4 CPU-bound `sh` loops and about
//! 40 short-lived processes a second, `true` spawned every 25 ms), `idle=N`
//! (N sleeping processes), `python=N` (N sleeping processes named
//! `python3`: `sleep` through a link of that name, which any user can
//! make, and which the sampler takes for Python work). The load's
//! processes are started before the first run and stopped after the last.
//!
//! Run: `scripts/bench-earlyoom.sh` (installs earlyoom) or `cargo bench
//! --bench system_reaction`; `EARLYOOM` names the earlyoom binary (default:
//! found on PATH; without it only headroom runs); `HEADROOM_BENCH_ONLY` =
//! `memory`, `swap`, `thrash` or `psi` (or several, comma-separated) runs
//! only those scenarios. `HEADROOM_BENCH_DEBUG=1` prints, per run, the
//! contender's log and the machine's figures around the crossing;
//! `HEADROOM_BENCH_DAEMON_LOG` sets headroom's log filter (default `info`;
//! `info,headroom=trace` shows every probe).

mod common;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("system_reaction compares with earlyoom on Linux; nothing to do on this OS");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::common::{env_usize, median};
    use std::fs::File;
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::fs::FileExt;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::mpsc::{Receiver, channel};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    const HEADROOM: &str = env!("CARGO_BIN_EXE_headroom");
    const MIB: u64 = 1 << 20;

    /// The load `HEADROOM_BENCH_LOAD` asks for, running until dropped.
    struct Load {
        children: Vec<Child>,
        churn: Option<(Arc<AtomicBool>, std::thread::JoinHandle<u64>)>,
        words: Vec<String>,
    }

    impl Load {
        fn start(spec: &str, dir: &Path) -> Result<Load, String> {
            let mut load = Load {
                children: Vec::new(),
                churn: None,
                words: Vec::new(),
            };
            let sleeping = |program: &Path, n: usize, load: &mut Load| -> Result<(), String> {
                for i in 0..n {
                    let child = dies_with_bench(Command::new(program))
                        .arg("3600")
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .map_err(|e| format!("spawn {} #{i}: {e}", program.display()))?;
                    load.children.push(child);
                }
                Ok(())
            };
            for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (name, count) = match part.split_once('=') {
                    Some((n, c)) => (
                        n,
                        c.parse::<usize>()
                            .map_err(|_| format!("HEADROOM_BENCH_LOAD: {part:?}: a count"))?,
                    ),
                    None => (part, 0),
                };
                match name {
                    "cpu" => {
                        for _ in 0..4 {
                            let child = dies_with_bench(Command::new("sh"))
                                .args(["-c", "while :; do :; done"])
                                .stdin(Stdio::null())
                                .spawn()
                                .map_err(|e| format!("spawn a CPU burner: {e}"))?;
                            load.children.push(child);
                        }
                        let stop = Arc::new(AtomicBool::new(false));
                        let stopping = Arc::clone(&stop);
                        let thread = std::thread::spawn(move || {
                            let mut spawned = 0u64;
                            while !stopping.load(Ordering::Relaxed) {
                                if let Ok(mut c) = Command::new("true").spawn() {
                                    let _ = c.wait();
                                    spawned += 1;
                                }
                                std::thread::sleep(Duration::from_millis(25));
                            }
                            spawned
                        });
                        load.churn = Some((stop, thread));
                        load.words.push(
                            "4 CPU-bound processes and about 40 short-lived processes a second"
                                .into(),
                        );
                    }
                    "idle" => {
                        sleeping(Path::new("sleep"), count, &mut load)?;
                        load.words.push(format!("{count} idle processes"));
                    }
                    "python" => {
                        let sleep = ["/usr/bin/sleep", "/bin/sleep"]
                            .into_iter()
                            .map(Path::new)
                            .find(|p| p.is_file())
                            .ok_or("no sleep in /usr/bin or /bin")?;
                        let link = dir.join("python3");
                        let _ = std::fs::remove_file(&link);
                        std::os::unix::fs::symlink(sleep, &link)
                            .map_err(|e| format!("link {}: {e}", link.display()))?;
                        sleeping(&link, count, &mut load)?;
                        load.words
                            .push(format!("{count} sleeping processes named python3"));
                    }
                    other => return Err(format!("HEADROOM_BENCH_LOAD: unknown load {other:?}")),
                }
            }
            // Let the sleepers finish exec.
            std::thread::sleep(Duration::from_secs(2));
            Ok(load)
        }

        fn describe(&self) -> String {
            if self.words.is_empty() {
                "an idle machine".into()
            } else {
                self.words.join(", ")
            }
        }
    }

    /// `cmd`, set to be killed when the thread that spawns it (the bench's
    /// main thread) ends, so that a bench killed outright leaves no load.
    fn dies_with_bench(mut cmd: Command) -> Command {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe and touches no memory of the
        // parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }

    impl Drop for Load {
        fn drop(&mut self) {
            if let Some((stop, thread)) = self.churn.take() {
                stop.store(true, Ordering::Relaxed);
                let _ = thread.join();
            }
            for c in &mut self.children {
                let _ = c.kill();
            }
            for c in &mut self.children {
                let _ = c.wait();
            }
        }
    }

    /// A child whose output lines arrive, with the time each was read.
    struct Proc {
        child: Child,
        lines: Receiver<(Instant, String)>,
    }

    impl Proc {
        /// Spawn `cmd` as the leader of a process group of its own, which
        /// is killed as a whole when dropped (children included).
        fn spawn(mut cmd: Command) -> Proc {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe and touches no memory of
            // the parent; it only asks the kernel to kill this child when
            // the thread that spawned it (the bench's main thread) ends, so
            // that a bench killed outright leaves no ballast behind.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let mut child = cmd
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
            let (tx, lines) = channel();
            for stream in [
                child
                    .stdout
                    .take()
                    .map(|s| Box::new(s) as Box<dyn Read + Send>),
                child
                    .stderr
                    .take()
                    .map(|s| Box::new(s) as Box<dyn Read + Send>),
            ]
            .into_iter()
            .flatten()
            {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for line in BufReader::new(stream).lines().map_while(Result::ok) {
                        if tx.send((Instant::now(), line)).is_err() {
                            break;
                        }
                    }
                });
            }
            Proc { child, lines }
        }

        fn wait_for(&self, needle: &str, within: Duration) -> Option<(Instant, String)> {
            let deadline = Instant::now() + within;
            while Instant::now() < deadline {
                if let Ok((at, line)) = self.lines.recv_timeout(Duration::from_millis(20))
                    && line.contains(needle)
                {
                    return Some((at, line));
                }
            }
            None
        }
    }

    impl Drop for Proc {
        fn drop(&mut self) {
            if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
                // SAFETY: kill has no memory-safety preconditions; the group
                // is the one this bench created for the child, which is not
                // reaped yet.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
            let _ = self.child.wait();
        }
    }

    /// `key:  N kB` of `/proc/meminfo`, bytes.
    fn meminfo(text: &str, key: &str) -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    }

    fn read_meminfo() -> String {
        std::fs::read_to_string("/proc/meminfo").expect("read /proc/meminfo")
    }

    /// `some total=` of `/proc/pressure/memory`, microseconds.
    fn psi_some_total(text: &str) -> Option<u64> {
        text.lines()
            .find(|l| l.starts_with("some "))?
            .split_whitespace()
            .find_map(|f| f.strip_prefix("total="))?
            .parse()
            .ok()
    }

    /// One reading of the monitor.
    #[derive(Clone, Copy)]
    struct Point {
        at: Instant,
        available: u64,
        swap_used: u64,
        /// Anonymous memory of the watched process, bytes: resident, plus
        /// swapped where the monitor reads swap.
        anon: Option<u64>,
        /// A SIGTERM is pending for the watched process (`SigPnd` or
        /// `ShdPnd` of its `status`): sent, not yet handled.
        term_pending: bool,
    }

    /// Whether `status` (of `/proc/PID/status`) shows SIGTERM pending, for
    /// the thread or the whole process.
    fn term_pending(status: &str) -> bool {
        const TERM: u64 = 1 << (libc::SIGTERM - 1);
        ["SigPnd:", "ShdPnd:"].iter().any(|key| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                .is_some_and(|mask| mask & TERM != 0)
        })
    }

    /// The monitor's thread to real-time priority (`SCHED_FIFO` 50), so
    /// that its 1 ms readings keep their pace on saturated cores, or else
    /// to nice -20; which one it got, for the report.
    fn observer_priority() -> &'static str {
        let param = libc::sched_param { sched_priority: 50 };
        // SAFETY: sched_setscheduler with pid 0 changes the calling thread
        // only; `param` is a valid sched_param that outlives the call.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
            return "SCHED_FIFO 50";
        }
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        // SAFETY: setpriority on this thread's id changes this thread only.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -20) } == 0 {
            return "nice -20";
        }
        "the bench's own priority (neither SCHED_FIFO nor nice -20 allowed)"
    }

    /// Reads the machine's figures (and a process's `statm` and `status`)
    /// every millisecond until stopped, at a priority above everything
    /// else on the machine: the observer the crossing and the signal are
    /// stamped by, independent of both the contender and the hog.
    struct Monitor {
        stop: Arc<AtomicBool>,
        pid: Arc<AtomicU32>,
        points: Arc<Mutex<Vec<Point>>>,
        thread: Option<std::thread::JoinHandle<()>>,
        priority: Arc<Mutex<&'static str>>,
    }

    impl Monitor {
        /// With `swapped`, a process's swapped memory (`VmSwap` of its
        /// `status`) counts in its `anon` too.
        fn start(swapped: bool) -> Monitor {
            let stop = Arc::new(AtomicBool::new(false));
            let pid = Arc::new(AtomicU32::new(0));
            let points = Arc::new(Mutex::new(Vec::with_capacity(64 * 1024)));
            let priority = Arc::new(Mutex::new("unset"));
            let (s, p, pts) = (Arc::clone(&stop), Arc::clone(&pid), Arc::clone(&points));
            let prio = Arc::clone(&priority);
            let thread = std::thread::spawn(move || {
                if let Ok(mut got) = prio.lock() {
                    *got = observer_priority();
                }
                let page = 4096;
                let kept = File::open("/proc/meminfo").expect("open meminfo");
                let mut buf = vec![0u8; 8192];
                let mut watched: Option<(u32, File, Option<File>)> = None;
                while !s.load(Ordering::Relaxed) {
                    let at = Instant::now();
                    let n = kept.read_at(&mut buf, 0).unwrap_or(0);
                    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let available = meminfo(&text, "MemAvailable:");
                    let swap_used =
                        meminfo(&text, "SwapTotal:").saturating_sub(meminfo(&text, "SwapFree:"));
                    let want = p.load(Ordering::Relaxed);
                    if want != 0 && watched.as_ref().is_none_or(|(pid, _, _)| *pid != want) {
                        watched = File::open(format!("/proc/{want}/statm"))
                            .ok()
                            .map(|f| (want, f, File::open(format!("/proc/{want}/status")).ok()));
                    }
                    let mut term = false;
                    let anon = watched.as_ref().and_then(|(_, f, status)| {
                        let swap = match status {
                            Some(s) => {
                                let n = s.read_at(&mut buf, 0).ok()?;
                                let text = String::from_utf8_lossy(&buf[..n]);
                                term = term_pending(&text);
                                if swapped {
                                    meminfo(&text, "VmSwap:")
                                } else {
                                    0
                                }
                            }
                            None => 0,
                        };
                        let n = f.read_at(&mut buf, 0).ok()?;
                        let text = String::from_utf8_lossy(&buf[..n]);
                        let mut w = text.split_whitespace().skip(1);
                        let resident: u64 = w.next()?.parse().ok()?;
                        let shared: u64 = w.next()?.parse().ok()?;
                        Some(resident.saturating_sub(shared) * page + swap)
                    });
                    if let Ok(mut v) = pts.lock() {
                        v.push(Point {
                            at,
                            available,
                            swap_used,
                            anon,
                            term_pending: term,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            Monitor {
                stop,
                pid,
                points,
                thread: Some(thread),
                priority,
            }
        }

        /// The priority the monitor's thread runs at.
        fn priority(&self) -> &'static str {
            self.priority.lock().map(|p| *p).unwrap_or("unknown")
        }

        fn watch(&self, pid: u32) {
            self.pid.store(pid, Ordering::Relaxed);
        }

        fn finish(mut self) -> Vec<Point> {
            self.stop.store(true, Ordering::Relaxed);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
            self.points.lock().map(|v| v.clone()).unwrap_or_default()
        }
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Who {
        Earlyoom,
        Headroom,
    }

    impl Who {
        fn name(self) -> &'static str {
            match self {
                Who::Earlyoom => "earlyoom",
                Who::Headroom => "headroom",
            }
        }
    }

    /// What one run measured.
    struct Outcome {
        /// Crossing to signal, ms.
        lag_ms: f64,
        /// Growth in that time, MiB.
        growth_mib: f64,
        /// The hog's average rate, MiB/s.
        rate: f64,
        /// How late headroom's loop woke meanwhile (thrash scenario).
        lateness: Option<Lateness>,
    }

    /// Quantiles of headroom's wake lateness over a run, from its
    /// `headroom_wake_lateness_seconds` histogram.
    #[derive(Clone, Copy)]
    struct Lateness {
        wakes: u64,
        /// The bucket bounds (ms) the 50th and 99th percentiles fall in.
        p50_ms: f64,
        p99_ms: f64,
        mean_ms: f64,
    }

    /// The condition a run crosses.
    #[derive(Clone, Copy)]
    enum Threshold {
        AvailableBelow(u64),
        SwapUsedAbove(u64),
    }

    impl Threshold {
        fn crossed(self, p: &Point) -> bool {
            match self {
                Threshold::AvailableBelow(t) => p.available < t,
                Threshold::SwapUsedAbove(t) => p.swap_used > t,
            }
        }
    }

    /// A running contender, and for headroom where its metrics are.
    struct Contender {
        proc: Proc,
        metrics: Option<String>,
    }

    fn start_contender(who: Who, th: Threshold, dir: &Path, earlyoom: &Path) -> Option<Contender> {
        match who {
            Who::Earlyoom => {
                let mut cmd = Command::new(earlyoom);
                match th {
                    Threshold::AvailableBelow(t) => {
                        cmd.args(["-M", &(t / 1024).to_string(), "-s", "100"]);
                    }
                    Threshold::SwapUsedAbove(t) => {
                        let m = read_meminfo();
                        let free_at = meminfo(&m, "SwapTotal:").saturating_sub(t);
                        // 99 %: the most earlyoom takes; swap decides.
                        cmd.args(["-m", "99", "-S", &(free_at / 1024).to_string()]);
                    }
                }
                cmd.args([
                    "--prefer",
                    "^bench-hog$",
                    "--avoid",
                    "^bench-ballast$",
                    "-r",
                    "0",
                ]);
                let p = Proc::spawn(cmd);
                p.wait_for("sending SIGTERM", Duration::from_secs(10))?;
                Some(Contender {
                    proc: p,
                    metrics: None,
                })
            }
            Who::Headroom => {
                let when = match th {
                    Threshold::AvailableBelow(t) => {
                        format!("available_below = \"{}KiB\"", t / 1024)
                    }
                    Threshold::SwapUsedAbove(t) => format!("swap_used_above = \"{}KiB\"", t / 1024),
                };
                start_headroom(dir, "name = \"^bench-hog$\"", &when)
            }
        }
    }

    /// headroom on the default `[daemon]` with one rule on the processes
    /// `matcher` (a `[rule.match]` line) selects, gated by `when`; with the
    /// URL of its metrics.
    fn start_headroom(dir: &Path, matcher: &str, when: &str) -> Option<Contender> {
        let cfg = dir.join("headroom.toml");
        std::fs::write(
            &cfg,
            format!(
                "[daemon]\njournal = \"{}\"\n\n[[rule]]\nname = \"bench\"\nselect = \"largest\"\n\
                 root = true\nother_users = true\ncooldown = \"1s\"\nactions = [{{ signal = \"SIGTERM\" }}]\n\
                 [rule.match]\n{matcher}\n[rule.when]\n{when}\n",
                dir.join("journal.jsonl").display()
            ),
        )
        .ok()?;
        let mut cmd = Command::new(HEADROOM);
        cmd.args(["run", "--listen", "127.0.0.1:0", "--config"])
            .arg(&cfg)
            .env(
                "HEADROOM_LOG",
                std::env::var("HEADROOM_BENCH_DAEMON_LOG").unwrap_or_else(|_| "info".into()),
            );
        let p = Proc::spawn(cmd);
        let (_, line) = p.wait_for("status page: http://", Duration::from_secs(20))?;
        let addr = line
            .split("status page: http://")
            .nth(1)?
            .split('/')
            .next()?;
        let metrics = Some(format!("http://{addr}/metrics"));
        p.wait_for("first sample:", Duration::from_secs(20))?;
        Some(Contender { proc: p, metrics })
    }

    /// One scrape of the `headroom_wake_lateness_seconds` histogram.
    struct Histogram {
        /// (upper bound in seconds, cumulative count) per bucket.
        buckets: Vec<(f64, u64)>,
        count: u64,
        /// Seconds.
        sum: f64,
    }

    /// The `headroom_wake_lateness_seconds` histogram at `url`.
    fn scrape_lateness(url: &str) -> Option<Histogram> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        let body = agent
            .get(url)
            .call()
            .ok()?
            .body_mut()
            .read_to_string()
            .ok()?;
        let mut buckets = Vec::new();
        let (mut count, mut sum) = (None, None);
        for line in body.lines() {
            if let Some(rest) = line.strip_prefix("headroom_wake_lateness_seconds_bucket{le=\"") {
                let (le, n) = rest.split_once("\"} ")?;
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                buckets.push((le, n.trim().parse().ok()?));
            } else if let Some(n) = line.strip_prefix("headroom_wake_lateness_seconds_count ") {
                count = n.trim().parse().ok();
            } else if let Some(n) = line.strip_prefix("headroom_wake_lateness_seconds_sum ") {
                sum = n.trim().parse().ok();
            }
        }
        Some(Histogram {
            buckets,
            count: count?,
            sum: sum?,
        })
    }

    /// The lateness between two scrapes: the bucket bound each quantile
    /// falls in, and the mean.
    fn lateness_between(before: &Histogram, after: &Histogram) -> Option<Lateness> {
        let wakes = after.count.checked_sub(before.count)?;
        if wakes == 0 || before.buckets.len() != after.buckets.len() {
            return None;
        }
        let quantile = |q: f64| {
            let rank = (q * wakes as f64).ceil().max(1.0) as u64;
            before
                .buckets
                .iter()
                .zip(&after.buckets)
                .find(|((_, b), (_, a))| a.saturating_sub(*b) >= rank)
                .map_or(f64::INFINITY, |((_, _), (le, _))| le * 1000.0)
        };
        Some(Lateness {
            wakes,
            p50_ms: quantile(0.5),
            p99_ms: quantile(0.99),
            mean_ms: (after.sum - before.sum) * 1000.0 / wakes as f64,
        })
    }

    /// The hog of one run: its rate, its ceiling, and whether it thrashes
    /// (writes again to what it holds).
    struct HogSpec<'a> {
        rate: &'a str,
        max: u64,
        thrash: bool,
    }

    fn hog_run(
        who: Who,
        th: Threshold,
        dir: &Path,
        earlyoom: &Path,
        spec: &HogSpec,
        margin: u64,
    ) -> Result<Outcome, String> {
        let contender =
            start_contender(who, th, dir, earlyoom).ok_or("the contender did not start")?;
        std::thread::sleep(Duration::from_secs(2));
        let swapped = matches!(th, Threshold::SwapUsedAbove(_));
        let monitor = Monitor::start(swapped);
        let link = dir.join("bench-hog");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(crate::common::hog_program::hog_path(), &link)
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&link);
        cmd.args([
            "--rate",
            spec.rate,
            "--max",
            &format!("{}MiB", spec.max / MIB),
            "--exit-on",
            "TERM",
        ]);
        if spec.thrash {
            cmd.arg("--thrash");
        }
        let lateness_before = contender.metrics.as_deref().and_then(scrape_lateness);
        let hog = Proc::spawn(cmd);
        let (_, ready) = hog
            .wait_for("ready pid=", Duration::from_secs(10))
            .ok_or("the hog did not start")?;
        let pid: u32 = ready
            .trim()
            .strip_prefix("ready pid=")
            .and_then(|p| p.parse().ok())
            .ok_or("no pid in the hog's ready line")?;
        monitor.watch(pid);
        let signal = hog.wait_for("signal SIGTERM", Duration::from_secs(60));
        // The contender goes first: with the threshold still crossed after
        // the hog (other processes' pages stay in swap), earlyoom would pick
        // its next victim within a few hundred milliseconds.
        let lateness_after = contender.metrics.as_deref().and_then(scrape_lateness);
        let log: Vec<(Instant, String)> = contender.proc.lines.try_iter().collect();
        drop(contender);
        let monitor_priority = monitor.priority();
        let points = monitor.finish();
        drop(hog);
        let lateness = match (&lateness_before, &lateness_after) {
            (Some(b), Some(a)) => lateness_between(b, a),
            _ => None,
        };
        let baseline = points.iter().find_map(|p| p.anon).unwrap_or(0);
        let cross = points.iter().find(|p| th.crossed(p));
        let (t_sig, line) = signal.ok_or(match cross {
            None => "no signal: the threshold was never crossed (other processes freed memory)",
            Some(_) => "no signal within 60 s",
        })?;
        // signal SIGTERM footprint=N at_ms=M
        let mut f = line.split_whitespace().skip(2);
        let field = |f: Option<&str>, key: &str| {
            f.and_then(|v| v.strip_prefix(key))
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or(format!("no {key} in {line:?}"))
        };
        let allocated = field(f.next(), "footprint=")? as u64;
        let at_ms = field(f.next(), "at_ms=")?;
        let cross = cross.ok_or("signalled, but the threshold was not crossed")?;
        // The signal's time: the first reading that found it pending, or
        // the hog's line if that came first (a hog running when the signal
        // came handles it before a reading can find it pending). On
        // saturated cores the hog may wait a while to run its handler:
        // that wait is the scheduler's, not the contender's.
        let pending = points
            .iter()
            .filter(|p| p.at >= cross.at)
            .find(|p| p.term_pending)
            .map(|p| p.at);
        let line_at = t_sig;
        let t_sig = pending.map_or(t_sig, |p| p.min(t_sig));
        // The hog's anonymous memory (statm, read by the monitor) at the
        // crossing and at the last reading before the signal arrived: one
        // measure for both ends (the hog's own count of what it allocated
        // leaves out the allocator's page per block).
        let anon_before = |t: Instant| {
            points
                .iter()
                .filter(|p| p.at <= t)
                .filter_map(|p| p.anon)
                .next_back()
        };
        let at_cross = anon_before(cross.at).unwrap_or(0);
        // The most the hog held before the signal line arrived: the hog
        // only grows until the signal, and once it exits its memory goes
        // while the line may still be on its way.
        let at_signal = points
            .iter()
            .filter(|p| p.at <= t_sig)
            .filter_map(|p| p.anon)
            .max()
            .ok_or("no reading of the hog before the signal")?;
        if std::env::var_os("HEADROOM_BENCH_DEBUG").is_some() {
            eprintln!(
                "{}: {} points, crossing at {} MiB available, hog anon {} MiB then, {} MiB at the signal, allocated {} MiB",
                who.name(),
                points.len(),
                cross.available / MIB,
                at_cross / MIB,
                at_signal / MIB,
                allocated / MIB
            );
            // The contender's log and the machine's figures around the
            // crossing, in ms from it.
            let from = cross.at.checked_sub(Duration::from_millis(300));
            for (at, line) in log.iter().filter(|(at, _)| from.is_none_or(|f| *at >= f)) {
                eprintln!("  {:+8.1} ms  {line}", signed_ms(cross.at, *at));
            }
            let mut last = None;
            for p in points
                .iter()
                .filter(|p| from.is_none_or(|f| p.at >= f) && p.at <= t_sig)
            {
                if last.is_none_or(|l: Instant| p.at.duration_since(l) >= Duration::from_millis(10))
                {
                    eprintln!(
                        "  {:+8.1} ms  available {} MiB, swap used {} MiB, hog {} MiB",
                        signed_ms(cross.at, p.at),
                        p.available / MIB,
                        p.swap_used / MIB,
                        p.anon.unwrap_or(0) / MIB
                    );
                    last = Some(p.at);
                }
            }
            if let Some(p) = pending {
                eprintln!(
                    "  {:+8.1} ms  SIGTERM found pending by the monitor",
                    signed_ms(cross.at, p)
                );
            }
            eprintln!(
                "  {:+8.1} ms  the hog's signal line (monitor at {})",
                signed_ms(cross.at, line_at),
                monitor_priority
            );
        }
        // The run measures the hog only if the hog made the crossing: its
        // growth accounts for the margin, less 512 MiB at most (other
        // processes on the machine take memory too). A hog that grew more
        // than the margin still made the crossing (something gave memory
        // back meanwhile: on this machine's idle runs, about 1.2 GiB in
        // some of them).
        if let Threshold::AvailableBelow(_) = th {
            let by_hog = at_cross.saturating_sub(baseline);
            if by_hog + 512 * MIB < margin {
                return Err(format!(
                    "discarded: the hog had grown {} MiB at the crossing, not about {} MiB (other processes took memory)",
                    by_hog / MIB,
                    margin / MIB
                ));
            }
        }
        Ok(Outcome {
            lag_ms: signed_ms(cross.at, t_sig),
            growth_mib: (at_signal as f64 - at_cross as f64) / MIB as f64,
            rate: allocated as f64 / MIB as f64 / (at_ms / 1000.0),
            lateness,
        })
    }

    /// `to − from` in milliseconds, negative if `to` came first.
    fn signed_ms(from: Instant, to: Instant) -> f64 {
        if to >= from {
            to.duration_since(from).as_secs_f64() * 1000.0
        } else {
            -(from.duration_since(to).as_secs_f64() * 1000.0)
        }
    }

    fn settle(available_before: u64) {
        // Let the memory of the last run come back before the next one.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let now = meminfo(&read_meminfo(), "MemAvailable:");
            if now + 256 * MIB >= available_before {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(1));
    }

    /// The ballast of the swap and thrash scenarios: a `headroom-hog` named
    /// `bench-ballast` holding all but `left` of the available memory,
    /// locked (never swapped), killed when dropped (and by itself after
    /// 15 minutes, and with the bench).
    struct Ballast {
        proc: Option<Proc>,
        size: u64,
        took: Duration,
    }

    impl Ballast {
        fn start(dir: &Path, left: u64) -> Result<Ballast, String> {
            let available = meminfo(&read_meminfo(), "MemAvailable:");
            let size = available.saturating_sub(left) / MIB * MIB;
            if size == 0 {
                return Ok(Ballast {
                    proc: None,
                    size,
                    took: Duration::ZERO,
                });
            }
            let link = dir.join("bench-ballast");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(crate::common::hog_program::hog_path(), &link)
                .map_err(|e| e.to_string())?;
            let mut cmd = Command::new(&link);
            let size_arg = format!("{}MiB", size / MIB);
            cmd.args([
                "--lock", "--start", &size_arg, "--max", &size_arg, "--hold", "900s",
            ]);
            let began = Instant::now();
            let p = Proc::spawn(cmd);
            // Locking many GiB means evicting the page cache first: minutes
            // on a slow machine, not more.
            let deadline = began + Duration::from_secs(300);
            while Instant::now() < deadline {
                match p.lines.recv_timeout(Duration::from_millis(100)) {
                    Ok((_, line)) if line.starts_with("holding") => {
                        return Ok(Ballast {
                            proc: Some(p),
                            size,
                            took: began.elapsed(),
                        });
                    }
                    Ok((_, line)) if line.contains("--lock:") || line.contains("failed") => {
                        return Err(format!("the ballast could not hold its memory: {line}"));
                    }
                    _ => {}
                }
            }
            Err(format!(
                "the ballast did not hold {} MiB within 5 minutes",
                size / MIB
            ))
        }

        /// Whether the ballast still holds its memory (nothing killed it).
        fn holds(&mut self) -> bool {
            self.proc
                .as_mut()
                .is_none_or(|p| matches!(p.child.try_wait(), Ok(None)))
        }

        fn describe(&self) -> String {
            let m = read_meminfo();
            format!(
                "Ballast: {} MiB locked in {:.1} s; now {} MiB available, {} MiB of swap used",
                self.size / MIB,
                self.took.as_secs_f64(),
                meminfo(&m, "MemAvailable:") / MIB,
                meminfo(&m, "SwapTotal:").saturating_sub(meminfo(&m, "SwapFree:")) / MIB
            )
        }
    }

    impl Drop for Ballast {
        fn drop(&mut self) {
            drop(self.proc.take());
        }
    }

    /// Swap used now, and swap free, bytes.
    fn swap_now() -> (u64, u64) {
        let m = read_meminfo();
        let free = meminfo(&m, "SwapFree:");
        (meminfo(&m, "SwapTotal:").saturating_sub(free), free)
    }

    /// The swap scenario: past swap used + 256 MiB, the hog at `rate`.
    fn swap_table(
        runs: usize,
        contenders: &[Who],
        dir: &Path,
        earlyoom: &Path,
        rate: &str,
        ballast: &mut Ballast,
    ) {
        let margin = 256 * MIB;
        table(
            "Swap: swap used above (used at the start + 256 MiB)",
            runs,
            contenders,
            |who| {
                if !ballast.holds() {
                    return Err("not run: the ballast is gone (killed?)".into());
                }
                let available = meminfo(&read_meminfo(), "MemAvailable:");
                let (used, free) = swap_now();
                let spec = HogSpec {
                    rate,
                    max: available + margin + 1024 * MIB,
                    thrash: false,
                };
                if free < margin + 1024 * MIB {
                    return Err(format!("only {} MiB of swap free", free / MIB));
                }
                let th = Threshold::SwapUsedAbove(used + margin);
                let out = hog_run(who, th, dir, earlyoom, &spec, margin);
                settle(available);
                out
            },
        );
    }

    /// The thrash scenario: a thrashing hog at full speed past swap used +
    /// `HEADROOM_BENCH_THRASH_MIB`.
    fn thrash_table(
        runs: usize,
        contenders: &[Who],
        dir: &Path,
        earlyoom: &Path,
        ballast: &mut Ballast,
    ) {
        let margin = env_usize("HEADROOM_BENCH_THRASH_MIB", 1024) as u64 * MIB;
        table(
            &format!(
                "Thrash: a hog writing again to what it holds, at full speed, past swap used at the start + {} MiB",
                margin / MIB
            ),
            runs,
            contenders,
            |who| {
                if !ballast.holds() {
                    return Err("not run: the ballast is gone (killed?)".into());
                }
                let available = meminfo(&read_meminfo(), "MemAvailable:");
                let (used, free) = swap_now();
                let spec = HogSpec {
                    rate: "max",
                    max: available + margin + 512 * MIB,
                    thrash: true,
                };
                if free < margin + 1024 * MIB {
                    return Err(format!("only {} MiB of swap free", free / MIB));
                }
                let th = Threshold::SwapUsedAbove(used + margin);
                let out = hog_run(who, th, dir, earlyoom, &spec, margin);
                settle(available);
                out
            },
        );
    }

    /// Run each contender in turn until each has `runs` valid runs (at
    /// most five times as many attempts), printing every attempt.
    fn table(
        title: &str,
        runs: usize,
        contenders: &[Who],
        mut run: impl FnMut(Who) -> Result<Outcome, String>,
    ) {
        println!("{title}");
        println!();
        println!(
            "| run | contender | hog MiB/s | ms crossing → signal | MiB grown past the threshold | headroom's wakes meanwhile: count, ms late p50 / p99 / mean |"
        );
        println!("|---|---|---|---|---|---|");
        let mut lag: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
        let mut growth: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
        let mut attempt = 0;
        while attempt < runs * 5 && lag.iter().any(|l| l.len() < runs) {
            for (k, who) in contenders.iter().enumerate() {
                if lag[k].len() >= runs {
                    continue;
                }
                match run(*who) {
                    Ok(o) => {
                        let late = o.lateness.map_or(String::new(), |l| {
                            format!(
                                "{}, ≤ {} / ≤ {} / {:.1}",
                                l.wakes, l.p50_ms, l.p99_ms, l.mean_ms
                            )
                        });
                        println!(
                            "| {attempt} | {} | {:.0} | {:.0} | {:.0} | {late} |",
                            who.name(),
                            o.rate,
                            o.lag_ms,
                            o.growth_mib
                        );
                        lag[k].push(o.lag_ms);
                        growth[k].push(o.growth_mib);
                    }
                    Err(why) => println!("| {attempt} | {} | {why} | | | |", who.name()),
                }
            }
            attempt += 1;
        }
        println!();
        for (k, who) in contenders.iter().enumerate() {
            println!(
                "{}: {} valid runs, median {:.0} ms, {:.0} MiB past the threshold",
                who.name(),
                lag[k].len(),
                median(&lag[k]),
                median(&growth[k])
            );
        }
        println!();
    }

    /// A memory cgroup of `limit` bytes this process may create, and the
    /// file to write a pid into to move it there.
    struct Cgroup {
        dir: PathBuf,
    }

    impl Cgroup {
        fn create(limit: u64) -> Result<Cgroup, String> {
            let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
            // cgroup v1 memory controller, else the v2 unified hierarchy.
            let (dir, limit_file) = if let Some(path) = own
                .lines()
                .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))
            {
                (
                    PathBuf::from(format!("/sys/fs/cgroup/memory{path}")),
                    "memory.limit_in_bytes",
                )
            } else if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
                (PathBuf::from(format!("/sys/fs/cgroup{path}")), "memory.max")
            } else {
                return Err("no memory cgroup in /proc/self/cgroup".into());
            };
            let dir = dir.join(format!("headroom-bench-{}", std::process::id()));
            std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
            std::fs::write(dir.join(limit_file), limit.to_string())
                .map_err(|e| format!("{limit_file}: {e}"))?;
            Ok(Cgroup { dir })
        }

        fn procs(&self) -> PathBuf {
            self.dir.join("cgroup.procs")
        }
    }

    impl Drop for Cgroup {
        fn drop(&mut self) {
            for _ in 0..50 {
                if std::fs::remove_dir(&self.dir).is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// The thrasher (`python3 -c THRASH bench-thrash PROCS FILE`, the
    /// argument naming it for the rule) and seven forked copies
    /// re-read random pages of a file mapped into memory, in a memory cgroup
    /// too small for it, so they wait on refaults and reclaim. SIGTERM
    /// prints `signal SIGTERM` and exits; the copies die with the parent.
    const THRASH: &str = r#"
import ctypes, mmap, os, random, signal, sys
procs, path = sys.argv[2], sys.argv[3]
with open(procs, "w") as f:
    f.write(str(os.getpid()))
def stop(*_):
    print("signal SIGTERM", flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
for _ in range(7):
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        break
f = open(path, "rb")
os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
n = len(m) // 4096
print("ready", flush=True)
s = 0
while True:
    s += m[random.randrange(n) * 4096]
"#;

    /// The time of day of a log line's leading RFC 3339 timestamp
    /// (`2026-11-23T22:37:49.466516Z …`), in seconds.
    fn seconds_of_day(line: &str) -> Option<f64> {
        let time = line.get(11..26)?;
        let mut parts = time.split(':');
        let h: f64 = parts.next()?.parse().ok()?;
        let m: f64 = parts.next()?.parse().ok()?;
        let s: f64 = parts.next()?.parse().ok()?;
        Some(h * 3600.0 + m * 60.0 + s)
    }

    /// `some total=` of `/proc/pressure/memory` now, microseconds.
    fn psi_now() -> u64 {
        std::fs::read_to_string("/proc/pressure/memory")
            .ok()
            .and_then(|t| psi_some_total(&t))
            .unwrap_or(0)
    }

    /// headroom's reaction to memory stalls in a small cgroup: (ms from the
    /// kernel's notification reaching headroom to the signal arriving, the
    /// same by the daemon's own log timestamps up to its signal sent, ms
    /// from the thrashers' start to the signal, ms of stall meanwhile). The pressure
    /// file is not polled meanwhile: frequent reads of it were seen to keep
    /// the kernel's trigger from firing on this kind of stall.
    fn psi_run(dir: &Path) -> Result<(f64, f64, f64, u64), String> {
        if !Path::new("/proc/pressure/memory").exists() {
            return Err("this kernel has no /proc/pressure/memory".into());
        }
        let python = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join("python3"))
            .find(|p| p.is_file())
            .ok_or("python3 is not installed (the thrasher is a Python script)")?;
        let cg = Cgroup::create(96 * MIB)?;
        let file = dir.join("thrash.bin");
        // Written and synced, so that the thrasher's POSIX_FADV_DONTNEED
        // drops it from the cache (dirty pages would stay, charged to this
        // process's cgroup, and reading them would never stall).
        if !file.exists() {
            let status = Command::new("dd")
                .args([
                    "if=/dev/urandom",
                    "bs=1M",
                    "count=512",
                    "conv=fsync",
                    "status=none",
                ])
                .arg(format!("of={}", file.display()))
                .status()
                .map_err(|e| e.to_string())?;
            if !status.success() {
                return Err("cannot write the file to thrash".into());
            }
        }
        let d = start_headroom(dir, "argv = \" bench-thrash \"", "pressure = \"warn\"")
            .ok_or("headroom did not start")?
            .proc;
        std::thread::sleep(Duration::from_secs(2));
        let stall_before = psi_now();
        let mut cmd = Command::new(&python);
        cmd.arg("-c")
            .arg(THRASH)
            .arg("bench-thrash")
            .arg(cg.procs())
            .arg(&file);
        let thrash = Proc::spawn(cmd);
        let (t_ready, _) = thrash
            .wait_for("ready", Duration::from_secs(10))
            .ok_or("the thrasher did not start")?;
        let signal = thrash.wait_for("signal SIGTERM", Duration::from_secs(60));
        let stalled_ms = psi_now().saturating_sub(stall_before) / 1000;
        drop(thrash);
        let log: Vec<(Instant, String)> = d.lines.try_iter().collect();
        drop(d);
        // The last kernel event before the signal went out: an earlier one
        // may have come before the thrashers were there to pick.
        let sent = log
            .iter()
            .position(|(_, l)| l.contains("SIGTERM: done"))
            .unwrap_or(log.len());
        let event_line = log[..sent]
            .iter()
            .rposition(|(_, l)| l.contains("memory pressure event from the kernel"));
        let event = event_line.map(|i| log[i].0);
        let Some((t_sig, _)) = signal else {
            return Err(format!(
                "no signal within 60 s ({stalled_ms} ms of stall, {}woken by the kernel)",
                if event.is_some() { "" } else { "not " },
            ));
        };
        let event = event.ok_or("signalled, but not after a kernel pressure event")?;
        // The daemon's own account, from its log's timestamps: the event
        // logged, the signal sent.
        let stamp = |needle: &str| {
            log.iter()
                .find(|(_, l)| l.contains(needle))
                .and_then(|(_, l)| seconds_of_day(l))
        };
        let own = match (
            event_line.and_then(|i| seconds_of_day(&log[i].1)),
            stamp("SIGTERM: done"),
        ) {
            (Some(a), Some(b)) => (b - a) * 1000.0,
            _ => f64::NAN,
        };
        Ok((
            signed_ms(event, t_sig),
            own,
            signed_ms(t_ready, t_sig),
            stalled_ms,
        ))
    }

    pub fn main() {
        if !std::env::args().any(|a| a == "--bench") {
            println!("system_reaction: run with `cargo bench --bench system_reaction`");
            return;
        }
        // SAFETY: prctl with integer arguments only. The bench dies with
        // whoever started it (cargo, in turn stopped by
        // scripts/bench-earlyoom.sh on a signal), and its children with it.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        let runs = env_usize("HEADROOM_BENCH_RUNS", 3).max(1);
        let margin = env_usize("HEADROOM_BENCH_MARGIN_MIB", 3072) as u64 * MIB;
        let rate = std::env::var("HEADROOM_BENCH_RATE").unwrap_or_else(|_| "max".into());
        let earlyoom = std::env::var_os("EARLYOOM").map(PathBuf::from).or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|d| d.join("earlyoom"))
                .find(|p| p.is_file())
        });
        let mut contenders = vec![Who::Headroom];
        match &earlyoom {
            Some(e) => {
                // earlyoom prints its version on stderr.
                let v = Command::new(e).arg("-v").output().ok().map(|o| {
                    let out = [o.stdout, o.stderr].concat();
                    String::from_utf8_lossy(&out).trim().to_string()
                });
                println!("earlyoom: {} ({})", e.display(), v.unwrap_or_default());
                contenders.insert(0, Who::Earlyoom);
            }
            None => println!(
                "earlyoom: not installed (scripts/bench-earlyoom.sh installs it); headroom alone"
            ),
        }
        let earlyoom = earlyoom.unwrap_or_default();
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");

        let load = match Load::start(
            &std::env::var("HEADROOM_BENCH_LOAD").unwrap_or_default(),
            dir.path(),
        ) {
            Ok(load) => load,
            Err(why) => {
                eprintln!("system_reaction: {why}");
                std::process::exit(2);
            }
        };
        println!("load: {}", load.describe());
        let m = read_meminfo();
        println!(
            "machine: {} MiB of memory, {} MiB available, {} MiB of swap; hog rate {rate}",
            meminfo(&m, "MemTotal:") / MIB,
            meminfo(&m, "MemAvailable:") / MIB,
            meminfo(&m, "SwapTotal:") / MIB
        );
        println!();

        let only = std::env::var("HEADROOM_BENCH_ONLY").ok();
        let wanted = |name: &str| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|o| o.trim() == name))
        };
        if wanted("memory") {
            table(
                &format!(
                    "Memory: available below (available at the start − {} MiB)",
                    margin / MIB
                ),
                runs,
                &contenders,
                |who| {
                    let available = meminfo(&read_meminfo(), "MemAvailable:");
                    let th = Threshold::AvailableBelow(available.saturating_sub(margin));
                    let spec = HogSpec {
                        rate: &rate,
                        max: margin + 1536 * MIB,
                        thrash: false,
                    };
                    let out = hog_run(who, th, dir.path(), &earlyoom, &spec, margin);
                    settle(available);
                    out
                },
            );
        }

        let swap_total = meminfo(&m, "SwapTotal:");
        if !wanted("swap") && !wanted("thrash") {
        } else if swap_total == 0 {
            println!(
                "Swap and thrash: this machine has no swap; not run (HEADROOM_BENCH_SWAPFILE=4G \
                 scripts/bench-earlyoom.sh provides it)."
            );
            println!();
        } else if std::env::var("HEADROOM_BENCH_SWAP").as_deref() != Ok("1") {
            println!(
                "Swap and thrash: not run (they push memory into swap; set HEADROOM_BENCH_SWAP=1)."
            );
            println!();
        } else {
            let left = env_usize("HEADROOM_BENCH_LEFT_MIB", 1536) as u64 * MIB;
            match Ballast::start(dir.path(), left) {
                Err(why) => {
                    println!("Swap and thrash: not run: {why}");
                    println!();
                }
                Ok(mut ballast) => {
                    println!("{}", ballast.describe());
                    println!();
                    if wanted("swap") {
                        swap_table(
                            runs,
                            &contenders,
                            dir.path(),
                            &earlyoom,
                            &rate,
                            &mut ballast,
                        );
                    }
                    if wanted("thrash") {
                        thrash_table(runs, &contenders, dir.path(), &earlyoom, &mut ballast);
                    }
                    drop(ballast);
                }
            }
        }

        if !wanted("psi") {
            return;
        }
        println!(
            "PSI: pressure = \"warn\", processes thrashing a 96 MiB memory cgroup (headroom only)"
        );
        println!();
        println!(
            "| run | ms kernel event → signal arrives | ms event → signal sent (daemon's log) | ms thrashers start → signal | ms of stall |"
        );
        println!("|---|---|---|---|---|");
        let mut reaction = Vec::new();
        let mut own = Vec::new();
        for i in 0..runs {
            match psi_run(dir.path()) {
                Ok((from_event, by_log, from_start, stalled)) => {
                    println!(
                        "| {i} | {from_event:.1} | {by_log:.1} | {from_start:.0} | {stalled} |"
                    );
                    reaction.push(from_event);
                    own.push(by_log);
                }
                Err(why) => println!("| {i} | not measured: {why} | | | |"),
            }
            std::thread::sleep(Duration::from_secs(2));
        }
        if !reaction.is_empty() {
            println!();
            println!(
                "headroom: median {:.1} ms from the kernel's notification to the signal ({:.1} ms by its own log)",
                median(&reaction),
                median(&own)
            );
        }
    }
}
