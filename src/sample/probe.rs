//! The system probe: the machine-wide figures alone (available memory, swap
//! used, the pressure level), read in microseconds, so the daemon can look
//! often while a machine-wide rule condition comes near and take a full
//! sample only when one is due (`daemon::cadence` decides when).
//!
//! One implementation per OS (`os::<os>::probe`), opened in
//! [`platform_probe`]: Linux reads `/proc/meminfo` (and
//! `/proc/pressure/memory` where a rule asks about pressure) through files
//! kept open; macOS reads the `vm.page_*` page-count sysctls (with
//! `host_statistics64`, which the kernel rate-limits, at most once a
//! second), `vm.swapusage` and the pressure sysctl.

use crate::model::PressureLevel;

pub use crate::model::sampling::{Probe, ProbeReading};

/// This OS's probe, or why there is none (to be logged once; the daemon
/// then samples on its interval).
pub fn platform_probe() -> Result<Box<dyn Probe>, String> {
    crate::os::native::open_probe()
}

/// The available memory below which this OS's samplers report at least
/// `level` whatever else they see: Linux derives the level from PSI and from
/// the share available (`os::linux::parse::procfs::pressure_level`: warn
/// below 10 %, critical below 5 %); macOS takes the kernel's level as it
/// is, so there is no such floor there. For `normal`, every amount
/// qualifies.
pub fn available_floor(level: PressureLevel, total: u64) -> Option<u64> {
    floor_at(level, total, crate::os::native::AVAILABLE_FLOOR_PERCENT)
}

/// [`available_floor`] for an OS whose samplers report `warn` and
/// `critical` below the available shares `percents` (in percent), if any.
fn floor_at(level: PressureLevel, total: u64, percents: Option<(u64, u64)>) -> Option<u64> {
    if level == PressureLevel::Normal {
        return Some(u64::MAX);
    }
    let (warn, critical) = percents?;
    let percent = match level {
        PressureLevel::Critical => critical,
        _ => warn,
    };
    // The samplers test available·100 < total·percent: the floor is the
    // smallest amount for which that fails.
    Some((u128::from(total) * u128::from(percent)).div_ceil(100) as u64)
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
        assert_eq!(floor_at(PressureLevel::Critical, 1 << 30, None), None);
    }

    #[test]
    fn the_floor_is_where_the_linux_level_changes() {
        use crate::os::linux::parse::procfs::pressure_level;
        let total = 1_000_003;
        for level in [PressureLevel::Warn, PressureLevel::Critical] {
            let floor = floor_at(level, total, crate::os::linux::AVAILABLE_FLOOR_PERCENT).unwrap();
            assert!(pressure_level(None, floor - 1, total) >= level);
            assert!(pressure_level(None, floor, total) < level);
        }
    }
}
