//! The systemd units `headroom service install` writes, for the system and
//! for a user, pass `systemd-analyze verify` (Debian's `systemd`; `scripts/test.sh` installs it). That they
//! are what the installer prints, and run headroom on the given config, is
//! checked without systemd in the hermetic tier (`tests/hermetic/service.rs`).
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;

use headroom::service::{self, Manager, Params, Scope};

use crate::support::need_tools;

/// A config file of the valid fixtures, absolute.
fn valid_config() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/valid");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "toml"))
        .expect("a valid config fixture");
    file.canonicalize().unwrap()
}

/// `systemd-analyze verify` on a unit file, in `dir`; its output must be
/// empty (unknown keys and bad values only warn, with exit 0).
fn verify(dir: &Path, unit: &str, user: bool) {
    let path = dir.join("headroom.service");
    std::fs::write(&path, unit).unwrap();
    let runtime = dir.join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let mut cmd = Command::new("systemd-analyze");
    if user {
        cmd.arg("--user").env("XDG_RUNTIME_DIR", &runtime);
    }
    let out = cmd
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze (Debian package systemd; scripts/test.sh installs it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.trim().is_empty(),
        "{text}\n{unit}"
    );
}

#[test]
fn the_systemd_units_pass_systemd_analyze_verify() {
    need_tools(&[("systemd-analyze", "systemd")]);
    let home = tempfile::tempdir().unwrap();
    for scope in [Scope::System, Scope::User] {
        let params = Params {
            manager: Manager::Systemd,
            scope,
            binary: Path::new(env!("CARGO_BIN_EXE_headroom"))
                .canonicalize()
                .unwrap(),
            config: Some(valid_config()),
            home: Some(home.path().to_path_buf()),
            uid: headroom::sys::this_process::effective_uid(),
        };
        let unit = service::systemd_unit(&params).unwrap();
        let dir = tempfile::tempdir().unwrap();
        verify(dir.path(), &unit, scope == Scope::User);
    }
}
