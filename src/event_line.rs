//! One readable line per journal [`Event`], for `headroom events`:
//!
//! ```text
//! 2026-11-22 14:02:05  SIGINT  → python3 (pid 48113, jupyter kernel 3f2a…)  rule "notebook-runaway": footprint 9.1 GiB > 8 GiB  [done]
//! ```
//!
//! A limit that holds for a process its rule does not act on says why:
//!
//! ```text
//! 2026-11-22 14:02:05  limit  python3 (pid 48113)  rule "notebook-runaway": footprint 9.1 GiB > 8 GiB  [not acting: owned by root and the rule has root = false; add root = true to act on root's processes]
//! ```
//!
//! A post-mortem (an `exited` event with a cause) reads as a sentence:
//!
//! ```text
//! 2026-11-22 14:02:11  post-mortem  train.ipynb (kernel 3f2a…, pid 48113) died: killed by the kernel OOM killer at 41.2 GiB (peak 41.5 GiB), growing 1.3 GiB/s; headroom had sent SIGINT 6.0 s before (rule "notebook-runaway", step 1). How: /dev/kmsg recorded …
//! ```
//!
//! A job's root says what became of its workers (`; its job had up to 8
//! workers and peaked at 22.1 GiB in all; all 8 at its end ended with
//! it`), and a worker's post-mortem (written only when headroom acted on it
//! or a record names its end) says whose worker it was (`python3 (pid
//! 48120), a worker of train.ipynb (kernel 3f2a…, pid 48113), died: …`).
//!
//! The time is passed in already formatted, so the layout is tested without
//! depending on the machine's time zone; other times are said relative to
//! the event's.
//!
//! Events carry text other users control (process names, notebook paths,
//! kernel ids, a notification's text in a dry run's detail, the kernel
//! log's words in a cause). Each such piece goes through
//! [`printable`], and the finished line once more, so a line is one line
//! and holds no control character, whatever field it came from.

use std::collections::BTreeMap;

use crate::event::{Event, EventKind, ExitCauseKind, JobEnd, Outcome, ProcessRef};
use crate::model::Timestamp;
use crate::report::{format_bytes, printable};

/// The line for `event`, after `time` (the event's time as the reader wants it).
pub fn render(event: &Event, time: &str) -> String {
    let body = match &event.kind {
        EventKind::Action {
            rule,
            process,
            action,
            outcome,
            detail,
            ..
        } => format!(
            "{}  → {}  rule \"{}\": {}  [{}]",
            printable(action),
            process_label(process),
            printable(rule),
            printable(detail),
            outcome_label(outcome)
        ),
        EventKind::Skipped {
            rule,
            process,
            action,
            reason,
            ..
        } => format!(
            "{}  → {}  rule \"{}\": {}  [skipped]",
            printable(action),
            process_label(process),
            printable(rule),
            printable(reason)
        ),
        EventKind::LimitCrossed {
            rule,
            process,
            detail,
        } => format!(
            "limit  {}  rule \"{}\": {}  [crossed]",
            process_label(process),
            printable(rule),
            printable(detail)
        ),
        EventKind::LimitHeldNotActing {
            rule,
            process,
            detail,
            reason,
        } => format!(
            "limit  {}  rule \"{}\": {}  [not acting: {}]",
            process_label(process),
            printable(rule),
            printable(detail),
            printable(reason)
        ),
        EventKind::LimitCleared {
            rule,
            process,
            detail,
        } => format!(
            "limit  {}  rule \"{}\": {}  [cleared]",
            process_label(process),
            printable(rule),
            printable(detail)
        ),
        EventKind::Exited {
            process,
            last_action,
            peak_footprint,
            cause: None,
            ..
        } => {
            // Written before post-mortems existed: no cause to tell.
            let last = last_action
                .as_deref()
                .map(|a| format!(", last action {}", printable(a)))
                .unwrap_or_default();
            format!(
                "exited  {}: peak footprint {}{last}",
                process_label(process),
                format_bytes(*peak_footprint)
            )
        }
        EventKind::Exited { .. } => format!(
            "post-mortem  {}",
            postmortem(event).unwrap_or_else(|| "a process ended".to_string())
        ),
        EventKind::Started {
            version,
            config,
            dry_run,
        } => format!(
            "started  headroom {}, config {}{}",
            printable(version),
            printable(config.as_deref().unwrap_or("<embedded default>")),
            if *dry_run { ", dry run" } else { "" }
        ),
        EventKind::Stopped => "stopped".to_string(),
        EventKind::EventsSummarized {
            uid,
            user,
            since,
            written,
            left_out,
            causes,
        } => summary(
            event.at,
            *uid,
            user.as_deref(),
            *since,
            *written,
            left_out,
            causes,
        ),
        EventKind::ConfigReloaded { path, error } => match error {
            None => format!("reload  {}: applied", printable(path)),
            Some(error) => format!(
                "reload  {}: rejected, the previous config kept: {}",
                printable(path),
                printable(error)
            ),
        },
    };
    printable(&format!("{time}  {body}")).into_owned()
}

/// An `events-summarized` event: whose events were left out of the
/// journal, how many of each, over how long, and how many were written.
fn summary(
    at: Timestamp,
    uid: Option<u32>,
    user: Option<&str>,
    since: Timestamp,
    written: u64,
    left_out: &BTreeMap<String, u64>,
    causes: &BTreeMap<String, u64>,
) -> String {
    let whose = match (uid, user) {
        (Some(uid), Some(user)) => format!("uid {uid} ({})", printable(user)),
        (Some(uid), None) => format!("uid {uid}"),
        (None, _) => "processes of an unknown owner".to_string(),
    };
    let counts = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(name, n)| format!("{n} {}", printable(name)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let total: u64 = left_out.values().fold(0, |a, n| a.saturating_add(*n));
    let by_cause = if causes.is_empty() {
        String::new()
    } else {
        format!("; post-mortems by cause: {}", counts(causes))
    };
    format!(
        "journal  {whose}: {total} process events left out of the journal in the {:.0} s \
         before ({}{by_cause}); {written} written in full",
        at.since(since).as_secs_f64(),
        counts(left_out)
    )
}

/// An `exited` event with a cause as a sentence (see the module
/// documentation); `None` for any other event.
pub fn postmortem(event: &Event) -> Option<String> {
    let EventKind::Exited {
        process,
        peak_footprint,
        last_growth_bytes_per_second,
        headroom_action,
        cause: Some(cause),
        job,
        worker_of,
        ..
    } = &event.kind
    else {
        return None;
    };
    let who = match worker_of {
        Some(root) => format!(
            "{}, a worker of {},",
            process_label(process),
            process_label(root)
        ),
        None => process_label(process),
    };
    let sizes = format!(
        "at {} (peak {})",
        format_bytes(process.footprint),
        format_bytes(*peak_footprint)
    );
    let what = match cause.kind {
        ExitCauseKind::OomKiller => format!("died: killed by the kernel OOM killer {sizes}"),
        ExitCauseKind::Jetsam => format!("died: killed by jetsam {sizes}"),
        ExitCauseKind::SignalByHeadroom => match headroom_action {
            Some(a) => format!(
                "died: ended by headroom's {} (rule \"{}\", step {}) {sizes}",
                a.action,
                a.rule,
                a.step + 1
            ),
            None => format!("died: ended by headroom's signal {sizes}"),
        },
        ExitCauseKind::Crashed => {
            let signal = cause.signal.as_deref().unwrap_or("a fatal signal");
            let place = cause
                .library
                .as_deref()
                .map(|l| format!(" in {}", printable(l)))
                .unwrap_or_default();
            format!(
                "died: crashed: {}{place}{}",
                printable(signal),
                verdict(cause, process.footprint, *peak_footprint)
            )
        }
        ExitCauseKind::GpuError => format!(
            "died after a GPU error{}",
            verdict(cause, process.footprint, *peak_footprint)
        ),
        ExitCauseKind::Exited => format!("ended: exited by itself {sizes}"),
        ExitCauseKind::Unknown => format!("ended {sizes}, cause unknown"),
    };
    let growth = match last_growth_bytes_per_second {
        Some(g) if *g >= 1024.0 => format!(", growing {}/s", format_bytes(*g as u64)),
        Some(g) if *g <= -1024.0 => format!(", shrinking {}/s", format_bytes(g.abs() as u64)),
        Some(_) => ", not growing".to_string(),
        None => String::new(),
    };
    let acted = match headroom_action {
        Some(a) if cause.kind != ExitCauseKind::SignalByHeadroom => {
            let before = ago(event.at.as_millis().saturating_sub(a.at.as_millis()));
            let verb = if a.action.starts_with("SIG") {
                format!("had sent {}", a.action)
            } else {
                format!("had run {}", a.action)
            };
            format!(
                "; headroom {verb} {before} before (rule \"{}\", step {})",
                a.rule,
                a.step + 1
            )
        }
        _ => String::new(),
    };
    let detail = cause
        .detail
        .as_deref()
        .map(|d| format!(" (\"{}\")", printable(d)))
        .unwrap_or_default();
    let job = job.as_ref().map(job_words).unwrap_or_default();
    let sentence = format!(
        "{who} {what}{growth}{job}{acted}. How: {}{detail}",
        printable(&cause.how)
    );
    Some(printable(&sentence).into_owned())
}

/// `; its job had up to 8 workers and peaked at 22.1 GiB in all; all 8 at
/// its end ended with it`: a root's post-mortem on its job.
fn job_words(job: &JobEnd) -> String {
    let most = match job.most_workers {
        1 => "1 worker".to_string(),
        n => format!("up to {n} workers"),
    };
    let end = match (job.workers, job.ended_with) {
        (0, _) => "none was left at its end".to_string(),
        (1, 1) => "its 1 worker at its end ended with it".to_string(),
        (1, _) => "its 1 worker at its end outlived it".to_string(),
        (n, e) if e >= n => format!("all {n} at its end ended with it"),
        (n, e) => format!(
            "{e} of the {n} at its end ended with it, {} outlived it",
            n - e
        ),
    };
    format!(
        "; its job had {most} and peaked at {} in all; {end}",
        format_bytes(job.peak_footprint)
    )
}

/// `at X (peak Y)`, or, where the record shows memory was not the reason,
/// `; not for want of memory: X at its last sample (peak Y)`.
fn verdict(cause: &crate::event::ExitCause, footprint: u64, peak: u64) -> String {
    if cause.not_memory {
        format!(
            "; not for want of memory: {} at its last sample (peak {})",
            format_bytes(footprint),
            format_bytes(peak)
        )
    } else {
        format!(
            " at {} (peak {})",
            format_bytes(footprint),
            format_bytes(peak)
        )
    }
}

/// `850 ms`, `6.0 s`, `3 min 20 s`, `2 h 5 min`.
pub fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// `train.ipynb (kernel 3f2a…, pid 48113)` for a kernel whose notebook is
/// known, `python3 (pid 48113, jupyter kernel 3f2a…)` for one whose is not,
/// `python3 (pid 48113)` for any other process; then where it ran, where
/// its cgroup said (`python3 (pid 48113) in pod ml/train-0 container
/// trainer (containerd 3f2a9c1b7d0e)`).
pub fn process_label(p: &ProcessRef) -> String {
    let mut label = process_name(p);
    // Where it ran: `in pod ml/train-0 container trainer (containerd
    // 3f2a9c1b7d0e)`, `in slurm job 42 step 0`, `in unit jupyter-alice.service`.
    if let Some(summary) = p.labels.as_ref().map(|l| l.summary())
        && !summary.is_empty()
    {
        label.push_str(" in ");
        label.push_str(&printable(&summary));
    }
    label
}

fn process_name(p: &ProcessRef) -> String {
    let name = printable(&p.name);
    match (p.notebook.as_deref().map(printable), p.kernel_id.as_deref()) {
        (Some(notebook), Some(kernel)) => {
            format!("{notebook} (kernel {}, pid {})", short_id(kernel), p.pid)
        }
        (Some(notebook), None) => format!("{notebook} (pid {})", p.pid),
        (None, Some(kernel)) => {
            format!(
                "{name} (pid {}, jupyter kernel {})",
                p.pid,
                short_id(kernel)
            )
        }
        (None, None) => format!("{name} (pid {})", p.pid),
    }
}

/// The first 4 characters of a kernel id, and `…` if there are more;
/// control characters escaped.
fn short_id(kernel: &str) -> String {
    let mut short = printable(&kernel.chars().take(4).collect::<String>()).into_owned();
    if kernel.chars().count() > 4 {
        short.push('…');
    }
    short
}

/// `done`, `dry-run`, `failed: exit status 3`, ...
pub fn outcome_label(o: &Outcome) -> String {
    match o {
        Outcome::Refused(why) | Outcome::Failed(why) => {
            format!("{}: {}", o.as_str(), printable(why))
        }
        _ => o.as_str().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Timestamp, WorkloadKind};

    fn kernel() -> ProcessRef {
        ProcessRef {
            pid: 48113,
            start: 1,
            name: "python3".into(),
            user: Some("ada".into()),
            uid: Some(1000),
            workload: WorkloadKind::Jupyter,
            footprint: 9_771_050_598,
            kernel_id: Some("3f2a0b1c-aaaa".into()),
            notebook: None,
            labels: None,
        }
    }

    fn at(kind: EventKind) -> Event {
        Event {
            at: Timestamp(0),
            kind,
        }
    }

    #[test]
    fn an_action_line_names_signal_process_rule_and_outcome() {
        let e = at(EventKind::Action {
            rule: "notebook-runaway".into(),
            process: kernel(),
            step: 0,
            action: "SIGINT".into(),
            outcome: Outcome::Done,
            dry_run: false,
            detail: "footprint 9.1 GiB > 8 GiB".into(),
        });
        assert_eq!(
            render(&e, "2026-11-22 14:02:05"),
            "2026-11-22 14:02:05  SIGINT  → python3 (pid 48113, jupyter kernel 3f2a…)  \
             rule \"notebook-runaway\": footprint 9.1 GiB > 8 GiB  [done]"
        );
    }

    #[test]
    fn a_held_crossing_says_why_the_rule_does_not_act() {
        let e = at(EventKind::LimitHeldNotActing {
            rule: "notebook-runaway".into(),
            process: ProcessRef {
                user: Some("root".into()),
                uid: Some(0),
                ..kernel()
            },
            detail: "footprint 9.1 GiB > 8 GiB".into(),
            reason: "owned by root and the rule has root = false; add root = true to act on \
                     root's processes"
                .into(),
        });
        assert_eq!(
            render(&e, "T"),
            "T  limit  python3 (pid 48113, jupyter kernel 3f2a…)  rule \"notebook-runaway\": \
             footprint 9.1 GiB > 8 GiB  [not acting: owned by root and the rule has root = false; \
             add root = true to act on root's processes]"
        );
    }

    #[test]
    fn failures_carry_their_reason() {
        let e = at(EventKind::Action {
            rule: "r".into(),
            process: ProcessRef {
                kernel_id: None,
                ..kernel()
            },
            step: 1,
            action: "hook /usr/local/bin/save".into(),
            outcome: Outcome::Failed("exit status 3".into()),
            dry_run: false,
            detail: "x".into(),
        });
        assert_eq!(
            render(&e, "T"),
            "T  hook /usr/local/bin/save  → python3 (pid 48113)  rule \"r\": x  \
             [failed: exit status 3]"
        );
    }

    #[test]
    fn short_kernel_ids_get_no_ellipsis() {
        let p = ProcessRef {
            kernel_id: Some("3f2a".into()),
            ..kernel()
        };
        assert_eq!(
            process_label(&p),
            "python3 (pid 48113, jupyter kernel 3f2a)"
        );
    }

    #[test]
    fn a_kernel_with_a_known_notebook_is_named_by_it() {
        let p = ProcessRef {
            notebook: Some("work/train.ipynb".into()),
            ..kernel()
        };
        assert_eq!(
            process_label(&p),
            "work/train.ipynb (kernel 3f2a…, pid 48113)"
        );
    }

    #[test]
    fn a_summary_says_whose_events_were_left_out_and_how_many() {
        let e = Event {
            at: Timestamp(61_000),
            kind: EventKind::EventsSummarized {
                uid: Some(999),
                user: Some("mal\u{1b}lory".into()),
                since: Timestamp(1_000),
                written: 100,
                left_out: [("exited".to_string(), 4900), ("limit-crossed".into(), 3)].into(),
                causes: [("unknown".to_string(), 4900)].into(),
            },
        };
        assert_eq!(
            render(&e, "T"),
            "T  journal  uid 999 (mal\\u{1b}lory): 4903 process events left out of the journal \
             in the 60 s before (4900 exited, 3 limit-crossed; post-mortems by cause: 4900 \
             unknown); 100 written in full"
        );
    }

    #[test]
    fn daemon_events_read_as_sentences() {
        let started = at(EventKind::Started {
            version: "0.1.0".into(),
            config: None,
            dry_run: true,
        });
        assert_eq!(
            render(&started, "T"),
            "T  started  headroom 0.1.0, config <embedded default>, dry run"
        );
        // As journaled before post-mortems existed: no cause.
        let exited = at(EventKind::Exited {
            process: kernel(),
            last_action: Some("SIGINT".into()),
            peak_footprint: 10 << 30,
            last_growth_bytes_per_second: None,
            headroom_action: None,
            cause: None,
            job: None,
            worker_of: None,
        });
        assert_eq!(
            render(&exited, "T"),
            format!(
                "T  exited  python3 (pid 48113, jupyter kernel 3f2a…): peak footprint {}, \
                 last action SIGINT",
                format_bytes(10 << 30)
            )
        );
    }

    fn oom_postmortem() -> Event {
        use crate::event::{ActionTaken, ExitCause, ExitCauseKind};
        Event {
            at: Timestamp(50_000),
            kind: EventKind::Exited {
                process: ProcessRef {
                    notebook: Some("train.ipynb".into()),
                    footprint: 41 * (1 << 30) + (1 << 28),
                    ..kernel()
                },
                last_action: Some("SIGINT".into()),
                peak_footprint: 41 * (1 << 30) + (1 << 29),
                last_growth_bytes_per_second: Some(1.3 * (1u64 << 30) as f64),
                headroom_action: Some(ActionTaken {
                    rule: "notebook-runaway".into(),
                    step: 0,
                    action: "SIGINT".into(),
                    at: Timestamp(44_000),
                }),
                cause: Some(ExitCause {
                    kind: ExitCauseKind::OomKiller,
                    how: "/dev/kmsg recorded the kernel's OOM killer killing pid 48113 (python3): \
                          the machine ran out of memory"
                        .into(),
                    detail: Some("Out of memory: Killed process 48113 (python3)".into()),
                    ..ExitCause::default()
                }),
                job: None,
                worker_of: None,
            },
        }
    }

    #[test]
    fn a_postmortem_reads_as_a_sentence_in_the_users_terms() {
        assert_eq!(
            render(&oom_postmortem(), "14:02:11"),
            "14:02:11  post-mortem  train.ipynb (kernel 3f2a…, pid 48113) died: killed by the kernel OOM \
             killer at 41.2 GiB (peak 41.5 GiB), growing 1.3 GiB/s; headroom had sent SIGINT 6.0 s \
             before (rule \"notebook-runaway\", step 1). How: /dev/kmsg recorded the kernel's OOM \
             killer killing pid 48113 (python3): the machine ran out of memory (\"Out of memory: \
             Killed process 48113 (python3)\")"
        );
    }

    #[test]
    fn a_gpu_error_says_not_for_want_of_memory_and_how() {
        use crate::event::{ExitCause, ExitCauseKind};
        let mut e = oom_postmortem();
        if let EventKind::Exited {
            cause,
            headroom_action,
            last_growth_bytes_per_second,
            ..
        } = &mut e.kind
        {
            *cause = Some(ExitCause {
                kind: ExitCauseKind::GpuError,
                how: "the kernel log (/dev/kmsg) recorded NVIDIA Xid 79 for pid 48113 (python3), and it ended after".into(),
                not_memory: true,
                ..ExitCause::default()
            });
            *headroom_action = None;
            *last_growth_bytes_per_second = None;
        }
        assert_eq!(
            postmortem(&e).unwrap(),
            "train.ipynb (kernel 3f2a…, pid 48113) died after a GPU error; not for want of \
             memory: 41.2 GiB at its last sample (peak 41.5 GiB). How: the kernel log \
             (/dev/kmsg) recorded NVIDIA Xid 79 for pid 48113 (python3), and it ended after"
        );
    }

    #[test]
    fn an_unknown_cause_says_so_and_why() {
        use crate::event::{ExitCause, ExitCauseKind};
        let mut e = oom_postmortem();
        if let EventKind::Exited {
            cause,
            headroom_action,
            last_growth_bytes_per_second,
            ..
        } = &mut e.kind
        {
            *cause = Some(ExitCause {
                kind: ExitCauseKind::Unknown,
                how: "no OOM-killer record for it in /dev/kmsg".into(),
                ..ExitCause::default()
            });
            *headroom_action = None;
            *last_growth_bytes_per_second = Some(0.0);
        }
        assert_eq!(
            postmortem(&e).unwrap(),
            "train.ipynb (kernel 3f2a…, pid 48113) ended at 41.2 GiB (peak 41.5 GiB), cause \
             unknown, not growing. How: no OOM-killer record for it in /dev/kmsg"
        );
    }

    #[test]
    fn a_hostile_name_in_a_dry_run_notification_prints_as_one_escaped_line() {
        let hostile = "\u{1b}[31mRED\n\u{7}<b>";
        let e = at(EventKind::Action {
            rule: "r".into(),
            process: ProcessRef {
                name: hostile.into(),
                kernel_id: Some("\u{1b}]0;x\u{7}".into()),
                ..kernel()
            },
            step: 0,
            action: "notify".into(),
            outcome: Outcome::DryRun,
            dry_run: true,
            detail: format!("would show \"headroom: r: {hostile} (pid 48113): big\""),
        });
        let line = render(&e, "T");
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert_eq!(
            line,
            "T  notify  → \\u{1b}[31mRED\\n\\u{7}<b> (pid 48113, jupyter kernel \\u{1b}]0;…)  \
             rule \"r\": would show \"headroom: r: \\u{1b}[31mRED\\n\\u{7}<b> (pid 48113): big\"  \
             [dry-run]"
        );
    }

    #[test]
    fn a_root_s_postmortem_says_what_became_of_its_workers() {
        use crate::event::{ExitCause, ExitCauseKind};
        let mut e = oom_postmortem();
        if let EventKind::Exited {
            cause,
            headroom_action,
            last_growth_bytes_per_second,
            job,
            ..
        } = &mut e.kind
        {
            *cause = Some(ExitCause {
                kind: ExitCauseKind::Exited,
                how: "its exit status, read from /proc/48113/stat before its parent collected it: exited with status 0".into(),
                ..ExitCause::default()
            });
            *headroom_action = None;
            *last_growth_bytes_per_second = None;
            *job = Some(JobEnd {
                workers: 8,
                most_workers: 8,
                peak_footprint: 22 << 30,
                ended_with: 8,
            });
        }
        assert_eq!(
            postmortem(&e).unwrap(),
            "train.ipynb (kernel 3f2a…, pid 48113) ended: exited by itself at 41.2 GiB (peak \
             41.5 GiB); its job had up to 8 workers and peaked at 22.0 GiB in all; all 8 at its \
             end ended with it. How: its exit status, read from /proc/48113/stat before its \
             parent collected it: exited with status 0"
        );
        for (workers, most, ended_with, words) in [
            (
                8,
                9,
                5,
                "up to 9 workers and peaked at 22.0 GiB in all; 5 of the 8 at its end ended with it, 3 outlived it",
            ),
            (
                0,
                4,
                0,
                "up to 4 workers and peaked at 22.0 GiB in all; none was left at its end",
            ),
            (
                1,
                1,
                0,
                "1 worker and peaked at 22.0 GiB in all; its 1 worker at its end outlived it",
            ),
        ] {
            if let EventKind::Exited { job: Some(j), .. } = &mut e.kind {
                (j.workers, j.most_workers, j.ended_with) = (workers, most, ended_with);
            }
            let line = postmortem(&e).unwrap();
            assert!(
                line.contains(&format!("; its job had {words}. How: ")),
                "{line}"
            );
        }
    }

    #[test]
    fn a_worker_s_postmortem_names_whose_worker_it_was() {
        let mut e = oom_postmortem();
        if let EventKind::Exited {
            process,
            worker_of,
            headroom_action,
            last_growth_bytes_per_second,
            peak_footprint,
            ..
        } = &mut e.kind
        {
            *peak_footprint = 3 << 30;
            *worker_of = Some(Box::new(process.clone()));
            *process = ProcessRef {
                pid: 48120,
                kernel_id: None,
                notebook: None,
                workload: crate::model::WorkloadKind::Python,
                footprint: 3 << 30,
                ..kernel()
            };
            *headroom_action = None;
            *last_growth_bytes_per_second = None;
        }
        let line = postmortem(&e).unwrap();
        assert!(
            line.starts_with(
                "python3 (pid 48120), a worker of train.ipynb (kernel 3f2a…, pid 48113), died: \
                 killed by the kernel OOM killer at 3.0 GiB (peak 3.0 GiB). How: "
            ),
            "{line}"
        );
    }
    #[test]
    fn a_process_in_a_pod_says_which_and_hostile_names_stay_one_line() {
        let mut p = kernel();
        p.labels = Some(crate::model::LabelSet {
            namespace: Some("ml".into()),
            pod: Some("train-0".into()),
            container: Some("notebook\n[FAKE]".into()),
            ..crate::model::LabelSet::default()
        });
        assert_eq!(
            process_label(&p),
            "python3 (pid 48113, jupyter kernel 3f2a…) in pod ml/train-0 container notebook\\n[FAKE]"
        );
        p.labels = Some(crate::model::LabelSet {
            slurm_job: Some("42".into()),
            slurm_step: Some("0".into()),
            ..crate::model::LabelSet::default()
        });
        assert!(process_label(&p).ends_with(" in slurm job 42 step 0"));
        p.labels = Some(crate::model::LabelSet::default());
        assert!(!process_label(&p).contains(" in "));
    }
}
