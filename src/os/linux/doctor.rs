//! `headroom doctor` on Linux: what the Linux sampler needs from the
//! machine, each checked once, with what it found and what to do about it.
//! Adding a check is adding a function to [`CHECKS`]; a collector checks
//! itself (`model::Collector::doctor_check`: the cgroup limits, NVML, the
//! kernel log), the pressure notification through [`pressure_events`].

use std::io;
use std::path::Path;

use crate::model::Check;
use crate::os::linux::psi_trigger::{PsiTrigger, TRIGGERS};
use crate::report::format_bytes;

use crate::os::linux::parse::procfs;

/// The checks, in report order.
pub const CHECKS: &[fn() -> Check] = &[proc_files, psi, permissions, open_files, container];

/// Run every check.
pub fn checks() -> Vec<Check> {
    CHECKS.iter().map(|check| check()).collect()
}

/// Distribution and kernel release.
pub fn facts() -> Vec<(&'static str, String)> {
    let distro = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| pretty_name(&text))
        .unwrap_or_else(|| "unknown (no /etc/os-release)".to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    vec![("distro", distro), ("kernel", kernel)]
}

/// `PRETTY_NAME` of an os-release file, unquoted.
fn pretty_name(os_release: &str) -> Option<String> {
    os_release.lines().find_map(|l| {
        let v = l.strip_prefix("PRETTY_NAME=")?;
        Some(v.trim_matches('"').trim_matches('\'').to_owned())
    })
}

/// What to do to read and signal every user's processes.
fn root_step() -> String {
    format!(
        "install the system service to read and signal every user's processes: {}",
        crate::os::this_process::sudo_command("service install --system")
    )
}

fn proc_files() -> Check {
    let meminfo = match std::fs::read_to_string("/proc/meminfo") {
        Ok(text) => text,
        Err(e) => {
            return Check::fail(
                "proc",
                format!("cannot read /proc/meminfo: {e}"),
                "mount /proc (headroom samples through it)",
            );
        }
    };
    let m = match procfs::parse_meminfo(&meminfo) {
        Ok(m) => procfs::system_memory(&m),
        Err(e) => {
            return Check::fail(
                "proc",
                format!("/proc/meminfo does not parse: {e}"),
                "please report this output",
            );
        }
    };
    let pids = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| procfs::parse_pid(e.file_name().as_encoded_bytes()).is_some())
                .count()
        })
        .unwrap_or(0);
    Check::ok(
        "proc",
        format!(
            "/proc/meminfo: {} total, {} available; {pids} pids in /proc, kernel threads included",
            format_bytes(m.total),
            format_bytes(m.available)
        ),
    )
}

fn psi() -> Check {
    match std::fs::read_to_string("/proc/pressure/memory") {
        Ok(text) => match procfs::parse_psi(&text) {
            Some(p) => Check::ok(
                "psi",
                format!(
                    "/proc/pressure/memory: some avg10 {:.2}%{}",
                    p.some.avg10,
                    p.full
                        .map(|f| format!(", full avg10 {:.2}%", f.avg10))
                        .unwrap_or_default()
                ),
            ),
            None => Check::warn(
                "psi",
                "/proc/pressure/memory does not parse",
                "the level is derived from MemAvailable; please report this output",
            ),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Check::warn(
            "psi",
            "no /proc/pressure/memory: kernel built without CONFIG_PSI",
            "the level is derived from MemAvailable; use a kernel with CONFIG_PSI=y for stall-based levels",
        ),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Check::warn(
            "psi",
            "PSI is disabled (the kernel was booted with psi=0)",
            "add psi=1 to the kernel command line",
        ),
        Err(e) => Check::warn(
            "psi",
            format!("cannot read /proc/pressure/memory: {e}"),
            "the level is derived from MemAvailable",
        ),
    }
}

/// The check of the memory-pressure notification (`sample::PressureEvents`):
/// a PSI trigger registered and dropped, with the window the kernel allows.
pub fn pressure_events() -> Check {
    let path = Path::new("/proc/pressure/memory");
    if !path.exists() {
        return Check::not_applicable("psi-trigger", "no PSI: the daemon polls every tick");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return Check::warn(
                "psi-trigger",
                format!("cannot start a runtime to test the trigger: {e}"),
                "please report this output",
            );
        }
    };
    let result = runtime.block_on(async { PsiTrigger::register(path).map(|t| t.spec()) });
    match result {
        Ok(spec) if spec == TRIGGERS[0] => Check::ok(
            "psi-trigger",
            format!("trigger \"{spec}\" registered: the daemon wakes within 1 s of a stall"),
        ),
        Ok(spec) => Check::warn(
            "psi-trigger",
            format!(
                "trigger \"{spec}\" registered: the kernel refused the 1 s window, which needs CAP_SYS_RESOURCE, so the daemon wakes within 2 s"
            ),
            if crate::os::this_process::running_as_root() {
                "root without CAP_SYS_RESOURCE: in a container, or under a capability bounding set without it; the systemd unit keeps it"
            } else {
                "run as root (the system service) for the 1 s window"
            },
        ),
        Err(e) => Check::warn(
            "psi-trigger",
            e.to_string(),
            "the daemon polls every tick instead; run as root or check that /proc/pressure is writable",
        ),
    }
}

fn permissions() -> Check {
    if crate::os::this_process::running_as_root() {
        return Check::ok(
            "permissions",
            "root: every process's details can be read and signalled",
        );
    }
    // How many processes' executable links this user cannot read: those
    // lose their path and library scan, and cannot be signalled.
    let (mut readable, mut refused) = (0usize, 0usize);
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.filter_map(Result::ok) {
            if procfs::parse_pid(entry.file_name().as_encoded_bytes()).is_none() {
                continue;
            }
            match std::fs::read_link(entry.path().join("exe")) {
                Ok(_) => readable += 1,
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => refused += 1,
                Err(_) => {}
            }
        }
    }
    Check::warn(
        "permissions",
        format!(
            "not root: {refused} processes of other users (or kernel threads) show without executable path and libraries and cannot be signalled; {readable} are fully readable"
        ),
        root_step(),
    )
}

fn open_files() -> Check {
    match std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| procfs::parse_max_open_files(&t))
    {
        Some(soft) if soft >= 1024 => Check::ok(
            "open-files",
            format!("soft limit {soft}: statm files are kept open between ticks"),
        ),
        Some(soft) => Check::warn(
            "open-files",
            format!("soft limit {soft}: few statm files can be kept open, sampling costs more"),
            "raise the limit (the systemd unit sets LimitNOFILE=65536)",
        ),
        None => Check::warn(
            "open-files",
            "cannot read the open-file limit from /proc/self/limits",
            "statm files are opened and closed every tick",
        ),
    }
}

/// Whether headroom sees the machine's processes or a container's.
fn container() -> Check {
    super::container_view::processes_check(&super::container_view::View::read())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CheckStatus;

    #[test]
    fn os_release_pretty_name_is_unquoted() {
        let text =
            "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\n";
        assert_eq!(
            pretty_name(text).as_deref(),
            Some("Debian GNU/Linux 13 (trixie)")
        );
        assert_eq!(pretty_name("ID=alpine\n"), None);
    }

    #[test]
    fn every_check_runs_on_this_machine_and_none_fails() {
        let mut results = checks();
        assert_eq!(results.len(), CHECKS.len());
        results.push(pressure_events());
        for c in &results {
            assert_ne!(c.status, CheckStatus::Fail, "{c:?}");
            assert!(!c.detail.is_empty(), "{c:?}");
            // A warning always says what to do.
            if c.status == CheckStatus::Warn {
                assert!(c.next.is_some(), "{c:?}");
            }
        }
        let names: Vec<_> = results.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "proc",
                "psi",
                "permissions",
                "open-files",
                "container",
                "psi-trigger"
            ]
        );
    }
}
