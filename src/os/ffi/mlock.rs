//! `mlockall(2)` with `MCL_ONFAULT` (Linux 4.4): the daemon's pages, present
//! and future, stay resident once touched (`os::residency` decides whether
//! to ask).

use std::io;

/// `mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)`. `EINVAL` on a kernel
/// without `MCL_ONFAULT`.
pub fn lock_all_on_fault() -> io::Result<()> {
    let flags = libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT;
    // SAFETY: flags only; mlockall touches no memory of ours.
    if unsafe { libc::mlockall(flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
