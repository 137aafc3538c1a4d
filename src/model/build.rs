//! Building a [`ProcessSample`] or a [`Snapshot`] by hand: the way unit
//! tests, the integration tests and tools (trace generators, examples) make
//! the processes and snapshots they feed to history, policy, metrics or the
//! HTTP API, instead of each writing out every field.
//!
//! Each builder starts from plain defaults and takes chained setters for what
//! the caller cares about:
//!
//! ```
//! use headroom::model::WorkloadKind;
//! use headroom::model::build::{process, snapshot};
//!
//! let kernel = process(42)
//!     .uid(1000)
//!     .name("python3")
//!     .argv(["python3", "-m", "ipykernel_launcher"])
//!     .footprint(8 << 30)
//!     .kind(WorkloadKind::Jupyter);
//! let snap = snapshot(1_000).memory(64 << 30, 32 << 30).process(kernel).build();
//! assert_eq!(snap.processes[0].id.pid, 42);
//! assert_eq!(snap.system.used, 32 << 30);
//! ```
//!
//! [`kernel`] starts from a Jupyter kernel instead of a bare process.
//!
//! A built process is `pid@1`, child of pid 1, named `p<pid>`, with no owner,
//! no command line, no memory figures and no workload ([`ProcessSample::new`]
//! with those values). A built snapshot has `test` as its source, no
//! processes, and every figure zero or unknown ([`Snapshot::default`]).

use super::{
    Argv, CollectorErrors, Detail, Framework, GpuDevice, Pressure, PressureLevel, ProcessId,
    ProcessSample, SharedStr, Snapshot, Swap, SystemMemory, Timestamp, Workload, WorkloadKind,
};

/// A process with pid `pid` and the defaults of the [module](self).
pub fn process(pid: u32) -> ProcessBuilder {
    ProcessBuilder(ProcessSample::new(
        ProcessId { pid, start: 1 },
        1,
        format!("p{pid}"),
    ))
}

/// A Jupyter kernel as a sampler classifies one: pid `pid`, named `python3`,
/// command line `python3 -m ipykernel_launcher`, workload kind jupyter; the
/// other defaults as [`process`]'s.
pub fn kernel(pid: u32) -> ProcessBuilder {
    process(pid)
        .name("python3")
        .argv(["python3", "-m", "ipykernel_launcher"])
        .kind(WorkloadKind::Jupyter)
}

/// A snapshot taken `at_ms` milliseconds after the Unix epoch, with the
/// defaults of the [module](self).
pub fn snapshot(at_ms: u64) -> SnapshotBuilder {
    SnapshotBuilder(Snapshot {
        taken_at: Timestamp(at_ms),
        source: "test".into(),
        ..Snapshot::default()
    })
}

/// A [`ProcessSample`] being built; [`ProcessBuilder::build`] (or `into()`)
/// hands it over.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until built"]
pub struct ProcessBuilder(ProcessSample);

impl ProcessBuilder {
    pub fn build(self) -> ProcessSample {
        self.0
    }

    pub fn pid(mut self, pid: u32) -> Self {
        self.0.id.pid = pid;
        self
    }

    /// The platform's start-time value of the identity (`pid@start`).
    /// Forked and not exec'd since (`PF_FORKNOEXEC` on Linux).
    pub fn forked(mut self, forked: bool) -> Self {
        self.0.forked = forked;
        self
    }

    pub fn start(mut self, start: u64) -> Self {
        self.0.id.start = start;
        self
    }

    pub fn ppid(mut self, ppid: u32) -> Self {
        self.0.ppid = ppid;
        self
    }

    pub fn uid(mut self, uid: u32) -> Self {
        self.0.uid = Some(uid);
        self
    }

    /// The owner's name.
    pub fn user(mut self, user: impl Into<SharedStr>) -> Self {
        self.0.user = Some(user.into());
        self
    }

    /// The command name.
    pub fn name(mut self, name: impl Into<SharedStr>) -> Self {
        self.0.name = name.into();
        self
    }

    pub fn exe(mut self, exe: impl Into<SharedStr>) -> Self {
        self.0.exe = Some(exe.into());
        self
    }

    pub fn argv(mut self, argv: impl Into<Argv>) -> Self {
        self.0.argv = argv.into();
        self
    }

    pub fn started_at(mut self, at: Timestamp) -> Self {
        self.0.started_at = Some(at);
        self
    }

    /// The footprint alone; [`Self::resident`] is set apart.
    pub fn footprint(mut self, bytes: u64) -> Self {
        self.0.footprint = bytes;
        self
    }

    pub fn peak_footprint(mut self, bytes: u64) -> Self {
        self.0.peak_footprint = Some(bytes);
        self
    }

    pub fn resident(mut self, bytes: u64) -> Self {
        self.0.resident = bytes;
        self
    }

    pub fn swapped(mut self, bytes: u64) -> Self {
        self.0.swapped = Some(bytes);
        self
    }

    pub fn gpu_memory(mut self, bytes: u64) -> Self {
        self.0.gpu_memory = Some(bytes);
        self
    }

    pub fn gpu_client(mut self, client: bool) -> Self {
        self.0.gpu_client = client;
        self
    }

    pub fn detail(mut self, detail: Detail) -> Self {
        self.0.detail = detail;
        self
    }

    /// The workload kind, the rest of the classification left as it is.
    pub fn kind(mut self, kind: WorkloadKind) -> Self {
        self.0.workload.kind = kind;
        self
    }

    pub fn frameworks(mut self, frameworks: impl IntoIterator<Item = Framework>) -> Self {
        self.0.workload.frameworks = frameworks.into_iter().collect();
        self
    }

    pub fn kernel_id(mut self, id: impl Into<String>) -> Self {
        self.0.workload.kernel_id = Some(id.into());
        self
    }

    pub fn notebook(mut self, notebook: impl Into<String>) -> Self {
        self.0.workload.notebook = Some(notebook.into());
        self
    }

    /// The evidence for the classification, in words.
    pub fn evidence<S: Into<String>>(mut self, evidence: impl IntoIterator<Item = S>) -> Self {
        self.0.workload.evidence = evidence.into_iter().map(Into::into).collect();
        self
    }

    /// The whole classification at once.
    pub fn workload(mut self, workload: Workload) -> Self {
        self.0.workload = workload;
        self
    }

    /// Who the process belongs to (a pod, a container, a job, a unit).
    pub fn labels(mut self, labels: crate::model::LabelSet) -> Self {
        self.0.labels = Some(labels.into());
        self
    }

    /// How the footprint counts shared memory.
    pub fn basis(mut self, basis: crate::model::Basis) -> Self {
        self.0.basis = basis;
        self
    }

    /// Bytes of tmpfs files or memfds held open and not mapped.
    pub fn held_open(mut self, bytes: u64) -> Self {
        self.0.held_open = bytes;
        self
    }

    /// A member of the job whose root has pid `root` (its own pid for the
    /// root itself).
    pub fn job(mut self, root: u32) -> Self {
        self.0.job = Some(root);
        self
    }

    /// The path in the memory-cgroup hierarchy.
    pub fn cgroup(mut self, path: impl Into<SharedStr>) -> Self {
        self.0.cgroup = Some(path.into());
        self
    }
}

impl From<ProcessBuilder> for ProcessSample {
    fn from(b: ProcessBuilder) -> Self {
        b.0
    }
}

/// A [`Snapshot`] being built; [`SnapshotBuilder::build`] (or `into()`)
/// hands it over.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until built"]
pub struct SnapshotBuilder(Snapshot);

impl SnapshotBuilder {
    pub fn build(self) -> Snapshot {
        self.0
    }

    pub fn taken_at(mut self, at: Timestamp) -> Self {
        self.0.taken_at = at;
        self
    }

    /// Which sampler it claims to come from (`test` unless set).
    pub fn source(mut self, source: impl Into<String>) -> Self {
        self.0.source = source.into();
        self
    }

    pub fn sample_micros(mut self, micros: u64) -> Self {
        self.0.sample_micros = micros;
        self
    }

    /// `total` bytes of memory of which `available` can be handed out; the
    /// rest is `used`. Free memory and the breakdown stay as they were.
    pub fn memory(mut self, total: u64, available: u64) -> Self {
        self.0.system.total = total;
        self.0.system.available = available;
        self.0.system.used = total.saturating_sub(available);
        self
    }

    /// Entirely unused memory.
    pub fn free(mut self, bytes: u64) -> Self {
        self.0.system.free = bytes;
        self
    }

    /// The whole system memory figure at once.
    pub fn system(mut self, system: SystemMemory) -> Self {
        self.0.system = system;
        self
    }

    /// `total` bytes of swap of which `used` are in use.
    pub fn swap(mut self, total: u64, used: u64) -> Self {
        self.0.swap.total = total;
        self.0.swap.used = used;
        self
    }

    /// The whole swap figure at once, paging counters included.
    pub fn swap_figures(mut self, swap: Swap) -> Self {
        self.0.swap = swap;
        self
    }

    /// The pressure level, the raw signals left as they were.
    pub fn pressure_level(mut self, level: PressureLevel) -> Self {
        self.0.pressure.level = level;
        self
    }

    /// The whole pressure figure at once.
    pub fn pressure(mut self, pressure: Pressure) -> Self {
        self.0.pressure = pressure;
        self
    }

    /// What could not be read in this pass.
    pub fn errors(mut self, errors: CollectorErrors) -> Self {
        self.0.errors = errors;
        self
    }

    pub fn gpus(mut self, gpus: impl IntoIterator<Item = GpuDevice>) -> Self {
        self.0.gpus = gpus.into_iter().collect();
        self
    }

    /// Memory no process holds.
    pub fn unowned(mut self, unowned: crate::model::Unowned) -> Self {
        self.0.unowned = unowned;
        self
    }

    /// These jobs, after those already there.
    pub fn jobs(mut self, jobs: impl IntoIterator<Item = crate::model::Job>) -> Self {
        self.0.jobs.extend(jobs);
        self
    }

    /// One more job, of the processes already there whose
    /// [`ProcessSample::job`] is `root`: the root first, then the others in
    /// pid order; their footprints and GPU memory added up, counted by
    /// `basis`. A root that is not there makes no job.
    pub fn job_of(mut self, root: u32, basis: crate::model::Basis) -> Self {
        let Some(root_id) = self.0.process(root).map(|p| p.id) else {
            return self;
        };
        let mut members: Vec<&ProcessSample> = self
            .0
            .processes
            .iter()
            .filter(|p| p.job == Some(root))
            .collect();
        members.sort_by_key(|p| (p.id.pid != root, p.id.pid));
        let gpu = members
            .iter()
            .filter_map(|p| p.gpu_memory)
            .reduce(u64::saturating_add);
        let job = crate::model::Job {
            root: root_id,
            members: members.iter().map(|p| p.id.pid).collect(),
            footprint: members
                .iter()
                .map(|p| p.footprint)
                .fold(0, u64::saturating_add),
            gpu_memory: gpu,
            basis,
            ended_root: None,
        };
        self.0.jobs.push(job);
        self
    }

    /// One more process, after those already there.
    /// The memory-cgroup ceilings of its processes.
    pub fn ceilings(mut self, ceilings: impl IntoIterator<Item = super::Ceiling>) -> Self {
        self.0.ceilings = ceilings.into_iter().collect();
        self
    }

    pub fn process(mut self, process: impl Into<ProcessSample>) -> Self {
        self.0.processes.push(process.into());
        self
    }

    /// These processes, after those already there.
    pub fn processes<P: Into<ProcessSample>>(
        mut self,
        processes: impl IntoIterator<Item = P>,
    ) -> Self {
        self.0
            .processes
            .extend(processes.into_iter().map(Into::into));
        self
    }
}

impl From<SnapshotBuilder> for Snapshot {
    fn from(b: SnapshotBuilder) -> Self {
        b.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_process_is_new_with_the_documented_defaults() {
        let p = process(7).build();
        assert_eq!(
            p,
            ProcessSample::new(ProcessId { pid: 7, start: 1 }, 1, "p7")
        );
    }

    #[test]
    fn setters_fill_what_they_name_and_nothing_else() {
        let p = process(7)
            .start(9)
            .ppid(3)
            .uid(1000)
            .user("ana")
            .name("python3")
            .exe("/usr/bin/python3")
            .argv(["python3", "x.py"])
            .started_at(Timestamp(5))
            .footprint(100)
            .resident(60)
            .kind(WorkloadKind::Jupyter)
            .kernel_id("k")
            .build();
        assert_eq!(p.id, ProcessId { pid: 7, start: 9 });
        assert_eq!((p.ppid, p.uid), (3, Some(1000)));
        assert_eq!(p.user.as_deref(), Some("ana"));
        assert_eq!(&*p.name, "python3");
        assert_eq!(p.exe.as_deref(), Some("/usr/bin/python3"));
        assert_eq!(p.argv, ["python3", "x.py"]);
        assert_eq!(p.started_at, Some(Timestamp(5)));
        assert_eq!((p.footprint, p.resident, p.swapped), (100, 60, None));
        assert_eq!(p.workload.kind, WorkloadKind::Jupyter);
        assert_eq!(p.workload.kernel_id.as_deref(), Some("k"));
        assert_eq!(p.workload.notebook, None);
    }

    #[test]
    fn a_kernel_is_a_classified_ipykernel() {
        let k = kernel(9).build();
        assert_eq!((k.id.pid, &*k.name), (9, "python3"));
        assert_eq!(k.argv, ["python3", "-m", "ipykernel_launcher"]);
        assert_eq!(k.workload.kind, WorkloadKind::Jupyter);
        assert!(k.workload.is_ml());
    }

    #[test]
    fn a_bare_snapshot_is_empty_and_says_test() {
        let s = snapshot(42).build();
        assert_eq!(
            s,
            Snapshot {
                taken_at: Timestamp(42),
                source: "test".into(),
                ..Snapshot::default()
            }
        );
    }

    #[test]
    fn memory_counts_what_is_not_available_as_used() {
        let s = snapshot(0).memory(100, 30).free(5).swap(8, 2).build();
        assert_eq!(
            (s.system.total, s.system.available, s.system.used),
            (100, 30, 70)
        );
        assert_eq!(s.system.free, 5);
        assert_eq!((s.swap.total, s.swap.used), (8, 2));
        let odd = snapshot(0).memory(10, 30).build();
        assert_eq!(odd.system.used, 0, "more available than total is no panic");
    }

    #[test]
    fn a_job_adds_up_its_members_root_first() {
        let s = snapshot(0)
            .process(process(12).job(10).footprint(3).gpu_memory(1))
            .process(process(10).job(10).footprint(5))
            .process(process(11).job(10).footprint(7).gpu_memory(2))
            .process(process(13).footprint(100))
            .job_of(10, crate::model::Basis::Pss)
            .job_of(99, crate::model::Basis::Rss)
            .build();
        assert_eq!(s.jobs.len(), 1, "no root, no job");
        let job = &s.jobs[0];
        assert_eq!(job.root, ProcessId { pid: 10, start: 1 });
        assert_eq!(job.members, [10, 11, 12]);
        assert_eq!((job.footprint, job.gpu_memory), (15, Some(3)));
        assert_eq!(job.basis, crate::model::Basis::Pss);
        assert_eq!(s.job_of(&s.processes[0]), Some(job));
    }

    #[test]
    fn processes_keep_their_order() {
        let s = snapshot(0)
            .process(process(3))
            .processes([process(1), process(2)])
            .build();
        let pids: Vec<u32> = s.processes.iter().map(|p| p.id.pid).collect();
        assert_eq!(pids, [3, 1, 2]);
    }
}
