//! Jobs: a root ML process and its descendants, memory counted once.
//!
//! ML work is a tree of processes: a Jupyter kernel and the workers its cell
//! forks (a PyTorch `DataLoader`, a `multiprocessing` pool, `joblib`), a
//! training script and its loader workers, a launcher (`torchrun`,
//! `accelerate`, `deepspeed`, `mpirun`) and its ranks, a server and its
//! runners (`ollama serve` → `ollama runner`). [`assemble`] finds them in a
//! snapshot from the parent links every sampler reads:
//!
//! - the **root** of a job is an ML process (a Jupyter kernel, a framework
//!   job, a model server) with no ML process among its ancestors;
//! - every descendant of a root is a **worker** of that job, whatever it
//!   runs; a forked worker of a Jupyter kernel carries the kernel's command
//!   line (and its connection file), yet only the topmost process with a
//!   kernel id is the kernel: the worker is classified by what else it runs
//!   (a framework, else Python), and its evidence says whose worker it is;
//! - the job's footprint is the members' footprints added up. Members that
//!   share anonymous memory are counted by their proportional share where
//!   the sampler read it ([`Basis::Pss`] on Linux), so shared pages count
//!   once.
//!
//! [`assemble`] is a pure function of the snapshot, and idempotent: a
//! replayed snapshot that already has its jobs gets the same ones again.
//! Every sampler's snapshots go through [`Lineage::assemble`]
//! ([`with_jobs`]), which remembers the last snapshot's jobs: when a root
//! ends (the OOM killer took the kernel, a user killed it) its workers are
//! re-parented and no one's descendants, yet they hold the job's memory
//! (a `DataLoader`'s workers and their copies). They stay one job, the
//! ended root named in it, its eldest surviving member standing as the
//! root; the rules that matched the root match the job by the root's kind,
//! and a step for the job's workers reaches every member.

use std::collections::{HashMap, HashSet};

use crate::model::{Basis, EndedRoot, Job, ProcessId, ProcessSample, Snapshot, WorkloadKind};

use super::{SampleError, Sampler};

/// Ancestors followed from one process: a parent chain deeper than this is
/// cut there (a process tree is rarely more than a few dozen deep; a loop
/// in the links of a torn sample must not hang the sampler).
const MAX_DEPTH: usize = 256;

/// Group the snapshot's processes into jobs: set each member's `job`,
/// reclassify the forked workers of Jupyter kernels, and list the jobs
/// with their totals in `snap.jobs`, largest first.
pub fn assemble(snap: &mut Snapshot) {
    // A forked copy of a kernel is not the kernel, even once its kernel has
    // ended and it was re-parented.
    for p in &mut snap.processes {
        if p.forked && p.workload.kind == WorkloadKind::Jupyter {
            not_a_kernel(&mut p.workload);
        }
    }
    let index: HashMap<u32, usize> = snap
        .processes
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.pid, i))
        .collect();
    // Each process's root, worked out once per process along its chain.
    let mut root_of: Vec<Option<Option<usize>>> = vec![None; snap.processes.len()];
    for i in 0..snap.processes.len() {
        find_root(&snap.processes, &index, &mut root_of, i);
    }
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, root) in root_of.iter().enumerate() {
        if let Some(Some(root)) = root {
            members.entry(*root).or_default().push(i);
        }
    }
    for p in &mut snap.processes {
        p.job = None;
    }
    let mut jobs = Vec::with_capacity(members.len());
    for (root, mut list) in members {
        list.sort_by_key(|&i| (i != root, snap.processes[i].id.pid));
        let root_pid = snap.processes[root].id.pid;
        let root_words = describe_root(&snap.processes[root]);
        for &i in &list {
            let p = &mut snap.processes[i];
            p.job = Some(root_pid);
            if i != root {
                mark_worker(p, root_pid, &root_words);
            }
        }
        jobs.push(total(&snap.processes, root, &list));
    }
    jobs.sort_by(|a, b| b.footprint.cmp(&a.footprint).then(a.root.cmp(&b.root)));
    snap.jobs = jobs;
}

/// The root of process `i`'s job, if it has one: the topmost ML process
/// on its chain of parents, itself included.
fn find_root(
    procs: &[ProcessSample],
    index: &HashMap<u32, usize>,
    memo: &mut [Option<Option<usize>>],
    i: usize,
) -> Option<usize> {
    if let Some(known) = memo[i] {
        return known;
    }
    // The chain from i up, until a process whose root is known, a process
    // with no sampled parent, or a loop.
    let mut chain = vec![i];
    let mut above: Option<usize> = None;
    let mut cur = i;
    while chain.len() < MAX_DEPTH {
        let p = &procs[cur];
        let Some(&parent) = index.get(&p.ppid) else {
            break;
        };
        if parent == cur || chain.contains(&parent) {
            break;
        }
        if let Some(known) = memo[parent] {
            above = known;
            break;
        }
        chain.push(parent);
        cur = parent;
    }
    // Walk back down: the topmost ML process seen so far is the root.
    let mut root = above;
    for &j in chain.iter().rev() {
        if root.is_none() && is_root_kind(&procs[j]) {
            root = Some(j);
        }
        memo[j] = Some(root);
    }
    root
}

/// A process that starts a job when no ML process is above it.
fn is_root_kind(p: &ProcessSample) -> bool {
    p.workload.is_ml()
}

/// `jupyter kernel 4821`, `pytorch process 77`: the root as a worker's
/// evidence names it.
fn describe_root(p: &ProcessSample) -> String {
    format!("{} {}", describe_kind(p.workload.kind), p.id.pid)
}

/// The prefix of a worker's evidence line (public: it quotes pids and
/// kinds only).
pub const WORKER_EVIDENCE: &str = "worker of ";

/// Make `p` a worker of the job rooted at `root`: a forked copy of a
/// Jupyter kernel is not a kernel.
fn mark_worker(p: &mut ProcessSample, root: u32, root_words: &str) {
    let w = &mut p.workload;
    w.evidence.retain(|e| !e.starts_with(WORKER_EVIDENCE));
    let parent = if p.ppid == root {
        "its parent".to_string()
    } else {
        format!("an ancestor (through parent {})", p.ppid)
    };
    w.evidence
        .push(format!("{WORKER_EVIDENCE}{root_words}: {parent}"));
    if w.kind == WorkloadKind::Jupyter {
        not_a_kernel(w);
    }
}

/// A process that carries a kernel's command line without being the
/// kernel: classified by what else it runs.
fn not_a_kernel(w: &mut crate::model::Workload) {
    w.kind = worker_kind(w);
    w.kernel_id = None;
    w.notebook = None;
    w.kernel_name = None;
}

/// What a forked worker of a kernel is, without the kernel's connection
/// file: its first framework in the classifier's order, else Python.
fn worker_kind(w: &crate::model::Workload) -> WorkloadKind {
    use crate::model::Framework;
    for (fw, kind) in [
        (Framework::Mlx, WorkloadKind::Mlx),
        (Framework::Jax, WorkloadKind::Jax),
        (Framework::Pytorch, WorkloadKind::Pytorch),
        (Framework::Tensorflow, WorkloadKind::Tensorflow),
    ] {
        if w.frameworks.contains(&fw) {
            return kind;
        }
    }
    // A Jupyter kernel's command line was Python's (or another language's
    // kernel): its forked copy runs the same interpreter.
    WorkloadKind::Python
}

/// The job of `root` with these members (root first): totals and basis.
fn total(procs: &[ProcessSample], root: usize, list: &[usize]) -> Job {
    let mut footprint = 0u64;
    let mut gpu: Option<u64> = None;
    let mut basis = procs[root].basis;
    for &i in list {
        let p = &procs[i];
        footprint = footprint.saturating_add(p.footprint);
        if let Some(g) = p.gpu_memory {
            gpu = Some(gpu.unwrap_or(0).saturating_add(g));
        }
        basis = weaker(basis, p.basis, list.len() > 1);
    }
    Job {
        root: procs[root].id,
        members: list.iter().map(|&i| procs[i].id.pid).collect(),
        footprint,
        gpu_memory: gpu,
        basis,
        ended_root: None,
    }
}

/// The basis of a total with parts counted on `a` and `b`: a job whose
/// shared members were read by proportional share is `pss` (its other
/// members share nothing, so their own pages are their share); on macOS,
/// `phys_footprint` throughout.
fn weaker(a: Basis, b: Basis, shared: bool) -> Basis {
    match (a, b) {
        (Basis::PhysFootprint, _) | (_, Basis::PhysFootprint) => Basis::PhysFootprint,
        (Basis::Pss, _) | (_, Basis::Pss) if shared => Basis::Pss,
        _ => a,
    }
}

/// What the last snapshot's jobs were, so that the workers of a root that
/// ends stay its job (see [`Lineage::assemble`]): each member's root, and each
/// root's name and kind (an ended root's as it was last seen). Entries
/// exist only for members of the last snapshot's jobs.
#[derive(Debug, Default)]
pub struct Lineage {
    /// Each member (the stand-in root of an orphaned job included) and the
    /// root of its job: the ended root for an orphaned job.
    root_of: HashMap<ProcessId, ProcessId>,
    roots: HashMap<ProcessId, EndedRoot>,
}

impl Lineage {
    /// [`assemble`], then the workers of a root that has ended since the
    /// last snapshot (or before) kept together as its job; then remember
    /// this snapshot's jobs for the next.
    pub fn assemble(&mut self, snap: &mut Snapshot) {
        assemble(snap);
        self.adopt(snap);
        self.remember(snap);
    }

    /// The processes that were members of a job whose root is gone (no
    /// process with its pid and start time), and that no live job holds
    /// now (re-parented to init or a subreaper, they are no ML process's
    /// descendants), become one job again: its eldest member stands as the
    /// root, with the ended root named ([`Job::ended_root`]). Jobs that
    /// such a member rooted on its own are merged into it.
    fn adopt(&self, snap: &mut Snapshot) {
        if self.root_of.is_empty() {
            return;
        }
        // The remembered roots still alive. A zombie (no memory at all: it
        // has no address space left) has ended: its children were
        // re-parented as it exited, and its parent may take a while to reap
        // it.
        let alive: HashSet<ProcessId> = snap
            .processes
            .iter()
            .filter(|p| self.roots.contains_key(&p.id))
            .filter(|p| p.resident > 0 || p.footprint > 0)
            .map(|p| p.id)
            .collect();
        if alive.len() == self.roots.len() {
            return;
        }
        // Ended root → its members now (as indices into processes).
        let mut orphans: HashMap<ProcessId, Vec<usize>> = HashMap::new();
        for (i, p) in snap.processes.iter().enumerate() {
            let Some(root) = self.root_of.get(&p.id) else {
                continue;
            };
            if alive.contains(root) || !self.roots.contains_key(root) {
                continue;
            }
            // A worker of another live job now: that job holds it.
            let own_or_none = p.job.is_none_or(|r| r == p.id.pid);
            if own_or_none {
                orphans.entry(*root).or_default().push(i);
            }
        }
        if orphans.is_empty() {
            return;
        }
        let index: HashMap<u32, usize> = snap
            .processes
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id.pid, i))
            .collect();
        for (ended, mut list) in orphans {
            // The members of jobs an orphan rooted on its own come along.
            let rooted: Vec<u32> = list.iter().map(|&i| snap.processes[i].id.pid).collect();
            let mut merged: Vec<usize> = Vec::new();
            snap.jobs.retain(|j| {
                if rooted.contains(&j.pid()) {
                    merged.extend(j.members.iter().filter_map(|m| index.get(m).copied()));
                    false
                } else {
                    true
                }
            });
            list.extend(merged);
            list.sort_unstable();
            list.dedup();
            let procs = &snap.processes;
            let Some(&heir) = list
                .iter()
                .min_by_key(|&&i| (procs[i].id.start, procs[i].id.pid))
            else {
                continue;
            };
            list.sort_by_key(|&i| (i != heir, procs[i].id.pid));
            let facts = self.roots[&ended].clone();
            let heir_pid = procs[heir].id.pid;
            let words = format!(
                "{} {}, which ended",
                describe_kind(facts.kind),
                facts.id.pid
            );
            for &i in &list {
                let p = &mut snap.processes[i];
                p.job = Some(heir_pid);
                mark_orphan(p, &words, i == heir);
            }
            let mut job = total(&snap.processes, heir, &list);
            job.ended_root = Some(facts);
            snap.jobs.push(job);
        }
        snap.jobs
            .sort_by(|a, b| b.footprint.cmp(&a.footprint).then(a.root.cmp(&b.root)));
    }

    /// This snapshot's jobs, for the next snapshot's [`Self::adopt`].
    fn remember(&mut self, snap: &Snapshot) {
        let mut root_of = HashMap::new();
        let mut roots = HashMap::new();
        for job in &snap.jobs {
            let root = match &job.ended_root {
                Some(ended) => {
                    roots.insert(ended.id, ended.clone());
                    ended.id
                }
                None => {
                    if job.workers() == 0 {
                        continue;
                    }
                    let Some(p) = snap.process(job.pid()) else {
                        continue;
                    };
                    roots.insert(
                        p.id,
                        EndedRoot {
                            id: p.id,
                            name: p.name.clone(),
                            kind: p.workload.kind,
                        },
                    );
                    job.root
                }
            };
            for pid in &job.members {
                if let Some(p) = snap.process(*pid).filter(|p| p.id != root) {
                    root_of.insert(p.id, root);
                }
            }
        }
        self.root_of = root_of;
        self.roots = roots;
    }
}

/// `jupyter kernel`, `pytorch process`: a root's kind as a worker's
/// evidence names it.
fn describe_kind(kind: WorkloadKind) -> &'static str {
    match kind {
        WorkloadKind::Jupyter => "jupyter kernel",
        WorkloadKind::LlmServer => "model server",
        WorkloadKind::Pytorch => "pytorch process",
        WorkloadKind::Tensorflow => "tensorflow process",
        WorkloadKind::Jax => "jax process",
        WorkloadKind::Mlx => "mlx process",
        WorkloadKind::Python => "python process",
        WorkloadKind::Other => "process",
    }
}

/// Mark `p` a member of the job of an ended root (`root_words`), standing
/// for it (`heir`) or not.
fn mark_orphan(p: &mut ProcessSample, root_words: &str, heir: bool) {
    let w = &mut p.workload;
    w.evidence.retain(|e| !e.starts_with(WORKER_EVIDENCE));
    let how = if heir {
        "its eldest surviving member, standing for it"
    } else {
        "re-parented when it ended"
    };
    w.evidence
        .push(format!("{WORKER_EVIDENCE}{root_words}: {how}"));
    if w.kind == WorkloadKind::Jupyter {
        not_a_kernel(w);
    }
}

/// A sampler whose snapshots carry their jobs, the workers of an ended root
/// kept together ([`Lineage`]).
pub struct WithJobs(Box<dyn Sampler>, Lineage);

impl Sampler for WithJobs {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        let mut snap = self.0.sample()?;
        self.1.assemble(&mut snap);
        Ok(snap)
    }

    fn sample_light(&mut self, watched: &[u32]) -> Result<Snapshot, SampleError> {
        let mut snap = self.0.sample_light(watched)?;
        self.1.assemble(&mut snap);
        Ok(snap)
    }

    fn sample_unless(
        &mut self,
        watched: &[u32],
        trip: &crate::model::sampling::Tripwire,
    ) -> Result<(Snapshot, bool), SampleError> {
        let (mut snap, full) = self.0.sample_unless(watched, trip)?;
        self.1.assemble(&mut snap);
        Ok((snap, full))
    }

    fn collectors(&self) -> Vec<&dyn crate::model::Collector> {
        self.0.collectors()
    }
}

/// `sampler`, its snapshots carrying their jobs.
pub fn with_jobs(sampler: Box<dyn Sampler>) -> Box<dyn Sampler> {
    Box::new(WithJobs(sampler, Lineage::default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Framework;
    use crate::model::build::{kernel, process, snapshot};

    const MIB: u64 = 1 << 20;

    /// A kernel (pid 100, under a Jupyter server 50) and `n` forked copies
    /// of it, each carrying the kernel's command line.
    fn notebook_with_workers(n: u32) -> Snapshot {
        let server = process(50)
            .ppid(1)
            .name("jupyter-lab")
            .kind(WorkloadKind::Python);
        let k = kernel(100)
            .ppid(50)
            .kernel_id("abc")
            .notebook("train.ipynb")
            .footprint(300 * MIB)
            .basis(Basis::Pss);
        let mut s = snapshot(0).process(server).process(k);
        for i in 0..n {
            s = s.process(
                kernel(200 + i)
                    .ppid(100)
                    .kernel_id("abc")
                    .frameworks([Framework::Pytorch])
                    .footprint(90 * MIB)
                    .basis(Basis::Pss),
            );
        }
        s.build()
    }

    /// `notebook_with_workers(3)`'s workers, forked (as samplers read
    /// them), after their kernel ended: re-parented to init, 201 the
    /// eldest; `extra` more processes.
    fn orphans_of_the_kernel(extra: Vec<crate::model::build::ProcessBuilder>) -> Snapshot {
        let mut s = snapshot(1000).process(
            process(50)
                .ppid(1)
                .name("jupyter-lab")
                .kind(WorkloadKind::Python),
        );
        for (pid, start) in [(200, 5), (201, 3), (202, 5)] {
            s = s.process(
                kernel(pid)
                    .ppid(1)
                    .start(start)
                    .forked(true)
                    .kernel_id("abc")
                    .frameworks([Framework::Pytorch])
                    .footprint(90 * MIB)
                    .basis(Basis::Pss),
            );
        }
        for p in extra {
            s = s.process(p);
        }
        s.build()
    }

    /// `notebook_with_workers(3)` as a sampler reads it: the workers forked,
    /// 201 the eldest (the start times of [`orphans_of_the_kernel`]).
    fn forked_notebook() -> Snapshot {
        let mut s = notebook_with_workers(3);
        for p in s.processes.iter_mut().filter(|p| p.id.pid >= 200) {
            p.forked = true;
            p.id.start = if p.id.pid == 201 { 3 } else { 5 };
        }
        s
    }

    #[test]
    fn the_workers_of_a_kernel_that_ended_stay_its_job_under_their_eldest() {
        let mut lineage = Lineage::default();
        let mut before = forked_notebook();
        lineage.assemble(&mut before);
        assert_eq!(before.job(100).unwrap().workers(), 3);

        // The kernel is gone (the OOM killer, kill -9); its workers are
        // init's children now, and a new process took its pid.
        let reused = process(100).ppid(1).start(99).name("bash");
        let mut after = orphans_of_the_kernel(vec![reused]);
        lineage.assemble(&mut after);
        let jobs: Vec<&Job> = after.jobs.iter().filter(|j| j.workers() > 0).collect();
        assert_eq!(jobs.len(), 1, "one job, not three: {:#?}", after.jobs);
        let job = jobs[0];
        assert_eq!(job.pid(), 201, "the eldest stands as the root");
        assert_eq!(job.members, vec![201, 200, 202]);
        assert_eq!(job.footprint, 270 * MIB);
        let ended = job.ended_root.as_ref().expect("the ended root named");
        assert_eq!(
            (ended.id.pid, ended.id.start, ended.kind),
            (100, 1, WorkloadKind::Jupyter)
        );
        // Every member, the one standing for the kernel too, is a worker.
        assert_eq!(job.worker_pids().collect::<Vec<_>>(), vec![201, 200, 202]);
        for pid in [200, 201, 202] {
            let p = after.process(pid).unwrap();
            assert_eq!(p.job, Some(201));
            assert_eq!(p.workload.kind, WorkloadKind::Pytorch, "not a kernel");
            assert!(
                p.workload
                    .evidence
                    .iter()
                    .any(|e| e.contains("jupyter kernel 100, which ended")),
                "{:?}",
                p.workload.evidence
            );
        }
        assert_eq!(
            after.process(100).unwrap().job,
            None,
            "the new pid 100 is no member"
        );

        // It stays so on the next samples; when the eldest ends, the next
        // one stands for the kernel.
        let mut again = orphans_of_the_kernel(Vec::new());
        lineage.assemble(&mut again);
        assert_eq!(again.jobs.iter().filter(|j| j.workers() > 0).count(), 1);
        assert_eq!(again.job(201).unwrap().members.len(), 3);
        let mut later = orphans_of_the_kernel(Vec::new());
        later.processes.retain(|p| p.id.pid != 201);
        lineage.assemble(&mut later);
        let job = later.job(200).expect("200 stands for it now");
        assert_eq!(job.members, vec![200, 202]);
        assert_eq!(job.ended_root.as_ref().unwrap().id.pid, 100);
    }

    #[test]
    fn a_kernel_left_a_zombie_has_ended_for_its_workers() {
        let mut lineage = Lineage::default();
        let mut before = forked_notebook();
        lineage.assemble(&mut before);
        // Killed, not reaped yet: listed with its identity and no memory.
        let zombie = kernel(100)
            .ppid(50)
            .kernel_id("abc")
            .footprint(0)
            .resident(0);
        let mut after = orphans_of_the_kernel(vec![zombie]);
        lineage.assemble(&mut after);
        let job = after.job(201).expect("the orphans' job");
        assert_eq!(job.members, vec![201, 200, 202]);
        assert_eq!(job.ended_root.as_ref().unwrap().id.pid, 100);
        assert_eq!(
            after.process(100).unwrap().job,
            Some(100),
            "the zombie is alone"
        );
    }

    #[test]
    fn workers_of_a_live_kernel_are_not_adopted_and_a_lone_process_is_no_orphan() {
        let mut lineage = Lineage::default();
        let mut s = notebook_with_workers(2);
        lineage.assemble(&mut s);
        let mut again = notebook_with_workers(2);
        lineage.assemble(&mut again);
        let job = again.job(100).unwrap();
        assert_eq!(job.ended_root, None);
        assert_eq!(job.members, vec![100, 200, 201]);
        // A root without workers leaves nothing to adopt when it ends.
        let mut alone = snapshot(0)
            .process(kernel(300).ppid(1).footprint(MIB))
            .build();
        lineage.assemble(&mut alone);
        let mut gone = snapshot(1000)
            .process(process(301).ppid(1).kind(WorkloadKind::Python))
            .build();
        lineage.assemble(&mut gone);
        assert!(gone.jobs.iter().all(|j| j.ended_root.is_none()));
    }

    #[test]
    fn only_the_topmost_kernel_is_the_kernel_and_its_forks_are_workers() {
        let mut s = notebook_with_workers(8);
        assemble(&mut s);
        let k = s.process(100).unwrap();
        assert_eq!(k.workload.kind, WorkloadKind::Jupyter);
        assert_eq!(k.workload.kernel_id.as_deref(), Some("abc"));
        assert_eq!(k.job, Some(100));
        for pid in 200..208 {
            let w = s.process(pid).unwrap();
            assert_eq!(w.job, Some(100));
            assert_eq!(w.workload.kind, WorkloadKind::Pytorch);
            assert_eq!(w.workload.kernel_id, None);
            assert_eq!(w.workload.notebook, None);
            assert!(
                w.workload
                    .evidence
                    .contains(&"worker of jupyter kernel 100: its parent".to_string()),
                "{:?}",
                w.workload.evidence
            );
        }
        // The Jupyter server above the kernel is not ML: no job.
        assert_eq!(s.process(50).unwrap().job, None);
    }

    #[test]
    fn a_job_adds_its_members_up_root_first() {
        let mut s = notebook_with_workers(8);
        assemble(&mut s);
        assert_eq!(s.jobs.len(), 1);
        let j = &s.jobs[0];
        assert_eq!(j.pid(), 100);
        assert_eq!(j.members[0], 100);
        assert_eq!(j.workers(), 8);
        assert_eq!(j.footprint, 300 * MIB + 8 * 90 * MIB);
        assert_eq!(j.basis, Basis::Pss);
    }

    #[test]
    fn assembling_twice_gives_the_same_jobs() {
        let mut s = notebook_with_workers(3);
        assemble(&mut s);
        let once = s.clone();
        assemble(&mut s);
        assert_eq!(s, once);
    }

    #[test]
    fn grandchildren_belong_to_the_root_through_a_shell() {
        let mut s = snapshot(0)
            .process(
                process(10)
                    .ppid(1)
                    .name("torchrun")
                    .kind(WorkloadKind::Pytorch),
            )
            .process(process(11).ppid(10).name("sh").kind(WorkloadKind::Other))
            .process(
                process(12)
                    .ppid(11)
                    .name("python3")
                    .kind(WorkloadKind::Pytorch),
            )
            .build();
        assemble(&mut s);
        assert_eq!(s.jobs.len(), 1);
        assert_eq!(s.jobs[0].members, vec![10, 11, 12]);
        let rank = s.process(12).unwrap();
        assert_eq!(rank.workload.kind, WorkloadKind::Pytorch);
        assert!(
            rank.workload
                .evidence
                .contains(&"worker of pytorch process 10: an ancestor (through parent 11)".into())
        );
    }

    #[test]
    fn processes_outside_any_ml_tree_have_no_job_and_separate_roots_make_separate_jobs() {
        let mut s = snapshot(0)
            .process(process(2).ppid(1).name("bash"))
            .process(process(3).ppid(2).name("vim"))
            .process(
                process(20)
                    .ppid(2)
                    .name("ollama")
                    .kind(WorkloadKind::LlmServer)
                    .footprint(MIB),
            )
            .process(
                process(21)
                    .ppid(20)
                    .name("ollama")
                    .kind(WorkloadKind::LlmServer)
                    .footprint(4 * MIB),
            )
            .process(kernel(30).ppid(2).footprint(2 * MIB))
            .build();
        assemble(&mut s);
        assert_eq!(s.process(3).unwrap().job, None);
        let pids: Vec<u32> = s.jobs.iter().map(|j| j.pid()).collect();
        assert_eq!(pids, vec![20, 30], "largest first");
        assert_eq!(s.job(20).unwrap().footprint, 5 * MIB);
        // A runner stays a model server: only kernels' forks lose their kind.
        assert_eq!(
            s.process(21).unwrap().workload.kind,
            WorkloadKind::LlmServer
        );
    }

    #[test]
    fn a_forked_copy_of_a_kernel_is_not_a_kernel_once_orphaned() {
        let mut orphan = kernel(300).ppid(1).kernel_id("abc").build();
        orphan.forked = true;
        let mut s = snapshot(0).process(orphan).build();
        assemble(&mut s);
        let p = s.process(300).unwrap();
        assert_eq!(p.workload.kind, WorkloadKind::Python);
        assert_eq!(p.workload.kernel_id, None);
        assert!(s.jobs.is_empty(), "plain Python starts no job");
    }

    #[test]
    fn a_loop_in_the_parent_links_ends() {
        let mut s = snapshot(0)
            .process(process(5).ppid(6).kind(WorkloadKind::Pytorch))
            .process(process(6).ppid(5).kind(WorkloadKind::Pytorch))
            .build();
        assemble(&mut s);
        let roots: usize = s.jobs.len();
        assert!(roots >= 1);
        assert!(s.processes.iter().all(|p| p.job.is_some()));
    }

    #[test]
    fn gpu_memory_adds_up_where_known() {
        let mut s = snapshot(0)
            .process(
                process(10)
                    .ppid(1)
                    .kind(WorkloadKind::Pytorch)
                    .gpu_memory(3 * MIB),
            )
            .process(process(11).ppid(10).kind(WorkloadKind::Pytorch))
            .process(
                process(12)
                    .ppid(10)
                    .kind(WorkloadKind::Pytorch)
                    .gpu_memory(MIB),
            )
            .build();
        assemble(&mut s);
        assert_eq!(s.jobs[0].gpu_memory, Some(4 * MIB));
    }
}
