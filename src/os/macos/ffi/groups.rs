//! This process's groups, for whether it is an administrator: the
//! effective gid (`getegid`), the groups of its credential (`getgroups`:
//! the kernel's copy, at most `NGROUPS_MAX`, 16, on macOS) and the groups
//! the directory lists for its user (`getgrouplist`, which asks Open
//! Directory and is not cut at 16). The decision is
//! `parse::post_mortem_sources::follower`'s.

use std::ffi::CString;

/// The most groups asked for; an account in more is read up to here.
const MAX_GROUPS: usize = 4096;

/// The effective gid (`getegid`, which cannot fail).
pub fn effective_gid() -> u32 {
    // SAFETY: getegid takes no arguments, touches no memory of ours and
    // always succeeds (POSIX).
    unsafe { libc::getegid() }
}

/// The supplementary groups of this process's credential; empty where
/// `getgroups` fails.
pub fn process_groups() -> Vec<u32> {
    // SAFETY: with a count of 0 getgroups writes nothing and returns how
    // many groups there are (POSIX); the null pointer is not read.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let Ok(n) = usize::try_from(n) else {
        return Vec::new();
    };
    let mut groups: Vec<libc::gid_t> = vec![0; n.min(MAX_GROUPS)];
    let len = libc::c_int::try_from(groups.len()).unwrap_or(0);
    // SAFETY: `groups` is writable for `len` gids, the count passed;
    // getgroups writes at most that many and returns how many it wrote, or
    // -1 (EINVAL if the list grew meanwhile).
    let got = unsafe { libc::getgroups(len, groups.as_mut_ptr()) };
    let Ok(got) = usize::try_from(got) else {
        return Vec::new();
    };
    groups.truncate(got);
    groups
}

/// The groups the directory lists for user `name` with primary group
/// `gid` (`getgrouplist`); empty where the name holds a NUL or the call
/// fails.
pub fn directory_groups(name: &str, gid: u32) -> Vec<u32> {
    let Ok(name) = CString::new(name) else {
        return Vec::new();
    };
    // macOS's getgrouplist takes and fills ints (<unistd.h>).
    let base = libc::c_int::from_ne_bytes(gid.to_ne_bytes());
    let mut size = 64usize;
    loop {
        let mut groups: Vec<libc::c_int> = vec![0; size];
        let mut count = libc::c_int::try_from(size).unwrap_or(0);
        // SAFETY: `name` is a NUL-terminated string alive for the call,
        // `groups` is writable for `count` ints and `count` a writable int
        // holding that size; getgrouplist writes at most `count` groups and
        // stores how many it found in `count`.
        let rc =
            unsafe { libc::getgrouplist(name.as_ptr(), base, groups.as_mut_ptr(), &mut count) };
        let found = usize::try_from(count).unwrap_or(0).min(size);
        if rc == 0 || size >= MAX_GROUPS {
            groups.truncate(found);
            return groups
                .into_iter()
                .map(|g| u32::from_ne_bytes(g.to_ne_bytes()))
                .collect();
        }
        size = (size * 4).min(MAX_GROUPS);
    }
}
