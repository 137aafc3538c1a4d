//! Pure parsers for the memory-cgroup file system: where its hierarchies are
//! mounted (`/proc/self/mountinfo`), the limit and usage files of one cgroup,
//! and the keyed files (`memory.stat`, `memory.events`, `memory.oom_control`).
//!
//! Like [`super::procfs`], nothing here touches the file system: the Linux
//! sampler's ceiling collector (`os/linux/ceilings.rs`) reads the files
//! and hands their text here, so every function is tested against captured
//! content (`tests/fixtures/cgroup/`) and against garbage. None of them
//! panics.
//!
//! References: the kernel's `Documentation/admin-guide/cgroup-v1/memory.rst`
//! and `Documentation/admin-guide/cgroup-v2.rst`; proc(5) for mountinfo.

use std::path::PathBuf;

/// A v1 limit at or above this is "unlimited": the kernel writes
/// `PAGE_COUNTER_MAX` pages in bytes, 9223372036854771712 with 4 KiB pages
/// and a little less with larger ones, never a real amount of memory.
pub const UNLIMITED_FLOOR: u64 = 1 << 62;

/// Which cgroup hierarchy a path belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hierarchy {
    /// The v1 hierarchy with the `memory` controller.
    V1,
    /// The unified hierarchy.
    V2,
}

/// One number, as the single-value cgroup files hold it
/// (`memory.usage_in_bytes`, `memory.current`, `memory.failcnt`).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let word = text.trim();
    super::procfs::parse_u64(word.as_bytes())
        .ok_or_else(|| format!("{word:?} is not a number of bytes"))
}

/// A limit file (`memory.max`, `memory.high`, `memory.swap.max`,
/// `memory.limit_in_bytes`, `memory.memsw.limit_in_bytes`): `None` where it
/// sets no limit (`max` in v2, [`UNLIMITED_FLOOR`] and above in v1).
pub fn parse_limit(text: &str) -> Result<Option<u64>, String> {
    if text.trim() == "max" {
        return Ok(None);
    }
    let bytes = parse_bytes(text)?;
    Ok((bytes < UNLIMITED_FLOOR).then_some(bytes))
}

/// The value of `key` in a flat keyed file (`key value` per line:
/// `memory.stat`, `memory.events`, `memory.oom_control`); `None` where the
/// key is absent or its value is not a number.
pub fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key)
            .then(|| super::procfs::parse_u64(v.trim().as_bytes()))
            .flatten()
    })
}

/// The page cache of a cgroup (its whole subtree) that its limit's reclaim
/// gives back before the OOM killer is called, from `memory.stat`.
///
/// When a charge would pass the limit, the kernel reclaims from the cgroup's
/// own LRU lists (`try_to_free_mem_cgroup_pages`) and calls the OOM killer
/// only when that fails. Reclaim takes the inactive file list first; active
/// file pages are the ones used again recently (the program's code, the
/// files it keeps reading), and reclaiming them brings them straight back
/// (refaults) while the job stalls. So the room counts `inactive_file` and
/// not `active_file`, the same choice as the "working set" of the kubelet's
/// eviction, cAdvisor, `docker stats` and CRI-O (usage − inactive file, e.g.
/// <https://github.com/cri-o/cri-o/pull/3115> and
/// <https://github.com/moby/moby/pull/51786>): what those tools call in use is
/// what this leaves out of the room.
///
/// In v1, `inactive_file` counts the cgroup's own pages only and
/// `total_inactive_file` its whole subtree, which is what its usage counts
/// too, so v1 takes the `total_` key; v2's `inactive_file` is already the
/// subtree's. Dirty pages are in it: they need writeback before they can go,
/// which reclaim starts and waits for.
pub fn reclaimable_file(stat: &str, hierarchy: Hierarchy) -> Option<u64> {
    match hierarchy {
        Hierarchy::V1 => keyed_value(stat, "total_inactive_file"),
        Hierarchy::V2 => keyed_value(stat, "inactive_file"),
    }
}

/// Where one cgroup hierarchy is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// The cgroup that the mount shows at its top (`/` unless the mount was
    /// made inside a container without its own cgroup namespace, where it
    /// is the container's cgroup).
    pub root: String,
    /// The mount point.
    pub point: PathBuf,
}

/// The memory-cgroup hierarchies this mount namespace can see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupMounts {
    /// A `cgroup` mount with the `memory` controller.
    pub v1_memory: Option<CgroupMount>,
    /// A `cgroup2` mount.
    pub v2: Option<CgroupMount>,
}

impl CgroupMounts {
    /// The hierarchy the memory paths of `/proc/[pid]/cgroup` name: v1's
    /// where the memory controller is mounted there, else v2's (see
    /// [`super::procfs::parse_memory_cgroup`]).
    pub fn memory(&self) -> Option<(Hierarchy, &CgroupMount)> {
        match (&self.v1_memory, &self.v2) {
            (Some(m), _) => Some((Hierarchy::V1, m)),
            (None, Some(m)) => Some((Hierarchy::V2, m)),
            (None, None) => None,
        }
    }
}

/// The cgroup mounts of `/proc/self/mountinfo` (proc(5): `ID parent
/// major:minor root mount-point options [optional…] - fstype source
/// super-options`). The first mount of each kind counts; lines that do not
/// parse are skipped.
pub fn parse_mountinfo(text: &str) -> CgroupMounts {
    let mut mounts = CgroupMounts::default();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let tail: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (fields.get(3), fields.get(4), tail.first())
        else {
            continue;
        };
        let mount = || CgroupMount {
            root: unescape(root),
            point: PathBuf::from(unescape(point)),
        };
        match *fstype {
            "cgroup2" if mounts.v2.is_none() => mounts.v2 = Some(mount()),
            "cgroup" if mounts.v1_memory.is_none() => {
                let memory = tail
                    .get(2)
                    .is_some_and(|opts| opts.split(',').any(|o| o == "memory"));
                if memory {
                    mounts.v1_memory = Some(mount());
                }
            }
            _ => {}
        }
    }
    mounts
}

/// A mountinfo path with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(digits) = bytes.get(i + 1..i + 4)
            && digits.iter().all(|d| (b'0'..=b'7').contains(d))
        {
            let value = digits.iter().fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
            if let Ok(byte) = u8::try_from(value) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why a cgroup path has no directory under a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreachable {
    /// Outside the part of the hierarchy the mount shows (a container that
    /// sees only its own cgroup; a path beginning `/..` from another cgroup
    /// namespace).
    OutsideMount,
    /// A component that is empty, `.` or `..`: not a path the kernel writes.
    Malformed,
}

/// The directory of cgroup `path` under `mount`.
pub fn cgroup_dir(mount: &CgroupMount, path: &str) -> Result<PathBuf, Unreachable> {
    let rest = if mount.root == "/" {
        path
    } else {
        let root = mount.root.trim_end_matches('/');
        match path.strip_prefix(root) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => return Err(Unreachable::OutsideMount),
        }
    };
    let mut dir = mount.point.clone();
    for part in rest.split('/').skip(1) {
        match part {
            "" if rest == "/" => {}
            ".." if rest.starts_with("/..") => return Err(Unreachable::OutsideMount),
            "" | "." | ".." => return Err(Unreachable::Malformed),
            name => dir.push(name),
        }
    }
    Ok(dir)
}

/// The cgroups from `path` up to, not including, the root of the hierarchy
/// (which no limit can be set on): `/a/b/c`, `/a/b`, `/a`.
pub fn levels(path: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(path.trim_end_matches('/')).filter(|p| !p.is_empty());
    std::iter::from_fn(move || {
        let level = next?;
        next = level
            .rfind('/')
            .map(|i| &level[..i])
            .filter(|p| !p.is_empty());
        Some(level)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    // Captured on this project's Linux test machine (kernel 6.18, v1 memory
    // controller): see tests/fixtures/cgroup/README.md.
    const MOUNTINFO: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cgroup/mountinfo-hybrid-6.18"
    ));
    const V1_STAT: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cgroup/v1-2g-memory.stat"
    ));
    const V1_PARENT_STAT: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cgroup/v1-process_api-memory.stat"
    ));
    const V1_LIMIT: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cgroup/v1-2g-memory.limit_in_bytes"
    ));
    const V1_MEMSW: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cgroup/v1-2g-memory.memsw.limit_in_bytes"
    ));
    const V1_USAGE: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cgroup/v1-2g-memory.usage_in_bytes"
    ));
    const V1_OOM_CONTROL: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cgroup/v1-2g-memory.oom_control"
    ));
    // A Docker container on a cgroup v2 host, from Checkmk's tests (see the
    // README for the address).
    const V2_STAT: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cgroup/v2-docker-memory-9000000.stat"
    ));

    #[test]
    fn the_hybrid_hosts_mounts_are_found() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(
            m.v1_memory,
            Some(CgroupMount {
                root: "/".into(),
                point: "/sys/fs/cgroup/memory".into()
            })
        );
        assert_eq!(
            m.v2.as_ref().map(|v| v.point.as_path()),
            Some(Path::new("/sys/fs/cgroup/unified"))
        );
        assert_eq!(m.memory().map(|(h, _)| h), Some(Hierarchy::V1));
    }

    #[test]
    fn a_v2_only_host_reads_memory_from_v2_and_escapes_are_undone() {
        // proc(5)'s format; a mount point with a space is written \040.
        let text = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n\
                    31 23 0:27 /kubepods /host\\040cg rw - cgroup cgroup rw,cpu\n";
        let m = parse_mountinfo(text);
        assert_eq!(
            m.v1_memory, None,
            "a v1 mount without memory does not count"
        );
        let (h, mount) = m.memory().unwrap();
        assert_eq!(h, Hierarchy::V2);
        assert_eq!(mount.point, Path::new("/sys/fs/cgroup"));
        assert_eq!(unescape("/host\\040cg"), "/host cg");
        assert_eq!(unescape("\\999\\"), "\\999\\");
    }

    #[test]
    fn garbage_mountinfo_finds_nothing() {
        for text in [
            "",
            "\n",
            " - cgroup2",
            "1 2 3 - cgroup",
            "x - cgroup cgroup rw,memory",
        ] {
            assert_eq!(parse_mountinfo(text), CgroupMounts::default(), "{text:?}");
        }
    }

    #[test]
    fn the_captured_v1_cgroup_reads_as_its_limit_usage_and_inactive_file() {
        assert_eq!(parse_limit(V1_LIMIT), Ok(Some(2 << 30)));
        assert_eq!(parse_limit(V1_MEMSW), Ok(None), "the v1 unlimited value");
        assert_eq!(parse_bytes(V1_USAGE), Ok(391_819_264));
        assert_eq!(reclaimable_file(V1_STAT, Hierarchy::V1), Some(67_112_960));
        assert_eq!(keyed_value(V1_OOM_CONTROL, "oom_kill"), Some(0));
        assert_eq!(keyed_value(V1_OOM_CONTROL, "under_oom"), Some(0));
    }

    #[test]
    fn v1_counts_the_subtrees_inactive_file_not_its_own() {
        // The parent's own lists are empty; its children's pages are in the
        // total_ figures, which its usage counts too.
        assert_eq!(keyed_value(V1_PARENT_STAT, "inactive_file"), Some(0));
        assert_eq!(
            reclaimable_file(V1_PARENT_STAT, Hierarchy::V1),
            Some(9_851_441_152)
        );
    }

    #[test]
    fn v2_reads_inactive_file() {
        assert_eq!(reclaimable_file(V2_STAT, Hierarchy::V2), Some(0));
        assert_eq!(keyed_value(V2_STAT, "anon"), Some(1_757_184));
        assert_eq!(parse_limit("8998912\n"), Ok(Some(8_998_912)));
        assert_eq!(parse_limit("max\n"), Ok(None));
        // memory.events, in the format cgroup-v2.rst gives.
        let events = "low 0\nhigh 12\nmax 40\noom 2\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(keyed_value(events, "oom_kill"), Some(1));
        assert_eq!(keyed_value(events, "max"), Some(40));
    }

    #[test]
    fn bad_limit_files_are_errors_naming_the_text() {
        assert_eq!(
            parse_limit("lots\n"),
            Err("\"lots\" is not a number of bytes".into())
        );
        assert!(parse_limit("").is_err());
        assert!(parse_limit("-1").is_err());
        assert!(parse_bytes("99999999999999999999999").is_err());
        assert_eq!(keyed_value("inactive_file x\n", "inactive_file"), None);
        assert_eq!(keyed_value("inactive_filex 5\n", "inactive_file"), None);
    }

    #[test]
    fn a_cgroup_path_maps_under_its_mount_and_nowhere_else() {
        let host = CgroupMount {
            root: "/".into(),
            point: "/sys/fs/cgroup/memory".into(),
        };
        assert_eq!(
            cgroup_dir(&host, "/kubepods/burstable/pod1/c1"),
            Ok(PathBuf::from(
                "/sys/fs/cgroup/memory/kubepods/burstable/pod1/c1"
            ))
        );
        assert_eq!(
            cgroup_dir(&host, "/"),
            Ok(PathBuf::from("/sys/fs/cgroup/memory"))
        );
        assert_eq!(
            cgroup_dir(&host, "/../other"),
            Err(Unreachable::OutsideMount)
        );
        assert_eq!(
            cgroup_dir(&host, "/a/../../etc"),
            Err(Unreachable::Malformed)
        );
        assert_eq!(cgroup_dir(&host, "/a//b"), Err(Unreachable::Malformed));
        // A container's mount shows its own cgroup only.
        let container = CgroupMount {
            root: "/docker/abc".into(),
            point: "/sys/fs/cgroup/memory".into(),
        };
        assert_eq!(
            cgroup_dir(&container, "/docker/abc/sub"),
            Ok(PathBuf::from("/sys/fs/cgroup/memory/sub"))
        );
        assert_eq!(
            cgroup_dir(&container, "/docker/abcdef"),
            Err(Unreachable::OutsideMount)
        );
        assert_eq!(cgroup_dir(&container, "/"), Err(Unreachable::OutsideMount));
    }

    #[test]
    fn levels_go_up_to_below_the_root() {
        let l: Vec<&str> = levels("/a/b/c").collect();
        assert_eq!(l, ["/a/b/c", "/a/b", "/a"]);
        assert_eq!(levels("/").count(), 0);
        assert_eq!(levels("").count(), 0);
        assert_eq!(levels("/a/").collect::<Vec<_>>(), ["/a"]);
    }
}
