//! The Debian package, built by `scripts/package-deb.sh` (cargo-deb) and
//! installed on this machine with `dpkg -i`: its files, their owners and
//! modes, the conffile, the enabled unit, the postinst's word where systemd
//! is not PID 1, `headroom doctor` and `headroom check-config` of the
//! installed binary as root, the installed daemon on the installed config,
//! then `dpkg -r` (config and journal kept) and `dpkg -P` (both gone).
//!
//! It installs into the system's own paths, so it refuses to run where
//! headroom is installed already (a package, or `/usr/bin/headroom`,
//! `/etc/headroom`, …) or where a process holds files in
//! `/var/lib/headroom`; a journal left there by earlier root daemons is
//! moved aside for the test and put back after the purge. `scripts/test.sh`
//! runs it alone, after the rest of the tier. That the package's metadata
//! and unit agree with headroom is checked without dpkg in the hermetic tier
//! (`tests/hermetic/packaging.rs`).
#![cfg(target_os = "linux")]

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{need_root, need_tools, signal};

const STATE: &str = "/var/lib/headroom";
const LOGS: &str = "/var/log/headroom";
const CONFIG: &str = "/etc/headroom/headroom.toml";
const BINARY: &str = "/usr/bin/headroom";

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn run_ok(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    let said = text(&out);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\n{said}",
        out.status
    );
    said
}

/// The package's status as dpkg-query gives it (`install ok installed`,
/// `deinstall ok config-files`), or `None` where dpkg knows no headroom.
fn package_status() -> Option<String> {
    let out = run("dpkg-query", &["-W", "-f=${Status}", "headroom"]);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.ends_with("not-installed"))
}

/// The unit's path in the package: /lib under Debian 12's merged /usr is
/// where debhelper and cargo-deb put it.
fn unit_path(listed: &str) -> PathBuf {
    let path = listed
        .lines()
        .find(|l| l.ends_with("/systemd/system/headroom.service"))
        .unwrap_or_else(|| panic!("no headroom.service in dpkg -L:\n{listed}"));
    PathBuf::from(path)
}

/// Processes with a file open under `dir`, as "pid (name)".
fn holders_of(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds
            .filter_map(Result::ok)
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|target| target.starts_with(dir));
        if holds {
            let name = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            found.push(format!("{pid} ({})", name.trim()));
        }
    }
    found
}

/// Fails the test where installing and purging the package would change
/// what is already on this machine.
fn refuse_to_clobber() {
    if let Some(status) = package_status() {
        panic!(
            "dpkg has headroom as \"{status}\": this test installs and purges its own package; \
             purge it first (dpkg -P headroom) or run the test on another machine"
        );
    }
    for path in [
        BINARY,
        "/etc/headroom",
        LOGS,
        "/lib/systemd/system/headroom.service",
        "/usr/lib/systemd/system/headroom.service",
        "/usr/share/headroom",
        "/usr/share/doc/headroom",
    ] {
        assert!(
            std::fs::symlink_metadata(path).is_err(),
            "{path} exists: this test installs the Debian package there and purges it \
             afterwards; move it away first or run the test on another machine"
        );
    }
    let holders = holders_of(Path::new(STATE));
    assert!(
        holders.is_empty(),
        "processes have files open in {STATE}: {}; the test purges {STATE}: stop them first",
        holders.join(", ")
    );
}

/// The package installed for the test: purges it if the test stops half
/// way, and puts back the state directory found before the test.
struct Installed {
    saved_state: Option<PathBuf>,
}

impl Installed {
    /// Moves an existing state directory aside (the test's purge deletes it).
    fn prepare() -> Self {
        let saved = PathBuf::from(format!(
            "{STATE}.before-package-test-{}",
            std::process::id()
        ));
        let saved_state = Path::new(STATE).exists().then(|| {
            std::fs::rename(STATE, &saved)
                .unwrap_or_else(|e| panic!("moving {STATE} aside to {}: {e}", saved.display()));
            saved
        });
        Installed { saved_state }
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if package_status().is_some() {
            let out = run("dpkg", &["--purge", "headroom"]);
            if !out.status.success() {
                eprintln!("dpkg --purge headroom after the test: {}", text(&out));
            }
        }
        if let Some(saved) = &self.saved_state {
            let _ = std::fs::remove_dir_all(STATE);
            if let Err(e) = std::fs::rename(saved, STATE) {
                eprintln!(
                    "putting {} back at {STATE} failed: {e}; move it back by hand",
                    saved.display()
                );
            }
        }
    }
}

/// Owner, group and permission bits of `path`.
fn owner_mode(path: &str) -> (u32, u32, u32) {
    let m = std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

/// Builds the package (the release build and cargo-deb) and returns its path.
fn build_package() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/package-deb.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        out.status.success(),
        "scripts/package-deb.sh: {}",
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let deb = PathBuf::from(stdout.lines().last().expect("the .deb's path").trim());
    assert!(deb.is_file(), "{} was not written", deb.display());
    deb
}

/// The installed daemon, in dry run on a free port, until its journal in
/// /var/lib/headroom records its start; then SIGTERM.
fn run_installed_daemon() {
    let mut child = Command::new(BINARY)
        .args([
            "run",
            "--config",
            CONFIG,
            "--dry-run",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the installed daemon");
    let journal = Path::new(STATE).join("journal.jsonl");
    let started = Instant::now();
    let mut seen = false;
    while started.elapsed() < Duration::from_secs(60) {
        if std::fs::read_to_string(&journal).is_ok_and(|j| j.contains("\"started\"")) {
            seen = true;
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut log = String::new();
            let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut log);
            panic!("the installed daemon exited ({status}) before starting:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    signal(child.id(), "TERM");
    let output = child.wait_with_output().expect("wait for the daemon");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        seen,
        "no \"started\" event in {} within 60 s; the daemon's log:\n{log}",
        journal.display()
    );
    assert!(
        output.status.success(),
        "the installed daemon's exit after SIGTERM: {}; its log:\n{log}",
        output.status
    );
}

#[test]
fn the_deb_installs_runs_doctor_as_root_and_purges_cleanly() {
    need_root();
    need_tools(&[
        ("dpkg", "dpkg"),
        ("dpkg-query", "dpkg"),
        ("dpkg-shlibdeps", "dpkg-dev"),
    ]);
    refuse_to_clobber();
    let deb = build_package();
    let deb = deb.to_str().unwrap();

    // What the archive holds, before anything is installed.
    let contents = run_ok("dpkg-deb", &["--contents", deb]);
    assert!(
        !contents.contains("hog"),
        "the test program is packaged:\n{contents}"
    );
    // `tar tv`'s listing: the second field is owner/group (dpkg-deb writes
    // them as numbers).
    for line in contents.lines() {
        let owner = line.split_whitespace().nth(1).unwrap_or_default();
        assert!(matches!(owner, "0/0" | "root/root"), "not root's: {line}");
    }
    let fields = run_ok("dpkg-deb", &["--field", deb, "Package", "Depends"]);
    assert!(fields.contains("Package: headroom"), "{fields}");
    assert!(
        fields.contains("libc6"),
        "Depends is computed from the binary's libraries: {fields}"
    );

    let _installed = Installed::prepare();
    let said = run_ok("dpkg", &["--install", deb]);
    eprintln!("dpkg --install {deb}:\n{said}");
    assert_eq!(package_status().as_deref(), Some("install ok installed"));
    if Path::new("/run/systemd/system").is_dir() {
        assert!(said.contains("service is enabled and started"), "{said}");
    } else {
        assert!(
            said.contains("systemd is not running here")
                && said.contains("/usr/bin/headroom run --config /etc/headroom/headroom.toml"),
            "the postinst must say the service was not started and how to run it:\n{said}"
        );
    }

    // The files, their owners and modes.
    let listed = run_ok("dpkg", &["--listfiles", "headroom"]);
    for want in [
        BINARY,
        CONFIG,
        "/usr/share/headroom/grafana/headroom.json",
        "/usr/share/headroom/prometheus/alerts.yml",
        "/usr/share/doc/headroom/README.md",
    ] {
        assert!(
            listed.lines().any(|l| l == want),
            "{want} not in dpkg -L:\n{listed}"
        );
    }
    assert!(!listed.contains("hog"), "{listed}");
    assert_eq!(owner_mode(BINARY), (0, 0, 0o755), "{BINARY}");
    assert_eq!(owner_mode(CONFIG), (0, 0, 0o644), "{CONFIG}");
    assert_eq!(owner_mode("/etc/headroom"), (0, 0, 0o755));
    let unit = unit_path(&listed);
    let unit_text = unit.to_str().unwrap();
    assert_eq!(owner_mode(unit_text), (0, 0, 0o644), "{unit_text}");
    let repo_unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/debian/headroom.service"),
    )
    .unwrap();
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), repo_unit);
    let conffiles = run_ok("dpkg-query", &["-W", "-f=${Conffiles}", "headroom"]);
    assert!(
        conffiles.contains(CONFIG),
        "{CONFIG} is a conffile: {conffiles}"
    );
    // Enabled for multi-user.target, systemd running or not.
    let wanted = Path::new("/etc/systemd/system/multi-user.target.wants/headroom.service");
    assert_eq!(
        std::fs::read_link(wanted)
            .unwrap_or_else(|e| panic!("{}: {e}", wanted.display()))
            .file_name(),
        unit.file_name()
    );

    // The installed binary: its config is its own default, and it checks.
    let default = run_ok(BINARY, &["print-config"]);
    assert_eq!(std::fs::read_to_string(CONFIG).unwrap(), default);
    let checked = run_ok(BINARY, &["check-config", CONFIG]);
    assert!(checked.contains(&format!("{CONFIG}: valid")), "{checked}");
    let version = run_ok(BINARY, &["--version"]);
    assert!(version.starts_with("headroom "), "{version}");
    let doctor = run(BINARY, &["doctor"]);
    let report = text(&doctor);
    eprintln!("{BINARY} doctor:\n{report}");
    assert!(
        doctor.status.success(),
        "headroom doctor as root failed:\n{report}"
    );
    for line in [
        "uid      0 (root)",
        "\nok    permissions",
        "\nok    proc",
        " 0 fail",
    ] {
        assert!(
            report.contains(line),
            "{line:?} not in the doctor's report:\n{report}"
        );
    }

    // The packaged daemon on the packaged config writes its journal where
    // the unit's StateDirectory= is.
    run_installed_daemon();
    assert_eq!(owner_mode(STATE).0, 0);

    // Remove keeps the config and the journal; purge deletes them.
    run_ok("dpkg", &["--remove", "headroom"]);
    assert!(
        !Path::new(BINARY).exists(),
        "{BINARY} is left after dpkg -r"
    );
    assert!(Path::new(CONFIG).exists(), "dpkg -r keeps the conffile");
    assert!(
        Path::new(STATE).join("journal.jsonl").exists(),
        "dpkg -r keeps the journal"
    );
    run_ok("dpkg", &["--purge", "headroom"]);
    assert_eq!(package_status(), None);
    for gone in ["/etc/headroom", STATE, LOGS, "/usr/share/headroom"] {
        assert!(!Path::new(gone).exists(), "{gone} is left after dpkg -P");
    }
    assert!(
        std::fs::symlink_metadata(wanted).is_err(),
        "{} is left after dpkg -P",
        wanted.display()
    );
}
