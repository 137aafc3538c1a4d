//! The macOS sampler: Mach, libc and IOKit into a [`crate::model::Snapshot`].
//!
//! The code is split so that everything that turns raw kernel values into
//! numbers is a pure function compiled on every OS, unit-tested on Linux
//! with values captured on real Macs, and only the thin layers that call the
//! kernel are compiled for macOS alone:
//!
//! | pure (all OSes) | what it converts |
//! |---|---|
//! | [`vm`] | `vm_statistics64` words and `xsw_usage` → system memory and swap |
//! | [`pressure`] | `kern.memorystatus_*` and dispatch masks → pressure level |
//! | [`procargs`] | `KERN_PROCARGS2` bytes → argv (and env) |
//! | [`kinfo`] | `kinfo_proc` bytes → start time, uid, ppid, caught signals |
//! | [`proc_info`] | `proc_bsdinfo` / `rusage_info_v4` fields, errno → failure kind |
//! | [`gpu_stats`] | IOAccelerator `PerformanceStatistics`, `IOUserClientCreator` |
//! | [`exits`] | a zombie's `p_xstat` → how it ended |
//! | [`acl`] | extended ACL entries → the write rights they grant |
//! | [`jetsam`] | `log stream --style ndjson` lines → jetsam kills |
//! | [`crash_report`] | `.ips` crash reports → exception, signal, library, Rosetta |
//! | [`crash_reports`] | the report directories → new reports, believed or refused |
//!
//! `jetsam_stream` keeps the `log stream` child that feeds [`jetsam`].
//! The FFI layers (`ffi_mach`, `ffi_proc`, `ffi_passwd`, `iokit`,
//! `pressure_source`) hold all of the `unsafe`, each block with its
//! `// SAFETY:` reasoning, and hand plain values to the pure functions. [`MacSampler`] ties them together;
//! `probe::MacProbe` reads the machine-wide figures alone for the daemon's
//! system probe; [`doctor`] checks each collector once for `headroom doctor`.

pub mod crash_reports;
#[cfg(target_os = "macos")]
pub mod doctor;
#[cfg(target_os = "macos")]
pub mod exit_records;
pub mod exits;
#[cfg(target_os = "macos")]
pub(crate) mod ffi_acl;
#[cfg(target_os = "macos")]
pub(crate) mod ffi_mach;
#[cfg(target_os = "macos")]
pub(crate) mod ffi_passwd;
#[cfg(target_os = "macos")]
pub(crate) mod ffi_proc;
#[cfg(target_os = "macos")]
pub(crate) mod iokit;
#[cfg(target_os = "macos")]
pub mod jetsam_stream;
pub mod libproc;
#[cfg(target_os = "macos")]
pub mod notify;
pub mod parse;
#[cfg(target_os = "macos")]
pub mod pressure_source;
#[cfg(target_os = "macos")]
pub mod probe;
#[cfg(target_os = "macos")]
pub mod process;
#[cfg(target_os = "macos")]
mod sampler;
#[cfg(target_os = "macos")]
pub(crate) mod sysctl;
#[cfg(target_os = "macos")]
pub mod wake;

#[cfg(target_os = "macos")]
pub use sampler::MacSampler;

/// macOS takes the kernel's pressure level as it is: no available share
/// sets it (Linux exports the same name with its floors).
pub const AVAILABLE_FLOOR_PERCENT: Option<(u64, u64)> = None;

/// This OS's sampler: Mach, libc and IOKit.
#[cfg(target_os = "macos")]
pub fn open_sampler() -> Box<dyn crate::model::sampling::Sampler> {
    Box::new(MacSampler::new())
}

/// This OS's probe of the machine-wide figures.
#[cfg(target_os = "macos")]
pub fn open_probe() -> Result<Box<dyn crate::model::sampling::Probe>, String> {
    Ok(Box::new(probe::MacProbe::new()))
}

#[cfg(target_os = "macos")]
/// No separate GPU collector on macOS: the sampler reads the GPU itself
/// through IOKit, and NVML does not exist here (Linux exports the same name
/// with NVML).
pub fn gpu_collector(
    library: Option<std::path::PathBuf>,
) -> Option<Box<dyn crate::model::gpu_source::GpuCollector>> {
    let _ = library;
    None
}
