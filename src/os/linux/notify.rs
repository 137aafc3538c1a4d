//! Desktop notifications on Linux: `notify-send` on the user's session bus.
//! macOS exports the same names.

use std::path::Path;
use std::process::Command;

use crate::os::notification::{Audience, Message, notify_send_args};

/// The notifier program.
pub const NOTIFIER: &str = "notify-send";

/// The command that runs `notifier` (`notify-send`) for `message` in the
/// audience's desktop session: a root daemon runs it as the target user,
/// with that user's session bus under `runtime_dir` and `path` as `PATH`.
pub fn command(
    message: &Message,
    audience: Audience,
    notifier: &Path,
    runtime_dir: &Path,
    passwd: impl FnOnce() -> std::io::Result<String>,
    path: &str,
) -> Result<Command, String> {
    use std::os::unix::process::CommandExt as _;

    use crate::os::passwd::{SYSTEM_PASSWD, by_uid};

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
            .env("PATH", path)
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

fn bus_address(bus: &Path) -> std::ffi::OsString {
    let mut address = std::ffi::OsString::from("unix:path=");
    address.push(bus);
    address
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> Message {
        Message {
            title: "headroom: notebook-runaway".into(),
            body: "kernel 4242 grew".into(),
        }
    }

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
        let err = command(
            &message(),
            audience,
            notifier,
            runtime.path(),
            passwd,
            "/usr/bin:/bin",
        )
        .unwrap_err();
        assert!(
            err.starts_with("no desktop session for uid 1000: "),
            "{err}"
        );

        std::fs::create_dir_all(runtime.path().join("1000")).unwrap();
        std::fs::write(runtime.path().join("1000/bus"), "").unwrap();
        let cmd = command(
            &message(),
            audience,
            notifier,
            runtime.path(),
            passwd,
            "/usr/bin:/bin",
        )
        .unwrap();
        assert_eq!(cmd.get_program(), notifier.as_os_str());
        let env: Vec<_> = cmd.get_envs().collect();
        let bus = format!("unix:path={}/1000/bus", runtime.path().display());
        assert!(env.contains(&(
            OsStr::new("DBUS_SESSION_BUS_ADDRESS"),
            Some(OsStr::new(&bus))
        )));
        assert!(env.contains(&(OsStr::new("HOME"), Some(OsStr::new("/home/ada")))));
        assert!(env.contains(&(OsStr::new("PATH"), Some(OsStr::new("/usr/bin:/bin")))));
    }
}
