//! The command line: subcommands, their options and help, and the mapping of
//! every outcome to an exit code (0 ok, 1 runtime failure, 2 bad usage or bad
//! config).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

mod explain;

use crate::config::{Config, ConfigError, DEFAULT_TOML, HttpConfig, LogFormat};
use crate::daemon::{Daemon, RunOptions};
use crate::model::Snapshot;
use crate::report::{TableOptions, render_snapshot};
use crate::sample::replay::{ReplaySampler, TraceWriter};
use crate::sample::{ExitCauses, PressureEvents, Sampler, exit_causes, platform_sampler};
use crate::service::{Manager, Scope};

#[derive(Debug, Parser)]
#[command(
    name = "headroom",
    version,
    about = "Memory-pressure daemon for machine-learning workloads",
    long_about = "headroom watches memory, swap, memory pressure and the footprint of ML processes \
                  (Jupyter kernels, PyTorch/TensorFlow/JAX/MLX jobs, llama.cpp/Ollama/vLLM servers), \
                  shows who holds the memory, and contains runaway growth, gently first."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground (launchd and systemd supervise it).
    ///
    /// Without --config it runs on the embedded default config (see
    /// `headroom print-config`). SIGHUP reloads the config file; a file that
    /// does not validate is rejected and the running config kept. SIGTERM or
    /// Ctrl-C stops it.
    Run {
        /// TOML config file; re-read on SIGHUP.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Log what would be done instead of doing it (wins over the config).
        #[arg(long)]
        dry_run: bool,
        /// Log format; overrides the config's `daemon.log_format`.
        #[arg(long, value_enum, value_name = "FORMAT")]
        log_format: Option<LogFormat>,
        /// Play a recorded trace (from `headroom record`) instead of sampling
        /// this machine, looping at its end. For trying configs safely.
        #[arg(long, value_name = "TRACE")]
        replay: Option<PathBuf>,
        /// Serve metrics, the API and the status page on this address and port
        /// (overrides `http.listen`; default 127.0.0.1:9717).
        #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen_arg)]
        listen: Option<SocketAddr>,
        /// Allow --listen (or `http.listen`) to be a non-loopback address.
        #[arg(long)]
        allow_remote: bool,
    },
    /// Ask a running daemon for its latest sample and print it like `snapshot`.
    ///
    /// The daemon is reached over HTTP at `http.listen` of the config (or
    /// --address). Exits 1 if no daemon answers there.
    Status {
        /// The daemon's address; default: `http.listen` from --config or the
        /// embedded default (127.0.0.1:9717).
        #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen_arg)]
        address: Option<SocketAddr>,
        /// Config file whose `http.listen` says where the daemon is.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the daemon's latest snapshot as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// List every process, not only the largest.
        #[arg(long)]
        all: bool,
        /// How many processes to list without --all.
        #[arg(long, default_value_t = 15, value_name = "N")]
        top: usize,
    },
    /// Print this machine's memory state and its largest processes.
    Snapshot {
        /// TOML config file; its `[gpu]` section says how GPUs are read, its
        /// `[jupyter]` section where Jupyter servers are found.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the full snapshot as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// List every process, not only the largest.
        #[arg(long)]
        all: bool,
        /// How many processes to list without --all.
        #[arg(long, default_value_t = 15, value_name = "N")]
        top: usize,
    },
    /// Say, rule by rule, why headroom does or does not act on a process.
    ///
    /// For each rule: whether it matches the process and on what (the
    /// clause that fails, if one does), each limit's value against its
    /// threshold, its system conditions, what it would do next, and why it
    /// would not act (the process's owner, its protection, a dry run, a
    /// cooldown). Asks the daemon at --address (or `http.listen` of
    /// --config) for its config, sample, history and rule statuses; where
    /// none answers, samples this machine once and judges it under --config
    /// or the embedded default. Exits 1 if there is no such process.
    Explain {
        /// The process.
        #[arg(value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
        pid: u32,
        /// Config file: its `http.listen` says where the daemon is, and its
        /// rules judge the process when no daemon answers.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The daemon's address; default: `http.listen` from --config or the
        /// embedded default (127.0.0.1:9717).
        #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen_arg)]
        address: Option<SocketAddr>,
    },
    /// Print the embedded default config, with comments.
    PrintConfig,
    /// Validate a config file and print the effective config.
    ///
    /// Exits 2 with an error naming the file, line, key and offending value
    /// when the file is invalid.
    CheckConfig {
        /// The TOML file to check.
        file: PathBuf,
    },
    /// Record snapshots of this machine as JSON Lines, for replay and tests.
    Record {
        /// Where to write the trace.
        #[arg(long, short, value_name = "FILE")]
        out: PathBuf,
        /// How long to record, e.g. 60s or 5m.
        #[arg(long, default_value = "60s", value_parser = parse_duration_arg)]
        duration: Duration,
        /// Time between snapshots, e.g. 1s or 250ms.
        #[arg(long, default_value = "1s", value_parser = parse_duration_arg)]
        interval: Duration,
    },
    /// Print the event journal: limits crossed, signals sent, hooks run,
    /// processes exited, config reloads.
    ///
    /// Reads the journal at --journal, else the config's `daemon.journal`,
    /// else the platform default (which differs for root and for a user: the
    /// journal of a daemon running as root needs `sudo headroom events`).
    /// Rotated files are read too, oldest first.
    Events {
        /// Only events since then: a duration ago (1h, 30m) or a time
        /// (2026-11-22T14:00:00Z, or 2026-11-22 14:00:00 in UTC).
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// Print the events as JSON Lines, as stored.
        #[arg(long)]
        json: bool,
        /// The journal file to read.
        #[arg(long, value_name = "PATH")]
        journal: Option<PathBuf>,
        /// Take the journal's path from this config file.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Install or remove headroom as a launchd (macOS) or systemd (Linux)
    /// service.
    #[command(subcommand)]
    Service(ServiceCommand),
    /// Check each collector on this machine: what works, what needs root,
    /// what is unavailable, and what to do about it.
    ///
    /// Prints a plain-text report to paste into a bug report. Exits 1 if
    /// something headroom needs does not work.
    Doctor,
}

/// `headroom service …`.
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write the service file, create the log, state and config
    /// directories, and start the service.
    ///
    /// Without --config the service runs with the config in its config
    /// directory, which is created from the embedded default if missing.
    Install {
        #[command(flatten)]
        target: ServiceTarget,
        /// Config file for the service (validated first).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the files and commands instead of writing and running them.
        #[arg(long)]
        print: bool,
    },
    /// Stop the service and remove its plist or unit. Config, state and
    /// logs stay.
    Uninstall {
        #[command(flatten)]
        target: ServiceTarget,
        /// Print the commands instead of running them.
        #[arg(long)]
        print: bool,
    },
}

/// Which service `headroom service` acts on.
#[derive(Debug, clap::Args)]
pub struct ServiceTarget {
    /// The whole machine, as root: a LaunchDaemon or a systemd system unit
    /// that sees every user's processes. The default when run as root.
    #[arg(long, conflicts_with = "user")]
    system: bool,
    /// This user: a LaunchAgent or a systemd user unit that sees this
    /// user's processes. The default when not root.
    #[arg(long)]
    user: bool,
    /// The service manager to write for (default: launchd on macOS,
    /// systemd on Linux). Another OS's only with --print.
    #[arg(long, value_enum, value_name = "MANAGER")]
    manager: Option<Manager>,
}

fn parse_listen_arg(s: &str) -> Result<SocketAddr, String> {
    crate::config::parse_listen(s)
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    crate::config::parse_duration(s).map_err(|e| e.to_string())
}

/// A failure, sorted by whose fault it is.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The user's config: exit 2.
    #[error("{0}")]
    Config(Box<ConfigError>),
    /// Bad usage that clap could not catch: exit 2.
    #[error("{0}")]
    Usage(String),
    /// Something failed at run time: exit 1.
    #[error("{0}")]
    Runtime(String),
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        CliError::Config(Box::new(e))
    }
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Config(_) | CliError::Usage(_) => 2,
            CliError::Runtime(_) => 1,
        }
    }
}

/// Parse the command line, run it, and map the outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // clap prints help and version to stdout (exit 0) and usage errors to
        // stderr (exit 2).
        Err(e) => e.exit(),
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("headroom: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Run one parsed command.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Run {
            config,
            dry_run,
            log_format,
            replay,
            listen,
            allow_remote,
        } => run_daemon(
            config,
            dry_run,
            log_format,
            replay,
            HttpOverrides {
                listen,
                allow_remote,
            },
        ),
        Command::Status {
            address,
            config,
            json,
            all,
            top,
        } => status(address, config, json, TableOptions { all, top }),
        Command::Snapshot {
            config,
            json,
            all,
            top,
        } => snapshot(config, json, TableOptions { all, top }),
        Command::Explain {
            pid,
            config,
            address,
        } => explain::run(pid, config, address),
        Command::PrintConfig => {
            print!("{DEFAULT_TOML}");
            Ok(())
        }
        Command::CheckConfig { file } => {
            let config = Config::load(&file)?;
            // As root, refuse what `headroom run` as root would refuse.
            crate::config::permissions::check_for_root(
                Some(&file),
                &config,
                crate::act::effective_uid(),
            )?;
            println!("# {}: valid. Effective config:", file.display());
            print!("{}", config.to_toml());
            Ok(())
        }
        Command::Record {
            out,
            duration,
            interval,
        } => record(&out, duration, interval),
        Command::Events {
            since,
            json,
            journal,
            config,
        } => events(since.as_deref(), json, journal, config),
        Command::Service(cmd) => service(cmd),
        Command::Doctor => {
            let report = crate::doctor::run();
            write_stdout(&report.render())?;
            if report.healthy() {
                Ok(())
            } else {
                Err(CliError::Runtime(
                    "a check headroom needs failed (the `fail` lines above)".into(),
                ))
            }
        }
    }
}

fn service(cmd: ServiceCommand) -> Result<(), CliError> {
    let (target, config, print, install) = match cmd {
        ServiceCommand::Install {
            target,
            config,
            print,
        } => (target, config, print, true),
        ServiceCommand::Uninstall { target, print } => (target, None, print, false),
    };
    let uid = crate::sample::current_uid().unwrap_or(u32::MAX);
    let scope = if target.system || (!target.user && uid == 0) {
        Scope::System
    } else {
        Scope::User
    };
    let native = Manager::native();
    let manager = target.manager.or(native).ok_or_else(|| {
        CliError::Usage(
            "headroom knows no service manager on this OS; see the files with --print --manager launchd or --manager systemd".into(),
        )
    })?;
    if !print {
        if Some(manager) != native {
            return Err(CliError::Usage(format!(
                "{} services are installed on {}; here, only --print works with --manager {}",
                manager.as_str(),
                if manager == Manager::Launchd {
                    "macOS"
                } else {
                    "Linux"
                },
                manager.as_str()
            )));
        }
        if scope == Scope::System && uid != 0 {
            return Err(CliError::Usage(format!(
                "--system needs root: run `sudo headroom service {} --system`, or use --user",
                if install { "install" } else { "uninstall" }
            )));
        }
        if scope == Scope::User && uid == 0 {
            return Err(CliError::Usage(
                "--user acts for the user running the command; run it as that user, without sudo"
                    .into(),
            ));
        }
    }
    let binary = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| CliError::Runtime(format!("cannot find the headroom executable: {e}")))?;
    let config = match config {
        Some(c) => {
            let abs = c
                .canonicalize()
                .map_err(|e| CliError::Usage(format!("cannot use config {}: {e}", c.display())))?;
            Config::load(&abs)?;
            Some(abs)
        }
        None => None,
    };
    let params = crate::service::Params {
        manager,
        scope,
        binary,
        config,
        home: std::env::var_os("HOME").map(PathBuf::from),
        uid,
    };
    let plan = if install {
        crate::service::plan_install(&params)
    } else {
        crate::service::plan_uninstall(&params)
    }
    .map_err(|e| CliError::Usage(e.to_string()))?;
    if install && params.config.is_none() {
        // An existing config at the default path is what the service will
        // run with: it must be valid.
        let layout = crate::service::layout(&params).map_err(|e| CliError::Usage(e.to_string()))?;
        if layout.config_file.exists() {
            Config::load(&layout.config_file)?;
        }
    }
    if print {
        return write_stdout(&plan.render(manager));
    }
    let shown = params.binary.display().to_string();
    if install && (shown.contains("/Cellar/") || shown.contains("/target/")) {
        eprintln!(
            "headroom: note: the service runs {shown}, which an upgrade or `cargo clean` replaces; with Homebrew use `brew services start headroom` instead"
        );
    }
    plan.execute()
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    if install {
        eprintln!(
            "headroom: service installed and started ({} {}); check it with `headroom doctor`",
            manager.as_str(),
            scope.flag()
        );
    } else {
        eprintln!("headroom: service stopped and removed");
    }
    Ok(())
}

/// `run`'s command-line settings for the HTTP server, over the config's.
struct HttpOverrides {
    listen: Option<SocketAddr>,
    allow_remote: bool,
}

fn run_daemon(
    config_path: Option<PathBuf>,
    force_dry_run: bool,
    log_format: Option<LogFormat>,
    replay: Option<PathBuf>,
    http: HttpOverrides,
) -> Result<(), CliError> {
    let mut config = match &config_path {
        Some(path) => Config::load(path)?,
        None => Config::embedded_default(),
    };
    // As root: a config or hook that others can change is refused (exit 2).
    crate::config::permissions::check_for_root(
        config_path.as_deref(),
        &config,
        crate::act::effective_uid(),
    )?;
    if let Some(addr) = http.listen {
        config.http.listen = addr;
        config.http.enabled = true;
    }
    config.http.allow_remote |= http.allow_remote;
    if let Some(addr) = http.listen {
        HttpConfig::check_listen(addr, config.http.allow_remote)
            .map_err(|why| CliError::Usage(format!("--listen {addr}: {why}")))?;
    }
    crate::logging::init(log_format.unwrap_or(config.daemon.log_format));
    // Room for enforcement's descriptors whatever HTTP clients open; the
    // HTTP server keeps a reserve out of what this leaves.
    match crate::sys::fd_limit::raise_open_files() {
        Ok(limit) => tracing::info!("{}", limit.describe()),
        Err(e) => tracing::warn!("{e}; the HTTP server keeps within the current limit"),
    }
    stay_resident();
    // Bind before anything runs, so that a taken port is a clear error.
    let listener = if config.http.enabled {
        Some(crate::http::bind(config.http.listen).map_err(|e| CliError::Runtime(e.to_string()))?)
    } else {
        None
    };

    let sampler: Box<dyn Sampler> = match &replay {
        Some(path) => Box::new(
            ReplaySampler::open(path)
                .map_err(|e| CliError::Usage(format!("cannot replay {}: {e}", path.display())))?
                .looped(true),
        ),
        None => platform_sampler(&config.gpu),
    };
    // The daemon loop is the runtime's only task (the HTTP server has a
    // runtime and thread of its own; samples, probes and actions run on
    // blocking threads): one thread drives it, its timers and its pressure
    // events, so a tick wakes this thread alone instead of a worker that
    // then wakes another.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .thread_name("headroom")
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async move {
        let events = if replay.is_some() {
            PressureEvents::none()
        } else {
            let (events, note) = PressureEvents::open();
            match note {
                Ok(what) => tracing::info!("waking on memory pressure through {what}"),
                Err(why) => tracing::info!("{why}; sampling on the interval instead"),
            }
            events
        };
        let opts = RunOptions {
            config,
            config_path,
            force_dry_run,
        };
        let causes = if replay.is_some() {
            ExitCauses::none("a replayed trace holds no record of how its processes ended")
        } else {
            let (causes, note) = exit_causes();
            match note {
                Ok(what) => tracing::info!("post-mortems: {what}"),
                Err(why) => tracing::info!("post-mortems: {why}"),
            }
            causes
        };
        let probe = if replay.is_some() {
            None
        } else {
            match crate::sample::probe::platform_probe() {
                Ok(probe) => {
                    tracing::info!(
                        "system probe ready: machine-wide figures read between samples while a rule's [rule.when] comes near"
                    );
                    Some(probe)
                }
                Err(why) => {
                    tracing::info!("no system probe ({why}); sampling on the interval");
                    None
                }
            }
        };
        let daemon = Daemon::new(opts, sampler, events)
            .with_exit_causes(causes)
            .with_probe(probe);
        let server = match listener {
            Some(listener) => {
                let server = crate::http::Server::start(listener, daemon.subscribe())
                    .map_err(|e| CliError::Runtime(format!("cannot start the HTTP server: {e}")))?;
                let addr = server.local_addr();
                if !addr.ip().is_loopback() {
                    tracing::warn!(
                        "serving HTTP on {addr}, beyond this machine (allow_remote): anyone who can reach it can read the process list"
                    );
                }
                tracing::info!("status page: http://{}/ (metrics at /metrics)", browsable(addr));
                Some(server)
            }
            None => {
                tracing::info!("HTTP server disabled (http.enabled = false)");
                None
            }
        };
        let result = daemon.run().await;
        if let Some(server) = server
            && let Err(e) = server.stop(Duration::from_secs(3))
        {
            tracing::warn!("the HTTP server stopped with an error: {e}");
        }
        result.map_err(|e| CliError::Runtime(e.to_string()))
    })
}

/// Keep the daemon's pages in memory and out of the OOM killer's choice, so
/// that it still samples and acts while the machine thrashes; say what the
/// platform and the daemon's rights allowed.
fn stay_resident() {
    use crate::sys::residency::{self, Locked};
    match residency::lock_memory() {
        Locked::All => tracing::info!("memory locked: the daemon's pages stay resident"),
        Locked::Skipped(why) => tracing::info!("{why}"),
    }
    match residency::shield_from_oom_killer() {
        Ok(Some(score)) => {
            tracing::info!("oom_score_adj {score}: the OOM killer picks headroom last")
        }
        Ok(None) => {}
        Err(e) => tracing::info!(
            "{e}; the OOM killer may choose headroom like any process (as root, or with \
             CAP_SYS_RESOURCE, it would not)"
        ),
    }
}

/// The address to put in a URL: an unspecified address (0.0.0.0, [::]) is
/// reached through loopback.
fn browsable(addr: SocketAddr) -> SocketAddr {
    let mut addr = addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    addr
}

/// How long `headroom status` waits for the daemon.
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

fn status(
    address: Option<SocketAddr>,
    config_path: Option<PathBuf>,
    json: bool,
    opts: TableOptions,
) -> Result<(), CliError> {
    let addr = match address {
        Some(a) => a,
        None => {
            let config = match &config_path {
                Some(path) => Config::load(path)?,
                None => Config::embedded_default(),
            };
            config.http.listen
        }
    };
    let addr = browsable(addr);
    let url = format!("http://{addr}/api/v1/snapshot");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(STATUS_TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent.get(&url).call().map_err(|e| {
        CliError::Runtime(format!(
            "no headroom daemon answers at {addr} ({e}); start one with `headroom run`, or pass --address ADDR:PORT"
        ))
    })?;
    let status = response.status();
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| CliError::Runtime(format!("cannot read the answer from {url}: {e}")))?;
    if !status.is_success() {
        let reason = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_owned))
            .unwrap_or(body);
        return Err(CliError::Runtime(format!(
            "the daemon at {addr} answered {status}: {reason}"
        )));
    }
    let text = if json {
        body + "\n"
    } else {
        let snap: Snapshot = serde_json::from_str(&body).map_err(|e| {
            CliError::Runtime(format!(
                "{url} did not answer with a snapshot ({e}); is that a headroom daemon of the same version?"
            ))
        })?;
        render_snapshot(&snap, opts)
    };
    write_stdout(&text)
}

fn snapshot(config_path: Option<PathBuf>, json: bool, opts: TableOptions) -> Result<(), CliError> {
    let config = match &config_path {
        Some(path) => Config::load(path)?,
        None => Config::embedded_default(),
    };
    let mut sampler = platform_sampler(&config.gpu);
    let mut snap = sampler
        .sample()
        .map_err(|e| CliError::Runtime(format!("cannot sample this machine: {e}")))?;
    let running_as_root = crate::act::running_as_root();
    for problem in crate::jupyter::annotate_once(&config.jupyter, running_as_root, &mut snap) {
        tracing::warn!("{problem}");
    }
    let text = if json {
        let mut s = serde_json::to_string_pretty(&snap)
            .map_err(|e| CliError::Runtime(format!("cannot encode the snapshot: {e}")))?;
        s.push('\n');
        s
    } else {
        render_snapshot(&snap, opts)
    };
    write_stdout(&text)
}

fn record(out: &Path, duration: Duration, interval: Duration) -> Result<(), CliError> {
    if interval.is_zero() {
        return Err(CliError::Usage("--interval must be longer than 0".into()));
    }
    let mut writer = TraceWriter::create(out)
        .map_err(|e| CliError::Runtime(format!("cannot create {}: {e}", out.display())))?;
    let mut sampler = platform_sampler(&Config::embedded_default().gpu);
    let started = Instant::now();
    let mut written = 0u64;
    let mut next = started;
    loop {
        match sampler.sample() {
            Ok(snap) => {
                writer.write(&snap).map_err(|e| {
                    CliError::Runtime(format!("cannot write to {}: {e}", out.display()))
                })?;
                written += 1;
            }
            Err(e) => eprintln!("headroom: sample skipped: {e}"),
        }
        next += interval;
        if next.duration_since(started) > duration {
            break;
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    writer
        .finish()
        .map_err(|e| CliError::Runtime(format!("cannot finish {}: {e}", out.display())))?;
    eprintln!("headroom: wrote {written} snapshots to {}", out.display());
    Ok(())
}

fn events(
    since: Option<&str>,
    json: bool,
    journal: Option<PathBuf>,
    config: Option<PathBuf>,
) -> Result<(), CliError> {
    let is_root = crate::act::running_as_root();
    let path = match (journal, config) {
        (Some(path), _) => path,
        (None, Some(config)) => Config::load(&config)?.daemon.journal_path(is_root),
        (None, None) => crate::journal::default_path(is_root),
    };
    let since = since.map(parse_since).transpose()?;
    let read =
        crate::journal::read_events(&path, since).map_err(|e| CliError::Runtime(e.to_string()))?;
    if read.files.is_empty() {
        let mut note = format!(
            "no events yet (journal at {} does not exist)",
            path.display()
        );
        if !is_root {
            let root_path = crate::journal::default_path(true);
            note.push_str(&format!(
                "; a daemon running as root keeps its journal at {}: read it with \
                 `sudo headroom events`",
                root_path.display()
            ));
        }
        if json {
            eprintln!("headroom: {note}");
            return Ok(());
        }
        return write_stdout(&format!("{note}\n"));
    }
    if read.torn > 0 {
        eprintln!(
            "headroom: skipped {} torn last line(s): a write cut short by a crash, or one in \
             progress",
            read.torn
        );
    }
    if let Some(first) = &read.first_corrupt {
        eprintln!(
            "headroom: skipped {} line(s) that are not events; the first: {}:{}: {}",
            read.corrupt,
            first.path.display(),
            first.line,
            first.error
        );
    }
    let mut text = String::new();
    for event in &read.events {
        if json {
            let line = serde_json::to_string(event)
                .map_err(|e| CliError::Runtime(format!("cannot encode an event: {e}")))?;
            text.push_str(&line);
        } else {
            text.push_str(&crate::event_line::render(
                event,
                &crate::local_time::format(event.at),
            ));
        }
        text.push('\n');
    }
    if read.events.is_empty() && !json {
        let when = since
            .map(|s| format!(" since {}", crate::local_time::format(s)))
            .unwrap_or_default();
        text = format!("no events{when} in {}\n", path.display());
    }
    write_stdout(&text)
}

/// `--since`: a duration ago (`1h`) or an RFC 3339 time.
fn parse_since(s: &str) -> Result<crate::model::Timestamp, CliError> {
    let now = crate::model::Timestamp::now();
    if let Ok(ago) = crate::config::parse_duration(s) {
        return Ok(crate::model::Timestamp(now.as_millis().saturating_sub(
            u64::try_from(ago.as_millis()).unwrap_or(u64::MAX),
        )));
    }
    humantime::parse_rfc3339_weak(s.trim())
        .map(crate::model::Timestamp::from_system_time)
        .map_err(|_| {
            CliError::Usage(format!(
                "--since {s:?}: expected a duration such as 1h or 30m, or a time such as \
                 2026-11-22T14:00:00Z"
            ))
        })
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::Runtime(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn config_errors_exit_2_and_runtime_errors_exit_1() {
        assert_eq!(CliError::Usage("x".into()).exit_code(), 2);
        assert_eq!(CliError::Runtime("x".into()).exit_code(), 1);
    }

    #[test]
    fn record_takes_human_durations() {
        let cli = Cli::try_parse_from([
            "headroom",
            "record",
            "--out",
            "t.jsonl",
            "--duration",
            "2m",
            "--interval",
            "250ms",
        ])
        .unwrap();
        let Command::Record {
            duration, interval, ..
        } = cli.command
        else {
            panic!("parsed as another command");
        };
        assert_eq!(duration, Duration::from_secs(120));
        assert_eq!(interval, Duration::from_millis(250));
    }

    #[test]
    fn since_takes_a_duration_ago_or_a_time() {
        let now = crate::model::Timestamp::now();
        let hour_ago = parse_since("1h").unwrap();
        assert!(now.since(hour_ago) >= Duration::from_secs(3600));
        assert!(now.since(hour_ago) < Duration::from_secs(3660));
        assert_eq!(
            parse_since("2023-11-14T22:13:20Z").unwrap(),
            crate::model::Timestamp(1_700_000_000_000)
        );
        assert_eq!(parse_since("yesterday").unwrap_err().exit_code(), 2);
    }

    #[test]
    fn service_scope_flags_exclude_each_other() {
        let err = Cli::try_parse_from(["headroom", "service", "install", "--system", "--user"])
            .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let cli = Cli::try_parse_from([
            "headroom",
            "service",
            "install",
            "--user",
            "--print",
            "--manager",
            "launchd",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            Command::Service(ServiceCommand::Install { print: true, .. })
        ));
    }

    #[test]
    fn an_unknown_log_format_is_a_usage_error() {
        let err = Cli::try_parse_from(["headroom", "run", "--log-format", "xml"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
    }
}
