//! `headroom events`: the event journal printed as lines of text or as
//! the JSON Lines it stores, from the journal the flags, the config or the
//! platform default name, since a time or duration ago.

use std::path::PathBuf;

use super::{CliError, write_stdout};
use crate::config::Config;

/// Print the journal's events since `since`.
pub fn events(
    since: Option<&str>,
    json: bool,
    journal: Option<PathBuf>,
    config: Option<PathBuf>,
) -> Result<(), CliError> {
    let is_root = crate::sys::this_process::running_as_root();
    let path = match (journal, config) {
        (Some(path), _) => path,
        (None, Some(config)) => crate::journal::path_for(&Config::load(&config)?.daemon, is_root),
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
                 `{}`",
                root_path.display(),
                crate::sys::this_process::sudo_command("events")
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

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
}
