//! The `[labels]` section, validated: whether processes are labelled with
//! who they belong to (a pod, a container, a Slurm job, a systemd unit),
//! and where the kubelet and Docker keep the files that name pods and
//! containers.

use std::path::{Path, PathBuf};

use serde::Serialize;
use toml::Spanned;

use super::error::{ConfigError, Source};
use super::raw::RawLabels;

/// Where names come from. Every field has a default; an empty path turns
/// that source off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelsConfig {
    /// Label processes at all. Default true.
    pub enabled: bool,
    /// The kubelet's pod log directory (`podLogsDir`): `NAMESPACE_NAME_UID`
    /// directories name each pod. Default `/var/log/pods`.
    #[serde(serialize_with = "path_lossy")]
    pub pods_log_dir: PathBuf,
    /// The kubelet's container log links: `POD_NAMESPACE_CONTAINER-ID.log`
    /// names each container. Default `/var/log/containers`.
    #[serde(serialize_with = "path_lossy")]
    pub containers_log_dir: PathBuf,
    /// Docker's containers directory (`<data-root>/containers`): each
    /// container's `config.v2.json` names it. Default
    /// `/var/lib/docker/containers`.
    #[serde(serialize_with = "path_lossy")]
    pub docker_containers_dir: PathBuf,
}

impl LabelsConfig {
    pub const DEFAULT_PODS_LOG_DIR: &str = "/var/log/pods";
    pub const DEFAULT_CONTAINERS_LOG_DIR: &str = "/var/log/containers";
    pub const DEFAULT_DOCKER_CONTAINERS_DIR: &str = "/var/lib/docker/containers";

    /// A directory to read, `None` where turned off (an empty path).
    pub fn dir(path: &Path) -> Option<PathBuf> {
        (!path.as_os_str().is_empty()).then(|| path.to_path_buf())
    }
}

impl Default for LabelsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            pods_log_dir: PathBuf::from(Self::DEFAULT_PODS_LOG_DIR),
            containers_log_dir: PathBuf::from(Self::DEFAULT_CONTAINERS_LOG_DIR),
            docker_containers_dir: PathBuf::from(Self::DEFAULT_DOCKER_CONTAINERS_DIR),
        }
    }
}

fn path_lossy<S: serde::Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&path.display())
}

/// Checks `[labels]` and fills in defaults.
pub(crate) fn validate(raw: RawLabels, source: &Source<'_>) -> Result<LabelsConfig, ConfigError> {
    let defaults = LabelsConfig::default();
    let dir = |value: Option<Spanned<String>>, key: &str, default: PathBuf| match value {
        Some(value) => validate_dir(source, value, key),
        None => Ok(default),
    };
    Ok(LabelsConfig {
        enabled: raw.enabled.unwrap_or(true),
        pods_log_dir: dir(
            raw.pods_log_dir,
            "labels.pods_log_dir",
            defaults.pods_log_dir,
        )?,
        containers_log_dir: dir(
            raw.containers_log_dir,
            "labels.containers_log_dir",
            defaults.containers_log_dir,
        )?,
        docker_containers_dir: dir(
            raw.docker_containers_dir,
            "labels.docker_containers_dir",
            defaults.docker_containers_dir,
        )?,
    })
}

fn validate_dir(
    source: &Source<'_>,
    value: Spanned<String>,
    key: &str,
) -> Result<PathBuf, ConfigError> {
    let span = value.span();
    let path = value.into_inner();
    if path.is_empty() {
        return Ok(PathBuf::new());
    }
    source.refuse_nul(&span, key, &path)?;
    if !Path::new(&path).is_absolute() {
        return Err(source.error_at(
            span,
            key,
            "must be an absolute path such as \"/var/log/pods\", or \"\" to read no names \
             from there",
        ));
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn labels(body: &str) -> Result<LabelsConfig, ConfigError> {
        Config::from_toml_str(&format!("[labels]\n{body}"), "t.toml").map(|c| c.labels)
    }

    #[test]
    fn empty_section_takes_the_kubelet_s_and_docker_s_places() {
        let l = labels("").unwrap();
        assert_eq!(l, LabelsConfig::default());
        assert!(l.enabled);
        assert_eq!(l.pods_log_dir, Path::new("/var/log/pods"));
        assert_eq!(
            LabelsConfig::dir(&l.docker_containers_dir),
            Some(PathBuf::from("/var/lib/docker/containers"))
        );
    }

    #[test]
    fn a_moved_directory_and_a_source_turned_off() {
        let l =
            labels("pods_log_dir = \"/srv/kubelet/pods\"\ndocker_containers_dir = \"\"\n").unwrap();
        assert_eq!(l.pods_log_dir, Path::new("/srv/kubelet/pods"));
        assert_eq!(LabelsConfig::dir(&l.docker_containers_dir), None);
        assert!(!labels("enabled = false").unwrap().enabled);
    }

    #[test]
    fn a_relative_directory_is_refused_with_its_key_and_value() {
        let e = labels("containers_log_dir = \"var/log/containers\"").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("labels.containers_log_dir"));
        assert_eq!(e.value.as_deref(), Some("\"var/log/containers\""));
        assert!(e.message.contains("must be an absolute path"), "{e}");
    }

    #[test]
    fn the_section_round_trips() {
        let mut config = Config::default();
        config.labels.pods_log_dir = PathBuf::from("/srv/pods");
        config.labels.docker_containers_dir = PathBuf::new();
        config.labels.enabled = false;
        let text = config.to_toml();
        assert_eq!(Config::from_toml_str(&text, "out").unwrap(), config);
    }
}
