//! `pidfd_open(2)` and `pidfd_send_signal(2)` (Linux 5.3, 5.1): a
//! descriptor that refers to one process for as long as it is open, and a
//! signal sent through it. What the errors mean for the actuator
//! (`ESRCH`: gone; `ENOSYS`: no pidfds) is read in `os::linux::process`.

use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd};

/// `pidfd_open(pid, 0)`: a new descriptor for process `pid`.
pub fn open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags (0) and returns a new file
    // descriptor or -1; it reads and writes no memory of ours.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(rc).map_err(|_| {
        io::Error::other(format!("pidfd_open returned {rc}, not a file descriptor"))
    })?;
    // SAFETY: the kernel just returned this descriptor to us and nothing else
    // owns it; OwnedFd closes it exactly once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pidfd_send_signal(fd, signal, NULL, 0)`: `ESRCH` once the process has
/// exited, even if its pid was reused.
pub fn send_signal(fd: BorrowedFd<'_>, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: the descriptor is open for the life of the borrow; a null
    // siginfo asks the kernel to fill it in as kill() would; flags 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
