//! Hostile and broken inputs, table by table: config files, command lines,
//! API query parameters, and broken fixture files (`/proc` trees, journals,
//! traces). Every row names its input and the key part of the error it
//! must get; where a daemon is already running, it must still be up after
//! the row (`/healthz` answers 200).
//!
//! - Config files: each is checked with `headroom check-config` (exit 2),
//!   then handed to a running daemon by SIGHUP, which must reject it with
//!   the same message, keep its config and keep serving.
//! - Command lines: exit 2 (bad usage) or 1 (a runtime failure), with the
//!   message.
//! - API requests: to a running daemon, each answered with its status and a
//!   JSON error naming the problem.
//! - Fixtures: the Linux sampler on `/proc` trees with a file cut short or
//!   garbled, `headroom events` on torn and garbled journals, and a daemon
//!   replaying a trace with broken lines.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::hog::{Daemon, HEADROOM, Running};
use crate::support::private_dir;

/// Rows checked over all the tables below, at the least: the table is meant
/// to cover every kind of input, and shrinking it by accident fails.
const MIN_ROWS: usize = 40;

// ---------------------------------------------------------------------------
// Config files
// ---------------------------------------------------------------------------

/// What is put at the config's path.
enum Content {
    Text(String),
    Bytes(Vec<u8>),
    Fifo,
    DevZero,
    Directory,
    Missing,
}

fn text(s: &str) -> Content {
    Content::Text(s.to_owned())
}

fn rule(body: &str) -> Content {
    Content::Text(format!("[[rule]]\nname = \"r\"\n{body}\n"))
}

/// (what, content, the key part of the error)
fn config_rows() -> Vec<(&'static str, Content, &'static str)> {
    let deep = format!("a = {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let mut huge = b"# padding\n".repeat(110_000);
    huge.extend_from_slice(b"[daemon]\n");
    vec![
        (
            "bytes that are not UTF-8",
            Content::Bytes(b"[daemon]\ninterval = \"\xff\xfe\"\n".to_vec()),
            "the file is not UTF-8 text; save it as UTF-8",
        ),
        (
            "random binary",
            Content::Bytes(
                (0..4096u32)
                    .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                    .collect(),
            ),
            "not UTF-8",
        ),
        (
            "a NUL inside a string",
            text("[daemon]\ninterval = \"1s\0\"\n"),
            "invalid TOML",
        ),
        (
            "arrays nested 100000 deep",
            Content::Text(deep),
            "max recursion depth met",
        ),
        (
            "a file of more than 1 MiB",
            Content::Bytes(huge),
            "larger than 1048576 bytes, far more than any config",
        ),
        (
            "a FIFO",
            Content::Fifo,
            "this is a FIFO (named pipe), not a regular file",
        ),
        (
            "a link to /dev/zero",
            Content::DevZero,
            "this is a character device, not a regular file",
        ),
        (
            "a directory",
            Content::Directory,
            "this is a directory; give the path of a TOML file",
        ),
        (
            "no file at all",
            Content::Missing,
            "the file does not exist",
        ),
        (
            "a 100000-character key",
            Content::Text(format!("{} = 1\n", "k".repeat(100_000))),
            "unknown key \"kkkkkkkkkk",
        ),
        (
            "an unclosed string",
            text("[daemon]\ninterval = \"1s\n"),
            "invalid TOML",
        ),
        (
            "a duplicate key",
            text("[daemon]\ninterval = \"1s\"\ninterval = \"2s\"\n"),
            "duplicate key",
        ),
        (
            "an unknown section",
            text("[deamon]\n"),
            "unknown section \"deamon\"",
        ),
        (
            "a duration of 10^20 years",
            text("[daemon]\nhistory = \"99999999999999999999y\"\n"),
            "daemon.history: invalid duration: too large",
        ),
        (
            "digits split by carriage returns (a fuzzing find)",
            text("[daemon]\nhistory = \"3303\\r33304\\r33303\\r0w\"\n"),
            "daemon.history: invalid duration: too large",
        ),
        (
            "a duration without a unit",
            text("[daemon]\ninterval = \"5\"\n"),
            "a duration needs a unit",
        ),
        (
            "an interval of zero",
            text("[daemon]\ninterval = \"0s\"\n"),
            "daemon.interval",
        ),
        (
            "a size of 99999999999 TiB",
            rule("footprint = \"99999999999TiB\"\nactions = [{ signal = \"SIGINT\" }]"),
            "too large: sizes must be below 16 EiB",
        ),
        (
            "a share of 150 %",
            rule("footprint = \"150%\"\nactions = [{ signal = \"SIGINT\" }]"),
            "a percentage must be greater than 0% and at most 100%",
        ),
        (
            "a negative size",
            rule("footprint = \"-1GiB\"\nactions = [{ signal = \"SIGINT\" }]"),
            "a size cannot be negative",
        ),
        (
            "a rate over zero seconds",
            rule("growth = \"1GiB/0s\"\nactions = [{ signal = \"SIGINT\" }]"),
            "must be longer than zero",
        ),
        (
            "a regex too large to compile",
            rule(
                "footprint = \"1GiB\"\nactions = [{ signal = \"SIGINT\" }]\n[rule.match]\nargv = \"a{1000}{1000}\"",
            ),
            "rule[0] (\"r\").match.argv: not a valid regular expression",
        ),
        (
            "a signal headroom never sends",
            rule("footprint = \"1GiB\"\nactions = [{ signal = \"SIGSEGV\" }]"),
            "expected one of SIGINT, SIGUSR1, SIGUSR2, SIGTERM, SIGKILL",
        ),
        (
            "a hook by a relative path",
            rule("footprint = \"1GiB\"\nactions = [{ hook = [\"save.sh\"] }]"),
            "rule[0] (\"r\").actions[0].hook: a hook is a list whose first item is an absolute path",
        ),
        (
            "an empty rule name",
            text(
                "[[rule]]\nname = \"\"\nfootprint = \"1GiB\"\nactions = [{ signal = \"SIGINT\" }]\n",
            ),
            "every rule needs a non-empty name",
        ),
        (
            "a host name to listen on",
            text("[http]\nlisten = \"localhost:9717\"\n"),
            "host names such as localhost are not resolved",
        ),
        (
            "a relative journal path",
            text("[daemon]\njournal = \"journal.jsonl\"\n"),
            "daemon.journal",
        ),
        (
            "journal_files = -1",
            text("[daemon]\njournal_files = -1\n"),
            "daemon.journal_files",
        ),
        (
            "a relative Jupyter runtime directory",
            text("[jupyter]\nruntime_dirs = [\"runtime\"]\n"),
            "jupyter.runtime_dirs[0]: must be an absolute path",
        ),
        (
            "a Jupyter runtime directory with a NUL",
            text("[jupyter]\nruntime_dirs = [\"/srv/\\u0000run\"]\n"),
            "jupyter.runtime_dirs[0]: contains a NUL character",
        ),
        (
            "a hook argument with a NUL",
            rule("footprint = \"1GiB\"\nactions = [{ hook = [\"/bin/echo\", \"a\\u0000b\"] }]"),
            "rule[0] (\"r\").actions[0].hook[1]: contains a NUL character",
        ),
        (
            "post-mortem notify = \"yes\"",
            text("[postmortem]\nnotify = \"yes\"\n"),
            "postmortem.notify: wrong type: expected true or false",
        ),
    ]
}

/// Put `content` at `path`, replacing what is there.
fn place(path: &Path, content: &Content) {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if meta.is_dir() {
            std::fs::remove_dir(path).expect("remove dir");
        } else {
            std::fs::remove_file(path).expect("remove");
        }
    }
    match content {
        Content::Text(t) => std::fs::write(path, t).expect("write"),
        Content::Bytes(b) => std::fs::write(path, b).expect("write"),
        Content::Fifo => {
            let ok = Command::new("mkfifo").arg(path).status().expect("mkfifo");
            assert!(ok.success());
        }
        Content::DevZero => std::os::unix::fs::symlink("/dev/zero", path).expect("symlink"),
        Content::Directory => std::fs::create_dir(path).expect("mkdir"),
        Content::Missing => {}
    }
}

const GOOD_CONFIG: &str = "[daemon]\ninterval = \"100ms\"\n";

/// Wait until `/healthz` says ok: the "first sample" log line comes just
/// before the sample is published.
fn wait_healthy(addr: std::net::SocketAddr) {
    support::wait_for(Duration::from_secs(20), "/healthz 200", || {
        (healthz(addr).0 == 200).then_some(())
    });
}

/// `/healthz`'s status; its body too, when it is not 200.
fn healthz(addr: std::net::SocketAddr) -> (u16, String) {
    let (status, body) = support::get(&format!("http://{addr}/healthz"));
    (status, if status == 200 { String::new() } else { body })
}

#[test]
fn hostile_config_files_are_refused_at_start_and_on_reload() {
    let dir = private_dir();
    let path = dir.path().join("headroom.toml");
    let rows = config_rows();
    assert!(rows.len() >= 25);

    // At start: check-config (the same load as `run`).
    for (what, content, want) in &rows {
        place(&path, content);
        let out = Command::new(HEADROOM)
            .arg("check-config")
            .arg(&path)
            .output()
            .expect("check-config");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains(want), "{what}: {want:?} not in {err}");
        assert!(err.len() < 2000, "{what}: a {} byte message", err.len());
    }

    // On reload: a running daemon rejects each, keeps its config, serves on.
    place(&path, &text(GOOD_CONFIG));
    let mut d = Daemon::run(&["run", "--config", path.to_str().expect("utf-8")]);
    let addr = d.addr;
    wait_healthy(addr);
    for (what, content, want) in &rows {
        place(&path, content);
        d.signal("HUP");
        let line = d.expect_line("config reload rejected");
        assert!(line.contains(want), "{what}: {want:?} not in {line}");
        assert_eq!(
            healthz(addr),
            (200, String::new()),
            "{what}: the daemon still serves"
        );
    }
    let (_, config) = support::get(&format!("http://{addr}/api/v1/config"));
    assert!(config.contains("\"interval\":\"100ms\""), "{config}");
    // And a good file is still taken after all that.
    place(&path, &text("[daemon]\ninterval = \"200ms\"\n"));
    d.signal("HUP");
    d.expect_line("config reloaded from");
    assert!(d.alive());
    count_rows(rows.len());
}

// ---------------------------------------------------------------------------
// Command lines
// ---------------------------------------------------------------------------

#[cfg(target_os = "linux")]
const FOREIGN_MANAGER: &str = "launchd";
#[cfg(target_os = "linux")]
const FOREIGN_MANAGER_ERROR: &str = "only --print works with --manager launchd";
#[cfg(not(target_os = "linux"))]
const FOREIGN_MANAGER: &str = "systemd";
#[cfg(not(target_os = "linux"))]
const FOREIGN_MANAGER_ERROR: &str = "only --print works with --manager systemd";

#[test]
fn bad_command_lines_exit_with_their_error() {
    let dir = private_dir();
    let out = dir.path().join("trace.jsonl");
    let rows = bad_command_lines(out.to_str().expect("utf-8"));
    check_command_lines(&rows);
    count_rows(rows.len());
}

/// `headroom run` checks its arguments and config before it binds the port
/// or takes its state directory's lock: the same bad command lines get the
/// same usage errors while the default port 9717 is taken (held here if
/// it can be bound, otherwise something else holds it, a headroom service
/// perhaps), and while the state directory they name is locked.
#[test]
fn bad_command_lines_exit_with_their_error_while_the_port_and_the_state_are_taken() {
    let _held = std::net::TcpListener::bind("127.0.0.1:9717");
    assert!(
        std::net::TcpListener::bind("127.0.0.1:9717").is_err(),
        "port 9717 is held"
    );
    let dir = private_dir();
    let journal = dir.path().join("journal.jsonl");
    let _lock = headroom::journal::state_lock::StateLock::acquire(
        &journal,
        None,
        headroom::journal::state_lock::Holder::this_process(),
    )
    .expect("lock the state directory");
    let out = dir.path().join("trace.jsonl");
    let mut rows = bad_command_lines(out.to_str().expect("utf-8"));
    let journal = journal.to_str().expect("utf-8");
    rows.extend([
        (
            vec![
                "run",
                "--journal",
                journal,
                "--replay",
                "/nonexistent/trace.jsonl",
            ],
            2,
            "cannot replay /nonexistent/trace.jsonl",
        ),
        (
            vec!["run", "--journal", journal, "--config", "/dev/zero"],
            2,
            "character device, not a regular file",
        ),
        (
            vec!["run", "--journal", journal, "--listen", "0.0.0.0:0"],
            2,
            "--allow-remote",
        ),
    ]);
    check_command_lines(&rows);
    // The lock itself is still what a good command line meets.
    check_command_lines(&[(
        vec!["run", "--journal", journal, "--listen", "127.0.0.1:0"],
        1,
        "another headroom daemon runs on the state directory",
    )]);
}

/// Each command line: its exit code and the key part of its error.
fn check_command_lines(rows: &[(Vec<&str>, i32, &str)]) {
    for (args, code, want) in rows {
        let out = Command::new(HEADROOM)
            .args(args)
            .output()
            .expect("run headroom");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {want:?} not in {err}");
    }
}

/// (arguments, exit code, the key part of the error); `out` is a path for
/// `record --out`.
fn bad_command_lines(out: &str) -> Vec<(Vec<&str>, i32, &'static str)> {
    vec![
        (vec!["run", "--listen", "0.0.0.0:0"], 2, "--allow-remote"),
        (
            vec!["run", "--listen", "localhost:9717"],
            2,
            "host names such as localhost are not resolved",
        ),
        (
            vec!["run", "--listen", "127.0.0.1"],
            2,
            "must be an IP address and a port",
        ),
        (
            vec!["run", "--listen", "[::1]:99999"],
            2,
            "must be an IP address and a port",
        ),
        (
            vec!["run", "--log-format", "xml"],
            2,
            "[possible values: human, json]",
        ),
        (
            vec!["run", "--config"],
            2,
            "a value is required for '--config <FILE>'",
        ),
        (
            vec!["run", "--config", "/dev/zero"],
            2,
            "character device, not a regular file",
        ),
        (
            vec!["run", "--replay", "/nonexistent/trace.jsonl"],
            2,
            "cannot replay /nonexistent/trace.jsonl",
        ),
        (
            vec!["run", "--replay", "/dev/zero"],
            2,
            "character device, not a regular file",
        ),
        (
            vec!["record", "--out", out, "--interval", "5"],
            2,
            "a duration needs a unit",
        ),
        (
            vec!["record", "--out", out, "--interval", "0s"],
            2,
            "--interval must be longer than 0",
        ),
        (
            vec!["record", "--out", out, "--duration=-5s"],
            2,
            "a duration cannot be negative",
        ),
        (
            vec!["snapshot", "--top", "abc"],
            2,
            "invalid value 'abc' for '--top <N>'",
        ),
        (vec!["status", "--top", "-1"], 2, "unexpected argument '-1'"),
        (
            vec!["events", "--since", "yesterday"],
            2,
            "--since \"yesterday\": expected a duration",
        ),
        (
            vec!["events", "--journal", "/dev/zero"],
            1,
            "character device, not a regular file",
        ),
        (
            vec!["frobnicate"],
            2,
            "unrecognized subcommand 'frobnicate'",
        ),
        (
            vec!["check-config"],
            2,
            "required arguments were not provided",
        ),
        (
            vec!["check-config", "/nonexistent.toml"],
            2,
            "the file does not exist",
        ),
        // Another OS's service manager (never this one's: that would install).
        (
            vec!["service", "install", "--manager", FOREIGN_MANAGER],
            2,
            FOREIGN_MANAGER_ERROR,
        ),
    ]
}

// ---------------------------------------------------------------------------
// API requests
// ---------------------------------------------------------------------------

#[test]
fn bad_api_requests_get_their_error_and_the_daemon_serves_on() {
    let dir = private_dir();
    let path = dir.path().join("headroom.toml");
    std::fs::write(&path, GOOD_CONFIG).expect("write");
    let mut d = Daemon::run(&["run", "--config", path.to_str().expect("utf-8")]);
    let addr = d.addr;
    wait_healthy(addr);
    let long = format!("/api/v1/processes?{}=1", "q".repeat(16 * 1024));
    // (method, path, Host header, status, the key part of the error)
    let rows: Vec<(&str, &str, Option<&str>, u16, &str)> = vec![
        (
            "GET",
            "/api/v1/processes?limit=0",
            None,
            400,
            "parameter \\\"limit\\\": must be a whole number from 1 to 100000",
        ),
        (
            "GET",
            "/api/v1/processes?limit=abc",
            None,
            400,
            "(got \\\"abc\\\")",
        ),
        (
            "GET",
            "/api/v1/processes?limit=18446744073709551616",
            None,
            400,
            "\"parameter\":\"limit\"",
        ),
        (
            "GET",
            "/api/v1/processes?limit=-1",
            None,
            400,
            "\"parameter\":\"limit\"",
        ),
        (
            "GET",
            "/api/v1/processes?sort=cpu",
            None,
            400,
            "must be one of: footprint, growth, gpu",
        ),
        (
            "GET",
            "/api/v1/processes?workload=PyTorch",
            None,
            400,
            "must be ml or one of: jupyter",
        ),
        (
            "GET",
            "/api/v1/processes?limt=5",
            None,
            400,
            "unknown parameter; this endpoint takes: sort, limit, workload",
        ),
        (
            "GET",
            "/api/v1/processes?limit=1&limit=2",
            None,
            400,
            "given more than once",
        ),
        (
            "GET",
            "/api/v1/processes?%ff%fe=1",
            None,
            400,
            "unknown parameter",
        ),
        (
            "GET",
            "/api/v1/processes?sort=%00%01",
            None,
            400,
            "\"parameter\":\"sort\"",
        ),
        ("GET", &long, None, 400, "unknown parameter"),
        (
            "GET",
            "/api/v1/processes/0",
            None,
            400,
            "must be a process id",
        ),
        (
            "GET",
            "/api/v1/processes/abc",
            None,
            400,
            "(got \\\"abc\\\")",
        ),
        (
            "GET",
            "/api/v1/processes/99999999999",
            None,
            400,
            "must be a process id",
        ),
        (
            "GET",
            "/api/v1/processes/4294967295",
            None,
            404,
            "4294967295",
        ),
        (
            "GET",
            "/api/v1/history?minutes=0",
            None,
            400,
            "\"parameter\":\"minutes\"",
        ),
        (
            "GET",
            "/api/v1/history?minutes=1441",
            None,
            400,
            "from 1 to 1440",
        ),
        (
            "GET",
            "/api/v1/events?since=yesterday",
            None,
            400,
            "must be an RFC 3339 time",
        ),
        (
            "GET",
            "/api/v1/events?since=99999999999999999999999",
            None,
            400,
            "too large for milliseconds",
        ),
        (
            "GET",
            "/api/v1/events?since=10000-01-01T00:00:00Z",
            None,
            400,
            "must be an RFC 3339 time",
        ),
        (
            "GET",
            "/healthz?verbose=1",
            None,
            400,
            "this endpoint takes no parameters",
        ),
        (
            "GET",
            "/api/v1/snapshot?x",
            None,
            400,
            "this endpoint takes no parameters",
        ),
        (
            "GET",
            "/api/v1/stream?x=1",
            None,
            400,
            "this endpoint takes no parameters",
        ),
        (
            "GET",
            "/api/v1/nothing",
            None,
            404,
            "no such endpoint: /api/v1/nothing",
        ),
        (
            "GET",
            "/metrics",
            Some("evil.example"),
            421,
            "is not an IP address or localhost",
        ),
        (
            "POST",
            "/api/v1/config",
            None,
            405,
            "the API is read-only, use GET",
        ),
        (
            "DELETE",
            "/api/v1/processes/1",
            None,
            405,
            "the API is read-only",
        ),
    ];
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    for (method, path, host, status, want) in &rows {
        let url = format!("http://{addr}{path}");
        let answer = match (*method, host) {
            ("GET", Some(host)) => agent.get(&url).header("Host", *host).call(),
            ("GET", None) => agent.get(&url).call(),
            ("POST", _) => agent.post(&url).send("x"),
            ("DELETE", _) => agent.delete(&url).call(),
            _ => unreachable!("a method the table does not use"),
        };
        let mut res = answer.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let got = res.status().as_u16();
        let body = res.body_mut().read_to_string().expect("body");
        let shown: String = path.chars().take(80).collect();
        assert_eq!(got, *status, "{method} {shown}: {body}");
        assert!(
            body.contains(want),
            "{method} {shown}: {want:?} not in {body}"
        );
        assert!(
            body.len() < 4096,
            "{method} {shown}: a {} byte answer",
            body.len()
        );
        assert_eq!(
            healthz(addr),
            (200, String::new()),
            "{method} {shown}: the daemon still serves"
        );
    }
    assert!(d.alive());
    count_rows(rows.len());
}

// ---------------------------------------------------------------------------
// Broken fixture files
// ---------------------------------------------------------------------------

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[cfg(target_os = "linux")]
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        let kind = entry.file_type().expect("type");
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_symlink() {
            let link = std::fs::read_link(entry.path()).expect("readlink");
            std::os::unix::fs::symlink(link, &target).expect("symlink");
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn broken_proc_files_fail_the_sample_or_skip_the_process_with_a_count() {
    use headroom::os::linux::LinuxSampler;
    use headroom::sample::Sampler;

    let meminfo = std::fs::read_to_string(fixtures().join("proc/basic/meminfo")).expect("read");
    // (what, file, new content, the sample's error or None if it must
    // succeed without pid 6441 and with one more unreadable process)
    let rows: Vec<(&str, &str, Vec<u8>, Option<&str>)> = vec![
        (
            "meminfo cut after 20 bytes",
            "meminfo",
            meminfo.as_bytes()[..20].to_vec(),
            Some("malformed line \"MemTotal:"),
        ),
        (
            "an empty meminfo",
            "meminfo",
            Vec::new(),
            Some("no MemTotal line"),
        ),
        (
            "a meminfo value that is not a number",
            "meminfo",
            meminfo
                .replacen("MemAvailable:", "MemAvailable: lots", 1)
                .into_bytes(),
            Some("malformed line \"MemAvailable: lots"),
        ),
        (
            "a status cut inside Uid:",
            "6441/status",
            b"Name:\tpython3\nUid:".to_vec(),
            None,
        ),
        (
            "a status of binary garbage",
            "6441/status",
            vec![0xff; 512],
            None,
        ),
        (
            "a stat without its closing parenthesis",
            "6441/stat",
            b"6441 (python3 S 1 2".to_vec(),
            None,
        ),
    ];
    for (what, file, content, want) in &rows {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_tree(&fixtures().join("proc/basic"), dir.path());
        let clean = LinuxSampler::new(dir.path())
            .sample()
            .expect("the clean tree samples");
        std::fs::write(dir.path().join(file), content).expect("break the file");
        let result = LinuxSampler::new(dir.path()).sample();
        match want {
            Some(want) => {
                let e = result.expect_err(what).to_string();
                assert!(e.contains("meminfo") && e.contains(want), "{what}: {e}");
            }
            None => {
                let snap = result.unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(
                    snap.process(6441).is_none(),
                    "{what}: the broken process is skipped"
                );
                assert!(
                    snap.process(6443).is_some(),
                    "{what}: the others are sampled"
                );
                assert_eq!(
                    snap.errors.unreadable,
                    clean.errors.unreadable + 1,
                    "{what}: counted as unreadable"
                );
            }
        }
    }
    count_rows(rows.len());
}

#[test]
fn broken_journals_are_read_around_with_a_note() {
    let good = std::fs::read(fixtures().join("journal/daemon-run.jsonl")).expect("journal");
    let lines = good
        .split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    // Two lines of garbage and an empty one after the second event.
    let second_end = good
        .iter()
        .enumerate()
        .filter(|(_, c)| **c == b'\n')
        .nth(1)
        .map(|(i, _)| i + 1)
        .expect("two lines");
    let mut garbled = good.clone();
    garbled.splice(
        second_end..second_end,
        b"{not json at all}\n\xff\xfe\n\n".iter().copied(),
    );
    let mut long_line = vec![b'x'; 2 * 1024 * 1024];
    long_line.push(b'\n');
    long_line.extend_from_slice(&good);
    // (what, bytes, exit code, text on stderr, events printed)
    let rows: Vec<(&str, Vec<u8>, i32, &str, usize)> = vec![
        (
            "a torn last line",
            good[..good.len() - 30].to_vec(),
            0,
            "skipped 1 torn last line(s)",
            lines - 1,
        ),
        (
            "garbage lines in the middle",
            garbled,
            0,
            "skipped 2 line(s) that are not events; the first:",
            lines,
        ),
        (
            "a line of 2 MiB",
            long_line,
            0,
            "a line of more than 1048576 bytes",
            lines,
        ),
        (
            "nothing but binary",
            vec![0x00, 0xff, 0x10, b'\n', 0x7f, b'\n'],
            0,
            "skipped 2 line(s) that are not events",
            0,
        ),
    ];
    for (what, bytes, code, want, events) in &rows {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, bytes).expect("write");
        let out = Command::new(HEADROOM)
            .args(["events", "--json", "--journal"])
            .arg(&path)
            .output()
            .expect("events");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{what}: {err}");
        assert!(err.contains(want), "{what}: {want:?} not in {err}");
        let printed = String::from_utf8_lossy(&out.stdout).lines().count();
        assert_eq!(printed, *events, "{what}: events printed");
    }
    count_rows(rows.len());
}

#[test]
fn a_daemon_replaying_a_broken_trace_counts_the_bad_lines_and_serves_on() {
    let trace =
        std::fs::read_to_string(fixtures().join("traces/idle-linux-6.18.jsonl")).expect("trace");
    let first = trace.lines().next().expect("a line");
    // (what, the broken line)
    let rows: Vec<(&str, String)> = vec![
        ("a line cut in half", first[..first.len() / 2].to_string()),
        ("a line of garbage", "\u{1}\u{2} not json".to_string()),
        (
            "a snapshot with a wrong type",
            first.replacen("\"taken_at\":", "\"taken_at\":\"soon\",\"x\":", 1),
        ),
    ];
    let dir = private_dir();
    let path = dir.path().join("broken.jsonl");
    let mut text = String::new();
    for (_, line) in &rows {
        text.push_str(first);
        text.push('\n');
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(&path, text).expect("write");
    let config = dir.path().join("headroom.toml");
    std::fs::write(&config, GOOD_CONFIG).expect("write");
    let mut d = Running::daemon(&[
        "run",
        "--config",
        config.to_str().expect("utf-8"),
        "--replay",
        path.to_str().expect("utf-8"),
    ]);
    let addr = d.http_addr();
    for (i, (what, _)) in rows.iter().enumerate() {
        let line_no = 2 * (i + 1);
        let line = d.expect_line(&format!("broken.jsonl:{line_no}: not a snapshot"));
        assert!(line.contains("sampling failed"), "{what}: {line}");
        assert!(d.alive(), "{what}");
    }
    let (status, metrics) = support::get(&format!("http://{addr}/metrics"));
    assert_eq!(status, 200);
    let failures = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "headroom_collector_errors_total{collector=\"sampler\",reason=\"failed\"} ",
            )
        })
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("the failure counter");
    assert!(failures >= rows.len() as f64, "{failures}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(d.alive());
    count_rows(rows.len());
}

/// Every table adds its rows here; the last table to finish checks the total.
fn count_rows(n: usize) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static ROWS: AtomicUsize = AtomicUsize::new(0);
    static TABLES: AtomicUsize = AtomicUsize::new(0);
    let total = ROWS.fetch_add(n, Ordering::SeqCst) + n;
    let tables = if cfg!(target_os = "linux") { 6 } else { 5 };
    if TABLES.fetch_add(1, Ordering::SeqCst) + 1 == tables {
        eprintln!("bad inputs: {total} rows over {tables} tables");
        assert!(total >= MIN_ROWS, "only {total} rows");
    }
}
