//! `geteuid(2)`: the uid the kernel checks this process's signals and reads
//! against (`os::this_process` is where the rest of headroom asks).

/// The effective uid of this process (`geteuid`, which cannot fail).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid takes no arguments, touches no memory of ours and
    // always succeeds (POSIX).
    unsafe { libc::geteuid() }
}
