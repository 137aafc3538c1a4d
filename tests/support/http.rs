//! The HTTP server and what each viewer may see, shared by both tiers'
//! router tests: a snapshot holding a Jupyter kernel each of root, `nobody`
//! and uid 1000, the server on a loopback port of its own, a plain GET over
//! a fresh connection, and which command lines an answer shows.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use headroom::config::Config;
use headroom::daemon::Working;
use headroom::http::{Server, ServerLimits};
use headroom::model::{Snapshot, Timestamp};
use headroom::state::State;
use serde_json::Value;
use tokio::sync::watch;

/// A snapshot taken now with one Jupyter kernel each of root, `nobody`
/// (65534) and uid 1000, each with a secret on its command line and a
/// notebook, padded with `pad` bytes of command line each.
pub fn users_snapshot(pad: usize) -> Snapshot {
    use headroom::model::build::{kernel, snapshot};
    let kernel = |pid: u32, uid: u32, user: &str| {
        kernel(pid)
            .uid(uid)
            .user(user)
            .exe(format!("/home/{user}/venv/bin/python3"))
            .argv(vec![
                "python3".to_string(),
                "-m".into(),
                "ipykernel_launcher".into(),
                format!("--token=SECRET-{user}"),
                "x".repeat(pad),
            ])
            .footprint(u64::from(pid) << 20)
            .resident(u64::from(pid) << 20)
            .kernel_id(format!("kernel-{user}"))
            .notebook(format!("{user}/plans.ipynb"))
            .evidence(["argv[2] is ipykernel_launcher", "maps libtorch_cpu.so"])
    };
    snapshot(0)
        .taken_at(Timestamp::now())
        .processes([
            kernel(100, 0, "root"),
            kernel(200, 65534, "nobody"),
            kernel(300, 1000, "ana"),
        ])
        .build()
}

pub fn users_state(pad: usize) -> State {
    let snap = users_snapshot(pad);
    let mut working = Working::new(Config::default());
    let mut state = working.initial_state(None, snap.taken_at);
    working.record(Arc::new(snap), &mut state);
    state
}

/// pid → (argv shown, `redacted`) of a snapshot or process-table answer.
pub fn shown(v: &Value) -> Vec<(u64, bool, bool)> {
    v["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| {
            let full = p["argv"].as_array().is_some_and(|a| !a.is_empty());
            if !full {
                assert_eq!(p["exe"], Value::Null, "{p}");
                assert_eq!(p["workload"]["notebook"], Value::Null, "{p}");
                assert_eq!(p["workload"]["kernel_id"], Value::Null, "{p}");
                // The libraries a process maps are its owner's to see.
                assert_eq!(p["workload"]["evidence"], serde_json::json!([]));
                assert!(p["name"].is_string() && p["user"].is_string() && p["footprint"].is_u64());
            }
            (
                p["pid"].as_u64().unwrap_or(0),
                full,
                p["redacted"] == Value::Bool(true),
            )
        })
        .collect()
}

/// The server on a loopback port of its own, serving `state` under
/// `limits`, and the sender that publishes new states to it.
pub fn start(state: State, limits: ServerLimits) -> (Server, watch::Sender<State>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let (tx, rx) = watch::channel(state);
    let server = Server::start_with(listener, rx, limits).expect("server starts");
    (server, tx)
}

/// A connection to `addr` whose reads give up after 10 s.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s
}

/// A GET of `path`, asking the server to close after it when `close`.
pub fn request(path: &str, close: bool) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{}\r\n",
        if close { "Connection: close\r\n" } else { "" }
    )
}

/// Status and body of one GET on a new connection.
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = connect(addr);
    s.write_all(request(path, true).as_bytes()).expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("answer");
    let status = text
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_string())
}
