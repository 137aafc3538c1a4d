//! Shared by both test tiers (`tests/hermetic`, `tests/environment`): start
//! `headroom run` on a free loopback port and learn the port from its log
//! (`hog::Daemon`), start a helper process the daemon classifies as a Jupyter kernel, signal
//! the tests' own children, pick free ports, and, for the environment tier,
//! say what a test needs that this machine lacks (root, an installed tool)
//! and how to get it. Everything started here is killed when dropped.

#![allow(dead_code, reason = "each test tier uses a different part")]

pub mod actuator;
pub mod attack;
pub mod hog;
pub mod hog_program;
pub mod http;
pub mod journal;
pub mod jupyter;
pub mod privileges;
pub mod runc;
pub mod source_tree;
pub mod sys;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_headroom");

/// A plain blocking GET: status and body. Panics if nothing answers.
pub fn get(url: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut res = agent
        .get(url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = res.status().as_u16();
    let body = res.body_mut().read_to_string().expect("body");
    (status, body)
}

/// A child process killed and reaped when dropped.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process the daemon classifies as a Jupyter kernel: `tail -f` on a file
/// named like a Jupyter connection file (`-f …/kernel-<id>.json`).
pub fn fake_kernel(dir: &Path, id: &str) -> Reaped {
    let file = dir.join(format!("kernel-{id}.json"));
    std::fs::write(&file, "{}\n").expect("write connection file");
    let child = Command::new("tail")
        .arg("-f")
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn tail -f");
    Reaped(child)
}

/// A temporary directory for configs, journals and hook programs of a daemon
/// under test, in the build's `target/tmp`. As root, `headroom run` refuses a
/// config or hook that a user could change, and a directory under the shared
/// `/tmp` is such a place; `target/tmp` is as private as the checkout.
pub fn private_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir in target/tmp")
}

/// Whether the daemon `command` starts (`headroom run …`, directly or
/// through a wrapper such as `prlimit`) would journal into the default
/// state directory, `/var/lib/headroom` for root: it names no `--journal`,
/// replays nothing, and its `--config` (if any) sets no `daemon.journal`.
/// One daemon holds a state directory at a time, and a headroom service
/// may hold the default one, so such a test daemon is given a journal of
/// its own (`hog::Running::daemon_command`, `attack::RootDaemon`).
pub fn uses_default_state_dir(command: &Command) -> bool {
    let args: Vec<&std::ffi::OsStr> = command.get_args().collect();
    if !args.iter().any(|a| *a == "run") {
        return false;
    }
    if args.iter().any(|a| {
        let a = a.to_string_lossy();
        a == "--journal"
            || a.starts_with("--journal=")
            || a == "--replay"
            || a.starts_with("--replay=")
    }) {
        return false;
    }
    let config = args
        .iter()
        .position(|a| *a == "--config" || *a == "-c")
        .and_then(|i| args.get(i + 1));
    match config {
        None => true,
        Some(path) => {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let journal = text
                .parse::<toml::Table>()
                .ok()
                .and_then(|t| t.get("daemon")?.get("journal").cloned());
            journal.is_none()
        }
    }
}

/// A loopback port free right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// Fails the calling test unless it runs as root, saying so: an
/// environment-tier test that needs root (another user's processes and
/// files, a root daemon's refusals) must not pass by doing nothing.
#[track_caller]
pub fn need_root() {
    let uid = headroom::os::this_process::effective_uid();
    assert!(
        uid == 0,
        "this test needs root and runs as uid {uid}: run as root (scripts/test.sh does)"
    );
}

/// Fails the calling test unless each `(program, Debian package)` is on
/// PATH, naming the first one missing and where it comes from.
#[track_caller]
pub fn need_tools(tools: &[(&str, &str)]) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for (name, package) in tools {
        let found = std::env::split_paths(&path).any(|d| d.join(name).is_file());
        assert!(
            found,
            "{name} is not installed: this test needs it (Debian package {package}; \
             scripts/test.sh installs it)"
        );
    }
}

/// A uid that is not root's, for files and processes of "another user".
pub const NOBODY: u32 = 65534;

/// `chmod MODE PATH`.
pub fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

/// Send the signal named `name` (`"TERM"`, `"HUP"`, …) to `pid`, one of the
/// tests' own children; panics on an unknown name or a failed `kill`.
pub fn signal(pid: u32, name: &str) {
    let number = match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "KILL" => libc::SIGKILL,
        "TERM" => libc::SIGTERM,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "STOP" => libc::SIGSTOP,
        "CONT" => libc::SIGCONT,
        other => panic!("no signal named SIG{other} in the tests' list"),
    };
    sys::kill(pid, number);
}

/// The path of `name`, from `$env_var` or PATH; panics with what to install.
#[track_caller]
pub fn tool(name: &str, env_var: &str, package: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env_var) {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not installed: this test needs it (Debian package {package}; \
                 scripts/test.sh installs it), or set {env_var} to its path"
            )
        })
}

/// Poll `f` every 250 ms until it returns `Some`, for at most `within`.
pub fn wait_for<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Where tests leave files for people to look at (`target/test-artifacts`).
pub fn artifacts_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).expect("create target/test-artifacts");
    dir
}

/// A loopback HTTP server that answers every request with `sessions` as
/// Jupyter's `GET /api/sessions` does, and a runtime file
/// (`jpserver-<port>.json`, the fields jupyter_server 2 writes) in
/// `runtime_dir` that points at it: the daemon's notebook lookup finds it
/// like a running Jupyter server. Serves until the test process ends.
pub fn sessions_server(runtime_dir: &Path, sessions: String) {
    use std::io::Write as _;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let port = listener.local_addr().expect("local address").port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                line.clear();
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{sessions}",
                sessions.len()
            );
        }
    });
    let info = serde_json::json!({
        "base_url": "/", "hostname": "127.0.0.1", "password": false, "pid": std::process::id(),
        "port": port, "root_dir": "/tmp", "secure": false, "sock": "", "token": "t",
        "url": format!("http://127.0.0.1:{port}/"), "version": "2.21.1",
    });
    std::fs::write(
        runtime_dir.join(format!("jpserver-{port}.json")),
        info.to_string(),
    )
    .expect("write the runtime file");
}

/// The whole machine for one test: the tests under `whole_machine::`
/// (in any module) compare with or fill the machine's memory, so they run
/// one at a time whichever module they are in.
pub fn whole_machine() -> std::sync::MutexGuard<'static, ()> {
    static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    MACHINE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
