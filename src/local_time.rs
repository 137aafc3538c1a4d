//! Wall-clock times in the local time zone, for people reading the CLI's
//! output (`2026-11-22 14:02:05 +01:00`), and such times read back (`events
//! --since`). The zone's offset comes from libc's `localtime_r` (in
//! `local_time/ffi.rs`), which reads `TZ` and the system zone database.
//! The call sits here, not in `os`: the CLI's formatting is below the OS
//! layer, and `localtime_r` is the same POSIX call on both OSes. Journals,
//! traces and the API keep UTC milliseconds; only display is local, and it
//! always carries its offset, so that a time printed here and pasted back
//! means the same instant.

use std::sync::LazyLock;
use std::time::{Duration, UNIX_EPOCH};

use regex::Regex;

use crate::model::Timestamp;

#[allow(unsafe_code)]
mod ffi;

/// The local zone's offset from UTC at `at`, in seconds east; `None` if libc
/// cannot say (the caller then shows UTC).
pub fn utc_offset(at: Timestamp) -> Option<i64> {
    ffi::gmtoff(at.as_millis() / 1000)
}

/// `YYYY-MM-DD HH:MM:SS +HH:MM` in the local zone (`+00:00`, UTC, if the
/// zone is unknown). A time that does not fit that form (see
/// [`format_with_offset`]) is written as [`Timestamp`]'s `Display` does.
pub fn format(at: Timestamp) -> String {
    let offset = utc_offset(at).unwrap_or(0);
    match wall_clock(at, offset) {
        Some(wall) => format!("{wall} {}", format_offset(offset)),
        None => at.to_string(),
    }
}

/// `+01:00`, `-05:00`, `+05:30`: an offset east of UTC in seconds, as
/// RFC 3339 writes it.
pub fn format_offset(offset: i64) -> String {
    let sign = if offset < 0 { '-' } else { '+' };
    let minutes = offset.unsigned_abs() / 60;
    format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
}

/// `YYYY-MM-DD HH:MM:SS` for `at` shifted by `offset` seconds. A time that
/// does not fit that form once shifted (before 1970, after 9999: a journal
/// line from a broken clock) is written as [`Timestamp`]'s `Display` does.
pub fn format_with_offset(at: Timestamp, offset: i64) -> String {
    wall_clock(at, offset).unwrap_or_else(|| at.to_string())
}

/// `YYYY-MM-DD HH:MM:SS` for `at` shifted by `offset` seconds, if it fits.
fn wall_clock(at: Timestamp, offset: i64) -> Option<String> {
    let utc = UNIX_EPOCH + Duration::from_secs(at.as_millis() / 1000);
    let end = UNIX_EPOCH + Duration::from_millis(Timestamp::RFC3339_END.as_millis());
    let shifted = if offset >= 0 {
        utc.checked_add(Duration::from_secs(offset.unsigned_abs()))
    } else {
        utc.checked_sub(Duration::from_secs(offset.unsigned_abs()))
    }
    .filter(|t| *t >= UNIX_EPOCH && *t <= end)?;
    // "2026-11-22T14:02:05Z" → "2026-11-22 14:02:05"
    let text = humantime::format_rfc3339_seconds(shifted).to_string();
    Some(text.trim_end_matches('Z').replacen('T', " ", 1))
}

/// A time as [`format()`] writes it, or as RFC 3339 does: `2026-11-22
/// 14:02:05 +01:00`, `2026-11-22T13:02:05Z`, `2026-11-22T14:02:05+01:00`,
/// fractions of a second allowed. Without a zone (`2026-11-22 14:02:05`)
/// the time is local, as [`format()`] shows it. The error says what was
/// expected.
pub fn parse(text: &str) -> Result<Timestamp, String> {
    parse_with(text, &|at| utc_offset(at).unwrap_or(0))
}

/// [`parse`] with the local zone's offset at an instant given by `offset_at`.
pub fn parse_with(text: &str, offset_at: &dyn Fn(Timestamp) -> i64) -> Result<Timestamp, String> {
    // The wall clock, then an optional zone: `Z`, `UTC` or `±HH:MM`.
    static ZONED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(.*?)\s*(?:(?i:(z|utc|gmt))|([+-])(\d{2}):?(\d{2}))?$").expect("valid regex")
    });
    let expected = || {
        format!(
            "{text:?} is not a time; write it as headroom prints it, e.g. 2026-11-22 14:00:00 \
             (local time) or 2026-11-22 14:00:00 +01:00, or as RFC 3339, e.g. \
             2026-11-22T13:00:00Z"
        )
    };
    let trimmed = text.trim();
    let caps = ZONED.captures(trimmed).ok_or_else(expected)?;
    let wall = caps.get(1).map_or("", |m| m.as_str());
    // Read as if in UTC: humantime takes no offsets, and a time without a
    // `Z` is UTC to it.
    let as_utc = humantime::parse_rfc3339_weak(wall).map_err(|_| expected())?;
    let wall_millis = as_utc
        .duration_since(UNIX_EPOCH)
        .map_err(|_| expected())?
        .as_millis();
    let wall_millis = i64::try_from(wall_millis).map_err(|_| expected())?;
    let offset = if caps.get(2).is_some() {
        0
    } else if let (Some(sign), Some(h), Some(m)) = (caps.get(3), caps.get(4), caps.get(5)) {
        let (h, m): (i64, i64) = (
            h.as_str().parse().map_err(|_| expected())?,
            m.as_str().parse().map_err(|_| expected())?,
        );
        if h > 23 || m > 59 {
            return Err(expected());
        }
        let east = h * 3600 + m * 60;
        if sign.as_str() == "-" { -east } else { east }
    } else {
        local_offset_for_wall(wall_millis, offset_at)
    };
    u64::try_from(wall_millis - offset * 1000)
        .map(Timestamp)
        .map_err(|_| expected())
}

/// The local offset in force at the wall-clock time `wall_millis` (read as
/// if in UTC): the offset `o` with `offset_at(wall − o) == o`. A wall time
/// that happens twice (the hour a clock is set back) is the earlier
/// instant; one that never happens (the hour skipped) is read with the
/// offset before the change.
fn local_offset_for_wall(wall_millis: i64, offset_at: &dyn Fn(Timestamp) -> i64) -> i64 {
    let at = |millis: i64| Timestamp(u64::try_from(millis).unwrap_or(0));
    let first = offset_at(at(wall_millis));
    let second = offset_at(at(wall_millis - first * 1000));
    let third = offset_at(at(wall_millis - second * 1000));
    let consistent = |o: i64| offset_at(at(wall_millis - o * 1000)) == o;
    // The earlier instant has the larger offset east.
    match [first, second, third]
        .into_iter()
        .filter(|&o| consistent(o))
        .max()
    {
        Some(o) => o,
        None => first.min(second),
    }
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
    fn offsets_are_written_as_rfc_3339_writes_them() {
        assert_eq!(format_offset(0), "+00:00");
        assert_eq!(format_offset(3600), "+01:00");
        assert_eq!(format_offset(-5 * 3600), "-05:00");
        assert_eq!(format_offset(5 * 3600 + 1800), "+05:30");
        assert_eq!(format_offset(-(9 * 3600 + 1800)), "-09:30");
    }

    /// New York's zone in 2023: UTC−4 until 5 November 06:00 UTC, UTC−5 after.
    fn new_york(at: Timestamp) -> i64 {
        if at.as_millis() < 1_699_164_000_000 {
            -4 * 3600
        } else {
            -5 * 3600
        }
    }

    #[test]
    fn printed_times_read_back_with_or_without_their_zone() {
        let at = Timestamp(1_700_000_000_000); // 2023-11-14 22:13:20 UTC
        for text in [
            "2023-11-14 17:13:20 -05:00",
            "2023-11-14 17:13:20-05:00",
            "2023-11-14 17:13:20 -0500",
            "2023-11-14T17:13:20-05:00",
            "2023-11-14 17:13:20",
            "  2023-11-14 17:13:20  ",
            "2023-11-14T22:13:20Z",
            "2023-11-14 22:13:20 UTC",
            "2023-11-14 22:13:20 +00:00",
            "2023-11-15 03:43:20 +05:30",
        ] {
            assert_eq!(parse_with(text, &new_york), Ok(at), "{text}");
        }
        assert_eq!(
            parse_with("2023-11-14 17:13:20.5", &new_york),
            Ok(Timestamp(1_700_000_000_500))
        );
    }

    #[test]
    fn a_wall_time_without_a_zone_takes_the_offset_in_force_then() {
        // Summer time: UTC−4.
        assert_eq!(
            parse_with("2023-07-01 12:00:00", &new_york),
            Ok(Timestamp(1_688_227_200_000))
        );
        // 01:30 happens twice on 5 November: the first, still UTC−4.
        assert_eq!(
            parse_with("2023-11-05 01:30:00", &new_york),
            Ok(Timestamp(1_699_162_200_000))
        );
    }

    #[test]
    fn what_is_not_a_time_is_refused_with_an_example() {
        for text in [
            "soon",
            "",
            "2023-11-14 25:00:00",
            "2023-11-14 17:13:20 +25:00",
        ] {
            let e = parse_with(text, &new_york).unwrap_err();
            assert!(e.contains("2026-11-22 14:00:00 +01:00"), "{text}: {e}");
        }
    }

    #[test]
    fn format_shows_the_zone_and_parse_reads_it_back() {
        let at = Timestamp(1_700_000_000_000);
        let text = format(at);
        assert!(
            text.ends_with(&format_offset(utc_offset(at).unwrap_or(0))),
            "{text}"
        );
        assert_eq!(parse(&text), Ok(at));
    }

    #[test]
    fn the_local_offset_is_within_a_day() {
        let offset = utc_offset(Timestamp(1_700_000_000_000)).unwrap();
        assert!(offset.abs() <= 26 * 3600, "{offset}");
    }
}
