//! The C calls the tests make themselves: `kill(2)` on a test's own child
//! (std's `Child::kill` sends only SIGKILL), and on Linux a memfd and a SysV
//! shared memory segment for the tests of memory no process owns. An FFI
//! file: thin, safe wrappers that panic where a call fails.

/// `kill(pid, signal)` on one of the tests' own children; panics if it fails.
pub fn kill(pid: u32, signal: libc::c_int) {
    let c_pid = libc::pid_t::try_from(pid).expect("pid");
    assert!(c_pid > 0, "pid {pid} would address a process group");
    // SAFETY: kill has no memory-safety preconditions; the pid is positive,
    // so it addresses exactly one process, a child a test started.
    let rc = unsafe { libc::kill(c_pid, signal) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {signal}): {}",
        std::io::Error::last_os_error()
    );
}

/// A memfd of `bytes` written bytes (every page allocated), close-on-exec
/// so that no other test's child inherits it; panics where the call fails.
#[cfg(target_os = "linux")]
pub fn memfd(name: &str, bytes: usize) -> std::fs::File {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    let c_name = std::ffi::CString::new(name).expect("name without NUL");
    // SAFETY: memfd_create reads the NUL-terminated name, which outlives the
    // call, and returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(c_name.as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: fd is a descriptor just returned to us and owned by nothing else.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let chunk = vec![0x5au8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len());
        file.write_all(&chunk[..n]).expect("write memfd");
        left -= n;
    }
    file
}

/// A private SysV shared memory segment, removed (`IPC_RMID`) when dropped.
#[cfg(target_os = "linux")]
pub struct SysvSegment {
    pub id: i32,
}

#[cfg(target_os = "linux")]
impl SysvSegment {
    /// A segment of `bytes`, every page touched through an attachment that
    /// is then detached: no process stays attached (an orphan).
    pub fn orphan(bytes: usize) -> Self {
        // SAFETY: shmget takes plain integers and returns an id or -1.
        let id = unsafe { libc::shmget(libc::IPC_PRIVATE, bytes, libc::IPC_CREAT | 0o600) };
        assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
        let segment = Self { id };
        // SAFETY: attaching a segment we created at an address the kernel
        // picks; the result is checked against (void *)-1 before use.
        let at = unsafe { libc::shmat(id, std::ptr::null(), 0) };
        assert!(
            at as isize != -1,
            "shmat: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: `at` points at the `bytes` bytes of the segment just
        // attached, writable (shmflg 0), and nothing else refers to them.
        unsafe { std::ptr::write_bytes(at.cast::<u8>(), 0x5a, bytes) };
        // SAFETY: `at` is the address shmat returned; not used after this.
        let rc = unsafe { libc::shmdt(at) };
        assert_eq!(rc, 0, "shmdt: {}", std::io::Error::last_os_error());
        segment
    }
}

#[cfg(target_os = "linux")]
impl Drop for SysvSegment {
    fn drop(&mut self) {
        // SAFETY: IPC_RMID takes no buffer (null is allowed) and removes the
        // segment this guard created.
        unsafe { libc::shmctl(self.id, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

/// A shared mapping of a whole file, every page touched; unmapped when
/// dropped.
#[cfg(target_os = "linux")]
pub struct SharedMapping {
    at: *mut libc::c_void,
    len: usize,
}

#[cfg(target_os = "linux")]
impl SharedMapping {
    /// Map `len` bytes of `file` (`MAP_SHARED`, read and write) and write
    /// to every page.
    pub fn of(file: &std::fs::File, len: usize) -> Self {
        use std::os::fd::AsRawFd;
        // SAFETY: a new mapping at an address the kernel picks, of a file
        // descriptor that is open for the duration of the call; the result
        // is checked against MAP_FAILED before use.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert!(
            at != libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: `at` points at `len` writable bytes of the mapping just
        // made, which nothing else refers to.
        unsafe { std::ptr::write_bytes(at.cast::<u8>(), 0x5a, len) };
        Self { at, len }
    }
}

#[cfg(target_os = "linux")]
impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: the address and length of the mapping made in `of`, not
        // used after this.
        unsafe { libc::munmap(self.at, self.len) };
    }
}
