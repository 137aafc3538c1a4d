//! Configuration files on disk: every invalid fixture fails with exactly the expected
//! message (file, line, column, key, value and what to do), valid files load, and a
//! missing file is reported by path.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use headroom::config::{
    ByteSize, Config, DaemonConfig, GpuConfig, HttpConfig, JupyterConfig, LogFormat,
    PostmortemConfig,
};

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
        "gpu_empty_library.toml",
        r#"3:16: gpu.nvml_library: is empty; give the absolute path of libnvidia-ml.so.1, or leave the key out to use the driver's usual location (got "")"#,
    ),
    (
        "gpu_library_directory.toml",
        r#"3:16: gpu.nvml_library: names a directory; give the path of the library file itself, e.g. "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" (got "/usr/lib/x86_64-linux-gnu/")"#,
    ),
    (
        "gpu_library_wrong_type.toml",
        "3:16: gpu.nvml_library: wrong type: expected a string, found an array",
    ),
    (
        "gpu_nvml_wrong_type.toml",
        r#"3:8: gpu.nvml: wrong type: expected true or false, found a string (got "on")"#,
    ),
    (
        "gpu_relative_library.toml",
        r#"3:16: gpu.nvml_library: must be an absolute path such as "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"; a bare name is searched for by the dynamic loader, which headroom already does for libnvidia-ml.so.1 when the key is left out (got "libnvidia-ml.so.1")"#,
    ),
    (
        "jupyter_other_users_wrong_type.toml",
        "3:15: jupyter.other_users: wrong type: expected true or false, found an array",
    ),
    (
        "jupyter_relative_runtime_dir.toml",
        r#"3:41: jupyter.runtime_dirs[1]: must be an absolute path such as "/srv/jupyter/runtime"; `jupyter --runtime-dir` prints the one a user's servers write to (got "runtime")"#,
    ),
    (
        "jupyter_unknown_key.toml",
        r#"3:1: jupyter.runtime_dir: unknown key "runtime_dir"; expected one of: enabled, runtime_dirs, other_users"#,
    ),
    (
        "postmortem_notify_wrong_type.toml",
        r#"3:10: postmortem.notify: wrong type: expected true or false, found a string (got "yes")"#,
    ),
    (
        "gpu_unknown_key.toml",
        r#"3:1: gpu.library: unknown key "library"; expected one of: nvml, nvml_library"#,
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
        r#"3:1: http.listen_addr: unknown key "listen_addr"; expected one of: enabled, listen, allow_remote, max_process_series, max_connections, show_all_users"#,
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
        "journal_files_string.toml",
        r#"3:17: daemon.journal_files: wrong type: expected an integer, found a string (got "5")"#,
    ),
    (
        "journal_files_too_many.toml",
        "3:17: daemon.journal_files: must be between 1 and 100; use e.g. 5 (got 1000)",
    ),
    (
        "journal_files_zero.toml",
        "3:17: daemon.journal_files: must be between 1 and 100; use e.g. 5 (got 0)",
    ),
    (
        "journal_max_size_percent.toml",
        r#"3:20: daemon.journal_max_size: invalid size: unknown unit "%"; use B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000) (got "10%")"#,
    ),
    (
        "journal_max_size_too_small.toml",
        r#"3:20: daemon.journal_max_size: must be at least 64KiB; use e.g. "16MiB" (got "4KiB")"#,
    ),
    (
        "journal_wrong_type.toml",
        "3:11: daemon.journal: wrong type: expected a string, found a boolean (got true)",
    ),
    (
        "key_outside_section.toml",
        r#"2:1: interval: unknown key "interval"; expected one of: daemon, rule, protect, gpu, http, jupyter, postmortem, labels"#,
    ),
    (
        "log_format_case.toml",
        r#"3:14: daemon.log_format: unknown value; expected one of: "human", "json" (got "JSON")"#,
    ),
    (
        "misspelled_key.toml",
        r#"3:1: daemon.intervall: unknown key "intervall"; expected one of: interval, fast_interval, history, journal, journal_max_size, journal_files, dry_run, log_format"#,
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
        r#"3:1: daemon.sample_rate: unknown key "sample_rate"; expected one of: interval, fast_interval, history, journal, journal_max_size, journal_files, dry_run, log_format"#,
    ),
    (
        "unknown_section.toml",
        r#"5:2: rules: unknown section "rules"; expected one of: daemon, rule, protect, gpu, http, jupyter, postmortem, labels"#,
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
    (
        "protect_bad_pattern.toml",
        r#"3:13: protect.patterns[0]: not a valid regular expression (error: repetition operator missing expression); escape special characters, e.g. "python\\.exe" (got "*sshd")"#,
    ),
    (
        "protect_relative_exe.toml",
        r#"3:9: protect.exes[0]: an executable to protect is an absolute path, e.g. "/usr/sbin/sshd" (the path the process was started from, as `ls -l /proc/PID/exe` shows it) (got "sshd")"#,
    ),
    (
        "protect_system_uid_max_too_large.toml",
        "3:18: protect.system_uid_max: the highest uid of a system account is a uid from 0 to 65533, e.g. 999 (SYS_UID_MAX in /etc/login.defs; 499 on macOS) (got 65534)",
    ),
    (
        "rule_bad_pressure.toml",
        r#"7:12: rule[0] ("nb").when.pressure: expected "warn" or "critical" (the level at or above which the rule applies) (got "high")"#,
    ),
    (
        "rule_bad_regex.toml",
        r#"7:8: rule[0] ("nb").match.name: not a valid regular expression (error: unclosed group); escape special characters, e.g. "python\\.exe" (got "python(3")"#,
    ),
    (
        "rule_duplicate_name.toml",
        r#"7:8: rule[1] ("nb").name: another rule has this name; give each rule its own (names label metrics and journal events) (got "nb")"#,
    ),
    (
        "rule_footprint_bad_unit.toml",
        r#"4:13: rule[0] ("nb").footprint: invalid size limit: unknown unit "XB"; use B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000) (got "12XB")"#,
    ),
    (
        "rule_footprint_negative.toml",
        r#"4:13: rule[0] ("nb").footprint: invalid size limit: a size cannot be negative; expected a number and a unit such as "512MiB", "8GiB" or "60%" (got "-1GiB")"#,
    ),
    (
        "rule_footprint_overflow.toml",
        r#"4:13: rule[0] ("nb").footprint: invalid size limit: too large: sizes must be below 16 EiB (16777216TiB); expected a number and a unit such as "512MiB", "8GiB" or "60%" (got "99999999TiB")"#,
    ),
    (
        "rule_footprint_percent_over_100.toml",
        r#"4:13: rule[0] ("nb").footprint: invalid size limit: a percentage must be greater than 0% and at most 100%, e.g. "60%" (got "150%")"#,
    ),
    (
        "rule_footprint_zero_percent.toml",
        r#"4:13: rule[0] ("nb").footprint: invalid size limit: a percentage must be greater than 0% and at most 100%, e.g. "60%" (got "0%")"#,
    ),
    (
        "rule_growth_without_duration.toml",
        r#"4:10: rule[0] ("nb").growth: invalid rate: no "/" between size and duration; expected a size per duration such as "1GiB/10s", "200MiB/s" or "512MiB/1m" (got "1GiB")"#,
    ),
    (
        "rule_no_actions.toml",
        r#"2:1: rule[0] ("nb").actions: the rule has no actions; add e.g. actions = [{ signal = "SIGINT" }]"#,
    ),
    (
        "rule_no_limit.toml",
        r#"2:1: rule[0] ("nb"): the rule has no limit (footprint, gpu_memory, growth, time_to_exhaustion) and no [rule.when] condition, so it would act on every matching process; add one"#,
    ),
    (
        "rule_relative_hook.toml",
        r#"5:21: rule[0] ("nb").actions[0].hook: a hook is a list whose first item is an absolute path to a program, e.g. ["/usr/local/bin/save-checkpoint", "--now"]; it runs without a shell (got ["save-checkpoint.sh"])"#,
    ),
    (
        "rule_scope_unknown.toml",
        r#"5:9: rule[0] ("nb").scope: expected "job" (a job root judged on its job's totals: the process and its descendants) or "process" (every process on its own) (got "tree")"#,
    ),
    (
        "rule_select_without_when.toml",
        r#"5:10: rule[0] ("nb").select: select picks one process when a system condition holds; add a [rule.when] condition or remove select (got "newest")"#,
    ),
    (
        "rule_sigkill_require_handler.toml",
        r#"5:23: rule[0] ("nb").actions[0].require_handler: SIGKILL cannot be caught, so require_handler would always skip it; remove require_handler (got "SIGKILL")"#,
    ),
    (
        "rule_step_without_after.toml",
        r#"5:35: rule[0] ("nb").actions[1].after: every step after the first needs after = "30s" (how long the previous step gets to work) (got { signal = "SIGTERM" })"#,
    ),
    (
        "rule_two_actions_in_one_step.toml",
        r#"5:12: rule[0] ("nb").actions[0]: each step has exactly one of signal = "SIGINT", hook = ["/path", "arg"] or notify = true (got { signal = "SIGINT", notify = true })"#,
    ),
    (
        "rule_unknown_key.toml",
        r#"4:1: rule[0] ("nb").limit: unknown key "limit"; expected one of: name, match, footprint, gpu_memory, growth, time_to_exhaustion, window, lead, when, select, scope, actions, cooldown, hysteresis, dry_run, other_users, root"#,
    ),
    (
        "rule_unknown_signal.toml",
        r#"5:23: rule[0] ("nb").actions[0].signal: expected one of SIGINT, SIGUSR1, SIGUSR2, SIGTERM, SIGKILL (got "SIGHUP")"#,
    ),
    (
        "rule_unknown_workload.toml",
        r#"7:13: rule[0] ("nb").match.workload: unknown workload; expected one of: jupyter, pytorch, tensorflow, jax, mlx, llm-server, python, other, any-ml (got "torch")"#,
    ),
];

/// The `.toml` files in `dir`; there must be some (a test looping over
/// none would pass without checking anything).
fn toml_files(dir: &Path) -> BTreeSet<String> {
    let names: BTreeSet<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".toml"))
        .collect();
    assert!(!names.is_empty(), "no .toml files in {}", dir.display());
    names
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
            journal_max_size: ByteSize(1024 * 1024),
            journal_files: 3,
            dry_run: true,
            log_format: LogFormat::Json,
        }
    );
    assert_eq!(
        config.gpu,
        GpuConfig {
            nvml: false,
            nvml_library: Some(PathBuf::from("/opt/nvidia/lib64/libnvidia-ml.so.1")),
        }
    );
    assert_eq!(
        config.http,
        HttpConfig {
            enabled: false,
            listen: "0.0.0.0:19717".parse().unwrap(),
            allow_remote: true,
            max_process_series: 7,
            max_connections: HttpConfig::DEFAULT_MAX_CONNECTIONS,
            show_all_users: false,
        }
    );
    assert_eq!(
        config.jupyter,
        JupyterConfig {
            enabled: false,
            runtime_dirs: vec![PathBuf::from("/srv/jupyter/runtime")],
            other_users: true,
        }
    );
    assert_eq!(config.postmortem, PostmortemConfig { notify: true });
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
