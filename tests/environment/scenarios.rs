//! A scenario corpus for the embedded default config: ML-like work, benign
//! and harmful, run by real ipykernel kernels inside real memory cgroups
//! (a "container" limit, as JupyterHub or a Slurm job sets) under the real
//! daemon on `headroom print-config`'s rules, with only the journal moved
//! into the test's directory. Each test is one scenario class:
//!
//! - benign (`b1_`…`b5_`): a fast dataset load, a faster one, saw-tooth
//!   epochs, a forked pool that only reads what it shares, a compile peak.
//!   No signal may reach the work; notifications are allowed.
//! - harmful (`h1_`…`h7_`): a leak, forked workers that allocate, forked
//!   workers that copy the pages they share on access (refcount writes),
//!   a tmpfs leak beside an innocent kernel, two tasks filling one cgroup,
//!   the leak again in a real OCI container (Debian's `runc`: its own pid
//!   and mount namespaces, `support::runc`), workers that outlive their
//!   killed kernel.
//!   The right process must get the default rule's signal before the
//!   cgroup's OOM killer acts, and no innocent process may.
//!
//! Every test prints one line, `scenario ID kind=… signalled=…`, with what
//! headroom did (which signal, to whom, seconds from the start of the work,
//! the cgroup's usage then), the cgroup's peak, what the OOM killer did
//! (the cgroup's `oom_kill` and `/proc/vmstat`'s), how long the cgroup had
//! under 5% of its limit left (sampled every 100 ms), how often it hit its
//! limit (v1 `memory.failcnt`) and the machine's memory stall time (PSI
//! `/proc/pressure/memory` totals); `scripts/scenarios.sh` runs the corpus
//! and tabulates those lines (BENCHMARKS.md, "Scenario corpus"). The line
//! is printed before the test's assertions, so a failing scenario reports
//! too.
//!
//! The kernels are `python -m ipykernel_launcher -f DIR/kernel-ID.json`
//! from `target/jupyter-venv` (`scripts/jupyter-venv.sh`), started inside
//! the cgroup and driven with `tests/fixtures/jupyter/drive_kernel.py`;
//! no Jupyter server is needed (the kernel writes its connection file).
//! The cgroups are made at the top of the memory hierarchy (v1 `memory`
//! where mounted, else v2) and removed when dropped, everything in them
//! killed first. The daemon's default rule covers every kernel of the
//! machine, and the scenarios measure pace against limits: `scripts/test.sh`
//! runs them alone, one at a time (`-- scenarios:: --test-threads=1`).
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::support::hog::{Daemon, HEADROOM};
use crate::support::{self, need_root};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Milliseconds since the epoch, as the journal's `at`.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn venv_python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/jupyter-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/jupyter-venv.sh (scripts/test.sh does) to install \
         ipykernel and jupyter_client into it",
        python.display()
    );
    python
}

fn kill(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

fn alive(pid: u32) -> bool {
    // A zombie is not alive: its memory is gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|st| st != "Z"))
        })
        .unwrap_or(false)
}

/// A memory cgroup of the test's own with a limit and no swap, removed when
/// dropped, everything in it killed first.
struct Cgroup {
    dir: PathBuf,
    /// Its path as `/proc/[pid]/cgroup` names it.
    path: String,
    v1: bool,
    limit: u64,
}

impl Cgroup {
    fn new(tag: &str, limit: u64) -> Self {
        need_root();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mounts = headroom::os::linux::parse::cgroupfs::parse_mountinfo(&mountinfo);
        let (v1, mount) = match (&mounts.v1_memory, &mounts.v2) {
            (Some(m), _) => (true, m.point.clone()),
            (None, Some(m)) => (false, m.point.clone()),
            (None, None) => panic!(
                "no memory cgroup hierarchy is mounted (/proc/self/mountinfo): \
                 tests/environment/scenarios.rs needs one, v1 or v2"
            ),
        };
        let name = format!("headroom-scenario-{tag}-{}", std::process::id());
        let dir = mount.join(&name);
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot make the memory cgroup {}: {e}", dir.display()));
        let cgroup = Self {
            dir,
            path: format!("/{name}"),
            v1,
            limit,
        };
        let limit_file = if v1 {
            "memory.limit_in_bytes"
        } else {
            "memory.max"
        };
        std::fs::write(cgroup.dir.join(limit_file), limit.to_string())
            .unwrap_or_else(|e| panic!("cannot set {limit_file} of {}: {e}", cgroup.path));
        let _ = std::fs::write(cgroup.dir.join("memory.swappiness"), "0");
        let _ = std::fs::write(cgroup.dir.join("memory.swap.max"), "0");
        cgroup
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file)).unwrap_or_default()
    }

    fn number(&self, file: &str) -> u64 {
        self.read(file).trim().parse().unwrap_or(0)
    }

    /// The file that says what it holds now, bytes.
    fn usage_file(&self) -> PathBuf {
        self.dir.join(if self.v1 {
            "memory.usage_in_bytes"
        } else {
            "memory.current"
        })
    }

    /// How many processes its OOM killer has killed.
    fn oom_kills(&self) -> u64 {
        let file = if self.v1 {
            "memory.oom_control"
        } else {
            "memory.events"
        };
        headroom::os::linux::parse::cgroupfs::keyed_value(&self.read(file), "oom_kill").unwrap_or(0)
    }

    /// How often it hit its limit: v1's `memory.failcnt`, v2's `max` count
    /// in `memory.events`.
    fn failcnt(&self) -> u64 {
        if self.v1 {
            self.number("memory.failcnt")
        } else {
            headroom::os::linux::parse::cgroupfs::keyed_value(&self.read("memory.events"), "max")
                .unwrap_or(0)
        }
    }

    fn procs(&self) -> Vec<u32> {
        self.read("cgroup.procs")
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            for pid in self.procs() {
                kill(pid, "KILL");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A real ipykernel started inside a cgroup (or a container in it),
/// killed when dropped.
struct Kernel {
    child: Option<Child>,
    connection: PathBuf,
    /// Its pid on the host.
    pid: u32,
    /// Its pid as it sees it (in a container's pid namespace, not the host's).
    own_pid: u32,
    container: Option<support::runc::Container>,
}

impl Kernel {
    /// `python -m ipykernel_launcher -f DIR/kernel-ID.json`, its pid
    /// written into `cgroup` before it execs (same pid), once its
    /// connection file is written.
    fn start(cgroup: &Cgroup, dir: &Path, id: &str) -> Self {
        let connection = dir.join(format!("kernel-{id}-{}.json", std::process::id()));
        let log = std::fs::File::create(dir.join(format!("kernel-{id}.log"))).unwrap();
        let child = Command::new("/bin/sh")
            .arg("-c")
            .arg("echo $$ > \"$1\" && shift && exec \"$@\"")
            .arg("sh")
            .arg(cgroup.dir.join("cgroup.procs"))
            .arg(venv_python())
            .args(["-m", "ipykernel_launcher", "-f"])
            .arg(&connection)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start ipykernel_launcher");
        wait_for_connection_file(&connection);
        let pid = child.id();
        Self {
            child: Some(child),
            connection,
            pid,
            own_pid: pid,
            container: None,
        }
    }

    /// The same kernel in a real OCI container (Debian's `runc`, see
    /// `support::runc`): its own pid and mount namespaces, in `cgroup`,
    /// whose limit runc sets again itself, the kernel a child of the
    /// container's init.
    fn start_in_container(cgroup: &Cgroup, dir: &Path, id: &str) -> Self {
        let runc = support::runc::runc()
            .expect("runc is missing: apt-get install runc (scripts/test.sh does)");
        let connection = dir.join(format!("kernel-{id}-{}.json", std::process::id()));
        let python = venv_python();
        // The venv and the interpreter it links to, wherever they are.
        let venv = python
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap();
        let mut read_only = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR"))];
        if let Ok(real) = venv.canonicalize() {
            read_only.push(real);
        }
        // The interpreter's own prefix (a pyenv or /usr/local build), where
        // it is not under /usr.
        if let Some(prefix) = python
            .canonicalize()
            .ok()
            .and_then(|p| Some(p.parent()?.parent()?.to_path_buf()))
            .filter(|p| !p.starts_with("/usr"))
        {
            read_only.push(prefix);
        }
        let bundle = dir.join(format!("bundle-{id}"));
        let name = format!("headroom-{}-{}", id.to_lowercase(), std::process::id());
        let container = support::runc::Container::start(
            &runc,
            &bundle,
            &support::runc::Spec {
                id: &name,
                cgroup_path: &cgroup.path,
                memory_limit: cgroup.limit,
                command: vec![
                    python.display().to_string(),
                    "-m".into(),
                    "ipykernel_launcher".into(),
                    "-f".into(),
                    connection.display().to_string(),
                ],
                read_only,
                writable: vec![dir.to_path_buf()],
                env: vec![("HOME".into(), "/tmp".into())],
                log: dir.join(format!("kernel-{id}.log")),
            },
        );
        wait_for_connection_file(&connection);
        let init = container
            .init_pid()
            .expect("runc state names the init's pid");
        let pid = *support::runc::children(init)
            .first()
            .expect("the kernel runs under the container's init");
        let own_pid = support::runc::namespace_pid(pid).expect("the kernel's NSpid");
        assert_ne!(own_pid, pid, "the kernel has a pid namespace of its own");
        Self {
            child: None,
            connection,
            pid,
            own_pid,
            container: Some(container),
        }
    }

    fn pid(&self) -> u32 {
        self.pid
    }
}

/// Wait until a kernel has written its connection file.
fn wait_for_connection_file(connection: &Path) {
    support::wait_for(
        Duration::from_secs(60),
        "the kernel's connection file",
        || {
            let text = std::fs::read_to_string(connection).ok()?;
            let v: Value = serde_json::from_str(&text).ok()?;
            v["key"].is_string().then_some(())
        },
    );
}

impl Drop for Kernel {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Killed and deleted with its processes.
        self.container.take();
    }
}

/// `drive_kernel.py` on one kernel: a cell is submitted, its reply read
/// later, so that two kernels can run cells at once.
struct Cells {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Cells {
    fn connect(kernel: &Kernel) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jupyter/drive_kernel.py");
        let mut child = Command::new(venv_python())
            .arg(script)
            .arg(&kernel.connection)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start drive_kernel.py");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut cells = Self {
            child,
            stdin,
            lines,
        };
        let ready = cells.reply(Duration::from_secs(60));
        assert_eq!(ready["ready"], true, "{ready}");
        cells
    }

    fn submit(&mut self, code: &str, timeout: Duration) {
        let request = json!({ "code": code, "timeout": timeout.as_secs_f64() });
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The reply, if it comes within `within`.
    fn try_reply(&mut self, within: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(within).ok()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
    }

    fn reply(&mut self, within: Duration) -> Value {
        let line = self
            .lines
            .recv_timeout(within)
            .expect("drive_kernel.py did not answer");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn run(&mut self, code: &str, timeout: Duration) -> Value {
        self.submit(code, timeout);
        self.reply(timeout + Duration::from_secs(15))
    }

    /// Run `code`, which must succeed; what it printed.
    fn ok(&mut self, code: &str) -> String {
        let reply = self.run(code, Duration::from_secs(60));
        assert_eq!(reply["status"], "ok", "{reply}");
        reply["stdout"].as_str().unwrap_or_default().to_string()
    }
}

impl Drop for Cells {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What every kernel is given first: the helpers the scenarios' cells use.
/// `grow` appends `chunk`-sized bytes objects (each written, so resident)
/// to `store` at `rate` bytes/s until `cap` bytes (`None`: no end), as a
/// cell appending tensors or batches does.
const PRELUDE: &str = r#"import os, time, gc, random, hashlib
GIB, MIB = 1 << 30, 1 << 20

def grow(rate, cap, store, chunk=None):
    chunk = chunk or max(min(rate // 10, 64 * MIB), MIB)
    start = time.monotonic()
    held = 0
    while cap is None or held < cap:
        store.append(b'\x01' * chunk)
        held += chunk
        ahead = held / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    return held

print(os.getpid())
"#;

/// One sample of the cgroup: seconds since the work started, its usage.
#[derive(Clone, Copy)]
struct Point {
    at_ms: u64,
    usage: u64,
}

/// Samples the cgroup every 100 ms on a thread of its own.
struct Monitor {
    stop: Arc<AtomicBool>,
    points: Arc<Mutex<Vec<Point>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Monitor {
    fn start(cgroup: &Cgroup) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let points = Arc::new(Mutex::new(Vec::new()));
        let file = cgroup.usage_file();
        let thread = {
            let (stop, points) = (stop.clone(), points.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let usage = std::fs::read_to_string(&file)
                        .ok()
                        .and_then(|t| t.trim().parse().ok())
                        .unwrap_or(0);
                    points.lock().unwrap().push(Point {
                        at_ms: now_ms(),
                        usage,
                    });
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Self {
            stop,
            points,
            thread: Some(thread),
        }
    }

    fn points(&self) -> Vec<Point> {
        self.points.lock().unwrap().clone()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The machine's memory stall totals, µs: PSI `some` and `full`.
fn psi_totals() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/pressure/memory").unwrap_or_default();
    let total = |kind: &str| {
        text.lines()
            .find(|l| l.starts_with(kind))
            .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("total=")))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (total("some"), total("full"))
}

/// How many processes the kernel's OOM killer has killed since boot.
fn machine_oom_kills() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The embedded default config (`headroom print-config`) with only the
/// journal put in `journal`: its rules are the default rules.
fn default_config(journal: &Path) -> String {
    let from = "# journal = \"/var/lib/headroom/journal.jsonl\"";
    assert!(
        headroom::config::DEFAULT_TOML.contains(from),
        "the default config no longer has {from:?}"
    );
    headroom::config::DEFAULT_TOML.replacen(
        from,
        &format!("journal = \"{}\"", journal.display()),
        1,
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Benign,
    Harmful,
}

/// A signal headroom sent (or tried to), from its journal.
#[derive(Debug, Clone)]
struct Sent {
    action: String,
    pid: u32,
    rule: String,
    outcome: String,
    at_ms: u64,
    detail: String,
}

/// One scenario: its cgroup, the daemon on the default config, the
/// kernels, the monitor, and what was true when the work started.
struct Scenario {
    id: &'static str,
    kind: Kind,
    cgroup: Cgroup,
    dir: tempfile::TempDir,
    daemon: Daemon,
    /// Each kernel's pid and the role it plays (`kernel`, `bystander`).
    roles: Vec<(u32, String)>,
    monitor: Option<Monitor>,
    /// The monitor's samples, once the scenario has finished.
    points: Vec<Point>,
    started_ms: u64,
    psi_before: (u64, u64),
    oom_machine_before: u64,
    failcnt_before: u64,
    _alone: std::sync::MutexGuard<'static, ()>,
}

impl Scenario {
    fn new(id: &'static str, kind: Kind, limit: u64) -> Self {
        let alone = support::whole_machine();
        need_root();
        let cgroup = Cgroup::new(&id.to_lowercase(), limit);
        let dir = support::private_dir();
        let config = default_config(&dir.path().join("journal.jsonl"));
        let daemon = Daemon::start(dir.path(), &config);
        Self {
            id,
            kind,
            cgroup,
            dir,
            daemon,
            roles: Vec::new(),
            monitor: None,
            points: Vec::new(),
            started_ms: now_ms(),
            psi_before: psi_totals(),
            oom_machine_before: machine_oom_kills(),
            failcnt_before: 0,
            _alone: alone,
        }
    }

    /// A kernel in the scenario's cgroup, given the prelude, once the
    /// daemon lists it as a Jupyter kernel.
    fn kernel(&mut self, role: &str) -> (Kernel, Cells) {
        let kernel = Kernel::start(
            &self.cgroup,
            self.dir.path(),
            &format!("{}-{role}", self.id),
        );
        self.listed(kernel, role)
    }

    /// A kernel in a runc container in the scenario's cgroup
    /// ([`Kernel::start_in_container`]), given the prelude, once the daemon
    /// lists it as a Jupyter kernel.
    fn kernel_in_container(&mut self, role: &str) -> (Kernel, Cells) {
        let kernel = Kernel::start_in_container(
            &self.cgroup,
            self.dir.path(),
            &format!("{}-{role}", self.id),
        );
        self.listed(kernel, role)
    }

    fn listed(&mut self, kernel: Kernel, role: &str) -> (Kernel, Cells) {
        let pid = kernel.pid();
        let mut cells = Cells::connect(&kernel);
        let printed = cells.ok(PRELUDE);
        assert_eq!(
            printed.trim(),
            kernel.own_pid.to_string(),
            "the kernel is the child"
        );
        support::wait_for(
            Duration::from_secs(20),
            "the kernel listed as a Jupyter kernel",
            || {
                let (status, body) = self.daemon.get("/api/v1/processes?workload=jupyter");
                let v: Value = serde_json::from_str(&body).ok()?;
                (status == 200 && v["processes"].as_array()?.iter().any(|p| p["pid"] == pid))
                    .then_some(())
            },
        );
        self.roles.push((pid, role.to_string()));
        (kernel, cells)
    }

    /// Note `pids` as playing `role` (workers a cell forked).
    fn name_pids(&mut self, pids: &[u32], role: &str) {
        for &pid in pids {
            self.roles.push((pid, role.to_string()));
        }
    }

    /// The work starts now: the monitor and the counters begin.
    fn begin(&mut self) {
        // Two samples of the daemon's with the kernels idle first.
        std::thread::sleep(Duration::from_secs(2));
        self.started_ms = now_ms();
        self.psi_before = psi_totals();
        self.oom_machine_before = machine_oom_kills();
        self.failcnt_before = self.cgroup.failcnt();
        self.monitor = Some(Monitor::start(&self.cgroup));
    }

    fn role_of(&self, pid: u32) -> String {
        self.roles
            .iter()
            .find(|(p, _)| *p == pid)
            .map_or_else(|| format!("pid{pid}"), |(_, r)| r.clone())
    }

    fn journal(&self) -> Vec<Value> {
        support::journal::events(&self.dir.path().join("journal.jsonl"))
    }

    /// The signals headroom sent or tried to send: `action` events whose
    /// action is a signal, and `skipped` signal steps.
    fn signals(&self) -> Vec<Sent> {
        self.journal()
            .iter()
            .filter(|e| e["event"] == "action" || e["event"] == "skipped")
            .filter(|e| e["action"].as_str().is_some_and(|a| a.starts_with("SIG")))
            .map(|e| Sent {
                action: e["action"].as_str().unwrap_or_default().to_string(),
                pid: e["process"]["pid"].as_u64().unwrap_or(0) as u32,
                rule: e["rule"].as_str().unwrap_or_default().to_string(),
                outcome: if e["event"] == "skipped" {
                    format!("skipped: {}", e["reason"].as_str().unwrap_or_default())
                } else {
                    e["outcome"].as_str().unwrap_or_default().to_string()
                },
                at_ms: e["at"].as_u64().unwrap_or(0),
                detail: e["detail"].as_str().unwrap_or_default().to_string(),
            })
            .collect()
    }

    /// The daemon's notifications.
    fn notifications(&self) -> Vec<Value> {
        self.journal()
            .into_iter()
            .filter(|e| e["event"] == "action" && e["action"] == "notify")
            .collect()
    }

    /// The cgroup's usage closest to `at_ms`.
    fn usage_at(&self, at_ms: u64) -> u64 {
        self.points
            .iter()
            .min_by_key(|p| p.at_ms.abs_diff(at_ms))
            .map_or(0, |p| p.usage)
    }

    /// `headroom explain PID` against the daemon.
    fn explain(&self, pid: u32) -> String {
        let out = Command::new(HEADROOM)
            .args([
                "explain",
                &pid.to_string(),
                "--address",
                &self.daemon.addr.to_string(),
            ])
            .output()
            .expect("run headroom explain");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// Print the lines of `headroom explain PID` that say what the default
    /// notebook rule makes of it now, with the cgroup's usage, for the
    /// record.
    fn print_trend(&self, pid: u32) {
        let usage: u64 = std::fs::read_to_string(self.cgroup.usage_file())
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        let text = self.explain(pid);
        let rule = text.split("rule \"notebook-runaway\"").nth(1).unwrap_or("");
        let said: Vec<&str> = rule
            .lines()
            .filter(|l| l.contains("time to exhaustion") || l.contains("holds:"))
            .map(str::trim)
            .collect();
        println!(
            "  +{:.1}s cgroup {} MiB: {}",
            self.seconds(now_ms()),
            usage / MIB,
            said.join(" | ")
        );
    }

    /// Print `headroom explain PID` as it is now, for the record.
    fn print_explain(&self, pid: u32, what: &str) {
        println!("  explain {what} ({pid}), cgroup at {} MiB:", {
            let usage: u64 = std::fs::read_to_string(self.cgroup.usage_file())
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0);
            usage / MIB
        });
        for line in self.explain(pid).lines() {
            println!("    {line}");
        }
    }

    /// Stop measuring and print the scenario's line (and, for the record,
    /// `headroom explain` of each kernel still alive and the journal's
    /// crossings and actions); what it measured.
    fn finish(&mut self, cell: &str) -> Report {
        let points = self.monitor.take().map(|m| m.points()).unwrap_or_default();
        self.points.clone_from(&points);
        let peak = points.iter().map(|p| p.usage).max().unwrap_or(0);
        let critical = self.cgroup.limit / 20;
        let near_limit_ms: u64 = points
            .windows(2)
            .filter(|w| self.cgroup.limit.saturating_sub(w[0].usage) < critical)
            .map(|w| w[1].at_ms - w[0].at_ms)
            .sum();
        let (some, full) = psi_totals();
        let signals = self.signals();
        let usage_at = |at: u64| {
            points
                .iter()
                .min_by_key(|p| p.at_ms.abs_diff(at))
                .map_or(0, |p| p.usage)
        };
        let report = Report {
            signals: signals.clone(),
            notified: self.notifications().len(),
            peak,
            near_limit_s: near_limit_ms as f64 / 1000.0,
            failcnt: self.cgroup.failcnt() - self.failcnt_before,
            oom_cgroup: self.cgroup.oom_kills(),
            oom_machine: machine_oom_kills() - self.oom_machine_before,
        };
        let first = signals.iter().find(|s| s.outcome == "done");
        let secs = |at: u64| at.saturating_sub(self.started_ms) as f64 / 1000.0;
        let list: Vec<String> = signals
            .iter()
            .map(|s| {
                format!(
                    "{}:{}@{:.1}s{}",
                    s.action,
                    self.role_of(s.pid),
                    secs(s.at_ms),
                    if s.outcome == "done" {
                        ""
                    } else {
                        "(not-done)"
                    }
                )
            })
            .collect();
        println!(
            "scenario {} kind={} limit_mib={} signalled={} first_signal={} first_target={} \
             first_at_s={} usage_at_signal_mib={} signals={} notified={} peak_mib={} \
             near_limit_s={:.1} failcnt={} oom_cgroup={} oom_machine={} psi_some_s={:.2} \
             psi_full_s={:.2} cell={}",
            self.id,
            if self.kind == Kind::Benign {
                "benign"
            } else {
                "harmful"
            },
            self.cgroup.limit / MIB,
            if first.is_some() { "yes" } else { "no" },
            first.map_or("-".into(), |s| s.action.clone()),
            first.map_or("-".into(), |s| self.role_of(s.pid)),
            first.map_or("-".into(), |s| format!("{:.1}", secs(s.at_ms))),
            first.map_or("-".into(), |s| (usage_at(s.at_ms) / MIB).to_string()),
            if list.is_empty() {
                "-".to_string()
            } else {
                list.join(",")
            },
            report.notified,
            peak / MIB,
            report.near_limit_s,
            report.failcnt,
            report.oom_cgroup,
            report.oom_machine,
            some.saturating_sub(self.psi_before.0) as f64 / 1e6,
            full.saturating_sub(self.psi_before.1) as f64 / 1e6,
            cell,
        );
        for e in self.journal() {
            if matches!(
                e["event"].as_str(),
                Some("limit-crossed" | "action" | "skipped" | "limit-held-not-acting")
            ) {
                println!(
                    "  journal +{:.1}s {} {} {} pid={} ({}): {}{}",
                    secs(e["at"].as_u64().unwrap_or(0)),
                    e["event"].as_str().unwrap_or_default(),
                    e["rule"].as_str().unwrap_or_default(),
                    e["action"].as_str().unwrap_or_default(),
                    e["process"]["pid"],
                    self.role_of(e["process"]["pid"].as_u64().unwrap_or(0) as u32),
                    e["detail"]
                        .as_str()
                        .or(e["reason"].as_str())
                        .unwrap_or_default(),
                    // Why it held back, where it did.
                    e["detail"]
                        .as_str()
                        .and(e["reason"].as_str())
                        .map(|r| format!("; not acting: {r}"))
                        .unwrap_or_default()
                );
            }
        }
        for (pid, role) in &self.roles {
            if alive(*pid) && !role.starts_with("worker") {
                self.print_explain(*pid, role);
            }
        }
        report
    }

    /// The signals that reached `pid`.
    fn delivered_to(&self, report: &Report, pid: u32) -> Vec<Sent> {
        report
            .signals
            .iter()
            .filter(|s| s.pid == pid && s.outcome == "done")
            .cloned()
            .collect()
    }

    fn seconds(&self, at_ms: u64) -> f64 {
        at_ms.saturating_sub(self.started_ms) as f64 / 1000.0
    }
}

/// What a scenario measured.
struct Report {
    signals: Vec<Sent>,
    notified: usize,
    peak: u64,
    near_limit_s: f64,
    failcnt: u64,
    oom_cgroup: u64,
    oom_machine: u64,
}

impl Report {
    /// Benign work: no signal sent or tried, nothing killed.
    #[track_caller]
    fn assert_benign(&self, reply: &Value) {
        assert!(
            self.signals.is_empty(),
            "benign work was signalled: {:#?}",
            self.signals
        );
        assert_eq!(reply["status"], "ok", "the cell ran to its end: {reply}");
        assert_eq!(self.oom_cgroup, 0, "the cgroup's OOM killer acted");
        assert_eq!(self.oom_machine, 0, "the machine's OOM killer acted");
    }

    /// Harmful work: nothing killed by an OOM killer, the cgroup never at
    /// its limit.
    #[track_caller]
    fn assert_no_oom(&self) {
        assert_eq!(self.oom_cgroup, 0, "the cgroup's OOM killer acted");
        assert_eq!(self.oom_machine, 0, "the machine's OOM killer acted");
    }
}

/// What a reply's `ename` says, for the scenario line.
fn cell_outcome(reply: &Value) -> String {
    match reply["status"].as_str() {
        Some("ok") => "ok".into(),
        Some("error") => reply["ename"].as_str().unwrap_or("error").to_string(),
        Some(other) => other.to_string(),
        None => "none".into(),
    }
}

/// The first SIGINT delivered to `pid` by the default notebook rule, with
/// the cgroup's usage then below its limit.
#[track_caller]
fn assert_interrupted_in_time(sc: &Scenario, report: &Report, pid: u32) -> Sent {
    let to_kernel = sc.delivered_to(report, pid);
    let sigint = to_kernel
        .iter()
        .find(|s| s.action == "SIGINT")
        .unwrap_or_else(|| panic!("no SIGINT reached the kernel {pid}: {:#?}", report.signals))
        .clone();
    assert_eq!(sigint.rule, "notebook-runaway", "{sigint:?}");
    assert!(
        sigint.detail.contains("exhausted in") || sigint.detail.contains("left"),
        "time to exhaustion set it off: {sigint:?}"
    );
    let usage = sc.usage_at(sigint.at_ms);
    assert!(
        usage < sc.cgroup.limit,
        "signalled at {} MiB, the limit is {} MiB",
        usage / MIB,
        sc.cgroup.limit / MIB
    );
    sigint
}

// ---------------------------------------------------------------------------
// Benign

/// B1: a dataset loaded at about 110 MiB/s to 2.5 GiB (62% of a 4 GiB
/// container), held, then dropped. The room falls toward a third of a
/// minute's worth, so a notification may go; the load ends well below the
/// limit: never a signal.
#[test]
fn b1_a_dataset_load_to_62_percent_of_a_container_is_not_signalled() {
    let mut sc = Scenario::new("B1", Kind::Benign, 4 * GIB);
    let (_kernel, mut cells) = sc.kernel("kernel");
    sc.begin();
    let reply = cells.run(
        "ds = []\nheld = grow(110 * MIB, 2560 * MIB, ds)\ntime.sleep(4)\n\
         print('loaded', held >> 20)\ndel ds; gc.collect()",
        Duration::from_secs(60),
    );
    std::thread::sleep(Duration::from_secs(2));
    let report = sc.finish(&cell_outcome(&reply));
    report.assert_benign(&reply);
    assert!(
        report.peak > 2560 * MIB,
        "the load reached {} MiB",
        report.peak / MIB
    );
}

/// B2: a fast load, about 1.5 GiB/s, to 2.7 GiB (66% of 4 GiB), held.
#[test]
fn b2_a_fast_load_at_1_5_gib_per_second_to_66_percent_is_not_signalled() {
    let mut sc = Scenario::new("B2", Kind::Benign, 4 * GIB);
    let (_kernel, mut cells) = sc.kernel("kernel");
    sc.begin();
    let reply = cells.run(
        "ds = []\nheld = grow(1536 * MIB, 2700 * MIB, ds)\ntime.sleep(5)\n\
         print('loaded', held >> 20)\ndel ds; gc.collect()",
        Duration::from_secs(60),
    );
    std::thread::sleep(Duration::from_secs(2));
    let report = sc.finish(&cell_outcome(&reply));
    report.assert_benign(&reply);
    assert!(report.peak > 2700 * MIB, "peak {} MiB", report.peak / MIB);
}

/// B3: three epochs, each growing 2 GiB at 300 MiB/s and freeing it.
#[test]
fn b3_saw_tooth_epochs_are_not_signalled() {
    let mut sc = Scenario::new("B3", Kind::Benign, 4 * GIB);
    let (_kernel, mut cells) = sc.kernel("kernel");
    sc.begin();
    let reply = cells.run(
        "for epoch in range(3):\n    acts = []\n    grow(300 * MIB, 2 * GIB, acts)\n    \
         del acts; gc.collect()\n    time.sleep(1.5)\nprint('epochs done')",
        Duration::from_secs(60),
    );
    std::thread::sleep(Duration::from_secs(1));
    let report = sc.finish(&cell_outcome(&reply));
    report.assert_benign(&reply);
    assert!(report.peak > 2 * GIB, "peak {} MiB", report.peak / MIB);
}

/// B4: a kernel holding 2 GiB forks 8 workers that read it through
/// memoryview slices (hashing it) for 20 s: shared pages, never written,
/// counted once. The cgroup holds about 2.1 GiB throughout.
#[test]
fn b4_a_forked_pool_that_only_reads_what_it_shares_is_not_signalled() {
    let mut sc = Scenario::new("B4", Kind::Benign, 4 * GIB);
    let (kernel, mut cells) = sc.kernel("kernel");
    cells.ok("data = b'\\x01' * (2 * GIB)\nprint(len(data) >> 20)");
    sc.begin();
    cells.submit(
        r#"def reader(seconds):
    mv = memoryview(data)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for off in range(0, len(mv), 16 * MIB):
            hashlib.md5(mv[off:off + 16 * MIB]).digest()
            if time.monotonic() >= end:
                break

pids = []
for i in range(8):
    pid = os.fork()
    if pid == 0:
        try:
            reader(20)
        finally:
            os._exit(0)
    pids.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]
print(*codes)
"#,
        Duration::from_secs(60),
    );
    let workers = support::wait_for(Duration::from_secs(10), "8 workers", || {
        let kids: Vec<u32> = sc
            .cgroup
            .procs()
            .into_iter()
            .filter(|p| *p != kernel.pid())
            .collect();
        (kids.len() == 8).then_some(kids)
    });
    sc.name_pids(&workers, "worker");
    let reply = cells.reply(Duration::from_secs(75));
    let report = sc.finish(&cell_outcome(&reply));
    report.assert_benign(&reply);
    assert_eq!(
        reply["stdout"].as_str().unwrap_or_default().trim(),
        "0 0 0 0 0 0 0 0",
        "every worker read to its end: {reply}"
    );
    assert!(
        report.peak < 3 * GIB,
        "the shared 2 GiB stayed shared: peak {} MiB",
        report.peak / MIB
    );
}

/// B5: a compile peak: twice, a burst to 2 GiB (50% of 4 GiB) as fast as
/// memory is written, held a second, then released.
#[test]
fn b5_a_compile_peak_to_half_the_limit_is_not_signalled() {
    let mut sc = Scenario::new("B5", Kind::Benign, 4 * GIB);
    let (_kernel, mut cells) = sc.kernel("kernel");
    sc.begin();
    let reply = cells.run(
        "for burst in range(2):\n    peak = [b'\\x01' * (256 * MIB) for _ in range(8)]\n    \
         time.sleep(1)\n    del peak; gc.collect()\n    time.sleep(3)\nprint('compiled')",
        Duration::from_secs(60),
    );
    std::thread::sleep(Duration::from_secs(1));
    let report = sc.finish(&cell_outcome(&reply));
    report.assert_benign(&reply);
    assert!(report.peak > 2 * GIB, "peak {} MiB", report.peak / MIB);
}

// ---------------------------------------------------------------------------
// Harmful

/// H1: a leak inside a 4 GiB container, 200 MiB/s without end (a list
/// that keeps every step's tensors). SIGINT reaches the kernel before the
/// limit; KeyboardInterrupt stops the growth; the kernel lives on with its
/// variables; the OOM killer never acts.
#[test]
fn h1_a_leak_in_a_container_is_interrupted_before_the_limit() {
    let mut sc = Scenario::new("H1", Kind::Harmful, 4 * GIB);
    let (kernel, cells) = sc.kernel("kernel");
    leak_is_interrupted_before_the_limit(sc, kernel, cells);
}

/// H6: the leak of H1 in a real OCI container: Debian's runc, with pid and
/// mount namespaces of its own and the 4 GiB memory limit runc sets, the
/// kernel a child of the container's init (as under `docker run --init`).
/// The kernel sees itself by a pid of its namespace; the daemon on the host
/// must find it, judge it against its container's limit and interrupt the
/// cell before the container's OOM killer acts, and the kernel survives.
#[test]
fn h6_a_leak_in_a_runc_container_is_interrupted_before_the_limit() {
    let mut sc = Scenario::new("H6", Kind::Harmful, 4 * GIB);
    let (kernel, cells) = sc.kernel_in_container("kernel");
    leak_is_interrupted_before_the_limit(sc, kernel, cells);
}

/// H1's and H6's work and what they assert: a cell leaking 200 MiB/s gets
/// SIGINT before the limit, stops with KeyboardInterrupt, and the same
/// kernel (by the pid it sees itself by) keeps its variables; no SIGTERM
/// to anyone, no OOM kill.
fn leak_is_interrupted_before_the_limit(mut sc: Scenario, kernel: Kernel, mut cells: Cells) {
    cells.ok("model = {'note': 'survives'}");
    sc.begin();
    let reply = cells.run(
        "leak = []\ngrow(200 * MIB, None, leak)",
        Duration::from_secs(60),
    );
    let after = cells.ok("print(model['note'], sum(map(len, leak)) >> 20, os.getpid())");
    cells.ok("del leak; gc.collect()");
    std::thread::sleep(Duration::from_secs(2));
    let where_ = if kernel.own_pid == kernel.pid() {
        String::new()
    } else {
        format!(" (pid {} in its container)", kernel.own_pid)
    };
    let report = sc.finish(&format!("{}{where_}", cell_outcome(&reply)));
    println!("  after: {after}");
    report.assert_no_oom();
    assert_eq!(reply["ename"], "KeyboardInterrupt", "{reply}");
    let sigint = assert_interrupted_in_time(&sc, &report, kernel.pid());
    let words: Vec<&str> = after.split_whitespace().collect();
    assert_eq!(words[0], "survives", "{after}");
    assert_eq!(words[2], kernel.own_pid.to_string(), "the same kernel");
    let held_mib: u64 = words[1].parse().unwrap();
    assert!(
        held_mib * MIB < sc.cgroup.limit,
        "held {held_mib} MiB at the interrupt"
    );
    // Not a SIGTERM to anyone: KeyboardInterrupt was enough.
    assert!(
        report.signals.iter().all(|s| s.action == "SIGINT"),
        "{:#?}",
        report.signals
    );
    println!(
        "  SIGINT at {:.1}s, {held_mib} MiB held by the cell",
        sc.seconds(sigint.at_ms)
    );
    // The kernel (and its container) before the scenario's cgroup.
    drop(cells);
    drop(kernel);
}

/// H2: a kernel's pool of 4 forked workers, each allocating 100 MiB/s
/// inside a 4 GiB container (400 MiB/s together). The job's total runs the
/// limit out: SIGINT to the kernel, whose pool then tears its workers down.
#[test]
fn h2_forked_workers_that_allocate_get_their_kernel_interrupted() {
    let mut sc = Scenario::new("H2", Kind::Harmful, 4 * GIB);
    let (kernel, mut cells) = sc.kernel("kernel");
    cells.ok("import multiprocessing as mp\nmodel = {'note': 'survives'}");
    sc.begin();
    cells.submit(
        r#"def alloc(i):
    blocks = []
    grow(100 * MIB, 3 * GIB, blocks)
    time.sleep(60)

with mp.get_context('fork').Pool(4) as pool:
    pool.map(alloc, range(4), chunksize=1)
"#,
        Duration::from_secs(60),
    );
    let workers = support::wait_for(Duration::from_secs(10), "4 workers", || {
        let kids: Vec<u32> = sc
            .cgroup
            .procs()
            .into_iter()
            .filter(|p| *p != kernel.pid())
            .collect();
        (kids.len() == 4).then_some(kids)
    });
    sc.name_pids(&workers, "worker");
    let reply = cells.reply(Duration::from_secs(75));
    let after = cells.ok("print(model['note'], os.getpid(), len(mp.active_children()))");
    std::thread::sleep(Duration::from_secs(2));
    let report = sc.finish(&cell_outcome(&reply));
    println!("  after: {after}");
    report.assert_no_oom();
    assert_eq!(reply["ename"], "KeyboardInterrupt", "{reply}");
    assert_interrupted_in_time(&sc, &report, kernel.pid());
    let words: Vec<&str> = after.split_whitespace().collect();
    assert_eq!(words[..3], ["survives", &kernel.pid().to_string(), "0"]);
    assert!(
        workers.iter().all(|w| !alive(*w)),
        "the pool's workers are gone"
    );
}

/// H3: copy on access (pytorch issue #13246's mechanism, without torch): a
/// kernel builds a list of 40 million ints (about 1.5 GiB) and forks 4
/// workers that read it in shuffled batches of 4096; each read writes the
/// items' refcounts, copying the pages they share, about 75 MiB/s per
/// worker, 300 MiB/s together, while no worker allocates. The copies would
/// take 4.8 GiB more in a 4 GiB container. The workers outlive an interrupted
/// cell (as a DataLoader's do while its iterator lives): SIGINT to the
/// kernel, then SIGTERM to the workers as the copying goes on, before the
/// OOM killer.
#[test]
fn h3_forked_workers_that_copy_on_access_are_stopped_before_the_oom_killer() {
    let mut sc = Scenario::new("H3", Kind::Harmful, 4 * GIB);
    let (kernel, mut cells) = sc.kernel("kernel");
    cells.ok(
        "model = {'note': 'survives'}\nN, B = 40_000_000, 4096\ndata = list(range(N))\n\
         print(len(data))",
    );
    sc.begin();
    cells.submit(
        r#"def copier(seed, rate):
    order = list(range(N // B))
    random.Random(seed).shuffle(order)
    start = time.monotonic()
    done = 0
    for b in order:
        batch = data[b * B:(b + 1) * B]
        del batch
        done += B * 32
        ahead = done / rate - (time.monotonic() - start)
        if ahead > 0.005:
            time.sleep(ahead)
    time.sleep(60)

workers = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            copier(i, 75 * MIB)
        finally:
            os._exit(0)
    workers.append(pid)
for pid in workers:
    os.waitpid(pid, 0)
"#,
        Duration::from_secs(60),
    );
    let workers = support::wait_for(Duration::from_secs(10), "4 workers", || {
        let kids: Vec<u32> = sc
            .cgroup
            .procs()
            .into_iter()
            .filter(|p| *p != kernel.pid())
            .collect();
        (kids.len() == 4).then_some(kids)
    });
    sc.name_pids(&workers, "worker");
    // What the daemon makes of the job while the copies grow, every 2 s.
    let deadline = Instant::now() + Duration::from_secs(75);
    let reply = loop {
        if let Some(reply) = cells.try_reply(Duration::from_secs(2)) {
            break reply;
        }
        assert!(Instant::now() < deadline, "the cell never ended");
        sc.print_trend(kernel.pid());
    };
    // The copying goes on after an interrupt: give the ladder's next step
    // its time, then see who is left.
    std::thread::sleep(Duration::from_secs(5));
    let left: Vec<u32> = workers.iter().copied().filter(|w| alive(*w)).collect();
    let kernel_alive = alive(kernel.pid());
    let report = sc.finish(&format!(
        "{} workers_left={}",
        cell_outcome(&reply),
        left.len()
    ));
    report.assert_no_oom();
    assert!(kernel_alive, "the kernel lives");
    assert_eq!(reply["ename"], "KeyboardInterrupt", "{reply}");
    let sigint = assert_interrupted_in_time(&sc, &report, kernel.pid());
    // The workers copied on after the interrupt: each got SIGTERM.
    for w in &workers {
        let to_worker = sc.delivered_to(&report, *w);
        assert!(
            to_worker
                .iter()
                .any(|s| s.action == "SIGTERM" && s.at_ms >= sigint.at_ms),
            "worker {w} got no SIGTERM after the kernel's SIGINT: {:#?}",
            report.signals
        );
    }
    assert!(left.is_empty(), "workers left copying: {left:?}");
}

/// H7: workers that outlive their kernel. A kernel forks 4 workers that
/// each allocate 60 MiB/s (240 MiB/s together) inside a 4 GiB container,
/// and the kernel is then killed (SIGKILL, as the OOM killer or a user's
/// `kill -9` ends it); its workers are re-parented to init and go on. They
/// must stay the kernel's job: the default rule acts on them (SIGINT to the
/// eldest, standing for the kernel, then SIGTERM to every member) before
/// the container's OOM killer.
#[test]
fn h7_workers_that_outlive_their_kernel_stay_its_job_and_are_stopped_before_the_limit() {
    let mut sc = Scenario::new("H7", Kind::Harmful, 4 * GIB);
    let (kernel, mut cells) = sc.kernel("kernel");
    sc.begin();
    // Each worker leaves by itself on KeyboardInterrupt (as a DataLoader's
    // worker loop does) and never returns into the kernel's code.
    let reply = cells.run(
        r#"pids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            blocks = []
            grow(60 * MIB, None, blocks)
        finally:
            os._exit(0)
    pids.append(pid)
print(*pids)
"#,
        Duration::from_secs(20),
    );
    let workers: Vec<u32> = reply["stdout"]
        .as_str()
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(workers.len(), 4, "{reply}");
    sc.name_pids(&workers, "worker");
    std::thread::sleep(Duration::from_secs(1));
    kill(kernel.pid(), "KILL");
    drop(cells);
    // The workers run on until something stops them (or 60 s).
    let deadline = Instant::now() + Duration::from_secs(60);
    while workers.iter().any(|w| alive(*w)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let left: Vec<u32> = workers.iter().copied().filter(|w| alive(*w)).collect();
    std::thread::sleep(Duration::from_secs(1));
    let report = sc.finish(&format!("kernel killed, workers_left={}", left.len()));
    report.assert_no_oom();
    let to_workers: Vec<Sent> = workers
        .iter()
        .flat_map(|w| sc.delivered_to(&report, *w))
        .collect();
    assert!(
        !to_workers.is_empty(),
        "no signal reached the orphaned workers: {:#?}",
        report.signals
    );
    for s in &to_workers {
        assert_eq!(s.rule, "notebook-runaway", "{s:?}");
        assert!(
            sc.usage_at(s.at_ms) < sc.cgroup.limit,
            "signalled at the limit: {s:?}"
        );
    }
    assert!(left.is_empty(), "workers left allocating: {left:?}");
}

/// A private tmpfs mounted for one scenario, unmounted when dropped (its
/// files go with it), so that the host's /dev/shm stays clean. Its pages
/// are charged to the memory cgroup of whoever writes them, as /dev/shm's.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path) -> Self {
        let point = dir.join("shm");
        std::fs::create_dir(&point).unwrap();
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                "size=8g,mode=1777",
                "headroom-scenario",
            ])
            .arg(&point)
            .status()
            .expect("run mount");
        assert!(status.success(), "mount -t tmpfs at {}", point.display());
        Self(point)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// H4: a tmpfs leak (a cell writing files to a shared-memory tmpfs at 200
/// MiB/s) inside a 4 GiB container, beside an innocent kernel holding 1 GiB.
/// The files are memory no process owns: no process's footprint grows
/// while the cgroup's room runs out. The innocent kernel must never be
/// signalled. The writer stops on its own 192 MiB below the limit (so that
/// a miss leaves the host clean); what headroom did about the writer is
/// recorded in the scenario line.
#[test]
fn h4_a_tmpfs_leak_never_gets_an_innocent_kernel_signalled() {
    let mut sc = Scenario::new("H4", Kind::Harmful, 4 * GIB);
    let tmpfs = Tmpfs::mount(sc.dir.path());
    let (bystander, mut innocent) = sc.kernel("bystander");
    let (writer, mut cells) = sc.kernel("writer");
    innocent.ok("keep = b'\\x01' * GIB\nprint(len(keep) >> 20)");
    // Past the default rule's 10 s window: the innocent kernel's own load
    // is history, and only the files move.
    std::thread::sleep(Duration::from_secs(11));
    sc.begin();
    innocent.submit("time.sleep(45)\nprint('idle')", Duration::from_secs(60));
    let usage_file = sc.cgroup.usage_file();
    cells.submit(
        &format!(
            r#"chunk = b'\x02' * (32 * MIB)
start, n = time.monotonic(), 0
stop_at = {stop}
while int(open('{usage}').read()) < stop_at:
    with open(f'{dir}/blob-{{n}}', 'wb') as f:
        f.write(chunk)
    n += 1
    ahead = n * 32 * MIB / (200 * MIB) - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)
print('wrote', n * 32)
"#,
            stop = sc.cgroup.limit - 192 * MIB,
            usage = usage_file.display(),
            dir = tmpfs.0.display(),
        ),
        Duration::from_secs(60),
    );
    // What the default rule makes of the innocent kernel, every 2 s.
    let reply = loop {
        if let Some(reply) = cells.try_reply(Duration::from_secs(2)) {
            break reply;
        }
        sc.print_trend(bystander.pid());
    };
    // The daemon reports the files as memory no process owns.
    let mount = tmpfs.0.display().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let (unowned, last) = loop {
        let (_, body) = sc.daemon.get("/api/v1/snapshot");
        let snap: Value = serde_json::from_str(&body).unwrap_or_default();
        let last = snap["unowned"].clone();
        // The largest files are listed (a few), the total is of them all.
        let listed = last["tmpfs_files"].as_array().is_some_and(|files| {
            files
                .iter()
                .any(|f| f["path"].as_str().is_some_and(|p| p.starts_with(&mount)))
        });
        let bytes = last["tmpfs_bytes"].as_u64().unwrap_or(0);
        // What the writer wrote: the limit less its stop, the innocent
        // kernel's 1 GiB and both interpreters.
        if listed && bytes >= 2560 * MIB {
            break (Some(bytes), last);
        }
        if Instant::now() > deadline {
            break (None, last);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    std::thread::sleep(Duration::from_secs(2));
    let report = sc.finish(&format!(
        "{} unowned_mib={}",
        cell_outcome(&reply),
        unowned.map_or("-".into(), |b| (b / MIB).to_string())
    ));
    let innocent_reply = innocent.reply(Duration::from_secs(60));
    let to_bystander = sc.delivered_to(&report, bystander.pid());
    assert!(
        to_bystander.is_empty(),
        "the innocent kernel was signalled: {to_bystander:#?}"
    );
    assert_eq!(innocent_reply["status"], "ok", "{innocent_reply}");
    report.assert_no_oom();
    assert!(
        unowned.is_some(),
        "the daemon never reported the files under {mount} as unowned: {last}"
    );
    println!(
        "  writer {}: {}; signals to it: {:?}",
        writer.pid(),
        cell_outcome(&reply),
        sc.delivered_to(&report, writer.pid())
    );
}

/// H5: two tasks in one 2 GiB cgroup (two process trees, as `srun -n2`
/// starts), each growing 90 MiB/s without end. Each counts toward the
/// fall; each must be interrupted before the limit, and the OOM killer
/// never acts.
#[test]
fn h5_two_tasks_filling_one_cgroup_are_both_interrupted_before_the_limit() {
    let mut sc = Scenario::new("H5", Kind::Harmful, 2 * GIB);
    let (first, mut a) = sc.kernel("task0");
    let (second, mut b) = sc.kernel("task1");
    sc.begin();
    for cells in [&mut a, &mut b] {
        cells.submit(
            "leak = []\ngrow(90 * MIB, None, leak)",
            Duration::from_secs(60),
        );
    }
    let reply_a = a.reply(Duration::from_secs(75));
    let reply_b = b.reply(Duration::from_secs(75));
    let held = |cells: &mut Cells| {
        let text = cells.ok("print(sum(map(len, leak)) >> 20)\n");
        cells.ok("del leak; gc.collect()");
        text.trim().to_string()
    };
    let held_a = held(&mut a);
    let held_b = held(&mut b);
    std::thread::sleep(Duration::from_secs(1));
    let report = sc.finish(&format!(
        "{}/{} held_mib={held_a}/{held_b}",
        cell_outcome(&reply_a),
        cell_outcome(&reply_b)
    ));
    report.assert_no_oom();
    for (kernel, reply) in [(&first, &reply_a), (&second, &reply_b)] {
        assert_eq!(reply["ename"], "KeyboardInterrupt", "{reply}");
        assert_interrupted_in_time(&sc, &report, kernel.pid());
    }
}
