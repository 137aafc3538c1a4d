//! Jobs and memory no process owns: the shapes, no logic.
//!
//! ML work is a tree of processes: a Jupyter kernel and the workers its cell
//! forks, a training script and its loader workers, a launcher and its
//! ranks, a server and its runners. A [`Job`] is a root ML process and its
//! descendants, with its memory counted once (see [`Basis`]). Each member's
//! [`ProcessSample::job`](super::ProcessSample::job) names its root.
//!
//! [`Unowned`] is memory that no process's footprint holds: tmpfs files
//! (`/dev/shm`) nobody maps and SysV segments nobody attaches. A machine-wide
//! rule must not pick a victim for it: signalling a process frees none of it.

use serde::{Deserialize, Serialize};

use super::{ProcessId, SharedStr, WorkloadKind};

/// How a process's footprint counts the memory it shares with others.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Linux: RssAnon + RssShmem + VmSwap. A page shared with another
    /// process (a forked child's copy-on-write pages) is counted whole in
    /// each of them.
    #[default]
    Rss,
    /// Linux: the proportional share, from `smaps_rollup`: Pss_Anon +
    /// Pss_Shmem + SwapPss, kept current between reads by the change in
    /// RssAnon + RssShmem. A page shared by n processes counts 1/n in each,
    /// so the members of a job add up to what the job holds.
    Pss,
    /// macOS: `ri_phys_footprint`, the task's `phys_footprint` ledger
    /// (`fill_task_rusage`, `osfmk/kern/bsd_kern.c`). XNU charges an
    /// anonymous page to every task that maps it, whole: the pmap credits
    /// `internal` and `phys_footprint` for each new mapping of a page whose
    /// VM object is internal, whoever else maps it
    /// (`pmap_enter_options_internal` in `osfmk/arm64/sptm/pmap/pmap.c` and
    /// `osfmk/arm/pmap/pmap.c`, `pmap_enter_options` in
    /// `osfmk/i386/pmap_x86_common.c`; xnu-11417.101.15). `fork` copies map
    /// entries, not page tables (`vm_map_fork` in `osfmk/vm/vm_map.c`;
    /// `pmap_copy` is a no-op), so a forked child starts near zero and is
    /// charged a page when it first touches it: read, it shares the
    /// parent's page and both are charged; written, it gets its own copy
    /// (`vm_fault_page` in `osfmk/vm/vm_fault.c`) and each is charged for
    /// its own. The members' sum is therefore exact for spawned workers and
    /// for pages a forked worker wrote, and counts a page a forked worker
    /// only read once per process that maps it (see the README's "Process
    /// trees and shared memory").
    PhysFootprint,
}

impl Basis {
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Rss => "rss",
            Basis::Pss => "pss",
            Basis::PhysFootprint => "phys_footprint",
        }
    }
}

impl std::fmt::Display for Basis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A root ML process and its descendants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// The root's identity; the job is known by it (`id` in the API is the
    /// root's pid).
    pub root: ProcessId,
    /// Every member's pid: the root first, then its descendants in pid
    /// order.
    pub members: Vec<u32>,
    /// The members' footprints added up. Where every member that shares
    /// memory is counted by its proportional share ([`Basis::Pss`]) shared
    /// pages are counted once.
    pub footprint: u64,
    /// The members' GPU memory added up, where any is known.
    pub gpu_memory: Option<u64>,
    /// How the total counts shared pages: `pss` when every member that
    /// shares anonymous memory with another was read by its proportional
    /// share, else the weakest basis among the members (`rss` counts shared
    /// pages once per process that holds them).
    pub basis: Basis,
    /// The root this job had before it ended, where it did: its workers
    /// outlived it (re-parented, they are no one's descendants now) and
    /// stay one job, its eldest surviving member standing as the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_root: Option<EndedRoot>,
}

/// A job's root that ended while its workers lived on: who it was, and the
/// kind of work it was classified as, which the rules that matched it go on
/// matching its job by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedRoot {
    pub id: ProcessId,
    pub name: SharedStr,
    pub kind: WorkloadKind,
}

impl Job {
    /// The root's pid.
    pub fn pid(&self) -> u32 {
        self.root.pid
    }

    /// How many members are not the root.
    pub fn workers(&self) -> usize {
        self.members.len().saturating_sub(1)
    }

    /// The members a step sent to the job's workers reaches: all but the
    /// root, and the root too where the real root ended (the one standing
    /// for it is a worker like the others).
    pub fn worker_pids(&self) -> impl Iterator<Item = u32> + '_ {
        let root = self.pid();
        let orphaned = self.ended_root.is_some();
        self.members
            .iter()
            .copied()
            .filter(move |pid| orphaned || *pid != root)
    }
}

/// A file in a tmpfs mount (`/dev/shm`, `/run`, a memfd): memory that stays
/// in RAM (or swap) while the file exists, whoever maps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmpfsFile {
    /// Its path (`/dev/shm/blob`); a memfd as `memfd:NAME`.
    pub path: String,
    /// Bytes of memory it holds (allocated blocks, not its apparent size).
    pub bytes: u64,
    pub uid: Option<u32>,
    pub user: Option<super::SharedStr>,
    /// Pids that map it.
    #[serde(default)]
    pub mapped_by: Vec<u32>,
    /// Pids that hold it open without mapping it.
    #[serde(default)]
    pub open_by: Vec<u32>,
    /// Shown to a viewer who may not see all of it: its path (unless
    /// [`TmpfsFile::listed_for_anyone`]) and the pids that map or hold it
    /// (the OS hides other users' file descriptors and mappings) are left
    /// out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

/// What replaces a tmpfs path a viewer could not list.
pub const HIDDEN_PATH: &str = "(hidden path)";

impl TmpfsFile {
    /// Its path is one any local user can list: an entry directly in
    /// `/dev/shm`, a world-writable sticky directory (`ls -ls /dev/shm`
    /// shows every file's name, owner and blocks). Paths in other tmpfs
    /// directories may sit in directories only their owner can read, and a
    /// memfd's name is seen only through its holder's file descriptors.
    pub fn listed_for_anyone(&self) -> bool {
        self.path
            .strip_prefix("/dev/shm/")
            .is_some_and(|name| !name.is_empty() && !name.contains('/'))
    }

    /// Nobody maps it or holds it open (as far as the viewer may see).
    pub fn held_by_nobody(&self) -> bool {
        self.mapped_by.is_empty() && self.open_by.is_empty() && !self.redacted
    }
}

/// A System V shared memory segment (`/proc/sysvipc/shm`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysvSegment {
    pub key: i64,
    pub id: u64,
    /// Resident bytes (`rss`, plus `swap`).
    pub bytes: u64,
    pub uid: Option<u32>,
    pub user: Option<super::SharedStr>,
    /// Processes attached now (`nattch`).
    pub attached: u64,
    /// The creator's pid and the last attacher's or detacher's.
    pub creator_pid: u32,
    pub last_pid: u32,
}

impl SysvSegment {
    /// No process is attached: the segment holds its memory until someone
    /// removes it (`ipcrm -m ID`).
    pub fn orphan(&self) -> bool {
        self.attached == 0
    }
}

/// Memory that no process's footprint holds, where the sampler can read it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unowned {
    /// Whether the figures were read this sample (they are read now and
    /// then, not every tick); `false` where the platform has none.
    #[serde(default)]
    pub known: bool,
    /// Bytes in tmpfs files that no process maps or holds open.
    #[serde(default)]
    pub tmpfs_bytes: u64,
    /// Bytes in SysV segments with no process attached.
    #[serde(default)]
    pub sysv_orphan_bytes: u64,
    /// The largest tmpfs files (mapped or not), largest first, capped.
    #[serde(default)]
    pub tmpfs_files: Vec<TmpfsFile>,
    /// SysV segments, largest first, capped.
    #[serde(default)]
    pub sysv_segments: Vec<SysvSegment>,
    /// Why the last scan is not the whole story, if it stopped short of
    /// what it looks at (entries or levels of a tmpfs walk, a process's
    /// descriptors, mounts): what it did not see is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<String>,
    /// Shared memory (`Shmem`) this sample that neither the processes'
    /// mapped shared pages nor the last scan's figures (what is held open,
    /// what no process owns) account for, bytes: an upper bound, read every
    /// tick, on memory no process owns beyond [`Unowned::bytes`] (a file
    /// made since the scan, deeper than it walks, a descriptor in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unexplained_shmem: Option<u64>,
}

impl Unowned {
    /// Bytes no process can give back by ending: unmapped, unopened tmpfs
    /// files and orphaned SysV segments.
    pub fn bytes(&self) -> u64 {
        self.tmpfs_bytes.saturating_add(self.sysv_orphan_bytes)
    }

    /// The most that no process may own: what the scan found plus the
    /// shared memory nothing accounts for this sample.
    pub fn at_most(&self) -> u64 {
        self.bytes()
            .saturating_add(self.unexplained_shmem.unwrap_or(0))
    }
}
