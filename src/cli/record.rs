//! `headroom record`: snapshots of this machine written as JSON Lines at
//! an interval, for replay and tests. It refuses to replace an existing
//! trace unless told to (`--force`), and says on stderr how far it is.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use super::CliError;
use crate::config::Config;
use crate::sample::platform_sampler;
use crate::sample::replay::TraceWriter;

/// How often a recording says how far it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Record for `duration`, one snapshot every `interval`, into `out`; an
/// existing `out` is replaced only with `force`.
pub fn record(
    out: &Path,
    duration: Duration,
    interval: Duration,
    force: bool,
) -> Result<(), CliError> {
    if interval.is_zero() {
        return Err(CliError::Usage("--interval must be longer than 0".into()));
    }
    let created = if force {
        TraceWriter::create(out)
    } else {
        TraceWriter::create_new(out)
    };
    let mut writer = created.map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => CliError::Usage(format!(
            "{} already exists; pass --force to replace it, or give another --out",
            out.display()
        )),
        _ => CliError::Runtime(format!("cannot create {}: {e}", out.display())),
    })?;
    let mut sampler = platform_sampler(
        &Config::embedded_default().gpu,
        &Config::embedded_default().labels,
    );
    eprintln!(
        "headroom: recording to {} for {}, a snapshot every {}",
        out.display(),
        humantime::format_duration(duration),
        humantime::format_duration(interval)
    );
    let started = Instant::now();
    let mut written = 0u64;
    let mut next = started;
    let mut next_progress = started + PROGRESS_EVERY;
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
        let now = Instant::now();
        if now >= next_progress {
            eprintln!("headroom: {}", progress(written, now - started, duration));
            next_progress += PROGRESS_EVERY;
        }
        std::thread::sleep(next.saturating_duration_since(now));
    }
    writer
        .finish()
        .map_err(|e| CliError::Runtime(format!("cannot finish {}: {e}", out.display())))?;
    eprintln!(
        "headroom: wrote {} to {}",
        snapshots(written),
        out.display()
    );
    Ok(())
}

/// `1 snapshot`, `2 snapshots`.
fn snapshots(n: u64) -> String {
    format!("{n} snapshot{}", if n == 1 { "" } else { "s" })
}

/// `recorded 10 snapshots, 10s of 1m`.
fn progress(written: u64, elapsed: Duration, duration: Duration) -> String {
    format!(
        "recorded {}, {} of {}",
        snapshots(written),
        humantime::format_duration(Duration::from_secs(elapsed.as_secs())),
        humantime::format_duration(duration)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_written_in_the_singular_and_the_plural() {
        assert_eq!(snapshots(0), "0 snapshots");
        assert_eq!(snapshots(1), "1 snapshot");
        assert_eq!(snapshots(2), "2 snapshots");
    }

    #[test]
    fn progress_says_how_many_and_how_far() {
        assert_eq!(
            progress(10, Duration::from_millis(10_400), Duration::from_secs(60)),
            "recorded 10 snapshots, 10s of 1m"
        );
    }
}
