//! The daemon's log file, when it has one (`run --log-file`, which the
//! launchd plists pass): its owner and mode, and its rotation by size.
//!
//! launchd opens a job's `StandardErrorPath` once, when it starts the job,
//! and appends to it for the job's life; nothing rotates it, and
//! newsyslog(8) cannot either: it renames the file and signals a pid, and
//! the daemon's stderr would stay on the renamed file. So the daemon
//! rotates its own log: it opens the file itself at start, puts it on
//! stdout and stderr, and once the file passes [`LIMIT`] renames
//! `headroom.log` to `headroom.log.1` (and `.1` to `.2`, up to [`KEEP`]),
//! opens a new one and puts that on stdout and stderr, so at most
//! `(KEEP + 1) × LIMIT` of log is kept. The same path stays in the plist,
//! so what is written before the daemon takes its log over (an early
//! error) lands in the current file too.
//!
//! Run as root, the daemon writes its log only in a directory only root can
//! change ([`crate::os::trusted_path::check_path`]): it renames and creates
//! files there. The file holds other users' process names and notebook
//! paths: a new
//! one is made with [`mode_for`]'s mode (0640 for root, in the root:admin
//! directory admins may read; 0600 for a user's agent), and an existing
//! one is [`judge`]d: anything but a regular file is refused, an owner or
//! mode other than the wanted ones is fixed by `service install` and
//! warned of by the daemon when others could write to it.

use std::fs::File;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Size past which the log is rotated.
pub const LIMIT: u64 = 10 * 1024 * 1024;
/// Rotated logs kept: `headroom.log.1` (newest) to `headroom.log.3`.
pub const KEEP: usize = 3;
/// Bytes written between two looks at the file's size.
pub const CHECK_EVERY: u64 = 64 * 1024;

/// What was found at the log's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// A regular file (not a directory, FIFO, device or socket).
    pub regular: bool,
    pub uid: u32,
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

/// What to do with an existing log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Owner and mode are the wanted ones.
    Fine,
    /// Set the wanted owner and mode: what differs, for a message.
    Fix(Vec<String>),
    /// Not a file a log can be appended to.
    Refuse(String),
}

/// The mode of a new log file for a daemon running as `euid`: 0640 for root
/// (the LaunchDaemon's log directory is root:admin 0750, so admins read the
/// log without sudo), 0600 for anyone else.
pub fn mode_for(euid: u32) -> u32 {
    if euid == 0 { 0o640 } else { 0o600 }
}

/// `found` against the owner (`uid`) and `mode` wanted.
pub fn judge(found: &Found, uid: u32, mode: u32) -> Verdict {
    if !found.regular {
        return Verdict::Refuse("it is not a regular file".to_owned());
    }
    let mut differs = Vec::new();
    if found.uid != uid {
        differs.push(format!("owned by uid {}, not {uid}", found.uid));
    }
    if found.mode != mode {
        differs.push(format!("mode {:04o}, not {mode:04o}", found.mode));
    }
    if differs.is_empty() {
        Verdict::Fine
    } else {
        Verdict::Fix(differs)
    }
}

/// Why a log file found so is one the daemon (`euid`) should not write:
/// someone else owns it, or its group or others may write to it (and so
/// forge or erase lines). `None` if neither.
pub fn unsafe_to_write(found: &Found, euid: u32) -> Option<String> {
    if found.uid != euid {
        Some(format!("it is owned by uid {}, not {euid}", found.uid))
    } else if found.mode & 0o022 != 0 {
        Some(format!(
            "its group or others may write to it (mode {:04o}); fix it with `chmod go-w`",
            found.mode
        ))
    } else {
        None
    }
}

/// The renames of one rotation, in the order to make them: the oldest kept
/// log replaced by the one before it, …, `path` to `path.1`.
pub fn renames(path: &Path, keep: usize) -> Vec<(PathBuf, PathBuf)> {
    let numbered = |n: usize| {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    };
    let mut out: Vec<(PathBuf, PathBuf)> = (1..keep)
        .rev()
        .map(|n| (numbered(n), numbered(n + 1)))
        .collect();
    if keep > 0 {
        out.push((path.to_path_buf(), numbered(1)));
    }
    out
}

/// What was found at `path`, without following a link (a link is
/// "not a regular file").
pub fn look(path: &Path) -> io::Result<Found> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::symlink_metadata(path)?;
    Ok(Found {
        regular: m.file_type().is_file(),
        uid: m.uid(),
        mode: m.mode() & 0o7777,
    })
}

/// Open `path` to append, never through a link, creating it with `mode`
/// (set exactly, whatever the umask) if missing.
fn open_append(path: &Path, mode: u32) -> io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    match std::fs::OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => {
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            Ok(file)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => std::fs::OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path),
        Err(e) => Err(e),
    }
}

/// The log being written, once [`take_over`] has run.
struct Rotating {
    path: PathBuf,
    mode: u32,
    /// After a rotation failed: bytes still to be written before the next
    /// try.
    backoff: u64,
}

static ROTATING: Mutex<Option<Rotating>> = Mutex::new(None);
/// Bytes written since the size was last looked at.
static WRITTEN: AtomicU64 = AtomicU64::new(0);

/// Take the log over: open `path` (created with [`mode_for`]'s mode if
/// missing), put it on stdout and stderr, and rotate it from now on as
/// records are written ([`wrote`]). Returns a warning for an existing file
/// others could write to (the daemon writes on: the file is its only log).
pub fn take_over(path: &Path) -> io::Result<Option<String>> {
    let euid = crate::os::this_process::effective_uid();
    let mode = mode_for(euid);
    // Root renames and creates files in the log's directory: only a
    // directory only root can change, or another user could swap a file
    // or link in between.
    if euid == 0 {
        let dir = path.parent().unwrap_or(Path::new("/"));
        crate::os::trusted_path::check_path(dir, 0).map_err(|u| {
            io::Error::other(format!(
                "{}, and root writes and rotates its log only where only root can change the \
                 directory; {}",
                u.what(),
                u.fix("/var/log or /Library/Logs")
            ))
        })?;
    }
    if let Ok(found) = look(path)
        && let Verdict::Refuse(why) = judge(&found, euid, mode)
    {
        return Err(io::Error::other(format!("{}: {why}", path.display())));
    }
    let file = open_append(path, mode)?;
    crate::os::this_process::log_to(&file)?;
    let warning = look(path)
        .ok()
        .and_then(|found| unsafe_to_write(&found, euid))
        .map(|why| format!("the log file {}: {why}", path.display()));
    if let Ok(mut slot) = ROTATING.lock() {
        *slot = Some(Rotating {
            path: path.to_path_buf(),
            mode,
            backoff: 0,
        });
    }
    Ok(warning)
}

/// `n` bytes were written to the log: every [`CHECK_EVERY`] bytes, look at
/// its size and rotate it past [`LIMIT`]. A rotation that fails is said
/// once in the log, and tried again after another [`LIMIT`] bytes.
pub fn wrote(n: usize) {
    let n = n as u64;
    if WRITTEN.fetch_add(n, Ordering::Relaxed) + n < CHECK_EVERY {
        return;
    }
    // Another thread looking or rotating: this one writes on.
    let Ok(mut slot) = ROTATING.try_lock() else {
        return;
    };
    let Some(log) = slot.as_mut() else {
        return;
    };
    let since = WRITTEN.swap(0, Ordering::Relaxed);
    if log.backoff > 0 {
        log.backoff = log.backoff.saturating_sub(since);
        return;
    }
    let size = std::fs::metadata(&log.path).map(|m| m.len()).unwrap_or(0);
    if size < LIMIT {
        return;
    }
    let said = match rotate(&log.path, log.mode) {
        Ok(()) => format!(
            "headroom: log rotated at {size} bytes; the lines before are in {}.1",
            log.path.display()
        ),
        Err(e) => {
            log.backoff = LIMIT;
            format!(
                "headroom: cannot rotate the log file {}: {e}; it grows on",
                log.path.display()
            )
        }
    };
    let _ = writeln!(io::stderr(), "{}", crate::report::printable(&said));
}

/// Rename the generations, open a new file at `path` and put it on stdout
/// and stderr.
fn rotate(path: &Path, mode: u32) -> io::Result<()> {
    for (from, to) in renames(path, KEEP) {
        match std::fs::rename(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let file = open_append(path, mode)?;
    crate::os::this_process::log_to(&file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_log_is_fixed_to_the_wanted_owner_and_mode_and_anything_but_a_file_refused() {
        let file = |uid, mode| Found {
            regular: true,
            uid,
            mode,
        };
        assert_eq!(judge(&file(0, 0o640), 0, 0o640), Verdict::Fine);
        // launchd created it before (mode 0644 under the default umask), or
        // someone opened it to all.
        assert_eq!(
            judge(&file(501, 0o666), 0, 0o640),
            Verdict::Fix(vec![
                "owned by uid 501, not 0".into(),
                "mode 0666, not 0640".into()
            ])
        );
        let fifo = Found {
            regular: false,
            uid: 0,
            mode: 0o640,
        };
        assert!(matches!(judge(&fifo, 0, 0o640), Verdict::Refuse(_)));
        assert_eq!(mode_for(0), 0o640);
        assert_eq!(mode_for(501), 0o600);
    }

    #[test]
    fn a_log_others_may_write_to_is_unsafe_and_a_private_one_is_not() {
        let found = |uid, mode| Found {
            regular: true,
            uid,
            mode,
        };
        assert_eq!(unsafe_to_write(&found(0, 0o640), 0), None);
        assert_eq!(unsafe_to_write(&found(0, 0o600), 0), None);
        assert!(
            unsafe_to_write(&found(0, 0o664), 0)
                .unwrap()
                .contains("mode 0664")
        );
        assert!(unsafe_to_write(&found(0, 0o646), 0).is_some());
        assert!(
            unsafe_to_write(&found(501, 0o600), 0)
                .unwrap()
                .contains("uid 501")
        );
    }

    #[test]
    fn a_rotation_moves_each_kept_log_one_place_down_oldest_first() {
        let renames = renames(Path::new("/Library/Logs/headroom/headroom.log"), 3);
        let shown: Vec<String> = renames
            .iter()
            .map(|(a, b)| format!("{} {}", a.display(), b.display()))
            .collect();
        assert_eq!(
            shown,
            [
                "/Library/Logs/headroom/headroom.log.2 /Library/Logs/headroom/headroom.log.3",
                "/Library/Logs/headroom/headroom.log.1 /Library/Logs/headroom/headroom.log.2",
                "/Library/Logs/headroom/headroom.log /Library/Logs/headroom/headroom.log.1",
            ]
        );
    }

    #[test]
    fn a_rotation_keeps_the_lines_in_the_first_generation_and_starts_an_empty_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("headroom.log");
        std::fs::write(&path, "old\n").unwrap();
        std::fs::write(dir.path().join("headroom.log.1"), "older\n").unwrap();
        for (from, to) in renames(&path, KEEP) {
            if from.exists() {
                std::fs::rename(from, to).unwrap();
            }
        }
        let file = open_append(&path, 0o600).unwrap();
        drop(file);
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
        assert_eq!(read("headroom.log"), "");
        assert_eq!(read("headroom.log.1"), "old\n");
        assert_eq!(read("headroom.log.2"), "older\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A link planted at the path is not followed.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
        assert!(open_append(&path, 0o600).is_err());
        assert!(!dir.path().join("elsewhere").exists());
        assert!(!look(&path).unwrap().regular);
    }
}
