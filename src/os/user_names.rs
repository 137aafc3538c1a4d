//! uid → user name for every sampler: one bounded cache.
//!
//! Every process of one user shares the text of its name ([`SharedStr`]).
//! Where the names come from:
//!
//! - Linux: the passwd file ([`passwd`]), read whole on first use and again
//!   only when its modification time changed; names given before a re-read
//!   are forgotten. A uid the file does not know is asked about again on
//!   later samples, at the cost of one `stat` of the file per sample
//!   ([`UserNames::start_sample`] opens one) however many such uids the
//!   sample meets, and is not remembered: the cache holds the file's
//!   accounts and nothing else, and only root can change the file. NSS
//!   (LDAP, sssd) is not asked: the sampling loop must not wait on a
//!   directory server.
//! - macOS: `getpwuid_r`, one uid at a time (Open Directory answers it, for
//!   local accounts and any directory the Mac is bound to). Each answer,
//!   a name or its absence, is kept until [`DIRECTORY_REFRESH`] has passed,
//!   so that an account added or renamed shows within it; at most
//!   [`DIRECTORY_MAX_ENTRIES`] are kept (a full cache starts over).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::model::SharedStr;
use crate::os::passwd;

/// How long the answers of a directory lookup are kept.
pub const DIRECTORY_REFRESH: Duration = Duration::from_secs(300);

/// The most directory answers kept at once.
pub const DIRECTORY_MAX_ENTRIES: usize = 4096;

/// The cache. See the module documentation.
#[derive(Debug)]
pub struct UserNames {
    /// A passwd file: its accounts (`Some` only). A directory: every uid
    /// asked about, `None` where no account has it.
    names: HashMap<u32, Option<SharedStr>>,
    accounts: Accounts,
}

/// Where the names come from.
#[derive(Debug)]
enum Accounts {
    PasswdFile {
        path: PathBuf,
        /// `None` until first read; then the modification time it was read
        /// at (`None` inside: the file could not be examined).
        read_at: Option<Option<SystemTime>>,
        /// Whether this sample already looked at the file.
        checked: bool,
    },
    Directory {
        /// Asks for one uid's name.
        lookup: fn(u32) -> Option<String>,
        /// When the kept answers are forgotten.
        forget_at: Instant,
    },
}

impl UserNames {
    /// This system's accounts: `/etc/passwd` on Linux, `getpwuid_r` on
    /// macOS.
    pub fn system() -> Self {
        #[cfg(target_os = "linux")]
        {
            Self::passwd_file(passwd::SYSTEM_PASSWD)
        }
        #[cfg(target_os = "macos")]
        {
            Self::directory(crate::os::macos::ffi::passwd::user_name)
        }
    }

    /// The accounts of a passwd file.
    pub fn passwd_file(path: impl Into<PathBuf>) -> Self {
        Self {
            names: HashMap::new(),
            accounts: Accounts::PasswdFile {
                path: path.into(),
                read_at: None,
                checked: false,
            },
        }
    }

    /// The accounts `lookup` finds one uid at a time.
    pub fn directory(lookup: fn(u32) -> Option<String>) -> Self {
        Self {
            names: HashMap::new(),
            accounts: Accounts::Directory {
                lookup,
                forget_at: Instant::now() + DIRECTORY_REFRESH,
            },
        }
    }

    /// A new sample begins: the passwd file may be looked at once more, and
    /// directory answers older than [`DIRECTORY_REFRESH`] are forgotten.
    pub fn start_sample(&mut self) {
        self.start_sample_at(Instant::now());
    }

    fn start_sample_at(&mut self, now: Instant) {
        match &mut self.accounts {
            Accounts::PasswdFile { checked, .. } => *checked = false,
            Accounts::Directory { forget_at, .. } => {
                if now >= *forget_at {
                    self.names.clear();
                    *forget_at = now + DIRECTORY_REFRESH;
                }
            }
        }
    }

    /// The name of `uid`, or `None` if no account has it.
    pub fn name(&mut self, uid: u32) -> Option<SharedStr> {
        if let Some(known) = self.names.get(&uid) {
            return known.clone();
        }
        match &mut self.accounts {
            Accounts::PasswdFile {
                path,
                read_at,
                checked,
            } => {
                if !*checked {
                    *checked = true;
                    reload_if_changed(path, read_at, &mut self.names);
                }
                self.names.get(&uid).cloned().flatten()
            }
            Accounts::Directory { lookup, .. } => {
                let name = lookup(uid).map(SharedStr::from);
                if self.names.len() >= DIRECTORY_MAX_ENTRIES {
                    self.names.clear();
                }
                self.names.insert(uid, name.clone());
                name
            }
        }
    }
}

/// Read the passwd file into `names` if its modification time is not the
/// one it was read at.
fn reload_if_changed(
    path: &std::path::Path,
    read_at: &mut Option<Option<SystemTime>>,
    names: &mut HashMap<u32, Option<SharedStr>>,
) {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    if *read_at == Some(modified) {
        return;
    }
    *read_at = Some(modified);
    // Unreadable or missing: no names, until the file changes.
    let text = std::fs::read_to_string(path).unwrap_or_default();
    names.clear();
    for entry in passwd::entries(&text) {
        // The first entry of a uid counts, as getpwuid answers.
        names
            .entry(entry.uid)
            .or_insert_with(|| Some(SharedStr::from(entry.name)));
    }
}

/// The name of `uid` in this system's accounts, looked up once (for a
/// message, not per sample): the passwd file on Linux, `getpwuid_r` on
/// macOS.
pub fn user_name(uid: u32) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let text = std::fs::read_to_string(passwd::SYSTEM_PASSWD).ok()?;
        passwd::by_uid(&text, uid).map(|entry| entry.name.to_owned())
    }
    #[cfg(target_os = "macos")]
    {
        crate::os::macos::ffi::passwd::user_name(uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn passwd_users(text: &str) -> (tempfile::TempDir, PathBuf, UserNames) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passwd");
        std::fs::write(&path, text).unwrap();
        let users = UserNames::passwd_file(&path);
        (dir, path, users)
    }

    /// Rewrite a passwd file with a modification time that differs even on
    /// file systems with coarse timestamps.
    fn rewrite(path: &std::path::Path, text: &str, age: u64) {
        std::fs::write(path, text).unwrap();
        let later = SystemTime::now() + Duration::from_secs(age);
        std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_modified(later))
            .unwrap();
    }

    thread_local! {
        /// The accounts [`fake_lookup`] answers from, and the uids asked.
        static DIRECTORY: RefCell<(HashMap<u32, &'static str>, Vec<u32>)> =
            RefCell::new((HashMap::new(), Vec::new()));
    }

    fn fake_lookup(uid: u32) -> Option<String> {
        DIRECTORY.with_borrow_mut(|(names, asked)| {
            asked.push(uid);
            names.get(&uid).map(|n| n.to_string())
        })
    }

    /// A directory cache in front of [`fake_lookup`], its accounts and
    /// questions reset (a test thread may run more than one test).
    fn fake_directory() -> UserNames {
        DIRECTORY.with_borrow_mut(|(names, asked)| {
            *names = HashMap::from([(0, "root"), (501, "ann")]);
            asked.clear();
        });
        UserNames::directory(fake_lookup)
    }

    fn asked() -> Vec<u32> {
        DIRECTORY.with_borrow(|(_, asked)| asked.clone())
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn root_has_a_name() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        let mut users = UserNames::system();
        users.start_sample();
        assert_eq!(users.name(0).as_deref(), Some("root"));
    }

    /// The system's own lookup, `getpwuid_r` on a Mac.
    #[cfg(target_os = "macos")]
    #[test]
    fn getpwuid_names_root_and_this_process_s_user() {
        assert_eq!(
            crate::os::macos::ffi::passwd::user_name(0).as_deref(),
            Some("root")
        );
        assert_eq!(user_name(0).as_deref(), Some("root"));
        let me = crate::os::this_process::effective_uid();
        let mut users = UserNames::system();
        users.start_sample();
        assert!(users.name(me).is_some(), "uid {me} has no name");
        assert_eq!(users.name(u32::MAX - 7), None);
    }

    #[test]
    fn passwd_names_reload_when_the_file_changes() {
        let (_dir, path, mut users) = passwd_users("root:x:0:0::/:/bin/sh\n");
        users.start_sample();
        assert_eq!(users.name(0).as_deref(), Some("root"));
        assert_eq!(users.name(1000), None);
        rewrite(
            &path,
            "root:x:0:0::/:/bin/sh\nann:x:1000:1000::/:/bin/sh\n",
            5,
        );
        // Not within the sample that already looked; in the next one.
        assert_eq!(users.name(1000), None);
        users.start_sample();
        assert_eq!(users.name(1000).as_deref(), Some("ann"));
    }

    #[test]
    fn a_changed_passwd_file_drops_earlier_names() {
        let (_dir, path, mut users) = passwd_users("ann:x:1000:1000::/:/bin/sh\n");
        users.start_sample();
        assert_eq!(users.name(1000).as_deref(), Some("ann"));
        rewrite(&path, "bo:x:1000:1000::/:/bin/sh\n", 5);
        users.start_sample();
        // A known uid is answered from the cache without looking...
        assert_eq!(users.name(1000).as_deref(), Some("ann"), "cached");
        // ...an unknown one looks, and finds the file changed.
        assert_eq!(users.name(7), None);
        assert_eq!(users.name(1000).as_deref(), Some("bo"));
    }

    #[test]
    fn every_process_of_a_user_shares_one_text() {
        let (_dir, _path, mut users) = passwd_users("ann:x:1000:1000::/:/bin/sh\n");
        let (a, b) = (users.name(1000).unwrap(), users.name(1000).unwrap());
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        let mut users = fake_directory();
        let (a, b) = (users.name(501).unwrap(), users.name(501).unwrap());
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
    }

    #[test]
    fn passwd_unknown_uids_are_not_remembered() {
        let (_dir, _path, mut users) = passwd_users("root:x:0:0::/:/bin/sh\n");
        for uid in 100_000..101_000 {
            assert_eq!(users.name(uid), None);
        }
        assert_eq!(users.name(0).as_deref(), Some("root"));
        assert_eq!(users.names.len(), 1);
    }

    #[test]
    fn passwd_duplicates_give_the_first_name() {
        let (_dir, _path, mut users) =
            passwd_users("first:x:1000:1::/:/bin/sh\nsecond:x:1000:1::/:/bin/sh\n");
        assert_eq!(users.name(1000).as_deref(), Some("first"));
    }

    #[test]
    fn a_missing_passwd_file_gives_no_names() {
        let mut users = UserNames::passwd_file("/nonexistent/passwd");
        assert_eq!(users.name(0), None);
    }

    #[test]
    fn directory_answers_are_asked_once_and_kept_names_or_not() {
        let mut users = fake_directory();
        users.start_sample();
        for _ in 0..3 {
            assert_eq!(users.name(501).as_deref(), Some("ann"));
            assert_eq!(users.name(7), None);
        }
        users.start_sample();
        assert_eq!(users.name(7), None);
        assert_eq!(asked(), [501, 7]);
        assert_eq!(users.names.get(&7), Some(&None));
    }

    #[test]
    fn directory_answers_are_forgotten_after_the_refresh_interval() {
        let mut users = fake_directory();
        let start = Instant::now();
        users.start_sample_at(start);
        assert_eq!(users.name(501).as_deref(), Some("ann"));
        DIRECTORY.with_borrow_mut(|(names, _)| names.insert(501, "bo"));
        users.start_sample_at(start + DIRECTORY_REFRESH / 2);
        assert_eq!(users.name(501).as_deref(), Some("ann"), "kept");
        users.start_sample_at(start + DIRECTORY_REFRESH * 2);
        assert_eq!(users.name(501).as_deref(), Some("bo"), "asked again");
        assert_eq!(asked(), [501, 501]);
    }

    #[test]
    fn the_directory_cache_is_bounded() {
        let mut users = fake_directory();
        let many = u32::try_from(DIRECTORY_MAX_ENTRIES).unwrap() * 3;
        for uid in 100_000..100_000 + many {
            assert_eq!(users.name(uid), None);
            assert!(users.names.len() <= DIRECTORY_MAX_ENTRIES);
        }
        assert_eq!(users.name(0).as_deref(), Some("root"));
    }
}
