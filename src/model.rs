//! The platform-neutral picture of a machine at one instant.
//!
//! Every sampler (Linux `/proc`, macOS Mach, a replayed trace) produces a [`Snapshot`]; everything downstream (history, policy,
//! HTTP, the CLI) reads only these types. All sizes are bytes, converted once
//! by the sampler that read them. A field the platform cannot provide is
//! `None`, never a made-up zero.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

mod action;
pub mod build;
mod ceiling;
mod check;
pub mod collector;
pub mod exit;
pub mod gpu_source;
mod job;
mod labels;
pub mod sampling;
mod shared;
pub mod text_caps;
pub use action::{Action, SignalName};
pub use ceiling::{Ceiling, CgroupVersion};
pub use check::{Check, CheckStatus};
pub use collector::Collector;
pub use job::{Basis, EndedRoot, HIDDEN_PATH, Job, SysvSegment, TmpfsFile, Unowned};
pub use labels::{LabelSet, Labels, Runtime};
pub use shared::{Argv, SharedStr};

/// Wall-clock instant, milliseconds since the Unix epoch.
///
/// Serialized as a plain integer so traces and the JSON API stay compact and
/// language-neutral; displayed as RFC 3339.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The current wall-clock time. Only samplers and the daemon loop call
    /// this; policy code receives time as an argument.
    pub fn now() -> Self {
        Self::from_system_time(SystemTime::now())
    }

    pub fn from_system_time(t: SystemTime) -> Self {
        let ms = t
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Self(ms)
    }

    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    pub fn plus(self, d: Duration) -> Self {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Self(self.0.saturating_add(ms))
    }

    /// The last instant RFC 3339 can write, 9999-12-31T23:59:59.999Z.
    pub const RFC3339_END: Timestamp = Timestamp(253_402_300_799_999);
}

impl fmt::Display for Timestamp {
    /// RFC 3339 (`2026-11-22T14:02:05.123Z`); past the year 9999, which RFC
    /// 3339 cannot write (a journal line from a broken clock, a hostile
    /// `since`), the milliseconds with their meaning.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self > Self::RFC3339_END {
            return write!(f, "{} ms after 1970-01-01T00:00:00Z", self.0);
        }
        let t = UNIX_EPOCH + Duration::from_millis(self.0);
        write!(f, "{}", humantime::format_rfc3339_millis(t))
    }
}

/// Everything one sampling pass saw. The default is an empty pass: no
/// processes, every figure zero or unknown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub taken_at: Timestamp,
    /// Which sampler produced it: `linux`, `macos` or `replay`.
    pub source: String,
    /// Played back from a recorded trace (`headroom run --replay`), not
    /// sampled on this machine: its processes are the trace's, and nothing
    /// is ever done to a process of this machine on its account. The replay
    /// sampler sets it on every snapshot it plays, whatever the trace says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
    /// Wall time the sampling pass took, in microseconds.
    pub sample_micros: u64,
    pub system: SystemMemory,
    pub swap: Swap,
    pub pressure: Pressure,
    #[serde(default)]
    pub gpus: Vec<GpuDevice>,
    pub processes: Vec<ProcessSample>,
    /// Root ML processes and their descendants, memory counted once; every
    /// member's [`ProcessSample::job`] names its root.
    #[serde(default)]
    pub jobs: Vec<Job>,
    /// Memory no process's footprint holds (tmpfs files nobody maps, SysV
    /// segments nobody attaches), read now and then.
    #[serde(default)]
    pub unowned: Unowned,
    /// The memory cgroups with a limit below the machine's memory that are
    /// some sampled process's ceiling, each read once (Linux).
    #[serde(default)]
    pub ceilings: Vec<Ceiling>,
    #[serde(default)]
    pub errors: CollectorErrors,
    /// Health of the optional collectors that ran (e.g. `nvml`): up or not, and why.
    #[serde(default)]
    pub collectors: Vec<CollectorStatus>,
    /// Caveats about this snapshot for people, in words (e.g. GPU pids that
    /// could not be matched to processes from inside a container).
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Snapshot {
    /// The process with this pid, if it was sampled.
    pub fn process(&self, pid: u32) -> Option<&ProcessSample> {
        self.processes.iter().find(|p| p.id.pid == pid)
    }

    /// The job whose root has this pid.
    pub fn job(&self, root: u32) -> Option<&Job> {
        self.jobs.iter().find(|j| j.root.pid == root)
    }

    /// The job `p` belongs to, as its root or as a worker.
    pub fn job_of(&self, p: &ProcessSample) -> Option<&Job> {
        p.job.and_then(|root| self.job(root))
    }

    /// The ceiling of `p`: the tightest limited memory cgroup it is in,
    /// `None` where none is known.
    pub fn ceiling_of(&self, p: &ProcessSample) -> Option<&Ceiling> {
        let path = p.cgroup.as_ref()?;
        // A sampler's snapshot shares one string per cgroup between the
        // process and its ceiling: pointers first, text only for a
        // snapshot read back (a trace, the API).
        self.ceilings
            .iter()
            .find(|c| c.cgroups.iter().any(|g| SharedStr::ptr_eq(g, path)))
            .or_else(|| self.ceilings.iter().find(|c| c.covers(path)))
    }

    /// The ceiling of `p` where it is tighter than the machine: its room
    /// is less than the machine's available memory.
    pub fn binding_ceiling(&self, p: &ProcessSample) -> Option<&Ceiling> {
        self.ceiling_of(p)
            .filter(|c| c.room() < self.system.available)
    }

    /// What `p` can still get: the machine's available memory, or its
    /// ceiling's room where that is smaller.
    pub fn available_to(&self, p: &ProcessSample) -> u64 {
        match self.ceiling_of(p) {
            Some(c) => c.room().min(self.system.available),
            None => self.system.available,
        }
    }

    /// Processes ordered by footprint, largest first.
    pub fn by_footprint(&self) -> Vec<&ProcessSample> {
        let mut v: Vec<&ProcessSample> = self.processes.iter().collect();
        v.sort_by(|a, b| b.footprint.cmp(&a.footprint).then(a.id.pid.cmp(&b.id.pid)));
        v
    }
}

/// System-wide memory, in bytes.
///
/// `total`, `available`, `used` and `free` exist everywhere; the breakdown
/// fields depend on the OS (Linux has no "wired", macOS has no "shmem").
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemMemory {
    pub total: u64,
    /// Memory that can be handed out without swapping (Linux MemAvailable;
    /// macOS active + inactive + free + speculative pages).
    pub available: u64,
    /// In use by processes and the kernel: total − available on Linux,
    /// app + wired + compressed on macOS.
    pub used: u64,
    /// Entirely unused pages.
    pub free: u64,
    /// Anonymous memory (Linux AnonPages; macOS app memory = internal − purgeable).
    pub app: Option<u64>,
    /// Memory the kernel cannot page out (macOS wired; Linux Unevictable).
    pub wired: Option<u64>,
    /// Compressed memory (macOS compressor; Linux zswap pool).
    pub compressed: Option<u64>,
    /// File-backed cache (Linux Cached + Buffers − Shmem; macOS external + purgeable).
    pub cached: Option<u64>,
    /// Shared memory and tmpfs (Linux Shmem).
    pub shmem: Option<u64>,
    /// Ceiling on memory the GPU may keep wired, where the administrator set
    /// one (macOS `iogpu.wired_limit_mb`); `None` where unset or not
    /// applicable. Wired memory cannot be compressed or swapped, so this is
    /// how much of RAM the GPU can take away for good.
    #[serde(default)]
    pub gpu_wired_limit: Option<u64>,
}

/// Swap space and paging activity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Swap {
    pub total: u64,
    pub used: u64,
    /// Bytes swapped in since boot (a counter), where the OS reports it.
    pub swapped_in_bytes: Option<u64>,
    /// Bytes swapped out since boot (a counter), where the OS reports it.
    pub swapped_out_bytes: Option<u64>,
}

/// How hard the kernel is working to find memory.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum PressureLevel {
    #[default]
    Normal,
    Warn,
    Critical,
}

impl PressureLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            PressureLevel::Normal => "normal",
            PressureLevel::Warn => "warn",
            PressureLevel::Critical => "critical",
        }
    }
}

impl fmt::Display for PressureLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Memory pressure: a level everywhere, and the raw signals behind it where
/// the OS has them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pressure {
    pub level: PressureLevel,
    /// Linux pressure stall information for memory.
    pub psi: Option<Psi>,
    /// macOS `kern.memorystatus_level`: percentage of memory the kernel
    /// considers free (0–100).
    pub free_percent: Option<u8>,
}

/// `/proc/pressure/memory`: the share of time some (or all) tasks stalled on memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Psi {
    pub some: PsiLine,
    /// Absent on kernels that only report `some`.
    pub full: Option<PsiLine>,
}

/// One PSI line. Averages are percentages (0–100) over 10 s, 60 s and 300 s;
/// `total_micros` is the cumulative stall time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total_micros: u64,
}

/// One GPU, with what is known of its memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuDevice {
    pub index: u32,
    pub name: String,
    pub uuid: Option<String>,
    pub memory_total: Option<u64>,
    pub memory_used: Option<u64>,
    /// Busy share, 0–1.
    pub utilization: Option<f64>,
    /// Memory the driver sets aside for itself, in neither used nor free
    /// (NVML's `reserved`).
    #[serde(default)]
    pub memory_reserved: Option<u64>,
    /// The processes holding memory on this device, as the driver lists them.
    #[serde(default)]
    pub processes: Vec<GpuProcess>,
    /// The newest CUDA version the driver supports, `major.minor` (`12.2`;
    /// NVML's `nvmlSystemGetCudaDriverVersion`), where the driver says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<String>,
}

/// One process on a GPU, as the driver lists it: compute and graphics
/// contexts merged, one entry per pid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// The pid as the driver reports it: NVML gives pids of the host's pid
    /// namespace, which a container cannot see.
    pub pid: u32,
    /// Device memory held, bytes; `None` where the driver does not say (MIG,
    /// some drivers), which is not the same as zero.
    pub memory: Option<u64>,
    /// Has a compute (CUDA) context on the device.
    pub compute: bool,
    /// Has a graphics context on the device.
    pub graphics: bool,
    /// Matched to a process of [`Snapshot::processes`] by pid.
    pub joined: bool,
}

/// Whether an optional collector (such as NVML for NVIDIA GPUs) works on
/// this machine, for metrics (`collector_up`), `headroom doctor` and people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectorStatus {
    /// Short name, e.g. `nvml`.
    pub name: String,
    /// True when the collector delivered figures this pass.
    pub up: bool,
    /// What it found when up (`1 GPU: NVIDIA H100 80GB HBM3, driver 560.35.03`),
    /// why not when down (`libnvidia-ml.so.1 not found (no NVIDIA driver)`).
    pub detail: String,
    /// Failed reads since the collector was created (whole reads and
    /// single queries alike).
    #[serde(default)]
    pub errors: u64,
    /// False when this machine lacks what the collector reads (no NVIDIA
    /// driver, no kernel log for a daemon that is not root, no pressure
    /// notification on this OS): down by nature, not failing, so an alert
    /// on collectors that are down leaves it out.
    #[serde(default = "applicable_by_default")]
    pub applicable: bool,
}

fn applicable_by_default() -> bool {
    true
}

/// A process identity: the pid alone is reused by the kernel, the pair is not.
///
/// `start` is the platform's own start-time value (clock ticks since boot on
/// Linux, microseconds since the epoch on macOS); it is compared, never
/// interpreted, except by the platform module that produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProcessId {
    pub pid: u32,
    pub start: u64,
}

impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.pid, self.start)
    }
}

/// How exact a process's footprint figure is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Detail {
    /// Read in full this pass (Linux: `status`; macOS: `proc_pid_rusage`).
    #[default]
    Exact,
    /// Derived from the cheap per-tick read (Linux `statm`: resident − shared),
    /// with the swap figure of the last full read.
    Estimated,
}

/// One process as sampled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessSample {
    #[serde(flatten)]
    pub id: ProcessId,
    pub ppid: u32,
    pub uid: Option<u32>,
    /// The owner's name, the command name, the executable and the command
    /// line are shared with the sampler's record of the process and with
    /// earlier snapshots (see [`SharedStr`]): a tick copies no text.
    pub user: Option<SharedStr>,
    pub name: SharedStr,
    pub exe: Option<SharedStr>,
    #[serde(default)]
    pub argv: Argv,
    pub started_at: Option<Timestamp>,
    /// Memory this process is responsible for: on Linux RssAnon + RssShmem +
    /// VmSwap; on macOS `ri_phys_footprint` (includes Metal buffers).
    pub footprint: u64,
    /// Largest footprint seen over the process's life, where the OS tracks it.
    pub peak_footprint: Option<u64>,
    pub resident: u64,
    pub swapped: Option<u64>,
    /// GPU memory held, summed over devices, where known. Where some device
    /// does not report this process's figure (MIG, some drivers) the sum
    /// leaves that part out (a lower bound) and the workload evidence names
    /// the device; `None` when no figure is known or the process holds none.
    pub gpu_memory: Option<u64>,
    /// The process holds a connection to a GPU driver (macOS: an
    /// `AGXDeviceUserClient` it created), so part of its footprint may be
    /// GPU buffers.
    #[serde(default)]
    pub gpu_client: bool,
    #[serde(default)]
    pub detail: Detail,
    /// How `footprint` counts memory shared with other processes.
    #[serde(default)]
    pub basis: Basis,
    /// Bytes of tmpfs files and memfds this process holds open without
    /// mapping them (Linux), included in `footprint`: only it can free them.
    #[serde(default)]
    pub held_open: u64,
    /// The pid of the root of the job this process belongs to (its own pid
    /// for a root); `None` outside every job.
    #[serde(default)]
    pub job: Option<u32>,
    /// Forked from its parent and not exec'd since (Linux `PF_FORKNOEXEC`):
    /// a copy of its parent's program, not a program of its own.
    #[serde(default)]
    pub forked: bool,
    /// The process's path in the memory-cgroup hierarchy (`/proc/[pid]/cgroup`:
    /// the v1 `memory` controller's line where v1 memory is mounted, else
    /// the v2 `0::` line), e.g. `/kubepods/burstable/pod…/…` or
    /// `/slurm/uid_1000/job_42/step_0`; relative to the cgroup filesystem's
    /// root as the daemon's cgroup namespace sees it. At most
    /// [`crate::os::linux::parse::procfs::CGROUP_PATH_MAX`] bytes (a longer path is not
    /// kept). Any user may read it, like the file it comes from; names in it
    /// can be another user's choice, so it is shown through [`printable`].
    /// `None` where unknown (macOS, a kernel without cgroups).
    #[serde(default)]
    pub cgroup: Option<SharedStr>,
    pub workload: Workload,
    /// Who the process belongs to, as its cgroup says: a pod and its
    /// container, a container, a Slurm job, a systemd unit (see
    /// [`LabelSet`]); shared by every process of one cgroup. `None` where
    /// nothing is known (no cgroup read, labels turned off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
    /// The `site-packages` (or `dist-packages`) directories of the
    /// framework libraries the process maps, where the sampler lists them
    /// (Linux's library scans): where its interpreter loads its packages
    /// from, for `crate::sample::environment`. Paths under the owner's home,
    /// kept inside the sampler chain: never serialised.
    #[serde(skip)]
    pub site_packages: Vec<SharedStr>,
}

impl ProcessSample {
    /// A process known by its identity, parent and name only: no owner, no
    /// command line, no memory figures, no workload. Samplers fill in what
    /// they read; examples and replayed traces start from here.
    pub fn new(id: ProcessId, ppid: u32, name: impl Into<SharedStr>) -> Self {
        Self {
            id,
            ppid,
            uid: None,
            user: None,
            name: name.into(),
            exe: None,
            argv: Argv::default(),
            started_at: None,
            footprint: 0,
            peak_footprint: None,
            resident: 0,
            swapped: None,
            gpu_memory: None,
            gpu_client: false,
            detail: Detail::Exact,
            basis: Basis::Rss,
            held_open: 0,
            job: None,
            forked: false,
            cgroup: None,
            workload: Workload::default(),
            labels: None,
            site_packages: Vec::new(),
        }
    }
}

/// The most bytes of a process's command name (`comm`) on Linux: the kernel
/// cuts it to `TASK_COMM_LEN` − 1 (include/linux/sched.h), so a longer
/// program name is seen cut to this length.
pub const COMM_LEN: usize = 15;

/// The most bytes of one process's command line a sample keeps, all
/// arguments together with their terminating NULs. A user can give a process
/// megabytes of arguments (`ARG_MAX` is 2 MiB on Linux, 1 MiB on macOS);
/// what classification and people need (the interpreter, `-m
/// ipykernel_launcher`, `-f kernel-….json`, the script) comes first.
pub const ARGV_MAX_BYTES: usize = 4096;

/// The most elements a sample keeps of one process's command line,
/// [`ARGV_TRUNCATED`]'s mark included.
pub const ARGV_MAX_ARGS: usize = 256;

/// How the last element of a cut command line begins:
/// `…[argv truncated: 2097152 bytes]`.
pub const ARGV_TRUNCATED: &str = "…[argv truncated: ";

/// Keeps a command line within [`ARGV_MAX_BYTES`] and [`ARGV_MAX_ARGS`],
/// argument by argument; [`ArgvCap::finish`] marks a cut one with a last
/// element `…[argv truncated: N bytes]` (`over 4096 bytes` when the rest
/// was never read). An argument that does not fit whole keeps its part that
/// does, cut at a character boundary.
#[derive(Debug, Clone, Default)]
pub struct ArgvCap {
    kept: Vec<String>,
    /// Bytes kept, NULs counted.
    kept_bytes: usize,
    /// Bytes offered, NULs counted.
    seen_bytes: usize,
    cut: bool,
}

impl ArgvCap {
    pub fn new() -> Self {
        Self::default()
    }

    /// Offer the next argument (without its NUL), lossy UTF-8.
    pub fn push(&mut self, arg: &[u8]) {
        self.seen_bytes = self.seen_bytes.saturating_add(arg.len() + 1);
        if self.cut {
            return;
        }
        if self.kept.len() + 1 >= ARGV_MAX_ARGS {
            // The last element is the mark's.
            self.cut = true;
            return;
        }
        // What is left, less this argument's NUL: an empty argument needs
        // one byte too.
        let Some(room) = ARGV_MAX_BYTES
            .saturating_sub(self.kept_bytes)
            .checked_sub(1)
        else {
            self.cut = true;
            return;
        };
        // The cap is on the text kept: a byte that is not UTF-8 becomes a
        // three-byte replacement character, so measure after converting
        // (and convert no more than could fit).
        let offered = &arg[..arg.len().min(room)];
        let text = String::from_utf8_lossy(offered);
        if arg.len() <= room && text.len() <= room {
            self.kept_bytes += text.len() + 1;
            self.kept.push(text.into_owned());
            return;
        }
        self.cut = true;
        // A replacement character at the end may stand for a byte cut
        // inside a character: drop it when the argument went on.
        let text: &str = if arg.len() > room {
            text.strip_suffix('\u{fffd}').unwrap_or(&text)
        } else {
            &text
        };
        let mut end = text.len().min(room);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let text = &text[..end];
        if !text.is_empty() {
            self.kept_bytes += text.len() + 1;
            self.kept.push(text.to_string());
        }
    }

    /// The kept arguments, with the mark if any were cut. `unread` says the
    /// command line is longer than [`ARGV_MAX_BYTES`] and only its start was
    /// offered (its length is not known).
    pub fn finish(mut self, unread: bool) -> Vec<String> {
        if unread {
            self.kept
                .push(format!("{ARGV_TRUNCATED}over {ARGV_MAX_BYTES} bytes]"));
        } else if self.cut {
            self.kept
                .push(format!("{ARGV_TRUNCATED}{} bytes]", self.seen_bytes));
        }
        self.kept
    }
}

/// What kind of program a process is, for rules and for people.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// A Jupyter kernel (`ipykernel_launcher`).
    Jupyter,
    Pytorch,
    Tensorflow,
    Jax,
    Mlx,
    /// llama.cpp, Ollama or vLLM serving a model.
    LlmServer,
    /// Python with no ML framework recognised.
    Python,
    #[default]
    Other,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 8] = [
        WorkloadKind::Jupyter,
        WorkloadKind::Pytorch,
        WorkloadKind::Tensorflow,
        WorkloadKind::Jax,
        WorkloadKind::Mlx,
        WorkloadKind::LlmServer,
        WorkloadKind::Python,
        WorkloadKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Jupyter => "jupyter",
            WorkloadKind::Pytorch => "pytorch",
            WorkloadKind::Tensorflow => "tensorflow",
            WorkloadKind::Jax => "jax",
            WorkloadKind::Mlx => "mlx",
            WorkloadKind::LlmServer => "llm-server",
            WorkloadKind::Python => "python",
            WorkloadKind::Other => "other",
        }
    }

    /// A kind that is itself an ML workload (not plain Python, not other).
    pub fn is_ml(self) -> bool {
        !matches!(self, WorkloadKind::Python | WorkloadKind::Other)
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An ML framework seen inside a process (from its argv or mapped libraries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    Pytorch,
    Tensorflow,
    Jax,
    Mlx,
    /// CUDA runtime mapped (`libcudart`), framework unknown.
    Cuda,
}

impl Framework {
    pub fn as_str(self) -> &'static str {
        match self {
            Framework::Pytorch => "pytorch",
            Framework::Tensorflow => "tensorflow",
            Framework::Jax => "jax",
            Framework::Mlx => "mlx",
            Framework::Cuda => "cuda",
        }
    }
}

/// A classification and the evidence for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    pub kind: WorkloadKind,
    /// Frameworks recognised, also inside a Jupyter kernel.
    #[serde(default)]
    pub frameworks: Vec<Framework>,
    /// The Jupyter kernel id, from `-f .../kernel-<id>.json`.
    pub kernel_id: Option<String>,
    /// The notebook this kernel runs, as its Jupyter server names it
    /// (`projects/train.ipynb`, relative to the server's root), from the
    /// server's `/api/sessions`; `None` until known, or where no server
    /// answered for the kernel.
    #[serde(default)]
    pub notebook: Option<String>,
    /// The kernel's spec name (`python3`), from the same answer.
    #[serde(default)]
    pub kernel_name: Option<String>,
    /// Which rules matched, in words, e.g. `argv[2] is ipykernel_launcher`.
    #[serde(default)]
    pub evidence: Vec<String>,
}

impl Workload {
    /// True for Jupyter kernels, framework jobs and model servers, and for
    /// any process in which an ML framework was seen.
    pub fn is_ml(&self) -> bool {
        self.kind.is_ml() || !self.frameworks.is_empty()
    }

    /// True if the process is of `kind`, directly or through a framework
    /// seen in it (a Jupyter kernel running PyTorch is also `pytorch`).
    pub fn is(&self, kind: WorkloadKind) -> bool {
        if self.kind == kind {
            return true;
        }
        let fw = match kind {
            WorkloadKind::Pytorch => Framework::Pytorch,
            WorkloadKind::Tensorflow => Framework::Tensorflow,
            WorkloadKind::Jax => Framework::Jax,
            WorkloadKind::Mlx => Framework::Mlx,
            _ => return false,
        };
        self.frameworks.contains(&fw)
    }
}

/// Per-sample counts of what could not be read. A failing read never fails
/// the sample; it is counted here and reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectorErrors {
    /// Processes that exited between being listed and being read.
    pub vanished: u64,
    /// Entries refused for lack of permission (another user's process).
    pub permission_denied: u64,
    /// Entries that could not be read or parsed for another reason.
    pub unreadable: u64,
    /// Kernel threads skipped (no user memory of their own).
    pub kernel_threads: u64,
}

/// `text` with its control characters escaped (`\n`, `\u{1b}`), and the
/// Unicode direction overrides (U+202A–U+202E, U+2066–U+2069), which reorder
/// what a terminal or editor shows, escaped too: for showing what other
/// users control (process names, command lines, Jupyter files and answers)
/// on a terminal or in a log line, where a name must not start a forged
/// line, send escape sequences to the reader's terminal or hide its text.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_direction_overrides_are_escaped_for_display() {
        assert_eq!(printable("python3"), "python3");
        assert!(matches!(
            printable("python3"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(printable("a\nFAKE\x1b[31m"), "a\\nFAKE\\u{1b}[31m");
        assert_eq!(printable("tab\there"), "tab\\there");
        assert_eq!(printable("ünïcode (ok)"), "ünïcode (ok)");
        // "evil\u{202e}txt.py" shows as "evilyp.txt" without the escape.
        assert_eq!(printable("evil\u{202e}txt.py"), "evil\\u{202e}txt.py");
        assert_eq!(printable("a\u{2066}b"), "a\\u{2066}b");
    }

    #[test]
    fn timestamps_past_rfc3339_display_as_milliseconds() {
        assert_eq!(
            Timestamp(1_700_000_000_123).to_string(),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(
            Timestamp::RFC3339_END.to_string(),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            Timestamp(u64::MAX).to_string(),
            "18446744073709551615 ms after 1970-01-01T00:00:00Z"
        );
    }

    #[test]
    fn timestamp_displays_as_rfc3339() {
        assert_eq!(
            Timestamp(1_700_000_000_123).to_string(),
            "2023-11-14T22:13:20.123Z"
        );
    }

    #[test]
    fn timestamp_since_saturates() {
        assert_eq!(Timestamp(5).since(Timestamp(10)), Duration::ZERO);
        assert_eq!(
            Timestamp(1500).since(Timestamp(500)),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn jupyter_kernel_running_torch_is_pytorch_too() {
        let w = Workload {
            kind: WorkloadKind::Jupyter,
            frameworks: vec![Framework::Pytorch],
            ..Workload::default()
        };
        assert!(w.is(WorkloadKind::Jupyter));
        assert!(w.is(WorkloadKind::Pytorch));
        assert!(!w.is(WorkloadKind::Jax));
        assert!(w.is_ml());
    }

    #[test]
    fn plain_python_is_not_ml() {
        let w = Workload {
            kind: WorkloadKind::Python,
            ..Workload::default()
        };
        assert!(!w.is_ml());
    }

    #[test]
    fn workload_kind_serializes_kebab_case() {
        let s = serde_json::to_string(&WorkloadKind::LlmServer).unwrap();
        assert_eq!(s, "\"llm-server\"");
    }

    fn capped(args: &[&[u8]], unread: bool) -> Vec<String> {
        let mut cap = ArgvCap::new();
        for a in args {
            cap.push(a);
        }
        cap.finish(unread)
    }

    #[test]
    fn a_short_command_line_is_kept_whole_without_a_mark() {
        let argv = capped(&[b"python3", b"-m", b"ipykernel_launcher", b""], false);
        assert_eq!(argv, ["python3", "-m", "ipykernel_launcher", ""]);
    }

    #[test]
    fn a_huge_argument_is_cut_within_the_byte_cap_and_marked() {
        let huge = vec![b'x'; 2 << 20];
        let argv = capped(&[b"python3", b"train.py", &huge], false);
        assert_eq!(&argv[..2], ["python3", "train.py"]);
        let kept: usize = argv[..argv.len() - 1].iter().map(|a| a.len() + 1).sum();
        assert!(kept <= ARGV_MAX_BYTES, "{kept}");
        assert!(argv[2].len() > 4000, "the part that fits is kept");
        let total = 8 + 9 + (2 << 20) + 1;
        assert_eq!(
            argv.last().unwrap(),
            &format!("…[argv truncated: {total} bytes]")
        );
    }

    #[test]
    fn many_arguments_are_cut_at_the_count_cap() {
        let args: Vec<&[u8]> = (0..10_000).map(|_| b"a".as_slice()).collect();
        let argv = capped(&args, false);
        assert_eq!(argv.len(), ARGV_MAX_ARGS);
        assert_eq!(argv.last().unwrap(), "…[argv truncated: 20000 bytes]");
    }

    #[test]
    fn a_cut_falls_on_a_character_boundary() {
        // 'é' is two bytes; the byte cap falls inside one of them.
        let mut arg = vec![b'a'; ARGV_MAX_BYTES - 2];
        arg.extend_from_slice("éé".as_bytes());
        let argv = capped(&[&arg], false);
        assert_eq!(argv[0].len(), ARGV_MAX_BYTES - 2, "the cut 'é' is dropped");
        assert!(argv[0].chars().all(|c| c == 'a'));
        assert!(argv[1].starts_with(ARGV_TRUNCATED));
    }

    #[test]
    fn bytes_that_are_not_utf8_count_as_the_text_they_become() {
        // Each 0xff becomes U+FFFD, three bytes: the cap holds on the text.
        let junk = vec![0xffu8; ARGV_MAX_BYTES - 10];
        let argv = capped(&[b"python3", &junk, b"x"], false);
        let kept: usize = argv[..argv.len() - 1].iter().map(|a| a.len() + 1).sum();
        assert!(kept <= ARGV_MAX_BYTES, "{kept}");
        assert_eq!(argv[0], "python3");
        assert!(argv[1].chars().all(|c| c == '\u{fffd}'));
        assert!(argv[1].len() > ARGV_MAX_BYTES - 20, "what fits is kept");
        let total = 8 + (ARGV_MAX_BYTES - 10 + 1) + 2;
        assert_eq!(
            argv.last().unwrap(),
            &format!("…[argv truncated: {total} bytes]")
        );
    }

    #[test]
    fn empty_arguments_past_a_full_cap_are_cut_too() {
        // Arguments that fill the cap to the byte, then empty ones: each
        // would need a NUL more than the cap holds.
        let full = vec![b'a'; ARGV_MAX_BYTES - 1];
        let argv = capped(&[&full, b"", b"", b""], false);
        let kept: usize = argv[..argv.len() - 1].iter().map(|a| a.len() + 1).sum();
        assert_eq!(kept, ARGV_MAX_BYTES);
        assert_eq!(argv.len(), 2, "the full argument and the mark");
        assert!(argv[1].starts_with(ARGV_TRUNCATED));
    }

    #[test]
    fn a_command_line_read_only_in_part_says_over() {
        let argv = capped(&[b"python3", b"a"], true);
        assert_eq!(argv, ["python3", "a", "…[argv truncated: over 4096 bytes]"]);
    }
}
