//! Post-mortems of real crashes (environment tier: needs root, a Linux
//! kernel log, `cc` and `target/jupyter-venv`).
//!
//! Real Jupyter kernels (ipykernel from `target/jupyter-venv`, made by
//! `scripts/jupyter-venv.sh`, started with `-f …/kernel-<id>.json` as a
//! Jupyter server starts them) run cells that crash: one dies of SIGSEGV in
//! a thread of its own inside a native library, one of SIGILL (`ud2`) in
//! the same library, built here with `cc` from the two lines in
//! [`LIBRARY_C`]. A real `headroom run`, reading `/dev/kmsg` as root,
//! writes their post-mortems: the journal, `headroom events`, the API and
//! the metrics must name the signal and the library, say the kernel log
//! told, and say memory was not the reason. A kernel-like Python process
//! the kernel's OOM killer takes in a memory cgroup keeps its OOM
//! post-mortem.
//!
//! Fails, saying why, where it cannot run: not root (the kernel log needs
//! root or CAP_SYSLOG), `debug.exception-trace` off (the kernel then logs no
//! faults), no `cc`, no venv.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::hog::Daemon;
use crate::support::{self, Reaped};
use serde_json::Value;

/// The native library the crashing cells call.
const LIBRARY_C: &str = "int crashing_op_segv(void) { return *(volatile int *)0; }\n\
                         void crashing_op_ill(void) { __builtin_trap(); }\n";

fn require_environment() {
    let euid = headroom::os::this_process::effective_uid();
    assert_eq!(
        euid, 0,
        "tests/crash_postmortems.rs must run as root (it is an environment-tier test): the daemon \
         learns of crashes from the kernel log, /dev/kmsg, which needs root or CAP_SYSLOG; run it \
         with sudo"
    );
    let trace = std::fs::read_to_string("/proc/sys/debug/exception-trace").unwrap_or_default();
    assert_eq!(
        trace.trim(),
        "1",
        "debug.exception-trace is {:?}: the kernel logs no fault lines, so no crash can be \
         recorded; `sysctl debug.exception-trace=1` turns them on",
        trace.trim()
    );
}

fn venv_python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/jupyter-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/jupyter-venv.sh to install ipykernel and jupyter_client",
        python.display()
    );
    python
}

/// `libcrashing_op.so` built in `dir`.
fn crashing_library(dir: &Path) -> PathBuf {
    let source = dir.join("crashing_op.c");
    std::fs::write(&source, LIBRARY_C).unwrap();
    let lib = dir.join("libcrashing_op.so");
    let cc = support::tool("cc", "CC", "gcc");
    let status = Command::new(cc)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&source)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed to build {}", lib.display());
    lib
}

/// A real ipykernel, started like a Jupyter server starts one, and a
/// client that sends it cells.
struct Kernel {
    process: Reaped,
    driver: Reaped,
    cells: ChildStdin,
}

impl Kernel {
    fn start(dir: &Path, id: &str) -> Kernel {
        let python = venv_python();
        let connection = dir.join(format!("kernel-{id}.json"));
        let process = Reaped(
            Command::new(&python)
                .args(["-m", "ipykernel_launcher", "-f"])
                .arg(&connection)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start ipykernel"),
        );
        support::wait_for(
            Duration::from_secs(60),
            "the kernel's connection file",
            || std::fs::metadata(&connection).ok().filter(|m| m.len() > 0),
        );
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jupyter/drive_kernel.py");
        let mut driver: Child = Command::new(&python)
            .arg(script)
            .arg(&connection)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start drive_kernel.py");
        let cells = driver.stdin.take().unwrap();
        let mut out = std::io::BufReader::new(driver.stdout.take().unwrap());
        let mut ready = String::new();
        std::io::BufRead::read_line(&mut out, &mut ready).unwrap();
        assert!(ready.contains("\"ready\": true"), "{ready:?}");
        Kernel {
            process,
            driver: Reaped(driver),
            cells,
        }
    }

    fn pid(&self) -> u32 {
        self.process.0.id()
    }

    /// Send `code` as a cell; no reply is awaited (the kernel dies).
    fn run(&mut self, code: &str) {
        let request = serde_json::json!({ "code": code, "timeout": 30 });
        writeln!(self.cells, "{request}").unwrap();
        self.cells.flush().unwrap();
    }
}

fn start_daemon(dir: &Path) -> Daemon {
    let config = format!(
        "[daemon]\ninterval = \"100ms\"\nfast_interval = \"50ms\"\njournal = \"{}\"\n",
        dir.join("journal.jsonl").display()
    );
    Daemon::start(dir, &config)
}

fn journal(dir: &Path) -> Vec<Value> {
    support::journal::events(&dir.join("journal.jsonl"))
}

fn postmortem_of(dir: &Path, pid: u32) -> Value {
    support::wait_for(Duration::from_secs(30), "the post-mortem", || {
        journal(dir)
            .into_iter()
            .find(|e| e["event"] == "exited" && e["process"]["pid"] == pid)
    })
}

fn listed(daemon: &Daemon, pid: u32) {
    support::wait_for(Duration::from_secs(30), "the process listed as ML", || {
        let (status, body) = daemon.get(&format!("/api/v1/processes/{pid}"));
        (status == 200 && body.contains("\"jupyter\"")).then_some(())
    });
    // One more sample, so the threads it started are known too.
    std::thread::sleep(Duration::from_millis(500));
}

fn headroom_events(dir: &Path) -> String {
    let out = Command::new(support::BIN)
        .args(["events", "--journal"])
        .arg(dir.join("journal.jsonl"))
        .output()
        .expect("run headroom events");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_kernel_that_segfaults_in_a_thread_gets_a_crash_postmortem() {
    require_environment();
    let sandbox = support::private_dir();
    let lib = crashing_library(sandbox.path());
    let daemon = start_daemon(sandbox.path());
    let mut kernel = Kernel::start(sandbox.path(), "segv-5f0c2d1e");
    let pid = kernel.pid();
    listed(&daemon, pid);
    kernel.run(&format!(
        "import ctypes, threading, time\n\
         lib = ctypes.CDLL({lib:?})\n\
         def work():\n    time.sleep(1.5)\n    lib.crashing_op_segv()\n\
         t = threading.Thread(target=work)\n\
         t.start()\n\
         t.join()\n",
        lib = lib.display().to_string()
    ));
    let ended = postmortem_of(sandbox.path(), pid);
    let cause = &ended["cause"];
    assert_eq!(cause["kind"], "crashed", "{ended}");
    assert_eq!(cause["signal"], "SIGSEGV", "{cause}");
    assert_eq!(cause["library"], "libcrashing_op.so", "{cause}");
    assert_eq!(cause["not_memory"], true, "{cause}");
    let how = cause["how"].as_str().unwrap();
    assert!(
        how.starts_with(&format!(
            "the kernel log (/dev/kmsg) recorded a crash of pid {pid} "
        )),
        "{how}"
    );
    assert!(
        how.contains(", in its thread "),
        "the thread was told apart: {how}"
    );
    assert!(
        cause["detail"]
            .as_str()
            .is_some_and(|d| d.contains("segfault at 0") && d.contains("libcrashing_op.so")),
        "{cause}"
    );

    // The same post-mortem everywhere post-mortems go.
    let line = headroom_events(sandbox.path())
        .lines()
        .find(|l| l.contains("post-mortem") && l.contains(&format!("pid {pid}")))
        .map(str::to_string)
        .expect("a post-mortem line");
    assert!(
        line.contains("died: crashed: SIGSEGV in libcrashing_op.so; not for want of memory: "),
        "{line}"
    );
    // Published with the next sample after the journal has it.
    support::wait_for(
        Duration::from_secs(10),
        "the post-mortem in the API",
        || {
            let (_, events) = daemon.get("/api/v1/events");
            events.contains("\"kind\":\"crashed\"").then_some(())
        },
    );
    // At least this one: the daemon watches every ML process on the
    // machine, the other tests' crashing kernels too.
    support::wait_for(
        Duration::from_secs(10),
        "the crash counted in the metrics",
        || {
            let (_, metrics) = daemon.get("/metrics");
            let count: f64 = metrics
                .lines()
                .find_map(|l| l.strip_prefix("headroom_process_exits_total{cause=\"crashed\"} "))?
                .parse()
                .ok()?;
            (count >= 1.0).then_some(())
        },
    );
    let (_, snapshot) = daemon.get("/api/v1/snapshot");
    assert!(
        snapshot.contains("\"kernel-log\""),
        "the collector is listed: {snapshot}"
    );
    drop(kernel.driver);
}

#[test]
fn a_kernel_that_hits_an_illegal_instruction_gets_a_sigill_postmortem() {
    require_environment();
    let sandbox = support::private_dir();
    let lib = crashing_library(sandbox.path());
    let daemon = start_daemon(sandbox.path());
    let mut kernel = Kernel::start(sandbox.path(), "ill-7b1a4c8e");
    let pid = kernel.pid();
    listed(&daemon, pid);
    kernel.run(&format!(
        "import ctypes\nctypes.CDLL({:?}).crashing_op_ill()\n",
        lib.display().to_string()
    ));
    let ended = postmortem_of(sandbox.path(), pid);
    let cause = &ended["cause"];
    assert_eq!(cause["kind"], "crashed", "{ended}");
    assert_eq!(cause["signal"], "SIGILL", "{cause}");
    assert_eq!(cause["library"], "libcrashing_op.so", "{cause}");
    let how = cause["how"].as_str().unwrap();
    assert!(
        how.contains(&format!("recorded a crash of pid {pid} ("))
            && how.contains("trap invalid opcode in libcrashing_op.so, which ends it with SIGILL"),
        "{how}"
    );
    assert!(!how.contains("in its thread"), "the main thread: {how}");
    let line = headroom_events(sandbox.path());
    assert!(
        line.contains("died: crashed: SIGILL in libcrashing_op.so; not for want of memory"),
        "{line}"
    );
    drop(daemon);
}

/// A memory cgroup of its own, removed when dropped. Cgroup v1 (a
/// `memory` hierarchy) or v2 (the unified one), whichever the machine has.
struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    fn new(limit: u64) -> MemoryCgroup {
        let name = format!("headroom-crash-test-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let (dir, limit_file) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.join(&name), "memory.limit_in_bytes")
        } else {
            (Path::new("/sys/fs/cgroup").join(&name), "memory.max")
        };
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot make the memory cgroup {}: {e}", dir.display()));
        std::fs::write(dir.join(limit_file), limit.to_string()).unwrap();
        // No swap to hide in, where the cgroup has the knob.
        let _ = std::fs::write(dir.join("memory.swappiness"), "0");
        let _ = std::fs::write(dir.join("memory.swap.max"), "0");
        MemoryCgroup { dir }
    }

    fn enter(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn a_kernel_the_oom_killer_takes_keeps_its_oom_postmortem() {
    require_environment();
    let sandbox = support::private_dir();
    let daemon = start_daemon(sandbox.path());
    let cgroup = MemoryCgroup::new(96 << 20);
    // A kernel-like Python (a Jupyter connection file in its argv) that
    // allocates 8 MiB at a time once told to.
    let connection = sandbox.path().join("kernel-oom-3f2b8c1d.json");
    std::fs::write(&connection, "{}\n").unwrap();
    let mut child = Command::new(venv_python())
        .args([
            "-c",
            "import sys\nsys.stdin.readline()\nheld = []\nwhile True:\n    held.append(b'x' * (8 << 20))\n",
            "-f",
        ])
        .arg(&connection)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start python");
    let mut go = child.stdin.take().unwrap();
    let hog = Reaped(child);
    let pid = hog.0.id();
    cgroup.enter(pid);
    listed(&daemon, pid);
    writeln!(go, "go").unwrap();
    let ended = postmortem_of(sandbox.path(), pid);
    let cause = &ended["cause"];
    assert_eq!(cause["kind"], "oom-killer", "{ended}");
    let how = cause["how"].as_str().unwrap();
    assert!(
        how.starts_with(&format!(
            "/dev/kmsg recorded the kernel's OOM killer killing pid {pid} "
        )),
        "{how}"
    );
    assert!(how.contains("memory cgroup"), "{how}");
    assert!(
        cause.get("not_memory").is_none(),
        "memory was the reason: {cause}"
    );
    let line = headroom_events(sandbox.path());
    assert!(
        line.contains("died: killed by the kernel OOM killer at "),
        "{line}"
    );
}
