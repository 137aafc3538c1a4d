//! Whether the service manager is there to take the service, found before
//! anything is written: systemd runs the machine when it made
//! `/run/systemd/system/` (the test of `sd_booted(3)`), and a user service
//! also needs that user's manager (its socket
//! `$XDG_RUNTIME_DIR/systemd/private`). Most containers run something else
//! as PID 1 (a shell, tini, the job itself), and `systemctl` can then only
//! edit files; there the installer stops and says what to do instead.
//! launchd is always there on macOS.

use std::path::{Path, PathBuf};

use super::{Manager, Scope};

/// What was found of systemd on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// `/run/systemd/system/` is a directory: systemd is PID 1.
    pub booted: bool,
    /// The name of PID 1 (`/proc/1/comm`), where it can be read.
    pub pid1: Option<String>,
    /// `$XDG_RUNTIME_DIR`, where set.
    pub runtime_dir: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR/systemd/private` exists: this user's manager runs.
    pub user_manager: bool,
}

/// Look at this machine: `/run/systemd/system`, `/proc/1/comm`, and the
/// user's runtime directory (from `runtime_dir`, `$XDG_RUNTIME_DIR`).
pub fn look(runtime_dir: Option<PathBuf>) -> Found {
    let pid1 = std::fs::read("/proc/1/comm").ok().map(|b| {
        String::from_utf8_lossy(&b)
            .trim_end()
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect()
    });
    let user_manager = runtime_dir
        .as_deref()
        .is_some_and(|d| d.join("systemd/private").exists());
    Found {
        booted: Path::new("/run/systemd/system").is_dir(),
        pid1,
        runtime_dir,
        user_manager,
    }
}

/// Why the manager cannot take a service here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Absent {
    /// systemd is not PID 1: `pid1` runs the machine (or container).
    NotBooted { pid1: Option<String> },
    /// systemd runs the machine, but `XDG_RUNTIME_DIR` is not set, so
    /// `systemctl --user` cannot reach this user's manager.
    NoRuntimeDir,
    /// systemd runs the machine, but no manager of this user runs (no
    /// socket in `runtime_dir`).
    NoUserManager { runtime_dir: PathBuf },
}

/// Whether `manager` can take a `scope` service here, from what was
/// `found`; `start` is false for `--no-start`, which needs no running
/// manager (`systemctl enable` edits files where systemd is not running).
/// `None` where it can.
pub fn absent(manager: Manager, scope: Scope, found: &Found, start: bool) -> Option<Absent> {
    if manager == Manager::Launchd {
        return None;
    }
    if !found.booted {
        return start.then(|| Absent::NotBooted {
            pid1: found.pid1.clone(),
        });
    }
    if scope == Scope::User && !found.user_manager {
        return Some(match &found.runtime_dir {
            None => Absent::NoRuntimeDir,
            Some(d) => Absent::NoUserManager {
                runtime_dir: d.clone(),
            },
        });
    }
    None
}

/// Whether the commands of a plan can talk to a running manager: false
/// where systemd is not PID 1, or, for a user service, where this user's
/// manager is not reachable.
pub fn running(manager: Manager, scope: Scope, found: &Found) -> bool {
    manager == Manager::Launchd || absent(manager, scope, found, true).is_none()
}

impl Absent {
    /// One line for a plan printed on this machine, whose commands are
    /// those for a running manager: what `install` (with `start`, or
    /// `--no-start`) or `uninstall` would do here instead.
    pub fn printed_note(&self, install: bool, start: bool) -> String {
        let why = match self {
            Absent::NotBooted { pid1: Some(name) } => {
                format!("systemd is not running here (PID 1 is `{name}`)")
            }
            Absent::NotBooted { pid1: None } => "systemd is not running here".to_owned(),
            Absent::NoRuntimeDir => "XDG_RUNTIME_DIR is not set".to_owned(),
            Absent::NoUserManager { .. } => "your systemd user manager is not running".to_owned(),
        };
        let offline = matches!(self, Absent::NotBooted { .. });
        match (install, start, offline) {
            (true, true, true) => format!(
                "{why}: install would stop before writing anything and say what to do \
                 instead; with --no-start it writes the files and runs only `systemctl enable`"
            ),
            (true, false, true) => format!(
                "{why}: of the commands below, install would run only `systemctl enable`, \
                 which works on files"
            ),
            (true, _, false) => format!("{why}: install would stop before writing anything"),
            (false, _, _) => format!(
                "{why}: of the commands below, uninstall would run only `systemctl disable`"
            ),
        }
    }

    /// Why nothing was installed and what to do instead: `headroom` is the
    /// command that runs this headroom (its absolute path, so that it works
    /// under sudo) and `config` the `--config` given, if any.
    pub fn advice(&self, headroom: &str, scope: Scope, config: Option<&Path>) -> String {
        let config = config
            .map(|c| {
                format!(
                    " --config {}",
                    super::print::shell_word(&c.display().to_string())
                )
            })
            .unwrap_or_default();
        let flag = scope.flag();
        match self {
            Absent::NotBooted { pid1 } => {
                let who = match pid1 {
                    Some(name) => format!("PID 1 is `{name}`, not systemd"),
                    None => "PID 1 is not systemd".to_owned(),
                };
                format!(
                    "systemd is not running here ({who}, and /run/systemd/system, which \
                     systemd makes when it boots a machine, does not exist), as in most \
                     containers: there is no service manager to install into, and nothing \
                     was written. Instead:\n\
                     \x20 - in a container, run the daemon in the foreground as its entrypoint \
                     or under its own supervisor (supervisord, s6, runit), as root to watch \
                     every process in the container: {headroom} run{config}\n\
                     \x20 - on Kubernetes, run it on every node with the DaemonSet in \
                     deploy/kubernetes/ of headroom's source (`kubectl apply -k \
                     deploy/kubernetes`)\n\
                     \x20 - to write and enable the unit now for a later boot under systemd \
                     (an image being built): {headroom} service install {flag}{config} \
                     --no-start\n\
                     \x20 - to see the files and commands without writing anything: \
                     {headroom} service install {flag}{config} --print"
                )
            }
            Absent::NoRuntimeDir => format!(
                "systemctl --user cannot reach your systemd user manager: XDG_RUNTIME_DIR is \
                 not set (as after `su` or `sudo -u`, which start no login session); nothing \
                 was written. Log in as that user (ssh, a desktop session), or set \
                 XDG_RUNTIME_DIR=/run/user/$(id -u) where that user's manager runs, and run \
                 {headroom} service install {flag}{config} again"
            ),
            Absent::NoUserManager { runtime_dir } => format!(
                "your systemd user manager is not running ({} does not exist); nothing was \
                 written. It runs while you are logged in; `loginctl enable-linger` keeps it \
                 running without a login. Then run {headroom} service install {flag}{config} \
                 again, or install the system service as root instead: sudo {headroom} \
                 service install --system",
                runtime_dir.join("systemd/private").display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(booted: bool, user_manager: bool) -> Found {
        Found {
            booted,
            pid1: Some("tini".into()),
            runtime_dir: Some(PathBuf::from("/run/user/1000")),
            user_manager,
        }
    }

    #[test]
    fn a_machine_systemd_does_not_run_takes_no_service_unless_it_is_only_written() {
        let f = found(false, false);
        for scope in [Scope::System, Scope::User] {
            assert_eq!(
                absent(Manager::Systemd, scope, &f, true),
                Some(Absent::NotBooted {
                    pid1: Some("tini".into())
                })
            );
            assert_eq!(absent(Manager::Systemd, scope, &f, false), None);
            assert!(!running(Manager::Systemd, scope, &f));
        }
    }

    #[test]
    fn a_user_service_needs_the_users_manager() {
        assert_eq!(
            absent(Manager::Systemd, Scope::User, &found(true, false), false),
            Some(Absent::NoUserManager {
                runtime_dir: PathBuf::from("/run/user/1000")
            })
        );
        let mut f = found(true, false);
        f.runtime_dir = None;
        assert_eq!(
            absent(Manager::Systemd, Scope::User, &f, true),
            Some(Absent::NoRuntimeDir)
        );
        assert_eq!(absent(Manager::Systemd, Scope::System, &f, true), None);
        assert_eq!(
            absent(Manager::Systemd, Scope::User, &found(true, true), true),
            None
        );
        assert!(running(Manager::Systemd, Scope::User, &found(true, true)));
    }

    #[test]
    fn launchd_is_always_there() {
        assert_eq!(
            absent(Manager::Launchd, Scope::System, &found(false, false), true),
            None
        );
    }

    #[test]
    fn the_advice_says_why_and_gives_commands_that_work_under_sudo() {
        let said = Absent::NotBooted {
            pid1: Some("tini".into()),
        }
        .advice(
            "/home/ann/.cargo/bin/headroom",
            Scope::System,
            Some(Path::new("/etc/my headroom.toml")),
        );
        for needle in [
            "systemd is not running here (PID 1 is `tini`, not systemd,",
            "nothing was written",
            "/home/ann/.cargo/bin/headroom run --config '/etc/my headroom.toml'\n",
            "deploy/kubernetes",
            "/home/ann/.cargo/bin/headroom service install --system --config '/etc/my headroom.toml' --no-start\n",
            "--print",
        ] {
            assert!(said.contains(needle), "{needle:?} in {said}");
        }
        let said = Absent::NoUserManager {
            runtime_dir: PathBuf::from("/run/user/1000"),
        }
        .advice("/usr/bin/headroom", Scope::User, None);
        assert!(
            said.contains("/run/user/1000/systemd/private does not exist"),
            "{said}"
        );
        assert!(said.contains("loginctl enable-linger"), "{said}");
    }

    #[test]
    fn a_printed_plan_says_what_would_run_here() {
        let not_booted = Absent::NotBooted {
            pid1: Some("bash".into()),
        };
        assert_eq!(
            not_booted.printed_note(true, true),
            "systemd is not running here (PID 1 is `bash`): install would stop before writing \
             anything and say what to do instead; with --no-start it writes the files and runs \
             only `systemctl enable`"
        );
        assert!(
            not_booted
                .printed_note(true, false)
                .ends_with("install would run only `systemctl enable`, which works on files")
        );
        assert!(
            not_booted
                .printed_note(false, true)
                .ends_with("uninstall would run only `systemctl disable`")
        );
        assert_eq!(
            Absent::NoRuntimeDir.printed_note(true, false),
            "XDG_RUNTIME_DIR is not set: install would stop before writing anything"
        );
    }
}
