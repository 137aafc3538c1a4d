//! Who can change what a root daemon trusts: its config file and the hook
//! programs the config names.
//!
//! A daemon running as root that reads its rules from a file a user can
//! write lets that user make root signal any process; a hook program a user
//! can write runs that user's code as root. So `headroom run`, as root,
//! refuses a config file, and a hook program, unless it and every directory
//! on the way to it can be changed by root alone: owned by root (or the
//! daemon's own uid) and writable by neither group nor others. A sticky
//! directory such as `/tmp` counts as writable by others, as in OpenSSH's
//! `StrictModes`: keep such files where only root writes, e.g. `/etc/headroom`.
//!
//! The path is walked the way the kernel resolves it: each directory passed
//! through is checked, and a symbolic link is followed into its target, whose
//! directories are checked in turn (the link itself is as safe as the
//! directory that holds it).
//!
//! Owner and mode come from `std::os::unix::fs::MetadataExt`, the same on
//! every Unix. Access control lists: on Linux a POSIX ACL that lets another
//! user or group write also sets the group write bit (the ACL's mask), so
//! the mode check refuses it and `chmod g-w` takes the right away; on macOS
//! an extended ACL (`chmod +a`) does not show in the mode, so each path's
//! ACL is read as well ([`crate::sample::acl_write_rights`]) and any entry
//! that lets someone write is refused.

use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

use super::{Config, ConfigError};
use crate::policy::Action;

/// Symbolic links followed before the path is given up on (Linux's limit).
const MAX_LINKS: u32 = 40;

/// What makes a file or directory untrusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Group- or other-writable (`mode` is the permission bits, with the
    /// sticky bit).
    Writable { mode: u32 },
    /// Owned by a user other than root and the daemon's.
    Owner { uid: u32 },
    /// An access control list grants these rights (as `ls -le` names them)
    /// to someone, beyond the mode bits.
    AccessList { rights: Vec<&'static str> },
    /// Could not be examined.
    Unreadable { error: String },
    /// More than [`MAX_LINKS`] symbolic links on the way.
    TooManyLinks,
}

/// A path on the way to a trusted file that others could change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// The file or directory at fault (the file checked, or one above it).
    pub path: PathBuf,
    pub problem: Problem,
}

impl Untrusted {
    /// Is the path at fault a shared directory such as `/tmp` (sticky and
    /// writable by all), whose mode must not be changed?
    pub fn is_shared_directory(&self) -> bool {
        matches!(self.problem, Problem::Writable { mode } if mode & 0o1002 == 0o1002)
    }

    /// What is wrong with the path, in words.
    pub fn what(&self) -> String {
        let p = self.path.display();
        match &self.problem {
            Problem::Writable { mode } if self.is_shared_directory() => {
                format!("{p} is a shared directory that every user can write to (mode {mode:04o})")
            }
            Problem::Writable { mode } => {
                format!("{p} is writable by users other than root (mode {mode:04o})")
            }
            Problem::Owner { uid } => format!("{p} is owned by uid {uid}, not by root"),
            Problem::AccessList { rights } => format!(
                "{p} has an access control list that grants {} to others (see `ls -led {p}`)",
                rights.join(",")
            ),
            Problem::Unreadable { error } => format!("{p} cannot be examined: {error}"),
            Problem::TooManyLinks => format!("{p}: more than {MAX_LINKS} symbolic links"),
        }
    }

    /// What to do about it.
    pub fn fix(&self, keep_in: &str) -> String {
        let p = self.path.display();
        match &self.problem {
            _ if self.is_shared_directory() => {
                format!("keep the file in a directory only root can write, such as {keep_in}")
            }
            Problem::Writable { .. } | Problem::Owner { .. } => {
                format!("fix it with `chown root:root {p} && chmod go-w {p}`")
            }
            Problem::AccessList { .. } => {
                format!("remove the access control list with `chmod -N {p}`")
            }
            Problem::Unreadable { .. } | Problem::TooManyLinks => {
                format!("give a plain path that root can read, such as {keep_in}")
            }
        }
    }
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what())
    }
}

/// Check that only root (uid 0) and `trusted_uid` can change `path`: the
/// file (if it exists) and every directory on the way to it, links
/// followed. A relative path is taken from the working directory. A path
/// that does not exist is trusted if the last directory that does exist is:
/// then no one else can create it.
pub fn check_path(path: &Path, trusted_uid: u32) -> Result<(), Untrusted> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| Untrusted {
                path: path.to_path_buf(),
                problem: Problem::Unreadable {
                    error: format!("the working directory is unknown: {e}"),
                },
            })?
            .join(path)
    };
    let mut links = 0;
    walk(&absolute, trusted_uid, &mut links).map(drop)
}

/// Resolve `path` (absolute) component by component, checking each
/// directory entered and the final file; returns the resolved path, or
/// `None` once a component does not exist.
fn walk(path: &Path, trusted_uid: u32, links: &mut u32) -> Result<Option<PathBuf>, Untrusted> {
    let mut at = PathBuf::from("/");
    check_entry(&at, trusted_uid)?;
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            // `at` holds no links, so its parent is the real one.
            Component::ParentDir => {
                at.pop();
            }
            Component::Normal(name) => {
                let next = at.join(name);
                let meta = match std::fs::symlink_metadata(&next) {
                    Ok(meta) => meta,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(unreadable(&next, &e)),
                };
                if meta.file_type().is_symlink() {
                    *links += 1;
                    if *links > MAX_LINKS {
                        return Err(Untrusted {
                            path: next,
                            problem: Problem::TooManyLinks,
                        });
                    }
                    let target = std::fs::read_link(&next).map_err(|e| unreadable(&next, &e))?;
                    // A relative target is relative to the link's directory.
                    match walk(&at.join(target), trusted_uid, links)? {
                        Some(resolved) => at = resolved,
                        None => return Ok(None),
                    }
                } else {
                    check_metadata(&next, &meta, trusted_uid)?;
                    at = next;
                }
            }
        }
    }
    Ok(Some(at))
}

fn check_entry(path: &Path, trusted_uid: u32) -> Result<(), Untrusted> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| unreadable(path, &e))?;
    check_metadata(path, &meta, trusted_uid)
}

fn check_metadata(
    path: &Path,
    meta: &std::fs::Metadata,
    trusted_uid: u32,
) -> Result<(), Untrusted> {
    let uid = meta.uid();
    if uid != 0 && uid != trusted_uid {
        return Err(Untrusted {
            path: path.to_path_buf(),
            problem: Problem::Owner { uid },
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(Untrusted {
            path: path.to_path_buf(),
            problem: Problem::Writable { mode },
        });
    }
    let rights =
        crate::sample::acl_write_rights(path, meta.is_dir()).map_err(|e| unreadable(path, &e))?;
    if !rights.is_empty() {
        return Err(Untrusted {
            path: path.to_path_buf(),
            problem: Problem::AccessList { rights },
        });
    }
    Ok(())
}

fn unreadable(path: &Path, e: &io::Error) -> Untrusted {
    Untrusted {
        path: path.to_path_buf(),
        problem: Problem::Unreadable {
            error: e.to_string(),
        },
    }
}

/// Where root's config belongs, for the advice in errors.
const CONFIG_HOME: &str = "/etc/headroom/";

/// The checks `headroom run` makes before it trusts a config, as root
/// (`euid` 0) only: a user's daemon can signal only that user's processes,
/// so a file the user can write gives nothing away. `config_path` is the
/// file the config came from (`None`: the embedded default). The first
/// problem is returned as a [`ConfigError`] naming the file, the key of a
/// hook, and how to fix the permissions.
pub fn check_for_root(
    config_path: Option<&Path>,
    config: &Config,
    euid: u32,
) -> Result<(), ConfigError> {
    if euid != 0 {
        return Ok(());
    }
    let origin = config_path.map_or_else(
        || "<embedded default>".to_owned(),
        |p| p.display().to_string(),
    );
    if let Some(path) = config_path
        && let Err(u) = check_path(path, euid)
    {
        return Err(ConfigError::whole_file(
            &origin,
            format!(
                "refusing to run as root with this config: {}; anyone who can write there \
                 could change the rules and make headroom signal any process; {}",
                u.what(),
                u.fix(CONFIG_HOME)
            ),
        ));
    }
    for rule in &config.rules {
        for (i, step) in rule.actions.iter().enumerate() {
            let Action::Hook { command, .. } = &step.action else {
                continue;
            };
            let key = format!("rule.{}.actions[{i}].hook", rule.name);
            if !command.is_absolute() {
                return Err(ConfigError {
                    key: Some(key),
                    value: Some(format!("{:?}", command.display().to_string())),
                    ..ConfigError::whole_file(
                        &origin,
                        "a hook must be an absolute path to a program",
                    )
                });
            }
            if let Err(u) = check_path(command, euid) {
                return Err(ConfigError {
                    key: Some(key),
                    ..ConfigError::whole_file(
                        &origin,
                        format!(
                            "refusing to run hook {} as root: {}; anyone who can write there \
                             could change what headroom runs as root; {}",
                            command.display(),
                            u.what(),
                            u.fix("/usr/local/libexec/headroom/")
                        ),
                    )
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A private directory for the test's files, owned by the user running
    /// the tests (whose uid the tests trust, so they run as root and as a
    /// user alike), in the checkout's `target/`, which must itself be
    /// trusted: a temporary directory under `/tmp` never is.
    fn private_dir() -> (tempfile::TempDir, u32) {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(&base).unwrap();
        let uid = std::fs::metadata(dir.path()).unwrap().uid();
        chmod(dir.path(), 0o700);
        if let Err(u) = check_path(dir.path(), uid) {
            panic!("run the tests in a checkout that only you (or root) can write: {u}");
        }
        (dir, uid)
    }

    fn problem_below(dir: &Path, path: &Path, uid: u32) -> Option<Untrusted> {
        let found = check_path(path, uid).err();
        if let Some(u) = &found {
            assert!(u.path.starts_with(dir), "{u}");
        }
        found
    }

    #[test]
    fn group_or_other_writable_files_and_directories_are_untrusted() {
        let (dir, uid) = private_dir();
        let file = dir.path().join("headroom.toml");
        std::fs::write(&file, "").unwrap();
        chmod(&file, 0o600);
        assert_eq!(problem_below(dir.path(), &file, uid), None);
        chmod(&file, 0o620);
        let u = problem_below(dir.path(), &file, uid).unwrap();
        assert_eq!(
            (u.path.as_path(), &u.problem),
            (file.as_path(), &Problem::Writable { mode: 0o620 })
        );
        assert!(u.fix(CONFIG_HOME).contains("chmod go-w"), "{}", u.fix(""));
        chmod(&file, 0o644);
        chmod(dir.path(), 0o707);
        let u = problem_below(dir.path(), &file, uid).unwrap();
        assert_eq!(u.path, dir.path());
    }

    #[test]
    fn a_sticky_shared_directory_is_untrusted_and_not_to_be_chmodded() {
        let (dir, uid) = private_dir();
        let shared = dir.path().join("tmp");
        std::fs::create_dir(&shared).unwrap();
        chmod(&shared, 0o1777);
        let file = shared.join("c.toml");
        std::fs::write(&file, "").unwrap();
        chmod(&file, 0o600);
        let u = problem_below(dir.path(), &file, uid).unwrap();
        assert_eq!(u.path, shared);
        assert!(u.is_shared_directory());
        assert!(u.what().contains("shared directory"), "{}", u.what());
        assert!(!u.fix(CONFIG_HOME).contains("chmod"), "{}", u.fix(""));
    }

    #[test]
    fn links_are_followed_and_their_targets_checked() {
        let (dir, uid) = private_dir();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        let target = open.join("real.toml");
        std::fs::write(&target, "").unwrap();
        chmod(&target, 0o600);
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink("open/real.toml", &link).unwrap();
        chmod(&open, 0o700);
        assert_eq!(problem_below(dir.path(), &link, uid), None);
        chmod(&open, 0o777);
        let u = problem_below(dir.path(), &link, uid).unwrap();
        assert_eq!(u.path, open);
    }

    #[test]
    fn link_loops_end() {
        let (dir, uid) = private_dir();
        let a = dir.path().join("a");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("b")).unwrap();
        let u = problem_below(dir.path(), &a, uid).unwrap();
        assert_eq!(u.problem, Problem::TooManyLinks);
    }

    #[test]
    fn a_missing_file_in_a_trusted_directory_is_trusted() {
        let (dir, uid) = private_dir();
        let missing = dir.path().join("not/there");
        assert_eq!(problem_below(dir.path(), &missing, uid), None);
    }

    #[test]
    fn parent_components_resolve_like_the_kernel() {
        let (dir, uid) = private_dir();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        chmod(&open, 0o777);
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "").unwrap();
        chmod(&file, 0o600);
        // Passing through an open directory is enough to be refused.
        let via_open = dir.path().join("open/../c.toml");
        let u = problem_below(dir.path(), &via_open, uid).unwrap();
        assert_eq!(u.path, open);
        assert_eq!(problem_below(dir.path(), &file, uid), None);
    }

    #[test]
    fn a_file_of_another_user_is_untrusted() {
        let (dir, uid) = private_dir();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "").unwrap();
        chmod(&file, 0o600);
        // As root, give the file away; as a user, trust another uid.
        let (owner, trusted) = if uid == 0 {
            std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
            (65534, 0)
        } else {
            (uid, uid + 1)
        };
        let u = problem_below(dir.path(), &file, trusted).unwrap();
        assert_eq!(u.problem, Problem::Owner { uid: owner });
        assert!(u.what().contains(&format!("uid {owner}")), "{}", u.what());
    }

    #[test]
    fn an_access_list_problem_names_the_rights_and_the_fix() {
        let u = Untrusted {
            path: PathBuf::from("/etc/headroom/headroom.toml"),
            problem: Problem::AccessList {
                rights: vec!["write", "append"],
            },
        };
        assert_eq!(
            u.what(),
            "/etc/headroom/headroom.toml has an access control list that grants write,append \
             to others (see `ls -led /etc/headroom/headroom.toml`)"
        );
        assert_eq!(
            u.fix(CONFIG_HOME),
            "remove the access control list with `chmod -N /etc/headroom/headroom.toml`"
        );
    }

    #[test]
    fn nothing_is_checked_for_a_user_daemon() {
        let config = Config::default();
        assert_eq!(
            check_for_root(Some(Path::new("/nonexistent/x.toml")), &config, 1000),
            Ok(())
        );
    }
}
