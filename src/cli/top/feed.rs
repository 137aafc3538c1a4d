//! Where `headroom top` gets its figures: a running daemon's API, or this
//! machine sampled here. Each [`Source::refresh`] returns one [`Feed`] or
//! why there is none.
//!
//! From a daemon (through [`DaemonClient`], which asks nothing of a port
//! another user holds): `/api/v1/snapshot` (memory, swap, pressure, GPUs,
//! jobs, every process), `/api/v1/processes` (each process's growth, time to
//! exhaustion and rule states), `/api/v1/history` (the machine's trend),
//! and less often `/api/v1/events` (each rule's last action) and
//! `/api/v1/config` (the rules' names, the interval, dry run).
//!
//! Here: the platform sampler, Jupyter kernels named by their notebooks, a
//! history of its own, and the policy run on every sample for the rules'
//! states, in dry run: this view acts on nothing and writes no journal.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::super::daemon_client::{DaemonClient, GetError};
use super::view::{Feed, Figures, LastAction};
use crate::config::Config;
use crate::history::{
    GROWTH_WINDOW, History, MIN_GROWTH_POINTS, exhaustion_headroom_for, time_to_exhaustion,
};
use crate::model::{Snapshot, Swap, SystemMemory, Timestamp, printable};
use crate::policy::{Context, PolicyState, RuleStatus, evaluate};
use crate::sample::Sampler;

/// How often the daemon's events and config are read again.
const EVENTS_EVERY: Duration = Duration::from_secs(5);
const CONFIG_EVERY: Duration = Duration::from_secs(30);
/// How many recent events are read for the rules' last actions.
const EVENTS_READ: usize = 500;
/// At most this many rows of the daemon's process table.
const ROWS_READ: usize = 100_000;

/// A source of figures.
pub enum Source {
    Daemon(Box<DaemonSource>),
    Local(Box<LocalSource>),
}

impl Source {
    pub fn refresh(&mut self) -> Result<Feed, String> {
        match self {
            Source::Daemon(d) => d.refresh(),
            Source::Local(l) => l.refresh(),
        }
    }
}

/// The daemon's answers that `top` reads; fields it does not use are
/// ignored.
#[derive(Deserialize)]
struct ProcessesBody {
    processes: Vec<RowBody>,
}

#[derive(Deserialize)]
struct RowBody {
    pid: u32,
    start: u64,
    growth_bytes_per_second: Option<f64>,
    time_to_exhaustion_seconds: Option<f64>,
    #[serde(default)]
    rules: Vec<RuleStatus>,
}

#[derive(Deserialize)]
struct HistoryBody {
    points: Vec<PointBody>,
}

#[derive(Deserialize)]
struct PointBody {
    at: Timestamp,
    total: u64,
    available: u64,
    swap_used: u64,
}

#[derive(Deserialize)]
struct EventsBody {
    events: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct ConfigBody {
    config: ConfigSummary,
}

#[derive(Deserialize)]
struct ConfigSummary {
    daemon: DaemonSummary,
    #[serde(default)]
    rule: Vec<RuleSummary>,
}

#[derive(Deserialize)]
struct DaemonSummary {
    interval: String,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
struct RuleSummary {
    name: String,
}

/// What `/api/v1/config` says that `top` shows.
#[derive(Debug, Clone, Default)]
pub struct DaemonSettings {
    pub rules: Vec<String>,
    pub interval: Option<Duration>,
    pub dry_run: bool,
}

/// A running daemon, asked over HTTP.
pub struct DaemonSource {
    client: DaemonClient,
    settings: Option<(Instant, DaemonSettings)>,
    actions: Option<(Instant, HashMap<String, LastAction>)>,
}

fn decode<T: for<'de> Deserialize<'de>>(body: &str, what: &str) -> Result<T, String> {
    serde_json::from_str(body).map_err(|e| {
        format!(
            "the daemon's {what} is not what this headroom reads ({e}); is it the same version?"
        )
    })
}

impl DaemonSource {
    pub fn new(client: DaemonClient) -> Self {
        Self {
            client,
            settings: None,
            actions: None,
        }
    }

    /// GET `path`: its body when it answers 200; else why not, with the
    /// daemon's own reason where it gives one.
    fn get(&self, path: &str) -> Result<String, String> {
        let (status, body) = self.client.get(path).map_err(|e| match e {
            GetError::NoAnswer { error, .. } => error,
            other => other.to_string(),
        })?;
        if status.is_success() {
            return Ok(body);
        }
        let reason = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_owned))
            .unwrap_or(body);
        Err(format!("it answered {status}: {}", printable(&reason)))
    }

    /// The daemon's rules, interval and dry run, read again now and then.
    pub fn settings(&mut self) -> Result<DaemonSettings, String> {
        if let Some((at, s)) = &self.settings
            && at.elapsed() < CONFIG_EVERY
        {
            return Ok(s.clone());
        }
        let body: ConfigBody = decode(&self.get("/api/v1/config")?, "config")?;
        let settings = DaemonSettings {
            rules: body.config.rule.into_iter().map(|r| r.name).collect(),
            interval: crate::config::parse_duration(&body.config.daemon.interval).ok(),
            dry_run: body.config.daemon.dry_run,
        };
        self.settings = Some((Instant::now(), settings.clone()));
        Ok(settings)
    }

    /// Each rule's most recent action, read again now and then.
    fn last_actions(&mut self) -> Result<HashMap<String, LastAction>, String> {
        if let Some((at, a)) = &self.actions
            && at.elapsed() < EVENTS_EVERY
        {
            return Ok(a.clone());
        }
        let body: EventsBody = decode(
            &self.get(&format!("/api/v1/events?limit={EVENTS_READ}"))?,
            "events",
        )?;
        let actions = last_actions(&body.events);
        self.actions = Some((Instant::now(), actions.clone()));
        Ok(actions)
    }

    fn refresh(&mut self) -> Result<Feed, String> {
        let snapshot: Snapshot = decode(&self.get("/api/v1/snapshot")?, "snapshot")?;
        let rows: ProcessesBody = decode(
            &self.get(&format!("/api/v1/processes?limit={ROWS_READ}"))?,
            "process table",
        )?;
        let history: HistoryBody = decode(&self.get("/api/v1/history?minutes=1")?, "history")?;
        let settings = self.settings()?;
        let last_actions = self.last_actions()?;
        let figures = rows
            .processes
            .into_iter()
            .map(|r| {
                (
                    (r.pid, r.start),
                    Figures {
                        growth: r.growth_bytes_per_second,
                        exhaustion_seconds: r.time_to_exhaustion_seconds,
                        rules: r.rules,
                    },
                )
            })
            .collect();
        Ok(Feed {
            machine_growth: machine_growth(&history.points, snapshot.taken_at),
            snapshot,
            figures,
            rules: settings.rules,
            last_actions: Some(last_actions),
            dry_run: settings.dry_run,
        })
    }
}

/// The machine's growth from the daemon's system series, by the same
/// slope the daemon's rules use ([`History::machine_growth`]).
fn machine_growth(points: &[PointBody], now: Timestamp) -> Option<f64> {
    let mut history = History::new(GROWTH_WINDOW * 2);
    for p in points {
        history.record(&Snapshot {
            taken_at: p.at,
            system: SystemMemory {
                total: p.total,
                available: p.available,
                ..SystemMemory::default()
            },
            swap: Swap {
                used: p.swap_used,
                ..Swap::default()
            },
            ..Snapshot::default()
        });
    }
    history.machine_growth(now, GROWTH_WINDOW, MIN_GROWTH_POINTS)
}

/// Each rule's most recent `action` event among `events` (oldest first).
fn last_actions(events: &[serde_json::Value]) -> HashMap<String, LastAction> {
    let mut out = HashMap::new();
    for e in events {
        if e["event"] != "action" {
            continue;
        }
        let Some(rule) = e["rule"].as_str() else {
            continue;
        };
        let action = match &e["action"] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => "action".into(),
            _ => "hook".into(),
        };
        let process = &e["process"];
        let text = format!(
            "{} → {} (pid {}) {}",
            printable(&action),
            printable(process["name"].as_str().unwrap_or("?")),
            process["pid"].as_u64().unwrap_or(0),
            printable(e["outcome"].as_str().unwrap_or("")),
        );
        let at = Timestamp(e["at"].as_u64().unwrap_or(0));
        out.insert(rule.to_owned(), LastAction { at, text });
    }
    out
}

/// This machine, sampled here and judged by the rules in dry run.
pub struct LocalSource {
    sampler: Box<dyn Sampler>,
    notebooks: crate::jupyter::Notebooks,
    history: History,
    policy: PolicyState,
    config: Config,
    ctx: Context,
}

impl LocalSource {
    /// A sampler for `config` (its `[gpu]`, `[labels]` and `[jupyter]`);
    /// its rules are judged in dry run.
    pub fn new(mut config: Config) -> Self {
        config.daemon.dry_run = true;
        let as_root = crate::os::this_process::running_as_root();
        Self {
            sampler: crate::sample::platform_sampler(&config.gpu, &config.labels),
            notebooks: crate::jupyter::Notebooks::start(&config.jupyter, as_root),
            history: History::new(config.daemon.history),
            policy: PolicyState::default(),
            ctx: Context {
                self_pid: std::process::id(),
                self_uid: crate::os::this_process::effective_uid(),
            },
            config,
        }
    }

    /// The config's sampling interval.
    pub fn interval(&self) -> Duration {
        self.config.daemon.interval
    }

    fn refresh(&mut self) -> Result<Feed, String> {
        let mut snap = self
            .sampler
            .sample()
            .map_err(|e| format!("cannot sample this machine: {e}"))?;
        self.notebooks.annotate(&mut snap);
        self.history.record(&snap);
        let now = snap.taken_at;
        let evaluation = evaluate(
            &self.config,
            &mut self.policy,
            &self.history,
            &snap,
            self.ctx,
            now,
        );
        let mut statuses: HashMap<(u32, u64), Vec<RuleStatus>> = HashMap::new();
        for s in evaluation.statuses {
            statuses.entry((s.pid, s.start)).or_default().push(s);
        }
        let figures = snap
            .processes
            .iter()
            .map(|p| {
                let key = (p.id.pid, p.id.start);
                let growth = self
                    .history
                    .process(&p.id)
                    .and_then(|t| t.growth_bytes_per_second(GROWTH_WINDOW));
                let (headroom, _) = exhaustion_headroom_for(&snap, p);
                let figures = Figures {
                    growth,
                    exhaustion_seconds: growth
                        .and_then(|g| time_to_exhaustion(headroom, g))
                        .map(|d| d.as_secs_f64()),
                    rules: statuses.remove(&key).unwrap_or_default(),
                };
                (key, figures)
            })
            .collect();
        Ok(Feed {
            machine_growth: self
                .history
                .machine_growth(now, GROWTH_WINDOW, MIN_GROWTH_POINTS),
            figures,
            rules: self.config.rules.iter().map(|r| r.name.clone()).collect(),
            last_actions: None,
            dry_run: true,
            snapshot: snap,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_rule_keeps_its_latest_action() {
        let events = vec![
            json!({"at": 1000, "event": "started"}),
            json!({"at": 2000, "event": "action", "rule": "a", "action": "SIGINT",
                   "outcome": "done", "process": {"pid": 42, "name": "python3"}}),
            json!({"at": 3000, "event": "action", "rule": "a", "action": "SIGTERM",
                   "outcome": "gone", "process": {"pid": 42, "name": "python3"}}),
            json!({"at": 4000, "event": "action", "rule": "b",
                   "action": {"hook": ["/bin/page"]}, "outcome": "done",
                   "process": {"pid": 7, "name": "evil\u{1b}[2J"}}),
            json!({"at": 5000, "event": "limit-crossed", "rule": "a"}),
        ];
        let got = last_actions(&events);
        assert_eq!(got.len(), 2);
        assert_eq!(got["a"].at, Timestamp(3000));
        assert_eq!(got["a"].text, "SIGTERM → python3 (pid 42) gone");
        assert!(
            got["b"].text.starts_with("hook → evil"),
            "{}",
            got["b"].text
        );
        assert!(!got["b"].text.contains('\u{1b}'));
    }

    #[test]
    fn the_machine_trend_comes_from_the_daemons_series() {
        let gib = 1u64 << 30;
        // 10 MiB more taken each second, for 20 s.
        let points: Vec<PointBody> = (0..=20u64)
            .map(|s| PointBody {
                at: Timestamp(1_000_000 + s * 1000),
                total: 64 * gib,
                available: 32 * gib - s * 10 * (1 << 20),
                swap_used: 0,
            })
            .collect();
        let g = machine_growth(&points, Timestamp(1_020_000)).unwrap();
        assert!((g - 10.0 * (1 << 20) as f64).abs() < 1.0, "{g}");
        assert_eq!(machine_growth(&points[..1], Timestamp(1_000_000)), None);
    }

    #[test]
    fn a_process_row_reads_without_the_fields_top_ignores() {
        let body = r#"{"taken_at":1,"matched":1,"headroom_bytes":5,"growth_window_seconds":30,
            "processes":[{"pid":4,"start":9,"ppid":1,"name":"x","footprint":3,
            "growth_bytes_per_second":null,"time_to_exhaustion_seconds":null,
            "rules":[{"rule":"r","pid":4,"start":9,"state":"near","detail":"d",
                      "not_acting":null,"next_step":0}]}]}"#;
        let rows: ProcessesBody = decode(body, "process table").unwrap();
        assert_eq!(rows.processes[0].pid, 4);
        assert_eq!(rows.processes[0].rules[0].state, "near");
    }
}
