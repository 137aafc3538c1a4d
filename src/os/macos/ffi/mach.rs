//! Mach and sysctl calls for system-wide figures: VM statistics, page size,
//! physical memory, swap, the pressure sysctls and the GPU wired limit.
//!
//! Each function makes one call and hands the raw answer to a pure
//! function in [`super::super::parse::vm`] or [`super::super::parse::pressure`]. The host port is taken
//! once and cached for the life of the process, as sysinfo does:
//! `mach_host_self()` adds a user reference to the send right on every call.

use std::io;
use std::sync::OnceLock;

use mach2::kern_return::{KERN_SUCCESS, kern_return_t};
use mach2::mach_init::mach_host_self;
use mach2::message::mach_msg_type_number_t;
use mach2::port::mach_port_t;
use mach2::vm_types::{integer_t, vm_size_t};

use super::sysctl::{sysctl_int, sysctl_raw};
use crate::os::macos::parse::vm::{
    self, Step, VmInfoError, VmStatistics, XSW_USAGE_SIZE, XswUsage,
};

// SAFETY: the prototype is the one MIG generates from
// `osfmk/mach/mach_host.defs` (`kern_return_t host_page_size(host_t,
// vm_size_t *)`), with `host_t` a `mach_port_t`.
unsafe extern "C" {
    /// `osfmk/mach/mach_host.defs`: the kernel's page size. Unlike
    /// `sysconf(_SC_PAGESIZE)` it is the size the VM statistics count in,
    /// also for an x86_64 process translated by Rosetta (4 KiB pages) on
    /// an Apple Silicon kernel (16 KiB pages). Declared here: neither mach2
    /// nor libc declares it.
    fn host_page_size(host: mach_port_t, out_page_size: *mut vm_size_t) -> kern_return_t;
}

// The words `vm::VmStatistics::from_words` reads sit where mach2's mirror of
// `struct vm_statistics64` (`osfmk/mach/vm_statistics.h`) has them: each
// `vm::word` index times 4 bytes is that field's offset, and REV1 ends where
// macOS 26 appended `swapped_count`.
const _: () = {
    use mach2::vm_statistics::vm_statistics64 as V;
    use std::mem::offset_of;

    use crate::os::macos::parse::vm::word as w;
    const fn at(word: usize) -> usize {
        word * size_of::<integer_t>()
    }
    assert!(at(w::FREE) == offset_of!(V, free_count));
    assert!(at(w::ACTIVE) == offset_of!(V, active_count));
    assert!(at(w::INACTIVE) == offset_of!(V, inactive_count));
    assert!(at(w::WIRE) == offset_of!(V, wire_count));
    assert!(at(w::ZERO_FILL) == offset_of!(V, zero_fill_count));
    assert!(at(w::REACTIVATIONS) == offset_of!(V, reactivations));
    assert!(at(w::PAGEINS) == offset_of!(V, pageins));
    assert!(at(w::PAGEOUTS) == offset_of!(V, pageouts));
    assert!(at(w::FAULTS) == offset_of!(V, faults));
    assert!(at(w::COW_FAULTS) == offset_of!(V, cow_faults));
    assert!(at(w::LOOKUPS) == offset_of!(V, lookups));
    assert!(at(w::HITS) == offset_of!(V, hits));
    assert!(at(w::PURGES) == offset_of!(V, purges));
    assert!(at(w::PURGEABLE) == offset_of!(V, purgeable_count));
    assert!(at(w::SPECULATIVE) == offset_of!(V, speculative_count));
    assert!(at(w::DECOMPRESSIONS) == offset_of!(V, decompressions));
    assert!(at(w::COMPRESSIONS) == offset_of!(V, compressions));
    assert!(at(w::SWAPINS) == offset_of!(V, swapins));
    assert!(at(w::SWAPOUTS) == offset_of!(V, swapouts));
    assert!(at(w::COMPRESSOR) == offset_of!(V, compressor_page_count));
    assert!(at(w::THROTTLED) == offset_of!(V, throttled_count));
    assert!(at(w::EXTERNAL) == offset_of!(V, external_page_count));
    assert!(at(w::INTERNAL) == offset_of!(V, internal_page_count));
    assert!(at(w::UNCOMPRESSED) == offset_of!(V, total_uncompressed_pages_in_compressor));
    assert!(at(vm::REV1_COUNT as usize) == offset_of!(V, swapped_count));
};

// The other hand-written values of `vm`: `HOST_VM_INFO64_REV1_COUNT`
// (`osfmk/mach/host_info.h`) is the REV1 struct's size in `integer_t`
// words, which mach2's struct has up to `swapped_count`;
// `MIG_ARRAY_TOO_LARGE` (`osfmk/mach/mig_errors.h`, not in mach2) stays
// the header's literal, -307; `struct xsw_usage` (`bsd/sys/sysctl.h`) is
// libc's, 32 bytes, its fields where `XswUsage::from_bytes` reads them.
const _: () = {
    use std::mem::offset_of;
    assert!(vm::MIG_ARRAY_TOO_LARGE == -307);
    assert!(mach2::kern_return::KERN_SUCCESS == 0);
    assert!(libc::HOST_VM_INFO64 == 4);
    assert!(size_of::<libc::xsw_usage>() == vm::XSW_USAGE_SIZE);
    assert!(offset_of!(libc::xsw_usage, xsu_total) == 0);
    assert!(offset_of!(libc::xsw_usage, xsu_avail) == 8);
    assert!(offset_of!(libc::xsw_usage, xsu_used) == 16);
    assert!(offset_of!(libc::xsw_usage, xsu_pagesize) == 24);
    assert!(offset_of!(libc::xsw_usage, xsu_encrypted) == 28);
};

/// The host port, taken once.
fn host_port() -> mach_port_t {
    static HOST: OnceLock<mach_port_t> = OnceLock::new();
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
const _: () = assert!(VM_INFO_CAPACITY >= mach2::host_info::HOST_VM_INFO64_COUNT as usize);

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
        Self::new()
    }
}

impl VmInfoReader {
    /// A reader that starts at REV1's count.
    pub const fn new() -> Self {
        Self {
            count: vm::REV1_COUNT,
        }
    }

    /// The count the next call will pass.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// One reading of the VM statistics (REV1 fields).
    pub fn read(&mut self) -> Result<VmStatistics, VmInfoError> {
        let mut buf = [0 as integer_t; VM_INFO_CAPACITY];
        let capacity = VM_INFO_CAPACITY as u32;
        let mut asked = self.count.min(capacity);
        let mut retried = false;
        loop {
            let mut count: mach_msg_type_number_t = asked;
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
    let mut size: vm_size_t = 0;
    // SAFETY: `size` is a valid out-pointer for one vm_size_t; the host
    // port is a valid (or null, then rejected) send right.
    let kr = unsafe { host_page_size(host_port(), &mut size) };
    if kr != KERN_SUCCESS || size == 0 {
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
