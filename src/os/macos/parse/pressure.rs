//! macOS memory-pressure values into a [`PressureLevel`].
//!
//! - `kern.memorystatus_vm_pressure_level` does not return the kernel's
//!   internal level (0 normal … 4 jetsam, `doc/vm/memorystatus_notify.md`):
//!   its handler passes it through
//!   `convert_internal_pressure_level_to_dispatch_level()`
//!   (`bsd/kern/kern_memorystatus_notify.c`), so user space reads the
//!   dispatch flags `NOTE_MEMORYSTATUS_PRESSURE_NORMAL` (1), `_WARN` (2,
//!   also for the internal "urgent") and `_CRITICAL` (4). Comparing it with
//!   0/1/3 is a common bug.
//! - `kern.memorystatus_level` is the percentage of memory the kernel
//!   considers free, what `memory_pressure` prints as "System-wide memory
//!   free percentage".
//! - A dispatch memory-pressure source reports the same flags in its data.
//! - `iogpu.wired_limit_mb` is the administrator's ceiling on GPU-wired
//!   memory; 0 means none was set and the driver's default applies.

use crate::model::PressureLevel;

/// `NOTE_MEMORYSTATUS_PRESSURE_NORMAL` / `DISPATCH_MEMORYPRESSURE_NORMAL`.
pub const NORMAL: u64 = 0x1;
/// `NOTE_MEMORYSTATUS_PRESSURE_WARN` / `DISPATCH_MEMORYPRESSURE_WARN`.
pub const WARN: u64 = 0x2;
/// `NOTE_MEMORYSTATUS_PRESSURE_CRITICAL` / `DISPATCH_MEMORYPRESSURE_CRITICAL`.
pub const CRITICAL: u64 = 0x4;

/// The level `kern.memorystatus_vm_pressure_level` reports; `None` for a
/// value that is not one of the three flags.
pub fn level_from_sysctl(raw: i64) -> Option<PressureLevel> {
    match u64::try_from(raw).ok()? {
        NORMAL => Some(PressureLevel::Normal),
        WARN => Some(PressureLevel::Warn),
        CRITICAL => Some(PressureLevel::Critical),
        _ => None,
    }
}

/// The most severe level set in a dispatch memory-pressure source's data
/// (events that arrive together are OR-ed); `None` if no level bit is set.
pub fn level_from_dispatch_mask(mask: u64) -> Option<PressureLevel> {
    let has = |bit: u64| mask & bit != 0;
    if has(CRITICAL) {
        Some(PressureLevel::Critical)
    } else if has(WARN) {
        Some(PressureLevel::Warn)
    } else if has(NORMAL) {
        Some(PressureLevel::Normal)
    } else {
        None
    }
}

/// `kern.memorystatus_level` as a percentage; `None` outside 0–100.
pub fn free_percent(raw: i64) -> Option<u8> {
    u8::try_from(raw).ok().filter(|&p| p <= 100)
}

/// `iogpu.wired_limit_mb` in bytes; `None` for 0 (no limit set: the
/// driver's default applies) and for negative values.
pub fn wired_limit_bytes(mb: i64) -> Option<u64> {
    u64::try_from(mb)
        .ok()
        .filter(|&mb| mb > 0)
        .map(|mb| mb.saturating_mul(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sysctl_reports_dispatch_flags_not_internal_levels() {
        assert_eq!(level_from_sysctl(1), Some(PressureLevel::Normal));
        assert_eq!(level_from_sysctl(2), Some(PressureLevel::Warn));
        assert_eq!(level_from_sysctl(4), Some(PressureLevel::Critical));
        // Internal values that never reach user space through the sysctl.
        assert_eq!(level_from_sysctl(0), None);
        assert_eq!(level_from_sysctl(3), None);
        assert_eq!(level_from_sysctl(-1), None);
    }

    #[test]
    fn coalesced_dispatch_events_report_the_worst_level() {
        assert_eq!(level_from_dispatch_mask(0x1), Some(PressureLevel::Normal));
        assert_eq!(level_from_dispatch_mask(0x3), Some(PressureLevel::Warn));
        assert_eq!(level_from_dispatch_mask(0x6), Some(PressureLevel::Critical));
        // DISPATCH_MEMORYPRESSURE_PROC_LIMIT_WARN (0x10) is not a level.
        assert_eq!(level_from_dispatch_mask(0x10), None);
        assert_eq!(level_from_dispatch_mask(0), None);
    }

    #[test]
    fn free_percent_is_a_percentage() {
        // memory_pressure printed "System-wide memory free percentage: 81%".
        assert_eq!(free_percent(81), Some(81));
        assert_eq!(free_percent(0), Some(0));
        assert_eq!(free_percent(100), Some(100));
        assert_eq!(free_percent(101), None);
        assert_eq!(free_percent(-5), None);
    }

    #[test]
    fn wired_limit_in_mebibytes_to_bytes() {
        // `sudo sysctl iogpu.wired_limit_mb=20480` is the usual way to let
        // a 24 GB Mac wire 20 GiB for a model.
        assert_eq!(wired_limit_bytes(20_480), Some(20 << 30));
        assert_eq!(wired_limit_bytes(0), None);
        assert_eq!(wired_limit_bytes(-1), None);
        assert_eq!(wired_limit_bytes(i64::MAX), Some(u64::MAX));
    }
}
