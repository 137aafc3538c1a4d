//! The notebook lookup against real HTTP servers on loopback, one per way a
//! server can behave: answers with its sessions (only with the right token),
//! answers 403, sends garbage, never answers, is not there at all, or lives
//! on another host. Each bad one costs one problem line and leaves its
//! kernels unmapped; the good one's kernels are named.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use headroom::jupyter::{Mapped, ProblemLog, apply, look_up};
use headroom::model::{ProcessId, ProcessSample, Snapshot, Timestamp, Workload, WorkloadKind};

const SESSIONS: &str = r#"[{"id": "s1", "path": "work/train.ipynb", "name": "train.ipynb", "type": "notebook", "kernel": {"id": "k-good", "name": "python3"}}, {"id": "s2", "path": "eval.ipynb", "type": "notebook", "kernel": {"id": "k-eval", "name": "julia-1.10"}}]"#;

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

fn server_file(dir: &Path, pid: u32, url: &str, token: &str) {
    let text = format!(
        r#"{{"base_url": "/", "hostname": "127.0.0.1", "password": false, "pid": {pid}, "port": 1, "root_dir": "/tmp", "secure": false, "sock": "", "token": "{token}", "url": "{url}", "version": "2.21.1"}}"#
    );
    std::fs::write(dir.join(format!("jpserver-{pid}.json")), text).unwrap();
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
    let good = serve(good);
    server_file(
        dir.path(),
        1,
        &format!("http://127.0.0.1:{good}/base/"),
        "sekrit",
    );
    // The same server with a wrong token.
    server_file(
        dir.path(),
        2,
        &format!("http://localhost:{good}/base"),
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
    let (found, problems) = look_up(&[dir.path().to_path_buf()], Duration::from_millis(500));
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
    assert_eq!(about("no answer from"), 2, "silent and absent: {lines:#?}");
    assert_eq!(about("not a loopback address"), 1, "{lines:#?}");
    assert_eq!(about("nbserver-8.json"), 1, "{lines:#?}");
    assert!(
        lines.iter().all(|l| !l.contains("sekrit")),
        "a token was logged: {lines:#?}"
    );
    // The next lookup meets the same problems: nothing new to log.
    let (_, again) = look_up(&[dir.path().to_path_buf()], Duration::from_millis(500));
    assert!(log.news(again).is_empty());
}

fn kernel(pid: u32, uid: u32, kernel_id: &str) -> ProcessSample {
    ProcessSample {
        uid: Some(uid),
        footprint: 1 << 20,
        resident: 1 << 20,
        detail: Default::default(),
        workload: Workload {
            kind: WorkloadKind::Jupyter,
            kernel_id: Some(kernel_id.into()),
            ..Workload::default()
        },
        ..ProcessSample::new(ProcessId { pid, start: 1 }, 1, "python3")
    }
}

#[test]
fn apply_names_trusted_kernels_and_reports_unknown_ones() {
    let mut snap = Snapshot {
        taken_at: Timestamp(0),
        source: "test".into(),
        processes: vec![
            kernel(10, 1000, "k-ada"),
            kernel(11, 1001, "k-ada"),
            kernel(12, 1000, "k-new"),
        ],
        ..Snapshot::default()
    };
    let map = HashMap::from([(
        "k-ada".to_string(),
        Mapped {
            notebook: "train.ipynb".into(),
            kernel_name: Some("python3".into()),
            owner_uid: Some(1000),
            server: "http://127.0.0.1:8888/".into(),
        },
    )]);
    let (present, unknown) = apply(&map, &mut snap);
    assert!(unknown, "k-new is not in the map");
    assert_eq!(present.len(), 2);
    let notebook = |pid: u32| snap.process(pid).unwrap().workload.notebook.clone();
    assert_eq!(notebook(10).as_deref(), Some("train.ipynb"));
    assert_eq!(
        notebook(11),
        None,
        "uid 1001's kernel is not named by uid 1000's server"
    );
    assert_eq!(notebook(12), None);
}
