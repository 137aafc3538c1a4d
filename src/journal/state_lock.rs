//! One daemon per state directory: the lock a daemon holds for its life on
//! the directory of its journal (`/var/lib/headroom` for root,
//! `~/.local/state/headroom` for a user, or where `daemon.journal` or
//! `--journal` put it), so that a second `headroom run` does not act on the
//! same processes and write the same journal.
//!
//! The lock is `flock` on [`LOCK_NAME`] in that directory, taken before the
//! daemon samples and released by the kernel when the daemon's process
//! ends, however it ends: a lock file left by a daemon killed with
//! `kill -9` blocks no one. After taking it, the daemon writes who it is
//! into the file ([`Holder`]: pid, user, command line, start, HTTP address);
//! a second daemon that finds the lock taken reads that to say who holds
//! it. What it reads is only a hint: at most [`DETAILS_MAX`] bytes, and
//! garbage, an empty file (the holder has not written yet) or a file from
//! an older holder are reported as such, never trusted further.
//!
//! The directory is the journal's, with the journal's rules: as root it must
//! be one only root can change ([`crate::os::trusted_path`]), created 0700
//! if missing; the file is opened without following a link (`O_NOFOLLOW`),
//! without blocking on a planted FIFO, and must be a regular file of the
//! daemon's own user (root's, as root) that neither group nor others can
//! write.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{
    DirBuilderExt as _, FileExt as _, OpenOptionsExt as _, PermissionsExt as _,
};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::Timestamp;
use crate::os::ffi::flock::{Kind, try_lock};
use crate::report::printable;

/// The lock file's name in the state directory.
pub const LOCK_NAME: &str = "headroom.lock";

/// The most of the lock file a reader reads.
pub const DETAILS_MAX: u64 = 4096;

/// The most of a command line written into the lock file.
const COMMAND_MAX: usize = 1024;

/// Who holds the lock, as the holder wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub uid: u32,
    #[serde(default)]
    pub user: Option<String>,
    /// Its command line, cut to a length that fits a message.
    pub command: String,
    pub started: Timestamp,
    /// Where it serves HTTP (`127.0.0.1:9717`); `None` with HTTP off.
    #[serde(default)]
    pub address: Option<String>,
    /// Whether it listens there yet (another process may hold the port).
    #[serde(default)]
    pub listening: bool,
}

impl Holder {
    /// This process, started now, serving nothing yet.
    pub fn this_process() -> Self {
        let uid = crate::os::this_process::effective_uid();
        let user = std::fs::read_to_string(crate::os::passwd::SYSTEM_PASSWD)
            .ok()
            .and_then(|text| crate::os::passwd::by_uid(&text, uid).map(|e| e.name.to_string()));
        let mut command = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        if command.len() > COMMAND_MAX {
            let mut end = COMMAND_MAX;
            while !command.is_char_boundary(end) {
                end -= 1;
            }
            command.truncate(end);
            command.push('…');
        }
        Self {
            pid: std::process::id(),
            uid,
            user,
            command,
            started: Timestamp::now(),
            address: None,
            listening: false,
        }
    }

    /// The holder in words, for the message of a daemon refused: `pid 42
    /// (user root), started 2026-11-25T09:16:45.120Z, serving
    /// http://127.0.0.1:9717/, command: headroom run`. Everything in it
    /// came from a file and is escaped.
    pub fn describe(&self) -> String {
        let user = match &self.user {
            Some(name) => format!("user {}", printable(name)),
            None => format!("uid {}", self.uid),
        };
        let http = match (&self.address, self.listening) {
            (Some(addr), true) => format!("serving http://{}/", printable(addr)),
            (Some(addr), false) => {
                format!("to serve http://{}/ (not listening yet)", printable(addr))
            }
            (None, _) => "HTTP off".to_string(),
        };
        format!(
            "pid {} ({user}), started {}, {http}, command: {}",
            self.pid,
            self.started,
            printable(&self.command)
        )
    }
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another daemon holds it.
    #[error(
        "another headroom daemon runs on the state directory {}: {}; stop it first (`systemctl \
         stop headroom` where it is the service), or give this one a journal in another \
         directory (--journal FILE)",
        dir.display(),
        holder_words(holder.as_ref())
    )]
    Held {
        dir: PathBuf,
        /// What the lock file says of the holder; `None` when it says
        /// nothing readable.
        holder: Option<Holder>,
    },
    #[error(
        "refusing the lock file {} as root: {what}; {fix}",
        path.display()
    )]
    Untrusted {
        path: PathBuf,
        what: String,
        fix: String,
    },
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn holder_words(holder: Option<&Holder>) -> String {
    match holder {
        Some(h) => h.describe(),
        None => format!(
            "its {LOCK_NAME} names no holder (it has just started, or the file was changed)"
        ),
    }
}

fn io_error(action: &'static str, path: &Path, source: io::Error) -> LockError {
    LockError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The state directory of the journal at `journal`: its directory.
pub fn state_dir(journal: &Path) -> PathBuf {
    match journal.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The lock file of the state directory of the journal at `journal`.
pub fn lock_path(journal: &Path) -> PathBuf {
    state_dir(journal).join(LOCK_NAME)
}

/// The lock, held until dropped (or the process ends).
#[derive(Debug)]
pub struct StateLock {
    file: File,
    path: PathBuf,
    holder: Holder,
}

impl StateLock {
    /// Take the lock of the state directory of the journal at `journal`
    /// for `holder` and write its details. `trusted_uid` `Some(uid)` (a
    /// root daemon) checks the directory as the journal's is checked.
    pub fn acquire(
        journal: &Path,
        trusted_uid: Option<u32>,
        holder: Holder,
    ) -> Result<Self, LockError> {
        let dir = state_dir(journal);
        let path = dir.join(LOCK_NAME);
        if let Some(uid) = trusted_uid {
            check_directory(&path, &dir, uid)?;
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| io_error("create the directory", &dir, e))?;
        if let Some(uid) = trusted_uid {
            check_directory(&path, &dir, uid)?;
        }
        let file = open_lock_file(&path)?;
        check_file(&file, &path, trusted_uid)?;
        // Only its owner may open it: any process that can open a file can
        // flock it, and one of another user holding this lock would keep
        // the daemon from starting.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| io_error("make private", &path, e))?;
        match try_lock(&file, Kind::Exclusive) {
            Ok(true) => {}
            Ok(false) => {
                return Err(LockError::Held {
                    holder: read_holder(&file),
                    dir,
                });
            }
            Err(e) => return Err(io_error("lock", &path, e)),
        }
        let lock = Self { file, path, holder };
        lock.write_details()?;
        Ok(lock)
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Who holds it: this daemon, as written.
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// Say where this daemon serves HTTP (`listening`: already, or once
    /// the address is free).
    pub fn set_address(&mut self, address: String, listening: bool) -> Result<(), LockError> {
        self.holder.address = Some(address);
        self.holder.listening = listening;
        self.write_details()
    }

    fn write_details(&self) -> Result<(), LockError> {
        let mut text = serde_json::to_vec(&self.holder)
            .map_err(|e| io_error("encode the details for", &self.path, io::Error::other(e)))?;
        text.push(b'\n');
        self.file
            .set_len(0)
            .and_then(|()| self.file.write_all_at(&text, 0))
            .map_err(|e| io_error("write", &self.path, e))
    }
}

/// Whether the lock of the state directory of `journal` is held, and by
/// whom: `Ok(None)` when no daemon holds it (or there is no lock file),
/// `Ok(Some(holder))` when one does (`holder` `None` where its file names
/// no one). Reading needs the right to open the file (root's daemon: root).
pub fn holder_of(journal: &Path) -> io::Result<Option<Option<Holder>>> {
    let path = lock_path(journal);
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if try_lock(&file, Kind::Shared)? {
        Ok(None)
    } else {
        Ok(Some(read_holder(&file)))
    }
}

/// Open (creating if missing) the lock file: no link followed, no wait on
/// a FIFO planted there.
fn open_lock_file(path: &Path) -> Result<File, LockError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                LockError::Untrusted {
                    path: path.to_path_buf(),
                    what: format!("{} is a symbolic link", path.display()),
                    fix: format!(
                        "remove it (`rm {}`); headroom creates its own",
                        path.display()
                    ),
                }
            } else {
                io_error("open", path, e)
            }
        })
}

/// The open lock file: a regular file of this daemon's user (as root:
/// root's or `trusted_uid`'s) that neither group nor others can write.
fn check_file(file: &File, path: &Path, trusted_uid: Option<u32>) -> Result<(), LockError> {
    let meta = file
        .metadata()
        .map_err(|e| io_error("read the metadata of", path, e))?;
    let refuse = |what: String| LockError::Untrusted {
        path: path.to_path_buf(),
        what,
        fix: format!(
            "remove it (`rm {}`); headroom creates its own",
            path.display()
        ),
    };
    if !meta.is_file() {
        return Err(refuse(format!("{} is not a regular file", path.display())));
    }
    if let Some(uid) = trusted_uid {
        crate::os::trusted_path::check_owner_and_mode(path, &meta, uid)
            .map_err(|u| refuse(u.what()))?;
    }
    Ok(())
}

fn check_directory(path: &Path, dir: &Path, uid: u32) -> Result<(), LockError> {
    crate::os::trusted_path::check_path(dir, uid).map_err(|u| LockError::Untrusted {
        path: path.to_path_buf(),
        what: u.what(),
        fix: format!(
            "{}, or point --journal (or daemon.journal) at a directory only root can write",
            u.fix("/var/lib/headroom")
        ),
    })
}

/// What the lock file says of its holder: at most [`DETAILS_MAX`] bytes,
/// `None` unless they are one holder's details.
fn read_holder(file: &File) -> Option<Holder> {
    let mut text = Vec::new();
    let mut buf = [0u8; 512];
    // From the start whatever the descriptor's offset, and no further than
    // DETAILS_MAX however large the file.
    while (text.len() as u64) < DETAILS_MAX {
        let n = file.read_at(&mut buf, text.len() as u64).ok()?;
        if n == 0 {
            break;
        }
        let room = usize::try_from(DETAILS_MAX).unwrap_or(usize::MAX) - text.len();
        text.extend_from_slice(&buf[..n.min(room)]);
    }
    parse_holder(&text)
}

/// The holder in the lock file's text, if it is one.
pub fn parse_holder(text: &[u8]) -> Option<Holder> {
    let text = std::str::from_utf8(text).ok()?;
    serde_json::from_str(text.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal_in(dir: &Path) -> PathBuf {
        dir.join("journal.jsonl")
    }

    fn holder(pid: u32) -> Holder {
        Holder {
            pid,
            uid: 0,
            user: Some("root".into()),
            command: "headroom run".into(),
            started: Timestamp(1_764_062_205_120),
            address: None,
            listening: false,
        }
    }

    #[test]
    fn a_second_lock_on_the_same_directory_is_refused_naming_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let journal = journal_in(dir.path());
        let mut first = StateLock::acquire(&journal, None, holder(42)).unwrap();
        first.set_address("127.0.0.1:9800".into(), true).unwrap();
        match StateLock::acquire(&journal, None, holder(43)) {
            Err(LockError::Held { dir: d, holder }) => {
                assert_eq!(d, dir.path());
                let h = holder.expect("the first one's details");
                assert_eq!((h.pid, h.address.as_deref()), (42, Some("127.0.0.1:9800")));
            }
            other => panic!("expected Held, got {other:?}"),
        }
        assert_eq!(
            holder_of(&journal).unwrap().flatten().map(|h| h.pid),
            Some(42)
        );
        drop(first);
        assert_eq!(holder_of(&journal).unwrap(), None);
        let second = StateLock::acquire(&journal, None, holder(43)).unwrap();
        let text = std::fs::read(second.path()).unwrap();
        assert_eq!(parse_holder(&text).map(|h| h.pid), Some(43), "rewritten");
    }

    #[test]
    fn the_lock_file_is_its_owners_alone_so_no_other_user_can_hold_it() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let journal = journal_in(dir.path());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let lock = StateLock::acquire(&journal, None, holder(1)).unwrap();
        assert_eq!(mode(lock.path()), 0o600);
        let path = lock.path().to_path_buf();
        drop(lock);
        // A file left readable by others (which could then flock it) is
        // made private when taken.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let _again = StateLock::acquire(&journal, None, holder(2)).unwrap();
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn another_journal_in_the_same_directory_shares_its_lock() {
        let dir = tempfile::tempdir().unwrap();
        let _first = StateLock::acquire(&journal_in(dir.path()), None, holder(1)).unwrap();
        let other = dir.path().join("other.jsonl");
        assert!(matches!(
            StateLock::acquire(&other, None, holder(2)),
            Err(LockError::Held { .. })
        ));
    }

    #[test]
    fn garbage_in_a_held_lock_file_names_no_holder_and_the_message_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let journal = journal_in(dir.path());
        let first = StateLock::acquire(&journal, None, holder(1)).unwrap();
        // Whatever is in the file: a huge line of garbage.
        std::fs::write(first.path(), "\u{1b}[31m".repeat(10_000)).unwrap();
        let err = StateLock::acquire(&journal, None, holder(2)).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LockError::Held { holder: None, .. }), "{msg}");
        assert!(msg.contains("names no holder"), "{msg}");
    }

    #[test]
    fn a_link_in_place_of_the_lock_file_is_refused_and_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "precious").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(LOCK_NAME)).unwrap();
        let err = StateLock::acquire(&journal_in(dir.path()), None, holder(1)).unwrap_err();
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    }

    #[test]
    fn a_fifo_in_place_of_the_lock_file_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(LOCK_NAME);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            panic!("mkfifo is needed for this test");
        }
        let err = StateLock::acquire(&journal_in(dir.path()), None, holder(1)).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn a_lock_file_others_can_write_is_refused_for_a_root_daemon() {
        use std::os::unix::fs::PermissionsExt as _;
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(&base).unwrap();
        let path = dir.path().join(LOCK_NAME);
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let uid = crate::os::this_process::effective_uid();
        match StateLock::acquire(&journal_in(dir.path()), Some(uid), holder(1)) {
            // The file, or a directory above it that others can change (a
            // shared build directory), refused first as it must be.
            Err(LockError::Untrusted { what, .. }) => assert!(
                what.contains("writable by users other than root") || what.contains("owned by"),
                "{what}"
            ),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn the_description_escapes_what_the_file_says() {
        let mut h = holder(7);
        h.command = "headroom run\n\u{1b}[2Jforged".into();
        h.address = Some("127.0.0.1:9717".into());
        h.listening = true;
        let words = h.describe();
        assert!(
            words.starts_with("pid 7 (user root), started 2025-11-25T09:16:45.120Z, serving http://127.0.0.1:9717/"),
            "{words}"
        );
        assert!(!words.chars().any(char::is_control), "{words}");
    }
}
