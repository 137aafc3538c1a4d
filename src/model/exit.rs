//! How processes end, as the OS records it: kills for want of memory
//! ([`MemoryKill`], by the [`Killer`]), crashes ([`Crash`]), GPU faults
//! ([`GpuFault`]) and exit statuses ([`Ended`]), gathered per poll in
//! [`Observed`]. The OS layer reads them (`os::<os>::exit_records`);
//! post-mortems use them.

use serde::{Deserialize, Serialize};

use crate::model::{ProcessId, Timestamp};

/// Which part of the OS killed a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Killer {
    /// The Linux kernel's OOM killer (the machine's or a memory cgroup's).
    OomKiller,
    /// macOS's jetsam.
    Jetsam,
}

/// A process the OS killed for want of memory, as the OS recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryKill {
    pub pid: u32,
    /// The command name as the OS wrote it (at most 15 bytes on Linux).
    pub name: String,
    pub uid: Option<u32>,
    pub killer: Killer,
    /// Where the record was read (`/dev/kmsg`).
    pub source: String,
    /// The OS's own words about the kill.
    pub message: String,
    /// Resident memory of the victim when it was killed, where recorded.
    pub resident_bytes: Option<u64>,
    /// What ran out, in words: `the machine ran out of memory`, `the memory
    /// cgroup /lab reached its limit`.
    pub scope: String,
    /// The memory cgroup whose limit was reached, as the kernel names it
    /// (`oom_memcg=` of its `oom-kill:` line): a cgroup's OOM killer, not
    /// the machine's. `None` for the machine's, and where not recorded.
    pub memcg: Option<String>,
    /// When headroom read the record: the kill happened before.
    pub read_at: Timestamp,
}

/// How a process ended, as `waitpid` would have told its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (`SIGKILL`, `SIGSEGV`, …).
    Signal { name: String, core_dumped: bool },
    /// It exited with a code outside 0–255 (negative, or 256 and over)
    /// that the record could not hold: macOS's `kinfo_proc` clamps the
    /// status `W_EXITCODE(code, 0)` = `code << 8` at 16 bits, so the code
    /// is lost; its parent saw the code's low byte.
    LargeCode,
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Code(code) => write!(f, "exited with status {code}"),
            ExitStatus::LargeCode => write!(
                f,
                "exited with a code outside 0-255, which the record cannot hold (its parent saw the code's low byte)"
            ),
            ExitStatus::Signal { name, core_dumped } => write!(
                f,
                "killed by {name}{}",
                if *core_dumped { " (core dumped)" } else { "" }
            ),
        }
    }
}

/// A suspect found dead, with its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub id: ProcessId,
    pub status: ExitStatus,
    /// Where the status was read (`/proc/4242/stat`).
    pub source: String,
}

/// A process the OS recorded crashing: a fatal fault in its own code (a
/// segfault, an illegal instruction, a general protection fault), or a
/// fatal signal the OS logged as unexpected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Crash {
    /// The process (thread group) id. A record of a thread other than the
    /// main one names the thread's id; the reader turns it into its
    /// process's where it knew the thread (see `thread`).
    pub pid: u32,
    /// The command name as the record gives it (the thread's name for a
    /// crash in another thread).
    pub name: String,
    /// Whose process it was, where the record says.
    pub uid: Option<u32>,
    /// The thread that faulted, where it is not the main thread: its id and
    /// name.
    pub thread: Option<(u32, String)>,
    /// The signal that ended it (`SIGSEGV`), where the record says.
    pub signal: Option<String>,
    /// What happened, in the record's words: `segfault at 0 … error 4`,
    /// `trap invalid opcode`, `EXC_BAD_ACCESS (SIGSEGV)`.
    pub fault: String,
    /// The library or program that held the faulting instruction.
    pub library: Option<String>,
    /// Where the record was read (`/dev/kmsg`, a crash report's path).
    pub source: String,
    /// The record's own words.
    pub message: String,
    /// Further facts from the record, each in words ("translated by
    /// Rosetta: an x86_64 program on Apple silicon").
    pub notes: Vec<String>,
    /// Where the record shows memory was involved after all (a Metal
    /// command buffer that failed for want of GPU memory), in words.
    pub memory: Option<String>,
    /// When headroom read the record: the crash happened before.
    pub read_at: Timestamp,
}

/// A fault the GPU driver recorded in a process's GPU work (an NVIDIA Xid
/// naming its pid). The process may live on, or end after.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuFault {
    pub pid: u32,
    /// The command name as the driver wrote it.
    pub name: String,
    /// The driver's error number (the Xid).
    pub code: u32,
    /// What the number means, from NVIDIA's Xid catalogue, where known.
    pub meaning: Option<&'static str>,
    /// The GPU, as the driver names it (`PCI:0000:3b:00`).
    pub device: String,
    /// Where the record was read (`/dev/kmsg`).
    pub source: String,
    /// The record's own words.
    pub message: String,
    pub read_at: Timestamp,
}

/// What one poll learned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Memory kills recorded since the last poll.
    pub kills: Vec<MemoryKill>,
    /// Crashes recorded since the last poll.
    pub crashes: Vec<Crash>,
    /// GPU faults recorded since the last poll.
    pub gpu_faults: Vec<GpuFault>,
    /// Suspects found dead, awaiting their parent.
    pub ended: Vec<Ended>,
    /// How long after a process ends its record may still arrive from this
    /// OS's sources (a crash report takes seconds to write); a post-mortem
    /// without a record waits this long before it says "unknown".
    pub record_lag: std::time::Duration,
}
