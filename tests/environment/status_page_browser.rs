//! The status page in a real headless Chromium (Debian's `chromium`, driven
//! over WebDriver by Debian's `chromium-driver`): it loads from a running
//! daemon, fills its process table (which must list this test's own helper
//! process, a fake Jupyter kernel), draws its charts from the history and the
//! event stream, shows the events panel, and logs no errors to the console.
//! Then, on a replayed trace holding a job (a kernel and two workers counted
//! by PSS), the table lists the workers under their root and the job's
//! total after them. Screenshots in light and dark mode go to
//! `target/test-artifacts/`.

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::hog::Daemon;
use crate::support::{
    Reaped, artifacts_dir, fake_kernel, free_port, sessions_server, tool, wait_for,
};
use base64::Engine as _;
use serde_json::{Value, json};

/// A WebDriver session on a chromedriver child.
struct Browser {
    base: String,
    session: String,
    agent: ureq::Agent,
    _driver: Reaped,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
        let chromium = tool("chromium", "HEADROOM_CHROMIUM", "chromium");
        let driver_bin = tool("chromedriver", "HEADROOM_CHROMEDRIVER", "chromium-driver");
        let port = free_port();
        let driver = Reaped(
            Command::new(driver_bin)
                .arg(format!("--port={port}"))
                .arg("--allowed-ips=127.0.0.1")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn chromedriver"),
        );
        let base = format!("http://127.0.0.1:{port}");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        wait_for(Duration::from_secs(20), "chromedriver to be ready", || {
            let mut res = agent.get(format!("{base}/status")).call().ok()?;
            let v: Value = res.body_mut().read_json().ok()?;
            v["value"]["ready"].as_bool().filter(|r| *r)
        });
        let profile = tempfile::tempdir().expect("profile dir");
        let caps = json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:loggingPrefs": { "browser": "ALL" },
                "goog:chromeOptions": {
                    "binary": chromium,
                    "args": [
                        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                        "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync",
                        "--disable-dev-shm-usage", "--window-size=1440,900",
                        format!("--user-data-dir={}", profile.path().display()),
                    ]
                }
            }}
        });
        let mut b = Browser {
            base,
            session: String::new(),
            agent,
            _driver: driver,
            _profile: profile,
        };
        let v = b.call("POST", "/session", Some(caps));
        b.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {v}"))
            .to_string();
        b
    }

    /// A WebDriver command; returns `value`, panics on a WebDriver error.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let mut res = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            (_, body) => self
                .agent
                .post(&url)
                .send_json(body.unwrap_or_else(|| json!({}))),
        }
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let v: Value = res.body_mut().read_json().expect("WebDriver JSON");
        if let Some(err) = v["value"]["error"].as_str() {
            panic!("{method} {path}: {err}: {}", v["value"]["message"]);
        }
        v["value"].clone()
    }

    fn session_path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    fn goto(&self, url: &str) {
        self.call(
            "POST",
            &self.session_path("/url"),
            Some(json!({ "url": url })),
        );
    }

    fn eval(&self, script: &str) -> Value {
        self.call(
            "POST",
            &self.session_path("/execute/sync"),
            Some(json!({ "script": script, "args": [] })),
        )
    }

    fn screenshot(&self, name: &str) -> std::path::PathBuf {
        let b64 = self.call("GET", &self.session_path("/screenshot"), None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("base64 string"))
            .expect("valid base64");
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        let path = artifacts_dir().join(name);
        std::fs::write(&path, png).expect("write screenshot");
        path
    }

    /// Chrome DevTools command through chromedriver.
    fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.call(
            "POST",
            &self.session_path("/goog/cdp/execute"),
            Some(json!({ "cmd": cmd, "params": params })),
        )
    }

    fn console(&self) -> Vec<Value> {
        let v = self.call(
            "POST",
            &self.session_path("/se/log"),
            Some(json!({ "type": "browser" })),
        );
        v.as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let url = format!("{}/session/{}", self.base, self.session);
            let _ = self.agent.delete(&url).call();
        }
    }
}

const PAGE_STATE: &str = "return window.headroomPage ? { rows: headroomPage.rows(), \
     charts: headroomPage.charts(), status: headroomPage.status, events: headroomPage.events, \
     pressure: document.getElementById('pressure').textContent, \
     eventsText: document.getElementById('events').textContent } : null";

#[test]
fn the_status_page_shows_the_helper_process_and_draws_its_charts() {
    let dir = support::private_dir();
    let helper = fake_kernel(dir.path(), "browser-test");
    let helper_pid = helper.0.id();
    // A Jupyter server that says the helper kernel runs demo/plot.ipynb.
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).expect("runtime dir");
    sessions_server(
        &runtime,
        json!([{ "id": "s", "path": "demo/plot.ipynb", "type": "notebook",
                 "kernel": { "id": "browser-test", "name": "python3" } }])
        .to_string(),
    );
    let daemon = Daemon::start(
        dir.path(),
        &format!(
            "[daemon]\ninterval = \"250ms\"\nfast_interval = \"250ms\"\n\
             [jupyter]\nruntime_dirs = [\"{}\"]\n",
            runtime.display()
        ),
    );
    let browser = Browser::start();
    browser.goto(&daemon.url("/"));

    let state = wait_for(
        Duration::from_secs(40),
        "the page to show the helper process and draw its charts",
        || {
            let s = browser.eval(PAGE_STATE);
            let listed = s["rows"].as_array()?.iter().any(|r| {
                r["pid"].as_u64() == Some(u64::from(helper_pid)) && r["workload"] == "jupyter"
            });
            // The kernel's row names its notebook in the Name column.
            let name = browser.eval(&format!(
                "const td = document.querySelector('#procs tbody tr[data-pid=\"{helper_pid}\"] td:nth-child(2)'); \
                 return td ? td.textContent : null"
            ));
            let named = name == "demo/plot.ipynb";
            let charts = s["charts"].as_object()?;
            let drawn = ["memory", "swap", "gpu", "pressure"]
                .iter()
                .all(|c| charts.get(*c).and_then(|v| v["points"].as_u64()) >= Some(4));
            let live =
                s["status"]["stream"] == "live" && s["status"]["samples"].as_u64() >= Some(3);
            (listed && named && drawn && live && s["events"]["loaded"] == true).then_some(s)
        },
    );

    // The memory chart is a stacked area: a good part of its plot is filled.
    let inked = state["charts"]["memory"]["inked"].as_f64().unwrap_or(0.0);
    assert!(inked > 0.05, "memory chart looks empty: {state}");
    // The header shows the pressure level, the events panel the daemon's
    // own start from the journal.
    let pressure = state["pressure"].as_str().unwrap_or_default();
    assert!(
        ["normal", "warn", "critical"]
            .iter()
            .any(|l| pressure.contains(l)),
        "{pressure}"
    );
    let events = state["eventsText"].as_str().unwrap_or_default();
    assert!(
        events.contains("started") && events.contains("headroom"),
        "{state}"
    );

    let light = browser.screenshot("status-page.png");

    // Sorting by a column header reorders the table: PID ascending (a
    // job's workers and total stay under their root).
    browser.eval("document.querySelector('#procs th[data-key=pid]').click(); return null");
    let pids: Vec<u64> = browser
        .eval("return Array.from(document.querySelectorAll('#procs tbody tr:not(.worker):not(.job-total)')).map(tr => +tr.dataset.pid)")
        .as_array()
        .expect("pids")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert!(pids.len() > 1, "{pids:?}");
    assert!(pids.windows(2).all(|w| w[0] <= w[1]), "{pids:?}");

    browser.cdp(
        "Emulation.setEmulatedMedia",
        json!({ "features": [{ "name": "prefers-color-scheme", "value": "dark" }] }),
    );
    // Charts are rebuilt with the dark colours; give them a sample to draw.
    std::thread::sleep(Duration::from_millis(800));
    let bg = browser.eval("return getComputedStyle(document.body).backgroundColor");
    assert_eq!(bg, "rgb(15, 18, 23)", "dark mode background");
    let dark = browser.screenshot("status-page-dark.png");

    let errors: Vec<Value> = browser
        .console()
        .into_iter()
        .filter(|e| e["level"] == "SEVERE")
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    eprintln!("screenshots: {} and {}", light.display(), dark.display());
    drop(helper);
}

/// A trace of `n` snapshots 250 ms apart from now: a kernel (pid 4000000,
/// 2 GiB) and two workers of 512 MiB each, all counted by PSS, and a plain
/// 1 GiB process outside every job.
fn job_trace(n: u64) -> String {
    use headroom::model::build::{kernel, process, snapshot};
    use headroom::model::{Basis, Timestamp, WorkloadKind};
    let now = Timestamp::now().as_millis();
    let mut out = String::new();
    for i in 0..n {
        let snap = snapshot(now + i * 250)
            .source("linux")
            .memory(32 << 30, 24 << 30)
            .process(
                kernel(4_000_000)
                    .uid(0)
                    .user("root")
                    .footprint(2 << 30)
                    .basis(Basis::Pss)
                    .job(4_000_000),
            )
            .processes((1..=2).map(|w| {
                process(4_000_000 + w)
                    .ppid(4_000_000)
                    .uid(0)
                    .user("root")
                    .name("python3")
                    .footprint(512 << 20)
                    .basis(Basis::Pss)
                    .kind(WorkloadKind::Pytorch)
                    .evidence(["worker of jupyter kernel 4000000: its parent"])
                    .job(4_000_000)
            }))
            .process(process(4_000_010).name("other").footprint(1 << 30))
            .job_of(4_000_000, Basis::Pss)
            .build();
        out.push_str(&serde_json::to_string(&snap).expect("snapshot encodes"));
        out.push('\n');
    }
    out
}

#[test]
fn the_status_page_lists_a_jobs_workers_under_its_root_with_the_total() {
    let dir = support::private_dir();
    let trace = dir.path().join("jobs.jsonl");
    std::fs::write(&trace, job_trace(8)).expect("write trace");
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval = \"250ms\"\nfast_interval = \"250ms\"\njournal = \"{}\"\n",
            dir.path().join("journal.jsonl").display()
        ),
    )
    .expect("write config");
    let daemon = Daemon::run(&[
        "run",
        "--dry-run",
        "--config",
        config.to_str().expect("utf-8 path"),
        "--replay",
        trace.to_str().expect("utf-8 path"),
    ]);
    let browser = Browser::start();
    browser.goto(&daemon.url("/"));
    let order = wait_for(Duration::from_secs(40), "the page to show the job", || {
        let order = browser.eval(
            "const foot = tr => tr.querySelector('td.where').nextElementSibling.textContent; \
             return Array.from(document.querySelectorAll('#procs tbody tr')).map(tr => \
                 tr.classList.contains('job-total') ? 'job ' + tr.dataset.job + ': ' + \
                 tr.children[1].textContent + ' ' + foot(tr) : \
                 tr.children[0].textContent + ' ' + foot(tr))",
        );
        let rows = order.as_array()?;
        rows.iter()
            .any(|r| r.as_str().is_some_and(|r| r.starts_with("job ")))
            .then_some(order)
    });
    let rows: Vec<&str> = order
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = |row: &str| {
        rows.iter()
            .position(|r| *r == row)
            .unwrap_or_else(|| panic!("no row {row:?}: {rows:#?}"))
    };
    let root = at("4000000 2.0 GiB pss");
    assert_eq!(at("└ 4000001 512 MiB pss"), root + 1, "{rows:#?}");
    assert_eq!(at("└ 4000002 512 MiB pss"), root + 2, "{rows:#?}");
    assert_eq!(
        at("job 4000000: job: kernel + 2 workers 3.0 GiB (pss)"),
        root + 3,
        "{rows:#?}"
    );
    assert!(at("4000010 1.0 GiB") > root + 3, "{rows:#?}");
    let shot = browser.screenshot("status-page-jobs.png");
    let errors: Vec<Value> = browser
        .console()
        .into_iter()
        .filter(|e| e["level"] == "SEVERE")
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    eprintln!("screenshot: {}", shot.display());
}
