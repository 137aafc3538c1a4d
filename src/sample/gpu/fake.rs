//! A [`GpuCollector`] with a device list set by hand, for testing the GPU
//! path (merging, unknown figures, the pid join, the retry schedule) on
//! machines without a GPU, CI included.
//!
//! [`FakeGpu`] is a handle: clones share one state, so a test keeps one
//! clone to change the devices or make `open`/`read` fail while a sampler
//! owns the other, and reads back how often it was called.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{DeviceReading, GpuCollector, GpuError, RawGpuProcess};

#[derive(Debug, Default)]
struct State {
    devices: Vec<DeviceReading>,
    open_error: Option<GpuError>,
    read_error: Option<GpuError>,
    opens: u64,
    reads: u64,
    closes: u64,
}

/// A collector that reports whatever it was last given.
#[derive(Debug, Clone, Default)]
pub struct FakeGpu {
    state: Arc<Mutex<State>>,
}

impl FakeGpu {
    /// Opens fine and reports no devices until told otherwise.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock has failed already.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What every later `read` returns.
    pub fn set_devices(&self, devices: Vec<DeviceReading>) {
        self.state().devices = devices;
    }

    /// Make every later `open` fail with `error` (or succeed, with `None`).
    pub fn fail_open(&self, error: Option<GpuError>) {
        self.state().open_error = error;
    }

    /// Make every later `read` fail with `error` (or succeed, with `None`).
    pub fn fail_read(&self, error: Option<GpuError>) {
        self.state().read_error = error;
    }

    /// How many times `open` was called.
    pub fn opens(&self) -> u64 {
        self.state().opens
    }

    /// How many times `read` was called.
    pub fn reads(&self) -> u64 {
        self.state().reads
    }

    /// How many times `close` was called.
    pub fn closes(&self) -> u64 {
        self.state().closes
    }
}

impl GpuCollector for FakeGpu {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn open(&mut self) -> Result<(), GpuError> {
        let mut s = self.state();
        s.opens += 1;
        match &s.open_error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn describe(&self) -> String {
        let n = self.state().devices.len();
        format!("fake: {n} device{}", if n == 1 { "" } else { "s" })
    }

    fn read(&mut self) -> Result<Vec<DeviceReading>, GpuError> {
        let mut s = self.state();
        s.reads += 1;
        match &s.read_error {
            Some(e) => Err(e.clone()),
            None => Ok(s.devices.clone()),
        }
    }

    fn close(&mut self) {
        self.state().closes += 1;
    }
}

/// A device with `total` bytes of memory, `used` of them in use, no
/// processes and no problems.
pub fn device(index: u32, name: &str, total: u64, used: u64) -> DeviceReading {
    DeviceReading {
        index,
        name: name.to_string(),
        uuid: Some(format!("GPU-fake-{index}")),
        memory_total: Some(total),
        memory_used: Some(used),
        memory_reserved: None,
        utilization: None,
        compute: Vec::new(),
        graphics: Vec::new(),
        problems: Vec::new(),
        cuda_version: None,
    }
}

/// A process-list entry; `memory: None` is the driver's "not available".
pub fn process(pid: u32, memory: Option<u64>) -> RawGpuProcess {
    RawGpuProcess {
        pid,
        memory,
        gpu_instance: None,
    }
}
