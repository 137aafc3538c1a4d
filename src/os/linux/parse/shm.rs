//! Pure parsers for memory no process owns, on Linux: the SysV segments of
//! `/proc/sysvipc/shm`, the tmpfs mounts of `/proc/self/mountinfo`, the
//! shared-memory lines of `/proc/[pid]/maps` and the targets of
//! `/proc/[pid]/fd/*` links. Compiled and tested on every OS; the reads are
//! in `os/linux/unowned.rs`.
//!
//! Names here are chosen by whoever created the file or segment (any local
//! user can create `/dev/shm/<anything>` or a memfd with any name): a path
//! leaves this module through [`display_path`], capped and with its control
//! characters escaped.

use std::path::PathBuf;

/// The longest path kept for display, in bytes (a path can be 4 KiB).
pub const PATH_DISPLAY_MAX: usize = 200;

/// One row of `/proc/sysvipc/shm` (`ipc/shm.c`, `sysvipc_shm_proc_show`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SysvRow {
    pub key: i64,
    pub shmid: u64,
    /// The declared size in bytes.
    pub size: u64,
    pub cpid: u32,
    pub lpid: u32,
    pub nattch: u64,
    pub uid: u32,
    /// Resident and swapped bytes (the `rss` and `swap` columns, bytes
    /// since Linux 2.6.28); `None` on kernels without them.
    pub rss: Option<u64>,
    pub swap: Option<u64>,
}

impl SysvRow {
    /// The memory the segment holds: resident plus swapped where the kernel
    /// says, else its declared size (an upper bound).
    pub fn bytes(&self) -> u64 {
        match (self.rss, self.swap) {
            (None, None) => self.size,
            (rss, swap) => rss.unwrap_or(0).saturating_add(swap.unwrap_or(0)),
        }
    }
}

/// The rows of `/proc/sysvipc/shm`. The first line names the columns, and
/// rows are read by those names (the set of columns has grown over kernel
/// versions). Rows missing a required column or with a malformed number are
/// skipped.
pub fn parse_sysvipc_shm(text: &str) -> Vec<SysvRow> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let names: Vec<&str> = header.split_whitespace().collect();
    let col = |name: &str| names.iter().position(|n| *n == name);
    let (Some(key), Some(shmid), Some(size), Some(cpid), Some(lpid), Some(nattch), Some(uid)) = (
        col("key"),
        col("shmid"),
        col("size"),
        col("cpid"),
        col("lpid"),
        col("nattch"),
        col("uid"),
    ) else {
        return Vec::new();
    };
    let (rss, swap) = (col("rss"), col("swap"));
    let mut out = Vec::new();
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        let row = (|| {
            Some(SysvRow {
                key: fields.get(key)?.parse().ok()?,
                shmid: num(shmid)?,
                size: num(size)?,
                cpid: u32::try_from(num(cpid)?).ok()?,
                lpid: u32::try_from(num(lpid)?).ok()?,
                nattch: num(nattch)?,
                uid: u32::try_from(num(uid)?).ok()?,
                rss: rss.and_then(num),
                swap: swap.and_then(num),
            })
        })();
        if let Some(row) = row {
            out.push(row);
        }
    }
    out
}

/// A device number as `major:minor`.
pub type Dev = (u32, u32);

/// A tmpfs mount of `mountinfo` (proc(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmpfsMount {
    /// The mount's device, as `mountinfo` prints it (decimal).
    pub dev: Dev,
    /// The directory of the file system mounted there (`/` unless a bind
    /// mount of a subdirectory).
    pub root: PathBuf,
    /// Where it is mounted, unescaped.
    pub mount_point: PathBuf,
}

/// The tmpfs mounts of a `mountinfo`, in mount order, without those hidden
/// by a later mount at the same point (this machine mounts `/dev/shm`
/// twice). Malformed lines are skipped.
pub fn parse_mountinfo_tmpfs(text: &str) -> Vec<TmpfsMount> {
    let mut out: Vec<TmpfsMount> = Vec::new();
    for line in text.lines() {
        // id parent major:minor root mount-point options [optional...] - fstype source super
        let mut fields = line.split(' ');
        let (Some(_id), Some(_parent), Some(dev), Some(root), Some(point)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            continue;
        };
        let Some(fstype) = fields.skip_while(|f| *f != "-").nth(1) else {
            continue;
        };
        let Some(dev) = parse_dev(dev, 10) else {
            continue;
        };
        let mount_point = PathBuf::from(unescape_octal(point));
        // A later mount at the same point hides the earlier one, tmpfs or not.
        out.retain(|m| m.mount_point != mount_point);
        if fstype == "tmpfs" {
            out.push(TmpfsMount {
                dev,
                root: PathBuf::from(unescape_octal(root)),
                mount_point,
            });
        }
    }
    out
}

/// Every mount point of a `mountinfo`, unescaped: a walk of one tmpfs
/// must not descend into another file system mounted below it (a FUSE
/// mount can make a `stat` wait on its daemon).
pub fn parse_mount_points(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| PathBuf::from(unescape_octal(point)))
        .collect()
}

/// `major:minor` in the given radix (10 in `mountinfo`, 16 in `maps`).
fn parse_dev(text: &str, radix: u32) -> Option<Dev> {
    let (major, minor) = text.split_once(':')?;
    Some((
        u32::from_str_radix(major, radix).ok()?,
        u32::from_str_radix(minor, radix).ok()?,
    ))
}

/// `mountinfo` escapes space, tab, newline and backslash as `\ooo`
/// (`fs/proc_namespace.c`, `mangle`).
fn unescape_octal(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| {
            bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)) && d[0] <= b'3'
        });
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The major and minor numbers of a `st_dev`, as glibc's `gnu_dev_major`
/// and `gnu_dev_minor` (`sysdeps/unix/sysv/linux/sys/sysmacros.h`) split
/// the 64-bit encoding.
pub fn split_dev(dev: u64) -> Dev {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (
        u32::try_from(major).unwrap_or(u32::MAX),
        u32::try_from(minor).unwrap_or(u32::MAX),
    )
}

/// A file-backed line of `maps`: the device and inode of the file mapped,
/// and its path as the kernel prints it, without ` (deleted)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedFile<'a> {
    pub dev: Dev,
    pub inode: u64,
    pub path: &'a [u8],
    /// The path ended in ` (deleted)` (every memfd and SysV mapping does).
    pub deleted: bool,
}

impl MappedFile<'_> {
    /// A memfd (`/memfd:NAME (deleted)`, `mm/memfd.c` names its file
    /// `memfd:NAME`).
    pub fn is_memfd(&self) -> bool {
        self.path.starts_with(b"/memfd:")
    }

    /// A SysV segment (`/SYSV%08x`, `ipc/shm.c`): counted through
    /// `/proc/sysvipc/shm` instead.
    pub fn is_sysv(&self) -> bool {
        self.path.starts_with(b"/SYSV") && self.deleted
    }
}

/// One line of `maps` (`fs/proc/task_mmu.c`, `show_map_vma`): `None` for
/// anonymous mappings, pseudo-files (`[heap]`) and malformed lines.
pub fn parse_maps_line(line: &[u8]) -> Option<MappedFile<'_>> {
    // address perms offset dev inode path; the path starts after padding.
    let mut rest = line;
    let mut field = || {
        let start = rest.iter().position(|b| *b != b' ')?;
        rest = &rest[start..];
        let end = rest.iter().position(|b| *b == b' ').unwrap_or(rest.len());
        let (f, r) = rest.split_at(end);
        rest = r;
        Some(f)
    };
    let (_addr, _perms, _offset, dev, inode) = (field()?, field()?, field()?, field()?, field()?);
    let inode = crate::os::linux::parse::procfs::parse_u64(inode)?;
    let dev = parse_dev(std::str::from_utf8(dev).ok()?, 16)?;
    let start = rest.iter().position(|b| *b != b' ')?;
    let path = &rest[start..];
    if inode == 0 || !path.starts_with(b"/") {
        return None;
    }
    let (path, deleted) = match path.strip_suffix(b" (deleted)") {
        Some(p) => (p, true),
        None => (path, false),
    };
    Some(MappedFile {
        dev,
        inode,
        path,
        deleted,
    })
}

/// The file-backed lines of a whole `maps`, consecutive repeats of one file
/// (its text, data and bss segments) given once.
pub fn parse_maps_files(data: &[u8]) -> Vec<MappedFile<'_>> {
    let mut out: Vec<MappedFile<'_>> = Vec::new();
    for line in data.split(|b| *b == b'\n') {
        if let Some(m) = parse_maps_line(line)
            && out
                .last()
                .is_none_or(|last| (last.dev, last.inode) != (m.dev, m.inode))
        {
            out.push(m);
        }
    }
    out
}

/// What a `/proc/[pid]/fd/N` link points at, where it may be shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdTarget<'a> {
    /// A memfd: `/memfd:NAME (deleted)`; the name as given to `memfd_create`.
    Memfd(&'a [u8]),
    /// A file under one of the tmpfs mount points (possibly deleted).
    Tmpfs(&'a [u8]),
}

/// Classify an fd's link target: a memfd, a path under one of the tmpfs
/// `mount_points` (whole components only: `/run` does not cover
/// `/running`), or neither (sockets, pipes, other files).
pub fn classify_fd_target<'a>(target: &'a [u8], mount_points: &[&[u8]]) -> Option<FdTarget<'a>> {
    if let Some(name) = target.strip_prefix(b"/memfd:") {
        return Some(FdTarget::Memfd(
            name.strip_suffix(b" (deleted)").unwrap_or(name),
        ));
    }
    if !target.starts_with(b"/") {
        return None;
    }
    mount_points
        .iter()
        .any(|point| under(target, point))
        .then_some(FdTarget::Tmpfs(target))
}

/// `path` is `point` or below it.
fn under(path: &[u8], point: &[u8]) -> bool {
    let point = point.strip_suffix(b"/").unwrap_or(point);
    path.strip_prefix(point)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
}

/// A path or name another user chose, for display: lossy UTF-8, control
/// characters and direction overrides escaped ([`crate::model::printable`]),
/// cut to at most [`PATH_DISPLAY_MAX`] bytes on a character boundary with
/// `…` where cut.
pub fn display_path(raw: &[u8]) -> String {
    let cut = raw.len() > PATH_DISPLAY_MAX;
    let text = String::from_utf8_lossy(&raw[..raw.len().min(PATH_DISPLAY_MAX)]);
    let escaped = crate::model::printable(&text);
    let mut out = String::with_capacity(PATH_DISPLAY_MAX + 4);
    for c in escaped.chars() {
        if out.len() + c.len_utf8() > PATH_DISPLAY_MAX {
            return out + "…";
        }
        out.push(c);
    }
    if cut {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/tests/fixtures/shm/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn sysv_rows_are_read_by_their_header() {
        let rows = parse_sysvipc_shm(&fixture("sysvipc_shm"));
        assert_eq!(rows.len(), 2);
        let orphan = rows[0];
        assert_eq!(orphan.key, 0x1234abcd);
        assert_eq!(orphan.shmid, 0);
        assert_eq!(orphan.size, 8 << 20);
        assert_eq!((orphan.cpid, orphan.lpid), (19052, 19052));
        assert_eq!(orphan.nattch, 0);
        assert_eq!(orphan.uid, 0);
        assert_eq!(orphan.bytes(), 8 << 20);
        let attached = rows[1];
        assert_eq!((attached.key, attached.shmid, attached.nattch), (0, 1, 1));
        // 4 MiB declared, 2 MiB touched: the resident bytes count.
        assert_eq!(attached.size, 4 << 20);
        assert_eq!(attached.bytes(), 2 << 20);
    }

    #[test]
    fn sysv_columns_in_another_order_and_without_rss() {
        let text = "shmid key uid nattch lpid cpid size\n 7 -5 1000 0 10 11 4096\n";
        let rows = parse_sysvipc_shm(text);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].shmid, rows[0].key, rows[0].uid), (7, -5, 1000));
        assert_eq!((rows[0].cpid, rows[0].lpid), (11, 10));
        assert_eq!(rows[0].rss, None);
        // Without rss and swap the declared size stands in.
        assert_eq!(rows[0].bytes(), 4096);
    }

    #[test]
    fn sysv_garbage_rows_and_headers_are_skipped() {
        assert!(parse_sysvipc_shm("").is_empty());
        assert!(parse_sysvipc_shm("a b c\n1 2 3\n").is_empty());
        let text = "key shmid size cpid lpid nattch uid\n1 2 x 4 5 6 7\n1 2 3 4 5 6 7\n1 2\n";
        let rows = parse_sysvipc_shm(text);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].size, 3);
    }

    #[test]
    fn tmpfs_mounts_and_the_later_of_two_at_one_point() {
        let mounts = parse_mountinfo_tmpfs(&fixture("mountinfo"));
        let points: Vec<_> = mounts.iter().map(|m| m.mount_point.clone()).collect();
        assert_eq!(
            points,
            [PathBuf::from("/dev/shm"), PathBuf::from("/sys/fs/cgroup")]
        );
        // /dev/shm is mounted twice; the later mount (0:27) is the one seen.
        assert_eq!(mounts[0].dev, (0, 27));
        assert_eq!(mounts[0].root, PathBuf::from("/"));
    }

    #[test]
    fn mount_points_with_escaped_spaces_and_optional_fields() {
        let text = "40 1 0:50 / /mnt/my\\040dir rw shared:5 master:1 - tmpfs tmpfs rw\n\
                    41 1 0:51 / /run rw - tmpfs tmpfs rw\n\
                    42 41 0:52 / /run/x rw - ext4 /dev/sda rw\n\
                    43 1 0:53 / /run rw - ext4 /dev/sdb rw\n\
                    garbage\n";
        let mounts = parse_mountinfo_tmpfs(text);
        // /run was covered by an ext4 mount at the same point.
        assert_eq!(mounts.len(), 1);
        assert_eq!(mounts[0].mount_point, PathBuf::from("/mnt/my dir"));
        assert_eq!(mounts[0].dev, (0, 50));
    }

    #[test]
    fn every_mount_point_is_listed() {
        let points = parse_mount_points(&fixture("mountinfo"));
        assert_eq!(points.len(), 19);
        assert!(points.contains(&PathBuf::from("/dev/pts")));
        assert!(points.contains(&PathBuf::from("/sys/fs/cgroup/memory")));
    }

    #[test]
    fn st_dev_splits_as_glibc_does() {
        assert_eq!(split_dev(0x1b), (0, 27));
        assert_eq!(split_dev(0xfe00), (254, 0));
        // makedev(0x12345, 0x6789a)
        let dev = (0x12345u64 & 0xfff) << 8
            | (0x12345u64 & !0xfff) << 32
            | (0x6789au64 & 0xff)
            | (0x6789au64 & !0xff) << 12;
        assert_eq!(split_dev(dev), (0x12345, 0x6789a));
    }

    #[test]
    fn maps_lines_name_shared_memory_by_device_and_inode() {
        let maps = fixture("maps");
        let files = parse_maps_files(maps.as_bytes());
        let shm: Vec<_> = files
            .iter()
            .filter(|f| f.dev == (0, 0x1b) || f.is_memfd() || f.is_sysv())
            .collect();
        assert_eq!(shm.len(), 3, "{shm:?}");
        assert_eq!(shm[0].path, b"/dev/shm/torch_1234_5678");
        assert_eq!((shm[0].inode, shm[0].deleted), (2, false));
        assert_eq!(shm[1].path, b"/memfd:mapped buf");
        assert_eq!(
            (shm[1].dev, shm[1].inode, shm[1].deleted),
            ((0, 1), 27, true)
        );
        assert!(shm[2].is_sysv());
        // The held-open memfd (inode 26) is not mapped.
        assert!(!files.iter().any(|f| f.dev == (0, 1) && f.inode == 26));
        // Anonymous mappings and [heap] are not files; each file once.
        assert!(files.iter().all(|f| f.path.starts_with(b"/")));
        let python = files
            .iter()
            .filter(|f| f.path.ends_with(b"/python3.12"))
            .count();
        assert!(python <= 1);
    }

    #[test]
    fn malformed_maps_lines_are_skipped() {
        assert_eq!(parse_maps_line(b""), None);
        assert_eq!(parse_maps_line(b"7f-8f rw-s 0 zz:01 5 /memfd:x"), None);
        assert_eq!(parse_maps_line(b"7f-8f rw-s 0 00:01 nope /memfd:x"), None);
        assert_eq!(parse_maps_line(b"7f-8f rw-p 0 00:00 0 "), None);
        let odd = parse_maps_line(b"7f-8f rw-s 0 00:1b 9      /dev/shm/a b (deleted)")
            .expect("a path with a space");
        assert_eq!((odd.path, odd.deleted), (&b"/dev/shm/a b"[..], true));
    }

    #[test]
    fn fd_targets_of_the_fixture() {
        let links = fixture("fd_links");
        let points: [&[u8]; 1] = [b"/dev/shm"];
        let found: Vec<_> = links
            .lines()
            .filter_map(|l| l.split_once(" -> "))
            .filter_map(|(_, t)| classify_fd_target(t.as_bytes(), &points))
            .collect();
        assert_eq!(
            found,
            [
                FdTarget::Memfd(b"torch_shm_held"),
                FdTarget::Memfd(b"mapped buf"),
                FdTarget::Memfd(b"mapped buf"),
                FdTarget::Tmpfs(b"/dev/shm/torch_1234_5678"),
                FdTarget::Tmpfs(b"/dev/shm/torch_1234_5678"),
            ]
        );
    }

    #[test]
    fn fd_targets_match_whole_components() {
        let points: [&[u8]; 2] = [b"/run", b"/dev/shm/"];
        assert_eq!(
            classify_fd_target(b"/running/x", &points),
            None,
            "not under /run"
        );
        assert_eq!(
            classify_fd_target(b"/run/user/1000/f", &points),
            Some(FdTarget::Tmpfs(b"/run/user/1000/f"))
        );
        assert_eq!(
            classify_fd_target(b"/dev/shm/x (deleted)", &points),
            Some(FdTarget::Tmpfs(b"/dev/shm/x (deleted)"))
        );
        assert_eq!(classify_fd_target(b"socket:[1]", &points), None);
        assert_eq!(classify_fd_target(b"anon_inode:[memfd]", &points), None);
    }

    #[test]
    fn hostile_names_are_capped_and_escaped_for_display() {
        assert_eq!(display_path(b"/dev/shm/blob"), "/dev/shm/blob");
        assert_eq!(
            display_path(b"/dev/shm/a\nFAKE\x1b[31m"),
            "/dev/shm/a\\nFAKE\\u{1b}[31m"
        );
        assert_eq!(display_path(b"/dev/shm/\xff"), "/dev/shm/\u{fffd}");
        let long = [b'a'; 5000];
        let shown = display_path(&long);
        assert!(shown.len() <= PATH_DISPLAY_MAX + '…'.len_utf8());
        assert!(shown.ends_with('…'));
        // Escapes that would cross the cap are cut too.
        let mut near = vec![b'b'; PATH_DISPLAY_MAX - 2];
        near.extend_from_slice(b"\n\n");
        let shown = display_path(&near);
        assert!(
            shown.len() <= PATH_DISPLAY_MAX + '…'.len_utf8(),
            "{}",
            shown.len()
        );
        assert!(!shown.contains('\n'));
    }
}
