//! uid → user name for every sampler: one cache in front of a user list.
//!
//! Every process of one user shares the text of its name ([`SharedStr`]).
//! A uid the cache has no answer for refreshes the list at most once per
//! sample ([`UserNames::start_sample`] opens one), however many new uids the
//! sample meets. Where the list comes from is the sampler's:
//!
//! - [`PasswdFile`] (Linux): a passwd file, read on first use and read again
//!   only when its modification time changed; answers given before a re-read
//!   are forgotten. A uid it does not know is asked about again on later
//!   samples (a refresh is one `stat`), and its absence is not cached, so
//!   uids no account owns cost no memory.
//! - [`SysinfoUsers`] (macOS, other OSes): sysinfo's account list, which a
//!   refresh reads whole. A name once found stays; a uid the list does not
//!   know stays nameless without further refreshes.

use std::collections::HashMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::SystemTime;

use crate::model::SharedStr;
use crate::os::passwd;

/// Where user names come from.
pub trait UserList {
    /// The user id the list is searched by.
    type Uid: Eq + Hash + Clone;

    /// Whether a uid the list did not know is looked up again on a later
    /// sample (`true`) or stays nameless (`false`).
    const ASK_AGAIN_FOR_UNKNOWN: bool;

    /// Bring the list up to date. Returns true if earlier answers may now
    /// be wrong (the cache then forgets them).
    fn refresh(&mut self) -> bool;

    /// The name of `uid` in the list as last refreshed.
    fn lookup(&self, uid: &Self::Uid) -> Option<SharedStr>;
}

/// The cache: answers by uid, and whether this sample refreshed the list.
#[derive(Debug)]
pub struct UserNames<L: UserList> {
    list: L,
    /// `None`: the list did not know the uid (kept only where the list
    /// does not ask again).
    names: HashMap<L::Uid, Option<SharedStr>>,
    refreshed: bool,
}

impl<L: UserList> UserNames<L> {
    pub fn new(list: L) -> Self {
        Self {
            list,
            names: HashMap::new(),
            refreshed: false,
        }
    }

    /// A new sample begins: an unknown uid may refresh the list once more.
    pub fn start_sample(&mut self) {
        self.refreshed = false;
    }

    /// The name of `uid`, or `None` if no account has it.
    pub fn name(&mut self, uid: &L::Uid) -> Option<SharedStr> {
        if let Some(known) = self.names.get(uid) {
            return known.clone();
        }
        if !self.refreshed {
            self.refreshed = true;
            if self.list.refresh() {
                self.names.clear();
            }
        }
        let name = self.list.lookup(uid);
        if name.is_some() || !L::ASK_AGAIN_FOR_UNKNOWN {
            self.names.insert(uid.clone(), name.clone());
        }
        name
    }
}

/// User names from a passwd file (`/etc/passwd` in production).
#[derive(Debug)]
pub struct PasswdFile {
    path: PathBuf,
    names: HashMap<u32, SharedStr>,
    /// `None` until first read; then the modification time it was read at
    /// (`None` inside: the file could not be examined).
    read_at: Option<Option<SystemTime>>,
}

impl PasswdFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            names: HashMap::new(),
            read_at: None,
        }
    }

    /// The system's account database.
    pub fn system() -> Self {
        Self::new(passwd::SYSTEM_PASSWD)
    }
}

impl UserList for PasswdFile {
    type Uid = u32;
    const ASK_AGAIN_FOR_UNKNOWN: bool = true;

    fn refresh(&mut self) -> bool {
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        if self.read_at == Some(modified) {
            return false;
        }
        self.read_at = Some(modified);
        // Unreadable or missing: no names, until the file changes.
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        self.names.clear();
        for entry in passwd::entries(&text) {
            // The first entry of a uid counts, as getpwuid answers.
            self.names
                .entry(entry.uid)
                .or_insert_with(|| SharedStr::from(entry.name));
        }
        true
    }

    fn lookup(&self, uid: &u32) -> Option<SharedStr> {
        self.names.get(uid).cloned()
    }
}

/// A user id sysinfo's account list can be searched by: sysinfo's own
/// [`sysinfo::Uid`], or (where uids are numbers) a plain `u32`.
pub trait SysinfoUid: Eq + Hash + Clone {
    fn owns(&self, user: &sysinfo::User) -> bool;
}

impl SysinfoUid for sysinfo::Uid {
    fn owns(&self, user: &sysinfo::User) -> bool {
        user.id() == self
    }
}

#[cfg(not(windows))]
impl SysinfoUid for u32 {
    fn owns(&self, user: &sysinfo::User) -> bool {
        **user.id() == *self
    }
}

/// User names from sysinfo's account list, searched by `Id`.
pub struct SysinfoUsers<Id> {
    /// `None` until the first refresh, and while sysinfo cannot list users.
    users: Option<sysinfo::Users>,
    id: PhantomData<fn(&Id)>,
}

impl<Id> SysinfoUsers<Id> {
    pub fn new() -> Self {
        Self {
            users: None,
            id: PhantomData,
        }
    }
}

impl<Id> Default for SysinfoUsers<Id> {
    fn default() -> Self {
        Self::new()
    }
}

impl<Id> std::fmt::Debug for SysinfoUsers<Id> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SysinfoUsers")
            .field("users", &self.users.as_ref().map(|u| u.len()))
            .finish()
    }
}

impl<Id: SysinfoUid> UserList for SysinfoUsers<Id> {
    type Uid = Id;
    const ASK_AGAIN_FOR_UNKNOWN: bool = false;

    fn refresh(&mut self) -> bool {
        match &mut self.users {
            Some(users) => users.refresh(),
            None => self.users = sysinfo::Users::new_with_refreshed_list().ok(),
        }
        // Accounts are added, rarely renamed: names found stay.
        false
    }

    fn lookup(&self, uid: &Id) -> Option<SharedStr> {
        self.users
            .as_ref()?
            .iter()
            .find(|user| uid.owns(user))
            .map(|user| SharedStr::from(user.name()))
    }
}

/// The name of `uid` in this system's account list, looked up once (for a
/// message, not per sample): the passwd file on Linux, sysinfo's list
/// elsewhere.
pub fn user_name(uid: u32) -> Option<String> {
    #[cfg(target_os = "linux")]
    let mut list = PasswdFile::system();
    #[cfg(all(unix, not(target_os = "linux")))]
    let mut list = SysinfoUsers::<u32>::new();
    #[cfg(unix)]
    {
        list.refresh();
        list.lookup(&uid).map(|name| name.to_string())
    }
    #[cfg(not(unix))]
    {
        let _ = uid;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A list that counts its refreshes; `changed` says what they answer.
    struct Counted {
        names: HashMap<u32, &'static str>,
        refreshes: usize,
        changed: bool,
    }

    impl UserList for Counted {
        type Uid = u32;
        const ASK_AGAIN_FOR_UNKNOWN: bool = true;
        fn refresh(&mut self) -> bool {
            self.refreshes += 1;
            self.changed
        }
        fn lookup(&self, uid: &u32) -> Option<SharedStr> {
            self.names.get(uid).map(|n| SharedStr::from(*n))
        }
    }

    fn counted(changed: bool) -> UserNames<Counted> {
        UserNames::new(Counted {
            names: HashMap::from([(0, "root"), (1000, "ann")]),
            refreshes: 0,
            changed,
        })
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn root_has_a_name() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
    }

    #[test]
    fn unknown_uids_refresh_the_list_once_per_sample() {
        let mut users = counted(false);
        users.start_sample();
        assert_eq!(users.name(&0).as_deref(), Some("root"));
        assert_eq!(users.name(&1000).as_deref(), Some("ann"));
        assert_eq!(users.name(&7), None);
        assert_eq!(users.name(&8), None);
        assert_eq!(users.list.refreshes, 1);
        // Known names need no refresh; an unknown uid asks again next sample.
        users.start_sample();
        assert_eq!(users.name(&0).as_deref(), Some("root"));
        assert_eq!(users.list.refreshes, 1);
        assert_eq!(users.name(&7), None);
        assert_eq!(users.list.refreshes, 2);
    }

    #[test]
    fn every_process_of_a_user_shares_one_text() {
        let mut users = counted(false);
        let (a, b) = (users.name(&1000).unwrap(), users.name(&1000).unwrap());
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
    }

    #[test]
    fn a_changed_list_drops_earlier_answers() {
        let mut users = counted(true);
        assert_eq!(users.name(&1000).as_deref(), Some("ann"));
        users.list.names.insert(1000, "bo");
        users.start_sample();
        assert_eq!(users.name(&1000).as_deref(), Some("ann"), "cached");
        assert_eq!(users.name(&7), None); // refreshes: the list changed
        assert_eq!(users.name(&1000).as_deref(), Some("bo"));
    }

    #[test]
    fn passwd_names_reload_when_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passwd");
        std::fs::write(&path, "root:x:0:0::/:/bin/sh\n").unwrap();
        let mut users = UserNames::new(PasswdFile::new(&path));
        users.start_sample();
        assert_eq!(users.name(&0).as_deref(), Some("root"));
        assert_eq!(users.name(&1000), None);
        std::fs::write(&path, "root:x:0:0::/:/bin/sh\nann:x:1000:1000::/:/bin/sh\n").unwrap();
        // Make sure the modification time differs on coarse file systems.
        let later = SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(later))
            .unwrap();
        // Not within the sample that already refreshed; in the next one.
        assert_eq!(users.name(&1000), None);
        users.start_sample();
        assert_eq!(users.name(&1000).as_deref(), Some("ann"));
    }

    #[test]
    fn passwd_unknown_uids_are_not_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passwd");
        std::fs::write(&path, "root:x:0:0::/:/bin/sh\n").unwrap();
        let mut users = UserNames::new(PasswdFile::new(&path));
        for uid in 100_000..101_000 {
            assert_eq!(users.name(&uid), None);
        }
        assert_eq!(users.name(&0).as_deref(), Some("root"));
        assert_eq!(users.names.len(), 1);
    }

    #[test]
    fn passwd_duplicates_give_the_first_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passwd");
        std::fs::write(
            &path,
            "first:x:1000:1::/:/bin/sh\nsecond:x:1000:1::/:/bin/sh\n",
        )
        .unwrap();
        let mut users = UserNames::new(PasswdFile::new(&path));
        assert_eq!(users.name(&1000).as_deref(), Some("first"));
    }

    #[test]
    fn a_missing_passwd_file_gives_no_names() {
        let mut users = UserNames::new(PasswdFile::new("/nonexistent/passwd"));
        assert_eq!(users.name(&0), None);
    }

    #[cfg(unix)]
    #[test]
    fn sysinfo_knows_this_process_s_user_and_keeps_unknown_uids_nameless() {
        let me = crate::os::this_process::effective_uid();
        let mut users = UserNames::new(SysinfoUsers::<u32>::new());
        users.start_sample();
        let name = users.name(&me);
        assert!(name.is_some(), "uid {me} has no name");
        // On Linux sysinfo reads the passwd file too: the same name.
        #[cfg(target_os = "linux")]
        {
            let text = std::fs::read_to_string(passwd::SYSTEM_PASSWD).unwrap();
            let entry = passwd::by_uid(&text, me).unwrap();
            assert_eq!(name.as_deref(), Some(entry.name));
        }
        let unknown = u32::MAX - 7;
        assert_eq!(users.name(&unknown), None);
        assert_eq!(users.names.get(&unknown), Some(&None));
    }
}
