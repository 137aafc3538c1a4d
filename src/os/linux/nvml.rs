//! NVIDIA GPUs through NVML (`libnvidia-ml`), loaded at run time by the
//! `nvml-wrapper` crate: a machine without the driver gets an error from
//! [`NvmlCollector::open`], not a failure to start.
//!
//! Loading tries `[gpu] nvml_library`, then `libnvidia-ml.so.1`, then
//! `libnvidia-ml.so`. Loading runs the library's code as root, so the
//! configured path is checked before every load ([`check_path`]); an
//! untrusted one is not loaded and the collector is down with a message
//! naming the path, what is wrong and the fix. The bare names come from the
//! loader's system directories, which only root changes, or from
//! `LD_LIBRARY_PATH`, which root sets for a root daemon.
//!
//! NVML is initialised once and the device handles cached; a tick asks each
//! device for its memory, utilisation and compute and graphics processes.
//! A query a device does not support is asked once and noted in
//! [`NvmlCollector::describe`]; one that fails otherwise is that device's
//! problem for that pass; an error meaning the library no longer works
//! fails the read, and the monitor closes the collector and retries later.
//!
//! The handles are kept, and lent back as `Device`s, by
//! `ffi::nvml::DeviceHandles`, which holds this file's `unsafe`.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::PathBuf;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};

use super::ffi::nvml::DeviceHandles;
use crate::model::gpu_source::{DeviceReading, GpuCollector, GpuError, RawGpuProcess};
use crate::os::trusted_path::check_path;

/// Names tried after the configured path, in order.
pub const LIBRARY_NAMES: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

/// Reads NVIDIA GPUs through NVML.
pub struct NvmlCollector {
    configured: Option<PathBuf>,
    loaded: Option<Loaded>,
    /// `Some(uid)`: the configured library is loaded only if no one but root
    /// and `uid` can change it (a root daemon: `Some(0)`).
    trusted_uid: Option<u32>,
}

/// NVML, initialised, and what was found at open.
struct Loaded {
    /// What does not change, one per device of `handles`, in its order.
    devices: Vec<Cached>,
    /// The library name or path that loaded.
    library: String,
    driver: Option<String>,
    /// The newest CUDA version the driver supports (`12.2`).
    cuda_version: Option<String>,
    /// Devices that could not be reached at open, in words.
    unreachable: Vec<String>,
    /// Why an earlier candidate path did not load (a configured path that
    /// is wrong, while the usual name worked).
    skipped: Vec<String>,
    /// The library and each device's handle.
    handles: DeviceHandles,
}

/// What does not change of a device: name, UUID, unsupported queries.
struct Cached {
    index: u32,
    name: String,
    uuid: Option<String>,
    unsupported: Vec<Query>,
}

/// The queries made every tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Query {
    Memory,
    Utilization,
    Compute,
    Graphics,
}

impl Query {
    fn as_str(self) -> &'static str {
        match self {
            Query::Memory => "memory",
            Query::Utilization => "utilization",
            Query::Compute => "compute processes",
            Query::Graphics => "graphics processes",
        }
    }
}

impl NvmlCollector {
    /// `configured`: the library path to try first (`[gpu] nvml_library`).
    /// Running as root, the configured library is checked before every
    /// load (see the module documentation).
    pub fn new(configured: Option<PathBuf>) -> Self {
        let euid = crate::os::this_process::effective_uid();
        Self {
            configured,
            loaded: None,
            trusted_uid: (euid == 0).then_some(0),
        }
    }

    /// Why the configured library must not be loaded, if it must not.
    fn untrusted(&self, path: &OsStr) -> Option<String> {
        let uid = self.trusted_uid?;
        let shown = path.to_string_lossy();
        check_path(std::path::Path::new(path), uid).err().map(|u| {
            format!(
                "configured {shown} did not load: refused, since {}; anyone who can write \
                 there could run their code as root inside headroom; {}, or point \
                 [gpu] nvml_library at the driver's own copy (`ldconfig -p | grep \
                 libnvidia-ml` shows where it is)",
                u.what(),
                u.fix("/usr/lib/")
            )
        })
    }

    /// The paths tried, in order, and whether each is the configured one.
    fn candidates(&self) -> Vec<(&OsStr, bool)> {
        let mut v: Vec<(&OsStr, bool)> = Vec::with_capacity(3);
        if let Some(p) = &self.configured {
            v.push((p.as_os_str(), true));
        }
        v.extend(LIBRARY_NAMES.iter().map(|n| (OsStr::new(n), false)));
        v
    }
}

impl GpuCollector for NvmlCollector {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn open(&mut self) -> Result<(), GpuError> {
        self.loaded = None;
        if STATIC_BUILD {
            return Err(static_build_error(
                std::path::Path::new(NVIDIA_DRIVER_PROC).exists(),
            ));
        }
        let mut skipped = Vec::new();
        let mut not_found = Vec::new();
        let mut refused = false;
        for (path, configured) in self.candidates() {
            let shown = path.to_string_lossy().into_owned();
            if configured && let Some(why) = self.untrusted(path) {
                skipped.push(why);
                refused = true;
                continue;
            }
            match Nvml::builder().lib_path(path).init() {
                Ok(nvml) => {
                    let loaded = discover(nvml, shown, skipped);
                    self.loaded = Some(loaded);
                    return Ok(());
                }
                Err(NvmlError::LibloadingError(e)) => {
                    let why = e.to_string();
                    if configured {
                        skipped.push(format!("configured {shown} did not load: {why}"));
                    } else if why.contains("No such file") {
                        not_found.push(shown);
                    } else {
                        skipped.push(format!("{shown} did not load: {why}"));
                    }
                }
                Err(e) => return Err(init_error(&shown, &e)),
            }
        }
        let mut message = String::new();
        for s in &skipped {
            let _ = write!(message, "{s}; ");
        }
        let no_driver = not_found.len() == LIBRARY_NAMES.len();
        if no_driver {
            message.push_str("libnvidia-ml.so.1 not found (no NVIDIA driver)");
        } else {
            message.push_str("no NVML library could be loaded");
        }
        if self.configured.is_some() && !refused {
            message.push_str(
                "; check [gpu] nvml_library: it must be the absolute path of \
                 libnvidia-ml.so.1 (`ldconfig -p | grep libnvidia-ml` shows where it is)",
            );
        } else if self.configured.is_none() && !skipped.is_empty() {
            message.push_str(
                "; set [gpu] nvml_library to the absolute path of libnvidia-ml.so.1 \
                 (`ldconfig -p | grep libnvidia-ml` shows where it is)",
            );
        }
        Err(GpuError {
            message,
            no_driver: no_driver && skipped.is_empty(),
        })
    }

    fn describe(&self) -> String {
        let Some(l) = &self.loaded else {
            return "not open".to_string();
        };
        let mut s = match &l.driver {
            Some(v) => format!("driver {v} through {}", l.library),
            None => format!("NVML through {}", l.library),
        };
        if let Some(cuda) = &l.cuda_version {
            let _ = write!(s, " (CUDA {cuda})");
        }
        if l.devices.is_empty() && l.unreachable.is_empty() {
            s.push_str(", no NVIDIA GPU found");
        }
        for d in &l.devices {
            let _ = write!(s, "; GPU {}: {}", d.index, d.name);
            if !d.unsupported.is_empty() {
                let names: Vec<&str> = d.unsupported.iter().map(|q| q.as_str()).collect();
                let _ = write!(s, " (not supported: {})", names.join(", "));
            }
        }
        for u in l.unreachable.iter().chain(&l.skipped) {
            let _ = write!(s, "; {u}");
        }
        s
    }

    fn read(&mut self) -> Result<Vec<DeviceReading>, GpuError> {
        let Some(loaded) = self.loaded.as_mut() else {
            return Err(GpuError {
                message: "read before open".to_string(),
                no_driver: false,
            });
        };
        let Loaded {
            devices,
            handles,
            cuda_version,
            ..
        } = loaded;
        let mut out = Vec::with_capacity(devices.len());
        for (cached, device) in devices.iter_mut().zip(handles.devices()) {
            let mut reading = read_device(&device, cached)?;
            reading.cuda_version.clone_from(cuda_version);
            out.push(reading);
        }
        Ok(out)
    }

    fn close(&mut self) {
        self.loaded = None;
    }
}

/// After a successful init: the driver version and every device's handle,
/// name and UUID.
fn discover(nvml: Nvml, library: String, skipped: Vec<String>) -> Loaded {
    let driver = nvml.sys_driver_version().ok();
    let cuda_version = nvml
        .sys_cuda_driver_version()
        .ok()
        .and_then(crate::model::gpu_source::cuda_driver_version)
        .map(|(major, minor)| format!("{major}.{minor}"));
    let count = nvml.device_count();
    let mut handles = DeviceHandles::new(nvml);
    let mut devices = Vec::new();
    let mut unreachable = Vec::new();
    match count {
        Ok(count) => {
            for index in 0..count {
                match handles.add(index) {
                    Ok(device) => devices.push(Cached {
                        index,
                        name: device.name().unwrap_or_else(|_| "NVIDIA GPU".to_string()),
                        uuid: device.uuid().ok(),
                        unsupported: Vec::new(),
                    }),
                    Err(e) => unreachable.push(format!("GPU {index}: {}", describe_error(&e))),
                }
            }
        }
        Err(e) => unreachable.push(format!("cannot count GPUs: {}", describe_error(&e))),
    }
    Loaded {
        devices,
        library,
        driver,
        cuda_version,
        unreachable,
        skipped,
        handles,
    }
}

/// One device's figures for this pass. `Err` only for errors that mean NVML
/// as a whole stopped working.
fn read_device(device: &Device<'_>, cached: &mut Cached) -> Result<DeviceReading, GpuError> {
    let mut r = DeviceReading {
        index: cached.index,
        name: cached.name.clone(),
        uuid: cached.uuid.clone(),
        ..DeviceReading::default()
    };
    if let Some(m) = ask(cached, Query::Memory, &mut r.problems, || {
        device.memory_info()
    })? {
        r.memory_total = Some(m.total);
        r.memory_used = Some(m.used);
        r.memory_reserved = Some(m.reserved);
    }
    if let Some(u) = ask(cached, Query::Utilization, &mut r.problems, || {
        device.utilization_rates()
    })? {
        r.utilization = Some(f64::from(u.gpu.min(100)) / 100.0);
    }
    if let Some(list) = ask(cached, Query::Compute, &mut r.problems, || {
        device.running_compute_processes()
    })? {
        r.compute = list.iter().map(raw_process).collect();
    }
    if let Some(list) = ask(cached, Query::Graphics, &mut r.problems, || {
        device.running_graphics_processes()
    })? {
        r.graphics = list.iter().map(raw_process).collect();
    }
    Ok(r)
}

/// Runs `query` unless the device is known not to support it. Unsupported:
/// remembered, `None`. Another per-device failure: a problem, `None`.
/// A failure of NVML as a whole: `Err`.
fn ask<T>(
    cached: &mut Cached,
    query: Query,
    problems: &mut Vec<String>,
    f: impl FnOnce() -> Result<T, NvmlError>,
) -> Result<Option<T>, GpuError> {
    if cached.unsupported.contains(&query) {
        return Ok(None);
    }
    match f() {
        Ok(v) => Ok(Some(v)),
        Err(
            NvmlError::NotSupported
            | NvmlError::FailedToLoadSymbol(_)
            | NvmlError::FunctionNotFound,
        ) => {
            cached.unsupported.push(query);
            Ok(None)
        }
        Err(
            e @ (NvmlError::Uninitialized
            | NvmlError::DriverNotLoaded
            | NvmlError::LibRmVersionMismatch
            | NvmlError::LibraryNotFound),
        ) => Err(GpuError {
            message: describe_error(&e),
            no_driver: false,
        }),
        Err(e) => {
            problems.push(format!("{}: {}", query.as_str(), describe_error(&e)));
            Ok(None)
        }
    }
}

fn raw_process(p: &ProcessInfo) -> RawGpuProcess {
    RawGpuProcess {
        pid: p.pid,
        memory: match p.used_gpu_memory {
            UsedGpuMemory::Used(bytes) => Some(bytes),
            UsedGpuMemory::Unavailable => None,
        },
        gpu_instance: p.gpu_instance_id,
    }
}

/// Whether this is a statically linked build (the musl tarball): it has no
/// dynamic loader, so no NVML library can be loaded into it (musl's static
/// `dlopen` fails every time).
const STATIC_BUILD: bool = cfg!(target_feature = "crt-static");

/// Present where the NVIDIA kernel driver is loaded.
const NVIDIA_DRIVER_PROC: &str = "/proc/driver/nvidia/version";

/// Why a static build reads no GPU: a warning where the NVIDIA driver is
/// loaded (GPU memory goes unseen), a note like "no driver" where it is not.
fn static_build_error(driver_loaded: bool) -> GpuError {
    let mut message = format!(
        "{}: a statically linked headroom cannot load libnvidia-ml.so.1",
        crate::model::gpu_source::STATIC_BUILD_NOTE
    );
    if driver_loaded {
        message.push_str(
            "; the NVIDIA driver is loaded here, so for GPU memory install the .deb, run the \
             container image or build headroom from source (cargo build --release)",
        );
    } else {
        message.push_str(" (and no NVIDIA driver is loaded here)");
    }
    GpuError {
        message,
        no_driver: !driver_loaded,
    }
}

/// nvmlInit failed although the library loaded.
fn init_error(library: &str, e: &NvmlError) -> GpuError {
    let no_driver = matches!(e, NvmlError::DriverNotLoaded);
    GpuError {
        message: format!("{library} loaded, but {}", describe_error(e)),
        no_driver,
    }
}

/// NVML's errors in the project's words, with what to do where that is known.
fn describe_error(e: &NvmlError) -> String {
    match e {
        NvmlError::DriverNotLoaded => "the NVIDIA kernel driver is not loaded (no nvidia module; \
             `nvidia-smi` says the same)"
            .to_string(),
        NvmlError::NoPermission => "no permission to talk to the NVIDIA driver; run headroom as \
             root, or give its user access to /dev/nvidiactl and /dev/nvidia*"
            .to_string(),
        NvmlError::LibRmVersionMismatch => "the NVML library does not match the loaded NVIDIA \
             kernel module (driver upgraded without a reboot?); reboot, or reload the nvidia \
             modules"
            .to_string(),
        NvmlError::GpuLost => "the GPU fell off the bus or is otherwise inaccessible".to_string(),
        NvmlError::Uninitialized => "NVML is no longer initialised".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configured_path_is_tried_first_then_the_versioned_name() {
        let c = NvmlCollector::new(Some(PathBuf::from("/opt/nv/libnvidia-ml.so.1")));
        let tried: Vec<(String, bool)> = c
            .candidates()
            .into_iter()
            .map(|(p, conf)| (p.to_string_lossy().into_owned(), conf))
            .collect();
        assert_eq!(
            tried,
            [
                ("/opt/nv/libnvidia-ml.so.1".to_string(), true),
                ("libnvidia-ml.so.1".to_string(), false),
                ("libnvidia-ml.so".to_string(), false),
            ]
        );
    }

    #[test]
    fn the_static_build_says_it_cannot_load_nvml() {
        let with_driver = static_build_error(true);
        assert!(!with_driver.no_driver, "a GPU machine must hear it");
        assert!(
            with_driver
                .message
                .starts_with("not available in the static build"),
            "{}",
            with_driver.message
        );
        assert!(
            with_driver.message.contains("install the .deb"),
            "{}",
            with_driver.message
        );
        let without = static_build_error(false);
        assert!(without.no_driver);
        assert!(
            without.message.contains("no NVIDIA driver is loaded here"),
            "{}",
            without.message
        );
    }

    /// On this machine as it is: without a driver the open says so; with
    /// one, every device reads with the CUDA version the driver supports
    /// (`major.minor`), which `describe` names too.
    #[test]
    fn the_driver_s_cuda_version_is_read_where_there_is_a_driver() {
        let mut c = NvmlCollector::new(None);
        match c.open() {
            Err(e) => {
                assert!(
                    e.message.contains("no NVIDIA driver") || !e.no_driver,
                    "{}",
                    e.message
                );
                println!("no driver here: {}", e.message);
            }
            Ok(()) => {
                let described = c.describe();
                println!("{described}");
                let readings = c.read().unwrap();
                for r in &readings {
                    let v = r.cuda_version.as_deref().unwrap_or_else(|| panic!("{r:?}"));
                    let (major, minor) = v.split_once('.').unwrap();
                    assert!(major.parse::<u32>().unwrap() >= 1, "{v}");
                    minor.parse::<u32>().unwrap();
                    assert!(described.contains(&format!("(CUDA {v})")), "{described}");
                    println!("GPU {}: {} CUDA {v}", r.index, r.name);
                }
            }
        }
    }

    #[test]
    fn read_before_open_is_an_error_not_a_panic() {
        let mut c = NvmlCollector::new(None);
        assert!(c.read().is_err());
        assert_eq!(c.describe(), "not open");
    }

    #[test]
    fn unavailable_process_memory_is_unknown_not_zero() {
        let p = ProcessInfo {
            pid: 42,
            used_gpu_memory: UsedGpuMemory::Unavailable,
            gpu_instance_id: Some(1),
            compute_instance_id: Some(0),
        };
        assert_eq!(
            raw_process(&p),
            RawGpuProcess {
                pid: 42,
                memory: None,
                gpu_instance: Some(1)
            }
        );
    }

    #[test]
    fn errors_say_what_to_do() {
        assert!(describe_error(&NvmlError::NoPermission).contains("run headroom as root"));
        assert!(describe_error(&NvmlError::LibRmVersionMismatch).contains("reboot"));
        let e = init_error("libnvidia-ml.so.1", &NvmlError::DriverNotLoaded);
        assert!(e.no_driver);
        assert!(
            e.message
                .starts_with("libnvidia-ml.so.1 loaded, but the NVIDIA kernel driver")
        );
    }
}
