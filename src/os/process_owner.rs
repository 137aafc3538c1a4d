//! Whether a process exists, and which user it runs as.
//!
//! A Jupyter runtime file names its server's pid; before the server's token
//! is sent anywhere, the pid must still be alive and run as the file's
//! owner (a file left behind by a crashed server names a pid that is gone,
//! or that the OS has since given to someone else's process).
//!
//! Linux: the effective uid on the `Uid:` line of `/proc/<pid>/status`
//! (`proc_pid_status` in `fs/proc/array.c`: real, effective, saved, file
//! system). macOS: `pbi_uid` of `proc_pidinfo(PROC_PIDTBSDINFO)`. Elsewhere
//! nothing is known.

use std::io::{self, Read as _};
use std::path::Path;

/// The largest `status` read: the kernel's is about 1.5 KiB.
const MAX_STATUS: u64 = 64 << 10;

/// The effective uid of process `pid`: `Ok(Some(uid))`, `Ok(None)` when no
/// such process exists, an error when the OS would not say.
pub fn uid_of(pid: u32) -> io::Result<Option<u32>> {
    #[cfg(target_os = "linux")]
    {
        read_status_uid(Path::new("/proc"), pid)
    }
    #[cfg(target_os = "macos")]
    {
        bsd_uid(pid)
    }
}

/// [`uid_of`] on macOS: `pbi_uid` of [`crate::os::macos::ffi::proc::bsd_info`].
/// Another user's process needs root (EPERM otherwise).
#[cfg(target_os = "macos")]
fn bsd_uid(pid: u32) -> io::Result<Option<u32>> {
    let Some(ipid) = crate::os::macos::parse::proc_info::darwin_pid(pid) else {
        return Ok(None);
    };
    match crate::os::macos::ffi::proc::bsd_info(ipid) {
        Ok(info) => Ok(Some(info.owner.effective)),
        Err(libc::ESRCH) => Ok(None),
        Err(errno) => {
            let e = io::Error::from_raw_os_error(errno);
            Err(io::Error::new(
                e.kind(),
                format!("cannot read who runs process {pid} (proc_pidinfo PROC_PIDTBSDINFO): {e}"),
            ))
        }
    }
}

/// [`uid_of`] from `<proc_root>/<pid>/status`.
pub fn read_status_uid(proc_root: &Path, pid: u32) -> io::Result<Option<u32>> {
    if pid == 0 {
        // Not a process: `/proc/0` does not exist, but a pid of 0 in a file
        // is not one to look up either.
        return Ok(None);
    }
    let path = proc_root.join(pid.to_string()).join("status");
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("cannot read {}: {e}", path.display()),
            ));
        }
    };
    let mut text = String::new();
    // A process that exits while its status is read reads as gone (ESRCH).
    match file.take(MAX_STATUS).read_to_string(&mut text) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("cannot read {}: {e}", path.display()),
            ));
        }
    }
    parse_status_uid(&text).map(Some).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} has no readable Uid: line", path.display()),
        )
    })
}

/// The effective uid (second number) of the `Uid:` line of a
/// `/proc/<pid>/status` text.
pub fn parse_status_uid(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_ascii_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The start of `/proc/<pid>/status` of a process that dropped root
    /// with `setresuid(0, 65534, 0)` (real 0, effective 65534, saved 0), as
    /// Linux 6.18 prints it.
    const STATUS: &str = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4242\nPPid:\t1\nTracerPid:\t0\nUid:\t0\t65534\t0\t65534\nGid:\t0\t0\t0\t0\n";

    #[test]
    fn the_effective_uid_is_read() {
        assert_eq!(parse_status_uid(STATUS), Some(65534));
    }

    #[test]
    fn a_status_without_a_uid_line_is_none() {
        assert_eq!(parse_status_uid("Name:\tx\n"), None);
        assert_eq!(parse_status_uid("Uid:\t1000\n"), None);
        assert_eq!(parse_status_uid("Uid:\t1000\tx\t0\t0\n"), None);
    }

    #[test]
    fn a_missing_pid_is_gone_not_an_error() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(read_status_uid(root.path(), 4242).unwrap(), None);
        assert_eq!(read_status_uid(root.path(), 0).unwrap(), None);
        std::fs::create_dir(root.path().join("4242")).unwrap();
        std::fs::write(root.path().join("4242/status"), STATUS).unwrap();
        assert_eq!(read_status_uid(root.path(), 4242).unwrap(), Some(65534));
        std::fs::write(root.path().join("4242/status"), "garbage").unwrap();
        let e = read_status_uid(root.path(), 4242).unwrap_err();
        assert!(e.to_string().contains("4242/status"), "{e}");
    }

    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn this_process_runs_as_its_effective_uid() {
        use std::os::unix::fs::MetadataExt as _;
        // A file this process creates is owned by its effective uid.
        let file = tempfile::NamedTempFile::new().unwrap();
        let euid = file.as_file().metadata().unwrap().uid();
        assert_eq!(uid_of(std::process::id()).unwrap(), Some(euid));
    }

    #[cfg(target_os = "macos")]
    #[test]
    fn a_pid_no_darwin_process_can_have_has_no_owner() {
        assert_eq!(uid_of(u32::MAX).unwrap(), None);
    }
}
