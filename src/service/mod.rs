//! `headroom service install|uninstall`: run the daemon under launchd
//! (macOS) or systemd (Linux), for the whole machine or for one user.
//!
//! Installing is planned first and carried out second. [`plan_install`] and
//! [`plan_uninstall`] are pure: from [`Params`] they work out every
//! directory, file and command, render the launchd plist or systemd unit,
//! and return a [`Plan`]. `--print` shows the plan ([`Plan::render`]);
//! [`Plan::execute`] carries it out. Tests check the plans for both
//! managers on any OS.
//!
//! | | launchd (macOS) | systemd (Linux) |
//! |---|---|---|
//! | `--system` | LaunchDaemon `io.headroom.daemon` in `/Library/LaunchDaemons`, root, every user's processes | `/etc/systemd/system/headroom.service`, root with five capabilities |
//! | `--user` | LaunchAgent `io.headroom.agent` in `~/Library/LaunchAgents`, this user's processes | `~/.config/systemd/user/headroom.service` |
//!
//! A system service runs only a headroom binary that root alone can change:
//! the running one if it is, otherwise a root-owned copy the installer
//! makes (`binary.rs`).
//!
//! One file per part: `binary.rs` which executable the service runs,
//! `paths.rs` where each manager and scope keeps its files, `plist.rs` a small property-list emitter (strings, booleans,
//! integers, arrays, dictionaries: what the plists use; the tests read it
//! back with the `plist` crate), `launchd.rs` the plist and `launchctl`
//! targets, `systemd.rs` the unit and `systemctl` commands, `plan.rs` the
//! install and uninstall plans, `print.rs` a plan as text for `--print`,
//! `presence.rs` whether the manager is there to take the service (most
//! containers run no systemd: the installer stops before writing anything
//! and says what to do instead), `execute.rs` a plan carried out on the
//! file system, `runner.rs` how its commands are run (for real, or in tests
//! against recorded answers), and `launchctl.rs` the waits and retries
//! launchd needs around `bootout` and `bootstrap`.

mod binary;
mod execute;
mod launchctl;
mod launchd;
mod paths;
mod plan;
mod plist;
mod presence;
mod print;
mod runner;
mod systemd;

use std::io;
use std::path::PathBuf;

pub use binary::{
    BinarySource, LAUNCHD_ROOT_BINARY, SYSTEMD_ROOT_BINARY, choose, fragile_note, homebrew_opt,
    note as binary_note, root_binary, stable_path,
};
pub use launchctl::{
    BACKOFF, GONE_WAIT, NotLoaded, POLL, Presence, Waited, bootstrap, busy, presence, wait_gone,
};
pub use launchd::{HARD_OPEN_FILES, SOFT_OPEN_FILES, launchd_plist};
pub use paths::{Layout, config_path, layout, program_arguments};
pub use plan::{
    Activation, CommandStep, Contents, CopyStep, DirStep, FileStep, Plan, Settle, plan_install,
    plan_install_as, plan_uninstall, plan_uninstall_as,
};
pub use plist::{PlistValue, render_plist};
pub use presence::{Absent, Found, absent, look as look_for_manager, running as manager_running};
pub use print::shell_word;
pub use runner::{Ran, Runner, SystemRunner};
pub use systemd::systemd_unit;

/// The launchd label of the LaunchDaemon.
pub const DAEMON_LABEL: &str = "io.headroom.daemon";
/// The launchd label of the LaunchAgent.
pub const AGENT_LABEL: &str = "io.headroom.agent";
/// The systemd unit name.
pub const UNIT_NAME: &str = "headroom.service";

/// Which service manager to write for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Manager {
    Launchd,
    Systemd,
}

impl Manager {
    /// This OS's manager, `None` where headroom knows none.
    pub fn native() -> Option<Self> {
        match std::env::consts::OS {
            "macos" => Some(Manager::Launchd),
            "linux" => Some(Manager::Systemd),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Manager::Launchd => "launchd",
            Manager::Systemd => "systemd",
        }
    }
}

/// Whole machine (root) or one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    System,
    User,
}

impl Scope {
    pub fn flag(self) -> &'static str {
        match self {
            Scope::System => "--system",
            Scope::User => "--user",
        }
    }
}

/// Everything a plan depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub manager: Manager,
    pub scope: Scope,
    /// The headroom executable the service runs, absolute.
    pub binary: PathBuf,
    /// Where `binary` comes from: the running executable where it is, or a
    /// copy the installer makes first ([`choose`]).
    pub source: BinarySource,
    /// The config file passed to `headroom run --config`, absolute; `None`
    /// for the default path of this manager and scope.
    pub config: Option<PathBuf>,
    /// The user's home directory (user scope).
    pub home: Option<PathBuf>,
    /// The user's uid (the launchd domain `gui/<uid>`).
    pub uid: u32,
}

/// Why no plan could be made or carried out.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{what} must be an absolute path, got {path}")]
    NotAbsolute { what: &'static str, path: PathBuf },
    #[error(
        "{what} {path} cannot go into a {manager} file: it is not UTF-8 or holds control characters; move it to a plainer path"
    )]
    Unwritable {
        what: &'static str,
        path: PathBuf,
        manager: &'static str,
    },
    #[error("the user service needs a home directory: set HOME")]
    NoHome,
    #[error("{path} is where the service's log goes, but {why}; move it away and install again")]
    NotALog { path: PathBuf, why: String },
    #[error("{path} is a symbolic link; refusing to write through it (remove it and try again)")]
    Symlink { path: PathBuf },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot install headroom at {path} for the service: {what}, and a service that runs as root must run a program only root can change; {fix}, or install headroom where only root can write and run `service install --system` from there"
    )]
    UntrustedCopy {
        path: PathBuf,
        what: String,
        fix: String,
    },
    #[error("`{program}` is not installed here (not found in PATH); nothing was written. {fix}")]
    MissingProgram { program: String, fix: &'static str },
    #[error("`{command}` failed ({status}); the steps before it were done, see above")]
    Command { command: String, status: String },
    #[error(
        "the service is NOT running: {failed}. The plist is written ({plist}) and launchd \
         loads it at the next {when}. To start it now: {start}; then check it with: {check}"
    )]
    NotStarted {
        failed: String,
        plist: String,
        when: &'static str,
        start: String,
        check: String,
    },
    #[error(
        "launchd still has {target} {waited} s after the bootout: the daemon may still be \
         running. The plist is removed. Check with `launchctl print {target}`, and stop it with: \
         {by_hand}"
    )]
    StillLoaded {
        target: String,
        waited: u64,
        by_hand: String,
    },
}

#[cfg(test)]
mod testing {
    //! What the tests of every part share.

    use std::path::PathBuf;

    use super::{Manager, Params, Scope};

    /// Ann's parameters: `/usr/local/bin/headroom`, home `/Users/ann`, uid 501.
    pub fn params(manager: Manager, scope: Scope) -> Params {
        Params {
            manager,
            scope,
            binary: PathBuf::from("/usr/local/bin/headroom"),
            source: super::BinarySource::InPlace,
            config: None,
            home: Some(PathBuf::from("/Users/ann")),
            uid: 501,
        }
    }

    /// A plist's top-level dictionary, read back with the `plist` crate.
    pub fn parse_plist(text: &str) -> plist::Dictionary {
        plist::Value::from_reader_xml(text.as_bytes())
            .unwrap()
            .into_dictionary()
            .unwrap()
    }
}
