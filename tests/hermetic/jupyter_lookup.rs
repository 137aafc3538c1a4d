//! The notebook lookup against real HTTP servers on loopback, one per way a
//! server can behave: answers with its sessions (only with the right token),
//! answers 403, sends garbage, never answers, is not there at all, or lives
//! on another host. Each bad one costs one problem line and leaves its
//! kernels unmapped; the good one's kernels are named.
//!
//! Then the hostile runtime files, each replayed for real: a symbolic link
//! to `/dev/zero`, a FIFO, a huge file (refused, quickly, without a large
//! allocation), a stale file whose pid is gone. Listeners and servers of
//! other users, which need root, are in the environment tier
//! (`tests/environment/jupyter_lookup.rs`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use headroom::jupyter::{Kernel, Mapped, ProblemLog, apply, look_up};
use headroom::model::{ProcessSample, WorkloadKind, build};

use crate::support::jupyter::{SESSIONS, lines_of, server_file_of};

/// A server on a free loopback port that answers each request with
/// `respond(request head)`, or holds the connection open without a word
/// when `respond` gives `None`. Runs until the test process ends.
fn serve(respond: fn(&str) -> Option<String>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            match respond(&head) {
                Some(response) => {
                    let mut s: TcpStream = stream;
                    let _ = s.write_all(response.as_bytes());
                }
                None => held.push(stream),
            }
        }
    });
    port
}

fn http(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn good(head: &str) -> Option<String> {
    let authorized = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("authorization: token sekrit"));
    let wanted = head.starts_with("GET /base/api/sessions ");
    Some(match (authorized, wanted) {
        (true, true) => http("200 OK", SESSIONS),
        (false, _) => http(
            "403 Forbidden",
            r#"{"message": "Forbidden", "reason": null}"#,
        ),
        (true, false) => http("404 Not Found", "{}"),
    })
}

fn forbidden(_: &str) -> Option<String> {
    Some(http(
        "403 Forbidden",
        r#"{"message": "Forbidden", "reason": null}"#,
    ))
}

fn garbage(_: &str) -> Option<String> {
    Some(http("200 OK", "<html><body>Login</body></html>"))
}

fn silent(_: &str) -> Option<String> {
    None
}

/// `jpserver-<n>.json` in `dir`, naming this test process as the server
/// (alive, and run by the file's owner: the test's user).
fn server_file(dir: &Path, n: u32, url: &str, token: &str) -> PathBuf {
    server_file_of(dir, n, std::process::id(), url, token)
}

/// The owner of the runtime files these tests write: a lookup for this
/// user's kernels asks them.
fn me() -> Option<u32> {
    Some(headroom::os::this_process::effective_uid())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn only_the_good_servers_kernels_are_mapped_and_each_bad_one_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let good_port = serve(good);
    server_file(
        dir.path(),
        1,
        &format!("http://127.0.0.1:{good_port}/base/"),
        "sekrit",
    );
    // A server like it, given a wrong token.
    server_file(
        dir.path(),
        2,
        &format!("http://localhost:{}/base", serve(good)),
        "wrong",
    );
    server_file(
        dir.path(),
        3,
        &format!("http://127.0.0.1:{}/", serve(forbidden)),
        "t",
    );
    server_file(
        dir.path(),
        4,
        &format!("http://127.0.0.1:{}/", serve(garbage)),
        "t",
    );
    server_file(
        dir.path(),
        5,
        &format!("http://127.0.0.1:{}/", serve(silent)),
        "t",
    );
    server_file(
        dir.path(),
        6,
        &format!("http://127.0.0.1:{}/", free_port()),
        "t",
    );
    server_file(dir.path(), 7, "http://192.0.2.1:8888/", "t");
    std::fs::write(dir.path().join("nbserver-8.json"), "{\"url\": ").unwrap();

    let started = Instant::now();
    let (found, problems) = look_up(
        &[dir.path().to_path_buf()],
        me(),
        Duration::from_millis(500),
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a silent server held the lookup for {:?}",
        started.elapsed()
    );

    let names: HashMap<&str, &str> = found
        .iter()
        .map(|(id, m)| (id.as_str(), m.notebook.as_str()))
        .collect();
    assert_eq!(
        names,
        HashMap::from([("k-good", "work/train.ipynb"), ("k-eval", "eval.ipynb")])
    );
    assert_eq!(found["k-eval"].kernel_name.as_deref(), Some("julia-1.10"));

    let mut log = ProblemLog::default();
    let lines = log.news(problems.clone());
    let about = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(
        lines.len(),
        7,
        "one line per bad file or server: {lines:#?}"
    );
    // "answered 403", not "403": a random port may hold those digits.
    assert_eq!(about("answered 403"), 2, "{lines:#?}");
    assert_eq!(about("the token in"), 2, "{lines:#?}");
    assert_eq!(about("not a list of sessions"), 1, "{lines:#?}");
    assert_eq!(about("no answer from"), 1, "the silent one: {lines:#?}");
    // Linux: "nothing listens on port N"; macOS: "the server's pid does
    // not listen on port N".
    assert_eq!(
        about("not sending the token"),
        1,
        "the absent one is not even tried: {lines:#?}"
    );
    assert_eq!(about("not a loopback address"), 1, "{lines:#?}");
    assert_eq!(about("nbserver-8.json"), 1, "{lines:#?}");
    assert!(
        lines.iter().all(|l| !l.contains("sekrit")),
        "a token was logged: {lines:#?}"
    );
    // The next lookup meets the same problems: nothing new to log.
    let (_, again) = look_up(
        &[dir.path().to_path_buf()],
        me(),
        Duration::from_millis(500),
    );
    assert!(log.news(again).is_empty());
}

fn kernel(pid: u32, uid: u32, kernel_id: &str) -> ProcessSample {
    build::process(pid)
        .uid(uid)
        .name("python3")
        .footprint(1 << 20)
        .resident(1 << 20)
        .kind(WorkloadKind::Jupyter)
        .kernel_id(kernel_id)
        .build()
}

#[test]
fn apply_names_trusted_kernels_and_reports_unknown_ones() {
    let mut snap = build::snapshot(0)
        .processes([
            kernel(10, 1000, "k-ada"),
            kernel(11, 1001, "k-ada"),
            kernel(12, 1000, "k-new"),
        ])
        .build();
    let map = HashMap::from([(
        Kernel::new("k-ada", Some(1000)),
        Mapped {
            notebook: "train.ipynb".into(),
            kernel_name: Some("python3".into()),
            owner_uid: Some(1000),
            server: "http://127.0.0.1:8888/".into(),
        },
    )]);
    let (present, unknown) = apply(&map, &mut snap);
    assert!(unknown, "k-new is not in the map");
    // uid 1001's process with the same id is a kernel of its own.
    assert_eq!(present.len(), 3);
    assert!(present.contains(&Kernel::new("k-ada", Some(1001))));
    let notebook = |pid: u32| snap.process(pid).unwrap().workload.notebook.clone();
    assert_eq!(notebook(10).as_deref(), Some("train.ipynb"));
    assert_eq!(
        notebook(11),
        None,
        "uid 1001's kernel is not named by uid 1000's server"
    );
    assert_eq!(notebook(12), None);
}

/// A listener that counts every connection made to it and every byte sent,
/// answers nothing, and reports both on demand.
struct Tally {
    port: u16,
    connections: Arc<AtomicUsize>,
    bytes: Arc<AtomicUsize>,
}

fn tally() -> Tally {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let bytes = Arc::new(AtomicUsize::new(0));
    let (c, b) = (Arc::clone(&connections), Arc::clone(&bytes));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            c.fetch_add(1, Ordering::SeqCst);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stream.read(&mut buf) {
                b.fetch_add(n, Ordering::SeqCst);
            }
        }
    });
    Tally {
        port,
        connections,
        bytes,
    }
}

/// Run `f` on a thread and wait for it at most `limit`: a hang detector
/// (the limit is generous; a hang is what fails, not slowness).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("still running after {limit:?}: it hangs"))
}

/// The peak resident size of this process so far (`VmHWM` of Linux's
/// `/proc/self/status`), in bytes; `None` where there is no `/proc`.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())?;
    Some(kib << 10)
}

#[test]
fn a_runtime_file_linked_to_dev_zero_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("jpserver-2.json")).unwrap();
    let before = peak_rss();
    let dirs = vec![dir.path().to_path_buf()];
    let (found, problems) = within(Duration::from_secs(60), move || {
        look_up(&dirs, me(), Duration::from_millis(500))
    });
    let after = peak_rss();
    assert!(found.is_empty());
    let lines = lines_of(problems);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("jpserver-2.json") && lines[0].contains("a symbolic link"),
        "{lines:#?}"
    );
    // Unbounded, the read of /dev/zero grew the process by gigabytes.
    match (before, after) {
        (Some(before), Some(after)) => {
            let grown = after.saturating_sub(before);
            assert!(
                grown < 64 << 20,
                "the peak resident size grew by {grown} bytes"
            );
        }
        _ => eprintln!("no /proc/self/status here: the peak resident size is not checked"),
    }
}

#[test]
fn a_fifo_runtime_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("jpserver-3.json");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let dirs = vec![dir.path().to_path_buf()];
    // No writer ever opens the FIFO: a blocking open would never return.
    let (_, problems) = within(Duration::from_secs(60), move || {
        look_up(&dirs, me(), Duration::from_millis(500))
    });
    let lines = lines_of(problems);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("jpserver-3.json") && lines[0].contains("a FIFO (named pipe)"),
        "{lines:#?}"
    );
}

#[test]
fn an_oversized_runtime_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = tally();
    // A valid server file padded with 1 MiB of spaces.
    let mut text = format!(
        r#"{{"url": "http://127.0.0.1:{}/", "token": "sekrit", "pid": {}, "pad": ""#,
        t.port,
        std::process::id()
    );
    text.push_str(&" ".repeat(1 << 20));
    text.push_str("\"}");
    std::fs::write(dir.path().join("jpserver-4.json"), text).unwrap();
    let (_, problems) = look_up(
        &[dir.path().to_path_buf()],
        me(),
        Duration::from_millis(500),
    );
    let lines = lines_of(problems);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("jpserver-4.json") && lines[0].contains("larger than 65536 bytes"),
        "{lines:#?}"
    );
    assert_eq!(t.connections.load(Ordering::SeqCst), 0);
    assert_eq!(t.bytes.load(Ordering::SeqCst), 0);
}

#[test]
fn a_stale_file_whose_pid_is_gone_is_not_asked() {
    let dir = tempfile::tempdir().unwrap();
    let t = tally();
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let file = server_file_of(
        dir.path(),
        5,
        pid,
        &format!("http://127.0.0.1:{}/", t.port),
        "sekrit",
    );
    let (found, problems) = look_up(
        &[dir.path().to_path_buf()],
        me(),
        Duration::from_millis(500),
    );
    assert!(found.is_empty());
    let lines = lines_of(problems);
    assert_eq!(
        lines,
        vec![format!(
            "not sending the token of {} to http://127.0.0.1:{}/: the server's pid {pid} is \
             gone: a stale runtime file; its kernels stay unmapped",
            file.display(),
            t.port
        )]
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        t.connections.load(Ordering::SeqCst),
        0,
        "it was connected to"
    );
    assert_eq!(t.bytes.load(Ordering::SeqCst), 0);
}

#[test]
fn control_characters_from_a_server_are_escaped_in_problems() {
    fn forged(_: &str) -> Option<String> {
        Some(http(
            "200 OK",
            "oops\n2026-01-01 ERROR forged line\u{1b}[2J",
        ))
    }
    let dir = tempfile::tempdir().unwrap();
    server_file(
        dir.path(),
        6,
        &format!("http://127.0.0.1:{}/", serve(forged)),
        "t",
    );
    let (_, problems) = look_up(
        &[dir.path().to_path_buf()],
        me(),
        Duration::from_millis(500),
    );
    let lines = lines_of(problems);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        !lines[0].chars().any(char::is_control),
        "a control character reached the log: {lines:#?}"
    );
}
