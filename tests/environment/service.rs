//! The systemd units `headroom service install` writes, for the system and
//! for a user, pass `systemd-analyze verify` (Debian's `systemd`; `scripts/test.sh` installs it). That they
//! are what the installer prints, and run headroom on the given config, is
//! checked without systemd in the hermetic tier (`tests/hermetic/service.rs`).
//!
//! The system unit's capability bounding set is also tried on the real
//! daemon (root, under `setpriv`): what it keeps must let `headroom doctor`
//! read the kernel log where `kernel.dmesg_restrict = 1`.
//!
//! Where systemd is not PID 1, as in most containers, `service install`
//! writes nothing and says what to do instead: tried in PID and mount
//! namespaces of its own, with systemd's `/run/systemd/system` hidden, so
//! that it holds on machines systemd runs too, and under `strace`, which
//! sees every file the installer would create or change.
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
        uid: headroom::os::this_process::effective_uid(),
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

/// In new PID and mount namespaces: an empty tmpfs over `/run/systemd` (or
/// `/run`), which hides `/run/systemd/system`, the mark of a machine
/// systemd runs; tmpfs over the directories an install writes, so that
/// nothing could reach this machine's; then `strace` (PID 1 there, as a
/// container's init would be) runs `$2 service install --system --config
/// $3` and writes every file system call to `$1`.
const WITHOUT_SYSTEMD: &str = r#"
set -e
run=/run/systemd
[ -d "$run" ] || run=/run
mount -t tmpfs -o mode=0755 headroom-no-systemd "$run"
for d in /etc/systemd/system /usr/local/sbin; do
    if [ -d "$d" ]; then mount -t tmpfs -o mode=0755 headroom-install "$d"; fi
done
exec strace -f -qq -o "$1" -e trace=%file "$2" service install --system --config "$3"
"#;

/// The file system calls of a strace log that create, change or remove
/// something.
fn writes(log: &str) -> Vec<&str> {
    const CHANGING: &[&str] = &[
        "creat(",
        "mkdir(",
        "mkdirat(",
        "mknod(",
        "mknodat(",
        "rename(",
        "renameat(",
        "renameat2(",
        "unlink(",
        "unlinkat(",
        "rmdir(",
        "symlink(",
        "symlinkat(",
        "link(",
        "linkat(",
        "chmod(",
        "fchmodat(",
        "fchmodat2(",
        "chown(",
        "lchown(",
        "fchownat(",
        "truncate(",
        "utimensat(",
        "setxattr(",
        "lsetxattr(",
        "removexattr(",
    ];
    log.lines()
        .filter(|l| {
            // "PID  call(args) = result"
            let call = l.split_whitespace().nth(1).unwrap_or("");
            CHANGING.iter().any(|c| call.starts_with(c))
                || ((call.starts_with("open(") || call.starts_with("openat("))
                    && ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"]
                        .iter()
                        .any(|f| l.contains(f)))
        })
        .collect()
}

/// `unshare` starting what follows in a PID namespace of its own (so that
/// PID 1 there is no systemd) with a private mount namespace (so that the
/// script can hide `/run/systemd` from it alone).
fn in_namespaces() -> Command {
    let mut unshare = Command::new("unshare");
    unshare.args([
        "--pid",
        "--fork",
        "--mount-proc",
        "--mount",
        "--propagation",
        "private",
    ]);
    unshare
}

#[test]
fn where_systemd_is_not_pid_1_install_writes_nothing_and_says_what_to_do() {
    need_root();
    need_tools(&[("strace", "strace"), ("unshare", "util-linux")]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("strace.log");
    let config = valid_config();
    let bin = Path::new(BIN).canonicalize().unwrap();
    let out = in_namespaces()
        .args(["/bin/sh", "-c", WITHOUT_SYSTEMD, "without-systemd"])
        .args([&log, &bin, &config])
        .env("HOME", dir.path())
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("unshare (Debian package util-linux)");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    let trace =
        std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("no strace log ({e}): {said}"));
    assert!(
        trace.contains("\"/proc/1/comm\""),
        "strace saw the installer look at PID 1:\n{trace}"
    );
    let written = writes(&trace);
    assert!(
        written.is_empty(),
        "the installer wrote:\n{}",
        written.join("\n")
    );
    let config = config.display().to_string();
    for needle in [
        "headroom: systemd is not running here (PID 1 is `strace`, not systemd, and \
         /run/systemd/system, which systemd makes when it boots a machine, does not exist)",
        "nothing was written",
        // Commands that work as they are, under sudo too: this binary by
        // its path.
        &format!("{} run --config {config}\n", bin.display()),
        "DaemonSet in deploy/kubernetes/",
        &format!(
            "{} service install --system --config {config} --no-start\n",
            bin.display()
        ),
    ] {
        assert!(said.contains(needle), "{needle:?} in\n{said}");
    }
}

/// As [`WITHOUT_SYSTEMD`], without strace: `$2 service install --system
/// --config $3 --no-start`, what systemd would find at the next boot, then
/// `$2 service uninstall --system` and what is left.
const NO_START_WITHOUT_SYSTEMD: &str = r#"
set -e
run=/run/systemd
[ -d "$run" ] || run=/run
mount -t tmpfs -o mode=0755 headroom-no-systemd "$run"
for d in /etc/systemd/system /usr/local/sbin; do
    [ -d "$d" ] || { echo "$d is missing"; exit 1; }
    mount -t tmpfs -o mode=0755 headroom-install "$d"
done
"$2" service install --system --config "$3" --no-start
echo "unit: $(sed -n 's/^ExecStart=//p' /etc/systemd/system/headroom.service)"
echo "wants: $(readlink /etc/systemd/system/multi-user.target.wants/headroom.service)"
echo "is-enabled: $(systemctl is-enabled headroom.service || true)"
"$2" service uninstall --system
echo "after uninstall: $(ls -A /etc/systemd/system | tr '\n' ' ')"
echo "is-enabled: $(systemctl is-enabled headroom.service 2>&1 || true)"
"#;

#[test]
fn where_systemd_is_not_pid_1_no_start_writes_and_enables_the_unit_for_the_next_boot() {
    need_root();
    need_tools(&[("systemctl", "systemd"), ("unshare", "util-linux")]);
    let dir = tempfile::tempdir().unwrap();
    let config = valid_config();
    let bin = Path::new(BIN).canonicalize().unwrap();
    let out = in_namespaces()
        .args(["/bin/sh", "-c", NO_START_WITHOUT_SYSTEMD, "no-start"])
        .args([Path::new("-"), &bin, &config])
        .env("HOME", dir.path())
        .output()
        .expect("unshare (Debian package util-linux)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    for needle in [
        &format!(
            "unit: {} run --config {}\n",
            bin.display(),
            config.display()
        ),
        "wants: /etc/systemd/system/headroom.service\n",
        "is-enabled: enabled\n",
        "headroom: service written and enabled for the next boot under systemd, not started",
        // Uninstalled: the unit and its link are gone.
        "after uninstall: \n",
        "headroom: service disabled and removed (its manager is not running: nothing to stop)",
    ] {
        assert!(said.contains(needle), "{needle:?} in\n{said}");
    }
    assert_eq!(
        said.matches("is-enabled: enabled").count(),
        1,
        "enabled once, disabled after uninstall:\n{said}"
    );
}
