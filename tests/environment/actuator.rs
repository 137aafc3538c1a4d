//! The actuator as root: a hook handed a script that other users can write
//! is refused, by the actuator and by `headroom run` at start, and the
//! script never runs. Files hooks are handed live under `target/tmp`: as
//! root, a hook's argument under the shared `/tmp` is refused like the hook
//! itself.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::actuator::{WAIT, decision, hook, process, refusal, run};
use crate::support::hog::HEADROOM;
use crate::support::{chmod, need_root, private_dir};

/// A script that would leave `marker` behind if it ran, in a directory
/// everyone can write (where any user could have put it).
fn planted_script(dir: &Path, marker: &Path) -> PathBuf {
    let open = dir.join("open");
    std::fs::create_dir(&open).unwrap();
    chmod(&open, 0o777);
    let script = open.join("h.sh");
    std::fs::write(&script, format!("touch {}\n", marker.display())).unwrap();
    chmod(&script, 0o755);
    script
}

#[test]
fn as_root_a_script_others_can_write_is_not_handed_to_an_interpreter() {
    need_root();
    let dir = private_dir();
    let marker = dir.path().join("ran");
    let script = planted_script(dir.path(), &marker);
    let d = decision(
        process(std::process::id()),
        hook(&[script.to_str().unwrap()], WAIT),
    );
    let why = refusal(run(&d));
    assert!(
        why.starts_with("refusing to run hook /bin/sh as root: its argument"),
        "{why}"
    );
    assert!(
        why.contains(&format!("names {}", script.display())),
        "{why}"
    );
    assert!(
        why.contains(&format!(
            "{} is writable by users other than root (mode 0777)",
            script.parent().unwrap().display()
        )),
        "{why}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!marker.exists(), "the planted script ran as root");
}

#[test]
fn as_root_headroom_run_refuses_a_config_that_hands_sh_a_script_others_can_write() {
    need_root();
    let dir = private_dir();
    let marker = dir.path().join("ran");
    let script = planted_script(dir.path(), &marker);
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval = \"100ms\"\njournal = \"{}\"\n\n\
             [[rule]]\nname = \"save\"\nfootprint = \"1TiB\"\n\
             actions = [{{ hook = [\"/bin/sh\", \"{}\"] }}]\n",
            dir.path().join("journal.jsonl").display(),
            script.display()
        ),
    )
    .unwrap();
    let out = Command::new(HEADROOM)
        .args(["run", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for needle in [
        "rule[0] (\"save\").actions[0].hook: refusing to run hook /bin/sh as root: its argument",
        &format!("names {}", script.display()),
        &format!(
            "{} is writable by users other than root (mode 0777)",
            script.parent().unwrap().display()
        ),
        "chmod go-w",
    ] {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert!(!marker.exists());
}
