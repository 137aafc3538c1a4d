//! `getrlimit(2)` and `setrlimit(2)`: the open-file limit the daemon raises
//! at start (`os::fd_limit`) and the locked-memory limit it lifts before
//! `mlockall` (`os::residency`).

use std::io;

/// The limits headroom reads or sets. (The C type of a resource differs:
/// an unsigned enum in glibc, `int` in musl and macOS; each call takes
/// libc's constant as it is.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `RLIMIT_NOFILE`: open file descriptors.
    OpenFiles,
    /// `RLIMIT_MEMLOCK`: bytes of locked memory (lifted on Linux only).
    #[cfg(target_os = "linux")]
    LockedMemory,
}

/// The soft and hard limit of `resource` for this process (`u64::MAX` for
/// unlimited).
pub fn get(resource: Resource) -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let which = match resource {
        Resource::OpenFiles => libc::RLIMIT_NOFILE,
        #[cfg(target_os = "linux")]
        Resource::LockedMemory => libc::RLIMIT_MEMLOCK,
    };
    // SAFETY: getrlimit writes one `struct rlimit` to the pointer, which
    // points to a live, writable `libc::rlimit` on this stack frame.
    let rc = unsafe { libc::getrlimit(which, &mut limit) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((from_rlim(limit.rlim_cur), from_rlim(limit.rlim_max)))
}

/// Set the soft and hard limit of `resource` (`u64::MAX` for unlimited).
pub fn set(resource: Resource, soft: u64, hard: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: to_rlim(soft),
        rlim_max: to_rlim(hard),
    };
    let which = match resource {
        Resource::OpenFiles => libc::RLIMIT_NOFILE,
        #[cfg(target_os = "linux")]
        Resource::LockedMemory => libc::RLIMIT_MEMLOCK,
    };
    // SAFETY: setrlimit reads one `struct rlimit` from the pointer, which
    // points to a live, initialised `libc::rlimit` on this stack frame.
    let rc = unsafe { libc::setrlimit(which, &limit) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

// `rlim_t` is a 64-bit unsigned integer on every platform headroom builds
// for (glibc and musl on 64-bit Linux, `__uint64_t` in XNU's
// `sys/resource.h`), so values pass through unchanged but for the infinity.
fn from_rlim(value: libc::rlim_t) -> u64 {
    if value == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        value
    }
}

fn to_rlim(value: u64) -> libc::rlim_t {
    if value == u64::MAX {
        libc::RLIM_INFINITY
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_file_limit_reads_back_as_set() {
        let (soft, hard) = get(Resource::OpenFiles).unwrap();
        assert!(soft <= hard, "soft {soft} above hard {hard}");
        set(Resource::OpenFiles, soft, hard).unwrap();
        assert_eq!(get(Resource::OpenFiles).unwrap(), (soft, hard));
    }

    #[test]
    fn infinity_is_the_largest_value() {
        assert_eq!(from_rlim(libc::RLIM_INFINITY), u64::MAX);
        assert_eq!(to_rlim(u64::MAX), libc::RLIM_INFINITY);
        assert_eq!(from_rlim(to_rlim(4096)), 4096);
    }
}
