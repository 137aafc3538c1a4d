//! The daemon's budget of open file descriptors.
//!
//! Enforcement needs descriptors of its own: the sampler opens `/proc` files
//! every tick, each signalled process takes a pidfd, the journal, hooks,
//! Jupyter lookups and NVML open more. A flood of HTTP clients must never
//! take them. At start, [`raise_open_files`] lifts the soft `RLIMIT_NOFILE`
//! to the hard limit (the default soft limit of 1024 is easy to exhaust with
//! idle sockets), and the HTTP server keeps its connections within
//! [`http_connection_budget`]: half of what the soft limit leaves above
//! [`RESERVED_FDS`]. The other half is the Linux sampler's: it keeps up to
//! that many `statm` files open between ticks (`os::linux::sampler`, sized from
//! the same limit after the raise), so the two never compete.
//!
//! macOS refuses a soft limit above `OPEN_MAX` (10240, `<sys/syslimits.h>`)
//! or `kern.maxfilesperproc`, and its hard limit is often `RLIM_INFINITY`,
//! which `setrlimit` rejects for `RLIMIT_NOFILE` (`setrlimit(2)`, COMPATIBILITY):
//! there the target is capped at `kern.maxfilesperproc` (or `OPEN_MAX` when
//! the sysctl cannot be read).

use std::io;

use crate::os::ffi::rlimit::{self, Resource};

/// Descriptors kept for the sampler, pidfds, the journal, hooks, Jupyter
/// lookups, NVML and the runtime: the HTTP server never counts on them.
pub const RESERVED_FDS: u64 = 256;

/// The fewest connections the HTTP server is allowed, however low the limit:
/// enough for a scrape, the status page and `headroom status` at once.
pub const MIN_HTTP_CONNECTIONS: usize = 8;

/// What [`raise_open_files`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// The soft limit found at start.
    pub before: u64,
    /// The soft limit now in force.
    pub soft: u64,
    /// The hard limit (`u64::MAX` for unlimited).
    pub hard: u64,
}

impl OpenFilesLimit {
    /// A line for the log.
    pub fn describe(&self) -> String {
        let hard = if self.hard == u64::MAX {
            "unlimited".to_string()
        } else {
            self.hard.to_string()
        };
        if self.soft > self.before {
            format!(
                "open-file limit raised from {} to {} (hard limit {hard}); {} kept for sampling and actions",
                self.before, self.soft, RESERVED_FDS
            )
        } else {
            format!(
                "open-file limit {} (hard limit {hard}); {} kept for sampling and actions",
                self.soft, RESERVED_FDS
            )
        }
    }
}

/// `RLIMIT_NOFILE`'s soft limit, to which a raise goes: the hard limit, or
/// the OS's own ceiling where it is lower (macOS) or the hard limit is
/// unlimited. Never lowers the current soft limit.
pub fn target_soft_limit(soft: u64, hard: u64, os_ceiling: Option<u64>) -> u64 {
    let target = match os_ceiling {
        Some(ceiling) => hard.min(ceiling),
        None if hard == u64::MAX => soft,
        None => hard,
    };
    target.max(soft)
}

/// How many HTTP connections the limit leaves room for: half of `soft` less
/// [`RESERVED_FDS`] (the sampler may keep the other half open), at least
/// [`MIN_HTTP_CONNECTIONS`].
pub fn http_connection_budget(soft: u64) -> usize {
    let budget = soft.saturating_sub(RESERVED_FDS) / 2;
    usize::try_from(budget)
        .unwrap_or(usize::MAX)
        .max(MIN_HTTP_CONNECTIONS)
}

/// The soft and hard `RLIMIT_NOFILE` of this process (`u64::MAX` for
/// unlimited).
pub fn open_files_limits() -> io::Result<(u64, u64)> {
    rlimit::get(Resource::OpenFiles)
}

/// The soft `RLIMIT_NOFILE` in force now.
pub fn open_files_limit() -> io::Result<u64> {
    open_files_limits().map(|(soft, _)| soft)
}

/// Raise the soft `RLIMIT_NOFILE` to [`target_soft_limit`]. The error names
/// the limit asked for.
pub fn raise_open_files() -> io::Result<OpenFilesLimit> {
    let (before, hard) = open_files_limits()?;
    let target = target_soft_limit(before, hard, os_ceiling());
    if target > before
        && let Err(e) = rlimit::set(Resource::OpenFiles, target, hard)
    {
        return Err(io::Error::new(
            e.kind(),
            format!("cannot raise the open-file limit from {before} to {target}: {e}"),
        ));
    }
    let (soft, hard) = open_files_limits()?;
    Ok(OpenFilesLimit { before, soft, hard })
}

/// The OS's own ceiling on a process's open files, where `setrlimit` does
/// not accept the hard limit itself.
#[cfg(target_os = "macos")]
fn os_ceiling() -> Option<u64> {
    use crate::os::macos::ffi::sysctl::sysctl_raw;

    /// `OPEN_MAX` in XNU's `bsd/sys/syslimits.h`.
    const OPEN_MAX: u64 = 10240;
    let mut value = [0u8; size_of::<libc::c_int>()];
    match sysctl_raw(c"kern.maxfilesperproc", &mut value) {
        Ok(n) if n == value.len() => u64::try_from(libc::c_int::from_ne_bytes(value))
            .ok()
            .filter(|&v| v > 0)
            .or(Some(OPEN_MAX)),
        _ => Some(OPEN_MAX),
    }
}

/// Linux accepts the hard limit itself (it is at most `fs.nr_open`).
#[cfg(not(target_os = "macos"))]
fn os_ceiling() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_the_hard_limit() {
        assert_eq!(target_soft_limit(1024, 524_288, None), 524_288);
    }

    #[test]
    fn an_os_ceiling_caps_the_target() {
        // macOS: hard unlimited, kern.maxfilesperproc 245760.
        assert_eq!(target_soft_limit(256, u64::MAX, Some(245_760)), 245_760);
        assert_eq!(target_soft_limit(256, 4096, Some(10_240)), 4096);
    }

    #[test]
    fn an_unlimited_hard_limit_without_a_ceiling_keeps_the_soft_one() {
        assert_eq!(target_soft_limit(1024, u64::MAX, None), 1024);
    }

    #[test]
    fn the_soft_limit_is_never_lowered() {
        assert_eq!(target_soft_limit(8192, 4096, Some(1024)), 8192);
    }

    #[test]
    fn the_budget_keeps_the_reserve_and_a_floor() {
        assert_eq!(http_connection_budget(1024), 384);
        assert_eq!(http_connection_budget(300), 22);
        assert_eq!(http_connection_budget(270), MIN_HTTP_CONNECTIONS);
        assert_eq!(http_connection_budget(0), MIN_HTTP_CONNECTIONS);
        assert!(http_connection_budget(u64::MAX) > 1 << 30, "unlimited");
    }

    #[test]
    fn raising_reaches_the_hard_limit_and_is_read_back() {
        let raised = raise_open_files().unwrap();
        assert!(raised.soft >= raised.before);
        assert_eq!(open_files_limit().unwrap(), raised.soft);
        if raised.hard != u64::MAX && !cfg!(target_os = "macos") {
            assert_eq!(raised.soft, raised.hard);
        }
        assert!(raised.describe().contains("kept for sampling"));
    }
}
