//! Notebook awareness with a real Jupyter server and a real ipykernel.
//!
//! `scripts/jupyter-venv.sh` (run by `scripts/test.sh`) installs
//! jupyter_server, ipykernel and jupyter_client from PyPI into
//! `target/jupyter-venv`. Each test starts a Jupyter server on loopback with
//! a token and its own runtime directory, creates a session for a notebook
//! path through the REST API, runs cells on the kernel with
//! `tests/fixtures/jupyter/drive_kernel.py` (jupyter_client over the
//! connection file the server wrote), and runs the real daemon with a
//! `[jupyter] runtime_dirs` entry for that directory. Everything started is
//! killed when the test ends, pass or fail.
#![cfg(target_os = "linux")]

use crate::support;
use crate::support::hog::Daemon;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const MIB: u64 = 1 << 20;

fn venv_python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/jupyter-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/jupyter-venv.sh (scripts/test.sh does) to install \
         jupyter_server, ipykernel and jupyter_client into it",
        python.display()
    );
    python
}

/// The pids whose command line contains `needle`.
fn pids_with(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            pids.push(pid);
        }
    }
    pids
}

fn kill(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

fn wait_for<T>(what: &str, within: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Jupyter server on loopback with a token, its runtime directory and
/// notebook root in a temporary directory.
struct Jupyter {
    server: Child,
    dir: tempfile::TempDir,
    url: String,
    token: String,
}

impl Jupyter {
    fn start() -> Self {
        let python = venv_python();
        let dir = tempfile::tempdir().unwrap();
        for sub in ["runtime", "root", "config", "data"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let token = format!("headroom-test-{}", std::process::id());
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let server = Command::new(&python)
            .args(["-m", "jupyter_server", "--no-browser", "--ip=127.0.0.1"])
            .args(["--port=0", "--ServerApp.port_retries=0", "--allow-root"])
            .arg(format!("--IdentityProvider.token={token}"))
            .arg(format!(
                "--ServerApp.root_dir={}",
                dir.path().join("root").display()
            ))
            .env("JUPYTER_RUNTIME_DIR", dir.path().join("runtime"))
            .env("JUPYTER_CONFIG_DIR", dir.path().join("config"))
            .env("JUPYTER_DATA_DIR", dir.path().join("data"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start jupyter_server");
        let mut jupyter = Jupyter {
            server,
            dir,
            url: String::new(),
            token,
        };
        let runtime = jupyter.runtime();
        jupyter.url = wait_for("the server's runtime file", Duration::from_secs(60), || {
            let entries = std::fs::read_dir(&runtime).ok()?;
            for e in entries.map_while(Result::ok) {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("jpserver-") && name.ends_with(".json") {
                    let text = std::fs::read_to_string(e.path()).ok()?;
                    let info: Value = serde_json::from_str(&text).ok()?;
                    return info["url"].as_str().map(str::to_owned);
                }
            }
            None
        });
        // The runtime file can be written a moment before the server
        // accepts connections: wait for it to answer.
        let status = format!("{}api/status", jupyter.url);
        wait_for("the server to answer", Duration::from_secs(60), || {
            Self::agent()
                .get(&status)
                .header("Authorization", &format!("token {}", jupyter.token))
                .call()
                .ok()
                .filter(|r| r.status().as_u16() == 200)
        });
        jupyter
    }

    fn runtime(&self) -> PathBuf {
        self.dir.path().join("runtime")
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .proxy(None)
            .build()
            .into()
    }

    /// Create a session for `path` with a python3 kernel; its kernel id and
    /// the kernel process's pid.
    fn open_notebook(&self, path: &str) -> (String, u32) {
        let body = json!({
            "path": path,
            "name": Path::new(path).file_name().unwrap().to_str().unwrap(),
            "type": "notebook",
            "kernel": { "name": "python3" },
        });
        let mut res = Self::agent()
            .post(&format!("{}api/sessions", self.url))
            .header("Authorization", &format!("token {}", self.token))
            .send_json(&body)
            .unwrap_or_else(|e| {
                let log = std::fs::read_to_string(self.dir.path().join("server.log"));
                panic!("POST {}api/sessions: {e}; server log: {log:?}", self.url)
            });
        let status = res.status().as_u16();
        let text = res.body_mut().read_to_string().unwrap();
        assert_eq!(status, 201, "POST /api/sessions: {text}");
        let session: Value = serde_json::from_str(&text).unwrap();
        let kernel_id = session["kernel"]["id"].as_str().unwrap().to_string();
        let file = format!("kernel-{kernel_id}.json");
        let pid = wait_for("the kernel process", Duration::from_secs(60), || {
            pids_with(&file)
                .into_iter()
                .find(|pid| *pid != self.server.id())
        });
        (kernel_id, pid)
    }

    fn connection_file(&self, kernel_id: &str) -> PathBuf {
        self.runtime().join(format!("kernel-{kernel_id}.json"))
    }
}

impl Drop for Jupyter {
    fn drop(&mut self) {
        kill(self.server.id(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && matches!(self.server.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
        // Kernels the server did not take down with it.
        for pid in pids_with(&self.runtime().display().to_string()) {
            kill(pid, "KILL");
        }
    }
}

/// `drive_kernel.py`: runs cells on one kernel, one JSON line per cell.
struct Cells {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Cells {
    fn connect(connection_file: &Path) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jupyter/drive_kernel.py");
        let mut child = Command::new(venv_python())
            .arg(script)
            .arg(connection_file)
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
        let mut cells = Cells {
            child,
            stdin,
            lines,
        };
        let ready = cells.reply(Duration::from_secs(60));
        assert_eq!(ready["ready"], true, "{ready}");
        cells
    }

    fn reply(&mut self, within: Duration) -> Value {
        let line = self
            .lines
            .recv_timeout(within)
            .expect("drive_kernel.py did not answer");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Run `code` as a cell; its reply.
    fn run(&mut self, code: &str, timeout: Duration) -> Value {
        let request = json!({ "code": code, "timeout": timeout.as_secs_f64() });
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        self.reply(timeout + Duration::from_secs(10))
    }

    /// Run `code` as a cell that must succeed; the words it printed.
    fn printed_words(&mut self, code: &str) -> Vec<String> {
        let reply = self.run(code, Duration::from_secs(30));
        assert_eq!(reply["status"], "ok", "{reply}");
        reply["stdout"]
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    /// A first cell that imports `os` and `time`, sets `variable`, and
    /// checks that the kernel it ran in is `pid`.
    fn set_in_kernel(&mut self, pid: u32, variable: &str) {
        let first = self.run(
            &format!("import os, time\n{variable}\nprint(os.getpid())"),
            Duration::from_secs(30),
        );
        assert_eq!(first["status"], "ok", "{first}");
        assert_eq!(first["stdout"].as_str().unwrap().trim(), pid.to_string());
    }
}

impl Drop for Cells {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The daemon sampling fast, journaling into `dir`, reading `jupyter`'s
/// runtime directory (it runs as whoever runs the tests, root included),
/// with `rules` appended.
fn start_daemon(dir: &Path, jupyter: &Jupyter, rules: &str) -> Daemon {
    let config = format!(
        "[daemon]\ninterval = \"100ms\"\nfast_interval = \"50ms\"\njournal = \"{}\"\n\n\
         [jupyter]\nruntime_dirs = [\"{}\"]\n\n{rules}",
        dir.join("journal.jsonl").display(),
        jupyter.runtime().display()
    );
    Daemon::start(dir, &config)
}

fn journal(dir: &Path) -> Vec<Value> {
    support::journal::events(&dir.join("journal.jsonl"))
}

/// The daemon's row for `pid`, once it names the notebook.
fn listed_with_notebook(daemon: &Daemon, pid: u32, notebook: &str) -> Value {
    wait_for(
        "the kernel listed with its notebook",
        Duration::from_secs(30),
        || {
            let (status, body) = daemon.get("/api/v1/processes?workload=jupyter");
            if status != 200 {
                return None;
            }
            let v: Value = serde_json::from_str(&body).ok()?;
            v["processes"]
                .as_array()?
                .iter()
                .find(|p| p["pid"] == pid && p["workload"]["notebook"] == notebook)
                .cloned()
        },
    )
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
fn a_runaway_cell_is_interrupted_and_the_kernel_keeps_its_variables() {
    let jupyter = Jupyter::start();
    let notebook = "experiments/train.ipynb";
    let (kernel_id, pid) = jupyter.open_notebook(notebook);
    let sandbox = support::private_dir();
    // The default notebook rule's action, at a limit this test reaches,
    // on this test's kernel only.
    let rule = format!(
        "[[rule]]\nname = \"notebook-limit\"\nfootprint = \"300MiB\"\nroot = true\n\
         other_users = true\nactions = [{{ signal = \"SIGINT\", require_handler = true }}]\n\n\
         [rule.match]\nworkload = [\"jupyter\"]\nargv = \"kernel-{kernel_id}\"\n"
    );
    let mut daemon = start_daemon(sandbox.path(), &jupyter, &rule);
    let mut cells = Cells::connect(&jupyter.connection_file(&kernel_id));

    cells.set_in_kernel(pid, "state = {'epoch': 3, 'note': 'survives'}");

    // headroom lists the kernel with its notebook.
    let row = listed_with_notebook(&daemon, pid, notebook);
    assert_eq!(row["workload"]["kernel_id"], kernel_id.as_str());
    assert_eq!(row["workload"]["kernel_name"], "python3");
    daemon.expect_line(&format!("→ {notebook}"));

    // A cell that allocates until something stops it.
    let runaway = cells.run(
        "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n    time.sleep(0.02)",
        Duration::from_secs(60),
    );
    assert_eq!(runaway["status"], "error", "{runaway}");
    assert_eq!(
        runaway["ename"], "KeyboardInterrupt",
        "the limit's SIGINT interrupts the cell: {runaway}"
    );

    // The kernel is the same process, and the earlier cell's variable is there.
    let words = cells.printed_words(
        "print(state['note'], state['epoch'], len(chunks) * 16, os.getpid())\ndel chunks",
    );
    assert_eq!(words[..2], ["survives", "3"], "{words:?}");
    let allocated_mib: u64 = words[2].parse().unwrap();
    assert!(
        (250..1000).contains(&allocated_mib),
        "interrupted after {allocated_mib} MiB, far from the 300 MiB limit"
    );
    assert_eq!(words[3], pid.to_string(), "the kernel was not restarted");

    // The journal holds the interruption with the notebook.
    let events = wait_for("the SIGINT in the journal", Duration::from_secs(10), || {
        let events = journal(sandbox.path());
        events
            .iter()
            .any(|e| e["event"] == "action" && e["action"] == "SIGINT")
            .then_some(events)
    });
    let action = events
        .iter()
        .find(|e| e["event"] == "action" && e["action"] == "SIGINT")
        .unwrap();
    assert_eq!(action["outcome"], "done", "{action}");
    assert_eq!(action["process"]["pid"], pid);
    assert_eq!(action["process"]["notebook"], notebook, "{action}");
    let crossed = events
        .iter()
        .find(|e| e["event"] == "limit-crossed")
        .expect("a limit-crossed event");
    assert_eq!(crossed["process"]["notebook"], notebook, "{crossed}");
    assert!(
        !events
            .iter()
            .any(|e| e["event"] == "exited" && e["process"]["pid"] == pid),
        "the kernel survived: {events:#?}"
    );

    // In words, in the metrics, and in `headroom snapshot`.
    let lines = headroom_events(sandbox.path());
    assert!(
        lines.contains(&format!(
            "SIGINT  → {notebook} (kernel {}…, pid {pid})",
            &kernel_id[..4]
        )),
        "{lines}"
    );
    let (_, metrics) = daemon.get("/metrics");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("headroom_process_footprint_bytes{")
                && l.contains(&format!("notebook=\"{notebook}\""))
                && l.contains(&format!("pid=\"{pid}\""))),
        "no footprint series with the notebook label"
    );
    let snapshot = Command::new(support::BIN)
        .args(["snapshot", "--all"])
        .env("JUPYTER_RUNTIME_DIR", jupyter.runtime())
        .output()
        .expect("run headroom snapshot");
    let table = String::from_utf8_lossy(&snapshot.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.trim_start().starts_with(&pid.to_string())
                && l.contains(&format!("[{notebook}]"))),
        "{table}"
    );
}

/// Whether `pid` catches SIGINT now (`SigCgt` in its status).
fn catches_sigint(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
        .unwrap();
    mask & (1 << (libc::SIGINT - 1)) != 0
}

/// `headroom explain PID` with the embedded default config, judged here:
/// nothing listens at the address it is given.
fn explain(pid: u32) -> String {
    let address = format!("127.0.0.1:{}", support::free_port());
    let out = Command::new(support::BIN)
        .args(["explain", &pid.to_string(), "--address", &address])
        .output()
        .expect("run headroom explain");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn explain_says_an_idle_kernel_is_interrupted_once_a_cell_runs() {
    let jupyter = Jupyter::start();
    let (kernel_id, pid) = jupyter.open_notebook("explain/idle.ipynb");
    let mut cells = Cells::connect(&jupyter.connection_file(&kernel_id));
    cells.set_in_kernel(pid, "idle = True");

    // Idle: ipykernel ignores SIGINT, and explain says when it is caught.
    assert!(!catches_sigint(pid), "an idle ipykernel catches no SIGINT");
    let text = explain(pid);
    assert!(
        text.contains(
            "idle: SIGINT is ignored until a cell runs; ipykernel installs its handler while \
             executing, so a require_handler step acts when a cell is running"
        ),
        "{text}"
    );
    assert!(!text.contains("it does not catch SIGINT"), "{text}");

    // A cell running: the handler is there, and explain says it is sent.
    writeln!(
        cells.stdin,
        "{}",
        json!({ "code": "time.sleep(120)", "timeout": 150 })
    )
    .unwrap();
    cells.stdin.flush().unwrap();
    wait_for("the cell's SIGINT handler", Duration::from_secs(30), || {
        catches_sigint(pid).then_some(())
    });
    let text = explain(pid);
    assert!(
        text.contains(
            "it catches SIGINT: a cell is running (ipykernel installs its handler while it \
             executes one), so a require_handler step sends SIGINT and interrupts the cell"
        ),
        "{text}"
    );
    kill(pid, "INT");
    let reply = cells.reply(Duration::from_secs(30));
    assert_eq!(reply["ename"], "KeyboardInterrupt", "{reply}");
    // Idle again (the handler goes once the reply is sent): ignored again.
    wait_for("SIGINT ignored again", Duration::from_secs(30), || {
        (!catches_sigint(pid)).then_some(())
    });
}

#[test]
fn a_kernel_killed_from_outside_gets_a_postmortem_with_an_unknown_cause() {
    let jupyter = Jupyter::start();
    let notebook = "analysis/eval.ipynb";
    let (kernel_id, pid) = jupyter.open_notebook(notebook);
    let sandbox = support::private_dir();
    let daemon = start_daemon(sandbox.path(), &jupyter, "[postmortem]\nnotify = true\n");
    let mut cells = Cells::connect(&jupyter.connection_file(&kernel_id));

    let held = cells.run(
        "hold = bytearray(200 << 20)\nprint('held')",
        Duration::from_secs(30),
    );
    assert_eq!(held["status"], "ok", "{held}");
    wait_for(
        "the kernel listed with its notebook and 200 MiB",
        Duration::from_secs(30),
        || {
            let row = listed_with_notebook(&daemon, pid, notebook);
            (row["footprint"].as_u64()? >= 200 * MIB).then_some(())
        },
    );

    kill(pid, "KILL");
    let ended = wait_for("the post-mortem", Duration::from_secs(20), || {
        journal(sandbox.path())
            .into_iter()
            .find(|e| e["event"] == "exited" && e["process"]["pid"] == pid)
    });
    assert_eq!(ended["process"]["notebook"], notebook, "{ended}");
    let peak = ended["peak_footprint"].as_u64().unwrap();
    assert!(peak >= 200 * MIB, "peak {peak} below what the cell held");
    let cause = &ended["cause"];
    assert_eq!(
        cause["kind"], "unknown",
        "nothing says who killed it: {cause}"
    );
    let how = cause["how"].as_str().unwrap();
    // The exit status is read if the server has not collected the kernel
    // yet; either way the answer says what was looked at.
    assert!(
        how.contains("killed by SIGKILL, but nothing says who sent the signal")
            || how.contains("gone before its exit status could be read"),
        "{how}"
    );
    assert!(ended["headroom_action"].is_null(), "{ended}");

    // The notification step fired (shown, or failed for want of a desktop
    // session on a headless machine: either way an action of its own).
    let notified = wait_for(
        "the post-mortem's notification",
        Duration::from_secs(20),
        || {
            journal(sandbox.path()).into_iter().find(|e| {
                e["event"] == "action"
                    && e["rule"] == "postmortem"
                    && e["action"] == "notify"
                    && e["process"]["pid"] == pid
            })
        },
    );
    assert!(
        notified["detail"]
            .as_str()
            .is_some_and(|d| d.contains(notebook) && d.contains("cause unknown")),
        "{notified}"
    );

    let lines = headroom_events(sandbox.path());
    let line = lines
        .lines()
        .find(|l| l.contains("post-mortem") && l.contains(&format!("pid {pid})")))
        .unwrap_or_else(|| panic!("{lines}"));
    assert!(
        line.contains(&format!(
            "post-mortem  {notebook} (kernel {}…, pid {pid}) ended at ",
            &kernel_id[..4]
        )) && line.contains("cause unknown"),
        "{line}"
    );
}

/// A kernel whose cell left a pool of 4 forked workers holding memory, killed
/// with them from outside (its process group, as a machine out of memory or
/// a user's `kill` may end it): one post-mortem, the kernel's, which
/// summarises its workers; none for the workers.
#[test]
fn a_kernel_and_its_workers_end_in_one_postmortem_that_summarises_them() {
    let jupyter = Jupyter::start();
    let notebook = "work/pool.ipynb";
    let (kernel_id, pid) = jupyter.open_notebook(notebook);
    let sandbox = support::private_dir();
    let daemon = start_daemon(sandbox.path(), &jupyter, "");
    let mut cells = Cells::connect(&jupyter.connection_file(&kernel_id));
    cells.set_in_kernel(pid, "pass");
    listed_with_notebook(&daemon, pid, notebook);

    let words = cells.printed_words(
        "import multiprocessing as mp\n\
         def hold(i):\n    global block\n    block = b'\\x01' * (64 << 20)\n    time.sleep(600)\n\
         pool = mp.get_context('fork').Pool(4)\n\
         pending = pool.map_async(hold, range(4), chunksize=1)\n\
         print(*(p.pid for p in pool._pool))",
    );
    let workers: Vec<u32> = words.iter().map(|w| w.parse().unwrap()).collect();
    assert_eq!(workers.len(), 4, "{words:?}");
    for w in &workers {
        wait_for(
            "each worker in the kernel's job, holding 64 MiB",
            Duration::from_secs(30),
            || {
                let (status, body) = daemon.get(&format!("/api/v1/processes/{w}"));
                let v: Value = serde_json::from_str(&body).ok()?;
                let row = &v["process"];
                (status == 200 && row["job"] == pid && row["footprint"].as_u64()? >= 64 * MIB)
                    .then_some(())
            },
        );
    }
    // The whole group at once, as the kernel's launcher made it.
    let pgid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap()
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse::<u32>().ok())
        .unwrap();
    assert_eq!(pgid, pid, "the kernel leads its own process group");
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .status();

    let ended = wait_for("the kernel's post-mortem", Duration::from_secs(20), || {
        journal(sandbox.path())
            .into_iter()
            .find(|e| e["event"] == "exited" && e["process"]["pid"] == pid)
    });
    assert_eq!(ended["process"]["notebook"], notebook, "{ended}");
    let job = &ended["job"];
    assert_eq!(job["workers"], 4, "{ended}");
    assert_eq!(job["most_workers"], 4, "{ended}");
    assert_eq!(job["ended_with"], 4, "{ended}");
    let peak = job["peak_footprint"].as_u64().unwrap();
    assert!(
        peak >= 4 * 64 * MIB,
        "the job's peak {peak} below what its workers held"
    );
    assert!(ended.get("worker_of").is_none(), "{ended}");
    // Their ends are the kernel's: a few samples later, still no
    // post-mortem of a worker.
    std::thread::sleep(Duration::from_secs(2));
    let of_workers: Vec<Value> = journal(sandbox.path())
        .into_iter()
        .filter(|e| {
            e["event"] == "exited"
                && e["process"]["pid"]
                    .as_u64()
                    .is_some_and(|p| workers.iter().any(|w| u64::from(*w) == p))
        })
        .collect();
    assert!(of_workers.is_empty(), "{of_workers:#?}");
    let lines = headroom_events(sandbox.path());
    assert!(
        lines
            .lines()
            .any(|l| l.contains(&format!("pid {pid}) ended"))
                && l.contains("; its job had up to 4 workers and peaked at ")
                && l.contains("all 4 at its end ended with it")),
        "{lines}"
    );
}

/// The default rule against a cell that would fill the whole machine.
/// `scripts/test.sh` runs these alone, after the rest of the tier: the cell's
/// growth rate is what sets the rule off, and a browser or Prometheus started
/// beside it on a 2-core machine can slow it below the rule's threshold.
mod whole_machine {
    use super::*;

    use std::sync::MutexGuard;

    /// One test at a time (with every other `whole_machine::` test): each
    /// sizes its growth from the memory available when it starts, and each
    /// daemon's default rule covers every kernel on the machine, the other
    /// test's too.
    fn one_at_a_time() -> MutexGuard<'static, ()> {
        crate::support::whole_machine()
    }

    /// Available memory and free swap, from `/proc/meminfo`. Their sum is
    /// what the default rule's `time_to_exhaustion` measures growth against.
    fn available_and_free_swap() -> (u64, u64) {
        let text = std::fs::read_to_string("/proc/meminfo").unwrap();
        let kib = |key: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in /proc/meminfo"))
        };
        (kib("MemAvailable:") * 1024, kib("SwapFree:") * 1024)
    }

    /// How many processes the kernel's OOM killer has killed since boot
    /// (`oom_kill` in `/proc/vmstat`).
    fn oom_kills() -> u64 {
        std::fs::read_to_string("/proc/vmstat")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .expect("an oom_kill line in /proc/vmstat")
    }

    /// The embedded default config (`headroom print-config`), with only the
    /// journal put in `journal_file` and `jupyter`'s runtime directory read:
    /// its rules are the default rules.
    fn default_config(journal_file: &Path, jupyter: &Jupyter) -> String {
        let set = |text: &str, from: &str, to: String| {
            assert!(
                text.contains(from),
                "the default config no longer has {from:?}"
            );
            text.replacen(from, &to, 1)
        };
        let config = set(
            headroom::config::DEFAULT_TOML,
            "# journal = \"/var/lib/headroom/journal.jsonl\"",
            format!("journal = \"{}\"", journal_file.display()),
        );
        set(
            &config,
            "runtime_dirs = []",
            format!("runtime_dirs = [\"{}\"]", jupyter.runtime().display()),
        )
    }

    /// The pids whose parent is `pid`, from `/proc/PID/stat`.
    fn children_of(pid: u32) -> Vec<u32> {
        let mut children = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
            let Some(child) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // The fields after the command, which is in parentheses.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            if after.split_whitespace().nth(1) == Some(pid.to_string().as_str()) {
                children.push(child);
            }
        }
        children
    }

    /// Kills a kernel's children when dropped, pass or fail, so that no
    /// worker of a failed test holds memory for the tests after it.
    struct KillChildren(u32);

    impl Drop for KillChildren {
        fn drop(&mut self) {
            for child in children_of(self.0) {
                kill(child, "KILL");
            }
        }
    }

    /// The kernel's owner, from `/proc/PID/status`.
    fn uid_of(pid: u32) -> u32 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|uid| uid.parse().ok())
            .expect("a Uid line")
    }

    /// A container's setup: Jupyter run as root, headroom run as root on its
    /// embedded default config (only the journal and the runtime directory set
    /// for the test). The default notebook rule covers root's kernels: a cell
    /// that grows past 80% of memory is interrupted (one that would exhaust
    /// memory within 30 s is told of at once, and interrupted just in time),
    /// and the kernel keeps its variables. Run by a user, the same holds for
    /// the user's kernel under the user's daemon.
    #[test]
    fn the_embedded_default_interrupts_a_runaway_cell_in_roots_kernel() {
        let _machine = one_at_a_time();
        let jupyter = Jupyter::start();
        let notebook = "work/keras.ipynb";
        let (kernel_id, pid) = jupyter.open_notebook(notebook);
        let me = headroom::os::this_process::effective_uid();
        assert_eq!(uid_of(pid), me, "the kernel runs as the tests' user");
        let sandbox = support::private_dir();
        let config = default_config(&sandbox.path().join("journal.jsonl"), &jupyter);
        let daemon = Daemon::start(sandbox.path(), &config);
        let mut cells = Cells::connect(&jupyter.connection_file(&kernel_id));

        cells.set_in_kernel(pid, "model = {'layers': 12, 'note': 'survives'}");
        listed_with_notebook(&daemon, pid, notebook);

        // Growth that would use up available memory and free swap in about
        // 20 s, in chunks every 100 ms, like a cell appending tensors. It
        // stops by itself 1 GiB past the rule's footprint limit (80% of
        // memory), or 1 GiB short of available memory if that comes first,
        // so a failing test neither swaps nor takes the machine down; either
        // way the rule holds by its footprint, or with under 5% of the room
        // left, and must act.
        let (available, free_swap) = available_and_free_swap();
        let headroom = available + free_swap;
        let rate = headroom / 20;
        let total = std::fs::read_to_string("/proc/meminfo")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .expect("MemTotal")
            * 1024;
        let cap = (total / 10 * 8 + (1 << 30)).min(available.saturating_sub(1 << 30));
        let runaway = cells.run(
            &format!(
                "rate, cap = {rate}, {cap}\nchunk = max(rate // 10, 1 << 20)\ntensors = []\n\
                 held = 0\nstart = time.monotonic()\nwhile held < cap:\n    \
                 tensors.append(b'\\x01' * chunk)\n    held += chunk\n    \
                 ahead = held / rate - (time.monotonic() - start)\n    if ahead > 0:\n        \
                 time.sleep(ahead)\nprint('not interrupted after', held, 'bytes in', \
                 time.monotonic() - start, 's')"
            ),
            Duration::from_secs(120),
        );
        assert_eq!(
            runaway["ename"],
            "KeyboardInterrupt",
            "the default rule's SIGINT interrupts the cell growing at {} MiB/s toward {} MiB \
                 ({} MiB available, {} MiB swap free): {runaway}",
            rate / MIB,
            cap / MIB,
            available / MIB,
            free_swap / MIB
        );

        // The same kernel, with the earlier cell's variable.
        let words = cells.printed_words(
            "held_mib = sum(map(len, tensors)) >> 20\ndel tensors\nimport gc; gc.collect()\n\
             print(model['note'], model['layers'], held_mib, os.getpid())",
        );
        assert_eq!(words[..2], ["survives", "12"], "{words:?}");
        assert_eq!(words[3], pid.to_string(), "the kernel was not restarted");
        let held: u64 = words[2].parse().unwrap();
        assert!(
            held * MIB < cap,
            "interrupted at {held} MiB, only at the cell's own stop"
        );

        // The journal: the rule, the SIGINT delivered to the kernel, and no
        // crossing held without acting.
        let events = wait_for("the SIGINT in the journal", Duration::from_secs(10), || {
            let events = journal(sandbox.path());
            events
                .iter()
                .any(|e| e["event"] == "action" && e["action"] == "SIGINT")
                .then_some(events)
        });
        let action = events
            .iter()
            .find(|e| e["event"] == "action" && e["action"] == "SIGINT")
            .unwrap();
        assert_eq!(action["rule"], "notebook-runaway", "{action}");
        assert_eq!(action["outcome"], "done", "{action}");
        assert_eq!(action["process"]["pid"], pid);
        assert_eq!(action["process"]["uid"], me);
        assert!(
            action["detail"]
                .as_str()
                .is_some_and(|d| d.contains("footprint") || d.contains("under 5% of")),
            "the footprint limit, or the last 5% of the room, set it off: {action}"
        );
        assert!(
            !events
                .iter()
                .any(|e| e["event"] == "limit-held-not-acting" && e["process"]["pid"] == pid),
            "{events:#?}"
        );
        assert!(
            !events
                .iter()
                .any(|e| e["event"] == "exited" && e["process"]["pid"] == pid),
            "the kernel survived: {events:#?}"
        );
    }

    /// The issue's notebook, on the embedded default config: a cell forks 8
    /// workers with the fork start method (as a `DataLoader` does on Linux),
    /// each growing at a pace that, all together, would use up available
    /// memory in about 30 s, and each stopping far below every per-process
    /// limit of the default rules (a sixth of available memory). The job is
    /// what runs the machine out: the default notebook rule judges the
    /// kernel on its job's total and interrupts the kernel, not a worker;
    /// the cell ends with KeyboardInterrupt, its pool tears the workers
    /// down, the kernel keeps its variables, and the OOM killer never acts.
    ///
    /// Each worker also stops growing once available memory falls below a
    /// tenth of what it was, so a failing test leaves the machine room.
    #[test]
    fn the_embedded_default_interrupts_the_kernel_whose_forked_workers_run_the_machine_out() {
        let _machine = one_at_a_time();
        let jupyter = Jupyter::start();
        let notebook = "work/loader.ipynb";
        let (kernel_id, pid) = jupyter.open_notebook(notebook);
        let _workers = KillChildren(pid);
        let sandbox = support::private_dir();
        let config = default_config(&sandbox.path().join("journal.jsonl"), &jupyter);
        let daemon = Daemon::start(sandbox.path(), &config);
        let mut cells = Cells::connect(&jupyter.connection_file(&kernel_id));

        cells.set_in_kernel(pid, "model = {'layers': 12, 'note': 'survives'}");
        listed_with_notebook(&daemon, pid, notebook);

        let (available, _) = available_and_free_swap();
        let workers = 8u64;
        let seconds = 30;
        let rate = available / seconds / workers;
        let cap = available / 6;
        let floor = available / 10;
        let oom_before = oom_kills();
        let cell = format!(
            r#"import multiprocessing as mp
n, rate, cap, floor = {workers}, {rate}, {cap}, {floor}
ctx = mp.get_context('fork')
held = ctx.Array('q', n, lock=False)
worker_pids = ctx.Array('q', n, lock=False)
floored = ctx.Array('b', n, lock=False)

def available():
    with open('/proc/meminfo') as f:
        for line in f:
            if line.startswith('MemAvailable:'):
                return int(line.split()[1]) * 1024

def grow(i):
    worker_pids[i] = os.getpid()
    chunk = max(rate // 10, 1 << 20)
    blocks = []
    start = time.monotonic()
    while held[i] < cap:
        if available() < floor:
            floored[i] = 1
            break
        blocks.append(b'\x01' * chunk)
        held[i] += chunk
        ahead = held[i] / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    time.sleep(20)
    return held[i]

at_interrupt = None
try:
    with ctx.Pool(n) as pool:
        pool.map(grow, range(n), chunksize=1)
    print('not interrupted after', sum(held), 'bytes')
except KeyboardInterrupt:
    at_interrupt = sum(held)
    raise
"#
        );
        let runaway = cells.run(&cell, Duration::from_secs(150));
        let oom_after = oom_kills();
        assert_eq!(
            runaway["ename"],
            "KeyboardInterrupt",
            "the default rule's SIGINT interrupts the cell whose {workers} workers grow at {} \
             MiB/s each toward {} MiB each ({} MiB available): {runaway}",
            rate / MIB,
            cap / MIB,
            available / MIB
        );

        // The same kernel, with the earlier cell's variable; the pool's
        // workers were torn down, and none had reached the floor.
        let words = cells.printed_words(
            "import gc; gc.collect()\n\
             print(model['note'], model['layers'], os.getpid(), at_interrupt >> 20, \
             sum(floored), len(mp.active_children()), *worker_pids)",
        );
        assert_eq!(words[..2], ["survives", "12"], "{words:?}");
        assert_eq!(words[2], pid.to_string(), "the kernel was not restarted");
        let held_mib: u64 = words[3].parse().unwrap();
        assert_eq!(
            words[4],
            "0",
            "the signal came only after available memory fell below {} MiB, with {held_mib} \
             MiB held by the workers",
            floor / MIB
        );
        assert_eq!(words[5], "0", "the pool's workers are gone: {words:?}");
        let worker_pids: Vec<u32> = words[6..].iter().map(|w| w.parse().unwrap()).collect();
        assert_eq!(worker_pids.len(), 8, "{words:?}");
        assert!(
            worker_pids.iter().all(|w| *w != 0 && *w != pid),
            "{worker_pids:?}"
        );
        // Just in time, not 30 s ahead: the SIGINT came before any worker
        // saw available memory below the floor (asserted above), so before
        // the machine ran out.
        assert!(
            held_mib * MIB < available,
            "interrupted at {held_mib} MiB, past the {} MiB that were available",
            available / MIB
        );
        wait_for("the workers gone", Duration::from_secs(20), || {
            worker_pids
                .iter()
                .all(|w| !Path::new(&format!("/proc/{w}")).exists())
                .then_some(())
        });
        assert_eq!(
            oom_after, oom_before,
            "the kernel's OOM killer acted while the workers grew"
        );

        // The journal: the SIGINT went to the kernel, none to a worker; the
        // crossing names the notebook and the job's total; no post-mortem of
        // the kernel (it survived) nor of its workers (their end is routine).
        let events = wait_for("the SIGINT in the journal", Duration::from_secs(10), || {
            let events = journal(sandbox.path());
            events
                .iter()
                .any(|e| e["event"] == "action" && e["action"] == "SIGINT")
                .then_some(events)
        });
        let sigints: Vec<&Value> = events
            .iter()
            .filter(|e| e["event"] == "action" && e["action"] == "SIGINT")
            .collect();
        assert_eq!(sigints.len(), 1, "one SIGINT: {sigints:#?}");
        let action = sigints[0];
        assert_eq!(action["rule"], "notebook-runaway", "{action}");
        assert_eq!(action["outcome"], "done", "{action}");
        assert_eq!(action["process"]["pid"], pid, "{action}");
        assert_eq!(action["process"]["notebook"], notebook, "{action}");
        let on_a_worker = |e: &&Value| {
            e["process"]["pid"]
                .as_u64()
                .is_some_and(|p| worker_pids.iter().any(|w| u64::from(*w) == p))
        };
        let about_workers: Vec<&Value> = events
            .iter()
            .filter(|e| {
                matches!(
                    e["event"].as_str(),
                    Some("action" | "skipped" | "limit-crossed" | "exited")
                )
            })
            .filter(on_a_worker)
            .collect();
        assert!(about_workers.is_empty(), "{about_workers:#?}");
        let crossed = events
            .iter()
            .find(|e| {
                e["event"] == "limit-crossed"
                    && e["rule"] == "notebook-runaway"
                    && e["process"]["pid"] == pid
            })
            .unwrap_or_else(|| panic!("the kernel's crossing: {events:#?}"));
        assert_eq!(crossed["process"]["notebook"], notebook, "{crossed}");
        let detail = crossed["detail"].as_str().unwrap();
        let members: usize = detail
            .split_once("job of ")
            .and_then(|(_, rest)| rest.split_once(" ("))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or_else(|| panic!("no job total in {detail:?}"));
        assert!(
            members >= 9,
            "the kernel and its 8 workers counted together: {detail}"
        );
        assert!(
            !events
                .iter()
                .any(|e| e["event"] == "exited" && e["process"]["pid"] == pid),
            "the kernel survived: {events:#?}"
        );
    }
}
