//! The permission check of a root daemon's config and hooks
//! (`headroom::os::trusted_path::check_path`) where it needs root or a
//! tool: a file another user owns, and a POSIX ACL.
//!
//! Why `headroom::os::trusted_path::acl_write_rights` reads no ACL on Linux, with the
//! real `setfacl` and `getfacl` (Debian's `acl`; `scripts/test.sh` installs
//! it): a POSIX ACL entry that lets another user or group write raises the
//! mask, which is what the group bits of the mode show, and once `chmod g-w`
//! lowers the mask the entry no longer writes. So the check, which reads the
//! mode only, refuses such a file, and takes it once `chmod g-w` has taken
//! the right away.
#![cfg(target_os = "linux")]

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::process::Command;

use headroom::os::trusted_path::{Problem, check_path};

use crate::support::{NOBODY, chmod, need_root, need_tools, private_dir};

/// `tool ARGS PATH`; its output. Fails the test if it fails.
fn acl(tool: &str, args: &[&str], path: &Path) -> String {
    let out = Command::new(tool)
        .args(args)
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}; install it (Debian: apt-get install acl)"));
    assert!(out.status.success(), "{tool} {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().mode() & 0o777
}

#[test]
fn a_posix_acl_that_lets_others_write_shows_in_the_group_bits() {
    need_tools(&[("setfacl", "acl"), ("getfacl", "acl")]);
    let uid = headroom::os::this_process::effective_uid();
    // Under target/tmp, which only the checkout's owner can write: the
    // permission check judges the file, not a shared /tmp above it.
    let dir = private_dir();
    let file = dir.path().join("headroom.toml");
    std::fs::write(&file, "").unwrap();
    chmod(&file, 0o600);
    assert_eq!(check_path(&file, uid), Ok(()), "the file before the ACL");
    acl("setfacl", &["-m", "u:65534:rw"], &file);
    assert_eq!(mode(&file), 0o660);
    let refused = check_path(&file, uid).expect_err("a file an ACL lets uid 65534 write");
    assert!(
        refused
            .to_string()
            .contains("is writable by users other than root (mode 0660)"),
        "{refused}"
    );
    chmod(&file, 0o640);
    let listed = acl("getfacl", &["-n", "--omit-header"], &file);
    assert!(
        listed.contains("user:65534:rw-\t#effective:r--"),
        "{listed}"
    );
    assert_eq!(check_path(&file, uid), Ok(()), "the mask no longer writes");

    let sub = dir.path().join("conf.d");
    std::fs::create_dir(&sub).unwrap();
    chmod(&sub, 0o700);
    acl("setfacl", &["-m", "g:65534:rwx"], &sub);
    assert_eq!(mode(&sub), 0o770);
    assert!(check_path(&sub.join("rules.toml"), uid).is_err());
}

#[test]
fn a_file_of_another_user_is_untrusted() {
    need_root();
    let dir = private_dir();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "").unwrap();
    chmod(&file, 0o600);
    assert_eq!(check_path(&file, 0), Ok(()), "root's own file");
    std::os::unix::fs::chown(&file, Some(NOBODY), None).unwrap();
    let u = check_path(&file, 0).expect_err("a file of uid 65534");
    assert_eq!(u.path, file);
    assert_eq!(u.problem, Problem::Owner { uid: NOBODY });
    assert!(u.what().contains(&format!("uid {NOBODY}")), "{}", u.what());
}
