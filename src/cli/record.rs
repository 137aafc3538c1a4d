//! `headroom record`: snapshots of this machine written as JSON Lines at
//! an interval, for replay and tests.

use std::path::Path;
use std::time::{Duration, Instant};

use super::CliError;
use crate::config::Config;
use crate::sample::platform_sampler;
use crate::sample::replay::TraceWriter;

/// Record for `duration`, one snapshot every `interval`, into `out`.
pub fn record(out: &Path, duration: Duration, interval: Duration) -> Result<(), CliError> {
    if interval.is_zero() {
        return Err(CliError::Usage("--interval must be longer than 0".into()));
    }
    let mut writer = TraceWriter::create(out)
        .map_err(|e| CliError::Runtime(format!("cannot create {}: {e}", out.display())))?;
    let mut sampler = platform_sampler(
        &Config::embedded_default().gpu,
        &Config::embedded_default().labels,
    );
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
