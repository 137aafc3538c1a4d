//! `sysctlbyname` for integers and strings: the one call the macOS sampler,
//! probe, doctor and process readers all make.

use std::ffi::{CStr, c_void};
use std::io;

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
