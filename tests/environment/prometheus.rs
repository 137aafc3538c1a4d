//! headroom and Prometheus together, with Debian's `prometheus` package:
//! `promtool` checks the alerting rules, runs their unit tests and lints a
//! real scrape and the series of jobs; then a real Prometheus on loopback scrapes a real daemon every
//! second, and every query of the Grafana dashboard and every alerting rule
//! evaluates without error, returning data wherever the metrics it reads exist
//! on this machine. A daemon's real scrapes, before and after its first
//! action, feed a promtool test of the action alert and the dashboard's
//! actions annotation.

use crate::support;

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::Duration;

use crate::support::hog::{Daemon, Running, Sandbox};
use crate::support::{Reaped, fake_kernel, free_port, get, tool, wait_for};
use regex::Regex;
use serde_json::Value;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn promtool() -> PathBuf {
    tool("promtool", "HEADROOM_PROMTOOL", "prometheus")
}

/// Metrics a query may name that a healthy Linux test machine does not
/// export, and why. Any other name missing from a real scrape is a typo.
const ABSENT_HERE: &[(&str, &str)] = &[
    (
        "headroom_gpu_memory_used_bytes",
        "no GPU on the test machine",
    ),
    (
        "headroom_gpu_memory_total_bytes",
        "no GPU on the test machine",
    ),
    (
        "headroom_gpu_utilization_ratio",
        "no GPU on the test machine",
    ),
    (
        "headroom_process_exhaustion_seconds",
        "only for growing processes",
    ),
    (
        "headroom_actions_total",
        "one series per step of the config's rules; these daemons have none",
    ),
    ("headroom_memory_kernel_free_ratio", "macOS only"),
    ("headroom_memory_wired_bytes", "where the OS reports it"),
    (
        "headroom_memory_compressed_bytes",
        "where the OS reports it",
    ),
    (
        "headroom_pressure_stall_seconds_total",
        "Linux with PSI enabled only",
    ),
];

static METRIC_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"headroom_[a-z0-9_]+").expect("regex"));

/// Whether `expr` should return data here: every headroom metric it names
/// was scraped. Panics on a name neither scraped nor known to be absent.
fn expects_data(expr: &str, scraped: &BTreeSet<String>) -> bool {
    let mut all_present = true;
    for name in METRIC_NAME.find_iter(expr).map(|m| m.as_str()) {
        if scraped.contains(name) {
            continue;
        }
        assert!(
            ABSENT_HERE.iter().any(|(n, _)| *n == name),
            "{expr}: names {name}, which headroom does not export (a typo?)"
        );
        all_present = false;
    }
    all_present
}

fn run_promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut child = Command::new(promtool())
        .args(args)
        .current_dir(repo("prometheus"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("write to promtool");
    drop(input);
    let out = child.wait_with_output().expect("promtool output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn promtool_checks_the_rules_their_tests_and_the_example_config() {
    for args in [
        &["check", "rules", "alerts.yml"][..],
        &["test", "rules", "alerts_test.yml"],
        &["check", "config", "prometheus.yml"],
    ] {
        let (ok, out) = run_promtool(args, None);
        assert!(ok, "promtool {}:\n{out}", args.join(" "));
        assert!(
            out.contains("SUCCESS"),
            "promtool {}:\n{out}",
            args.join(" ")
        );
    }
}

/// `promtool check metrics` on the series of jobs and of their members'
/// basis: a kernel with two workers counted by PSS and a model server with a
/// runner holding GPU memory, built by hand (a real scrape holds them only
/// where the machine runs such jobs).
#[test]
fn promtool_finds_nothing_to_complain_about_in_job_series() {
    use headroom::model::build::{kernel, process, snapshot};
    use headroom::model::{Basis, WorkloadKind};
    let snap = snapshot(1_000)
        .source("linux")
        .memory(16 << 30, 8 << 30)
        .process(
            kernel(10)
                .uid(1000)
                .footprint(2 << 30)
                .notebook("work/train.ipynb")
                .basis(Basis::Pss)
                .job(10),
        )
        .processes((11..=12).map(|pid| {
            process(pid)
                .ppid(10)
                .footprint(1 << 30)
                .kind(WorkloadKind::Pytorch)
                .basis(Basis::Pss)
                .job(10)
        }))
        .process(
            process(30)
                .kind(WorkloadKind::LlmServer)
                .footprint(1 << 30)
                .job(30),
        )
        .process(
            process(31)
                .ppid(30)
                .kind(WorkloadKind::LlmServer)
                .footprint(4 << 30)
                .gpu_memory(3 << 30)
                .job(30),
        )
        .job_of(10, Basis::Pss)
        .job_of(30, Basis::Rss)
        .build();
    let mut working = headroom::daemon::Working::new(headroom::config::Config::default());
    let mut state = working.initial_state(None, snap.taken_at);
    working.record(std::sync::Arc::new(snap), &mut state);
    let text = headroom::metrics::render(&state).expect("metrics render");
    for family in [
        "headroom_job_footprint_bytes{",
        "headroom_job_members{",
        "headroom_job_gpu_memory_bytes{",
        "headroom_job_info{",
        "headroom_process_info{",
    ] {
        assert!(text.contains(family), "{family} missing:\n{text}");
    }
    let (ok, out) = run_promtool(&["check", "metrics"], Some(&text));
    assert!(ok, "promtool check metrics failed:\n{out}");
    assert_eq!(out.trim(), "", "promtool check metrics complains");
}

/// A daemon sampling every 250 ms with a fake Jupyter kernel beside it, so
/// that per-process series exist; returns once the kernel has a growth rate.
fn daemon_with_kernel(dir: &Path) -> (Daemon, Reaped) {
    let kernel = fake_kernel(dir, "prometheus-test");
    let daemon = Daemon::start(
        dir,
        "[daemon]\ninterval = \"250ms\"\nfast_interval = \"250ms\"\n",
    );
    wait_for(
        Duration::from_secs(20),
        "a growth rate for the kernel",
        || {
            let (_, text) = daemon.get("/metrics");
            text.contains("headroom_process_growth_bytes_per_second{")
                .then_some(())
        },
    );
    (daemon, kernel)
}

#[test]
fn promtool_finds_nothing_to_complain_about_in_a_real_scrape() {
    let dir = support::private_dir();
    let (daemon, kernel) = daemon_with_kernel(dir.path());
    let (status, text) = daemon.get("/metrics");
    assert_eq!(status, 200);
    let pid = kernel.0.id().to_string();
    assert!(
        text.lines()
            .any(|l| l.starts_with("headroom_process_footprint_bytes{")
                && l.contains(&format!("pid=\"{pid}\""))
                && l.contains("workload=\"jupyter\"")),
        "the fake kernel has its series:\n{text}"
    );
    let (ok, out) = run_promtool(&["check", "metrics"], Some(&text));
    assert!(ok, "promtool check metrics failed:\n{out}");
    assert_eq!(out.trim(), "", "promtool check metrics complains");
}

/// A Prometheus child on a loopback port, with its own storage.
struct Prometheus {
    base: String,
    _child: Reaped,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str) -> Prometheus {
        let bin = tool("prometheus", "HEADROOM_PROMETHEUS", "prometheus");
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("prometheus.yml");
        let rules = repo("prometheus/alerts.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {}\n\
                 scrape_configs:\n  - job_name: headroom\n    static_configs:\n      - targets: [\"{target}\"]\n",
                rules.display()
            ),
        )
        .expect("write prometheus.yml");
        let port = free_port();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn prometheus");
        let p = Prometheus {
            base: format!("http://127.0.0.1:{port}"),
            _child: Reaped(child),
            _dir: dir,
        };
        wait_for(Duration::from_secs(30), "Prometheus to be ready", || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into();
            let res = agent.get(format!("{}/-/ready", p.base)).call().ok()?;
            (res.status() == 200).then_some(())
        });
        p
    }

    /// A call to the HTTP API: its `data`; panics unless Prometheus says
    /// success.
    fn api(&self, path_and_query: &str) -> Value {
        let (status, body) = get(&format!("{}/api/v1/{path_and_query}", self.base));
        let v: Value = serde_json::from_str(&body).expect("Prometheus JSON");
        assert!(
            status == 200 && v["status"] == "success",
            "{path_and_query} failed:\n{body}"
        );
        v["data"].clone()
    }

    /// An instant query: the result vector.
    fn query(&self, expr: &str) -> Vec<Value> {
        let data = self.api(&format!("query?query={}", encode(expr)));
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// A range query over `window` at a 1 s step, as a Grafana panel
    /// asks for its graph: every series that had a value at some step.
    fn query_range(&self, expr: &str, window: &Window) -> Vec<Value> {
        let data = self.api(&format!(
            "query_range?query={}&start={}&end={}&step=1",
            encode(expr),
            window.start,
            window.end
        ));
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// The names of every series `instance` had in `window`.
    fn names(&self, instance: &str, window: &Window) -> BTreeSet<String> {
        let data = self.api(&format!(
            "label/__name__/values?match[]={}&start={}&end={}",
            encode(&format!("{{instance=\"{instance}\"}}")),
            window.start,
            window.end
        ));
        data.as_array()
            .expect("a list of names")
            .iter()
            .filter_map(|n| Some(n.as_str()?.to_owned()))
            .collect()
    }
}

fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A span of time in Unix seconds, for range queries.
struct Window {
    start: f64,
    end: f64,
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64()
}

/// `(where, expr)` for every query in the dashboard: panel targets and
/// annotations.
fn dashboard_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo("dashboards/headroom.json")).expect("dashboard");
    let dash: Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut out = Vec::new();
    for panel in dash["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().unwrap_or("?");
        for t in panel["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().expect("every target has an expr");
            out.push((format!("panel {title:?}"), expr.to_string()));
        }
    }
    for a in dash["annotations"]["list"].as_array().expect("annotations") {
        if let Some(expr) = a["expr"].as_str() {
            out.push((format!("annotation {:?}", a["name"]), expr.to_string()));
        }
    }
    out
}

/// Grafana's variables, as a dashboard user on one machine would set them
/// (every namespace, pod and Slurm job: the variables' "All").
fn substitute(expr: &str, instance: &str) -> String {
    expr.replace("$instance", instance)
        .replace("$namespace", ".*")
        .replace("$pod", ".*")
        .replace("$slurm_job", ".*")
        .replace("$__rate_interval", "5s")
        .replace("$__interval", "1s")
}

#[test]
fn a_real_prometheus_evaluates_every_dashboard_query_and_alert() {
    let dir = support::private_dir();
    let (daemon, _kernel) = daemon_with_kernel(dir.path());
    let instance = daemon.addr.to_string();
    let started = unix_now();
    let prom = Prometheus::start(&instance);

    wait_for(Duration::from_secs(60), "six scrapes of headroom", || {
        let r = prom.query(&format!(
            "count_over_time(headroom_samples_total{{instance=\"{instance}\"}}[1m])"
        ));
        let n: f64 = r.first()?["value"][1].as_str()?.parse().ok()?;
        (n >= 6.0).then_some(())
    });

    // Some series come and go (an exhaustion time exists only while a
    // process grows), so what was scraped and what the dashboard shows are
    // compared over the same stretch of time, the way a panel graphs it.
    let window = Window {
        start: started,
        end: unix_now(),
    };
    let scraped = prom.names(&instance, &window);
    assert!(
        scraped.contains("headroom_samples_total"),
        "Prometheus holds headroom's series: {scraped:?}"
    );
    let queries = dashboard_queries();
    assert!(queries.len() >= 15, "{} queries", queries.len());
    let mut with_data = 0;
    for (place, expr) in &queries {
        let expr = substitute(expr, &instance);
        let result = prom.query_range(&expr, &window);
        if expects_data(&expr, &scraped) {
            assert!(!result.is_empty(), "{place}: no data for {expr}");
            with_data += 1;
        }
    }
    assert!(with_data >= 12, "only {with_data} queries had data");
    // Panels that must show something on any machine.
    for title in [
        "Memory breakdown",
        "Memory pressure",
        "Swap",
        "Top processes by footprint",
        "Fastest growers",
    ] {
        let (_, expr) = queries
            .iter()
            .find(|(p, _)| *p == format!("panel {title:?}"))
            .unwrap_or_else(|| panic!("the dashboard has a panel {title:?}"));
        assert!(
            !prom.query(&substitute(expr, &instance)).is_empty(),
            "{title}"
        );
    }
    let top = prom.query(&substitute(
        &queries
            .iter()
            .find(|(p, _)| p == "panel \"Top processes by footprint\"")
            .expect("panel")
            .1,
        &instance,
    ));
    assert!(
        top.iter().any(|s| s["metric"]["workload"] == "jupyter"),
        "the fake kernel is among the top processes: {top:?}"
    );

    // Every alerting rule is loaded and evaluated by Prometheus without error.
    let rules = wait_for(Duration::from_secs(30), "every rule evaluated", || {
        let (_, body) = get(&format!("{}/api/v1/rules", prom.base));
        let v: Value = serde_json::from_str(&body).ok()?;
        let rules: Vec<Value> = v["data"]["groups"]
            .as_array()?
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        rules.iter().all(|r| r["health"] == "ok").then_some(rules)
    });
    assert_eq!(rules.len(), 10, "{rules:?}");
    for rule in &rules {
        let expr = rule["query"].as_str().expect("query");
        assert_eq!(rule["lastError"].as_str().unwrap_or_default(), "", "{expr}");
        prom.query(expr);
        expects_data(expr, &scraped);
    }
    // The alerts' inputs exist: their comparisons drop the series, not a typo.
    for input in [
        "headroom_memory_pressure{level=\"critical\"}",
        "headroom_swap_used_bytes / headroom_swap_total_bytes",
        "headroom_collector_up",
        "up{job=\"headroom\"}",
    ] {
        assert!(!prom.query(input).is_empty(), "{input}");
    }
}

/// `headroom_actions_total`'s samples in a scrape: labels as exported
/// (`action="SIGTERM",outcome="done",rule="hog"`) → value.
fn action_samples(scrape: &str) -> std::collections::BTreeMap<String, f64> {
    scrape
        .lines()
        .filter_map(|l| l.strip_prefix("headroom_actions_total{"))
        .filter_map(|l| {
            let (labels, value) = l.split_once("} ")?;
            Some((labels.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The first action of a rule fires `HeadroomActionTaken` and shows on the
/// dashboard's actions annotation, in a `promtool test rules` fed with what
/// a real daemon exported: a scrape before its rule acted, repeated, then
/// one after, repeated. A counter that appeared only with its first action,
/// at 1, would have no earlier sample and no increase: no alert.
#[test]
fn the_first_action_fires_the_alert_in_a_promtool_test_fed_a_real_export() {
    let sb = Sandbox::new("first-action");
    let config = format!(
        "[daemon]\ninterval = \"100ms\"\nfast_interval = \"50ms\"\njournal = \"{}\"\n\n{}",
        sb.path("journal.jsonl").display(),
        sb.rule("footprint = \"16MiB\"\nactions = [{ signal = \"SIGTERM\" }]\n")
    );
    let daemon = Daemon::start(sb.dir.path(), &config);
    let done = "action=\"SIGTERM\",outcome=\"done\",rule=\"hog\"";

    // Before any action: every outcome of the step, at 0.
    let (status, scrape) = daemon.get("/metrics");
    assert_eq!(status, 200);
    let before = action_samples(&scrape);
    let labels: Vec<&str> = before.keys().map(String::as_str).collect();
    assert_eq!(
        labels,
        [
            done,
            "action=\"SIGTERM\",outcome=\"failed\",rule=\"hog\"",
            "action=\"SIGTERM\",outcome=\"gone\",rule=\"hog\"",
            "action=\"SIGTERM\",outcome=\"identity-changed\",rule=\"hog\"",
            "action=\"SIGTERM\",outcome=\"refused\",rule=\"hog\"",
        ],
        "{scrape}"
    );
    assert!(before.values().all(|&v| v == 0.0), "{before:?}");

    // A real action: the hog grows past the limit and gets SIGTERM.
    let mut hog = Running::hog(&sb.hog, &["--rate", "max", "--max", "64MiB"]);
    let after = wait_for(Duration::from_secs(60), "the SIGTERM counted", || {
        let samples = action_samples(&daemon.get("/metrics").1);
        (samples.get(done) == Some(&1.0)).then_some(samples)
    });
    let status = hog
        .wait_exit(Duration::from_secs(30))
        .expect("the hog ended");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM)
    );
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );

    // The two scrapes as promtool's input, 15 s apart as Prometheus would
    // scrape them: the first for 2 minutes, the second for 8.
    let instance = "gpu-box:9717";
    let mut input = String::new();
    for (labels, first) in &before {
        let second = after[labels];
        let values: Vec<String> = std::iter::repeat_n(first, 9)
            .chain(std::iter::repeat_n(&second, 32))
            .map(|v| v.to_string())
            .collect();
        input.push_str(&format!(
            "      - series: 'headroom_actions_total{{instance=\"{instance}\",job=\"headroom\",{labels}}}'\n        values: \"{}\"\n",
            values.join(" ")
        ));
    }
    let (_, annotation) = dashboard_queries()
        .into_iter()
        .find(|(place, _)| place.starts_with("annotation") && place.contains("ction"))
        .expect("the dashboard's actions annotation");
    let annotation = substitute(&annotation, instance);
    let test = format!(
        "rule_files:\n  - {rules}\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n{input}\
         \n    alert_rule_test:\n\
         \x20     - eval_time: 1m45s\n        alertname: HeadroomActionTaken\n        exp_alerts: []\n\
         \x20     - eval_time: 2m30s\n        alertname: HeadroomActionTaken\n        exp_alerts:\n\
         \x20         - exp_labels: {{ severity: info, instance: \"{instance}\", job: headroom, rule: hog, action: SIGTERM, outcome: done }}\n\
         \x20           exp_annotations:\n\
         \x20             summary: \"headroom acted on {instance}: SIGTERM by rule hog\"\n\
         \x20             description: \"headroom took the action SIGTERM (rule hog, outcome done) in the last 5 minutes.\"\n\
         \x20     - eval_time: 9m\n        alertname: HeadroomActionTaken\n        exp_alerts: []\n\
         \x20   promql_expr_test:\n\
         \x20     - expr: '{annotation}'\n        eval_time: 1m45s\n        exp_samples: []\n\
         \x20     - expr: '{annotation}'\n        eval_time: 2m15s\n        exp_samples:\n\
         \x20         - labels: '{{instance=\"{instance}\",rule=\"hog\",action=\"SIGTERM\",outcome=\"done\"}}'\n\
         \x20           value: 1\n",
        rules = repo("prometheus/alerts.yml").display(),
    );
    let file = sb.path("first_action_test.yml");
    std::fs::write(&file, &test).expect("write the promtool test");
    let (ok, out) = run_promtool(&["test", "rules", file.to_str().expect("utf-8")], None);
    assert!(
        ok && out.contains("SUCCESS"),
        "promtool test rules:\n{out}\n{test}"
    );
}
