//! Per-process values from libproc (`proc_pidinfo`, `proc_pid_rusage`) and
//! the errno of a failed call, as plain values.
//!
//! - Start time: `pbi_start_tvsec` and `pbi_start_tvusec` of
//!   `struct proc_bsdinfo` (`bsd/sys/proc_info.h`), the process's
//!   `p_start`. headroom uses microseconds since the epoch as the identity
//!   ([`crate::model::ProcessId::start`]).
//! - Names: `pbi_name` (up to 32 bytes, the executable's name) when set,
//!   else `pbi_comm` (16 bytes), both NUL-padded C strings.
//! - Errors: libproc and sysctl report why through errno; which errno
//!   means what depends on the call, so each call site picks a rule here.

use crate::model::Timestamp;

/// Microseconds since the epoch from a `timeval`-style pair, saturating;
/// a microsecond part of a second or more is clamped (it never is, but the
/// value comes from the kernel).
pub fn start_micros(tv_sec: u64, tv_usec: u64) -> u64 {
    tv_sec
        .saturating_mul(1_000_000)
        .saturating_add(tv_usec.min(999_999))
}

/// The wall-clock start of a process from its identity value.
pub fn started_at(start_micros: u64) -> Timestamp {
    Timestamp(start_micros / 1000)
}

/// A NUL-padded C string field as text (lossy UTF-8), up to the first NUL
/// or the end of the field.
pub fn c_field(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The process name: `pbi_name` if the kernel filled it, else `pbi_comm`.
pub fn process_name(pbi_name: &[u8], pbi_comm: &[u8]) -> String {
    let name = c_field(pbi_name);
    if name.is_empty() {
        c_field(pbi_comm)
    } else {
        name
    }
}

/// How a failed per-process read is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The process exited between listing and reading.
    Vanished,
    /// Another user's process, and headroom is not root.
    Denied,
    /// Anything else.
    Unreadable,
}

/// The failure kind of a libproc call (`proc_pidinfo`, `proc_pid_rusage`,
/// `proc_pidpath`): ESRCH for a gone process, EPERM for one the caller may
/// not inspect (`proc_security_policy` in `bsd/kern/proc_info.c`).
pub fn libproc_failure(errno: i32) -> Failure {
    match errno {
        libc::ESRCH => Failure::Vanished,
        libc::EPERM | libc::EACCES => Failure::Denied,
        _ => Failure::Unreadable,
    }
}

/// The failure kind of a `KERN_PROCARGS2` sysctl. The kernel answers EINVAL
/// both for a pid that is gone and for another user's process when the
/// caller is not root (`sysctl_procargsx` in `bsd/kern/kern_sysctl.c`), so
/// the owner decides which one it was.
pub fn procargs_failure(errno: i32, owner: Option<u32>, my_uid: u32) -> Failure {
    let others = my_uid != 0 && owner.is_some_and(|uid| uid != my_uid);
    match errno {
        libc::EINVAL if others => Failure::Denied,
        libc::EINVAL | libc::ESRCH => Failure::Vanished,
        libc::EPERM | libc::EACCES => Failure::Denied,
        _ => Failure::Unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_microseconds_since_the_epoch() {
        // A process started at 2024-11-22 03:33:31.250731 UTC.
        assert_eq!(start_micros(1_732_246_411, 250_731), 1_732_246_411_250_731);
        assert_eq!(
            started_at(1_732_246_411_250_731).to_string(),
            "2024-11-22T03:33:31.250Z"
        );
    }

    #[test]
    fn start_time_saturates_and_clamps() {
        assert_eq!(start_micros(u64::MAX, 5), u64::MAX);
        assert_eq!(start_micros(1, 5_000_000), 1_999_999);
    }

    #[test]
    fn names_prefer_the_long_field() {
        // Safari's GPU process: its name is longer than MAXCOMLEN.
        let mut name = [0u8; 32];
        name[..20].copy_from_slice(b"com.apple.WebKit.GPU");
        let comm: [u8; 16] = *b"com.apple.WebKit";
        // A 16-byte comm without a NUL is still read whole.
        assert_eq!(c_field(&comm), "com.apple.WebKit");
        assert_eq!(process_name(&name, &comm), "com.apple.WebKit.GPU");
        // Invalid UTF-8 is replaced, not rejected.
        assert_eq!(c_field(b"caf\xe9\0\0"), "caf\u{fffd}");
        assert_eq!(process_name(&[0; 32], &comm), "com.apple.WebKit");
        assert_eq!(process_name(&[0; 32], &[0; 16]), "");
    }

    #[test]
    fn libproc_errnos_sort_into_failures() {
        assert_eq!(libproc_failure(libc::ESRCH), Failure::Vanished);
        assert_eq!(libproc_failure(libc::EPERM), Failure::Denied);
        assert_eq!(libproc_failure(libc::EINVAL), Failure::Unreadable);
    }

    #[test]
    fn procargs_einval_is_denied_only_for_other_users_when_not_root() {
        // Unprivileged, another user's process: denied.
        assert_eq!(
            procargs_failure(libc::EINVAL, Some(0), 501),
            Failure::Denied
        );
        // Our own process: it must be gone (or a zombie without a stack).
        assert_eq!(
            procargs_failure(libc::EINVAL, Some(501), 501),
            Failure::Vanished
        );
        // Root sees everyone: EINVAL means gone.
        assert_eq!(
            procargs_failure(libc::EINVAL, Some(501), 0),
            Failure::Vanished
        );
        // Owner unknown: assume gone rather than blame permissions.
        assert_eq!(procargs_failure(libc::EINVAL, None, 501), Failure::Vanished);
        assert_eq!(
            procargs_failure(libc::ENOMEM, None, 501),
            Failure::Unreadable
        );
    }
}
