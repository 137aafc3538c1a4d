//! Staying awake when the machine thrashes: the daemon's own pages stay in
//! memory, and the kernel's OOM killer picks it last.
//!
//! - **Locked memory** (Linux): `mlockall(MCL_CURRENT | MCL_FUTURE |
//!   MCL_ONFAULT)`, as earlyoom and nohang do, so that the pages of the loop
//!   that must act are never swapped out or dropped while memory runs out.
//!   `MCL_ONFAULT` (Linux 4.4) locks pages as they are touched rather than
//!   every reserved byte at once: thread stacks and malloc arenas reserve far
//!   more than they use. With `MCL_FUTURE`, an allocation that would pass
//!   `RLIMIT_MEMLOCK` fails (mlockall(2)), so the lock is taken only when the
//!   limit is raised to unlimited first (root with `CAP_SYS_RESOURCE`) or
//!   does not apply (`CAP_IPC_LOCK`: "no limits are placed on the amount of
//!   memory that a privileged process can lock", mlock(2); a container may
//!   grant this one without the other), and skipped, with the reason,
//!   otherwise. The daemon's memory is bounded
//!   (capped HTTP connections and argv, ring buffers of fixed length), which
//!   is what makes locking it safe.
//! - **OOM score** (Linux): `/proc/self/oom_score_adj` set to -1000, so the
//!   kernel never chooses headroom while it has another victim.
//! - **macOS** has neither: jetsam does not honour `mlock` for a process's
//!   whole footprint, and a third-party LaunchDaemon cannot set its own jetsam
//!   priority band. What the platform allows is in the service plist
//!   (`ProcessType Interactive`: no throttling of the daemon's CPU and I/O);
//!   these functions say "not available" there.

use std::io;

/// What [`lock_memory`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locked {
    /// Every page, present and future, stays resident once touched.
    All,
    /// Not locked, and why (for one log line).
    Skipped(String),
}

/// Lock the daemon's memory where the platform and the limits allow; see the
/// module documentation.
pub fn lock_memory() -> Locked {
    imp::lock_memory()
}

/// Make the kernel's OOM killer choose this process last. `Ok(Some(score))`
/// is the score now in force; `Ok(None)` where the OS has no such setting.
pub fn shield_from_oom_killer() -> io::Result<Option<i32>> {
    imp::shield_from_oom_killer()
}

/// The OOM score a root daemon asks for: the kernel never picks it.
pub const OOM_SCORE_ADJ: i32 = -1000;

/// `CAP_IPC_LOCK`'s bit (linux/capability.h): lock memory without limit.
pub const CAP_IPC_LOCK: u32 = 14;

/// Whether the effective capabilities in `status` (the text of
/// `/proc/<pid>/status`, its `CapEff:` hex mask) hold capability `bit`.
/// False when the line is missing or malformed.
pub fn has_capability(status: &str, bit: u32) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .and_then(|mask| mask.checked_shr(bit))
        .is_some_and(|m| m & 1 == 1)
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{Locked, OOM_SCORE_ADJ};
    use crate::os::ffi::mlock;
    use crate::os::ffi::rlimit::{self, Resource};
    use std::io;

    pub fn lock_memory() -> Locked {
        if let Err(e) = rlimit::set(Resource::LockedMemory, u64::MAX, u64::MAX) {
            let unbounded = std::fs::read_to_string("/proc/self/status")
                .is_ok_and(|status| super::has_capability(&status, super::CAP_IPC_LOCK));
            if !unbounded {
                return Locked::Skipped(format!(
                    "cannot raise RLIMIT_MEMLOCK to unlimited ({e}) and no CAP_IPC_LOCK; with a \
                     limit, locking future pages could make an allocation fail, so memory is not \
                     locked (run as root with CAP_SYS_RESOURCE or CAP_IPC_LOCK, or \
                     LimitMEMLOCK=infinity in the unit)"
                ));
            }
        }
        if let Err(e) = mlock::lock_all_on_fault() {
            return Locked::Skipped(if e.raw_os_error() == Some(libc::EINVAL) {
                "this kernel has no MCL_ONFAULT (Linux 4.4 or newer): locking every reserved \
                 page would cost far more than the daemon uses, so memory is not locked"
                    .to_string()
            } else {
                format!("mlockall failed ({e}); memory is not locked")
            });
        }
        Locked::All
    }

    pub fn shield_from_oom_killer() -> io::Result<Option<i32>> {
        let path = "/proc/self/oom_score_adj";
        std::fs::write(path, format!("{OOM_SCORE_ADJ}\n"))
            .map_err(|e| io::Error::new(e.kind(), format!("cannot write {path}: {e}")))?;
        let now = std::fs::read_to_string(path)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot read {path}: {e}")))?;
        now.trim().parse().map(Some).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path} holds {:?}, not a number", now.trim()),
            )
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::Locked;
    use std::io;

    pub fn lock_memory() -> Locked {
        Locked::Skipped(
            "this OS keeps no lock on a whole process's memory that its memory killer honours; \
             the service runs as ProcessType Interactive instead"
                .to_string(),
        )
    }

    pub fn shield_from_oom_killer() -> io::Result<Option<i32>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_read_from_the_effective_mask() {
        // As in a container that grants CAP_IPC_LOCK (bit 14) but not
        // CAP_SYS_RESOURCE (bit 24).
        let status = "Name:\tx\nCapPrm:\t000001ffffffffff\nCapEff:\t000001fffeffffff\n";
        assert!(has_capability(status, CAP_IPC_LOCK));
        assert!(!has_capability(status, 24));
        assert!(!has_capability("CapEff:\t0000000000000000\n", CAP_IPC_LOCK));
    }

    #[test]
    fn a_missing_or_malformed_mask_grants_nothing() {
        assert!(!has_capability("Name:\tx\n", CAP_IPC_LOCK));
        assert!(!has_capability("CapEff:\tzz\n", CAP_IPC_LOCK));
        assert!(!has_capability("CapEff:\tffffffffffffffff\n", 64));
    }

    /// Elsewhere than Linux both say plainly that nothing was done.
    #[cfg(not(target_os = "linux"))]
    #[test]
    fn other_systems_report_what_they_cannot_do() {
        assert!(matches!(lock_memory(), Locked::Skipped(why) if why.contains("ProcessType")));
        assert_eq!(shield_from_oom_killer().unwrap(), None);
    }

    /// In a child process of its own: the lock and the score would otherwise
    /// apply to the whole test binary.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_locked_process_keeps_allocating_and_reports_it() {
        // The test binary re-runs itself with this variable to act as the child.
        if std::env::var_os("HEADROOM_RESIDENCY_CHILD").is_some() {
            let locked = lock_memory();
            // Allocate and touch 64 MiB after the lock: it must not fail.
            let v = vec![1u8; 64 << 20];
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let vmlck = status
                .lines()
                .find(|l| l.starts_with("VmLck:"))
                .unwrap()
                .to_string();
            println!("CHILD {locked:?} {vmlck} {}", v[v.len() - 1]);
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "os::residency::tests::a_locked_process_keeps_allocating_and_reports_it",
                "--nocapture",
            ])
            .env("HEADROOM_RESIDENCY_CHILD", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout
            .lines()
            .find(|l| l.starts_with("CHILD "))
            .unwrap_or_else(|| panic!("no report from the child: {stdout}"));
        let kib: u64 = line
            .split("VmLck:")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        if line.contains("All") {
            assert!(kib >= 64 * 1024, "touched pages are locked: {line}");
        } else {
            assert!(line.contains("Skipped(\""), "{line}");
            assert_eq!(kib, 0, "nothing is locked when skipped: {line}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_oom_score_is_lowered_only_with_the_right_to() {
        // CAP_SYS_RESOURCE (bit 24) is what lowering the score takes.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let may_lower = has_capability(&status, 24);
        if std::env::var_os("HEADROOM_OOM_CHILD").is_some() {
            println!("CHILD {:?}", shield_from_oom_killer());
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "os::residency::tests::the_oom_score_is_lowered_only_with_the_right_to",
                "--nocapture",
            ])
            .env("HEADROOM_OOM_CHILD", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().find(|l| l.starts_with("CHILD ")).unwrap();
        if may_lower {
            assert_eq!(line, "CHILD Ok(Some(-1000))");
        } else {
            assert!(
                line.contains("cannot write /proc/self/oom_score_adj"),
                "{line}"
            );
        }
    }
}
