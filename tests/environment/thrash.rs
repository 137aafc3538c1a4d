//! The daemon on a machine that thrashes, as root: a swap file switched on
//! for the test, a ballast (`headroom-hog --lock`) holding all but 512 MiB
//! of the available memory, and a hog (`headroom-hog --thrash`, at most
//! 2 GiB) growing at full speed into swap while it writes again to what it
//! holds. A rule on swap used (256 MiB above what the ballast left in swap)
//! must send the hog SIGTERM, the journal must name the rule and the hog's
//! pid, the kernel's OOM killer must not have come first, and the daemon
//! must have stayed up and kept sampling through it (`/healthz` answers,
//! its sample count moves while swap fills). No timing is asserted.
//!
//! Run as root (as CI does); as any other user, or where the kernel refuses
//! a swap file or the ballast may not lock its memory, the test prints what
//! it needs and passes. Whatever happens, within 60 s of the hog's start
//! every process it started is killed and the swap file is switched off and
//! removed ([`Scene`]'s `Drop`); its children also die with it
//! (`PR_SET_PDEATHSIG`), and a swap file an earlier, killed run left
//! behind is removed at the start.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support;
use crate::support::hog::hog_path;
use support::attack::{Proc, RootDaemon, argv_pattern};

const MIB: u64 = 1 << 20;
/// The swap file.
const SWAP_MIB: u64 = 1024;
/// Memory the ballast leaves available.
const LEFT: u64 = 512 * MIB;
/// The hog's ceiling.
const HOG_MAX: u64 = 2048 * MIB;
/// The rule's threshold: this much swap above what is used when the hog
/// starts.
const MARGIN: u64 = 256 * MIB;
/// The hog is signalled within this long, or the test fails (and cleans up).
const THRASH_LIMIT: Duration = Duration::from_secs(60);
/// Locking many GiB evicts the page cache first; this is plenty.
const BALLAST_LIMIT: Duration = Duration::from_secs(180);
/// Swap files this test names, below `CARGO_TARGET_TMPDIR`.
const SWAP_PREFIX: &str = "headroom-thrash-test-";

/// `key:  N kB` of `/proc/meminfo` (or `/proc/<pid>/status`), bytes.
fn kib_field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// `MemAvailable` once two readings a second apart differ by less than
/// 32 MiB (at most 30 s), bytes.
fn settled_available() -> u64 {
    let mut last = kib_field(&meminfo(), "MemAvailable");
    for _ in 0..30 {
        std::thread::sleep(Duration::from_secs(1));
        let now = kib_field(&meminfo(), "MemAvailable");
        if now.abs_diff(last) < 32 * MIB {
            return now;
        }
        last = now;
    }
    last
}

fn meminfo() -> String {
    std::fs::read_to_string("/proc/meminfo").expect("read /proc/meminfo")
}

/// Swap used now, and swap free, bytes.
fn swap_now() -> (u64, u64) {
    let m = meminfo();
    let free = kib_field(&m, "SwapFree");
    (kib_field(&m, "SwapTotal").saturating_sub(free), free)
}

/// How many processes the kernel's OOM killer has killed since boot.
fn oom_kills() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .ok()
        .and_then(|v| {
            v.lines()
                .find_map(|l| l.strip_prefix("oom_kill "))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The swap file of this test, switched on.
struct SwapFile {
    path: PathBuf,
}

impl SwapFile {
    /// A file of [`SWAP_MIB`] in `dir`, made swap and switched on; `Err`
    /// says why this machine does not allow it.
    fn on(dir: &Path) -> Result<SwapFile, String> {
        let path = dir.join(format!("{SWAP_PREFIX}{}.swap", std::process::id()));
        let file = SwapFile { path };
        let p = file
            .path
            .to_str()
            .ok_or("a swap file path that is not UTF-8")?;
        // Swap files may have no holes: allocate, or write it out.
        if run("fallocate", &["-l", &format!("{SWAP_MIB}M"), p]).is_err() {
            run(
                "dd",
                &[
                    "if=/dev/zero",
                    &format!("of={p}"),
                    "bs=1M",
                    &format!("count={SWAP_MIB}"),
                    "status=none",
                ],
            )?;
        }
        run("chmod", &["600", p])?;
        run("mkswap", &["-q", p])?;
        run("swapon", &[p])?;
        Ok(file)
    }

    /// Switch off and remove the swap files a run of this test that was
    /// killed outright left in `dir`.
    fn remove_stale(dir: &Path) {
        let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
        for path in swaps.lines().filter_map(|l| l.split_whitespace().next()) {
            let path = Path::new(path);
            let ours = path.parent() == Some(dir)
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(SWAP_PREFIX));
            if ours && let Some(p) = path.to_str() {
                let _ = run("swapoff", &[p]);
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

impl Drop for SwapFile {
    fn drop(&mut self) {
        let Some(p) = self.path.to_str() else {
            return;
        };
        // swapoff needs room for what is in swap: try again while the
        // memory of what was killed comes back.
        // A file still on is left in place (the next run switches it off).
        for attempt in 1..=5 {
            match run("swapoff", &[p]) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&self.path);
                    break;
                }
                Err(e) if attempt == 5 => eprintln!("thrash test: {e}; the next run retries"),
                Err(_) => std::thread::sleep(Duration::from_secs(1)),
            }
        }
    }
}

/// Everything the test starts, taken down in order when dropped, whatever
/// happened: the `/healthz` poller stopped, the hog and the ballast killed
/// (their memory back), then the daemon, then the swap file.
struct Scene {
    polling: Arc<AtomicBool>,
    hog: Option<Proc>,
    ballast: Vec<Proc>,
    daemon: Option<RootDaemon>,
    swap: Option<SwapFile>,
}

impl Drop for Scene {
    fn drop(&mut self) {
        self.polling.store(true, Ordering::SeqCst);
        drop(self.hog.take());
        self.ballast.clear();
        drop(self.daemon.take());
        drop(self.swap.take());
    }
}

/// `link` (a link to the hog) with `args`, killed when the thread that
/// started it ends, even if this test process is killed outright.
fn spawn_hog(link: &Path, args: &[&str]) -> Proc {
    let mut c = Command::new(link);
    c.args(args);
    // SAFETY: prctl is async-signal-safe and touches no memory of the
    // parent; it asks the kernel to SIGKILL the child when this thread ends.
    unsafe {
        c.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Proc::spawn(c)
}

/// One answer of `/healthz` during the thrash.
struct Poll {
    swap_used: u64,
    samples: u64,
}

/// Asks `/healthz` over and over until stopped, noting the sample count and
/// the swap used at each answer.
fn poll_healthz(url: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Poll>> {
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(2)))
            .build()
            .into();
        let mut polls = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            if let Ok(mut res) = agent.get(&url).call()
                && res.status().as_u16() == 200
                && let Some(samples) = res
                    .body_mut()
                    .read_to_string()
                    .ok()
                    .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
                    .and_then(|v| v["samples"].as_u64())
            {
                polls.push(Poll {
                    swap_used: swap_now().0,
                    samples,
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        polls
    })
}

#[test]
fn a_swap_rule_signals_a_hog_thrashing_in_swap_before_the_oom_killer() {
    // It switches on a swap file and locks most of the memory.
    support::need_root();
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(tmp).expect("create CARGO_TARGET_TMPDIR");
    SwapFile::remove_stale(tmp);
    let dir = support::private_dir();
    let mut scene = Scene {
        polling: Arc::new(AtomicBool::new(false)),
        hog: None,
        ballast: Vec::new(),
        daemon: None,
        swap: None,
    };
    match SwapFile::on(tmp) {
        Ok(swap) => scene.swap = Some(swap),
        Err(why) => panic!(
            "this machine refuses a swap file in {} ({why}); the test needs root with the right \
             to swapon and a file system that takes swap files (ext4, xfs)",
            tmp.display()
        ),
    }

    // The ballast: all but LEFT of what is available, locked. Available
    // memory is read once it holds still, and read again once the ballast
    // holds: after tests that allocated and freed gigabytes just before, it
    // has been seen to climb for seconds (on a VM), even after the ballast
    // locked its share, and a ballast sized only once left the hog 2.8 GiB
    // of RAM (a clean-clone CI run). Up to four more pieces take what
    // appeared since.
    let link = dir.path().join("thrash-ballast");
    std::os::unix::fs::symlink(hog_path(), &link).expect("link the ballast");
    let mut ballast_size = 0;
    for _ in 0..5 {
        let piece = settled_available().saturating_sub(LEFT) / MIB * MIB;
        if piece < 64 * MIB {
            break;
        }
        let size = format!("{}MiB", piece / MIB);
        let mut ballast = spawn_hog(
            &link,
            &["--lock", "--start", &size, "--max", &size, "--hold", "300s"],
        );
        let first = ballast.wait_line("", Duration::from_secs(10));
        if first.as_ref().is_none_or(|(_, l)| l != "locked") {
            ballast.drain();
            panic!(
                "the ballast may not lock its memory (root needs CAP_IPC_LOCK or \
                 CAP_SYS_RESOURCE); it said:\n{}",
                ballast.output()
            );
        }
        ballast.expect_line("holding", BALLAST_LIMIT);
        scene.ballast.push(ballast);
        ballast_size += piece;
    }

    // The daemon, with one rule on this test's hog.
    let (used, free) = swap_now();
    assert!(
        free >= MARGIN + 256 * MIB,
        "only {} MiB of swap free after the ballast",
        free / MIB
    );
    let link = dir.path().join("thrash-hog");
    std::os::unix::fs::symlink(hog_path(), &link).expect("link the hog");
    let config = format!(
        "[daemon]\ninterval = \"1s\"\njournal = \"{}\"\n\n[[rule]]\nname = \"thrash\"\n\
         select = \"largest\"\nroot = true\nother_users = true\ncooldown = \"1h\"\n\
         actions = [{{ signal = \"SIGTERM\" }}]\n[rule.match]\nargv = {}\n\
         [rule.when]\nswap_used_above = \"{}KiB\"\n",
        dir.path().join("journal.jsonl").display(),
        argv_pattern(&link),
        (used + MARGIN) / 1024
    );
    let daemon = match RootDaemon::start(dir.path(), &config) {
        Ok(d) => d,
        Err(e) => panic!(
            "the daemon did not start (exit code {:?}); its log:\n{}",
            e.code, e.log
        ),
    };
    let samples_before = daemon.samples().expect("/healthz answers before the hog");
    let poller = poll_healthz(daemon.url("/healthz"), Arc::clone(&scene.polling));
    let pid = daemon.pid;
    scene.daemon = Some(daemon);

    // The hog: what is left of memory, then into swap, writing again to
    // what it holds; at most 2 GiB and never more than the swap can take.
    let available = kib_field(&meminfo(), "MemAvailable");
    let max = (available + MARGIN + (free - MARGIN) / 2).min(HOG_MAX);
    let oom_before = oom_kills();
    let started = Instant::now();
    let hog = scene.hog.insert(spawn_hog(
        &link,
        &[
            "--rate",
            "max",
            "--max",
            &format!("{}MiB", max / MIB),
            "--thrash",
            "--exit-on",
            "TERM",
        ],
    ));
    let hog_pid = hog.pid();
    // If the kernel must kill, let it be the hog, not another process on
    // the machine (the test then fails: it was not headroom's signal).
    std::fs::write(format!("/proc/{hog_pid}/oom_score_adj"), "1000").expect("oom_score_adj");
    let signal = hog.wait_line("signal SIGTERM", THRASH_LIMIT);
    let samples_after = scene.daemon.as_ref().and_then(RootDaemon::samples);
    scene.polling.store(true, Ordering::SeqCst);
    let polls = poller.join().expect("the poller");
    let exit = hog.wait_exit(Duration::from_secs(20));
    let oom_after = oom_kills();
    let daemon = scene.daemon.as_mut().expect("the daemon");
    let log = daemon.log_tail(40);

    assert!(
        signal.is_some(),
        "the hog got no SIGTERM within {THRASH_LIMIT:?} (its ceiling {} MiB, swap used {} MiB of \
         {} MiB at the start, now {} MiB; OOM kills meanwhile: {}); the end of its output:\n{}\n\
         the daemon's log:\n{log}",
        max / MIB,
        used / MIB,
        (used + free) / MIB,
        swap_now().0 / MIB,
        oom_after - oom_before,
        tail(&hog.output(), 20)
    );
    let exit = exit.expect("the hog exits after SIGTERM");
    assert!(
        exit.success(),
        "the hog ended with {exit:?}, not by its SIGTERM handler (the kernel's OOM killer \
         killed {} processes meanwhile); the daemon's log:\n{log}",
        oom_after - oom_before
    );

    // The journal names the rule and the hog.
    let deadline = Instant::now() + Duration::from_secs(10);
    let action = loop {
        let journal = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap_or_default();
        let found = journal
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["event"] == "action" && e["process"]["pid"] == hog_pid);
        if let Some(action) = found {
            break action;
        }
        assert!(
            Instant::now() < deadline,
            "no action on pid {hog_pid} in the journal:\n{journal}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(action["rule"], "thrash", "{action}");
    assert_eq!(action["action"], "SIGTERM", "{action}");

    // The daemon stayed up and kept sampling while swap filled.
    assert!(daemon.running(), "the daemon (pid {pid}) ended:\n{log}");
    let samples_after = samples_after.expect("/healthz answers after the signal");
    assert!(
        samples_after > samples_before,
        "samples did not move: {samples_before} before the hog, {samples_after} after its signal"
    );
    let in_swap: Vec<&Poll> = polls
        .iter()
        .filter(|p| p.swap_used >= used + MARGIN / 4)
        .collect();
    assert!(
        in_swap.iter().any(|p| p.samples > samples_before),
        "/healthz answered {} times during the {:.1} s of the hog, {} of them with the hog in \
         swap, none with more samples than the {samples_before} before it",
        polls.len(),
        started.elapsed().as_secs_f64(),
        in_swap.len()
    );
    println!(
        "thrash test: ballast {} MiB, hog signalled after {:.1} s; /healthz answered {} times, \
         {} with the hog in swap; OOM kills meanwhile: {}",
        ballast_size / MIB,
        started.elapsed().as_secs_f64(),
        polls.len(),
        in_swap.len(),
        oom_after - oom_before
    );
    drop(scene);
    assert!(
        !std::fs::read_to_string("/proc/swaps")
            .unwrap_or_default()
            .contains(SWAP_PREFIX),
        "the swap file is still on"
    );
}
