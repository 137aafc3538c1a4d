//! GPU figures joined into real process samples: the Linux sampler reads
//! this machine's `/proc` with real child processes, a fake collector lists
//! those children's pids as holding GPU memory (CI has no GPU), and the
//! snapshot must carry the figures on exactly those processes. Also the
//! `headroom snapshot` command on this machine, whatever its GPU.
#![cfg(target_os = "linux")]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use headroom::model::{Framework, Snapshot, WorkloadKind};
use headroom::os::linux::LinuxSampler;
use headroom::sample::Sampler;
use headroom::sample::gpu::fake::{FakeGpu, device, process};
use headroom::sample::gpu::{PidView, WithGpu};

const GIB: u64 = 1 << 30;

/// Child processes, killed and reaped when dropped (panics included).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn sleepers(n: usize) -> Children {
    let children = (0..n)
        .map(|_| {
            Command::new("sleep")
                .arg("600")
                .stdin(Stdio::null())
                .spawn()
                .expect("spawn sleep")
        })
        .collect();
    // Let them finish exec, so /proc shows `sleep`, not this test binary.
    std::thread::sleep(Duration::from_millis(200));
    Children(children)
}

/// A pid that no process has right now: a child that was spawned and reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("reap true");
    pid
}

fn sampler(fake: &FakeGpu, view: PidView) -> WithGpu<LinuxSampler> {
    WithGpu::new(LinuxSampler::new("/proc"), Box::new(fake.clone()), view)
}

fn gpu_memory(snap: &Snapshot, pid: u32) -> Option<u64> {
    snap.process(pid).expect("child is sampled").gpu_memory
}

#[test]
fn real_children_get_the_gpu_figures_listed_for_their_pids() {
    let kids = sleepers(3);
    let (a, b, c) = (kids.0[0].id(), kids.0[1].id(), kids.0[2].id());
    let gone = dead_pid();

    let fake = FakeGpu::new();
    let mut gpu0 = device(0, "NVIDIA H100 80GB HBM3", 80 * GIB, 12 * GIB);
    // `a` has a compute and a graphics context: listed twice, one process.
    gpu0.compute = vec![process(a, Some(8 * GIB)), process(gone, Some(GIB))];
    gpu0.graphics = vec![process(a, Some(8 * GIB))];
    let mut gpu1 = device(1, "NVIDIA H100 80GB HBM3", 80 * GIB, 3 * GIB);
    // `a` again on another device; `b` on a device that does not report
    // per-process memory (MIG).
    gpu1.compute = vec![process(a, Some(2 * GIB)), process(b, None)];
    fake.set_devices(vec![gpu0, gpu1]);

    let snap = headroom::sample::with_statuses(Box::new(sampler(&fake, PidView::Host)))
        .sample()
        .unwrap();

    let pa = snap.process(a).unwrap();
    assert_eq!(pa.gpu_memory, Some(10 * GIB), "8 GiB + 2 GiB, not 18 GiB");
    assert_eq!(pa.name, "sleep");
    assert_eq!(pa.workload.kind, WorkloadKind::Other, "the kind is kept");
    assert_eq!(pa.workload.frameworks, [Framework::Cuda]);
    assert!(pa.workload.is_ml());
    assert_eq!(
        pa.workload.evidence,
        [
            "holds 8.0 GiB of GPU memory on GPU 0",
            "holds 2.0 GiB of GPU memory on GPU 1"
        ]
    );

    let pb = snap.process(b).unwrap();
    assert_eq!(pb.gpu_memory, None, "unknown stays unknown");
    assert!(pb.workload.is_ml());
    assert_eq!(
        pb.workload.evidence,
        ["has a context on GPU 1, whose driver does not report its memory"]
    );

    assert_eq!(gpu_memory(&snap, c), None);
    assert!(!snap.process(c).unwrap().workload.is_ml());

    // Every other process is untouched.
    let touched = snap
        .processes
        .iter()
        .filter(|p| p.gpu_memory.is_some() || p.workload.evidence.iter().any(|e| e.contains("GPU")))
        .count();
    assert_eq!(touched, 2);

    assert_eq!(snap.gpus.len(), 2);
    let listed: Vec<(u32, bool, bool, bool)> = snap.gpus[0]
        .processes
        .iter()
        .map(|p| (p.pid, p.compute, p.graphics, p.joined))
        .collect();
    let mut expected = vec![(a, true, true, true), (gone, true, false, false)];
    expected.sort_unstable();
    assert_eq!(listed, expected);
    assert_eq!(snap.notes.len(), 1, "{:?}", snap.notes);
    assert!(
        snap.notes[0].contains(&format!("(1.0 GiB held: pid {gone})")),
        "{}",
        snap.notes[0]
    );
    // The GPU collector once, beside the Linux sampler's own (cgroups, and
    // the proportional-share reads and library scans where this machine
    // runs processes that need them), and no NVML one.
    let gpu: Vec<_> = snap
        .collectors
        .iter()
        .filter(|c| c.name == "fake" || c.name == "nvml")
        .collect();
    assert_eq!(gpu.len(), 1, "{:?}", snap.collectors);
    assert_eq!(gpu[0].name, "fake", "{:?}", snap.collectors);
    assert!(gpu[0].up);
}

#[test]
fn a_process_that_lets_go_of_the_gpu_loses_the_figures_next_tick() {
    let kids = sleepers(1);
    let a = kids.0[0].id();
    let fake = FakeGpu::new();
    let mut gpu0 = device(0, "NVIDIA L4", 24 * GIB, 5 * GIB);
    gpu0.compute = vec![process(a, Some(4 * GIB))];
    fake.set_devices(vec![gpu0.clone()]);
    let mut s = sampler(&fake, PidView::Host);
    assert_eq!(gpu_memory(&s.sample().unwrap(), a), Some(4 * GIB));

    gpu0.compute.clear();
    fake.set_devices(vec![gpu0]);
    let snap = s.sample().unwrap();
    let pa = snap.process(a).unwrap();
    assert_eq!(pa.gpu_memory, None);
    assert!(pa.workload.evidence.is_empty());
    assert!(pa.workload.frameworks.is_empty());
}

#[test]
fn from_another_pid_namespace_no_pid_is_joined() {
    let kids = sleepers(1);
    let a = kids.0[0].id();
    let fake = FakeGpu::new();
    let mut gpu0 = device(0, "NVIDIA A100-SXM4-80GB", 80 * GIB, 9 * GIB);
    // The pid exists here, but the driver's pids are the host's.
    gpu0.compute = vec![process(a, Some(8 * GIB))];
    fake.set_devices(vec![gpu0]);
    let view = PidView::Container {
        why: "/proc/self/ns/pid is pid:[4026532511], not the host's pid:[4026531836]".into(),
    };
    let snap = sampler(&fake, view).sample().unwrap();
    assert_eq!(gpu_memory(&snap, a), None);
    assert!(snap.process(a).unwrap().workload.evidence.is_empty());
    assert!(!snap.gpus[0].processes[0].joined);
    assert_eq!(snap.gpus[0].processes[0].memory, Some(8 * GIB));
    assert_eq!(snap.notes.len(), 1);
    assert!(
        snap.notes[0].contains("by host pid") && snap.notes[0].contains("--pid=host"),
        "{}",
        snap.notes[0]
    );
}

/// `headroom snapshot --json` on this machine: with no NVIDIA driver (CI),
/// the collector is reported down once with the reason; with one, it is up
/// and lists the devices. Either way the command succeeds.
#[test]
fn snapshot_reports_the_nvml_collector() {
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["snapshot", "--json"])
        .output()
        .expect("run headroom snapshot");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("a snapshot");
    let nvml: Vec<_> = snap
        .collectors
        .iter()
        .filter(|c| c.name == "nvml")
        .collect();
    assert_eq!(nvml.len(), 1, "{:?}", snap.collectors);
    if nvml[0].up {
        assert!(!snap.gpus.is_empty(), "up, yet no GPU: {}", nvml[0].detail);
    } else {
        assert!(snap.gpus.is_empty());
        assert!(
            nvml[0].detail.contains("libnvidia-ml"),
            "the reason names the library: {}",
            nvml[0].detail
        );
    }
}

#[test]
fn snapshot_without_nvml_has_no_gpu_collector() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[gpu]\nnvml = false\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["snapshot", "--json", "--config"])
        .arg(&config)
        .output()
        .expect("run headroom snapshot");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("a snapshot");
    assert!(
        snap.collectors.iter().all(|c| c.name != "nvml"),
        "{:?}",
        snap.collectors
    );
    assert!(snap.gpus.is_empty());
}

#[test]
fn a_configured_library_that_does_not_load_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    let missing = dir.path().join("libnvidia-ml.so.1");
    std::fs::write(
        &config,
        format!("[gpu]\nnvml_library = \"{}\"\n", missing.display()),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["snapshot", "--json", "--config"])
        .arg(&config)
        .output()
        .expect("run headroom snapshot");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snap: Snapshot = serde_json::from_slice(&out.stdout).expect("a snapshot");
    let nvml = snap.collectors.iter().find(|c| c.name == "nvml").unwrap();
    // Down without a driver, up through libnvidia-ml.so.1 with one: the
    // configured path's failure is named either way.
    assert!(
        nvml.detail
            .contains(&format!("configured {} did not load", missing.display())),
        "{}",
        nvml.detail
    );
}
