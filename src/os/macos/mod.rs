//! macOS: Mach, sysctl, libproc, IOKit, libdispatch, the unified log.
//! [`parse`] (the pure parsers, tested on Linux with values captured on
//! real Macs), [`exits`], [`exit_watch`] (its books), [`crash_reports`],
//! [`report_wait`], [`libproc`] and [`log_pipes`] (the `log stream`
//! child's two pipes, read at once) are compiled on every OS; the rest only
//! on macOS:
//!
//! - the sampler (`MacSampler`), `probe` (the machine-wide figures alone),
//!   `vm_source` (the VM statistics both read: per-tick sysctls,
//!   `host_statistics64` at most once a second) and `doctor` (each
//!   collector checked once for `headroom doctor`);
//! - `wake` and `pressure_source` (the dispatch memory-pressure source),
//!   `exit_records`, `exit_watch`'s kqueue thread and `jetsam_stream`
//!   (the `log stream` child behind jetsam kills), `process` (identity
//!   and signals), `notify`;
//! - the thin calls that hand the pure parsers plain values: `ffi_mach`,
//!   `ffi_proc`, `ffi_acl`, `iokit`, `sysctl`, `kqueue`;
//! - in `cargo test` only, `launchctl_native`: the service installer's
//!   `launchctl` waits and retries against launchd itself.

pub mod crash_reports;
#[cfg(target_os = "macos")]
pub mod doctor;
#[cfg(target_os = "macos")]
pub mod exit_records;
pub mod exit_watch;
pub mod exits;
#[cfg(target_os = "macos")]
#[allow(unsafe_code)]
pub(crate) mod ffi;
#[cfg(target_os = "macos")]
pub(crate) mod iokit;
#[cfg(target_os = "macos")]
pub mod jetsam_stream;
#[cfg(all(test, target_os = "macos"))]
mod launchctl_native;
pub mod libproc;
pub mod log_pipes;
#[cfg(target_os = "macos")]
pub mod notify;
pub mod parse;
#[cfg(target_os = "macos")]
pub mod probe;
#[cfg(target_os = "macos")]
pub mod process;
pub mod report_wait;
#[cfg(target_os = "macos")]
mod sampler;
#[cfg(target_os = "macos")]
pub mod vm_source;
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
