//! The `[jupyter]` section, validated: whether to look up the notebook behind
//! each Jupyter kernel, extra runtime directories to look in, and whether a
//! daemon running as root may read other users' Jupyter runtime files (which
//! hold their servers' tokens).

use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};
use toml::Spanned;

use super::error::{ConfigError, Source};
use super::raw::RawJupyter;

/// How kernels are mapped to notebooks. Every field has a default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JupyterConfig {
    /// Ask running Jupyter servers which notebook each kernel runs. Default true.
    pub enabled: bool,
    /// Runtime directories to read besides the usual ones
    /// (`$JUPYTER_RUNTIME_DIR`, `~/Library/Jupyter/runtime`,
    /// `~/.local/share/jupyter/runtime`). Absolute. Default none.
    #[serde(serialize_with = "paths_lossy")]
    pub runtime_dirs: Vec<PathBuf>,
    /// As root, also read every user's runtime directory
    /// (`/home/*/.local/share/jupyter/runtime`, `/Users/*/Library/Jupyter/runtime`).
    /// Their files hold the servers' tokens, so this is off unless asked for.
    /// Default false.
    pub other_users: bool,
}

impl Default for JupyterConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            runtime_dirs: Vec::new(),
            other_users: false,
        }
    }
}

/// Paths from TOML are UTF-8; one set in code may not be, and is then written
/// lossily rather than failing the whole serialization.
fn paths_lossy<S: Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(paths.iter().map(|p| p.display().to_string()))
}

/// Checks `[jupyter]` and fills in defaults.
pub(crate) fn validate(raw: RawJupyter, source: &Source<'_>) -> Result<JupyterConfig, ConfigError> {
    let mut runtime_dirs = Vec::new();
    for (i, dir) in raw.runtime_dirs.unwrap_or_default().into_iter().enumerate() {
        runtime_dirs.push(validate_dir(source, i, dir)?);
    }
    Ok(JupyterConfig {
        enabled: raw.enabled.unwrap_or(true),
        runtime_dirs,
        other_users: raw.other_users.unwrap_or(false),
    })
}

fn validate_dir(
    source: &Source<'_>,
    index: usize,
    dir: Spanned<String>,
) -> Result<PathBuf, ConfigError> {
    let span = dir.span();
    let dir = dir.into_inner();
    let key = format!("jupyter.runtime_dirs[{index}]");
    if dir.is_empty() {
        return Err(source.error_at(
            span,
            &key,
            "is empty; give the absolute path of a Jupyter runtime directory (where \
             jpserver-*.json files are), or remove the entry",
        ));
    }
    source.refuse_nul(&span, &key, &dir)?;
    if !Path::new(&dir).is_absolute() {
        return Err(source.error_at(
            span,
            &key,
            "must be an absolute path such as \"/srv/jupyter/runtime\"; `jupyter --runtime-dir` \
             prints the one a user's servers write to",
        ));
    }
    Ok(PathBuf::from(dir))
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn jupyter(body: &str) -> Result<JupyterConfig, ConfigError> {
        Config::from_toml_str(&format!("[jupyter]\n{body}"), "t.toml").map(|c| c.jupyter)
    }

    #[test]
    fn empty_section_takes_defaults() {
        let j = jupyter("").unwrap();
        assert_eq!(j, JupyterConfig::default());
        assert!(j.enabled);
        assert!(
            !j.other_users,
            "other users' tokens are read only on request"
        );
    }

    #[test]
    fn runtime_dirs_are_kept_in_order() {
        let j = jupyter("runtime_dirs = [\"/srv/a\", \"/srv/b\"]\nother_users = true").unwrap();
        assert_eq!(
            j.runtime_dirs,
            vec![PathBuf::from("/srv/a"), PathBuf::from("/srv/b")]
        );
        assert!(j.other_users);
    }

    #[test]
    fn a_relative_runtime_dir_is_refused_by_index() {
        let e = jupyter("runtime_dirs = [\"/srv/a\", \"runtime\"]").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("jupyter.runtime_dirs[1]"));
        assert_eq!(e.value.as_deref(), Some("\"runtime\""));
        assert!(e.message.contains("must be an absolute path"), "{e}");
    }

    #[test]
    fn a_runtime_dir_with_a_nul_is_refused_before_the_os_sees_it() {
        let e = jupyter("runtime_dirs = [\"/srv/\\u0000a\"]").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("jupyter.runtime_dirs[0]"));
        assert!(e.message.starts_with("contains a NUL character"), "{e}");
    }
}
