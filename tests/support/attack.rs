//! Both sides of `tests/environment/attacks.rs`: a real `headroom run` as root, watched
//! from outside (its log, its memory from `/proc/<pid>/status`, its sockets,
//! `/healthz` with a short client timeout), and the unprivileged attacker:
//! the system user `headroom-test` (created with `useradd` as
//! `tests/environment/privileges.rs` does), running `attacker.py` or `headroom-hog`
//! through `setpriv`. Every process started here is killed with its process
//! group when dropped; every file lives in a temporary directory.

use std::io::{BufRead as _, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::hog::{HEADROOM, hog_path};

/// The attacker: the unprivileged system account the root tests use.
pub const ATTACKER: &str = "headroom-test";
/// An ordinary (non-system, uid ≥ 1000) account, for the attack on
/// protection by name, which must still cover system accounts.
pub const REGULAR_ATTACKER: &str = "headroom-test-regular";
/// The owner of the victim's files: a uid no test account has.
pub const VICTIM_UID: u32 = 65533;

/// An entry of the daemon's `PATH`, and a variable of its environment, that
/// must not reach a hook.
pub const LEAKY_PATH: &str = "/nonexistent-attacker-bin:/usr/local/bin:/usr/bin:/bin";
pub const LEAK_VAR: &str = "HEADROOM_TEST_LEAK";

/// The daemon's soft limit on open files, as systemd gives a service.
const DAEMON_NOFILE: u64 = 1024;
/// Far beyond any bound a test asserts: a daemon past this much resident
/// memory is killed at once, so that an attack that works does not take
/// the machine down with it.
const WATCHDOG_RSS: u64 = 1536 * 1024 * 1024;

pub const MIB: u64 = 1024 * 1024;

/// One attack at a time: each starts its own daemon and measures reaction
/// times that another attack running beside it would distort.
static SERIAL: Mutex<()> = Mutex::new(());

/// A running attack test: holds the lock that serialises them.
pub struct Session {
    _serial: MutexGuard<'static, ()>,
    pub name: &'static str,
}

/// Start the attack `name`; fails the test unless it runs as root with the
/// tools the attacks use (the attacks need a root daemon and a second user).
pub fn begin(name: &'static str) -> Session {
    super::need_root();
    super::need_tools(&[
        ("useradd", "passwd"),
        ("setpriv", "util-linux"),
        ("prlimit", "util-linux"),
        ("python3", "python3"),
        ("cc", "gcc"),
    ]);
    let serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    ensure_user(ATTACKER, true);
    Session {
        _serial: serial,
        name,
    }
}

/// Create the account `name` once (idempotently; a test binary running
/// beside this one may create it meanwhile). `system`: a system account, as
/// `tests/environment/privileges.rs` creates `headroom-test`.
pub fn ensure_user(name: &str, system: bool) {
    static CREATED: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let created = CREATED.get_or_init(Mutex::default);
    let mut created = created.lock().unwrap_or_else(|p| p.into_inner());
    if created.iter().any(|n| n == name) {
        return;
    }
    let exists = Command::new("id")
        .arg(name)
        .output()
        .is_ok_and(|o| o.status.success());
    if !exists {
        let mut cmd = Command::new("useradd");
        if system {
            cmd.arg("--system");
        }
        let out = cmd
            .args(["--no-create-home", "--shell", "/usr/sbin/nologin", name])
            .output()
            .expect("useradd (Debian package passwd; scripts/test.sh installs it)");
        // 9: created meanwhile by a test binary running beside this one.
        assert!(
            out.status.success() || out.status.code() == Some(9),
            "useradd {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    created.push(name.to_string());
}

/// The uid of `user`.
pub fn uid_of(user: &str) -> u32 {
    let out = Command::new("id")
        .args(["-u", user])
        .output()
        .expect("run id");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no uid for {user}: {out:?}"))
}

pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

/// Give `path` to `uid` (the link itself, for a symlink).
pub fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid))
        .unwrap_or_else(|e| panic!("chown {uid} {}: {e}", path.display()));
}

/// `s` as a TOML basic string (JSON's escapes are TOML's).
pub fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// A `[rule.match] argv` value matching exactly the command lines that
/// contain `path`, as a TOML string.
pub fn argv_pattern(path: &Path) -> String {
    toml_str(&regex::escape(&path.display().to_string()))
}

/// Where the attacker's programs live: a directory outside the checkout
/// (which may sit below a directory only root can enter), open for reading
/// to everyone, with a copy of `headroom-hog` and `attacker.py`.
pub struct Stage {
    dir: tempfile::TempDir,
    pub hog: PathBuf,
    pub script: PathBuf,
}

impl Stage {
    pub fn new() -> Stage {
        let dir = tempfile::tempdir().expect("tempdir");
        chmod(dir.path(), 0o755);
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("mkdir bin");
        chmod(&bin, 0o755);
        let hog = bin.join("headroom-hog");
        std::fs::copy(hog_path(), &hog).expect("copy headroom-hog");
        chmod(&hog, 0o755);
        let script = dir.path().join("attacker.py");
        std::fs::write(&script, include_str!("attacker.py")).expect("write attacker.py");
        chmod(&script, 0o644);
        Stage { dir, hog, script }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A link to the hog named `name` in the directory `sub`: started
    /// through it, the hog's process name is `name` (at most 15 bytes are
    /// kept) and its argv[0] the link's path.
    pub fn hog_link(&self, sub: &str, name: &str) -> PathBuf {
        let dir = self.path(sub);
        std::fs::create_dir_all(&dir).expect("mkdir");
        chmod(&dir, 0o755);
        let link = dir.join(name);
        std::os::unix::fs::symlink(&self.hog, &link).expect("link the hog");
        link
    }
}

/// `program` as `user`, through `setpriv`, which execs it in its own place:
/// its pid, signals and exit status are the program's.
pub fn as_user(user: &str, program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={user}"),
        &format!("--regid={user}"),
        "--init-groups",
        "--",
    ])
    .arg(program);
    c
}

/// `attacker.py ARGS` as the attacker, with as many open files as root can
/// give it (a flood needs more than the usual 1024).
pub fn attacker_python(stage: &Stage, args: &[&str]) -> Command {
    python_as_attacker(&stage.script, args)
}

/// The Python program `script` run with `args` as the attacker, with as
/// many open files as root can give it.
pub fn python_as_attacker(script: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("prlimit");
    c.args(["--nofile=16384:16384", "--", "setpriv"])
        .args([
            &format!("--reuid={ATTACKER}"),
            &format!("--regid={ATTACKER}"),
            "--init-groups",
            "--",
            "/usr/bin/python3",
            "-u",
        ])
        .arg(script)
        .args(args);
    c
}

/// A line of output and when it arrived.
pub type Line = (Instant, String);

fn forward(
    stream: impl Read + Send + 'static,
    prefix: &'static str,
    tx: std::sync::mpsc::Sender<Line>,
) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&buf);
                    let line = format!("{prefix}{}", text.trim_end_matches(['\n', '\r']));
                    if tx.send((Instant::now(), line)).is_err() {
                        break;
                    }
                }
            }
        }
    });
}

/// A child in a process group of its own whose stdout and stderr lines
/// arrive timestamped; the whole group is killed when dropped.
pub struct Proc {
    child: Child,
    lines: Receiver<Line>,
    pub seen: Vec<Line>,
}

impl Proc {
    pub fn spawn(mut command: Command) -> Proc {
        let mut child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
        let (tx, lines) = channel();
        forward(child.stdout.take().expect("stdout"), "", tx.clone());
        forward(child.stderr.take().expect("stderr"), "stderr: ", tx);
        Proc {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line containing `needle` within `within`.
    pub fn wait_line(&mut self, needle: &str, within: Duration) -> Option<Line> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self.lines.recv_timeout(left.min(Duration::from_millis(50))) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.1.contains(needle) {
                        return Some(line);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(left.min(Duration::from_millis(50)));
                }
            }
        }
    }

    /// Like `wait_line`, but a missing line fails the test with the output.
    pub fn expect_line(&mut self, needle: &str, within: Duration) -> Line {
        self.wait_line(needle, within).unwrap_or_else(|| {
            panic!(
                "no line with {needle:?} within {within:?}; output so far:\n{}",
                self.output()
            )
        })
    }

    /// Take in every line that has arrived.
    pub fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
    }

    /// The last line seen containing `needle`.
    pub fn last(&mut self, needle: &str) -> Option<String> {
        self.drain();
        self.seen
            .iter()
            .rev()
            .find(|(_, l)| l.contains(needle))
            .map(|(_, l)| l.clone())
    }

    pub fn output(&self) -> String {
        self.seen
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// How the leader ended, if it did within `within`.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill the whole process group and reap the leader.
    pub fn kill(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// SIGKILL to the process group `pgid`.
pub fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// Whether `pid` is a live process (not gone, not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// A field of `/proc/<pid>/status` in bytes (`VmHWM`, `VmRSS`).
pub fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// Peak resident memory of the daemon, seen from outside, and whether the
/// watchdog had to kill it.
#[derive(Default)]
struct Watch {
    peak_hwm: AtomicU64,
    killed_at_rss: AtomicU64,
    stop: AtomicBool,
}

/// `headroom run` as root on a config written to a private directory,
/// listening on a free loopback port, with `HEADROOM_LOG=info`, the soft
/// open-files limit systemd gives a service, and an environment holding
/// [`LEAK_VAR`] and [`LEAKY_PATH`]. A watchdog polls its memory every 50 ms.
pub struct RootDaemon {
    child: Child,
    pub pid: u32,
    pub addr: SocketAddr,
    lines: Receiver<Line>,
    pub log: Vec<Line>,
    watch: Arc<Watch>,
}

/// A daemon that stopped before its first sample: exit code and log.
#[derive(Debug)]
pub struct Exited {
    pub code: Option<i32>,
    pub log: String,
}

/// The hard limit on open files of this process.
fn nofile_hard() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let hard = line.split_whitespace().nth(4)?;
    if hard == "unlimited" {
        return Some(u64::MAX);
    }
    hard.parse().ok()
}

impl RootDaemon {
    /// Write `config` to `dir/headroom.toml` and start the daemon on it;
    /// wait for its first sample, or for it to exit.
    pub fn start(dir: &Path, config: &str) -> Result<RootDaemon, Exited> {
        Self::launch(dir, config, &[], &[])
    }

    /// [`RootDaemon::start`], through `wrapper` (a program and its
    /// arguments that execs the rest of its command line in its own place,
    /// such as `unshare`): the daemon keeps the pid of the process started.
    pub fn start_through(dir: &Path, config: &str, wrapper: &[&str]) -> Result<RootDaemon, Exited> {
        Self::launch(dir, config, wrapper, &[])
    }

    /// [`RootDaemon::start`] with `env` set in the daemon's environment
    /// last (a `PATH` given here replaces [`LEAKY_PATH`]).
    pub fn start_with_env(
        dir: &Path,
        config: &str,
        env: &[(&str, &str)],
    ) -> Result<RootDaemon, Exited> {
        Self::launch(dir, config, &[], env)
    }

    fn launch(
        dir: &Path,
        config: &str,
        wrapper: &[&str],
        env: &[(&str, &str)],
    ) -> Result<RootDaemon, Exited> {
        let cfg = dir.join("headroom.toml");
        std::fs::write(&cfg, config).expect("write config");
        chmod(&cfg, 0o644);
        let soft = nofile_hard().map_or(DAEMON_NOFILE, |h| h.min(DAEMON_NOFILE));
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg("prlimit");
                c
            }
            None => Command::new("prlimit"),
        };
        command
            .arg(format!("--nofile={soft}:"))
            .arg("--")
            .arg(HEADROOM)
            .args(["run", "--listen", "127.0.0.1:0", "--config"])
            .arg(&cfg);
        // A state directory of its own: the default one may be held.
        if super::uses_default_state_dir(&command) {
            command.arg("--journal").arg(dir.join("journal.jsonl"));
        }
        let mut child = command
            .env("HEADROOM_LOG", "info")
            .env(LEAK_VAR, "1")
            .env("PATH", LEAKY_PATH)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn prlimit headroom run");
        let (tx, lines) = channel();
        forward(child.stderr.take().expect("stderr"), "", tx);
        let pid = child.id();
        let watch = Arc::new(Watch::default());
        let w = Arc::clone(&watch);
        std::thread::spawn(move || watchdog(pid, &w));
        let mut d = RootDaemon {
            child,
            pid,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            lines,
            log: Vec::new(),
            watch,
        };
        let Some(line) = d.wait_log("status page: http://", Duration::from_secs(30)) else {
            return Err(d.exited());
        };
        d.addr = line
            .split("status page: http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        if d.wait_log("first sample:", Duration::from_secs(30))
            .is_none()
        {
            return Err(d.exited());
        }
        Ok(d)
    }

    fn exited(mut self) -> Exited {
        let status = wait_exit(&mut self.child, Duration::from_secs(10));
        self.drain();
        Exited {
            code: status,
            log: self.log_text(),
        }
    }

    /// The next log line containing `needle` within `within`.
    pub fn wait_log(&mut self, needle: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self.lines.recv_timeout(left.min(Duration::from_millis(50))) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.1.contains(needle) {
                        return Some(line.1);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    pub fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.log.push(line);
        }
    }

    pub fn log_text(&mut self) -> String {
        self.drain();
        self.log
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The last `n` log lines, for failure messages.
    pub fn log_tail(&mut self, n: usize) -> String {
        self.drain();
        let from = self.log.len().saturating_sub(n);
        self.log[from..]
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The daemon's peak resident memory (VmHWM) so far, in bytes, as read
    /// now or by the watchdog before the daemon ended.
    pub fn hwm(&self) -> u64 {
        let now = status_bytes(self.pid, "VmHWM").unwrap_or(0);
        now.max(self.watch.peak_hwm.load(Ordering::SeqCst))
    }

    /// The resident memory at which the watchdog killed the daemon, if it did.
    pub fn killed_by_watchdog(&self) -> Option<u64> {
        match self.watch.killed_at_rss.load(Ordering::SeqCst) {
            0 => None,
            rss => Some(rss),
        }
    }

    /// How many sockets the daemon holds open now.
    pub fn sockets(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| std::fs::read_link(e.path()).ok())
                    .filter(|t| t.to_string_lossy().starts_with("socket:"))
                    .count()
            })
            .unwrap_or(0)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `GET /healthz` with a client timeout of `timeout`.
    pub fn healthz(&self, timeout: Duration) -> Probe {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .build()
            .into();
        let started = Instant::now();
        match agent.get(&self.url("/healthz")).call() {
            Ok(mut res) => {
                let status = res.status().as_u16();
                let body = res.body_mut().read_to_string().unwrap_or_default();
                let samples = serde_json::from_str::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["samples"].as_u64());
                Probe::Answered {
                    status,
                    samples,
                    took: started.elapsed(),
                }
            }
            Err(e) => {
                let took = started.elapsed();
                if took + Duration::from_millis(50) >= timeout {
                    Probe::TimedOut {
                        error: e.to_string(),
                        took,
                    }
                } else {
                    Probe::Refused {
                        error: e.to_string(),
                        took,
                    }
                }
            }
        }
    }

    /// The `samples` counter of `/healthz`, if it answers within 5 s.
    pub fn samples(&self) -> Option<u64> {
        match self.healthz(Duration::from_secs(5)) {
            Probe::Answered { samples, .. } => samples,
            _ => None,
        }
    }

    /// Poll `/healthz` with a 1 s client timeout, up to `tries` times, until
    /// it answers 200; every try's outcome.
    pub fn healthz_recovers(&self, tries: usize) -> Result<Probe, Vec<Probe>> {
        let mut seen = Vec::new();
        for _ in 0..tries {
            let probe = self.healthz(Duration::from_secs(1));
            if matches!(probe, Probe::Answered { status: 200, .. }) {
                return Ok(probe);
            }
            seen.push(probe);
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(seen)
    }
}

impl Drop for RootDaemon {
    fn drop(&mut self) {
        self.watch.stop.store(true, Ordering::SeqCst);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_exit(child: &mut Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn watchdog(pid: u32, watch: &Watch) {
    while !watch.stop.load(Ordering::SeqCst) {
        let (Some(hwm), Some(rss)) = (status_bytes(pid, "VmHWM"), status_bytes(pid, "VmRSS"))
        else {
            return;
        };
        watch.peak_hwm.fetch_max(hwm, Ordering::SeqCst);
        if rss > WATCHDOG_RSS {
            watch.killed_at_rss.store(rss, Ordering::SeqCst);
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How one `/healthz` request went.
#[derive(Debug, Clone)]
pub enum Probe {
    /// An HTTP answer (any status).
    Answered {
        status: u16,
        samples: Option<u64>,
        took: Duration,
    },
    /// Refused or cut before the client's timeout.
    Refused { error: String, took: Duration },
    /// No answer within the client's timeout.
    TimedOut { error: String, took: Duration },
}

/// How fast the daemon stopped a hog that crossed its limit.
#[derive(Debug, Clone, Copy)]
pub struct Reaction {
    /// The hog's size when the signal arrived, less the limit (MiB; the
    /// hog's own memory count, so slightly negative when the daemon's
    /// figure, which counts the program itself, crossed first).
    pub past_limit_mib: f64,
    /// From the hog reporting that it reached the limit to it reporting the
    /// signal (ms; 0 when the signal came first).
    pub ms_after_crossing: f64,
}

/// The rate and ceiling of every reaction hog.
pub const HOG_RATE: &str = "100MiB/s";
pub const HOG_MAX: &str = "1GiB";

/// `link` (a link to the hog) as `user`, growing at [`HOG_RATE`] up to
/// [`HOG_MAX`] and catching SIGTERM (reported, growth stops).
pub fn hog_as(user: &str, link: &Path) -> Proc {
    let mut c = as_user(user, link);
    c.args(["--rate", HOG_RATE, "--max", HOG_MAX, "--catch", "TERM"]);
    Proc::spawn(c)
}

/// Follow `hog` until it reports SIGTERM; `limit` in bytes must be a
/// multiple of 64 MiB (the hog reports its size every 64 MiB). Gives up
/// `after_crossing` after it reported reaching the limit.
pub fn await_reaction(
    hog: &mut Proc,
    limit: u64,
    after_crossing: Duration,
) -> Result<Reaction, String> {
    assert_eq!(limit % (64 * MIB), 0, "the hog reports every 64 MiB");
    let started = Instant::now();
    let mut crossed: Option<Instant> = None;
    let mut largest = 0u64;
    loop {
        let deadline = crossed.map_or(started + Duration::from_secs(60), |t| t + after_crossing);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the hog was not signalled: it grew to {} MiB{}; its output:\n{}",
                largest / MIB,
                crossed.map_or(String::new(), |t| format!(
                    " and was still unsignalled {:.1} s after reaching the limit",
                    t.elapsed().as_secs_f64()
                )),
                hog.output()
            ));
        }
        let Some((at, line)) = hog.wait_line("", left.min(Duration::from_millis(200))) else {
            continue;
        };
        if let Some(n) = line
            .strip_prefix("allocated ")
            .and_then(|n| n.trim().parse::<u64>().ok())
        {
            largest = largest.max(n);
            if n >= limit && crossed.is_none() {
                crossed = Some(at);
            }
        } else if let Some((signal, footprint, _)) = super::hog::parse_signal_line(&line) {
            if signal != "SIGTERM" {
                return Err(format!("the hog got {signal}, not SIGTERM: {line}"));
            }
            let ms = crossed.map_or(0.0, |t| {
                at.saturating_duration_since(t).as_secs_f64() * 1000.0
            });
            return Ok(Reaction {
                past_limit_mib: (footprint as f64 - limit as f64) / MIB as f64,
                ms_after_crossing: ms,
            });
        } else if line.starts_with("stderr: ") && !hog.alive() {
            return Err(format!("the hog failed: {}", hog.output()));
        }
    }
}

/// What one attack found: every failed check, with what happened, and the
/// figures measured; [`Findings::finish`] fails the test with all of them.
pub struct Findings {
    attack: &'static str,
    failures: Vec<String>,
    notes: Vec<String>,
}

impl Findings {
    pub fn new(session: &Session) -> Findings {
        Findings {
            attack: session.name,
            failures: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Record a failure unless `ok`.
    pub fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }

    pub fn fail(&mut self, what: String) {
        self.failures.push(what);
    }

    /// A figure or observation, printed with the result.
    pub fn note(&mut self, what: String) {
        println!("attack {:?}: {what}", self.attack);
        self.notes.push(what);
    }

    /// One line for `scripts/attack-bench.sh`:
    /// `attack-figures<TAB>attack<TAB>key=value…`.
    pub fn figures(&self, pairs: &[(&str, String)]) {
        let fields: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("attack-figures\t{}\t{}", self.attack, fields.join("\t"));
    }

    pub fn finish(self) {
        let observed = if self.notes.is_empty() {
            String::new()
        } else {
            format!("\nobserved:\n- {}", self.notes.join("\n- "))
        };
        assert!(
            self.failures.is_empty(),
            "attack {:?}: {} check(s) failed:\n- {}{observed}",
            self.attack,
            self.failures.len(),
            self.failures.join("\n- "),
        );
    }
}
