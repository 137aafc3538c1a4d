//! Whether only root can change a path: the check a root daemon applies to
//! every file it loads, runs or writes (its config, hook programs and their
//! scripts, the desktop notifier, the NVML library, the journal), and the
//! installer to the binary a system service runs.
//!
//! A root daemon uses a path only if it and every directory on the way to it
//! can be changed by root alone: owned by root (or the daemon's own uid) and
//! writable by neither group nor others. A sticky directory such as `/tmp`
//! counts as writable by others, as in OpenSSH's `StrictModes`. What each
//! guarded path is, and when it is checked, is told in
//! [`crate::permissions`].
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
//! ACL is read as well ([`acl_write_rights`]) and any entry that lets
//! someone write is refused.

use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

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
    /// More than `MAX_LINKS` symbolic links on the way.
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
    let rights = acl_write_rights(path, meta.is_dir()).map_err(|e| unreadable(path, &e))?;
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

/// The names of the rights an access control list on `path` grants to
/// others beyond what its mode bits say; `path` itself is read, not a
/// link's target.
///
/// macOS: an extended ACL (`chmod +a`) can let any user write a file whose
/// mode is `0644`; each *allow* entry's write rights are named
/// ([`super::macos::parse::acl`]). Linux: none to add: a POSIX access ACL's mask is
/// the group bits of the mode, and no named user or group gets more than the
/// mask allows, so a mode with no group write already says no one else
/// can write.
pub fn acl_write_rights(path: &Path, is_dir: bool) -> io::Result<Vec<&'static str>> {
    #[cfg(target_os = "macos")]
    {
        crate::os::macos::ffi_acl::extended_acl(path)
            .map(|entries| crate::os::macos::parse::acl::write_rights_granted(&entries, is_dir))
    }
    #[cfg(not(target_os = "macos"))]
    {
        let _ = (path, is_dir);
        Ok(Vec::new())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    pub(crate) fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A private directory for a test's files, owned by the user running
    /// the tests (whose uid the tests trust, so they run as root and as a
    /// user alike), in the checkout's `target/`, which must itself be
    /// trusted: a temporary directory under `/tmp` never is.
    pub(crate) fn private_dir() -> (tempfile::TempDir, u32) {
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
        assert!(
            u.fix("/etc/headroom/").contains("chmod go-w"),
            "{}",
            u.fix("")
        );
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
        assert!(!u.fix("/etc/headroom/").contains("chmod"), "{}", u.fix(""));
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
            u.fix("/etc/headroom/"),
            "remove the access control list with `chmod -N /etc/headroom/headroom.toml`"
        );
    }
}
