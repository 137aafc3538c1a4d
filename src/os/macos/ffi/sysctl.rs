//! `sysctlbyname` for integers and strings: the one call the macOS sampler,
//! probe, doctor and process readers all make; a sysctl read by number
//! ([`read_by_number`]: the per-process `KERN_PROC` and `KERN_PROCARGS2`);
//! and for a sysctl read on every tick, its name resolved once with
//! `sysctlnametomib` ([`Mib`]) and then read by number, which skips the
//! name lookup.

use std::ffi::{CStr, c_int, c_uint, c_void};
use std::io;

/// `CTL_MAXNAME` (`bsd/sys/sysctl.h`): the most components a sysctl's
/// number has. libc does not export it for Apple targets.
const CTL_MAXNAME: usize = 12;

/// A sysctl's name resolved to its number (its MIB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mib {
    oid: [c_int; CTL_MAXNAME],
    len: usize,
}

impl Mib {
    /// Resolve `name`; `ENOENT` where this kernel has no such sysctl.
    pub fn resolve(name: &CStr) -> io::Result<Self> {
        let mut oid = [0 as c_int; CTL_MAXNAME];
        let mut len: libc::size_t = CTL_MAXNAME;
        // SAFETY: `name` is NUL-terminated; `oid` is writable for `len`
        // (CTL_MAXNAME) ints and `len` is a valid in/out pointer that the
        // call sets to the number of components written.
        let rc = unsafe { libc::sysctlnametomib(name.as_ptr(), oid.as_mut_ptr(), &mut len) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        if len == 0 || len > CTL_MAXNAME {
            return Err(io::Error::other(format!(
                "sysctlnametomib({}) gave {len} components",
                name.to_string_lossy()
            )));
        }
        Ok(Self { oid, len })
    }

    /// Read the sysctl into `buf`; the number of bytes written.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        read_by_number(&self.oid[..self.len], buf)
    }
}

/// Read the sysctl numbered `oid` (at most [`CTL_MAXNAME`] components)
/// into `buf`; the number of bytes written, at most `buf.len()`.
pub fn read_by_number(oid: &[c_int], buf: &mut [u8]) -> io::Result<usize> {
    if oid.is_empty() || oid.len() > CTL_MAXNAME {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // sysctl's prototype takes a mutable pointer to the number (it does
    // not write through it): hand it a copy.
    let mut number = [0 as c_int; CTL_MAXNAME];
    number[..oid.len()].copy_from_slice(oid);
    // At most CTL_MAXNAME (checked above).
    let namelen = oid.len() as c_uint;
    let mut len: libc::size_t = buf.len();
    // SAFETY: `number` holds `namelen` valid components; `buf` is writable
    // for `len` bytes and `len` is a valid in/out pointer that the kernel
    // sets to the number of bytes written; no new value is set (null, 0).
    let rc = unsafe {
        libc::sysctl(
            number.as_mut_ptr(),
            namelen,
            buf.as_mut_ptr().cast::<c_void>(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len.min(buf.len()))
}

/// Read a sysctl by name into `buf`; the number of bytes written.
pub fn sysctl_raw(name: &CStr, buf: &mut [u8]) -> io::Result<usize> {
    let mut len: libc::size_t = buf.len();
    // SAFETY: `name` is NUL-terminated; `buf` is writable for `len` bytes
    // and `len` is a valid in/out pointer; no new value is set (null, 0).
    let rc = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            buf.as_mut_ptr().cast::<c_void>(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len.min(buf.len()))
}

/// An integer sysctl, whether the kernel answers with 4 or 8 bytes.
pub fn sysctl_int(name: &CStr) -> io::Result<i64> {
    let mut buf = [0u8; 8];
    match sysctl_raw(name, &mut buf)? {
        4 => Ok(i64::from(i32::from_ne_bytes([
            buf[0], buf[1], buf[2], buf[3],
        ]))),
        8 => Ok(i64::from_ne_bytes(buf)),
        n => Err(io::Error::other(format!(
            "sysctl {} answered {n} bytes, not a 4- or 8-byte integer",
            name.to_string_lossy()
        ))),
    }
}

/// A string sysctl (`kern.osrelease`, …).
pub fn sysctl_string(name: &CStr) -> io::Result<String> {
    let mut buf = [0u8; 256];
    let n = sysctl_raw(name, &mut buf)?;
    Ok(crate::os::macos::parse::proc_info::c_field(&buf[..n]))
}
