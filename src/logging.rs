//! Log setup: human-readable lines on a terminal, JSON objects on request (for
//! journald, launchd log files or a log shipper). Everything goes to stderr,
//! where systemd and launchd collect it.
//!
//! The level comes from `HEADROOM_LOG` (or `RUST_LOG`), in `tracing`'s
//! filter syntax, default `info`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Install the global subscriber. Calling it twice keeps the first one.
pub fn init(format: LogFormat) {
    let filter = std::env::var("HEADROOM_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        LogFormat::Human => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(false)
            .try_init(),
    };
    // A subscriber already installed (tests, a second init) is not an error.
    drop(result);
}
