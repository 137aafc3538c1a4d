//! The `[gpu]` section, validated: whether to read NVIDIA GPUs through NVML,
//! and where the NVML library is when it is not where the driver puts it.

use std::path::{Path, PathBuf};

use serde::Serialize;
use toml::Spanned;

use super::error::{ConfigError, Source};
use super::raw::RawGpu;

/// How GPU memory is collected. Every field has a default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuConfig {
    /// Read NVIDIA GPUs through NVML (Linux). Default true; a machine without
    /// the driver reports the collector as unavailable once and runs on.
    pub nvml: bool,
    /// The NVML library to load before the usual names (`libnvidia-ml.so.1`,
    /// then `libnvidia-ml.so`). `None`: only the usual names. Absolute.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "path_lossy")]
    pub nvml_library: Option<PathBuf>,
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            nvml: true,
            nvml_library: None,
        }
    }
}

/// Paths from TOML are UTF-8; one set in code may not be, and is then written
/// lossily rather than failing the whole serialization.
fn path_lossy<S: serde::Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match path {
        Some(path) => s.collect_str(&path.display()),
        None => s.serialize_none(),
    }
}

/// Checks `[gpu]` and fills in defaults.
pub(crate) fn validate(raw: RawGpu, source: &Source<'_>) -> Result<GpuConfig, ConfigError> {
    let nvml_library = match raw.nvml_library {
        Some(path) => Some(validate_library(source, path)?),
        None => None,
    };
    Ok(GpuConfig {
        nvml: raw.nvml.unwrap_or(true),
        nvml_library,
    })
}

fn validate_library(source: &Source<'_>, path: Spanned<String>) -> Result<PathBuf, ConfigError> {
    let span = path.span();
    let path = path.into_inner();
    if path.is_empty() {
        return Err(source.error_at(
            span,
            "gpu.nvml_library",
            "is empty; give the absolute path of libnvidia-ml.so.1, or leave the key out to \
             use the driver's usual location",
        ));
    }
    source.refuse_nul(&span, "gpu.nvml_library", &path)?;
    if !Path::new(&path).is_absolute() {
        return Err(source.error_at(
            span,
            "gpu.nvml_library",
            "must be an absolute path such as \"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\"; \
             a bare name is searched for by the dynamic loader, which headroom already does \
             for libnvidia-ml.so.1 when the key is left out",
        ));
    }
    if path.ends_with('/') {
        return Err(source.error_at(
            span,
            "gpu.nvml_library",
            "names a directory; give the path of the library file itself, e.g. \
             \"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\"",
        ));
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn gpu(body: &str) -> Result<GpuConfig, ConfigError> {
        Config::from_toml_str(&format!("[gpu]\n{body}"), "t.toml").map(|c| c.gpu)
    }

    #[test]
    fn empty_section_takes_defaults() {
        assert_eq!(gpu("").unwrap(), GpuConfig::default());
        assert!(GpuConfig::default().nvml);
    }

    #[test]
    fn nvml_can_be_turned_off() {
        assert!(!gpu("nvml = false").unwrap().nvml);
    }

    #[test]
    fn absolute_library_path_is_kept() {
        let g = gpu("nvml_library = \"/opt/nvidia/lib64/libnvidia-ml.so.1\"").unwrap();
        assert_eq!(
            g.nvml_library,
            Some(PathBuf::from("/opt/nvidia/lib64/libnvidia-ml.so.1"))
        );
    }

    #[test]
    fn relative_library_path_is_refused_with_its_value() {
        let e = gpu("nvml_library = \"libnvidia-ml.so.1\"").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("gpu.nvml_library"));
        assert_eq!(e.value.as_deref(), Some("\"libnvidia-ml.so.1\""));
        assert!(e.message.contains("must be an absolute path"), "{e}");
    }

    #[test]
    fn directory_is_refused() {
        let e = gpu("nvml_library = \"/usr/lib/\"").unwrap_err();
        assert!(e.message.contains("names a directory"), "{e}");
    }
}
