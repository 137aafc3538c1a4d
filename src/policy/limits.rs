//! Limit arithmetic: does a rule's limit hold for a process right now, has it
//! cleared (fallen back by the hysteresis margin), and is it within reach
//! (worth sampling faster for). Pure functions over the snapshot and history.

use std::time::Duration;

use crate::config::{Limits, Per, Rule, SizeLimit, SystemCondition};
use crate::history::{ProcessTrack, exhaustion_headroom_for, time_to_exhaustion};
use crate::model::{Ceiling, Job, ProcessSample, Snapshot, Timestamp, printable};
use crate::report::{format_bytes, format_bytes_against};

/// Points needed before a growth rate is trusted for a limit.
pub const MIN_GROWTH_POINTS: usize = 3;
/// A limit this close (share of it reached) counts as within reach.
pub const REACH_SHARE: f64 = 0.9;
/// A limit the process would reach within this time counts as within reach.
pub const REACH_TIME: Duration = Duration::from_secs(10);
/// Window for the short-term growth used to predict when a limit is crossed.
pub const PREDICTION_WINDOW: Duration = Duration::from_secs(3);

/// One limit or system condition of a rule, read against the latest sample,
/// in words: what `headroom explain` prints, one line each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// `footprint`, `GPU memory`, `growth`, `time to exhaustion`,
    /// `pressure`, `available memory`, `swap used`.
    pub what: &'static str,
    /// The value now, in words (`4.5 GiB`, `growing 250 MiB/s over 10s`), or
    /// why it is not known (`not enough history: …`).
    pub value: String,
    /// The threshold as configured and as resolved: `> 80% of 23.5 GiB =
    /// 18.8 GiB`, `<= 30s`, `at least warn`.
    pub threshold: String,
    /// The value is on the acting side of the threshold.
    pub holds: bool,
}

/// The limits of `rule` evaluated for one process.
pub struct LimitCheck {
    /// Why a limit holds, in words, if one does.
    pub exceeded: Option<String>,
    /// The limit in words (for hooks and notifications).
    pub limit: String,
    /// Every limit is below its clearing margin.
    pub cleared: bool,
    /// Some limit is within reach.
    pub within_reach: bool,
    /// When the footprint limit is predicted to be crossed, from now.
    pub predicted_crossing: Option<Duration>,
    /// Each limit on its own.
    pub readings: Vec<Reading>,
}

/// The largest GPU's memory, which `gpu_memory` percentages refer to.
fn gpu_total(snap: &Snapshot) -> Option<u64> {
    snap.gpus.iter().filter_map(|g| g.memory_total).max()
}

/// A size limit as configured and resolved: `8 GiB`, `80% of 23.5 GiB = 18.8 GiB`.
fn size_threshold(limit: SizeLimit, total: u64, of: &str) -> String {
    match limit {
        SizeLimit::Bytes(_) => format_bytes(limit.resolve(total)),
        SizeLimit::Percent(_) | SizeLimit::PercentOfLimit(_) => format!(
            "{limit} of {} {of} = {}",
            format_bytes(total),
            format_bytes(limit.resolve(total))
        ),
    }
}

/// Why a growth figure is not known yet.
fn no_growth(window: Duration) -> String {
    format!(
        "not known: growth needs {MIN_GROWTH_POINTS} samples spanning half of {}",
        humantime::format_duration(window)
    )
}

/// What a process stands for when its limits are checked: itself, or a
/// job (its figures the job's totals), with the machine's own growth.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scale<'a> {
    /// The job the process is the root of and stands for.
    pub job: Option<&'a Job>,
    /// How fast the machine's memory is being taken over the rule's window,
    /// bytes per second (known for jobs only).
    pub machine: Option<f64>,
}

impl Scale<'_> {
    /// `job of 9 (kernel + 8 workers, pss) ` before a figure, or nothing.
    fn prefix(&self) -> String {
        match self.job {
            Some(job) => format!(
                "job of {} ({} + {} worker{}, counted by {}): ",
                job.members.len(),
                job.pid(),
                job.workers(),
                if job.workers() == 1 { "" } else { "s" },
                job.basis
            ),
            None => String::new(),
        }
    }

    /// The growth a job's time to exhaustion is computed from: its own, or
    /// the machine's where that is faster and the job's own accounts for at
    /// least half of it (what the machine adds beyond is most likely the
    /// job's copy-on-write growth that no proportional-share read has seen
    /// yet). Never later than the machine's own trend says, for a job that
    /// is what grows.
    fn exhaustion_growth(&self, own: f64) -> (f64, bool) {
        match (self.job, self.machine) {
            (Some(_), Some(m)) if own > 0.0 && m > own && own >= m / 2.0 => (m, true),
            _ => (own, false),
        }
    }
}

/// Check every per-process limit of `rule` for `p`, standing for `scale`.
pub fn check(
    rule: &Rule,
    p: &ProcessSample,
    track: Option<&ProcessTrack>,
    snap: &Snapshot,
    now: Timestamp,
    scale: Scale<'_>,
) -> LimitCheck {
    let prefix = scale.prefix();
    let l: &Limits = &rule.limits;
    let h = rule.hysteresis;
    let mut exceeded = Vec::new();
    let mut limit_words = Vec::new();
    let mut readings = Vec::new();
    let mut cleared = true;
    let mut within_reach = false;
    let mut predicted_crossing = None;

    if let Some(limit) = l.footprint {
        // "80% of limit": of its memory cgroup's limit, where it has one.
        let ceiling = snap.ceiling_of(p).filter(|_| limit.of_limit());
        let (total, of) = match ceiling {
            Some(c) => (c.limit(), ceiling_words(c)),
            None if limit.of_limit() => (
                snap.system.total,
                "memory (no memory-cgroup limit above it)".to_string(),
            ),
            None => (snap.system.total, "memory".to_string()),
        };
        let bytes = limit.resolve(total);
        limit_words.push(format!("footprint > {}", format_bytes(bytes)));
        let over = p.footprint > bytes;
        if over {
            exceeded.push(format!(
                "{prefix}footprint {} > {}",
                format_bytes_against(p.footprint, bytes),
                format_bytes(bytes)
            ));
        }
        readings.push(Reading {
            what: "footprint",
            value: format!("{prefix}{}", format_bytes_against(p.footprint, bytes)),
            threshold: format!("> {}", size_threshold(limit, total, &of)),
            holds: over,
        });
        if (p.footprint as f64) >= bytes as f64 * (1.0 - h) {
            cleared = false;
        }
        if p.footprint as f64 >= bytes as f64 * REACH_SHARE {
            within_reach = true;
        }
        if p.footprint <= bytes
            && let Some(g) = track.and_then(|t| t.trend(now, PREDICTION_WINDOW, p.started_at))
            && g > 0.0
        {
            let until = Duration::try_from_secs_f64((bytes - p.footprint) as f64 / g).ok();
            if until.is_some_and(|u| u <= REACH_TIME) {
                within_reach = true;
            }
            predicted_crossing = until;
        }
    }
    if let Some(limit) = l.gpu_memory {
        match (gpu_total(snap), p.gpu_memory) {
            (Some(total), Some(used)) => {
                let bytes = limit.resolve(total);
                limit_words.push(format!("GPU memory > {}", format_bytes(bytes)));
                let over = used > bytes;
                if over {
                    exceeded.push(format!(
                        "{prefix}GPU memory {} > {}",
                        format_bytes_against(used, bytes),
                        format_bytes(bytes)
                    ));
                }
                readings.push(Reading {
                    what: "GPU memory",
                    value: format!("{prefix}{}", format_bytes_against(used, bytes)),
                    threshold: format!("> {}", size_threshold(limit, total, "GPU memory")),
                    holds: over,
                });
                if used as f64 >= bytes as f64 * (1.0 - h) {
                    cleared = false;
                }
                if used as f64 >= bytes as f64 * REACH_SHARE {
                    within_reach = true;
                }
            }
            (total, _) => {
                limit_words.push(format!("GPU memory > {limit}"));
                readings.push(Reading {
                    what: "GPU memory",
                    value: if total.is_none() {
                        "not known: no GPU memory figure in the sample".to_string()
                    } else {
                        "none held (or not reported for this process)".to_string()
                    },
                    threshold: format!("> {limit}"),
                    holds: false,
                });
            }
        }
    }
    if let Some(rate) = l.growth {
        let limit = rate.bytes_per_second();
        limit_words.push(format!("growth > {}/s", format_bytes(limit as u64)));
        let g = track.and_then(|t| t.growth(now, rate.per, MIN_GROWTH_POINTS));
        let threshold = format!("> {}/s ({rate})", format_bytes(limit as u64));
        match g {
            Some(g) => {
                let over = g > limit;
                if over {
                    exceeded.push(format!(
                        "{prefix}growing {}/s > {}/s over {}",
                        format_bytes_against(g as u64, limit as u64),
                        format_bytes(limit as u64),
                        humantime::format_duration(rate.per)
                    ));
                }
                readings.push(Reading {
                    what: "growth",
                    value: format!(
                        "{prefix}{} {}/s over {}",
                        if g < 0.0 { "shrinking" } else { "growing" },
                        format_bytes(g.abs() as u64),
                        humantime::format_duration(rate.per)
                    ),
                    threshold,
                    holds: over,
                });
                if g >= limit * (1.0 - h) {
                    cleared = false;
                }
                if g >= limit * 0.5 {
                    within_reach = true;
                }
            }
            None => readings.push(Reading {
                what: "growth",
                value: no_growth(rate.per),
                threshold,
                holds: false,
            }),
        }
    }
    if let Some(limit) = l.time_to_exhaustion {
        limit_words.push(format!(
            "memory exhausted within {}",
            humantime::format_duration(limit)
        ));
        let own = track.and_then(|t| t.growth(now, rule.window, MIN_GROWTH_POINTS));
        // Against its ceiling where that is tighter than the machine.
        let (headroom, ceiling) = exhaustion_headroom_for(snap, p);
        let left_under = match ceiling {
            Some(c) => format!("left under the {}", ceiling_words(c)),
            None => "available plus free swap".to_string(),
        };
        let threshold = format!("<= {}", humantime::format_duration(limit));
        let (g, machine_paced) = match own {
            Some(own) => {
                let (g, m) = scale.exhaustion_growth(own);
                (Some(g), m)
            }
            None => (None, false),
        };
        let pace = if machine_paced {
            format!(
                " (the machine's pace; the job's own is {}/s)",
                format_bytes(own.unwrap_or(0.0).max(0.0) as u64)
            )
        } else {
            String::new()
        };
        let tte = g.and_then(|g| time_to_exhaustion(headroom, g));
        match (g, tte) {
            (Some(g), Some(tte)) => {
                let within = tte <= limit;
                if within {
                    exceeded.push(format!(
                        "{prefix}growing {}/s{pace}, {} {left_under}: exhausted in {:.1}s (limit {})",
                        format_bytes(g as u64),
                        format_bytes(headroom),
                        tte.as_secs_f64(),
                        humantime::format_duration(limit)
                    ));
                }
                readings.push(Reading {
                    what: "time to exhaustion",
                    value: format!(
                        "{:.1}s ({prefix}growing {}/s{pace} over {}, {} {left_under})",
                        tte.as_secs_f64(),
                        format_bytes(g as u64),
                        humantime::format_duration(rule.window),
                        format_bytes(headroom)
                    ),
                    threshold,
                    holds: within,
                });
                if tte.as_secs_f64() <= limit.as_secs_f64() * (1.0 + h) {
                    cleared = false;
                }
                if tte <= limit * 2 {
                    within_reach = true;
                }
            }
            (Some(g), None) => readings.push(Reading {
                what: "time to exhaustion",
                value: format!(
                    "never: not growing ({}{}/s over {})",
                    if g < 0.0 { "-" } else { "" },
                    format_bytes(g.abs() as u64),
                    humantime::format_duration(rule.window)
                ),
                threshold,
                holds: false,
            }),
            (None, _) => readings.push(Reading {
                what: "time to exhaustion",
                value: no_growth(rule.window),
                threshold,
                holds: false,
            }),
        }
    }
    LimitCheck {
        exceeded: (!exceeded.is_empty()).then(|| exceeded.join("; ")),
        limit: limit_words.join(" or "),
        cleared,
        within_reach,
        predicted_crossing,
        readings,
    }
}

/// A ceiling in words: `memory cgroup /lab's limit of 2.0 GiB
/// (memory.limit_in_bytes)`.
pub fn ceiling_words(c: &Ceiling) -> String {
    format!(
        "memory cgroup {}'s limit of {} ({})",
        printable(&c.path),
        format_bytes(c.limit()),
        c.limit_file()
    )
}

/// Where `p`'s memory runs out, in words, for `explain` and the status:
/// its ceiling's figures and whether it is tighter than the machine.
/// `None` where it has no ceiling.
pub fn ceiling_reading(snap: &Snapshot, p: &ProcessSample) -> Option<String> {
    let c = snap.ceiling_of(p)?;
    let room = c.room();
    let versus = if room < snap.system.available {
        format!(
            "less than the machine's {} available: the cgroup's OOM killer stops it first",
            format_bytes(snap.system.available)
        )
    } else {
        format!(
            "the machine's {} available is less: the machine runs out first",
            format_bytes(snap.system.available)
        )
    };
    let kills = match c.oom_kills {
        Some(n) if n > 0 => format!("; its OOM killer has killed {n} process(es)"),
        _ => String::new(),
    };
    Some(format!(
        "the {}: {} charged to it, {} of that reclaimable page cache, so {} of room, {versus}{kills}",
        ceiling_words(c),
        format_bytes(c.usage),
        format_bytes(c.reclaimable),
        format_bytes(room)
    ))
}

/// Most owners named in a sentence about memory no process owns.
const NAMED_OWNERS: usize = 3;
/// Most characters of a path quoted in one: paths are other users' text.
const PATH_CHARS: usize = 120;

/// The memory no process owns, in words: its total and its largest
/// holders, with their owners (`/dev/shm/blob 5.0 GiB of mallory, SysV
/// segment 7 1.0 GiB of bob`). Paths outside `/dev/shm` are not quoted: only
/// a directory listing anyone may read is repeated to everyone.
pub fn unowned_words(snap: &Snapshot) -> String {
    let u = &snap.unowned;
    let owner = |user: &Option<crate::model::SharedStr>, uid: Option<u32>| match (user, uid) {
        (Some(user), _) => crate::report::printable(user).into_owned(),
        (None, Some(uid)) => format!("uid {uid}"),
        (None, None) => "an unknown user".to_string(),
    };
    let mut named: Vec<(u64, String)> = Vec::new();
    for f in u
        .tmpfs_files
        .iter()
        .filter(|f| f.mapped_by.is_empty() && f.open_by.is_empty())
    {
        let path = if f.path.starts_with("/dev/shm/") {
            let text = crate::report::printable(&f.path);
            let cut: String = text.chars().take(PATH_CHARS).collect();
            if cut.len() < text.len() {
                format!("{cut}…")
            } else {
                cut
            }
        } else {
            "a tmpfs file".to_string()
        };
        named.push((
            f.bytes,
            format!(
                "{path} {} of {}",
                format_bytes(f.bytes),
                owner(&f.user, f.uid)
            ),
        ));
    }
    for s in u.sysv_segments.iter().filter(|s| s.orphan()) {
        named.push((
            s.bytes,
            format!(
                "SysV segment {} {} of {} (no process attached; ipcrm -m {} frees it)",
                s.id,
                format_bytes(s.bytes),
                owner(&s.user, s.uid),
                s.id
            ),
        ));
    }
    named.sort_by_key(|n| std::cmp::Reverse(n.0));
    let more = named.len().saturating_sub(NAMED_OWNERS);
    let mut list: Vec<String> = named.into_iter().take(NAMED_OWNERS).map(|n| n.1).collect();
    if more > 0 {
        list.push(format!("{more} more"));
    }
    if list.is_empty() {
        format_bytes(u.bytes())
    } else {
        format!("{}: {}", format_bytes(u.bytes()), list.join(", "))
    }
}

/// Why a rule gated by `available_below` must not pick a process: memory
/// no process owns holds at least the whole shortfall, so ending any
/// process would not bring available memory back above the threshold by
/// freeing what is held. `None` while the condition does not hold, the
/// figures are not known, or processes hold part of the shortfall.
pub fn unowned_shortfall(when: &SystemCondition, snap: &Snapshot) -> Option<String> {
    if when.per != Per::Machine {
        return None;
    }
    let limit = when.available_below?;
    let bytes = limit.resolve(snap.system.total);
    let short = bytes
        .checked_sub(snap.system.available)
        .filter(|s| *s > 0)?;
    let unowned = snap.unowned.bytes();
    if !snap.unowned.known || unowned < short {
        return None;
    }
    Some(format!(
        "available memory is short of {} by {}, and memory no process owns holds {}; \
         signalling a process frees none of it, so the rule picks none: remove the files \
         (rm) or segments (ipcrm -m ID) that are no longer needed",
        format_bytes(bytes),
        format_bytes(short),
        unowned_words(snap)
    ))
}

/// Whether a rule's system condition holds, and whether it has cleared.
pub struct ConditionCheck {
    pub holds: bool,
    pub cleared: bool,
    /// A per-cgroup condition is within reach (room below twice its
    /// threshold): worth sampling faster, which the machine's probe cannot
    /// tell.
    pub near: bool,
    pub detail: String,
    /// Each condition on its own.
    pub readings: Vec<Reading>,
}

/// Evaluate a `[rule.when]` condition against the snapshot; a per-cgroup
/// one against `ceiling` (`None`: a process in no limited cgroup, for
/// which it never holds).
pub fn check_condition(
    when: &SystemCondition,
    snap: &Snapshot,
    ceiling: Option<&Ceiling>,
    hysteresis: f64,
) -> ConditionCheck {
    if when.per == Per::Cgroup {
        return check_cgroup_condition(when, snap, ceiling, hysteresis);
    }
    let mut holds = true;
    let mut cleared = false;
    let mut detail = Vec::new();
    let mut readings = Vec::new();
    if let Some(level) = when.pressure {
        let now = snap.pressure.level;
        let ok = now >= level;
        holds &= ok;
        cleared |= now < level;
        detail.push(format!("pressure {now} (rule: at least {level})"));
        readings.push(Reading {
            what: "pressure",
            value: now.to_string(),
            threshold: format!("at least {level}"),
            holds: ok,
        });
    }
    if let Some(limit) = when.available_below {
        let bytes = limit.resolve(snap.system.total);
        let avail = snap.system.available;
        let ok = avail < bytes;
        holds &= ok;
        cleared |= avail as f64 > bytes as f64 * (1.0 + hysteresis);
        detail.push(format!(
            "available {} < {}",
            format_bytes(avail),
            format_bytes(bytes)
        ));
        readings.push(Reading {
            what: "available memory",
            value: format_bytes(avail),
            threshold: format!("< {}", size_threshold(limit, snap.system.total, "memory")),
            holds: ok,
        });
        if snap.unowned.known && snap.unowned.bytes() > 0 {
            let short = bytes.saturating_sub(avail);
            readings.push(Reading {
                what: "memory no process owns",
                value: unowned_words(snap),
                threshold: format!(
                    "at least the shortfall ({}): then no process is picked, since ending one \
                     frees none of it",
                    format_bytes(short)
                ),
                holds: ok && snap.unowned.bytes() >= short,
            });
        }
    }
    if let Some(limit) = when.swap_used_above {
        let bytes = limit.resolve(snap.swap.total);
        let used = snap.swap.used;
        let ok = snap.swap.total > 0 && used > bytes;
        holds &= ok;
        cleared |= (used as f64) < bytes as f64 * (1.0 - hysteresis);
        detail.push(format!(
            "swap used {} > {}",
            format_bytes(used),
            format_bytes(bytes)
        ));
        readings.push(Reading {
            what: "swap used",
            value: if snap.swap.total == 0 {
                "no swap space".to_string()
            } else {
                format_bytes(used)
            },
            threshold: format!("> {}", size_threshold(limit, snap.swap.total, "swap")),
            holds: ok,
        });
    }
    ConditionCheck {
        holds,
        cleared: cleared && !holds,
        near: false,
        detail: detail.join(", "),
        readings,
    }
}

/// A `per = "cgroup"` condition read against one limited cgroup.
fn check_cgroup_condition(
    when: &SystemCondition,
    snap: &Snapshot,
    ceiling: Option<&Ceiling>,
    hysteresis: f64,
) -> ConditionCheck {
    let Some(c) = ceiling else {
        return ConditionCheck {
            holds: false,
            cleared: true,
            near: false,
            detail: "not in a memory cgroup with a limit".to_string(),
            readings: vec![Reading {
                what: "memory cgroup",
                value: "none with a limit below the machine's memory".to_string(),
                threshold: "a limited cgroup (the rule has per = \"cgroup\")".to_string(),
                holds: false,
            }],
        };
    };
    let name = printable(&c.path).into_owned();
    let mut holds = true;
    let mut cleared = false;
    let mut near = false;
    let mut detail = Vec::new();
    let mut readings = Vec::new();
    if let Some(limit) = when.available_below {
        let bytes = limit.resolve(c.limit());
        let room = c.room();
        let ok = room < bytes;
        holds &= ok;
        cleared |= room as f64 > bytes as f64 * (1.0 + hysteresis);
        near |= room < bytes.saturating_mul(2);
        detail.push(format!(
            "memory cgroup {name}: room {} < {}",
            format_bytes(room),
            format_bytes(bytes)
        ));
        readings.push(Reading {
            what: "room under the cgroup's limit",
            value: format!(
                "{} in {name} ({} charged, {} reclaimable)",
                format_bytes(room),
                format_bytes(c.usage),
                format_bytes(c.reclaimable)
            ),
            threshold: format!(
                "< {}",
                size_threshold(limit, c.limit(), &format!("{name}'s limit"))
            ),
            holds: ok,
        });
    }
    if let Some(limit) = when.swap_used_above {
        // Its swap limit, or the machine's swap where it has none.
        let total = c.swap_max.unwrap_or(snap.swap.total);
        let bytes = limit.resolve(total);
        let used = c.swap_used.unwrap_or(0);
        let ok = total > 0 && c.swap_used.is_some() && used > bytes;
        holds &= ok;
        cleared |= (used as f64) < bytes as f64 * (1.0 - hysteresis);
        detail.push(format!(
            "memory cgroup {name}: swap used {} > {}",
            format_bytes(used),
            format_bytes(bytes)
        ));
        readings.push(Reading {
            what: "the cgroup's swap used",
            value: match c.swap_used {
                None => format!("not accounted in {name}"),
                Some(_) if total == 0 => "no swap space".to_string(),
                Some(u) => format_bytes(u),
            },
            threshold: format!("> {}", size_threshold(limit, total, "swap")),
            holds: ok,
        });
    }
    ConditionCheck {
        holds,
        cleared: cleared && !holds,
        near: near || holds,
        detail: detail.join(", "),
        readings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::PressureLevel;
    use crate::model::build::{SnapshotBuilder, process, snapshot};

    const GIB: u64 = 1 << 30;

    fn rule(limits: &str) -> Rule {
        let text = format!("[[rule]]\nname = \"r\"\n{limits}\nactions = [{{ notify = true }}]\n");
        Config::from_toml_str(&text, "t").unwrap().rules[0].clone()
    }

    /// A 16 GiB machine with half of it available.
    fn half_free() -> SnapshotBuilder {
        snapshot(0).memory(16 * GIB, 8 * GIB)
    }

    #[test]
    fn a_percentage_reads_with_what_it_is_a_share_of() {
        let c = check(
            &rule("footprint = \"50%\""),
            &process(5).name("python3").footprint(9 * GIB).build(),
            None,
            &half_free().build(),
            Timestamp(0),
            Scale::default(),
        );
        assert_eq!(c.readings.len(), 1);
        let r = &c.readings[0];
        assert_eq!(r.value, "9.0 GiB");
        assert_eq!(r.threshold, "> 50% of 16.0 GiB memory = 8.0 GiB");
        assert!(r.holds);
        assert_eq!(c.exceeded.as_deref(), Some("footprint 9.0 GiB > 8.0 GiB"));
    }

    #[test]
    fn growth_without_history_is_not_known_and_does_not_hold() {
        let c = check(
            &rule("growth = \"1GiB/10s\"\ntime_to_exhaustion = \"30s\""),
            &process(5).name("python3").footprint(GIB).build(),
            None,
            &half_free().build(),
            Timestamp(0),
            Scale::default(),
        );
        let values: Vec<&str> = c.readings.iter().map(|r| r.value.as_str()).collect();
        assert_eq!(
            values,
            [
                "not known: growth needs 3 samples spanning half of 10s",
                "not known: growth needs 3 samples spanning half of 10s"
            ]
        );
        assert!(c.readings.iter().all(|r| !r.holds));
        assert_eq!(c.exceeded, None);
    }

    #[test]
    fn a_condition_reads_each_clause() {
        let s = half_free().pressure_level(PressureLevel::Warn).build();
        let when = SystemCondition {
            per: Per::Machine,
            pressure: Some(PressureLevel::Critical),
            available_below: Some(SizeLimit::Percent(60.0)),
            swap_used_above: None,
        };
        let c = check_condition(&when, &s, None, 0.1);
        assert!(!c.holds);
        let words: Vec<(&str, &str, bool)> = c
            .readings
            .iter()
            .map(|r| (r.what, r.value.as_str(), r.holds))
            .collect();
        assert_eq!(
            words,
            [
                ("pressure", "warn", false),
                ("available memory", "8.0 GiB", true)
            ]
        );
    }
}
