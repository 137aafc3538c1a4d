//! What post-mortems learn from macOS's records (pure, so that it is
//! tested everywhere): a jetsam kill as a [`MemoryKill`], and `headroom
//! doctor`'s check of which records a root daemon or a user's agent reads.

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

/// The macOS check: as root, jetsam kills and everyone's crash reports;
/// as a user, that user's crash reports and the jetsam flag on the exits
/// of that user's watched processes.
pub fn macos_check(root: bool) -> crate::model::Check {
    use crate::model::Check;
    if root {
        Check::ok(
            "post-mortems",
            "jetsam kills followed as the kernel logs them (log stream); crash reports read from /Library/Logs/DiagnosticReports and every user's ~/Library/Logs/DiagnosticReports",
        )
    } else {
        Check::warn(
            "post-mortems",
            "as a user, your own crash reports are read, and jetsam kills of your watched processes are seen as they exit (kqueue's NOTE_EXIT_MEMORY; a low-swap kill carries no flag and reads as SIGKILL with an unknown sender); jetsam's log lines are not followed (log stream shows the kernel's entries only to an administrator)",
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
        let user = macos_check(false).detail;
        assert!(
            user.contains("jetsam's log lines are not followed"),
            "{user}"
        );
        assert!(user.contains("NOTE_EXIT_MEMORY"), "{user}");
        assert!(user.contains("low-swap kill carries no flag"), "{user}");
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
