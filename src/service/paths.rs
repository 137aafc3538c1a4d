//! Where each service manager and scope keeps headroom's files (the
//! service file, config, state and logs), the command line the service
//! runs, and the checks that a path can go into a service file.

use std::path::{Path, PathBuf};

use super::{AGENT_LABEL, DAEMON_LABEL, Manager, Params, Scope, ServiceError, UNIT_NAME};

/// The paths a manager and scope use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The plist or unit file.
    pub service_file: PathBuf,
    pub config_dir: PathBuf,
    pub config_file: PathBuf,
    /// Where headroom keeps state; created by the installer under launchd,
    /// by systemd itself (`StateDirectory=`) under systemd.
    pub state_dir: PathBuf,
    /// The log directory (launchd's StandardOutPath/StandardErrorPath, or
    /// systemd's `LogsDirectory=`).
    pub log_dir: PathBuf,
}

/// The user's home directory, which must be absolute.
fn home(params: &Params) -> Result<&Path, ServiceError> {
    let home = params.home.as_deref().ok_or(ServiceError::NoHome)?;
    absolute("the home directory", home)?;
    Ok(home)
}

/// `Ok` if `path` is absolute; otherwise an error naming `what` and the path.
pub(super) fn absolute(what: &'static str, path: &Path) -> Result<(), ServiceError> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(ServiceError::NotAbsolute {
            what,
            path: path.to_owned(),
        })
    }
}

/// The paths for these parameters.
pub fn layout(params: &Params) -> Result<Layout, ServiceError> {
    let l = match (params.manager, params.scope) {
        (Manager::Launchd, Scope::System) => {
            let support = PathBuf::from("/Library/Application Support/headroom");
            Layout {
                service_file: PathBuf::from(format!("/Library/LaunchDaemons/{DAEMON_LABEL}.plist")),
                config_file: support.join("headroom.toml"),
                state_dir: support.join("state"),
                config_dir: support,
                log_dir: PathBuf::from("/Library/Logs/headroom"),
            }
        }
        (Manager::Launchd, Scope::User) => {
            let home = home(params)?;
            let support = home.join("Library/Application Support/headroom");
            Layout {
                service_file: home.join(format!("Library/LaunchAgents/{AGENT_LABEL}.plist")),
                config_file: support.join("headroom.toml"),
                state_dir: support.join("state"),
                config_dir: support,
                log_dir: home.join("Library/Logs/headroom"),
            }
        }
        (Manager::Systemd, Scope::System) => Layout {
            service_file: PathBuf::from(format!("/etc/systemd/system/{UNIT_NAME}")),
            config_dir: PathBuf::from("/etc/headroom"),
            config_file: PathBuf::from("/etc/headroom/headroom.toml"),
            state_dir: PathBuf::from("/var/lib/headroom"),
            log_dir: PathBuf::from("/var/log/headroom"),
        },
        (Manager::Systemd, Scope::User) => {
            // systemd's user-mode StateDirectory= and LogsDirectory= live
            // under $XDG_STATE_HOME (~/.local/state); headroom assumes the
            // default location.
            let home = home(params)?;
            Layout {
                service_file: home.join(format!(".config/systemd/user/{UNIT_NAME}")),
                config_dir: home.join(".config/headroom"),
                config_file: home.join(".config/headroom/headroom.toml"),
                state_dir: home.join(".local/state/headroom"),
                log_dir: home.join(".local/state/log/headroom"),
            }
        }
    };
    Ok(l)
}

/// The config file the service will run with.
pub fn config_path(params: &Params, layout: &Layout) -> Result<PathBuf, ServiceError> {
    match &params.config {
        Some(c) => {
            absolute("the config file", c)?;
            Ok(c.clone())
        }
        None => Ok(layout.config_file.clone()),
    }
}

/// `headroom run --config FILE` as an argument vector.
pub fn program_arguments(binary: &Path, config: &Path) -> Vec<String> {
    vec![
        binary.display().to_string(),
        "run".to_owned(),
        "--config".to_owned(),
        config.display().to_string(),
    ]
}

/// Text for a plist or unit: UTF-8 without control characters.
pub(super) fn text_of(
    what: &'static str,
    path: &Path,
    manager: Manager,
) -> Result<String, ServiceError> {
    match path.to_str() {
        Some(s) if !s.chars().any(char::is_control) => Ok(s.to_owned()),
        _ => Err(ServiceError::Unwritable {
            what,
            path: path.to_owned(),
            manager: manager.as_str(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::service::testing::params;
    use crate::service::{launchd_plist, systemd_unit};

    #[test]
    fn relative_and_unprintable_paths_are_refused() {
        let mut p = params(Manager::Launchd, Scope::System);
        p.binary = PathBuf::from("target/debug/headroom");
        assert!(matches!(
            launchd_plist(&p),
            Err(ServiceError::NotAbsolute { .. })
        ));
        let mut p = params(Manager::Systemd, Scope::System);
        p.config = Some(PathBuf::from("/etc/head\nroom.toml"));
        let err = systemd_unit(&p).unwrap_err();
        assert!(err.to_string().contains("control characters"), "{err}");
        let mut p = params(Manager::Launchd, Scope::User);
        p.home = None;
        assert!(matches!(layout(&p), Err(ServiceError::NoHome)));
    }
}
