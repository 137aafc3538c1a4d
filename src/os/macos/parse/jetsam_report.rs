//! JetsamEvent reports (`bug_type` 298), read for post-mortems (pure:
//! compiled and tested on every OS).
//!
//! When jetsam kills, the kernel records the victim in its jetsam snapshot
//! (`memorystatus_update_jetsam_snapshot_entry_locked`, on macOS as on iOS:
//! not under `CONFIG_JETSAM`) and notifies user space
//! (`kMemorystatusSnapshotNote`), at most once per
//! `JETSAM_SNAPSHOT_TIMEOUT_SECS` (30 s): `bsd/kern/kern_memorystatus.c`,
//! `bsd/sys/kern_memorystatus.h`, xnu-8792.81.2 to xnu-11417.101.15. The
//! snapshot becomes a `JetsamEvent-<date>.ips` report in
//! `/Library/Logs/DiagnosticReports`: a JSON header line, then a JSON body
//! with `date`, `largestProcess` (the process with the most pages),
//! `memoryStatus.pageSize` and `processes`, one entry per process of the
//! snapshot (`memorystatus_jetsam_snapshot_entry_t`: `pid`, `name` (the
//! kernel's `p_name`, up to 32 bytes), `rpages` (resident pages),
//! `lifetimeMax`, `fds`, `states`), where only a killed process's entry has
//! a `reason` (`memorystatus_kill_cause_name[]`: `per-process-limit`,
//! `vm-pageshortage`, `vm-compressor-space-shortage`, …).
//!
//! [`parse_jetsam_event`] reads the killed entries and the largest one into
//! a [`JetsamReport`], bounded whatever the file holds: at most
//! [`MAX_PROCESSES`] entries are looked at (the rest are skipped unread),
//! at most [`MAX_KILLED`] kills kept, names and reasons cut. A report whose
//! JSON ends early (still being written, or cut) is
//! [`JetsamReportError::Truncated`], to be read again later.

use serde::Deserialize;
use serde::de::{IgnoredAny, SeqAccess, Visitor};

use super::report_kind::{Head, ReportKind, kind_of_head};

/// The largest JetsamEvent report read: one entry per process (about
/// 700 bytes each), up to `kern.maxproc` of them.
pub const MAX_JETSAM_REPORT_BYTES: u64 = 8 << 20;
/// Process entries looked at in one report, at most.
pub const MAX_PROCESSES: usize = 8192;
/// Killed processes kept from one report, at most.
pub const MAX_KILLED: usize = 64;
/// A name or reason longer than this is cut (`p_name` is 32 bytes).
const MAX_TEXT: usize = 64;

/// One process entry of a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedProcess {
    pub pid: Option<u32>,
    /// The kernel's `p_name` (at most 32 bytes), as the report gives it.
    pub name: String,
    /// Resident pages when the snapshot was taken or the process killed.
    pub rpages: Option<u64>,
    /// The most pages it ever had resident.
    pub lifetime_max: Option<u64>,
    /// The kill cause, for a killed process.
    pub reason: Option<String>,
}

/// What a JetsamEvent report says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JetsamReport {
    /// When the report was made (`date`, else the header's `timestamp`).
    pub captured: Option<String>,
    /// `largestProcess`: the name of the process with the most pages.
    pub largest_process: Option<String>,
    /// `memoryStatus.pageSize`, in bytes.
    pub page_size: Option<u64>,
    /// Process entries looked at.
    pub processes: usize,
    /// More entries than [`MAX_PROCESSES`] (the rest were not looked at).
    pub more_processes: bool,
    /// The entry with the most resident pages.
    pub largest: Option<ReportedProcess>,
    /// The killed processes (those with a `reason`), in report order.
    pub killed: Vec<ReportedProcess>,
    /// Killed processes beyond [`MAX_KILLED`], not kept.
    pub more_killed: usize,
}

impl JetsamReport {
    /// `pages` in bytes, where the report gives its page size.
    pub fn bytes(&self, pages: Option<u64>) -> Option<u64> {
        pages?.checked_mul(self.page_size?)
    }
}

/// Why a file is not a JetsamEvent report headroom can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JetsamReportError {
    #[error("its first line is not a JetsamEvent header: {0}")]
    Header(String),
    #[error("its body ends before its JSON does (still being written, or cut short): {0}")]
    Truncated(String),
    #[error("its body is not the JSON of a JetsamEvent report: {0}")]
    Body(String),
}

#[derive(Deserialize)]
struct HeaderLine {
    #[serde(default)]
    timestamp: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    largest_process: Option<String>,
    #[serde(default)]
    memory_status: Option<MemoryStatus>,
    /// Where older reports put it.
    #[serde(default)]
    page_size: Option<u64>,
    #[serde(default)]
    processes: Processes,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MemoryStatus {
    #[serde(default)]
    page_size: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    #[serde(default)]
    pid: Option<i64>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    rpages: Option<u64>,
    #[serde(default)]
    lifetime_max: Option<u64>,
    #[serde(default)]
    reason: Option<String>,
}

/// The `processes` array, read entry by entry and kept bounded.
#[derive(Default)]
struct Processes {
    seen: usize,
    more: bool,
    largest: Option<ReportedProcess>,
    killed: Vec<ReportedProcess>,
    more_killed: usize,
}

impl<'de> Deserialize<'de> for Processes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Each;
        impl<'de> Visitor<'de> for Each {
            type Value = Processes;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of process entries")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Processes, A::Error> {
                let mut out = Processes::default();
                loop {
                    if out.seen >= MAX_PROCESSES {
                        if seq.next_element::<IgnoredAny>()?.is_none() {
                            return Ok(out);
                        }
                        out.more = true;
                        continue;
                    }
                    let Some(entry) = seq.next_element::<Entry>()? else {
                        return Ok(out);
                    };
                    out.seen += 1;
                    let p = ReportedProcess {
                        pid: entry.pid.and_then(|p| u32::try_from(p).ok()),
                        name: cut(entry.name.as_deref().unwrap_or("")),
                        rpages: entry.rpages,
                        lifetime_max: entry.lifetime_max,
                        reason: entry.reason.as_deref().map(cut),
                    };
                    if p.rpages > out.largest.as_ref().and_then(|l| l.rpages) {
                        out.largest = Some(p.clone());
                    }
                    if p.reason.is_some() {
                        if out.killed.len() < MAX_KILLED {
                            out.killed.push(p);
                        } else {
                            out.more_killed += 1;
                        }
                    }
                }
            }
        }
        d.deserialize_seq(Each)
    }
}

/// `text` cut to [`MAX_TEXT`] characters.
fn cut(text: &str) -> String {
    text.chars().take(MAX_TEXT).collect()
}

/// Read a JetsamEvent report (see the module documentation).
pub fn parse_jetsam_event(text: &str) -> Result<JetsamReport, JetsamReportError> {
    let text = text.trim_start_matches('\u{feff}');
    match kind_of_head(text.as_bytes(), true) {
        Head::Read(ReportKind::JetsamEvent) => {}
        Head::Read(ReportKind::Crash) => {
            return Err(JetsamReportError::Header(
                "a crash report (bug_type 309)".into(),
            ));
        }
        Head::Skipped(kind) => {
            return Err(JetsamReportError::Header(format!(
                "a report of another kind (bug_type {kind})"
            )));
        }
        Head::NotAReport(why) => return Err(JetsamReportError::Header(why)),
        Head::Incomplete(why) => return Err(JetsamReportError::Truncated(why.to_string())),
    }
    let (header, body) = text.split_once('\n').unwrap_or((text, ""));
    let timestamp = serde_json::from_str::<HeaderLine>(header)
        .ok()
        .and_then(|h| h.timestamp);
    let body: Body = serde_json::from_str(body).map_err(|e| {
        if e.classify() == serde_json::error::Category::Eof {
            JetsamReportError::Truncated(e.to_string())
        } else {
            JetsamReportError::Body(e.to_string())
        }
    })?;
    Ok(JetsamReport {
        captured: body.date.or(timestamp).map(|d| cut(&d)),
        largest_process: body.largest_process.map(|n| cut(&n)),
        page_size: body
            .memory_status
            .and_then(|m| m.page_size)
            .or(body.page_size)
            .filter(|&p| p > 0),
        processes: body.processes.seen,
        more_processes: body.processes.more,
        largest: body.processes.largest,
        killed: body.processes.killed,
        more_killed: body.processes.more_killed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// wifianalyticsd killed at its high-water mark, iOS 14.2
    /// (faisalmemon/ios-crash-dump-analysis-book; see tests/fixtures/ips/README.md).
    const HIGHWATER: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ips/JetsamEvent-wifianalyticsd-highwater.ips"
    ));

    #[test]
    fn the_killed_process_its_reason_and_the_largest_are_read() {
        let r = parse_jetsam_event(HIGHWATER).unwrap();
        assert_eq!(r.captured.as_deref(), Some("2020-10-15 17:29:58.79 +0100"));
        assert_eq!(r.largest_process.as_deref(), Some("AppStore"));
        assert_eq!(r.page_size, Some(16384));
        assert_eq!(r.processes, 2);
        assert_eq!(
            r.killed,
            vec![ReportedProcess {
                pid: Some(2527),
                name: "wifianalyticsd".into(),
                rpages: Some(382),
                lifetime_max: Some(385),
                reason: Some("highwater".into()),
            }]
        );
        assert_eq!(r.bytes(r.killed[0].rpages), Some(382 * 16384));
        // Of the two entries kept in the fixture, wifianalyticsd has the
        // most pages (382 against SBRendererService's 229).
        assert_eq!(r.largest.as_ref().map(|l| l.pid), Some(Some(2527)));
        assert!(!r.more_processes);
    }

    #[test]
    fn a_report_cut_short_is_truncated_not_wrong() {
        for cut_at in [HIGHWATER.len() / 3, HIGHWATER.len() - 3] {
            let cut = &HIGHWATER[..cut_at];
            assert!(
                matches!(
                    parse_jetsam_event(cut),
                    Err(JetsamReportError::Truncated(_))
                ),
                "{:?}",
                parse_jetsam_event(cut)
            );
        }
        let header_only = HIGHWATER.lines().next().unwrap();
        assert!(matches!(
            parse_jetsam_event(header_only),
            Err(JetsamReportError::Truncated(_))
        ));
        assert!(matches!(
            parse_jetsam_event(""),
            Err(JetsamReportError::Truncated(_))
        ));
    }

    #[test]
    fn another_kind_or_a_broken_body_is_an_error() {
        let crash = HIGHWATER.replacen("\"bug_type\":\"298\"", "\"bug_type\":\"309\"", 1);
        assert!(matches!(
            parse_jetsam_event(&crash),
            Err(JetsamReportError::Header(_))
        ));
        let wrong = HIGHWATER.replacen("\"rpages\" : 382", "\"rpages\" : \"many\"", 1);
        assert!(matches!(
            parse_jetsam_event(&wrong),
            Err(JetsamReportError::Body(_))
        ));
    }

    #[test]
    fn entries_and_kills_are_bounded() {
        // The fixture's killed entry, repeated past both bounds.
        let start = HIGHWATER.find("{\n  \"uuid\" : \"f71f1e2b").unwrap();
        let end = HIGHWATER.rfind("}\n]").unwrap() + 1;
        let killed = &HIGHWATER[start..end];
        let many = vec![killed; MAX_PROCESSES + 10].join(",\n");
        let text = format!("{}{many}\n]\n}}\n", &HIGHWATER[..start]);
        let r = parse_jetsam_event(&text).unwrap();
        assert_eq!(r.processes, MAX_PROCESSES);
        assert!(r.more_processes);
        assert_eq!(r.killed.len(), MAX_KILLED);
        // The first entry (SBRendererService) was not killed.
        assert_eq!(r.more_killed, MAX_PROCESSES - 1 - MAX_KILLED);
        let long = HIGHWATER.replacen("wifianalyticsd", &"x".repeat(10_000), 1);
        assert_eq!(
            parse_jetsam_event(&long).unwrap().killed[0].name.len(),
            MAX_TEXT
        );
    }
}
