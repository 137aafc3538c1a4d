//! Which kind of diagnostic report a file in a `DiagnosticReports`
//! directory is, decided from its name and its first line alone (pure:
//! compiled and tested on every OS).
//!
//! Many programs write there besides ReportCrash: spindump (`.spin`,
//! `.hang`), resource reports (`.cpu_resource.diag`,
//! `.wakeups_resource.diag`, `.diag`), shutdown stalls (`.shutdownStall`),
//! and, as `.ips` files, stackshots, panics and jetsam events as well as
//! crashes. Only `.ips` files are opened ([`opened_by_name`]); their first
//! line is a JSON header whose `bug_type` names the kind ([`kind_of_head`]):
//! `"309"` a crash report ([`super::crash_report`]), `"298"` a JetsamEvent
//! ([`super::jetsam_report`]); any other kind is skipped, never an error. A
//! first line not yet ended (a report still being written) is
//! [`Head::Incomplete`], to be looked at again.

use serde::Deserialize;

/// The most of a file read to find its first line: a crash report's
/// header is a few hundred bytes.
pub const MAX_HEADER_BYTES: u64 = 16 * 1024;

/// Whether a file is opened at all: only `.ips` reports are.
pub fn opened_by_name(file_name: &str) -> bool {
    file_name.ends_with(".ips")
}

/// The kinds of report read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportKind {
    /// `bug_type` 309: a crash report.
    Crash,
    /// `bug_type` 298: a JetsamEvent report.
    JetsamEvent,
}

/// What the first bytes of an `.ips` file say it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// A kind read here.
    Read(ReportKind),
    /// Another kind (its `bug_type`, or `none`): skipped, not an error.
    Skipped(String),
    /// A first line that is not a JSON header, or too long to be one: not
    /// a report in the format read here; skipped, with why.
    NotAReport(String),
    /// No complete first line yet (an empty file, a header not yet ended):
    /// a report still being written, to be looked at again.
    Incomplete(&'static str),
}

#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    bug_type: Option<BugType>,
}

/// `bug_type` is a string in every report seen; a number is read too.
#[derive(Deserialize)]
#[serde(untagged)]
enum BugType {
    Text(String),
    Number(u64),
}

/// The kind of report `head` (the first bytes of a file) begins;
/// `whole` says whether `head` is the whole file.
pub fn kind_of_head(head: &[u8], whole: bool) -> Head {
    let head = head.strip_prefix("\u{feff}".as_bytes()).unwrap_or(head);
    let Some(end) = head.iter().position(|&b| b == b'\n') else {
        return if head.iter().all(u8::is_ascii_whitespace) {
            Head::Incomplete("empty")
        } else if whole || (head.len() as u64) < MAX_HEADER_BYTES {
            Head::Incomplete("its first line has not ended yet")
        } else {
            Head::NotAReport(format!(
                "no line ends in its first {MAX_HEADER_BYTES} bytes: not an .ips header"
            ))
        };
    };
    let line = String::from_utf8_lossy(&head[..end]);
    let header: Header = match serde_json::from_str(line.trim()) {
        Ok(h) => h,
        Err(e) => return Head::NotAReport(format!("its first line is not a JSON header: {e}")),
    };
    match header.bug_type {
        Some(BugType::Text(t)) if t == "309" => Head::Read(ReportKind::Crash),
        Some(BugType::Number(309)) => Head::Read(ReportKind::Crash),
        Some(BugType::Text(t)) if t == "298" => Head::Read(ReportKind::JetsamEvent),
        Some(BugType::Number(298)) => Head::Read(ReportKind::JetsamEvent),
        Some(BugType::Text(t)) => Head::Skipped(t.chars().take(16).collect()),
        Some(BugType::Number(n)) => Head::Skipped(n.to_string()),
        None => Head::Skipped("none".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ips_files_are_opened() {
        // Names as macOS writes them: manaflow-ai/cmux#4214 (macOS 15.5)
        // lists `JetsamEvent-2026-05-15-220357.ips`,
        // `shutdown_stall_2026-05-15-204455_jimmym1.shutdownStall` and
        // `ResetCounter-2026-05-15-220955.diag` in DiagnosticReports.
        assert!(opened_by_name("JetsamEvent-2026-05-15-220357.ips"));
        assert!(opened_by_name("Python-2026-08-16-151218.ips"));
        assert!(!opened_by_name(
            "shutdown_stall_2026-05-15-204455_jimmym1.shutdownStall"
        ));
        assert!(!opened_by_name("ResetCounter-2026-05-15-220955.diag"));
        assert!(!opened_by_name(
            "Python_2023-01-01-120000_mac.cpu_resource.diag"
        ));
    }

    #[test]
    fn the_header_s_bug_type_names_the_kind() {
        // First lines of real reports: a crash (monero-project/monero-gui#3806,
        // tests/fixtures/ips), a JetsamEvent (faisalmemon/ios-crash-dump-analysis-book,
        // markdown/SystemDiagnostics.md); and a header naming bug_type 385,
        // the kind of the report posted in Lessica/TrollRecorder#76.
        let crash = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/ips/monero-gui-3806-translated-sigill.ips"
        ));
        assert_eq!(
            kind_of_head(crash.as_bytes(), true),
            Head::Read(ReportKind::Crash)
        );
        let jetsam = "{\"bug_type\":\"298\",\"timestamp\":\"2020-10-15 17:29:58.79 +0100\",\"os_version\":\"iPhone OS 14.2 (18B5061e)\",\"incident_id\":\"B04A36B1-19EC-4895-B203-6AE21BE52B02\"}\n{";
        assert_eq!(
            kind_of_head(jetsam.as_bytes(), false),
            Head::Read(ReportKind::JetsamEvent)
        );
        let other = "{\"bug_type\":\"385\",\"timestamp\":\"2024-06-16 13:00:26.00 +0700\"}\n{";
        assert_eq!(
            kind_of_head(other.as_bytes(), false),
            Head::Skipped("385".into())
        );
        assert_eq!(
            kind_of_head(b"{\"bug_type\":298}\n{}", true),
            Head::Read(ReportKind::JetsamEvent)
        );
        assert_eq!(
            kind_of_head(b"{\"timestamp\":\"x\"}\n", true),
            Head::Skipped("none".into())
        );
    }

    #[test]
    fn a_header_not_yet_ended_is_incomplete_and_text_is_not_a_report() {
        assert_eq!(kind_of_head(b"", true), Head::Incomplete("empty"));
        assert_eq!(
            kind_of_head(b"{\"bug_type\":\"30", true),
            Head::Incomplete("its first line has not ended yet")
        );
        assert!(matches!(
            kind_of_head(b"Process: Python [20761]\n", true),
            Head::NotAReport(_)
        ));
        let long = vec![b'x'; MAX_HEADER_BYTES as usize];
        assert!(matches!(kind_of_head(&long, false), Head::NotAReport(_)));
    }
}
