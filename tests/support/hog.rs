//! The real daemon and the real memory hog as child processes whose output
//! lines arrive on channels ([`Running`]); a daemon that has started
//! ([`Daemon`]: its HTTP address learnt from its log, its first sample
//! taken), the one way both test tiers start one; and a sandbox directory
//! with a config and a journal, for the limits-and-actions tests: a rule on
//! the sandbox's hog, the daemon started on it, and what it did to a pid
//! (its journal) and thinks of it (its API).

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// The `headroom` binary ([`super::BIN`]).
pub const HEADROOM: &str = super::BIN;
/// The `headroom-hog` program ([`super::hog_program`]).
pub use super::hog_program::hog_path;

/// A child whose output lines (stdout or stderr) arrive on a channel.
pub struct Running {
    pub child: Child,
    lines: Receiver<String>,
    pub seen: Vec<String>,
    /// The output has closed (the child exited or closed it).
    closed: bool,
    /// The state directory given to a daemon that would have used the
    /// default one ([`super::uses_default_state_dir`]).
    state: Option<tempfile::TempDir>,
}

fn forward(stream: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

impl Running {
    /// The daemon, `headroom ARGS`, with its log (stderr) captured.
    pub fn daemon(args: &[&str]) -> Self {
        let mut command = Command::new(HEADROOM);
        command.args(args);
        Self::daemon_command(command)
    }

    /// The daemon as `command` starts it (e.g. through `runuser`), given a
    /// port of its own (unless the command names one with `--listen`) and a
    /// debug log (stderr), which is captured.
    pub fn daemon_command(mut command: Command) -> Self {
        // A port of its own, so tests can run side by side.
        if !command.get_args().any(|a| a == "--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        // A state directory of its own, unless a user runs it (setpriv):
        // another user cannot write the test's private directory.
        let state = (command.get_program() != "setpriv" && super::uses_default_state_dir(&command))
            .then(|| {
                let dir = super::private_dir();
                command
                    .arg("--journal")
                    .arg(dir.path().join("journal.jsonl"));
                dir
            });
        let mut child = command
            .env("HEADROOM_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn headroom");
        let lines = forward(child.stderr.take().expect("stderr"));
        Self {
            child,
            lines,
            seen: Vec::new(),
            closed: false,
            state,
        }
    }

    /// A daemon's HTTP address, from its `status page: http://ADDR/` line.
    pub fn http_addr(&mut self) -> SocketAddr {
        let line = self.expect_line("status page: http://");
        line.split("status page: http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
    }

    /// The hog, started through `link` (a uniquely named link to it, so a
    /// rule can match exactly this test's hog), with its stdout captured.
    pub fn hog(link: &Path, args: &[&str]) -> Self {
        Self::hog_with(link, args, false)
    }

    /// The hog as the leader of a process group of its own.
    pub fn hog_in_own_group(link: &Path, args: &[&str]) -> Self {
        Self::hog_with(link, args, true)
    }

    fn hog_with(link: &Path, args: &[&str], own_group: bool) -> Self {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(link);
        if own_group {
            command.process_group(0);
        }
        command.args(args);
        Self::hog_command(command)
    }

    /// The hog as `command` starts it (e.g. through `setpriv`, or into a
    /// given process group), with its stdout captured.
    pub fn hog_command(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn headroom-hog");
        let lines = forward(child.stdout.take().expect("stdout"));
        Self {
            child,
            lines,
            seen: Vec::new(),
            closed: false,
            state: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait up to `within` for a line containing `needle`; `None` once
    /// `within` has passed or the output has closed.
    pub fn wait_line(&mut self, needle: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return Some(line);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.closed = true;
                    return None;
                }
            }
        }
        None
    }

    /// Like `wait_line` (for up to 30 s), but a missing line fails the test
    /// with the output so far.
    pub fn expect_line(&mut self, needle: &str) -> String {
        match self.wait_line(needle, Duration::from_secs(30)) {
            Some(line) => line,
            None => panic!(
                "no line with {needle:?}{}; output so far:\n{}",
                if self.closed {
                    " (the output closed)"
                } else {
                    ""
                },
                self.seen.join("\n")
            ),
        }
    }

    /// The pids of the `n` children a hog started with `--fork` says it
    /// forked (`forked pid=N at_ms=M`), in the order it forked them.
    pub fn forked(&mut self, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| {
                let line = self.expect_line("forked pid=");
                line.trim_start_matches("forked pid=")
                    .split_whitespace()
                    .next()
                    .and_then(|pid| pid.parse().ok())
                    .unwrap_or_else(|| panic!("no pid in {line:?}"))
            })
            .collect()
    }

    /// Every line that arrives within `within`.
    pub fn drain(&mut self, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut out = Vec::new();
        while Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(20)) {
                self.seen.push(line.clone());
                out.push(line);
            }
        }
        out
    }

    /// Send the signal named `name` (`"TERM"`, `"HUP"`, …).
    pub fn signal(&self, name: &str) {
        super::signal(self.child.id(), name);
    }

    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `headroom run` child that has said where its status page is and taken
/// its first sample: the setup most daemon tests begin with. Everything of
/// [`Running`] (its log lines, signals, exit) through `Deref`.
pub struct Daemon {
    process: Running,
    /// Its HTTP address, a loopback port the kernel picked.
    pub addr: SocketAddr,
}

impl Daemon {
    /// `headroom ARGS` (e.g. `run --config PATH`), once started.
    pub fn run(args: &[&str]) -> Self {
        Self::started(Running::daemon(args))
    }

    /// The daemon as `command` starts it (e.g. through `runuser`), once
    /// started.
    pub fn run_command(command: Command) -> Self {
        Self::started(Running::daemon_command(command))
    }

    /// `headroom run` on `config` (TOML text, written to
    /// `dir/headroom.toml`), once started.
    pub fn start(dir: &Path, config: &str) -> Self {
        let cfg = dir.join("headroom.toml");
        std::fs::write(&cfg, config).expect("write config");
        Self::run(&["run", "--config", cfg.to_str().expect("utf-8 path")])
    }

    /// Wait for `process` to say where its status page is and to take its
    /// first sample.
    pub fn started(mut process: Running) -> Self {
        let addr = process.http_addr();
        process.expect_line("first sample:");
        Self { process, addr }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// GET `path`, with status and body; panics if the daemon does not answer.
    pub fn get(&self, path: &str) -> (u16, String) {
        super::get(&self.url(path))
    }

    /// Send `signal` (`"TERM"`, `"INT"`) and assert that the daemon exits 0
    /// within 10 s.
    pub fn stop_with(mut self, signal: &str) {
        stop_cleanly(&mut self.process, signal);
    }
}

/// Send `signal` to the daemon `process` and assert that it exits 0 within
/// 10 s.
#[track_caller]
pub fn stop_cleanly(process: &mut Running, signal: &str) {
    process.signal(signal);
    let status = process
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("the daemon did not exit on SIG{signal} within 10 s"));
    assert_eq!(status.code(), Some(0), "exit on SIG{signal}");
}

impl Deref for Daemon {
    type Target = Running;
    fn deref(&self) -> &Running {
        &self.process
    }
}

impl DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut Running {
        &mut self.process
    }
}

/// A temporary directory with a uniquely named link to the hog.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub hog: PathBuf,
}

impl Sandbox {
    pub fn new(tag: &str) -> Self {
        let dir = super::private_dir();
        let hog = dir.path().join(format!("hog-{tag}"));
        std::os::unix::fs::symlink(hog_path(), &hog).expect("link the hog");
        Self { dir, hog }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A `[rule.match]` argv pattern that matches this sandbox's hog only.
    pub fn hog_pattern(&self) -> String {
        regex::escape(&self.hog.display().to_string()).replace('\\', "\\\\")
    }

    /// A rule named `hog` on this sandbox's hog only, with `body` (limit and
    /// actions), acting as root may on root's processes (the tests run as
    /// whoever runs them; `root = true` covers root).
    pub fn rule(&self, body: &str) -> String {
        format!(
            "[[rule]]\nname = \"hog\"\nroot = true\nother_users = true\n{body}\n[rule.match]\nargv = \"{}\"\n",
            self.hog_pattern()
        )
    }

    /// The daemon on [`Sandbox::config`]`(rest)` with `extra` arguments,
    /// once it has taken its first sample.
    pub fn start(&self, rest: &str, extra: &[&str]) -> Daemon {
        let cfg = self.config(rest);
        let mut args = vec!["run", "--config", cfg.to_str().expect("utf-8")];
        args.extend_from_slice(extra);
        Daemon::run(&args)
    }

    /// A sandbox tagged `tag` and the daemon on one rule on its hog
    /// ([`Sandbox::rule`]`(body)`), once started: the setup of most limit
    /// tests.
    pub fn with_rule(tag: &str, body: &str) -> (Self, Daemon) {
        let sb = Self::new(tag);
        let daemon = sb.start(&sb.rule(body), &[]);
        (sb, daemon)
    }

    /// Write a config: a fast-sampling `[daemon]` journaling into the
    /// sandbox, then `rest`.
    pub fn config(&self, rest: &str) -> PathBuf {
        let path = self.path("headroom.toml");
        self.write_config(&path, rest);
        path
    }

    pub fn write_config(&self, path: &Path, rest: &str) {
        let text = format!(
            "[daemon]\ninterval = \"100ms\"\nfast_interval = \"50ms\"\njournal = \"{}\"\n\n{rest}",
            self.path("journal.jsonl").display()
        );
        std::fs::write(path, text).expect("write config");
    }

    /// The journal's events as JSON values, both file sets merged by time
    /// as `headroom events` reads them.
    pub fn journal(&self) -> Vec<serde_json::Value> {
        super::journal::events(&self.path("journal.jsonl"))
    }
}

impl Sandbox {
    /// The journal's `action` events on `pid`.
    pub fn actions_on(&self, pid: u32) -> Vec<serde_json::Value> {
        self.journal()
            .into_iter()
            .filter(|e| e["event"] == "action" && e["process"]["pid"] == pid)
            .collect()
    }

    /// The first action on `pid` in the journal, once it is there (the
    /// journal is written after the signal is sent).
    pub fn first_action_on(&self, pid: u32) -> serde_json::Value {
        super::wait_for(Duration::from_secs(10), "an action in the journal", || {
            self.actions_on(pid).into_iter().next()
        })
    }
}

/// The daemon's status of `rule` for `pid`, once it has one whose state
/// starts with `state`.
pub fn rule_status(addr: SocketAddr, pid: u32, rule: &str, state: &str) -> serde_json::Value {
    super::wait_for(
        Duration::from_secs(20),
        &format!("rule {rule} {state}"),
        || {
            let (code, body) = super::get(&format!("http://{addr}/api/v1/processes/{pid}"));
            if code != 200 {
                return None;
            }
            let row: serde_json::Value = serde_json::from_str(&body).ok()?;
            row["process"]["rules"]
                .as_array()?
                .iter()
                .find(|r| {
                    r["rule"] == rule && r["state"].as_str().is_some_and(|s| s.starts_with(state))
                })
                .cloned()
        },
    )
}

/// Why a rule with `root = false` holds a root's process and does not act.
pub const ROOT_REASON: &str = "owned by root and the rule has root = false; add root = true to act \
                               on root's processes";

/// Parse `signal SIGINT footprint=123 at_ms=456` from the hog.
pub fn parse_signal_line(line: &str) -> Option<(String, u64, u64)> {
    let mut parts = line.split_whitespace();
    if parts.next()? != "signal" {
        return None;
    }
    let name = parts.next()?.to_string();
    let footprint = parts.next()?.strip_prefix("footprint=")?.parse().ok()?;
    let at_ms = parts.next()?.strip_prefix("at_ms=")?.parse().ok()?;
    Some((name, footprint, at_ms))
}
