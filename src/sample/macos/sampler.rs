//! [`MacSampler`]: one pass over this Mac's memory, pressure, GPUs and
//! processes.
//!
//! # Per tick
//!
//! - System: `host_statistics64` (the only read whose failure fails the
//!   sample, with `hw.memsize` the first time), `vm.swapusage`, the
//!   pressure sysctls and `iogpu.wired_limit_mb`.
//! - GPUs: each `IOAccelerator`'s `PerformanceStatistics` and the pids of
//!   its user clients.
//! - Processes: `proc_listallpids`, then one `proc_pid_rusage` per pid:
//!   footprint, lifetime peak, resident size, and the start time in mach
//!   ticks, which tells a reused pid from a known one without another call.
//!   A pid seen for the first time (or reused) gets the slow reads once:
//!   `proc_pidinfo(PROC_PIDTBSDINFO)` (uid, parent, name, start time),
//!   `proc_pidpath`, `KERN_PROCARGS2` (argv), and the workload
//!   classification. They are cached per identity.
//!
//! # Permissions
//!
//! Without root, `proc_pid_rusage` and `PROC_PIDTBSDINFO` refuse other
//! users' processes (EPERM). Such a process is left out of the snapshot
//! (there is no footprint to report) and counted in
//! [`CollectorErrors::permission_denied`] every tick: a LaunchAgent sees
//! its user's processes, the LaunchDaemon (root) sees all. pid 0
//! (`kernel_task`) is the kernel; its memory is the wired figure, so it is
//! counted as a kernel thread and skipped.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use sysinfo::Users;

use super::ffi_mach::{self, VmInfoReader};
use super::ffi_proc::{self, Rusage};
use super::proc_info::{self, Failure};
use super::{gpu_stats, iokit, pressure, procargs, vm};
use crate::model::{
    Argv, CollectorErrors, Detail, GpuDevice, Pressure, PressureLevel, ProcessId, ProcessSample,
    SharedStr, Snapshot, SystemMemory, Timestamp, Workload,
};
use crate::sample::fallback::{CRITICAL_AVAILABLE_PERCENT, WARN_AVAILABLE_PERCENT};
use crate::sample::{SampleError, Sampler};
use crate::workload::{ProcessFacts, classify};

/// A process whose argv was read less than this long after it started is
/// read again next tick: it may not have called `exec` yet.
const SETTLE: Duration = Duration::from_secs(2);

/// Samples this Mac. See the module documentation.
pub struct MacSampler {
    vm: VmInfoReader,
    page_size: Option<u64>,
    memsize: Option<u64>,
    my_uid: u32,
    pids: Vec<i32>,
    args_buf: Vec<u8>,
    known: HashMap<u32, Known>,
    users: Option<Users>,
    user_names: HashMap<u32, Option<SharedStr>>,
}

/// What was read once for a process identity.
struct Known {
    start_abstime: u64,
    start_micros: u64,
    ppid: u32,
    uid: Option<u32>,
    name: SharedStr,
    exe: Option<SharedStr>,
    argv: Argv,
    workload: Workload,
    /// Read at least [`SETTLE`] after the process started.
    settled: bool,
}

impl Default for MacSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl MacSampler {
    pub fn new() -> Self {
        Self {
            vm: VmInfoReader::default(),
            page_size: None,
            memsize: None,
            my_uid: ffi_proc::my_uid(),
            pids: Vec::new(),
            args_buf: Vec::new(),
            known: HashMap::new(),
            users: None,
            user_names: HashMap::new(),
        }
    }

    fn system(&mut self) -> Result<(SystemMemory, vm::VmStatistics, u64), SampleError> {
        let page_size = match self.page_size {
            Some(p) => p,
            None => {
                let p = ffi_mach::page_size().map_err(|e| SampleError::Read {
                    path: "host_page_size".into(),
                    source: e,
                })?;
                *self.page_size.insert(p)
            }
        };
        let total = match self.memsize {
            Some(m) => m,
            None => {
                let m = ffi_mach::memsize().map_err(|e| SampleError::Read {
                    path: "sysctl hw.memsize".into(),
                    source: e,
                })?;
                *self.memsize.insert(m)
            }
        };
        let stats = self.vm.read().map_err(|e| SampleError::Parse {
            path: "host_statistics64(HOST_VM_INFO64)".into(),
            reason: e.to_string(),
        })?;
        Ok((
            vm::system_memory(&stats, page_size, total),
            stats,
            page_size,
        ))
    }

    fn user_name(&mut self, uid: u32, refreshed: &mut bool) -> Option<SharedStr> {
        if let Some(name) = self.user_names.get(&uid) {
            return name.clone();
        }
        if !*refreshed {
            *refreshed = true;
            match &mut self.users {
                Some(users) => users.refresh(),
                None => self.users = Users::new_with_refreshed_list().ok(),
            }
        }
        let name = self
            .users
            .as_ref()
            .and_then(|users| users.iter().find(|u| **u.id() == uid))
            .map(|u| SharedStr::from(u.name()));
        self.user_names.insert(uid, name.clone());
        name
    }

    /// The slow reads for a new identity. `None` if the process vanished.
    fn first_sight(
        &mut self,
        pid: u32,
        usage: &Rusage,
        errors: &mut CollectorErrors,
    ) -> Option<Known> {
        let ipid = i32::try_from(pid).ok()?;
        let info = match ffi_proc::bsd_info(ipid) {
            Ok(info) => Some(info),
            Err(errno) => match proc_info::libproc_failure(errno) {
                Failure::Vanished => {
                    errors.vanished += 1;
                    return None;
                }
                // rusage worked, so this is unexpected: fall back to the
                // unprivileged kinfo_proc below.
                Failure::Denied | Failure::Unreadable => None,
            },
        };
        let (ppid, uid, name, start_micros) = match info {
            Some(i) => (i.ppid, Some(i.uid), i.name, i.start_micros),
            None => match ffi_proc::kinfo_proc(ipid).map(|b| super::kinfo::parse(&b)) {
                Ok(Ok(Some(k))) => (k.ppid, Some(k.uid), k.comm, k.start_micros),
                Ok(Ok(None)) => {
                    errors.vanished += 1;
                    return None;
                }
                _ => {
                    errors.unreadable += 1;
                    return None;
                }
            },
        };
        let exe = match ffi_proc::pid_path(ipid) {
            Ok(path) => Some(path),
            Err(errno) => {
                if proc_info::libproc_failure(errno) == Failure::Vanished {
                    errors.vanished += 1;
                    return None;
                }
                None
            }
        };
        let argv = match ffi_proc::procargs(ipid, &mut self.args_buf) {
            Ok(n) => match procargs::parse(&self.args_buf[..n]) {
                Ok(args) => args.argv,
                Err(_) => {
                    errors.unreadable += 1;
                    Vec::new()
                }
            },
            Err(errno) => match proc_info::procargs_failure(errno, uid, self.my_uid) {
                Failure::Vanished => {
                    errors.vanished += 1;
                    return None;
                }
                Failure::Denied => {
                    errors.permission_denied += 1;
                    Vec::new()
                }
                Failure::Unreadable => {
                    errors.unreadable += 1;
                    Vec::new()
                }
            },
        };
        let workload = classify(&ProcessFacts {
            name: &name,
            exe: exe.as_deref(),
            argv: &argv,
            libraries: &[],
        });
        let age = Timestamp::now().since(proc_info::started_at(start_micros));
        Some(Known {
            start_abstime: usage.start_abstime,
            start_micros,
            ppid,
            uid,
            name: name.into(),
            exe: exe.map(SharedStr::from),
            argv: argv.into(),
            workload,
            settled: age >= SETTLE,
        })
    }

    fn processes(
        &mut self,
        gpu_clients: &HashSet<u32>,
        errors: &mut CollectorErrors,
    ) -> Vec<ProcessSample> {
        let mut pids = std::mem::take(&mut self.pids);
        if ffi_proc::list_pids(&mut pids).is_err() {
            errors.unreadable += 1;
        }
        let mut seen = HashSet::with_capacity(pids.len());
        let mut out = Vec::with_capacity(pids.len());
        let mut refreshed_users = false;
        for &ipid in &pids {
            let Ok(pid) = u32::try_from(ipid) else {
                continue;
            };
            if pid == 0 {
                errors.kernel_threads += 1;
                continue;
            }
            let usage = match ffi_proc::rusage(ipid) {
                Ok(u) => u,
                Err(errno) => {
                    match proc_info::libproc_failure(errno) {
                        Failure::Vanished => errors.vanished += 1,
                        Failure::Denied => errors.permission_denied += 1,
                        Failure::Unreadable => errors.unreadable += 1,
                    }
                    continue;
                }
            };
            let reread = self
                .known
                .get(&pid)
                .is_none_or(|k| k.start_abstime != usage.start_abstime || !k.settled);
            if reread {
                match self.first_sight(pid, &usage, errors) {
                    Some(k) => {
                        self.known.insert(pid, k);
                    }
                    None => {
                        self.known.remove(&pid);
                        continue;
                    }
                }
            }
            let Some(k) = self.known.get(&pid) else {
                continue;
            };
            seen.insert(pid);
            let (uid, start_micros) = (k.uid, k.start_micros);
            let mut sample = ProcessSample {
                id: ProcessId {
                    pid,
                    start: start_micros,
                },
                ppid: k.ppid,
                uid,
                user: None,
                name: k.name.clone(),
                exe: k.exe.clone(),
                argv: k.argv.clone(),
                started_at: Some(proc_info::started_at(start_micros)),
                footprint: usage.footprint,
                peak_footprint: Some(usage.lifetime_max_footprint.max(usage.footprint)),
                resident: usage.resident,
                swapped: None,
                gpu_memory: None,
                gpu_client: gpu_clients.contains(&pid),
                detail: Detail::Exact,
                workload: k.workload.clone(),
            };
            sample.user = uid.and_then(|uid| self.user_name(uid, &mut refreshed_users));
            out.push(sample);
        }
        self.known.retain(|pid, _| seen.contains(pid));
        self.pids = pids;
        out
    }
}

/// The pressure level: the kernel's, or (if its sysctl cannot be read)
/// derived from the share available, as the sysinfo fallback does.
pub(super) fn pressure_level(raw: Option<i64>, memory: &SystemMemory) -> PressureLevel {
    if let Some(level) = raw.and_then(pressure::level_from_sysctl) {
        return level;
    }
    let percent = u128::from(memory.available) * 100 / u128::from(memory.total.max(1));
    if percent < u128::from(CRITICAL_AVAILABLE_PERCENT) {
        PressureLevel::Critical
    } else if percent < u128::from(WARN_AVAILABLE_PERCENT) {
        PressureLevel::Warn
    } else {
        PressureLevel::Normal
    }
}

impl Sampler for MacSampler {
    fn name(&self) -> &'static str {
        "macos"
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        let began = Instant::now();
        let taken_at = Timestamp::now();
        let mut errors = CollectorErrors::default();

        let (mut system, stats, page_size) = self.system()?;
        let xsw = match ffi_mach::swap_usage() {
            Ok(x) => Some(x),
            Err(_) => {
                errors.unreadable += 1;
                None
            }
        };
        let swap = vm::swap(xsw.as_ref(), &stats, page_size);
        let level_raw = match ffi_mach::pressure_level_raw() {
            Ok(v) => Some(v),
            Err(_) => {
                errors.unreadable += 1;
                None
            }
        };
        let free_percent = ffi_mach::memorystatus_level()
            .ok()
            .and_then(pressure::free_percent);
        system.gpu_wired_limit = match ffi_mach::wired_limit_mb() {
            Ok(mb) => mb.and_then(pressure::wired_limit_bytes),
            Err(_) => {
                errors.unreadable += 1;
                None
            }
        };
        let pressure = Pressure {
            level: pressure_level(level_raw, &system),
            psi: None,
            free_percent,
        };

        let mut gpus: Vec<GpuDevice> = Vec::new();
        let mut gpu_clients = HashSet::new();
        match iokit::read_accelerators(true) {
            Ok(readings) => {
                for (i, r) in readings.iter().enumerate() {
                    gpu_clients.extend(r.clients.iter().map(|(pid, _)| *pid));
                    if r.stats.is_empty() {
                        continue;
                    }
                    let stats = gpu_stats::accelerator_stats(&r.stats);
                    gpus.push(gpu_stats::gpu_device(
                        u32::try_from(i).unwrap_or(u32::MAX),
                        r.model.as_deref(),
                        &r.class,
                        &stats,
                        system.gpu_wired_limit,
                    ));
                }
            }
            Err(_) => errors.unreadable += 1,
        }

        let processes = self.processes(&gpu_clients, &mut errors);
        Ok(Snapshot {
            taken_at,
            source: self.name().to_owned(),
            sample_micros: u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX),
            system,
            swap,
            pressure,
            gpus,
            processes,
            errors,
            collectors: Vec::new(),
            notes: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    //! These run on a Mac only: they check the sampler against the
    //! machine it runs on.

    use super::*;

    #[test]
    fn the_sampler_lists_this_test_process_with_its_footprint() {
        let mut sampler = MacSampler::new();
        let snap = sampler.sample().unwrap();
        let me = snap.process(std::process::id()).expect("this process");
        assert!(me.footprint > 0);
        assert_eq!(me.uid, Some(ffi_proc::my_uid()));
        assert!(me.started_at.is_some());
        assert!(snap.system.total > 0 && snap.system.available <= snap.system.total);
        assert_eq!(snap.source, "macos");
    }

    #[test]
    fn allocating_256_mib_grows_the_footprint_by_that_much() {
        const MIB: u64 = 1 << 20;
        let me = std::process::id() as i32;
        let before = ffi_proc::rusage(me).unwrap().footprint;
        // Touch every page so it is dirty memory, not a reservation.
        let block = vec![1u8; (256 * MIB) as usize];
        let during = ffi_proc::rusage(me).unwrap().footprint;
        std::hint::black_box(&block);
        let grown = during.saturating_sub(before);
        assert!(
            (250 * MIB..=300 * MIB).contains(&grown),
            "footprint grew by {} MiB",
            grown / MIB
        );
        drop(block);
    }

    #[test]
    fn the_pressure_level_reads_as_a_dispatch_flag() {
        let raw = ffi_mach::pressure_level_raw().unwrap();
        assert!(
            [1, 2, 4].contains(&raw),
            "kern.memorystatus_vm_pressure_level = {raw}"
        );
    }

    #[test]
    fn host_statistics_accepts_this_kernels_count() {
        let mut reader = VmInfoReader::default();
        let stats = reader.read().unwrap();
        assert!(stats.free_count > 0 && stats.wire_count > 0);
        assert!(reader.count() >= vm::REV1_COUNT);
        // A second read reuses the count without a retry.
        reader.read().unwrap();
    }

    #[test]
    fn this_process_reads_back_through_kinfo_and_procargs() {
        let me = std::process::id() as i32;
        let k = super::super::kinfo::parse(&ffi_proc::kinfo_proc(me).unwrap())
            .unwrap()
            .unwrap();
        let b = ffi_proc::bsd_info(me).unwrap();
        assert_eq!(k.pid, std::process::id());
        assert_eq!(k.start_micros, b.start_micros);
        assert_eq!(k.ppid, b.ppid);
        let mut buf = Vec::new();
        let n = ffi_proc::procargs(me, &mut buf).unwrap();
        let args = procargs::parse(&buf[..n]).unwrap();
        assert!(args.complete);
        assert_eq!(args.argv.len(), std::env::args().count());
    }
}
