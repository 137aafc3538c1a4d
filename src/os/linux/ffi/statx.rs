//! `statx(2)` with `AT_STATX_DONT_SYNC`, for the scan of memory no process
//! owns: a file's device, inode, owner and allocated blocks from what the
//! kernel has cached, without asking the file system.
//!
//! Why: the scan `stat`s files other users control (entries of `/dev/shm`,
//! the files behind other processes' descriptors). A user can mount a FUSE
//! file system on a directory or a file they own (`fusermount`) and never
//! answer: a plain `stat` that reaches it waits for the answer, and the
//! sampler thread with it. With `AT_STATX_DONT_SYNC` FUSE (and network file
//! systems) answer from their cached attributes (`fuse_update_get_attr` in
//! `fs/fuse/dir.c`) and send no request. tmpfs has no other attributes than
//! the cached ones, so its figures are exact.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What the scan needs of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statx {
    pub dev: (u32, u32),
    pub ino: u64,
    pub uid: u32,
    /// Allocated 512-byte blocks.
    pub blocks: u64,
    pub is_file: bool,
    pub is_dir: bool,
}

/// `statx` of `path` from cached attributes; `follow`: follow a final
/// symlink (or a `/proc/[pid]/fd` link) rather than describe the link.
pub fn statx_cached(path: &Path, follow: bool) -> io::Result<Statx> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut flags = libc::AT_STATX_DONT_SYNC;
    if !follow {
        flags |= libc::AT_SYMLINK_NOFOLLOW;
    }
    let mask = libc::STATX_TYPE | libc::STATX_INO | libc::STATX_UID | libc::STATX_BLOCKS;
    // SAFETY: an all-zero statx is a valid value of this plain C struct.
    let mut out: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the path is NUL-terminated and outlives the call; `out` is a
    // valid, writable statx; AT_FDCWD with an absolute or relative path is
    // allowed; the kernel writes only into `out`.
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c_path.as_ptr(), flags, mask, &mut out) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let kind = u32::from(out.stx_mode) & libc::S_IFMT;
    Ok(Statx {
        dev: (out.stx_dev_major, out.stx_dev_minor),
        ino: out.stx_ino,
        uid: out.stx_uid,
        blocks: out.stx_blocks,
        is_file: kind == libc::S_IFREG,
        is_dir: kind == libc::S_IFDIR,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_s_blocks_owner_and_kind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 8192]).unwrap();
        let st = statx_cached(&path, false).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert!(st.is_file && !st.is_dir);
        assert_eq!(st.ino, meta.ino());
        assert_eq!(st.blocks, meta.blocks());
        assert_eq!(st.uid, meta.uid());
        assert_eq!(st.dev, crate::os::linux::parse::shm::split_dev(meta.dev()));
        assert!(statx_cached(dir.path(), false).unwrap().is_dir);
    }

    #[test]
    fn a_symlink_is_described_unless_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t");
        std::fs::write(&target, b"x").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let st = statx_cached(&link, false).unwrap();
        assert!(!st.is_file && !st.is_dir);
        assert!(statx_cached(&link, true).unwrap().is_file);
        assert!(statx_cached(&dir.path().join("missing"), false).is_err());
    }
}
