//! Fuzz target: macOS crash reports (`.ips`), which the daemon reads from
//! every user's `~/Library/Logs/DiagnosticReports` as root: files their
//! owners can write anything into. Any bytes must give a report or an
//! error naming what is wrong: never a panic, and an image index out of
//! range is no library rather than a crash.

#![no_main]

use headroom::model::Timestamp;
use headroom::os::macos::{crash_reports, parse::crash_report};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(report) = crash_report::parse_ips(&text) {
        let crash = crash_reports::crash_of(&report, std::path::Path::new("x.ips"), Timestamp(1));
        assert_eq!(crash.pid, report.pid);
        let _ = report.gpu_out_of_memory();
    }
});
