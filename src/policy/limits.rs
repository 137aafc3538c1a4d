//! Limit arithmetic: does a rule's limit hold for a process right now, has it
//! cleared (fallen back by the hysteresis margin), and is it within reach
//! (worth sampling faster for). Pure functions over the snapshot and history.

use std::time::Duration;

use crate::config::{Limits, Rule, SystemCondition};
use crate::history::{ProcessTrack, exhaustion_headroom, time_to_exhaustion};
use crate::model::{ProcessSample, Snapshot, Timestamp};
use crate::report::format_bytes;

/// Points needed before a growth rate is trusted for a limit.
pub const MIN_GROWTH_POINTS: usize = 3;
/// A limit this close (share of it reached) counts as within reach.
pub const REACH_SHARE: f64 = 0.9;
/// A limit the process would reach within this time counts as within reach.
pub const REACH_TIME: Duration = Duration::from_secs(10);
/// Window for the short-term growth used to predict when a limit is crossed.
pub const PREDICTION_WINDOW: Duration = Duration::from_secs(3);

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
}

/// The largest GPU's memory, which `gpu_memory` percentages refer to.
fn gpu_total(snap: &Snapshot) -> Option<u64> {
    snap.gpus.iter().filter_map(|g| g.memory_total).max()
}

/// Check every per-process limit of `rule` for `p`.
pub fn check(
    rule: &Rule,
    p: &ProcessSample,
    track: Option<&ProcessTrack>,
    snap: &Snapshot,
    now: Timestamp,
) -> LimitCheck {
    let l: &Limits = &rule.limits;
    let h = rule.hysteresis;
    let mut exceeded = Vec::new();
    let mut limit_words = Vec::new();
    let mut cleared = true;
    let mut within_reach = false;
    let mut predicted_crossing = None;

    if let Some(limit) = l.footprint {
        let bytes = limit.resolve(snap.system.total);
        limit_words.push(format!("footprint > {}", format_bytes(bytes)));
        if p.footprint > bytes {
            exceeded.push(format!(
                "footprint {} > {}",
                format_bytes(p.footprint),
                format_bytes(bytes)
            ));
        }
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
                if used > bytes {
                    exceeded.push(format!(
                        "GPU memory {} > {}",
                        format_bytes(used),
                        format_bytes(bytes)
                    ));
                }
                if used as f64 >= bytes as f64 * (1.0 - h) {
                    cleared = false;
                }
                if used as f64 >= bytes as f64 * REACH_SHARE {
                    within_reach = true;
                }
            }
            _ => limit_words.push(format!("GPU memory > {limit}")),
        }
    }
    if let Some(rate) = l.growth {
        limit_words.push(format!(
            "growth > {}/s",
            format_bytes(rate.bytes_per_second() as u64)
        ));
        let g = track.and_then(|t| t.growth(now, rate.per, MIN_GROWTH_POINTS));
        if let Some(g) = g {
            let limit = rate.bytes_per_second();
            if g > limit {
                exceeded.push(format!(
                    "growing {}/s > {}/s over {}",
                    format_bytes(g as u64),
                    format_bytes(limit as u64),
                    humantime::format_duration(rate.per)
                ));
            }
            if g >= limit * (1.0 - h) {
                cleared = false;
            }
            if g >= limit * 0.5 {
                within_reach = true;
            }
        }
    }
    if let Some(limit) = l.time_to_exhaustion {
        limit_words.push(format!(
            "memory exhausted within {}",
            humantime::format_duration(limit)
        ));
        let g = track.and_then(|t| t.growth(now, rule.window, MIN_GROWTH_POINTS));
        let headroom = exhaustion_headroom(snap);
        if let Some(tte) = g.and_then(|g| time_to_exhaustion(headroom, g)) {
            if tte <= limit {
                exceeded.push(format!(
                    "growing {}/s, {} left: exhausted in {:.1}s (limit {})",
                    format_bytes(g.unwrap_or(0.0) as u64),
                    format_bytes(headroom),
                    tte.as_secs_f64(),
                    humantime::format_duration(limit)
                ));
            }
            if tte.as_secs_f64() <= limit.as_secs_f64() * (1.0 + h) {
                cleared = false;
            }
            if tte <= limit * 2 {
                within_reach = true;
            }
        }
    }
    LimitCheck {
        exceeded: (!exceeded.is_empty()).then(|| exceeded.join("; ")),
        limit: limit_words.join(" or "),
        cleared,
        within_reach,
        predicted_crossing,
    }
}

/// Whether a rule's system condition holds, and whether it has cleared.
pub struct ConditionCheck {
    pub holds: bool,
    pub cleared: bool,
    pub detail: String,
}

/// Evaluate a `[rule.when]` condition against the snapshot.
pub fn check_condition(when: &SystemCondition, snap: &Snapshot, hysteresis: f64) -> ConditionCheck {
    let mut holds = true;
    let mut cleared = false;
    let mut detail = Vec::new();
    if let Some(level) = when.pressure {
        let now = snap.pressure.level;
        holds &= now >= level;
        cleared |= now < level;
        detail.push(format!("pressure {now} (rule: at least {level})"));
    }
    if let Some(limit) = when.available_below {
        let bytes = limit.resolve(snap.system.total);
        let avail = snap.system.available;
        holds &= avail < bytes;
        cleared |= avail as f64 > bytes as f64 * (1.0 + hysteresis);
        detail.push(format!(
            "available {} < {}",
            format_bytes(avail),
            format_bytes(bytes)
        ));
    }
    if let Some(limit) = when.swap_used_above {
        let bytes = limit.resolve(snap.swap.total);
        let used = snap.swap.used;
        holds &= snap.swap.total > 0 && used > bytes;
        cleared |= (used as f64) < bytes as f64 * (1.0 - hysteresis);
        detail.push(format!(
            "swap used {} > {}",
            format_bytes(used),
            format_bytes(bytes)
        ));
    }
    ConditionCheck {
        holds,
        cleared: cleared && !holds,
        detail: detail.join(", "),
    }
}
