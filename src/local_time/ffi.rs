//! `localtime_r(3)`: the local zone's offset from UTC at one instant, as
//! libc works it out from `TZ` and the system zone database.

use std::mem::MaybeUninit;

/// The local zone's offset from UTC, in seconds east, at `secs` seconds
/// after the epoch; `None` if the instant does not fit a `time_t` or libc
/// cannot say.
pub fn gmtoff(secs: u64) -> Option<i64> {
    let secs = libc::time_t::try_from(secs).ok()?;
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
