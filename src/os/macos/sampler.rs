//! [`MacSampler`]: one pass over this Mac's memory, pressure, GPUs and
//! processes.
//!
//! - System: the VM statistics from [`VmSource`] (the `vm.page_*` sysctls
//!   on every sample, `host_statistics64` at most once a second, since the
//!   kernel rate-limits it; the only read whose failure fails the sample),
//!   `vm.swapusage`, the pressure sysctls, `iogpu.wired_limit_mb`.
//! - GPUs: each `IOAccelerator`'s `PerformanceStatistics` and user clients,
//!   a client counted for the process holding its pid only if that process
//!   was there before the client ([`gpu_stats::ClientSightings`]).
//! - Processes: `proc_listallpids`, then one `proc_pid_rusage` per pid
//!   (footprint, peak, resident size, the start time that tells a reused
//!   pid, and the executable's UUID that tells an `exec`). A pid seen for
//!   the first time gets the slow reads once, cached per identity: BSD
//!   info, `kinfo_proc` (Rosetta 2), the path, argv and the workload
//!   classification.
//! - `exec` keeps the identity (pid and start time) and changes the
//!   program: when `ri_uuid` names another executable than the one read
//!   ([`proc_info::image_changed`]), the slow reads are made again and the
//!   process is classified by what it runs now. Its peak stays (the task's
//!   lifetime peak starts again at exec, which makes a new task), and its
//!   evidence says what it ran before ([`EarlierProgram`]).
//!
//! A known process that has ended stays listed, with no memory, until its
//! parent reaps it, so that the post-mortem code reads how it ended
//! ([`super::exits`]); one never seen alive is skipped. An ML workload run
//! under Rosetta 2 is logged once with what to install instead
//! ([`crate::workload::translated_advice`]).
//!
//! Without root, other users' processes refuse (EPERM): they are left out
//! and counted in [`CollectorErrors::permission_denied`] every tick. pid 0
//! (`kernel_task`) is counted as a kernel thread: its memory is the wired
//! figure.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::exits::{self, Listing};
use super::ffi::mach as ffi_mach;
use super::iokit;
use super::parse::gpu_stats::{ClientSightings, UserClient};
use super::parse::{gpu_stats, pressure, procargs, vm};
use super::vm_source::VmSource;
use crate::model::sampling::{SampleError, Sampler};
use crate::model::{
    Argv, CollectorErrors, Detail, GpuDevice, Pressure, PressureLevel, ProcessId, ProcessSample,
    SharedStr, Snapshot, SystemMemory, Timestamp, Workload,
};
use crate::os::first_sight::{FirstSightReads, first_sight};
use crate::os::macos::ffi::proc::{self as ffi_proc, BsdInfo, Rusage};
use crate::os::macos::parse::kinfo::{self, KinfoFacts};
use crate::os::macos::parse::proc_info::{self as proc_info, Owner, Program};
use crate::os::read_failure::ReadFailure;
use crate::os::user_names::UserNames;
use crate::workload::EarlierProgram;

/// A process whose argv was read less than this long after it started is
/// read again next tick: it may not have called `exec` yet.
const SETTLE: Duration = Duration::from_secs(2);

/// Samples this Mac. See the module documentation.
pub struct MacSampler {
    vm: VmSource,
    page_size: Option<u64>,
    memsize: Option<u64>,
    my_uid: u32,
    pids: Vec<i32>,
    args_buf: Vec<u8>,
    known: HashMap<u32, Known>,
    users: UserNames,
    gpu_sightings: ClientSightings,
}

/// What was read once for a process identity.
struct Known {
    start_abstime: u64,
    start_micros: u64,
    ppid: u32,
    owner: Option<Owner>,
    name: SharedStr,
    exe: Option<SharedStr>,
    argv: Argv,
    workload: Workload,
    /// Read at least [`SETTLE`] after the process started.
    settled: bool,
    /// `ri_uuid` when it was read: the executable it ran then.
    image: [u8; 16],
    /// The largest footprint seen for this identity, across its execs.
    peak: u64,
    /// What it ran before, if it exec'd since it was first read.
    earlier: Option<EarlierProgram>,
}

impl Known {
    fn program(&self) -> Program<'_> {
        Program {
            name: &self.name,
            exe: self.exe.as_deref(),
            image: &self.image,
        }
    }
}

impl Default for MacSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl MacSampler {
    pub fn new() -> Self {
        if ffi_proc::this_process_translated() == Some(true) {
            tracing::warn!(
                "headroom itself runs as x86_64 code translated by Rosetta 2: install its arm64 (Apple Silicon) build"
            );
        }
        Self {
            vm: VmSource::new(),
            page_size: None,
            memsize: None,
            my_uid: ffi_proc::my_uid(),
            pids: Vec::new(),
            args_buf: Vec::new(),
            known: HashMap::new(),
            users: UserNames::system(),
            gpu_sightings: ClientSightings::default(),
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
        let stats = self.vm.read(page_size)?.stats;
        Ok((
            vm::system_memory(&stats, page_size, total),
            stats,
            page_size,
        ))
    }

    /// The slow reads for a new identity ([`first_sight`]'s policy), and
    /// whether it has settled; the advice for translated ML work is logged
    /// once per identity. `None` if the process was left out (counted).
    fn first_sight(
        &mut self,
        pid: u32,
        usage: &Rusage,
        errors: &mut CollectorErrors,
    ) -> Option<Known> {
        let mut reads = LibprocReads {
            pid: proc_info::darwin_pid(pid)?,
            my_uid: self.my_uid,
            args_buf: &mut self.args_buf,
        };
        let seen = first_sight(&mut reads, errors)?;
        let MacIdentity { info, facts } = seen.identity;
        // PROC_PIDTBSDINFO's, else kinfo_proc's: one of them answered, or
        // the owner read would have left the process out.
        let (ppid, start_micros) = match (&info, &facts) {
            (Some(i), _) => (i.ppid, i.start_micros),
            (None, Some(k)) => (k.ppid, k.start_micros),
            (None, None) => return None,
        };
        let mut workload = seen.workload;
        let age = Timestamp::now().since(proc_info::started_at(start_micros));
        let settled = age >= SETTLE;
        if facts.as_ref().is_some_and(|k| k.translated) {
            crate::workload::mark_translated(&mut workload);
            // Once per identity (an unsettled reading is read again).
            let logged = self.known.get(&pid).is_some_and(|k| {
                k.start_abstime == usage.start_abstime
                    && crate::workload::is_translated(&k.workload)
                    && crate::workload::translated_advice(&k.workload).is_some()
            });
            if !logged && let Some(advice) = crate::workload::translated_advice(&workload) {
                tracing::warn!(
                    "pid {pid} ({}) {advice}",
                    crate::model::printable(&seen.name)
                );
            }
        }
        Some(Known {
            start_abstime: usage.start_abstime,
            start_micros,
            ppid,
            owner: seen.owner,
            name: seen.name.into(),
            exe: seen.exe.map(SharedStr::from),
            argv: seen.argv,
            workload,
            settled,
            image: usage.image,
            peak: 0,
            earlier: None,
        })
    }

    /// `fresh`, a new read of `pid`, with what belongs to its identity
    /// carried over from the read it replaces (the same start time): the
    /// peak, and what it ran before, noted now if it runs another program
    /// than then.
    fn carry_over(&self, pid: u32, mut fresh: Known) -> Known {
        let Some(old) = self
            .known
            .get(&pid)
            .filter(|k| k.start_abstime == fresh.start_abstime)
        else {
            return fresh;
        };
        fresh.peak = old.peak;
        fresh.earlier = if old.program().changed(&fresh.program()) {
            Some(EarlierProgram {
                name: old.name.to_string(),
                exec: true,
                noticed: Timestamp::now(),
            })
        } else {
            old.earlier.clone()
        };
        if let Some(earlier) = &fresh.earlier {
            earlier.note(&mut fresh.workload);
        }
        fresh
    }

    fn processes(
        &mut self,
        gpu_clients: &HashMap<u32, Vec<UserClient>>,
        errors: &mut CollectorErrors,
    ) -> Vec<ProcessSample> {
        let mut pids = std::mem::take(&mut self.pids);
        if ffi_proc::list_pids(&mut pids).is_err() {
            ReadFailure::Unreadable.count(errors);
        }
        let mut seen = HashSet::with_capacity(pids.len());
        let mut out = Vec::with_capacity(pids.len());
        self.users.start_sample();
        for &ipid in &pids {
            let Ok(pid) = u32::try_from(ipid) else {
                continue;
            };
            if pid == 0 {
                errors.kernel_threads = errors.kernel_threads.saturating_add(1);
                continue;
            }
            let usage = match ffi_proc::rusage(ipid) {
                Ok(u) => u,
                Err(errno) => {
                    proc_info::libproc_failure(errno).count(errors);
                    continue;
                }
            };
            let known = self.known.get(&pid).map(|k| (k.start_abstime, k.settled));
            let mut how = exits::listing(usage.start_abstime, usage.exit_abstime, known);
            // Known, but it exec'd another executable since: read it again.
            if how == Listing::Known
                && self
                    .known
                    .get(&pid)
                    .is_some_and(|k| proc_info::image_changed(&k.image, &usage.image))
            {
                how = Listing::Read;
            }
            match how {
                Listing::Skip => {
                    self.known.remove(&pid);
                    continue;
                }
                Listing::Read => match self.first_sight(pid, &usage, errors) {
                    Some(k) => {
                        let k = self.carry_over(pid, k);
                        self.known.insert(pid, k);
                    }
                    None => {
                        self.known.remove(&pid);
                        continue;
                    }
                },
                Listing::Known | Listing::Ended => {}
            }
            let Some(k) = self.known.get_mut(&pid) else {
                continue;
            };
            k.peak = k
                .peak
                .max(usage.lifetime_max_footprint)
                .max(usage.footprint);
            let k = &*k;
            seen.insert(pid);
            let ended = how == Listing::Ended;
            let uid = k.owner.map(|o| o.real);
            let start_micros = k.start_micros;
            let started_at = proc_info::started_at(start_micros);
            let gpu_client = !ended
                && gpu_clients.get(&pid).is_some_and(|clients| {
                    clients
                        .iter()
                        .any(|c| self.gpu_sightings.belongs_to(c, started_at, &k.name))
                });
            // An ended process holds no memory; its peak stays.
            let (footprint, resident) = if ended {
                (0, 0)
            } else {
                (usage.footprint, usage.resident)
            };
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
                started_at: Some(started_at),
                footprint,
                peak_footprint: Some(k.peak),
                resident,
                swapped: None,
                gpu_memory: None,
                gpu_client,
                detail: Detail::Exact,
                // XNU charges a shared anonymous page whole to each task
                // that maps it, and macOS reports no proportional share.
                // A job adds up its members' footprints: exact for spawned
                // workers (Python's default on macOS) and for pages a
                // forked worker wrote; pages it only read count once per
                // process that maps them (an upper bound). The sources,
                // with citations: `Basis::PhysFootprint`.
                basis: crate::model::Basis::PhysFootprint,
                held_open: 0,
                job: None,
                forked: false,
                // macOS has no cgroups.
                cgroup: None,
                workload: k.workload.clone(),
                labels: None,
                // No library list here: the environment is found from the
                // interpreter's path (`crate::sample::environment`).
                site_packages: Vec::new(),
            };
            sample.user = uid.and_then(|uid| self.users.name(uid));
            out.push(sample);
        }
        self.known.retain(|pid, _| seen.contains(pid));
        self.pids = pids;
        out
    }
}

/// What `PROC_PIDTBSDINFO` and `kinfo_proc` say of a process at first
/// sight; either may be missing (not both, once the owner read passed).
struct MacIdentity {
    info: Option<BsdInfo>,
    facts: Option<KinfoFacts>,
}

/// The first-sight reads of one process through libproc and sysctl:
/// `PROC_PIDTBSDINFO` and `kinfo_proc`, `proc_pidpath`, `KERN_PROCARGS2`.
struct LibprocReads<'a> {
    pid: i32,
    my_uid: u32,
    args_buf: &'a mut Vec<u8>,
}

impl FirstSightReads for LibprocReads<'_> {
    type Identity = MacIdentity;
    type Owner = Owner;

    fn identity(&mut self) -> Result<MacIdentity, ReadFailure> {
        let info = match ffi_proc::bsd_info(self.pid) {
            Ok(info) => Some(info),
            Err(errno) => match proc_info::libproc_failure(errno) {
                ReadFailure::Vanished => return Err(ReadFailure::Vanished),
                // rusage worked, so this is unexpected: fall back to the
                // unprivileged kinfo_proc below.
                ReadFailure::Denied | ReadFailure::Unreadable => None,
            },
        };
        // kinfo_proc answers for every process: Rosetta's flag, and the
        // identity where PROC_PIDTBSDINFO was refused.
        let facts = match ffi_proc::kinfo_proc(self.pid).map(|b| kinfo::parse(&b)) {
            Ok(Ok(Some(k))) => Some(k),
            Ok(Ok(None)) => return Err(ReadFailure::Vanished),
            _ => None,
        };
        Ok(MacIdentity { info, facts })
    }

    /// `kernel_task` (pid 0) is skipped before any read; every other
    /// process is a user process.
    fn is_kernel_thread(_: &MacIdentity) -> bool {
        false
    }

    fn exe(&mut self) -> Result<Option<String>, ReadFailure> {
        match ffi_proc::pid_path(self.pid) {
            Ok(path) => Ok(Some(path)),
            Err(errno) => match proc_info::libproc_failure(errno) {
                ReadFailure::Vanished => Err(ReadFailure::Vanished),
                ReadFailure::Denied | ReadFailure::Unreadable => Ok(None),
            },
        }
    }

    /// No read of its own: the uids the identity read gave, unreadable
    /// where neither of its calls answered.
    fn owner(&mut self, identity: &MacIdentity) -> Result<Owner, ReadFailure> {
        match identity {
            MacIdentity { info: Some(i), .. } => Ok(i.owner),
            MacIdentity { facts: Some(k), .. } => Ok(k.owner()),
            MacIdentity {
                info: None,
                facts: None,
            } => Err(ReadFailure::Unreadable),
        }
    }

    fn argv(&mut self, owner: Option<&Owner>) -> Result<Argv, ReadFailure> {
        match ffi_proc::procargs(self.pid, self.args_buf) {
            Ok(n) => procargs::parse_answer(&self.args_buf[..n], self.args_buf.len())
                .map(|args| Argv::from(args.argv))
                .map_err(|_| ReadFailure::Unreadable),
            Err(errno) => Err(proc_info::procargs_failure(
                errno,
                owner.copied(),
                self.my_uid,
            )),
        }
    }

    /// PROC_PIDTBSDINFO's, or the same name made from `kinfo_proc`'s
    /// `p_comm` and the executable where that call was refused
    /// ([`proc_info::fallback_name`]).
    fn name(identity: &mut MacIdentity, exe: Option<&str>) -> String {
        match (&mut identity.info, &identity.facts) {
            (Some(i), _) => std::mem::take(&mut i.name),
            (None, Some(k)) => proc_info::fallback_name(&k.comm, exe),
            (None, None) => String::new(),
        }
    }
}

/// The pressure level: the kernel's, or (if its sysctl cannot be read) the
/// one the kernel's own rule gives for these VM counts
/// ([`vm::kernel_pressure_level`]).
pub(super) fn pressure_level(raw: Option<i64>, stats: &vm::VmStatistics) -> PressureLevel {
    raw.and_then(pressure::level_from_sysctl)
        .unwrap_or_else(|| vm::kernel_pressure_level(stats))
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
                ReadFailure::Unreadable.count(&mut errors);
                None
            }
        };
        let swap = vm::swap(xsw.as_ref(), &stats, page_size);
        let level_raw = match ffi_mach::pressure_level_raw() {
            Ok(v) => Some(v),
            Err(_) => {
                ReadFailure::Unreadable.count(&mut errors);
                None
            }
        };
        let free_percent = ffi_mach::memorystatus_level()
            .ok()
            .and_then(pressure::free_percent);
        system.gpu_wired_limit = match ffi_mach::wired_limit_mb() {
            Ok(mb) => mb.and_then(pressure::wired_limit_bytes),
            Err(_) => {
                ReadFailure::Unreadable.count(&mut errors);
                None
            }
        };
        let pressure = Pressure {
            level: pressure_level(level_raw, &stats),
            psi: None,
            free_percent,
        };

        let mut gpus: Vec<GpuDevice> = Vec::new();
        let mut gpu_clients: HashMap<u32, Vec<UserClient>> = HashMap::new();
        match iokit::read_accelerators(true) {
            Ok(readings) => {
                // Dated after the read: a client listed now existed by now.
                self.gpu_sightings
                    .observe(readings.iter().flat_map(|r| &r.clients), Timestamp::now());
                for (i, r) in readings.iter().enumerate() {
                    for c in &r.clients {
                        gpu_clients.entry(c.pid).or_default().push(c.clone());
                    }
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
            Err(_) => ReadFailure::Unreadable.count(&mut errors),
        }

        let processes = self.processes(&gpu_clients, &mut errors);
        Ok(Snapshot {
            taken_at,
            source: self.name().to_owned(),
            replayed: false,
            sample_micros: u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX),
            system,
            swap,
            pressure,
            gpus,
            processes,
            jobs: Vec::new(),
            unowned: Default::default(),
            // macOS has no memory cgroups.
            ceilings: Vec::new(),
            errors,
            collectors: Vec::new(),
            notes: Vec::new(),
        })
    }

    /// The VM statistics' source, down where a page-count sysctl is
    /// missing and the figures come from the rate-limited
    /// `host_statistics64` alone; the other sources are all in the figures
    /// the sampler gives (the GPU included), and `headroom doctor` checks
    /// each on its own.
    fn collectors(&self) -> Vec<&dyn crate::model::Collector> {
        vec![&self.vm]
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
        let mut reader = crate::os::macos::ffi::mach::VmInfoReader::default();
        let stats = reader.read().unwrap();
        assert!(stats.free_count > 0 && stats.wire_count > 0);
        assert!(reader.count() >= vm::REV1_COUNT);
        // A second read reuses the count without a retry.
        reader.read().unwrap();
    }

    #[test]
    fn this_process_reads_back_through_kinfo_and_procargs() {
        let me = std::process::id() as i32;
        let k = crate::os::macos::parse::kinfo::parse(&ffi_proc::kinfo_proc(me).unwrap())
            .unwrap()
            .unwrap();
        let b = ffi_proc::bsd_info(me).unwrap();
        assert_eq!(k.pid, std::process::id());
        assert_eq!(k.start_micros, b.start_micros);
        assert_eq!(k.ppid, b.ppid);
        assert_eq!(k.owner(), b.owner);
        // Whether this test binary runs translated, two ways.
        assert_eq!(Some(k.translated), ffi_proc::this_process_translated());
        let mut buf = Vec::new();
        let n = ffi_proc::procargs(me, &mut buf).unwrap();
        let args = procargs::parse_answer(&buf[..n], buf.len()).unwrap();
        assert!(args.complete && !args.cut_at_front);
        assert_eq!(args.argv.len(), std::env::args().count());
    }

    /// A child started with an empty argv[0] keeps it: the padding after
    /// the executable path is not taken for more.
    #[test]
    fn an_empty_argv0_reads_back_as_given() {
        use std::os::unix::process::CommandExt as _;
        let mut child = std::process::Command::new("/bin/sleep")
            .arg0("")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let mut args = None;
        // Until the child has exec'd sleep (before, the buffer is the
        // test binary's).
        for _ in 0..200 {
            let mut buf = Vec::new();
            let n = ffi_proc::procargs(pid, &mut buf).unwrap();
            let a = procargs::parse_answer(&buf[..n], buf.len()).unwrap();
            if a.exec_path == "/bin/sleep" {
                args = Some(a);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let args = args.expect("the child exec'd /bin/sleep");
        assert_eq!(args.argv, ["", "30"]);
        assert!(args.complete);
    }

    /// A process seen settled (older than [`SETTLE`]) that calls exec is
    /// read again on the next sample, by its new `ri_uuid`: the same
    /// identity, the new name, executable and argv, classified anew (a copy
    /// of `/bin/sleep` named `python3` is a Python process by its name),
    /// with a note of what it ran before. The shell execs only once the
    /// test has sampled it settled (it waits for a file), so that the
    /// re-read comes from the UUID, not from the re-reads of a young
    /// process.
    #[test]
    fn a_process_that_execs_is_read_again_and_classified_anew() {
        let dir = tempfile::tempdir().unwrap();
        let python = dir.path().join("python3");
        std::fs::copy("/bin/sleep", &python).unwrap();
        let go = dir.path().join("go");
        let mut child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(r#"while [ ! -e "$1" ]; do sleep 0.05; done; exec "$0" 30"#)
            .arg(&python)
            .arg(&go)
            .spawn()
            .unwrap();
        let pid = child.id();
        let ipid = i32::try_from(pid).unwrap();
        std::thread::sleep(SETTLE + Duration::from_millis(500));
        let mut sampler = MacSampler::new();
        let before = sampler.sample().unwrap();
        let was = before.process(pid).expect("the shell is listed").clone();
        std::fs::write(&go, b"").unwrap();
        for _ in 0..500 {
            if ffi_proc::bsd_info(ipid).is_ok_and(|i| i.name == "python3") {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let after = sampler.sample().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(was.name, "sh");
        assert_eq!(was.workload.kind, crate::model::WorkloadKind::Other);
        let p = after.process(pid).expect("the exec'd process is listed");
        assert_eq!(p.id, was.id, "exec keeps the identity");
        assert_eq!(p.name, "python3");
        assert!(
            p.exe.as_deref().is_some_and(|e| e.ends_with("/python3")),
            "{:?}",
            p.exe
        );
        assert_eq!(p.argv.len(), 2);
        assert_eq!(p.workload.kind, crate::model::WorkloadKind::Python);
        assert!(
            crate::workload::program_change(&p.workload)
                .is_some_and(|e| e.starts_with("exec'd from sh (noticed ")),
            "{:?}",
            p.workload.evidence
        );
    }

    /// A child seen alive that exits stays listed, with no memory, until it
    /// is reaped; then it is gone. A sampler that never saw it alive leaves
    /// it out.
    #[test]
    fn an_ended_child_is_listed_with_no_memory_until_reaped() {
        let mut child = std::process::Command::new("/bin/sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut sampler = MacSampler::new();
        // Seen alive (and, after SETTLE, settled; an unsettled one is
        // listed as ended as well).
        let alive = sampler.sample().unwrap();
        let was = alive.process(pid).expect("the child is listed").clone();
        assert!(was.resident > 0);
        // SIGKILL (Child::kill does not reap): a zombie.
        child.kill().unwrap();
        let ipid = i32::try_from(pid).unwrap();
        for _ in 0..200 {
            let usage = ffi_proc::rusage(ipid).unwrap();
            if usage.exit_abstime != 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let ended = sampler.sample().unwrap();
        let now = ended.process(pid).expect("an ended child stays listed");
        assert_eq!(now.id, was.id);
        assert_eq!((now.footprint, now.resident), (0, 0));
        assert!(now.peak_footprint.unwrap_or(0) > 0, "its peak stays");
        assert!(!now.gpu_client);
        // A fresh sampler never saw it alive: left out, and not vanished.
        let fresh = MacSampler::new().sample().unwrap();
        assert!(fresh.process(pid).is_none());
        child.wait().unwrap();
        let reaped = sampler.sample().unwrap();
        assert!(reaped.process(pid).is_none());
    }
}
