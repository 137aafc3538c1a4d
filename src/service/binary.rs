//! Which headroom executable a service runs, and for the system service,
//! the copy the installer makes where only root can change it.
//!
//! A system service runs as root at every boot whatever file its unit or
//! plist names, so that file must be one only root can change: a binary
//! its user can replace (`~/.cargo/bin/headroom` after `cargo install`,
//! Intel Homebrew's `/usr/local/bin`, which belongs to the user who installed
//! Homebrew) hands that user root at the next start. [`choose`] keeps the
//! running executable when it passes the trusted-path check hooks and the
//! NVML library pass ([`crate::sys::trusted_path::check_path`], root as the
//! only trusted uid), and otherwise plans a copy at [`root_binary`]'s path:
//! `/usr/local/sbin/headroom` on Linux, `/usr/local/libexec/headroom/headroom`
//! on macOS (`/usr/local/bin` and `/usr/local/sbin` are Homebrew's there;
//! `libexec` is not). The copy is owned by root, mode 0755, and checked
//! again, with every directory above it, before and after it is written
//! (`execute.rs`). A user service runs as its user and takes the running
//! executable as it is.

use std::path::{Path, PathBuf};

use super::{Manager, Scope};
use crate::sys::trusted_path::Untrusted;

/// Where a system service's own copy of headroom goes under systemd.
pub const SYSTEMD_ROOT_BINARY: &str = "/usr/local/sbin/headroom";
/// Where a system service's own copy of headroom goes under launchd.
pub const LAUNCHD_ROOT_BINARY: &str = "/usr/local/libexec/headroom/headroom";

/// The root-owned path of `manager`'s system service copy of headroom.
pub fn root_binary(manager: Manager) -> PathBuf {
    PathBuf::from(match manager {
        Manager::Systemd => SYSTEMD_ROOT_BINARY,
        Manager::Launchd => LAUNCHD_ROOT_BINARY,
    })
}

/// Where the service's executable comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BinarySource {
    /// The service runs the executable where it is.
    InPlace,
    /// The installer first copies `from` to the path the service runs,
    /// because of `why` (what makes `from` changeable by others).
    Copy { from: PathBuf, why: String },
}

/// The executable a service runs and where it comes from: for a system
/// service, `running` itself if `trusted` (the trusted-path check of
/// `running` with root the only trusted uid) passed, else a copy at
/// [`root_binary`]; for a user service, `running`.
pub fn choose(
    manager: Manager,
    scope: Scope,
    running: &Path,
    trusted: Result<(), Untrusted>,
) -> (PathBuf, BinarySource) {
    match (scope, trusted) {
        (Scope::User, _) | (Scope::System, Ok(())) => {
            (running.to_path_buf(), BinarySource::InPlace)
        }
        (Scope::System, Err(u)) => (
            root_binary(manager),
            BinarySource::Copy {
                from: running.to_path_buf(),
                why: u.what(),
            },
        ),
    }
}

/// What the plan and the installer say about the binary of a system
/// service running `binary`.
pub fn note(binary: &Path, source: &BinarySource) -> String {
    match source {
        BinarySource::InPlace => format!(
            "the service runs {}, which only root can change",
            binary.display()
        ),
        BinarySource::Copy { from, why } => format!(
            "{why}: a service that runs as root must not run a program anyone else can replace, \
             so a copy of {} is installed at {} (owned by root, mode 0755) and the service runs \
             that; after upgrading headroom, install the service again to update the copy",
            from.display(),
            binary.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::trusted_path::Problem;

    fn untrusted() -> Untrusted {
        Untrusted {
            path: PathBuf::from("/home/ann/.cargo/bin/headroom"),
            problem: Problem::Owner { uid: 1000 },
        }
    }

    #[test]
    fn a_system_service_runs_a_trusted_binary_where_it_is() {
        let running = Path::new("/usr/bin/headroom");
        let (binary, source) = choose(Manager::Systemd, Scope::System, running, Ok(()));
        assert_eq!((binary.as_path(), source), (running, BinarySource::InPlace));
    }

    #[test]
    fn a_system_service_runs_a_root_owned_copy_of_a_binary_others_can_change() {
        let running = Path::new("/home/ann/.cargo/bin/headroom");
        for (manager, copy) in [
            (Manager::Systemd, "/usr/local/sbin/headroom"),
            (Manager::Launchd, "/usr/local/libexec/headroom/headroom"),
        ] {
            let (binary, source) = choose(manager, Scope::System, running, Err(untrusted()));
            assert_eq!(binary, PathBuf::from(copy));
            assert_eq!(
                source,
                BinarySource::Copy {
                    from: running.to_path_buf(),
                    why: "/home/ann/.cargo/bin/headroom is owned by uid 1000, not by root".into()
                }
            );
            let said = note(&binary, &source);
            assert!(
                said.starts_with("/home/ann/.cargo/bin/headroom is owned by uid 1000"),
                "{said}"
            );
            assert!(
                said.contains(&format!(
                    "a copy of {} is installed at {copy}",
                    running.display()
                )),
                "{said}"
            );
        }
    }

    #[test]
    fn a_user_service_runs_its_users_binary() {
        let running = Path::new("/home/ann/.cargo/bin/headroom");
        let (binary, source) = choose(Manager::Systemd, Scope::User, running, Err(untrusted()));
        assert_eq!((binary.as_path(), source), (running, BinarySource::InPlace));
    }
}
