//! The `[daemon]` section, validated: sampling intervals, history length, journal
//! path, size and number of files, dry run and log format, with their defaults and
//! bounds.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::error::{ConfigError, Source};
use super::raw::RawDaemon;
use super::units::{self, ByteSize, HumanDuration, format_duration};

/// How the daemon runs. Build it from a file with [`super::Config::load`]; every field
/// has a default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DaemonConfig {
    /// Normal sampling interval. Default 1s; 50ms..=1h.
    #[serde(with = "units::duration")]
    pub interval: Duration,
    /// Sampling interval under memory pressure. Default 250ms (or `interval` if
    /// shorter); 20ms..=`interval`.
    #[serde(with = "units::duration")]
    pub fast_interval: Duration,
    /// How much recent history to keep in memory. Default 15m (or `interval` if
    /// longer); `interval`..=24h.
    #[serde(with = "units::duration")]
    pub history: Duration,
    /// Event journal file. `None`: the daemon picks the platform default. Absolute.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "path_lossy")]
    pub journal: Option<PathBuf>,
    /// Rotate a journal file (of either set: the record, the process events)
    /// when it would grow past this size. Default 16MiB; at least
    /// 64KiB.
    pub journal_max_size: ByteSize,
    /// Journal files kept of each set, the current one included. Default 5;
    /// 1..=100.
    pub journal_files: usize,
    /// Log actions instead of carrying them out. Default false.
    pub dry_run: bool,
    /// Format of the daemon's log. Default human.
    pub log_format: LogFormat,
}

/// Format of the daemon's log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Readable lines.
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

impl DaemonConfig {
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
    pub const DEFAULT_FAST_INTERVAL: Duration = Duration::from_millis(250);
    pub const DEFAULT_HISTORY: Duration = Duration::from_secs(15 * 60);
    pub const MIN_INTERVAL: Duration = Duration::from_millis(50);
    pub const MAX_INTERVAL: Duration = Duration::from_secs(60 * 60);
    pub const MIN_FAST_INTERVAL: Duration = Duration::from_millis(20);
    pub const MAX_HISTORY: Duration = Duration::from_secs(24 * 60 * 60);
    pub const DEFAULT_JOURNAL_MAX_SIZE: ByteSize = ByteSize(16 * 1024 * 1024);
    pub const MIN_JOURNAL_MAX_SIZE: ByteSize = ByteSize(64 * 1024);
    pub const DEFAULT_JOURNAL_FILES: usize = 5;
    pub const MAX_JOURNAL_FILES: usize = 100;
}

/// Journal paths are UTF-8 when they come from TOML; a `PathBuf` set in code may not
/// be, and is then written lossily rather than failing the whole serialization.
fn path_lossy<S: serde::Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match path {
        Some(path) => s.collect_str(&path.display()),
        None => s.serialize_none(),
    }
}

/// Checks `[daemon]` and fills in defaults.
pub(crate) fn validate(raw: RawDaemon, source: &Source<'_>) -> Result<DaemonConfig, ConfigError> {
    let interval = raw.interval.map(split);
    let fast_interval = raw.fast_interval.map(split);
    let history = raw.history.map(split);

    let interval_value = match &interval {
        Some((value, span)) => {
            check_range(
                source,
                "daemon.interval",
                span,
                *value,
                DaemonConfig::MIN_INTERVAL,
                DaemonConfig::MAX_INTERVAL,
                "1s",
            )?;
            *value
        }
        None => DaemonConfig::DEFAULT_INTERVAL,
    };

    let fast_interval_value = match &fast_interval {
        Some((value, span)) => {
            if *value < DaemonConfig::MIN_FAST_INTERVAL {
                return Err(source.error_at(
                    span.clone(),
                    "daemon.fast_interval",
                    format!(
                        "must be at least {}; use e.g. \"250ms\"",
                        format_duration(DaemonConfig::MIN_FAST_INTERVAL)
                    ),
                ));
            }
            if *value > interval_value {
                return Err(cross_field(
                    source,
                    "daemon.fast_interval",
                    span,
                    format!(
                        "fast_interval ({}) must not be longer than interval ({}); shorten \
                         fast_interval or lengthen interval",
                        format_duration(*value),
                        format_duration(interval_value)
                    ),
                ));
            }
            *value
        }
        None => DaemonConfig::DEFAULT_FAST_INTERVAL.min(interval_value),
    };

    let history_value = match &history {
        Some((value, span)) => {
            if *value < interval_value {
                return Err(cross_field(
                    source,
                    "daemon.history",
                    span,
                    format!(
                        "history ({}) must not be shorter than interval ({}); keep at least \
                         one interval of history",
                        format_duration(*value),
                        format_duration(interval_value)
                    ),
                ));
            }
            if *value > DaemonConfig::MAX_HISTORY {
                return Err(source.error_at(
                    span.clone(),
                    "daemon.history",
                    "must be at most 24h; use e.g. \"15m\"",
                ));
            }
            *value
        }
        None => DaemonConfig::DEFAULT_HISTORY.max(interval_value),
    };

    let journal = match raw.journal {
        Some(path) => Some(validate_journal(source, path)?),
        None => None,
    };

    let journal_max_size = match raw.journal_max_size {
        Some(size) => {
            let span = size.span();
            let size = size.into_inner();
            if size < DaemonConfig::MIN_JOURNAL_MAX_SIZE {
                return Err(source.error_at(
                    span,
                    "daemon.journal_max_size",
                    format!(
                        "must be at least {}; use e.g. \"16MiB\"",
                        DaemonConfig::MIN_JOURNAL_MAX_SIZE
                    ),
                ));
            }
            size
        }
        None => DaemonConfig::DEFAULT_JOURNAL_MAX_SIZE,
    };

    let journal_files = match raw.journal_files {
        Some(files) => {
            let span = files.span();
            match usize::try_from(files.into_inner()) {
                Ok(n @ 1..=DaemonConfig::MAX_JOURNAL_FILES) => n,
                _ => {
                    return Err(source.error_at(
                        span,
                        "daemon.journal_files",
                        format!(
                            "must be between 1 and {}; use e.g. {}",
                            DaemonConfig::MAX_JOURNAL_FILES,
                            DaemonConfig::DEFAULT_JOURNAL_FILES
                        ),
                    ));
                }
            }
        }
        None => DaemonConfig::DEFAULT_JOURNAL_FILES,
    };

    Ok(DaemonConfig {
        interval: interval_value,
        fast_interval: fast_interval_value,
        history: history_value,
        journal,
        journal_max_size,
        journal_files,
        dry_run: raw.dry_run.unwrap_or(false),
        log_format: raw.log_format.unwrap_or_default(),
    })
}

fn split(spanned: Spanned<HumanDuration>) -> (Duration, Range<usize>) {
    let span = spanned.span();
    (spanned.into_inner().0, span)
}

fn check_range(
    source: &Source<'_>,
    key: &str,
    span: &Range<usize>,
    value: Duration,
    min: Duration,
    max: Duration,
    example: &str,
) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(source.error_at(
            span.clone(),
            key,
            format!(
                "must be between {} and {}; use e.g. \"{example}\"",
                format_duration(min),
                format_duration(max)
            ),
        ));
    }
    Ok(())
}

/// An error whose message states both values involved, so the value is not repeated.
fn cross_field(
    source: &Source<'_>,
    key: &str,
    span: &Range<usize>,
    message: String,
) -> ConfigError {
    let mut err = source.error_at(span.clone(), key, message);
    err.value = None;
    err
}

fn validate_journal(source: &Source<'_>, path: Spanned<String>) -> Result<PathBuf, ConfigError> {
    let span = path.span();
    let path = path.into_inner();
    source.refuse_nul(&span, "daemon.journal", &path)?;
    if !Path::new(&path).is_absolute() {
        let what_to_do = if path.starts_with('~') {
            "\"~\" is not expanded, so write out the home directory"
        } else {
            "or leave the key out to use the platform default"
        };
        return Err(source.error_at(
            span,
            "daemon.journal",
            format!(
                "must be an absolute path such as \"/var/lib/headroom/journal.jsonl\"; \
                 {what_to_do}"
            ),
        ));
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn daemon(body: &str) -> Result<DaemonConfig, ConfigError> {
        Config::from_toml_str(&format!("[daemon]\n{body}"), "t.toml").map(|c| c.daemon)
    }

    fn message(body: &str) -> String {
        daemon(body).unwrap_err().to_string()
    }

    #[test]
    fn empty_section_takes_defaults() {
        let d = daemon("").unwrap();
        assert_eq!(d.interval, DaemonConfig::DEFAULT_INTERVAL);
        assert_eq!(d.fast_interval, DaemonConfig::DEFAULT_FAST_INTERVAL);
        assert_eq!(d.history, DaemonConfig::DEFAULT_HISTORY);
        assert_eq!(
            (d.journal, d.dry_run, d.log_format),
            (None, false, LogFormat::Human)
        );
    }

    #[test]
    fn short_interval_lowers_default_fast_interval() {
        let d = daemon("interval = \"100ms\"").unwrap();
        assert_eq!(d.fast_interval, Duration::from_millis(100));
    }

    #[test]
    fn long_interval_raises_default_history() {
        let d = daemon("interval = \"1h\"").unwrap();
        assert_eq!(d.history, Duration::from_secs(3600));
    }

    #[test]
    fn interval_bounds_are_inclusive() {
        assert!(daemon("interval = \"50ms\"").is_ok());
        assert!(daemon("interval = \"1h\"").is_ok());
        assert!(daemon("interval = \"49ms\"").is_err());
        assert!(daemon("interval = \"1h 1ms\"").is_err());
    }

    #[test]
    fn fast_interval_may_equal_interval() {
        assert!(daemon("interval = \"1s\"\nfast_interval = \"1s\"").is_ok());
    }

    #[test]
    fn fast_interval_longer_than_interval_names_both() {
        assert_eq!(
            message("fast_interval = \"2s\""),
            "t.toml:2:17: daemon.fast_interval: fast_interval (2s) must not be longer than \
             interval (1s); shorten fast_interval or lengthen interval"
        );
    }

    #[test]
    fn history_bounds() {
        assert!(daemon("history = \"24h\"").is_ok());
        assert!(message("history = \"25h\"").contains("must be at most 24h"));
        assert!(message("history = \"500ms\"").contains("must not be shorter than interval (1s)"));
    }

    #[test]
    fn journal_must_be_absolute() {
        assert_eq!(
            daemon("journal = \"/tmp/j.jsonl\"").unwrap().journal,
            Some(PathBuf::from("/tmp/j.jsonl"))
        );
        assert!(message("journal = \"j.jsonl\"").contains("(got \"j.jsonl\")"));
        assert!(message("journal = \"~/j.jsonl\"").contains("\"~\" is not expanded"));
    }

    #[test]
    fn journal_size_and_files_have_defaults_and_bounds() {
        let d = daemon("").unwrap();
        assert_eq!(
            (d.journal_max_size, d.journal_files),
            (ByteSize(16 << 20), 5)
        );
        let d = daemon("journal_max_size = \"64KiB\"\njournal_files = 100").unwrap();
        assert_eq!(
            (d.journal_max_size, d.journal_files),
            (ByteSize(65536), 100)
        );
        assert_eq!(daemon("journal_files = 1").unwrap().journal_files, 1);
        assert!(message("journal_max_size = \"63KiB\"").contains("must be at least 64KiB"));
        assert!(message("journal_files = 0").contains("must be between 1 and 100"));
        assert!(message("journal_files = 101").contains("must be between 1 and 100"));
        assert!(message("journal_files = -1").contains("(got -1)"));
    }

    #[test]
    fn log_format_values() {
        assert_eq!(
            daemon("log_format = \"json\"").unwrap().log_format,
            LogFormat::Json
        );
        assert_eq!(
            daemon("log_format = \"human\"").unwrap().log_format,
            LogFormat::Human
        );
    }
}
