//! `headroom service install|uninstall`: which service the flags and the
//! user running the command mean (scope and manager), what may be done
//! here and what only printed, which headroom binary a system service runs
//! (this one if only root can change it, otherwise a root-owned copy:
//! [`crate::service::choose`]), whether the service manager is there to
//! take it (checked before anything is written), then the plan of
//! [`crate::service`] printed or carried out. Hints name this headroom by
//! its absolute path, so that they work under sudo, whose `secure_path`
//! leaves out `~/.cargo/bin`.

use std::path::PathBuf;

use clap::Subcommand;

use super::{CliError, write_stdout};
use crate::config::Config;
use crate::service::{Manager, Scope};

/// `headroom service …`.
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write the service file, create the log, state and config
    /// directories, and start the service.
    ///
    /// Without --config the service runs with the config in its config
    /// directory, which is created from the embedded default if missing.
    /// Where systemd does not run the machine (most containers), nothing is
    /// written: run `headroom run` under the container's supervisor instead,
    /// or pass --no-start to write the unit for a later boot.
    Install {
        #[command(flatten)]
        target: ServiceTarget,
        /// Config file for the service (validated first).
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the files and commands instead of writing and running them.
        #[arg(long)]
        print: bool,
        /// Write and enable the service, but do not start it: it starts at
        /// the next boot (system) or login (user). Works where systemd does
        /// not run, as when building an image.
        #[arg(long)]
        no_start: bool,
    },
    /// Stop the service and remove its plist or unit. Config, state and
    /// logs stay.
    Uninstall {
        #[command(flatten)]
        target: ServiceTarget,
        /// Print the commands instead of running them.
        #[arg(long)]
        print: bool,
    },
}

/// Which service `headroom service` acts on.
#[derive(Debug, clap::Args)]
pub struct ServiceTarget {
    /// The whole machine, as root: a LaunchDaemon or a systemd system unit
    /// that sees every user's processes. The default when run as root.
    #[arg(long, conflicts_with = "user")]
    system: bool,
    /// This user: a LaunchAgent or a systemd user unit that sees this
    /// user's processes. The default when not root.
    #[arg(long)]
    user: bool,
    /// The service manager to write for (default: launchd on macOS,
    /// systemd on Linux). Another OS's only with --print.
    #[arg(long, value_enum, value_name = "MANAGER")]
    manager: Option<Manager>,
}

impl ServiceTarget {
    /// The scope the flags name; without one, the whole machine for root
    /// (uid 0) and this user for anyone else.
    fn scope(&self, uid: u32) -> Scope {
        if self.system || (!self.user && uid == 0) {
            Scope::System
        } else {
            Scope::User
        }
    }
}

/// Whether `manager`'s `scope` service can be installed (or removed) here by
/// `uid`: only this OS's manager, `--system` only as root, `--user` only
/// as the user it is for (not through sudo). `--print` needs none of this.
fn can_act_here(
    manager: Manager,
    native: Option<Manager>,
    scope: Scope,
    uid: u32,
    install: bool,
    headroom: &str,
) -> Result<(), CliError> {
    if Some(manager) != native {
        return Err(CliError::Usage(format!(
            "{} services are installed on {}; here, only --print works with --manager {}",
            manager.as_str(),
            if manager == Manager::Launchd {
                "macOS"
            } else {
                "Linux"
            },
            manager.as_str()
        )));
    }
    if scope == Scope::System && uid != 0 {
        return Err(CliError::Usage(format!(
            "--system needs root: run `sudo {headroom} service {} --system`, or use --user",
            if install { "install" } else { "uninstall" }
        )));
    }
    if scope == Scope::User && uid == 0 {
        return Err(CliError::Usage(
            "--user acts for the user running the command; run it as that user, without sudo"
                .into(),
        ));
    }
    Ok(())
}

/// Install or remove the service, or print what that would do.
pub fn run(cmd: ServiceCommand) -> Result<(), CliError> {
    let (target, config, print, install, start) = match cmd {
        ServiceCommand::Install {
            target,
            config,
            print,
            no_start,
        } => (target, config, print, true, !no_start),
        ServiceCommand::Uninstall { target, print } => (target, None, print, false, true),
    };
    let uid = crate::os::this_process::effective_uid();
    let scope = target.scope(uid);
    let native = Manager::native();
    let manager = target.manager.or(native).ok_or_else(|| {
        CliError::Usage(
            "headroom knows no service manager on this OS; see the files with --print --manager launchd or --manager systemd".into(),
        )
    })?;
    let running = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| CliError::Runtime(format!("cannot find the headroom executable: {e}")))?;
    // This headroom as a command that works under sudo too.
    let headroom = crate::service::shell_word(&running.display().to_string());
    if !print {
        can_act_here(manager, native, scope, uid, install, &headroom)?;
    }
    // Homebrew's `opt` path rather than the versioned keg `brew upgrade`
    // removes, where it leads to this very file.
    let named = crate::service::stable_path(&running, |p| p.canonicalize().ok());
    // A system service runs as root: only a binary root alone can change
    // (the check follows the `opt` link and its directories).
    let trusted = crate::os::trusted_path::check_path(&named, 0);
    let (binary, source) = crate::service::choose(manager, scope, &named, trusted);
    let config = match config {
        Some(c) => {
            let abs = c
                .canonicalize()
                .map_err(|e| CliError::Usage(format!("cannot use config {}: {e}", c.display())))?;
            Config::load(&abs)?;
            Some(abs)
        }
        None => None,
    };
    // Whether the manager is there to take the service, before anything
    // is written. A printed plan shows the commands for a running manager
    // wherever it is printed, and says what would run here instead.
    let found =
        crate::service::look_for_manager(std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from));
    let here = Some(manager) == native;
    let not_running = here
        .then(|| crate::service::absent(manager, scope, &found, true))
        .flatten();
    if install
        && !print
        && let Some(why) = here
            .then(|| crate::service::absent(manager, scope, &found, start))
            .flatten()
    {
        return Err(CliError::Usage(why.advice(
            &headroom,
            scope,
            config.as_deref(),
        )));
    }
    let activation = crate::service::Activation {
        manager_running: print || not_running.is_none(),
        start,
    };
    let params = crate::service::Params {
        manager,
        scope,
        binary,
        source,
        config,
        home: std::env::var_os("HOME").map(PathBuf::from),
        uid,
    };
    let mut plan = if install {
        crate::service::plan_install_as(&params, activation)
    } else {
        crate::service::plan_uninstall_as(&params, activation)
    }
    .map_err(|e| CliError::Usage(e.to_string()))?;
    if install && params.config.is_none() {
        // An existing config at the default path is what the service will
        // run with: it must be valid.
        let layout = crate::service::layout(&params).map_err(|e| CliError::Usage(e.to_string()))?;
        if layout.config_file.exists() {
            Config::load(&layout.config_file)?;
        }
    }
    if print {
        if let Some(why) = &not_running {
            plan.notes.push(why.printed_note(install, start));
        }
        return write_stdout(&plan.render(manager));
    }
    plan.preflight()
        .map_err(|e| CliError::Usage(e.to_string()))?;
    if install && let Some(n) = crate::service::fragile_note(&params.binary) {
        eprintln!("headroom: note: {n}");
    }
    plan.execute()
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    if install {
        let next = if scope == Scope::System {
            "boot"
        } else {
            "login"
        };
        let done = match (activation.manager_running, start) {
            (true, true) => "installed and started".to_owned(),
            (true, false) => {
                format!("installed and enabled for the next {next}, not started (--no-start)")
            }
            (false, _) => {
                format!("written and enabled for the next {next} under systemd, not started")
            }
        };
        eprintln!(
            "headroom: service {done} ({} {}); check it with `{headroom} doctor`",
            manager.as_str(),
            scope.flag()
        );
        if scope == Scope::System {
            eprintln!(
                "headroom: {}",
                crate::service::binary_note(&params.binary, &params.source)
            );
        }
    } else if activation.manager_running {
        eprintln!("headroom: service stopped and removed");
    } else {
        eprintln!(
            "headroom: service disabled and removed (its manager is not running: nothing to stop)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(system: bool, user: bool) -> ServiceTarget {
        ServiceTarget {
            system,
            user,
            manager: None,
        }
    }

    #[test]
    fn without_a_flag_root_means_the_machine_and_anyone_else_themselves() {
        assert_eq!(target(false, false).scope(0), Scope::System);
        assert_eq!(target(false, false).scope(501), Scope::User);
    }

    #[test]
    fn a_scope_flag_wins_over_the_uid() {
        assert_eq!(target(true, false).scope(501), Scope::System);
        assert_eq!(target(false, true).scope(0), Scope::User);
    }

    #[test]
    fn another_os_manager_is_only_printed() {
        let err = can_act_here(
            Manager::Launchd,
            Some(Manager::Systemd),
            Scope::User,
            501,
            true,
            "headroom",
        )
        .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("installed on macOS"), "{err}");
        let err =
            can_act_here(Manager::Systemd, None, Scope::User, 501, true, "headroom").unwrap_err();
        assert!(err.to_string().contains("installed on Linux"), "{err}");
    }

    #[test]
    fn the_system_service_needs_root_and_names_the_verb_and_this_binary() {
        let err = can_act_here(
            Manager::Systemd,
            Some(Manager::Systemd),
            Scope::System,
            501,
            false,
            "/home/ann/.cargo/bin/headroom",
        )
        .unwrap_err();
        // sudo's secure_path leaves out ~/.cargo/bin: the hint names the
        // binary by its path.
        assert!(
            err.to_string()
                .contains("sudo /home/ann/.cargo/bin/headroom service uninstall --system"),
            "{err}"
        );
        assert!(
            can_act_here(
                Manager::Systemd,
                Some(Manager::Systemd),
                Scope::System,
                0,
                true,
                "headroom"
            )
            .is_ok()
        );
    }

    #[test]
    fn a_user_service_is_not_installed_through_sudo() {
        let native = Some(Manager::Systemd);
        let err =
            can_act_here(Manager::Systemd, native, Scope::User, 0, true, "headroom").unwrap_err();
        assert!(err.to_string().contains("without sudo"), "{err}");
        assert!(can_act_here(Manager::Systemd, native, Scope::User, 501, true, "headroom").is_ok());
    }
}
