//! Limit arithmetic: does a rule's limit hold for a process right now, has it
//! cleared (fallen back by the hysteresis margin), and is it within reach
//! (worth sampling faster for). Pure functions over the snapshot and history.

use std::time::Duration;

use super::exhaustion::{self, Blame, Due, Outlook};
use crate::config::{Limits, Per, Rate, Rule, SizeLimit, SystemCondition};
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
    /// Why a signal or hook waits though the rule holds: every limit that
    /// holds is a prediction (`time_to_exhaustion`) that is not due yet
    /// ([`exhaustion::Outlook::due`]). `None` where the rule acts at once.
    pub signal_waits: Option<String>,
    /// When a waiting signal would be due at the recent pace, from now.
    pub due_in: Option<Duration>,
    /// Every limit that holds is a prediction (`time_to_exhaustion`): a
    /// later step goes only while exhaustion is still due after the one
    /// before it ([`exhaustion::due_after_step`]).
    pub by_prediction: bool,
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
/// job (its figures the job's totals), with the memory it can run out of.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scale<'a> {
    /// The job the process is the root of and stands for.
    pub job: Option<&'a Job>,
    /// The memory it can run out of and how fast that is being taken
    /// (from the history); `None`: the room from the snapshot alone, its
    /// fall not known.
    pub outlook: Option<Outlook<'a>>,
    /// How long before predicted exhaustion a signal goes out
    /// ([`Rule::lead_or`]).
    pub lead: Duration,
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
    let s = LimitSubject {
        rule,
        p,
        track,
        snap,
        now,
        scale,
        prefix: scale.prefix(),
    };
    let l: &Limits = &rule.limits;
    LimitCheck::gather(
        [
            l.footprint.map(|limit| check_footprint(&s, limit)),
            l.gpu_memory.map(|limit| check_gpu_memory(&s, limit)),
            l.growth.map(|rate| check_growth(&s, rate)),
            l.time_to_exhaustion
                .map(|limit| check_time_to_exhaustion(&s, limit)),
        ]
        .into_iter()
        .flatten(),
    )
}

/// What each limit of a rule is read against: one process, standing for
/// `scale`, in the latest snapshot.
struct LimitSubject<'a> {
    rule: &'a Rule,
    p: &'a ProcessSample,
    track: Option<&'a ProcessTrack>,
    snap: &'a Snapshot,
    now: Timestamp,
    scale: Scale<'a>,
    /// [`Scale::prefix`], put before each figure.
    prefix: String,
}

/// One limit of a rule read against one process: its share of a
/// [`LimitCheck`].
struct LimitFinding {
    /// The limit in words (`footprint > 8.0 GiB`).
    limit: String,
    /// Why the limit holds, in words, where it does.
    exceeded: Option<String>,
    /// The limit on its own, for `explain`.
    reading: Reading,
    /// The value is not below the limit's clearing margin, so the rule has
    /// not cleared.
    past_clearing_margin: bool,
    /// The limit is within reach.
    within_reach: bool,
    /// When the limit is predicted to be crossed, from now.
    predicted_crossing: Option<Duration>,
    /// The limit holds, but a signal for it waits: why.
    signal_waits: Option<String>,
    /// When that signal would be due, from now.
    due_in: Option<Duration>,
    /// The limit is a prediction of exhaustion (`time_to_exhaustion`).
    predicted_exhaustion: bool,
}

impl LimitFinding {
    /// A limit that cannot hold now: its figure is not known, or is not
    /// moving toward it. It neither holds, nor keeps the rule from
    /// clearing, nor is within reach.
    fn cannot_hold(limit: String, what: &'static str, value: String, threshold: String) -> Self {
        LimitFinding {
            limit,
            exceeded: None,
            reading: Reading {
                what,
                value,
                threshold,
                holds: false,
            },
            past_clearing_margin: false,
            within_reach: false,
            predicted_crossing: None,
            signal_waits: None,
            due_in: None,
            predicted_exhaustion: false,
        }
    }
}

impl LimitCheck {
    /// The findings of a rule's limits, in the rule's order, as one check:
    /// exceeded if any holds, cleared if none is past its clearing margin,
    /// within reach if any is.
    fn gather(findings: impl IntoIterator<Item = LimitFinding>) -> Self {
        let mut exceeded = Vec::new();
        let mut limit_words = Vec::new();
        let mut readings = Vec::new();
        let mut cleared = true;
        let mut within_reach = false;
        let mut predicted_crossing = None;
        let mut waits: Vec<String> = Vec::new();
        let mut acts_now = false;
        let mut predicted = false;
        let mut due_in: Option<Duration> = None;
        for f in findings {
            limit_words.push(f.limit);
            if f.exceeded.is_some() {
                match (f.signal_waits, f.predicted_exhaustion) {
                    (Some(why), _) => {
                        waits.push(why);
                        predicted = true;
                    }
                    (None, true) => predicted = true,
                    (None, false) => acts_now = true,
                }
            }
            if let Some(d) = f.due_in {
                due_in = Some(due_in.map_or(d, |e| e.min(d)));
            }
            exceeded.extend(f.exceeded);
            readings.push(f.reading);
            cleared &= !f.past_clearing_margin;
            within_reach |= f.within_reach;
            if let Some(d) = f.predicted_crossing {
                predicted_crossing = Some(predicted_crossing.map_or(d, |e: Duration| e.min(d)));
            }
        }
        LimitCheck {
            exceeded: (!exceeded.is_empty()).then(|| exceeded.join("; ")),
            limit: limit_words.join(" or "),
            cleared,
            within_reach,
            predicted_crossing,
            signal_waits: (!acts_now && !waits.is_empty()).then(|| waits.join("; ")),
            by_prediction: !acts_now && predicted,
            due_in,
            readings,
        }
    }
}

/// A size limit (footprint, GPU memory): `used` against `bytes`, which is
/// `threshold` (as configured and resolved) in words.
fn check_size(
    s: &LimitSubject<'_>,
    what: &'static str,
    used: u64,
    bytes: u64,
    threshold: String,
) -> LimitFinding {
    let prefix = &s.prefix;
    let over = used > bytes;
    LimitFinding {
        limit: format!("{what} > {}", format_bytes(bytes)),
        exceeded: over.then(|| {
            format!(
                "{prefix}{what} {} > {}",
                format_bytes_against(used, bytes),
                format_bytes(bytes)
            )
        }),
        reading: Reading {
            what,
            value: format!("{prefix}{}", format_bytes_against(used, bytes)),
            threshold: format!("> {threshold}"),
            holds: over,
        },
        past_clearing_margin: used as f64 >= bytes as f64 * (1.0 - s.rule.hysteresis),
        within_reach: used as f64 >= bytes as f64 * REACH_SHARE,
        predicted_crossing: None,
        signal_waits: None,
        due_in: None,
        predicted_exhaustion: false,
    }
}

/// `footprint`: of the machine's memory, or ("of limit") of the process's
/// memory cgroup's limit where it has one; within reach also when its
/// short-term trend crosses it within [`REACH_TIME`].
fn check_footprint(s: &LimitSubject<'_>, limit: SizeLimit) -> LimitFinding {
    let p = s.p;
    let ceiling = s.snap.ceiling_of(p).filter(|_| limit.of_limit());
    let (total, of) = match ceiling {
        Some(c) => (c.limit(), ceiling_words(c)),
        None if limit.of_limit() => (
            s.snap.system.total,
            "memory (no memory-cgroup limit above it)".to_string(),
        ),
        None => (s.snap.system.total, "memory".to_string()),
    };
    let bytes = limit.resolve(total);
    let mut finding = check_size(
        s,
        "footprint",
        p.footprint,
        bytes,
        size_threshold(limit, total, &of),
    );
    if p.footprint <= bytes
        && let Some(g) = s
            .track
            .and_then(|t| t.trend(s.now, PREDICTION_WINDOW, p.started_at))
        && g > 0.0
    {
        let until = Duration::try_from_secs_f64((bytes - p.footprint) as f64 / g).ok();
        if until.is_some_and(|u| u <= REACH_TIME) {
            finding.within_reach = true;
        }
        finding.predicted_crossing = until;
    }
    finding
}

/// `gpu_memory`: of the largest GPU's memory; it cannot hold where the
/// sample has no GPU memory figure or the process holds none.
fn check_gpu_memory(s: &LimitSubject<'_>, limit: SizeLimit) -> LimitFinding {
    match (gpu_total(s.snap), s.p.gpu_memory) {
        (Some(total), Some(used)) => check_size(
            s,
            "GPU memory",
            used,
            limit.resolve(total),
            size_threshold(limit, total, "GPU memory"),
        ),
        (total, _) => LimitFinding::cannot_hold(
            format!("GPU memory > {limit}"),
            "GPU memory",
            if total.is_none() {
                "not known: no GPU memory figure in the sample".to_string()
            } else {
                "none held (or not reported for this process)".to_string()
            },
            format!("> {limit}"),
        ),
    }
}

/// `growth`: the footprint's growth over the rate's own span; within reach
/// at half the rate.
fn check_growth(s: &LimitSubject<'_>, rate: Rate) -> LimitFinding {
    let prefix = &s.prefix;
    let limit = rate.bytes_per_second();
    let words = format!("growth > {}/s", format_bytes(limit as u64));
    let threshold = format!("> {}/s ({rate})", format_bytes(limit as u64));
    let Some(g) = s
        .track
        .and_then(|t| t.growth(s.now, rate.per, MIN_GROWTH_POINTS))
    else {
        return LimitFinding::cannot_hold(words, "growth", no_growth(rate.per), threshold);
    };
    let over = g > limit;
    LimitFinding {
        limit: words,
        exceeded: over.then(|| {
            format!(
                "{prefix}growing {}/s > {}/s over {}",
                format_bytes_against(g as u64, limit as u64),
                format_bytes(limit as u64),
                humantime::format_duration(rate.per)
            )
        }),
        reading: Reading {
            what: "growth",
            value: format!(
                "{prefix}{} {}/s over {}",
                if g < 0.0 { "shrinking" } else { "growing" },
                format_bytes(g.abs() as u64),
                humantime::format_duration(rate.per)
            ),
            threshold,
            holds: over,
        },
        past_clearing_margin: g >= limit * (1.0 - s.rule.hysteresis),
        within_reach: g >= limit * 0.5,
        predicted_crossing: None,
        signal_waits: None,
        due_in: None,
        predicted_exhaustion: false,
    }
}

/// `time_to_exhaustion`: the memory left to the process (under its memory
/// cgroup's limit where that is tighter than the machine) over the pace at
/// which that memory falls across the rule's window, for a process whose own
/// growth takes the blame for it ([`exhaustion::blame`]); within reach at
/// twice the limit. It holds within the limit, and a signal for it waits
/// until it is due ([`exhaustion::Outlook::due`]); a leak fast enough to be
/// due before the window has its points holds at once.
fn check_time_to_exhaustion(s: &LimitSubject<'_>, limit: Duration) -> LimitFinding {
    let prefix = &s.prefix;
    let window = s.rule.window;
    let words = format!(
        "memory exhausted within {}",
        humantime::format_duration(limit)
    );
    let threshold = format!("<= {}", humantime::format_duration(limit));
    let what = "time to exhaustion";
    let outlook = s.scale.outlook.unwrap_or_else(|| {
        let (room, ceiling) = exhaustion_headroom_for(s.snap, s.p);
        Outlook {
            room,
            ceiling,
            capacity: ceiling.map_or(
                s.snap.system.total.saturating_add(s.snap.swap.total),
                Ceiling::limit,
            ),
            falls: None,
            recently: None,
        }
    });
    let recent = exhaustion::own_recent(s.track, s.p, s.now);
    let due = outlook.due(limit, s.scale.lead, recent);
    let left_under = match outlook.ceiling {
        Some(c) => format!("left under the {}", ceiling_words(c)),
        None => "available plus free swap".to_string(),
    };
    let headroom = outlook.room;
    let Some(own) = s
        .track
        .and_then(|t| t.growth(s.now, window, MIN_GROWTH_POINTS))
    else {
        // Too little history for the window: only a leak that is due
        // already (fast, near its end, and this process's doing) holds.
        if let (Due::Now(why), Some(g)) = (&due, recent)
            && matches!(exhaustion::blame(g, outlook.recently), Blame::Takes { .. })
        {
            let value = format!("{prefix}growing {}/s: {why}", format_bytes(g as u64));
            return LimitFinding {
                limit: words,
                exceeded: Some(value.clone()),
                reading: Reading {
                    what,
                    value,
                    threshold,
                    holds: true,
                },
                past_clearing_margin: true,
                within_reach: true,
                predicted_crossing: None,
                signal_waits: None,
                due_in: None,
                predicted_exhaustion: true,
            };
        }
        let mut finding = LimitFinding::cannot_hold(words, what, no_growth(window), threshold);
        // Sample again when it would be due at the recent pace.
        if let Due::Waits {
            in_time: Some(d), ..
        } = due
            && d <= REACH_TIME
        {
            finding.within_reach = true;
            finding.predicted_crossing = Some(d);
        }
        return finding;
    };
    let whose = match outlook.ceiling {
        Some(_) => "the cgroup's room",
        None => "the machine's room",
    };
    let pace = match exhaustion::blame(own, outlook.falls) {
        Blame::Takes { pace } => pace,
        Blame::NotGrowing { pace } => {
            let value = format!(
                "never: not growing ({}{}/s over {})",
                if pace < 0.0 { "-" } else { "" },
                format_bytes(pace.abs() as u64),
                humantime::format_duration(window)
            );
            return LimitFinding::cannot_hold(words, what, value, threshold);
        }
        Blame::Bystander { own, fall } => {
            let value = format!(
                "not this process's doing: {whose} falls {}/s over {}, and {prefix}growing \
                 {}/s, under {}% of that",
                format_bytes(fall as u64),
                humantime::format_duration(window),
                format_bytes(own as u64),
                (exhaustion::BLAME_SHARE * 100.0).round()
            );
            return LimitFinding::cannot_hold(words, what, value, threshold);
        }
    };
    let Some(tte) = time_to_exhaustion(headroom, pace) else {
        return LimitFinding::cannot_hold(words, what, "never".to_string(), threshold);
    };
    let pace_words = if (pace - own).abs() > own * 0.05 {
        format!(" ({whose} falls {}/s)", format_bytes(pace.max(0.0) as u64))
    } else {
        String::new()
    };
    let due_now = matches!(due, Due::Now(_));
    let within = tte <= limit || due_now;
    let (signal_waits, due_in, due_words) = match (&due, within) {
        (Due::Now(why), _) => (None, None, format!("; due now: {why}")),
        (Due::Waits { why, in_time }, true) => (Some(why.clone()), *in_time, String::new()),
        (Due::Waits { .. }, false) => (None, None, String::new()),
    };
    LimitFinding {
        limit: words,
        exceeded: within.then(|| {
            format!(
                "{prefix}growing {}/s{pace_words}, {} {left_under}: exhausted in {:.1}s (limit \
                 {}){due_words}",
                format_bytes(own as u64),
                format_bytes(headroom),
                tte.as_secs_f64(),
                humantime::format_duration(limit)
            )
        }),
        reading: Reading {
            what,
            value: format!(
                "{:.1}s ({prefix}growing {}/s{pace_words} over {}, {} {left_under})",
                tte.as_secs_f64(),
                format_bytes(own as u64),
                humantime::format_duration(window),
                format_bytes(headroom)
            ),
            threshold,
            holds: within,
        },
        past_clearing_margin: due_now
            || tte.as_secs_f64() <= limit.as_secs_f64() * (1.0 + s.rule.hysteresis),
        within_reach: tte <= limit * 2,
        predicted_crossing: None,
        signal_waits,
        due_in,
        predicted_exhaustion: true,
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
/// no process owns holds, or may hold, the whole shortfall, so ending a
/// process might bring none of it back. It may when the shared memory
/// nothing accounts for this tick
/// ([`crate::model::Unowned::unexplained_shmem`]: a file made since the
/// scan, deeper than it walks or past its count, a descriptor it did not
/// see) added to what it found covers the shortfall: an unknown never picks
/// a victim. A scan cut short alone does not stop the rule (a process with
/// thousands of descriptors is ordinary): whatever it missed is shared
/// memory, and `Shmem` counts it. `None` while the condition
/// does not hold, the platform has no such figures, or processes hold part
/// of the shortfall.
///
/// Nor does it stop the rule when the process it would pick holds more
/// (`would_free`, its footprint) than all of that together: had that memory
/// been a process's, `select` would still pick this one, so hiding it gains
/// nobody anything, and a just-crossed shortfall of a few pages is not left
/// to a megabyte of shared memory the counts do not match on (the kernel's
/// own, a RssShmem counted twice).
pub fn unowned_shortfall(
    when: &SystemCondition,
    snap: &Snapshot,
    would_free: Option<u64>,
) -> Option<String> {
    if when.per != Per::Machine {
        return None;
    }
    let limit = when.available_below?;
    let bytes = limit.resolve(snap.system.total);
    let short = bytes
        .checked_sub(snap.system.available)
        .filter(|s| *s > 0)?;
    let u = &snap.unowned;
    if !u.known || would_free.is_some_and(|w| w > u.at_most()) {
        return None;
    }
    let short_words = format!(
        "available memory is short of {} by {}",
        format_bytes(bytes),
        format_bytes(short)
    );
    let unowned = u.bytes();
    if unowned >= short {
        return Some(format!(
            "{short_words}, and memory no process owns holds {}; signalling a process frees \
             none of it, so the rule picks none: remove the files (rm) or segments \
             (ipcrm -m ID) that are no longer needed",
            unowned_words(snap)
        ));
    }
    let unexplained = u.unexplained_shmem.unwrap_or(0);
    if u.at_most() >= short {
        let found = if unowned > 0 {
            format!("memory no process owns holds {}, and ", unowned_words(snap))
        } else {
            String::new()
        };
        let cut = u
            .cut_short
            .as_deref()
            .map(|why| format!(" (the last scan stopped short: {})", printable(why)))
            .unwrap_or_default();
        return Some(format!(
            "{short_words}; {found}{} of shared memory (Shmem) is neither mapped by a \
             process nor found by the last scan{cut} (a tmpfs file made since, deeper than \
             it walks, a descriptor it did not see): it may hold the shortfall, so the rule \
             picks none until a scan says whose it is",
            format_bytes(unexplained)
        ));
    }
    None
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

    /// The decision of `unowned_shortfall` for a rule `available_below =
    /// "8GiB"` on a 16 GiB machine with `available` left, unowned memory
    /// found and unexplained as given, and a would-be victim of `victim`.
    fn held_back(available: u64, found: u64, unexplained: u64, victim: u64) -> bool {
        let text = "[[rule]]\nname = \"r\"\nactions = [{ signal = \"SIGTERM\" }]\n\
                    [rule.when]\navailable_below = \"8GiB\"\n";
        let rule = Config::from_toml_str(text, "t").unwrap().rules[0].clone();
        let snap = snapshot(0)
            .memory(16 * GIB, available)
            .unowned(crate::model::Unowned {
                known: true,
                tmpfs_bytes: found,
                unexplained_shmem: Some(unexplained),
                ..Default::default()
            })
            .build();
        unowned_shortfall(rule.when.as_ref().unwrap(), &snap, Some(victim)).is_some()
    }

    #[test]
    fn memory_no_process_owns_holds_a_rule_back_only_when_it_outweighs_the_victim() {
        const MIB: u64 = 1 << 20;
        let just_crossed = 8 * GIB - 152 * 1024;
        // A 3 GiB blob in /dev/shm and a 300 MiB victim: the blob holds the
        // shortfall, and more than the victim could give back.
        assert!(held_back(7 * GIB, 3 * GIB, 0, 300 * MIB));
        // The same hidden from the scan: only Shmem says it is there.
        assert!(held_back(7 * GIB, 0, 3 * GIB, 300 * MIB));
        // Just crossed, with 1.5 MiB of shared memory the counts do not
        // match on, and a 3 GiB process that made the crossing: it goes.
        assert!(!held_back(just_crossed, 0, 3 * MIB / 2, 3 * GIB));
        assert!(!held_back(just_crossed, 2 * MIB, 0, 3 * GIB));
        // Both together still short of the victim: it goes.
        assert!(!held_back(7 * GIB, GIB, GIB, 3 * GIB));
        // Enough together to outweigh it: none.
        assert!(held_back(7 * GIB, 2 * GIB, 2 * GIB, 3 * GIB));
        // Not holding at all: nothing to say.
        assert!(!held_back(9 * GIB, 3 * GIB, 3 * GIB, 0));
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

    const MIB: u64 = 1 << 20;

    /// A footprint series, one point a second for ten seconds, from `start`
    /// by `step` a second.
    fn series(start: u64, step: i64) -> ProcessTrack {
        ProcessTrack {
            points: (0..=10)
                .map(|s| crate::history::ProcessPoint {
                    at: Timestamp(s * 1000),
                    footprint: start.saturating_add_signed(step * s as i64),
                    gpu_memory: None,
                    detail: crate::model::Detail::Exact,
                })
                .collect(),
            ..ProcessTrack::default()
        }
    }

    fn gpu(index: u32, total: u64) -> crate::model::GpuDevice {
        crate::model::GpuDevice {
            index,
            name: format!("GPU{index}"),
            uuid: None,
            memory_total: Some(total),
            memory_used: None,
            utilization: None,
            memory_reserved: None,
            processes: Vec::new(),
            cuda_version: None,
        }
    }

    #[test]
    fn gpu_memory_is_of_the_largest_gpu_and_cannot_hold_without_figures() {
        let r = rule("gpu_memory = \"50%\"");
        let gpus = [gpu(0, 40 * GIB), gpu(1, 80 * GIB)];
        let holder = process(5).name("python3").gpu_memory(45 * GIB).build();
        let snap = half_free().gpus(gpus.clone()).build();
        let c = check(&r, &holder, None, &snap, Timestamp(0), Scale::default());
        assert_eq!(c.limit, "GPU memory > 40.0 GiB");
        assert_eq!(
            c.exceeded.as_deref(),
            Some("GPU memory 45.0 GiB > 40.0 GiB")
        );
        assert_eq!(
            c.readings[0].threshold,
            "> 50% of 80.0 GiB GPU memory = 40.0 GiB"
        );
        assert!(c.readings[0].holds && !c.cleared && c.within_reach);

        let no_figure = check(
            &r,
            &holder,
            None,
            &half_free().build(),
            Timestamp(0),
            Scale::default(),
        );
        let none_held = check(
            &r,
            &process(5).name("python3").build(),
            None,
            &snap,
            Timestamp(0),
            Scale::default(),
        );
        for (c, value) in [
            (no_figure, "not known: no GPU memory figure in the sample"),
            (none_held, "none held (or not reported for this process)"),
        ] {
            assert_eq!(c.limit, "GPU memory > 50%");
            assert_eq!(c.readings[0].value, value);
            assert_eq!(c.readings[0].threshold, "> 50%");
            assert!(!c.readings[0].holds && c.exceeded.is_none());
            assert!(c.cleared && !c.within_reach);
        }
    }

    #[test]
    fn growth_just_under_its_rate_is_within_reach_and_not_cleared() {
        let c = check(
            &rule("growth = \"1GiB/10s\""),
            &process(5).name("python3").footprint(2 * GIB).build(),
            Some(&series(GIB, 100 * MIB as i64)),
            &half_free().build(),
            Timestamp(10_000),
            Scale::default(),
        );
        assert_eq!(c.readings[0].value, "growing 100 MiB/s over 10s");
        assert_eq!(c.readings[0].threshold, "> 102 MiB/s (1GiB/10s)");
        assert_eq!(c.exceeded, None);
        assert!(!c.cleared && c.within_reach);
    }

    #[test]
    fn a_shrinking_process_never_exhausts_memory() {
        let c = check(
            &rule("time_to_exhaustion = \"30s\""),
            &process(5).name("python3").footprint(GIB).build(),
            Some(&series(2 * GIB, -(100 * MIB as i64))),
            &half_free().build(),
            Timestamp(10_000),
            Scale::default(),
        );
        assert_eq!(c.limit, "memory exhausted within 30s");
        assert_eq!(
            c.readings[0].value,
            "never: not growing (-100 MiB/s over 10s)"
        );
        assert!(!c.readings[0].holds && c.exceeded.is_none());
        assert!(c.cleared && !c.within_reach);
    }

    /// An outlook on a 16 GiB machine with 8 GiB left whose room falls at
    /// `falls` MiB/s over the window and `recently` MiB/s of late.
    fn machine_outlook(falls: u64, recently: u64) -> Outlook<'static> {
        Outlook {
            room: 8 * GIB,
            ceiling: None,
            capacity: 16 * GIB,
            falls: Some((falls * MIB) as f64),
            recently: Some((recently * MIB) as f64),
        }
    }

    fn read_tte(limit: &str, own: &ProcessTrack, outlook: Outlook<'static>) -> LimitCheck {
        let snap = half_free()
            .process(process(5).name("python3").job(5))
            .process(process(6).name("python3").job(5))
            .job_of(5, crate::model::Basis::Rss)
            .build();
        let snap: &'static Snapshot = Box::leak(Box::new(snap));
        check(
            &rule(&format!("time_to_exhaustion = \"{limit}\"")),
            &snap.processes[0],
            Some(own),
            snap,
            Timestamp(10_000),
            Scale {
                job: Some(&snap.jobs[0]),
                outlook: Some(outlook),
                lead: Duration::from_millis(550),
            },
        )
    }

    #[test]
    fn a_jobs_time_to_exhaustion_runs_at_the_pace_its_room_falls() {
        // The job grows 100 MiB/s by its own figures; the machine loses
        // 150 MiB/s (pages its workers copy on access show there first).
        let own = series(GIB, 100 * MIB as i64);
        let paced = read_tte("1m", &own, machine_outlook(150, 150));
        assert_eq!(
            paced.exceeded.as_deref(),
            Some(
                "job of 2 (5 + 1 worker, counted by rss): growing 100 MiB/s (the machine's room \
                 falls 150 MiB/s), 8.0 GiB available plus free swap: exhausted in 54.6s (limit \
                 1m)"
            )
        );
        // It holds, so the status speaks; the signal waits for the lead.
        let waits = paced.signal_waits.as_deref().unwrap();
        assert!(
            waits.starts_with("a signal waits until exhaustion is nearer than the lead (550ms)"),
            "{waits}"
        );
        assert_eq!(paced.due_in.map(|d| d.as_millis()), Some(54_063));
    }

    #[test]
    fn a_process_beside_a_faster_fall_takes_no_blame() {
        let own = series(GIB, 10 * MIB as i64);
        let c = read_tte("1m", &own, machine_outlook(400, 400));
        assert_eq!(c.exceeded, None);
        assert_eq!(
            c.readings[0].value,
            "not this process's doing: the machine's room falls 400 MiB/s over 10s, and job of 2 \
             (5 + 1 worker, counted by rss): growing 10.0 MiB/s, under 25% of that"
        );
    }

    #[test]
    fn a_leak_about_to_exhaust_the_room_is_due_at_once() {
        let own = series(GIB, 2 * GIB as i64);
        let mut o = machine_outlook(2048, 2048);
        o.room = GIB;
        let c = read_tte("30s", &own, o);
        assert_eq!(c.signal_waits, None);
        let why = c.exceeded.unwrap();
        assert!(
            why.ends_with(
                "due now: 1.0 GiB left, falling 2.0 GiB/s over the last 2s: exhausted in 0.5s, \
                 within the lead (550ms)"
            ),
            "{why}"
        );
    }

    #[test]
    fn a_limit_not_known_neither_holds_nor_keeps_the_rule_from_clearing() {
        let r = rule("footprint = \"8GiB\"\ngrowth = \"1GiB/10s\"");
        let read = |footprint: u64| {
            check(
                &r,
                &process(5).name("python3").footprint(footprint).build(),
                None,
                &half_free().build(),
                Timestamp(0),
                Scale::default(),
            )
        };
        let far_below = read(GIB);
        assert_eq!(far_below.limit, "footprint > 8.0 GiB or growth > 102 MiB/s");
        assert_eq!(far_below.readings.len(), 2);
        assert!(far_below.cleared && !far_below.within_reach);
        assert_eq!(far_below.exceeded, None);
        let near = read(7 * GIB + GIB / 2);
        assert!(!near.cleared && near.within_reach && near.exceeded.is_none());
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
