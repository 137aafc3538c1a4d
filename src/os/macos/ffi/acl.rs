//! The extended ACL of a path, read with `acl_get_link_np` and handed to
//! [`super::super::parse::acl`] as plain entries.
//!
//! The link itself is read, not its target: the permission check walks
//! symbolic links one component at a time and reads each target itself.

use std::ffi::{CString, c_char, c_int, c_void};
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use crate::os::macos::parse::acl::{Entry, WRITE_RIGHTS};

/// `struct _acl *`, `struct _acl_entry *`, `struct _acl_permset *`.
type AclT = *mut c_void;
type AclEntryT = *mut c_void;
type AclPermsetT = *mut c_void;

/// `ACL_TYPE_EXTENDED`, the only ACL type macOS supports.
const ACL_TYPE_EXTENDED: c_int = 0x100;
/// `ACL_FIRST_ENTRY`, `ACL_NEXT_ENTRY`.
const ACL_FIRST_ENTRY: c_int = 0;
const ACL_NEXT_ENTRY: c_int = -1;

// SAFETY: these are the prototypes of `<sys/acl.h>` in the macOS SDK
// (libsystem's acl functions), with `acl_t`, `acl_entry_t` and
// `acl_permset_t` as the opaque pointers they are; the calls below are
// made only through the safe functions of this file.
unsafe extern "C" {
    fn acl_get_link_np(path: *const c_char, kind: c_int) -> AclT;
    fn acl_get_entry(acl: AclT, entry_id: c_int, entry: *mut AclEntryT) -> c_int;
    fn acl_get_tag_type(entry: AclEntryT, tag: *mut c_int) -> c_int;
    fn acl_get_permset(entry: AclEntryT, permset: *mut AclPermsetT) -> c_int;
    fn acl_get_perm_np(permset: AclPermsetT, perm: c_int) -> c_int;
    fn acl_free(obj: *mut c_void) -> c_int;
}

/// Frees the ACL when dropped.
struct Acl(AclT);

impl Drop for Acl {
    fn drop(&mut self) {
        // SAFETY: self.0 came from acl_get_link_np, is not null, and is
        // freed once, here; no entry or permset taken from it outlives it.
        unsafe { acl_free(self.0) };
    }
}

/// The entries of `path`'s extended ACL, with the write rights of each
/// ([`WRITE_RIGHTS`]); empty when the path has none or its file system
/// keeps none.
pub fn extended_acl(path: &Path) -> io::Result<Vec<Entry>> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // SAFETY: c_path is a NUL-terminated string that lives across the call;
    // the call returns a new ACL (ours to free) or null with errno set.
    let raw = unsafe { acl_get_link_np(c_path.as_ptr(), ACL_TYPE_EXTENDED) };
    if raw.is_null() {
        let e = io::Error::last_os_error();
        // ENOENT: the path has no ACL; EOPNOTSUPP/ENOTSUP: its file system
        // (FAT, some network mounts) keeps none.
        return match e.raw_os_error() {
            Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENOTSUP) => Ok(Vec::new()),
            _ => Err(e),
        };
    }
    let acl = Acl(raw);
    let mut entries = Vec::new();
    let mut which = ACL_FIRST_ENTRY;
    loop {
        let mut entry: AclEntryT = std::ptr::null_mut();
        // SAFETY: acl.0 is a live ACL; `entry` is a valid out-pointer. The
        // call returns 0 and an entry owned by the ACL, or -1 past the last.
        if unsafe { acl_get_entry(acl.0, which, &mut entry) } != 0 {
            break;
        }
        which = ACL_NEXT_ENTRY;
        let mut tag: c_int = 0;
        // SAFETY: `entry` belongs to the live ACL; `tag` is a valid out-pointer.
        if unsafe { acl_get_tag_type(entry, &mut tag) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut permset: AclPermsetT = std::ptr::null_mut();
        // SAFETY: as above; the permset belongs to the entry.
        if unsafe { acl_get_permset(entry, &mut permset) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut rights = 0;
        for (bit, _, _) in WRITE_RIGHTS {
            let Ok(perm) = c_int::try_from(bit) else {
                continue;
            };
            // SAFETY: `permset` belongs to the live entry; the call only
            // reads it and returns 1, 0, or -1 for an invalid perm.
            if unsafe { acl_get_perm_np(permset, perm) } == 1 {
                rights |= bit;
            }
        }
        entries.push(Entry {
            tag: u32::try_from(tag).unwrap_or(0),
            rights,
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::os::macos::parse::acl::write_rights_granted;

    fn chmod(args: &[&str], path: &Path) {
        let status = Command::new("/bin/chmod")
            .args(args)
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success(), "chmod {args:?} {}", path.display());
    }

    #[test]
    fn a_file_without_an_acl_has_no_entries() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "").unwrap();
        assert_eq!(extended_acl(&file).unwrap(), []);
    }

    #[test]
    fn an_allow_write_entry_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "").unwrap();
        chmod(&["+a", "everyone allow write,append"], &file);
        chmod(&["+a", "everyone deny chown"], &file);
        let entries = extended_acl(&file).unwrap();
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(write_rights_granted(&entries, false), ["write", "append"]);
        chmod(&["-N"], &file);
        assert_eq!(extended_acl(&file).unwrap(), []);
    }

    #[test]
    fn a_directory_entry_is_named_for_directories() {
        let dir = tempfile::tempdir().unwrap();
        chmod(&["+a", "everyone allow add_file,delete_child"], dir.path());
        let entries = extended_acl(dir.path()).unwrap();
        assert_eq!(
            write_rights_granted(&entries, true),
            ["add_file", "delete_child"]
        );
    }
}
