//! `headroom snapshot` and `headroom status`: a snapshot shown as a table
//! or as JSON, taken here or asked of a running daemon. [`SnapshotOutput`]
//! holds the flags both take.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::daemon_client::{DaemonClient, GetError};
use super::{CliError, load_config, write_stdout};
use crate::model::Snapshot;
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
    let addr = match address {
        Some(a) => a,
        None => load_config(config_path.as_deref())?.http.listen,
    };
    let client = DaemonClient::new(addr);
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
    let text = if output.json {
        body + "\n"
    } else {
        let snap: Snapshot = serde_json::from_str(&body).map_err(|e| {
            CliError::Runtime(format!(
                "{url} did not answer with a snapshot ({e}); is that a headroom daemon of the same version?"
            ))
        })?;
        render_snapshot(&snap, output.table())
    };
    write_stdout(&text)
}

/// Sample this machine once, name Jupyter kernels by their notebooks, and
/// print the snapshot.
pub fn snapshot(config_path: Option<PathBuf>, output: SnapshotOutput) -> Result<(), CliError> {
    let config = load_config(config_path.as_deref())?;
    let mut sampler = platform_sampler(&config.gpu, &config.labels);
    let mut snap = sampler
        .sample()
        .map_err(|e| CliError::Runtime(format!("cannot sample this machine: {e}")))?;
    let running_as_root = crate::sys::this_process::running_as_root();
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
