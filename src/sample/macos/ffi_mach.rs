//! Mach and sysctl calls for system-wide figures: VM statistics, page size,
//! physical memory, swap, the pressure sysctls and the GPU wired limit.
//!
//! Each function makes one call and hands the raw answer to a pure
//! function in [`super::vm`] or [`super::pressure`]. The host port is taken
//! once and cached for the life of the process, as sysinfo does:
//! `mach_host_self()` adds a user reference to the send right on every call.

use std::io;
use std::sync::OnceLock;

use super::vm::{self, Step, VmInfoError, VmStatistics, XSW_USAGE_SIZE, XswUsage};
use crate::sys::macos_sysctl::{sysctl_int, sysctl_raw};

unsafe extern "C" {
    /// `osfmk/mach/mach_init.h`: a send right to the host port. Declared
    /// here because libc deprecates its own declaration in favour of the
    /// mach2 crate, which headroom does not otherwise need.
    fn mach_host_self() -> libc::mach_port_t;

    /// `osfmk/mach/mach_host.defs`: the kernel's page size. Unlike
    /// `sysconf(_SC_PAGESIZE)` it is the size the VM statistics count in,
    /// also for an x86_64 process translated by Rosetta (4 KiB pages) on
    /// an Apple Silicon kernel (16 KiB pages).
    fn host_page_size(
        host: libc::mach_port_t,
        out_page_size: *mut libc::vm_size_t,
    ) -> libc::kern_return_t;
}

/// The host port, taken once.
fn host_port() -> libc::mach_port_t {
    static HOST: OnceLock<libc::mach_port_t> = OnceLock::new();
    *HOST.get_or_init(|| {
        // SAFETY: mach_host_self takes no arguments and returns a send right
        // to the host port (MACH_PORT_NULL on failure, which the calls that
        // use it then reject with an error code). The right is kept for the
        // life of the process and never deallocated, so it stays valid.
        unsafe { mach_host_self() }
    })
}

/// Words reserved for `host_statistics64`: more than any macOS so far
/// (104 in macOS 27) and at least libc's own count.
pub const VM_INFO_CAPACITY: usize = 256;
const _: () = assert!(VM_INFO_CAPACITY >= libc::HOST_VM_INFO64_COUNT as usize);

/// Reads `HOST_VM_INFO64`, remembering the count the kernel last accepted
/// so that the retry after `MIG_ARRAY_TOO_LARGE` happens once per change,
/// not on every sample. It starts at REV1 (38): a count above what the
/// running kernel expects makes it log "host_statistics64() count is larger
/// than expected … likely to result in memory corruption" on every call
/// (jundot/omlx#2983), one below is answered with -307 and the right count.
#[derive(Debug)]
pub struct VmInfoReader {
    count: u32,
}

impl Default for VmInfoReader {
    fn default() -> Self {
        Self {
            count: vm::REV1_COUNT,
        }
    }
}

impl VmInfoReader {
    /// The count the next call will pass.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// One reading of the VM statistics (REV1 fields).
    pub fn read(&mut self) -> Result<VmStatistics, VmInfoError> {
        let mut buf = [0 as libc::integer_t; VM_INFO_CAPACITY];
        let capacity = VM_INFO_CAPACITY as u32;
        let mut asked = self.count.min(capacity);
        let mut retried = false;
        loop {
            let mut count: libc::mach_msg_type_number_t = asked;
            // SAFETY: `buf` holds VM_INFO_CAPACITY integer_t and `count`
            // (at most that) tells the kernel how many it may write; MIG
            // never writes more than the count it was given. `count` is a
            // valid out-pointer for the number actually written.
            let kr = unsafe {
                libc::host_statistics64(
                    host_port(),
                    libc::HOST_VM_INFO64,
                    buf.as_mut_ptr(),
                    &mut count,
                )
            };
            match vm::after_call(kr, count, asked, capacity, retried) {
                Step::Accept(filled) => {
                    self.count = asked;
                    let words: Vec<u32> = buf[..filled as usize]
                        .iter()
                        .map(|&w| u32::from_ne_bytes(w.to_ne_bytes()))
                        .collect();
                    return VmStatistics::from_words(&words)
                        .ok_or(VmInfoError::TooShort { count: filled });
                }
                Step::Retry(wanted) => {
                    asked = wanted;
                    retried = true;
                }
                Step::Fail(e) => return Err(e),
            }
        }
    }
}

/// The kernel's page size in bytes.
pub fn page_size() -> io::Result<u64> {
    let mut size: libc::vm_size_t = 0;
    // SAFETY: `size` is a valid out-pointer for one vm_size_t; the host
    // port is a valid (or null, then rejected) send right.
    let kr = unsafe { host_page_size(host_port(), &mut size) };
    if kr != libc::KERN_SUCCESS || size == 0 {
        return Err(io::Error::other(format!(
            "host_page_size failed with kern_return_t {kr}"
        )));
    }
    Ok(size as u64)
}

/// `hw.memsize`: physical memory in bytes.
pub fn memsize() -> io::Result<u64> {
    let n = sysctl_int(c"hw.memsize")?;
    u64::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| io::Error::other(format!("hw.memsize reads {n}")))
}

/// `vm.swapusage`.
pub fn swap_usage() -> io::Result<XswUsage> {
    let mut buf = [0u8; XSW_USAGE_SIZE];
    let n = sysctl_raw(c"vm.swapusage", &mut buf)?;
    XswUsage::from_bytes(&buf[..n]).ok_or_else(|| {
        io::Error::other(format!(
            "vm.swapusage answered {n} bytes, not a {XSW_USAGE_SIZE}-byte xsw_usage"
        ))
    })
}

/// `kern.memorystatus_vm_pressure_level` (1, 2 or 4).
pub fn pressure_level_raw() -> io::Result<i64> {
    sysctl_int(c"kern.memorystatus_vm_pressure_level")
}

/// `kern.memorystatus_level`: percentage of memory free.
pub fn memorystatus_level() -> io::Result<i64> {
    sysctl_int(c"kern.memorystatus_level")
}

/// `iogpu.wired_limit_mb`; `Ok(None)` where the sysctl does not exist
/// (Intel Macs, macOS before 14).
pub fn wired_limit_mb() -> io::Result<Option<i64>> {
    match sysctl_int(c"iogpu.wired_limit_mb") {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}
