//! A source of figures as the snapshot, `/metrics` and `headroom doctor`
//! see it: its name, how it stands ([`CollectorStatus`]: up, applicable,
//! errors, detail) and its check for `doctor`. Every source implements
//! [`Collector`]; [`gather`] turns a list of them into the snapshot's
//! collector list (`Snapshot::collectors`, which `/metrics` and the API
//! read), [`doctor_checks`] into `doctor`'s lines, so that the three list
//! the same sources in the same order.

use super::{Check, CollectorStatus};

/// One source of figures: a sampler's part (cgroup limits, proportional
/// shares), a wrapper's (NVML, labels), the record of how processes end,
/// the pressure notification, the notebook lookup.
pub trait Collector {
    /// Short, stable name (`nvml`, `kernel-log`): the `collector` label of
    /// `headroom_collector_up` and the `name` of the API's collector list.
    fn name(&self) -> &'static str;

    /// How it stands now; `None` while it has nothing to report (no read
    /// made yet, nothing here for it to read this sample), which leaves it
    /// out of the list rather than reporting it down.
    fn status(&self) -> Option<CollectorStatus>;

    /// Its line in `headroom doctor`. By default what [`status`] says
    /// ([`check_of`]); a source whose check tries more than its running
    /// state shows (opening a device, registering a trigger) overrides it.
    /// `None` leaves it out of the report.
    ///
    /// [`status`]: Collector::status
    fn doctor_check(&self) -> Option<Check> {
        self.status().map(|s| check_of(self.name(), &s))
    }
}

/// A status in the words of a `doctor` check: up is `ok`, down where it
/// does not apply `n/a`, down otherwise a warning (the daemon runs without
/// it).
pub fn check_of(name: &'static str, status: &CollectorStatus) -> Check {
    if status.up {
        Check::ok(name, status.detail.clone())
    } else if !status.applicable {
        Check::not_applicable(name, status.detail.clone())
    } else {
        Check::warn(
            name,
            status.detail.clone(),
            "headroom runs without it; the detail says what is missing",
        )
    }
}

/// The status of each source that has one, in the order given, each
/// under the source's own name.
pub fn gather(sources: &[&dyn Collector]) -> Vec<CollectorStatus> {
    sources
        .iter()
        .filter_map(|source| {
            let mut status = source.status()?;
            if status.name != source.name() {
                source.name().clone_into(&mut status.name);
            }
            Some(status)
        })
        .collect()
}

/// The `doctor` line of each source that has one, in the order given.
pub fn doctor_checks(sources: &[&dyn Collector]) -> Vec<Check> {
    sources.iter().filter_map(|s| s.doctor_check()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CheckStatus;

    /// A source with a set status, or none.
    struct Fake {
        name: &'static str,
        status: Option<(bool, bool)>,
        check: Option<Check>,
    }

    impl Collector for Fake {
        fn name(&self) -> &'static str {
            self.name
        }

        fn status(&self) -> Option<CollectorStatus> {
            let (up, applicable) = self.status?;
            Some(CollectorStatus {
                name: "misnamed".to_string(),
                up,
                detail: format!("{} detail", self.name),
                errors: 3,
                applicable,
            })
        }

        fn doctor_check(&self) -> Option<Check> {
            match &self.check {
                Some(check) => Some(check.clone()),
                None => self.status().map(|s| check_of(self.name, &s)),
            }
        }
    }

    fn fake(name: &'static str, status: Option<(bool, bool)>) -> Fake {
        Fake {
            name,
            status,
            check: None,
        }
    }

    #[test]
    fn gather_keeps_the_order_names_each_status_after_its_source_and_skips_silent_ones() {
        let a = fake("alpha", Some((true, true)));
        let silent = fake("silent", None);
        let b = fake("beta", Some((false, false)));
        let got = gather(&[&a, &silent, &b]);
        let names: Vec<&str> = got.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["alpha", "beta"]);
        assert!(got[0].up && got[0].applicable);
        assert!(!got[1].up && !got[1].applicable);
        assert_eq!(got[1].detail, "beta detail");
        assert_eq!(got[1].errors, 3);
        assert!(gather(&[]).is_empty());
    }

    #[test]
    fn default_check_follows_the_status_and_a_special_check_replaces_it() {
        let up = fake("up", Some((true, true)));
        let absent = fake("absent", Some((false, false)));
        let down = fake("down", Some((false, true)));
        let silent = fake("silent", None);
        let special = Fake {
            name: "special",
            status: Some((true, true)),
            check: Some(Check::fail("special-check", "it broke", "fix it")),
        };
        let checks = doctor_checks(&[&up, &absent, &down, &silent, &special]);
        let got: Vec<(&str, CheckStatus)> = checks.iter().map(|c| (c.name, c.status)).collect();
        assert_eq!(
            got,
            [
                ("up", CheckStatus::Ok),
                ("absent", CheckStatus::NotApplicable),
                ("down", CheckStatus::Warn),
                ("special-check", CheckStatus::Fail),
            ]
        );
        assert_eq!(checks[0].detail, "up detail");
        assert!(checks[2].next.is_some(), "a warning says what to do");
    }
}
