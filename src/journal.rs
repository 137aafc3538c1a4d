//! The journal: append-only JSON Lines of [`Event`]s that survives `kill -9`
//! and power loss.
//!
//! It is two sets of files (`layout`): the record of what headroom did
//! (actions, the daemon's start, stop and reloads) and the events of
//! processes (post-mortems, limits crossed), so that no number of
//! processes' ends can rotate an action out of the journal; each user gets
//! a share of the process events ([`shares`]). [`Journals`] writes both,
//! [`read_events`] reads both as one, and [`Follower`] follows them as they
//! grow (`headroom events --follow`). What follows holds for each set.
//!
//! Each event is one line, written with one `write_all` and made durable with
//! `sync_data` before [`Journal::append`] returns. A crash mid-write leaves a
//! torn last line (no trailing newline): readers skip it, and the next
//! [`Journal::open`] cuts it off so the next event starts on a line of its
//! own. When the file would grow past `max_bytes` it is rotated:
//! `journal.jsonl` becomes `journal.jsonl.1`, `.1` becomes `.2`, and so on,
//! keeping `keep` files in all (the current one included).
//! [`read_file_set`] reads them oldest first.
//!
//! Files are created private: directories 0700, the journal 0600 (it names
//! users and their processes).
//!
//! A root daemon opens its journal with [`Journal::open_checked`]: the
//! directory must be one only root can change
//! ([`crate::os::trusted_path`]), and the file, if it exists, a regular
//! file owned by root and writable by neither group nor others. A journal a
//! user prepared (their directory, their 0666 file full of forged lines, a
//! link to a file of root's) is refused with an error that says so and
//! what to do, and left untouched: not cut, not appended to. The file is
//! opened with `O_NOFOLLOW` and its owner and mode checked again on the open
//! descriptor, so nothing swapped in between the checks and the open is
//! used; rotation renames and removes names without following links, and
//! opens the new file the same way.

mod follow;
mod layout;
pub mod shares;
pub mod state_lock;

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use crate::config::DaemonConfig;
use crate::event::Event;
use crate::model::Timestamp;
use crate::os::state_dirs::{StateDirs, state_dirs};

pub use follow::Follower;
pub use layout::{FileSet, Journals, processes_path, read_events};

/// Size and number of journal files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalOptions {
    /// Rotate when the current file would grow past this many bytes.
    pub max_bytes: u64,
    /// Files kept in all, the current one included (at least 1).
    pub keep: usize,
}

impl JournalOptions {
    /// The `[daemon]` section's `journal_max_size` and `journal_files`.
    pub fn from_config(d: &DaemonConfig) -> Self {
        Self {
            max_bytes: d.journal_max_size.bytes(),
            keep: d.journal_files,
        }
    }
}

impl Default for JournalOptions {
    fn default() -> Self {
        Self {
            max_bytes: 16 * 1024 * 1024,
            keep: 5,
        }
    }
}

/// A journal failure, naming the file and saying what to do.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot {action} {}: {source}{}", path.display(), hint(source))]
    Io {
        /// What was being done: `create the directory`, `open`, `append to`, ...
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{} is not a regular file; point daemon.journal at a file path",
        path.display()
    )]
    NotAFile { path: PathBuf },
    #[error("cannot encode an event as JSON: {0}")]
    Encode(#[from] serde_json::Error),
    #[error(
        "refusing to write the journal {} as root: {what}; anyone who can change it could \
         forge the record of what headroom did, or make it write where they choose; {fix}",
        path.display()
    )]
    Untrusted {
        /// The journal file.
        path: PathBuf,
        /// What is wrong, naming the file or directory at fault.
        what: String,
        /// What to do about it.
        fix: String,
    },
}

fn hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::PermissionDenied => {
            "; run as root, or set daemon.journal to a path you can write (headroom events \
             --journal PATH to read one)"
        }
        io::ErrorKind::StorageFull => "; free some disk space",
        _ => "",
    }
}

fn io_error(action: &'static str, path: &Path, source: io::Error) -> JournalError {
    JournalError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// An open journal, appending.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    dir: PathBuf,
    file: File,
    /// Bytes in the current file.
    size: u64,
    opts: JournalOptions,
    /// Who besides root may own the files, when opened checked.
    trusted_uid: Option<u32>,
}

impl Journal {
    /// Open (creating if needed) the journal at `path`. An existing file is
    /// appended to, after a torn last line is cut off. Nobody's ownership is
    /// checked: this is for a daemon running as a user, and for tools; a
    /// root daemon uses [`Journal::open_checked`].
    pub fn open(path: &Path, opts: JournalOptions) -> Result<Self, JournalError> {
        Self::open_as(path, opts, None)
    }

    /// [`Journal::open`] for a daemon running as root: the directory (and
    /// every one above it) must be changeable by root and `trusted_uid`
    /// alone, and an existing file must be a regular file, not a link,
    /// owned by one of them and writable by neither group nor others. A
    /// journal that fails is refused ([`JournalError::Untrusted`]) before
    /// anything is created in or written to it.
    pub fn open_checked(
        path: &Path,
        opts: JournalOptions,
        trusted_uid: u32,
    ) -> Result<Self, JournalError> {
        Self::open_as(path, opts, Some(trusted_uid))
    }

    fn open_as(
        path: &Path,
        opts: JournalOptions,
        trusted_uid: Option<u32>,
    ) -> Result<Self, JournalError> {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if let Some(uid) = trusted_uid {
            // A directory that does not exist yet is checked up to the last
            // one that does: then nobody else can create it.
            check_directory(path, &dir, uid)?;
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| io_error("create the directory", &dir, e))?;
        if let Some(uid) = trusted_uid {
            check_directory(path, &dir, uid)?;
            check_existing_file(path, uid)?;
        }
        let file = open_current(path, trusted_uid)?;
        let size = cut_torn_tail(&file, path)?;
        Ok(Self {
            path: path.to_path_buf(),
            dir,
            file,
            size,
            opts,
            trusted_uid,
        })
    }

    /// The path of the current file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one event (an [`Event`], or one wrapped with more fields) as
    /// one line and make it durable.
    pub fn append(&mut self, e: &impl serde::Serialize) -> Result<(), JournalError> {
        let mut line = serde_json::to_vec(e)?;
        line.push(b'\n');
        let len = line.len() as u64;
        if self.size > 0 && self.size.saturating_add(len) > self.opts.max_bytes {
            self.rotate()?;
        }
        if let Err(e) = self.file.write_all(&line) {
            // Take back a partial line so the next event starts cleanly; if
            // even that fails, the next open cuts it.
            let _ = self.file.set_len(self.size);
            return Err(io_error("append to", &self.path, e));
        }
        self.file
            .sync_data()
            .map_err(|e| io_error("sync", &self.path, e))?;
        self.size += len;
        Ok(())
    }

    /// Shift the rotated files up by one and start a new current file.
    ///
    /// Order, for crash safety: the renames go from the oldest to the newest
    /// (`.3`→`.4`, then `.2`→`.3`, `.1`→`.2`, current→`.1`), each followed by
    /// an fsync of the directory. Every rename then moves a file onto a name
    /// that is free (vacated by the rename before it) or holds the oldest
    /// file, which is dropped on purpose. A crash between two renames leaves
    /// a gap in the numbers (`.2` and `.4`, no `.3`) but every event still in
    /// exactly one file, in age order, and [`read_file_set`] skips gaps. The
    /// fsync after each rename makes it durable before the next starts, so a
    /// power loss cannot keep a later rename and lose an earlier one (which
    /// could overwrite a file whose move was lost). A crash after the last
    /// rename leaves no current file: the next `open` creates it.
    fn rotate(&mut self) -> Result<(), JournalError> {
        let keep = self.opts.keep.max(1);
        let mut dropped = false;
        for (n, old) in rotated_files(&self.path) {
            if n >= keep {
                std::fs::remove_file(&old).map_err(|e| io_error("remove", &old, e))?;
                dropped = true;
            }
        }
        if dropped {
            sync_dir(&self.dir)?;
        }
        if keep == 1 {
            // Only the current file is kept: start it again.
            self.file
                .set_len(0)
                .map_err(|e| io_error("truncate", &self.path, e))?;
            self.file
                .sync_all()
                .map_err(|e| io_error("sync", &self.path, e))?;
            self.size = 0;
            return Ok(());
        }
        for n in (1..keep - 1).rev() {
            let from = numbered(&self.path, n);
            let to = numbered(&self.path, n + 1);
            match std::fs::rename(&from, &to) {
                Ok(()) => sync_dir(&self.dir)?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("rotate", &from, e)),
            }
        }
        let first = numbered(&self.path, 1);
        std::fs::rename(&self.path, &first).map_err(|e| io_error("rotate", &self.path, e))?;
        sync_dir(&self.dir)?;
        self.file = open_current(&self.path, self.trusted_uid)?;
        sync_dir(&self.dir)?;
        self.size = 0;
        tracing::info!(
            "journal rotated: {} is now {}",
            self.path.display(),
            first.display()
        );
        Ok(())
    }
}

/// Where a root daemon's journal belongs, for the advice in errors.
const JOURNAL_HOME: &str = "/var/lib/headroom/";

/// The journal's directory, as [`crate::os::trusted_path::check_path`]
/// sees it.
fn check_directory(path: &Path, dir: &Path, uid: u32) -> Result<(), JournalError> {
    crate::os::trusted_path::check_path(dir, uid).map_err(|u| JournalError::Untrusted {
        path: path.to_path_buf(),
        what: u.what(),
        fix: format!(
            "{}, or set daemon.journal to a path under a directory only root can write, \
             such as {JOURNAL_HOME}",
            u.fix(JOURNAL_HOME)
        ),
    })
}

/// An existing journal file, before it is opened: not a link, owned by
/// root or `uid`, not writable by group or others (ACLs included).
fn check_existing_file(path: &Path, uid: u32) -> Result<(), JournalError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error("read the metadata of", path, e)),
    };
    if meta.file_type().is_symlink() {
        return Err(untrusted_link(path));
    }
    if !meta.is_file() {
        return Err(JournalError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    crate::os::trusted_path::check_path(path, uid).map_err(|u| untrusted_file(path, u.what()))
}

/// A journal file that is not root's own, and what to do about it.
fn untrusted_file(path: &Path, what: String) -> JournalError {
    let p = path.display();
    JournalError::Untrusted {
        path: path.to_path_buf(),
        what,
        fix: format!(
            "headroom did not create it and leaves it as it is: look at what it holds, then \
             remove it (`rm {p}`) so that headroom creates its own, or make it root's with \
             `chown root:root {p} && chmod 600 {p}`"
        ),
    }
}

/// A link in the journal's place: it would make root write wherever it points.
fn untrusted_link(path: &Path) -> JournalError {
    let p = path.display();
    JournalError::Untrusted {
        path: path.to_path_buf(),
        what: format!("{p} is a symbolic link"),
        fix: format!(
            "headroom writes its journal only to a file of its own, never through a link: \
             remove the link (`rm {p}`) and headroom creates the file"
        ),
    }
}

/// Open (creating, 0600) the current file for appending, refusing a link in
/// its place. With `trusted_uid`, the open file's owner and mode are checked
/// too: the check before the open cannot see a file swapped in meanwhile.
fn open_current(path: &Path, trusted_uid: Option<u32>) -> Result<File, JournalError> {
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        // A symlink planted in the journal's place is refused, not followed.
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) if trusted_uid.is_some() => untrusted_link(path),
            _ => io_error("open", path, e),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| io_error("read the metadata of", path, e))?;
    if !meta.is_file() {
        return Err(JournalError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if let Some(uid) = trusted_uid {
        crate::os::trusted_path::check_owner_and_mode(path, &meta, uid)
            .map_err(|u| untrusted_file(path, u.what()))?;
    }
    Ok(file)
}

/// Cut a last line that has no newline (a write torn by a crash); returns
/// the resulting length.
fn cut_torn_tail(file: &File, path: &Path) -> Result<u64, JournalError> {
    let len = file
        .metadata()
        .map_err(|e| io_error("read the metadata of", path, e))?
        .len();
    let keep = last_line_end(file, len).map_err(|e| io_error("read", path, e))?;
    if keep != len {
        tracing::warn!(
            "{}: cut a torn last line of {} bytes (a write interrupted by a crash)",
            path.display(),
            len - keep
        );
        file.set_len(keep)
            .map_err(|e| io_error("truncate", path, e))?;
        file.sync_data().map_err(|e| io_error("sync", path, e))?;
    }
    Ok(keep)
}

/// The length of the file up to and including its last newline.
fn last_line_end(file: &File, len: u64) -> io::Result<u64> {
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|&c| c == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error("sync the directory", dir, e))
}

fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{n}"));
    path.with_file_name(name)
}

/// The rotated files next to `path` (`journal.jsonl.1`, `.2`, ...), newest
/// first. Gaps are allowed; names that are not `<file>.<number>` are ignored.
fn rotated_files(path: &Path) -> Vec<(usize, PathBuf)> {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(usize, PathBuf)> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let file_name = entry.file_name();
            let n = file_name
                .to_str()?
                .strip_prefix(name)?
                .strip_prefix('.')?
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)?;
            Some((n, entry.path()))
        })
        .collect();
    found.sort_unstable_by_key(|&(n, _)| n);
    found
}

/// A line that is not an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptLine {
    pub path: PathBuf,
    /// 1-based.
    pub line: usize,
    pub error: String,
}

/// What [`read_events`] (or [`read_file_set`]) found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ReadOutcome {
    /// Events at or after `since`, oldest first (each file set's in the
    /// order written).
    pub events: Vec<Event>,
    /// The files read, oldest first. Empty: there is no journal yet.
    pub files: Vec<PathBuf>,
    /// Last lines cut short by a crash (or being written as they were read).
    pub torn: usize,
    /// Complete lines that are not events.
    pub corrupt: usize,
    /// The first of them.
    pub first_corrupt: Option<CorruptLine>,
}

/// Read one file set, the file at `path` and its rotated files, oldest
/// first, keeping events at or after `since`. Torn last lines are skipped
/// and counted; corrupt lines are counted and the first reported; neither
/// is an error. [`read_events`] reads the journal's both sets.
pub fn read_file_set(path: &Path, since: Option<Timestamp>) -> Result<ReadOutcome, JournalError> {
    let mut out = ReadOutcome::default();
    let mut files: Vec<PathBuf> = rotated_files(path)
        .into_iter()
        .rev()
        .map(|(_, p)| p)
        .collect();
    files.push(path.to_path_buf());
    for file in files {
        // A FIFO or a device given as the journal is refused, not read forever.
        let f = match crate::regular_file::open(&file) {
            Ok(f) => f,
            // Rotated away or not created yet.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_error("open", &file, e)),
        };
        read_from(BufReader::new(f), &file, since, &mut out)?;
        out.files.push(file);
    }
    Ok(out)
}

/// Longest journal line read as an event. An event is a few hundred bytes
/// (a hook's captured output at most [`crate::act::HOOK_OUTPUT_LIMIT`] per
/// stream, escaped); a longer line is not one the daemon wrote, and is
/// skipped as corrupt without being held in memory.
pub const MAX_LINE: usize = 1024 * 1024;

/// Read the events of one journal file's contents from `reader` into `out`:
/// the reader behind [`read_events`], public so that it is tested and
/// fuzzed on bytes. `path` names the file in [`CorruptLine`]. A last line
/// without a newline is counted as torn, a line that is not an event (or
/// is longer than [`MAX_LINE`]) as corrupt; neither is an error.
pub fn read_from(
    mut reader: impl io::BufRead,
    path: &Path,
    since: Option<Timestamp>,
    out: &mut ReadOutcome,
) -> Result<(), JournalError> {
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        let (n, complete, too_long) =
            read_line(&mut reader, &mut line).map_err(|e| io_error("read", path, e))?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        if !complete {
            out.torn += 1;
            return Ok(());
        }
        let parsed = if too_long {
            Err(format!(
                "a line of more than {MAX_LINE} bytes, not an event headroom wrote"
            ))
        } else if line.trim_ascii().is_empty() {
            continue;
        } else {
            serde_json::from_slice::<Event>(&line).map_err(|e| e.to_string())
        };
        match parsed {
            Ok(event) => {
                if since.is_none_or(|s| event.at >= s) {
                    out.events.push(event);
                }
            }
            Err(error) => {
                out.corrupt += 1;
                if out.first_corrupt.is_none() {
                    out.first_corrupt = Some(CorruptLine {
                        path: path.to_path_buf(),
                        line: number,
                        error,
                    });
                }
            }
        }
    }
}

/// One line into `line`, without its newline, keeping at most [`MAX_LINE`]
/// bytes of it: (bytes consumed, ended by a newline, longer than the limit).
fn read_line(reader: &mut impl io::BufRead, line: &mut Vec<u8>) -> io::Result<(usize, bool, bool)> {
    let mut consumed = 0;
    let mut too_long = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((consumed, false, too_long));
        }
        let (chunk, ends) = match buf.iter().position(|&c| c == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        if chunk.len() > room {
            too_long = true;
        }
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = ends.unwrap_or(buf.len());
        reader.consume(used);
        consumed += used;
        if ends.is_some() {
            return Ok((consumed, true, too_long));
        }
    }
}

/// The journal's path: the `[daemon]` section's `journal`, or the platform
/// default for root or a user.
pub fn path_for(d: &DaemonConfig, is_root: bool) -> PathBuf {
    d.journal.clone().unwrap_or_else(|| default_path(is_root))
}

/// The journal's default path on this platform, for root or a user.
pub fn default_path(is_root: bool) -> PathBuf {
    default_path_for(
        state_dirs(),
        is_root,
        std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

/// [`default_path`] with the platform and environment passed in. A relative
/// `XDG_STATE_HOME` is ignored (the XDG spec says so); without a home the
/// path is relative to the working directory.
pub fn default_path_for(
    dirs: StateDirs,
    is_root: bool,
    xdg_state_home: Option<PathBuf>,
    home: Option<PathBuf>,
) -> PathBuf {
    let home = home.filter(|h| h.is_absolute()).unwrap_or_default();
    let dir = match (dirs, is_root) {
        (StateDirs::Xdg, true) => PathBuf::from("/var/lib/headroom"),
        (StateDirs::Xdg, false) => xdg_state_home
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".local/state"))
            .join("headroom"),
        (StateDirs::MacOs, true) => PathBuf::from("/Library/Application Support/headroom"),
        (StateDirs::MacOs, false) => home.join("Library/Application Support/headroom"),
    };
    dir.join("journal.jsonl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_path_follow_the_config() {
        let config = crate::config::Config::from_toml_str(
            "[daemon]\njournal = \"/j/j.jsonl\"\njournal_max_size = \"1MiB\"\njournal_files = 3",
            "test.toml",
        )
        .unwrap();
        assert_eq!(
            JournalOptions::from_config(&config.daemon),
            JournalOptions {
                max_bytes: 1 << 20,
                keep: 3
            }
        );
        assert_eq!(path_for(&config.daemon, true), PathBuf::from("/j/j.jsonl"));
        let config = crate::config::Config::from_toml_str("", "test.toml").unwrap();
        assert_eq!(path_for(&config.daemon, true), default_path(true));
    }

    #[test]
    fn default_paths_per_platform() {
        let home = Some(PathBuf::from("/home/ada"));
        let p = |dirs, root, xdg: Option<&str>| {
            default_path_for(dirs, root, xdg.map(PathBuf::from), home.clone())
        };
        assert_eq!(
            p(StateDirs::Xdg, true, Some("/x")),
            Path::new("/var/lib/headroom/journal.jsonl")
        );
        assert_eq!(
            p(StateDirs::Xdg, false, Some("/x/state")),
            Path::new("/x/state/headroom/journal.jsonl")
        );
        assert_eq!(
            p(StateDirs::Xdg, false, None),
            Path::new("/home/ada/.local/state/headroom/journal.jsonl")
        );
        assert_eq!(
            p(StateDirs::Xdg, false, Some("relative")),
            Path::new("/home/ada/.local/state/headroom/journal.jsonl")
        );
        assert_eq!(
            p(StateDirs::MacOs, true, None),
            Path::new("/Library/Application Support/headroom/journal.jsonl")
        );
        assert_eq!(
            p(StateDirs::MacOs, false, None),
            Path::new("/home/ada/Library/Application Support/headroom/journal.jsonl")
        );
    }

    #[test]
    fn numbered_names_follow_the_file() {
        assert_eq!(
            numbered(Path::new("/a/j.jsonl"), 3),
            Path::new("/a/j.jsonl.3")
        );
    }

    #[test]
    fn last_line_end_finds_the_last_newline_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut data = b"a\n".to_vec();
        data.extend(std::iter::repeat_n(b'x', 200_000));
        std::fs::write(&path, &data).unwrap();
        let f = File::open(&path).unwrap();
        assert_eq!(last_line_end(&f, data.len() as u64).unwrap(), 2);
        std::fs::write(&path, b"no newline").unwrap();
        assert_eq!(last_line_end(&f, 10).unwrap(), 0);
    }

    fn read_bytes(bytes: &[u8]) -> ReadOutcome {
        let mut out = ReadOutcome::default();
        read_from(bytes, Path::new("j"), None, &mut out).unwrap();
        out
    }

    #[test]
    fn an_overlong_line_is_corrupt_and_the_next_line_still_reads() {
        let event = r#"{"at":1700000000000,"event":"stopped"}"#;
        let mut data = vec![b'x'; MAX_LINE + 10];
        data.push(b'\n');
        data.extend_from_slice(event.as_bytes());
        data.push(b'\n');
        let out = read_bytes(&data);
        assert_eq!((out.corrupt, out.torn, out.events.len()), (1, 0, 1));
        let first = out.first_corrupt.unwrap();
        assert_eq!(first.line, 1);
        assert!(first.error.contains("more than"), "{}", first.error);
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_read_as_a_line() {
        let mut data = vec![b' '; MAX_LINE];
        data.push(b'\n');
        let out = read_bytes(&data);
        assert_eq!((out.corrupt, out.torn), (0, 0));
    }

    #[test]
    fn a_torn_overlong_tail_is_torn() {
        let out = read_bytes(&vec![b'{'; MAX_LINE * 2]);
        assert_eq!((out.corrupt, out.torn), (0, 1));
    }

    #[test]
    fn errors_name_the_path_and_what_to_do() {
        let e = io_error(
            "open",
            Path::new("/var/lib/headroom/journal.jsonl"),
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        let text = e.to_string();
        assert!(
            text.starts_with(
                "cannot open /var/lib/headroom/journal.jsonl: permission denied; run as root"
            ),
            "{text}"
        );
    }
}
