//! The NVML collector through its real loading path, without a GPU: a
//! stand-in `libnvidia-ml` built from C (`tests/fixtures/nvml/stand_in_nvml.c`,
//! the entry points headroom calls, with nvml.h's signatures, layouts and
//! return codes) is loaded by `[gpu] nvml_library` through dlopen and
//! nvml-wrapper, reports what a scenario file says, and a real child process
//! is listed as holding GPU memory. The real driver is checked by
//! `scripts/gpu-check.sh` on a machine with an NVIDIA GPU.
//!
//! A root daemon's refusal of a library planted where others can write is in
//! the environment tier (`tests/environment/nvml_library.rs`).
#![cfg(target_os = "linux")]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use headroom::model::{Framework, Snapshot};
use headroom::os::linux::nvml::NvmlCollector;
use headroom::sample::gpu::pid_namespace::{self, PidView};
use headroom::sample::gpu::{GpuCollector, GpuMonitor, RETRY_AFTER};

const GIB: u64 = 1 << 30;
/// Above the kernel's largest pid_max (2^22): no process has it.
const NO_SUCH_PID: u32 = 99_999_999;

/// A stand-in library and its scenario file in a temporary directory.
struct StandIn {
    dir: tempfile::TempDir,
    library: PathBuf,
}

impl StandIn {
    fn build() -> Self {
        let dir = support::private_dir();
        let library = dir.path().join("libnvidia-ml.so.1");
        let scenario = dir.path().join("scenario");
        let source =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvml/stand_in_nvml.c");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror"])
            .arg(format!("-DSCENARIO=\"{}\"", scenario.display()))
            .arg("-o")
            .arg(&library)
            .arg(&source)
            .output()
            .expect("run cc (the C compiler that links Rust programs)");
        assert!(
            out.status.success(),
            "cc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self { dir, library }
    }

    fn scenario(&self, text: &str) {
        std::fs::write(self.dir.path().join("scenario"), text).unwrap();
    }

    fn config(&self) -> PathBuf {
        let path = self.dir.path().join("headroom.toml");
        std::fs::write(
            &path,
            format!("[gpu]\nnvml_library = \"{}\"\n", self.library.display()),
        )
        .unwrap();
        path
    }

    fn snapshot(&self, extra: &[&str]) -> std::process::Output {
        let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
            .arg("snapshot")
            .args(extra)
            .arg("--config")
            .arg(self.config())
            .output()
            .expect("run headroom snapshot");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

/// A `sleep` child, killed and reaped when dropped.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Self {
        let child = Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sleep");
        std::thread::sleep(Duration::from_millis(200));
        Self(child)
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const H100: &str = "device NVIDIA H100 80GB HBM3;GPU-0a1b2c3d-0000-1111-2222-333344445555;\
                    85899345920;12884901888;536870912;35\n";

#[test]
fn snapshot_lists_a_real_child_that_the_driver_lists() {
    let lib = StandIn::build();
    let child = Sleeper::start();
    let pid = child.0.id();
    lib.scenario(&format!(
        "driver 999.12.34\n{H100}\
         compute 0 {pid} 8589934592 -1\n\
         graphics 0 {pid} 8589934592 -1\n\
         compute 0 {NO_SUCH_PID} -1 -1\n"
    ));
    let out = lib.snapshot(&["--json"]);
    let snap: Snapshot = serde_json::from_slice(&out.stdout).unwrap();

    let nvml = snap
        .collectors
        .iter()
        .find(|c| c.name == "nvml")
        .expect("the nvml collector");
    assert_eq!((nvml.name.as_str(), nvml.up), ("nvml", true));
    assert_eq!(
        nvml.detail,
        format!(
            "driver 999.12.34 through {}; GPU 0: NVIDIA H100 80GB HBM3",
            lib.library.display()
        )
    );

    assert_eq!(snap.gpus.len(), 1);
    let d = &snap.gpus[0];
    assert_eq!(d.name, "NVIDIA H100 80GB HBM3");
    assert_eq!(
        d.uuid.as_deref(),
        Some("GPU-0a1b2c3d-0000-1111-2222-333344445555")
    );
    assert_eq!(
        (d.memory_total, d.memory_used, d.memory_reserved),
        (Some(80 * GIB), Some(12 * GIB), Some(GIB / 2))
    );
    assert_eq!(d.utilization, Some(0.35));
    // The child's compute and graphics entries are one process; the
    // unavailable figure of the other stays unknown.
    assert_eq!(d.processes.len(), 2);
    assert_eq!(
        (d.processes[0].pid, d.processes[0].memory),
        (pid, Some(8 * GIB))
    );
    assert!(d.processes[0].compute && d.processes[0].graphics);
    assert_eq!(
        (d.processes[1].pid, d.processes[1].memory),
        (NO_SUCH_PID, None)
    );

    let p = snap.process(pid).expect("the child is sampled");
    match pid_namespace::detect(Path::new("/proc"), Path::new("/")) {
        PidView::Host => {
            assert_eq!(p.gpu_memory, Some(8 * GIB));
            assert!(p.workload.frameworks.contains(&Framework::Cuda));
            assert_eq!(
                p.workload.evidence,
                ["holds 8.0 GiB of GPU memory on GPU 0"]
            );
            assert!(d.processes[0].joined && !d.processes[1].joined);
            assert_eq!(snap.notes.len(), 1, "{:?}", snap.notes);
            assert!(
                snap.notes[0].contains(&format!("(memory not reported: pid {NO_SUCH_PID})")),
                "{}",
                snap.notes[0]
            );
        }
        // Tests run inside a container: the driver's pids are not joined.
        PidView::Container { .. } => {
            assert_eq!(p.gpu_memory, None);
            assert!(snap.notes[0].contains("by host pid"), "{:?}", snap.notes);
        }
    }
}

#[test]
fn the_table_shows_the_device_and_the_gpu_column() {
    let lib = StandIn::build();
    let child = Sleeper::start();
    let pid = child.0.id();
    lib.scenario(&format!(
        "driver 999.12.34\n{H100}compute 0 {pid} 8589934592 -1\n"
    ));
    let out = lib.snapshot(&["--all"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "gpu 0    NVIDIA H100 80GB HBM3: 12.0 GiB used of 80.0 GiB, 512 MiB reserved, \
             35% busy, 1 process\n"
        ),
        "{text}"
    );
    let header = text.lines().find(|l| l.contains("FOOTPRINT")).unwrap();
    if pid_namespace::detect(Path::new("/proc"), Path::new("/")) == PidView::Host {
        assert!(header.contains(" GPU "), "{header}");
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{pid} ")))
            .expect("the child's row");
        assert!(row.contains("8.0 GiB"), "{row}");
    }
}

#[test]
fn an_init_failure_is_reported_with_what_to_do() {
    let lib = StandIn::build();
    // NVML_ERROR_DRIVER_NOT_LOADED
    lib.scenario("init 9\n");
    let out = lib.snapshot(&["--json"]);
    let snap: Snapshot = serde_json::from_slice(&out.stdout).unwrap();
    let nvml = snap
        .collectors
        .iter()
        .find(|c| c.name == "nvml")
        .expect("the nvml collector");
    assert!(!nvml.up);
    assert_eq!(
        nvml.detail,
        format!(
            "{} loaded, but the NVIDIA kernel driver is not loaded (no nvidia module; \
             `nvidia-smi` says the same)",
            lib.library.display()
        )
    );
    assert!(snap.gpus.is_empty());
}

#[test]
fn the_collector_survives_device_errors_and_recovers_from_a_broken_driver() {
    let lib = StandIn::build();
    lib.scenario(
        "driver 999.12.34\n\
         device NVIDIA A100-SXM4-40GB MIG 1g.5gb;GPU-a;42949672960;1073741824;0;-1\n\
         compute 0 4242 -1 1\n\
         compute 0 4242 -1 2\n",
    );
    let mut m = GpuMonitor::new(Box::new(NvmlCollector::new(Some(lib.library.clone()))));
    let t0 = Instant::now();

    let up = m.poll(t0);
    assert!(up.status.up, "{}", up.status.detail);
    assert_eq!(
        up.status.detail,
        format!(
            "driver 999.12.34 through {}; GPU 0: NVIDIA A100-SXM4-40GB MIG 1g.5gb \
             (not supported: utilization)",
            lib.library.display()
        )
    );
    let d = &up.devices[0];
    assert_eq!(d.utilization, None);
    assert_eq!(d.compute.len(), 2);
    assert!(d.compute.iter().all(|p| p.memory.is_none()));
    assert_eq!(d.compute[0].gpu_instance, Some(1));

    // NVML_ERROR_GPU_IS_LOST on every query: a problem of the device, the
    // collector stays up.
    lib.scenario(&format!("driver 999.12.34\n{H100}fail 15\n"));
    let lost = m.poll(t0 + Duration::from_secs(1));
    assert!(lost.status.up);
    assert!(
        lost.devices[0].problems[0]
            .starts_with("memory: the GPU fell off the bus or is otherwise inaccessible"),
        "{:?}",
        lost.devices[0].problems
    );
    assert_eq!(lost.log.len(), 1);

    // NVML_ERROR_LIB_RM_VERSION_MISMATCH: NVML as a whole is broken.
    lib.scenario(&format!("driver 999.12.34\n{H100}fail 18\n"));
    let broken = m.poll(t0 + Duration::from_secs(2));
    assert!(!broken.status.up);
    assert!(
        broken
            .status
            .detail
            .starts_with("stopped working: the NVML library does not match"),
        "{}",
        broken.status.detail
    );
    assert!(!m.poll(t0 + Duration::from_secs(3)).status.up);

    lib.scenario(&format!("driver 999.12.35\n{H100}"));
    let back = m.poll(t0 + Duration::from_secs(2) + RETRY_AFTER);
    assert!(back.status.up, "{}", back.status.detail);
    assert!(back.status.detail.starts_with("driver 999.12.35 through"));
    assert_eq!(back.devices[0].memory_used, Some(12 * GIB));
}

#[test]
fn a_driver_with_no_gpu_is_up_and_says_so() {
    let lib = StandIn::build();
    lib.scenario("driver 999.12.34\n");
    let mut c = NvmlCollector::new(Some(lib.library.clone()));
    c.open().unwrap();
    assert!(
        c.describe().ends_with(", no NVIDIA GPU found"),
        "{}",
        c.describe()
    );
    assert_eq!(c.read().unwrap(), []);
}
