//! Memory no process owns, and memory held only through file descriptors:
//! the scan of tmpfs files, memfds and SysV segments of the Linux sampler.
//!
//! - **tmpfs files**: a bounded walk of every tmpfs mount in
//!   `/proc/self/mountinfo`, never following a symlink or crossing a mount.
//!   A file holds its allocated blocks, not its apparent size. Every `stat`
//!   is a `statx` from cached attributes (`ffi_statx.rs`), so a user's FUSE
//!   mount cannot make the scan wait.
//! - **Who maps or holds them**: each process's `/proc/[pid]/fd/*` targets
//!   that are memfds or lie on a tmpfs mount, and its `maps` lines on one
//!   (read only where `RssShmem` or such a descriptor shows, at most
//!   [`MAPS_MAX`] bytes).
//! - **SysV segments** from `/proc/sysvipc/shm`; unattached ones are orphans.
//!
//! A file that processes hold open and nobody maps is theirs
//! ([`crate::model::ProcessSample::held_open`], split evenly among its
//! holders); one nobody maps or holds is [`Unowned::tmpfs_bytes`]; orphan
//! segments are [`Unowned::sysv_orphan_bytes`].
//!
//! The scan runs on full ticks only, within [`STEP_BUDGET`] per tick
//! ([`FIRST_BUDGET`] for the first, so that `headroom snapshot` has the
//! figures), going on at the next full tick when time runs out. It starts at
//! the first tick, when `Shmem` moves by [`MARGIN`] (at most once in
//! [`MIN_SPACING`]), every [`WHILE_UNMAPPED`] while `Shmem` exceeds the
//! processes' `RssShmem`, and every [`AT_LEAST`] otherwise. Between scans
//! the last figures are carried ([`Unowned::known`]), a process's
//! `held_open` while it keeps its identity. Cost: `BENCHMARKS.md`, "Memory
//! no process owns".
//!
//! Other users name the files: paths are shown only through
//! [`shm::display_path`], and the walk stops at [`MAX_ENTRIES`] entries,
//! [`MAX_DEPTH`] levels, [`MAX_MOUNTS`] mounts and [`MAX_FDS`] fds a process.
//! A blocked `maps` read is not cut: the budget is checked between reads.

use std::collections::{HashMap, HashSet};
use std::fs::{self, ReadDir};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::model::{ProcessId, ProcessSample, SysvSegment, TmpfsFile, Unowned};
use crate::os::linux::ffi::statx::statx_cached;
use crate::os::linux::parse::procfs;
use crate::os::linux::parse::shm::{self, Dev, FdTarget, TmpfsMount};
use crate::os::user_names::UserNames;

/// The most time one full tick spends on the scan.
pub const STEP_BUDGET: Duration = Duration::from_millis(20);
/// The first scan's budget: the first tick (the daemon's start, or the
/// one sample of `headroom snapshot`) waits for a complete figure.
pub const FIRST_BUDGET: Duration = Duration::from_secs(1);
/// How far `Shmem` must move, or exceed the processes' `RssShmem`, to call
/// for a scan.
pub const MARGIN: u64 = 64 << 20;
/// The least time between two scans started because `Shmem` moved.
pub const MIN_SPACING: Duration = Duration::from_secs(2);
/// How often to scan while shared memory no process maps exists.
pub const WHILE_UNMAPPED: Duration = Duration::from_secs(10);
/// How often to scan in any case.
pub const AT_LEAST: Duration = Duration::from_secs(60);
/// Entries of tmpfs directories examined per scan, all mounts together.
pub const MAX_ENTRIES: usize = 50_000;
/// How deep the walk descends below a mount point.
pub const MAX_DEPTH: usize = 8;
/// tmpfs mounts walked per scan.
pub const MAX_MOUNTS: usize = 32;
/// File descriptors examined per process.
pub const MAX_FDS: usize = 1024;
/// Bytes of a process's `maps` read.
pub const MAPS_MAX: u64 = 4 << 20;
/// tmpfs files and SysV segments reported, largest first.
pub const TOP: usize = 32;
/// Pids listed per file as mapping or holding it.
pub const PIDS_PER_FILE: usize = 16;

/// A file is known by its device and inode.
type Key = (Dev, u64);

/// The scan's state between ticks: the last complete result and the scan
/// under way.
#[derive(Debug)]
pub(super) struct UnownedScan {
    root: PathBuf,
    budget: Duration,
    last: Option<Found>,
    run: Option<Box<Run>>,
    last_started: Option<(Instant, Option<u64>)>,
    /// Scans completed, for tests and the benchmark.
    completed: u64,
}

/// The result of a complete scan.
#[derive(Debug, Default)]
struct Found {
    unowned: Unowned,
    held: HashMap<u32, (u64, u64)>,
}

/// A file seen open or mapped.
#[derive(Debug, Default)]
struct Ref {
    bytes: u64,
    uid: Option<u32>,
    /// A display path, where the file was found through an fd.
    path: Option<String>,
    mapped_by: Vec<u32>,
    open_by: Vec<u32>,
}

/// A file found by the walk.
#[derive(Debug)]
struct Walked {
    key: Key,
    bytes: u64,
    uid: u32,
    path: Option<String>,
}

#[derive(Debug)]
enum Phase {
    Walk,
    Processes,
    Finish,
}

/// One scan under way.
#[derive(Debug)]
struct Run {
    phase: Phase,
    known: bool,
    tmpfs_devs: HashSet<Dev>,
    mount_points: Vec<Vec<u8>>,
    all_mounts: HashSet<PathBuf>,
    /// Mount roots still to walk, with their device.
    roots: Vec<(PathBuf, Dev)>,
    /// The directories being read: (iterator, depth, device).
    stack: Vec<(ReadDir, usize, Dev)>,
    entries: usize,
    walked: Vec<Walked>,
    /// How many of `walked` still carry their path.
    with_path: usize,
    procs: Vec<ProcessId>,
    next: usize,
    refs: HashMap<Key, Ref>,
    buf: Vec<u8>,
    /// Where the scan stopped short of what it looks at, if it did.
    cut_short: Option<String>,
}

impl UnownedScan {
    /// A scan of the `/proc` tree at `root` (whose `self/mountinfo` names
    /// the tmpfs mounts).
    pub(super) fn new(root: PathBuf) -> Self {
        Self {
            root,
            budget: STEP_BUDGET,
            last: None,
            run: None,
            last_started: None,
            completed: 0,
        }
    }

    pub(super) fn completed(&self) -> u64 {
        self.completed
    }

    /// Whether a new scan is due (see the module doc), given `Shmem` and
    /// the processes' `RssShmem` added up.
    fn due(&self, now: Instant, shmem: Option<u64>, mapped_shmem: u64) -> bool {
        let Some((started, shmem_then)) = self.last_started else {
            return true;
        };
        let since = now.saturating_duration_since(started);
        let moved = match (shmem, shmem_then) {
            (Some(now), Some(then)) => now.abs_diff(then) >= MARGIN,
            _ => false,
        };
        let unmapped = shmem.is_some_and(|s| s.saturating_sub(mapped_shmem) >= MARGIN);
        (moved && since >= MIN_SPACING)
            || (unmapped && since >= WHILE_UNMAPPED)
            || since >= AT_LEAST
    }

    /// One full tick: start a scan if due, work on it for at most the
    /// budget, and give the figures of the last complete scan to the
    /// snapshot's processes (their `held_open`) and to the snapshot.
    pub(super) fn tick(
        &mut self,
        processes: &mut [ProcessSample],
        shmem: Option<u64>,
        mapped_shmem: u64,
        users: &mut UserNames,
    ) -> Unowned {
        let now = Instant::now();
        if self.run.is_none() && self.due(now, shmem, mapped_shmem) {
            self.last_started = Some((now, shmem));
            self.run = Some(Box::new(Run::start(
                &self.root,
                processes.iter().map(|p| p.id).collect(),
            )));
        }
        if let Some(run) = self.run.as_mut() {
            let budget = if self.completed == 0 {
                FIRST_BUDGET
            } else {
                self.budget
            };
            let deadline = now + budget;
            if run.step(&self.root, deadline)
                && let Some(run) = self.run.take()
            {
                self.last = Some(run.finish(&self.root, users));
                self.completed += 1;
            }
        }
        self.carry(processes)
    }

    /// A scan from start to end, whatever the budget and the schedule
    /// (benchmark, tests); a scan under way is dropped. Its result is
    /// carried like a scheduled one's.
    pub(super) fn scan_now(&mut self, processes: &[ProcessId], users: &mut UserNames) {
        self.run = None;
        let mut run = Run::start(&self.root, processes.to_vec());
        while !run.step(&self.root, Instant::now() + Duration::from_secs(3600)) {}
        self.last = Some(run.finish(&self.root, users));
        self.completed += 1;
    }

    /// The last result, applied.
    pub(super) fn carry(&self, processes: &mut [ProcessSample]) -> Unowned {
        let Some(found) = &self.last else {
            return Unowned::default();
        };
        for p in processes.iter_mut() {
            if let Some(&(start, bytes)) = found.held.get(&p.id.pid)
                && start == p.id.start
                && bytes > 0
            {
                p.held_open = bytes;
                p.footprint = p.footprint.saturating_add(bytes);
                p.peak_footprint = p.peak_footprint.map(|peak| peak.max(p.footprint));
            }
        }
        found.unowned.clone()
    }
}

impl Run {
    fn start(root: &Path, procs: Vec<ProcessId>) -> Self {
        let mountinfo = fs::read_to_string(root.join("self/mountinfo")).ok();
        let text = mountinfo.as_deref().unwrap_or("");
        let mounts = shm::parse_mountinfo_tmpfs(text);
        let all_mounts: HashSet<PathBuf> = shm::parse_mount_points(text).into_iter().collect();
        let mut roots: Vec<(PathBuf, Dev)> = Vec::new();
        // One walk per device: a bind mount shows the same files again.
        for TmpfsMount {
            dev,
            root: fs_root,
            mount_point,
        } in &mounts
        {
            if fs_root == Path::new("/") && !roots.iter().any(|(_, d)| d == dev) {
                roots.push((mount_point.clone(), *dev));
            }
        }
        let cut_short = (roots.len() > MAX_MOUNTS).then(|| {
            format!(
                "{} tmpfs mounts, of which it walks {MAX_MOUNTS}",
                roots.len()
            )
        });
        roots.truncate(MAX_MOUNTS);
        roots.reverse(); // popped from the end: mount order
        Self {
            phase: Phase::Walk,
            known: mountinfo.is_some(),
            tmpfs_devs: mounts.iter().map(|m| m.dev).collect(),
            mount_points: mounts
                .iter()
                .map(|m| m.mount_point.as_os_str().as_bytes().to_vec())
                .collect(),
            all_mounts,
            roots,
            stack: Vec::new(),
            entries: 0,
            walked: Vec::new(),
            with_path: 0,
            procs,
            next: 0,
            refs: HashMap::new(),
            buf: Vec::new(),
            cut_short,
        }
    }

    /// Work until done (true) or past the deadline (false).
    fn step(&mut self, root: &Path, deadline: Instant) -> bool {
        loop {
            match self.phase {
                Phase::Walk => {
                    if self.walk_some() {
                        self.phase = Phase::Processes;
                    }
                }
                Phase::Processes => match self.procs.get(self.next).copied() {
                    Some(id) => {
                        self.next += 1;
                        self.scan_process(root, id.pid);
                    }
                    None => self.phase = Phase::Finish,
                },
                Phase::Finish => return true,
            }
            if Instant::now() >= deadline {
                return false;
            }
        }
    }

    /// Examine up to 64 entries of the walk; true when the walk is over.
    fn walk_some(&mut self) -> bool {
        for _ in 0..64 {
            if self.entries >= MAX_ENTRIES {
                if !self.stack.is_empty() || !self.roots.is_empty() {
                    self.note_cut(format!(
                        "the walk of tmpfs stopped at {MAX_ENTRIES} entries"
                    ));
                }
                self.stack.clear();
                self.roots.clear();
                return true;
            }
            let Some((dir, depth, dev)) = self.stack.last_mut() else {
                match self.roots.pop() {
                    Some((point, dev)) => {
                        if let Ok(dir) = fs::read_dir(&point) {
                            self.stack.push((dir, 0, dev));
                        }
                        continue;
                    }
                    None => return true,
                }
            };
            let (depth, dev) = (*depth, *dev);
            let Some(entry) = dir.next() else {
                self.stack.pop();
                continue;
            };
            self.entries += 1;
            let Ok(entry) = entry else { continue };
            // d_type from the directory: no stat, symlinks never followed.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if !(kind.is_dir() || kind.is_file()) || self.all_mounts.contains(&path) {
                continue;
            }
            // From cached attributes, never following a symlink: a file or
            // directory someone mounted FUSE on since mountinfo was read
            // shows another device, and is left alone.
            let Ok(st) = statx_cached(&path, false) else {
                continue;
            };
            if st.dev != dev {
                continue;
            }
            if st.is_dir {
                if depth + 1 >= MAX_DEPTH {
                    self.note_cut(format!(
                        "a tmpfs directory lies deeper than the {MAX_DEPTH} levels it walks"
                    ));
                } else if let Ok(sub) = fs::read_dir(&path) {
                    self.stack.push((sub, depth + 1, dev));
                }
            } else if st.is_file {
                let bytes = st.blocks.saturating_mul(512);
                if bytes == 0 {
                    continue;
                }
                self.walked.push(Walked {
                    key: (dev, st.ino),
                    bytes,
                    uid: st.uid,
                    path: Some(shm::display_path(path.as_os_str().as_bytes())),
                });
                // Paths only for the largest: the others need none.
                self.with_path += 1;
                if self.with_path > 4 * TOP {
                    self.keep_largest_paths();
                }
            }
        }
        false
    }

    /// Drop the paths of all but the [`TOP`] largest files walked so far.
    fn keep_largest_paths(&mut self) {
        let mut sizes: Vec<u64> = self
            .walked
            .iter()
            .filter(|w| w.path.is_some())
            .map(|w| w.bytes)
            .collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let Some(&floor) = sizes.get(TOP - 1) else {
            return;
        };
        self.with_path = TOP;
        let mut kept = 0;
        for w in &mut self.walked {
            if w.path.is_some() {
                if w.bytes > floor || (w.bytes == floor && kept < TOP) {
                    kept += 1;
                } else {
                    w.path = None;
                }
            }
        }
    }

    /// The fds and, where they suggest shared memory, the `maps` of one
    /// process. Unreadable (another user's process when not root, gone):
    /// skipped, as the OS hides it.
    fn scan_process(&mut self, root: &Path, pid: u32) {
        let dir = root.join(pid.to_string());
        let mut open: Vec<Key> = Vec::new();
        if let Ok(fds) = fs::read_dir(dir.join("fd")) {
            for (n, entry) in fds.enumerate() {
                if n >= MAX_FDS {
                    self.note_cut(format!(
                        "a process holds more than the {MAX_FDS} descriptors it examines"
                    ));
                    break;
                }
                let Ok(entry) = entry else { continue };
                let link = entry.path();
                let target = match fs::read_link(&link) {
                    Ok(target) => target,
                    // Denied for one fd, denied for all (ptrace access).
                    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => break,
                    Err(_) => continue,
                };
                let target = target.as_os_str().as_bytes();
                let points: Vec<&[u8]> = self.mount_points.iter().map(Vec::as_slice).collect();
                let Some(kind) = shm::classify_fd_target(target, &points) else {
                    continue;
                };
                // stat through the link: the open file itself, from cached
                // attributes (the path is the holder's to choose: it may
                // lead into a FUSE mount in another mount namespace).
                let Ok(st) = statx_cached(&link, true) else {
                    continue;
                };
                if !st.is_file {
                    continue;
                }
                let key = (st.dev, st.ino);
                if open.contains(&key) {
                    continue;
                }
                open.push(key);
                let r = self.refs.entry(key).or_default();
                r.bytes = st.blocks.saturating_mul(512);
                r.uid = Some(st.uid);
                if r.path.is_none() {
                    r.path = Some(match kind {
                        FdTarget::Memfd(name) => {
                            shm::display_path(&[b"memfd:".as_slice(), name].concat())
                        }
                        FdTarget::Tmpfs(path) => shm::display_path(path),
                    });
                }
            }
        }
        let shares = match fs::read(dir.join("status")) {
            Ok(data) => procfs::parse_status(&data)
                .and_then(|s| s.rss_shmem)
                .is_none_or(|b| b > 0),
            Err(_) => false,
        };
        let mut mapped: Vec<Key> = Vec::new();
        if shares || !open.is_empty() {
            self.buf.clear();
            let read = fs::File::open(dir.join("maps"))
                .and_then(|f| f.take(MAPS_MAX).read_to_end(&mut self.buf));
            if read.is_ok() {
                for m in shm::parse_maps_files(&self.buf) {
                    let ours = m.is_memfd() || self.tmpfs_devs.contains(&m.dev);
                    if ours && !m.is_sysv() && !mapped.contains(&(m.dev, m.inode)) {
                        mapped.push((m.dev, m.inode));
                    }
                }
            }
        }
        for key in &mapped {
            self.refs.entry(*key).or_default().mapped_by.push(pid);
        }
        for key in open.iter().filter(|k| !mapped.contains(k)) {
            self.refs.entry(*key).or_default().open_by.push(pid);
        }
    }

    /// The result: who holds what, what nobody does, the SysV segments.
    /// Record the first way the scan stopped short.
    fn note_cut(&mut self, why: String) {
        if self.cut_short.is_none() {
            self.cut_short = Some(why);
        }
    }

    fn finish(mut self, root: &Path, users: &mut UserNames) -> Found {
        let mut held: HashMap<u32, (u64, u64)> = HashMap::new();
        let starts: HashMap<u32, u64> = self.procs.iter().map(|p| (p.pid, p.start)).collect();
        for r in self.refs.values() {
            if !r.mapped_by.is_empty() || r.open_by.is_empty() {
                continue;
            }
            // Split evenly, the remainder to the first holder.
            let n = r.open_by.len() as u64;
            for (i, pid) in r.open_by.iter().enumerate() {
                let share = r.bytes / n + if i == 0 { r.bytes % n } else { 0 };
                let start = starts.get(pid).copied().unwrap_or(0);
                let slot = held.entry(*pid).or_insert((start, 0));
                slot.1 = slot.1.saturating_add(share);
            }
        }

        let mut unowned = Unowned {
            known: self.known,
            cut_short: self.cut_short.take(),
            ..Unowned::default()
        };
        self.keep_largest_paths();
        let mut files: Vec<TmpfsFile> = Vec::new();
        let mut walked_keys: HashSet<Key> = HashSet::with_capacity(self.walked.len());
        for w in self.walked.drain(..) {
            if !walked_keys.insert(w.key) {
                continue;
            }
            let r = self.refs.get(&w.key);
            if r.is_none_or(|r| r.mapped_by.is_empty() && r.open_by.is_empty()) {
                unowned.tmpfs_bytes = unowned.tmpfs_bytes.saturating_add(w.bytes);
            }
            if let Some(path) = w.path {
                files.push(file(path, w.bytes, Some(w.uid), r, users));
            }
        }
        // Open or mapped files the walk did not find: memfds, deleted files.
        for (key, r) in &self.refs {
            if !walked_keys.contains(key) && !r.open_by.is_empty() && r.bytes > 0 {
                let path = r.path.clone().unwrap_or_default();
                files.push(file(path, r.bytes, r.uid, Some(r), users));
            }
        }
        files.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.path.cmp(&b.path)));
        files.truncate(TOP);
        unowned.tmpfs_files = files;

        if let Ok(text) = fs::read_to_string(root.join("sysvipc/shm")) {
            {
                unowned.known = true;
                let mut segments: Vec<SysvSegment> = shm::parse_sysvipc_shm(&text)
                    .into_iter()
                    .map(|row| SysvSegment {
                        key: row.key,
                        id: row.shmid,
                        bytes: row.bytes(),
                        uid: Some(row.uid),
                        user: users.name(row.uid),
                        attached: row.nattch,
                        creator_pid: row.cpid,
                        last_pid: row.lpid,
                    })
                    .collect();
                unowned.sysv_orphan_bytes = segments
                    .iter()
                    .filter(|s| s.orphan())
                    .fold(0u64, |sum, s| sum.saturating_add(s.bytes));
                segments.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.id.cmp(&b.id)));
                segments.truncate(TOP);
                unowned.sysv_segments = segments;
            }
        }
        Found { unowned, held }
    }
}

/// A reported file.
fn file(
    path: String,
    bytes: u64,
    uid: Option<u32>,
    r: Option<&Ref>,
    users: &mut UserNames,
) -> TmpfsFile {
    let capped = |pids: &[u32]| {
        let mut pids = pids.to_vec();
        pids.sort_unstable();
        pids.truncate(PIDS_PER_FILE);
        pids
    };
    TmpfsFile {
        path,
        bytes,
        uid,
        user: uid.and_then(|uid| users.name(uid)),
        mapped_by: r.map(|r| capped(&r.mapped_by)).unwrap_or_default(),
        open_by: r.map(|r| capped(&r.open_by)).unwrap_or_default(),
        redacted: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan() -> UnownedScan {
        UnownedScan::new(PathBuf::from("/nonexistent-proc"))
    }

    #[test]
    fn the_first_tick_scans() {
        assert!(scan().due(Instant::now(), Some(0), 0));
    }

    #[test]
    fn a_quiet_machine_rescans_only_after_the_longest_interval() {
        let mut s = scan();
        let t0 = Instant::now();
        s.last_started = Some((t0, Some(100 << 20)));
        let shmem = Some(100 << 20);
        // Shmem all mapped: only AT_LEAST calls for a scan.
        assert!(!s.due(t0 + WHILE_UNMAPPED, shmem, 100 << 20));
        assert!(!s.due(t0 + AT_LEAST - Duration::from_millis(1), shmem, 100 << 20));
        assert!(s.due(t0 + AT_LEAST, shmem, 100 << 20));
    }

    #[test]
    fn unmapped_shared_memory_rescans_more_often() {
        let mut s = scan();
        let t0 = Instant::now();
        s.last_started = Some((t0, Some(1 << 30)));
        // 1 GiB of Shmem, 100 MiB mapped: something holds the rest.
        assert!(!s.due(t0 + Duration::from_secs(9), Some(1 << 30), 100 << 20));
        assert!(s.due(t0 + WHILE_UNMAPPED, Some(1 << 30), 100 << 20));
    }

    #[test]
    fn shmem_that_moves_rescans_soon() {
        let mut s = scan();
        let t0 = Instant::now();
        s.last_started = Some((t0, Some(0)));
        // A 5 GiB file appears, mapped by nobody.
        assert!(!s.due(t0 + Duration::from_secs(1), Some(5 << 30), 0));
        assert!(s.due(t0 + MIN_SPACING, Some(5 << 30), 0));
        // And is removed again: the figures must not stay stale either.
        s.last_started = Some((t0, Some(5 << 30)));
        assert!(s.due(t0 + MIN_SPACING, Some(0), 0));
        // A small change does not.
        assert!(!s.due(t0 + MIN_SPACING, Some((5 << 30) - (1 << 20)), 5 << 30));
    }

    #[test]
    fn a_proc_tree_without_the_files_is_not_known() {
        let mut s = scan();
        let mut users = UserNames::passwd_file("/nonexistent-passwd");
        s.scan_now(&[], &mut users);
        let mut procs = Vec::new();
        let u = s.carry(&mut procs);
        assert!(!u.known);
        assert_eq!(u.bytes(), 0);
    }

    #[test]
    fn held_open_applies_only_to_the_same_identity() {
        let mut s = scan();
        let mut found = Found::default();
        found.held.insert(10, (555, 3 << 30));
        found.held.insert(11, (777, 1 << 20));
        s.last = Some(found);
        let mut procs = vec![
            crate::model::build::process(10)
                .start(555)
                .footprint(2 << 20)
                .build(),
            // pid 11 reused by another process.
            crate::model::build::process(11)
                .start(778)
                .footprint(5)
                .build(),
        ];
        s.carry(&mut procs);
        assert_eq!(procs[0].held_open, 3 << 30);
        assert_eq!(procs[0].footprint, (3 << 30) + (2 << 20));
        assert_eq!(procs[1].held_open, 0);
        assert_eq!(procs[1].footprint, 5);
    }
}
