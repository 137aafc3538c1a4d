//! The uid of this process: the one libc call every platform module (and
//! `headroom doctor`, `headroom service`) needs.

/// The real uid of this process.
pub fn current_uid() -> u32 {
    // SAFETY: getuid takes no arguments, touches no memory of ours and
    // cannot fail (POSIX: "always successful").
    unsafe { libc::getuid() }
}
