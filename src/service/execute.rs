//! A plan carried out: the service's copy of headroom (owned by root, and
//! checked to be root's alone with every directory above it, before and
//! after), directories created with their modes and owners, files written
//! whole (a sibling renamed over the target), removals, then commands, each
//! followed by what launchd needs before the next (`launchctl.rs`): the wait
//! after a bootout, the retries of a bootstrap. Symbolic links are never
//! written through.

use std::io;
use std::path::Path;

use super::ServiceError;
use super::launchctl::{self, GONE_WAIT, NotLoaded, Waited};
use super::plan::{CommandStep, Contents, CopyStep, DirStep, FileStep, Plan, Settle};
use super::runner::{Runner, SystemRunner};
use crate::os::trusted_path::check_path;

impl Plan {
    /// Carry the plan out: the copy of headroom, directories, files,
    /// removals, then commands, stopping at the first failure that matters.
    /// Symbolic links are never written through.
    pub fn execute(&self) -> Result<(), ServiceError> {
        self.execute_with(&mut SystemRunner::new())
    }

    /// [`Plan::execute`], its commands run by `runner`.
    pub fn execute_with(&self, runner: &mut dyn Runner) -> Result<(), ServiceError> {
        for c in &self.copies {
            install_copy(c)?;
        }
        for d in &self.dirs {
            make_dir(d)?;
        }
        for f in &self.files {
            write_file(f)?;
        }
        for r in &self.remove {
            match std::fs::remove_file(r) {
                Ok(()) => eprintln!("removed {}", r.display()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ServiceError::Io {
                        action: "remove",
                        path: r.clone(),
                        source,
                    });
                }
            }
        }
        run_commands(&self.commands, runner)
    }
}

impl Plan {
    /// Check, before anything is written, that every program the plan runs
    /// is installed (found in `PATH`, or at its path when it names one).
    pub fn preflight(&self) -> Result<(), ServiceError> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        for c in &self.commands {
            let Some(program) = c.argv.first() else {
                continue;
            };
            if !installed(program, &path) {
                return Err(ServiceError::MissingProgram {
                    program: program.clone(),
                    fix: match program.as_str() {
                        "systemctl" => {
                            "It comes with systemd (Debian: apt-get install systemd); where \
                             systemd does not run the machine, run `headroom run` under its own \
                             supervisor instead"
                        }
                        "launchctl" => "It is part of macOS: PATH must include /bin",
                        _ => "Install it, or put it in PATH",
                    },
                });
            }
        }
        Ok(())
    }
}

/// Whether `program` is an executable file: at its path if it holds a
/// `/`, otherwise in a directory of `path` (a `PATH` value).
fn installed(program: &str, path: &std::ffi::OsStr) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    std::env::split_paths(path).any(|dir| executable(&dir.join(program)))
}

fn refuse_symlink(path: &Path) -> Result<Option<std::fs::Metadata>, ServiceError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(ServiceError::Symlink {
            path: path.to_owned(),
        }),
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ServiceError::Io {
            action: "inspect",
            path: path.to_owned(),
            source,
        }),
    }
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ServiceError + 'a {
    move |source| ServiceError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

fn make_dir(d: &DirStep) -> Result<(), ServiceError> {
    use std::os::unix::fs::PermissionsExt;
    refuse_symlink(&d.path)?;
    std::fs::create_dir_all(&d.path).map_err(io_err("create", &d.path))?;
    if let Some((uid, gid)) = d.owner {
        std::os::unix::fs::chown(&d.path, Some(uid), Some(gid))
            .map_err(io_err("change the owner of", &d.path))?;
    }
    std::fs::set_permissions(&d.path, std::fs::Permissions::from_mode(d.mode))
        .map_err(io_err("set the mode of", &d.path))?;
    Ok(())
}

fn write_file(f: &FileStep) -> Result<(), ServiceError> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let existing = refuse_symlink(&f.path)?;
    if let Contents::Log { owner } = &f.contents {
        return make_log(f, *owner, existing.is_some());
    }
    let text = match &f.contents {
        Contents::DefaultConfig if existing.is_some() => {
            eprintln!("kept {}", f.path.display());
            return Ok(());
        }
        Contents::DefaultConfig => crate::config::DEFAULT_TOML.to_owned(),
        Contents::Text(t) => t.clone(),
        Contents::Log { .. } => unreachable!("handled above"),
    };
    // Write a sibling and rename it over the target, so a reader never sees
    // half a file; create_new refuses a planted file or link.
    let tmp = f.path.with_extension("tmp-headroom");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(f.mode)
        .open(&tmp)
        .map_err(io_err("create", &tmp))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_err("write", &tmp))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(f.mode))
        .map_err(io_err("set the mode of", &tmp))?;
    std::fs::rename(&tmp, &f.path).map_err(io_err("replace", &f.path))?;
    eprintln!("wrote {}", f.path.display());
    Ok(())
}

/// The log file of step `f`: created empty (never through a link) if
/// missing, its lines kept if there; then given `owner` and the step's
/// mode, saying what was changed. Anything but a regular file is refused.
fn make_log(f: &FileStep, owner: Option<(u32, u32)>, existed: bool) -> Result<(), ServiceError> {
    use crate::logging::log_file::{Verdict, judge, look};
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    if !existed {
        std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(f.mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&f.path)
            .map_err(io_err("create", &f.path))?;
    }
    let found = look(&f.path).map_err(io_err("inspect", &f.path))?;
    let uid = owner.map_or(found.uid, |(uid, _)| uid);
    match judge(&found, uid, f.mode) {
        Verdict::Refuse(why) => {
            return Err(ServiceError::NotALog {
                path: f.path.clone(),
                why,
            });
        }
        Verdict::Fine if existed => eprintln!("kept {}", f.path.display()),
        Verdict::Fine => {}
        Verdict::Fix(differs) if existed => eprintln!(
            "{} was {}: set to the log's owner and mode",
            f.path.display(),
            differs.join(" and ")
        ),
        Verdict::Fix(_) => {}
    }
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::lchown(&f.path, Some(uid), Some(gid))
            .map_err(io_err("change the owner of", &f.path))?;
    }
    std::fs::set_permissions(&f.path, std::fs::Permissions::from_mode(f.mode))
        .map_err(io_err("set the mode of", &f.path))?;
    if !existed {
        eprintln!("created {} (mode {:04o})", f.path.display(), f.mode);
    }
    Ok(())
}

/// `path` must be root's alone, with every directory above it (for a path
/// not there yet: the nearest directory that is).
fn root_alone(path: &Path) -> Result<(), ServiceError> {
    check_path(path, 0).map_err(|u| ServiceError::UntrustedCopy {
        path: path.to_owned(),
        what: u.what(),
        fix: u.fix("/usr/local/sbin"),
    })
}

/// Create each missing directory above `path`, owned by root (group 0),
/// mode 0755; directories already there are left as they are.
fn make_parents(path: &Path) -> Result<(), ServiceError> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    let missing: Vec<&Path> = path
        .ancestors()
        .skip(1)
        .take_while(|p| !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err())
        .collect();
    for dir in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(0o755).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(source) => {
                return Err(ServiceError::Io {
                    action: "create",
                    path: dir.to_owned(),
                    source,
                });
            }
        }
        std::os::unix::fs::chown(dir, Some(0), Some(0))
            .map_err(io_err("change the owner of", dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
            .map_err(io_err("set the mode of", dir))?;
        eprintln!("created {}", dir.display());
    }
    Ok(())
}

/// Install the service's copy of headroom: `to`'s directories must be
/// root's alone (missing ones are created so); the copy is written to a
/// sibling (owned by root, mode 0755, synced) renamed over `to`, then
/// checked again. When `from` is the running program, its bytes are read
/// from the running program itself (Linux: `/proc/self/exe`), so that a
/// file put at `from` after headroom started is not what gets installed.
fn install_copy(c: &CopyStep) -> Result<(), ServiceError> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    root_alone(&c.to)?;
    make_parents(&c.to)?;
    refuse_symlink(&c.to)?;
    // `from` may name the running program through a link (Homebrew's `opt`
    // path): compare where both lead.
    let running = std::env::current_exe().and_then(|p| p.canonicalize()).ok();
    let read = if running.is_some() && running == c.from.canonicalize().ok() {
        crate::os::this_process::own_image(&c.from)
    } else {
        c.from.clone()
    };
    let mut source = std::fs::File::open(&read).map_err(io_err("read", &read))?;
    let tmp = c.to.with_extension("tmp-headroom");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .open(&tmp)
        .map_err(io_err("create", &tmp))?;
    io::copy(&mut source, &mut file)
        .and_then(|_| file.sync_all())
        .map_err(io_err("write", &tmp))?;
    std::os::unix::fs::chown(&tmp, Some(0), Some(0))
        .map_err(io_err("change the owner of", &tmp))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
        .map_err(io_err("set the mode of", &tmp))?;
    std::fs::rename(&tmp, &c.to).map_err(io_err("replace", &c.to))?;
    root_alone(&c.to)?;
    eprintln!(
        "installed {} (a copy of {}, owned by root, mode 0755)",
        c.to.display(),
        c.from.display()
    );
    Ok(())
}

/// Run the commands in order, each followed by its [`Settle`]; a failure
/// that matters stops the rest.
fn run_commands(commands: &[CommandStep], runner: &mut dyn Runner) -> Result<(), ServiceError> {
    // What the wait after a bootout left unsaid, for a bootstrap that then
    // fails.
    let mut old_job = None;
    for c in commands {
        let shown = c.argv.join(" ");
        if c.argv.is_empty() {
            continue;
        }
        eprintln!("running {shown}");
        if let Settle::Loaded { target } = &c.settle {
            match launchctl::bootstrap(runner, &c.argv, target) {
                Ok(1) => {}
                Ok(tries) => eprintln!(
                    "launchd took the job at try {tries} (it was still busy with the old one)"
                ),
                Err(why) => return Err(not_started(c, target, &why, old_job.as_deref())),
            }
            continue;
        }
        let ran = runner.run(&c.argv);
        for text in [&ran.stdout, &ran.stderr] {
            let text = text.trim_end();
            if !text.is_empty() {
                eprintln!("{}", crate::report::printable(text));
            }
        }
        if !ran.success() && !c.may_fail {
            return Err(ServiceError::Command {
                command: shown,
                status: ran.summary(),
            });
        }
        if let Settle::Gone { target, must_go } = &c.settle {
            match launchctl::wait_gone(runner, target, GONE_WAIT) {
                Waited::Gone { .. } => {}
                Waited::StillLoaded if *must_go => {
                    return Err(ServiceError::StillLoaded {
                        target: target.clone(),
                        waited: GONE_WAIT.as_secs(),
                        by_hand: by_hand(target.starts_with("system/"), &c.argv),
                    });
                }
                Waited::StillLoaded => {
                    old_job = Some(format!(
                        "launchd still had the old job {} s after `{shown}`",
                        GONE_WAIT.as_secs()
                    ));
                }
                Waited::Unknown(said) => {
                    eprintln!(
                        "cannot tell whether launchd still has {target}: launchctl print: {said}"
                    );
                    old_job = Some(format!("`launchctl print {target}` answered {said}"));
                }
            }
        }
    }
    Ok(())
}

/// `argv` as a line to type, with `sudo` in front for the system domain.
fn by_hand(system: bool, argv: &[String]) -> String {
    let words: Vec<String> = argv.iter().map(|w| super::print::shell_word(w)).collect();
    format!("{}{}", if system { "sudo " } else { "" }, words.join(" "))
}

/// The error for a bootstrap (`c`) that left no job loaded: what failed,
/// that the plist is written, and the commands to start and check it.
fn not_started(
    c: &CommandStep,
    target: &str,
    why: &NotLoaded,
    old_job: Option<&str>,
) -> ServiceError {
    let system = c.argv.get(2).is_some_and(|d| d == "system");
    let plist = c.argv.get(3).cloned().unwrap_or_default();
    let mut failed = match why {
        NotLoaded::Failed { tries: 1, last } => format!("`{}` failed ({last})", c.argv.join(" ")),
        NotLoaded::Failed { tries, last } => format!(
            "`{}` failed {tries} times, launchd busy with the label each time but the last \
             ({last})",
            c.argv.join(" ")
        ),
        NotLoaded::Vanished { said } => format!(
            "`{}` succeeded but launchd does not have the job ({said})",
            c.argv.join(" ")
        ),
    };
    if let Some(old) = old_job {
        failed.push_str("; ");
        failed.push_str(old);
    }
    ServiceError::NotStarted {
        failed,
        plist,
        when: if system { "boot" } else { "login" },
        start: by_hand(system, &c.argv),
        check: by_hand(system, &["launchctl".into(), "print".into(), target.into()]),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::service::plan::command;

    #[test]
    fn executing_a_plan_creates_directories_files_and_runs_commands() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("conf/headroom.toml");
        let unit = dir.path().join("units/headroom.service");
        let plan = Plan {
            title: "test".into(),
            notes: vec![],
            copies: vec![],
            dirs: vec![
                DirStep {
                    path: dir.path().join("conf"),
                    mode: 0o755,
                    owner: None,
                    what: "config",
                },
                DirStep {
                    path: dir.path().join("units"),
                    mode: 0o700,
                    owner: None,
                    what: "units",
                },
            ],
            files: vec![
                FileStep {
                    path: config.clone(),
                    mode: 0o644,
                    contents: Contents::DefaultConfig,
                },
                FileStep {
                    path: unit.clone(),
                    mode: 0o600,
                    contents: Contents::Text("[Service]\n".into()),
                },
            ],
            remove: vec![dir.path().join("absent")],
            commands: vec![command(&["false"], true), command(&["true"], false)],
        };
        plan.execute().unwrap();
        assert_eq!(
            std::fs::read_to_string(&config).unwrap(),
            crate::config::DEFAULT_TOML
        );
        assert_eq!(std::fs::read_to_string(&unit).unwrap(), "[Service]\n");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&unit), 0o600);
        assert_eq!(mode(&dir.path().join("units")), 0o700);
        // A second run keeps an edited config and replaces the unit.
        std::fs::write(&config, "# edited\n").unwrap();
        plan.execute().unwrap();
        assert_eq!(std::fs::read_to_string(&config).unwrap(), "# edited\n");
        // A failing command that matters stops the plan with its name.
        let failing = Plan {
            commands: vec![command(&["false"], false)],
            ..plan.clone()
        };
        let err = failing.execute().unwrap_err();
        assert!(err.to_string().contains("`false` failed"), "{err}");
    }

    #[test]
    fn a_copy_where_others_can_write_is_refused_before_anything_is_written() {
        use crate::os::trusted_path::tests::{chmod, private_dir};
        let (dir, _) = private_dir();
        let open = dir.path().join("sbin");
        std::fs::create_dir(&open).unwrap();
        chmod(&open, 0o777);
        let from = dir.path().join("headroom");
        std::fs::write(&from, "#!/bin/sh\n").unwrap();
        let to = open.join("new/headroom");
        let err = install_copy(&CopyStep {
            from,
            to: to.clone(),
        })
        .unwrap_err();
        let said = err.to_string();
        assert!(matches!(err, ServiceError::UntrustedCopy { .. }), "{said}");
        assert!(
            said.starts_with(&format!(
                "cannot install headroom at {} for the service: {} is writable by users other \
                 than root (mode 0777)",
                to.display(),
                open.display()
            )),
            "{said}"
        );
        assert!(said.contains("chmod go-w"), "{said}");
        assert!(!open.join("new").exists(), "nothing is created");
    }

    #[test]
    fn a_plan_whose_program_is_missing_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let unit = dir.path().join("headroom.service");
        let plan = Plan {
            title: "test".into(),
            notes: vec![],
            copies: vec![],
            dirs: vec![],
            files: vec![FileStep {
                path: unit.clone(),
                mode: 0o644,
                contents: Contents::Text("[Service]\n".into()),
            }],
            remove: vec![],
            commands: vec![
                command(&["true"], false),
                command(&["headroom-no-such-program"], false),
            ],
        };
        let err = plan.preflight().unwrap_err();
        assert!(
            err.to_string()
                .starts_with("`headroom-no-such-program` is not installed here"),
            "{err}"
        );
        assert!(!unit.exists());
        assert!(installed(
            "sh",
            std::ffi::OsStr::new("/nonexistent:/bin:/usr/bin")
        ));
        assert!(!installed("sh", std::ffi::OsStr::new("/nonexistent")));
        assert!(installed("/bin/sh", std::ffi::OsStr::new("")));
    }

    /// Answers of a real `launchctl`, as the tests of `launchctl.rs` cite
    /// them: `print` of a job launchd does not have (TOSS-Soft/
    /// toss-agent-runtime#40), of one it is stopping
    /// (kxn/codex-remote-feishu#916), a bootstrap racing the bootout
    /// (pirj/noclamshell#25).
    mod said {
        pub const NOT_FOUND: &str = "Bad request.\nCould not find service \"io.headroom.agent\" in domain for user gui: 501\n";
        pub const STOPPING: &str = "gui/501/io.headroom.agent = {\n\tstate = SIGTERMed\n";
        pub const RUNNING: &str = "gui/501/io.headroom.agent = {\n\tstate = running\n";
        pub const EIO: &str = "Bootstrap failed: 5: Input/output error\nTry re-running the command as root for richer errors.\n";
    }

    const PRINT: &str = "launchctl print gui/501/io.headroom.agent";
    const BOOTOUT: &str = "launchctl bootout gui/501/io.headroom.agent";
    const ENABLE: &str = "launchctl enable gui/501/io.headroom.agent";
    const BOOTSTRAP: &str =
        "launchctl bootstrap gui/501 /Users/ann/Library/LaunchAgents/io.headroom.agent.plist";

    fn agent_commands() -> Vec<CommandStep> {
        use crate::service::testing::params;
        use crate::service::{Manager, Scope, plan_install};
        plan_install(&params(Manager::Launchd, Scope::User))
            .unwrap()
            .commands
    }

    #[test]
    fn a_reinstall_bootstraps_only_once_launchd_has_let_the_old_job_go() {
        use crate::service::runner::replay::{Replay, answer};
        let mut r = Replay::new(vec![
            answer(BOOTOUT, 0, "", ""),
            answer(PRINT, 0, said::STOPPING, ""),
            answer(PRINT, 0, said::STOPPING, ""),
            answer(PRINT, 113, "", said::NOT_FOUND),
            answer(ENABLE, 0, "", ""),
            answer(BOOTSTRAP, 0, "", ""),
            answer(PRINT, 0, said::RUNNING, ""),
        ]);
        run_commands(&agent_commands(), &mut r).unwrap();
        assert!(r.finished());
        // Before, the plan ran bootstrap right after bootout.
        let bootstrap_at = r.ran.iter().position(|c| c == BOOTSTRAP).unwrap();
        assert_eq!(r.ran[bootstrap_at - 2], PRINT);
        assert_eq!(
            r.ran[..bootstrap_at].iter().filter(|c| *c == PRINT).count(),
            3
        );
    }

    #[test]
    fn a_bootstrap_still_racing_after_the_wait_is_retried() {
        use crate::service::runner::replay::{Replay, answer};
        let mut r = Replay::new(vec![
            answer(BOOTOUT, 0, "", ""),
            answer(PRINT, 113, "", said::NOT_FOUND),
            answer(ENABLE, 0, "", ""),
            answer(BOOTSTRAP, 5, "", said::EIO),
            answer(BOOTSTRAP, 0, "", ""),
            answer(PRINT, 0, said::RUNNING, ""),
        ]);
        run_commands(&agent_commands(), &mut r).unwrap();
        assert!(r.finished());
    }

    #[test]
    fn a_bootstrap_that_keeps_failing_says_the_service_is_not_running_and_how_to_start_it() {
        use crate::service::runner::replay::{Replay, answer};
        let mut script = vec![
            answer(BOOTOUT, 3, "", "Boot-out failed: 3: No such process\n"),
            answer(PRINT, 113, "", said::NOT_FOUND),
            answer(ENABLE, 0, "", ""),
        ];
        script.extend(vec![answer(BOOTSTRAP, 5, "", said::EIO); 5]);
        let mut r = Replay::new(script);
        let err = run_commands(&agent_commands(), &mut r).unwrap_err();
        assert!(r.finished());
        let said = err.to_string();
        for needle in [
            "the service is NOT running: ",
            "failed 5 times",
            "(exit 5: Bootstrap failed: 5: Input/output error)",
            "The plist is written (/Users/ann/Library/LaunchAgents/io.headroom.agent.plist)",
            "at the next login",
            &format!("To start it now: {BOOTSTRAP};"),
            &format!("check it with: {PRINT}"),
        ] {
            assert!(said.contains(needle), "{needle:?} in {said}");
        }
        assert!(!said.contains("sudo"), "a user's own domain: {said}");
    }

    #[test]
    fn an_uninstall_whose_job_does_not_go_says_so_and_how_to_stop_it() {
        use crate::service::runner::replay::{Replay, answer};
        use crate::service::testing::params;
        use crate::service::{Manager, Scope, plan_uninstall};
        let commands = plan_uninstall(&params(Manager::Launchd, Scope::System))
            .unwrap()
            .commands;
        let print = "launchctl print system/io.headroom.daemon";
        let loaded = "system/io.headroom.daemon = {\n\tstate = SIGTERMed\n";
        let polls = (GONE_WAIT.as_millis() / launchctl::POLL.as_millis()) as usize + 1;
        let mut script = vec![answer(
            "launchctl bootout system/io.headroom.daemon",
            0,
            "",
            "",
        )];
        script.extend(vec![answer(print, 0, loaded, ""); polls]);
        let mut r = Replay::new(script);
        let err = run_commands(&commands, &mut r).unwrap_err();
        assert!(r.finished());
        let said = err.to_string();
        assert!(
            said.starts_with("launchd still has system/io.headroom.daemon 15 s after the bootout"),
            "{said}"
        );
        assert!(
            said.ends_with("stop it with: sudo launchctl bootout system/io.headroom.daemon"),
            "{said}"
        );
    }

    #[test]
    fn the_log_file_is_created_or_kept_with_its_lines_and_given_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("headroom.log");
        let step = FileStep {
            path: log.clone(),
            mode: 0o600,
            contents: Contents::Log { owner: None },
        };
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        write_file(&step).unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"");
        assert_eq!(mode(&log), 0o600);
        // A log opened to all keeps its lines and loses the others' rights.
        std::fs::write(&log, "a line\n").unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).unwrap();
        write_file(&step).unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "a line\n");
        assert_eq!(mode(&log), 0o600);
        // A directory where the log goes is refused, and left alone.
        std::fs::remove_file(&log).unwrap();
        std::fs::create_dir(&log).unwrap();
        let err = write_file(&step).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("it is not a regular file; move it away and install again"),
            "{err}"
        );
        assert!(log.is_dir());
    }

    #[test]
    fn a_symlink_in_place_of_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "x").unwrap();
        let link = dir.path().join("headroom.service");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = write_file(&FileStep {
            path: link,
            mode: 0o644,
            contents: Contents::Text("y".into()),
        })
        .unwrap_err();
        assert!(matches!(err, ServiceError::Symlink { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "x");
    }
}
