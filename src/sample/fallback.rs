//! A portable sampler on the `sysinfo` crate, for OSes without a native one.
//!
//! It gives the common core of a [`Snapshot`] and nothing it would have to
//! make up:
//!
//! - **system memory**: total, available and free as sysinfo reports them;
//!   `used` = total − available. No breakdown (app, wired, …): `None`.
//! - **swap**: total and used; no swap-in/out counters.
//! - **pressure**: no kernel signal is available through sysinfo, so the
//!   level is derived from the share of memory available: `warn` below 10 %,
//!   `critical` below 5 %. No PSI, no `free_percent`.
//! - **processes**: pid, start time (sysinfo's seconds since the epoch,
//!   used as [`ProcessId::start`] and for `started_at`), ppid, uid and user
//!   name, name, executable, argv, and the resident set size. sysinfo has no
//!   anonymous-memory or footprint figure, so `footprint` is the resident
//!   size too (it counts shared file pages and misses swapped-out memory)
//!   and is marked [`Detail::Estimated`]; `swapped` is `None`. Kernel
//!   threads, where sysinfo recognises them (Linux), are skipped and
//!   counted.
//!
//! Each tick refreshes memory figures only. Name, executable, argv, uid and
//! the workload classification are read once per process identity (pid and
//! start time) and cached; a process seen within its first seconds is read
//! again on the next tick, in case it was caught between `fork` and `exec`.
//! User names come from sysinfo's account list through
//! [`UserNames`]: a uid not seen before refreshes the list at most once a
//! sample; a uid the list does not know stays nameless (`user: None`)
//! without further refreshes.

use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use sysinfo::{
    MemoryRefreshKind, Pid, Process, ProcessRefreshKind, ProcessesToUpdate, System, ThreadKind,
    Uid, UpdateKind,
};

use super::user_names::{SysinfoUsers, UserNames};
use super::{SampleError, Sampler};
use crate::model::{
    Argv, CollectorErrors, Detail, Pressure, PressureLevel, ProcessId, ProcessSample, SharedStr,
    Snapshot, Swap, SystemMemory, Timestamp,
};
use crate::workload::{ProcessFacts, classify};

/// Below this share of memory available (in percent) the level is `warn`.
pub const WARN_AVAILABLE_PERCENT: u64 = 10;
/// Below this share of memory available (in percent) the level is `critical`.
pub const CRITICAL_AVAILABLE_PERCENT: u64 = 5;

/// A process whose argv was read less than this many seconds after it
/// started is read again: it may not have called `exec` yet.
const SETTLE_SECS: u64 = 2;

/// Samples through `sysinfo`. See the module documentation for what it fills.
pub struct SysinfoSampler {
    /// `None` until sysinfo initialises (it is retried every sample).
    system: Option<System>,
    users: UserNames<SysinfoUsers<Uid>>,
    /// What was read once per process, by pid.
    known: HashMap<u32, Known>,
}

/// The slow-changing facts of one process, read once per identity.
struct Known {
    start: u64,
    /// Read when the process was at least [`SETTLE_SECS`] old.
    settled: bool,
    name: SharedStr,
    exe: Option<SharedStr>,
    argv: Argv,
    uid: Option<Uid>,
    workload: crate::model::Workload,
}

impl SysinfoSampler {
    pub fn new() -> Self {
        Self {
            system: System::new().ok(),
            users: UserNames::new(SysinfoUsers::new()),
            known: HashMap::new(),
        }
    }
}

impl Default for SysinfoSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl Sampler for SysinfoSampler {
    fn name(&self) -> &'static str {
        "sysinfo"
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        let began = Instant::now();
        let taken_at = Timestamp::now();
        let system = match self.system.take() {
            Some(system) => system,
            None => System::new().map_err(|e| SampleError::Parse {
                path: "sysinfo".into(),
                reason: format!("sysinfo could not start: {e}"),
            })?,
        };
        let system = self.system.insert(system);

        system.refresh_memory_specifics(MemoryRefreshKind::everything());
        let total = system.total_memory();
        if total == 0 {
            return Err(SampleError::Parse {
                path: "sysinfo".into(),
                reason: "sysinfo could not read memory: it reports 0 bytes in total".into(),
            });
        }
        let available = system.available_memory().min(total);
        let memory = SystemMemory {
            total,
            available,
            used: total - available,
            free: system.free_memory().min(total),
            ..SystemMemory::default()
        };
        let swap = Swap {
            total: system.total_swap(),
            used: system.used_swap(),
            swapped_in_bytes: None,
            swapped_out_bytes: None,
        };
        let pressure = Pressure {
            level: level_from_available(available, total),
            psi: None,
            free_percent: None,
        };

        // Memory of every process; identity facts only for new processes.
        system.refresh_processes_specifics(
            ProcessesToUpdate::All,
            true,
            ProcessRefreshKind::nothing().with_memory().without_tasks(),
        );
        let unread: Vec<Pid> = system
            .processes()
            .values()
            .filter(|p| {
                p.thread_kind().is_none()
                    && self
                        .known
                        .get(&p.pid().as_u32())
                        .is_none_or(|k| k.start != p.start_time() || !k.settled)
            })
            .map(Process::pid)
            .collect();
        let mut errors = CollectorErrors::default();
        if !unread.is_empty() {
            system.refresh_processes_specifics(
                ProcessesToUpdate::Some(&unread),
                true,
                ProcessRefreshKind::nothing()
                    .without_tasks()
                    .with_cmd(UpdateKind::Always)
                    .with_exe(UpdateKind::Always)
                    .with_user(UpdateKind::Always),
            );
            // Exited between the two refreshes (sysinfo drops them).
            errors.vanished = unread
                .iter()
                .filter(|pid| system.process(**pid).is_none())
                .count() as u64;
        }

        let now_secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut known = HashMap::with_capacity(self.known.len());
        let mut found: Vec<(u32, u64, u32, u64)> = Vec::new();
        for process in system.processes().values() {
            match process.thread_kind() {
                Some(ThreadKind::Kernel) => {
                    errors.kernel_threads += 1;
                    continue;
                }
                Some(ThreadKind::Userland) => continue,
                None => {}
            }
            let pid = process.pid().as_u32();
            let start = process.start_time();
            let facts = match self.known.remove(&pid) {
                Some(k) if k.start == start && k.settled => k,
                _ => read_known(process, now_secs),
            };
            known.insert(pid, facts);
            let ppid = process.parent().map_or(0, Pid::as_u32);
            found.push((pid, start, ppid, process.memory()));
        }
        self.known = known;

        found.sort_unstable_by_key(|&(pid, ..)| pid);
        self.users.start_sample();
        let mut processes = Vec::with_capacity(found.len());
        for (pid, start, ppid, resident) in found {
            let Some(k) = self.known.get(&pid) else {
                continue;
            };
            let (uid, name, exe, argv, workload) = (
                k.uid.clone(),
                k.name.clone(),
                k.exe.clone(),
                k.argv.clone(),
                k.workload.clone(),
            );
            let user = match &uid {
                Some(uid) => self.users.name(uid),
                None => None,
            };
            processes.push(ProcessSample {
                id: ProcessId { pid, start },
                ppid,
                uid: uid.as_ref().and_then(uid_number),
                user,
                name,
                exe,
                argv,
                started_at: (start > 0).then(|| Timestamp(start.saturating_mul(1000))),
                footprint: resident,
                peak_footprint: None,
                resident,
                swapped: None,
                gpu_memory: None,
                gpu_client: false,
                detail: Detail::Estimated,
                basis: crate::model::Basis::Rss,
                held_open: 0,
                job: None,
                forked: false,
                cgroup: None,
                workload,
                labels: None,
            });
        }

        Ok(Snapshot {
            ceilings: Vec::new(),
            taken_at,
            source: self.name().to_owned(),
            replayed: false,
            sample_micros: u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX),
            system: memory,
            swap,
            pressure,
            gpus: Vec::new(),
            processes,
            jobs: Vec::new(),
            unowned: Default::default(),
            errors,
            collectors: Vec::new(),
            notes: Vec::new(),
        })
    }
}

/// Read a process's identity facts and classify it.
fn read_known(process: &Process, now_secs: u64) -> Known {
    let start = process.start_time();
    let name = process.name().to_string_lossy().into_owned();
    let exe = process.exe().map(|p| p.to_string_lossy().into_owned());
    let argv: Vec<String> = process
        .cmd()
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let workload = classify(&ProcessFacts {
        name: &name,
        exe: exe.as_deref(),
        argv: &argv,
        libraries: &[],
    });
    Known {
        start,
        settled: now_secs.saturating_sub(start) >= SETTLE_SECS,
        name: name.into(),
        exe: exe.map(SharedStr::from),
        argv: argv.into(),
        uid: process.user_id().cloned(),
        workload,
    }
}

/// Pressure level from the share of memory available: `warn` below
/// [`WARN_AVAILABLE_PERCENT`], `critical` below [`CRITICAL_AVAILABLE_PERCENT`].
pub fn level_from_available(available: u64, total: u64) -> PressureLevel {
    let available = u128::from(available) * 100;
    let total = u128::from(total);
    if available < total * u128::from(CRITICAL_AVAILABLE_PERCENT) {
        PressureLevel::Critical
    } else if available < total * u128::from(WARN_AVAILABLE_PERCENT) {
        PressureLevel::Warn
    } else {
        PressureLevel::Normal
    }
}

/// The numeric uid, where the platform has one (not on Windows, whose user
/// ids are SIDs).
#[cfg(not(windows))]
fn uid_number(uid: &Uid) -> Option<u32> {
    Some(**uid)
}

#[cfg(windows)]
fn uid_number(_uid: &Uid) -> Option<u32> {
    None
}

/// The `headroom doctor` check on an OS without a native sampler: what
/// the sysinfo fallback cannot provide.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn doctor_check() -> crate::model::Check {
    crate::model::Check::warn(
        "sampler",
        format!(
            "no native sampler for {}: the sysinfo fallback has no pressure signal (the level is derived from available memory), no memory breakdown, no swap counters and resident size as footprint",
            std::env::consts::OS
        ),
        "Linux and macOS are supported natively",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn plenty_available_is_normal() {
        assert_eq!(
            level_from_available(8 * GIB, 16 * GIB),
            PressureLevel::Normal
        );
    }

    #[test]
    fn exactly_ten_percent_is_still_normal() {
        assert_eq!(level_from_available(10, 100), PressureLevel::Normal);
    }

    #[test]
    fn below_ten_percent_is_warn() {
        assert_eq!(level_from_available(9, 100), PressureLevel::Warn);
        assert_eq!(level_from_available(5, 100), PressureLevel::Warn);
    }

    #[test]
    fn below_five_percent_is_critical() {
        assert_eq!(level_from_available(4, 100), PressureLevel::Critical);
        assert_eq!(level_from_available(0, 64 * GIB), PressureLevel::Critical);
    }

    #[test]
    fn huge_totals_do_not_overflow() {
        assert_eq!(
            level_from_available(u64::MAX, u64::MAX),
            PressureLevel::Normal
        );
    }
}
