//! The macOS probe: the machine-wide figures of a sample without the
//! process table, GPUs or wired limit: the VM statistics through the same
//! [`VmSource`] as the sampler (the `vm.page_*` sysctls on every read,
//! `host_statistics64` at most once a second, since the kernel rate-limits
//! it: [`super::parse::page_counts`]), `vm.swapusage` and
//! `kern.memorystatus_vm_pressure_level`, turned into figures by the same
//! pure functions ([`super::parse::vm`], [`super::parse::pressure`]) the
//! sampler uses. Run every 20 ms, every reading is fresh.

use std::time::Instant;

use super::ffi::mach as ffi_mach;
use super::parse::vm;
use super::vm_source::VmSource;

use crate::model::sampling::{Probe, ProbeReading, SampleError};

/// Reads this Mac's memory, swap and pressure level.
#[derive(Debug, Default)]
pub struct MacProbe {
    vm: VmSource,
    /// Read once: the kernel's page size and `hw.memsize` do not change.
    page_size: Option<u64>,
    memsize: Option<u64>,
}

impl MacProbe {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Probe for MacProbe {
    /// `pressure` is ignored: the kernel's level is one sysctl, always read.
    fn read(&mut self, _pressure: bool) -> Result<ProbeReading, SampleError> {
        let at = Instant::now();
        let page_size =
            match self.page_size {
                Some(p) => p,
                None => *self.page_size.insert(ffi_mach::page_size().map_err(|e| {
                    SampleError::Read {
                        path: "host_page_size".into(),
                        source: e,
                    }
                })?),
            };
        let total = match self.memsize {
            Some(m) => m,
            None => *self
                .memsize
                .insert(ffi_mach::memsize().map_err(|e| SampleError::Read {
                    path: "sysctl hw.memsize".into(),
                    source: e,
                })?),
        };
        let reading = self.vm.read(page_size)?;
        let stats = reading.stats;
        let system = vm::system_memory(&stats, page_size, total);
        let xsw = ffi_mach::swap_usage().ok();
        let swap = vm::swap(xsw.as_ref(), &stats, page_size);
        let raw = ffi_mach::pressure_level_raw().ok();
        Ok(ProbeReading {
            at,
            total: system.total,
            available: system.available,
            swap_total: swap.total,
            swap_used: swap.used,
            pressure: super::sampler::pressure_level(raw, &stats),
            cached_for: reading.cached_for,
        })
    }
}

#[cfg(test)]
mod tests {
    //! These run on a Mac only: the probe against the sampler.

    use super::*;
    use crate::model::sampling::Sampler;

    #[test]
    fn the_probe_agrees_with_the_sampler_on_the_totals() {
        let reading = MacProbe::new().read(true).unwrap();
        let snap = super::super::MacSampler::new().sample().unwrap();
        assert_eq!(reading.total, snap.system.total);
        assert_eq!(reading.swap_total, snap.swap.total);
        assert!(reading.available <= reading.total);
    }
}
