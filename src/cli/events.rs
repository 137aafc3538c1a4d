//! `headroom events`: the event journal printed as lines of text or as
//! the JSON Lines it stores, from the journal the flags, the config or the
//! platform default name, since a time or duration ago; with `--follow`,
//! then the events the daemon writes next, as they come.
//!
//! Times are printed in the local zone with its offset
//! (`2026-11-22 14:02:05 +01:00`), and `--since` reads them back as printed,
//! with or without the offset (without: local time).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{CliError, write_stdout};
use crate::config::Config;
use crate::journal::{Follower, ReadOutcome};
use crate::model::Timestamp;

/// How often `--follow` looks for new lines.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// What `headroom events` was asked for.
pub struct EventsArgs {
    pub since: Option<String>,
    pub json: bool,
    pub journal: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub follow: bool,
}

/// Print the journal's events since `since`; with `follow`, keep printing
/// new ones until interrupted.
pub fn events(args: EventsArgs) -> Result<(), CliError> {
    let is_root = crate::os::this_process::running_as_root();
    let named = args.journal.is_some();
    let path = match (args.journal, args.config) {
        (Some(path), _) => path,
        (None, Some(config)) => crate::journal::path_for(&Config::load(&config)?.daemon, is_root),
        (None, None) => crate::journal::default_path(is_root),
    };
    let since = args.since.as_deref().map(parse_since).transpose()?;
    let json = args.json;
    if named && !args.follow && !exists(&path) {
        return Err(CliError::Usage(format!(
            "--journal {}: there is no journal there (no such file); give the path of a \
             journal file (the config's daemon.journal), or leave --journal out to read the \
             default one",
            path.display()
        )));
    }
    let (follower, read) = if args.follow {
        let (follower, read) =
            Follower::start(&path, since).map_err(|e| CliError::Runtime(e.to_string()))?;
        (Some(follower), read)
    } else {
        let read = crate::journal::read_events(&path, since)
            .map_err(|e| CliError::Runtime(e.to_string()))?;
        (None, read)
    };
    report_bad_lines(&read);
    if read.files.is_empty() {
        let mut note = format!(
            "no events yet (journal at {} does not exist)",
            path.display()
        );
        if !is_root {
            let root_path = crate::journal::default_path(true);
            note.push_str(&format!(
                "; a daemon running as root keeps its journal at {}: read it with \
                 `{}`",
                root_path.display(),
                crate::os::this_process::sudo_command("events")
            ));
        }
        if json || follower.is_some() {
            eprintln!("headroom: {note}");
        } else {
            return write_stdout(&format!("{note}\n"));
        }
    } else if read.events.is_empty() && !json && follower.is_none() {
        let when = since
            .map(|s| format!(" since {}", crate::local_time::format(s)))
            .unwrap_or_default();
        return write_stdout(&format!("no events{when} in {}\n", path.display()));
    }
    write_stdout(&render(&read, json)?)?;
    let Some(mut follower) = follower else {
        return Ok(());
    };
    if !json {
        eprintln!("headroom: following {} (Ctrl-C stops)", path.display());
    }
    loop {
        std::thread::sleep(FOLLOW_EVERY);
        let read = follower
            .poll()
            .map_err(|e| CliError::Runtime(e.to_string()))?;
        report_bad_lines(&read);
        if !read.events.is_empty() {
            write_stdout(&render(&read, json)?)?;
        }
    }
}

/// Whether anything is at `path` (a file, or something that is not one:
/// reading it says what it is).
fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// The events, one line each: text, or the JSON stored.
fn render(read: &ReadOutcome, json: bool) -> Result<String, CliError> {
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
    Ok(text)
}

/// Torn and corrupt lines, said on stderr.
fn report_bad_lines(read: &ReadOutcome) {
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
}

/// `--since`: a duration ago (`1h`), or a time as `events` prints it (local
/// without an offset) or as RFC 3339.
fn parse_since(s: &str) -> Result<Timestamp, CliError> {
    let now = Timestamp::now();
    if let Ok(ago) = crate::config::parse_duration(s) {
        return Ok(Timestamp(now.as_millis().saturating_sub(
            u64::try_from(ago.as_millis()).unwrap_or(u64::MAX),
        )));
    }
    crate::local_time::parse(s).map_err(|_| {
        CliError::Usage(format!(
            "--since {s:?}: expected a duration such as 1h or 30m, or a time as headroom events \
             prints it, such as 2026-11-22 14:00:00 +01:00 (without the offset: local time), \
             or 2026-11-22T13:00:00Z"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_duration_ago_or_a_time() {
        let now = Timestamp::now();
        let hour_ago = parse_since("1h").unwrap();
        assert!(now.since(hour_ago) >= Duration::from_secs(3600));
        assert!(now.since(hour_ago) < Duration::from_secs(3660));
        assert_eq!(
            parse_since("2023-11-14T22:13:20Z").unwrap(),
            Timestamp(1_700_000_000_000)
        );
        assert_eq!(
            parse_since("2023-11-14 23:13:20 +01:00").unwrap(),
            Timestamp(1_700_000_000_000)
        );
        assert_eq!(parse_since("yesterday").unwrap_err().exit_code(), 2);
    }
}
