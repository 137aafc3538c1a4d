//! Labels: who each process belongs to, from its cgroup.
//!
//! A process's cgroup path ([`crate::model::ProcessSample::cgroup`]) names
//! a Kubernetes pod and its container, a Docker, containerd, CRI-O or
//! Podman container, a Slurm job, a systemd unit ([`cgroup_path`]); the
//! kubelet's log directories name the pod, its namespace and the container
//! ([`kubelet`]), and Docker's own files a Docker container ([`docker`]).

pub mod cgroup_path;
pub mod docker;
pub mod kubelet;
