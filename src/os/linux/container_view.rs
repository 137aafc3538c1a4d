//! What headroom can see from where it runs, for `headroom doctor`: whether
//! its `/proc` is the host's (all processes) or a container's (its own
//! only), and whether the memory-cgroup file system it sees lets it find
//! every process's limit.
//!
//! Run in a container without the host's PID namespace, headroom samples
//! the container's processes only; without the host's cgroup file system
//! (or in a cgroup namespace of its own) it cannot read the limits of the
//! cgroups other processes run in. Containers also see the host's
//! `/proc/meminfo`, so a tool inside one that reads only that takes the
//! machine's memory for its own: headroom reads each process's limit from
//! the cgroup file system, which is why it must see the host's.
//!
//! The facts are read by [`View::read`]; the judgement is pure
//! ([`processes_check`], [`cgroups_check`]) and tested on made-up views.

use crate::model::Check;
use crate::os::linux::parse::cgroupfs::{self, CgroupMounts, Hierarchy};
use crate::os::linux::parse::procfs;
use crate::report::format_bytes;

/// What the checks judge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Processes listed in `/proc`.
    pub pids: usize,
    /// Pid 2 is a kernel thread (`kthreadd`): kernel threads show only in
    /// the host's PID namespace, never in a container's.
    pub kernel_threads_visible: bool,
    /// Pid 1's command name.
    pub pid1: Option<String>,
    /// Pid 1's memory-cgroup path as `/proc/1/cgroup` shows it (`/..`
    /// first: outside this process's cgroup namespace).
    pub pid1_cgroup: Option<String>,
    /// This process's memory-cgroup path.
    pub own_cgroup: Option<String>,
    /// This process's own memory limit, where its cgroup has one.
    pub own_limit: Option<u64>,
    pub mounts: CgroupMounts,
    /// The machine's memory as `/proc/meminfo` says.
    pub meminfo_total: Option<u64>,
}

impl View {
    /// This machine as this process sees it.
    pub fn read() -> Self {
        let pids = std::fs::read_dir("/proc")
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| procfs::parse_pid(e.file_name().as_encoded_bytes()).is_some())
                    .count()
            })
            .unwrap_or(0);
        let kernel_threads_visible = std::fs::read("/proc/2/stat")
            .ok()
            .and_then(|d| procfs::parse_stat(&d).map(|s| s.is_kernel_thread()))
            .unwrap_or(false);
        let cgroup_of = |pid: &str| {
            std::fs::read(format!("/proc/{pid}/cgroup"))
                .ok()
                .and_then(|d| procfs::parse_memory_cgroup(&d).ok().map(str::to_owned))
        };
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .map(|t| cgroupfs::parse_mountinfo(&t))
            .unwrap_or_default();
        let own_cgroup = cgroup_of("self");
        // The tightest limit on its cgroup and those above it.
        let own_limit = own_cgroup.as_deref().and_then(|path| {
            let (h, mount) = mounts.memory()?;
            let files: &[&str] = match h {
                Hierarchy::V1 => &["memory.limit_in_bytes"],
                Hierarchy::V2 => &["memory.max", "memory.high"],
            };
            cgroupfs::levels(path)
                .filter_map(|level| cgroupfs::cgroup_dir(mount, level).ok())
                .flat_map(|dir| files.iter().map(move |f| dir.join(f)))
                .filter_map(|file| std::fs::read_to_string(file).ok())
                .filter_map(|text| cgroupfs::parse_limit(&text).ok().flatten())
                .min()
        });
        View {
            pids,
            kernel_threads_visible,
            pid1: std::fs::read_to_string("/proc/1/comm")
                .ok()
                .map(|s| s.trim().to_owned()),
            pid1_cgroup: cgroup_of("1"),
            own_cgroup,
            own_limit,
            mounts,
            meminfo_total: std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|t| procfs::parse_meminfo(&t).ok())
                .map(|m| m.total),
        }
    }
}

/// Whether headroom sees every process of the machine.
pub fn processes_check(v: &View) -> Check {
    let pid1 = crate::model::printable(v.pid1.as_deref().unwrap_or("unknown")).into_owned();
    if v.kernel_threads_visible {
        return Check::ok(
            "container",
            format!(
                "the host's PID namespace: {} processes in /proc, kernel threads included (pid 1 \
                 is {pid1})",
                v.pids
            ),
        );
    }
    Check::warn(
        "container",
        format!(
            "a PID namespace of its own (a container's: no kernel threads in /proc, pid 1 is \
             {pid1}): headroom sees the {} processes of its own container, not the machine's; \
             /proc/meminfo still gives the host's memory",
            v.pids
        ),
        "run it with the host's PID namespace: Kubernetes hostPID: true, docker run --pid=host",
    )
}

/// Whether headroom can read the memory limits of the processes it sees.
pub fn cgroups_check(v: &View) -> Check {
    let Some((h, mount)) = v.mounts.memory() else {
        return Check::warn(
            "cgroups",
            "no memory cgroup hierarchy is mounted: the limits processes run under (containers, \
             pods, Slurm jobs, systemd units) are not known, and every process is judged against \
             the machine's memory",
            "mount the cgroup file system; in a container, the host's /sys/fs/cgroup (read-only)",
        );
    };
    let what = match h {
        Hierarchy::V1 => "cgroup v1 memory",
        Hierarchy::V2 => "cgroup v2",
    };
    let at = mount.point.display();
    if mount.root != "/" {
        return Check::warn(
            "cgroups",
            format!(
                "{what} is mounted at {at} with root {}: only the cgroups below it are visible \
                 (a container's own), so the limits of other processes' cgroups are not known",
                crate::model::printable(&mount.root)
            ),
            "mount the host's cgroup file system: docker run --cgroupns=host -v \
             /sys/fs/cgroup:/sys/fs/cgroup:ro; Kubernetes: a hostPath volume of /sys/fs/cgroup",
        );
    }
    if v.pid1_cgroup
        .as_deref()
        .is_some_and(|p| p.starts_with("/.."))
    {
        return Check::warn(
            "cgroups",
            format!(
                "{what} at {at}, but headroom runs in a cgroup namespace of its own: pid 1's \
                 cgroup reads {}, outside it, so other processes' limits cannot be found",
                crate::model::printable(v.pid1_cgroup.as_deref().unwrap_or(""))
            ),
            "run it in the host's cgroup namespace: docker run --cgroupns=host; on Kubernetes \
             run the DaemonSet with hostPID and the host's /sys/fs/cgroup",
        );
    }
    let own = match (&v.own_cgroup, v.own_limit, v.meminfo_total) {
        (Some(path), Some(limit), Some(total)) if limit < total => format!(
            "; headroom's own cgroup {} is limited to {} while /proc/meminfo says {}: the \
             processes under a limit are judged against it, read from {at}",
            crate::model::printable(path),
            format_bytes(limit),
            format_bytes(total)
        ),
        (Some(path), _, _) => format!(
            "; headroom's own cgroup {} has no limit below the machine's memory",
            crate::model::printable(path)
        ),
        (None, _, _) => String::new(),
    };
    Check::ok(
        "cgroups",
        format!("{what} at {at}, the whole hierarchy visible: each process's limit is read{own}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CheckStatus;
    use crate::os::linux::parse::cgroupfs::CgroupMount;

    const GIB: u64 = 1 << 30;

    /// This project's test machine: a VM whose pid 1 is not an init system,
    /// the v1 memory hierarchy mounted whole.
    fn host() -> View {
        View {
            pids: 180,
            kernel_threads_visible: true,
            pid1: Some("process_api".into()),
            pid1_cgroup: Some("/".into()),
            own_cgroup: Some("/process_api/94afa55c08af25b76ab7b7d1f415db95".into()),
            own_limit: None,
            mounts: CgroupMounts {
                v1_memory: Some(CgroupMount {
                    root: "/".into(),
                    point: "/sys/fs/cgroup/memory".into(),
                }),
                v2: None,
            },
            meminfo_total: Some(24 * GIB),
        }
    }

    #[test]
    fn the_host_sees_everything() {
        let v = host();
        assert_eq!(processes_check(&v).status, CheckStatus::Ok);
        let c = cgroups_check(&v);
        assert_eq!(c.status, CheckStatus::Ok, "{c:?}");
        assert!(c.detail.contains("the whole hierarchy visible"), "{c:?}");
    }

    #[test]
    fn a_container_without_the_hosts_pid_namespace_says_what_it_misses() {
        let v = View {
            pids: 3,
            kernel_threads_visible: false,
            pid1: Some("python3".into()),
            ..host()
        };
        let c = processes_check(&v);
        assert_eq!(c.status, CheckStatus::Warn);
        assert!(
            c.detail.contains("the 3 processes of its own container"),
            "{c:?}"
        );
        assert!(c.next.unwrap().contains("hostPID: true"));
    }

    #[test]
    fn a_containers_own_cgroup_mount_hides_the_others_limits() {
        let mut v = host();
        v.mounts.v1_memory = None;
        v.mounts.v2 = Some(CgroupMount {
            root: "/kubepods/burstable/pod1/c1".into(),
            point: "/sys/fs/cgroup".into(),
        });
        let c = cgroups_check(&v);
        assert_eq!(c.status, CheckStatus::Warn);
        assert!(c.detail.contains("only the cgroups below it"), "{c:?}");
        // A private cgroup namespace: pid 1 outside it.
        let mut v = host();
        v.pid1_cgroup = Some("/../../system.slice/x".into());
        assert!(
            cgroups_check(&v)
                .detail
                .contains("cgroup namespace of its own")
        );
        // Nothing mounted.
        let mut v = host();
        v.mounts = CgroupMounts::default();
        assert!(
            cgroups_check(&v)
                .detail
                .starts_with("no memory cgroup hierarchy")
        );
    }

    #[test]
    fn a_limit_on_headroom_itself_is_set_beside_the_hosts_meminfo() {
        let mut v = host();
        v.own_limit = Some(2 * GIB);
        let c = cgroups_check(&v);
        assert!(
            c.detail
                .contains("is limited to 2.0 GiB while /proc/meminfo says 24.0 GiB"),
            "{c:?}"
        );
    }

    #[test]
    fn this_machine_is_read_without_failing() {
        let v = View::read();
        assert!(v.pids > 0);
        assert_ne!(processes_check(&v).status, CheckStatus::Fail);
        assert_ne!(cgroups_check(&v).status, CheckStatus::Fail);
    }
}
