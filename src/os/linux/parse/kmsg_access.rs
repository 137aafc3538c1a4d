//! What post-mortems can learn from the kernel log on this machine, from
//! what was found (pure, so that it is tested everywhere): whether
//! `/dev/kmsg` opened, `debug.exception-trace`, and whether the daemon is
//! root.

/// Where `debug.exception-trace` (`show_unhandled_signals`) is read.
pub const EXCEPTION_TRACE: &str = "/proc/sys/debug/exception-trace";

/// `/proc/sys/debug/exception-trace` as read: `Some(true)` when the kernel
/// logs unhandled faults.
pub fn parse_exception_trace(text: &str) -> Option<bool> {
    match text.trim() {
        "0" => Some(false),
        "" => None,
        n => n.parse::<i64>().ok().map(|v| v != 0),
    }
}

/// What to do when `/dev/kmsg` cannot be read, for a daemon that is root
/// or not. Reading it needs `CAP_SYSLOG` where `kernel.dmesg_restrict = 1`
/// (Debian's and Ubuntu's default): root has it unless a systemd unit or a
/// container drops it, and systemd's `ProtectKernelLogs=` hides the device.
pub fn kmsg_step(root: bool) -> String {
    if root {
        "keep CAP_SYSLOG in the daemon's capabilities (CapabilityBoundingSet= in a systemd unit; \
         a container's granted capabilities) and leave ProtectKernelLogs= off, as the unit that \
         `headroom service install --system` writes does"
            .to_owned()
    } else {
        format!(
            "run the daemon as root ({}) or give it CAP_SYSLOG",
            crate::os::this_process::sudo_command("service install --system")
        )
    }
}

/// The Linux check from what was found: whether `/dev/kmsg` opened,
/// `debug.exception-trace`, and whether the daemon is root.
pub fn linux_check(
    kmsg: Result<(), String>,
    exception_trace: Option<bool>,
    root: bool,
) -> crate::model::Check {
    use crate::model::Check;
    match (kmsg, exception_trace) {
        (Err(e), _) => Check::warn(
            "post-mortems",
            format!(
                "/dev/kmsg is not readable ({e}): OOM kills, crashes and GPU faults of watched processes go unrecorded and their post-mortems say \"cause unknown\""
            ),
            kmsg_step(root),
        ),
        (Ok(()), Some(false)) => Check::warn(
            "post-mortems",
            "OOM kills and NVIDIA Xid errors are read from /dev/kmsg, but debug.exception-trace is 0 (the default on arm64 kernels): the kernel logs no segfaults or illegal instructions, so crashes are not recorded",
            "sysctl debug.exception-trace=1 (and debug.exception-trace = 1 in /etc/sysctl.d/ to keep it)",
        ),
        (Ok(()), _) => Check::ok(
            "post-mortems",
            "OOM kills, crashes (segfaults, illegal instructions, general protection faults) and NVIDIA Xid errors are read from /dev/kmsg",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doctor_says_what_post_mortems_miss_and_what_to_do() {
        use crate::model::CheckStatus;
        let ok = linux_check(Ok(()), Some(true), true);
        assert_eq!(ok.status, CheckStatus::Ok);
        let off = linux_check(Ok(()), Some(false), true);
        assert_eq!(off.status, CheckStatus::Warn);
        assert!(
            off.next
                .unwrap()
                .starts_with("sysctl debug.exception-trace=1")
        );
        let denied = linux_check(
            Err("Permission denied (os error 13)".into()),
            Some(true),
            false,
        );
        assert!(denied.detail.contains("Permission denied"));
        assert!(denied.next.unwrap().starts_with("run the daemon as root"));
        // Root refused: its capabilities were cut, and saying "run as
        // root" would not help.
        let cut = linux_check(
            Err("Operation not permitted (os error 1)".into()),
            None,
            true,
        );
        assert_eq!(cut.status, CheckStatus::Warn);
        let next = cut.next.unwrap();
        assert!(
            next.contains("CAP_SYSLOG") && next.contains("ProtectKernelLogs="),
            "{next}"
        );
        assert!(!next.starts_with("run the daemon as root"), "{next}");
    }

    #[test]
    fn exception_trace_is_read_as_on_or_off() {
        assert_eq!(parse_exception_trace("1\n"), Some(true));
        assert_eq!(parse_exception_trace("0\n"), Some(false));
        assert_eq!(parse_exception_trace("\n"), None);
        assert_eq!(parse_exception_trace("x"), None);
    }
}
