//! Desktop notifications on macOS: `osascript`'s `display notification`.
//! Linux exports the same names.

use std::path::Path;
use std::process::Command;

use crate::os::notification::{Audience, Message, osascript_args};

/// The notifier program.
pub const NOTIFIER: &str = "osascript";

/// The command that runs `osascript` for `message`: a root daemon shows it
/// in the target user's GUI session, as that user.
pub fn command(
    message: &Message,
    audience: Audience,
    osascript: &Path,
    _runtime_dir: &Path,
    _passwd: impl FnOnce() -> std::io::Result<String>,
    _path: &str,
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
