//! Labels from real cgroups: processes moved into memory cgroups whose
//! paths have the forms a kubelet, Slurm, systemd and Docker give them,
//! and a kubelet's and Docker's directories (in a root-owned directory the
//! config points `[labels]` at), and the daemon's snapshot and `/metrics`
//! say which pod, container, job and unit each belongs to.
//!
//! The cgroups are made under a directory of the test's own in the memory
//! hierarchy (cgroup v1's memory controller where it is mounted, as on the
//! machine this was written on, else the v2 hierarchy) and removed after;
//! the labels are read below that prefix, as they are below a cgroup
//! namespace's `..` (see `src/sample/labels/cgroup_path.rs`). Root is
//! needed to make cgroups and move processes into them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::hog::{Daemon, Running, hog_path};
use crate::support::{need_root, private_dir};

const POD_UID: &str = "5f0c7e3a-2b1d-4c8e-9f6a-7d3b2e1c0a94";
const POD_CONTAINER: &str = "8b1e9057c80f383869339e73f7286d7b8b1e9057c80f383869339e73f7286d7b";
const DOCKER_CONTAINER: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";

/// The memory hierarchy's mount point: v1's memory controller where it is
/// mounted, else the unified v2 hierarchy.
fn memory_hierarchy() -> PathBuf {
    let v1 = Path::new("/sys/fs/cgroup/memory");
    if v1.join("cgroup.procs").exists() {
        return v1.to_path_buf();
    }
    let v2 = Path::new("/sys/fs/cgroup");
    assert!(
        v2.join("cgroup.controllers").exists(),
        "no memory cgroup hierarchy at /sys/fs/cgroup/memory (v1) or /sys/fs/cgroup (v2)"
    );
    v2.to_path_buf()
}

/// Cgroups made for one test under `<hierarchy>/headroom-test-labels-<pid>`,
/// removed deepest first when dropped (their processes gone by then).
struct Cgroups {
    top: PathBuf,
    made: Vec<PathBuf>,
}

impl Cgroups {
    fn new() -> Cgroups {
        let top = memory_hierarchy().join(format!("headroom-test-labels-{}", std::process::id()));
        std::fs::create_dir(&top).unwrap_or_else(|e| panic!("mkdir {}: {e}", top.display()));
        Cgroups {
            made: vec![top.clone()],
            top,
        }
    }

    /// The cgroup at `relative` below the test's directory, made with its
    /// parents; its path as `/proc/PID/cgroup` shows it is the test's
    /// prefix and then `relative`.
    fn make(&mut self, relative: &str) -> PathBuf {
        let mut at = self.top.clone();
        for part in relative.split('/').filter(|p| !p.is_empty()) {
            at.push(part);
            if !at.exists() {
                std::fs::create_dir(&at).unwrap_or_else(|e| panic!("mkdir {}: {e}", at.display()));
                self.made.push(at.clone());
            }
        }
        at
    }

    /// Move `pid` into `cgroup`.
    fn enter(cgroup: &Path, pid: u32) {
        std::fs::write(cgroup.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("move {pid} into {}: {e}", cgroup.display()));
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        for dir in self.made.iter().rev() {
            // A cgroup whose last process has just exited may stay busy for
            // a moment.
            let deadline = Instant::now() + Duration::from_secs(5);
            while std::fs::remove_dir(dir).is_err() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// A kubelet's and Docker's directories, as they are on a node, in `root`:
/// pod `ml/train-0` with its container `trainer`, and Docker container
/// `jupyter-ana` (Docker's directory is root's alone, mode 0710).
fn node_directories(root: &Path) {
    let mode = |p: &Path, m: u32| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    mode(root, 0o755);
    let pods = root.join("pods");
    std::fs::create_dir_all(pods.join(format!("ml_train-0_{POD_UID}/trainer"))).unwrap();
    let containers = root.join("containers");
    std::fs::create_dir(&containers).unwrap();
    std::os::unix::fs::symlink(
        pods.join(format!("ml_train-0_{POD_UID}/trainer/0.log")),
        containers.join(format!("train-0_ml_trainer-{POD_CONTAINER}.log")),
    )
    .unwrap();
    for dir in [&pods, &containers] {
        mode(dir, 0o755);
    }
    let docker = root.join("docker");
    let container = docker.join("containers").join(DOCKER_CONTAINER);
    std::fs::create_dir_all(&container).unwrap();
    mode(&docker, 0o710);
    mode(&docker.join("containers"), 0o710);
    mode(&container, 0o710);
    std::fs::write(
        container.join("config.v2.json"),
        format!(
            r#"{{"StreamConfig":{{}},"State":{{"Running":true,"Pid":1}},"ID":"{DOCKER_CONTAINER}","Config":{{"Env":["A=1"],"Labels":{{}}}},"MountPoints":{{"/d":{{"Name":"a-volume"}}}},"Name":"/jupyter-ana","Driver":"overlay2"}}"#
        ),
    )
    .unwrap();
}

/// The hog linked as `torchrun` (an ML process, so it gets per-process
/// series), holding 8 MiB, started and moved into `cgroup`.
fn hog_in(dir: &Path, name: &str, cgroup: &Path) -> Running {
    let bin = dir.join(name);
    std::fs::create_dir(&bin).unwrap();
    let link = bin.join("torchrun");
    std::os::unix::fs::symlink(hog_path(), &link).unwrap();
    let mut hog = Running::hog(&link, &["--max", "8MiB"]);
    hog.expect_line("ready");
    Cgroups::enter(cgroup, hog.pid());
    hog
}

/// The process `pid` of the daemon's snapshot, once its labels carry
/// `key`; panics after 20 s.
fn labelled(daemon: &Daemon, pid: u32, key: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = daemon.get("/api/v1/snapshot");
        if status != 200 {
            // The first sample's JSON may still be in the making.
            assert!(
                Instant::now() < deadline,
                "/api/v1/snapshot: {status} {body}"
            );
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        let snap: serde_json::Value = serde_json::from_str(&body).unwrap();
        let process = snap["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == pid)
            .cloned();
        if let Some(p) = process {
            if !p["labels"][key].is_null() {
                return p;
            }
            if Instant::now() > deadline {
                panic!("process {pid} has no labels.{key} after 20 s: {p}");
            }
        } else if Instant::now() > deadline {
            panic!("process {pid} is not in the snapshot after 20 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The `headroom_process_info` line of `pid` in `/metrics`.
fn info_line(daemon: &Daemon, pid: u32) -> String {
    let (status, text) = daemon.get("/metrics");
    assert_eq!(status, 200);
    let needle = format!("pid=\"{pid}\"");
    text.lines()
        .find(|l| l.starts_with("headroom_process_info{") && l.contains(&needle))
        .unwrap_or_else(|| panic!("no headroom_process_info for pid {pid}:\n{text}"))
        .to_string()
}

#[test]
fn pod_slurm_systemd_and_docker_cgroups_label_their_processes_in_the_snapshot_and_metrics() {
    need_root();
    let dir = private_dir();
    let names = dir.path().join("node");
    std::fs::create_dir(&names).unwrap();
    node_directories(&names);

    let mut cgroups = Cgroups::new();
    let prefix = cgroups
        .top
        .strip_prefix(memory_hierarchy())
        .unwrap()
        .to_path_buf();
    let pod_cgroup = cgroups.make(&format!("kubepods/burstable/pod{POD_UID}/{POD_CONTAINER}"));
    let slurm_cgroup = cgroups.make("slurm/uid_0/job_4242/step_batch/task_0");
    let unit_cgroup = cgroups.make("system.slice/jupyter-ana.service");
    let docker_cgroup = cgroups.make(&format!("docker/{DOCKER_CONTAINER}"));

    let mut pod = hog_in(dir.path(), "pod", &pod_cgroup);
    let mut job = hog_in(dir.path(), "job", &slurm_cgroup);
    let mut unit = hog_in(dir.path(), "unit", &unit_cgroup);
    let mut docker = hog_in(dir.path(), "docker", &docker_cgroup);
    // The kernel's own view of one of them, as the daemon reads it.
    let seen = std::fs::read_to_string(format!("/proc/{}/cgroup", pod.pid())).unwrap();
    assert!(
        seen.contains(&format!(
            "/{}/kubepods/burstable/pod{POD_UID}/",
            prefix.display()
        )),
        "{seen}"
    );

    let config = format!(
        "[daemon]\njournal = \"{journal}\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n\
         [labels]\npods_log_dir = \"{pods}\"\ncontainers_log_dir = \"{containers}\"\n\
         docker_containers_dir = \"{docker}\"\n",
        journal = dir.path().join("journal.jsonl").display(),
        pods = names.join("pods").display(),
        containers = names.join("containers").display(),
        docker = names.join("docker/containers").display(),
    );
    let daemon = Daemon::start(dir.path(), &config);

    // The pod: its UID and container id from the path, namespace, name and
    // container name from the kubelet's directories.
    let p = labelled(&daemon, pod.pid(), "pod");
    let l = &p["labels"];
    assert_eq!(l["namespace"], "ml", "{p}");
    assert_eq!(l["pod"], "train-0");
    assert_eq!(l["pod_uid"], POD_UID);
    assert_eq!(l["container"], "trainer");
    assert_eq!(l["container_id"], POD_CONTAINER);
    let line = info_line(&daemon, pod.pid());
    for label in [
        "namespace=\"ml\"".to_string(),
        "pod=\"train-0\"".to_string(),
        "container=\"trainer\"".to_string(),
        format!("pod_uid=\"{POD_UID}\""),
        format!("container_id=\"{POD_CONTAINER}\""),
    ] {
        assert!(line.contains(&label), "{label} missing: {line}");
    }

    // The Slurm job and step.
    let p = labelled(&daemon, job.pid(), "slurm_job");
    assert_eq!(p["labels"]["slurm_job"], "4242", "{p}");
    assert_eq!(p["labels"]["slurm_step"], "batch");
    assert!(info_line(&daemon, job.pid()).contains("slurm_job=\"4242\""));

    // The systemd unit and its slice.
    let p = labelled(&daemon, unit.pid(), "unit");
    assert_eq!(p["labels"]["unit"], "jupyter-ana.service", "{p}");
    assert_eq!(p["labels"]["slice"], "system.slice");
    assert!(info_line(&daemon, unit.pid()).contains("unit=\"jupyter-ana.service\""));

    // The Docker container, named from its config.v2.json's top-level
    // Name (not the volume's), marked private: root, asking here, sees it.
    let p = labelled(&daemon, docker.pid(), "container");
    assert_eq!(p["labels"]["container"], "jupyter-ana", "{p}");
    assert_eq!(p["labels"]["runtime"], "docker");
    assert_eq!(p["labels"]["private_names"], true);
    assert!(info_line(&daemon, docker.pid()).contains("container=\"jupyter-ana\""));

    // The labels collector says what it read.
    let (_, body) = daemon.get("/api/v1/snapshot");
    let snap: serde_json::Value = serde_json::from_str(&body).unwrap();
    let collector = snap["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "labels")
        .cloned()
        .expect("a labels collector");
    assert_eq!(collector["up"], true, "{collector}");
    assert!(
        collector["detail"].as_str().unwrap().contains("1 pods"),
        "{collector}"
    );

    daemon.stop_with("TERM");
    for hog in [&mut pod, &mut job, &mut unit, &mut docker] {
        hog.signal("KILL");
        hog.wait_exit(Duration::from_secs(10));
    }
    drop(cgroups);
}
