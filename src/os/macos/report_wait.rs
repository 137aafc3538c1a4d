//! How long, after a watched process ends, its report is looked for and
//! its post-mortem waits for one (`Observed::record_lag`): the decision
//! alone, pure (compiled and tested on every OS; `exit_records` feeds it
//! each sample's pressure level and whether a report is being written).
//!
//! [`CALM_WAIT`] (15 s) when the machine is calm: ReportCrash writes a
//! crash report within seconds. [`PRESSED_WAIT`] (45 s) while memory
//! pressure was seen in the last [`PRESSED_WAIT`], or while a report is
//! still being written:
//!
//! - the kernel tells user space of its jetsam snapshot (what a JetsamEvent
//!   report is made of) at most once every `JETSAM_SNAPSHOT_TIMEOUT_SECS`,
//!   30 s (`memorystatus_post_snapshot` and the kill path in
//!   `bsd/kern/kern_memorystatus.c`, `bsd/sys/kern_memorystatus.h`,
//!   xnu-8792.81.2 to xnu-11417.101.15): a kill within 30 s of the last
//!   notice reaches a report only with the next one, and under pressure
//!   the report writers are themselves paged out;
//! - a report seen while being written is read again for up to 30 s
//!   ([`super::crash_reports::RETRY_FOR`]) after it was first seen, which
//!   the calm wait's 15 s may already be into.
//!
//! Both add up to 45 s. The longer wait holds for [`PRESSED_WAIT`] after
//! the last pressured sample, so that pressure relieved by the kill itself
//! does not cut short the wait for the kill's report. Only post-mortems
//! without a direct cause wait; the wait bounds how late an "unknown"
//! verdict comes, never a kill or crash already read.

use std::time::Duration;

use crate::model::{PressureLevel, Timestamp};

/// The wait while the machine is calm and no report is being written.
pub const CALM_WAIT: Duration = Duration::from_secs(15);
/// The wait under memory pressure or while a report is being written.
pub const PRESSED_WAIT: Duration = Duration::from_secs(45);

// The longer wait covers a report first seen at the calm wait's end and
// read again for as long as the scanner waits for it.
const _: () = assert!(
    PRESSED_WAIT.as_secs() >= CALM_WAIT.as_secs() + super::crash_reports::RETRY_FOR.as_secs()
);

/// See the module documentation.
#[derive(Debug, Default, Clone)]
pub struct ReportWait {
    /// The last sample that saw memory pressure.
    pressed_at: Option<Timestamp>,
}

impl ReportWait {
    /// The wait as of a sample taken `now` at pressure `level`, while
    /// `writing` reports are being written (waited for by the scanner).
    pub fn update(&mut self, level: PressureLevel, now: Timestamp, writing: usize) -> Duration {
        if level != PressureLevel::Normal {
            self.pressed_at = Some(now);
        }
        let pressed = self
            .pressed_at
            .is_some_and(|at| now.since(at) < PRESSED_WAIT);
        if pressed || writing > 0 {
            PRESSED_WAIT
        } else {
            CALM_WAIT
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Timestamp {
        Timestamp(s * 1000)
    }

    #[test]
    fn calm_is_fifteen_seconds() {
        let mut w = ReportWait::default();
        assert_eq!(w.update(PressureLevel::Normal, at(0), 0), CALM_WAIT);
        assert_eq!(w.update(PressureLevel::Normal, at(100), 0), CALM_WAIT);
    }

    #[test]
    fn pressure_lengthens_the_wait_and_it_outlasts_the_pressure() {
        let mut w = ReportWait::default();
        assert_eq!(w.update(PressureLevel::Warn, at(10), 0), PRESSED_WAIT);
        // The kill relieved the pressure: the longer wait holds.
        assert_eq!(w.update(PressureLevel::Normal, at(11), 0), PRESSED_WAIT);
        assert_eq!(w.update(PressureLevel::Normal, at(54), 0), PRESSED_WAIT);
        assert_eq!(w.update(PressureLevel::Normal, at(55), 0), CALM_WAIT);
        assert_eq!(w.update(PressureLevel::Critical, at(60), 0), PRESSED_WAIT);
    }

    #[test]
    fn a_report_being_written_lengthens_the_wait() {
        let mut w = ReportWait::default();
        assert_eq!(w.update(PressureLevel::Normal, at(0), 1), PRESSED_WAIT);
        assert_eq!(w.update(PressureLevel::Normal, at(1), 0), CALM_WAIT);
    }
}
