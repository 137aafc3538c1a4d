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

use super::units::HumanDuration;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a TOML document")]
pub(crate) struct RawConfig {
    pub(crate) daemon: RawDaemon,
    pub(crate) http: RawHttp,
}

/// `[daemon]`: how the daemon samples, keeps history, logs and journals.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a [daemon] table")]
pub(crate) struct RawDaemon {
    pub(crate) interval: Option<Spanned<HumanDuration>>,
    pub(crate) fast_interval: Option<Spanned<HumanDuration>>,
    pub(crate) history: Option<Spanned<HumanDuration>>,
    pub(crate) journal: Option<Spanned<String>>,
    pub(crate) dry_run: Option<bool>,
    pub(crate) log_format: Option<super::LogFormat>,
}

/// `[http]`: the HTTP server for metrics, the JSON API and the status page.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "an [http] table")]
pub(crate) struct RawHttp {
    pub(crate) enabled: Option<bool>,
    pub(crate) listen: Option<Spanned<String>>,
    pub(crate) allow_remote: Option<bool>,
    pub(crate) max_process_series: Option<Spanned<i64>>,
}
