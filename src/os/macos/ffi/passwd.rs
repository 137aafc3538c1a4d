//! `getpwuid_r(3)`: the account name of a uid, as the system's directory
//! answers it (Open Directory: local accounts and any directory the Mac is
//! bound to). [`crate::os::user_names`] caches the answers.

use std::ffi::{CStr, c_char};
use std::mem::MaybeUninit;

/// The first buffer for the strings of the entry; ERANGE doubles it, up to
/// [`MAX_BUFFER`].
const FIRST_BUFFER: usize = 1024;
/// Beyond this an entry is taken as unreadable: no account needs more.
const MAX_BUFFER: usize = 1 << 20;

/// The name of `uid`'s account; `None` where no account has it, or the
/// lookup failed.
pub fn user_name(uid: u32) -> Option<String> {
    let mut buf: Vec<c_char> = vec![0; FIRST_BUFFER];
    loop {
        let mut entry = MaybeUninit::<libc::passwd>::uninit();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `entry` is writable storage for one `passwd`, `buf` is
        // writable for `buf.len()` bytes, the length passed, and `found` a
        // writable pointer; getpwuid_r writes the entry's strings into `buf`
        // only, and sets `found` to `entry` or null. Nothing is kept past
        // the call.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                entry.as_mut_ptr(),
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        match rc {
            0 if found.is_null() => return None,
            0 => {
                // SAFETY: on success `found` points to `entry`, filled in,
                // and its `pw_name` (checked for null) to a NUL-terminated
                // string in `buf`, which is alive and not written to here.
                let name = unsafe {
                    let name = (*found).pw_name;
                    (!name.is_null()).then(|| CStr::from_ptr(name))
                };
                return name.map(|n| n.to_string_lossy().into_owned());
            }
            libc::EINTR => {}
            libc::ERANGE if buf.len() < MAX_BUFFER => buf.resize(buf.len() * 2, 0),
            _ => return None,
        }
    }
}
