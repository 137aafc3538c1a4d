//! launchd: the LaunchDaemon's and LaunchAgent's plist, and the domain
//! and service target that `launchctl` commands name.

use std::path::PathBuf;

use super::paths::{Layout, absolute, config_path, layout, program_arguments, text_of};
use super::plist::{PlistValue, render_plist};
use super::{AGENT_LABEL, DAEMON_LABEL, Manager, Params, Scope, ServiceError};

/// `admin` on macOS: the group of administrator accounts, which may read
/// the LaunchDaemon's logs without sudo.
pub(super) const MACOS_ADMIN_GID: u32 = 80;

/// The open-file limits the launchd plists set (`NumberOfFiles`): the soft
/// limit the daemon starts with and the hard limit it may raise it to. The
/// hard one matches the systemd unit's `LimitNOFILE`.
pub const SOFT_OPEN_FILES: i64 = 4096;
pub const HARD_OPEN_FILES: i64 = 65536;

/// The launchd plist. Each key, and why:
///
/// - `Label`: the job's name in launchctl commands.
/// - `ProgramArguments`: `headroom run --config FILE --log-file LOG`,
///   absolute paths (launchd neither searches PATH nor expands `~`). With
///   `--log-file` the daemon writes and rotates its log itself
///   (`logging::log_file`): launchd would append to one file forever.
/// - `RunAtLoad`: start at boot (daemon) or login (agent), not on demand:
///   there is nothing to demand it, it watches.
/// - `KeepAlive` = {`SuccessfulExit`: false}: restart after a crash or a
///   failed start, not after a clean exit (`launchctl kill TERM`, or a stop
///   on purpose).
/// - `ThrottleInterval` 10: at most one restart per 10 s, so a config that
///   keeps failing does not spin.
/// - `ProcessType` Interactive: launchd applies "no resource limits", like
///   an app. Standard (the default) and Background throttle CPU and I/O,
///   and the daemon has to act exactly when the machine is short of memory
///   and paging: a throttled watcher reacts too late.
/// - `ExitTimeOut` 10: seconds between SIGTERM and SIGKILL at stop; the
///   daemon shuts down within one tick.
/// - `Umask` 0o077 (63): the journal, post-mortems and anything else the
///   daemon creates are its owner's alone; they name other users'
///   processes and notebooks.
/// - `SoftResourceLimits`/`HardResourceLimits` `NumberOfFiles` 4096/65536:
///   launchd's default soft limit is 256 open files, which a few dozen HTTP
///   clients would use up; the daemon raises its soft limit to the hard one
///   at start, as with systemd's `LimitNOFILE=65536`.
/// - `StandardOutPath`/`StandardErrorPath`: the same log file, in
///   `/Library/Logs/headroom/` (daemon) or `~/Library/Logs/headroom/`
///   (agent), where Console.app finds it, for what is written before the
///   daemon takes its log over (an early error). The installer creates it
///   first, with its owner and mode (`plan.rs`).
/// - `EnvironmentVariables`: none for the daemon, which keeps launchd's
///   PATH of system directories: root must not resolve hook commands in
///   Homebrew's user-writable prefixes (give hooks absolute paths). The
///   agent runs as the user and gets Homebrew's prefixes on its PATH, so
///   hooks find the user's tools.
pub fn launchd_plist(params: &Params) -> Result<String, ServiceError> {
    let layout = layout(params)?;
    let config = config_path(params, &layout)?;
    absolute("the headroom binary", &params.binary)?;
    text_of("the headroom binary", &params.binary, Manager::Launchd)?;
    text_of("the config file", &config, Manager::Launchd)?;
    let log = text_of("the log file", &launchd_log_file(&layout), Manager::Launchd)?;
    let label = match params.scope {
        Scope::System => DAEMON_LABEL,
        Scope::User => AGENT_LABEL,
    };
    let s = |v: &str| PlistValue::String(v.to_owned());
    let mut dict = vec![
        ("Label".to_owned(), s(label)),
        (
            "ProgramArguments".to_owned(),
            PlistValue::Array(
                program_arguments(&params.binary, &config)
                    .into_iter()
                    .chain(["--log-file".to_owned(), log.clone()])
                    .map(PlistValue::String)
                    .collect(),
            ),
        ),
        ("RunAtLoad".to_owned(), PlistValue::Bool(true)),
        (
            "KeepAlive".to_owned(),
            PlistValue::Dict(vec![("SuccessfulExit".to_owned(), PlistValue::Bool(false))]),
        ),
        ("ThrottleInterval".to_owned(), PlistValue::Integer(10)),
        ("ProcessType".to_owned(), s("Interactive")),
        ("ExitTimeOut".to_owned(), PlistValue::Integer(10)),
        ("Umask".to_owned(), PlistValue::Integer(0o077)),
        (
            "SoftResourceLimits".to_owned(),
            PlistValue::Dict(vec![(
                "NumberOfFiles".to_owned(),
                PlistValue::Integer(SOFT_OPEN_FILES),
            )]),
        ),
        (
            "HardResourceLimits".to_owned(),
            PlistValue::Dict(vec![(
                "NumberOfFiles".to_owned(),
                PlistValue::Integer(HARD_OPEN_FILES),
            )]),
        ),
        ("StandardOutPath".to_owned(), s(&log)),
        ("StandardErrorPath".to_owned(), s(&log)),
    ];
    if params.scope == Scope::User {
        dict.push((
            "EnvironmentVariables".to_owned(),
            PlistValue::Dict(vec![(
                "PATH".to_owned(),
                s("/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
            )]),
        ));
    }
    Ok(render_plist(dict))
}

/// The log file of a launchd job: `headroom.log` in the log directory.
pub(super) fn launchd_log_file(layout: &Layout) -> PathBuf {
    layout.log_dir.join("headroom.log")
}

/// The launchd domain (`system`, `gui/<uid>`) and the service target in it
/// (`system/io.headroom.daemon`) that `launchctl` commands name.
pub(super) fn launchd_target(params: &Params) -> (String, String) {
    match params.scope {
        Scope::System => ("system".to_owned(), format!("system/{DAEMON_LABEL}")),
        Scope::User => (
            format!("gui/{}", params.uid),
            format!("gui/{}/{AGENT_LABEL}", params.uid),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{params, parse_plist};

    #[test]
    fn the_daemon_plist_runs_headroom_as_root_with_absolute_paths() {
        let d = parse_plist(&launchd_plist(&params(Manager::Launchd, Scope::System)).unwrap());
        assert_eq!(d.get("Label").unwrap().as_string(), Some(DAEMON_LABEL));
        let args: Vec<&str> = d
            .get("ProgramArguments")
            .and_then(|v| v.as_array())
            .unwrap()
            .iter()
            .filter_map(|v| v.as_string())
            .collect();
        assert_eq!(
            args,
            [
                "/usr/local/bin/headroom",
                "run",
                "--config",
                "/Library/Application Support/headroom/headroom.toml",
                "--log-file",
                "/Library/Logs/headroom/headroom.log"
            ]
        );
        assert_eq!(
            d.get("StandardErrorPath").unwrap().as_string(),
            Some("/Library/Logs/headroom/headroom.log")
        );
        assert!(d.get("UserName").is_none(), "LaunchDaemons run as root");
        assert!(d.get("EnvironmentVariables").is_none());
        assert_eq!(
            d.get("ProcessType").unwrap().as_string(),
            Some("Interactive")
        );
        assert_eq!(
            d.get("Umask").and_then(|v| v.as_signed_integer()),
            Some(0o077)
        );
        let files = |key: &str| {
            d.get(key)
                .and_then(|v| v.as_dictionary())
                .and_then(|l| l.get("NumberOfFiles"))
                .and_then(|v| v.as_signed_integer())
        };
        assert_eq!(files("SoftResourceLimits"), Some(4096));
        assert_eq!(files("HardResourceLimits"), Some(65536));
    }

    #[test]
    fn the_agent_plist_lives_in_the_home_directory() {
        let d = parse_plist(&launchd_plist(&params(Manager::Launchd, Scope::User)).unwrap());
        assert_eq!(d.get("Label").unwrap().as_string(), Some(AGENT_LABEL));
        assert_eq!(
            d.get("StandardOutPath").unwrap().as_string(),
            Some("/Users/ann/Library/Logs/headroom/headroom.log")
        );
        let env = d
            .get("EnvironmentVariables")
            .and_then(|v| v.as_dictionary())
            .unwrap();
        assert!(
            env.get("PATH")
                .unwrap()
                .as_string()
                .unwrap()
                .starts_with("/opt/homebrew/bin:")
        );
    }
}
