//! Running a command to completion with a time limit: hooks and notifiers.
//!
//! The command runs in a process group of its own, with stdin from
//! `/dev/null` and its stdout and stderr captured (the first
//! [`OUTPUT_LIMIT`] bytes of each; the rest is read and dropped so the command
//! never blocks on a full pipe). At the time limit the whole group gets
//! SIGKILL, so a hook's own children do not outlive it. The caller runs this
//! on a thread of its own: it blocks for as long as the command runs.
//!
//! The child is polled rather than waited for, so it stays unreaped (a
//! zombie, holding its pid and group id) until after any kill: `kill(-pgid)`
//! can then never reach a group that took over a recycled id.

use std::io::Read;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::config::format_duration;
use crate::event::Outcome;
use crate::os::posix;

/// Bytes of stdout and of stderr kept from a command.
pub const OUTPUT_LIMIT: usize = 4096;

/// How often a running command is polled for exit.
const POLL: Duration = Duration::from_millis(10);

/// How long output is still collected after the command exited (a
/// grandchild that left the group may hold the pipes open).
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// How a command run ended.
#[derive(Debug)]
pub struct Finished {
    /// `Done` for exit status 0; `Failed` with `exit status 3`,
    /// `killed by signal 9` or `timed out after 10s` otherwise.
    pub outcome: Outcome,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub elapsed: Duration,
}

/// Run `command` (prepared by the caller: program, args, environment, user)
/// until it exits or `timeout` passes.
pub fn run(mut command: Command, timeout: Duration) -> Finished {
    let started = Instant::now();
    let program = command.get_program().to_string_lossy().into_owned();
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Finished {
                outcome: Outcome::Failed(format!("cannot run {program}: {e}")),
                stdout: Vec::new(),
                stderr: Vec::new(),
                elapsed: started.elapsed(),
            };
        }
    };
    let stdout = collect(child.stdout.take());
    let stderr = collect(child.stderr.take());
    let outcome = match wait_or_kill(&mut child, started + timeout) {
        Ok(Some(status)) => status_outcome(status),
        Ok(None) => Outcome::Failed(format!("timed out after {}", format_duration(timeout))),
        Err(e) => Outcome::Failed(format!("cannot wait for {program}: {e}")),
    };
    let deadline = Instant::now() + DRAIN_GRACE;
    Finished {
        outcome,
        stdout: receive(stdout, deadline),
        stderr: receive(stderr, deadline),
        elapsed: started.elapsed(),
    }
}

/// `Ok(Some(status))` when the command exited in time, `Ok(None)` when it
/// was killed at the deadline (and then reaped).
fn wait_or_kill(child: &mut Child, deadline: Instant) -> std::io::Result<Option<ExitStatus>> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
    // Still unreaped, so its pid is still its group's id: the group exists.
    if let Err(e) = posix::kill_group(child.id(), libc::SIGKILL) {
        tracing::warn!(
            pid = child.id(),
            "cannot kill the process group of a timed-out command: {e}"
        );
        // At least the command itself.
        let _ = child.kill();
    }
    child.wait()?;
    Ok(None)
}

fn status_outcome(status: ExitStatus) -> Outcome {
    match (status.code(), status.signal()) {
        (Some(0), _) => Outcome::Done,
        (Some(code), _) => Outcome::Failed(format!("exit status {code}")),
        (None, Some(signal)) => Outcome::Failed(format!("killed by signal {signal}")),
        (None, None) => Outcome::Failed(format!("ended with {status}")),
    }
}

/// Read a pipe on a thread of its own; the first `OUTPUT_LIMIT` bytes come
/// back on the channel once it closes.
fn collect<R: Read + Send + 'static>(pipe: Option<R>) -> Option<mpsc::Receiver<Vec<u8>>> {
    let mut pipe = pipe?;
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("headroom-output".into())
        .spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(kept);
        });
    // Without a reader the pipe is dropped with the closure, and the command
    // sees EPIPE on output it writes: it still runs.
    spawned.ok().map(|_| rx)
}

fn receive(rx: Option<mpsc::Receiver<Vec<u8>>>, deadline: Instant) -> Vec<u8> {
    rx.and_then(|rx| {
        rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .ok()
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn exit_zero_is_done_and_output_is_captured() {
        let f = run(sh("echo out; echo err >&2"), Duration::from_secs(10));
        assert_eq!(f.outcome, Outcome::Done);
        assert_eq!(f.stdout, b"out\n");
        assert_eq!(f.stderr, b"err\n");
    }

    #[test]
    fn exit_status_is_reported() {
        let f = run(sh("exit 3"), Duration::from_secs(10));
        assert_eq!(f.outcome, Outcome::Failed("exit status 3".into()));
    }

    #[test]
    fn output_is_cut_at_the_limit_and_the_rest_drained() {
        // 64 KiB is more than a pipe buffer: without draining, head would block.
        let f = run(
            sh("head -c 65536 /dev/zero; echo done >&2"),
            Duration::from_secs(10),
        );
        assert_eq!(f.outcome, Outcome::Done);
        assert_eq!(f.stdout.len(), OUTPUT_LIMIT);
        assert_eq!(f.stderr, b"done\n");
    }

    #[test]
    fn stdin_is_empty() {
        let f = run(sh("wc -c"), Duration::from_secs(10));
        assert_eq!(String::from_utf8_lossy(&f.stdout).trim(), "0");
    }

    #[test]
    fn a_missing_program_fails_with_its_name() {
        let f = run(Command::new("/nonexistent/hook"), Duration::from_secs(10));
        let Outcome::Failed(why) = f.outcome else {
            panic!("expected a failure, got {:?}", f.outcome);
        };
        assert!(why.starts_with("cannot run /nonexistent/hook: "), "{why}");
    }

    #[test]
    fn a_timed_out_command_and_its_children_are_killed() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("grandchild");
        // The grandchild would write the marker after 2s unless killed with the group.
        let script = format!(
            "(sleep 2; touch {}) & echo started; sleep 30",
            marker.display()
        );
        let f = run(sh(&script), Duration::from_millis(300));
        assert_eq!(f.outcome, Outcome::Failed("timed out after 300ms".into()));
        assert_eq!(f.stdout, b"started\n");
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "the grandchild survived the group kill");
    }
}
