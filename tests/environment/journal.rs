//! A journal a user prepared for a root daemon, as root: their directory and
//! their 0666 file of forged lines, owned by them, are refused and left
//! untouched, by `Journal::open_checked` and by the real daemon, which
//! samples on and shows the refusal in `/healthz` and `/metrics`.

use std::time::Duration;

use headroom::journal::{Journal, JournalOptions};

use crate::support;
use crate::support::hog::Daemon;
use crate::support::journal::{
    FORGED, assert_refused_untouched, prepared_journal, state_of, untrusted,
};
use crate::support::{NOBODY, chmod, need_root};

#[test]
fn a_checked_journal_in_a_directory_another_user_owns_is_refused_untouched() {
    need_root();
    let dir = support::private_dir();
    let path = prepared_journal(dir.path(), Some(NOBODY));
    assert_refused_untouched(&path, 0, &format!("is owned by uid {NOBODY}, not by root"));
}

#[test]
fn a_checked_journal_file_another_user_owns_is_refused_untouched() {
    need_root();
    let dir = support::private_dir();
    let path = dir.path().join("journal.jsonl");
    std::fs::write(&path, FORGED).unwrap();
    chmod(&path, 0o666);
    std::os::unix::fs::chown(&path, Some(NOBODY), None).unwrap();
    let before = state_of(&path);
    let (what, fix) =
        untrusted(Journal::open_checked(&path, JournalOptions::default(), 0).unwrap_err());
    let shown = path.display().to_string();
    assert_eq!(
        what,
        format!("{shown} is owned by uid {NOBODY}, not by root")
    );
    assert!(fix.contains(&format!("rm {shown}")), "{fix}");
    assert!(
        fix.contains(&format!("chown root:root {shown} && chmod 600 {shown}")),
        "{fix}"
    );
    assert_eq!(state_of(&path), before);
}

/// `taken_at` of the daemon's latest snapshot, from its API.
fn taken_at(addr: std::net::SocketAddr) -> u64 {
    let (status, body) = support::get(&format!("http://{addr}/api/v1/snapshot"));
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["taken_at"]
        .as_u64()
        .unwrap_or_else(|| panic!("no taken_at in {body}"))
}

#[test]
fn a_root_daemon_refuses_a_journal_a_user_prepared_and_samples_on() {
    need_root();
    let dir = support::private_dir();
    let path = prepared_journal(dir.path(), Some(NOBODY));
    let before = state_of(&path);
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval = \"100ms\"\nfast_interval = \"50ms\"\njournal = \"{}\"\n",
            path.display()
        ),
    )
    .unwrap();
    chmod(&config, 0o644);
    let mut d = Daemon::run(&["run", "--config", config.to_str().unwrap()]);
    let addr = d.addr;
    let refused = d
        .seen
        .iter()
        .find(|l| l.contains("refusing to write the journal"))
        .cloned()
        .unwrap_or_else(|| d.expect_line("refusing to write the journal"));
    assert!(refused.contains(&path.display().to_string()), "{refused}");
    assert!(
        refused.contains(&format!("is owned by uid {NOBODY}, not by root")),
        "{refused}"
    );
    assert!(
        refused.contains("events are kept in memory only"),
        "{refused}"
    );
    // Sampling goes on.
    let first = taken_at(addr);
    support::wait_for(Duration::from_secs(10), "a later sample", || {
        (taken_at(addr) > first).then_some(())
    });
    // The refusal is visible where monitoring looks: /healthz and /metrics.
    let (_, health) = support::get(&format!("http://{addr}/healthz"));
    let health: serde_json::Value = serde_json::from_str(&health).unwrap();
    let (_, metrics) = support::get(&format!("http://{addr}/metrics"));
    let why = health["journal_error"].as_str().unwrap_or_default();
    assert!(why.contains(&path.display().to_string()), "{health}");
    assert!(
        metrics.contains("headroom_collector_up{collector=\"journal\"} 0"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("headroom_journal_unwritten_events_total 0\n"),
        "the started event was not written: {metrics}"
    );
    d.signal("TERM");
    assert_eq!(
        d.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(0)
    );
    // Not one byte of root's: no started or stopped event, no cut.
    assert_eq!(state_of(&path), before);
}
