//! The systemd units `headroom service install` writes, for the system and
//! for a user, pass `systemd-analyze verify` (Debian's `systemd`; `scripts/test.sh` installs it). That they
//! are what the installer prints, and run headroom on the given config, is
//! checked without systemd in the hermetic tier (`tests/hermetic/service.rs`).
//!
//! The system unit's capability bounding set is also tried on the real
//! daemon (root, under `setpriv`): what it keeps must let `headroom doctor`
//! read the kernel log where `kernel.dmesg_restrict = 1`.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;

use headroom::service::{self, Manager, Params, Scope};

use crate::support::{BIN, need_root, need_tools};

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
    for scope in [Scope::System, Scope::User] {
        let unit = unit_of(scope);
        let dir = tempfile::tempdir().unwrap();
        verify(dir.path(), &unit, scope == Scope::User);
    }
}

/// The unit of `scope` for the built binary and a valid config.
fn unit_of(scope: Scope) -> String {
    let home = tempfile::tempdir().unwrap();
    service::systemd_unit(&Params {
        manager: Manager::Systemd,
        scope,
        binary: Path::new(BIN).canonicalize().unwrap(),
        source: service::BinarySource::InPlace,
        config: Some(valid_config()),
        home: Some(home.path().to_path_buf()),
        uid: headroom::sys::this_process::effective_uid(),
    })
    .unwrap()
}

/// The unit's `CapabilityBoundingSet=` as `setpriv --bounding-set` takes it:
/// `-all,+kill,+sys_ptrace,…`.
fn bounding_set(unit: &str) -> String {
    let caps = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the system unit sets CapabilityBoundingSet=");
    let mut set = String::from("-all");
    for cap in caps.split_whitespace() {
        let name = cap.strip_prefix("CAP_").expect("CAP_ names").to_lowercase();
        set.push_str(&format!(",+{name}"));
    }
    set
}

/// `kernel.dmesg_restrict` held at 1 (Debian's and Ubuntu's default, and
/// what makes `CAP_SYSLOG` needed) while the test runs, then put back.
struct DmesgRestricted {
    before: String,
}

const DMESG_RESTRICT: &str = "/proc/sys/kernel/dmesg_restrict";

impl DmesgRestricted {
    fn hold() -> Self {
        let before = std::fs::read_to_string(DMESG_RESTRICT)
            .unwrap_or_else(|e| panic!("cannot read {DMESG_RESTRICT}: {e}"));
        if before.trim() != "1" {
            std::fs::write(DMESG_RESTRICT, "1").unwrap_or_else(|e| {
                panic!(
                    "{DMESG_RESTRICT} is {} and cannot be set to 1 ({e}): the test needs it \
                     to show what CAP_SYSLOG is for",
                    before.trim()
                )
            });
        }
        Self { before }
    }
}

impl Drop for DmesgRestricted {
    fn drop(&mut self) {
        if self.before.trim() != "1" {
            let _ = std::fs::write(DMESG_RESTRICT, self.before.trim());
        }
    }
}

/// `headroom doctor`'s post-mortems line, run as root within `bounding`.
fn post_mortems_within(bounding: &str) -> String {
    let out = Command::new("setpriv")
        .args(["--bounding-set", bounding, "--inh-caps=-all", "--"])
        .arg(BIN)
        .arg("doctor")
        .output()
        .expect("setpriv (Debian package util-linux)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.split_whitespace().nth(1) == Some("post-mortems"))
        .map(str::to_owned)
        .unwrap_or_else(|| {
            panic!(
                "no post-mortems line from headroom doctor within {bounding}:\n{text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

#[test]
fn the_system_units_capabilities_let_the_daemon_read_the_kernel_log() {
    need_root();
    need_tools(&[("setpriv", "util-linux")]);
    let unit = unit_of(Scope::System);
    let _restricted = DmesgRestricted::hold();
    let kept = bounding_set(&unit);
    let line = post_mortems_within(&kept);
    assert!(
        line.starts_with("ok") && line.contains("/dev/kmsg"),
        "within the unit's capabilities ({kept}): {line}"
    );
    // The control: the same set without CAP_SYSLOG cannot, and the doctor
    // says what to keep rather than "run as root".
    let cut = kept.replace(",+syslog", "");
    assert_ne!(cut, kept, "the unit keeps CAP_SYSLOG");
    let line = post_mortems_within(&cut);
    assert!(
        line.starts_with("warn") && line.contains("/dev/kmsg is not readable"),
        "without CAP_SYSLOG ({cut}): {line}"
    );
}
