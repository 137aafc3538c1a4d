//! The system probe: the machine-wide figures alone (available memory, swap
//! used, the pressure level), read in microseconds, so the daemon can look
//! often while a machine-wide rule condition comes near and take a full
//! sample only when one is due (`daemon::cadence` decides when).
//!
//! One implementation per OS, chosen in [`platform_probe`]: Linux reads
//! `/proc/meminfo` (and `/proc/pressure/memory` where a rule asks about
//! pressure) through files kept open ([`linux`]); macOS reads
//! `host_statistics64`, `vm.swapusage` and the pressure sysctl
//! (`sample::macos::probe`). Elsewhere there is none, and the daemon
//! samples on its interval.

#[cfg(target_os = "linux")]
pub mod linux;

use std::time::Instant;

use crate::model::{PressureLevel, Snapshot};
use crate::sample::SampleError;

/// One look at the machine-wide figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// When it was read (monotonic).
    pub at: Instant,
    /// Physical memory, bytes.
    pub total: u64,
    /// Memory available without swapping, bytes.
    pub available: u64,
    /// Swap space, bytes (0: no swap).
    pub swap_total: u64,
    /// Swap in use, bytes.
    pub swap_used: u64,
    /// The pressure level as a sample would report it; from the available
    /// share alone when the probe was asked not to read the kernel's
    /// pressure figures.
    pub pressure: PressureLevel,
}

impl Reading {
    /// The same figures from a full or light sample taken at `at`.
    pub fn of(snap: &Snapshot, at: Instant) -> Self {
        Self {
            at,
            total: snap.system.total,
            available: snap.system.available,
            swap_total: snap.swap.total,
            swap_used: snap.swap.used,
            pressure: snap.pressure.level,
        }
    }
}

/// Reads the machine-wide figures. Called from a blocking thread, never on
/// the async runtime's workers.
pub trait Probe: Send {
    /// Read them now. With `pressure` false the kernel's pressure figures
    /// (Linux PSI) are not read and the level comes from the available
    /// share alone: no rule asks about pressure.
    fn read(&mut self, pressure: bool) -> Result<Reading, SampleError>;
}

/// This OS's probe, or why there is none (to be logged once; the daemon
/// then samples on its interval).
pub fn platform_probe() -> Result<Box<dyn Probe>, String> {
    #[cfg(target_os = "linux")]
    {
        linux::LinuxProbe::open(std::path::Path::new("/proc"))
            .map(|p| Box::new(p) as Box<dyn Probe>)
            .map_err(|e| e.to_string())
    }
    #[cfg(target_os = "macos")]
    {
        Ok(Box::new(super::macos::probe::MacProbe::new()))
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        Err("no system probe on this OS".to_string())
    }
}

/// The available memory below which this OS's samplers report at least
/// `level` whatever else they see: Linux derives the level from PSI and from
/// the share available ([`crate::sys::procfs::pressure_level`]: warn below
/// 10 %, critical below 5 %), as does the sysinfo fallback; macOS takes the
/// kernel's level as it is, so there is no such floor there. For `normal`,
/// every amount qualifies.
pub fn available_floor(level: PressureLevel, total: u64) -> Option<u64> {
    let share = |percent: u64| {
        // The samplers test available·100 < total·percent: the floor is
        // the smallest amount for which that fails.
        Some((u128::from(total) * u128::from(percent)).div_ceil(100) as u64)
    };
    if level == PressureLevel::Normal {
        return Some(u64::MAX);
    }
    #[cfg(target_os = "macos")]
    {
        let _ = (share, total);
        None
    }
    #[cfg(target_os = "linux")]
    {
        use crate::sys::procfs::{AVAILABLE_CRITICAL_PERCENT, AVAILABLE_WARN_PERCENT};
        match level {
            PressureLevel::Critical => share(AVAILABLE_CRITICAL_PERCENT),
            _ => share(AVAILABLE_WARN_PERCENT),
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        use crate::sample::fallback::{CRITICAL_AVAILABLE_PERCENT, WARN_AVAILABLE_PERCENT};
        match level {
            PressureLevel::Critical => share(CRITICAL_AVAILABLE_PERCENT),
            _ => share(WARN_AVAILABLE_PERCENT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_pressure_holds_at_any_amount() {
        assert_eq!(
            available_floor(PressureLevel::Normal, 1 << 30),
            Some(u64::MAX)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_floor_is_where_the_linux_level_changes() {
        use crate::sys::procfs::pressure_level;
        let total = 1_000_003;
        for level in [PressureLevel::Warn, PressureLevel::Critical] {
            let floor = available_floor(level, total).unwrap();
            assert!(pressure_level(None, floor - 1, total) >= level);
            assert!(pressure_level(None, floor, total) < level);
        }
    }
}
