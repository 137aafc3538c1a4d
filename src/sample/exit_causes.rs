//! What the OS records about how a process ended, read cheaply enough to
//! poll after every sample: kills for want of memory, and exit statuses.
//!
//! - Linux: the OOM killer's lines in the kernel log, `/dev/kmsg`
//!   ([`super::linux::kmsg`]). Needs root or `CAP_SYSLOG` where
//!   `kernel.dmesg_restrict = 1`; without it, OOM kills go unseen and the
//!   daemon says so once at start. And the exit status a zombie keeps in
//!   `/proc/[pid]/stat` until its parent reaps it ([`super::linux::zombie`]),
//!   read only for the processes the caller suspects (listed, but with no
//!   memory left).
//! - macOS: the exit status and end of a zombie ([`super::macos::exits`]:
//!   `kinfo_proc`'s `p_xstat`, `proc_pid_rusage`'s `ri_proc_exit_abstime`),
//!   read only for the suspects. No kill record: jetsam (macOS's memory
//!   killer) tells no other process why one ended. The kill is written only
//!   to the unified log, which takes seconds to query (`log show --last 5m
//!   --predicate 'eventMessage CONTAINS "memorystatus"'` finds it
//!   afterwards) — too slow for every exit; a jetsam kill shows as SIGKILL
//!   nobody owns up to.
//! - Elsewhere: nothing.
//!
//! [`ExitCauses`] is the one platform-neutral handle: [`exit_causes`] opens
//! this OS's source, [`ExitCauses::poll`] returns the kills recorded since
//! the last poll and the exit statuses of the suspects, and
//! [`ExitCauses::silence`] says what the absence of a record means here, for
//! a post-mortem that found none.

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
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Code(code) => write!(f, "exited with status {code}"),
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

/// What one poll learned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Memory kills recorded since the last poll.
    pub kills: Vec<MemoryKill>,
    /// Suspects found dead, awaiting their parent.
    pub ended: Vec<Ended>,
}

/// This OS's record of how processes end; see the module documentation.
pub struct ExitCauses {
    #[cfg(target_os = "linux")]
    kmsg: Option<Kmsg>,
    silence: String,
}

/// The kernel log reader and what it has logged about itself.
#[cfg(target_os = "linux")]
struct Kmsg {
    reader: super::linux::kmsg::KmsgReader,
    read_failures: u64,
    read_failure_log: crate::report::rate_limit::RateLimit,
    /// The count of overwritten records last logged.
    lost_logged: u64,
    lost_log: crate::report::rate_limit::RateLimit,
}

#[cfg(target_os = "linux")]
impl Kmsg {
    fn poll(&mut self, now: Timestamp) -> Vec<MemoryKill> {
        let kills = match self.reader.read_new(now) {
            Ok(kills) => kills,
            Err(e) => {
                self.read_failures += 1;
                let n = self.read_failures;
                if self
                    .read_failure_log
                    .due(std::time::Instant::now())
                    .is_some()
                {
                    tracing::warn!(
                        "reading {} failed ({n} so far): {e}",
                        self.reader.path().display()
                    );
                }
                Vec::new()
            }
        };
        if self.reader.lost > self.lost_logged
            && self.lost_log.due(std::time::Instant::now()).is_some()
        {
            tracing::warn!(
                "{} kernel log records were overwritten before headroom read them; an OOM kill among them would go unseen",
                self.reader.lost - self.lost_logged
            );
            self.lost_logged = self.reader.lost;
        }
        kills
    }
}

/// Open this OS's record of memory kills. The second value says what was
/// opened, or why nothing could be (to be logged once).
pub fn exit_causes() -> (ExitCauses, Result<String, String>) {
    #[cfg(target_os = "linux")]
    {
        let path = std::path::Path::new("/dev/kmsg");
        match super::linux::kmsg::KmsgReader::open(path) {
            Ok(reader) => (
                ExitCauses {
                    kmsg: Some(Kmsg {
                        reader,
                        read_failures: 0,
                        read_failure_log: crate::report::rate_limit::RateLimit::default(),
                        lost_logged: 0,
                        lost_log: crate::report::rate_limit::RateLimit::default(),
                    }),
                    silence: format!("no OOM-killer record for it in {}", path.display()),
                },
                Ok(format!("OOM kills read from {}", path.display())),
            ),
            Err(e) => {
                let why = format!(
                    "{} is not readable ({e}; it needs root or CAP_SYSLOG), so an OOM kill would go unseen",
                    path.display()
                );
                (ExitCauses::none(&why), Err(why))
            }
        }
    }
    #[cfg(target_os = "macos")]
    {
        let why = "macOS tells no other process why one ended: a jetsam kill is written only \
                   to the unified log, too slow to search on every exit (`log show --predicate \
                   'eventMessage CONTAINS \"memorystatus\"'` finds it afterwards)";
        (
            ExitCauses::none(why),
            Ok(format!(
                "exit statuses of ended processes read from kinfo_proc while their parent has \
                 not reaped them; no kill records: {why}"
            )),
        )
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let why = "this OS keeps no record of memory kills that headroom can read";
        (ExitCauses::none(why), Err(why.to_string()))
    }
}

impl ExitCauses {
    /// How the record of kills stands, for `/metrics` and the API: up while
    /// the kernel log is read (Linux), with its failed reads as errors. Not
    /// applicable where the OS keeps no record headroom can read, or the
    /// daemon is not root (the kernel log needs root or CAP_SYSLOG).
    pub fn status(&self) -> crate::model::CollectorStatus {
        #[cfg(target_os = "linux")]
        let (up, errors) = match &self.kmsg {
            Some(k) => (true, k.read_failures),
            None => (false, 0),
        };
        #[cfg(not(target_os = "linux"))]
        let (up, errors) = (false, 0);
        let root = crate::sys::this_process::running_as_root();
        crate::model::CollectorStatus {
            name: "kernel-log".to_owned(),
            up,
            detail: if up {
                "memory kills read from the kernel log".to_owned()
            } else {
                self.silence.clone()
            },
            errors,
            applicable: up || (cfg!(target_os = "linux") && root),
        }
    }

    /// A source that never reports a kill; `why` is what that means, for
    /// post-mortems (tests, replayed traces, OSes without a record).
    pub fn none(why: &str) -> Self {
        Self {
            #[cfg(target_os = "linux")]
            kmsg: None,
            silence: why.to_string(),
        }
    }

    /// What it means that no kill of a process was recorded: the words a
    /// post-mortem with an unknown cause gives as `how`.
    pub fn silence(&self) -> &str {
        &self.silence
    }

    /// The kills recorded since the last poll (`now` stamps them as read),
    /// and which of `suspects` (processes listed with no memory left) are
    /// dead and how they ended. Never blocks; a failing read is counted and
    /// logged, never fatal.
    pub fn poll(&mut self, now: Timestamp, suspects: &[ProcessId]) -> Observed {
        #[cfg(target_os = "linux")]
        {
            let kills = self.kmsg.as_mut().map(|k| k.poll(now)).unwrap_or_default();
            let ended = if suspects.is_empty() {
                Vec::new()
            } else {
                super::linux::zombie::read_ended(std::path::Path::new("/proc"), suspects)
            };
            Observed { kills, ended }
        }
        #[cfg(target_os = "macos")]
        {
            let _ = now;
            let ended = if suspects.is_empty() {
                Vec::new()
            } else {
                super::macos::exits::read_ended(suspects)
            };
            Observed {
                kills: Vec::new(),
                ended,
            }
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        {
            let _ = (now, suspects);
            Observed::default()
        }
    }
}
