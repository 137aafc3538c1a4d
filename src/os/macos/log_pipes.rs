//! The two pipes of the `log stream` child that follows jetsam kills, read
//! at once (compiled on every OS, so that it is tested with a real child
//! on Linux too).
//!
//! `log` writes its entries to stdout and its complaints to stderr. Read
//! one after the other, a child that complains more than a pipe holds (64
//! KiB) blocks on stderr while its reader waits on stdout: no kill arrives
//! and the stream still looks up. [`read_pipes`] reads stdout on the
//! calling thread and stderr on a scoped thread of its own until both end,
//! each line bounded ([`MAX_LINE`]); of the complaints it keeps a count
//! and the first and last lines, each cut to [`MAX_COMPLAINT`] bytes
//! ([`Complaints`]), so a chatty stderr costs nothing that grows.
//! [`StreamStatus`] is what both readers update for the collector status,
//! and [`StreamStatus::state`] says in words how the stream stands: read,
//! silent, complaining, ended or refused.

use std::io::{BufRead as _, BufReader, Read};
use std::sync::Mutex;
use std::sync::mpsc::{SyncSender, TrySendError};

use super::parse::jetsam::{JetsamKill, MAX_LINE, StreamLine, parse_stream_line};

/// The longest complaint kept (the first and the last), in bytes.
pub const MAX_COMPLAINT: usize = 512;

/// How the stream is doing, for the collector status.
#[derive(Debug, Clone, Default)]
pub struct StreamStatus {
    /// A child is running.
    pub up: bool,
    /// Its pid, while up.
    pub pid: Option<u32>,
    /// Lines read from its output since it started (its preamble
    /// included): none yet means it has not been seen to follow.
    pub lines: u64,
    /// Its complaints (stderr) since it started.
    pub complaints: Complaints,
    /// Lines of complaint of every child, for the error count.
    pub complaint_lines: u64,
    /// Why it is down (its exit status and complaints).
    pub down_because: Option<String>,
    /// `log` refused to stream for this user, in its words: it is not
    /// started again.
    pub refused: Option<String>,
    pub restarts: u64,
    /// Lines that were not `log`'s ndjson.
    pub invalid_lines: u64,
    /// Kill lines not written by the kernel (refused).
    pub refused_lines: u64,
    /// Kills dropped because the daemon did not take them in time.
    pub dropped: u64,
}

/// The lines a child wrote on stderr: how many, the first and the last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Complaints {
    pub count: u64,
    pub first: Option<String>,
    pub last: Option<String>,
}

impl Complaints {
    /// Count `line` and keep it as the first or the last, cut to
    /// [`MAX_COMPLAINT`] bytes. Blank lines are not complaints: false.
    pub fn note(&mut self, line: &[u8]) -> bool {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return false;
        }
        let text = crate::model::printable(text);
        let mut cut = MAX_COMPLAINT.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let text = text[..cut].to_string();
        self.count = self.count.saturating_add(1);
        if self.first.is_none() {
            self.first = Some(text);
        } else {
            self.last = Some(text);
        }
        true
    }

    /// The complaints in words (`"log: …"`, or the first and the last of
    /// several), `None` if there were none.
    pub fn summary(&self) -> Option<String> {
        let first = self.first.as_deref()?;
        Some(match (&self.last, self.count) {
            (Some(last), n) if n > 1 => {
                format!("{n} lines on stderr, first \"{first}\", last \"{last}\"")
            }
            _ => format!("\"{first}\""),
        })
    }
}

impl StreamStatus {
    /// Whether the collector is up, and its detail: following once `log`
    /// has written its first line, not before; complaints said either way.
    pub fn state(&self) -> (bool, String) {
        if let Some(words) = &self.refused {
            return (false, format!("`log stream` refused: {words}"));
        }
        let complaints = self
            .complaints
            .summary()
            .map(|c| format!("; `log` complained: {c}"))
            .unwrap_or_default();
        match (self.up, self.pid, &self.down_because) {
            (true, Some(pid), _) if self.lines > 0 => (
                true,
                format!(
                    "following the kernel's memorystatus and low-swap kills with `log stream` \
                     (pid {pid}){complaints}"
                ),
            ),
            (true, Some(pid), _) => (
                false,
                format!("`log stream` (pid {pid}) started and has written nothing yet{complaints}"),
            ),
            (_, _, Some(why)) => (false, why.clone()),
            _ => (false, "starting `log stream`".to_string()),
        }
    }
}

impl StreamStatus {
    /// Note a line of complaint.
    fn complain(&mut self, line: &[u8]) {
        if self.complaints.note(line) {
            self.complaint_lines = self.complaint_lines.saturating_add(1);
        }
    }
}

pub(crate) fn set(status: &Mutex<StreamStatus>, f: impl FnOnce(&mut StreamStatus)) {
    if let Ok(mut s) = status.lock() {
        f(&mut s);
    }
}

/// Read a child's `stdout` (its kills go to `tx`) and `stderr` (its
/// complaints to `status`) at once, until both end. If no thread can be
/// started for stderr, stderr is closed (the child then gets `EPIPE` or
/// `SIGPIPE` if it complains, and ends), and that is said among its
/// complaints.
pub fn read_pipes(
    stdout: impl Read,
    stderr: impl Read + Send,
    tx: &SyncSender<JetsamKill>,
    status: &Mutex<StreamStatus>,
) {
    std::thread::scope(|scope| {
        let drained = std::thread::Builder::new()
            .name("headroom-log-stderr".into())
            .spawn_scoped(scope, || read_complaints(stderr, status));
        if let Err(e) = drained {
            set(status, |s| {
                s.complain(
                    format!("(its stderr was closed: no thread to read it: {e})").as_bytes(),
                );
            });
        }
        read_lines(stdout, tx, status);
    });
}

/// One line of at most [`MAX_LINE`] bytes into `line` (cleared first):
/// `Some(true)` for a line, `Some(false)` for a longer one (its first
/// bytes in `line`, the rest skipped), `None` at the end or on an error.
fn next_line(reader: &mut impl std::io::BufRead, line: &mut Vec<u8>) -> Option<bool> {
    line.clear();
    let limit = u64::try_from(MAX_LINE + 1).unwrap_or(u64::MAX);
    match reader.take(limit).read_until(b'\n', line) {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    if line.len() > MAX_LINE && !line.ends_with(b"\n") {
        // Skip the rest of the overlong line, a buffer at a time.
        loop {
            let (done, used) = match reader.fill_buf() {
                Ok([]) | Err(_) => return Some(false),
                Ok(buf) => match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => (true, i + 1),
                    None => (false, buf.len()),
                },
            };
            reader.consume(used);
            if done {
                return Some(false);
            }
        }
    }
    Some(true)
}

/// Read `log`'s stderr until it ends, noting each line.
fn read_complaints(err: impl Read, status: &Mutex<StreamStatus>) {
    let mut reader = BufReader::new(err);
    let mut line = Vec::with_capacity(1024);
    while next_line(&mut reader, &mut line).is_some() {
        set(status, |s| s.complain(&line));
    }
}

/// Read `log`'s output until it ends, each line at most `MAX_LINE` bytes
/// (a longer one is counted and skipped to its end).
pub fn read_lines(out: impl Read, tx: &SyncSender<JetsamKill>, status: &Mutex<StreamStatus>) {
    let mut reader = BufReader::new(out);
    let mut line = Vec::with_capacity(4096);
    while let Some(whole) = next_line(&mut reader, &mut line) {
        set(status, |s| s.lines = s.lines.saturating_add(1));
        if !whole {
            set(status, |s| s.invalid_lines += 1);
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
    use std::process::{Command, Stdio};
    use std::sync::mpsc::sync_channel;
    use std::time::Duration;

    /// A kill line as `log stream --style ndjson` writes one (the message
    /// of xnu-11417.101.15 kern_memorystatus.c's `%s pid %d [%s] (%s %d
    /// %llus rf:%s) %lluKB - memorystatus_available_pages: %llu` form).
    const KILL: &str = "{\"eventMessage\":\"memorystatus: killing_top_process pid 7 [Python] (vm-pageshortage 0 5s rf:-) 2048KB - memorystatus_available_pages: 1\",\"processID\":0}";

    /// Lines fed as `log` would write them: kills pass, forgeries do not.
    #[test]
    fn lines_are_parsed_and_forgeries_counted() {
        let (tx, rx) = sync_channel(4);
        let status = Mutex::new(StreamStatus::default());
        let forged = KILL.replace("\"processID\":0", "\"processID\":99");
        let long = format!("{{\"eventMessage\":\"{}\"}}", "x".repeat(MAX_LINE));
        let input = format!(
            "Filtering the log data using \"x\"\n{KILL}\n{long}\n{forged}\nnot json\n{KILL}\n"
        );
        read_lines(input.as_bytes(), &tx, &status);
        let kills: Vec<JetsamKill> = rx.try_iter().collect();
        assert_eq!(kills.len(), 2, "the line after the overlong one is read");
        assert_eq!(kills[0].pid, 7);
        let s = status.lock().unwrap();
        assert_eq!((s.refused_lines, s.invalid_lines, s.lines), (1, 2, 6));
    }

    /// A real child that writes more to stderr than a pipe holds before its
    /// first line on stdout: read at once, its kills arrive and its
    /// complaints are counted, the first and last kept. Read stdout first
    /// and stderr after (as before), the child blocks on stderr and no kill
    /// ever arrives: the wait below is a guard that turns that stall into a
    /// failure, not a measure of time.
    #[test]
    fn a_child_that_floods_stderr_first_still_delivers_its_kills() {
        const FLOOD: u32 = 20_000;
        let script = format!(
            "i=0; while [ $i -lt {FLOOD} ]; do echo \"log: complaint $i\" >&2; i=$((i+1)); done; \
             echo 'Filtering the log data'; echo '{KILL}'; echo '{KILL}'"
        );
        let mut child = Command::new("/bin/sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let (tx, rx) = sync_channel(4);
        let status = std::sync::Arc::new(Mutex::new(StreamStatus::default()));
        let reader_status = status.clone();
        let reader = std::thread::spawn(move || read_pipes(stdout, stderr, &tx, &reader_status));
        let first = rx.recv_timeout(Duration::from_secs(300));
        if first.is_err() {
            let _ = child.kill();
            panic!("no kill arrived: the reader stalled on a child blocked writing stderr");
        }
        reader.join().unwrap();
        assert!(child.wait().unwrap().success());
        let kills: Vec<JetsamKill> = first.into_iter().chain(rx.try_iter()).collect();
        assert_eq!(kills.len(), 2);
        let s = status.lock().unwrap();
        assert_eq!(s.lines, 3);
        assert_eq!(s.complaints.count, u64::from(FLOOD));
        assert_eq!(s.complaint_lines, u64::from(FLOOD));
        assert_eq!(s.complaints.first.as_deref(), Some("log: complaint 0"));
        assert_eq!(s.complaints.last.as_deref(), Some("log: complaint 19999"));
    }

    #[test]
    fn complaints_keep_a_count_and_two_bounded_lines() {
        let mut c = Complaints::default();
        assert_eq!(c.summary(), None);
        assert!(!c.note(b"  \n"));
        assert_eq!(c.count, 0, "blank lines are no complaint");
        // timrogers/litra-autotoggle#119: `log`'s refusal as a user.
        c.note(b"log: Must be admin to run 'stream' command\n");
        assert_eq!(
            c.summary().as_deref(),
            Some("\"log: Must be admin to run 'stream' command\"")
        );
        let long = "é".repeat(MAX_COMPLAINT);
        c.note(long.as_bytes());
        c.note(b"log: \x1b[31mred\n");
        assert_eq!(c.count, 3);
        assert_eq!(c.last.as_deref(), Some("log: \\u{1b}[31mred"));
        c.note(long.as_bytes());
        let last = c.last.clone().unwrap();
        assert!(
            last.len() <= MAX_COMPLAINT && last.starts_with('é'),
            "{last}"
        );
        assert!(
            c.summary()
                .unwrap()
                .starts_with("4 lines on stderr, first \"log: Must be admin")
        );
    }

    #[test]
    fn the_state_says_following_only_once_log_has_written() {
        let mut s = StreamStatus {
            up: true,
            pid: Some(42),
            ..StreamStatus::default()
        };
        let (up, detail) = s.state();
        assert!(!up, "started, not yet seen to follow: {detail}");
        assert!(detail.contains("written nothing yet"), "{detail}");
        s.complaints.note(b"log: Could not open the stream");
        let (up, detail) = s.state();
        assert!(!up);
        assert!(
            detail.contains("complained: \"log: Could not open the stream\""),
            "{detail}"
        );
        s.lines = 1;
        let (up, detail) = s.state();
        assert!(up, "{detail}");
        assert!(
            detail.starts_with("following") && detail.contains("complained"),
            "{detail}"
        );
        s.refused = Some("log: Must be admin to run 'stream' command (exit status 77)".into());
        let (up, detail) = s.state();
        assert!(!up);
        assert!(
            detail.starts_with("`log stream` refused: log: Must be admin"),
            "{detail}"
        );
    }
}
