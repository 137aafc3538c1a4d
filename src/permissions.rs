//! Who can change what a root daemon trusts: every path it loads, runs or
//! writes.
//!
//! A config, hook, script, library or journal a user can write would let
//! that user make root signal, run or write what they choose. So a root
//! daemon uses a path only if it and every directory on the way can be
//! changed by root alone: owned by root (or the daemon's uid), writable by
//! neither group nor others; a sticky directory such as `/tmp` counts as
//! writable by others, as in OpenSSH's `StrictModes`. [`check_path`] is the
//! check ([`crate::os::trusted_path`]); what it guards:
//!
//! - the config file, at start and every reload ([`check_for_root`]);
//! - each hook program and its arguments ([`check_hook`]), at load and
//!   before every run: every absolute-path argument, and for an interpreter
//!   ([`is_interpreter`]) a relative one as a script under `/`; `env` as
//!   the program is refused (it searches `PATH`);
//! - the NVML library (`os::linux::nvml`), at every load attempt;
//! - the desktop notifier, looked for in `/usr/bin` and `/bin` only;
//! - the binary a system service runs ([`crate::service::choose`] copies
//!   one that does not pass);
//! - the journal's directory and file
//!   ([`crate::journal::Journal::open_checked`]): a file a user created is
//!   refused and left alone, and events stay in memory.
//!
//! A daemon running as a user takes any path: a file the user can write
//! gives nothing away.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError};
use crate::model::Action;
use crate::os::trusted_path::check_path;

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

/// Whether `name` (a file name) is one of the `INTERPRETERS`, with or
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
#[expect(
    clippy::result_large_err,
    reason = "ConfigError's public fields are the interface; errors are rare and cold"
)]
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
    for (index, rule) in config.rules.iter().enumerate() {
        for (i, step) in rule.actions.iter().enumerate() {
            let Action::Hook { command, args, .. } = &step.action else {
                continue;
            };
            let key = format!(
                "{}.actions[{i}].hook",
                crate::config::rule_key(index, Some(&rule.name))
            );
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
    use std::path::Path;

    use super::*;
    use crate::os::trusted_path::tests::{chmod, private_dir};

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
