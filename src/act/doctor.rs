//! The actuator's own `headroom doctor` checks: can it read what it checks
//! before every signal (the process's identity, the signals it catches)?
//! Which desktop notifier would it run, if any ([`notifier`])?

use crate::model::Check;
#[cfg(target_os = "macos")]
use crate::sys::{macos_ffi_proc as ffi_proc, macos_kinfo as kinfo};

#[cfg(target_os = "linux")]
pub fn signals() -> Check {
    let me = std::process::id();
    match (
        super::identity::current_start(me),
        super::identity::catches_signal(me, libc::SIGUSR1),
    ) {
        (Ok(Some(_)), Ok(_)) => Check::ok(
            "signals",
            "process identity (stat start time) and handlers (SigCgt) readable",
        ),
        (Ok(None), _) => Check::fail(
            "signals",
            "this process has no /proc entry",
            "please report this output",
        ),
        (Err(e), _) | (_, Err(e)) => {
            Check::fail("signals", e.to_string(), "please report this output")
        }
    }
}

#[cfg(target_os = "macos")]
pub fn signals() -> Check {
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let k = match ffi_proc::kinfo_proc(me).map(|b| kinfo::parse(&b)) {
        Ok(Ok(Some(k))) => k,
        Ok(Ok(None)) => {
            return Check::fail(
                "signals",
                "kinfo_proc says this process does not exist",
                "please report this output",
            );
        }
        Ok(Err(e)) => return Check::fail("signals", e.to_string(), "please report this output"),
        Err(errno) => {
            return Check::fail(
                "signals",
                format!(
                    "sysctl KERN_PROC_PID failed: {}",
                    std::io::Error::from_raw_os_error(errno)
                ),
                "please report this output",
            );
        }
    };
    match ffi_proc::bsd_info(me) {
        Ok(b) if b.start_micros == k.start_micros => Check::ok(
            "signals",
            format!(
                "process identity (start time) and caught signals readable; kinfo_proc and proc_bsdinfo agree ({} handlers here)",
                k.sigcatch.count_ones()
            ),
        ),
        Ok(b) => Check::fail(
            "signals",
            format!(
                "start times disagree: kinfo_proc {} µs, proc_bsdinfo {} µs",
                k.start_micros, b.start_micros
            ),
            "signals are not sent safely on this macOS; please report this output",
        ),
        Err(errno) => Check::fail(
            "signals",
            format!(
                "proc_pidinfo(PROC_PIDTBSDINFO) failed for this process: {}",
                std::io::Error::from_raw_os_error(errno)
            ),
            "please report this output",
        ),
    }
}

/// Elsewhere the actuator reads processes through sysinfo and cannot tell
/// which signals a process catches.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn signals() -> Check {
    Check::warn(
        "signals",
        "process identity from sysinfo; caught signals cannot be read on this OS",
        "steps with require_handler = true are skipped",
    )
}

/// The notifier a `{ notify = true }` step would run, found the way the
/// actuator finds it ([`super::notify::find_notifier`] in
/// [`super::notify::NOTIFIER_DIRS`], never on `PATH`): `ok` with its path,
/// `warn` when one is there but others could change it, `n/a` when there is
/// none (a machine without a desktop).
pub fn notifier() -> Check {
    use super::notify::{NOTIFIER, NOTIFIER_DIRS, find_notifier};
    let Some(name) = NOTIFIER else {
        return Check::not_applicable("notifier", "no desktop notifier on this OS");
    };
    let dirs: Vec<std::path::PathBuf> = NOTIFIER_DIRS.iter().map(Into::into).collect();
    let euid = crate::sys::this_process::effective_uid();
    match find_notifier(name, &dirs, euid) {
        Ok(path) => Check::ok(
            "notifier",
            format!(
                "{} shows {{ notify = true }} steps; only root can change it",
                path.display()
            ),
        ),
        Err(why) if why.starts_with("no trusted") => Check::warn(
            "notifier",
            why,
            "make it and its directories root's alone (chown root, chmod go-w); until then \
             notifications are not shown",
        ),
        Err(why) => Check::not_applicable(
            "notifier",
            format!("{why}: {{ notify = true }} steps show nothing on this machine"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CheckStatus;

    /// On Linux and macOS the actuator reads this very process's identity
    /// and handlers; the check must pass here.
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn the_actuator_can_read_this_process() {
        let check = signals();
        assert_eq!(check.name, "signals");
        assert_eq!(check.status, CheckStatus::Ok, "{check:?}");
    }

    /// The notifier check names what it found, or where it looked.
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn the_notifier_check_names_the_file_or_where_it_looked() {
        let check = notifier();
        assert_eq!(check.name, "notifier");
        assert!(
            check.detail.contains("/usr/bin"),
            "names /usr/bin either way: {check:?}"
        );
        assert_ne!(check.status, CheckStatus::Fail, "{check:?}");
    }
}
