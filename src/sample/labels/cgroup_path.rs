//! What a process's cgroup path says about who it belongs to: a Kubernetes
//! pod's UID and its container's id, a Docker, containerd, CRI-O or Podman
//! container's id, a Slurm job and step, a systemd unit and slice. Pure:
//! the path in, a [`LabelSet`] without names out (the names are looked up
//! elsewhere, `super::kubelet` and `super::docker`).
//!
//! The forms, as captured on real machines (`tests/fixtures/cgroup/paths.txt`
//! says where each came from):
//!
//! | who | cgroupfs driver | systemd driver |
//! |---|---|---|
//! | pod container | `/kubepods/burstable/pod<uid>/<id>` (Docker, containerd), `…/crio-<id>` (CRI-O) | `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/{docker,cri-containerd,crio}-<id>.scope`; kind: `/kubelet.slice/kubelet-kubepods.slice/…`; containerd on v1: `…/kubepods-besteffort-pod<uid_>.slice:cri-containerd:<id>` |
//! | Docker | `/docker/<id>` | `/system.slice/docker-<id>.scope` |
//! | Podman | `/libpod_parent/libpod-<id>` | `/machine.slice/libpod-<id>.scope` |
//! | Slurm | v1: `/slurm/uid_<n>/job_<n>/step_<s>/task_<n>` (`/slurm_<node>/…` for several slurmd) | v2: `/system.slice/slurmstepd.scope/job_<n>/step_<s>/user/task_<n>` (`<node>_slurmstepd.scope`) |
//! | systemd | | `/user.slice/user-1000.slice/session-3.scope`, `/system.slice/jupyterhub.service` |
//!
//! Root delegates subtrees (systemd's `Delegate=`: every user's service
//! manager, containers with their own cgroup tree), and a user who names a
//! cgroup `kubepods-pod<uid>.slice` must not pass a process off as someone's
//! pod. So the first (outermost) pod, container or Slurm job found is the
//! answer; nothing below `user@<uid>.service` is read; ids must have their
//! exact form (64 hex digits, a UUID, a static pod's hash, digits for jobs)
//! and unit names systemd's characters. A path beginning with `/..` (outside
//! the reader's cgroup namespace) is read after the `..`.

use crate::model::{LabelSet, Runtime};

/// Components read from the top of a path; the kernel's paths are far
/// shallower (`cgroup.max.depth` aside), and a hostile depth costs no more
/// than this.
const MAX_COMPONENTS: usize = 64;

/// The longest unit name systemd accepts (`UNIT_NAME_MAX`).
const MAX_UNIT_NAME: usize = 255;

/// What the next component may be, given the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Anything.
    Any,
    /// A pod's container, right below the pod.
    PodContainer,
    /// `uid_<n>`, below Slurm's v1 root.
    SlurmUid,
    /// `job_<n>`, below `uid_<n>` (v1) or slurmstepd's scope (v2).
    SlurmJob,
    /// `step_<s>`, below the job.
    SlurmStep,
    /// A Docker container's id, below `docker` (cgroupfs driver).
    DockerId,
    /// `libpod-<id>`, below `libpod_parent` (Podman, cgroupfs driver).
    PodmanId,
}

/// The labels a cgroup path gives (ids only; names are looked up later).
/// A path of no known form gives an empty set.
pub fn parse(path: &str) -> LabelSet {
    let mut set = LabelSet::default();
    let mut expect = Expect::Any;
    // Inside the kubelet's hierarchy (its root or a QoS class seen), where a
    // cgroupfs `pod<uid>` directory is a pod.
    let mut in_kubepods = false;
    // Leading `..` skipped: the path's true top is not known, and its first
    // real component may be a pod directly.
    let mut first_after_dots = false;
    let mut components = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .take(MAX_COMPONENTS)
        .peekable();
    while components.peek() == Some(&"..") {
        components.next();
        first_after_dots = true;
    }
    for (i, c) in components.enumerate() {
        let first = i == 0 && first_after_dots;
        if c == ".." {
            // The kernel writes `..` only at the start.
            break;
        }
        // A component that ended what the one before it began, read afresh.
        if expect != Expect::Any {
            match take_expected(&mut set, expect, c) {
                Step::Next(next) => {
                    expect = next;
                    continue;
                }
                Step::Done => break,
                Step::NotIt => expect = Expect::Any,
            }
        }
        if is_user_manager(c) {
            set.unit = Some(c.to_string());
            break;
        }
        if let Some((uid, rest)) = pod_slice(c) {
            set.pod_uid = Some(uid);
            set.unit = None;
            if let Some((runtime, id)) = rest {
                set.runtime = runtime;
                set.container_id = Some(id);
                break;
            }
            expect = Expect::PodContainer;
            track_unit(&mut set, c);
            continue;
        }
        if is_kubepods(c) {
            in_kubepods = true;
            track_unit(&mut set, c);
            continue;
        }
        if (in_kubepods || first)
            && let Some(uid) = c.strip_prefix("pod").and_then(|u| pod_uid(u, '-'))
        {
            set.pod_uid = Some(uid);
            expect = Expect::PodContainer;
            continue;
        }
        if c == "slurm" || c.strip_prefix("slurm_").is_some_and(|n| !n.is_empty()) {
            expect = Expect::SlurmUid;
            continue;
        }
        if c == "slurmstepd.scope" || c.ends_with("_slurmstepd.scope") {
            track_unit(&mut set, c);
            expect = Expect::SlurmJob;
            continue;
        }
        if c == "docker" {
            expect = Expect::DockerId;
            continue;
        }
        if c == "libpod_parent" {
            expect = Expect::PodmanId;
            continue;
        }
        if let Some((runtime, id)) = container_scope(c) {
            set.runtime = Some(runtime);
            set.container_id = Some(id);
            track_unit(&mut set, c);
            break;
        }
        track_unit(&mut set, c);
    }
    set
}

/// What became of a component that was expected to be something.
enum Step {
    /// It was; expect this next.
    Next(Expect),
    /// It was, and nothing below it is read.
    Done,
    /// It was not: read it as any component.
    NotIt,
}

fn take_expected(set: &mut LabelSet, expect: Expect, c: &str) -> Step {
    match expect {
        Expect::Any => Step::NotIt,
        Expect::PodContainer => {
            // Whatever is below a pod is its containers' (or its sandbox's):
            // nothing further down is read, whether or not this is one.
            if let Some((runtime, id)) = pod_container(c) {
                set.runtime = runtime;
                set.container_id = Some(id);
                if c.ends_with(".scope") {
                    set.unit = Some(c.to_string());
                }
            }
            Step::Done
        }
        Expect::SlurmUid => match c.strip_prefix("uid_") {
            Some(n) if is_number(n) => Step::Next(Expect::SlurmJob),
            _ => Step::NotIt,
        },
        Expect::SlurmJob => match c.strip_prefix("job_") {
            Some(n) if is_number(n) => {
                set.slurm_job = Some(n.to_string());
                Step::Next(Expect::SlurmStep)
            }
            _ => Step::NotIt,
        },
        Expect::SlurmStep => {
            if let Some(step) = c.strip_prefix("step_").filter(|s| is_step(s)) {
                set.slurm_step = Some(step.to_string());
            }
            Step::Done
        }
        Expect::DockerId => {
            if is_container_id(c) {
                set.runtime = Some(Runtime::Docker);
                set.container_id = Some(c.to_string());
                Step::Done
            } else {
                Step::NotIt
            }
        }
        Expect::PodmanId => match c.strip_prefix("libpod-").filter(|id| is_container_id(id)) {
            Some(id) => {
                set.runtime = Some(Runtime::Podman);
                set.container_id = Some(id.to_string());
                Step::Done
            }
            None => Step::NotIt,
        },
    }
}

/// Remember `c` as the innermost unit or slice where it is one: a slice
/// starts afresh below it (a unit above a slice is not the process's).
fn track_unit(set: &mut LabelSet, c: &str) {
    if !is_unit_name(c) {
        return;
    }
    if c.ends_with(".slice") {
        set.slice = Some(c.to_string());
        set.unit = None;
    } else if c.ends_with(".service") || c.ends_with(".scope") {
        set.unit = Some(c.to_string());
    }
}

/// `user@1000.service`: a user's service manager, below which the user
/// makes the cgroups.
fn is_user_manager(c: &str) -> bool {
    c.strip_prefix("user@")
        .and_then(|r| r.strip_suffix(".service"))
        .is_some_and(is_number)
}

/// The kubelet's root and QoS cgroups: `kubepods`, `kubepods.slice`,
/// `kubepods-burstable.slice`, kind's `kubelet-kubepods.slice` and
/// `kubelet-kubepods-besteffort.slice`; `burstable` and `besteffort`
/// below a cgroupfs root count as inside it too.
fn is_kubepods(c: &str) -> bool {
    matches!(
        c,
        "kubepods"
            | "kubepods.slice"
            | "kubepods-burstable.slice"
            | "kubepods-besteffort.slice"
            | "kubelet-kubepods.slice"
            | "kubelet-kubepods-burstable.slice"
            | "kubelet-kubepods-besteffort.slice"
    )
}

/// A pod's systemd slice, `kubepods-burstable-pod<uid_>.slice` (kind:
/// `kubelet-kubepods-…`): the pod's UID, and for containerd's colon form on
/// cgroup v1 (`<slice>:cri-containerd:<id>`) the runtime and the
/// container's id too.
#[expect(
    clippy::type_complexity,
    reason = "a private helper's two answers, named where it is used"
)]
fn pod_slice(c: &str) -> Option<(String, Option<(Option<Runtime>, String)>)> {
    let (slice, container) = match c.split_once(':') {
        Some((slice, rest)) => {
            let (prefix, id) = rest.split_once(':')?;
            if !is_container_id(id) {
                return None;
            }
            let runtime = match prefix {
                "cri-containerd" => Some(Runtime::Containerd),
                "crio" => Some(Runtime::CriO),
                "docker" => Some(Runtime::Docker),
                _ => return None,
            };
            (slice, Some((runtime, id.to_string())))
        }
        None => (c, None),
    };
    let name = slice.strip_suffix(".slice")?;
    let (parent, uid) = name.rsplit_once("-pod")?;
    let known = matches!(
        parent,
        "kubepods"
            | "kubepods-burstable"
            | "kubepods-besteffort"
            | "kubelet-kubepods"
            | "kubelet-kubepods-burstable"
            | "kubelet-kubepods-besteffort"
    );
    if !known {
        return None;
    }
    Some((pod_uid(uid, '_')?, container))
}

/// A pod's container, right below the pod: `<id>` (Docker or containerd,
/// cgroupfs driver), `crio-<id>` (CRI-O, cgroupfs; also CRI-O's sandbox
/// on v2), or a runtime's scope. CRI-O's monitor (`crio-conmon-<id>.scope`)
/// is not the container.
fn pod_container(c: &str) -> Option<(Option<Runtime>, String)> {
    if is_container_id(c) {
        return Some((None, c.to_string()));
    }
    if let Some(id) = c.strip_prefix("crio-").filter(|id| is_container_id(id)) {
        return Some((Some(Runtime::CriO), id.to_string()));
    }
    container_scope(c).map(|(runtime, id)| (Some(runtime), id))
}

/// A container's systemd scope: `docker-<id>.scope`,
/// `cri-containerd-<id>.scope`, `crio-<id>.scope`, `libpod-<id>.scope`.
fn container_scope(c: &str) -> Option<(Runtime, String)> {
    let name = c.strip_suffix(".scope")?;
    let (prefix, id) = name.rsplit_once('-')?;
    if !is_container_id(id) {
        return None;
    }
    let runtime = match prefix {
        "docker" => Runtime::Docker,
        "cri-containerd" => Runtime::Containerd,
        "crio" => Runtime::CriO,
        "libpod" => Runtime::Podman,
        _ => return None,
    };
    Some((runtime, id.to_string()))
}

/// A pod UID as the path writes it, with `sep` between its groups (`-` in
/// cgroupfs directories, `_` in systemd slices, where `-` means nesting),
/// or a static pod's 32-digit hash; given back dashed, as Kubernetes
/// writes it.
pub fn pod_uid(text: &str, sep: char) -> Option<String> {
    let bytes = text.as_bytes();
    if bytes.len() == 32 && bytes.iter().all(|b| is_lower_hex(*b)) {
        return Some(text.to_string());
    }
    if bytes.len() != 36 {
        return None;
    }
    let mut out = String::with_capacity(36);
    for (i, ch) in text.chars().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if ch != sep {
                return None;
            }
            out.push('-');
        } else if ch.is_ascii() && is_lower_hex(ch as u8) {
            out.push(ch);
        } else {
            return None;
        }
    }
    Some(out)
}

/// A full container id: 64 lowercase hex digits (Docker, containerd,
/// CRI-O and Podman all use the same form).
pub fn is_container_id(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(is_lower_hex)
}

fn is_lower_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// Digits only, at most ten (a Slurm job id or a uid).
fn is_number(text: &str) -> bool {
    !text.is_empty() && text.len() <= 10 && text.bytes().all(|b| b.is_ascii_digit())
}

/// A Slurm step: a number, or `batch`, `extern`, `interactive`.
fn is_step(text: &str) -> bool {
    is_number(text) || matches!(text, "batch" | "extern" | "interactive")
}

/// A name systemd could have given a unit: its characters
/// (`[A-Za-z0-9:_.\-@]`, everything else escaped as `\xNN`), at most
/// [`MAX_UNIT_NAME`] bytes.
fn is_unit_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_UNIT_NAME
        && text.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'.' | b'-' | b'@' | b'\\')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::fixture_block;

    const PATHS: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cgroup/paths.txt"
    ));

    /// The path a block's lines give: the memory controller's line, else the
    /// v2 line (when not the root), else the first controller's, else a
    /// bare path.
    fn path_of(source: &str) -> String {
        let lines = fixture_block(PATHS, source);
        let controller = |l: &&str| l.splitn(3, ':').nth(2).map(str::to_string);
        let memory = lines
            .iter()
            .find(|l| l.split(':').nth(1) == Some("memory"))
            .and_then(controller);
        let v2 = lines
            .iter()
            .find(|l| l.starts_with("0::") && **l != "0::/")
            .and_then(controller);
        let any = lines
            .iter()
            .filter(|l| !l.starts_with('/'))
            .find(|l| !l.ends_with(":/"))
            .and_then(controller);
        let bare = lines
            .iter()
            .find(|l| l.starts_with('/'))
            .map(|l| l.to_string());
        memory.or(v2).or(any).or(bare).expect("a path in the block")
    }

    fn parsed(source: &str) -> LabelSet {
        parse(&path_of(source))
    }

    #[test]
    fn kubernetes_cgroupfs_docker_v1() {
        let set = parsed("duckdb/duckdb/issues/7651");
        assert_eq!(
            set.pod_uid.as_deref(),
            Some("7de2905f-d523-45a3-8dd9-8365a286a434")
        );
        assert_eq!(
            set.container_id.as_deref(),
            Some("610228a731e860b5e593cfdf1ae6899eb73d7c5f947e6d69716d2c3351573c90")
        );
        assert_eq!(set.runtime, None, "a bare id does not name its runtime");
        assert_eq!((set.unit, set.slice), (None, None));
    }

    #[test]
    fn kubernetes_systemd_docker_v1() {
        let set = parsed("lxc/lxc/issues/3890");
        assert_eq!(
            set.pod_uid.as_deref(),
            Some("7d4424e6-bb13-42f4-a47a-45a4828bf54d")
        );
        assert_eq!(set.runtime, Some(Runtime::Docker));
        assert_eq!(
            set.container_id.as_deref(),
            Some("d0b3604b67ac7930dd34ba3a796627e3e4717d12309e90a4afe3f38b6816ac98")
        );
        assert_eq!(
            set.unit.as_deref(),
            Some("docker-d0b3604b67ac7930dd34ba3a796627e3e4717d12309e90a4afe3f38b6816ac98.scope")
        );
        assert_eq!(
            set.slice.as_deref(),
            Some("kubepods-burstable-pod7d4424e6_bb13_42f4_a47a_45a4828bf54d.slice")
        );
    }

    #[test]
    fn kubernetes_systemd_crio_v1() {
        let set = parsed("runc/issues/4620");
        assert_eq!(
            set.pod_uid.as_deref(),
            Some("a5c1f8d5-1919-434d-add7-4afaafdaef89")
        );
        assert_eq!(set.runtime, Some(Runtime::CriO));
        assert_eq!(
            set.container_id.as_deref(),
            Some("5eed917563583925ffdbd40a64efb2aaffe58638e57add8becaf460fe74f5b1c")
        );
    }

    #[test]
    fn kubernetes_cgroupfs_crio_v1() {
        let set = parsed("nestybox/sysbox/issues/618");
        assert_eq!(
            set.pod_uid.as_deref(),
            Some("1d572999-c9f3-45bd-b378-9df614214da6")
        );
        assert_eq!(set.runtime, Some(Runtime::CriO));
        assert_eq!(
            set.container_id.as_deref(),
            Some("87554950a53dd2ed856512d201cec166fa6c5dbab20186489d6a0e8c13c20586")
        );
    }

    #[test]
    fn containerd_colon_form_v1_under_its_service_and_at_the_root() {
        let lines = fixture_block(PATHS, "opentelemetry-java/issues/4507");
        for line in lines {
            let path = line.splitn(3, ':').nth(2).unwrap();
            let set = parse(path);
            assert_eq!(
                set.pod_uid.as_deref(),
                Some("0125ec2f-b64a-4868-8f5b-94b56cbab864"),
                "{path}"
            );
            assert_eq!(set.runtime, Some(Runtime::Containerd), "{path}");
            assert_eq!(
                set.container_id.as_deref(),
                Some("ee4b20e90ac7f42a10bd004d05646b13d8ab5e2c5e7cbc01abf8006bac016459")
            );
            assert_eq!(
                set.unit, None,
                "containerd.service is not the container's unit"
            );
        }
    }

    #[test]
    fn kind_containerd_systemd_v2() {
        let set = parsed("nri/pull/227 (kind");
        assert_eq!(
            set.pod_uid.as_deref(),
            Some("1e597579-417e-482f-bf65-5fe170c3aebd")
        );
        assert_eq!(set.runtime, Some(Runtime::Containerd));
        assert_eq!(
            set.container_id.as_deref(),
            Some("a09bc17f5aa29b0dbdec9ede5f46cf1396d2405917ab02e6f1eb1019f388396e")
        );
    }

    #[test]
    fn openshift_crio_systemd_v2_container_and_sandbox() {
        let lines = fixture_block(PATHS, "nri/pull/227 (OpenShift");
        let container = parse(lines[0]);
        let sandbox = parse(lines[1]);
        for set in [&container, &sandbox] {
            assert_eq!(
                set.pod_uid.as_deref(),
                Some("35550f44-f691-427e-b57d-ab6127d2cb65")
            );
            assert_eq!(set.runtime, Some(Runtime::CriO));
        }
        assert_eq!(
            container.container_id.as_deref(),
            Some("805b902ed98fdc1409c76e9aa94964787a904c80f46fc3ee74283509108f5e73")
        );
        assert_eq!(
            sandbox.container_id.as_deref(),
            Some("468f848e2ebec7203ed55748d08337851af589ac42eb551c572446a5c68fe631")
        );
    }

    #[test]
    fn a_static_pod_has_a_hash_for_a_uid() {
        let set = parsed("netdata/netdata/issues/4868");
        assert_eq!(
            set.pod_uid.as_deref(),
            Some("187bff14cccb94f179e943eacce55bb3")
        );
        assert_eq!(set.runtime, Some(Runtime::Containerd));
    }

    #[test]
    fn the_outermost_container_wins_a_node_in_docker_is_docker_s() {
        let set = parsed("minikube/issues/11280");
        assert_eq!(set.runtime, Some(Runtime::Docker));
        assert_eq!(
            set.container_id.as_deref(),
            Some("d6701ec289c56e4391acb11d07474b3139466857a305490575508a8b7a9fcf22")
        );
        assert_eq!(set.pod_uid, None, "the pods inside are the node's business");
    }

    #[test]
    fn slurm_inside_a_pod_is_the_pod_s() {
        let set = parsed("slurm-k8s-cluster/issues/38");
        assert_eq!(
            set.pod_uid.as_deref(),
            Some("a101c1c8-1589-4313-acf5-02e3ca8d3994")
        );
        assert_eq!(set.slurm_job, None);
        assert_eq!(set.container_id, None, "system.slice is no container");
    }

    #[test]
    fn docker_cgroupfs_and_systemd_v1_and_v2() {
        let cases = [
            (
                "moby/moby/issues/33352",
                "5dace3de0735f73d2b5048f12d41a71741a02e49668de921fdae62f7e65dc498",
            ),
            (
                "moby/moby/issues/9365",
                "0bd31f558c426d46f30778cefbc727282e4f257537b42b361ea5d03a44f4febe",
            ),
            (
                "earthly/earthly/issues/1533",
                "2a55517bd2c9f85d2e1911cb4cd0840a4aa299513af411fb437c0661dd88d11b",
            ),
        ];
        for (source, id) in cases {
            let set = parsed(source);
            assert_eq!(set.runtime, Some(Runtime::Docker), "{source}");
            assert_eq!(set.container_id.as_deref(), Some(id), "{source}");
            assert_eq!(set.pod_uid, None);
        }
        let systemd = parsed("moby/moby/issues/9365");
        assert_eq!(systemd.slice.as_deref(), Some("system.slice"));
        assert!(
            systemd
                .unit
                .as_deref()
                .unwrap()
                .starts_with("docker-0bd31f55")
        );
    }

    #[test]
    fn slurm_v1_and_v2() {
        let v1 = parsed("rstudio/rstudio/issues/13690");
        assert_eq!(v1.slurm_job.as_deref(), Some("13759490"));
        assert_eq!(v1.slurm_step.as_deref(), Some("batch"));
        let v2 = parsed("NVIDIA/enroot/issues/169");
        assert_eq!(v2.slurm_job.as_deref(), Some("4749"));
        assert_eq!(v2.slurm_step.as_deref(), Some("0"));
        assert_eq!(v2.unit.as_deref(), Some("slurm-worker-1_slurmstepd.scope"));
        assert_eq!(v2.slice.as_deref(), Some("system.slice"));
    }

    #[test]
    fn systemd_sessions_services_and_user_managers() {
        let ssh = parsed("(an ssh session");
        assert_eq!(ssh.unit.as_deref(), Some("session-3.scope"));
        assert_eq!(ssh.slice.as_deref(), Some("user-1000.slice"));
        let v1 = parsed("moby/moby/issues/34220");
        assert_eq!(v1.unit.as_deref(), Some("session-128207.scope"));
        assert_eq!(v1.slice.as_deref(), Some("user-52321.slice"));
        // Below the user's service manager the user names the units.
        for source in [
            "(a terminal in a GNOME session",
            "containers/crun/issues/376",
        ] {
            let set = parsed(source);
            assert_eq!(set.unit.as_deref(), Some("user@1000.service"), "{source}");
            assert_eq!(set.slice.as_deref(), Some("user-1000.slice"), "{source}");
            assert_eq!(set.container_id, None);
        }
    }

    #[test]
    fn this_machine_s_supervisor_cgroup_says_nothing() {
        let set = parsed("this machine");
        assert!(set.is_empty(), "{set:?}");
    }

    const UID: &str = "18d34ce4_50c7_452c_9df8_53c4a3fdf363";
    const ID: &str = "a684bbdd0c4b6937b5ece9713bed661305ab0de570eb12b7c28a032aaf602937";

    #[test]
    fn a_user_cannot_pass_a_delegated_cgroup_off_as_a_pod_or_container() {
        for path in [
            format!(
                "/user.slice/user-1000.slice/user@1000.service/kubepods.slice/kubepods-pod{UID}.slice/docker-{ID}.scope"
            ),
            "/user.slice/user-1000.slice/user@1000.service/slurm/uid_0/job_1/step_0".to_string(),
            format!("/user.slice/user-1000.slice/user@1000.service/docker/{ID}"),
        ] {
            let set = parse(&path);
            assert_eq!(set.pod_uid, None, "{path}");
            assert_eq!(set.container_id, None, "{path}");
            assert_eq!(set.slurm_job, None, "{path}");
            assert_eq!(set.unit.as_deref(), Some("user@1000.service"));
        }
    }

    #[test]
    fn a_container_cannot_pass_its_processes_off_as_another_s() {
        let other = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
        let path = format!(
            "/docker/{ID}/kubepods/besteffort/pod{}/{other}",
            UID.replace('_', "-")
        );
        let set = parse(&path);
        assert_eq!(set.container_id.as_deref(), Some(ID));
        assert_eq!(set.pod_uid, None);
        let pod = format!("/kubepods/pod{}/{ID}/docker/{other}", UID.replace('_', "-"));
        assert_eq!(parse(&pod).container_id.as_deref(), Some(ID));
    }

    #[test]
    fn outside_the_reader_s_cgroup_namespace_the_path_is_read_below_the_dots() {
        let systemd = format!("/../../kubepods-burstable-pod{UID}.slice/cri-containerd-{ID}.scope");
        let set = parse(&systemd);
        assert_eq!(
            set.pod_uid.as_deref(),
            Some("18d34ce4-50c7-452c-9df8-53c4a3fdf363")
        );
        assert_eq!(set.container_id.as_deref(), Some(ID));
        let cgroupfs = format!("/../../pod{}/{ID}", UID.replace('_', "-"));
        assert_eq!(parse(&cgroupfs).container_id.as_deref(), Some(ID));
        // Not first, not below the kubelet's root: a directory named pod….
        let stray = format!("/srv/pod{}/{ID}", UID.replace('_', "-"));
        assert!(parse(&stray).pod_uid.is_none());
    }

    #[test]
    fn ids_of_the_wrong_form_are_not_taken() {
        for path in [
            "/docker/5dace3de0735", // short id
            "/docker/5DACE3DE0735F73D2B5048F12D41A71741A02E49668DE921FDAE62F7E65DC498", // upper case
            "/kubepods/burstable/pod7de2905f-d523-45a3-8dd9/6102",                      // short uid
            "/kubepods.slice/kubepods-burstable-podzzzz.slice",
            "/system.slice/docker-not-an-id.scope",
            "/slurm/uid_1/job_x/step_0",
            "/slurm/uid_1/job_99999999999/step_0",
        ] {
            let set = parse(path);
            assert_eq!(set.container_id, None, "{path}");
            assert_eq!(set.pod_uid, None, "{path}");
            assert_eq!(set.slurm_job, None, "{path}");
        }
        let odd_step = parse("/slurm/uid_1/job_7/step_$(rm)");
        assert_eq!(odd_step.slurm_job.as_deref(), Some("7"));
        assert_eq!(odd_step.slurm_step, None);
    }

    #[test]
    fn names_systemd_would_never_write_are_not_units() {
        let set = parse("/system.slice/evil\u{1b}[31m.service");
        assert_eq!(set.unit, None);
        assert_eq!(set.slice.as_deref(), Some("system.slice"));
        let long = format!("/system.slice/{}.service", "a".repeat(300));
        assert_eq!(parse(&long).unit, None);
    }

    #[test]
    fn a_hostile_depth_is_read_only_so_far() {
        let deep = "/a".repeat(10_000) + &format!("/docker/{ID}");
        assert_eq!(parse(&deep).container_id, None);
        assert!(parse("").is_empty());
        assert!(parse("/").is_empty());
        assert!(parse("/..").is_empty());
    }
}
