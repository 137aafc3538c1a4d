//! The "Memory no process owns" block of `headroom snapshot`: the largest
//! tmpfs files and memfds with their owner and who maps or holds them, the
//! orphaned SysV segments with the command that frees each, and the
//! processes whose footprint includes memory they hold open without a
//! mapping.

use std::fmt::Write as _;

use super::{format_bytes, printable, truncate};
use crate::model::{Snapshot, TmpfsFile};

/// Files and segments listed, largest first.
const LISTED: usize = 8;
/// Smaller files are not listed (their bytes count in the totals).
const LISTED_FROM: u64 = 1 << 20;

/// Append the block, if the sampler read memory no process owns and found
/// any worth a line.
pub fn render_unowned(out: &mut String, snap: &Snapshot) {
    let u = &snap.unowned;
    if !u.known {
        return;
    }
    let files: Vec<&TmpfsFile> = u
        .tmpfs_files
        .iter()
        .filter(|f| f.bytes >= LISTED_FROM)
        .take(LISTED)
        .collect();
    let orphans: Vec<_> = u
        .sysv_segments
        .iter()
        .filter(|s| s.orphan())
        .take(LISTED)
        .collect();
    let mut holders: Vec<_> = snap.processes.iter().filter(|p| p.held_open > 0).collect();
    holders.sort_by_key(|p| std::cmp::Reverse(p.held_open));
    let unexplained = u.unexplained_shmem.unwrap_or(0);
    if files.is_empty()
        && orphans.is_empty()
        && holders.is_empty()
        && u.bytes() == 0
        && u.cut_short.is_none()
        && unexplained < UNEXPLAINED_SHOWN_FROM
    {
        return;
    }
    let _ = writeln!(
        out,
        "\nMemory no process owns: {} in tmpfs files nobody maps or holds open, {} in orphaned SysV segments",
        format_bytes(u.tmpfs_bytes),
        format_bytes(u.sysv_orphan_bytes)
    );
    for f in files {
        let _ = writeln!(
            out,
            "{:>10}  {:<40} {:<16} {}",
            format_bytes(f.bytes),
            truncate(&printable(&f.path), 40),
            truncate(&owner(f.user.as_deref(), f.uid), 16),
            held(f)
        );
    }
    for s in orphans {
        let _ = writeln!(
            out,
            "{:>10}  {:<40} {:<16} orphan: ipcrm -m {} frees it",
            format_bytes(s.bytes),
            format!("SysV segment {} (key {:#010x})", s.id, s.key),
            truncate(&owner(s.user.as_deref(), s.uid), 16),
            s.id
        );
    }
    if unexplained >= UNEXPLAINED_SHOWN_FROM {
        let _ = writeln!(
            out,
            "{:>10}  shared memory (Shmem) no process maps and the scan did not find",
            format_bytes(unexplained)
        );
    }
    if let Some(why) = &u.cut_short {
        let _ = writeln!(
            out,
            "            the scan stopped short: {} (what it did not see is not known)",
            printable(why)
        );
    }
    for p in holders.iter().take(LISTED) {
        let _ = writeln!(
            out,
            "{:>10}  held open without a mapping by {} ({}), counted in its footprint",
            format_bytes(p.held_open),
            p.id.pid,
            truncate(&printable(&p.name), 16)
        );
    }
}

/// Shared memory nothing accounts for is shown from this much: less is
/// pages mapped by processes whose `status` was read a while ago.
const UNEXPLAINED_SHOWN_FROM: u64 = 64 << 20;

/// A user name, else the uid, else `?`.
fn owner(user: Option<&str>, uid: Option<u32>) -> String {
    match (user, uid) {
        (Some(user), _) => printable(user).into_owned(),
        (None, Some(uid)) => uid.to_string(),
        (None, None) => "?".into(),
    }
}

/// Who maps or holds a file: "mapped by 12, 34", "open by 56", "nobody".
fn held(f: &TmpfsFile) -> String {
    let pids = |pids: &[u32]| {
        pids.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (f.mapped_by.is_empty(), f.open_by.is_empty()) {
        _ if f.redacted => "(holders hidden)".into(),
        (true, true) => "nobody".into(),
        (false, true) => format!("mapped by {}", pids(&f.mapped_by)),
        (true, false) => format!("open by {}", pids(&f.open_by)),
        (false, false) => format!(
            "mapped by {}; open by {}",
            pids(&f.mapped_by),
            pids(&f.open_by)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::build::{process, snapshot};
    use crate::model::{SysvSegment, Unowned};

    fn file(path: &str, bytes: u64, mapped_by: Vec<u32>, open_by: Vec<u32>) -> TmpfsFile {
        TmpfsFile {
            path: path.into(),
            bytes,
            uid: Some(1001),
            user: Some("bob".into()),
            mapped_by,
            open_by,
            redacted: false,
        }
    }

    fn rendered(unowned: Unowned, held: u64) -> String {
        let snap = snapshot(0)
            .processes([process(4242).name("sleep").held_open(held)])
            .unowned(unowned)
            .build();
        let mut out = String::new();
        render_unowned(&mut out, &snap);
        out
    }

    #[test]
    fn files_show_their_owner_and_who_holds_them() {
        let out = rendered(
            Unowned {
                known: true,
                tmpfs_bytes: 5 << 30,
                sysv_orphan_bytes: 8 << 20,
                tmpfs_files: vec![
                    file("/dev/shm/blob", 5 << 30, vec![], vec![]),
                    file("memfd:held", 3 << 30, vec![], vec![4242]),
                    file("/dev/shm/torch_1", 2 << 20, vec![7, 8], vec![]),
                    file("/dev/shm/tiny", 4096, vec![], vec![]),
                ],
                sysv_segments: vec![SysvSegment {
                    key: 0x1234abcd,
                    id: 7,
                    bytes: 8 << 20,
                    uid: Some(0),
                    user: Some("root".into()),
                    attached: 0,
                    creator_pid: 5,
                    last_pid: 5,
                }],
                cut_short: None,
                unexplained_shmem: None,
            },
            3 << 30,
        );
        assert!(
            out.contains("Memory no process owns: 5.0 GiB in tmpfs files"),
            "{out}"
        );
        let line = |needle: &str| {
            out.lines()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("no line with {needle} in\n{out}"))
        };
        assert!(line("/dev/shm/blob").contains("bob"));
        assert!(line("/dev/shm/blob").ends_with("nobody"));
        assert!(line("memfd:held").ends_with("open by 4242"));
        assert!(line("/dev/shm/torch_1").ends_with("mapped by 7, 8"));
        assert!(!out.contains("tiny"), "files under 1 MiB are not listed");
        assert!(line("SysV segment 7 (key 0x1234abcd)").ends_with("ipcrm -m 7 frees it"));
        assert!(line("held open without a mapping by 4242 (sleep)").contains("3.0 GiB"));
    }

    #[test]
    fn a_scan_cut_short_and_shared_memory_nothing_explains_are_said() {
        let out = rendered(
            Unowned {
                known: true,
                cut_short: Some("the walk of tmpfs stopped at 50000 entries".into()),
                unexplained_shmem: Some(4 << 30),
                ..Unowned::default()
            },
            0,
        );
        assert!(
            out.contains(
                "4.0 GiB  shared memory (Shmem) no process maps and the scan did not find"
            ),
            "{out}"
        );
        assert!(
            out.contains("the scan stopped short: the walk of tmpfs stopped at 50000 entries"),
            "{out}"
        );
        // A little, from stale status reads, is not worth a line.
        let small = Unowned {
            known: true,
            unexplained_shmem: Some(1 << 20),
            ..Unowned::default()
        };
        assert_eq!(rendered(small, 0), "");
    }

    #[test]
    fn nothing_to_say_says_nothing() {
        assert_eq!(rendered(Unowned::default(), 0), "");
        let known_empty = Unowned {
            known: true,
            ..Unowned::default()
        };
        assert_eq!(rendered(known_empty, 0), "");
    }

    #[test]
    fn hostile_names_are_escaped_and_hidden_holders_not_called_nobody() {
        let mut f = file("/dev/shm/x\x1b[2J", 2 << 20, vec![], vec![]);
        f.redacted = true;
        let out = rendered(
            Unowned {
                known: true,
                tmpfs_files: vec![f],
                ..Unowned::default()
            },
            0,
        );
        assert!(!out.contains('\x1b'), "{out:?}");
        assert!(out.contains("(holders hidden)"));
        assert!(!out.contains("nobody\n"));
    }
}
