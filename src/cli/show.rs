//! `headroom snapshot` and `headroom status`: a snapshot shown as a table
//! or as JSON, taken here or asked of a running daemon, once or, with
//! `status --watch`, again and again. [`SnapshotOutput`] holds the flags
//! both take.

use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::daemon_client::{DaemonClient, GetError};
use super::{CliError, load_config, write_stdout};
use crate::model::{Snapshot, Timestamp};
use crate::report::{TableOptions, render_snapshot};
use crate::sample::platform_sampler;

/// How a snapshot is shown: a table of the largest processes, or JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct SnapshotOutput {
    /// Print the snapshot as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// List every process, not only the largest.
    #[arg(long)]
    pub all: bool,
    /// How many processes to list without --all.
    #[arg(long, default_value_t = TableOptions::default().top, value_name = "N")]
    pub top: usize,
}

impl SnapshotOutput {
    /// The table's settings.
    pub fn table(self) -> TableOptions {
        TableOptions {
            all: self.all,
            top: self.top,
        }
    }
}

/// Ask the daemon at `address` (or `http.listen` of the config) for its
/// latest snapshot and print it.
pub fn status(
    address: Option<SocketAddr>,
    config_path: Option<PathBuf>,
    output: SnapshotOutput,
) -> Result<(), CliError> {
    let client = DaemonClient::new(daemon_address(address, config_path)?);
    write_stdout(&status_text(&client, output)?)
}

/// The address given, else `http.listen` of the config.
fn daemon_address(
    address: Option<SocketAddr>,
    config_path: Option<PathBuf>,
) -> Result<SocketAddr, CliError> {
    Ok(match address {
        Some(a) => a,
        None => load_config(config_path.as_deref())?.http.listen,
    })
}

/// The daemon's latest snapshot as `status` prints it.
fn status_text(client: &DaemonClient, output: SnapshotOutput) -> Result<String, CliError> {
    let addr = client.addr();
    let url = client.url("/api/v1/snapshot");
    let (status, body) = client.get("/api/v1/snapshot").map_err(|e| match e {
        GetError::NoAnswer { .. } => CliError::Runtime(format!(
            "{e}; start one with `headroom run`, or pass --address ADDR:PORT"
        )),
        _ => CliError::Runtime(e.to_string()),
    })?;
    if !status.is_success() {
        let reason = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_owned))
            .unwrap_or(body);
        return Err(CliError::Runtime(format!(
            "the daemon at {addr} answered {status}: {reason}"
        )));
    }
    Ok(if output.json {
        body + "\n"
    } else {
        let snap: Snapshot = serde_json::from_str(&body).map_err(|e| {
            CliError::Runtime(format!(
                "{url} did not answer with a snapshot ({e}); is that a headroom daemon of the same version?"
            ))
        })?;
        render_snapshot(&snap, output.table())
    })
}

/// `headroom status --watch`: the status every `interval` until SIGINT or
/// SIGTERM (exit 0). On a terminal each refresh clears the screen and
/// starts with a line saying what is shown and when; elsewhere the blocks
/// follow one another, each after that line (with --json, one JSON
/// document a line and nothing else). A refresh that fails prints its
/// error (on the screen, or on stderr) and the next one is tried.
pub fn watch(
    address: Option<SocketAddr>,
    config_path: Option<PathBuf>,
    output: SnapshotOutput,
    interval: Duration,
) -> Result<(), CliError> {
    if interval < MIN_WATCH_INTERVAL {
        return Err(CliError::Usage(format!(
            "--interval {} is too short: at least {}",
            humantime::format_duration(interval),
            humantime::format_duration(MIN_WATCH_INTERVAL)
        )));
    }
    let client = DaemonClient::new(daemon_address(address, config_path)?);
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| CliError::Runtime(format!("cannot handle signal {signal}: {e}")))?;
    }
    let tty = std::io::stdout().is_terminal();
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let heading = format!(
            "every {}: headroom status, daemon at {}   {}\n",
            humantime::format_duration(interval),
            client.addr(),
            crate::local_time::format(Timestamp::now())
        );
        let mut block = String::new();
        if tty {
            // Home, clear the screen.
            block.push_str("\x1b[H\x1b[2J");
        }
        if tty || !output.json {
            block.push_str(&heading);
            block.push('\n');
        }
        match status_text(&client, output) {
            Ok(text) => block.push_str(&text),
            Err(e) if tty => block.push_str(&format!("headroom: {e}\n")),
            Err(e) => eprintln!("headroom: {e}"),
        }
        if !tty && !output.json {
            block.push('\n');
        }
        let mut out = std::io::stdout().lock();
        match out.write_all(block.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => {}
            // Whoever read it is gone (`| head`): done.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(CliError::Runtime(format!("cannot write to stdout: {e}"))),
        }
        drop(out);
        while !stop.load(Ordering::Relaxed) && started.elapsed() < interval {
            std::thread::sleep(WATCH_TICK.min(interval.saturating_sub(started.elapsed())));
        }
    }
    Ok(())
}

/// The shortest `--interval` of `status --watch`.
const MIN_WATCH_INTERVAL: Duration = Duration::from_millis(100);
/// How often the wait between refreshes looks for Ctrl-C.
const WATCH_TICK: Duration = Duration::from_millis(50);

/// Sample this machine once, name Jupyter kernels by their notebooks, and
/// print the snapshot.
pub fn snapshot(config_path: Option<PathBuf>, output: SnapshotOutput) -> Result<(), CliError> {
    let config = load_config(config_path.as_deref())?;
    let mut sampler = platform_sampler(&config.gpu, &config.labels);
    let mut snap = sampler
        .sample()
        .map_err(|e| CliError::Runtime(format!("cannot sample this machine: {e}")))?;
    let running_as_root = crate::os::this_process::running_as_root();
    for problem in crate::jupyter::annotate_once(&config.jupyter, running_as_root, &mut snap) {
        tracing::warn!("{problem}");
    }
    let text = if output.json {
        let mut s = serde_json::to_string_pretty(&snap)
            .map_err(|e| CliError::Runtime(format!("cannot encode the snapshot: {e}")))?;
        s.push('\n');
        s
    } else {
        render_snapshot(&snap, output.table())
    };
    write_stdout(&text)
}
