//! `headroom explain PID`: each rule's verdict on one process, in words.
//!
//! Where a headroom daemon answers at the address, its view is used: its
//! effective config (`/api/v1/config`), its latest sample
//! (`/api/v1/snapshot`), the process's history and the rules' statuses
//! (`/api/v1/processes/{pid}`), so growth, time to exhaustion, ladders and
//! cooldowns are the daemon's. Otherwise this machine is sampled once and
//! judged under `--config` (or the embedded default); the limits that need
//! history (growth, time to exhaustion) are then unknown, and the output
//! says so. Either way the judging is [`crate::policy::explain()`], the same
//! matching, reach and limit code the daemon runs. A port held by another
//! user's program is refused, not asked and not fallen back from
//! ([`DaemonClient::holder`]): the daemon may be elsewhere.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::daemon_client::{DaemonClient, PortHolder};
use super::{CliError, load_config, write_stdout};
use crate::config::Config;
use crate::config::rules::ClauseCheck;
use crate::history::History;
use crate::model::{Action, SignalName, WorkloadKind};
use crate::model::{Detail, ProcessSample, Snapshot, Timestamp, printable};
use crate::policy::assess::numbered_step;
use crate::policy::explain::Selection;
use crate::policy::limits::Reading;
use crate::policy::{Context, RuleStatus, RuleVerdict};
use crate::report::format_bytes;

/// Where the judgement comes from.
pub enum Source {
    /// A daemon answered at this address.
    Daemon {
        addr: SocketAddr,
        /// The file its config came from; `None` for the embedded default.
        file: Option<String>,
    },
    /// One sample of this machine, taken here, and why no daemon's view.
    Local { config: String, why: String },
}

/// Everything the output is made of.
pub struct View {
    pub source: Source,
    pub process: ProcessSample,
    pub snap_total: u64,
    pub snap_available: u64,
    /// Its memory-cgroup ceiling in words, where it has one.
    pub ceiling: Option<String>,
    pub pressure: String,
    /// The uid the judged headroom runs as.
    pub self_uid: u32,
    pub verdicts: Vec<RuleVerdict>,
    /// The daemon's status of each rule for the process (daemon only).
    pub statuses: Vec<RuleStatus>,
    pub config: Config,
    /// Whether the process catches each signal a `require_handler` step
    /// sends, as this machine says now.
    pub handlers: Vec<(SignalName, Result<bool, String>)>,
}

/// The daemon's answers that `explain` reads.
#[derive(Deserialize)]
struct ConfigBody {
    file: Option<String>,
    config: serde_json::Value,
}

#[derive(Deserialize)]
struct ProcessBody {
    process: ProcessRowBody,
    #[serde(default)]
    history: Vec<PointBody>,
    /// The series of the job's total, for the root of a job with workers.
    #[serde(default)]
    job_history: Vec<PointBody>,
}

#[derive(Deserialize)]
struct ProcessRowBody {
    #[serde(default)]
    rules: Vec<RuleStatus>,
}

#[derive(Deserialize)]
struct PointBody {
    at: Timestamp,
    footprint: u64,
    gpu_memory: Option<u64>,
    #[serde(default)]
    detail: Detail,
}

/// Run `headroom explain`.
pub fn run(
    pid: u32,
    config_path: Option<PathBuf>,
    address: Option<SocketAddr>,
) -> Result<(), CliError> {
    let config = load_config(config_path.as_deref())?;
    let client = DaemonClient::new(address.unwrap_or(config.http.listen));
    let holder = client
        .holder()
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    let view = match from_daemon(&client, holder, pid) {
        Ok(view) => view,
        Err(why) => {
            let origin = config_path.as_ref().map_or_else(
                || "the embedded default config".to_string(),
                |p| p.display().to_string(),
            );
            local(pid, config, origin, why)?
        }
    };
    write_stdout(&render(&view))
}

/// GET `path` from the daemon: the status and the body.
fn get(client: &DaemonClient, path: &str) -> Result<(u16, String), String> {
    let (status, body) = client.get(path).map_err(|e| e.to_string())?;
    Ok((status.as_u16(), body))
}

fn parse<T: for<'de> Deserialize<'de>>(body: &str, what: &str) -> Result<T, String> {
    serde_json::from_str(body).map_err(|e| {
        format!(
            "the daemon's {what} is not what this headroom reads ({e}); is it the same version?"
        )
    })
}

/// The daemon's view of `pid`, or why there is none.
fn from_daemon(client: &DaemonClient, holder: PortHolder, pid: u32) -> Result<View, String> {
    let addr = client.addr();
    let (status, body) = get(client, "/api/v1/config")?;
    if status != 200 {
        return Err(format!(
            "the daemon at {addr} answered {status} for its config"
        ));
    }
    let body: ConfigBody = parse(&body, "config")?;
    let config = config_from_json(body.config)?;
    let (status, snap_body) = get(client, "/api/v1/snapshot")?;
    if status != 200 {
        return Err(format!("the daemon at {addr} has no sample yet ({status})"));
    }
    let snap: Snapshot = parse(&snap_body, "snapshot")?;
    let (status, row) = get(client, &format!("/api/v1/processes/{pid}"))?;
    if status == 404 || snap.process(pid).is_none() {
        return Err(format!(
            "the daemon at {addr} has no pid {pid} in its latest sample"
        ));
    }
    if status != 200 {
        return Err(format!(
            "the daemon at {addr} answered {status} for pid {pid}"
        ));
    }
    let row: ProcessBody = parse(&row, "process")?;
    let Some(process) = snap.process(pid).cloned() else {
        return Err(format!("the daemon's sample has no pid {pid}"));
    };
    // The process's history, as the daemon keeps it, recorded point by
    // point (the only process of each replayed sample).
    let mut history = History::new(config.daemon.history);
    for point in &row.history {
        history.record(&Snapshot {
            taken_at: point.at,
            processes: vec![ProcessSample {
                footprint: point.footprint,
                gpu_memory: point.gpu_memory,
                detail: point.detail,
                ..process.clone()
            }],
            ..Snapshot::default()
        });
    }
    // The job's total, recorded as a job of the same members (the policy
    // reads its series by the root's identity).
    if let Some(job) = snap.job_of(&process).filter(|j| j.root == process.id) {
        for point in &row.job_history {
            history.record(&Snapshot {
                taken_at: point.at,
                jobs: vec![crate::model::Job {
                    footprint: point.footprint,
                    gpu_memory: point.gpu_memory,
                    ..job.clone()
                }],
                ..Snapshot::default()
            });
        }
    }
    // The daemon's user: the owner of the socket it listens on, where the
    // OS tells (Linux); else this command's.
    let self_uid = match holder {
        PortHolder::Trusted(uid) => uid,
        PortHolder::Nobody | PortHolder::Unknown => crate::os::this_process::effective_uid(),
    };
    let ctx = Context {
        // The daemon's own pid is not known here; its status says when it
        // protects a process as its own or an ancestor.
        self_pid: 0,
        self_uid,
    };
    let verdicts = crate::policy::explain(&config, &history, &snap, ctx, snap.taken_at, &process);
    Ok(View {
        source: Source::Daemon {
            addr,
            file: body.file,
        },
        handlers: handlers(&config, &process),
        snap_total: snap.system.total,
        snap_available: snap.system.available,
        ceiling: crate::policy::limits::ceiling_reading(&snap, &process),
        pressure: snap.pressure.level.to_string(),
        self_uid,
        verdicts,
        statuses: row.process.rules,
        config,
        process,
    })
}

/// The daemon's config as `/api/v1/config` writes it (every key, as TOML
/// would), read back through the same validation as a file.
fn config_from_json(value: serde_json::Value) -> Result<Config, String> {
    fn drop_nulls(v: serde_json::Value) -> Option<serde_json::Value> {
        use serde_json::Value;
        match v {
            Value::Null => None,
            Value::Object(map) => Some(Value::Object(
                map.into_iter()
                    .filter_map(|(k, v)| drop_nulls(v).map(|v| (k, v)))
                    .collect(),
            )),
            Value::Array(items) => Some(Value::Array(
                items.into_iter().filter_map(drop_nulls).collect(),
            )),
            other => Some(other),
        }
    }
    let value = drop_nulls(value).unwrap_or_default();
    let text = toml::to_string(&value)
        .map_err(|e| format!("the daemon's config cannot be written as TOML: {e}"))?;
    Config::from_toml_str(&text, "the daemon's config")
        .map_err(|e| format!("the daemon's config does not validate here: {e}"))
}

/// One sample of this machine, judged under `config`.
fn local(pid: u32, config: Config, origin: String, why: String) -> Result<View, CliError> {
    let mut sampler = crate::sample::platform_sampler(&config.gpu, &config.labels);
    let mut snap = sampler
        .sample()
        .map_err(|e| CliError::Runtime(format!("cannot sample this machine: {e}")))?;
    let Some(index) = snap.processes.iter().position(|p| p.id.pid == pid) else {
        return Err(CliError::Runtime(format!(
            "no process with pid {pid} on this machine (it has exited, or it is a kernel thread, \
             which headroom never acts on)"
        )));
    };
    let running_as_root = crate::os::this_process::running_as_root();
    for problem in crate::jupyter::annotate_once(&config.jupyter, running_as_root, &mut snap) {
        tracing::warn!("{problem}");
    }
    crate::sample::environment::annotate_now(&mut snap);
    let process = snap.processes[index].clone();
    let mut history = History::new(config.daemon.history);
    history.record(&snap);
    let ctx = Context {
        // No daemon runs: nothing is its own or its ancestor. (This
        // command's own ancestors, its shell, are not a daemon's.)
        self_pid: 0,
        self_uid: crate::os::this_process::effective_uid(),
    };
    let verdicts = crate::policy::explain(&config, &history, &snap, ctx, snap.taken_at, &process);
    Ok(View {
        source: Source::Local {
            config: origin,
            why,
        },
        handlers: handlers(&config, &process),
        snap_total: snap.system.total,
        snap_available: snap.system.available,
        ceiling: crate::policy::limits::ceiling_reading(&snap, &process),
        pressure: snap.pressure.level.to_string(),
        self_uid: ctx.self_uid,
        verdicts,
        statuses: Vec::new(),
        config,
        process,
    })
}

/// Whether `p` catches each signal that a `require_handler` step of a rule
/// that matches it would send.
fn handlers(config: &Config, p: &ProcessSample) -> Vec<(SignalName, Result<bool, String>)> {
    let mut signals = Vec::new();
    for rule in config.rules.iter().filter(|r| r.matcher.matches(p)) {
        for step in &rule.actions {
            if let Action::Signal {
                signal,
                require_handler: true,
                ..
            } = step.action
                && !signals.contains(&signal)
            {
                signals.push(signal);
            }
        }
    }
    signals
        .into_iter()
        .map(|s| {
            let caught = crate::act::identity::catches_signal(p.id.pid, s.number())
                .map_err(|e| e.to_string());
            (s, caught)
        })
        .collect()
}

/// The whole output.
pub fn render(view: &View) -> String {
    let p = &view.process;
    let mut out = Vec::new();
    let owner = match (&p.user, p.uid) {
        (Some(user), Some(uid)) => format!("user {} (uid {uid})", printable(user)),
        (None, Some(uid)) => format!("uid {uid}"),
        _ => "owner unknown".to_string(),
    };
    let mut what = format!("{} workload", p.workload.kind);
    if let Some(id) = &p.workload.kernel_id {
        what = format!("jupyter kernel {}", printable(id));
    }
    if let Some(nb) = &p.workload.notebook {
        what.push_str(&format!(" [{}]", printable(nb)));
    }
    out.push(format!(
        "pid {} ({}), {owner}, {what}",
        p.id.pid,
        printable(&p.name)
    ));
    out.push(format!(
        "footprint {}; memory {}, {} available; pressure {}",
        format_bytes(p.footprint),
        format_bytes(view.snap_total),
        format_bytes(view.snap_available),
        view.pressure
    ));
    if let Some(change) = crate::workload::program_change(&p.workload) {
        out.push(format!(
            "{}: the same process (pid and start time), judged by the program it runs now; its \
             memory history spans both",
            printable(change)
        ));
    }
    for problem in crate::sample::environment::problems(&p.workload) {
        out.push(format!("framework environment: {}", printable(problem)));
    }
    match (&view.ceiling, &p.cgroup) {
        (Some(words), _) => out.push(format!("memory limit: {words}")),
        (None, Some(cgroup)) => out.push(format!(
            "memory limit: none below the machine's memory in its memory cgroup {} or above it",
            printable(cgroup)
        )),
        (None, None) => {}
    }
    out.push(match &view.source {
        Source::Daemon { addr, file } => format!(
            "judged by the headroom daemon at {addr} (running as uid {}, config {}): its \
             sample, its history of this process and its rule statuses",
            view.self_uid,
            file.as_deref().map_or_else(
                || "the embedded default".to_string(),
                |f| printable(f).into_owned()
            ),
        ),
        Source::Local { config, why } => format!(
            "judged here from one sample of this machine, with {}, for a headroom running as uid \
             {}: {why}; growth and time to exhaustion need a daemon's history and are not known",
            printable(config),
            view.self_uid
        ),
    });
    let ipykernel = is_ipykernel(p);
    for (signal, caught) in &view.handlers {
        out.push(handler_words(*signal, caught, ipykernel));
    }
    if view.verdicts.is_empty() {
        out.push("the config has no rules: headroom watches and acts on nothing".to_string());
    }
    for v in &view.verdicts {
        out.push(String::new());
        let status = view.statuses.iter().find(|s| s.rule == v.rule);
        out.extend(rule_lines(view, v, status));
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// Whether `p` was recognised as an IPython kernel (ipykernel): it ignores
/// SIGINT while idle and catches it while a cell runs.
fn is_ipykernel(p: &ProcessSample) -> bool {
    p.workload.kind == WorkloadKind::Jupyter
        && p.workload.evidence.iter().any(|e| e.contains("ipykernel"))
}

/// What the handler check of a `require_handler` step finds now. An
/// ipykernel ignores SIGINT while idle and installs its handler while a
/// cell executes (`pre_handler_hook`), which is when a runaway cell grows:
/// the step sends SIGINT then, and skips an idle kernel, which is not
/// growing. The actuator checks the handler right before each signal, so
/// this is how the rule treats the kernel, not only what it is now.
fn handler_words(signal: SignalName, caught: &Result<bool, String>, ipykernel: bool) -> String {
    let kernel = ipykernel && signal == SignalName::Int;
    match caught {
        Ok(true) if kernel => format!(
            "it catches {signal}: a cell is running (ipykernel installs its handler while it \
             executes one), so a require_handler step sends {signal} and interrupts the cell"
        ),
        Ok(true) => format!("it catches {signal}: a require_handler step sends it"),
        Ok(false) if kernel => format!(
            "idle: {signal} is ignored until a cell runs; ipykernel installs its handler while \
             executing, so a require_handler step acts when a cell is running (while idle the \
             step is skipped, journaled as skipped)"
        ),
        Ok(false) => format!(
            "it does not catch {signal}: a require_handler step skips it (journaled as \
             skipped)"
        ),
        Err(e) => format!("whether it catches {signal} is not known here ({e})"),
    }
}

fn clause_words(c: &ClauseCheck) -> String {
    format!(
        "{} {} {}: found {}",
        c.clause.key(),
        if c.holds { "matches" } else { "does not match" },
        printable(&c.wanted),
        printable(&c.found)
    )
}

fn reading_words(kind: &str, r: &Reading) -> String {
    format!(
        "{kind} {}: {}, acts at {} — {}",
        r.what,
        printable(&r.value),
        r.threshold,
        match (kind, r.holds) {
            ("limit", true) => "crossed",
            ("limit", false) => "not crossed",
            (_, true) => "holds",
            (_, false) => "does not hold",
        }
    )
}

/// The lines of one rule.
fn rule_lines(view: &View, v: &RuleVerdict, status: Option<&RuleStatus>) -> Vec<String> {
    let name = printable(&v.rule);
    let mut lines = Vec::new();
    if !v.matches {
        let failed = v
            .failed_clause()
            .map_or_else(String::new, |c| format!(": {}", clause_words(c)));
        lines.push(format!("rule \"{name}\": does not match{failed}"));
        return lines;
    }
    lines.push(if v.clauses.is_empty() {
        format!("rule \"{name}\": matches (no [rule.match]: every process)")
    } else {
        format!("rule \"{name}\": matches")
    });
    for c in &v.clauses {
        lines.push(format!("  {}", clause_words(c)));
    }
    if let Some(root) = v.judged_with_job {
        lines.push(format!(
            "  judged with its job: it is a worker of pid {root}, which the rule matches too, \
             and scope = \"job\" judges the job's totals and acts on its root (`headroom \
             explain {root}`); its own figures follow; scope = \"process\" would judge it alone"
        ));
    }
    if let Some((members, basis)) = v.stands_for_job {
        lines.push(format!(
            "  judged on its job: {members} processes (it and its workers), memory counted by \
             {basis}; an action goes to this process"
        ));
    }
    for r in &v.limits {
        lines.push(format!("  {}", reading_words("limit", r)));
    }
    for r in &v.conditions {
        lines.push(format!("  {}", reading_words("when", r)));
    }
    match &v.selected {
        Some(Selection::This) => {
            lines.push("  select: of the processes it holds for, it picks this one".to_string())
        }
        Some(Selection::Other { pid, name }) => lines.push(format!(
            "  select: of the processes it holds for, it picks pid {pid} ({}), not this one",
            printable(name)
        )),
        Some(Selection::Nobody) => {
            lines.push("  select: none of the processes it holds for is in its reach".to_string())
        }
        None => {}
    }
    lines.push(format!(
        "  holds: {}",
        if v.holds {
            "yes"
        } else if v.limits.is_empty() {
            "no (its [rule.when] condition does not hold)"
        } else {
            "no"
        }
    ));
    if let Some(note) = &v.note {
        lines.push(format!("  note: {}", printable(note)));
    }
    if let Some(s) = status {
        let detail = match &s.not_acting {
            // The reason has a line of its own.
            Some(na) => s
                .detail
                .strip_suffix(&format!("; not acting: {na}"))
                .unwrap_or(&s.detail),
            None => &s.detail,
        };
        lines.push(format!(
            "  daemon: {}: {}",
            printable(&s.state),
            printable(detail)
        ));
    }
    let rule = view.config.rules.iter().find(|r| r.name == v.rule);
    // What the rule does next, and why it does not act, if it does not:
    // the daemon's word where it has one, else this judgement's.
    let picked_another = match &v.selected {
        Some(Selection::Other { pid, name }) => Some(format!(
            "the rule acts on one process at a time, and picks pid {pid} ({})",
            printable(name)
        )),
        _ => None,
    };
    let (next_step, reason) = match status {
        Some(s) => (
            s.next_step,
            s.not_acting
                .clone()
                .filter(|na| !na.starts_with("dry run:") || s.next_step.is_none()),
        ),
        None => match v.out_of_reach.clone().or(picked_another) {
            Some(why) => (None, Some(why)),
            None => (Some(0), None),
        },
    };
    let step = rule.and_then(|r| next_step.and_then(|i| numbered_step(r, i)));
    match step {
        Some(step) => {
            let when = if status.is_some_and(|s| s.state.starts_with("step")) {
                "when due"
            } else if v.holds {
                "now"
            } else {
                "once the rule holds"
            };
            lines.push(format!("  next: {step}, {when}"));
        }
        None => lines.push("  next: nothing".to_string()),
    }
    let said_dry = reason.as_ref().is_some_and(|r| r.contains("dry run:"));
    if let Some(reason) = reason {
        lines.push(format!("  not acting: {}", printable(&reason)));
    }
    if let Some(dry) = v.dry_run.as_ref().filter(|_| !said_dry) {
        lines.push(format!("  {dry}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_idle_ipykernel_is_said_to_be_interrupted_once_a_cell_runs() {
        let idle = handler_words(SignalName::Int, &Ok(false), true);
        assert!(
            idle.starts_with("idle: SIGINT is ignored until a cell runs"),
            "{idle}"
        );
        let running = handler_words(SignalName::Int, &Ok(true), true);
        assert!(
            running.starts_with("it catches SIGINT: a cell is running"),
            "{running}"
        );
        // Other signals, and other processes, as the check finds them.
        assert_eq!(
            handler_words(SignalName::Usr1, &Ok(false), true),
            "it does not catch SIGUSR1: a require_handler step skips it (journaled as skipped)"
        );
        assert_eq!(
            handler_words(SignalName::Int, &Ok(false), false),
            "it does not catch SIGINT: a require_handler step skips it (journaled as skipped)"
        );
    }

    #[test]
    fn an_ipykernel_is_known_by_its_evidence() {
        let classified = |name: &str, argv: &[&str]| {
            let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
            let mut p = crate::model::build::process(1).build();
            p.workload = crate::workload::classify(&crate::workload::ProcessFacts {
                name,
                exe: None,
                argv: &argv,
                libraries: &[],
            });
            p
        };
        let ipykernel = classified(
            "python3",
            &[
                "python3",
                "-m",
                "ipykernel_launcher",
                "-f",
                "/r/kernel-1.json",
            ],
        );
        assert!(is_ipykernel(&ipykernel), "{:?}", ipykernel.workload);
        let irkernel = classified(
            "R",
            &[
                "/usr/lib/R/bin/exec/R",
                "--slave",
                "-e",
                "IRkernel::main()",
                "--args",
                "/r/kernel-2.json",
            ],
        );
        assert_eq!(irkernel.workload.kind, WorkloadKind::Jupyter);
        assert!(!is_ipykernel(&irkernel), "{:?}", irkernel.workload);
    }

    #[test]
    fn the_daemons_config_reads_back_as_the_same_config() {
        let config = Config::embedded_default();
        let json = serde_json::to_value(&config).unwrap();
        assert_eq!(config_from_json(json).unwrap(), config);
    }

    fn view(config: &str, uid: u32, footprint: u64) -> View {
        use crate::model::WorkloadKind;
        use crate::model::build::{process, snapshot};
        let config = Config::from_toml_str(config, "t.toml").unwrap();
        let process = process(42)
            .uid(uid)
            .user("root")
            .name("python3")
            .footprint(footprint)
            .kind(WorkloadKind::Jupyter)
            .kernel_id("3f2a")
            .build();
        let snap = snapshot(1)
            .memory(10 << 30, 5 << 30)
            .process(process.clone())
            .build();
        let ctx = Context {
            self_pid: 7,
            self_uid: 0,
        };
        let history = History::new(Duration::from_secs(60));
        View {
            source: Source::Local {
                config: "t.toml".into(),
                why: "no daemon".into(),
            },
            verdicts: crate::policy::explain(
                &config,
                &history,
                &snap,
                ctx,
                snap.taken_at,
                &process,
            ),
            process,
            snap_total: snap.system.total,
            snap_available: snap.system.available,
            ceiling: None,
            pressure: "normal".into(),
            self_uid: 0,
            statuses: Vec::new(),
            config,
            handlers: Vec::new(),
        }
    }

    /// A process that exec'd since it was first seen says so, under its
    /// name and workload.
    #[test]
    fn a_process_that_exec_d_says_what_it_ran_before() {
        let mut v = view("", 0, 2 << 30);
        let earlier = crate::workload::EarlierProgram {
            name: "sh".into(),
            exec: true,
            noticed: crate::model::Timestamp(1_700_000_000_000),
        };
        earlier.note(&mut v.process.workload);
        let text = render(&v);
        assert!(
            text.contains(
                "\nexec'd from sh (noticed 2023-11-14T22:13:20.000Z): the same process (pid and \
                 start time), judged by the program it runs now; its memory history spans both\n"
            ),
            "{text}"
        );
        assert!(!render(&view("", 0, 2 << 30)).contains("exec'd"));
    }

    #[test]
    fn an_unsupported_framework_pair_is_named() {
        let mut v = view("", 0, 1 << 30);
        v.process.workload.evidence = vec![
            "argv[2] is ipykernel_launcher".into(),
            "unsupported: tensorflow-metal 0.6.0 with tensorflow-macos 2.9.2: unsupported pair"
                .into(),
        ];
        let text = render(&v);
        assert!(
            text.contains("\nframework environment: unsupported: tensorflow-metal 0.6.0 with tensorflow-macos 2.9.2: unsupported pair\n"),
            "{text}"
        );
        assert!(!text.contains("framework environment: argv"), "{text}");
    }

    #[test]
    fn a_rule_held_back_by_root_says_so_and_what_it_would_do() {
        let text = render(&view(
            "[[rule]]\nname = \"nb\"\nfootprint = \"1GiB\"\nother_users = true\nactions = [{ \
             signal = \"SIGINT\" }]\n[rule.match]\nworkload = [\"jupyter\"]\n",
            0,
            2 << 30,
        ));
        assert!(text.contains("rule \"nb\": matches\n"), "{text}");
        assert!(
            text.contains("  workload matches [\"jupyter\"]: found jupyter\n"),
            "{text}"
        );
        assert!(
            text.contains("  limit footprint: 2.0 GiB, acts at > 1.0 GiB — crossed\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  not acting: owned by root and the rule has root = false; add root = true to \
                 act on root's processes\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_rule_that_acts_names_its_next_step() {
        let text = render(&view(
            "[[rule]]\nname = \"nb\"\nfootprint = \"1GiB\"\nroot = true\nactions = [{ signal = \
             \"SIGINT\" }]\n",
            0,
            512 << 20,
        ));
        assert!(
            text.contains("rule \"nb\": matches (no [rule.match]: every process)\n"),
            "{text}"
        );
        assert!(
            text.contains("  next: step 1 of 1: send SIGINT, once the rule holds\n"),
            "{text}"
        );
        assert!(!text.contains("not acting"), "{text}");
    }
}
