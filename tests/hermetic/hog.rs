//! `headroom-hog` itself: it grows to --max with every page resident, and
//! reacts to caught signals as asked (stop growing, keep growing, exit).

#![cfg(unix)]

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use crate::support::hog::hog_path;

const MIB: u64 = 1 << 20;

struct Hog {
    child: Child,
    lines: Receiver<String>,
}

impl Hog {
    fn start(args: &[&str]) -> Hog {
        let mut child = Command::new(hog_path())
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start headroom-hog");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut hog = Hog { child, lines };
        hog.expect("ready pid=");
        hog
    }

    fn expect(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(e) => panic!("no line starting with {prefix:?}: {e}"),
            }
        }
    }

    fn signal(&self, name: &str) {
        // The shell's own `kill`: no procps needed.
        let ok = Command::new("/bin/sh")
            .args(["-c", &format!("kill -{name} {}", self.child.id())])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name} failed");
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn number_after(line: &str, prefix: &str) -> u64 {
    line.strip_prefix(prefix)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line:?} has no number after {prefix:?}"))
}

#[test]
fn it_grows_to_max_reporting_every_64_mib_then_exits_after_hold() {
    let mut hog = Hog::start(&["--max", "130MiB", "--hold", "100ms"]);
    assert_eq!(hog.expect("allocated "), format!("allocated {}", 64 * MIB));
    assert_eq!(hog.expect("allocated "), format!("allocated {}", 128 * MIB));
    assert_eq!(hog.expect("holding "), format!("holding {}", 130 * MIB));
    assert_eq!(hog.expect("done "), format!("done {}", 130 * MIB));
    assert!(hog.child.wait().unwrap().success());
}

#[cfg(target_os = "linux")]
#[test]
fn every_page_is_resident() {
    let mut hog = Hog::start(&["--max", "96MiB"]);
    hog.expect("holding ");
    let status = std::fs::read_to_string(format!("/proc/{}/status", hog.child.id())).unwrap();
    let anon_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert!(anon_kib * 1024 >= 96 * MIB, "RssAnon {anon_kib} kB");
}

#[test]
fn a_caught_signal_stops_the_growth_and_keeps_the_memory() {
    let mut hog = Hog::start(&[
        "--max", "1GiB", "--start", "8MiB", "--rate", "4MiB/s", "--catch", "INT",
    ]);
    hog.signal("INT");
    let line = hog.expect("signal ");
    assert!(line.starts_with("signal SIGINT footprint="), "{line}");
    let footprint = number_after(&line, "signal SIGINT footprint=");
    let held = number_after(&hog.expect("holding "), "holding ");
    // At most the block being touched when the signal came is added.
    assert!(
        held <= footprint + MIB,
        "signalled at {footprint}, held {held}"
    );
    assert!(hog.child.try_wait().unwrap().is_none(), "it exited");
}

#[test]
fn an_ignored_signal_does_not_stop_the_growth() {
    let mut hog = Hog::start(&[
        "--max", "24MiB", "--start", "8MiB", "--rate", "16MiB/s", "--ignore", "USR1",
    ]);
    hog.signal("USR1");
    hog.expect("signal SIGUSR1 ");
    assert_eq!(hog.expect("holding "), format!("holding {}", 24 * MIB));
}

#[test]
fn exit_on_exits_zero_after_printing() {
    let mut hog = Hog::start(&["--max", "1MiB", "--exit-on", "TERM"]);
    hog.expect("holding ");
    hog.signal("TERM");
    hog.expect("signal SIGTERM footprint=1048576 ");
    assert!(hog.child.wait().unwrap().success());
}

#[test]
fn thrash_writes_the_held_pages_again_until_a_caught_signal() {
    let mut hog = Hog::start(&["--max", "16MiB", "--thrash", "--catch", "INT"]);
    hog.expect("holding ");
    // 16 MiB held: every 64 MiB written again is four passes over it.
    assert_eq!(hog.expect("rewritten "), format!("rewritten {}", 64 * MIB));
    assert_eq!(hog.expect("rewritten "), format!("rewritten {}", 128 * MIB));
    hog.signal("INT");
    hog.expect("signal SIGINT ");
    // Stopped: no more passes once the lines in flight are read.
    std::thread::sleep(Duration::from_millis(200));
    while hog.lines.try_recv().is_ok() {}
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        hog.lines.try_recv().is_err(),
        "still rewriting after the signal"
    );
    assert!(hog.child.try_wait().unwrap().is_none(), "it exited");
}

#[cfg(target_os = "linux")]
#[test]
fn lock_keeps_every_page_in_memory_or_says_why_not() {
    let mut child = Command::new(hog_path())
        .args(["--max", "32MiB", "--lock"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kept open: the hog ends quietly when its stdout closes.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    if first.trim() == "locked" {
        // Growing to 32 MiB takes milliseconds; then every page is locked.
        let deadline = Instant::now() + Duration::from_secs(20);
        let locked_kib = loop {
            let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
            let kib: u64 = status
                .lines()
                .find_map(|l| l.strip_prefix("VmLck:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap();
            if kib * 1024 >= 32 * MIB || Instant::now() > deadline {
                break kib;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = child.kill();
        let _ = child.wait();
        assert!(locked_kib * 1024 >= 32 * MIB, "VmLck {locked_kib} kB");
    } else {
        // Without the right to lock: exit 1, the reason on stderr.
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1), "first line {first:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--lock:") && err.contains("RLIMIT_MEMLOCK"),
            "{err}"
        );
    }
}

#[test]
fn bad_arguments_exit_2_with_the_reason() {
    for (args, reason) in [
        (&["--max", "lots"][..], "invalid size"),
        (
            &["--max", "1MiB", "--catch", "KILL"][..],
            "SIGKILL cannot be caught",
        ),
        (&["--max", "1MiB", "--catch", "HUP"][..], "unknown signal"),
        (&["--max", "1MiB", "--rate", "fast"][..], "invalid rate"),
        (
            &["--max", "1MiB", "--catch", "INT", "--exit-on", "INT"][..],
            "more than one of",
        ),
    ] {
        let out = Command::new(hog_path()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(reason), "{args:?}: {err}");
    }
}
