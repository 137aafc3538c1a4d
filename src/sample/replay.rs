//! Recorded traces: writing snapshots to a file and playing them back.
//!
//! A trace is JSON Lines: one [`Snapshot`] per line, as `serde_json` writes
//! it. [`TraceWriter`] appends one line per snapshot and hands each line to
//! the OS as it is written, so a recording cut short (Ctrl-C, `kill -9`)
//! leaves every complete line readable and at most one torn line at the end.
//!
//! [`ReplaySampler`] plays a trace back through the [`Sampler`] trait, for
//! tests, simulations and running the daemon on a recorded incident. It
//! reads the file lazily, one line per [`Sampler::sample`] call, and hands
//! back each snapshot as recorded: [`Snapshot::source`] still names the
//! sampler that recorded it (`linux`, `macos`, …), while [`Sampler::name`]
//! says `replay`. Two things differ: every snapshot it plays is marked
//! [`Snapshot::replayed`] (whatever the trace says), so that the policy's
//! decisions on it carry the mark and the actuator never acts on this
//! machine's processes for them, however the daemon was configured; and
//! looped playback (see [`ReplaySampler::looped`]) shifts `taken_at`
//! forward. [`read_trace`] reads a trace as data, unmarked.
//!
//! Reading rules:
//! - blank lines are skipped;
//! - a line that is not a snapshot fails that one call with
//!   [`SampleError::Trace`] naming its 1-based line number; the next call
//!   goes on with the following line;
//! - an unterminated last line that does not parse is a write cut short and
//!   is skipped without error (an unterminated last line that parses is
//!   played like any other);
//! - after the last snapshot every call returns [`SampleError::EndOfTrace`].

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, Write};
use std::path::{Path, PathBuf};

use super::{SampleError, Sampler};
use crate::model::{Snapshot, Timestamp};

/// Writes snapshots to a trace file, one JSON line each.
///
/// Each [`TraceWriter::write`] issues a single `write` of the whole line to
/// the unbuffered file, so nothing waits in user space: what was written
/// survives the process being interrupted. It does not `fsync` each line
/// (a trace is a recording, not a journal); [`TraceWriter::finish`] does.
#[derive(Debug)]
pub struct TraceWriter {
    path: PathBuf,
    file: File,
    line: Vec<u8>,
}

impl TraceWriter {
    /// Create (or truncate) the trace file at `path`.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path)?;
        Ok(Self {
            path,
            file,
            line: Vec::with_capacity(64 * 1024),
        })
    }

    /// Create the trace file at `path`, failing with
    /// [`io::ErrorKind::AlreadyExists`] if something is there already
    /// (checked and created in one step, `O_EXCL`).
    pub fn create_new(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::options().write(true).create_new(true).open(&path)?;
        Ok(Self {
            path,
            file,
            line: Vec::with_capacity(64 * 1024),
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one snapshot as one line.
    pub fn write(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, snapshot).map_err(io::Error::other)?;
        self.line.push(b'\n');
        self.file.write_all(&self.line)
    }

    /// Flush the file to disk and close it.
    pub fn finish(self) -> io::Result<()> {
        self.file.sync_all()
    }
}

/// Plays a recorded trace back as a [`Sampler`].
#[derive(Debug)]
pub struct ReplaySampler {
    lines: Lines,
    looped: bool,
    /// Mark every snapshot played as [`Snapshot::replayed`]; off only for
    /// [`read_trace`], which reads a trace as data.
    mark: bool,
    /// Completed passes over the trace (looped playback only).
    pass: u64,
    /// Range of timestamps seen in the first pass.
    first_pass: Extent,
}

/// Where the recorded snapshots come from.
#[derive(Debug)]
enum Lines {
    File {
        path: String,
        reader: BufReader<File>,
        /// Number of the line read last, 1-based.
        line: usize,
        buf: String,
    },
    Memory {
        snapshots: Vec<Snapshot>,
        next: usize,
    },
}

/// Earliest and latest timestamps of one pass, and how many snapshots.
#[derive(Debug, Default, Clone, Copy)]
struct Extent {
    min: u64,
    max: u64,
    count: u64,
}

impl Extent {
    fn add(&mut self, t: Timestamp) {
        let t = t.as_millis();
        if self.count == 0 {
            self.min = t;
            self.max = t;
        } else {
            self.min = self.min.min(t);
            self.max = self.max.max(t);
        }
        self.count += 1;
    }

    /// How far each pass is shifted: the span of the trace plus one mean
    /// sampling interval (one second for a single-snapshot trace), so the
    /// first snapshot of a pass follows the last of the one before by an
    /// ordinary interval and time keeps increasing.
    fn period_millis(self) -> u64 {
        let span = self.max - self.min;
        let interval = if self.count > 1 {
            (span / (self.count - 1)).max(1)
        } else {
            1000
        };
        span.saturating_add(interval)
    }
}

impl ReplaySampler {
    /// Open a trace file for playback. Lines are read as they are played.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SampleError> {
        let path = path.as_ref();
        let file = crate::regular_file::open(path).map_err(|source| SampleError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Self::with_lines(Lines::File {
            path: path.display().to_string(),
            reader: BufReader::new(file),
            line: 0,
            buf: String::new(),
        }))
    }

    /// Play snapshots held in memory (tests, simulations).
    pub fn from_snapshots(snapshots: Vec<Snapshot>) -> Self {
        Self::with_lines(Lines::Memory { snapshots, next: 0 })
    }

    fn with_lines(lines: Lines) -> Self {
        Self {
            lines,
            looped: false,
            mark: true,
            pass: 0,
            first_pass: Extent::default(),
        }
    }

    /// Start over at the end instead of returning
    /// [`SampleError::EndOfTrace`]. Each new pass shifts `taken_at` forward
    /// by the trace's span plus one mean sampling interval, so timestamps
    /// keep increasing (process start times are left as recorded). A trace
    /// without a single snapshot still ends.
    pub fn looped(mut self, looped: bool) -> Self {
        self.looped = looped;
        self
    }

    /// The next recorded snapshot, `None` at the end of the trace.
    fn next_recorded(&mut self) -> Result<Option<Snapshot>, SampleError> {
        match &mut self.lines {
            Lines::Memory { snapshots, next } => {
                let snap = snapshots.get(*next).cloned();
                *next += snap.is_some() as usize;
                Ok(snap)
            }
            Lines::File {
                path,
                reader,
                line,
                buf,
            } => loop {
                buf.clear();
                let n = reader.read_line(buf).map_err(|source| SampleError::Read {
                    path: path.clone(),
                    source,
                })?;
                if n == 0 {
                    return Ok(None);
                }
                *line += 1;
                let text = buf.trim();
                if text.is_empty() {
                    continue;
                }
                match serde_json::from_str::<Snapshot>(text) {
                    Ok(snap) => return Ok(Some(snap)),
                    // Unterminated and unparsable: a write cut short.
                    Err(_) if !buf.ends_with('\n') => return Ok(None),
                    Err(e) => {
                        return Err(SampleError::Trace {
                            path: path.clone(),
                            line: *line,
                            reason: e.to_string(),
                        });
                    }
                }
            },
        }
    }

    /// Go back to the first snapshot.
    fn rewind(&mut self) -> Result<(), SampleError> {
        match &mut self.lines {
            Lines::Memory { next, .. } => *next = 0,
            Lines::File {
                path, reader, line, ..
            } => {
                reader.rewind().map_err(|source| SampleError::Read {
                    path: path.clone(),
                    source,
                })?;
                *line = 0;
            }
        }
        Ok(())
    }
}

impl Sampler for ReplaySampler {
    fn name(&self) -> &'static str {
        "replay"
    }

    fn sample(&mut self) -> Result<Snapshot, SampleError> {
        loop {
            match self.next_recorded()? {
                Some(mut snap) => {
                    if self.mark {
                        snap.replayed = true;
                    }
                    if self.pass == 0 {
                        self.first_pass.add(snap.taken_at);
                    } else {
                        let shift = self.first_pass.period_millis().saturating_mul(self.pass);
                        snap.taken_at = Timestamp(snap.taken_at.as_millis().saturating_add(shift));
                    }
                    return Ok(snap);
                }
                None if self.looped && self.first_pass.count > 0 => {
                    self.pass += 1;
                    self.rewind()?;
                }
                None => return Err(SampleError::EndOfTrace),
            }
        }
    }

    /// None: a recorded snapshot carries the statuses it was taken with.
    fn collectors(&self) -> Vec<&dyn crate::model::Collector> {
        Vec::new()
    }
}

/// Read a whole trace into memory, as recorded (not marked as replayed).
pub fn read_trace(path: impl AsRef<Path>) -> Result<Vec<Snapshot>, SampleError> {
    let mut replay = ReplaySampler::open(path)?;
    replay.mark = false;
    let mut snapshots = Vec::new();
    loop {
        match replay.sample() {
            Ok(snap) => snapshots.push(snap),
            Err(SampleError::EndOfTrace) => return Ok(snapshots),
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn period_adds_one_mean_interval_to_the_span() {
        let mut e = Extent::default();
        for t in [1000, 2000, 4000] {
            e.add(Timestamp(t));
        }
        assert_eq!(e.period_millis(), 3000 + 1500);
    }

    #[test]
    fn period_of_a_single_snapshot_is_one_second() {
        let mut e = Extent::default();
        e.add(Timestamp(5));
        assert_eq!(e.period_millis(), 1000);
    }

    #[test]
    fn period_is_positive_when_all_timestamps_are_equal() {
        let mut e = Extent::default();
        e.add(Timestamp(7));
        e.add(Timestamp(7));
        assert_eq!(e.period_millis(), 1);
    }
}
