//! A journal as a user would prepare it for a root daemon, shared by both
//! tiers' journal tests: a directory everyone can write holding a file of
//! forged lines everyone can write, and what a refusal of it says; and a
//! daemon's journal read back, both file sets, for the tests that look for
//! its events.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use headroom::journal::JournalError;

use super::chmod;

/// Lines a user would forge, ending in a torn line that an accepted
/// journal's open would cut.
pub const FORGED: &str = "{\"at\":1,\"event\":\"stopped\"}\n{\"at\":2,\"event\":\"sto";

/// The events of the journal at `path` (the record and the process events,
/// merged by time, as `headroom events` reads them) as JSON values; none
/// while there is no journal yet.
pub fn events(path: &Path) -> Vec<serde_json::Value> {
    headroom::journal::read_events(path, None)
        .map(|read| read.events)
        .unwrap_or_default()
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect()
}

/// Owner, mode and content of a file.
pub fn state_of(path: &Path) -> (u32, u32, Vec<u8>) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    (
        meta.uid(),
        meta.mode() & 0o7777,
        std::fs::read(path).unwrap(),
    )
}

/// A directory and journal file as a user would prepare them for root:
/// `dir/state` 0777 and `dir/state/journal.jsonl` 0666 with forged lines,
/// given to `owner` (root only can) or left to whoever runs the tests.
pub fn prepared_journal(dir: &Path, owner: Option<u32>) -> PathBuf {
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    chmod(&state, 0o777);
    let path = state.join("journal.jsonl");
    std::fs::write(&path, FORGED).unwrap();
    chmod(&path, 0o666);
    if let Some(uid) = owner {
        std::os::unix::fs::chown(&state, Some(uid), Some(uid)).unwrap();
        std::os::unix::fs::chown(&path, Some(uid), Some(uid)).unwrap();
    }
    path
}

/// What a refused journal's error names (`what`) and says to do (`fix`).
pub fn untrusted(e: JournalError) -> (String, String) {
    match e {
        JournalError::Untrusted { what, fix, .. } => (what, fix),
        other => panic!("expected a refusal, got {other}"),
    }
}

/// Open the journal at `path` checked, as a daemon whose uid is `uid`
/// would, and check the refusal: its message, that it names the journal's
/// directory as `problem` (the rest of `what` after the directory), that
/// its fix is to give the directory to root, and that the file is left as
/// it was.
pub fn assert_refused_untouched(path: &Path, uid: u32, problem: &str) {
    use headroom::journal::{Journal, JournalOptions};
    let before = state_of(path);
    let e = Journal::open_checked(path, JournalOptions::default(), uid).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "refusing to write the journal {} as root: ",
            path.display()
        )),
        "{text}"
    );
    let (what, fix) = untrusted(e);
    let state = path.parent().unwrap().display().to_string();
    assert_eq!(what, format!("{state} {problem}"));
    assert!(fix.contains(&format!("chown root:root {state}")), "{fix}");
    assert!(fix.contains("/var/lib/headroom/"), "{fix}");
    // Not cut, not appended to, not chmodded.
    assert_eq!(state_of(path), before);
}
