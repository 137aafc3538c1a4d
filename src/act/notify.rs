//! Desktop notifications: which notifier this platform has, and the command
//! that shows one message in the right user's session.
//!
//! Linux: `notify-send`, talking to the user's session bus at
//! `/run/user/<uid>/bus`. A daemon running as root runs it as the user who
//! owns the process (their uid, primary gid, home and bus; no supplementary
//! groups) or, for root's process, as root; a daemon running as a user runs
//! it as itself, on its own session. macOS: `osascript`, through `launchctl
//! asuser` when root.
//!
//! The notifier is never looked up on `PATH`: a directory early on the
//! daemon's `PATH` that a user can write (a group-writable `/usr/local/bin`,
//! a `~/bin` left in a root shell's `PATH`) would let that user's program
//! run as every user a notification is for, and as root. It is taken from
//! [`NOTIFIER_DIRS`] only (`/usr/bin`, then `/bin`), and run only if it
//! passes the check a root daemon applies to hooks
//! ([`crate::os::trusted_path::check_path`]): the file and every directory
//! above it changeable by root alone (or by the daemon's own uid).
//! [`find_notifier`] says which one runs, or why none does; `headroom
//! doctor` shows it ([`crate::act::doctor::notifier`]).
//!
//! The text names processes other users named. It never becomes markup or
//! code: control characters are escaped as [`printable`](crate::model::printable) writes them
//! (`\u{1b}`, `\n`) in title and body alike; `notify-send` interprets a
//! subset of HTML in the body (`<b>`, `<a href>`, `<img>`), so the body's
//! `&`, `<` and `>` become entities; and the AppleScript is a fixed script
//! (`on run argv`) that reads title and body from its arguments, so no text
//! is ever spliced into a script.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::os::trusted_path::check_path;

/// Where the notifier is looked for, in this order: the system's own
/// directories. Not `/usr/local/bin`: Homebrew's on an Intel Mac belongs to
/// a user, and Debian's `staff` group may write there.
pub const NOTIFIER_DIRS: [&str; 2] = ["/usr/bin", "/bin"];

/// This OS's notifier program (`notify-send`, `osascript`).
pub use crate::os::native::notify::NOTIFIER;
pub use crate::os::notification::{Audience, Message};

/// The notifier `name` in the first of `dirs` that holds an executable file
/// of that name, if only root and `trusted_uid` can change it and every
/// directory above it; otherwise why there is none, naming each file found
/// and what is wrong with it. Nothing outside `dirs` is looked at.
pub fn find_notifier(name: &str, dirs: &[PathBuf], trusted_uid: u32) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut refused = Vec::new();
    for dir in dirs.iter().filter(|d| d.is_absolute()) {
        let path = dir.join(name);
        let executable = std::fs::metadata(&path)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if !executable {
            continue;
        }
        match check_path(&path, trusted_uid) {
            Ok(()) => return Ok(path),
            Err(u) => refused.push(u.what()),
        }
    }
    let searched = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if refused.is_empty() {
        Err(format!(
            "no desktop notifier: {name} not found in {searched} (it is never looked up on PATH)"
        ))
    } else {
        Err(format!(
            "no trusted desktop notifier: {name} found, but {}; a user who can change it could \
             run code as anyone a notification is for, root included, so it is not run",
            refused.join("; ")
        ))
    }
}

/// The command that shows `message`, or why none can.
///
/// `dirs` is where to look for the notifier ([`find_notifier`], trusting
/// `audience.own_uid` besides root); `runtime_dir` is the parent of the
/// per-user runtime directories (`/run/user`); `passwd` is the text of
/// `/etc/passwd`, read only when a root daemon needs the target user's gid
/// and home.
pub fn command(
    message: &Message,
    audience: Audience,
    dirs: &[PathBuf],
    runtime_dir: &Path,
    passwd: impl FnOnce() -> std::io::Result<String>,
) -> Result<Command, String> {
    let notifier = find_notifier(NOTIFIER, dirs, audience.own_uid)?;
    crate::os::native::notify::command(
        message,
        audience,
        &notifier,
        runtime_dir,
        passwd,
        super::HOOK_PATH,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::trusted_path::tests::{chmod, private_dir};

    fn message() -> Message {
        Message {
            title: "headroom: notebook-runaway".into(),
            body: "-python3 (pid 4) \"big\"\\".into(),
        }
    }

    /// An executable file `name` in `dir`.
    fn program(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        chmod(&path, 0o755);
        path
    }

    #[test]
    fn a_notifier_is_found_only_as_an_executable_in_the_given_directories() {
        let (dir, uid) = private_dir();
        let run = program(dir.path(), "run");
        std::fs::write(dir.path().join("plain"), "").unwrap();
        let dirs = [dir.path().to_path_buf()];
        assert_eq!(find_notifier("run", &dirs, uid), Ok(run));
        let err = find_notifier("plain", &dirs, uid).unwrap_err();
        assert_eq!(
            err,
            format!(
                "no desktop notifier: plain not found in {} (it is never looked up on PATH)",
                dir.path().display()
            )
        );
        // A relative directory (`bin` on a PATH) is never searched.
        assert!(find_notifier("run", &[PathBuf::from("bin")], uid).is_err());
    }

    #[test]
    fn a_notifier_others_can_change_is_passed_over_for_a_trusted_one() {
        let (dir, uid) = private_dir();
        let open = dir.path().join("open");
        let trusted = dir.path().join("trusted");
        for d in [&open, &trusted] {
            std::fs::create_dir(d).unwrap();
            chmod(d, 0o755);
        }
        program(&open, "notify-send");
        let good = program(&trusted, "notify-send");
        chmod(&open, 0o775);
        let dirs = [open.clone(), trusted.clone()];
        assert_eq!(find_notifier("notify-send", &dirs, uid), Ok(good));
        // With only the open directory, nothing runs, and the reason names it.
        let err = find_notifier("notify-send", &dirs[..1], uid).unwrap_err();
        assert!(
            err.starts_with("no trusted desktop notifier: notify-send found, but "),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "{} is writable by users other than root (mode 0775)",
                open.display()
            )),
            "{err}"
        );
        assert!(err.contains("so it is not run"), "{err}");
    }

    #[test]
    fn the_notifier_is_looked_for_in_the_systems_own_directories_only() {
        assert_eq!(NOTIFIER_DIRS, ["/usr/bin", "/bin"]);
    }

    #[test]
    fn without_the_notifier_the_reason_is_given() {
        let (dir, uid) = private_dir();
        let err = command(
            &message(),
            Audience {
                target_uid: Some(1000),
                own_uid: uid,
            },
            &[dir.path().to_path_buf()],
            Path::new("/run/user"),
            || Ok(String::new()),
        )
        .unwrap_err();
        assert!(
            err.starts_with(&format!("no desktop notifier: {NOTIFIER} not found in ")),
            "{err}"
        );
    }
}
