//! The command line: subcommands, their options and help, and the mapping of
//! every outcome to an exit code (0 ok, 1 runtime failure, 2 bad usage or bad
//! config).
//!
//! This file holds the arguments, the dispatch and what every command
//! shares (the error type, the config from `--config` or the embedded
//! default, writing to stdout). Each command with more to it has a file:
//! `run.rs` the daemon's wiring, `show.rs` `snapshot` and `status`,
//! `explain.rs`, `record.rs`, `events.rs`, `service_command.rs`, `top/`
//! the live terminal view; and `daemon_client.rs` the HTTP client of a
//! running daemon.

mod daemon_client;
mod events;
mod explain;
mod record;
mod run;
mod service_command;
mod show;
mod top;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::config::{Config, ConfigError, DEFAULT_TOML, LogFormat};
use daemon_client::browsable;
pub use service_command::{ServiceCommand, ServiceTarget};
pub use show::SnapshotOutput;

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
        /// this machine, looping at its end. For trying configs safely: a
        /// replay is a dry run whatever the config says (it signals nothing,
        /// runs no hook, shows no notification), marks every log line as a
        /// replay, and keeps no journal unless --journal names one.
        #[arg(long, value_name = "TRACE")]
        replay: Option<PathBuf>,
        /// Journal to FILE (overrides `daemon.journal`). The daemon locks
        /// FILE's directory, its state directory, for its life: one daemon
        /// per state directory. With --replay, FILE gets the replay's
        /// events, every line marked as a replay, and may not be in the
        /// live daemon's state directory.
        #[arg(long, value_name = "FILE")]
        journal: Option<PathBuf>,
        /// Serve metrics, the API and the status page on this address and port
        /// (overrides `http.listen`; default 127.0.0.1:9717).
        #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen_arg)]
        listen: Option<SocketAddr>,
        /// Allow --listen (or `http.listen`) to be a non-loopback address.
        #[arg(long)]
        allow_remote: bool,
        /// Write the log (stdout and stderr) to FILE and rotate it there:
        /// past 10 MiB it becomes FILE.1 (FILE.2 and FILE.3 before it) and
        /// a new FILE is begun. The launchd plists pass it; under systemd
        /// the journal keeps the log.
        #[arg(long, value_name = "FILE")]
        log_file: Option<PathBuf>,
    },
    /// Ask a running daemon for its latest sample and print it like `snapshot`.
    ///
    /// The daemon is reached over HTTP at `http.listen` of the config (or
    /// --address). Exits 1 if no daemon answers there. With --watch, prints
    /// it again every --interval until Ctrl-C (exit 0): the screen is
    /// cleared first when stdout is a terminal, otherwise the blocks follow
    /// one another, each under a line with its time; a refresh that fails
    /// says why and the next one is tried.
    Status {
        /// The daemon's address (an IP address or a host name such as
        /// localhost, and a port); default: `http.listen` from --config or
        /// the embedded default (127.0.0.1:9717).
        #[arg(long, value_name = "HOST:PORT", value_parser = parse_address_arg)]
        address: Option<SocketAddr>,
        /// Config file whose `http.listen` says where the daemon is.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        output: SnapshotOutput,
        /// Print the status again every --interval, until Ctrl-C.
        #[arg(long)]
        watch: bool,
        /// Time between refreshes with --watch, e.g. 1s or 500ms.
        #[arg(long, requires = "watch", default_value = "2s", value_parser = parse_duration_arg)]
        interval: Duration,
    },
    /// A live view of memory, GPUs, jobs, ML processes and rules, in the
    /// terminal (like htop or nvtop).
    ///
    /// Shows memory and swap (available, used, pressure, the trend and when
    /// memory runs out at its pace), each GPU's memory and its processes,
    /// jobs (a root and its workers, their total and how it is counted),
    /// every process with its footprint, growth, time to exhaustion, GPU
    /// memory, kind, notebook and the rule nearest to acting on it, and
    /// each rule's state and last action. The figures come from the daemon
    /// at --address (or `http.listen` of --config); where none answers at
    /// the default address, or with --local, this machine is sampled here
    /// and its rules judged in dry run (nothing is signalled). A daemon that
    /// stops answering is shown as such and asked again every interval.
    ///
    /// Keys: q or Esc quit; s or F6 next sort (footprint, growth, pid,
    /// name, gpu); r reverse; / filter (Enter keeps, Esc clears); m ML
    /// processes only; g GPU panel; j/k or arrows, PgUp/PgDn scroll; ? help.
    Top {
        /// The daemon's address; default: `http.listen` from --config or the
        /// embedded default (127.0.0.1:9717). A daemon named here is waited
        /// for, never replaced by a local view.
        #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen_arg, conflicts_with = "local")]
        address: Option<SocketAddr>,
        /// Config file: its `http.listen` says where the daemon is; with
        /// --local, its rules, `[gpu]`, `[jupyter]` and interval.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Sample this machine here instead of asking a daemon.
        #[arg(long)]
        local: bool,
        /// Time between refreshes (at least 100ms); default: the daemon's
        /// sampling interval (`daemon.interval`).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
        interval: Option<Duration>,
        /// The process table's order at start.
        #[arg(long, value_enum, default_value_t = top::SortKey::Footprint)]
        sort: top::SortKey,
    },
    /// Print this machine's memory state and its largest processes.
    Snapshot {
        /// TOML config file; its `[gpu]` section says how GPUs are read, its
        /// `[jupyter]` section where Jupyter servers are found.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        output: SnapshotOutput,
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
        /// The daemon's address (an IP address or a host name such as
        /// localhost, and a port); default: `http.listen` from --config or
        /// the embedded default (127.0.0.1:9717).
        #[arg(long, value_name = "HOST:PORT", value_parser = parse_address_arg)]
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
        /// Replace the trace at --out if one is there (without it, an
        /// existing file is left alone and the command exits 2).
        #[arg(long)]
        force: bool,
    },
    /// Print the event journal: limits crossed, signals sent, hooks run,
    /// processes exited, config reloads.
    ///
    /// Reads the journal at --journal, else the config's `daemon.journal`,
    /// else the platform default (which differs for root and for a user: the
    /// journal of a daemon running as root needs root: `sudo "$(command -v
    /// headroom)" events`).
    /// Rotated files are read too, oldest first. Times are local, with the
    /// zone's offset. A --journal that does not exist exits 2.
    Events {
        /// Only events since then: a duration ago (1h, 30m) or a time as
        /// printed (2026-11-22 14:00:00 +01:00; without the offset, local
        /// time) or in RFC 3339 (2026-11-22T13:00:00Z).
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// After the events so far, print new ones as the daemon writes them,
        /// across the journal's rotations, until interrupted (Ctrl-C).
        #[arg(long, short)]
        follow: bool,
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

fn parse_listen_arg(s: &str) -> Result<SocketAddr, String> {
    crate::config::parse_listen(s)
}

/// A daemon's address for the client commands: an IP address and port, or
/// a host name and port (`localhost:9717`), resolved here. Of a name's
/// addresses a loopback one is taken first, IPv4 before IPv6 (the daemon
/// listens on 127.0.0.1 by default); the client's checks of who listens
/// there apply to it as to an address typed out.
fn parse_address_arg(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs as _;
    if let Ok(addr) = crate::config::parse_listen(s) {
        return Ok(addr);
    }
    let text = s.trim();
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!(
            "{text:?}: expected a host and a port, such as localhost:9717 or 127.0.0.1:9717"
        ));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!(
            "{text:?}: expected a host and a port from 1 to 65535, such as localhost:9717"
        ));
    }
    let addrs: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| {
            format!("cannot resolve {host:?} ({e}); give an IP address such as 127.0.0.1:{port}")
        })?
        .collect();
    pick_address(&addrs).ok_or_else(|| {
        format!("{host:?} resolves to no address; give an IP address such as 127.0.0.1:{port}")
    })
}

/// Of a host name's addresses: loopback before others, IPv4 before IPv6.
fn pick_address(addrs: &[SocketAddr]) -> Option<SocketAddr> {
    addrs
        .iter()
        .min_by_key(|a| (!a.ip().is_loopback(), !a.is_ipv4()))
        .copied()
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
    /// 2 for the user's config or usage, 1 for a failure at run time.
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
            journal,
            listen,
            allow_remote,
            log_file,
        } => run::run_daemon(
            config,
            dry_run,
            log_format,
            replay,
            journal,
            run::HttpOverrides {
                listen,
                allow_remote,
            },
            log_file,
        ),
        Command::Status {
            address,
            config,
            output,
            watch: false,
            ..
        } => show::status(address, config, output),
        Command::Status {
            address,
            config,
            output,
            watch: true,
            interval,
        } => show::watch(address, config, output, interval),
        Command::Top {
            address,
            config,
            local,
            interval,
            sort,
        } => top::run(top::TopArgs {
            address,
            config,
            local,
            interval,
            sort,
        }),
        Command::Snapshot { config, output } => show::snapshot(config, output),
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
            crate::permissions::check_for_root(
                Some(&file),
                &config,
                crate::os::this_process::effective_uid(),
            )?;
            if let Some(warning) = no_rules_warning(&file, &config) {
                eprintln!("headroom: warning: {warning}");
                println!(
                    "# {}: valid, but it has no rules: headroom will act on nothing. \
                     Effective config:",
                    file.display()
                );
            } else {
                println!("# {}: valid. Effective config:", file.display());
            }
            print!("{}", config.to_toml());
            Ok(())
        }
        Command::Record {
            out,
            duration,
            interval,
            force,
        } => record::record(&out, duration, interval, force),
        Command::Events {
            since,
            follow,
            json,
            journal,
            config,
        } => events::events(events::EventsArgs {
            since,
            json,
            journal,
            config,
            follow,
        }),
        Command::Service(cmd) => service_command::run(cmd),
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

/// What `check-config` says of a file without a `[[rule]]`: such a file
/// does not add to the embedded default's rules, it replaces them with
/// none. `None` when the file has rules.
fn no_rules_warning(file: &Path, config: &Config) -> Option<String> {
    if !config.rules.is_empty() {
        return None;
    }
    let defaults: Vec<String> = Config::embedded_default()
        .rules
        .iter()
        .map(|r| format!("{:?}", r.name))
        .collect();
    Some(format!(
        "{} has no [[rule]] table, so it replaces the embedded default's {} rules ({}) with \
         none: headroom will watch and report, and act on nothing. To keep them, copy their \
         [[rule]] tables from `headroom print-config` into {}",
        file.display(),
        defaults.len(),
        defaults.join(", "),
        file.display()
    ))
}

/// The config in `path`, or the embedded default without one.
fn load_config(path: Option<&Path>) -> Result<Config, CliError> {
    Ok(match path {
        Some(path) => Config::load(path)?,
        None => Config::embedded_default(),
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
    fn an_address_may_name_a_host() {
        let v4: SocketAddr = "127.0.0.1:9717".parse().unwrap();
        assert_eq!(parse_address_arg("127.0.0.1:9717"), Ok(v4));
        assert_eq!(parse_address_arg("localhost:9717"), Ok(v4));
        assert_eq!(
            parse_address_arg("[::1]:9717"),
            Ok("[::1]:9717".parse().unwrap())
        );
        let six: SocketAddr = "[::1]:1".parse().unwrap();
        let remote: SocketAddr = "10.0.0.1:1".parse().unwrap();
        assert_eq!(pick_address(&[remote, six, v4]), Some(v4));
        assert_eq!(pick_address(&[remote, six]), Some(six));
        assert_eq!(pick_address(&[]), None);
        for bad in ["localhost", "localhost:x", ":9717", "localhost:70000"] {
            let e = parse_address_arg(bad).unwrap_err();
            assert!(e.contains("port"), "{bad}: {e}");
        }
        let cli = Cli::try_parse_from(["headroom", "status", "--address", "localhost:9"]).unwrap();
        let Command::Status { address, .. } = cli.command else {
            panic!("parsed as another command");
        };
        assert_eq!(address, Some("127.0.0.1:9".parse().unwrap()));
    }

    #[test]
    fn an_unknown_log_format_is_a_usage_error() {
        let err = Cli::try_parse_from(["headroom", "run", "--log-format", "xml"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
    }
}
