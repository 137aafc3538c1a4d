//! The two kernel constants the Linux sampler needs from libc: the page size
//! (`statm` and `vmstat` count pages) and the clock tick rate (`stat` counts
//! start time in ticks).

/// Bytes per page, from `sysconf(_SC_PAGESIZE)`; 4096 if sysconf fails.
pub fn page_size() -> u64 {
    // SAFETY: sysconf takes an integer name, touches no memory of ours and
    // is thread-safe; it returns -1 on error, handled below.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(v).ok().filter(|&v| v > 0).unwrap_or(4096)
}

/// Clock ticks per second (`USER_HZ`), from `sysconf(_SC_CLK_TCK)`; 100 if
/// sysconf fails (proc(5): the value is 100 on most architectures).
pub fn clock_ticks() -> u64 {
    // SAFETY: as above: an integer argument, no memory shared, -1 on error.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(v).ok().filter(|&v| v > 0).unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_is_a_power_of_two() {
        assert!(page_size().is_power_of_two());
    }

    #[test]
    fn clock_ticks_is_positive() {
        assert!(clock_ticks() > 0);
    }
}
