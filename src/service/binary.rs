//! Which headroom executable a service runs, and for the system service,
//! the copy the installer makes where only root can change it.
//!
//! A system service runs as root at every boot whatever file its unit or
//! plist names, so that file must be one only root can change: a binary
//! its user can replace (`~/.cargo/bin/headroom` after `cargo install`,
//! Intel Homebrew's `/usr/local/bin`, which belongs to the user who installed
//! Homebrew) hands that user root at the next start. [`choose`] keeps the
//! running executable when it passes the trusted-path check hooks and the
//! NVML library pass ([`crate::os::trusted_path::check_path`], root as the
//! only trusted uid), and otherwise plans a copy at [`root_binary`]'s path:
//! `/usr/local/sbin/headroom` on Linux, `/usr/local/libexec/headroom/headroom`
//! on macOS (`/usr/local/bin` and `/usr/local/sbin` are Homebrew's there;
//! `libexec` is not). The copy is owned by root, mode 0755, and checked
//! again, with every directory above it, before and after it is written
//! (`execute.rs`). A user service runs as its user and takes the running
//! executable as it is. [`fragile_note`] says so when the binary a service
//! runs is one the next build or upgrade replaces.
//!
//! Homebrew installs each version in its own keg,
//! `<prefix>/Cellar/headroom/<version>/bin/headroom`, which `brew upgrade`
//! removes (docs.brew.sh/FAQ: old versions are uninstalled on upgrade), and keeps `<prefix>/opt/headroom`, a link
//! to the current keg, across upgrades. The running executable is found
//! through its canonical path, the Cellar one; [`stable_path`] names the
//! `opt` path instead when it leads to the same file, so that a plist keeps
//! working after an upgrade (and runs the new version at its next start).

use std::path::{Path, PathBuf};

use super::{Manager, Scope};
use crate::os::trusted_path::Untrusted;

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

/// `<prefix>/opt/<formula>/<rest>` for a path in a Homebrew keg,
/// `<prefix>/Cellar/<formula>/<version>/<rest>`; `None` for any other path.
pub fn homebrew_opt(binary: &Path) -> Option<PathBuf> {
    let parts: Vec<_> = binary.components().collect();
    let cellar = parts.iter().rposition(|c| c.as_os_str() == "Cellar")?;
    let formula = parts.get(cellar + 1)?;
    let rest = parts.get(cellar + 3..).filter(|r| !r.is_empty())?;
    let mut opt: PathBuf = parts[..cellar].iter().collect();
    opt.push("opt");
    opt.push(formula);
    opt.extend(rest);
    Some(opt)
}

/// The path a service should name for the executable at `running` (a
/// canonical path): Homebrew's `opt` path ([`homebrew_opt`]) when
/// `resolve` (the file system's `canonicalize`) leads it to `running`
/// itself, else `running`.
pub fn stable_path(running: &Path, resolve: impl Fn(&Path) -> Option<PathBuf>) -> PathBuf {
    homebrew_opt(running)
        .filter(|opt| resolve(opt).as_deref() == Some(running))
        .unwrap_or_else(|| running.to_path_buf())
}

/// A note for a service that runs `binary` from where the next build or
/// upgrade replaces it: a checkout's `target/debug` or `target/release`, or
/// a `debug` or `release` directory in a directory Cargo tagged as its
/// build output (`cargo build` replaces it, `cargo clean` removes it), or a versioned
/// Homebrew Cellar path (`brew upgrade` removes it; `brew services`
/// follows upgrades, on macOS and on Linux). `None` for any other path.
pub fn fragile_note(binary: &Path) -> Option<String> {
    let names: Vec<&str> = binary.iter().filter_map(|c| c.to_str()).collect::<Vec<_>>();
    let parent = names.len().checked_sub(2).map(|i| names[i]);
    let in_target = names.contains(&"target") && matches!(parent, Some("debug" | "release"));
    // Cargo marks its target directory, whatever CARGO_TARGET_DIR names
    // it, with a CACHEDIR.TAG: two or three levels up (target/release/,
    // target/TRIPLE/release/).
    let tagged = || {
        binary
            .ancestors()
            .skip(2)
            .take(2)
            .any(|d| d.join("CACHEDIR.TAG").is_file())
    };
    if in_target || (matches!(parent, Some("debug" | "release")) && tagged()) {
        return Some(format!(
            "the service runs {}, a build output of a source checkout, which the next `cargo \
             build` replaces and `cargo clean` removes; for a service that outlives them, \
             install headroom first (`cargo install --locked --path .`, or a package) and \
             install the service from the installed binary",
            binary.display()
        ));
    }
    if names.contains(&"Cellar") {
        return Some(format!(
            "the service runs {}, which the next `brew upgrade` removes (the path names the \
             version); `brew services start headroom` runs headroom under Homebrew's own \
             service and follows upgrades",
            binary.display()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::trusted_path::Problem;

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
    fn a_build_output_is_pointed_to_cargo_install_and_a_cellar_to_brew_services() {
        let said = fragile_note(Path::new("/home/ann/headroom/target/debug/headroom"))
            .expect("a note for a build output");
        assert!(said.contains("cargo install --locked --path ."), "{said}");
        assert!(!said.contains("brew"), "on Linux there is no brew: {said}");
        let said = fragile_note(Path::new(
            "/home/linuxbrew/.linuxbrew/Cellar/headroom/0.4.0/bin/headroom",
        ))
        .expect("a note for a Cellar path");
        assert!(said.contains("brew services start headroom"), "{said}");
        assert!(!said.contains("cargo"), "{said}");
        for stable in [
            "/usr/bin/headroom",
            "/home/ann/.cargo/bin/headroom",
            "/srv/target/headroom",
        ] {
            assert_eq!(fragile_note(Path::new(stable)), None, "{stable}");
        }
    }

    #[test]
    fn a_cellar_binary_is_named_by_homebrews_opt_path() {
        // Apple silicon and Intel prefixes, and Linuxbrew's
        // (docs.brew.sh/Installation: /opt/homebrew, /usr/local,
        // /home/linuxbrew/.linuxbrew); `opt/<formula>` links to the current
        // keg (docs.brew.sh/Formula-Cookbook, "opt_prefix").
        for (cellar, opt) in [
            (
                "/opt/homebrew/Cellar/headroom/0.4.0/bin/headroom",
                "/opt/homebrew/opt/headroom/bin/headroom",
            ),
            (
                "/usr/local/Cellar/headroom/0.4.0_1/bin/headroom",
                "/usr/local/opt/headroom/bin/headroom",
            ),
            (
                "/home/linuxbrew/.linuxbrew/Cellar/headroom/0.4.0/bin/headroom",
                "/home/linuxbrew/.linuxbrew/opt/headroom/bin/headroom",
            ),
        ] {
            assert_eq!(homebrew_opt(Path::new(cellar)), Some(PathBuf::from(opt)));
            let resolves = |p: &Path| (p == Path::new(opt)).then(|| PathBuf::from(cellar));
            assert_eq!(stable_path(Path::new(cellar), resolves), PathBuf::from(opt));
        }
        for other in [
            "/usr/local/bin/headroom",
            "/opt/homebrew/Cellar/headroom",
            "/opt/homebrew/Cellar/headroom/0.4.0",
        ] {
            assert_eq!(homebrew_opt(Path::new(other)), None, "{other}");
        }
    }

    #[test]
    fn an_opt_path_that_leads_elsewhere_is_not_used() {
        // `brew unlink`, or an opt link already moved to another version:
        // the service keeps the running binary (and its note).
        let running = Path::new("/opt/homebrew/Cellar/headroom/0.4.0/bin/headroom");
        let newer = |_: &Path| {
            Some(PathBuf::from(
                "/opt/homebrew/Cellar/headroom/0.5.0/bin/headroom",
            ))
        };
        assert_eq!(stable_path(running, newer), running);
        assert_eq!(stable_path(running, |_| None), running);
        assert!(fragile_note(running).is_some());
        assert_eq!(
            fragile_note(Path::new("/opt/homebrew/opt/headroom/bin/headroom")),
            None
        );
    }

    #[test]
    fn a_user_service_runs_its_users_binary() {
        let running = Path::new("/home/ann/.cargo/bin/headroom");
        let (binary, source) = choose(Manager::Systemd, Scope::User, running, Err(untrusted()));
        assert_eq!((binary.as_path(), source), (running, BinarySource::InPlace));
    }
}
