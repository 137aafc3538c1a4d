//! What a GPU collector gives, whichever driver it reads: the
//! [`GpuCollector`] trait, one [`DeviceReading`] per device with its
//! processes ([`RawGpuProcess`]), and [`GpuError`]. NVML implements it in
//! the OS layer (`os::linux::nvml`); `sample::gpu` joins the readings into
//! the snapshot.

/// One entry of a driver's process list for a device, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawGpuProcess {
    /// As the driver reports it (NVML: a pid of the host's pid namespace).
    pub pid: u32,
    /// Device memory held, bytes; `None` where the driver reports the value
    /// as not available.
    pub memory: Option<u64>,
    /// The MIG GPU instance the entry is for, where MIG is on.
    pub gpu_instance: Option<u32>,
}

/// One device as read in one pass.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeviceReading {
    pub index: u32,
    pub name: String,
    pub uuid: Option<String>,
    pub memory_total: Option<u64>,
    pub memory_used: Option<u64>,
    pub memory_reserved: Option<u64>,
    /// Busy share, 0–1.
    pub utilization: Option<f64>,
    /// Processes with a compute (CUDA) context.
    pub compute: Vec<RawGpuProcess>,
    /// Processes with a graphics context.
    pub graphics: Vec<RawGpuProcess>,
    /// Queries that failed on this device this pass, in words
    /// (`processes: GPU is lost`); the other figures are still good.
    pub problems: Vec<String>,
    /// The newest CUDA version the driver supports, `major.minor`; the
    /// same for every device of one driver.
    pub cuda_version: Option<String>,
}

/// Why a collector cannot be opened or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct GpuError {
    /// What is wrong and, where known, what to do.
    pub message: String,
    /// True when the machine simply has no driver for this kind of GPU:
    /// logged as news, not as a warning.
    pub no_driver: bool,
}

/// Reads GPUs. Called from the sampler's blocking thread.
///
/// `sample::gpu::GpuMonitor` calls `open` once, then `read` every tick; after a failed
/// `open`, or a failed `read` followed by `close`, it calls `open` again
/// only after a few minutes.
pub trait GpuCollector: Send {
    /// Short name for logs, metrics and `headroom doctor` (`nvml`).
    fn name(&self) -> &'static str;

    /// Load the library, initialise it, and find the devices.
    fn open(&mut self) -> Result<(), GpuError>;

    /// What the open collector found (library, driver, devices, queries the
    /// devices do not support), in one line.
    fn describe(&self) -> String;

    /// Read every device. An error means the collector as a whole stopped
    /// working; a failed query on one device goes into its `problems`.
    fn read(&mut self) -> Result<Vec<DeviceReading>, GpuError>;

    /// Let go of the library after a failed read.
    fn close(&mut self);
}

/// How a GPU collector's status begins in a build that cannot load the
/// driver's library (the static build).
pub const STATIC_BUILD_NOTE: &str = "not available in the static build";

/// The CUDA version NVML's `nvmlSystemGetCudaDriverVersion` returns, as
/// major and minor: nvml.h's `NVML_CUDA_DRIVER_VERSION_MAJOR(v)` is
/// `v / 1000` and `NVML_CUDA_DRIVER_VERSION_MINOR(v)` is `(v % 1000) / 10`
/// (12020 is CUDA 12.2). `None` for a value no driver gives.
pub fn cuda_driver_version(v: i32) -> Option<(u64, u64)> {
    let v = u64::try_from(v).ok().filter(|&v| v >= 1000)?;
    Some((v / 1000, (v % 1000) / 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_cuda_driver_versions_read_as_nvml_h_says() {
        // nvml.h: NVML_CUDA_DRIVER_VERSION_MAJOR(v) is v / 1000, _MINOR(v)
        // is (v % 1000) / 10; 12020 is CUDA 12.2.
        assert_eq!(cuda_driver_version(12020), Some((12, 2)));
        assert_eq!(cuda_driver_version(11080), Some((11, 8)));
        assert_eq!(cuda_driver_version(13000), Some((13, 0)));
        assert_eq!(cuda_driver_version(0), None);
        assert_eq!(cuda_driver_version(-1), None);
    }
}
