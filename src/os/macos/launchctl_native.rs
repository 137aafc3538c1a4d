//! Native tests, on a Mac, of the `launchctl` sequencing of `service
//! install` (`service::launchctl`): the wait for a job to go against
//! launchd itself, and a throwaway LaunchAgent booted out and bootstrapped
//! again at once. Compiled only for `cargo test` on macOS.

use std::path::Path;

use crate::service::{GONE_WAIT, Runner, SystemRunner, Waited, bootstrap, wait_gone};

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// Boots the throwaway job out when the test ends, however it ends.
struct Cleanup {
    target: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let mut r = SystemRunner::new();
        let _ = r.run(&argv(&["launchctl", "bootout", &self.target]));
        let _ = wait_gone(&mut r, &self.target, GONE_WAIT);
    }
}

#[test]
fn the_wait_for_a_label_launchd_does_not_have_ends_at_the_first_answer() {
    // Anyone may query the system domain (launchctl(1)).
    let target = format!("system/io.headroom.test.absent.{}", std::process::id());
    let mut r = SystemRunner::new();
    assert_eq!(
        wait_gone(&mut r, &target, GONE_WAIT),
        Waited::Gone { polls: 1 }
    );
}

#[test]
fn a_job_booted_out_is_gone_after_the_wait_and_bootstraps_again_at_once() {
    let uid = crate::os::this_process::effective_uid();
    let mut r = SystemRunner::new();
    // The login session's domain where there is one, the user's otherwise
    // (over ssh).
    let gui = format!("gui/{uid}");
    let domain = if r.run(&argv(&["launchctl", "print", &gui])).success() {
        gui
    } else {
        format!("user/{uid}")
    };
    let label = format!("io.headroom.test.{}", std::process::id());
    let target = format!("{domain}/{label}");
    let dir = tempfile::tempdir().unwrap();
    let plist = dir.path().join(format!("{label}.plist"));
    std::fs::write(
        &plist,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<plist version=\"1.0\">\n<dict>\n\t<key>Label</key>\n\t<string>{label}</string>\n\t<key>ProgramArguments</key>\n\t<array>\n\t\t<string>/bin/sleep</string>\n\t\t<string>300</string>\n\t</array>\n\t<key>RunAtLoad</key>\n\t<true/>\n</dict>\n</plist>\n"
        ),
    )
    .unwrap();
    let plist = plist.to_str().unwrap();
    let bootstrap_argv = argv(&["launchctl", "bootstrap", &domain, plist]);
    let _cleanup = Cleanup {
        target: target.clone(),
    };
    assert_eq!(bootstrap(&mut r, &bootstrap_argv, &target), Ok(1));
    // A reinstall: bootout, the wait, bootstrap again.
    let out = r.run(&argv(&["launchctl", "bootout", &target]));
    assert!(out.success(), "{}", out.summary());
    assert!(matches!(
        wait_gone(&mut r, &target, GONE_WAIT),
        Waited::Gone { .. }
    ));
    let again = bootstrap(&mut r, &bootstrap_argv, &target);
    assert!(
        again.is_ok(),
        "{again:?}: launchd took no job after the wait"
    );
    assert!(Path::new(plist).exists());
}
