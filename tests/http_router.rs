//! The HTTP router driven with `oneshot`, no socket: every endpoint on a state
//! built from a recorded trace (a Python process growing 64 MiB every 0.5 s),
//! the answers before the first sample, and a 400 naming the parameter for
//! every kind of bad parameter.

use std::path::Path;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use headroom::config::Config;
use headroom::http::router;
use headroom::model::{Snapshot, Timestamp};
use headroom::sample::replay::read_trace;
use headroom::state::State;
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::watch;
use tower::ServiceExt;

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
    let mut state = State::new(Config::default(), None, snaps[0].taken_at);
    for s in snaps.into_iter().take(n) {
        state.publish(s);
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

async fn get(state: State, uri: &str) -> Answer {
    let request = Request::get(uri)
        .header(header::HOST, "127.0.0.1:9717")
        .body(Body::empty())
        .expect("request");
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
    state.publish(fresh.clone());
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
