//! NVML device handles kept between reads. `nvml-wrapper` hands a device
//! out as a `Device` borrowing its `Nvml`, which a collector that keeps the
//! library open across ticks cannot store; [`DeviceHandles`] stores the raw
//! handles next to the `Nvml` they came from and lends them back as
//! `Device`s, so that a handle is only ever used with a live, initialised
//! library.

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::nvmlDevice_t;

/// NVML, initialised, and the handles of the devices added to it, in the
/// order they were added.
pub struct DeviceHandles {
    /// Each from `nvmlDeviceGetHandleByIndex_v2` on `nvml` (see [`Self::add`]).
    handles: Vec<nvmlDevice_t>,
    /// Its `Drop` calls `nvmlShutdown`, after which the handles are
    /// dangling; they are only used through `Device`s borrowing it.
    nvml: Nvml,
}

// SAFETY: `DeviceHandles` is not `Send` only because `nvmlDevice_t` is a raw
// pointer. The handles are opaque pointers into NVML's own state, valid
// until `nvmlShutdown`, which runs only when `nvml`, owned by the same
// struct, is dropped; they are only ever used through `Device` borrowing
// that `nvml`. NVML is thread-safe ("NVML is thread-safe so it is safe to
// make simultaneous NVML calls from multiple threads", NVML API reference),
// and `Nvml` itself is `Send + Sync`, so moving the whole struct to another
// thread (the sampler runs on tokio's blocking pool) is sound.
unsafe impl Send for DeviceHandles {}

impl DeviceHandles {
    /// No devices yet.
    pub fn new(nvml: Nvml) -> Self {
        Self {
            handles: Vec::new(),
            nvml,
        }
    }

    /// Look device `index` up and keep its handle; the device, for what
    /// does not change (name, UUID).
    pub fn add(&mut self, index: u32) -> Result<Device<'_>, NvmlError> {
        let handle = {
            let device = self.nvml.device_by_index(index)?;
            // SAFETY: only reads the handle out; it stays valid while
            // `self.nvml` lives, and it is kept next to it.
            unsafe { device.handle() }
        };
        self.handles.push(handle);
        // SAFETY: the handle came from `nvmlDeviceGetHandleByIndex_v2` on
        // this same `nvml`, which is still initialised (it is shut down only
        // when dropped, and it is borrowed here).
        Ok(unsafe { Device::new(handle, &self.nvml) })
    }

    /// Each device added, in the order added.
    pub fn devices(&self) -> impl Iterator<Item = Device<'_>> {
        self.handles.iter().map(|&handle| {
            // SAFETY: as in `add`: every handle came from this `nvml`, which
            // is borrowed for as long as the `Device` lives.
            unsafe { Device::new(handle, &self.nvml) }
        })
    }
}
