//! macOS extended ACLs (`chmod +a`) → the rights that let someone change a
//! file or directory.
//!
//! On macOS an access control list can grant a user `write` on a file whose
//! mode says `0644`, and nothing of it shows in the mode bits. So the check
//! that a root daemon's config and hooks can be changed by root alone
//! ([`crate::os::trusted_path`]) also reads each path's ACL and refuses
//! any *allow* entry that grants a right which changes what the path holds
//! or who may change it. *Deny* entries only take rights away.
//!
//! The entry is not resolved to a user (its qualifier is a UUID that
//! Directory Services maps to a user or group): a config and its
//! directories need no ACL at all, and `chmod -N` removes one.
//!
//! The bit values are `__DARWIN_ACL_*` from `<sys/acl.h>`; this module is
//! pure and compiled on every OS; `os::macos::ffi_acl` reads the entries on a Mac.

/// `ACL_EXTENDED_ALLOW`, the tag of an entry that grants rights.
pub const TAG_ALLOW: u32 = 1;
/// `ACL_EXTENDED_DENY`, the tag of an entry that takes rights away.
pub const TAG_DENY: u32 = 2;

/// `ACL_WRITE_DATA`, on a directory `ACL_ADD_FILE`.
pub const WRITE_DATA: u32 = 1 << 2;
/// `ACL_DELETE`.
pub const DELETE: u32 = 1 << 4;
/// `ACL_APPEND_DATA`, on a directory `ACL_ADD_SUBDIRECTORY`.
pub const APPEND_DATA: u32 = 1 << 5;
/// `ACL_DELETE_CHILD` (directories).
pub const DELETE_CHILD: u32 = 1 << 6;
/// `ACL_WRITE_SECURITY`: change the mode, owner or the ACL itself.
pub const WRITE_SECURITY: u32 = 1 << 12;
/// `ACL_CHANGE_OWNER`.
pub const CHANGE_OWNER: u32 = 1 << 13;

/// Every right that lets its holder change what the daemon would read or
/// run, with its name as `chmod +a` and `ls -le` spell it for a file and
/// for a directory.
pub const WRITE_RIGHTS: [(u32, &str, &str); 6] = [
    (WRITE_DATA, "write", "add_file"),
    (APPEND_DATA, "append", "add_subdirectory"),
    (DELETE, "delete", "delete"),
    (DELETE_CHILD, "delete_child", "delete_child"),
    (WRITE_SECURITY, "writesecurity", "writesecurity"),
    (CHANGE_OWNER, "chown", "chown"),
];

/// One entry of an extended ACL: its tag (`ACL_EXTENDED_ALLOW` or
/// `ACL_EXTENDED_DENY`) and the rights it names, as `__DARWIN_ACL_*` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub tag: u32,
    pub rights: u32,
}

/// The names of the write rights that some allow entry grants, in
/// [`WRITE_RIGHTS`] order, each once; empty when the ACL lets nobody
/// change the path.
pub fn write_rights_granted(entries: &[Entry], is_dir: bool) -> Vec<&'static str> {
    let granted = entries
        .iter()
        .filter(|e| e.tag == TAG_ALLOW)
        .fold(0, |all, e| all | e.rights);
    WRITE_RIGHTS
        .iter()
        .filter(|(bit, _, _)| granted & bit != 0)
        .map(|&(_, file, dir)| if is_dir { dir } else { file })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bits of rights that change nothing: `read`/`list` (1<<1),
    /// `execute`/`search` (1<<3), `readattr` (1<<7), `readextattr` (1<<9),
    /// `readsecurity` (1<<11), `synchronize` (1<<20).
    const READ_ONLY: u32 = (1 << 1) | (1 << 3) | (1 << 7) | (1 << 9) | (1 << 11) | (1 << 20);

    #[test]
    fn no_entries_grant_nothing() {
        assert!(write_rights_granted(&[], false).is_empty());
    }

    /// The ACL every home folder on a Mac carries (`ls -led ~` on macOS 14:
    /// `0: group:everyone deny delete`) takes rights away and is fine.
    #[test]
    fn deny_entries_are_fine() {
        let home = [Entry {
            tag: TAG_DENY,
            rights: DELETE,
        }];
        assert!(write_rights_granted(&home, true).is_empty());
    }

    #[test]
    fn read_only_allow_entries_are_fine() {
        let read = [Entry {
            tag: TAG_ALLOW,
            rights: READ_ONLY,
        }];
        assert!(write_rights_granted(&read, false).is_empty());
    }

    /// `chmod +a "staff allow write,append" headroom.toml`, and
    /// `chmod +a "everyone allow add_file,delete_child" /etc/headroom`.
    #[test]
    fn allow_entries_with_write_rights_are_named() {
        let file = [
            Entry {
                tag: TAG_ALLOW,
                rights: (1 << 1) | WRITE_DATA | APPEND_DATA,
            },
            Entry {
                tag: TAG_DENY,
                rights: CHANGE_OWNER,
            },
        ];
        assert_eq!(write_rights_granted(&file, false), ["write", "append"]);
        let dir = [
            Entry {
                tag: TAG_ALLOW,
                rights: WRITE_DATA,
            },
            Entry {
                tag: TAG_ALLOW,
                rights: DELETE_CHILD | WRITE_DATA,
            },
        ];
        assert_eq!(
            write_rights_granted(&dir, true),
            ["add_file", "delete_child"]
        );
    }

    #[test]
    fn every_write_right_is_caught_alone() {
        for (bit, file, dir) in WRITE_RIGHTS {
            let e = [Entry {
                tag: TAG_ALLOW,
                rights: bit | READ_ONLY,
            }];
            assert_eq!(write_rights_granted(&e, false), [file]);
            assert_eq!(write_rights_granted(&e, true), [dir]);
        }
    }

    #[test]
    fn unknown_tags_grant_nothing() {
        let e = [Entry {
            tag: 0,
            rights: WRITE_DATA,
        }];
        assert!(write_rights_granted(&e, false).is_empty());
    }
}
