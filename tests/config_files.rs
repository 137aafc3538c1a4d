//! Configuration files on disk: every invalid fixture fails with exactly the expected
//! message (file, line, column, key, value and what to do), valid files load, and a
//! missing file is reported by path.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use headroom::config::{Config, DaemonConfig, HttpConfig, LogFormat};

fn fixtures(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(kind)
}

/// Each invalid fixture and the error text after `{path}:`.
const INVALID: &[(&str, &str)] = &[
    (
        "bad_duration_unit.toml",
        r#"3:12: daemon.interval: invalid duration: unknown unit "parsecs"; use ns, us, ms, s, m (minutes), h, d or w, e.g. "30s" (got "5 parsecs")"#,
    ),
    (
        "bad_log_format.toml",
        r#"3:14: daemon.log_format: unknown value; expected one of: "human", "json" (got "xml")"#,
    ),
    (
        "duplicate_key.toml",
        r#"4:1: duplicate key "interval": a key or table may appear only once; remove or merge the repeated one"#,
    ),
    (
        "duplicate_table.toml",
        r#"5:2: duplicate key "daemon": a key or table may appear only once; remove or merge the repeated one"#,
    ),
    (
        "duration_overflow.toml",
        r#"3:11: daemon.history: invalid duration: too large; expected a number and a unit such as "250ms", "30s" or "1m 30s" (got "99999999999999999999y")"#,
    ),
    (
        "duration_without_quotes_unit.toml",
        r#"3:11: daemon.history: invalid duration: a duration needs a unit: write "10s" for seconds or "10ms" for milliseconds (got "10")"#,
    ),
    (
        "duration_without_unit.toml",
        r#"3:12: daemon.interval: invalid duration: a duration needs a unit and quotes: write "5s" for seconds or "5ms" for milliseconds (got 5)"#,
    ),
    (
        "empty_duration.toml",
        r#"3:17: daemon.fast_interval: invalid duration: the value is empty; expected a number and a unit such as "250ms", "30s" or "1m 30s" (got "")"#,
    ),
    (
        "fast_interval_longer_than_interval.toml",
        "4:17: daemon.fast_interval: fast_interval (2s) must not be longer than interval (1s); shorten fast_interval or lengthen interval",
    ),
    (
        "fast_interval_too_short.toml",
        r#"3:17: daemon.fast_interval: must be at least 20ms; use e.g. "250ms" (got "5ms")"#,
    ),
    (
        "history_shorter_than_interval.toml",
        "4:11: daemon.history: history (5s) must not be shorter than interval (10s); keep at least one interval of history",
    ),
    (
        "history_too_long.toml",
        r#"3:11: daemon.history: must be at most 24h; use e.g. "15m" (got "2days")"#,
    ),
    (
        "http_listen_host_name.toml",
        r#"3:10: http.listen: must be an IP address and a port such as "127.0.0.1:9717" or "[::1]:9717" (host names such as localhost are not resolved) (got "localhost:9717")"#,
    ),
    (
        "http_listen_without_port.toml",
        r#"3:10: http.listen: must be an IP address and a port such as "127.0.0.1:9717" or "[::1]:9717" (host names such as localhost are not resolved) (got "127.0.0.1")"#,
    ),
    (
        "http_max_process_series_too_large.toml",
        "3:22: http.max_process_series: must be a whole number from 0 to 10000; use e.g. 50 (got 20000)",
    ),
    (
        "http_remote_without_allow_remote.toml",
        r#"3:10: http.listen: 0.0.0.0:9717 is not a loopback address: anyone who can reach it could read this machine's process list; listen on 127.0.0.1 (or [::1]), or set allow_remote = true (on the command line: --allow-remote) to serve the network on purpose (got "0.0.0.0:9717")"#,
    ),
    (
        "http_unknown_key.toml",
        r#"3:1: http.listen_addr: unknown key "listen_addr"; expected one of: enabled, listen, allow_remote, max_process_series"#,
    ),
    (
        "interval_too_long.toml",
        r#"3:12: daemon.interval: must be between 50ms and 1h; use e.g. "1s" (got "2h")"#,
    ),
    (
        "interval_too_short.toml",
        r#"3:12: daemon.interval: must be between 50ms and 1h; use e.g. "1s" (got "10ms")"#,
    ),
    (
        "journal_wrong_type.toml",
        "3:11: daemon.journal: wrong type: expected a string, found a boolean (got true)",
    ),
    (
        "key_outside_section.toml",
        r#"2:1: interval: unknown key "interval"; expected one of: daemon, http"#,
    ),
    (
        "log_format_case.toml",
        r#"3:14: daemon.log_format: unknown value; expected one of: "human", "json" (got "JSON")"#,
    ),
    (
        "misspelled_key.toml",
        r#"3:1: daemon.intervall: unknown key "intervall"; expected one of: interval, fast_interval, history, journal, dry_run, log_format"#,
    ),
    (
        "negative_duration.toml",
        r#"3:12: daemon.interval: invalid duration: a duration cannot be negative; expected a number and a unit such as "250ms", "30s" or "1m 30s" (got "-1s")"#,
    ),
    (
        "relative_journal.toml",
        r#"3:11: daemon.journal: must be an absolute path such as "/var/lib/headroom/journal.jsonl"; or leave the key out to use the platform default (got "journal.jsonl")"#,
    ),
    (
        "syntax_error.toml",
        "2:8: invalid TOML: unclosed table, expected `]`",
    ),
    (
        "tilde_journal.toml",
        r#"3:11: daemon.journal: must be an absolute path such as "/var/lib/headroom/journal.jsonl"; "~" is not expanded, so write out the home directory (got "~/headroom/journal.jsonl")"#,
    ),
    (
        "unclosed_string.toml",
        r#"3:15: invalid TOML: invalid basic string, expected `"`"#,
    ),
    (
        "unknown_key.toml",
        r#"3:1: daemon.sample_rate: unknown key "sample_rate"; expected one of: interval, fast_interval, history, journal, dry_run, log_format"#,
    ),
    (
        "unknown_section.toml",
        r#"5:2: rules: unknown section "rules"; expected one of: daemon, http"#,
    ),
    (
        "wrong_type_bool.toml",
        r#"3:11: daemon.dry_run: wrong type: expected true or false, found a string (got "yes")"#,
    ),
    (
        "wrong_type_section.toml",
        r#"2:10: daemon: wrong type: expected a [daemon] table, found a string (got "fast")"#,
    ),
    (
        "zero_interval.toml",
        r#"3:12: daemon.interval: must be between 50ms and 1h; use e.g. "1s" (got "0s")"#,
    ),
];

fn toml_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".toml"))
        .collect()
}

#[test]
fn every_invalid_fixture_fails_with_its_message() {
    let dir = fixtures("invalid");
    let mut failures = Vec::new();
    for (name, tail) in INVALID {
        let path = dir.join(name);
        let expected = format!("{}:{tail}", path.display());
        match Config::load(&path) {
            Ok(_) => failures.push(format!("{name}: loaded without error")),
            Err(err) if err.to_string() != expected => {
                failures.push(format!("{name}:\n  expected {expected}\n  got      {err}"));
            }
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_invalid_fixture_is_in_the_table() {
    let on_disk = toml_files(&fixtures("invalid"));
    let in_table: BTreeSet<String> = INVALID.iter().map(|(name, _)| name.to_string()).collect();
    assert_eq!(in_table.len(), INVALID.len(), "a fixture is listed twice");
    let untested: Vec<_> = on_disk.difference(&in_table).collect();
    let missing: Vec<_> = in_table.difference(&on_disk).collect();
    assert!(
        untested.is_empty(),
        "fixtures without an expected error: {untested:?}"
    );
    assert!(
        missing.is_empty(),
        "listed fixtures not on disk: {missing:?}"
    );
}

#[test]
fn every_fixture_says_what_is_wrong_on_its_first_line() {
    for kind in ["invalid", "valid"] {
        for name in toml_files(&fixtures(kind)) {
            let text = std::fs::read_to_string(fixtures(kind).join(&name)).unwrap();
            assert!(
                text.starts_with("# "),
                "{kind}/{name} does not open with a # comment"
            );
        }
    }
}

#[test]
fn full_valid_file_loads() {
    let config = Config::load(&fixtures("valid").join("full.toml")).unwrap();
    assert_eq!(
        config.daemon,
        DaemonConfig {
            interval: Duration::from_secs(2),
            fast_interval: Duration::from_millis(500),
            history: Duration::from_secs(90 * 60),
            journal: Some(PathBuf::from("/srv/headroom/journal.jsonl")),
            dry_run: true,
            log_format: LogFormat::Json,
        }
    );
    assert_eq!(
        config.http,
        HttpConfig {
            enabled: false,
            listen: "0.0.0.0:19717".parse().unwrap(),
            allow_remote: true,
            max_process_series: 7,
        }
    );
}

#[test]
fn valid_files_round_trip_through_to_toml() {
    for name in toml_files(&fixtures("valid")) {
        let config = Config::load(&fixtures("valid").join(&name)).unwrap();
        let again = Config::from_toml_str(&config.to_toml(), "to_toml").unwrap();
        assert_eq!(again, config, "{name}");
    }
}

#[test]
fn default_file_on_disk_is_the_embedded_default() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config/default.toml");
    assert_eq!(Config::load(&path).unwrap(), Config::embedded_default());
}

#[test]
fn missing_file_names_the_path() {
    let path = fixtures("no-such-file.toml");
    let err = Config::load(&path).unwrap_err();
    assert_eq!(err.file, path.display().to_string());
    assert_eq!((err.line, err.key.as_deref()), (None, None));
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}: the file does not exist;", path.display())),
        "{text}"
    );
}

#[test]
fn directory_is_not_a_config_file() {
    let err = Config::load(&fixtures("valid")).unwrap_err();
    assert!(err.message.contains("directory"), "{err}");
}
