//! Who a process belongs to, as its cgroup says: a Kubernetes pod and its
//! container, a Docker, containerd or Podman container, a Slurm job, a
//! systemd unit.
//!
//! The ids (a pod's UID, a container's id, a job's number, a unit's name)
//! are read from the process's cgroup path, which any user may read; the
//! names of pods, namespaces and containers are looked up in the files the
//! kubelet and Docker keep (`crate::sample::labels`). Every process of one
//! cgroup shares one [`Labels`]: a clone copies a pointer.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The container runtime a cgroup path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    Docker,
    Containerd,
    CriO,
    Podman,
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Docker => "docker",
            Runtime::Containerd => "containerd",
            Runtime::CriO => "cri-o",
            Runtime::Podman => "podman",
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a process's cgroup says about it. Every field is `None` where the
/// path does not say (a process outside every container) or a name could
/// not be found (a pod whose kubelet directory is gone).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSet {
    /// The Kubernetes namespace of the pod, from the kubelet's log
    /// directories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The pod's name, from the kubelet's log directories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The pod's UID, from the cgroup path (dashed, as `kubectl` shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    /// The container's name: in a pod, the name the pod spec gives it (from
    /// the kubelet's log links); outside Kubernetes, Docker's name for it
    /// (`config.v2.json`), without Docker's leading `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The container's id (64 hex digits), from the cgroup path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// The runtime that made the container, where the path names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// The Slurm job's id, from the cgroup path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<String>,
    /// The job step: a number, `batch`, `extern` or `interactive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_step: Option<String>,
    /// The innermost systemd service or scope on the path above any
    /// container, e.g. `jupyter-alice.service`, `session-3.scope`; at most
    /// a user's service manager (`user@1000.service`), below which the
    /// user names the units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The innermost systemd slice above that unit, e.g. `user-1000.slice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<String>,
    /// The names (`namespace`, `pod`, `container`) came from a directory
    /// other users may not list (Docker's is root's alone): the HTTP
    /// surface shows them only to whoever may see the process's command
    /// line.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private_names: bool,
}

impl LabelSet {
    /// Nothing known.
    pub fn is_empty(&self) -> bool {
        *self == LabelSet::default()
    }

    /// The set without the names a viewer may not see (see
    /// [`LabelSet::private_names`]): ids, job and unit stay.
    pub fn without_private_names(&self) -> LabelSet {
        if !self.private_names {
            return self.clone();
        }
        LabelSet {
            namespace: None,
            pod: None,
            container: None,
            private_names: false,
            ..self.clone()
        }
    }

    /// One line for people: `pod ml/train-0 container trainer`,
    /// `container jupyter-alice (docker 3f2a9c1b7d0e)`, `slurm job 42 step
    /// 0`, `unit jupyter-alice.service`; empty when nothing is known.
    /// Names are checked when looked up, but show this through
    /// [`crate::model::printable`] all the same.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        match (&self.namespace, &self.pod, &self.pod_uid) {
            (Some(ns), Some(pod), _) => parts.push(format!("pod {ns}/{pod}")),
            (_, _, Some(uid)) => parts.push(format!("pod uid {uid}")),
            _ => {}
        }
        let short_id = self
            .container_id
            .as_deref()
            .map(|id| &id[..id.len().min(12)]);
        match (&self.container, short_id, self.runtime) {
            (Some(name), Some(id), Some(rt)) => parts.push(format!("container {name} ({rt} {id})")),
            (Some(name), Some(id), None) => parts.push(format!("container {name} ({id})")),
            (Some(name), None, _) => parts.push(format!("container {name}")),
            (None, Some(id), Some(rt)) => parts.push(format!("{rt} container {id}")),
            (None, Some(id), None) => parts.push(format!("container {id}")),
            (None, None, _) => {}
        }
        if let Some(job) = &self.slurm_job {
            match &self.slurm_step {
                Some(step) => parts.push(format!("slurm job {job} step {step}")),
                None => parts.push(format!("slurm job {job}")),
            }
        }
        // A unit says little more where a container or job was named (a
        // container's own scope, slurmstepd's).
        if parts.is_empty() {
            match (&self.unit, &self.slice) {
                (Some(unit), _) => parts.push(format!("unit {unit}")),
                (None, Some(slice)) => parts.push(format!("slice {slice}")),
                (None, None) => {}
            }
        }
        parts.join(" ")
    }
}

/// A [`LabelSet`] shared by every process of one cgroup; serialized as the
/// set itself.
#[derive(Clone, PartialEq, Eq)]
pub struct Labels(Arc<LabelSet>);

impl Labels {
    pub fn new(set: LabelSet) -> Self {
        Self(Arc::new(set))
    }

    /// Whether `a` and `b` are clones of one allocation (not only equal).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl From<LabelSet> for Labels {
    fn from(set: LabelSet) -> Self {
        Self::new(set)
    }
}

impl Deref for Labels {
    type Target = LabelSet;
    fn deref(&self) -> &LabelSet {
        &self.0
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        LabelSet::deserialize(deserializer).map(Self::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f2a9c1b7d0e5f64a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718";

    #[test]
    fn a_pod_container_reads_as_namespace_pod_and_container() {
        let set = LabelSet {
            namespace: Some("ml".into()),
            pod: Some("train-0".into()),
            pod_uid: Some("18d34ce4-50c7-452c-9df8-53c4a3fdf363".into()),
            container: Some("trainer".into()),
            container_id: Some(ID.into()),
            runtime: Some(Runtime::Containerd),
            unit: Some("cri-containerd-x.scope".into()),
            ..LabelSet::default()
        };
        assert_eq!(
            set.summary(),
            "pod ml/train-0 container trainer (containerd 3f2a9c1b7d0e)"
        );
    }

    #[test]
    fn a_pod_without_names_shows_its_uid_and_container_id() {
        let set = LabelSet {
            pod_uid: Some("18d34ce4-50c7-452c-9df8-53c4a3fdf363".into()),
            container_id: Some(ID.into()),
            ..LabelSet::default()
        };
        assert_eq!(
            set.summary(),
            "pod uid 18d34ce4-50c7-452c-9df8-53c4a3fdf363 container 3f2a9c1b7d0e"
        );
    }

    #[test]
    fn a_slurm_job_and_a_unit_read_as_such() {
        let job = LabelSet {
            slurm_job: Some("42".into()),
            slurm_step: Some("batch".into()),
            unit: Some("slurmstepd.scope".into()),
            ..LabelSet::default()
        };
        assert_eq!(job.summary(), "slurm job 42 step batch");
        let unit = LabelSet {
            unit: Some("jupyter-alice.service".into()),
            slice: Some("system.slice".into()),
            ..LabelSet::default()
        };
        assert_eq!(unit.summary(), "unit jupyter-alice.service");
        assert_eq!(LabelSet::default().summary(), "");
        assert!(LabelSet::default().is_empty());
    }

    #[test]
    fn private_names_are_left_out_and_ids_kept() {
        let set = LabelSet {
            container: Some("jupyter-alice".into()),
            container_id: Some(ID.into()),
            runtime: Some(Runtime::Docker),
            private_names: true,
            ..LabelSet::default()
        };
        let public = set.without_private_names();
        assert_eq!(public.container, None);
        assert_eq!(public.container_id.as_deref(), Some(ID));
        assert!(!public.private_names);
        let open = LabelSet {
            private_names: false,
            ..set.clone()
        };
        assert_eq!(open.without_private_names(), open);
    }

    #[test]
    fn labels_serialize_as_the_set_without_empty_fields() {
        let labels = Labels::new(LabelSet {
            slurm_job: Some("42".into()),
            ..LabelSet::default()
        });
        let json = serde_json::to_string(&labels).unwrap();
        assert_eq!(json, r#"{"slurm_job":"42"}"#);
        let back: Labels = serde_json::from_str(&json).unwrap();
        assert_eq!(back, labels);
        assert!(Labels::ptr_eq(&labels, &labels.clone()));
    }
}
