//! A plan carried out: the service's copy of headroom (owned by root, and
//! checked to be root's alone with every directory above it, before and
//! after), directories created with their modes and owners, files written
//! whole (a sibling renamed over the target), removals, then commands.
//! Symbolic links are never written through.

use std::io;
use std::path::Path;
use std::process::Command;

use super::ServiceError;
use super::plan::{CommandStep, Contents, CopyStep, DirStep, FileStep, Plan};
use crate::os::trusted_path::check_path;

impl Plan {
    /// Carry the plan out: the copy of headroom, directories, files,
    /// removals, then commands, stopping at the first failure that matters.
    /// Symbolic links are never written through.
    pub fn execute(&self) -> Result<(), ServiceError> {
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
        for c in &self.commands {
            run(c)?;
        }
        Ok(())
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
    let text = match &f.contents {
        Contents::DefaultConfig if existing.is_some() => {
            eprintln!("kept {}", f.path.display());
            return Ok(());
        }
        Contents::DefaultConfig => crate::config::DEFAULT_TOML.to_owned(),
        Contents::Text(t) => t.clone(),
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
    let running = std::env::current_exe().and_then(|p| p.canonicalize()).ok();
    let read = if running.as_deref() == Some(c.from.as_path()) {
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

fn run(c: &CommandStep) -> Result<(), ServiceError> {
    let shown = c.argv.join(" ");
    let Some((program, args)) = c.argv.split_first() else {
        return Ok(());
    };
    eprintln!("running {shown}");
    let status = Command::new(program).args(args).status();
    match status {
        Ok(s) if s.success() => Ok(()),
        _ if c.may_fail => Ok(()),
        Ok(s) => Err(ServiceError::Command {
            command: shown,
            status: s.to_string(),
        }),
        Err(e) => Err(ServiceError::Command {
            command: shown,
            status: e.to_string(),
        }),
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
