//! The HTTP server on a real loopback socket as root: a client's user
//! decides what it sees. Root sees every command line; `nobody` (uid 65534,
//! a Python client run through `setpriv`) sees its own process's only, the
//! others' redacted.
//!
//! Needs root, `setpriv` and `python3`, and fails without them.

use headroom::http::ServerLimits;
use serde_json::Value;

use crate::support::http::{http_get, shown, start, users_state};
use crate::support::{need_root, need_tools};

/// pid → (argv shown, `redacted`) of an answer, sorted by pid.
fn processes_seen(body: &str) -> Vec<(u64, bool, bool)> {
    let v: Value = serde_json::from_str(body).expect("JSON");
    let mut rows = shown(&v);
    rows.sort();
    rows
}

#[test]
fn the_clients_user_decides_what_it_sees() {
    need_root();
    need_tools(&[("setpriv", "util-linux"), ("python3", "python3")]);
    let (server, _tx) = start(users_state(0), ServerLimits::default());
    let addr = server.local_addr();
    let (status, body) = http_get(addr, "/api/v1/snapshot");
    assert_eq!(status, 200);
    assert_eq!(
        processes_seen(&body),
        [(100, true, false), (200, true, false), (300, true, false)],
        "root sees everything"
    );
    let script = "import sys, urllib.request\n\
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n\
        sys.stdout.write(opener.open(sys.argv[1], timeout=10).read().decode())\n";
    let out = std::process::Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .args(["/usr/bin/python3", "-c", script])
        .arg(format!("http://{addr}/api/v1/snapshot"))
        .output()
        .expect("setpriv runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(
        processes_seen(&body),
        [(100, false, true), (200, true, false), (300, false, true)],
        "nobody sees its own process only"
    );
    assert!(!body.contains("SECRET-root") && !body.contains("SECRET-ana"));
    assert!(body.contains("SECRET-nobody"));
}
