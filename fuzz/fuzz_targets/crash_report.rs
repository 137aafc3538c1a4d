//! Fuzz target: the `.ips` reports the daemon reads from every user's
//! `~/Library/Logs/DiagnosticReports` as root (files their owners can write
//! anything into) and from `/Library/Logs/DiagnosticReports`: the kind of
//! report a first line names, crash reports and JetsamEvent reports. Any
//! bytes must give a kind, a report or an error naming what is wrong:
//! never a panic; an image index out of range is no library rather than a
//! crash, and a JetsamEvent report keeps its bounds.

#![no_main]

use headroom::model::Timestamp;
use headroom::os::macos::parse::{jetsam_report, post_mortem_sources, report_kind};
use headroom::os::macos::{crash_reports, parse::crash_report};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = report_kind::kind_of_head(data, true);
    let text = String::from_utf8_lossy(data);
    if let Ok(report) = crash_report::parse_ips(&text) {
        let crash = crash_reports::crash_of(&report, std::path::Path::new("x.ips"), Timestamp(1));
        assert_eq!(crash.pid, report.pid);
        let _ = report.gpu_out_of_memory();
    }
    if let Ok(report) = jetsam_report::parse_jetsam_event(&text) {
        assert!(report.processes <= jetsam_report::MAX_PROCESSES);
        assert!(report.killed.len() <= jetsam_report::MAX_KILLED);
        let kills = post_mortem_sources::jetsam_report_kills(&report, "x.ips", None, Timestamp(1));
        assert!(kills.len() <= report.killed.len());
    }
});
