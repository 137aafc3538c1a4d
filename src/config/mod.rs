//! Configuration: the TOML file, read in two stages.
//!
//! Stage one deserializes the text into raw structs (`raw.rs`) that mirror the file
//! and deny unknown keys; stage two validates each section into the structs the rest of the
//! program uses ([`Config`], [`DaemonConfig`]), filling in defaults and checking values
//! against each other. Sizes, rates and durations are converted once, in stage one
//! ([`units`]). Every failure is a [`ConfigError`] naming the file, line, column, key
//! path and offending value, and saying what to do.
//!
//! The embedded default, [`DEFAULT_TOML`], is the commented file that
//! `headroom print-config` prints; leaving a key out of a file means its value there.
#![expect(
    clippy::result_large_err,
    reason = "ConfigError's public fields are the interface; errors are rare and cold"
)]

mod daemon;
mod error;
mod gpu;
mod http;
mod jupyter;
mod labels;
mod postmortem;
mod raw;
pub mod rules;
pub mod units;

use std::path::Path;

use serde::Serialize;

pub use daemon::{DaemonConfig, LogFormat};
pub use error::{ConfigError, rule_key};
pub use gpu::GpuConfig;
pub use http::{HttpConfig, parse_listen};
pub use jupyter::JupyterConfig;
pub use labels::LabelsConfig;
pub use postmortem::PostmortemConfig;
pub use rules::{
    Limits, Matcher, Per, Protect, Rule, SIGNAL_TAKES_EFFECT, Scope, Select, Step, SystemCondition,
    Target,
};
pub use units::{
    ByteSize, HumanDuration, Rate, SizeLimit, UnitError, format_duration, parse_duration,
    parse_rate, parse_size, parse_size_limit,
};

use error::Source;
use raw::RawConfig;

/// The built-in configuration, commented for users.
pub const DEFAULT_TOML: &str = include_str!("default.toml");

/// The largest config file read: the commented default is 9 KiB, so a file
/// past this is not a config (`/dev/zero`, a log given by mistake).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Name used in errors about [`DEFAULT_TOML`].
const EMBEDDED_ORIGIN: &str = "<embedded default>";

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    pub daemon: DaemonConfig,
    #[serde(rename = "rule")]
    pub rules: Vec<Rule>,
    pub protect: Protect,
    pub gpu: GpuConfig,
    #[serde(default)]
    pub http: HttpConfig,
    #[serde(default)]
    pub jupyter: JupyterConfig,
    #[serde(default)]
    pub postmortem: PostmortemConfig,
    #[serde(default)]
    pub labels: LabelsConfig,
}

impl Config {
    /// The configuration in [`DEFAULT_TOML`].
    pub fn embedded_default() -> Config {
        match Config::from_toml_str(DEFAULT_TOML, EMBEDDED_ORIGIN) {
            Ok(config) => config,
            // The embedded file is checked by a unit test; reaching this is a build of
            // the program with a broken default, not a user error.
            Err(err) => panic!("the embedded default configuration is invalid: {err}"),
        }
    }

    /// Parses and validates `text`; `origin` names it in errors (usually the path).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let source = Source { origin, text };
        let document =
            toml::Deserializer::parse(text).map_err(|e| ConfigError::from_toml(&source, &e))?;
        let raw: RawConfig = serde_path_to_error::deserialize(document)
            .map_err(|e| ConfigError::from_deserialize(&source, e))?;
        validate(raw, &source)
    }

    /// Reads, parses and validates the file at `path`: a regular file of at
    /// most [`MAX_FILE_BYTES`].
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let bytes = crate::regular_file::read_capped(path, MAX_FILE_BYTES)
            .map_err(|e| ConfigError::read(path, &e))?;
        let origin = path.display().to_string();
        let text = String::from_utf8(bytes).map_err(|e| {
            // Point at the first byte that is not UTF-8: the end of the valid prefix.
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let source = Source {
                origin: &origin,
                text: std::str::from_utf8(valid).unwrap_or_default(),
            };
            let (line, column) = source.line_column(source.text.len());
            ConfigError {
                line: Some(line),
                column: Some(column),
                ..ConfigError::whole_file(&origin, "the file is not UTF-8 text; save it as UTF-8")
            }
        })?;
        Config::from_toml_str(&text, &origin)
    }

    /// The effective configuration as TOML, every key written out (an unset `journal`
    /// excepted); parses back to the same `Config`.
    pub fn to_toml(&self) -> String {
        toml::to_string(self)
            .unwrap_or_else(|e| format!("# the configuration could not be written as TOML: {e}\n"))
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::embedded_default()
    }
}

/// Stage two: one validating call per section.
fn validate(raw: RawConfig, source: &Source<'_>) -> Result<Config, ConfigError> {
    let rules = rules::validate_rules(raw.rules, source)?;
    Ok(Config {
        daemon: daemon::validate(raw.daemon, source)?,
        rules,
        protect: rules::validate_protect(raw.protect, source)?,
        gpu: gpu::validate(raw.gpu, source)?,
        http: http::validate(raw.http, source)?,
        jupyter: jupyter::validate(raw.jupyter, source)?,
        postmortem: postmortem::validate(raw.postmortem),
        labels: labels::validate(raw.labels, source)?,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;

    fn err(text: &str) -> ConfigError {
        Config::from_toml_str(text, "t.toml").unwrap_err()
    }

    #[test]
    fn embedded_default_parses() {
        assert!(Config::from_toml_str(DEFAULT_TOML, EMBEDDED_ORIGIN).is_ok());
    }

    #[test]
    fn embedded_default_equals_built_in_defaults_but_for_rules() {
        // Every key left out takes its default, except rules: a file's
        // [[rule]] tables replace the built-in ones, and a file without any
        // has none.
        let empty = Config::from_toml_str("", "empty").unwrap();
        let embedded = Config::embedded_default();
        assert_eq!(embedded.daemon, empty.daemon);
        assert_eq!(embedded.protect, empty.protect);
        assert!(empty.rules.is_empty());
        assert_eq!(embedded.rules.len(), 3);
    }

    #[test]
    fn embedded_default_mentions_every_key() {
        let written = Config::default().to_toml();
        for line in written.lines().filter(|l| l.contains(" = ")) {
            let key = line.split(" = ").next().unwrap_or_default();
            assert!(
                DEFAULT_TOML.contains(&format!("{key} = ")),
                "{key} is not documented"
            );
        }
        assert!(DEFAULT_TOML.contains("# journal = "));
        assert!(DEFAULT_TOML.contains("# nvml_library = "));
    }

    #[test]
    fn to_toml_round_trips_defaults() {
        let config = Config::default();
        assert_eq!(
            Config::from_toml_str(&config.to_toml(), "out").unwrap(),
            config
        );
    }

    #[test]
    fn to_toml_round_trips_every_field() {
        let mut config = Config::default();
        config.daemon.interval = Duration::from_millis(1500);
        config.daemon.fast_interval = Duration::from_millis(125);
        config.daemon.history = Duration::from_secs(2 * 3600 + 1);
        config.daemon.journal = Some(PathBuf::from("/var/tmp/j ournal.jsonl"));
        config.daemon.dry_run = true;
        config.daemon.log_format = LogFormat::Json;
        config.gpu.nvml = false;
        config.gpu.nvml_library = Some(PathBuf::from("/opt/nvidia/libnvidia-ml.so.1"));
        let text = config.to_toml();
        assert!(text.contains("interval = \"1s 500ms\""), "{text}");
        assert_eq!(Config::from_toml_str(&text, "out").unwrap(), config);
    }

    #[test]
    fn json_uses_human_units() {
        let json = serde_json::to_value(Config::default()).unwrap();
        assert_eq!(json["daemon"]["fast_interval"], "250ms");
        assert_eq!(json["daemon"]["log_format"], "human");
        assert!(json["daemon"].get("journal").is_none());
    }

    #[test]
    fn every_error_in_a_rule_names_it_by_place_and_name() {
        // A value serde refuses, and one the validation refuses: one style.
        let parse =
            err("[[rule]]\nname = \"cap\"\nfootprint = \"lots\"\nactions = [{ notify = true }]\n");
        assert_eq!(
            parse.key.as_deref(),
            Some("rule[0] (\"cap\").footprint"),
            "{parse}"
        );
        let valid = err(
            "[[rule]]\nname = \"a\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n\
             [[rule]]\nname = \"cap\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n\
             [rule.match]\nworkload = [\"nope\"]\n",
        );
        assert!(
            valid
                .key
                .as_deref()
                .is_some_and(|k| k.starts_with("rule[1] (\"cap\").match.workload")),
            "{valid}"
        );
        // A rule without a name is named by its place alone.
        let unnamed = err("[[rule]]\nfootprint = \"lots\"\n");
        assert_eq!(
            unnamed.key.as_deref(),
            Some("rule[0].footprint"),
            "{unnamed}"
        );
    }

    #[test]
    fn unknown_section_is_called_a_section() {
        let e = err("[rules]\n");
        assert_eq!(
            e.to_string(),
            "t.toml:1:2: rules: unknown section \"rules\"; expected one of: daemon, rule, protect, gpu, http, jupyter, postmortem, labels"
        );
    }

    #[test]
    fn unknown_top_level_key_is_called_a_key() {
        let e = err("dry_run = true\n");
        assert_eq!(
            e.to_string(),
            "t.toml:1:1: dry_run: unknown key \"dry_run\"; expected one of: daemon, rule, protect, gpu, http, jupyter, postmortem, labels"
        );
    }

    #[test]
    fn bad_value_carries_key_line_and_value() {
        let e = err("[daemon]\n\ninterval = \"5x\"\n");
        assert_eq!((e.line, e.column), (Some(3), Some(12)));
        assert_eq!(e.key.as_deref(), Some("daemon.interval"));
        assert_eq!(e.value.as_deref(), Some("\"5x\""));
    }

    #[test]
    fn a_huge_key_is_cut_in_the_error() {
        let e = err(&format!("{} = 1\n", "x".repeat(100_000)));
        let text = e.to_string();
        assert!(text.len() < 600, "{} bytes", text.len());
        assert!(text.contains("unknown key \"xxxxxxxx"), "{text}");
        assert!(text.contains("…"), "{text}");
        let e = err(&format!("[daemon]\n{} = 1\n", "y".repeat(100_000)));
        assert!(e.to_string().len() < 800, "{}", e.to_string().len());
    }

    #[test]
    fn syntax_error_has_position_but_no_key() {
        let e = err("[daemon\n");
        assert_eq!((e.line, e.key.as_deref()), (Some(1), None));
        assert!(e.message.starts_with("invalid TOML"), "{e}");
    }

    #[test]
    fn load_reports_non_utf8_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, b"[daemon]\nx = \"\xff\"\n").unwrap();
        let e = Config::load(&path).unwrap_err();
        assert_eq!((e.line, e.column), (Some(2), Some(6)));
        assert!(e.message.contains("UTF-8"));
    }
}
