//! The configuration file as written: serde structs that mirror the TOML one to one.
//!
//! Stage one of loading. Every struct denies unknown keys, every key is optional (a
//! missing one takes its default during validation), and values that later checks
//! compare with each other are `Spanned` so those checks can point at a line. Nothing
//! here decides whether a value is acceptable beyond its type and unit; that is the job
//! of the validating function next to each section's validated struct.
//!
//! Adding a section: a `RawX` struct here, a field for it in [`RawConfig`], a validated
//! `X` struct with `fn validate(raw: RawX, source: &Source) -> Result<X, ConfigError>` in
//! its own file, and one line in `Config`'s validation.

use serde::Deserialize;
use toml::Spanned;

use super::units::{ByteSize, HumanDuration, Rate, SizeLimit};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a TOML document")]
pub(crate) struct RawConfig {
    pub(crate) daemon: RawDaemon,
    #[serde(rename = "rule")]
    pub(crate) rules: Vec<Spanned<RawRule>>,
    pub(crate) protect: RawProtect,
    pub(crate) gpu: RawGpu,
    pub(crate) http: RawHttp,
    pub(crate) jupyter: RawJupyter,
    pub(crate) postmortem: RawPostmortem,
    pub(crate) labels: RawLabels,
}

/// `[daemon]`: how the daemon samples, keeps history, logs and journals.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a [daemon] table")]
pub(crate) struct RawDaemon {
    pub(crate) interval: Option<Spanned<HumanDuration>>,
    pub(crate) fast_interval: Option<Spanned<HumanDuration>>,
    pub(crate) history: Option<Spanned<HumanDuration>>,
    pub(crate) journal: Option<Spanned<String>>,
    pub(crate) journal_max_size: Option<Spanned<ByteSize>>,
    pub(crate) journal_files: Option<Spanned<i64>>,
    pub(crate) dry_run: Option<bool>,
    pub(crate) log_format: Option<super::LogFormat>,
}

/// `[[rule]]`: one limit and its ladder of actions.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [[rule]] table")]
pub(crate) struct RawRule {
    pub(crate) name: Option<Spanned<String>>,
    #[serde(rename = "match")]
    pub(crate) matcher: Option<RawMatch>,
    pub(crate) footprint: Option<Spanned<SizeLimit>>,
    pub(crate) gpu_memory: Option<Spanned<SizeLimit>>,
    pub(crate) growth: Option<Spanned<Rate>>,
    pub(crate) time_to_exhaustion: Option<Spanned<HumanDuration>>,
    pub(crate) window: Option<Spanned<HumanDuration>>,
    pub(crate) lead: Option<Spanned<HumanDuration>>,
    pub(crate) when: Option<RawWhen>,
    pub(crate) select: Option<Spanned<String>>,
    pub(crate) scope: Option<Spanned<String>>,
    pub(crate) actions: Option<Spanned<Vec<Spanned<RawStep>>>>,
    pub(crate) cooldown: Option<Spanned<HumanDuration>>,
    pub(crate) hysteresis: Option<Spanned<SizeLimit>>,
    pub(crate) dry_run: Option<bool>,
    pub(crate) other_users: Option<bool>,
    pub(crate) root: Option<bool>,
}

/// `[rule.match]`: which processes a rule looks at.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [rule.match] table")]
pub(crate) struct RawMatch {
    pub(crate) workload: Option<Vec<Spanned<String>>>,
    pub(crate) name: Option<Spanned<String>>,
    pub(crate) argv: Option<Spanned<String>>,
    pub(crate) user: Option<Spanned<String>>,
    pub(crate) exe: Option<Spanned<String>>,
    pub(crate) notebook: Option<Spanned<String>>,
}

/// `[rule.when]`: machine-wide conditions gating a rule.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [rule.when] table")]
pub(crate) struct RawWhen {
    pub(crate) per: Option<Spanned<String>>,
    pub(crate) pressure: Option<Spanned<String>>,
    pub(crate) available_below: Option<Spanned<SizeLimit>>,
    pub(crate) swap_used_above: Option<Spanned<SizeLimit>>,
}

/// One entry of `actions = [...]`.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an action such as { signal = \"SIGINT\" }"
)]
pub(crate) struct RawStep {
    pub(crate) signal: Option<Spanned<String>>,
    pub(crate) hook: Option<Spanned<Vec<String>>>,
    pub(crate) notify: Option<bool>,
    pub(crate) after: Option<Spanned<HumanDuration>>,
    pub(crate) timeout: Option<Spanned<HumanDuration>>,
    pub(crate) require_handler: Option<bool>,
    pub(crate) process_group: Option<bool>,
    pub(crate) to: Option<Spanned<String>>,
}

/// `[protect]`: processes never signalled.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a [protect] table")]
pub(crate) struct RawProtect {
    pub(crate) defaults: Option<bool>,
    pub(crate) names: Option<Vec<Spanned<String>>>,
    pub(crate) patterns: Option<Vec<Spanned<String>>>,
    pub(crate) exes: Option<Vec<Spanned<String>>>,
    pub(crate) system_uid_max: Option<Spanned<i64>>,
}

/// `[gpu]`: how GPU memory is collected.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a [gpu] table")]
pub(crate) struct RawGpu {
    pub(crate) nvml: Option<bool>,
    pub(crate) nvml_library: Option<Spanned<String>>,
}

/// `[http]`: the HTTP server for metrics, the JSON API and the status page.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "an [http] table")]
pub(crate) struct RawHttp {
    pub(crate) enabled: Option<bool>,
    pub(crate) listen: Option<Spanned<String>>,
    pub(crate) allow_remote: Option<bool>,
    pub(crate) max_process_series: Option<Spanned<i64>>,
    pub(crate) max_connections: Option<Spanned<i64>>,
    pub(crate) show_all_users: Option<bool>,
}

/// `[jupyter]`: finding the notebook behind each Jupyter kernel.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a [jupyter] table")]
pub(crate) struct RawJupyter {
    pub(crate) enabled: Option<bool>,
    pub(crate) runtime_dirs: Option<Vec<Spanned<String>>>,
    pub(crate) other_users: Option<bool>,
}

/// `[postmortem]`: what to do when a watched process ends.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a [postmortem] table")]
pub(crate) struct RawPostmortem {
    pub(crate) notify: Option<bool>,
}

/// `[labels]`: who each process belongs to, from its cgroup.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a [labels] table")]
pub(crate) struct RawLabels {
    pub(crate) enabled: Option<bool>,
    pub(crate) pods_log_dir: Option<Spanned<String>>,
    pub(crate) containers_log_dir: Option<Spanned<String>>,
    pub(crate) docker_containers_dir: Option<Spanned<String>>,
}
