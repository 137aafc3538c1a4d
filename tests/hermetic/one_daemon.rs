//! One daemon per state directory: a second `headroom run` on the state
//! directory of a running one (another port, a config naming the same
//! journal's directory, a replay told to journal there) exits 1 naming the
//! holder's pid and address; once the first has stopped, cleanly or killed
//! (its lock file left behind), the next one starts.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::hog::{Daemon, HEADROOM};
use crate::support::private_dir;

/// `headroom ARGS` on a port of its own: its exit code and stderr.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(HEADROOM)
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .env("HEADROOM_LOG", "info")
        .output()
        .expect("run headroom");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Assert that `headroom ARGS` is refused, naming `first` as the holder.
#[track_caller]
fn refused_naming(args: &[&str], first: &Daemon, dir: &Path) {
    let (code, err) = refused(args);
    assert_eq!(code, Some(1), "{args:?}: {err}");
    for needle in [
        format!(
            "another headroom daemon runs on the state directory {}",
            dir.display()
        ),
        format!("pid {} ", first.pid()),
        format!("serving http://{}/", first.addr),
        "command: ".to_string(),
    ] {
        assert!(err.contains(&needle), "{args:?}: {needle:?} not in {err}");
    }
    assert!(
        !err.contains("first sample:"),
        "the refused daemon sampled: {err}"
    );
}

#[test]
fn a_second_daemon_on_a_state_directory_is_refused_naming_the_first_until_it_stops() {
    let dir = private_dir();
    let journal = dir.path().join("journal.jsonl");
    let journal_arg = journal.to_str().expect("utf-8");
    let first = Daemon::run(&["run", "--journal", journal_arg]);

    // The same directory by the flag, by a config, under another journal
    // name, and by a replay told to journal there.
    refused_naming(&["run", "--journal", journal_arg], &first, dir.path());
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\njournal = \"{}\"\n",
            dir.path().join("other.jsonl").display()
        ),
    )
    .expect("write config");
    refused_naming(
        &["run", "--config", config.to_str().expect("utf-8")],
        &first,
        dir.path(),
    );
    let trace =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces/idle-linux-6.18.jsonl");
    let trace_arg = trace.to_str().expect("utf-8");
    let replay_journal = dir.path().join("replay.jsonl");
    refused_naming(
        &[
            "run",
            "--replay",
            trace_arg,
            "--journal",
            replay_journal.to_str().expect("utf-8"),
        ],
        &first,
        dir.path(),
    );
    // A replay with no journal takes no lock: it runs beside the daemon.
    let replay = Daemon::run(&["run", "--replay", trace_arg]);
    replay.stop_with("TERM");

    // Killed: its lock file stays, and blocks no one.
    let lock = dir.path().join("headroom.lock");
    let mut first = first;
    first.signal("KILL");
    first.wait_exit(Duration::from_secs(10)).expect("killed");
    let stale = std::fs::read_to_string(&lock).expect("the lock file stays");
    assert!(
        stale.contains(&format!("\"pid\":{}", first.pid())),
        "{stale}"
    );
    let second = Daemon::run(&["run", "--journal", journal_arg]);
    let now = std::fs::read_to_string(&lock).expect("the lock file");
    assert!(now.contains(&format!("\"pid\":{}", second.pid())), "{now}");
    assert!(now.contains(&second.addr.to_string()), "{now}");
    refused_naming(&["run", "--journal", journal_arg], &second, dir.path());

    // Stopped cleanly: the next one starts too.
    second.stop_with("TERM");
    let third = Daemon::run(&["run", "--journal", journal_arg]);
    third.stop_with("TERM");
}
