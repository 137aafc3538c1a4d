//! The framework environment of each ML process: which versions of
//! TensorFlow, tensorflow-metal, Keras, PyTorch, JAX, MLX and the CUDA
//! runtime its interpreter loads, and whether they go together.
//!
//! [`with_environments`] wraps a sampler. For each ML process it finds the
//! `site-packages` directories its interpreter uses ([`site_dirs`]: those
//! of the libraries it maps, else from its interpreter's path), has them
//! read on a thread of its own ([`reader`]: as the process's owner may read
//! them, bounded, cached per directory until it changes), and adds to the
//! process's workload evidence what was found and what does not go
//! together ([`compat`]):
//!
//! - `site-packages /…/lib/python3.9/site-packages holds tensorflow-macos 2.9.2, tensorflow-metal 0.6.0`
//! - `unsupported: tensorflow-metal 0.6.0 with tensorflow-macos 2.9.2: unsupported pair (…; see https://developer.apple.com/metal/tensorflow-plugin/)`
//! - `limited: nvidia-cuda-runtime-cu12 12.4.127 with a driver for CUDA 12.2: …`
//!
//! The lines quote paths under the owner's home: the HTTP surface shows
//! them to root and the owner only, as all evidence that is not public.
//! [`problems`] picks the last two kinds out of a workload, for
//! post-mortems; [`doctor_checks`] reads the environments of a snapshot's
//! ML processes at once, for `headroom doctor`.
//!
//! The sampler never waits for a read: a directory on a file system that
//! hangs holds up the reading thread only, and the sampler sends it nothing
//! more while a request is out ([`STUCK`] says when that is reported).
//! Each directory is asked about again at most every [`RECHECK`].

pub mod compat;
pub mod metadata;
pub mod reader;
pub mod site_dirs;
pub mod version;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use crate::model::sampling::{SampleError, Sampler};
use crate::model::{Check, CheckStatus, Collector, CollectorStatus, ProcessSample, Snapshot};
use compat::{Context, Finding, Severity};
use metadata::MarkerEnv;
use reader::{Cache, EnvRead};

/// How often one directory is asked about again (its modification time
/// tells the reading thread whether to read it again).
pub const RECHECK: Duration = Duration::from_secs(30);

/// A request out longer than this is reported: the reading thread is held
/// up (a directory on a file system that does not answer).
pub const STUCK: Duration = Duration::from_secs(60);

/// Directories asked about in one request, at most.
pub const MAX_REQUEST: usize = 16;

/// Directories whose reads are kept, at most; past it, no new ones are
/// asked about until old ones are let go.
pub const MAX_KNOWN: usize = 512;

/// A directory no process used for this long is let go.
const FORGET: Duration = Duration::from_secs(600);

/// How long `headroom doctor` waits for the reads.
pub const DOCTOR_WAIT: Duration = Duration::from_secs(10);

/// Most packages one evidence line lists.
const LISTED: usize = 8;

/// How an evidence line listing a directory's packages begins.
pub const HOLDS: &str = "site-packages ";
/// How an evidence line about an unsupported pair begins.
pub const UNSUPPORTED: &str = "unsupported: ";
/// How an evidence line about a pair that runs with limits begins.
pub const LIMITED: &str = "limited: ";

/// One directory as one owner sees it.
type Key = (String, u32);

/// What a verdict depends on besides the reads: a process's directories
/// (which give its Python), the driver's CUDA version, translation.
type VerdictKey = (Vec<Key>, Option<(u64, u64)>, bool);

/// The problems the environment lines of `workload`'s evidence name
/// (unsupported pairs, then limited ones, as found).
pub fn problems(workload: &crate::model::Workload) -> impl Iterator<Item = &str> {
    workload
        .evidence
        .iter()
        .map(String::as_str)
        .filter(|e| e.starts_with(UNSUPPORTED) || e.starts_with(LIMITED))
}

/// `sampler` with each ML process's framework environment in its evidence.
pub fn with_environments(sampler: Box<dyn Sampler>) -> Box<dyn Sampler> {
    Box::new(Environments {
        inner: sampler,
        known: HashMap::new(),
        verdicts: HashMap::new(),
        worker: None,
        out_since: None,
        seen_any: false,
        last: Tally::default(),
    })
}

/// A read as the sampler keeps it.
struct Known {
    read: Arc<EnvRead>,
    asked: Instant,
    used: Instant,
}

/// The reading thread's two ends.
struct Worker {
    requests: SyncSender<Vec<Key>>,
    answers: Receiver<Vec<(Key, Arc<EnvRead>)>>,
}

/// What the last sample found, for the collector's status.
#[derive(Debug, Default, Clone)]
struct Tally {
    processes: usize,
    dirs: usize,
    unsupported: usize,
    unreadable: usize,
    first_problem: Option<String>,
    thread_error: Option<String>,
}

struct Environments {
    inner: Box<dyn Sampler>,
    known: HashMap<Key, Known>,
    /// Verdicts by directories, CUDA version and translation, until the
    /// next read comes back.
    verdicts: HashMap<VerdictKey, Arc<Verdict>>,
    worker: Option<Worker>,
    /// When the request now out was sent.
    out_since: Option<Instant>,
    /// A sample has had an ML process with a directory to read.
    seen_any: bool,
    last: Tally,
}

impl Environments {
    fn finish(&mut self, mut snap: Snapshot, full: bool) -> Snapshot {
        let now = Instant::now();
        self.take_answers(now);
        let cuda = cuda_driver(&snap);
        let mut due: Vec<Key> = Vec::new();
        let mut tally = Tally {
            thread_error: self.last.thread_error.take(),
            ..Tally::default()
        };
        for p in snap.processes.iter_mut().filter(|p| p.workload.is_ml()) {
            let keys = keys_of(p);
            if keys.is_empty() {
                continue;
            }
            tally.processes += 1;
            let mut reads = Vec::new();
            let keys_now = keys.clone();
            for key in keys {
                match self.known.get_mut(&key) {
                    Some(k) => {
                        k.used = now;
                        if now.duration_since(k.asked) >= RECHECK && !due.contains(&key) {
                            due.push(key.clone());
                        }
                        reads.push(Arc::clone(&k.read));
                    }
                    None if !due.contains(&key) => due.push(key),
                    None => {}
                }
            }
            // The same directories give the same verdict until a read
            // comes back: worked out once, not per process per sample.
            let translated = crate::workload::is_translated(&p.workload);
            let memo_key = (keys_now, cuda, translated);
            let v = match self.verdicts.get(&memo_key) {
                Some(v) => Arc::clone(v),
                None => {
                    let v = Arc::new(verdict(&candidates_of(p), &reads, cuda, translated));
                    if self.verdicts.len() >= MAX_KNOWN {
                        self.verdicts.clear();
                    }
                    self.verdicts.insert(memo_key, Arc::clone(&v));
                    v
                }
            };
            p.workload.evidence.extend(v.lines.iter().cloned());
            tally.unsupported += v
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Unsupported)
                .count();
        }
        for k in self.known.values() {
            if k.used == now && !k.read.missing {
                tally.dirs += 1;
                if let Some(problem) = &k.read.problem {
                    tally.unreadable += 1;
                    tally
                        .first_problem
                        .get_or_insert_with(|| format!("{}: {problem}", k.read.dir));
                }
            }
        }
        self.seen_any |= tally.processes > 0;
        if full {
            self.known
                .retain(|_, k| now.duration_since(k.used) < FORGET);
        }
        due.truncate(MAX_REQUEST);
        if self.known.len() >= MAX_KNOWN {
            due.retain(|k| self.known.contains_key(k));
        }
        if !due.is_empty() && self.out_since.is_none() {
            self.send(due, now, &mut tally);
        }
        self.last = tally;
        snap
    }

    fn take_answers(&mut self, now: Instant) {
        let Some(worker) = &self.worker else {
            return;
        };
        loop {
            match worker.answers.try_recv() {
                Ok(answers) => {
                    self.out_since = None;
                    self.verdicts.clear();
                    for (key, read) in answers {
                        let used = self.known.get(&key).map_or(now, |k| k.used);
                        self.known.insert(
                            key,
                            Known {
                                read,
                                asked: now,
                                used,
                            },
                        );
                    }
                }
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.worker = None;
                    self.out_since = None;
                    self.last.thread_error = Some("the reading thread ended".to_owned());
                    return;
                }
            }
        }
    }

    fn send(&mut self, due: Vec<Key>, now: Instant, tally: &mut Tally) {
        if self.worker.is_none() {
            match spawn_worker() {
                Ok(w) => self.worker = Some(w),
                Err(e) => {
                    tally.thread_error = Some(format!("cannot start the reading thread: {e}"));
                    return;
                }
            }
        }
        let Some(worker) = &self.worker else {
            return;
        };
        match worker.requests.try_send(due) {
            Ok(()) => self.out_since = Some(now),
            Err(mpsc::TrySendError::Full(_)) => {}
            Err(mpsc::TrySendError::Disconnected(_)) => {
                self.worker = None;
            }
        }
    }
}

/// The thread that reads directories, a request at a time, with its cache.
fn spawn_worker() -> std::io::Result<Worker> {
    let (requests, rx) = mpsc::sync_channel::<Vec<Key>>(1);
    let (tx, answers) = mpsc::channel();
    std::thread::Builder::new()
        .name("headroom-envs".to_owned())
        .spawn(move || {
            crate::os::this_process::run_in_background();
            let mut cache = Cache::default();
            while let Ok(keys) = rx.recv() {
                let reads = keys
                    .into_iter()
                    .map(|(dir, owner)| {
                        let (read, _) = cache.get(&dir, owner);
                        ((dir, owner), read)
                    })
                    .collect();
                if tx.send(reads).is_err() {
                    return;
                }
            }
        })?;
    Ok(Worker { requests, answers })
}

/// The directories of `p` to read, each with the uid to read it as; none
/// where the owner is not known.
fn keys_of(p: &ProcessSample) -> Vec<Key> {
    let Some(uid) = p.uid else {
        return Vec::new();
    };
    candidates_of(p).into_iter().map(|c| (c.dir, uid)).collect()
}

fn candidates_of(p: &ProcessSample) -> Vec<site_dirs::Candidate> {
    let mapped: Vec<&str> = p.site_packages.iter().map(|s| &**s).collect();
    site_dirs::candidates(
        p.exe.as_deref(),
        p.argv.first().map(String::as_str),
        &mapped,
    )
}

/// The CUDA version the snapshot's NVIDIA driver supports, where known.
fn cuda_driver(snap: &Snapshot) -> Option<(u64, u64)> {
    snap.gpus.iter().find_map(|g| {
        let (major, minor) = g.cuda_version.as_deref()?.split_once('.')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    })
}

/// What one process's directories say: its evidence lines (what each
/// directory holds, then each finding) and the findings.
#[derive(Debug, Default)]
struct Verdict {
    lines: Vec<String>,
    findings: Vec<Finding>,
}

/// The verdict on `reads` (the directories of `candidates` that were read,
/// most trusted first) for a process that runs translated or not, under a
/// driver for CUDA `cuda`.
fn verdict(
    candidates: &[site_dirs::Candidate],
    reads: &[Arc<EnvRead>],
    cuda: Option<(u64, u64)>,
    translated: bool,
) -> Verdict {
    let mut v = Verdict::default();
    let mut packages: Vec<compat::Installed> = Vec::new();
    let mut python = None;
    for read in reads
        .iter()
        .filter(|r| !r.missing && !r.packages.is_empty())
    {
        let listed: Vec<String> = read
            .packages
            .iter()
            .take(LISTED)
            .map(|i| format!("{} {}", i.name, i.version))
            .collect();
        let more = if read.packages.len() > LISTED {
            ", …"
        } else {
            ""
        };
        v.lines.push(format!(
            "{HOLDS}{} holds {}{more}",
            read.dir,
            listed.join(", ")
        ));
        if python.is_none() {
            python = candidates
                .iter()
                .find(|c| c.dir == read.dir)
                .and_then(|c| c.python);
        }
        for i in &read.packages {
            // The first directory on the path wins, as Python's import does.
            if !packages.iter().any(|q| q.name == i.name) {
                packages.push(i.clone());
            }
        }
    }
    if packages.is_empty() {
        return v;
    }
    let python_version = python.map(|(a, b)| format!("{a}.{b}"));
    let ctx = Context {
        python,
        cuda_driver: cuda,
        markers: marker_env(python_version.as_deref(), translated),
    };
    v.findings = compat::check(&packages, &ctx);
    for f in &v.findings {
        let prefix = match f.severity {
            Severity::Unsupported => UNSUPPORTED,
            Severity::Limited => LIMITED,
        };
        v.lines.push(format!("{prefix}{}", f.text));
    }
    v
}

/// Add to `p`'s evidence what `reads` (its directories, most trusted
/// first) hold and what does not go together; the findings.
fn annotate(
    p: &mut ProcessSample,
    reads: &[Arc<EnvRead>],
    cuda: Option<(u64, u64)>,
) -> Vec<Finding> {
    let translated = crate::workload::is_translated(&p.workload);
    let v = verdict(&candidates_of(p), reads, cuda, translated);
    p.workload.evidence.extend(v.lines);
    v.findings
}

/// What markers may ask of this machine: the OS is this daemon's (it sees
/// only processes of its own OS); the machine is its architecture under
/// Python's name for it, or x86_64 for a process Rosetta 2 translates.
fn marker_env(python_version: Option<&str>, translated: bool) -> MarkerEnv<'_> {
    let (sys_platform, platform_system) = match std::env::consts::OS {
        "macos" => (Some("darwin"), Some("Darwin")),
        "linux" => (Some("linux"), Some("Linux")),
        _ => (None, None),
    };
    let machine = match (std::env::consts::OS, std::env::consts::ARCH) {
        _ if translated => "x86_64",
        ("macos", "aarch64") => "arm64",
        (_, arch) => arch,
    };
    MarkerEnv {
        python_version,
        sys_platform,
        platform_system,
        platform_machine: Some(machine),
    }
}

impl Sampler for Environments {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        let snap = self.inner.sample()?;
        Ok(self.finish(snap, true))
    }

    fn sample_light(&mut self, watched: &[u32]) -> Result<Snapshot, SampleError> {
        let snap = self.inner.sample_light(watched)?;
        Ok(self.finish(snap, false))
    }

    fn sample_unless(
        &mut self,
        watched: &[u32],
        trip: &crate::model::sampling::Tripwire,
    ) -> Result<(Snapshot, bool), SampleError> {
        let (snap, full) = self.inner.sample_unless(watched, trip)?;
        Ok((self.finish(snap, full), full))
    }

    fn collectors(&self) -> Vec<&dyn Collector> {
        let mut sources = self.inner.collectors();
        sources.push(self);
        sources
    }
}

impl Collector for Environments {
    fn name(&self) -> &'static str {
        "environments"
    }

    /// Reported once a sample had an ML process with a directory to read.
    fn status(&self) -> Option<CollectorStatus> {
        if !self.seen_any {
            return None;
        }
        let t = &self.last;
        let stuck = self.out_since.is_some_and(|since| since.elapsed() >= STUCK);
        let mut detail = format!(
            "{} Python environment(s) of {} ML process(es) read, {} unsupported pair(s)",
            t.dirs, t.processes, t.unsupported
        );
        if let Some(p) = &t.first_problem {
            detail.push_str(&format!("; {} not read whole, e.g. {p}", t.unreadable));
        }
        if stuck {
            detail.push_str(&format!(
                "; a read has been under way for more than {} s (a directory on a file system that does not answer?)",
                STUCK.as_secs()
            ));
        }
        if let Some(e) = &t.thread_error {
            detail.push_str(&format!("; {e}"));
        }
        Some(CollectorStatus {
            name: "environments".to_owned(),
            up: !stuck && t.thread_error.is_none(),
            detail: crate::model::printable(&detail).into_owned(),
            errors: t.unreadable as u64,
            applicable: true,
        })
    }

    /// `headroom doctor` reads the environments itself
    /// ([`doctor_checks`]): one sample has no answers yet.
    fn doctor_check(&self) -> Option<Check> {
        None
    }
}

/// What [`annotate_now`] found for one process.
#[derive(Debug, Clone)]
pub struct Annotated {
    /// Its index in the snapshot's processes.
    pub index: usize,
    /// Directories read for it (not counting those that do not exist).
    pub dirs: usize,
    /// The CUDA runtime wheels it holds (`nvidia-cuda-runtime-cu12 12.1.105`).
    pub cuda_wheels: Vec<String>,
    pub findings: Vec<Finding>,
}

/// Read the environments of `snap`'s ML processes now (on a thread,
/// waited for at most [`DOCTOR_WAIT`]) and add to their evidence what
/// [`with_environments`] adds: for a command that samples once
/// (`headroom doctor`, `headroom explain` without a daemon), where the
/// sampler's own reads have not come back yet. Evidence already there is
/// not repeated.
pub fn annotate_now(snap: &mut Snapshot) -> Vec<Annotated> {
    let mut keys: Vec<Key> = Vec::new();
    for p in snap.processes.iter().filter(|p| p.workload.is_ml()) {
        for k in keys_of(p) {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let reads = read_now(keys);
    let cuda = cuda_driver(snap);
    let mut out = Vec::new();
    for (index, p) in snap.processes.iter_mut().enumerate() {
        if !p.workload.is_ml() {
            continue;
        }
        let Some(uid) = p.uid else { continue };
        let mine: Vec<Arc<EnvRead>> = candidates_of(p)
            .into_iter()
            .filter_map(|c| reads.get(&(c.dir, uid)).cloned())
            .collect();
        let mut cuda_wheels = Vec::new();
        for r in &mine {
            for i in r
                .packages
                .iter()
                .filter(|i| compat::is_cuda_runtime(&i.name))
            {
                cuda_wheels.push(format!("{} {}", i.name, i.version));
            }
        }
        p.workload.evidence.retain(|e| {
            !e.starts_with(HOLDS) && !e.starts_with(UNSUPPORTED) && !e.starts_with(LIMITED)
        });
        let findings = annotate(p, &mine, cuda);
        out.push(Annotated {
            index,
            dirs: mine.iter().filter(|r| !r.missing).count(),
            cuda_wheels,
            findings,
        });
    }
    out
}

/// `headroom doctor`'s lines: the environments of `snap`'s ML processes,
/// read now ([`annotate_now`]); a warning per process with a pair that does
/// not go together, else one line that says what was read.
pub fn doctor_checks(snap: &Snapshot) -> Vec<Check> {
    let mut snap = snap.clone();
    let found = annotate_now(&mut snap);
    if found.is_empty() {
        return vec![Check::not_applicable(
            "framework-env",
            "no ML process running: no framework environment to check",
        )];
    }
    let cuda = cuda_driver(&snap);
    let mut checks = Vec::new();
    for a in found.iter().filter(|a| !a.findings.is_empty()) {
        let p = &snap.processes[a.index];
        let texts: Vec<&str> = a.findings.iter().map(|f| f.text.as_str()).collect();
        let status = if a
            .findings
            .iter()
            .any(|f| f.severity == Severity::Unsupported)
        {
            CheckStatus::Warn
        } else {
            CheckStatus::Ok
        };
        checks.push(Check::new(
            status,
            "framework-env",
            format!(
                "pid {} ({}): {}",
                p.id.pid,
                crate::model::printable(&p.name),
                texts.join("; ")
            ),
            (status == CheckStatus::Warn).then_some(
                "install versions that go together (the source named in the line says which), then restart the process",
            ),
        ));
    }
    if checks.is_empty() {
        let dirs: usize = found.iter().map(|a| a.dirs).sum();
        let mut detail = format!(
            "{dirs} Python environment(s) read for {} ML process(es): no unsupported pair",
            found.len()
        );
        let mut wheels: Vec<&str> = found
            .iter()
            .flat_map(|a| a.cuda_wheels.iter().map(String::as_str))
            .collect();
        wheels.sort_unstable();
        wheels.dedup();
        if !wheels.is_empty() && cuda.is_none() {
            detail.push_str(&format!(
                "; {} not judged against the driver: no driver (NVML gave no CUDA version)",
                wheels.join(", ")
            ));
        }
        checks.push(Check::ok("framework-env", detail));
    }
    checks
}

/// Read `keys` on a thread of their own, waiting at most [`DOCTOR_WAIT`]
/// for all of them; what did not come in time is left out.
fn read_now(keys: Vec<Key>) -> HashMap<Key, Arc<EnvRead>> {
    let (tx, rx) = mpsc::channel();
    let n = keys.len();
    let spawned = std::thread::Builder::new()
        .name("headroom-envs".to_owned())
        .spawn(move || {
            crate::os::this_process::run_in_background();
            let mut cache = Cache::default();
            for (dir, owner) in keys {
                let (read, _) = cache.get(&dir, owner);
                if tx.send(((dir, owner), read)).is_err() {
                    return;
                }
            }
        });
    let mut out = HashMap::new();
    if spawned.is_err() {
        return out;
    }
    let deadline = Instant::now() + DOCTOR_WAIT;
    while out.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((k, r)) => {
                out.insert(k, r);
            }
            Err(_) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::build::{process, snapshot};
    use crate::model::{Framework, WorkloadKind};

    /// A Jupyter kernel running TensorFlow from the environment at `root`
    /// (its interpreter `root/bin/python3.9`), owned by this test's user.
    fn kernel(root: &std::path::Path, pid: u32) -> ProcessSample {
        let exe = root.join("bin/python3.9");
        process(pid)
            .name("python3.9")
            .exe(exe.to_str().unwrap())
            .argv([
                exe.to_str().unwrap(),
                "-m",
                "ipykernel_launcher",
                "-f",
                "/tmp/kernel-1.json",
            ])
            .uid(crate::os::this_process::effective_uid())
            .kind(WorkloadKind::Jupyter)
            .frameworks([Framework::Tensorflow])
            .build()
    }

    /// A sampler that hands out copies of one snapshot.
    struct Fixed(Snapshot);

    impl Sampler for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }
        fn sample(&mut self) -> Result<Snapshot, SampleError> {
            Ok(self.0.clone())
        }
        fn sample_light(&mut self, _: &[u32]) -> Result<Snapshot, SampleError> {
            Ok(self.0.clone())
        }
        fn collectors(&self) -> Vec<&dyn Collector> {
            Vec::new()
        }
    }

    #[test]
    fn an_unsupported_pair_reaches_the_evidence_without_holding_up_a_sample() {
        let root = tempfile::tempdir().unwrap();
        reader::tests::site_packages(root.path(), "0.6.0");
        let snap = snapshot(0).process(kernel(root.path(), 40)).build();
        let mut s = with_environments(Box::new(Fixed(snap)));
        // The first sample asks; the answer comes with a later one.
        let first = s.sample().unwrap();
        assert!(problems(&first.processes[0].workload).next().is_none());
        let mut evidence = Vec::new();
        for _ in 0..500 {
            let snap = s.sample().unwrap();
            evidence = snap.processes[0].workload.evidence.clone();
            if !evidence.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let sp = root.path().join("lib/python3.9/site-packages");
        assert_eq!(
            evidence,
            [
                format!(
                    "site-packages {} holds tensorflow-macos 2.9.2, tensorflow-metal 0.6.0",
                    sp.display()
                ),
                format!(
                    "unsupported: tensorflow-metal 0.6.0 with tensorflow-macos 2.9.2: unsupported pair (tensorflow-metal 0.6 is published for TensorFlow 2.10; see {})",
                    compat::APPLE_METAL_URL
                ),
            ]
        );
        // Evidence does not pile up from sample to sample.
        let again = s.sample().unwrap();
        assert_eq!(again.processes[0].workload.evidence.len(), 2);
        let status = s
            .collectors()
            .iter()
            .find_map(|c| (c.name() == "environments").then(|| c.status()))
            .flatten()
            .unwrap();
        assert!(status.up);
        assert!(
            status.detail.contains("1 unsupported pair(s)"),
            "{}",
            status.detail
        );
    }

    #[test]
    fn doctor_names_the_process_and_the_pair() {
        let root = tempfile::tempdir().unwrap();
        reader::tests::site_packages(root.path(), "0.6.0");
        let snap = snapshot(0).process(kernel(root.path(), 41)).build();
        let checks = doctor_checks(&snap);
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].status, CheckStatus::Warn);
        assert!(
            checks[0]
                .detail
                .starts_with("pid 41 (python3.9): tensorflow-metal 0.6.0 with tensorflow-macos 2.9.2: unsupported pair"),
            "{}",
            checks[0].detail
        );
        // The pair Apple publishes: one line saying what was read.
        let good = tempfile::tempdir().unwrap();
        reader::tests::site_packages(good.path(), "0.5.0");
        let snap = snapshot(0).process(kernel(good.path(), 42)).build();
        let checks = doctor_checks(&snap);
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].status, CheckStatus::Ok);
        assert_eq!(
            checks[0].detail,
            "1 Python environment(s) read for 1 ML process(es): no unsupported pair"
        );
        let none = doctor_checks(&snapshot(0).build());
        assert_eq!(none[0].status, CheckStatus::NotApplicable);
    }

    #[test]
    fn cuda_wheels_without_a_driver_say_no_driver() {
        let root = tempfile::tempdir().unwrap();
        let sp = root.path().join("lib/python3.11/site-packages");
        let d = sp.join("nvidia_cuda_runtime_cu12-12.1.105.dist-info");
        std::fs::create_dir_all(&d).unwrap();
        // The head of nvidia_cuda_runtime_cu12-12.1.105's METADATA as the
        // wheel on PyPI has it (name and version lines).
        std::fs::write(
            d.join("METADATA"),
            "Metadata-Version: 2.1\nName: nvidia-cuda-runtime-cu12\nVersion: 12.1.105\n",
        )
        .unwrap();
        let exe = root.path().join("bin/python3.11");
        let p = process(43)
            .name("python3.11")
            .exe(exe.to_str().unwrap())
            .uid(crate::os::this_process::effective_uid())
            .kind(WorkloadKind::Pytorch)
            .build();
        let checks = doctor_checks(&snapshot(0).process(p.clone()).build());
        assert!(
            checks[0].detail.ends_with(
                "nvidia-cuda-runtime-cu12 12.1.105 not judged against the driver: no driver (NVML gave no CUDA version)"
            ),
            "{}",
            checks[0].detail
        );
        // With a driver for CUDA 11.8 the runtime is too new.
        let mut gpu = crate::model::GpuDevice {
            index: 0,
            name: "GPU".to_owned(),
            uuid: None,
            memory_total: None,
            memory_used: None,
            utilization: None,
            memory_reserved: None,
            processes: Vec::new(),
            cuda_version: Some("11.8".to_owned()),
        };
        let mut snap = snapshot(0).process(p).build();
        snap.gpus.push(gpu.clone());
        let checks = doctor_checks(&snap);
        assert_eq!(checks[0].status, CheckStatus::Warn);
        assert!(
            checks[0]
                .detail
                .contains("with a driver for CUDA 11.8: unsupported pair")
        );
        gpu.cuda_version = Some("12.4".to_owned());
        snap.gpus = vec![gpu];
        assert_eq!(doctor_checks(&snap)[0].status, CheckStatus::Ok);
    }

    #[test]
    fn problems_are_the_unsupported_and_limited_lines() {
        let w = crate::model::Workload {
            evidence: vec![
                "argv[2] is ipykernel_launcher".to_owned(),
                "site-packages /x holds keras 3.3.3".to_owned(),
                "unsupported: a".to_owned(),
                "limited: b".to_owned(),
            ],
            ..crate::model::Workload::default()
        };
        assert_eq!(
            problems(&w).collect::<Vec<_>>(),
            ["unsupported: a", "limited: b"]
        );
    }
}
