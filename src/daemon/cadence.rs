//! When the daemon samples, and how much of the process table it reads:
//! pure functions of the rules' system conditions, the recent probe
//! readings, the configured intervals and the time, which is always passed
//! in. [`Cadence`] keeps the little state they need between calls.
//!
//! - **Probe rate.** For each rule's `[rule.when]` (a *gate*) the distance
//!   to holding is measured from the latest reading: available memory above
//!   `available_below`, swap used below `swap_used_above`, and for
//!   `pressure` the available memory above the floor at which this OS's
//!   level reaches the rule's level ([`crate::sample::probe::available_floor`];
//!   PSI stalls arrive as kernel events instead). The probe sleeps no longer
//!   than that distance takes to cover at [`MAX_FALL_RATE`] (earlyoom's
//!   bound) or at twice the rate observed, whichever is faster, and no less
//!   than [`MIN_PROBE`]: the nearer a condition, the faster.
//! - **Prediction.** The trend of the last readings (Theil–Sen slope over
//!   [`TREND_WINDOW`]) predicts when each gate will hold; when that comes
//!   before the next probe, the probe lands just past the predicted crossing
//!   instead, like the per-process path's `Evaluation::next_check`.
//! - **A source that repeats itself.** A source may answer with a cached
//!   copy for a while (`ProbeReading::cached_for`: macOS's rate-limited
//!   `host_statistics64`, where its page-count sysctls are missing). Its
//!   readings come as a staircase: a figure repeated for up to that window,
//!   then a jump. Counted as they come, the flat treads outvote the risers
//!   and the trend comes out flat. So a run of identical figures counts as
//!   one point, at the time it was first seen, until the run outlasts the
//!   window (then the figure is confirmed: memory really stopped moving, and
//!   the later readings count as they come, so a plateau ends an old fall;
//!   for `host_statistics64` one window suffices, since a figure first seen
//!   at t was fetched no earlier than its rate-limit window opened, so an
//!   answer at t + window or later was fetched again in a later window);
//!   and a predicted crossing is measured from when the figure was first
//!   seen, not from the reading that repeated it ([`Trend::available_age`]).
//!   Where every read is fresh (`cached_for` zero: Linux, and macOS's
//!   sysctls) every reading counts, as before.
//! - **Crossing.** A gate that holds now and did not at the last sample
//!   calls for a sample at once, so the policy picks its victim on it.
//! - **Depth.** A tick re-reads the whole process table ([`Depth::Full`])
//!   only every [`FULL_EVERY`] normal intervals, when available memory moved
//!   by more than [`MOVED_PERCENT`] of RAM or [`MOVED_BYTES`] (the smaller)
//!   since the last full read, or when a gate is predicted to hold within
//!   [`NEAR`]; otherwise it is [`Depth::Light`] (processes listed, new
//!   ones read in full, ML, rule-matched and the largest ones re-read, the
//!   rest carried). A sample
//!   for a crossing is light when a full read is at most [`FULL_EVERY`]
//!   intervals old: the victim is picked at once, from fresh figures for
//!   the largest processes. A full read watches for the gates that do not
//!   hold yet ([`Cadence::tripwire`]): one that comes to hold while it reads
//!   cuts it short, and it finishes light.
//! - **Tick cadence.** The normal interval while calm, the fast one under
//!   pressure, after a kernel pressure event or with a limit within reach,
//!   and never later than the policy's predicted crossing.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::SystemCondition;
use crate::history::theil_sen_slope;
use crate::model::PressureLevel;
use crate::model::sampling::{ProbeReading, TripGate, Tripwire};

/// The fastest the probe runs while a condition is near.
pub const MIN_PROBE: Duration = Duration::from_millis(20);
/// The shortest sleep before a predicted crossing.
pub const MIN_PREDICTED: Duration = Duration::from_millis(5);
/// How far past a predicted crossing the probe lands, so that the crossing
/// has happened when it looks.
pub const PAST_CROSSING: Duration = Duration::from_millis(1);
/// The fastest memory is assumed to be used up (bytes per second) when
/// bounding the probe's sleep: earlyoom's 6000 MiB/s.
pub const MAX_FALL_RATE: f64 = 6000.0 * 1024.0 * 1024.0;
/// Readings older than this (before the newest) make no trend.
pub const TREND_WINDOW: Duration = Duration::from_secs(2);
/// At most this many readings are kept for the trend.
pub const TREND_READINGS: usize = 16;
/// Readings spanning less than this make no trend (timing noise).
pub const MIN_TREND_SPAN: Duration = Duration::from_millis(40);
/// A full read of the process table at least every this many normal
/// intervals.
pub const FULL_EVERY: u32 = 10;
/// A move of available memory by more than this since the last full read
/// calls for another…
pub const MOVED_BYTES: u64 = 256 << 20;
/// …or by more than this share of physical memory (percent), if smaller.
pub const MOVED_PERCENT: u64 = 1;
/// A gate predicted to hold within this long is near: every tick is full.
pub const NEAR: Duration = Duration::from_secs(10);
/// The shortest sleep before a crossing the policy predicts: sampling
/// sooner than this would only measure the sampler.
pub const MIN_PREDICTED_TICK: Duration = Duration::from_millis(10);

/// How much of the process table a sample reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Every process afresh.
    Full,
    /// The processes that matter afresh, the rest carried
    /// ([`crate::sample::Sampler::sample_light`]).
    Light,
}

/// How one gate stands against the latest reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Approach {
    /// Every condition of the gate holds now.
    pub holds: bool,
    /// When the trend says it will hold, from the latest reading (zero if it
    /// holds; `None` if the trend does not lead there).
    pub eta: Option<Duration>,
    /// It cannot hold sooner than this, memory being used up at most at
    /// [`MAX_FALL_RATE`] (or twice the observed rate); zero if it holds,
    /// `None` if no amount of memory use makes it hold (no swap for a swap
    /// condition, a pressure level the OS does not derive from available
    /// memory).
    pub bound: Option<Duration>,
}

/// Available memory below which the OS reports at least a pressure level.
pub type Floor = fn(PressureLevel, u64) -> Option<u64>;

/// Slopes of available memory and swap used over the recent readings,
/// bytes per second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Trend {
    pub available: Option<f64>,
    pub swap_used: Option<f64>,
    /// How long before the newest reading its available figure was first
    /// seen, while the source may still be repeating a cached copy (see the
    /// module doc); zero when the newest figure counts as read then.
    pub available_age: Duration,
    /// The same for swap used.
    pub swap_used_age: Duration,
}

/// The longest any of `readings`' sources may repeat a figure.
fn source_window(readings: &[ProbeReading]) -> Duration {
    readings
        .iter()
        .map(|r| r.cached_for)
        .max()
        .unwrap_or(Duration::ZERO)
}

/// The readings of one series (`y`) that the trend counts, as (time,
/// value), and the age of the newest figure (see [`Trend::available_age`]).
/// A reading that repeats the figure before it counts only once its run
/// has lasted `window` since the figure was first seen; with a zero window
/// every reading counts.
fn counted(
    readings: &[ProbeReading],
    y: fn(&ProbeReading) -> u64,
    window: Duration,
) -> (Vec<(Instant, u64)>, Duration) {
    let mut points = Vec::with_capacity(readings.len());
    let mut age = Duration::ZERO;
    let mut run: Option<(u64, Instant)> = None;
    for r in readings {
        let value = y(r);
        let first_seen = match run {
            Some((v, since)) if v == value => since,
            _ => r.at,
        };
        run = Some((value, first_seen));
        let lasted = r.at.saturating_duration_since(first_seen);
        if first_seen == r.at || lasted >= window {
            points.push((r.at, value));
            age = Duration::ZERO;
        } else {
            age = lasted;
        }
    }
    (points, age)
}

/// The trend of the readings within [`TREND_WINDOW`] of the newest, if they
/// are at least three and span [`MIN_TREND_SPAN`]. A figure that repeats
/// within its source's window counts once, when it was first seen (see the
/// module doc).
pub fn trend(readings: &[ProbeReading]) -> Trend {
    let Some(newest) = readings.last() else {
        return Trend::default();
    };
    let recent = |r: &Instant| *r <= newest.at && newest.at.duration_since(*r) <= TREND_WINDOW;
    let span = readings
        .iter()
        .find(|r| recent(&r.at))
        .map_or(Duration::ZERO, |r| newest.at.duration_since(r.at));
    if span < MIN_TREND_SPAN {
        return Trend::default();
    }
    let window = source_window(readings);
    let x = |at: Instant| -(newest.at.duration_since(at).as_secs_f64());
    let series = |y: fn(&ProbeReading) -> u64| {
        let (points, age) = counted(readings, y, window);
        let points: Vec<(f64, f64)> = points
            .into_iter()
            .filter(|(at, _)| recent(at))
            .map(|(at, v)| (x(at), v as f64))
            .collect();
        (theil_sen_slope(&points), age)
    };
    let (available, available_age) = series(|r| r.available);
    let (swap_used, swap_used_age) = series(|r| r.swap_used);
    Trend {
        available,
        swap_used,
        available_age,
        swap_used_age,
    }
}

/// One condition: `headroom` bytes left before it holds, closing at
/// `closing` bytes per second (if positive), as of `age` before now (the
/// figure's age where its source may have repeated it: the time to a
/// crossing runs from then).
fn component(headroom: u64, closing: Option<f64>, age: Duration) -> Approach {
    if headroom == 0 {
        return Approach {
            holds: true,
            eta: Some(Duration::ZERO),
            bound: Some(Duration::ZERO),
        };
    }
    let closing = closing.filter(|c| c.is_finite() && *c > 0.0);
    let secs = |rate: f64| {
        Duration::try_from_secs_f64(headroom as f64 / rate)
            .ok()
            .map(|d| d.saturating_sub(age))
    };
    Approach {
        holds: false,
        eta: closing.and_then(secs),
        bound: secs(MAX_FALL_RATE.max(2.0 * closing.unwrap_or(0.0))),
    }
}

/// A condition that no amount of memory use brings about.
const NEVER: Approach = Approach {
    holds: false,
    eta: None,
    bound: None,
};

/// How `gate` stands against `now` (the latest reading) given `trend`.
/// All of a gate's conditions must hold, so it holds when the last of them
/// does: the latest `eta` and `bound` of its conditions.
pub fn approach(
    gate: &SystemCondition,
    now: &ProbeReading,
    trend: Trend,
    floor: Floor,
) -> Approach {
    let falling = trend.available.map(|s| -s);
    let below = |threshold: u64| {
        if now.available < threshold {
            component(0, None, Duration::ZERO)
        } else {
            // available < threshold holds from available = threshold − 1.
            component(now.available - threshold + 1, falling, trend.available_age)
        }
    };
    let mut parts: Vec<Approach> = Vec::with_capacity(3);
    if let Some(limit) = gate.available_below {
        parts.push(below(limit.resolve(now.total)));
    }
    if let Some(limit) = gate.swap_used_above {
        let threshold = limit.resolve(now.swap_total);
        parts.push(if now.swap_total == 0 {
            NEVER
        } else if now.swap_used > threshold {
            component(0, None, Duration::ZERO)
        } else {
            component(
                threshold - now.swap_used + 1,
                trend.swap_used,
                trend.swap_used_age,
            )
        });
    }
    if let Some(level) = gate.pressure {
        parts.push(if now.pressure >= level {
            component(0, None, Duration::ZERO)
        } else {
            floor(level, now.total).map_or(NEVER, below)
        });
    }
    let latest = |f: fn(&Approach) -> Option<Duration>| {
        parts
            .iter()
            .map(f)
            .try_fold(Duration::ZERO, |acc, d| d.map(|d| acc.max(d)))
    };
    Approach {
        holds: !parts.is_empty() && parts.iter().all(|p| p.holds),
        eta: latest(|p| p.eta),
        bound: latest(|p| p.bound),
    }
}

/// How long the probe may sleep given each gate's approach, leaving out the
/// gates that held at the last sample (they cannot newly hold before they
/// clear): no longer than the nearest bound (at least [`MIN_PROBE`]), and
/// just past the nearest predicted crossing if that comes first (at least
/// [`MIN_PREDICTED`]). `None` when nothing approaches: the ticks suffice.
pub fn probe_delay(approaches: &[Approach], held: &[bool]) -> Option<Duration> {
    approaches
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.holds && !held.get(*i).copied().unwrap_or(false))
        .filter_map(|(_, a)| {
            let bound = a.bound.map(|b| b.max(MIN_PROBE));
            let predicted = a
                .eta
                .map(|e| (e + PAST_CROSSING).max(MIN_PREDICTED))
                .filter(|p| bound.is_none_or(|b| *p < b));
            predicted.or(bound)
        })
        .min()
}

/// `gate` as figures a full sample can watch while it reads ([`TripGate`]),
/// resolved against `now`: its available-memory threshold (with a pressure
/// level, the lower of it and the level's floor), its swap threshold.
/// `None` for a gate no figure there can bring about: a pressure level this
/// OS does not derive from available memory, swap on a machine without.
pub fn trip_gate(gate: &SystemCondition, now: &ProbeReading, floor: Floor) -> Option<TripGate> {
    let mut available_below = gate.available_below.map(|l| l.resolve(now.total));
    if let Some(level) = gate.pressure {
        let at = floor(level, now.total)?;
        available_below = Some(available_below.map_or(at, |a| a.min(at)));
    }
    let swap_used_above = match gate.swap_used_above {
        Some(_) if now.swap_total == 0 => return None,
        Some(limit) => Some(limit.resolve(now.swap_total)),
        None => None,
    };
    let g = TripGate {
        available_below,
        swap_used_above,
    };
    (g.available_below.is_some() || g.swap_used_above.is_some()).then_some(g)
}

/// Whether a gate holds now that did not at the last sample.
pub fn newly_holding(approaches: &[Approach], held: &[bool]) -> bool {
    approaches
        .iter()
        .enumerate()
        .any(|(i, a)| a.holds && !held.get(i).copied().unwrap_or(false))
}

/// Whether a gate is predicted to hold within [`NEAR`].
pub fn near(approaches: &[Approach]) -> bool {
    approaches
        .iter()
        .any(|a| !a.holds && a.eta.is_some_and(|e| e <= NEAR))
}

/// Whether available memory moved far enough since the last full read to
/// read the whole table again: by more than [`MOVED_BYTES`] or
/// [`MOVED_PERCENT`] of `total`, whichever is smaller.
pub fn moved(at_full: u64, now: u64, total: u64) -> bool {
    let limit = MOVED_BYTES.min(total / 100 * MOVED_PERCENT);
    at_full.abs_diff(now) > limit
}

/// What a sample is taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The regular tick.
    Tick,
    /// A gate newly holds, or the kernel reported pressure: the policy must
    /// pick a victim now.
    Crossing,
}

/// How deep the next sample reads (see the module doc).
pub fn depth(
    cause: Cause,
    now: Instant,
    last_full: Option<(Instant, u64)>,
    latest: Option<&ProbeReading>,
    near: bool,
    normal: Duration,
) -> Depth {
    let Some((full_at, available_at_full)) = last_full else {
        return Depth::Full;
    };
    if now.saturating_duration_since(full_at) >= normal * FULL_EVERY {
        return Depth::Full;
    }
    if cause == Cause::Crossing {
        return Depth::Light;
    }
    let moved = latest.is_some_and(|r| moved(available_at_full, r.available, r.total));
    if moved || near {
        Depth::Full
    } else {
        Depth::Light
    }
}

/// Whether the daemon samples at the fast interval: pressure at warn or
/// above, a kernel pressure event within the last while (`fast_until`), or
/// the policy has a limit within reach.
pub fn is_fast(
    level: Option<PressureLevel>,
    fast_until: Option<Instant>,
    within_reach: bool,
    now: Instant,
) -> bool {
    level.is_some_and(|l| l >= PressureLevel::Warn)
        || fast_until.is_some_and(|t| now < t)
        || within_reach
}

/// When the next tick falls: one interval (fast or normal) after the last
/// one `started`, keeping a steady cadence; no later than the policy's
/// predicted crossing (`next_check` from `now`, at least
/// [`MIN_PREDICTED_TICK`]); after a long stall, now.
pub fn next_tick(
    started: Instant,
    now: Instant,
    interval: Duration,
    next_check: Option<Duration>,
) -> Instant {
    let mut next = started + interval;
    if let Some(predicted) = next_check {
        next = next.min(now + predicted.max(MIN_PREDICTED_TICK));
    }
    next.max(now)
}

/// The state the cadence keeps between samples and probes.
#[derive(Debug, Clone)]
pub struct Cadence {
    gates: Vec<SystemCondition>,
    floor: Floor,
    readings: VecDeque<ProbeReading>,
    /// When the last full read was taken and the available memory then.
    last_full: Option<(Instant, u64)>,
    /// Which gates held at the last sample.
    held: Vec<bool>,
}

/// What a probe reading calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterProbe {
    /// Nothing now: probe again (or tick) later.
    Wait,
    /// Sample now, this deep, for this cause.
    Sample(Depth, Cause),
}

impl Cadence {
    /// A cadence for the `gates` of the rules (their `[rule.when]`s), with
    /// the OS's pressure `floor`.
    pub fn new(gates: Vec<SystemCondition>, floor: Floor) -> Self {
        Self {
            held: vec![false; gates.len()],
            gates,
            floor,
            readings: VecDeque::with_capacity(TREND_READINGS),
            last_full: None,
        }
    }

    /// New gates after a config reload; the readings are kept.
    pub fn set_gates(&mut self, gates: Vec<SystemCondition>) {
        if gates != self.gates {
            self.held = vec![false; gates.len()];
            self.gates = gates;
        }
    }

    /// True if some gate asks about pressure (the probe then reads PSI).
    pub fn wants_pressure(&self) -> bool {
        self.gates.iter().any(|g| g.pressure.is_some())
    }

    /// True if there is any gate for the probe to watch.
    pub fn has_gates(&self) -> bool {
        !self.gates.is_empty()
    }

    /// Keep `reading` for the trend. Where the source may repeat a cached
    /// figure, a reading whose available memory repeats that of the last
    /// two, within the window since the figure was first seen, replaces the
    /// last, and a full buffer drops the oldest reading but keeps the one
    /// where a still repeated figure was first seen: the buffer keeps when each
    /// figure was first seen and the latest reading, not a long tread of
    /// repeats that would push the earlier steps out.
    fn remember(&mut self, reading: ProbeReading) {
        let window = reading
            .cached_for
            .max(source_window(self.readings.make_contiguous()));
        let n = self.readings.len();
        if window > Duration::ZERO && n >= 2 {
            let same = |r: &ProbeReading| r.available == reading.available;
            let first_seen = self
                .readings
                .iter()
                .rev()
                .take_while(|r| same(r))
                .last()
                .map(|r| r.at);
            let unconfirmed = first_seen
                .is_some_and(|at| self.readings[n - 1].at.saturating_duration_since(at) < window);
            if same(&self.readings[n - 1]) && same(&self.readings[n - 2]) && unconfirmed {
                self.readings[n - 1] = reading;
                return;
            }
        }
        if self.readings.len() == TREND_READINGS {
            // The oldest reading goes, unless its figure is repeated by the
            // next: then that repeat goes, and the first sight stays.
            let front_repeated = window > Duration::ZERO
                && self.readings.len() >= 2
                && self.readings[0].available == self.readings[1].available;
            if front_repeated {
                self.readings.remove(1);
            } else {
                self.readings.pop_front();
            }
        }
        self.readings.push_back(reading);
    }

    /// Each gate's approach against the latest reading.
    pub fn approaches(&self) -> Vec<Approach> {
        let Some(latest) = self.readings.back() else {
            return vec![Approach::default(); self.gates.len()];
        };
        let readings: Vec<ProbeReading> = self.readings.iter().copied().collect();
        let trend = trend(&readings);
        self.gates
            .iter()
            .map(|g| approach(g, latest, trend, self.floor))
            .collect()
    }

    /// Take in a sample's figures (`depth` deep, read at `reading.at`).
    pub fn sampled(&mut self, reading: ProbeReading, depth: Depth) {
        self.remember(reading);
        if depth == Depth::Full {
            self.last_full = Some((reading.at, reading.available));
        }
        self.held = self.approaches().iter().map(|a| a.holds).collect();
    }

    /// A sample failed: the next one reads the whole table.
    pub fn failed(&mut self) {
        self.last_full = None;
    }

    /// Take in a probe reading and say whether to sample now.
    pub fn probed(&mut self, reading: ProbeReading, normal: Duration) -> AfterProbe {
        self.remember(reading);
        let approaches = self.approaches();
        if newly_holding(&approaches, &self.held) {
            let depth = self.depth(Cause::Crossing, reading.at, normal);
            return AfterProbe::Sample(depth, Cause::Crossing);
        }
        let moved = self
            .last_full
            .is_some_and(|(_, at_full)| moved(at_full, reading.available, reading.total));
        if moved {
            return AfterProbe::Sample(Depth::Full, Cause::Tick);
        }
        AfterProbe::Wait
    }

    /// How deep a sample taken `now` for `cause` reads.
    pub fn depth(&self, cause: Cause, now: Instant, normal: Duration) -> Depth {
        let approaches = self.approaches();
        depth(
            cause,
            now,
            self.last_full,
            self.readings.back(),
            near(&approaches),
            normal,
        )
    }

    /// Whether the latest reading (a light sample's) moved so far since the
    /// last full read that a full one should follow at once.
    pub fn full_due(&self) -> bool {
        match (self.last_full, self.readings.back()) {
            (Some((_, at_full)), Some(r)) => moved(at_full, r.available, r.total),
            (None, _) => true,
            _ => false,
        }
    }

    /// What a full sample taken now watches for while it reads the process
    /// table ([`crate::model::sampling::Sampler::sample_unless`]): every
    /// gate that did not hold at the last sample, resolved against the
    /// latest reading.
    pub fn tripwire(&self) -> Tripwire {
        let Some(latest) = self.readings.back() else {
            return Tripwire::default();
        };
        let gates = self
            .gates
            .iter()
            .zip(self.held.iter().copied().chain(std::iter::repeat(false)))
            .filter(|(_, held)| !held)
            .filter_map(|(g, _)| trip_gate(g, latest, self.floor))
            .collect();
        Tripwire { gates }
    }

    /// When to probe next, from the latest reading's time; `None` if no
    /// gate approaches (the ticks suffice).
    pub fn next_probe(&self) -> Option<Instant> {
        let latest = self.readings.back()?;
        probe_delay(&self.approaches(), &self.held).map(|d| latest.at + d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::units::{ByteSize, SizeLimit};

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn linux_floor(level: PressureLevel, total: u64) -> Option<u64> {
        match level {
            PressureLevel::Normal => Some(u64::MAX),
            PressureLevel::Warn => Some(total / 10),
            PressureLevel::Critical => Some(total / 20),
        }
    }

    fn no_floor(_: PressureLevel, _: u64) -> Option<u64> {
        None
    }

    fn reading(t0: Instant, ms: u64, available: u64) -> ProbeReading {
        ProbeReading {
            at: t0 + Duration::from_millis(ms),
            total: 16 * GIB,
            available,
            swap_total: 0,
            swap_used: 0,
            pressure: PressureLevel::Normal,
            cached_for: Duration::ZERO,
        }
    }

    fn available_below(bytes: u64) -> SystemCondition {
        SystemCondition {
            available_below: Some(SizeLimit::Bytes(ByteSize(bytes))),
            ..SystemCondition::default()
        }
    }

    #[test]
    fn a_full_sample_watches_for_the_gates_that_do_not_hold_yet() {
        let t0 = Instant::now();
        let swap = SystemCondition {
            swap_used_above: Some(SizeLimit::Bytes(ByteSize(GIB))),
            ..SystemCondition::default()
        };
        let warn = SystemCondition {
            pressure: Some(PressureLevel::Warn),
            available_below: Some(SizeLimit::Bytes(ByteSize(2 * GIB))),
            ..SystemCondition::default()
        };
        let gates = vec![available_below(4 * GIB), swap, warn];
        let mut c = Cadence::new(gates.clone(), linux_floor);
        assert!(
            c.tripwire().is_empty(),
            "nothing read yet: nothing to resolve"
        );
        c.sampled(reading(t0, 0, 8 * GIB), Depth::Full);
        // No swap on this machine: the swap gate cannot trip; the pressure
        // gate trips at the lower of its threshold and warn's floor
        // (16 GiB / 10 here).
        let w = c.tripwire();
        assert_eq!(
            w.gates,
            vec![
                TripGate {
                    available_below: Some(4 * GIB),
                    swap_used_above: None
                },
                TripGate {
                    available_below: Some(16 * GIB / 10),
                    swap_used_above: None
                },
            ]
        );
        assert!(!w.tripped(5 * GIB, 0));
        assert!(w.tripped(4 * GIB - 1, 0));
        // Once the first holds, only the others are watched.
        c.sampled(reading(t0, 1000, 3 * GIB), Depth::Light);
        let w = c.tripwire();
        assert_eq!(w.gates.len(), 1);
        assert!(!w.tripped(3 * GIB, 0));
        assert!(w.tripped(GIB, 0));
        // A pressure level this OS does not read from memory: nothing.
        let mut c = Cadence::new(gates, no_floor);
        c.sampled(reading(t0, 0, 8 * GIB), Depth::Full);
        assert_eq!(c.tripwire().gates.len(), 1);
    }

    fn gate_delay(gate: &SystemCondition, readings: &[ProbeReading]) -> Option<Duration> {
        let a = approach(gate, readings.last().unwrap(), trend(readings), linux_floor);
        probe_delay(&[a], &[false])
    }

    #[test]
    fn an_approaching_condition_is_probed_faster() {
        let t0 = Instant::now();
        let gate = available_below(4 * GIB);
        let far = gate_delay(&gate, &[reading(t0, 0, 12 * GIB)]).unwrap();
        let nearer = gate_delay(&gate, &[reading(t0, 0, 6 * GIB)]).unwrap();
        let close = gate_delay(&gate, &[reading(t0, 0, 4 * GIB + 50 * MIB)]).unwrap();
        assert!(
            far > nearer && nearer > close,
            "{far:?} {nearer:?} {close:?}"
        );
        // 2 GiB at 6000 MiB/s.
        assert_eq!(nearer.as_millis(), 341);
        assert_eq!(close, MIN_PROBE);
    }

    #[test]
    fn the_probe_lands_just_past_a_crossing_predicted_before_the_next_probe() {
        let t0 = Instant::now();
        // Falling 1 GiB/s, 12 MiB above the threshold: crossed in ~11.7 ms,
        // sooner than the fastest regular probe.
        let readings: Vec<ProbeReading> = (0..5)
            .map(|i| reading(t0, i * 10, 4 * GIB + 12 * MIB + (4 - i) * (GIB / 100)))
            .collect();
        let t = trend(&readings);
        let fall = -t.available.unwrap();
        assert!((fall - GIB as f64).abs() < 0.01 * GIB as f64, "{fall}");
        let gate = available_below(4 * GIB);
        let a = approach(&gate, readings.last().unwrap(), t, linux_floor);
        let eta = a.eta.unwrap();
        assert!((11..=12).contains(&eta.as_millis()), "{eta:?}");
        let delay = probe_delay(&[a], &[false]).unwrap();
        assert!(delay < MIN_PROBE, "{delay:?}");
        assert!(
            delay > eta && delay <= eta + PAST_CROSSING,
            "{delay:?} {eta:?}"
        );
    }

    #[test]
    fn a_fast_trend_shortens_the_bound_beyond_the_assumed_worst_case() {
        let t0 = Instant::now();
        // Falling 8 GiB/s, faster than 6000 MiB/s: 1 GiB left is covered
        // in 125 ms, and the probe looks again halfway there.
        let readings: Vec<ProbeReading> = (0..5)
            .map(|i| reading(t0, i * 10, 5 * GIB + (4 - i) * 80 * (GIB / 1000) + 1))
            .collect();
        let gate = available_below(4 * GIB);
        let a = approach(
            &gate,
            readings.last().unwrap(),
            trend(&readings),
            linux_floor,
        );
        assert!((124..=126).contains(&a.eta.unwrap().as_millis()), "{a:?}");
        let delay = probe_delay(&[a], &[false]).unwrap();
        assert!((62..=63).contains(&delay.as_millis()), "{delay:?}");
    }

    #[test]
    fn a_slow_trend_leaves_the_safe_bound_in_charge() {
        let t0 = Instant::now();
        let readings: Vec<ProbeReading> = (0..5)
            .map(|i| reading(t0, i * 100, 6 * GIB - i * 10 * MIB))
            .collect();
        let gate = available_below(4 * GIB);
        let a = approach(
            &gate,
            readings.last().unwrap(),
            trend(&readings),
            linux_floor,
        );
        // 100 MiB/s: ~20 s away, but the probe keeps to the bound.
        assert!(a.eta.unwrap() > Duration::from_secs(19));
        assert_eq!(probe_delay(&[a], &[false]), a.bound);
    }

    #[test]
    fn a_condition_that_holds_calls_for_a_sample_now() {
        let t0 = Instant::now();
        let mut c = Cadence::new(vec![available_below(4 * GIB)], linux_floor);
        let normal = Duration::from_secs(1);
        c.sampled(reading(t0, 0, 4 * GIB + 100 * MIB), Depth::Full);
        assert_eq!(
            c.probed(reading(t0, 100, 4 * GIB + MIB), normal),
            AfterProbe::Wait
        );
        assert_eq!(
            c.probed(reading(t0, 120, 4 * GIB - MIB), normal),
            AfterProbe::Sample(Depth::Light, Cause::Crossing)
        );
        // Sampled while it holds: no second crossing, and no probing until
        // it clears.
        c.sampled(reading(t0, 125, 4 * GIB - 2 * MIB), Depth::Light);
        assert_eq!(
            c.probed(reading(t0, 145, 4 * GIB - 3 * MIB), normal),
            AfterProbe::Wait
        );
        assert_eq!(c.next_probe(), None);
    }

    #[test]
    fn a_crossing_long_after_the_last_full_read_reads_everything() {
        let t0 = Instant::now();
        let mut c = Cadence::new(vec![available_below(4 * GIB)], linux_floor);
        let normal = Duration::from_secs(1);
        c.sampled(reading(t0, 0, 5 * GIB), Depth::Full);
        let late = 1000 * u64::from(FULL_EVERY) + 1;
        assert_eq!(
            c.probed(reading(t0, late, 4 * GIB - 1), normal),
            AfterProbe::Sample(Depth::Full, Cause::Crossing)
        );
    }

    #[test]
    fn all_conditions_of_a_gate_must_hold() {
        let t0 = Instant::now();
        let gate = SystemCondition {
            available_below: Some(SizeLimit::Bytes(ByteSize(4 * GIB))),
            pressure: Some(PressureLevel::Warn),
            ..SystemCondition::default()
        };
        let r = reading(t0, 0, 3 * GIB);
        let a = approach(&gate, &r, Trend::default(), linux_floor);
        assert!(!a.holds, "available is low but pressure normal");
        // The pressure part holds once available falls below 10 % (1.6 GiB):
        // the later of the two is the gate's bound.
        let bound = a.bound.unwrap();
        let expected = (3 * GIB - 16 * GIB / 10 + 1) as f64 / MAX_FALL_RATE;
        assert!((bound.as_secs_f64() - expected).abs() < 1e-3, "{bound:?}");
        let warn = ProbeReading {
            pressure: PressureLevel::Warn,
            ..r
        };
        assert!(approach(&gate, &warn, Trend::default(), linux_floor).holds);
    }

    #[test]
    fn conditions_nothing_brings_about_are_not_probed_for() {
        let t0 = Instant::now();
        let swap = SystemCondition {
            swap_used_above: Some(SizeLimit::Percent(50.0)),
            ..SystemCondition::default()
        };
        // No swap at all.
        assert_eq!(gate_delay(&swap, &[reading(t0, 0, GIB)]), None);
        // A pressure level the OS does not derive from available memory.
        let pressure = SystemCondition {
            pressure: Some(PressureLevel::Warn),
            ..SystemCondition::default()
        };
        let a = approach(&pressure, &reading(t0, 0, GIB), Trend::default(), no_floor);
        assert_eq!(probe_delay(&[a], &[false]), None);
    }

    #[test]
    fn swap_filling_up_is_predicted_like_memory() {
        let t0 = Instant::now();
        let swap = SystemCondition {
            swap_used_above: Some(SizeLimit::Bytes(ByteSize(2 * GIB))),
            ..SystemCondition::default()
        };
        let readings: Vec<ProbeReading> = (0..4)
            .map(|i| ProbeReading {
                swap_total: 8 * GIB,
                swap_used: GIB + i * 100 * MIB,
                ..reading(t0, i * 100, 8 * GIB)
            })
            .collect();
        let a = approach(
            &swap,
            readings.last().unwrap(),
            trend(&readings),
            linux_floor,
        );
        // 724 MiB left at 1000 MiB/s.
        let eta = a.eta.unwrap().as_millis();
        assert!((720..=730).contains(&eta), "{eta}");
        assert!(!a.holds);
    }

    #[test]
    fn idle_ticks_are_light_with_a_full_read_every_few_intervals() {
        let t0 = Instant::now();
        let normal = Duration::from_secs(1);
        let mut c = Cadence::new(Vec::new(), linux_floor);
        assert_eq!(c.depth(Cause::Tick, t0, normal), Depth::Full, "first tick");
        let mut full = Vec::new();
        for i in 0..=2 * u64::from(FULL_EVERY) {
            let now = t0 + normal * i as u32;
            let d = c.depth(Cause::Tick, now, normal);
            c.sampled(reading(t0, i * 1000, 8 * GIB), d);
            if d == Depth::Full {
                full.push(i);
            }
        }
        let every = u64::from(FULL_EVERY);
        assert_eq!(full, [0, every, 2 * every]);
        assert_eq!(c.next_probe(), None, "no gates: no probes between ticks");
    }

    #[test]
    fn memory_moving_calls_for_a_full_read() {
        let t0 = Instant::now();
        let normal = Duration::from_secs(1);
        let mut c = Cadence::new(Vec::new(), linux_floor);
        c.sampled(reading(t0, 0, 8 * GIB), Depth::Full);
        c.sampled(reading(t0, 1000, 8 * GIB - 100 * MIB), Depth::Light);
        assert!(!c.full_due());
        assert_eq!(c.depth(Cause::Tick, t0 + normal, normal), Depth::Light);
        c.sampled(reading(t0, 2000, 8 * GIB - 300 * MIB), Depth::Light);
        assert!(c.full_due(), "moved by more than 256 MiB");
        assert_eq!(c.depth(Cause::Tick, t0 + 2 * normal, normal), Depth::Full);
        // The probe sees it too, between ticks.
        let mut c = Cadence::new(vec![available_below(GIB)], linux_floor);
        c.sampled(reading(t0, 0, 8 * GIB), Depth::Full);
        assert_eq!(
            c.probed(reading(t0, 300, 7 * GIB), normal),
            AfterProbe::Sample(Depth::Full, Cause::Tick)
        );
    }

    #[test]
    fn the_move_that_counts_is_the_smaller_of_256_mib_and_one_percent() {
        assert!(!moved(8 * GIB, 8 * GIB - 256 * MIB, 64 * GIB));
        assert!(moved(8 * GIB, 8 * GIB - 257 * MIB, 64 * GIB));
        // 1 % of 4 GiB is 41 MiB.
        assert!(moved(2 * GIB, 2 * GIB + 42 * MIB, 4 * GIB));
        assert!(!moved(2 * GIB, 2 * GIB + 40 * MIB, 4 * GIB));
    }

    #[test]
    fn a_gate_predicted_within_reach_makes_ticks_full() {
        let t0 = Instant::now();
        let normal = Duration::from_secs(1);
        let mut c = Cadence::new(vec![available_below(4 * GIB)], linux_floor);
        c.sampled(reading(t0, 0, 5 * GIB), Depth::Full);
        for i in 1..4 {
            c.sampled(reading(t0, i * 300, 5 * GIB - i * 30 * MIB), Depth::Light);
        }
        // 100 MiB/s with ~934 MiB left: about 9 s away.
        assert!(near(&c.approaches()));
        assert_eq!(c.depth(Cause::Tick, t0 + normal, normal), Depth::Full);
    }

    #[test]
    fn the_tick_keeps_its_cadence_and_meets_a_predicted_limit() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let now = t0 + Duration::from_millis(30);
        assert_eq!(next_tick(t0, now, second, None), t0 + second);
        assert_eq!(
            next_tick(t0, now, second, Some(Duration::from_millis(200))),
            now + Duration::from_millis(200)
        );
        assert_eq!(
            next_tick(t0, now, second, Some(Duration::ZERO)),
            now + MIN_PREDICTED_TICK
        );
        // After a stall longer than the interval: now, not in the past.
        let late = t0 + Duration::from_secs(3);
        assert_eq!(next_tick(t0, late, second, None), late);
    }

    #[test]
    fn fast_under_pressure_after_an_event_or_with_a_limit_within_reach() {
        let now = Instant::now();
        assert!(!is_fast(Some(PressureLevel::Normal), None, false, now));
        assert!(is_fast(Some(PressureLevel::Warn), None, false, now));
        assert!(is_fast(
            None,
            Some(now + Duration::from_secs(1)),
            false,
            now
        ));
        assert!(!is_fast(None, Some(now), false, now));
        assert!(is_fast(None, None, true, now));
    }

    #[test]
    fn a_reload_with_new_gates_forgets_which_held() {
        let t0 = Instant::now();
        let mut c = Cadence::new(vec![available_below(4 * GIB)], linux_floor);
        c.sampled(reading(t0, 0, 3 * GIB), Depth::Full);
        assert_eq!(
            c.probed(reading(t0, 20, 3 * GIB), Duration::from_secs(1)),
            AfterProbe::Wait
        );
        c.set_gates(vec![available_below(4 * GIB), available_below(2 * GIB)]);
        assert_eq!(
            c.probed(reading(t0, 40, 3 * GIB), Duration::from_secs(1)),
            AfterProbe::Sample(Depth::Light, Cause::Crossing)
        );
    }

    /// `HOST_STATISTICS_TIME_WINDOW` (`osfmk/kern/host.c`): how long
    /// macOS's `host_statistics64` may answer with a cached copy.
    const HOST_WINDOW: Duration = Duration::from_secs(1);

    /// `host_statistics64` as `rate_limit_host_statistics`
    /// (`osfmk/kern/host.c`, xnu-8792 to xnu-11417) answers a third-party
    /// caller: a window opens at the first call past the last one's end;
    /// its first `max_requests` calls (2 to 10, drawn per window) read
    /// afresh, the rest get the last fresh copy.
    struct RateLimited {
        allowances: &'static [u32],
        windows: usize,
        opened: Option<Instant>,
        calls: u32,
        cached: u64,
    }

    impl RateLimited {
        fn new(allowances: &'static [u32]) -> Self {
            Self {
                allowances,
                windows: 0,
                opened: None,
                calls: 0,
                cached: 0,
            }
        }

        fn answer(&mut self, now: Instant, truth: u64) -> u64 {
            if self
                .opened
                .is_none_or(|o| now.duration_since(o) >= HOST_WINDOW)
            {
                self.opened = Some(now);
                self.calls = 0;
                self.windows += 1;
            }
            self.calls += 1;
            let allowance = self.allowances[(self.windows - 1) % self.allowances.len()];
            if self.calls <= allowance {
                self.cached = truth;
            }
            self.cached
        }
    }

    /// A probe reading from that source.
    fn limited(at: Instant, available: u64) -> ProbeReading {
        ProbeReading {
            at,
            available,
            cached_for: HOST_WINDOW,
            ..reading(at, 0, 0)
        }
    }

    /// Memory falling at `rate` bytes/s from 10 GiB, read every `every`
    /// through the rate-limited source for `seconds`, into a cadence that
    /// watches `available_below = 4 GiB`. At each reading from `check_from`
    /// on, the slope and the predicted crossing (the reading's time plus
    /// the gate's eta) are handed to `check` with the true ones.
    fn staircase(
        every: Duration,
        seconds: u64,
        check_from: Duration,
        mut check: impl FnMut(f64, Option<Instant>, Instant),
    ) -> usize {
        let t0 = Instant::now();
        let rate = 512.0 * MIB as f64;
        let truth = |t: Duration| 10 * GIB - (rate * t.as_secs_f64()) as u64;
        // Crossed once available < 4 GiB: 6 GiB at 512 MiB/s is 12 s.
        let crossing = t0 + Duration::from_secs(12);
        let mut source = RateLimited::new(&[3, 2, 10, 5, 2]);
        let mut c = Cadence::new(vec![available_below(4 * GIB)], linux_floor);
        let mut checked = 0;
        let mut t = Duration::ZERO;
        while t <= Duration::from_secs(seconds) {
            let at = t0 + t;
            let r = limited(at, source.answer(at, truth(t)));
            c.probed(r, Duration::from_secs(1));
            if t >= check_from {
                let readings: Vec<ProbeReading> = c.readings.iter().copied().collect();
                let slope = trend(&readings).available.unwrap_or(0.0);
                let predicted = c.approaches()[0].eta.map(|eta| at + eta);
                check(slope, predicted, crossing);
                checked += 1;
            }
            t += every;
        }
        checked
    }

    #[test]
    fn a_staircase_from_a_rate_limited_source_keeps_its_real_trend() {
        let rate = 512.0 * MIB as f64;
        for every in [MIN_PROBE, Duration::from_millis(250)] {
            let checked = staircase(
                every,
                8,
                Duration::from_secs(2),
                |slope, predicted, crossing| {
                    assert!(
                        (slope + rate).abs() < 0.01 * rate,
                        "every {every:?}: slope {slope} against {}",
                        -rate
                    );
                    let predicted = predicted.expect("a crossing is predicted");
                    let off = if predicted > crossing {
                        predicted - crossing
                    } else {
                        crossing - predicted
                    };
                    assert!(
                        off < Duration::from_millis(20),
                        "every {every:?}: predicted {off:?} off the real crossing"
                    );
                },
            );
            assert!(checked > 20, "{checked}");
        }
    }

    #[test]
    fn a_real_plateau_ends_the_old_fall_once_it_outlasts_the_window() {
        // Falling 512 MiB/s for 3 s, then flat at 8.5 GiB (memory really
        // stopped falling), read every 20 ms through the rate-limited
        // source. Once the flat figure has outlasted the source's window
        // and the fall has left the trend's window, no crossing is
        // predicted, and none comes back.
        let t0 = Instant::now();
        let rate = 512.0 * MIB as f64;
        let truth = |t: Duration| {
            let t = t.min(Duration::from_secs(3));
            10 * GIB - (rate * t.as_secs_f64()) as u64
        };
        let mut source = RateLimited::new(&[3, 2, 10, 5, 2]);
        let mut c = Cadence::new(vec![available_below(4 * GIB)], linux_floor);
        let plateau_seen = Duration::from_secs(4);
        let settled = plateau_seen + HOST_WINDOW + TREND_WINDOW;
        let mut t = Duration::ZERO;
        let mut predicted_during_fall = false;
        while t <= Duration::from_secs(12) {
            let at = t0 + t;
            c.probed(
                limited(at, source.answer(at, truth(t))),
                Duration::from_secs(1),
            );
            let eta = c.approaches()[0].eta;
            if t > Duration::from_secs(1) && t < Duration::from_secs(3) {
                predicted_during_fall |= eta.is_some();
            }
            if t >= settled {
                assert_eq!(eta, None, "at {t:?} an old fall is still extrapolated");
                let readings: Vec<ProbeReading> = c.readings.iter().copied().collect();
                assert_eq!(
                    trend(&readings).available,
                    Some(0.0),
                    "at {t:?}: {:?}",
                    readings
                        .iter()
                        .map(|r| (r.at - t0, r.available))
                        .collect::<Vec<_>>()
                );
            }
            t += MIN_PROBE;
        }
        assert!(predicted_during_fall, "the fall itself was seen");
    }

    #[test]
    fn readings_from_a_fresh_source_all_count_as_before() {
        // cached_for zero (Linux's meminfo): a repeated figure is memory
        // that did not move, counted every time it is read, so a short
        // plateau after a fall flattens the trend at once.
        let t0 = Instant::now();
        let mut readings: Vec<ProbeReading> = (0..4)
            .map(|i| reading(t0, i * 20, 8 * GIB - i * 10 * MIB))
            .collect();
        readings.extend((4..12).map(|i| reading(t0, i * 20, 8 * GIB - 30 * MIB)));
        let t = trend(&readings);
        assert_eq!(t.available, Some(0.0));
        assert_eq!(t.available_age, Duration::ZERO);
        let mut c = Cadence::new(vec![available_below(4 * GIB)], linux_floor);
        for r in &readings {
            c.probed(*r, Duration::from_secs(1));
        }
        assert_eq!(c.readings.len(), readings.len(), "nothing compacted");
    }

    #[test]
    fn a_repeated_figure_counts_once_and_its_crossing_runs_from_when_it_was_seen() {
        let t0 = Instant::now();
        // Three fresh figures 20 ms apart, falling 1 GiB/s, then the last
        // repeated for 200 ms by the cache.
        let mut readings: Vec<ProbeReading> = (0..3)
            .map(|i| limited(t0 + Duration::from_millis(i * 20), 5 * GIB - i * (GIB / 50)))
            .collect();
        let last = readings[2].available;
        readings.extend((1..=10).map(|i| limited(t0 + Duration::from_millis(40 + i * 20), last)));
        let t = trend(&readings);
        let fall = -t.available.unwrap();
        assert!((fall - GIB as f64).abs() < 0.001 * GIB as f64, "{fall}");
        assert_eq!(t.available_age, Duration::from_millis(200));
        // 1 GiB − 40 MiB above 4 GiB at 1 GiB/s from 40 ms: the crossing
        // falls at about 1.0 s, 760 ms after the latest reading (240 ms).
        let a = approach(
            &available_below(4 * GIB),
            readings.last().unwrap(),
            t,
            linux_floor,
        );
        let eta = a.eta.unwrap().as_millis();
        assert!((755..=765).contains(&eta), "{eta}");
    }
}
