//! The `log stream` child that follows jetsam kills as the kernel logs
//! them (macOS; root, or an administrator's own agent).
//!
//! Searching the unified log after each exit (`log show`) takes seconds;
//! following it costs one long-lived child: `/usr/bin/log stream --style
//! ndjson --predicate …` ([`super::parse::jetsam::LOG_STREAM_ARGS`]), whose
//! stdout and stderr a thread of its own reads at once
//! ([`super::log_pipes::read_pipes`]: kills parsed line by line, complaints
//! counted, the first and last kept). Kills go to the daemon through a
//! bounded channel ([`QUEUE`]; a kill that finds it full is counted and
//! dropped, never waited for). If `log` exits (killed, upgraded), it is
//! started again after a backoff that doubles from one second to a minute
//! and starts over once a child has lived a minute; its exit status and
//! complaints are kept for the collector status. If `log` refuses this
//! user ([`refusal`]: "Must be admin", exit status 77) it is not started
//! again, and the status says so in `log`'s words. Dropping the
//! [`JetsamStream`] kills the child.
//!
//! Who follows is [`follower`]'s decision ([`who`] reads this process's
//! ids and groups): root follows every kill; a member of group `admin`
//! (the usual account of a personal Mac), run as a LaunchAgent, follows
//! too, since `log stream` shows the kernel's entries to administrators,
//! and keeps only kills of its own user's processes
//! ([`super::parse::post_mortem_sources::OwnProcesses`]); any other user's
//! `log stream` would refuse, so it is not started and [`not_followed`]
//! says so.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::log_pipes::{StreamStatus, read_pipes, set};
use super::parse::jetsam::{JetsamKill, LOG_STREAM_ARGS};
pub use super::parse::post_mortem_sources::not_followed;
use super::parse::post_mortem_sources::{Follower, Following, follower, refusal};

/// Kills waiting for the daemon, at most.
pub const QUEUE: usize = 1024;
/// The program followed.
pub const LOG: &str = "/usr/bin/log";
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// How long `headroom doctor` waits for `log stream` to write or end.
pub const SETTLE: Duration = Duration::from_secs(5);

/// Who this process is, for following jetsam kills: its effective ids, the
/// groups of its credential and, unless those hold `admin`, the groups the
/// directory lists for its user.
pub fn who() -> Follower {
    let euid = crate::os::this_process::effective_uid();
    let egid = super::ffi::groups::effective_gid();
    let mut groups = super::ffi::groups::process_groups();
    let first = follower(euid, egid, &groups);
    if first != Follower::NotAdmin {
        return first;
    }
    if let Some(name) = super::ffi::passwd::user_name(euid) {
        groups.extend(super::ffi::groups::directory_groups(&name, egid));
    }
    follower(euid, egid, &groups)
}

/// See the module documentation.
pub struct JetsamStream {
    kills: Receiver<JetsamKill>,
    status: Arc<Mutex<StreamStatus>>,
    stop: Arc<AtomicBool>,
    child: Arc<Mutex<Option<Child>>>,
}

impl JetsamStream {
    /// Start following (the first child starts at once on a thread of its
    /// own).
    pub fn start() -> std::io::Result<Self> {
        let (tx, kills) = sync_channel(QUEUE);
        let status = Arc::new(Mutex::new(StreamStatus::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let child = Arc::new(Mutex::new(None));
        let (s, st, c) = (status.clone(), stop.clone(), child.clone());
        std::thread::Builder::new()
            .name("headroom-jetsam".into())
            .spawn(move || follow(&tx, &s, &st, &c))?;
        Ok(Self {
            kills,
            status,
            stop,
            child,
        })
    }

    /// The kills read since the last call.
    pub fn drain(&self) -> Vec<JetsamKill> {
        self.kills.try_iter().collect()
    }

    pub fn status(&self) -> StreamStatus {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// How following stands: followed once `log` has written, failed once
    /// it was refused or ended, not yet otherwise.
    pub fn following(&self) -> Following {
        let s = self.status();
        let (up, detail) = s.state();
        if up {
            Following::Followed
        } else if s.refused.is_some() || s.down_because.is_some() {
            Following::Failed(detail)
        } else {
            Following::NotYet(detail)
        }
    }

    /// [`JetsamStream::following`] once `log` has written or ended, or
    /// after `wait` (for `headroom doctor`, which asks once, right after
    /// the start).
    pub fn settled(&self, wait: Duration) -> Following {
        let until = Instant::now() + wait;
        loop {
            let now = self.following();
            if !matches!(now, Following::NotYet(_)) || Instant::now() >= until {
                return now;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for JetsamStream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Ok(mut child) = self.child.lock()
            && let Some(child) = child.as_mut()
        {
            let _ = child.kill();
        }
    }
}

fn follow(
    tx: &SyncSender<JetsamKill>,
    status: &Mutex<StreamStatus>,
    stop: &AtomicBool,
    slot: &Mutex<Option<Child>>,
) {
    let mut backoff = BACKOFF_MIN;
    while !stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let spawned = Command::new(LOG)
            .args(LOG_STREAM_ARGS)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let why = match spawned {
            Err(e) => format!("cannot start {LOG}: {e}"),
            Ok(mut child) => {
                let pid = child.id();
                let stdout = child.stdout.take();
                let stderr = child.stderr.take();
                if let Ok(mut s) = slot.lock() {
                    *s = Some(child);
                }
                set(status, |s| {
                    s.up = true;
                    s.pid = Some(pid);
                    s.lines = 0;
                    s.complaints = Default::default();
                    s.down_because = None;
                });
                if let (Some(out), Some(err)) = (stdout, stderr) {
                    read_pipes(out, err, tx, status);
                }
                let exit = slot
                    .lock()
                    .ok()
                    .and_then(|mut s| s.take())
                    .and_then(|mut c| c.wait().ok());
                let complaints = status
                    .lock()
                    .map(|s| s.complaints.clone())
                    .unwrap_or_default();
                let code = exit.and_then(|e| e.code());
                if let Some(words) = refusal(code, complaints.summary().as_deref()) {
                    set(status, |s| {
                        s.up = false;
                        s.pid = None;
                        s.refused = Some(words);
                    });
                    return;
                }
                format!(
                    "{LOG} stream (pid {pid}) ended with {}{}",
                    exit.map_or_else(|| "an unknown status".to_string(), |s| s.to_string()),
                    complaints
                        .summary()
                        .map(|c| format!(": {c}"))
                        .unwrap_or_default()
                )
            }
        };
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if started.elapsed() >= BACKOFF_MAX {
            backoff = BACKOFF_MIN;
        }
        set(status, |s| {
            s.up = false;
            s.pid = None;
            s.restarts += 1;
            s.down_because = Some(format!(
                "{why}; starting it again in {} s",
                backoff.as_secs()
            ));
        });
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a Mac: whether this user is an administrator, as `id -G` lists
    /// its groups, is what [`who`] finds.
    #[test]
    fn who_agrees_with_id() {
        let out = Command::new("/usr/bin/id").arg("-G").output().unwrap();
        let groups: Vec<u32> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|g| g.parse().ok())
            .collect();
        let euid = crate::os::this_process::effective_uid();
        let expected = if euid == 0 {
            Follower::Root
        } else if groups.contains(&super::super::parse::post_mortem_sources::ADMIN_GID) {
            Follower::Admin
        } else {
            Follower::NotAdmin
        };
        assert_eq!(who(), expected, "id -G: {groups:?}");
    }

    /// On a Mac, as whoever runs the tests: `log stream` is started and its
    /// outcome matches this user: root and administrators follow (its
    /// preamble is read), anyone else is refused in `log`'s words and not
    /// started again.
    #[test]
    fn the_stream_s_outcome_matches_this_user() {
        let stream = JetsamStream::start().unwrap();
        let outcome = stream.settled(Duration::from_secs(20));
        let s = stream.status();
        match who() {
            Follower::Root | Follower::Admin => {
                assert_eq!(outcome, Following::Followed, "{s:?}");
                assert!(s.pid.is_some() && s.lines > 0, "{s:?}");
                assert_eq!(s.invalid_lines, 0, "{s:?}");
            }
            Follower::NotAdmin => {
                assert!(
                    matches!(&outcome, Following::Failed(w) if w.contains("Must be admin")),
                    "{outcome:?} {s:?}"
                );
                assert!(s.refused.is_some() && s.restarts == 0, "{s:?}");
            }
        }
    }
}
