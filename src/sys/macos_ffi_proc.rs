//! libproc and sysctl calls about processes: the pid list, BSD info,
//! executable path, arguments, resource usage (footprint) and `kinfo_proc`.
//!
//! Each function makes its call(s) and returns plain values or the errno;
//! the sampler and the signal-identity check sort errnos into failures with
//! [`super::proc_info`]. None of them keeps state between calls.

use std::ffi::c_void;
use std::mem::size_of;
use std::sync::OnceLock;

use super::macos_kinfo::KINFO_PROC_SIZE;
use super::macos_proc_info as proc_info;

/// The errno of the call that just failed (0 if there is none).
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Bound on `kern.argmax`, against a bogus answer.
const MAX_PROCARGS: usize = 4 << 20;

/// All pids, into `out` (cleared first).
pub fn list_pids(out: &mut Vec<i32>) -> Result<(), i32> {
    out.clear();
    // SAFETY: with a null buffer and size 0, proc_listallpids only returns
    // the number of pids there are now; it writes nothing.
    let estimate = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
    if estimate < 0 {
        return Err(errno());
    }
    // Room for processes started between the two calls.
    let capacity = usize::try_from(estimate).unwrap_or(0) + 64;
    out.resize(capacity, 0);
    let bytes = i32::try_from(capacity * size_of::<i32>()).unwrap_or(i32::MAX);
    // SAFETY: `out` holds `capacity` i32 (`bytes` bytes) and the call writes
    // at most `bytes` bytes; it returns the number of pids written.
    let n = unsafe { libc::proc_listallpids(out.as_mut_ptr().cast::<c_void>(), bytes) };
    if n < 0 {
        out.clear();
        return Err(errno());
    }
    out.truncate(usize::try_from(n).unwrap_or(0).min(capacity));
    Ok(())
}

/// What `proc_pidinfo(PROC_PIDTBSDINFO)` says about a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BsdInfo {
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    pub name: String,
    /// Microseconds since the epoch ([`proc_info::start_micros`]).
    pub start_micros: u64,
}

/// `proc_pidinfo(pid, PROC_PIDTBSDINFO)`. Refused with EPERM for other
/// users' processes unless the caller is root.
pub fn bsd_info(pid: i32) -> Result<BsdInfo, i32> {
    // SAFETY: proc_bsdinfo is plain integers and byte arrays; all-zero is
    // a valid value.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = size_of::<libc::proc_bsdinfo>();
    // SAFETY: `info` is writable for `size` bytes, the size passed; the
    // kernel writes at most that and returns how much it wrote.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            (&mut info as *mut libc::proc_bsdinfo).cast::<c_void>(),
            i32::try_from(size).unwrap_or(i32::MAX),
        )
    };
    if n <= 0 {
        return Err(errno());
    }
    if usize::try_from(n).unwrap_or(0) < size {
        return Err(libc::EINVAL);
    }
    let bytes =
        |chars: &[libc::c_char]| -> Vec<u8> { chars.iter().map(|&c| c.to_ne_bytes()[0]).collect() };
    Ok(BsdInfo {
        ppid: info.pbi_ppid,
        uid: info.pbi_ruid,
        name: proc_info::process_name(&bytes(&info.pbi_name), &bytes(&info.pbi_comm)),
        start_micros: proc_info::start_micros(info.pbi_start_tvsec, info.pbi_start_tvusec),
    })
}

/// `proc_pidpath`: the executable's absolute path.
pub fn pid_path(pid: i32) -> Result<String, i32> {
    let mut buf = vec![0u8; libc::PROC_PIDPATHINFO_MAXSIZE as usize];
    // SAFETY: `buf` is writable for its length, the size passed; the call
    // returns the path's length (without NUL) or 0 on failure.
    let n = unsafe {
        libc::proc_pidpath(
            pid,
            buf.as_mut_ptr().cast::<c_void>(),
            u32::try_from(buf.len()).unwrap_or(u32::MAX),
        )
    };
    if n <= 0 {
        return Err(errno());
    }
    buf.truncate(usize::try_from(n).unwrap_or(0).min(buf.len()));
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// `kern.argmax`: the largest argument area, and the largest buffer the
/// kernel accepts for `KERN_PROCARGS2` (1 MiB on current macOS; read once).
fn arg_max() -> usize {
    static ARG_MAX: OnceLock<usize> = OnceLock::new();
    *ARG_MAX.get_or_init(|| {
        super::macos_sysctl::sysctl_int(c"kern.argmax")
            .ok()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n >= 4096)
            .unwrap_or(1 << 20)
            .min(MAX_PROCARGS)
    })
}

/// The raw `KERN_PROCARGS2` answer for `pid`, into `buf`; the number of
/// bytes written, to parse with [`super::procargs::parse`]. EINVAL for a
/// process that is gone and for another user's process when not root.
///
/// The buffer is always `kern.argmax` bytes: given less than the process's
/// argument area, the kernel returns the END of the area (the environment)
/// rather than the start (`sysctl_procargsx`), which would parse as
/// nonsense. It is reused across calls.
pub fn procargs(pid: i32, buf: &mut Vec<u8>) -> Result<usize, i32> {
    let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
    let len = arg_max();
    if buf.len() != len {
        buf.resize(len, 0);
    }
    let mut size: libc::size_t = len;
    // SAFETY: `buf` is writable for `size` bytes and `size` says so; the
    // kernel updates `size` to the number of bytes written.
    let rc = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            3,
            buf.as_mut_ptr().cast::<c_void>(),
            &mut size,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(errno());
    }
    Ok(size.min(len))
}

/// The `rusage_info_v4` figures headroom uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rusage {
    /// `ri_phys_footprint`: what the process is charged for, compressed
    /// and IOKit/Metal memory included (what Activity Monitor's "Memory"
    /// column and jetsam use).
    pub footprint: u64,
    /// `ri_lifetime_max_phys_footprint`.
    pub lifetime_max_footprint: u64,
    /// `ri_resident_size`.
    pub resident: u64,
    /// `ri_proc_start_abstime`: mach absolute time of the process's start;
    /// it changes when the pid is reused, so it doubles as a cheap identity
    /// check between the expensive first-sight reads.
    pub start_abstime: u64,
}

/// `proc_pid_rusage(pid, RUSAGE_INFO_V4)`. EPERM for other users'
/// processes unless the caller is root; ESRCH when gone.
pub fn rusage(pid: i32) -> Result<Rusage, i32> {
    // SAFETY: rusage_info_v4 is plain integers; all-zero is valid.
    let mut info: libc::rusage_info_v4 = unsafe { std::mem::zeroed() };
    // SAFETY: the flavor RUSAGE_INFO_V4 tells the kernel to write one
    // rusage_info_v4 to the buffer, which `info` is. The C prototype takes
    // `rusage_info_t *` (a pointer to void *), hence the cast.
    let rc = unsafe {
        libc::proc_pid_rusage(
            pid,
            libc::RUSAGE_INFO_V4,
            (&mut info as *mut libc::rusage_info_v4).cast::<libc::rusage_info_t>(),
        )
    };
    if rc != 0 {
        return Err(errno());
    }
    Ok(Rusage {
        footprint: info.ri_phys_footprint,
        lifetime_max_footprint: info.ri_lifetime_max_phys_footprint,
        resident: info.ri_resident_size,
        start_abstime: info.ri_proc_start_abstime,
    })
}

/// The raw `kinfo_proc` for `pid`; parse it with
/// [`super::kinfo::parse`]. Empty when there is no such process. Readable
/// for every process without privileges.
pub fn kinfo_proc(pid: i32) -> Result<Vec<u8>, i32> {
    let mut mib = [libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_PID, pid];
    let mut buf = vec![0u8; KINFO_PROC_SIZE];
    let mut size: libc::size_t = buf.len();
    // SAFETY: `buf` is writable for `size` bytes and `size` says so; the
    // kernel writes at most one kinfo_proc and updates `size`.
    let rc = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            4,
            buf.as_mut_ptr().cast::<c_void>(),
            &mut size,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(errno());
    }
    buf.truncate(size);
    Ok(buf)
}

/// The effective uid of this process: the one the kernel compares with
/// a target's when it decides whether another user's process may be read.
pub fn my_uid() -> u32 {
    crate::sys::this_process::effective_uid()
}
