//! libproc and sysctl calls about processes: the pid list, BSD info,
//! executable path, arguments, resource usage (footprint), `kinfo_proc`,
//! the members of a process group, and a process's socket descriptors.
//!
//! Each function makes its call(s) and returns plain values or the errno;
//! the sampler and the signal-identity check sort errnos into failures with
//! [`super::super::parse::proc_info`]. None of them keeps state between calls.

use std::ffi::c_void;
use std::io;
use std::mem::{offset_of, size_of};
use std::sync::OnceLock;

use crate::os::macos::libproc::{PROC_PIDFDSOCKETINFO, SocketFdinfo};
use crate::os::macos::parse::kinfo::KINFO_PROC_SIZE;
use crate::os::macos::parse::proc_info::{self as proc_info, Owner};

/// `PROC_PGRP_ONLY` from `<sys/proc_info.h>` (`PROC_ALL_PIDS` 1,
/// `PROC_PGRP_ONLY` 2, `PROC_TTY_ONLY` 3, …): list the processes whose
/// process group is `typeinfo`. The libc crate does not define it; the
/// value is the header's, written out.
const PROC_PGRP_ONLY: u32 = 2;
const _: () = assert!(PROC_PGRP_ONLY == 2);

// libc's mirrors of the two structs read here, against the SDK's layout:
// `struct proc_bsdinfo` (`bsd/sys/proc_info.h`, `PROC_PIDTBSDINFO_SIZE`:
// twelve 32-bit words, the 16-byte `pbi_comm`, the 32-byte `pbi_name`, six
// more words, two 64-bit start-time fields) and `struct rusage_info_v4`
// (`bsd/sys/resource.h`: a 16-byte UUID, then 35 `uint64_t`).
const _: () = {
    use libc::{proc_bsdinfo as B, rusage_info_v4 as R};
    assert!(size_of::<B>() == 136);
    assert!(offset_of!(B, pbi_flags) == 0);
    assert!(offset_of!(B, pbi_ppid) == 16);
    assert!(offset_of!(B, pbi_uid) == 20);
    assert!(offset_of!(B, pbi_ruid) == 28);
    assert!(offset_of!(B, pbi_comm) == 48);
    assert!(offset_of!(B, pbi_name) == 64);
    assert!(offset_of!(B, pbi_start_tvsec) == 120);
    assert!(offset_of!(B, pbi_start_tvusec) == 128);

    assert!(size_of::<R>() == 16 + 35 * 8);
    assert!(offset_of!(R, ri_uuid) == 0);
    assert!(offset_of!(R, ri_resident_size) == 16 + 6 * 8);
    assert!(offset_of!(R, ri_phys_footprint) == 16 + 7 * 8);
    assert!(offset_of!(R, ri_proc_start_abstime) == 16 + 8 * 8);
    assert!(offset_of!(R, ri_proc_exit_abstime) == 16 + 9 * 8);
    assert!(offset_of!(R, ri_lifetime_max_phys_footprint) == 16 + 28 * 8);

    // The sysctl names (`bsd/sys/sysctl.h`) and flavors (`proc_info.h`,
    // `resource.h`) libc declares, as the headers number them.
    assert!(libc::CTL_KERN == 1 && libc::KERN_PROC == 14 && libc::KERN_PROC_PID == 1);
    assert!(libc::KERN_PROCARGS2 == 49 && libc::KERN_ARGMAX == 8);
    assert!(libc::PROC_PIDTBSDINFO == 3 && libc::PROC_PIDPATHINFO_MAXSIZE == 4096);
    assert!(libc::RUSAGE_INFO_V4 == 4);
};

/// The errno of the call that just failed (0 if there is none).
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Bound on `kern.argmax`, against a bogus answer.
const MAX_PROCARGS: usize = 4 << 20;

/// All pids, into `out` (cleared first). Zombies are listed too
/// (`proc_listpids` walks `allproc`, then `zombproc`).
///
/// `libproc.c`'s `proc_listpids` answers 0, never -1, when the call fails
/// (errno set), and so does `proc_listallpids`, which divides by
/// `sizeof(int)`: a list of no pids is the failure (this process, at
/// least, exists).
pub fn list_pids(out: &mut Vec<i32>) -> Result<(), i32> {
    out.clear();
    // SAFETY: with a null buffer and size 0, proc_listallpids only returns
    // the number of pids there are now; it writes nothing.
    let estimate = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
    if estimate <= 0 {
        return Err(errno());
    }
    // The kernel answers a null buffer with `nprocs + 20` pids
    // (`proc_listpids` in `bsd/kern/proc_info.c`), 20 more than it holds,
    // and never fills more than `nprocs + 20` entries; the extra 64 are
    // room for processes started between the two calls, should the kernel
    // ever stop adding its own 20.
    let capacity = usize::try_from(estimate).unwrap_or(0) + 64;
    out.resize(capacity, 0);
    let bytes = i32::try_from(capacity * size_of::<i32>()).unwrap_or(i32::MAX);
    // SAFETY: `out` holds `capacity` i32 (`bytes` bytes) and the call writes
    // at most `bytes` bytes; it returns the number of pids written.
    let n = unsafe { libc::proc_listallpids(out.as_mut_ptr().cast::<c_void>(), bytes) };
    if n <= 0 {
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
    /// `pbi_ruid` and `pbi_uid`.
    pub owner: Owner,
    /// `pbi_name`, or `pbi_comm` where it is empty
    /// ([`proc_info::process_name`]).
    pub name: String,
    /// Microseconds since the epoch ([`proc_info::start_micros`]).
    pub start_micros: u64,
}

/// `proc_pidinfo(pid, PROC_PIDTBSDINFO)`, the one place headroom makes
/// this call: the sampler, the signal-identity check, the doctor and
/// [`crate::os::process_owner`] all read a process's BSD info through here.
/// Refused with EPERM for other users' processes unless the caller is root.
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
        owner: Owner {
            real: info.pbi_ruid,
            effective: info.pbi_uid,
        },
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
        super::sysctl::sysctl_int(c"kern.argmax")
            .ok()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n >= 4096)
            .unwrap_or(1 << 20)
            .min(MAX_PROCARGS)
    })
}

/// The raw `KERN_PROCARGS2` answer for `pid`, into `buf`; the number of
/// bytes written, to parse with `os::macos::parse::procargs::parse_answer`
/// together with `buf.len()`. EINVAL for a process that is gone and for
/// another user's process when not root.
///
/// The buffer is always `kern.argmax` bytes (the most the kernel accepts:
/// `sysctl_procargsx` refuses a buffer over `ARG_MAX`, and `kern.argmax` is
/// `ARG_MAX`). Given less than the process's argument area, the kernel
/// copies out the END of the area rather than the start, and the area CAN
/// be larger: `ARG_MAX` bounds the arguments and environment, but not the
/// executable's path and the loader's "apple" strings stored with them. A
/// buffer the answer fills completely may therefore hold only the tail,
/// and the parser treats it so. It is reused across calls.
pub fn procargs(pid: i32, buf: &mut Vec<u8>) -> Result<usize, i32> {
    let len = arg_max();
    if buf.len() != len {
        buf.resize(len, 0);
    }
    super::sysctl::read_by_number(&[libc::CTL_KERN, libc::KERN_PROCARGS2, pid], buf)
        .map_err(|e| e.raw_os_error().unwrap_or(0))
}

/// The `rusage_info_v4` figures headroom uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rusage {
    /// `ri_phys_footprint`: what the process is charged for, compressed
    /// and IOKit/Metal memory included (what Activity Monitor's "Memory"
    /// column and jetsam use).
    pub footprint: u64,
    /// `ri_lifetime_max_phys_footprint`: the task's; `exec` makes a new
    /// task (`cloneproc(…, CLONEPROC_EXEC)` in `bsd/kern/kern_exec.c`) with
    /// a new ledger, so it starts again there.
    pub lifetime_max_footprint: u64,
    /// `ri_resident_size`.
    pub resident: u64,
    /// `ri_proc_start_abstime`: mach absolute time of the process's start;
    /// it changes when the pid is reused, so it doubles as a cheap identity
    /// check between the expensive first-sight reads.
    pub start_abstime: u64,
    /// `ri_proc_exit_abstime`: 0 while the process lives; the mach time of
    /// its exit once it has ended. A zombie (listed until its parent reaps
    /// it) is answered from the copy `proc_exit` saved (`bsd/kern/
    /// kern_exit.c`): footprint 0, resident size and lifetime peak as they
    /// were, this set.
    pub exit_abstime: u64,
    /// `ri_uuid`: the `LC_UUID` of the executable the process runs now,
    /// set at every exec; all zeros for one built without it
    /// ([`proc_info::image_changed`]).
    pub image: [u8; 16],
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
        exit_abstime: info.ri_proc_exit_abstime,
        image: info.ri_uuid,
    })
}

/// The wall-clock moment of a mach absolute time, such as
/// [`Rusage::exit_abstime`] ([`proc_info::abstime_to_wall`]).
pub fn abstime_to_wall(abstime: u64) -> crate::model::Timestamp {
    static TIMEBASE: OnceLock<(u32, u32)> = OnceLock::new();
    let (numer, denom) = *TIMEBASE.get_or_init(|| {
        let mut info = mach2::mach_time::mach_timebase_info { numer: 0, denom: 0 };
        // SAFETY: `info` is a valid out-pointer for one mach_timebase_info.
        let kr = unsafe { mach2::mach_time::mach_timebase_info(&mut info) };
        if kr == mach2::kern_return::KERN_SUCCESS {
            (info.numer, info.denom)
        } else {
            (1, 0)
        }
    });
    // SAFETY: mach_absolute_time takes no arguments and only reads the clock.
    let now = unsafe { mach2::mach_time::mach_absolute_time() };
    proc_info::abstime_to_wall(abstime, now, crate::model::Timestamp::now(), numer, denom)
}

/// Whether this process runs translated by Rosetta 2:
/// `sysctl.proc_translated` (`bsd/kern/kern_sysctl.c`) is 1 for a
/// translated caller, 0 for a native one, and does not exist (ENOENT) on
/// an Intel Mac. `None` where it cannot be read.
pub fn this_process_translated() -> Option<bool> {
    match super::sysctl::sysctl_int(c"sysctl.proc_translated") {
        Ok(v) => Some(v == 1),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Some(false),
        Err(_) => None,
    }
}

/// The raw `kinfo_proc` for `pid`; parse it with
/// [`super::super::parse::kinfo::parse`]. Empty when there is no such process. Readable
/// for every process without privileges.
pub fn kinfo_proc(pid: i32) -> Result<Vec<u8>, i32> {
    let mut buf = vec![0u8; KINFO_PROC_SIZE];
    let size = super::sysctl::read_by_number(
        &[libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_PID, pid],
        &mut buf,
    )
    .map_err(|e| e.raw_os_error().unwrap_or(0))?;
    buf.truncate(size);
    Ok(buf)
}

/// The effective uid of this process: the one the kernel compares with
/// a target's when it decides whether another user's process may be read.
pub fn my_uid() -> u32 {
    crate::os::this_process::effective_uid()
}

/// The pids in process group `pgid` (`proc_listpids(PROC_PGRP_ONLY)`), at
/// most `max`. A zero is an unused slot, left for the caller to drop.
pub fn group_pids(pgid: u32, max: usize) -> io::Result<Vec<i32>> {
    // libproc.c's proc_listpids answers in BYTES (its proc_listpgrppids
    // divides by sizeof(int)), and 0 (not -1) when the call fails, with
    // errno set: an empty answer is checked by the caller, which knows the
    // group is not empty.
    // SAFETY: with a null buffer and size 0, proc_listpids only returns the
    // number of bytes the answer needs now; it writes nothing.
    let estimate = unsafe { libc::proc_listpids(PROC_PGRP_ONLY, pgid, std::ptr::null_mut(), 0) };
    if estimate < 0 {
        return Err(io::Error::last_os_error());
    }
    // Room for members that join between the two calls.
    let capacity = (usize::try_from(estimate).unwrap_or(0) / size_of::<i32>() + 16).min(max);
    let mut buf = vec![0i32; capacity];
    let bytes = i32::try_from(capacity * size_of::<i32>()).unwrap_or(i32::MAX);
    // SAFETY: `buf` holds `capacity` i32, `bytes` bytes, and the call writes
    // at most `bytes` bytes; it returns the number of bytes written.
    let n = unsafe {
        libc::proc_listpids(
            PROC_PGRP_ONLY,
            pgid,
            buf.as_mut_ptr().cast::<c_void>(),
            bytes,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let count = (usize::try_from(n).unwrap_or(0) / size_of::<i32>()).min(capacity);
    buf.truncate(count);
    Ok(buf)
}

/// The descriptors of `pid` (`proc_pidinfo(PROC_PIDLISTFDS)`), at most
/// `max` looked at.
pub fn fd_list(pid: i32, max: usize) -> io::Result<Vec<libc::proc_fdinfo>> {
    // SAFETY: with a null buffer and size 0, proc_pidinfo(PROC_PIDLISTFDS)
    // returns the bytes the list needs now; it writes nothing.
    let needed =
        unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDLISTFDS, 0, std::ptr::null_mut(), 0) };
    if needed <= 0 {
        return Err(io::Error::last_os_error());
    }
    let entry = size_of::<libc::proc_fdinfo>();
    // Room for descriptors opened between the two calls.
    let count = (usize::try_from(needed).unwrap_or(0) / entry + 16).min(max);
    let fdinfo = libc::proc_fdinfo {
        proc_fd: 0,
        proc_fdtype: 0,
    };
    let mut fds = vec![fdinfo; count];
    let bytes = i32::try_from(count * entry).unwrap_or(i32::MAX);
    // SAFETY: `fds` holds `count` proc_fdinfo (`bytes` bytes) and the
    // call writes at most `bytes` bytes, returning how many it wrote.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDLISTFDS,
            0,
            fds.as_mut_ptr().cast::<c_void>(),
            bytes,
        )
    };
    if n <= 0 {
        return Err(io::Error::last_os_error());
    }
    fds.truncate((usize::try_from(n).unwrap_or(0) / entry).min(count));
    Ok(fds)
}

/// What `proc_pidfdinfo(pid, fd, PROC_PIDFDSOCKETINFO)` says of socket `fd`;
/// `None` when the kernel wrote less than a whole `socket_fdinfo` (the
/// descriptor was closed, or is no socket).
pub fn socket_fdinfo(pid: i32, fd: i32) -> Option<SocketFdinfo> {
    let mut info = SocketFdinfo::zeroed();
    let size = size_of::<SocketFdinfo>();
    // SAFETY: `info` is writable for `size` bytes, the size passed
    // (PROC_PIDFDSOCKETINFO_SIZE); the kernel writes at most that and
    // returns how much it wrote. Every field of SocketFdinfo is an integer
    // or an array of integers, so whatever it writes is a valid value.
    let n = unsafe {
        libc::proc_pidfdinfo(
            pid,
            fd,
            PROC_PIDFDSOCKETINFO,
            (&raw mut info).cast::<c_void>(),
            i32::try_from(size).unwrap_or(i32::MAX),
        )
    };
    (usize::try_from(n).unwrap_or(0) >= size).then_some(info)
}
