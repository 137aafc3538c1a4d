//! Wall-clock times in the local time zone, for people reading the CLI's
//! output (`2026-11-22 14:02:05`). An FFI file: the zone's offset comes from
//! libc's `localtime_r`, which reads `TZ` and the system zone database.
//! Journals, traces and the API keep UTC milliseconds; only display is local.

use std::mem::MaybeUninit;
use std::time::{Duration, UNIX_EPOCH};

use crate::model::Timestamp;

/// The local zone's offset from UTC at `at`, in seconds east; `None` if libc
/// cannot say (the caller then shows UTC).
pub fn utc_offset(at: Timestamp) -> Option<i64> {
    let secs = libc::time_t::try_from(at.as_millis() / 1000).ok()?;
    let mut tm = MaybeUninit::<libc::tm>::zeroed();
    // SAFETY: both pointers are valid for the call: `secs` lives on our stack
    // and `tm` is a zeroed `struct tm` that localtime_r fills in; it returns
    // null on failure, checked below, and keeps neither pointer.
    let filled = unsafe { libc::localtime_r(&secs, tm.as_mut_ptr()) };
    if filled.is_null() {
        return None;
    }
    // SAFETY: localtime_r succeeded, so it initialised every field; a zeroed
    // `struct tm` (integers and a nullable pointer) was valid to begin with.
    let tm = unsafe { tm.assume_init() };
    #[allow(
        clippy::useless_conversion,
        reason = "c_long is i64 on 64-bit targets but i32 on 32-bit ones"
    )]
    let offset = i64::from(tm.tm_gmtoff);
    Some(offset)
}

/// `YYYY-MM-DD HH:MM:SS` in the local zone (UTC with a `Z` if the zone is
/// unknown).
pub fn format(at: Timestamp) -> String {
    match utc_offset(at) {
        Some(offset) => format_with_offset(at, offset),
        None => format!("{}Z", format_with_offset(at, 0)),
    }
}

/// `YYYY-MM-DD HH:MM:SS` for `at` shifted by `offset` seconds. A time that
/// does not fit that form once shifted (before 1970, after 9999: a journal
/// line from a broken clock) is written as [`Timestamp`]'s `Display` does.
pub fn format_with_offset(at: Timestamp, offset: i64) -> String {
    let utc = UNIX_EPOCH + Duration::from_secs(at.as_millis() / 1000);
    let end = UNIX_EPOCH + Duration::from_millis(Timestamp::RFC3339_END.as_millis());
    let shifted = if offset >= 0 {
        utc.checked_add(Duration::from_secs(offset.unsigned_abs()))
    } else {
        utc.checked_sub(Duration::from_secs(offset.unsigned_abs()))
    }
    .filter(|t| *t >= UNIX_EPOCH && *t <= end);
    let Some(shifted) = shifted else {
        return at.to_string();
    };
    // "2026-11-22T14:02:05Z" → "2026-11-22 14:02:05"
    let text = humantime::format_rfc3339_seconds(shifted).to_string();
    text.trim_end_matches('Z').replacen('T', " ", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_shift_the_wall_clock() {
        let at = Timestamp(1_700_000_000_123);
        assert_eq!(format_with_offset(at, 0), "2023-11-14 22:13:20");
        assert_eq!(format_with_offset(at, 3600), "2023-11-14 23:13:20");
        assert_eq!(format_with_offset(at, -5 * 3600), "2023-11-14 17:13:20");
    }

    #[test]
    fn times_that_do_not_fit_are_written_not_panicked_on() {
        // Found by fuzzing the journal reader: an event 21 minutes after the
        // epoch, shown west of UTC, fell before 1970 and humantime panicked.
        assert_eq!(
            format_with_offset(Timestamp(1_305_087), -5 * 3600),
            "1970-01-01T00:21:45.087Z"
        );
        assert_eq!(format_with_offset(Timestamp(0), 0), "1970-01-01 00:00:00");
        assert_eq!(
            format_with_offset(Timestamp(u64::MAX), 3600),
            "18446744073709551615 ms after 1970-01-01T00:00:00Z"
        );
        assert_eq!(
            format_with_offset(Timestamp::RFC3339_END, 0),
            "9999-12-31 23:59:59"
        );
        // Shifted past the year 9999: shown in UTC instead.
        assert_eq!(
            format_with_offset(Timestamp::RFC3339_END, 1),
            "9999-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn the_local_offset_is_within_a_day() {
        let offset = utc_offset(Timestamp(1_700_000_000_000)).unwrap();
        assert!(offset.abs() <= 26 * 3600, "{offset}");
    }
}
