//! Drives a [`GpuCollector`] from tick to tick: opens it, reads it, and when
//! it cannot be opened (no NVIDIA driver) or stops working (driver unloaded,
//! library and kernel module out of step after an upgrade), reports it as
//! down with the reason, logs that once, and tries again only after
//! [`RETRY_AFTER`], not on every tick.
//!
//! Time is passed in (`now`), so the retry schedule is tested without
//! waiting; what to log is returned, not logged, so "once" is tested too.

use std::time::{Duration, Instant};

use crate::model::CollectorStatus;

use super::{DeviceReading, GpuCollector};

/// How long a collector that could not be opened, or stopped working, is
/// left alone before the next try.
pub const RETRY_AFTER: Duration = Duration::from_secs(5 * 60);

/// How loud a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Expected news: no driver on this machine, the collector is up.
    Info,
    /// Something a person should look at.
    Warn,
}

/// A line for the daemon's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub level: LogLevel,
    pub message: String,
}

/// What one poll of the collector gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Poll {
    /// The devices read; empty while the collector is down.
    pub devices: Vec<DeviceReading>,
    /// Up or down, and why, for the snapshot.
    pub status: CollectorStatus,
    /// Lines to log: only changes (down, up again, new device problems).
    pub log: Vec<LogLine>,
}

#[derive(Debug)]
enum State {
    /// Not open: never tried (`retry_at` None), or failed with `reason`.
    Closed {
        retry_at: Option<Instant>,
        reason: String,
        /// The machine has nothing to read (no NVIDIA driver): down by
        /// nature, not failing.
        absent: bool,
    },
    Open,
}

/// The "report once, retry now and then" state machine around a collector.
pub struct GpuMonitor {
    collector: Box<dyn GpuCollector>,
    state: State,
    retry_after: Duration,
    errors: u64,
    /// The reason last logged for being down: the same one is not logged again.
    logged_down: Option<String>,
    /// Device problems of the last read: only changes are logged.
    last_problems: Vec<String>,
}

impl GpuMonitor {
    pub fn new(collector: Box<dyn GpuCollector>) -> Self {
        Self {
            collector,
            state: State::Closed {
                retry_at: None,
                reason: "not opened yet".to_string(),
                absent: false,
            },
            retry_after: RETRY_AFTER,
            errors: 0,
            logged_down: None,
            last_problems: Vec::new(),
        }
    }

    /// Wait this long between tries instead of [`RETRY_AFTER`].
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// The collector's short name.
    pub fn name(&self) -> &'static str {
        self.collector.name()
    }

    /// One tick: open the collector if it is closed and a try is due, then
    /// read it if it is open.
    pub fn poll(&mut self, now: Instant) -> Poll {
        let mut log = Vec::new();
        if let State::Closed {
            retry_at,
            reason,
            absent,
        } = &self.state
        {
            if retry_at.is_some_and(|at| now < at) {
                let status = self.status(false, reason.clone(), !absent);
                return Poll {
                    devices: Vec::new(),
                    status,
                    log,
                };
            }
            match self.collector.open() {
                Ok(()) => {
                    let again = if self.logged_down.take().is_some() {
                        "works again: "
                    } else {
                        ""
                    };
                    log.push(LogLine {
                        level: LogLevel::Info,
                        message: format!("{}: {again}{}", self.name(), self.collector.describe()),
                    });
                    self.state = State::Open;
                }
                Err(e) => {
                    let level = if e.no_driver {
                        LogLevel::Info
                    } else {
                        LogLevel::Warn
                    };
                    return self.went_down(now, e.message, e.no_driver, level, log);
                }
            }
        }

        match self.collector.read() {
            Ok(devices) => {
                let problems: Vec<String> = devices
                    .iter()
                    .flat_map(|d| d.problems.iter().map(|p| format!("GPU {}: {p}", d.index)))
                    .collect();
                self.errors = self.errors.saturating_add(problems.len() as u64);
                if !problems.is_empty() && problems != self.last_problems {
                    log.push(LogLine {
                        level: LogLevel::Warn,
                        message: format!("{}: {}", self.name(), problems.join("; ")),
                    });
                }
                let mut detail = self.collector.describe();
                for p in &problems {
                    detail.push_str("; ");
                    detail.push_str(p);
                }
                self.last_problems = problems;
                let status = self.status(true, detail, true);
                Poll {
                    devices,
                    status,
                    log,
                }
            }
            Err(e) => {
                self.collector.close();
                self.last_problems.clear();
                let reason = format!("stopped working: {e}");
                self.went_down(now, reason, false, LogLevel::Warn, log)
            }
        }
    }

    fn went_down(
        &mut self,
        now: Instant,
        reason: String,
        absent: bool,
        level: LogLevel,
        mut log: Vec<LogLine>,
    ) -> Poll {
        self.errors = self.errors.saturating_add(1);
        if self.logged_down.as_ref() != Some(&reason) {
            log.push(LogLine {
                level,
                message: format!(
                    "{}: unavailable: {reason}; GPU memory is not collected (trying again \
                     every {})",
                    self.name(),
                    humantime::format_duration(self.retry_after)
                ),
            });
            self.logged_down = Some(reason.clone());
        }
        let status = self.status(false, reason.clone(), !absent);
        self.state = State::Closed {
            retry_at: Some(now + self.retry_after),
            reason,
            absent,
        };
        Poll {
            devices: Vec::new(),
            status,
            log,
        }
    }

    fn status(&self, up: bool, detail: String, applicable: bool) -> CollectorStatus {
        CollectorStatus {
            name: self.name().to_string(),
            up,
            detail,
            errors: self.errors,
            applicable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::GpuError;
    use super::super::fake::{FakeGpu, device};
    use super::*;

    const GIB: u64 = 1 << 30;

    fn monitor(fake: &FakeGpu) -> GpuMonitor {
        GpuMonitor::new(Box::new(fake.clone()))
    }

    fn no_driver() -> GpuError {
        GpuError {
            message: "libnvidia-ml.so.1 not found (no NVIDIA driver)".into(),
            no_driver: true,
        }
    }

    #[test]
    fn no_driver_is_reported_down_every_tick_and_logged_once() {
        let fake = FakeGpu::new();
        fake.fail_open(Some(no_driver()));
        let mut m = monitor(&fake);
        let t0 = Instant::now();
        let mut lines = Vec::new();
        for tick in 0..600 {
            let poll = m.poll(t0 + Duration::from_millis(250 * tick));
            assert!(!poll.status.up);
            assert!(!poll.status.applicable, "no driver is not a failure");
            assert_eq!(poll.status.errors, 1, "one failed open, not one per tick");
            assert_eq!(
                poll.status.detail,
                "libnvidia-ml.so.1 not found (no NVIDIA driver)"
            );
            assert!(poll.devices.is_empty());
            lines.extend(poll.log);
        }
        assert_eq!(fake.opens(), 1, "tried again before the retry time");
        assert_eq!(
            lines,
            [LogLine {
                level: LogLevel::Info,
                message: "fake: unavailable: libnvidia-ml.so.1 not found (no NVIDIA driver); \
                          GPU memory is not collected (trying again every 5m)"
                    .into()
            }]
        );
    }

    #[test]
    fn a_failed_open_is_tried_again_after_the_retry_time_without_logging_again() {
        let fake = FakeGpu::new();
        fake.fail_open(Some(no_driver()));
        let mut m = monitor(&fake);
        let t0 = Instant::now();
        assert_eq!(m.poll(t0).log.len(), 1);
        assert_eq!(m.poll(t0 + RETRY_AFTER - Duration::from_millis(1)).log, []);
        assert_eq!(fake.opens(), 1);
        let poll = m.poll(t0 + RETRY_AFTER);
        assert_eq!(fake.opens(), 2);
        assert_eq!(poll.log, []);
        assert_eq!(poll.status.errors, 2);
    }

    #[test]
    fn a_new_reason_is_logged_and_a_warning_when_it_is_not_a_missing_driver() {
        let fake = FakeGpu::new();
        fake.fail_open(Some(no_driver()));
        let mut m = monitor(&fake).with_retry_after(Duration::from_secs(1));
        let t0 = Instant::now();
        m.poll(t0);
        fake.fail_open(Some(GpuError {
            message: "no permission to talk to the NVIDIA driver".into(),
            no_driver: false,
        }));
        let poll = m.poll(t0 + Duration::from_secs(1));
        assert_eq!(poll.log.len(), 1);
        assert_eq!(poll.log[0].level, LogLevel::Warn);
        assert!(poll.log[0].message.contains("no permission"));
    }

    #[test]
    fn a_driver_that_appears_later_is_picked_up_and_logged() {
        let fake = FakeGpu::new();
        fake.fail_open(Some(no_driver()));
        let mut m = monitor(&fake);
        let t0 = Instant::now();
        m.poll(t0);
        fake.fail_open(None);
        fake.set_devices(vec![device(0, "NVIDIA L4", 24 * GIB, GIB)]);
        let poll = m.poll(t0 + RETRY_AFTER);
        assert!(poll.status.up);
        assert_eq!(poll.status.detail, "fake: 1 device");
        assert_eq!(poll.devices.len(), 1);
        assert_eq!(
            poll.log,
            [LogLine {
                level: LogLevel::Info,
                message: "fake: works again: fake: 1 device".into()
            }]
        );
    }

    #[test]
    fn an_open_collector_is_opened_once_and_read_every_tick() {
        let fake = FakeGpu::new();
        fake.set_devices(vec![device(0, "NVIDIA H100", 80 * GIB, 8 * GIB)]);
        let mut m = monitor(&fake);
        let t0 = Instant::now();
        let first = m.poll(t0);
        assert_eq!(first.log.len(), 1, "the collector coming up is logged");
        for tick in 1..100 {
            let poll = m.poll(t0 + Duration::from_secs(tick));
            assert!(poll.status.up);
            assert_eq!(poll.devices[0].memory_used, Some(8 * GIB));
            assert_eq!(poll.log, []);
        }
        assert_eq!((fake.opens(), fake.reads()), (1, 100));
    }

    #[test]
    fn a_read_failure_closes_the_collector_and_retries_later() {
        let fake = FakeGpu::new();
        fake.set_devices(vec![device(0, "NVIDIA H100", 80 * GIB, 8 * GIB)]);
        let mut m = monitor(&fake);
        let t0 = Instant::now();
        assert!(m.poll(t0).status.up);
        fake.fail_read(Some(GpuError {
            message: "NVIDIA driver is not loaded".into(),
            no_driver: false,
        }));
        let down = m.poll(t0 + Duration::from_secs(1));
        assert!(!down.status.up);
        assert!(
            down.status.applicable,
            "a GPU that stops working is a failure"
        );
        assert_eq!(
            down.status.detail,
            "stopped working: NVIDIA driver is not loaded"
        );
        assert_eq!(down.log[0].level, LogLevel::Warn);
        assert_eq!(fake.closes(), 1);
        assert!(!m.poll(t0 + Duration::from_secs(2)).status.up);
        assert_eq!((fake.opens(), fake.reads()), (1, 2));

        fake.fail_read(None);
        let back = m.poll(t0 + Duration::from_secs(1) + RETRY_AFTER);
        assert!(back.status.up);
        assert_eq!(fake.opens(), 2);
        assert!(back.log[0].message.contains("works again"));
    }

    #[test]
    fn device_problems_are_counted_each_pass_and_logged_when_they_change() {
        let fake = FakeGpu::new();
        let mut d = device(1, "NVIDIA A100", 40 * GIB, GIB);
        d.problems = vec!["processes: GPU is lost".into()];
        fake.set_devices(vec![d]);
        let mut m = monitor(&fake);
        let t0 = Instant::now();
        let first = m.poll(t0);
        assert_eq!(first.log.len(), 2, "{:?}", first.log);
        assert_eq!(first.log[1].message, "fake: GPU 1: processes: GPU is lost");
        let second = m.poll(t0 + Duration::from_secs(1));
        assert_eq!(second.log, []);
        assert!(second.status.up);
        assert_eq!(second.status.errors, 2);
        assert_eq!(
            second.status.detail,
            "fake: 1 device; GPU 1: processes: GPU is lost"
        );
    }
}
