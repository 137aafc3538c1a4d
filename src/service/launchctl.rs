//! `launchctl` driven in the order launchd needs: what its answers mean,
//! and the waits and retries around `bootout` and `bootstrap`.
//!
//! `launchctl bootout` returns once launchd has taken the request, not once
//! the job is gone: launchd sends SIGTERM, waits for the process to exit (up
//! to the plist's `ExitTimeOut`), and only then removes the job. A
//! `bootstrap` of the same label in between fails, with `Bootstrap failed: 5:
//! Input/output error` from `launchctl` while launchd's own log says `37:
//! Operation already in progress` (ancwrd1/snx-rs#241, Layr-Labs/d-inference#1102,
//! openclaw/openclaw#136453), and a reinstall would leave the new plist
//! written and the daemon stopped. So:
//!
//! - after `bootout`, [`wait_gone`] asks `launchctl print TARGET` every
//!   [`POLL`] until launchd no longer finds the job, for at most
//!   [`GONE_WAIT`] (the plist's `ExitTimeOut` and a margin);
//! - [`bootstrap`] retries a failure that launchd gives while it is busy
//!   with the label ([`busy`]) after [`BACKOFF`]'s pauses, then checks that
//!   `launchctl print` finds the job; any other failure, or one that lasts,
//!   is returned with what `launchctl` said, for a message that says the
//!   service is not running and how to start it by hand.
//!
//! Everything runs through a [`Runner`], so the sequences are tested on any
//! OS against recorded answers of real Macs (each test cites its source).

use std::time::Duration;

use super::runner::{Ran, Runner};

/// How often [`wait_gone`] asks launchd.
pub const POLL: Duration = Duration::from_millis(100);

/// How long [`wait_gone`] waits for a job to go: the plists' `ExitTimeOut`
/// (10 s, after which launchd sends SIGKILL) and 5 s for launchd to remove
/// the job after the process has gone.
pub const GONE_WAIT: Duration = Duration::from_secs(15);

/// The pauses before each retry of a busy `bootstrap`: four retries, 7.5 s
/// in all.
pub const BACKOFF: [Duration; 4] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
];

/// What `launchctl print TARGET` says of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// Exit 0: the job is in the domain (running, stopping or waiting).
    Loaded,
    /// `Could not find service "LABEL" in domain for …` (exit 113): launchd
    /// has no such job.
    Gone,
    /// Anything else (the domain itself missing, a permission refused): the
    /// answer, which says nothing of the job.
    Unknown(String),
}

/// What `launchctl print` answered, read. Exit 113 is `launchctl`'s "not
/// found" for services and domains alike, so the text decides: only
/// `Could not find service` means the job is gone; `Could not find domain`
/// says nothing of it.
pub fn presence(ran: &Ran) -> Presence {
    if ran.success() {
        Presence::Loaded
    } else if ran.stderr.contains("Could not find service")
        || ran.stdout.contains("Could not find service")
    {
        Presence::Gone
    } else {
        Presence::Unknown(ran.summary())
    }
}

/// A `bootstrap` failure that launchd gives while it is still busy with
/// the label: errno 5 (EIO), what `launchctl` reports for a label still
/// being torn down, or 37 (EALREADY, `Operation already in progress`; both
/// numbers as in XNU's `bsd/sys/errno.h`, xnu-11417.101.15; older
/// `launchctl`s print `service already loaded`, Homebrew/brew#7926). Both
/// also come from causes a retry does not cure; those fail every retry and
/// are reported the same way.
pub fn busy(ran: &Ran) -> bool {
    let said = |s: &str| ran.stderr.contains(s) || ran.stdout.contains(s);
    matches!(ran.code, Some(5 | 37))
        || said("Input/output error")
        || said("Operation already in progress")
        || said("service already loaded")
}

/// How a wait for a job to go ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// launchd no longer has the job, found at the `polls`-th question.
    Gone { polls: u32 },
    /// launchd still had the job after [`GONE_WAIT`].
    StillLoaded,
    /// `launchctl print` gave an answer that says nothing of the job.
    Unknown(String),
}

/// `launchctl print TARGET`.
fn print(runner: &mut dyn Runner, target: &str) -> Ran {
    runner.run(&[
        "launchctl".to_owned(),
        "print".to_owned(),
        target.to_owned(),
    ])
}

/// Ask `launchctl print TARGET` every [`POLL`] until launchd no longer finds
/// the job, for at most `limit`.
pub fn wait_gone(runner: &mut dyn Runner, target: &str, limit: Duration) -> Waited {
    let start = runner.now();
    let mut polls = 0;
    loop {
        polls += 1;
        match presence(&print(runner, target)) {
            Presence::Gone => return Waited::Gone { polls },
            Presence::Unknown(said) => return Waited::Unknown(said),
            Presence::Loaded => {}
        }
        if runner.now().saturating_sub(start) >= limit {
            return Waited::StillLoaded;
        }
        runner.sleep(POLL);
    }
}

/// Why a `bootstrap` did not leave the job loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotLoaded {
    /// `bootstrap` failed `tries` times; `last` is its last answer.
    Failed { tries: u32, last: String },
    /// `bootstrap` succeeded, but `launchctl print` does not find the job.
    Vanished { said: String },
}

/// `argv` (a `launchctl bootstrap DOMAIN PLIST`), retried after each of
/// [`BACKOFF`]'s pauses while launchd is [`busy`] with the label; then
/// `launchctl print TARGET` must find the job. Returns how many tries it took.
pub fn bootstrap(runner: &mut dyn Runner, argv: &[String], target: &str) -> Result<u32, NotLoaded> {
    let mut tries = 0;
    let mut pauses = BACKOFF.iter();
    loop {
        tries += 1;
        let ran = runner.run(argv);
        if ran.success() {
            break;
        }
        match pauses.next() {
            Some(pause) if busy(&ran) => {
                runner.sleep(*pause);
            }
            _ => {
                return Err(NotLoaded::Failed {
                    tries,
                    last: ran.summary(),
                });
            }
        }
    }
    match presence(&print(runner, target)) {
        Presence::Loaded => Ok(tries),
        Presence::Gone => Err(NotLoaded::Vanished {
            said: "launchctl print does not find it".to_owned(),
        }),
        Presence::Unknown(said) => Err(NotLoaded::Vanished { said }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::runner::replay::{Replay, answer};

    const TARGET: &str = "gui/501/io.headroom.agent";
    const PRINT: &str = "launchctl print gui/501/io.headroom.agent";
    const BOOTSTRAP: &str =
        "launchctl bootstrap gui/501 /Users/ann/Library/LaunchAgents/io.headroom.agent.plist";

    /// `launchctl print` of a label launchd does not have: exit 113 and
    /// these two lines, captured on a Mac in TOSS-Soft/toss-agent-runtime#40
    /// (the label and uid are theirs there).
    const NOT_FOUND: &str =
        "Bad request.\nCould not find service \"io.headroom.agent\" in domain for user gui: 501\n";

    /// The head of `launchctl print` of a loaded job (exit 0), as captured
    /// in DeterminateSystems/nix-installer#1187; `state = SIGTERMed` is what
    /// it says between bootout and the job's removal
    /// (kxn/codex-remote-feishu#916).
    const STOPPING: &str = "gui/501/io.headroom.agent = {\n\tactive count = 1\n\tpath = /Users/ann/Library/LaunchAgents/io.headroom.agent.plist\n\ttype = LaunchAgent\n\tstate = SIGTERMed\n";
    const LOADED: &str = "gui/501/io.headroom.agent = {\n\tactive count = 1\n\tpath = /Users/ann/Library/LaunchAgents/io.headroom.agent.plist\n\ttype = LaunchAgent\n\tstate = running\n";

    /// `launchctl bootstrap` racing a bootout: exit 5 and these lines
    /// (pirj/noclamshell#25, DeterminateSystems/nix-installer#1157; the
    /// second line is printed in a user's domain only).
    const EIO: &str = "Bootstrap failed: 5: Input/output error\nTry re-running the command as root for richer errors.\n";

    fn argv(command: &str) -> Vec<String> {
        command.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn launchds_answers_are_read_by_their_text_not_only_their_status() {
        let ran = |code, stderr: &str| Ran {
            code: Some(code),
            stdout: String::new(),
            stderr: stderr.to_owned(),
        };
        assert_eq!(presence(&ran(113, NOT_FOUND)), Presence::Gone);
        // A `launchctl print` of the system domain's job, as root
        // (DeterminateSystems/nix-installer#960 gives the line for kickstart).
        assert_eq!(
            presence(&ran(
                113,
                "Could not find service \"io.headroom.daemon\" in domain for system\n"
            )),
            Presence::Gone
        );
        // Over ssh without a login session the gui domain does not exist:
        // exit 113 as well, but nothing is known of the job
        // (Wamphyre/macOS_Silverback-Debloater#2 shows the line).
        assert_eq!(
            presence(&ran(113, "Could not find domain for user gui: 501\n")),
            Presence::Unknown("exit 113: Could not find domain for user gui: 501".into())
        );
        assert!(busy(&ran(5, EIO)));
        // launchd's own word for the race (ancwrd1/snx-rs#241, launchd's
        // log) and the exit status Homebrew reports for it
        // (Homebrew/homebrew-core#132781, Homebrew/brew#7926).
        assert!(busy(&ran(
            37,
            "Bootstrap failed: 37: Operation already in progress\n"
        )));
        // A plist launchd cannot read is no race: exit 133
        // (Homebrew/homebrew-services#111).
        assert!(!busy(&ran(
            133,
            "/Library/LaunchDaemons/io.headroom.daemon.plist: Invalid property list\n"
        )));
    }

    #[test]
    fn the_wait_for_a_label_launchd_does_not_have_ends_at_the_first_answer() {
        let mut r = Replay::new(vec![answer(PRINT, 113, "", NOT_FOUND)]);
        assert_eq!(
            wait_gone(&mut r, TARGET, GONE_WAIT),
            Waited::Gone { polls: 1 }
        );
        assert!(r.slept.is_empty());
        assert!(r.finished());
    }

    #[test]
    fn the_wait_asks_again_while_the_old_job_stops_and_ends_when_it_is_gone() {
        // The sequence kxn/codex-remote-feishu#916 describes: after bootout,
        // `state = SIGTERMed` until the process exits, then "not found".
        let mut r = Replay::new(vec![
            answer(PRINT, 0, STOPPING, ""),
            answer(PRINT, 0, STOPPING, ""),
            answer(PRINT, 0, STOPPING, ""),
            answer(PRINT, 113, "", NOT_FOUND),
        ]);
        assert_eq!(
            wait_gone(&mut r, TARGET, GONE_WAIT),
            Waited::Gone { polls: 4 }
        );
        assert_eq!(r.slept, [POLL, POLL, POLL]);
    }

    #[test]
    fn the_wait_gives_up_after_its_limit_and_says_the_job_is_still_there() {
        let limit = Duration::from_millis(300);
        let mut r = Replay::new(vec![answer(PRINT, 0, STOPPING, ""); 4]);
        assert_eq!(wait_gone(&mut r, TARGET, limit), Waited::StillLoaded);
        assert_eq!(r.ran.len(), 4, "asked at 0, 100, 200 and 300 ms");
        assert!(r.finished());
    }

    #[test]
    fn an_answer_that_says_nothing_of_the_job_ends_the_wait_with_it() {
        let mut r = Replay::new(vec![answer(
            PRINT,
            113,
            "",
            "Could not find domain for user gui: 501\n",
        )]);
        assert!(matches!(
            wait_gone(&mut r, TARGET, GONE_WAIT),
            Waited::Unknown(s) if s.contains("Could not find domain")
        ));
    }

    #[test]
    fn a_bootstrap_that_races_the_old_job_is_retried_until_it_loads() {
        // Layr-Labs/d-inference#1102: the label is free about 3 s after
        // bootout, and the same bootstrap then succeeds.
        let mut r = Replay::new(vec![
            answer(BOOTSTRAP, 5, "", EIO),
            answer(BOOTSTRAP, 5, "", EIO),
            answer(BOOTSTRAP, 0, "", ""),
            answer(PRINT, 0, LOADED, ""),
        ]);
        assert_eq!(bootstrap(&mut r, &argv(BOOTSTRAP), TARGET), Ok(3));
        assert_eq!(r.slept, BACKOFF[..2]);
        assert!(r.finished());
    }

    #[test]
    fn a_bootstrap_that_stays_busy_fails_after_the_last_retry_with_launchctls_words() {
        let mut r = Replay::new(vec![answer(BOOTSTRAP, 5, "", EIO); 5]);
        assert_eq!(
            bootstrap(&mut r, &argv(BOOTSTRAP), TARGET),
            Err(NotLoaded::Failed {
                tries: 5,
                last: "exit 5: Bootstrap failed: 5: Input/output error".into()
            })
        );
        assert_eq!(r.slept, BACKOFF);
        assert!(r.finished());
    }

    #[test]
    fn a_bootstrap_failure_that_is_no_race_is_not_retried() {
        let mut r = Replay::new(vec![answer(
            BOOTSTRAP,
            133,
            "",
            "/Users/ann/Library/LaunchAgents/io.headroom.agent.plist: Invalid property list\n",
        )]);
        assert!(matches!(
            bootstrap(&mut r, &argv(BOOTSTRAP), TARGET),
            Err(NotLoaded::Failed { tries: 1, last }) if last.starts_with("exit 133: ")
        ));
        assert!(r.slept.is_empty());
    }

    #[test]
    fn a_bootstrap_that_succeeds_but_leaves_no_job_is_not_taken_for_a_start() {
        let mut r = Replay::new(vec![
            answer(BOOTSTRAP, 0, "", ""),
            answer(PRINT, 113, "", NOT_FOUND),
        ]);
        assert!(matches!(
            bootstrap(&mut r, &argv(BOOTSTRAP), TARGET),
            Err(NotLoaded::Vanished { .. })
        ));
    }
}
