//! Desktop notifications: which notifier this platform has, and the command
//! that shows one message in the right user's session.
//!
//! Linux: `notify-send`, talking to the user's session bus at
//! `/run/user/<uid>/bus`. A daemon running as root runs it as the user who
//! owns the process (their uid, primary gid, home and bus; no supplementary
//! groups) or, for root's process, as root; a daemon running as a user runs
//! it as itself, on its own session. macOS: `osascript`, through `launchctl
//! asuser` when root. Elsewhere there is no notifier.
//!
//! The notifier is never looked up on `PATH`: a directory early on the
//! daemon's `PATH` that a user can write (a group-writable `/usr/local/bin`,
//! a `~/bin` left in a root shell's `PATH`) would let that user's program
//! run as every user a notification is for, and as root. It is taken from
//! [`NOTIFIER_DIRS`] only (`/usr/bin`, then `/bin`), and run only if it
//! passes the check a root daemon applies to hooks
//! ([`crate::sys::trusted_path::check_path`]): the file and every directory
//! above it changeable by root alone (or by the daemon's own uid).
//! [`find_notifier`] says which one runs, or why none does; `headroom
//! doctor` shows it ([`crate::act::doctor::notifier`]).
//!
//! The text names processes other users named. It never becomes markup or
//! code: control characters are escaped as [`printable`] writes them
//! (`\u{1b}`, `\n`) in title and body alike; `notify-send` interprets a
//! subset of HTML in the body (`<b>`, `<a href>`, `<img>`), so the body's
//! `&`, `<` and `>` become entities; and the AppleScript is a fixed script
//! (`on run argv`) that reads title and body from its arguments, so no text
//! is ever spliced into a script.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::report::printable;
use crate::sys::trusted_path::check_path;

/// Where the notifier is looked for, in this order: the system's own
/// directories. Not `/usr/local/bin`: Homebrew's on an Intel Mac belongs to
/// a user, and Debian's `staff` group may write there.
pub const NOTIFIER_DIRS: [&str; 2] = ["/usr/bin", "/bin"];

/// This platform's notifier program, if it has one.
pub const NOTIFIER: Option<&str> = if cfg!(target_os = "linux") {
    Some("notify-send")
} else if cfg!(target_os = "macos") {
    Some("osascript")
} else {
    None
};

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

/// The message to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub title: String,
    pub body: String,
}

/// Who the notification is for and who is sending it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Audience {
    /// The uid owning the process the notification is about.
    pub target_uid: Option<u32>,
    /// headroom's effective uid.
    pub own_uid: u32,
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
    let name = NOTIFIER.ok_or_else(|| "no desktop notifier on this platform".to_string())?;
    let notifier = find_notifier(name, dirs, audience.own_uid)?;
    platform_command(message, audience, &notifier, runtime_dir, passwd)
}

#[cfg(target_os = "linux")]
fn platform_command(
    message: &Message,
    audience: Audience,
    notifier: &Path,
    runtime_dir: &Path,
    passwd: impl FnOnce() -> std::io::Result<String>,
) -> Result<Command, String> {
    use std::os::unix::process::CommandExt as _;

    use crate::sys::passwd::{SYSTEM_PASSWD, by_uid};

    let as_root = audience.own_uid == 0;
    let uid = match (as_root, audience.target_uid) {
        (true, Some(uid)) => uid,
        _ => audience.own_uid,
    };
    let bus = runtime_dir.join(uid.to_string()).join("bus");
    let mut cmd = Command::new(notifier);
    cmd.args(notify_send_args(message));
    if as_root && uid != 0 {
        if !bus.exists() {
            return Err(format!(
                "no desktop session for uid {uid}: {} does not exist",
                bus.display()
            ));
        }
        let text = passwd().map_err(|e| format!("cannot read {SYSTEM_PASSWD}: {e}"))?;
        let entry = by_uid(&text, uid)
            .ok_or_else(|| format!("uid {uid} has no entry in {SYSTEM_PASSWD}"))?;
        cmd.env_clear()
            .env("PATH", super::HOOK_PATH)
            .env("HOME", entry.home)
            .env("XDG_RUNTIME_DIR", runtime_dir.join(uid.to_string()))
            .env("DBUS_SESSION_BUS_ADDRESS", bus_address(&bus))
            .uid(uid)
            .gid(entry.gid);
    } else if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none() {
        if !bus.exists() {
            return Err(format!(
                "no desktop session: DBUS_SESSION_BUS_ADDRESS is unset and {} does not exist",
                bus.display()
            ));
        }
        cmd.env("DBUS_SESSION_BUS_ADDRESS", bus_address(&bus));
    }
    Ok(cmd)
}

#[cfg(target_os = "macos")]
fn platform_command(
    message: &Message,
    audience: Audience,
    osascript: &Path,
    _runtime_dir: &Path,
    _passwd: impl FnOnce() -> std::io::Result<String>,
) -> Result<Command, String> {
    let args = osascript_args(message);
    let cmd = match (audience.own_uid, audience.target_uid) {
        // Root has no GUI session: show it in the user's, as the user.
        (0, Some(uid)) if uid != 0 => {
            let mut c = Command::new("/bin/launchctl");
            c.arg("asuser")
                .arg(uid.to_string())
                .arg("/usr/bin/sudo")
                .arg("-u")
                .arg(format!("#{uid}"))
                .arg(osascript)
                .args(&args);
            c
        }
        _ => {
            let mut c = Command::new(osascript);
            c.args(&args);
            c
        }
    };
    Ok(cmd)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn platform_command(
    _message: &Message,
    _audience: Audience,
    _notifier: &Path,
    _runtime_dir: &Path,
    _passwd: impl FnOnce() -> std::io::Result<String>,
) -> Result<Command, String> {
    Err("no desktop notifier on this platform".to_string())
}

/// `notify-send` arguments: the app name, urgency, title and body. The
/// title and body follow `--`, so a body starting with `-` is not an option.
/// Control characters are escaped in both, and the body's markup characters
/// are turned into entities (the notification server reads the body as
/// markup, the title as plain text).
#[cfg(any(target_os = "linux", test))]
pub fn notify_send_args(message: &Message) -> Vec<String> {
    vec![
        "--app-name=headroom".into(),
        "--urgency=critical".into(),
        "--".into(),
        printable(&message.title).into_owned(),
        markup_escape(&printable(&message.body)),
    ]
}

/// `&`, `<` and `>` as entities, for the body markup of the Desktop
/// Notifications Specification (a subset of HTML).
#[cfg(any(target_os = "linux", test))]
pub fn markup_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// The AppleScript `osascript` runs, fixed: it shows its arguments. The
/// first argument is [`APPLE_ARGV0`], so that `osascript`'s option parser,
/// which stops at the first argument that is not an option, never reads a
/// title or body that starts with `-` as an option of its own.
#[cfg(any(target_os = "macos", test))]
pub const APPLE_SCRIPT: [&str; 3] = [
    "on run argv",
    "display notification (item 3 of argv) with title (item 2 of argv)",
    "end run",
];

/// See [`APPLE_SCRIPT`].
#[cfg(any(target_os = "macos", test))]
pub const APPLE_ARGV0: &str = "headroom";

/// `osascript` arguments: the script's lines (each after `-e`), then
/// [`APPLE_ARGV0`], the title and the body, with control characters
/// escaped. The text is data to the script, never part of it.
#[cfg(any(target_os = "macos", test))]
pub fn osascript_args(message: &Message) -> Vec<String> {
    let mut args = Vec::with_capacity(9);
    for line in APPLE_SCRIPT {
        args.push("-e".to_string());
        args.push(line.to_string());
    }
    args.push(APPLE_ARGV0.to_string());
    args.push(printable(&message.title).into_owned());
    args.push(printable(&message.body).into_owned());
    args
}

#[cfg(target_os = "linux")]
fn bus_address(bus: &Path) -> std::ffi::OsString {
    let mut address = std::ffi::OsString::from("unix:path=");
    address.push(bus);
    address
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::trusted_path::tests::{chmod, private_dir};

    fn message() -> Message {
        Message {
            title: "headroom: notebook-runaway".into(),
            body: "-python3 (pid 4) \"big\"\\".into(),
        }
    }

    const HOSTILE: &str = "\u{1b}[31mRED\n\u{7}<b>";

    fn hostile() -> Message {
        Message {
            title: format!("headroom: {HOSTILE}"),
            body: format!("{HOSTILE} (pid 4): footprint & growth"),
        }
    }

    fn no_control_characters(args: &[String]) {
        for a in args {
            assert!(!a.chars().any(char::is_control), "{a:?}");
        }
    }

    #[test]
    fn notify_send_takes_title_and_body_after_the_options() {
        let args = notify_send_args(&message());
        assert_eq!(args[2], "--");
        assert_eq!(args[3], "headroom: notebook-runaway");
        assert_eq!(args[4], "-python3 (pid 4) \"big\"\\");
    }

    #[test]
    fn notify_send_gets_no_markup_and_no_control_characters() {
        let args = notify_send_args(&hostile());
        no_control_characters(&args);
        assert_eq!(args[3], "headroom: \\u{1b}[31mRED\\n\\u{7}<b>");
        assert_eq!(
            args[4],
            "\\u{1b}[31mRED\\n\\u{7}&lt;b&gt; (pid 4): footprint &amp; growth"
        );
    }

    #[test]
    fn the_apple_script_is_fixed_and_the_text_comes_as_arguments() {
        let args = osascript_args(&hostile());
        no_control_characters(&args);
        // The script: three -e lines that are the same whatever the text.
        let script: Vec<&str> = args.chunks(2).take(3).map(|p| p[1].as_str()).collect();
        assert!(args.chunks(2).take(3).all(|p| p[0] == "-e"));
        assert_eq!(script, APPLE_SCRIPT);
        assert_eq!(
            &args[6..],
            [
                APPLE_ARGV0.to_string(),
                "headroom: \\u{1b}[31mRED\\n\\u{7}<b>".to_string(),
                "\\u{1b}[31mRED\\n\\u{7}<b> (pid 4): footprint & growth".to_string(),
            ]
        );
        // A quote in the text stays data.
        let quoted = osascript_args(&Message {
            title: "t".into(),
            body: "\" & (do shell script \"id\") & \"".into(),
        });
        assert_eq!(quoted[8], "\" & (do shell script \"id\") & \"");
        assert!(quoted[..6].iter().all(|a| !a.contains("shell")));
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

    #[cfg(target_os = "linux")]
    #[test]
    fn without_notify_send_the_reason_is_given() {
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
            err.starts_with("no desktop notifier: notify-send not found in "),
            "{err}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_root_daemon_needs_the_users_session_bus() {
        use std::ffi::OsStr;
        let notifier = Path::new("/usr/bin/notify-send");
        let runtime = tempfile::tempdir().unwrap();
        let audience = Audience {
            target_uid: Some(1000),
            own_uid: 0,
        };
        let passwd = || Ok("ada:x:1000:1001:Ada:/home/ada:/bin/sh\n".to_string());
        let err =
            platform_command(&message(), audience, notifier, runtime.path(), passwd).unwrap_err();
        assert!(
            err.starts_with("no desktop session for uid 1000: "),
            "{err}"
        );

        std::fs::create_dir_all(runtime.path().join("1000")).unwrap();
        std::fs::write(runtime.path().join("1000/bus"), "").unwrap();
        let cmd = platform_command(&message(), audience, notifier, runtime.path(), passwd).unwrap();
        assert_eq!(cmd.get_program(), notifier.as_os_str());
        let env: Vec<_> = cmd.get_envs().collect();
        let bus = format!("unix:path={}/1000/bus", runtime.path().display());
        assert!(env.contains(&(
            OsStr::new("DBUS_SESSION_BUS_ADDRESS"),
            Some(OsStr::new(&bus))
        )));
        assert!(env.contains(&(OsStr::new("HOME"), Some(OsStr::new("/home/ada")))));
        assert!(env.contains(&(
            OsStr::new("PATH"),
            Some(OsStr::new(super::super::HOOK_PATH))
        )));
    }
}
