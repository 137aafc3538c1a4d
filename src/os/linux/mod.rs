//! Linux: `/proc`, cgroups, PSI, the kernel log, pidfds, netlink, NVML.
//! [`parse`] is compiled on every OS; the rest only on Linux. Its `unsafe`
//! is all in `ffi/`, one file per call family.

pub mod parse;

#[cfg(target_os = "linux")]
pub mod ceilings;
#[cfg(target_os = "linux")]
mod cgroup_paths;
#[cfg(target_os = "linux")]
pub mod container_view;
#[cfg(target_os = "linux")]
mod copy_estimate;
#[cfg(target_os = "linux")]
pub mod doctor;
#[cfg(target_os = "linux")]
pub mod exit_records;
#[cfg(all(test, target_os = "linux"))]
mod fake_proc;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) mod ffi;
#[cfg(target_os = "linux")]
pub mod kmsg;
#[cfg(target_os = "linux")]
pub mod kmsg_crash;
#[cfg(target_os = "linux")]
mod library_rescan;
#[cfg(target_os = "linux")]
mod library_worker;
#[cfg(target_os = "linux")]
mod light_tick;
#[cfg(target_os = "linux")]
pub mod notify;
#[cfg(target_os = "linux")]
pub mod nvml;
#[cfg(target_os = "linux")]
pub mod probe;
#[cfg(target_os = "linux")]
mod proc_reader;
#[cfg(target_os = "linux")]
pub mod process;
#[cfg(target_os = "linux")]
mod process_reads;
#[cfg(target_os = "linux")]
pub mod psi_trigger;
#[cfg(target_os = "linux")]
mod pss;
#[cfg(target_os = "linux")]
pub mod sampler;
#[cfg(target_os = "linux")]
mod system_files;
#[cfg(target_os = "linux")]
pub mod threads;
#[cfg(target_os = "linux")]
mod tracker;
#[cfg(target_os = "linux")]
mod unowned;
#[cfg(target_os = "linux")]
pub mod wake;
#[cfg(target_os = "linux")]
pub mod zombie;

#[cfg(target_os = "linux")]
pub use sampler::{CeilingReader, LIMITS_EVERY, LinuxSampler, TOP_EXACT, VERIFY_PERIOD};
/// How many levels of a tmpfs mount the scan of memory no process owns
/// walks; a deeper directory makes the scan's figures unknown.
#[cfg(target_os = "linux")]
pub use unowned::MAX_DEPTH as UNOWNED_WALK_DEPTH;

/// The available share (percent) below which the Linux samplers report the
/// `warn` and `critical` levels whatever PSI says
/// ([`parse::procfs::pressure_level`]). macOS takes the kernel's level as it
/// is, so it has none.
pub const AVAILABLE_FLOOR_PERCENT: Option<(u64, u64)> = Some((
    parse::procfs::AVAILABLE_WARN_PERCENT,
    parse::procfs::AVAILABLE_CRITICAL_PERCENT,
));

/// This OS's sampler, reading `/proc`.
#[cfg(target_os = "linux")]
pub fn open_sampler() -> Box<dyn crate::model::sampling::Sampler> {
    Box::new(LinuxSampler::new("/proc"))
}

/// This OS's probe of the machine-wide figures, or why there is none.
#[cfg(target_os = "linux")]
pub fn open_probe() -> Result<Box<dyn crate::model::sampling::Probe>, String> {
    probe::LinuxProbe::open(std::path::Path::new("/proc"))
        .map(|p| Box::new(p) as Box<dyn crate::model::sampling::Probe>)
        .map_err(|e| e.to_string())
}

/// This OS's GPU collector: NVML, loaded from `library` or the driver's
/// usual places.
#[cfg(target_os = "linux")]
pub fn gpu_collector(
    library: Option<std::path::PathBuf>,
) -> Option<Box<dyn crate::model::gpu_source::GpuCollector>> {
    Some(Box::new(nvml::NvmlCollector::new(library)))
}
