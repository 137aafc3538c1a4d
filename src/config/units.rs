//! Units written in the configuration file: sizes (`"8GiB"`), size limits (`"8GiB"` or
//! `"60%"` of physical memory), growth rates (`"1GiB/10s"`) and durations (`"30s"`).
//!
//! Each is converted once, at parse time, to bytes or a [`Duration`]. The `parse_*`
//! functions are pure and never panic, whatever the input; their errors carry the input
//! and an example of a valid value. `Display` writes a string that parses back to the
//! same value, and `Serialize` writes that string, so the effective configuration and
//! the JSON API show `"8GiB"` and `"250ms"` rather than raw numbers.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

const SIZE_HINT: &str =
    r#"expected a number and a unit such as "512MiB", "8GiB" or "4096" (bytes)"#;
const LIMIT_HINT: &str = r#"expected a number and a unit such as "512MiB", "8GiB" or "60%""#;
const RATE_HINT: &str =
    r#"expected a size per duration such as "1GiB/10s", "200MiB/s" or "512MiB/1m""#;
const DURATION_HINT: &str = r#"expected a number and a unit such as "250ms", "30s" or "1m 30s""#;
const SIZE_UNITS: &str =
    "B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000)";

/// A value in the configuration that could not be read as a size, rate or duration.
///
/// `Display` gives the whole story, e.g.
/// `invalid size "12XB": unknown unit "XB"; use B, KiB, ...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {input:?}: {reason}")]
pub struct UnitError {
    kind: &'static str,
    input: String,
    reason: String,
}

impl UnitError {
    fn new(kind: &'static str, input: &str, reason: impl Into<String>) -> Self {
        UnitError {
            kind,
            input: input.to_owned(),
            reason: reason.into(),
        }
    }

    /// What was being parsed: `"size"`, `"size limit"`, `"rate"` or `"duration"`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The text that failed to parse, verbatim.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// Why it failed and what a valid value looks like, without the input.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The message without the input, for contexts that show the input separately
    /// (a config error points at the value in the file).
    fn without_input(&self) -> String {
        format!("invalid {}: {}", self.kind, self.reason)
    }
}

// ---------------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------------

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;
const KB: u64 = 1_000;
const MB: u64 = 1_000_000;
const GB: u64 = 1_000_000_000;
const TB: u64 = 1_000_000_000_000;

/// Units `Display` may choose from, largest first.
const DISPLAY_UNITS: [(u64, &str); 8] = [
    (TIB, "TiB"),
    (TB, "TB"),
    (GIB, "GiB"),
    (GB, "GB"),
    (MIB, "MiB"),
    (MB, "MB"),
    (KIB, "KiB"),
    (KB, "KB"),
];

fn size_unit(unit: &str) -> Option<u64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => KIB,
        "mib" => MIB,
        "gib" => GIB,
        "tib" => TIB,
        "kb" => KB,
        "mb" => MB,
        "gb" => GB,
        "tb" => TB,
        _ => return None,
    })
}

/// A number of bytes, written `"512MiB"`, `"1.5GiB"`, `"100MB"` or `"4096"`.
///
/// Binary units (`KiB` .. `TiB`) are powers of 1024, decimal ones (`KB` .. `TB`) powers
/// of 1000; the unit is case-insensitive and may follow a space. Fractions are rounded
/// to the nearest byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// The size in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
}

/// Parses a size such as `"8GiB"`, `"1.5 GiB"`, `"100MB"` or `"4096"` into bytes.
pub fn parse_size(text: &str) -> Result<ByteSize, UnitError> {
    parse_size_as("size", text, SIZE_HINT)
}

fn parse_size_as(kind: &'static str, text: &str, hint: &str) -> Result<ByteSize, UnitError> {
    let err = |reason: String| UnitError::new(kind, text, reason);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(err(format!("the value is empty; {hint}")));
    }
    if trimmed.starts_with('-') {
        return Err(err(format!("a size cannot be negative; {hint}")));
    }
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    if number.is_empty() {
        return Err(err(format!("no number before the unit; {hint}")));
    }
    let unit = unit.trim_start();
    let Some(multiplier) = size_unit(unit) else {
        return Err(err(format!("unknown unit {unit:?}; use {SIZE_UNITS}")));
    };
    match scale_decimal(number, multiplier) {
        Ok(bytes) => Ok(ByteSize(bytes)),
        Err(ScaleError::Malformed) => Err(err(format!("{number:?} is not a number; {hint}"))),
        Err(ScaleError::TooPrecise) => Err(err(format!(
            "too many digits after the decimal point (at most {MAX_FRACTION_DIGITS}); {hint}"
        ))),
        Err(ScaleError::TooLarge) => Err(err(format!(
            "too large: sizes must be below 16 EiB (16777216TiB); {hint}"
        ))),
    }
}

const MAX_FRACTION_DIGITS: usize = 18;

enum ScaleError {
    Malformed,
    TooPrecise,
    TooLarge,
}

/// `number × multiplier`, rounded half up to an integer, computed exactly.
///
/// `number` is ASCII digits with at most one decimal point and digits on both sides of
/// it. Decimal arithmetic in `u128` rather than `f64`, so `"0.1KiB"` is exactly 102
/// bytes and `"99999999TiB"` is an overflow rather than a silent loss of precision.
fn scale_decimal(number: &str, multiplier: u64) -> Result<u64, ScaleError> {
    let (int_part, frac_part) = match number.split_once('.') {
        Some((int_part, frac_part)) => (int_part, frac_part),
        None => (number, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int_part.is_empty()
        || !all_digits(int_part)
        || !all_digits(frac_part)
        || (number.contains('.') && frac_part.is_empty())
    {
        return Err(ScaleError::Malformed);
    }
    if frac_part.len() > MAX_FRACTION_DIGITS {
        return Err(ScaleError::TooPrecise);
    }
    // Scaled by 10^frac_len: "1.5" → 15 with denominator 10.
    let mut numerator: u128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        numerator = numerator
            .checked_mul(10)
            .and_then(|n| n.checked_add(u128::from(b - b'0')))
            .ok_or(ScaleError::TooLarge)?;
    }
    let denominator = 10u128.pow(frac_part.len() as u32);
    let scaled = numerator
        .checked_mul(u128::from(multiplier))
        .and_then(|n| n.checked_add(denominator / 2))
        .ok_or(ScaleError::TooLarge)?;
    u64::try_from(scaled / denominator).map_err(|_| ScaleError::TooLarge)
}

impl FromStr for ByteSize {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_size(s)
    }
}

impl fmt::Display for ByteSize {
    /// The largest unit that represents the size exactly: `"1536MiB"`, `"100MB"`, `"1000B"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n != 0 {
            for (multiplier, unit) in DISPLAY_UNITS {
                if n.is_multiple_of(multiplier) {
                    return write!(f, "{}{unit}", n / multiplier);
                }
            }
        }
        write!(f, "{n}B")
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match deserializer.deserialize_any(SizeVisitor {
            percent_allowed: false,
        })? {
            SizeLimit::Bytes(size) => Ok(size),
            SizeLimit::Percent(_) | SizeLimit::PercentOfLimit(_) => {
                Err(de::Error::custom(format!("invalid size; {SIZE_HINT}")))
            }
        }
    }
}

/// Sizes and size limits from TOML: a string with a unit (or a percentage, where
/// allowed), or a non-negative integer meaning bytes.
struct SizeVisitor {
    percent_allowed: bool,
}

impl SizeVisitor {
    fn kind_and_hint(&self) -> (&'static str, &'static str) {
        if self.percent_allowed {
            ("size limit", LIMIT_HINT)
        } else {
            ("size", SIZE_HINT)
        }
    }
}

impl Visitor<'_> for SizeVisitor {
    type Value = SizeLimit;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.percent_allowed {
            f.write_str(
                r#"a size such as "8GiB", a percentage such as "60%", or a number of bytes"#,
            )
        } else {
            f.write_str(r#"a size such as "8GiB", or a number of bytes"#)
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<SizeLimit, E> {
        let parsed = if self.percent_allowed {
            parse_size_limit(v)
        } else {
            parse_size(v).map(SizeLimit::Bytes)
        };
        parsed.map_err(|e| E::custom(e.without_input()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<SizeLimit, E> {
        Ok(SizeLimit::Bytes(ByteSize(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<SizeLimit, E> {
        let (kind, hint) = self.kind_and_hint();
        u64::try_from(v)
            .map(|v| SizeLimit::Bytes(ByteSize(v)))
            .map_err(|_| E::custom(format!("invalid {kind}: a size cannot be negative; {hint}")))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<SizeLimit, E> {
        let (kind, _) = self.kind_and_hint();
        Err(E::custom(format!(
            "invalid {kind}: a fractional size needs a unit and quotes, e.g. \"1.5GiB\""
        )))
    }
}

// ---------------------------------------------------------------------------------
// Size limits
// ---------------------------------------------------------------------------------

/// A limit written either as a size (`"8GiB"`) or as a share of a total (`"60%"`,
/// greater than 0 and at most 100), usually physical memory (`"60% of memory"`
/// says so), or a share of a process's own memory limit (`"80% of limit"`: the
/// limit of its memory cgroup where it has one, see [`crate::model::Ceiling`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeLimit {
    Bytes(ByteSize),
    Percent(f64),
    /// `"80% of limit"`: of the process's memory limit.
    PercentOfLimit(f64),
}

impl SizeLimit {
    /// The limit in bytes, given the total a percentage refers to. Saturating: never
    /// more than `total` for a percentage, never wraps.
    pub fn resolve(&self, total: u64) -> u64 {
        match *self {
            SizeLimit::Bytes(size) => size.0,
            // `as` saturates, and `min` keeps f64 rounding near u64::MAX from
            // going past `total`.
            SizeLimit::Percent(percent) | SizeLimit::PercentOfLimit(percent) => {
                (((total as f64) * percent / 100.0) as u64).min(total)
            }
        }
    }

    /// Written as a share of the process's memory limit (`"80% of limit"`).
    pub fn of_limit(&self) -> bool {
        matches!(self, SizeLimit::PercentOfLimit(_))
    }
}

/// Parses a size limit: a size as in [`parse_size`], a percentage such as `"60%"`
/// (or `"60% of memory"`, the same), or `"80% of limit"`.
pub fn parse_size_limit(text: &str) -> Result<SizeLimit, UnitError> {
    let trimmed = text.trim();
    // An error in the share names the whole value, as written.
    let whole = |e: UnitError| UnitError::new("size limit", text, e.reason);
    if let Some(share) = trimmed.strip_suffix("of limit") {
        return match parse_size_limit(share).map_err(whole)? {
            SizeLimit::Percent(p) if share.trim_end().ends_with('%') => {
                Ok(SizeLimit::PercentOfLimit(p))
            }
            _ => Err(UnitError::new(
                "size limit",
                text,
                r#""of limit" follows a percentage, e.g. "80% of limit""#.to_owned(),
            )),
        };
    }
    if let Some(share) = trimmed.strip_suffix("of memory") {
        return match parse_size_limit(share).map_err(whole)? {
            SizeLimit::Percent(p) if share.trim_end().ends_with('%') => Ok(SizeLimit::Percent(p)),
            _ => Err(UnitError::new(
                "size limit",
                text,
                r#""of memory" follows a percentage, e.g. "60% of memory""#.to_owned(),
            )),
        };
    }
    let Some(number) = trimmed.strip_suffix('%') else {
        return parse_size_as("size limit", text, LIMIT_HINT).map(SizeLimit::Bytes);
    };
    let err = |reason: String| UnitError::new("size limit", text, reason);
    let number = number.trim_end();
    if number.starts_with('-') {
        return Err(err(
            r#"a percentage must be greater than 0% and at most 100%, e.g. "60%""#.to_owned(),
        ));
    }
    // Same grammar as sizes (digits, one optional decimal point), so "nan%", "inf%" and
    // "1e2%" are rejected here rather than by `f64::from_str`'s looser rules.
    let well_formed = !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && number.bytes().filter(|&b| b == b'.').count() <= 1
        && !number.starts_with('.')
        && !number.ends_with('.');
    let percent = match number.parse::<f64>() {
        Ok(p) if well_formed => p,
        _ => return Err(err(format!("{number:?} is not a number; {LIMIT_HINT}"))),
    };
    if !(percent > 0.0 && percent <= 100.0) {
        return Err(err(
            r#"a percentage must be greater than 0% and at most 100%, e.g. "60%""#.to_owned(),
        ));
    }
    Ok(SizeLimit::Percent(percent))
}

impl FromStr for SizeLimit {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_size_limit(s)
    }
}

impl fmt::Display for SizeLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeLimit::Bytes(size) => size.fmt(f),
            // f64's Display is the shortest text that parses back to the same value,
            // and never uses exponent notation.
            SizeLimit::Percent(percent) => write!(f, "{percent}%"),
            SizeLimit::PercentOfLimit(percent) => write!(f, "{percent}% of limit"),
        }
    }
}

impl Serialize for SizeLimit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SizeLimit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SizeVisitor {
            percent_allowed: true,
        })
    }
}

// ---------------------------------------------------------------------------------
// Rates
// ---------------------------------------------------------------------------------

/// A growth rate: so many bytes per duration, written `"1GiB/10s"`, `"512MiB/1m"`, or
/// with a bare unit meaning one of it, `"200MiB/s"`. The duration is never zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    pub bytes: ByteSize,
    pub per: Duration,
}

impl Rate {
    /// The rate in bytes per second.
    pub fn bytes_per_second(&self) -> f64 {
        self.bytes.0 as f64 / self.per.as_secs_f64()
    }
}

/// Parses a rate such as `"1GiB/10s"`, `"200MiB/s"` or `"512MiB/1m"`.
pub fn parse_rate(text: &str) -> Result<Rate, UnitError> {
    let err = |reason: String| UnitError::new("rate", text, reason);
    let Some((size, per)) = text.split_once('/') else {
        return Err(err(format!(
            "no \"/\" between size and duration; {RATE_HINT}"
        )));
    };
    let bytes =
        parse_size(size).map_err(|e| err(format!("the size before \"/\": {}", e.reason())))?;
    let per = per.trim();
    // "200MiB/s" means per one second.
    let per_text = if !per.is_empty() && per.chars().all(char::is_alphabetic) {
        format!("1{per}")
    } else {
        per.to_owned()
    };
    let per = parse_duration(&per_text)
        .map_err(|e| err(format!("the duration after \"/\": {}", e.reason())))?;
    if per.is_zero() {
        return Err(err(format!(
            "the duration after \"/\" must be longer than zero; {RATE_HINT}"
        )));
    }
    Ok(Rate { bytes, per })
}

impl FromStr for Rate {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_rate(s)
    }
}

impl fmt::Display for Rate {
    /// `"1GiB/10s"`; a duration of exactly one unit is written bare: `"200MiB/s"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = humantime::format_duration(self.per).to_string();
        match per.strip_prefix('1') {
            Some(unit) if !unit.is_empty() && unit.chars().all(char::is_alphabetic) => {
                write!(f, "{}/{unit}", self.bytes)
            }
            _ => write!(f, "{}/{per}", self.bytes),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RateVisitor;

        impl Visitor<'_> for RateVisitor {
            type Value = Rate;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a rate such as "1GiB/10s""#)
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
                parse_rate(v).map_err(|e| E::custom(e.without_input()))
            }
        }

        deserializer.deserialize_str(RateVisitor)
    }
}

// ---------------------------------------------------------------------------------
// Durations
// ---------------------------------------------------------------------------------

/// Seconds above which a text is refused before humantime sees it (about 146
/// billion years): humantime sums its terms with `Duration`'s `+`, which
/// panics on overflow at `u64::MAX` seconds.
const HUMANTIME_SAFE_SECS: u128 = (u64::MAX / 2) as u128;

/// The longest duration accepted (about 146 billion years). Lower than
/// [`HUMANTIME_SAFE_SECS`] by far more than the slack of
/// [`duration_upper_bound_secs`], so that every accepted duration, written
/// out by [`format_duration`], parses back.
const MAX_DURATION_SECS: u64 = u64::MAX / 4;

/// Longest humantime unit, a year, in seconds.
const YEAR_SECS: u128 = 31_557_600;

/// Parses a duration in humantime's syntax: `"250ms"`, `"30s"`, `"1m 30s"`, `"2h"`.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let err = |reason: String| UnitError::new("duration", text, reason);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(err(format!("the value is empty; {DURATION_HINT}")));
    }
    if trimmed.starts_with('-') {
        return Err(err(format!(
            "a duration cannot be negative; {DURATION_HINT}"
        )));
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(format!(
            r#"a duration needs a unit: write "{trimmed}s" for seconds or "{trimmed}ms" for milliseconds"#
        )));
    }
    if duration_upper_bound_secs(trimmed) > HUMANTIME_SAFE_SECS {
        return Err(err(format!("too large; {DURATION_HINT}")));
    }
    let parsed = humantime::parse_duration(trimmed).map_err(|e| {
        err(match e {
            humantime::DurationError::UnknownUnit { unit, .. } if !unit.is_empty() => format!(
                r#"unknown unit {unit:?}; use ns, us, ms, s, m (minutes), h, d or w, e.g. "30s""#
            ),
            humantime::DurationError::NumberOverflow => {
                format!("too large, or finer than a nanosecond; {DURATION_HINT}")
            }
            _ => DURATION_HINT.to_owned(),
        })
    })?;
    if parsed.as_secs() > MAX_DURATION_SECS {
        return Err(err(format!("too large; {DURATION_HINT}")));
    }
    Ok(parsed)
}

/// A bound on the seconds `text` can stand for: each number's integer part plus one,
/// times its unit (a year when the unit is unknown or missing), plus a year per term.
/// Saturating. Whitespace is dropped first, as humantime skips it inside a number
/// (`"1 000s"` is 1000 seconds); where whitespace ends a unit, the next character
/// must be a digit for humantime to accept the text, so dropping it joins no units.
fn duration_upper_bound_secs(text: &str) -> u128 {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut total: u128 = 0;
    let mut rest = compact.as_str();
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        rest = &rest[start..];
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let integer = number
            .bytes()
            .take_while(u8::is_ascii_digit)
            .fold(0u128, |n, b| {
                n.saturating_mul(10).saturating_add(u128::from(b - b'0'))
            });
        let unit_end = after
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let seconds = match unit {
            "nanos" | "nsec" | "ns" => integer / 1_000_000_000,
            "usec" | "us" | "µs" => integer / 1_000_000,
            "millis" | "msec" | "ms" => integer / 1_000,
            "seconds" | "second" | "secs" | "sec" | "s" => integer,
            "minutes" | "minute" | "min" | "mins" | "m" => integer.saturating_mul(60),
            "hours" | "hour" | "hr" | "hrs" | "h" => integer.saturating_mul(3_600),
            "days" | "day" | "d" => integer.saturating_mul(86_400),
            "weeks" | "week" | "wk" | "wks" | "w" => integer.saturating_mul(604_800),
            _ => integer.saturating_add(1).saturating_mul(YEAR_SECS),
        };
        total = total.saturating_add(seconds).saturating_add(YEAR_SECS);
        rest = after;
    }
    total
}

/// Formats a duration the way [`parse_duration`] reads it: `"250ms"`, `"1m 30s"`.
pub fn format_duration(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// A [`Duration`] read and written in humantime's syntax (`"30s"`), for raw config
/// structs; validated structs hold the plain `std::time::Duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct HumanDuration(pub Duration);

impl FromStr for HumanDuration {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s).map(HumanDuration)
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_duration(self.0).fmt(f)
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;

        impl Visitor<'_> for DurationVisitor {
            type Value = HumanDuration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a duration such as "30s""#)
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<HumanDuration, E> {
                parse_duration(v)
                    .map(HumanDuration)
                    .map_err(|e| E::custom(e.without_input()))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<HumanDuration, E> {
                Err(E::custom(format!(
                    r#"invalid duration: a duration needs a unit and quotes: write "{v}s" for seconds or "{v}ms" for milliseconds"#
                )))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<HumanDuration, E> {
                Err(E::custom(format!(
                    r#"invalid duration: a duration needs a unit and quotes: write "{v}s" for seconds or "{v}ms" for milliseconds"#
                )))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<HumanDuration, E> {
                Err(E::custom(format!(
                    r#"invalid duration: a duration needs a unit and quotes: write "{v}s" for seconds"#
                )))
            }
        }

        deserializer.deserialize_any(DurationVisitor)
    }
}

/// `#[serde(with = "units::duration")]` for `std::time::Duration` fields: written and
/// read as humantime strings (`"250ms"`).
pub mod duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    use super::HumanDuration;

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&HumanDuration(*value))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        HumanDuration::deserialize(deserializer).map(|d| d.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_of_the_limit_is_its_own_kind_and_of_memory_is_the_default() {
        assert_eq!(
            parse_size_limit("80% of limit").unwrap(),
            SizeLimit::PercentOfLimit(80.0)
        );
        assert_eq!(
            parse_size_limit(" 12.5 %  of limit ").unwrap(),
            SizeLimit::PercentOfLimit(12.5)
        );
        assert_eq!(
            parse_size_limit("60% of memory").unwrap(),
            SizeLimit::Percent(60.0)
        );
        assert_eq!(SizeLimit::PercentOfLimit(80.0).to_string(), "80% of limit");
        assert_eq!(SizeLimit::PercentOfLimit(50.0).resolve(2 << 30), 1 << 30);
        for bad in ["2GiB of limit", "of limit", "150% of limit", "80%of limitx"] {
            assert!(parse_size_limit(bad).is_err(), "{bad}");
        }
        // Found by the units fuzz target: an error in the share named only
        // the share.
        let e = parse_size_limit("51yea*s/of memory").unwrap_err();
        assert_eq!(e.input(), "51yea*s/of memory");
        let e = parse_size_limit("2GiB of limit").unwrap_err().to_string();
        assert!(e.contains("\"of limit\" follows a percentage"), "{e}");
    }

    fn size(s: &str) -> u64 {
        parse_size(s).map(ByteSize::bytes).unwrap()
    }

    fn size_err(s: &str) -> String {
        parse_size(s).unwrap_err().to_string()
    }

    #[test]
    fn size_binary_units() {
        assert_eq!(size("512MiB"), 512 << 20);
        assert_eq!(size("8GiB"), 8 << 30);
        assert_eq!(size("2TiB"), 2 << 40);
        assert_eq!(size("4KiB"), 4096);
    }

    #[test]
    fn size_decimal_units() {
        assert_eq!(size("100MB"), 100_000_000);
        assert_eq!(size("3KB"), 3_000);
        assert_eq!(size("2GB"), 2_000_000_000);
        assert_eq!(size("1TB"), 1_000_000_000_000);
    }

    #[test]
    fn size_bare_number_and_b_suffix_are_bytes() {
        assert_eq!(size("4096"), 4096);
        assert_eq!(size("4096B"), 4096);
        assert_eq!(size("0"), 0);
    }

    #[test]
    fn size_unit_is_case_insensitive() {
        assert_eq!(size("8gib"), 8 << 30);
        assert_eq!(size("8GIB"), 8 << 30);
        assert_eq!(size("1mb"), 1_000_000);
    }

    #[test]
    fn size_allows_spaces_around_unit() {
        assert_eq!(size("8 GiB"), 8 << 30);
        assert_eq!(size("  8GiB  "), 8 << 30);
    }

    #[test]
    fn size_fraction_is_exact() {
        assert_eq!(size("1.5GiB"), 1_610_612_736);
        assert_eq!(size("0.5KiB"), 512);
    }

    #[test]
    fn size_fraction_rounds_to_nearest_byte() {
        assert_eq!(size("0.1KiB"), 102); // 102.4
        assert_eq!(size("0.0005KiB"), 1); // 0.512
        assert_eq!(size("1.5B"), 2); // half rounds up
    }

    #[test]
    fn size_largest_value_parses() {
        assert_eq!(size("18446744073709551615"), u64::MAX);
        assert_eq!(size("16777215TiB"), 16_777_215 << 40);
    }

    #[test]
    fn size_overflow_is_an_error() {
        assert!(size_err("99999999TiB").contains("too large"));
        assert!(size_err("18446744073709551616").contains("too large"));
        assert!(size_err(&"9".repeat(200)).contains("too large"));
    }

    #[test]
    fn size_unknown_unit_names_it() {
        assert_eq!(
            size_err("12XB"),
            r#"invalid size "12XB": unknown unit "XB"; use B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000)"#
        );
    }

    #[test]
    fn size_rejects_negative_empty_nan_inf_with_an_example() {
        for bad in [
            "-1GiB", "", "   ", "NaN", "inf", "-inf", "1e9", ".5GiB", "1.GiB", "1..5GiB",
        ] {
            let message = size_err(bad);
            assert!(
                message.contains(r#""8GiB""#) || message.contains("KiB"),
                "{bad:?}: {message}"
            );
        }
    }

    #[test]
    fn size_rejects_too_many_fraction_digits() {
        assert!(size_err("1.0000000000000000001GiB").contains("decimal point"));
    }

    #[test]
    fn size_display_picks_exact_largest_unit() {
        assert_eq!(ByteSize(8 << 30).to_string(), "8GiB");
        assert_eq!(ByteSize(1_610_612_736).to_string(), "1536MiB");
        assert_eq!(ByteSize(100_000_000).to_string(), "100MB");
        assert_eq!(ByteSize(1023).to_string(), "1023B");
        assert_eq!(ByteSize(0).to_string(), "0B");
    }

    #[test]
    fn size_display_round_trips() {
        for n in [
            0,
            1,
            1000,
            1024,
            1_610_612_736,
            100_000_000,
            u64::MAX,
            5 << 40,
            12_345_678_901,
        ] {
            assert_eq!(size(&ByteSize(n).to_string()), n);
        }
    }

    #[test]
    fn limit_percent_bounds() {
        assert_eq!(parse_size_limit("60%"), Ok(SizeLimit::Percent(60.0)));
        assert_eq!(parse_size_limit("100%"), Ok(SizeLimit::Percent(100.0)));
        assert_eq!(parse_size_limit("0.5 %"), Ok(SizeLimit::Percent(0.5)));
        for bad in [
            "0%", "0.0%", "100.01%", "101%", "-5%", "%", "nan%", "inf%", "1e2%",
        ] {
            assert!(parse_size_limit(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn limit_size_error_mentions_percent() {
        assert_eq!(
            parse_size_limit("").unwrap_err().to_string(),
            r#"invalid size limit "": the value is empty; expected a number and a unit such as "512MiB", "8GiB" or "60%""#
        );
    }

    #[test]
    fn limit_without_percent_is_a_size() {
        assert_eq!(
            parse_size_limit("8GiB"),
            Ok(SizeLimit::Bytes(ByteSize(8 << 30)))
        );
    }

    #[test]
    fn limit_resolve_percent_of_total() {
        assert_eq!(SizeLimit::Percent(50.0).resolve(16 << 30), 8 << 30);
        assert_eq!(SizeLimit::Percent(100.0).resolve(u64::MAX), u64::MAX);
        assert_eq!(SizeLimit::Percent(100.0).resolve(12_345), 12_345);
        assert_eq!(SizeLimit::Bytes(ByteSize(42)).resolve(0), 42);
    }

    #[test]
    fn limit_display_round_trips() {
        for text in ["60%", "12.5%", "0.001%", "100%", "8GiB"] {
            let limit = parse_size_limit(text).unwrap();
            assert_eq!(limit.to_string(), text);
            assert_eq!(parse_size_limit(&limit.to_string()), Ok(limit));
        }
        let tiny = SizeLimit::Percent(f64::MIN_POSITIVE);
        assert_eq!(parse_size_limit(&tiny.to_string()), Ok(tiny));
    }

    #[test]
    fn rate_forms() {
        let r = parse_rate("1GiB/10s").unwrap();
        assert_eq!(
            (r.bytes, r.per),
            (ByteSize(1 << 30), Duration::from_secs(10))
        );
        let r = parse_rate("200MiB/s").unwrap();
        assert_eq!(
            (r.bytes, r.per),
            (ByteSize(200 << 20), Duration::from_secs(1))
        );
        let r = parse_rate("512MiB/1m").unwrap();
        assert_eq!(r.per, Duration::from_secs(60));
    }

    #[test]
    fn rate_bytes_per_second() {
        assert_eq!(
            parse_rate("1GiB/10s").unwrap().bytes_per_second(),
            (1u64 << 30) as f64 / 10.0
        );
        assert_eq!(
            parse_rate("60MB/m").unwrap().bytes_per_second(),
            1_000_000.0
        );
    }

    #[test]
    fn rate_rejects_zero_duration() {
        let message = parse_rate("1GiB/0s").unwrap_err().to_string();
        assert!(message.contains("longer than zero"), "{message}");
    }

    #[test]
    fn rate_rejects_missing_slash_and_bad_parts() {
        assert!(
            parse_rate("1GiB")
                .unwrap_err()
                .to_string()
                .contains(r#""1GiB/10s""#)
        );
        assert!(
            parse_rate("1XB/s")
                .unwrap_err()
                .to_string()
                .contains("unknown unit")
        );
        assert!(
            parse_rate("1GiB/")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert!(
            parse_rate("1GiB/5parsecs")
                .unwrap_err()
                .to_string()
                .contains("unknown unit")
        );
    }

    #[test]
    fn rate_display_round_trips() {
        for text in ["1GiB/10s", "200MiB/s", "512MiB/m", "1KB/1m 30s", "0B/h"] {
            let rate = parse_rate(text).unwrap();
            assert_eq!(rate.to_string(), text);
            assert_eq!(parse_rate(&rate.to_string()), Ok(rate));
        }
    }

    #[test]
    fn duration_humantime_forms() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn duration_errors_say_what_is_valid() {
        for bad in ["", "-1s", "5 parsecs", "abc", "1.s"] {
            let message = parse_duration(bad).unwrap_err().to_string();
            assert!(message.contains(r#""30s""#), "{bad:?}: {message}");
        }
    }

    #[test]
    fn duration_without_unit_suggests_one() {
        assert_eq!(
            parse_duration("5").unwrap_err().to_string(),
            r#"invalid duration "5": a duration needs a unit: write "5s" for seconds or "5ms" for milliseconds"#
        );
    }

    #[test]
    fn duration_overflow_is_an_error_not_a_panic() {
        for bad in [
            "99999999999999999999y",
            "18446744073709551615s 500ms 500ms",
            "584942417355y 584942417355y",
            "18446744073709551615ns 18446744073709551615ns",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn whitespace_inside_a_number_counts_toward_the_bound() {
        // Found by fuzzing: humantime reads "3303\r33304\r33303\r0w" as one
        // number of weeks (it skips whitespace between digits), about 5.8e11
        // years, which was accepted and then printed as text that did not
        // parse back.
        let e = parse_duration("3303\r33304\r33303\r0w").unwrap_err();
        assert!(e.reason().starts_with("too large"), "{e}");
        assert_eq!(parse_duration("1 000s"), Ok(Duration::from_secs(1000)));
    }

    #[test]
    fn the_longest_duration_round_trips() {
        let longest = Duration::from_secs(MAX_DURATION_SECS);
        assert_eq!(parse_duration(&format_duration(longest)), Ok(longest));
        let over = Duration::from_secs(MAX_DURATION_SECS + 1);
        assert!(parse_duration(&format_duration(over)).is_err());
    }

    #[test]
    fn duration_display_round_trips() {
        for d in [
            Duration::from_millis(250),
            Duration::from_secs(90),
            Duration::new(3600, 1),
            Duration::from_secs(86_400 * 3),
        ] {
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
            assert_eq!(HumanDuration(d).to_string().parse(), Ok(HumanDuration(d)));
        }
    }

    #[test]
    fn serde_uses_human_strings() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct T {
            size: ByteSize,
            limit: SizeLimit,
            rate: Rate,
            #[serde(with = "duration")]
            every: Duration,
        }
        let text = "size = \"8GiB\"\nlimit = \"60%\"\nrate = \"1GiB/10s\"\nevery = \"250ms\"\n";
        let t: T = toml::from_str(text).unwrap();
        assert_eq!(toml::to_string(&t).unwrap(), text);
    }

    #[test]
    fn serde_size_accepts_bare_integer_bytes() {
        #[derive(Deserialize)]
        struct T {
            size: ByteSize,
            limit: SizeLimit,
        }
        let t: T = toml::from_str("size = 4096\nlimit = 10").unwrap();
        assert_eq!(
            (t.size, t.limit),
            (ByteSize(4096), SizeLimit::Bytes(ByteSize(10)))
        );
        assert!(toml::from_str::<T>("size = -1\nlimit = 10").is_err());
        assert!(toml::from_str::<T>("size = \"50%\"\nlimit = 10").is_err());
        assert!(toml::from_str::<T>("size = 1\nlimit = 1.5").is_err());
    }

    #[test]
    fn no_panic_on_generated_input() {
        let alphabet: Vec<char> = "0123456789999.-% /sSmMhHdDkKiIgGbBtTywµé\u{0}"
            .chars()
            .collect();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = (next() % 24) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let _ = parse_size(&text);
            let _ = parse_size_limit(&text);
            let _ = parse_rate(&text);
            let _ = parse_duration(&text);
        }
    }

    #[test]
    fn no_panic_on_odd_input() {
        for odd in [
            "\u{0}", "é", "1é", "1 é", "µs", "1µs", "/", "//", "%%", "1%/s", "١٢GiB", "1.5.5",
        ] {
            let _ = parse_size(odd);
            let _ = parse_size_limit(odd);
            let _ = parse_rate(odd);
            let _ = parse_duration(odd);
        }
    }
}
