//! One readable line per journal [`Event`], for `headroom events`:
//!
//! ```text
//! 2026-11-22 14:02:05  SIGINT  → python3 (pid 48113, jupyter kernel 3f2a…)  rule "notebook-runaway": footprint 9.1 GiB > 8 GiB  [done]
//! ```
//!
//! The time is passed in already formatted, so the layout is tested without
//! depending on the machine's time zone.

use crate::event::{Event, EventKind, Outcome, ProcessRef};
use crate::report::format_bytes;

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
            "{action}  → {}  rule \"{rule}\": {detail}  [{}]",
            process_label(process),
            outcome_label(outcome)
        ),
        EventKind::Skipped {
            rule,
            process,
            action,
            reason,
            ..
        } => format!(
            "{action}  → {}  rule \"{rule}\": {reason}  [skipped]",
            process_label(process)
        ),
        EventKind::LimitCrossed {
            rule,
            process,
            detail,
        } => format!(
            "limit  {}  rule \"{rule}\": {detail}  [crossed]",
            process_label(process)
        ),
        EventKind::LimitCleared {
            rule,
            process,
            detail,
        } => format!(
            "limit  {}  rule \"{rule}\": {detail}  [cleared]",
            process_label(process)
        ),
        EventKind::Exited {
            process,
            last_action,
            peak_footprint,
        } => {
            let last = last_action
                .as_deref()
                .map(|a| format!(", last action {a}"))
                .unwrap_or_default();
            format!(
                "exited  {}: peak footprint {}{last}",
                process_label(process),
                format_bytes(*peak_footprint)
            )
        }
        EventKind::Started {
            version,
            config,
            dry_run,
        } => format!(
            "started  headroom {version}, config {}{}",
            config.as_deref().unwrap_or("<embedded default>"),
            if *dry_run { ", dry run" } else { "" }
        ),
        EventKind::Stopped => "stopped".to_string(),
        EventKind::ConfigReloaded { path, error } => match error {
            None => format!("reload  {path}: applied"),
            Some(error) => format!("reload  {path}: rejected, the previous config kept: {error}"),
        },
    };
    format!("{time}  {body}")
}

/// `python3 (pid 48113, jupyter kernel 3f2a…)`; control characters in
/// the name and kernel id (which other users choose) are escaped.
pub fn process_label(p: &ProcessRef) -> String {
    let name = crate::report::printable(&p.name);
    match p.kernel_id.as_deref() {
        Some(kernel) => {
            let short =
                crate::report::printable(&kernel.chars().take(4).collect::<String>()).into_owned();
            let more = if kernel.chars().count() > 4 {
                "…"
            } else {
                ""
            };
            format!("{name} (pid {}, jupyter kernel {short}{more})", p.pid)
        }
        None => format!("{name} (pid {})", p.pid),
    }
}

/// `done`, `dry-run`, `failed: exit status 3`, ...
pub fn outcome_label(o: &Outcome) -> String {
    match o {
        Outcome::Refused(why) | Outcome::Failed(why) => format!("{}: {why}", o.as_str()),
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
        let exited = at(EventKind::Exited {
            process: kernel(),
            last_action: Some("SIGINT".into()),
            peak_footprint: 10 << 30,
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
}
