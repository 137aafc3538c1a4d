//! `getpriority(2)` and `setpriority(2)` for the calling thread: on Linux a
//! nice value belongs to a thread, and `who = 0` with `PRIO_PROCESS` names
//! the calling thread (setpriority(2), NOTES).

use std::io;

/// The calling thread's nice value.
pub fn thread_nice() -> io::Result<i32> {
    // getpriority can return -1 as a value: clear errno first to tell.
    // SAFETY: __errno_location returns this thread's errno slot, always
    // valid to write.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: plain integer arguments; no memory is passed.
    let current = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if current == -1 {
        let e = io::Error::last_os_error();
        if e.raw_os_error().is_some_and(|n| n != 0) {
            return Err(e);
        }
    }
    Ok(current)
}

/// Set the calling thread's nice value.
pub fn set_thread_nice(value: i32) -> io::Result<()> {
    // SAFETY: plain integer arguments; no memory is passed.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, value) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
