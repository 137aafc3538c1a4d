//! The `log stream` child that follows jetsam kills as the kernel logs
//! them (macOS, root only).
//!
//! Searching the unified log after each exit (`log show`) takes seconds;
//! following it costs one long-lived child: `/usr/bin/log stream --style
//! ndjson --predicate …` ([`super::parse::jetsam::LOG_STREAM_ARGS`]), whose
//! output a thread of its own reads line by line (each at most
//! [`super::parse::jetsam::MAX_LINE`] bytes) and parses
//! ([`super::parse::jetsam::parse_stream_line`]). Kills go to the daemon through a
//! bounded channel ([`QUEUE`]; a kill that finds it full is counted and
//! dropped, never waited for). If `log` exits (killed, upgraded, refused),
//! it is started again after a backoff that doubles from one second to a
//! minute and starts over once a child has lived a minute; its exit status
//! and first line of complaint are kept for the collector status. Dropping
//! the [`JetsamStream`] kills the child.
//!
//! As a user (a LaunchAgent) the stream is not started: `log stream` shows
//! the kernel's entries only to an administrator, and a user's daemon has
//! no business reading everyone's log. [`not_followed`] says so.

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::parse::jetsam::{JetsamKill, LOG_STREAM_ARGS, MAX_LINE, StreamLine, parse_stream_line};

/// Kills waiting for the daemon, at most.
pub const QUEUE: usize = 1024;
/// The program followed.
pub const LOG: &str = "/usr/bin/log";
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// How the stream is doing, for the collector status.
#[derive(Debug, Clone, Default)]
pub struct StreamStatus {
    /// A child is running and its output is being read.
    pub up: bool,
    /// Its pid, while up.
    pub pid: Option<u32>,
    /// Why it is down (its exit status and first complaint).
    pub down_because: Option<String>,
    pub restarts: u64,
    /// Lines that were not `log`'s ndjson.
    pub invalid_lines: u64,
    /// Kill lines not written by the kernel (refused).
    pub refused_lines: u64,
    /// Kills dropped because the daemon did not take them in time.
    pub dropped: u64,
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

/// The words for the collector status of a daemon that does not follow.
pub fn not_followed() -> String {
    "not followed: headroom runs as a user (a LaunchAgent), and `log stream` shows the kernel's \
     jetsam kills only to an administrator; installed as a LaunchDaemon (root) it follows them. \
     A jetsam kill of your process is then a post-mortem with an unknown cause; find it \
     afterwards with `log show --last 10m --predicate 'processID == 0 AND eventMessage CONTAINS \
     \"memorystatus: killing\"'`"
        .to_string()
}

fn set(status: &Mutex<StreamStatus>, f: impl FnOnce(&mut StreamStatus)) {
    if let Ok(mut s) = status.lock() {
        f(&mut s);
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
                    s.down_because = None;
                });
                if let Some(out) = stdout {
                    read_lines(out, tx, status);
                }
                let complaint = stderr
                    .and_then(|e| {
                        let mut text = String::new();
                        e.take(4096).read_to_string(&mut text).ok()?;
                        text.lines()
                            .find(|l| !l.trim().is_empty())
                            .map(str::to_string)
                    })
                    .unwrap_or_default();
                let exit = slot
                    .lock()
                    .ok()
                    .and_then(|mut s| s.take())
                    .and_then(|mut c| c.wait().ok())
                    .map_or_else(|| "an unknown status".to_string(), |s| s.to_string());
                format!(
                    "{LOG} stream (pid {pid}) ended with {exit}{}",
                    if complaint.is_empty() {
                        String::new()
                    } else {
                        format!(": {complaint}")
                    }
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

/// Read `log`'s output until it ends, each line at most `MAX_LINE` bytes
/// (a longer one is counted and skipped to its end).
fn read_lines(out: impl std::io::Read, tx: &SyncSender<JetsamKill>, status: &Mutex<StreamStatus>) {
    let mut reader = BufReader::new(out);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        let limit = u64::try_from(MAX_LINE + 1).unwrap_or(u64::MAX);
        match (&mut reader).take(limit).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > MAX_LINE && !line.ends_with(b"\n") {
            set(status, |s| s.invalid_lines += 1);
            // Skip the rest of the overlong line.
            let mut rest = Vec::new();
            if reader.read_until(b'\n', &mut rest).is_err() {
                return;
            }
            continue;
        }
        match parse_stream_line(&String::from_utf8_lossy(&line)) {
            StreamLine::Kill(kill) => {
                if let Err(TrySendError::Full(_)) = tx.try_send(kill) {
                    set(status, |s| s.dropped += 1);
                }
            }
            StreamLine::Other => {}
            StreamLine::NotKernel { .. } => set(status, |s| s.refused_lines += 1),
            StreamLine::Invalid(_) => set(status, |s| s.invalid_lines += 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a Mac, as root: the stream starts, and stays up.
    #[test]
    fn the_stream_starts_as_root() {
        if crate::os::this_process::effective_uid() != 0 {
            // As a user, `log stream` refuses ("Must be admin"): the stream
            // is then down with that reason, which is what this checks.
            let stream = JetsamStream::start().unwrap();
            std::thread::sleep(Duration::from_secs(2));
            let s = stream.status();
            assert!(s.up || s.down_because.is_some(), "{s:?}");
            return;
        }
        let stream = JetsamStream::start().unwrap();
        std::thread::sleep(Duration::from_secs(2));
        let s = stream.status();
        assert!(s.up, "{s:?}");
        assert!(s.pid.is_some());
        assert_eq!(s.invalid_lines, 0, "{s:?}");
    }

    /// Lines fed as `log` would write them: kills pass, forgeries do not.
    #[test]
    fn lines_are_parsed_and_forgeries_counted() {
        let (tx, rx) = sync_channel(4);
        let status = Mutex::new(StreamStatus::default());
        let kill = "{\"eventMessage\":\"memorystatus: killing_top_process pid 7 [Python] (vm-pageshortage 0 5s rf:-) 2048KB - memorystatus_available_pages: 1\",\"processID\":0}\n";
        let forged = kill.replace("\"processID\":0", "\"processID\":99");
        let input = format!("Filtering the log data using \"x\"\n{kill}{forged}not json\n");
        read_lines(input.as_bytes(), &tx, &status);
        let kills: Vec<JetsamKill> = rx.try_iter().collect();
        assert_eq!(kills.len(), 1);
        assert_eq!(kills[0].pid, 7);
        let s = status.lock().unwrap();
        assert_eq!((s.refused_lines, s.invalid_lines), (1, 1));
    }
}
