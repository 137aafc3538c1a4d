//! What post-mortems learn from macOS's records (pure, so that it is
//! tested everywhere): a jetsam kill, from the unified log or a JetsamEvent
//! report, as a [`MemoryKill`], and `headroom doctor`'s check of which
//! records a root daemon or a user's agent reads.

use crate::model::Timestamp;
use crate::model::exit::{Killer, MemoryKill};

/// A jetsam kill as a [`MemoryKill`].
pub fn jetsam_kill(k: super::jetsam::JetsamKill, read_at: Timestamp) -> MemoryKill {
    let scope = match &k.reason {
        Some(r) => format!("{} ({r})", super::jetsam::reason_words(r)),
        None => "jetsam named no reason".to_string(),
    };
    MemoryKill {
        pid: k.pid,
        name: k.name,
        uid: None,
        killer: Killer::Jetsam,
        source: "the unified log (log stream)".to_string(),
        message: k.message,
        resident_bytes: k.footprint_bytes,
        scope,
        read_at,
        memcg: None,
    }
}

/// The kills a JetsamEvent report records, as [`MemoryKill`]s: one per
/// killed entry with a pid. `source` is the report's path; `uid` the owner
/// the kills are restricted to (`None` for a report only root could write:
/// a user's own file is believed only about that user's processes).
pub fn jetsam_report_kills(
    report: &super::jetsam_report::JetsamReport,
    source: &str,
    uid: Option<u32>,
    read_at: Timestamp,
) -> Vec<MemoryKill> {
    let when = report
        .captured
        .as_deref()
        .map(|c| format!(" of {c}"))
        .unwrap_or_default();
    let largest = match (&report.largest_process, &report.largest) {
        (Some(name), _) => format!("; the largest process then: {name}"),
        (None, Some(p)) => format!("; the largest process then: {}", p.name),
        (None, None) => String::new(),
    };
    report
        .killed
        .iter()
        .filter_map(|p| {
            let pid = p.pid?;
            let reason = p.reason.as_deref().unwrap_or("");
            let pages = p
                .rpages
                .map(|r| format!(", {r} pages resident"))
                .unwrap_or_default();
            Some(MemoryKill {
                pid,
                name: p.name.clone(),
                uid,
                killer: Killer::Jetsam,
                source: format!("the JetsamEvent report {source}"),
                message: format!(
                    "JetsamEvent{when}: {} [{pid}] killed ({reason}){pages}{largest}",
                    p.name
                ),
                resident_bytes: report.bytes(p.rpages),
                scope: format!("{} ({reason})", super::jetsam::reason_words(reason)),
                read_at,
                memcg: None,
            })
        })
        .collect()
}

/// The macOS check: as root, jetsam kills and everyone's crash reports;
/// as a user, only that user's crash reports and the JetsamEvent reports
/// it may read.
pub fn macos_check(root: bool) -> crate::model::Check {
    use crate::model::Check;
    if root {
        Check::ok(
            "post-mortems",
            "jetsam kills followed as the kernel logs them (log stream) and from JetsamEvent reports; crash reports read from /Library/Logs/DiagnosticReports and every user's ~/Library/Logs/DiagnosticReports",
        )
    } else {
        Check::warn(
            "post-mortems",
            "as a user, only your own crash reports are read, and JetsamEvent reports in /Library/Logs/DiagnosticReports where you may read them: jetsam kills are not followed in the unified log (log stream shows the kernel's entries only to an administrator), so a jetsam kill without a readable report is a post-mortem with an unknown cause",
            format!(
                "install the system service to follow jetsam kills: {}",
                crate::os::this_process::sudo_command("service install --system")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doctor_says_what_a_user_misses() {
        use crate::model::CheckStatus;
        assert_eq!(macos_check(true).status, CheckStatus::Ok);
        assert!(
            macos_check(false)
                .detail
                .contains("jetsam kills are not followed")
        );
    }

    #[test]
    fn a_jetsam_report_s_kills_name_the_reason_size_and_largest() {
        // wifianalyticsd killed at its high-water mark (tests/fixtures/ips/README.md).
        let report = super::super::jetsam_report::parse_jetsam_event(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/ips/JetsamEvent-wifianalyticsd-highwater.ips"
        )))
        .unwrap();
        let kills = jetsam_report_kills(&report, "/r/JetsamEvent-x.ips", Some(501), Timestamp(9));
        assert_eq!(kills.len(), 1);
        let k = &kills[0];
        assert_eq!(
            (k.pid, k.name.as_str(), k.killer),
            (2527, "wifianalyticsd", Killer::Jetsam)
        );
        assert_eq!(k.uid, Some(501));
        assert_eq!(k.resident_bytes, Some(382 * 16384));
        assert_eq!(k.scope, "it went over its high-water mark (highwater)");
        assert_eq!(k.source, "the JetsamEvent report /r/JetsamEvent-x.ips");
        assert_eq!(
            k.message,
            "JetsamEvent of 2020-10-15 17:29:58.79 +0100: wifianalyticsd [2527] killed (highwater), 382 pages resident; the largest process then: AppStore"
        );
    }

    #[test]
    fn a_jetsam_kill_says_why_in_words() {
        let k = super::super::jetsam::parse_kill_message(
            "memorystatus: killing_top_process pid 901 [Python] (vm-pageshortage 0 86s rf:-) 1024KB - memorystatus_available_pages: 5",
        )
        .unwrap();
        let m = jetsam_kill(k, Timestamp(3));
        assert_eq!((m.pid, m.killer), (901, Killer::Jetsam));
        assert_eq!(
            m.scope,
            "the machine ran short of free memory pages (vm-pageshortage)"
        );
        assert_eq!(m.resident_bytes, Some(1 << 20));
    }
}
