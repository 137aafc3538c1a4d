//! Who can change what a root daemon trusts: every path it loads, runs or
//! writes.
//!
//! A daemon running as root that reads its rules from a file a user can
//! write lets that user make root signal any process; a hook program, a
//! script handed to an interpreter or a shared library a user can write runs
//! that user's code as root; a journal a user can write lets them forge the
//! record (and, through a link, make root write where they choose). So a
//! root daemon uses a path only if it and every directory on the way to it
//! can be changed by root alone: owned by root (or the daemon's own uid) and
//! writable by neither group nor others. A sticky directory such as `/tmp`
//! counts as writable by others, as in OpenSSH's `StrictModes`: keep such
//! files where only root writes, e.g. `/etc/headroom`. [`check_path`] is the
//! check; the paths it guards, and where:
//!
//! - the config file: at start and at every reload ([`check_for_root`]);
//! - each hook program and its arguments ([`check_hook`]): at config load,
//!   and again by the actuator right before every run. Every argument that
//!   is an absolute path (or ends in one, as in `--file=/x`) is checked,
//!   whatever the program, since a hook may hand it to an interpreter or
//!   `source` it; when the program is an interpreter (`sh`, `bash`,
//!   `python3`, `perl`, ... by the basename of the path or of its link
//!   target, see [`is_interpreter`]), a relative argument is taken as a
//!   script relative to the hook's working directory, `/`, and checked too.
//!   `env` as the program is refused: it finds the real program on `PATH`
//!   and takes settings (`-S`, `-C`, `NAME=value`) that no check can follow;
//!   name the program itself;
//! - the NVML library `[gpu] nvml_library`: at every load attempt, at start
//!   and at each retry ([`crate::sample::gpu::nvml`]): an untrusted one is
//!   not loaded and the collector says why;
//! - the journal's directory and file ([`crate::journal::Journal::open_checked`]):
//!   the directory must pass, the file must be a regular file (not a link)
//!   owned by root and not writable by group or others; one a user created
//!   is refused and left as it is, and the daemon runs on with its events in
//!   memory.
//!
//! A daemon running as a user takes any path: it can signal only that
//! user's processes, and a file the user can write gives nothing away.
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

/// Where root's hook programs belong, for the advice in errors.
const HOOK_HOME: &str = "/usr/local/libexec/headroom/";

/// Programs that run a script named on their command line (by basename,
/// without a version suffix: `python3.12` is `python`). A relative argument
/// of theirs is a script in the hook's working directory, `/`.
const INTERPRETERS: &[&str] = &[
    "sh",
    "ash",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "csh",
    "tcsh",
    "fish",
    "busybox",
    "python",
    "pypy",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "expect",
    "Rscript",
    "julia",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "osascript",
    "pwsh",
    "guile",
    "java",
];

/// Whether `name` (a file name) is one of the [`INTERPRETERS`], with or
/// without a version suffix (`python3`, `python3.12`, `perl5.36`).
pub fn is_interpreter(name: &str) -> bool {
    let bare = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    INTERPRETERS.contains(&bare) || INTERPRETERS.contains(&name)
}

/// Characters that end a path inside an argument: shell syntax, and the
/// separators of `--file=/x`, `NAME=/x`, `a:/b` and `a,/b`.
fn ends_a_path(c: char) -> bool {
    c.is_whitespace() || ";|&<>()'\"`=:,".contains(c)
}

/// The paths in one hook argument that a root daemon must trust: every
/// absolute path in it (the whole argument, or a piece of it after `=`, `:`,
/// a space or shell syntax, so that `-c ". /home/u/env.sh"` and
/// `--config=/home/u/x` are seen); for an interpreter, also the argument
/// itself as a script relative to `/` unless it is an option.
fn paths_in_argument(arg: &str, interpreter: bool) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = arg
        .split(ends_a_path)
        .filter(|piece| piece.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    if interpreter && !arg.is_empty() && !arg.starts_with('-') && !arg.starts_with('/') {
        paths.push(Path::new("/").join(arg));
    }
    paths
}

/// A character device of root's, such as `/dev/null` (mode 0666 by
/// design): no code, and no user's file, so an argument may name it. A
/// user's terminal (`/dev/pts/3`) is the user's, and is checked.
fn is_system_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device() && m.uid() == 0)
}

/// The file names `command` goes by: its own and, for a link, its target's
/// (`/usr/bin/python3` → `python3.12`).
fn program_names(command: &Path) -> Vec<String> {
    let mut names = Vec::with_capacity(2);
    for p in [
        Some(command.to_path_buf()),
        std::fs::canonicalize(command).ok(),
    ]
    .into_iter()
    .flatten()
    {
        if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
            names.push(name.to_owned());
        }
    }
    names
}

/// Check a hook before a root daemon runs it, as `trusted_uid` (0 for root):
/// the program and every path among its arguments (see the module
/// documentation) must be changeable by root alone, and the program must
/// not be `env`. The error names the path at fault, what is wrong with it
/// and how to fix it.
pub fn check_hook(command: &Path, args: &[String], trusted_uid: u32) -> Result<(), String> {
    const WHY: &str = "anyone who can write there could change what headroom runs as root";
    if !command.is_absolute() {
        return Err(format!(
            "{} is not an absolute path; write it out in full",
            command.display()
        ));
    }
    check_path(command, trusted_uid)
        .map_err(|u| format!("{}; {WHY}; {}", u.what(), u.fix(HOOK_HOME)))?;
    let names = program_names(command);
    if names.iter().any(|n| n == "env") {
        return Err(format!(
            "{} is env, which looks the program up in PATH and takes settings (-S, -C, \
             NAME=value) that cannot be checked; name the program itself by its absolute path",
            command.display()
        ));
    }
    let interpreter = names.iter().any(|n| is_interpreter(n));
    for arg in args {
        for path in paths_in_argument(arg, interpreter) {
            if is_system_device(&path) {
                continue;
            }
            check_path(&path, trusted_uid).map_err(|u| {
                format!(
                    "its argument {arg:?} names {}, which the hook may read or run: {}; {WHY}; {}",
                    path.display(),
                    u.what(),
                    u.fix(HOOK_HOME)
                )
            })?;
        }
    }
    Ok(())
}

/// The checks `headroom run` makes before it trusts a config, as root
/// (`euid` 0) only: a user's daemon can signal only that user's processes,
/// so a file the user can write gives nothing away. `config_path` is the
/// file the config came from (`None`: the embedded default). The first
/// problem is returned as a [`ConfigError`] naming the file, the key of a
/// hook, and how to fix the permissions.
///
/// The NVML library and the journal are not checked here: they are checked
/// where they are opened, every time (a refused one costs GPU figures or
/// the journal, never the daemon).
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
            let Action::Hook { command, args, .. } = &step.action else {
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
            if let Err(why) = check_hook(command, args, euid) {
                return Err(ConfigError {
                    key: Some(key),
                    ..ConfigError::whole_file(
                        &origin,
                        format!("refusing to run hook {} as root: {why}", command.display()),
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

    #[test]
    fn interpreters_are_known_with_or_without_a_version() {
        for name in [
            "sh",
            "bash",
            "dash",
            "python3",
            "python3.12",
            "perl5.36",
            "node",
            "zsh",
        ] {
            assert!(is_interpreter(name), "{name}");
        }
        for name in ["save-checkpoint", "kill", "s", "shred"] {
            assert!(!is_interpreter(name), "{name}");
        }
    }

    #[test]
    fn absolute_paths_inside_arguments_are_found() {
        let found = |arg: &str, interp: bool| paths_in_argument(arg, interp);
        assert_eq!(
            found("/home/u/h.sh", false),
            [PathBuf::from("/home/u/h.sh")]
        );
        assert_eq!(
            found("--config=/home/u/x", false),
            [PathBuf::from("/home/u/x")]
        );
        assert_eq!(
            found(". /home/u/env.sh; save", true),
            [
                PathBuf::from("/home/u/env.sh"),
                PathBuf::from("/. /home/u/env.sh; save")
            ]
        );
        assert_eq!(found("-c", true), Vec::<PathBuf>::new());
        assert_eq!(found("h.sh", true), [PathBuf::from("/h.sh")]);
        assert_eq!(found("h.sh", false), Vec::<PathBuf>::new());
    }

    #[test]
    fn a_script_an_interpreter_runs_is_checked_like_the_hook() {
        let (dir, uid) = private_dir();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        chmod(&open, 0o777);
        let script = open.join("h.sh");
        std::fs::write(&script, "exit 0\n").unwrap();
        chmod(&script, 0o755);
        let args = vec![script.display().to_string()];
        let why = check_hook(Path::new("/bin/sh"), &args, uid).unwrap_err();
        assert!(
            why.contains(&format!("names {}", script.display())),
            "{why}"
        );
        assert!(
            why.contains(&format!(
                "{} is writable by users other than root",
                open.display()
            )),
            "{why}"
        );
        chmod(&open, 0o755);
        assert_eq!(check_hook(Path::new("/bin/sh"), &args, uid), Ok(()));
    }

    #[test]
    fn env_as_the_hook_program_is_refused() {
        let Some(env) = ["/usr/bin/env", "/bin/env"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists())
        else {
            panic!("no env program at /usr/bin/env or /bin/env");
        };
        let why = check_hook(env, &["sh".to_string()], 0).unwrap_err();
        assert!(why.contains("is env"), "{why}");
    }

    #[test]
    fn roots_character_devices_may_be_hook_arguments() {
        let args = vec![
            "-c".to_string(),
            "save 2>/dev/null".to_string(),
            "/dev/null".into(),
        ];
        assert_eq!(check_hook(Path::new("/bin/sh"), &args, 0), Ok(()));
    }
}
