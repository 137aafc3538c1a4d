//! A Docker container's name, from the file Docker keeps for it:
//! `/var/lib/docker/containers/<id>/config.v2.json`, whose top-level
//! `Name` is the name with a leading `/` (`"Name":"/jupyter-alice"`; a
//! JupyterHub DockerSpawner names its servers `jupyter-<user>`).
//!
//! The file is root's, but what is in it is what the container's owner
//! gave Docker: its environment, labels and command line, megabytes if
//! they like. So it is read only from a directory only root can change
//! ([`crate::os::trusted_path`]), only if it is a plain file owned by root
//! (a link is not followed), only up to [`MAX_CONFIG_BYTES`], and only the
//! top-level `Name` is taken (a nested `"Name"`, such as a swarm service's
//! or a volume's, is not), and only if it is a name Docker accepts
//! (`[a-zA-Z0-9][a-zA-Z0-9_.-]+`).
//!
//! Docker's directory is root's alone (mode 0710): a name read there is
//! one other users cannot see, so it is marked private.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::cgroup_path::is_container_id;

/// The largest `config.v2.json` read: a container's file is a few KiB
/// (its environment and labels make most of it).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The longest name taken.
pub const MAX_NAME: usize = 255;

/// The top-level field read; serde skips every other without keeping it.
#[derive(Deserialize)]
struct ContainerConfig {
    #[serde(rename = "Name")]
    name: Option<String>,
}

/// The container's name in the text of its `config.v2.json`, without
/// Docker's leading `/`.
pub fn parse_config_name(bytes: &[u8]) -> Result<String, String> {
    let config: ContainerConfig =
        serde_json::from_slice(bytes).map_err(|e| format!("not Docker's JSON: {e}"))?;
    let name = config.name.ok_or("no top-level Name")?;
    let name = name.strip_prefix('/').unwrap_or(&name);
    if !is_docker_name(name) {
        return Err(format!(
            "Name is not a name Docker accepts: {}",
            crate::model::printable(&name.chars().take(64).collect::<String>())
        ));
    }
    Ok(name.to_string())
}

/// `[a-zA-Z0-9][a-zA-Z0-9_.-]+`, at most [`MAX_NAME`] bytes (Docker's
/// `RestrictedNamePattern`).
pub fn is_docker_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() >= 2
        && bytes.len() <= MAX_NAME
        && bytes[0].is_ascii_alphanumeric()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A directory's (device, inode, mtime seconds, mtime nanoseconds): it
/// changed when these did.
type Stamp = (u64, u64, i64, i64);

/// Docker's containers directory.
#[derive(Debug)]
pub struct DockerNames {
    dir: Option<PathBuf>,
    trusted_uid: u32,
    /// The directory's (device, inode, mtime) when its trust was checked,
    /// and what the check said: `Ok(public)` or why it was refused.
    checked: Option<(Stamp, Result<bool, String>)>,
    /// Looked up and found, and not found, since start.
    pub found: u64,
    pub failed: u64,
    /// The last failure, for the status.
    pub last_failure: Option<String>,
    present: bool,
}

impl DockerNames {
    /// `dir` is the `containers` directory (`None`: not read).
    pub fn new(dir: Option<PathBuf>, trusted_uid: u32) -> Self {
        Self {
            dir,
            trusted_uid,
            checked: None,
            found: 0,
            failed: 0,
            last_failure: None,
            present: false,
        }
    }

    /// The name of container `id` and whether it is private; `None` where
    /// Docker has no such container (another runtime's) or the file could
    /// not be used (counted, and the reason kept for the status).
    pub fn lookup(&mut self, id: &str) -> Option<(String, bool)> {
        let dir = self.dir.clone()?;
        if !is_container_id(id) {
            return None;
        }
        let public = match self.check_dir(&dir) {
            Some(Ok(public)) => public,
            Some(Err(_)) | None => return None,
        };
        match read_name(&dir, id) {
            Ok(Some(name)) => {
                self.found += 1;
                Some((name, !public))
            }
            Ok(None) => None,
            Err(why) => {
                self.failed += 1;
                self.last_failure = Some(why);
                None
            }
        }
    }

    /// The directory's trust, checked again when it changes; `None` where
    /// it is not there.
    fn check_dir(&mut self, dir: &Path) -> Option<Result<bool, String>> {
        let meta = match std::fs::metadata(dir) {
            Ok(meta) => meta,
            Err(_) => {
                self.present = false;
                self.checked = None;
                return None;
            }
        };
        self.present = true;
        let stamp = (meta.dev(), meta.ino(), meta.mtime(), meta.mtime_nsec());
        if let Some((at, result)) = &self.checked
            && *at == stamp
        {
            return Some(result.clone());
        }
        let result = match crate::os::trusted_path::check_path(dir, self.trusted_uid) {
            Ok(()) => Ok(super::kubelet::listable_by_anyone(dir)),
            Err(untrusted) => Err(format!(
                "{} not read: {untrusted}; names there could be anyone's",
                dir.display()
            )),
        };
        self.checked = Some((stamp, result.clone()));
        Some(result)
    }

    /// The directory exists.
    pub fn present(&self) -> bool {
        self.present
    }

    /// Why the directory is refused, if it is.
    pub fn problem(&self) -> Option<String> {
        match &self.checked {
            Some((_, Err(why))) => Some(why.clone()),
            _ => None,
        }
    }

    /// In words, for the collector's status.
    pub fn describe(&self) -> String {
        let Some(dir) = &self.dir else {
            return "Docker names: not read (turned off)".to_string();
        };
        if let Some(why) = self.problem() {
            return why;
        }
        if !self.present {
            return format!("{}: not found", dir.display());
        }
        let mut text = format!("{}: {} containers named", dir.display(), self.found);
        if self.failed > 0 {
            text.push_str(&format!(", {} not", self.failed));
            if let Some(why) = &self.last_failure {
                text.push_str(&format!(" (last: {why})"));
            }
        }
        text
    }
}

/// Read container `id`'s name from `dir/id/config.v2.json`. `Ok(None)`
/// where there is no such container.
fn read_name(dir: &Path, id: &str) -> Result<Option<String>, String> {
    let container_dir = dir.join(id);
    let meta = match std::fs::symlink_metadata(&container_dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", container_dir.display())),
    };
    if !meta.is_dir()
        || crate::os::trusted_path::check_owner_and_mode(&container_dir, &meta, 0).is_err()
    {
        return Err(format!(
            "{} is not a directory only root can change",
            container_dir.display()
        ));
    }
    let path = container_dir.join("config.v2.json");
    let (bytes, file) = match crate::regular_file::read_untrusted(&path, MAX_CONFIG_BYTES) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if file.uid() != 0 {
        return Err(format!("{} is not root's", path.display()));
    }
    parse_config_name(&bytes)
        .map(Some)
        .map_err(|why| format!("{}: {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/docker/config.v2.json"
    ));

    #[test]
    fn the_top_level_name_is_taken_without_its_slash() {
        assert_eq!(
            parse_config_name(CONFIG.as_bytes()).unwrap(),
            "custom-nginx-t2"
        );
    }

    #[test]
    fn a_nested_name_is_not_the_container_s() {
        // A swarm task's file names its service deeper in, before the
        // container's own name (https://github.com/fluent/fluent-bit/issues/10030).
        let json = r#"{"Config":{"Labels":{"com.docker.swarm.service.name":"test_fluent-bit"}},
            "NetworkSettings":{"Service":{"Name":"test_fluent-bit"}},
            "MountPoints":{"/d":{"Name":"a-volume"}},
            "Name":"/test_fluent-bit.1.17byos32citpxyq3i4xeoykaw"}"#;
        assert_eq!(
            parse_config_name(json.as_bytes()).unwrap(),
            "test_fluent-bit.1.17byos32citpxyq3i4xeoykaw"
        );
        let nested_only = r#"{"MountPoints":{"/d":{"Name":"a-volume"}}}"#;
        assert!(parse_config_name(nested_only.as_bytes()).is_err());
    }

    #[test]
    fn a_name_docker_would_refuse_is_refused() {
        for json in [
            r#"{"Name":"/evil\u001b[31m"}"#,
            r#"{"Name":"/a b"}"#,
            r#"{"Name":"/-leading-dash"}"#,
            r#"{"Name":"/"}"#,
        ] {
            let e = parse_config_name(json.as_bytes()).unwrap_err();
            assert!(!e.contains('\u{1b}'), "the refusal quotes escaped: {e}");
        }
        let long = format!(r#"{{"Name":"/{}"}}"#, "a".repeat(MAX_NAME + 1));
        assert!(parse_config_name(long.as_bytes()).is_err());
        assert!(parse_config_name(b"not json").is_err());
        assert!(parse_config_name(br#"{"Name":7}"#).is_err());
    }
}
