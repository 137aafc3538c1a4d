//! The install and uninstall plans: every directory, file and command, in
//! order, worked out from [`Params`] without touching the system.

use std::path::PathBuf;

use super::binary::{BinarySource, fragile_note, note};
use super::launchd::{MACOS_ADMIN_GID, launchd_log_file, launchd_plist, launchd_target};
use super::paths::{Layout, config_path, layout};
use super::systemd::{systemctl, systemd_unit};
use super::{AGENT_LABEL, DAEMON_LABEL, Manager, Params, Scope, ServiceError, UNIT_NAME};

/// A directory to create (or fix up) with a mode and, as root, an owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirStep {
    pub path: PathBuf,
    pub mode: u32,
    /// (uid, gid) to chown to; `None` leaves the creator's.
    pub owner: Option<(u32, u32)>,
    pub what: &'static str,
}

/// What a file step writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contents {
    /// This text, replacing the file.
    Text(String),
    /// The embedded default config, only if no file is there.
    DefaultConfig,
    /// A log file: created empty if missing, its lines kept if there, and
    /// in both cases given this owner (uid, gid; `None` leaves the
    /// creator's) and the step's mode. Anything but a regular file there is
    /// refused.
    Log { owner: Option<(u32, u32)> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStep {
    pub path: PathBuf,
    pub mode: u32,
    pub contents: Contents,
}

/// The service's own copy of headroom: `from` copied to `to`, owned by root
/// (group 0), mode 0755, with any missing directory above `to` created the
/// same way; `to` and every directory above it must be root's alone, before
/// and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyStep {
    pub from: PathBuf,
    pub to: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandStep {
    pub argv: Vec<String>,
    /// A failure is expected in some states (bootout of a job that is not
    /// loaded) and does not stop the plan.
    pub may_fail: bool,
    /// What follows the command before the next one runs.
    pub settle: Settle,
}

/// What follows a command before the next one runs: for launchd, which
/// answers before it has done what was asked (`launchctl.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// Nothing: the command's exit status is all.
    Nothing,
    /// `launchctl bootout`: wait, bounded, until `launchctl print target`
    /// no longer finds the job; a job still there after the wait fails the
    /// plan if `must_go` (uninstall), and is left to the bootstrap's retries
    /// otherwise (reinstall).
    Gone { target: String, must_go: bool },
    /// `launchctl bootstrap`: retried while launchd is busy with the label,
    /// then `launchctl print target` must find the job.
    Loaded { target: String },
}

/// Everything an install or uninstall does, in order: the service's copy of
/// headroom, directories, files, removals, commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub title: String,
    pub notes: Vec<String>,
    pub copies: Vec<CopyStep>,
    pub dirs: Vec<DirStep>,
    pub files: Vec<FileStep>,
    pub remove: Vec<PathBuf>,
    pub commands: Vec<CommandStep>,
}

impl Plan {
    /// The service file itself (0644), and for a per-user service the
    /// directory it goes in (`what` names that directory for people); a
    /// system service's directory exists already.
    fn add_service_file(&mut self, l: &Layout, system: bool, what: &'static str, text: String) {
        if let Some(parent) = l.service_file.parent().filter(|_| !system) {
            self.dirs.push(DirStep {
                path: parent.to_owned(),
                mode: 0o755,
                owner: None,
                what,
            });
        }
        self.files.push(FileStep {
            path: l.service_file.clone(),
            mode: 0o644,
            contents: Contents::Text(text),
        });
    }
}

/// How a plan's commands bring the service up or down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activation {
    /// The manager runs and takes commands: systemd is PID 1 (and, for a
    /// user service, this user's manager runs). Where it does not,
    /// `systemctl` can only enable or disable a unit on files.
    pub manager_running: bool,
    /// Start the service now (install); false for `--no-start`, which
    /// writes and enables it for the next boot or login only.
    pub start: bool,
}

impl Activation {
    /// A running manager, and the service started at once.
    pub const NOW: Activation = Activation {
        manager_running: true,
        start: true,
    };
}

/// A command step of these words.
pub(super) fn command(argv: &[&str], may_fail: bool) -> CommandStep {
    CommandStep {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        may_fail,
        settle: Settle::Nothing,
    }
}

/// `launchctl bootout TARGET`, which may fail (the job was not loaded),
/// then the wait until launchd no longer has the job.
fn bootout(target: &str, must_go: bool) -> CommandStep {
    CommandStep {
        settle: Settle::Gone {
            target: target.to_owned(),
            must_go,
        },
        ..command(&["launchctl", "bootout", target], true)
    }
}

/// The plan for `headroom service install` on a running manager, the
/// service started at once.
pub fn plan_install(params: &Params) -> Result<Plan, ServiceError> {
    plan_install_as(params, Activation::NOW)
}

/// The plan for `headroom service install`, brought up as `activation`
/// says.
pub fn plan_install_as(params: &Params, activation: Activation) -> Result<Plan, ServiceError> {
    let l = layout(params)?;
    let config = config_path(params, &l)?;
    let system = params.scope == Scope::System;
    let mut plan = Plan {
        title: format!(
            "headroom service install {} ({})",
            params.scope.flag(),
            params.manager.as_str()
        ),
        notes: Vec::new(),
        copies: Vec::new(),
        dirs: Vec::new(),
        files: Vec::new(),
        remove: Vec::new(),
        commands: Vec::new(),
    };
    let private = if system { 0o750 } else { 0o700 };
    if system {
        plan.notes.push(note(&params.binary, &params.source));
    }
    if let Some(n) = fragile_note(&params.binary) {
        plan.notes.push(n);
    }
    if let BinarySource::Copy { from, .. } = &params.source {
        plan.copies.push(CopyStep {
            from: from.clone(),
            to: params.binary.clone(),
        });
    }
    if params.config.is_none() {
        plan.dirs.push(DirStep {
            path: l.config_dir.clone(),
            mode: 0o755,
            owner: system.then_some((0, 0)),
            what: "config",
        });
        plan.files.push(FileStep {
            path: config.clone(),
            mode: 0o644,
            contents: Contents::DefaultConfig,
        });
    }
    match params.manager {
        Manager::Launchd => {
            plan.notes.push(match params.scope {
                Scope::System => format!(
                    "LaunchDaemon {DAEMON_LABEL}: runs as root at boot and watches every user's processes"
                ),
                Scope::User => format!(
                    "LaunchAgent {AGENT_LABEL}: runs as you at login and watches your processes only"
                ),
            });
            plan.dirs.push(DirStep {
                path: l.log_dir.clone(),
                mode: private,
                owner: system.then_some((0, MACOS_ADMIN_GID)),
                what: if system {
                    "logs (admins may read them)"
                } else {
                    "logs"
                },
            });
            plan.dirs.push(DirStep {
                path: l.state_dir.clone(),
                mode: 0o700,
                owner: system.then_some((0, 0)),
                what: "state",
            });
            // The log file launchd opens for the job, made before the job
            // starts so that its owner and mode are the installer's
            // choice: root's and readable by admins like its directory, or
            // the user's alone.
            plan.files.push(FileStep {
                path: launchd_log_file(&l),
                mode: if system { 0o640 } else { 0o600 },
                contents: Contents::Log {
                    owner: system.then_some((0, MACOS_ADMIN_GID)),
                },
            });
            plan.add_service_file(&l, system, "LaunchAgents", launchd_plist(params)?);
            let (domain, target) = launchd_target(params);
            let plist = l.service_file.display().to_string();
            // A job already loaded (reinstall) must be booted out first:
            // bootstrap refuses a loaded label. enable before bootstrap:
            // bootstrap refuses a disabled one, and launchd loads no
            // disabled job at boot either.
            plan.commands = if activation.start {
                vec![
                    bootout(&target, false),
                    command(&["launchctl", "enable", &target], false),
                    CommandStep {
                        settle: Settle::Loaded {
                            target: target.clone(),
                        },
                        ..command(&["launchctl", "bootstrap", &domain, &plist], false)
                    },
                ]
            } else {
                plan.notes.push(format!(
                    "--no-start: launchd loads the job at the next {}; a job loaded now keeps running as it is",
                    if system { "boot" } else { "login" }
                ));
                vec![command(&["launchctl", "enable", &target], false)]
            };
        }
        Manager::Systemd => {
            plan.notes.push(match params.scope {
                Scope::System => format!(
                    "systemd unit {UNIT_NAME}: runs as root with five capabilities at boot; {} and {} are created by systemd",
                    l.state_dir.display(),
                    l.log_dir.display()
                ),
                Scope::User => format!(
                    "systemd user unit {UNIT_NAME}: runs as you while you are logged in (loginctl enable-linger to keep it running); logs go to journalctl --user -u headroom"
                ),
            });
            plan.add_service_file(&l, system, "systemd user units", systemd_unit(params)?);
            let when = if system { "boot" } else { "login" };
            plan.commands = match (activation.manager_running, activation.start) {
                (true, true) => vec![
                    systemctl(params, &["daemon-reload"]),
                    systemctl(params, &["enable", UNIT_NAME]),
                    systemctl(params, &["restart", UNIT_NAME]),
                ],
                (true, false) => {
                    plan.notes.push(format!(
                        "--no-start: the unit is enabled and starts at the next {when}, or with systemctl{} start headroom",
                        if system { "" } else { " --user" }
                    ));
                    vec![
                        systemctl(params, &["daemon-reload"]),
                        systemctl(params, &["enable", UNIT_NAME]),
                    ]
                }
                (false, _) => {
                    plan.notes.push(format!(
                        "systemd is not running here: the unit is enabled on files (systemctl enable links it into {}) and starts at the next {when} under systemd",
                        if system { "multi-user.target.wants" } else { "default.target.wants" }
                    ));
                    vec![systemctl(params, &["enable", UNIT_NAME])]
                }
            };
        }
    }
    Ok(plan)
}

/// The plan for `headroom service uninstall` on a running manager: stop the
/// service and remove its file. Config, state and logs stay.
pub fn plan_uninstall(params: &Params) -> Result<Plan, ServiceError> {
    plan_uninstall_as(params, Activation::NOW)
}

/// The plan for `headroom service uninstall`; where the manager does not
/// run (`activation`), the unit is only disabled on files and removed.
pub fn plan_uninstall_as(params: &Params, activation: Activation) -> Result<Plan, ServiceError> {
    let l = layout(params)?;
    let mut plan = Plan {
        title: format!(
            "headroom service uninstall {} ({})",
            params.scope.flag(),
            params.manager.as_str()
        ),
        notes: vec![format!(
            "kept: config {}, state {}, logs {}",
            l.config_dir.display(),
            l.state_dir.display(),
            l.log_dir.display()
        )],
        copies: Vec::new(),
        dirs: Vec::new(),
        files: Vec::new(),
        remove: vec![l.service_file.clone()],
        commands: Vec::new(),
    };
    if params.scope == Scope::System {
        plan.notes.push(format!(
            "kept: {}, if the install put a copy of headroom there",
            super::binary::root_binary(params.manager).display()
        ));
    }
    match params.manager {
        Manager::Launchd => {
            let (_, target) = launchd_target(params);
            plan.commands = vec![bootout(&target, true)];
        }
        Manager::Systemd if !activation.manager_running => {
            // Offline, disable removes the unit's links; a unit that was
            // never enabled makes it fail, which is fine.
            let mut disable = systemctl(params, &["disable", UNIT_NAME]);
            disable.may_fail = true;
            plan.commands = vec![disable];
        }
        Manager::Systemd => {
            let mut disable = systemctl(params, &["disable", "--now", UNIT_NAME]);
            disable.may_fail = true;
            plan.commands = vec![disable, systemctl(params, &["daemon-reload"])];
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::service::testing::params;

    #[test]
    fn install_plans_boot_out_enable_and_bootstrap_in_that_order() {
        let plan = plan_install(&params(Manager::Launchd, Scope::User)).unwrap();
        let cmds: Vec<String> = plan.commands.iter().map(|c| c.argv.join(" ")).collect();
        assert_eq!(
            cmds,
            [
                "launchctl bootout gui/501/io.headroom.agent",
                "launchctl enable gui/501/io.headroom.agent",
                "launchctl bootstrap gui/501 /Users/ann/Library/LaunchAgents/io.headroom.agent.plist"
            ]
        );
        assert!(plan.commands[0].may_fail && !plan.commands[2].may_fail);
        let dirs: Vec<_> = plan.dirs.iter().map(|d| (d.path.clone(), d.mode)).collect();
        assert!(dirs.contains(&(PathBuf::from("/Users/ann/Library/Logs/headroom"), 0o700)));
        assert!(plan.files.contains(&FileStep {
            path: PathBuf::from("/Users/ann/Library/Logs/headroom/headroom.log"),
            mode: 0o600,
            contents: Contents::Log { owner: None },
        }));
        assert!(
            matches!(&plan.commands[0].settle, Settle::Gone { target, must_go: false } if target == "gui/501/io.headroom.agent")
        );
        assert!(
            matches!(&plan.commands[2].settle, Settle::Loaded { target } if target == "gui/501/io.headroom.agent")
        );
        // The LaunchDaemon's log is root's, readable by admins.
        let plan = plan_install(&params(Manager::Launchd, Scope::System)).unwrap();
        assert!(plan.files.contains(&FileStep {
            path: PathBuf::from("/Library/Logs/headroom/headroom.log"),
            mode: 0o640,
            contents: Contents::Log {
                owner: Some((0, MACOS_ADMIN_GID))
            },
        }));
        assert!(
            plan.files
                .iter()
                .any(|f| f.contents == Contents::DefaultConfig)
        );
    }

    #[test]
    fn a_given_config_is_used_as_is_and_not_created() {
        let mut p = params(Manager::Systemd, Scope::System);
        p.config = Some(PathBuf::from("/srv/ml/headroom.toml"));
        let plan = plan_install(&p).unwrap();
        assert!(
            plan.files
                .iter()
                .all(|f| f.contents != Contents::DefaultConfig)
        );
        assert!(
            plan.dirs.is_empty(),
            "systemd creates the state and log directories"
        );
        let unit = match &plan.files[0].contents {
            Contents::Text(t) => t.clone(),
            Contents::DefaultConfig | Contents::Log { .. } => unreachable!(),
        };
        assert!(unit.contains("--config /srv/ml/headroom.toml\n"));
        let cmds: Vec<String> = plan.commands.iter().map(|c| c.argv.join(" ")).collect();
        assert_eq!(
            cmds,
            [
                "systemctl daemon-reload",
                "systemctl enable headroom.service",
                "systemctl restart headroom.service"
            ]
        );
    }

    #[test]
    fn a_system_install_says_which_binary_it_runs_and_copies_one_others_can_change() {
        let p = params(Manager::Systemd, Scope::System);
        let plan = plan_install(&p).unwrap();
        assert!(plan.copies.is_empty());
        assert!(
            plan.notes.contains(
                &"the service runs /usr/local/bin/headroom, which only root can change".to_string()
            ),
            "{:?}",
            plan.notes
        );
        let mut p = params(Manager::Launchd, Scope::System);
        p.binary = PathBuf::from("/usr/local/libexec/headroom/headroom");
        p.source = BinarySource::Copy {
            from: PathBuf::from("/usr/local/bin/headroom"),
            why: "/usr/local/bin is owned by uid 501, not by root".into(),
        };
        let plan = plan_install(&p).unwrap();
        assert_eq!(
            plan.copies,
            [CopyStep {
                from: PathBuf::from("/usr/local/bin/headroom"),
                to: PathBuf::from("/usr/local/libexec/headroom/headroom"),
            }]
        );
        assert!(
            plan.notes[0].starts_with("/usr/local/bin is owned by uid 501, not by root: "),
            "{:?}",
            plan.notes
        );
        // A user service says nothing of the kind.
        let plan = plan_install(&params(Manager::Launchd, Scope::User)).unwrap();
        assert!(plan.copies.is_empty());
        assert!(
            !plan.notes.iter().any(|n| n.contains("only root")),
            "{:?}",
            plan.notes
        );
    }

    #[test]
    fn uninstall_boots_out_and_removes_only_the_service_file() {
        let plan = plan_uninstall(&params(Manager::Launchd, Scope::System)).unwrap();
        assert_eq!(
            plan.remove,
            [PathBuf::from(
                "/Library/LaunchDaemons/io.headroom.daemon.plist"
            )]
        );
        assert_eq!(
            plan.commands[0].argv.join(" "),
            "launchctl bootout system/io.headroom.daemon"
        );
        let plan = plan_uninstall(&params(Manager::Systemd, Scope::User)).unwrap();
        let cmds: Vec<String> = plan.commands.iter().map(|c| c.argv.join(" ")).collect();
        assert_eq!(
            cmds,
            [
                "systemctl --user disable --now headroom.service",
                "systemctl --user daemon-reload"
            ]
        );
    }

    fn commands(plan: &Plan) -> Vec<String> {
        plan.commands.iter().map(|c| c.argv.join(" ")).collect()
    }

    #[test]
    fn no_start_enables_the_service_for_the_next_boot_and_starts_nothing() {
        let later = Activation {
            manager_running: true,
            start: false,
        };
        let plan = plan_install_as(&params(Manager::Systemd, Scope::System), later).unwrap();
        assert_eq!(
            commands(&plan),
            [
                "systemctl daemon-reload",
                "systemctl enable headroom.service"
            ]
        );
        assert!(
            plan.notes.iter().any(|n| n.starts_with("--no-start: ")),
            "{:?}",
            plan.notes
        );
        let plan = plan_install_as(&params(Manager::Launchd, Scope::User), later).unwrap();
        assert_eq!(
            commands(&plan),
            ["launchctl enable gui/501/io.headroom.agent"]
        );
        assert!(
            plan.notes.iter().any(|n| n.contains("at the next login")),
            "{:?}",
            plan.notes
        );
    }

    #[test]
    fn where_systemd_does_not_run_the_unit_is_only_enabled_and_removed_on_files() {
        let offline = Activation {
            manager_running: false,
            start: false,
        };
        let plan = plan_install_as(&params(Manager::Systemd, Scope::System), offline).unwrap();
        assert_eq!(commands(&plan), ["systemctl enable headroom.service"]);
        assert!(
            plan.notes
                .iter()
                .any(|n| n.starts_with("systemd is not running here: the unit is enabled on files")),
            "{:?}",
            plan.notes
        );
        // The unit and config are written all the same.
        assert!(
            plan.files
                .iter()
                .any(|f| f.path == Path::new("/etc/systemd/system/headroom.service"))
        );
        let plan = plan_uninstall_as(&params(Manager::Systemd, Scope::User), offline).unwrap();
        assert_eq!(
            commands(&plan),
            ["systemctl --user disable headroom.service"]
        );
        assert!(plan.commands[0].may_fail);
        assert_eq!(
            plan.remove,
            [PathBuf::from(
                "/Users/ann/.config/systemd/user/headroom.service"
            )]
        );
    }

    #[test]
    fn a_build_output_or_a_cellar_binary_gets_a_note_that_fits_it() {
        let mut p = params(Manager::Systemd, Scope::User);
        p.binary = PathBuf::from("/home/ann/src/headroom/target/release/headroom");
        let plan = plan_install(&p).unwrap();
        let note = plan
            .notes
            .iter()
            .find(|n| n.contains("target/release"))
            .expect("a note on the build output");
        assert!(note.contains("cargo install --locked --path ."), "{note}");
        assert!(!note.contains("brew"), "{note}");
        p.binary = PathBuf::from("/opt/homebrew/Cellar/headroom/0.4.0/bin/headroom");
        let plan = plan_install(&p).unwrap();
        assert!(
            plan.notes
                .iter()
                .any(|n| n.contains("brew services start headroom")),
            "{:?}",
            plan.notes
        );
    }
}
