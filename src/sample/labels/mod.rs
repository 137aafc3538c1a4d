//! Labels: who each process belongs to, from its cgroup.
//!
//! A process's cgroup path ([`crate::model::ProcessSample::cgroup`]) names
//! a Kubernetes pod and its container, a Docker, containerd, CRI-O or
//! Podman container, a Slurm job, a systemd unit ([`cgroup_path`]); the
//! kubelet's log directories name the pod, its namespace and the container
//! ([`kubelet`]), and Docker's own files a Docker container ([`docker`]).
//! [`with_labels`] wraps a sampler so that every snapshot's processes
//! carry their [`Labels`].
//!
//! Work is done per distinct cgroup, never per process per sample: the
//! [`Labeller`] keeps one entry per cgroup path of the live processes. A
//! path seen for the first time is parsed, and its names looked up; every
//! process of that cgroup then shares the entry's [`Labels`] (a pointer
//! copied), sample after sample. Entries of cgroups no process is in any
//! more are dropped after each sample, so the table holds at most one
//! entry per live cgroup. A name not found (a pod whose directory the
//! kubelet has not made yet, a name another kind of runtime keeps) is
//! looked up again after [`RETRY`], while its cgroup lives. A sample looks
//! up at most [`LOOKUPS_PER_SAMPLE`] new cgroups; the rest carry their ids
//! alone until the next sample: whoever can make cgroups by the thousand
//! cannot make one sample read thousands of files.

pub mod cgroup_path;
pub mod docker;
pub mod kubelet;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::config::LabelsConfig;
use crate::model::{Collector, CollectorStatus, LabelSet, Labels, SharedStr, Snapshot};

use super::{SampleError, Sampler};

/// How long before names not found are looked up again.
pub const RETRY: Duration = Duration::from_secs(10);

/// The most cgroups whose names one sample looks up.
pub const LOOKUPS_PER_SAMPLE: usize = 64;

/// One cgroup's labels and when to look its names up again.
#[derive(Debug)]
struct Entry {
    /// `None` where the path says nothing.
    labels: Option<Labels>,
    /// What the path alone says.
    parsed: LabelSet,
    /// Names are still to be looked up (never looked up, or not all found).
    pending: bool,
    /// Not before then.
    retry_at: Option<Instant>,
    /// The sample that last saw a process in this cgroup.
    seen: u64,
}

/// The labels of every live cgroup, and where names are looked up.
#[derive(Debug)]
pub struct Labeller {
    enabled: bool,
    cgroups: HashMap<SharedStr, Entry>,
    kubelet: kubelet::KubeletNames,
    docker: docker::DockerNames,
    sample: u64,
    /// Names looked up since start (cgroups, not processes).
    lookups: u64,
    /// Cgroups left for a later sample because this one had done
    /// [`LOOKUPS_PER_SAMPLE`], since start.
    deferred: u64,
}

impl Labeller {
    /// Reading names where `config` says; directories that anyone but root
    /// (or `trusted_uid`, the daemon's own) could change are refused.
    pub fn new(config: &LabelsConfig, trusted_uid: u32) -> Self {
        Self {
            enabled: config.enabled,
            cgroups: HashMap::new(),
            kubelet: kubelet::KubeletNames::new(
                LabelsConfig::dir(&config.pods_log_dir),
                LabelsConfig::dir(&config.containers_log_dir),
                trusted_uid,
            ),
            docker: docker::DockerNames::new(
                LabelsConfig::dir(&config.docker_containers_dir),
                trusted_uid,
            ),
            sample: 0,
            lookups: 0,
            deferred: 0,
        }
    }

    /// Set every process's labels from its cgroup, `now` deciding which
    /// names are due to be looked up again.
    pub fn label(&mut self, snap: &mut Snapshot, now: Instant) {
        if !self.enabled {
            return;
        }
        self.sample += 1;
        let mut budget = LOOKUPS_PER_SAMPLE;
        for p in &mut snap.processes {
            let Some(path) = &p.cgroup else {
                p.labels = None;
                continue;
            };
            // Interned paths: the key's clone copies a pointer.
            let entry = self
                .cgroups
                .entry(path.clone())
                .or_insert_with(|| Entry::parse(path));
            entry.seen = self.sample;
            let due = entry.pending && entry.retry_at.is_none_or(|at| now >= at);
            if due {
                if budget > 0 {
                    budget -= 1;
                    self.lookups += 1;
                    resolve(entry, &mut self.kubelet, &mut self.docker, now);
                } else {
                    self.deferred += 1;
                }
            }
            p.labels = entry.labels.clone();
        }
        let sample = self.sample;
        self.cgroups.retain(|_, e| e.seen == sample);
    }

    /// How labelling stands, for `/metrics`, the API and `headroom doctor`:
    /// up unless a directory that exists was refused or unreadable; not
    /// applicable where none of them exists (no kubelet, no Docker) and
    /// labels come from cgroup paths alone.
    pub fn status(&self) -> CollectorStatus {
        let mut detail = if self.enabled {
            format!(
                "{} cgroups of live processes, names looked up {} times",
                self.cgroups.len(),
                self.lookups
            )
        } else {
            "turned off ([labels] enabled = false)".to_string()
        };
        if self.deferred > 0 {
            detail.push_str(&format!(
                ", {} look-ups left for a later sample (at most {LOOKUPS_PER_SAMPLE} a sample)",
                self.deferred
            ));
        }
        for part in self.kubelet.describe() {
            detail.push_str("; ");
            detail.push_str(&part);
        }
        detail.push_str("; ");
        detail.push_str(&self.docker.describe());
        let problems = self.kubelet.problems().len() + usize::from(self.docker.problem().is_some());
        CollectorStatus {
            name: "labels".to_string(),
            up: self.enabled && problems == 0,
            detail,
            errors: self.docker.failed,
            applicable: self.enabled && (self.kubelet.present() || self.docker.present()),
        }
    }

    /// Cgroups with an entry now.
    pub fn cgroups(&self) -> usize {
        self.cgroups.len()
    }
}

impl Entry {
    fn parse(path: &str) -> Entry {
        let parsed = cgroup_path::parse(path);
        // Names exist only for pods and containers.
        let pending = parsed.pod_uid.is_some() || parsed.container_id.is_some();
        let labels = (!parsed.is_empty()).then(|| Labels::new(parsed.clone()));
        Entry {
            labels,
            parsed,
            pending,
            retry_at: None,
            seen: 0,
        }
    }
}

/// Look up the names of `entry`'s pod or container.
fn resolve(
    entry: &mut Entry,
    kubelet: &mut kubelet::KubeletNames,
    docker: &mut docker::DockerNames,
    now: Instant,
) {
    let mut set = entry.parsed.clone();
    let complete = if let Some(uid) = set.pod_uid.clone() {
        let names = kubelet.lookup(&uid, set.container_id.as_deref());
        set.namespace = names.namespace;
        set.pod = names.pod;
        set.container = names.container;
        set.private_names = names.private;
        // A pod's sandbox has no log link: its pod named is all there is.
        set.pod.is_some()
    } else if let Some(id) = set.container_id.clone() {
        match docker.lookup(&id) {
            Some((name, private)) => {
                set.container = Some(name);
                set.private_names = private;
                true
            }
            None => false,
        }
    } else {
        true
    };
    entry.pending = !complete;
    entry.retry_at = (!complete).then(|| now + RETRY);
    let changed = entry.labels.as_deref() != Some(&set);
    if changed {
        entry.labels = Some(Labels::new(set));
    }
}

/// `sampler` with every snapshot's processes labelled, as `config` says,
/// and the labeller among its collectors, reporting once a sample had a
/// process with a cgroup (Linux).
pub fn with_labels(sampler: Box<dyn Sampler>, config: &LabelsConfig) -> Box<dyn Sampler> {
    Box::new(Labelled {
        inner: sampler,
        labeller: Labeller::new(config, crate::os::this_process::effective_uid()),
        cgroups_seen: false,
    })
}

struct Labelled {
    inner: Box<dyn Sampler>,
    labeller: Labeller,
    /// The last sample had a process with a cgroup: labels apply here.
    cgroups_seen: bool,
}

impl Labelled {
    fn finish(&mut self, mut snap: Snapshot) -> Snapshot {
        self.labeller.label(&mut snap, Instant::now());
        self.cgroups_seen = snap.processes.iter().any(|p| p.cgroup.is_some());
        snap
    }
}

impl Sampler for Labelled {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        let snap = self.inner.sample()?;
        Ok(self.finish(snap))
    }

    fn sample_light(&mut self, watched: &[u32]) -> Result<Snapshot, SampleError> {
        let snap = self.inner.sample_light(watched)?;
        Ok(self.finish(snap))
    }

    fn sample_unless(
        &mut self,
        watched: &[u32],
        trip: &crate::model::sampling::Tripwire,
    ) -> Result<(Snapshot, bool), SampleError> {
        let (snap, full) = self.inner.sample_unless(watched, trip)?;
        Ok((self.finish(snap), full))
    }

    fn collectors(&self) -> Vec<&dyn Collector> {
        let mut sources = self.inner.collectors();
        sources.push(self);
        sources
    }
}

impl Collector for Labelled {
    fn name(&self) -> &'static str {
        "labels"
    }

    fn status(&self) -> Option<CollectorStatus> {
        self.cgroups_seen.then(|| self.labeller.status())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::build::{process, snapshot};
    use crate::model::{ProcessSample, Runtime};
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    const UID: &str = "18d34ce4-50c7-452c-9df8-53c4a3fdf363";
    const ID: &str = "a684bbdd0c4b6937b5ece9713bed661305ab0de570eb12b7c28a032aaf602937";

    /// A kubelet's directories under a private directory of the checkout,
    /// holding pod `ml/train-0` and its container `trainer`.
    fn kubelet_root() -> tempfile::TempDir {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
        std::fs::create_dir_all(&base).unwrap();
        let root = tempfile::tempdir_in(&base).unwrap();
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let pods = root.path().join("pods");
        let containers = root.path().join("containers");
        std::fs::create_dir(&pods).unwrap();
        std::fs::create_dir(&containers).unwrap();
        std::fs::create_dir(pods.join(format!("ml_train-0_{UID}"))).unwrap();
        std::fs::write(containers.join(format!("train-0_ml_trainer-{ID}.log")), "").unwrap();
        root
    }

    fn config(root: &Path) -> LabelsConfig {
        LabelsConfig {
            enabled: true,
            pods_log_dir: root.join("pods"),
            containers_log_dir: root.join("containers"),
            docker_containers_dir: root.join("docker"),
        }
    }

    fn in_cgroup(pid: u32, path: &str) -> ProcessSample {
        let mut p: ProcessSample = process(pid).into();
        p.cgroup = Some(SharedStr::from(path));
        p
    }

    fn trusted_uid() -> u32 {
        crate::os::this_process::effective_uid()
    }

    #[test]
    fn processes_of_one_pod_share_one_entry_looked_up_once() {
        let root = kubelet_root();
        if crate::os::trusted_path::check_path(root.path(), trusted_uid()).is_err() {
            // A checkout below a directory others can write: the refusal
            // is tested below; nothing here would be read.
            return;
        }
        let mut labeller = Labeller::new(&config(root.path()), trusted_uid());
        let path = format!("/kubepods/burstable/pod{UID}/{ID}");
        let shared = SharedStr::from(path.as_str());
        let mut snap = snapshot(0)
            .process(in_cgroup(10, &path))
            .process(in_cgroup(11, &path))
            .process(process(12))
            .build();
        snap.processes[1].cgroup = Some(shared.clone());
        labeller.label(&mut snap, Instant::now());
        let a = snap.processes[0].labels.clone().expect("labelled");
        let b = snap.processes[1].labels.clone().expect("labelled");
        assert!(Labels::ptr_eq(&a, &b), "one cgroup, one allocation");
        assert_eq!(a.namespace.as_deref(), Some("ml"));
        assert_eq!(a.pod.as_deref(), Some("train-0"));
        assert_eq!(a.container.as_deref(), Some("trainer"));
        assert_eq!(a.container_id.as_deref(), Some(ID));
        assert!(
            !a.private_names,
            "the kubelet's directories are readable by all"
        );
        assert_eq!(snap.processes[2].labels, None, "no cgroup, no labels");
        assert_eq!(labeller.lookups, 1);
        // The next sample looks nothing up and hands out the same labels.
        labeller.label(&mut snap, Instant::now());
        assert_eq!(labeller.lookups, 1);
        assert!(Labels::ptr_eq(
            &a,
            snap.processes[0].labels.as_ref().unwrap()
        ));
        // The cgroup's processes gone, its entry goes.
        let mut empty = snapshot(0).process(process(12)).build();
        labeller.label(&mut empty, Instant::now());
        assert_eq!(labeller.cgroups(), 0);
    }

    #[test]
    fn a_name_not_found_is_looked_up_again_after_a_while() {
        let root = kubelet_root();
        if crate::os::trusted_path::check_path(root.path(), trusted_uid()).is_err() {
            return;
        }
        let mut labeller = Labeller::new(&config(root.path()), trusted_uid());
        let other = "ffffffff-50c7-452c-9df8-53c4a3fdf363";
        let other_id = "f".repeat(64);
        let path = format!("/kubepods/pod{other}/{other_id}");
        let mut snap = snapshot(0).process(in_cgroup(10, &path)).build();
        let t0 = Instant::now();
        labeller.label(&mut snap, t0);
        let labels = snap.processes[0].labels.clone().unwrap();
        assert_eq!(labels.pod_uid.as_deref(), Some(other));
        assert_eq!(labels.pod, None);
        labeller.label(&mut snap, t0 + Duration::from_secs(1));
        assert_eq!(labeller.lookups, 1, "not again before RETRY");
        // The kubelet makes the pod's directory.
        std::fs::create_dir(root.path().join(format!("pods/ml_late-0_{other}"))).unwrap();
        labeller.label(&mut snap, t0 + RETRY);
        assert_eq!(labeller.lookups, 2);
        let labels = snap.processes[0].labels.clone().unwrap();
        assert_eq!(labels.pod.as_deref(), Some("late-0"));
    }

    #[test]
    fn one_sample_looks_up_a_bounded_number_of_cgroups() {
        let root = kubelet_root();
        let mut labeller = Labeller::new(&config(root.path()), trusted_uid());
        let mut b = snapshot(0);
        for i in 0..(LOOKUPS_PER_SAMPLE as u32 + 10) {
            let id = format!("{:064x}", i + 1);
            b = b.process(in_cgroup(100 + i, &format!("/docker/{id}")));
        }
        let mut snap = b.build();
        labeller.label(&mut snap, Instant::now());
        assert_eq!(labeller.lookups, LOOKUPS_PER_SAMPLE as u64);
        assert_eq!(labeller.deferred, 10);
        // Every process carries its ids at once, looked up or not.
        assert!(snap.processes.iter().all(|p| {
            p.labels
                .as_ref()
                .is_some_and(|l| l.runtime == Some(Runtime::Docker) && l.container_id.is_some())
        }));
    }

    #[test]
    fn directories_others_can_change_are_refused_and_said_so() {
        let root = kubelet_root();
        for dir in ["pods", "containers"] {
            std::fs::set_permissions(
                root.path().join(dir),
                std::fs::Permissions::from_mode(0o777),
            )
            .unwrap();
        }
        let mut labeller = Labeller::new(&config(root.path()), trusted_uid());
        let path = format!("/kubepods/burstable/pod{UID}/{ID}");
        let mut snap = snapshot(0).process(in_cgroup(10, &path)).build();
        labeller.label(&mut snap, Instant::now());
        let labels = snap.processes[0].labels.clone().unwrap();
        assert_eq!(
            labels.namespace, None,
            "not read from a directory anyone can write"
        );
        assert_eq!(labels.pod_uid.as_deref(), Some(UID));
        let status = labeller.status();
        assert!(!status.up);
        assert!(status.detail.contains("not read: "), "{}", status.detail);
    }

    #[test]
    fn turned_off_labels_nothing() {
        let root = kubelet_root();
        let mut labeller = Labeller::new(
            &LabelsConfig {
                enabled: false,
                ..config(root.path())
            },
            trusted_uid(),
        );
        let mut snap = snapshot(0)
            .process(in_cgroup(10, "/user.slice/user-1000.slice/session-3.scope"))
            .build();
        labeller.label(&mut snap, Instant::now());
        assert_eq!(snap.processes[0].labels, None);
        assert!(!labeller.status().applicable);
    }

    #[test]
    fn a_unit_or_job_needs_no_look_up() {
        let root = kubelet_root();
        let mut labeller = Labeller::new(&config(root.path()), trusted_uid());
        let mut snap = snapshot(0)
            .process(in_cgroup(
                10,
                "/system.slice/slurmstepd.scope/job_42/step_0/user/task_0",
            ))
            .process(in_cgroup(
                11,
                "/process_api/316bf4caa47d11faa6b2afeeb02cba16",
            ))
            .build();
        labeller.label(&mut snap, Instant::now());
        assert_eq!(labeller.lookups, 0);
        let job = snap.processes[0].labels.clone().unwrap();
        assert_eq!(
            (job.slurm_job.as_deref(), job.slurm_step.as_deref()),
            (Some("42"), Some("0"))
        );
        assert_eq!(snap.processes[1].labels, None, "a path of no known form");
    }
}
