//! What the OS says about one process before the actuator signals it, the
//! same on every OS: the facts of its `stat` ([`ProcStat`]: parent, start
//! time, kernel thread), who holds a pid now ([`Current`]: start time and
//! name) and a process group's member ([`Member`]). `os::<os>::process`
//! reads them.

/// What each OS's `process::stat` reads of one process: its parent, start
/// time and whether it is a kernel thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub ppid: u32,
    /// The start time in the unit of the platform's sampler (its
    /// `ProcessId::start`): clock ticks since boot on Linux (field 22 of
    /// `/proc/[pid]/stat`), microseconds since the epoch on macOS
    /// (`kinfo_proc`'s `p_start`).
    pub start: u64,
    /// A kernel thread, which has no user space to signal. macOS has none
    /// in the process table; pid 0 is `kernel_task`.
    pub kernel_thread: bool,
}

/// Who holds a pid now: its start time (the identity) and its name (the
/// program it runs, which `exec` changes under the same identity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    /// In the unit of [`ProcStat::start`].
    pub start: u64,
    /// The name the sampler would record for it now.
    pub name: String,
}

/// What the actuator checks about one member of a process group before it
/// signals it: the same facts the policy judged the target by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub pid: u32,
    /// In the unit of [`ProcStat::start`].
    pub start: u64,
    /// The process group it is in now.
    pub pgid: u32,
    /// Real uid; `None` where it cannot be read.
    pub uid: Option<u32>,
    /// The name the sampler would record for it.
    pub name: String,
    /// The executable's path, where it can be read.
    pub exe: Option<String>,
    pub kernel_thread: bool,
}
