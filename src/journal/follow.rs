//! Following the journal as the daemon writes it, as `tail -F` follows a
//! log: `headroom events --follow`.
//!
//! A [`Follower`] first reads what is there (both file sets, rotated files
//! oldest first, as [`super::read_events`] does), keeping an open handle on
//! each set's current file and the offset just past its last complete line.
//! Each [`Follower::poll`] then reads the lines completed since. Rotation
//! renames the current file to `.1` and starts a new one under the name:
//! the handle still reads the renamed file, so what was written to it
//! before the rename is read to its end, and then the new file from its
//! start. A file cut shorter than what was read (truncated by hand) is read
//! again from its start. A line being written is read once its newline is
//! there; a line longer than [`MAX_LINE`] is counted as corrupt and skipped
//! without being held in memory.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use super::layout::merge;
use super::{CorruptLine, JournalError, MAX_LINE, ReadOutcome, io_error, processes_path};
use crate::event::Event;
use crate::model::Timestamp;

/// Both file sets of one journal, followed.
#[derive(Debug)]
pub struct Follower {
    record: Tail,
    processes: Tail,
    since: Option<Timestamp>,
}

impl Follower {
    /// Read the journal at `path` (events at or after `since`, both sets
    /// merged by time, as [`super::read_events`] reads them) and keep the
    /// place, to read what is written next with [`Follower::poll`].
    pub fn start(
        path: &Path,
        since: Option<Timestamp>,
    ) -> Result<(Self, ReadOutcome), JournalError> {
        let (record, first) = Tail::start(path, since)?;
        let (processes, second) = Tail::start(&processes_path(path), since)?;
        let follower = Self {
            record,
            processes,
            since,
        };
        Ok((follower, merge(first, second)))
    }

    /// The events completed since the last call (or since
    /// [`Follower::start`]), at or after `since`, merged by time.
    pub fn poll(&mut self) -> Result<ReadOutcome, JournalError> {
        let first = self.record.poll(self.since)?;
        let second = self.processes.poll(self.since)?;
        Ok(merge(first, second))
    }
}

/// One file set: the name of its current file and the file being read.
#[derive(Debug)]
struct Tail {
    path: PathBuf,
    open: Option<FollowedFile>,
}

/// A file being read: where its complete lines end, and which file it is.
#[derive(Debug)]
struct FollowedFile {
    file: File,
    /// Device and inode: the name holds another file once it is rotated.
    id: (u64, u64),
    /// Just past the last complete line read.
    offset: u64,
    /// Complete lines read, for [`CorruptLine::line`].
    lines: usize,
    /// Inside a line longer than [`MAX_LINE`]: skip to its newline.
    skipping: bool,
}

impl Tail {
    fn start(path: &Path, since: Option<Timestamp>) -> Result<(Self, ReadOutcome), JournalError> {
        let mut out = ReadOutcome::default();
        // The current file is opened first: were the set rotated while the
        // older files are read, the file held open is the one that became
        // `.1`, skipped there and read here to its end.
        let mut tail = Tail {
            path: path.to_path_buf(),
            open: open(path)?,
        };
        let held = tail.open.as_ref().map(|r| r.id);
        for (_, rotated) in super::rotated_files(path).into_iter().rev() {
            let Some(mut reading) = open(&rotated)? else {
                continue;
            };
            if Some(reading.id) == held {
                continue;
            }
            if reading.drain(&rotated, since, &mut out)? > 0 {
                out.torn += 1;
            }
            out.files.push(rotated);
        }
        if let Some(reading) = &mut tail.open {
            if reading.drain(path, since, &mut out)? > 0 {
                out.torn += 1;
            }
            out.files.push(path.to_path_buf());
        }
        Ok((tail, out))
    }

    fn poll(&mut self, since: Option<Timestamp>) -> Result<ReadOutcome, JournalError> {
        let mut out = ReadOutcome::default();
        let path = self.path.clone();
        if let Some(reading) = &mut self.open {
            reading.drain(&path, since, &mut out)?;
        }
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            // Renamed away, its successor not made yet: the handle held
            // still reads the old file.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io_error("read the metadata of", &path, e)),
        };
        let id = (meta.dev(), meta.ino());
        match &mut self.open {
            Some(reading) if reading.id == id => {
                if meta.len() < reading.offset {
                    // Cut shorter than what was read: read it again.
                    reading.offset = 0;
                    reading.lines = 0;
                    reading.skipping = false;
                    reading.drain(&path, since, &mut out)?;
                }
            }
            held => {
                // Rotated (or created): the rest of the old file, then the new.
                if let Some(reading) = held {
                    reading.drain(&path, since, &mut out)?;
                }
                self.open = open(&path)?;
                if let Some(reading) = &mut self.open {
                    reading.drain(&path, since, &mut out)?;
                }
            }
        }
        Ok(out)
    }
}

/// Open `path` to read from its start; `None` if there is no such file.
fn open(path: &Path) -> Result<Option<FollowedFile>, JournalError> {
    let file = match crate::regular_file::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("open", path, e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| io_error("read the metadata of", path, e))?;
    Ok(Some(FollowedFile {
        file,
        id: (meta.dev(), meta.ino()),
        offset: 0,
        lines: 0,
        skipping: false,
    }))
}

impl FollowedFile {
    /// Read the lines completed past `offset` into `out`; the bytes of an
    /// unfinished last line are left for the next call. Returns how many
    /// such bytes there were.
    fn drain(
        &mut self,
        path: &Path,
        since: Option<Timestamp>,
        out: &mut ReadOutcome,
    ) -> Result<usize, JournalError> {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut pending: Vec<u8> = Vec::new();
        let mut pos = self.offset;
        loop {
            let n = match self.file.read_at(&mut chunk, pos) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error("read", path, e)),
            };
            if n == 0 {
                return Ok(pending.len());
            }
            pos += n as u64;
            let mut data = &chunk[..n];
            while let Some(i) = data.iter().position(|&b| b == b'\n') {
                let (line, rest) = (&data[..i], &data[i + 1..]);
                self.lines += 1;
                if self.skipping {
                    self.skipping = false;
                } else {
                    pending.extend_from_slice(line);
                    self.take(&pending, path, since, out);
                }
                pending.clear();
                self.offset = pos - rest.len() as u64;
                data = rest;
            }
            if self.skipping {
                self.offset = pos;
            } else {
                pending.extend_from_slice(data);
                if pending.len() > MAX_LINE {
                    self.corrupt(
                        path,
                        self.lines + 1,
                        format!(
                            "a line of more than {MAX_LINE} bytes, not an event headroom wrote"
                        ),
                        out,
                    );
                    pending = Vec::new();
                    self.skipping = true;
                    self.offset = pos;
                }
            }
        }
    }

    /// One complete line (without its newline): an event, or a corrupt line.
    fn take(&self, line: &[u8], path: &Path, since: Option<Timestamp>, out: &mut ReadOutcome) {
        if line.trim_ascii().is_empty() {
            return;
        }
        match serde_json::from_slice::<Event>(line) {
            Ok(event) => {
                if since.is_none_or(|s| event.at >= s) {
                    out.events.push(event);
                }
            }
            Err(e) => self.corrupt(path, self.lines, e.to_string(), out),
        }
    }

    fn corrupt(&self, path: &Path, line: usize, error: String, out: &mut ReadOutcome) {
        out.corrupt += 1;
        if out.first_corrupt.is_none() {
            out.first_corrupt = Some(CorruptLine {
                path: path.to_path_buf(),
                line,
                error,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;
    use crate::event::EventKind;
    use crate::journal::{Journal, JournalOptions};

    fn reload(at: u64) -> Event {
        Event {
            at: Timestamp(at),
            kind: EventKind::ConfigReloaded {
                path: "/etc/headroom.toml".into(),
                error: None,
            },
        }
    }

    fn times(read: &ReadOutcome) -> Vec<u64> {
        read.events.iter().map(|e| e.at.as_millis()).collect()
    }

    #[test]
    fn reads_what_is_there_then_what_is_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut j = Journal::open(&path, JournalOptions::default()).unwrap();
        j.append(&reload(1)).unwrap();
        let (mut f, first) = Follower::start(&path, None).unwrap();
        assert_eq!(times(&first), [1]);
        assert_eq!(times(&f.poll().unwrap()), Vec::<u64>::new());
        j.append(&reload(2)).unwrap();
        j.append(&reload(3)).unwrap();
        assert_eq!(times(&f.poll().unwrap()), [2, 3]);
    }

    #[test]
    fn a_journal_made_after_the_start_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let (mut f, first) = Follower::start(&path, None).unwrap();
        assert!(first.files.is_empty());
        let mut j = Journal::open(&path, JournalOptions::default()).unwrap();
        j.append(&reload(5)).unwrap();
        assert_eq!(times(&f.poll().unwrap()), [5]);
    }

    #[test]
    fn rotation_loses_nothing_and_repeats_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let line = serde_json::to_string(&reload(1)).unwrap().len() as u64 + 1;
        // Room for two events per file.
        let opts = JournalOptions {
            max_bytes: 2 * line,
            keep: 3,
        };
        let mut j = Journal::open(&path, opts).unwrap();
        j.append(&reload(1)).unwrap();
        let (mut f, first) = Follower::start(&path, None).unwrap();
        assert_eq!(times(&first), [1]);
        let mut seen = Vec::new();
        for at in 2..=7 {
            j.append(&reload(at)).unwrap();
            // Every other event is read between rotations, the rest after.
            if at % 2 == 0 {
                seen.extend(times(&f.poll().unwrap()));
            }
        }
        seen.extend(times(&f.poll().unwrap()));
        assert_eq!(seen, [2, 3, 4, 5, 6, 7]);
        assert!(dir.path().join("journal.jsonl.1").exists(), "it rotated");
    }

    #[test]
    fn a_line_is_read_once_its_newline_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let text = serde_json::to_string(&reload(9)).unwrap();
        let mut file = File::create(&path).unwrap();
        file.write_all(&text.as_bytes()[..10]).unwrap();
        let (mut f, first) = Follower::start(&path, None).unwrap();
        assert!(first.events.is_empty());
        assert_eq!(first.torn, 1);
        file.write_all(&text.as_bytes()[10..]).unwrap();
        assert_eq!(times(&f.poll().unwrap()), Vec::<u64>::new());
        file.write_all(b"\n").unwrap();
        assert_eq!(times(&f.poll().unwrap()), [9]);
    }

    #[test]
    fn since_holds_for_what_follows_and_bad_lines_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let (mut f, _) = Follower::start(&path, Some(Timestamp(10))).unwrap();
        let mut file = File::create(&path).unwrap();
        let old = serde_json::to_string(&reload(5)).unwrap();
        let new = serde_json::to_string(&reload(15)).unwrap();
        writeln!(file, "{old}\nnot an event\n{new}").unwrap();
        let read = f.poll().unwrap();
        assert_eq!(times(&read), [15]);
        assert_eq!(read.corrupt, 1);
        assert_eq!(read.first_corrupt.unwrap().line, 2);
    }

    #[test]
    fn a_truncated_file_is_read_again_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut j = Journal::open(&path, JournalOptions::default()).unwrap();
        j.append(&reload(1)).unwrap();
        j.append(&reload(2)).unwrap();
        let (mut f, _) = Follower::start(&path, None).unwrap();
        drop(j);
        let text = serde_json::to_string(&reload(3)).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap()
            .write_all(format!("{text}\n").as_bytes())
            .unwrap();
        assert_eq!(times(&f.poll().unwrap()), [3]);
    }
}
