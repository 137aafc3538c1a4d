//! The HTTP router driven with `oneshot`, no socket: every endpoint on a state
//! built from a recorded trace (a Python process growing 64 MiB every 0.5 s),
//! the answers before the first sample, a 400 naming the parameter for
//! every kind of bad parameter, what each viewer may see (the viewer put
//! in the request by hand, as the server does per connection), and the job
//! each process row carries.
//!
//! Then the server itself on real loopback sockets (`Server::start_with`,
//! short timeouts): idle connections past the cap make room and `/healthz`
//! still answers, a newcomer is refused when every connection is busy, event
//! streams have their own cap, silent and half-sent connections are closed,
//! an endless request head is cut off, slow readers of a large snapshot
//! share one encoding and are dropped when they stall. A client's user
//! deciding what it sees over a real socket, which needs root and a second
//! user, is in the environment tier (`tests/environment/http_router.rs`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use headroom::config::Config;
use headroom::daemon::Working;
use headroom::http::router;
use headroom::http::viewer::Peer;
use headroom::model::{Snapshot, Timestamp};
use headroom::sample::replay::read_trace;
use headroom::state::State;
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::watch;
use tower::ServiceExt;

use crate::support::http::{shown, users_snapshot, users_state};

fn trace(name: &str) -> Vec<Snapshot> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/traces")
        .join(name);
    read_trace(&path).expect("trace reads")
}

/// State after publishing the first `n` snapshots of the growth trace.
fn grown(n: usize) -> (State, u32) {
    let snaps = trace("growth-linux-6.18.jsonl");
    let pid = snaps[0]
        .processes
        .iter()
        .find(|p| p.argv.iter().any(|a| a == "/tmp/grow.py"))
        .expect("the growing script is in the trace")
        .id
        .pid;
    let mut working = Working::new(Config::default());
    let mut state = working.initial_state(None, snaps[0].taken_at);
    for s in snaps.into_iter().take(n) {
        working.record(Arc::new(s), &mut state);
    }
    (state, pid)
}

fn empty() -> State {
    State::new(Config::default(), None, Timestamp(1_700_000_000_000))
}

struct Answer {
    status: StatusCode,
    content_type: String,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

async fn send(state: State, request: Request<Body>) -> Answer {
    let (_tx, rx) = watch::channel(state);
    let response = router(rx).oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    Answer {
        status,
        content_type,
        headers,
        body: String::from_utf8(bytes.to_vec()).expect("UTF-8 body"),
    }
}

/// A GET as root (the viewer who sees everything).
async fn get(state: State, uri: &str) -> Answer {
    get_as(state, uri, Some(Peer::known(Some(0)))).await
}

/// A GET from `peer` (`None`: a request that carries no viewer at all).
async fn get_as(state: State, uri: &str, peer: Option<Peer>) -> Answer {
    let mut request = Request::get(uri)
        .header(header::HOST, "127.0.0.1:9717")
        .body(Body::empty())
        .expect("request");
    if let Some(peer) = peer {
        request.extensions_mut().insert(peer);
    }
    send(state, request).await
}

#[tokio::test]
async fn data_endpoints_answer_503_with_a_reason_before_the_first_sample() {
    for uri in [
        "/api/v1/snapshot",
        "/api/v1/processes",
        "/api/v1/processes/1",
        "/api/v1/history",
    ] {
        let a = get(empty(), uri).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{uri}");
        assert!(a.content_type.starts_with("application/json"), "{uri}");
        let msg = a.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(msg.starts_with("no sample yet"), "{uri}: {msg}");
    }
    let health = get(empty(), "/healthz").await;
    assert_eq!(health.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(health.json()["status"], "starting");
    // Metrics and config do not depend on a sample.
    let metrics = get(empty(), "/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(
        metrics
            .body
            .contains("headroom_collector_up{collector=\"sampler\"} 0")
    );
    assert_eq!(get(empty(), "/api/v1/config").await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_failed_first_sample_is_the_reason_given() {
    let mut state = empty();
    state.last_error = Some("cannot read /proc/meminfo: permission denied".into());
    let a = get(state, "/api/v1/snapshot").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        a.body
            .contains("sampling failed: cannot read /proc/meminfo"),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn snapshot_is_the_latest_sample() {
    let (state, _) = grown(31);
    let latest = state.snapshot.clone().expect("a snapshot");
    let a = get(state, "/api/v1/snapshot").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.headers[header::CACHE_CONTROL], "no-store");
    let snap: Snapshot = serde_json::from_str(&a.body).expect("a snapshot");
    assert_eq!(&snap, latest.as_ref());
}

#[tokio::test]
async fn processes_are_sorted_largest_first_and_limited() {
    let (state, pid) = grown(20);
    let a = get(state, "/api/v1/processes?limit=3").await;
    assert_eq!(a.status, StatusCode::OK);
    let v = a.json();
    let rows = v["processes"].as_array().expect("rows");
    assert_eq!(rows.len(), 3);
    assert!(v["matched"].as_u64() > Some(3));
    assert_eq!(
        rows[0]["pid"].as_u64(),
        Some(u64::from(pid)),
        "the grower is largest"
    );
    let sizes: Vec<u64> = rows
        .iter()
        .filter_map(|r| r["footprint"].as_u64())
        .collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
}

#[tokio::test]
async fn the_growing_process_has_its_rate_and_time_to_exhaustion() {
    let (state, pid) = grown(20);
    let a = get(state, "/api/v1/processes?sort=growth&limit=1").await;
    let row = &a.json()["processes"][0];
    assert_eq!(row["pid"].as_u64(), Some(u64::from(pid)));
    // 64 MiB every 0.5 s.
    let rate = row["growth_bytes_per_second"].as_f64().expect("a rate");
    let expected = 128.0 * 1048576.0;
    assert!((rate - expected).abs() < expected * 0.2, "{rate}");
    let eta = row["time_to_exhaustion_seconds"].as_f64().expect("an ETA");
    assert!(eta > 60.0 && eta < 600.0, "{eta}");
}

#[tokio::test]
async fn processes_filter_by_workload() {
    let (state, pid) = grown(20);
    let a = get(state.clone(), "/api/v1/processes?workload=python&limit=100").await;
    let rows = a.json()["processes"].as_array().cloned().expect("rows");
    assert!(
        rows.iter()
            .any(|r| r["pid"].as_u64() == Some(u64::from(pid)))
    );
    assert!(rows.iter().all(|r| r["workload"]["kind"] == "python"));
    let ml = get(state, "/api/v1/processes?workload=ml").await.json();
    assert_eq!(ml["matched"], 0, "the trace has no ML workload");
}

#[tokio::test]
async fn one_process_comes_with_its_history() {
    let (state, pid) = grown(20);
    let a = get(state, &format!("/api/v1/processes/{pid}")).await;
    assert_eq!(a.status, StatusCode::OK);
    let v = a.json();
    assert_eq!(v["process"]["pid"].as_u64(), Some(u64::from(pid)));
    let history = v["history"].as_array().expect("history");
    assert_eq!(history.len(), 20);
    let first = history[0]["footprint"].as_u64().unwrap_or(0);
    let last = history[19]["footprint"].as_u64().unwrap_or(0);
    assert!(last > first + (512 << 20), "{first} -> {last}");
}

#[tokio::test]
async fn an_unknown_pid_is_404_with_a_message() {
    let (state, _) = grown(5);
    let a = get(state, "/api/v1/processes/4000000000").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(
        a.json()["error"]
            .as_str()
            .unwrap_or_default()
            .contains("no process with pid 4000000000")
    );
}

#[tokio::test]
async fn history_is_limited_to_the_asked_minutes() {
    let (state, _) = grown(31);
    let v = get(state, "/api/v1/history?minutes=1").await.json();
    let points = v["points"].as_array().expect("points");
    assert_eq!(points.len(), 31, "15 s of trace fit in a minute");
    assert_eq!(v["retention_seconds"], 900);
    assert!(points[0]["used"].as_u64() > Some(0));
}

#[tokio::test]
async fn events_are_the_recent_journal_entries_with_their_message() {
    use headroom::event::{Event, EventKind, Outcome, ProcessRef};
    use headroom::model::WorkloadKind;
    let (mut state, pid) = grown(3);
    let process = ProcessRef {
        pid,
        start: 1,
        name: "python3".into(),
        user: Some("root".into()),
        uid: Some(0),
        workload: WorkloadKind::Python,
        footprint: 900 << 20,
        kernel_id: None,
        notebook: None,
        labels: None,
    };
    state.add_event(Event {
        at: Timestamp(1_000),
        kind: EventKind::ConfigReloaded {
            path: "/etc/headroom.toml".into(),
            error: None,
        },
    });
    state.add_event(Event {
        at: Timestamp(1_795_318_740_000),
        kind: EventKind::Action {
            rule: "runaway".into(),
            process,
            step: 0,
            action: "SIGINT".into(),
            outcome: Outcome::Done,
            dry_run: false,
            detail: "footprint 900 MiB > 800 MiB".into(),
        },
    });
    // Before the first sample the events are there too.
    let early = get(empty(), "/api/v1/events").await;
    assert_eq!(early.status, StatusCode::OK);

    let v = get(state, "/api/v1/events?since=2026-01-01T00:00:00Z")
        .await
        .json();
    let events = v["events"].as_array().expect("a list");
    assert_eq!(events.len(), 1, "since filters: {v}");
    assert_eq!(events[0]["event"], "action");
    assert_eq!(events[0]["outcome"], "done");
    let message = events[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("SIGINT") && message.contains("runaway"),
        "{message}"
    );
    assert!(
        v["journal"]
            .as_str()
            .is_some_and(|j| j.ends_with("journal.jsonl"))
    );
}

#[tokio::test]
async fn config_is_the_effective_config() {
    let v = get(empty(), "/api/v1/config").await.json();
    assert_eq!(v["file"], Value::Null);
    assert_eq!(v["config"]["daemon"]["interval"], "1s");
    assert_eq!(v["config"]["http"]["listen"], "127.0.0.1:9717");
}

#[tokio::test]
async fn healthz_is_ok_while_samples_are_fresh_and_503_when_stale() {
    let (mut state, _) = grown(3);
    let mut fresh = (*state.snapshot.clone().expect("snapshot")).clone();
    fresh.taken_at = Timestamp::now();
    let history = Arc::clone(&state.history);
    state.publish(Arc::new(fresh), history);
    let a = get(state.clone(), "/healthz").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.json()["status"], "ok");

    // The trace's own timestamps are long past: stale.
    let (old, _) = grown(3);
    let a = get(old, "/healthz").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(a.json()["status"], "stale");
}

#[tokio::test]
async fn metrics_are_prometheus_text() {
    let (state, _) = grown(10);
    let a = get(state, "/metrics").await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(
        a.content_type.starts_with("text/plain; version=0.0.4"),
        "{}",
        a.content_type
    );
    assert!(a.body.contains("headroom_samples_total 10"));
    assert!(a.body.contains("# HELP headroom_memory_available_bytes "));
}

#[tokio::test]
async fn bad_parameters_get_400_naming_the_parameter() {
    let (state, _) = grown(3);
    let cases = [
        ("/api/v1/processes?limit=abc", "limit"),
        ("/api/v1/processes?limit=0", "limit"),
        ("/api/v1/processes?sort=cpu", "sort"),
        ("/api/v1/processes?workload=rust", "workload"),
        ("/api/v1/processes?limt=5", "limt"),
        ("/api/v1/processes?limit=1&limit=2", "limit"),
        ("/api/v1/processes/abc", "pid"),
        ("/api/v1/processes/0", "pid"),
        ("/api/v1/processes/-3", "pid"),
        ("/api/v1/processes/1?verbose=1", "verbose"),
        ("/api/v1/history?minutes=0", "minutes"),
        ("/api/v1/history?minutes=forever", "minutes"),
        ("/api/v1/events?since=yesterday", "since"),
        ("/api/v1/snapshot?pid=1", "pid"),
        ("/api/v1/config?format=yaml", "format"),
        ("/api/v1/stream?x=1", "x"),
        ("/metrics?name=headroom_x", "name"),
        ("/healthz?verbose", "verbose"),
    ];
    for (uri, parameter) in cases {
        let a = get(state.clone(), uri).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{uri}: {}", a.body);
        let v = a.json();
        assert_eq!(v["parameter"], parameter, "{uri}");
        let msg = v["error"].as_str().unwrap_or_default();
        assert!(msg.contains(&format!("\"{parameter}\"")), "{uri}: {msg}");
    }
}

#[tokio::test]
async fn unknown_paths_and_methods_are_json_errors() {
    let a = get(empty(), "/api/v2/snapshot").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(
        a.json()["error"]
            .as_str()
            .unwrap_or_default()
            .contains("/api/v2/snapshot")
    );

    let post = Request::post("/api/v1/config")
        .header(header::HOST, "127.0.0.1")
        .body(Body::empty())
        .expect("request");
    let a = send(empty(), post).await;
    assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        a.json()["error"]
            .as_str()
            .unwrap_or_default()
            .contains("read-only")
    );
}

#[tokio::test]
async fn a_dns_name_in_host_is_refused_unless_remote_is_allowed() {
    let request = || {
        Request::get("/api/v1/config")
            .header(header::HOST, "attacker.example:9717")
            .body(Body::empty())
            .expect("request")
    };
    let a = send(empty(), request()).await;
    assert_eq!(a.status, StatusCode::MISDIRECTED_REQUEST);
    assert!(
        a.json()["error"]
            .as_str()
            .unwrap_or_default()
            .contains("attacker.example")
    );

    let mut open = empty();
    let mut config = (*open.config).clone();
    config.http.allow_remote = true;
    open.config = std::sync::Arc::new(config);
    assert_eq!(send(open, request()).await.status, StatusCode::OK);
    let local = Request::get("/api/v1/config")
        .header(header::HOST, "localhost:9717")
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(empty(), local).await.status, StatusCode::OK);
}

#[tokio::test]
async fn the_status_page_and_its_assets_are_served_from_the_binary() {
    let a = get(empty(), "/").await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.content_type.starts_with("text/html"));
    let csp = a.headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap_or_default();
    assert!(csp.contains("connect-src 'self'"), "{csp}");
    for asset in [
        "/assets/app.js",
        "/assets/style.css",
        "/assets/uPlot.iife.min.js",
        "/assets/uPlot.min.css",
    ] {
        assert!(a.body.contains(asset), "the page links {asset}");
        let got = get(empty(), asset).await;
        assert_eq!(got.status, StatusCode::OK, "{asset}");
        assert!(got.body.len() > 1000, "{asset}");
    }
    // Nothing on the page points off the daemon.
    assert!(!a.body.contains("http://") && !a.body.contains("https://"));
    assert_eq!(
        get(empty(), "/assets/secret.txt").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_stream_sends_the_current_sample_at_once() {
    let (state, _) = grown(5);
    let taken_at = state.snapshot.as_ref().expect("snapshot").taken_at;
    let (tx, rx) = watch::channel(state);
    let request = Request::get("/api/v1/stream")
        .header(header::HOST, "127.0.0.1")
        .body(Body::empty())
        .expect("request");
    let response = router(rx).oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut body = response.into_body();
    let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .expect("an event within 5 s")
        .expect("a frame")
        .expect("no error");
    let text = String::from_utf8(frame.into_data().expect("data").to_vec()).expect("UTF-8");
    assert!(text.starts_with("event: sample\ndata: {"), "{text}");
    let json = text.trim_start_matches("event: sample\ndata: ").trim_end();
    let v: Value = serde_json::from_str(json).expect("JSON sample");
    assert_eq!(v["taken_at"].as_u64(), Some(taken_at.as_millis()));
    assert!(v["point"]["used"].as_u64() > Some(0));

    // The daemon stopping (its sender dropped) ends the stream.
    drop(tx);
    let end = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .expect("the stream ends");
    assert!(end.is_none(), "no more frames");
}

// ---- What each viewer sees -------------------------------------------------

#[tokio::test]
async fn root_sees_every_command_line() {
    let a = get(users_state(0), "/api/v1/snapshot").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        shown(&a.json()),
        [(100, true, false), (200, true, false), (300, true, false)]
    );
    assert!(a.body.contains("SECRET-ana") && a.body.contains("ana/plans.ipynb"));
}

#[tokio::test]
async fn a_user_sees_only_their_own_command_lines() {
    for uri in ["/api/v1/snapshot", "/api/v1/processes?sort=footprint"] {
        let a = get_as(users_state(0), uri, Some(Peer::known(Some(1000)))).await;
        assert_eq!(a.status, StatusCode::OK, "{uri}");
        let mut rows = shown(&a.json());
        rows.sort();
        assert_eq!(
            rows,
            [(100, false, true), (200, false, true), (300, true, false)],
            "{uri}"
        );
        assert!(a.body.contains("SECRET-ana"), "{uri}");
        for secret in ["SECRET-root", "SECRET-nobody", "root/plans", "nobody/plans"] {
            assert!(!a.body.contains(secret), "{uri} leaks {secret}");
        }
    }
    let own = get_as(
        users_state(0),
        "/api/v1/processes/300",
        Some(Peer::known(Some(1000))),
    )
    .await
    .json();
    assert_eq!(own["process"]["argv"][3], "--token=SECRET-ana");
    assert!(own["process"]["rules"].is_array());
    let other = get_as(
        users_state(0),
        "/api/v1/processes/100",
        Some(Peer::known(Some(1000))),
    )
    .await
    .json();
    assert_eq!(other["process"]["redacted"], true);
    assert_eq!(other["process"]["argv"], serde_json::json!([]));
    assert!(other["process"]["growth_bytes_per_second"].is_null());
}

#[tokio::test]
async fn an_unknown_viewer_sees_no_command_line() {
    use axum::extract::ConnectInfo;
    use headroom::http::viewer::LocalAddr;
    let a = get_as(users_state(0), "/api/v1/snapshot", None).await;
    assert!(
        shown(&a.json())
            .iter()
            .all(|(_, full, redacted)| !full && *redacted)
    );
    // A client beyond loopback cannot be identified.
    let mut request = Request::get("/api/v1/snapshot")
        .header(header::HOST, "127.0.0.1:9717")
        .body(Body::empty())
        .expect("request");
    let client: std::net::SocketAddr = "192.0.2.7:40000".parse().unwrap();
    let server: std::net::SocketAddr = "192.0.2.1:9717".parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(client));
    request.extensions_mut().insert(LocalAddr(server));
    let a = send(users_state(0), request).await;
    assert!(
        shown(&a.json()).iter().all(|(_, full, _)| !full),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn show_all_users_turns_redaction_off() {
    let mut state = users_state(0);
    let mut config = (*state.config).clone();
    config.http.show_all_users = true;
    state.config = std::sync::Arc::new(config);
    let a = get_as(state, "/api/v1/snapshot", None).await;
    assert!(
        shown(&a.json())
            .iter()
            .all(|(_, full, redacted)| *full && !redacted)
    );
}

#[tokio::test]
async fn events_and_metrics_hide_other_users_notebooks() {
    use headroom::event::{Event, EventKind, ProcessRef};
    let mut state = users_state(0);
    let snap = state.snapshot.clone().expect("snapshot");
    for p in &snap.processes {
        state.add_event(Event {
            at: snap.taken_at,
            kind: EventKind::LimitCrossed {
                rule: "runaway".into(),
                process: ProcessRef::of(p),
                detail: "footprint 1 GiB > 512 MiB".into(),
            },
        });
    }
    let ana = Some(Peer::known(Some(1000)));
    let v = get_as(state.clone(), "/api/v1/events", ana.clone())
        .await
        .json();
    let events = v["events"].as_array().expect("events");
    assert_eq!(events.len(), 3);
    for e in events {
        let mine = e["process"]["uid"] == 1000;
        assert_eq!(e["process"]["notebook"].is_string(), mine, "{e}");
        assert_eq!(e["process"]["redacted"] == true, !mine, "{e}");
    }
    let text = v.to_string();
    assert!(text.contains("ana/plans.ipynb") && !text.contains("root/plans.ipynb"));

    let metrics = get_as(state.clone(), "/metrics", ana).await.body;
    assert!(
        metrics.contains("notebook=\"ana/plans.ipynb\""),
        "{metrics}"
    );
    assert!(!metrics.contains("root/plans.ipynb") && !metrics.contains("nobody/plans.ipynb"));
    let as_root = get(state, "/metrics").await.body;
    assert!(as_root.contains("notebook=\"root/plans.ipynb\""));
}

#[tokio::test]
async fn events_take_a_limit_and_hide_other_users_kernel_log_records() {
    use headroom::event::{Event, EventKind, ExitCause, ExitCauseKind, ProcessRef};
    let mut state = users_state(0);
    let snap = state.snapshot.clone().expect("snapshot");
    for (i, p) in snap.processes.iter().enumerate() {
        state.add_event(Event {
            at: Timestamp(1_000 + i as u64),
            kind: EventKind::Exited {
                process: ProcessRef::of(p),
                last_action: None,
                peak_footprint: p.footprint,
                last_growth_bytes_per_second: None,
                headroom_action: None,
                cause: Some(ExitCause {
                    kind: ExitCauseKind::Crashed,
                    how: "the kernel log (/dev/kmsg) recorded a crash: segfault in libsecret.so"
                        .into(),
                    detail: Some("python3[7]: segfault at 0 ip 00007f01 in libsecret.so".into()),
                    signal: Some("SIGSEGV".into()),
                    library: Some("libsecret.so".into()),
                    not_memory: true,
                    ..ExitCause::default()
                }),
                job: None,
                worker_of: None,
            },
        });
    }
    let ana = Some(Peer::known(Some(1000)));
    let v = get_as(state.clone(), "/api/v1/events?limit=2", ana.clone())
        .await
        .json();
    let events = v["events"].as_array().expect("events");
    assert_eq!(events.len(), 2, "{v}");
    assert_eq!(
        (v["kept"].as_u64(), v["matched"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(events[1]["at"], 1_002, "the most recent last");
    let all = get_as(state.clone(), "/api/v1/events", ana).await.json();
    for e in all["events"].as_array().expect("events") {
        let mine = e["process"]["uid"] == 1000;
        assert_eq!(e["cause"]["library"] == "libsecret.so", mine, "{e}");
        assert_eq!(e["cause"]["detail"].is_string(), mine, "{e}");
        assert_eq!(e["cause"]["signal"], "SIGSEGV", "{e}");
        assert_eq!(
            e["message"]
                .as_str()
                .unwrap_or_default()
                .contains("libsecret"),
            mine,
            "{e}"
        );
    }
    let bad = get(state, "/api/v1/events?limit=0").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn config_hides_hook_arguments_from_everyone() {
    let config = Config::from_toml_str(
        "[[rule]]\nname = \"page\"\nfootprint = \"1GiB\"\nactions = [{ hook = [\"/usr/local/bin/notify\", \"https://hooks.example/T0/SECRET\"] }]\n",
        "t.toml",
    )
    .expect("config");
    let state = State::new(config, None, Timestamp(1_700_000_000_000));
    let a = get(state, "/api/v1/config").await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(!a.body.contains("SECRET"), "{}", a.body);
    let hook = &a.json()["config"]["rule"][0]["actions"][0]["hook"];
    assert_eq!(
        hook,
        &serde_json::json!(["/usr/local/bin/notify", "[redacted]"])
    );
}

#[tokio::test]
async fn host_headers_that_hide_a_name_are_refused() {
    for host in [
        "localhost:9717@evil.com",
        "[::1]evil.com",
        "127.0.0.1:80:80",
        "localhost:",
        "127.0.0.1.evil.com",
    ] {
        let request = Request::get("/api/v1/config")
            .header(header::HOST, host)
            .body(Body::empty())
            .expect("request");
        let a = send(empty(), request).await;
        assert_eq!(a.status, StatusCode::MISDIRECTED_REQUEST, "{host}");
    }
}

// ---- The server on real sockets --------------------------------------------

mod server {
    use super::*;
    use crate::support::http::{connect, http_get, request, start};
    use headroom::http::ServerLimits;
    use std::io::{ErrorKind, Read, Write};
    use std::net::TcpStream;
    use std::time::Instant;

    /// Whether the server closed `s` (end of stream or reset) within its read
    /// timeout, reading past whatever it sent first.
    fn closed(s: &mut TcpStream) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return false;
                }
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "gave up waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn fresh() -> State {
        users_state(0)
    }

    /// Like [`users_state`], with every process the tests' user's own, so
    /// that the whole padded command lines are theirs to see, as root or not.
    fn own_state(pad: usize) -> State {
        let me = headroom::os::this_process::effective_uid();
        let mut snap = users_snapshot(pad);
        for p in &mut snap.processes {
            p.uid = Some(me);
        }
        let mut working = Working::new(Config::default());
        let mut state = working.initial_state(None, snap.taken_at);
        working.record(Arc::new(snap), &mut state);
        state
    }

    /// Timeouts long enough that only the cap explains what happens.
    fn patient(max_connections: usize) -> ServerLimits {
        ServerLimits {
            max_connections,
            header_read_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            ..ServerLimits::default()
        }
    }

    #[test]
    fn idle_connections_past_the_cap_make_room_and_healthz_answers() {
        let (server, _tx) = start(fresh(), patient(8));
        let addr = server.local_addr();
        let mut idle: Vec<TcpStream> = (0..40).map(|_| connect(addr)).collect();
        wait_for("the server to take in every connection", || {
            server.connections().evicted() >= 32
        });
        let (status, body) = http_get(addr, "/healthz");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"status\":\"ok\""), "{body}");
        assert!(server.connections().open() <= 8);
        for s in &idle {
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .expect("timeout");
        }
        let closed_count = idle.iter_mut().map(closed).filter(|c| *c).count();
        assert!(
            closed_count >= 33,
            "only {closed_count} of 40 idle connections were closed with a cap of 8"
        );
        server.stop(Duration::from_secs(5)).expect("clean stop");
    }

    /// Reads `s` until an SSE `sample` event has arrived.
    fn until_first_event(s: &mut TcpStream) {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("event: sample") {
            let n = s.read(&mut buf).expect("stream");
            assert!(n > 0, "stream ended: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn when_every_connection_is_busy_a_newcomer_gets_503_at_once() {
        let limits = ServerLimits {
            max_streams: 3,
            ..patient(3)
        };
        let (server, _tx) = start(fresh(), limits);
        let addr = server.local_addr();
        let mut streams: Vec<TcpStream> = (0..3)
            .map(|_| {
                let mut s = connect(addr);
                s.write_all(request("/api/v1/stream", false).as_bytes())
                    .expect("send");
                until_first_event(&mut s);
                s
            })
            .collect();
        let mut late = connect(addr);
        let mut text = String::new();
        late.read_to_string(&mut text)
            .expect("the refusal, then the end");
        assert!(text.starts_with("HTTP/1.1 503 "), "{text}");
        assert!(text.contains("too many connections"), "{text}");
        assert_eq!(server.connections().refused(), 1);
        assert_eq!(server.connections().open(), 3);
        streams.clear();
    }

    #[test]
    fn event_streams_have_their_own_cap_and_each_viewer_a_share() {
        let limits = ServerLimits {
            max_streams: 3,
            streams_per_viewer: 2,
            ..patient(16)
        };
        let (server, _tx) = start(fresh(), limits);
        let addr = server.local_addr();
        let _streams: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut s = connect(addr);
                s.write_all(request("/api/v1/stream", false).as_bytes())
                    .expect("send");
                until_first_event(&mut s);
                s
            })
            .collect();
        let (status, body) = http_get(addr, "/api/v1/stream");
        assert_eq!(status, 503, "{body}");
        // Every client here is this test's user: its share is what ran out,
        // and the refusal names whose it is.
        let me = headroom::os::this_process::effective_uid();
        assert!(
            body.contains(&format!(
                "uid {me} already has as many event streams open as one viewer gets (2)"
            )),
            "{body}"
        );
        assert_eq!(http_get(addr, "/healthz").0, 200);
    }

    #[test]
    fn silent_half_sent_and_idle_kept_alive_connections_are_closed() {
        let limits = ServerLimits {
            header_read_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(2),
            ..ServerLimits::default()
        };
        let (server, _tx) = start(fresh(), limits);
        let addr = server.local_addr();
        let started = Instant::now();

        let mut silent = connect(addr);
        let mut half = connect(addr);
        half.write_all(b"GET /healthz HT").expect("send");
        let mut kept = connect(addr);
        kept.write_all(request("/healthz", false).as_bytes())
            .expect("send");
        let mut head = [0u8; 12];
        kept.read_exact(&mut head).expect("an answer");
        assert_eq!(&head, b"HTTP/1.1 200");

        assert!(
            closed(&mut silent),
            "a connection that sent nothing stays open"
        );
        assert!(closed(&mut half), "a half-sent request line stays open");
        assert!(
            closed(&mut kept),
            "an idle kept-alive connection stays open"
        );
        eprintln!("all three closed after {:?}", started.elapsed());
        wait_for("the server to forget them", || {
            server.connections().open() == 0
        });
    }

    #[test]
    fn an_endless_request_head_is_cut_off() {
        let (server, _tx) = start(fresh(), patient(16));
        let addr = server.local_addr();
        let mut s = connect(addr);
        s.set_write_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        // 64 KiB of headers, twice the server's head buffer, and no end.
        let mut sent = 0usize;
        let mut head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_vec();
        for i in 0..64 {
            head.extend_from_slice(format!("X-Pad-{i:04}: {}\r\n", "a".repeat(1010)).as_bytes());
        }
        for chunk in head.chunks(4096) {
            match s.write_all(chunk) {
                Ok(()) => sent += chunk.len(),
                Err(_) => break,
            }
        }
        // Answered (431) or closed at once: not left waiting for the rest.
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        let outcome = loop {
            match s.read(&mut buf) {
                Ok(0) => break "closed",
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break "reset",
                Err(e) => panic!("the server kept the connection after {sent} bytes of head: {e}"),
            }
        };
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 431"),
            "{outcome}: {text}"
        );
        eprintln!(
            "{sent} bytes sent, then {outcome}: {:?}",
            text.lines().next()
        );
        wait_for("the connection to be dropped", || {
            server.connections().open() == 0
        });
        assert_eq!(http_get(addr, "/healthz").0, 200);
    }

    /// Sends a snapshot request and reads only its head; returns the
    /// Content-Length.
    fn request_without_reading(s: &mut TcpStream) -> usize {
        s.write_all(request("/api/v1/snapshot", true).as_bytes())
            .expect("send");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut byte).expect("head");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        head.lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no content-length: {head}"))
    }

    #[test]
    fn slow_readers_share_one_encoding_and_are_dropped_when_they_stall() {
        // Three processes with 4 MiB of command line each: ~12 MiB of JSON.
        let state = own_state(4 << 20);
        let cache = std::sync::Arc::clone(&state.snapshot_json);
        let limits = ServerLimits {
            max_large_responses: 16,
            large_responses_per_viewer: 16,
            idle_timeout: Duration::from_secs(2),
            ..ServerLimits::default()
        };
        // Encoded first, away from any socket: on a busy machine the debug
        // build's 12 MiB encoding can outlast the short idle timeout this
        // test needs, and would count as the connection idling.
        let me = headroom::os::this_process::effective_uid();
        let warm = tokio::runtime::Runtime::new()
            .expect("runtime")
            .block_on(get_as(
                state.clone(),
                "/api/v1/snapshot",
                Some(Peer::known(Some(me))),
            ));
        assert_eq!(warm.status, StatusCode::OK);
        let (server, _tx) = start(state, limits);
        let addr = server.local_addr();
        // Each connects just before it asks, so none waits idle meanwhile.
        let mut clients = Vec::new();
        let mut lengths = Vec::new();
        for _ in 0..10 {
            let mut client = connect(addr);
            lengths.push(request_without_reading(&mut client));
            clients.push(client);
        }
        assert!(
            lengths.iter().all(|n| *n == lengths[0] && *n > 12 << 20),
            "{lengths:?}"
        );
        // Every process is the readers' own: they all get the full form.
        assert_eq!(
            cache.encodings(),
            1,
            "eleven readers of one snapshot share its encoding"
        );
        // Nobody reads for longer than the idle timeout: the server gives up.
        std::thread::sleep(Duration::from_secs(4));
        let mut got = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match clients[0].read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
                Err(e) => panic!("read: {e}"),
            }
        }
        assert!(
            got < lengths[0],
            "a stalled reader got the whole answer ({got} bytes) instead of being cut off"
        );
        wait_for("the stalled connections to be dropped", || {
            server.connections().open() == 0
        });
    }

    #[test]
    fn unread_large_answers_hold_their_permit_until_sent() {
        let limits = ServerLimits {
            max_large_responses: 2,
            // More than the whole: the server-wide cap is what runs out.
            large_responses_per_viewer: 3,
            large_response_wait: Duration::from_millis(300),
            ..patient(16)
        };
        unread_answers_refuse_the_next(limits, 2, "2 answers with process lists");
    }

    #[test]
    fn one_viewers_unread_answer_takes_only_its_own_share() {
        // The default limits: four large answers at once, one per viewer.
        let limits = ServerLimits {
            large_response_wait: Duration::from_millis(300),
            ..patient(16)
        };
        let me = headroom::os::this_process::effective_uid();
        unread_answers_refuse_the_next(
            limits,
            1,
            &format!("uid {me} already has as many answers with process lists under way"),
        );
    }

    /// With `stalled` snapshots of ~12 MiB (more than the sockets buffer
    /// between the two ends) asked for and unread, the next snapshot is
    /// refused with a 503 saying `refusal`, while `/healthz` (not gated)
    /// answers; once the stalled connections close, snapshots are served
    /// again.
    fn unread_answers_refuse_the_next(limits: ServerLimits, stalled: usize, refusal: &str) {
        let (server, _tx) = start(own_state(4 << 20), limits);
        let addr = server.local_addr();
        let mut clients: Vec<TcpStream> = (0..stalled).map(|_| connect(addr)).collect();
        for s in &mut clients {
            request_without_reading(s);
        }
        let (status, body) = http_get(addr, "/api/v1/snapshot");
        assert_eq!(
            status, 503,
            "another large answer while {stalled} are unread"
        );
        assert!(body.contains(refusal), "{body}");
        assert_eq!(
            http_get(addr, "/healthz").0,
            200,
            "small answers are not gated"
        );
        drop(clients);
        wait_for("the stalled answers to end", || {
            server.connections().open() == 0
        });
        assert_eq!(http_get(addr, "/api/v1/snapshot").0, 200);
    }
}

// ---- Jobs ------------------------------------------------------------------

/// A kernel of uid 1000 (pid 400, `ana/secret.ipynb`) and two plain Python
/// workers it forked (401, 402), counted by PSS, beside a process of root
/// outside every job (500).
fn job_state() -> State {
    use headroom::model::Basis;
    use headroom::model::WorkloadKind;
    use headroom::model::build::{kernel, process, snapshot};
    let worker = |pid: u32| {
        process(pid)
            .ppid(400)
            .uid(1000)
            .user("ana")
            .name("python3")
            .argv(["python3", "-m", "ipykernel_launcher", "--token=SECRET-ana"])
            .footprint(1 << 30)
            .basis(Basis::Pss)
            .kind(WorkloadKind::Python)
            .evidence([
                "worker of jupyter kernel 400: its parent",
                "argv[2] is ipykernel_launcher",
            ])
            .job(400)
    };
    let snap = snapshot(0)
        .taken_at(Timestamp::now())
        .process(
            kernel(400)
                .uid(1000)
                .user("ana")
                .footprint(3 << 30)
                .basis(Basis::Pss)
                .kernel_id("kernel-ana")
                .notebook("ana/secret.ipynb")
                .job(400),
        )
        .processes([worker(401), worker(402)])
        .process(process(500).uid(0).footprint(8 << 30))
        .job_of(400, Basis::Pss)
        .build();
    let mut working = Working::new(Config::default());
    let mut state = working.initial_state(None, snap.taken_at);
    working.record(Arc::new(snap), &mut state);
    state
}

#[tokio::test]
async fn process_rows_carry_their_job_and_a_root_its_members_total_and_basis() {
    let stranger = || Some(Peer::known(Some(1001)));
    let a = get_as(job_state(), "/api/v1/processes", stranger()).await;
    assert_eq!(a.status, StatusCode::OK);
    let body = a.json();
    let row = |pid: u64| {
        body["processes"]
            .as_array()
            .expect("rows")
            .iter()
            .find(|r| r["pid"] == pid)
            .unwrap_or_else(|| panic!("no row for {pid}: {body}"))
            .clone()
    };
    let root = row(400);
    assert_eq!(root["job"], 400);
    assert_eq!(root["job_role"], "root");
    assert_eq!(root["basis"], "pss");
    assert_eq!(
        root["job_total"],
        serde_json::json!({
            "members": [400, 401, 402],
            "workers": 2,
            "footprint": 5u64 << 30,
            "gpu_memory": null,
            "basis": "pss",
        })
    );
    let worker = row(401);
    assert_eq!(
        (&worker["job"], &worker["job_role"]),
        (&400.into(), &"worker".into())
    );
    assert!(worker["job_total"].is_null());
    assert_eq!(worker["redacted"], true);
    assert_eq!(
        worker["workload"]["evidence"],
        serde_json::json!(["worker of jupyter kernel 400: its parent"]),
        "the job's evidence quotes pids and kinds only"
    );
    let outside = row(500);
    assert!(outside["job"].is_null() && outside["job_role"].is_null());
    assert!(outside["job_total"].is_null());
    assert_eq!(outside["basis"], "rss");
    for secret in ["secret.ipynb", "SECRET-ana", "kernel-ana"] {
        assert!(!a.body.contains(secret), "a stranger sees {secret}");
    }

    let one = get_as(job_state(), "/api/v1/processes/400", stranger()).await;
    assert_eq!(one.status, StatusCode::OK);
    let one = one.json();
    assert_eq!(
        one["process"]["job_total"]["members"],
        serde_json::json!([400, 401, 402])
    );
    assert!(!one.to_string().contains("secret.ipynb"));
    let owner = get_as(
        job_state(),
        "/api/v1/processes/400",
        Some(Peer::known(Some(1000))),
    )
    .await
    .json();
    assert_eq!(owner["process"]["workload"]["notebook"], "ana/secret.ipynb");
}

#[tokio::test]
async fn the_ml_filter_takes_a_jobs_plain_python_workers_along() {
    let a = get(job_state(), "/api/v1/processes?workload=ml")
        .await
        .json();
    let mut pids: Vec<u64> = a["processes"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["pid"].as_u64())
        .collect();
    pids.sort();
    assert_eq!(pids, [400, 401, 402]);
    assert_eq!(a["matched"], 3);
}

#[tokio::test]
async fn the_snapshot_holds_its_jobs_and_unowned_memory() {
    let a = get_as(
        job_state(),
        "/api/v1/snapshot",
        Some(Peer::known(Some(1001))),
    )
    .await;
    let snap = a.json();
    assert_eq!(
        snap["jobs"],
        serde_json::json!([{
            "root": {"pid": 400, "start": 1},
            "members": [400, 401, 402],
            "footprint": 5u64 << 30,
            "gpu_memory": null,
            "basis": "pss",
        }])
    );
    assert_eq!(snap["unowned"]["known"], false);
    assert!(!a.body.contains("secret.ipynb"));
}
