//! The exits of the processes post-mortems watch, learned from the kernel
//! as they happen: a kqueue with one `EVFILT_PROC` watch per process,
//! `NOTE_EXIT | NOTE_EXITSTATUS | NOTE_EXIT_DETAIL`.
//!
//! A zombie's status ([`super::exits`]) is there only until its parent
//! reaps it, often within microseconds; `NOTE_EXIT` fires in `proc_exit`
//! before the parent is told (`bsd/kern/kern_exit.c`), and the event waits
//! in the kqueue after the reap. It carries the wait status unclamped and,
//! for a memorystatus (jetsam) kill, `NOTE_EXIT_MEMORY` with the kind of
//! kill ([`super::parse::proc_exit`]). `filt_procattach`
//! (`bsd/kern/kern_event.c`, xnu-8792.41.9 to xnu-11417.121.6) gives the
//! status to the parent and to whoever may send the process SIGKILL: root,
//! or a user for their own processes. So a LaunchAgent learns how its
//! user's processes ended, jetsam kills included, without `log stream`;
//! where the status is refused (`EACCES`) the watch is made without it,
//! and still carries the jetsam flag. Low-swap kills carry no flag
//! ([`super::parse::proc_exit::NO_FLAG_KILLS`]): those read as SIGKILL.
//!
//! [`WatchBook`] (pure, every OS) keeps the books: which tracked process is
//! watched under which token (the event's `udata`), at most [`MAX_WATCHED`],
//! one watch per pid, and which could not be. On macOS, `ExitWatch` holds
//! the kqueue, a thread of its own that waits on it and queues what
//! arrives (at most [`INBOX`]), and the books; `poll`, on the daemon's
//! thread, takes the queued exits, drops the watches of processes no longer
//! tracked and adds the new ones.
//!
//! The identity race: a process is added from the snapshot that listed it,
//! and `EV_ADD` attaches to whichever process holds the pid at that moment.
//! If the one listed ended and its pid was reused in between, the watch is
//! on the newcomer. So after `EV_ADD` the pid's start time is read again
//! (`kinfo_proc`, which answers for zombies too): the process listed
//! started before the snapshot and a newcomer after it ended, so the same
//! start time means the watch is on the process listed (pid and start
//! time, the identity the actuator checks before a signal). Otherwise the
//! watch is deleted, and an event it already queued is dropped with its
//! token. A process already exiting (a zombie) cannot be watched (`ESRCH`:
//! `proc_find` skips it); for those the zombie's `p_xstat` is still read
//! (`exits::read_ended`), as for any process not watched.

use std::collections::{HashMap, HashSet};

use super::parse::proc_exit::{ExitNote, NO_FLAG_KILLS};
use crate::model::exit::{Ended, Killer, MemoryKill};
use crate::model::{CollectorStatus, ProcessId, Timestamp};

/// Processes watched at once, at most.
pub const MAX_WATCHED: usize = 256;
/// Exits waiting for the daemon, at most (more are counted and dropped).
pub const INBOX: usize = 1024;

/// `ESRCH` (`bsd/sys/errno.h`; the same number on Linux, where the books
/// are tested).
const ESRCH: i32 = 3;
#[cfg(target_os = "macos")]
const _: () = assert!(ESRCH == libc::ESRCH);

/// A process watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub id: ProcessId,
    /// Its name at the last sample that listed it.
    pub name: String,
    pub uid: Option<u32>,
    /// Whether the watch carries the exit status (`NOTE_EXITSTATUS`).
    pub with_status: bool,
}

/// Why a tracked process is not watched; not tried again while tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotWatched {
    /// It was exiting or gone when the watch was made (`ESRCH`).
    Gone,
    /// Its pid belonged to another process by the time the watch was made.
    Reused,
    /// The kernel refused the watch with this errno.
    Refused(i32),
}

/// What became of a watch just made, for the caller to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Watching,
    /// Not the process listed: delete the watch just made.
    Undo,
    NotWatched(NotWatched),
}

/// The changes a poll makes: watches to delete, processes to watch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Pids whose watch is to be deleted (no longer tracked).
    pub remove: Vec<u32>,
    /// Processes to watch, in pid order.
    pub add: Vec<ProcessId>,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct WatchBook {
    by_token: HashMap<u64, Watched>,
    by_id: HashMap<ProcessId, u64>,
    /// Pids with a watch: a pid is watched for one process at a time.
    pids: HashSet<u32>,
    not_watched: HashMap<ProcessId, NotWatched>,
    next_token: u64,
    /// Tracked processes left unwatched by the cap at the last plan.
    pub over_cap: usize,
    /// Watches the kernel refused (other than `ESRCH`), all told.
    pub refused: u64,
    /// The last refusal, in words.
    pub last_refusal: Option<String>,
}

impl WatchBook {
    /// Processes watched now.
    pub fn len(&self) -> usize {
        self.by_token.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }

    /// Of those, the ones whose watch carries no exit status.
    pub fn without_status(&self) -> usize {
        self.by_token.values().filter(|w| !w.with_status).count()
    }

    /// Bring the books to `tracked`: the watches of processes no longer
    /// tracked are forgotten (the caller deletes them), tracked processes
    /// neither watched nor known unwatchable are to be watched, within the
    /// cap, and not while their pid is still watched for another process.
    pub fn plan(&mut self, tracked: &HashSet<ProcessId>) -> Plan {
        self.not_watched.retain(|id, _| tracked.contains(id));
        let gone: Vec<ProcessId> = self
            .by_id
            .keys()
            .filter(|id| !tracked.contains(id))
            .copied()
            .collect();
        let mut remove = Vec::with_capacity(gone.len());
        for id in gone {
            if let Some(token) = self.by_id.remove(&id) {
                self.by_token.remove(&token);
                self.pids.remove(&id.pid);
                remove.push(id.pid);
            }
        }
        remove.sort_unstable();
        let mut add: Vec<ProcessId> = tracked
            .iter()
            .filter(|id| {
                !self.by_id.contains_key(id)
                    && !self.not_watched.contains_key(id)
                    && !self.pids.contains(&id.pid)
            })
            .copied()
            .collect();
        add.sort_unstable_by_key(|id| (id.pid, id.start));
        add.dedup_by_key(|id| id.pid);
        let room = MAX_WATCHED.saturating_sub(self.len());
        self.over_cap = add.len().saturating_sub(room);
        add.truncate(room);
        Plan { remove, add }
    }

    /// A fresh token for the next watch.
    pub fn token(&mut self) -> u64 {
        self.next_token = self.next_token.wrapping_add(1);
        self.next_token
    }

    /// Record how the watch of `w.id` under `token` went: `made` is
    /// whether `EV_ADD` succeeded or its errno; `start_now` the start time
    /// read for the pid after it (`None`: no process has the pid now).
    pub fn settle(
        &mut self,
        token: u64,
        w: Watched,
        made: Result<(), i32>,
        start_now: Option<u64>,
    ) -> Settled {
        let id = w.id;
        let why = match made {
            Err(ESRCH) => NotWatched::Gone,
            Err(e) => {
                self.refused += 1;
                self.last_refusal = Some(format!(
                    "the watch of pid {} was refused: {}",
                    id.pid,
                    std::io::Error::from_raw_os_error(e)
                ));
                NotWatched::Refused(e)
            }
            Ok(()) if start_now == Some(id.start) => {
                self.pids.insert(id.pid);
                self.by_id.insert(id, token);
                self.by_token.insert(token, w);
                return Settled::Watching;
            }
            Ok(()) => {
                let why = if start_now.is_some() {
                    NotWatched::Reused
                } else {
                    NotWatched::Gone
                };
                self.not_watched.insert(id, why);
                return Settled::Undo;
            }
        };
        self.not_watched.insert(id, why);
        Settled::NotWatched(why)
    }

    /// The process an exit event with `token` is about, forgotten: its
    /// watch ended with the event (`EV_ONESHOT`). `None` for a token no
    /// longer in the books (a watch deleted, or undone, after it fired).
    pub fn exited(&mut self, token: u64) -> Option<Watched> {
        let w = self.by_token.remove(&token)?;
        self.by_id.remove(&w.id);
        self.pids.remove(&w.id.pid);
        // Not watched again: it has ended.
        self.not_watched.insert(w.id, NotWatched::Gone);
        Some(w)
    }

    /// Keep the names current (a process may exec): `name_of` gives a
    /// listed process's name.
    pub fn rename<'a>(&mut self, name_of: impl Fn(&ProcessId) -> Option<&'a str>) {
        for w in self.by_token.values_mut() {
            if let Some(name) = name_of(&w.id)
                && name != w.name
            {
                name.clone_into(&mut w.name);
            }
        }
    }
}

/// What an exit event says, as the post-mortems' records: the exit status
/// (where the watch carried it) and, for a jetsam kill, the kill. `at` is
/// when the event arrived, `read_at` the sample it is handed in with.
pub fn records(
    w: &Watched,
    note: &ExitNote,
    at: Timestamp,
    read_at: Timestamp,
) -> (Option<Ended>, Option<MemoryKill>) {
    let pid = w.id.pid;
    let mut also = String::new();
    if note.code_signing {
        also.push_str("; NOTE_EXIT_CSERROR: killed for a code-signing error");
    }
    if note.decrypt_failed {
        also.push_str("; NOTE_EXIT_DECRYPTFAIL: its pages could not be decrypted");
    }
    let ended = note.status.clone().map(|status| Ended {
        id: w.id,
        status,
        source: format!("kqueue's NOTE_EXIT for pid {pid} (it ended at {at}{also})"),
    });
    let kill = note.jetsam.map(|kind| MemoryKill {
        pid,
        name: w.name.clone(),
        uid: w.uid,
        killer: Killer::Jetsam,
        source: "kqueue's NOTE_EXIT_MEMORY".to_string(),
        message: format!(
            "NOTE_EXIT for pid {pid} ({}) at {at} with NOTE_EXIT_MEMORY and {}",
            w.name,
            kind.flag()
        ),
        resident_bytes: None,
        scope: format!("{} ({})", kind.words(), kind.flag()),
        memcg: None,
        read_at,
    });
    (ended, kill)
}

/// How the watch stands, for its collector status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchState {
    /// Why there is no watch (the kqueue or its thread could not start).
    pub down: Option<String>,
    pub watching: usize,
    pub without_status: usize,
    pub over_cap: usize,
    /// Refused watches, failed deletions and waits, dropped exits.
    pub errors: u64,
    pub last_error: Option<String>,
}

/// The collector status of the watch (`exit-watch`); its `doctor` line
/// says the same, the kills that carry no flag included.
pub fn status(s: &WatchState) -> CollectorStatus {
    let mut detail = match &s.down {
        Some(why) => format!(
            "exits are not watched ({why}): only a zombie's exit status is read, before its parent reaps it"
        ),
        None => format!(
            "watching the exits of {} processes with kqueue (EVFILT_PROC): exit statuses as they exit, and jetsam kills (NOTE_EXIT_MEMORY) of the processes watched",
            s.watching
        ),
    };
    if s.without_status > 0 {
        detail.push_str(&format!(
            "; {} of them without their exit status (another user's: the kernel gives it to whoever may signal the process)",
            s.without_status
        ));
    }
    if s.over_cap > 0 {
        detail.push_str(&format!(
            "; {} more not watched (at most {MAX_WATCHED} at once)",
            s.over_cap
        ));
    }
    detail.push_str(&format!("; {NO_FLAG_KILLS}"));
    if let Some(e) = &s.last_error {
        detail.push_str(&format!("; {e}"));
    }
    CollectorStatus {
        name: "exit-watch".into(),
        up: s.down.is_none(),
        detail,
        errors: s.errors,
        applicable: true,
    }
}

#[cfg(target_os = "macos")]
pub use watch::ExitWatch;

#[cfg(target_os = "macos")]
mod watch {
    use std::collections::{HashMap, HashSet, VecDeque};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::{INBOX, Settled, WatchBook, WatchState, Watched, records};
    use crate::model::exit::{Ended, MemoryKill};
    use crate::model::{Collector, CollectorStatus, ProcessId, ProcessSample, Snapshot, Timestamp};
    use crate::os::macos::ffi::kqueue::{Kqueue, ProcEvent};
    use crate::os::macos::ffi::proc as ffi_proc;
    use crate::os::macos::parse::proc_exit::{WATCH_WITH_STATUS, WATCH_WITHOUT_STATUS, decode};
    use crate::os::macos::parse::{kinfo, proc_info::darwin_pid};

    /// How long the thread waits on the kqueue before it looks at `stop`.
    const WAKE: Duration = Duration::from_secs(1);

    /// What the thread hands the daemon.
    #[derive(Default)]
    struct Inbox {
        exits: VecDeque<(ProcEvent, Timestamp)>,
        dropped: u64,
        wait_errors: u64,
        last_error: Option<String>,
    }

    struct Shared {
        kq: Kqueue,
        inbox: Mutex<Inbox>,
        stop: AtomicBool,
    }

    /// See the module documentation.
    pub struct ExitWatch {
        shared: Result<Arc<Shared>, String>,
        book: WatchBook,
        /// Deletions that failed, all told.
        unwatch_errors: u64,
        last_error: Option<String>,
    }

    impl ExitWatch {
        /// Open the kqueue and start its thread; a watch that could not
        /// start says why in its status and watches nothing.
        pub fn start() -> Self {
            Self {
                shared: open(),
                book: WatchBook::default(),
                unwatch_errors: 0,
                last_error: None,
            }
        }

        /// The exits that arrived since the last poll, as exit statuses
        /// and jetsam kills; then the watches brought to `tracked`
        /// (processes of `snap`).
        pub fn poll(
            &mut self,
            snap: &Snapshot,
            tracked: &HashSet<ProcessId>,
        ) -> (Vec<Ended>, Vec<MemoryKill>) {
            let Ok(shared) = &self.shared else {
                return (Vec::new(), Vec::new());
            };
            let shared = shared.clone();
            let arrived: Vec<(ProcEvent, Timestamp)> = match shared.inbox.lock() {
                Ok(mut inbox) => inbox.exits.drain(..).collect(),
                Err(_) => Vec::new(),
            };
            let mut ended = Vec::new();
            let mut kills = Vec::new();
            for (event, at) in arrived {
                let Some(w) = self.book.exited(event.token) else {
                    continue;
                };
                let Some(note) = decode(event.fflags, event.data) else {
                    continue;
                };
                let (e, k) = records(&w, &note, at, snap.taken_at);
                ended.extend(e);
                kills.extend(k);
            }
            if tracked.is_empty() && self.book.is_empty() {
                return (ended, kills);
            }
            let plan = self.book.plan(tracked);
            for pid in plan.remove {
                let Some(pid) = darwin_pid(pid) else { continue };
                match shared.kq.unwatch(pid) {
                    Ok(()) | Err(libc::ENOENT | libc::ESRCH) => {}
                    Err(e) => {
                        self.unwatch_errors += 1;
                        self.last_error = Some(format!(
                            "deleting the watch of pid {pid} failed: {}",
                            std::io::Error::from_raw_os_error(e)
                        ));
                    }
                }
            }
            if !plan.add.is_empty() {
                let listed: HashMap<ProcessId, &ProcessSample> =
                    snap.processes.iter().map(|p| (p.id, p)).collect();
                for id in plan.add {
                    self.add(&shared.kq, id, listed.get(&id).copied());
                }
            }
            if !self.book.is_empty() {
                let listed: HashMap<ProcessId, &str> = snap
                    .processes
                    .iter()
                    .map(|p| (p.id, p.name.as_str()))
                    .collect();
                self.book.rename(|id| listed.get(id).copied());
            }
            (ended, kills)
        }

        /// Watch `id`, then check the pid still is `id` (see the module
        /// documentation).
        fn add(&mut self, kq: &Kqueue, id: ProcessId, listed: Option<&ProcessSample>) {
            let Some(pid) = darwin_pid(id.pid) else {
                return;
            };
            let token = self.book.token();
            let made = match kq.watch_exit(pid, WATCH_WITH_STATUS, token) {
                Err(libc::EACCES) => kq
                    .watch_exit(pid, WATCH_WITHOUT_STATUS, token)
                    .map(|()| false),
                other => other.map(|()| true),
            };
            let start_now = match made {
                Ok(_) => ffi_proc::kinfo_proc(pid)
                    .ok()
                    .and_then(|b| kinfo::parse(&b).ok().flatten())
                    .map(|k| k.start_micros),
                Err(_) => None,
            };
            let w = Watched {
                id,
                name: listed.map(|p| p.name.to_string()).unwrap_or_default(),
                uid: listed.and_then(|p| p.uid),
                with_status: made.unwrap_or(false),
            };
            if self.book.settle(token, w, made.map(|_| ()), start_now) == Settled::Undo
                && let Err(e) = kq.unwatch(pid)
                && e != libc::ENOENT
                && e != libc::ESRCH
            {
                self.unwatch_errors += 1;
                self.last_error = Some(format!(
                    "deleting the watch of pid {pid}, reused by another process, failed: {}",
                    std::io::Error::from_raw_os_error(e)
                ));
            }
        }

        /// How it stands.
        pub fn state(&self) -> WatchState {
            let (down, dropped, wait_errors, wait_error) = match &self.shared {
                Err(why) => (Some(why.clone()), 0, 0, None),
                Ok(shared) => match shared.inbox.lock() {
                    Ok(inbox) => (
                        None,
                        inbox.dropped,
                        inbox.wait_errors,
                        inbox.last_error.clone(),
                    ),
                    Err(_) => (Some("its thread panicked".to_string()), 0, 0, None),
                },
            };
            WatchState {
                down,
                watching: self.book.len(),
                without_status: self.book.without_status(),
                over_cap: self.book.over_cap,
                errors: self.book.refused + self.unwatch_errors + dropped + wait_errors,
                last_error: wait_error
                    .or_else(|| self.last_error.clone())
                    .or_else(|| self.book.last_refusal.clone()),
            }
        }
    }

    impl Drop for ExitWatch {
        fn drop(&mut self) {
            if let Ok(shared) = &self.shared {
                shared.stop.store(true, Ordering::SeqCst);
            }
        }
    }

    impl Collector for ExitWatch {
        fn name(&self) -> &'static str {
            "exit-watch"
        }

        fn status(&self) -> Option<CollectorStatus> {
            Some(super::status(&self.state()))
        }
    }

    fn open() -> Result<Arc<Shared>, String> {
        let kq = Kqueue::open()
            .map_err(|e| format!("kqueue() failed: {}", std::io::Error::from_raw_os_error(e)))?;
        let shared = Arc::new(Shared {
            kq,
            inbox: Mutex::new(Inbox::default()),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        std::thread::Builder::new()
            .name("headroom-exits".into())
            .spawn(move || wait_for_exits(&s))
            .map_err(|e| format!("cannot start the exit-watch thread: {e}"))?;
        Ok(shared)
    }

    /// The thread: wait on the kqueue, queue each exit with the moment it
    /// arrived, until the watch is dropped.
    fn wait_for_exits(shared: &Shared) {
        let mut events = Vec::with_capacity(64);
        while !shared.stop.load(Ordering::SeqCst) {
            events.clear();
            let waited = shared.kq.wait(&mut events, 64, WAKE);
            let at = Timestamp::now();
            let Ok(mut inbox) = shared.inbox.lock() else {
                return;
            };
            if let Err(e) = waited {
                inbox.wait_errors += 1;
                inbox.last_error = Some(format!(
                    "waiting on the kqueue failed: {}",
                    std::io::Error::from_raw_os_error(e)
                ));
                drop(inbox);
                std::thread::sleep(WAKE);
                continue;
            }
            for event in events.drain(..) {
                if event.filter != libc::EVFILT_PROC {
                    continue;
                }
                if inbox.exits.len() >= INBOX {
                    inbox.dropped += 1;
                    inbox.last_error = Some(format!(
                        "{} exits dropped: the daemon did not take them in time",
                        inbox.dropped
                    ));
                    continue;
                }
                inbox.exits.push_back((event, at));
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::model::exit::{ExitStatus, Killer};

        /// A snapshot listing `child` as the post-mortems would track it.
        fn tracked_child(pid: u32) -> (Snapshot, HashSet<ProcessId>, ProcessId) {
            let k = kinfo::parse(&ffi_proc::kinfo_proc(i32::try_from(pid).unwrap()).unwrap())
                .unwrap()
                .unwrap();
            let id = ProcessId {
                pid,
                start: k.start_micros,
            };
            let mut snap = crate::model::build::snapshot(0)
                .process(crate::model::build::process(pid).name("sh"))
                .build();
            snap.processes[0].id = id;
            (snap, HashSet::from([id]), id)
        }

        /// Poll until the child's exit arrives (the thread queues it as
        /// soon as the kernel fires it), at most ~10 s.
        fn exit_of(
            watch: &mut ExitWatch,
            snap: &Snapshot,
            tracked: &HashSet<ProcessId>,
        ) -> (Vec<Ended>, Vec<MemoryKill>) {
            for _ in 0..1000 {
                let (ended, kills) = watch.poll(snap, tracked);
                if !ended.is_empty() || !kills.is_empty() {
                    return (ended, kills);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            (Vec::new(), Vec::new())
        }

        /// On a Mac: children that exit with a code and of SIGKILL are
        /// watched, reaped by this process, and their statuses still
        /// arrive (NOTE_EXIT fires before the parent can reap).
        #[test]
        fn a_watched_child_s_exit_status_arrives_though_it_was_reaped() {
            let mut watch = ExitWatch::start();
            assert!(watch.state().down.is_none(), "{:?}", watch.state());

            // `sh -c 'read x; exit 7'` waits on stdin until told to go.
            let mut child = std::process::Command::new("/bin/sh")
                .args(["-c", "read x; exit 7"])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let (snap, tracked, id) = tracked_child(child.id());
            let (ended, _) = watch.poll(&snap, &tracked);
            assert!(ended.is_empty());
            assert_eq!(watch.state().watching, 1, "{:?}", watch.state());
            assert_eq!(watch.state().without_status, 0);
            drop(child.stdin.take());
            assert_eq!(child.wait().unwrap().code(), Some(7));
            let (ended, kills) = exit_of(&mut watch, &snap, &tracked);
            assert_eq!(ended.len(), 1, "{ended:?}");
            assert_eq!(ended[0].id, id);
            assert_eq!(ended[0].status, ExitStatus::Code(7));
            assert!(ended[0].source.starts_with("kqueue's NOTE_EXIT"));
            assert!(kills.is_empty(), "no jetsam flag on an exit: {kills:?}");
            assert_eq!(watch.state().watching, 0);

            let mut child = std::process::Command::new("/bin/sleep")
                .arg("60")
                .spawn()
                .unwrap();
            let (snap, tracked, _) = tracked_child(child.id());
            watch.poll(&snap, &tracked);
            assert_eq!(watch.state().watching, 1);
            child.kill().unwrap();
            child.wait().unwrap();
            let (ended, kills) = exit_of(&mut watch, &snap, &tracked);
            assert_eq!(
                ended.first().map(|e| &e.status),
                Some(&ExitStatus::Signal {
                    name: "SIGKILL".into(),
                    core_dumped: false
                })
            );
            assert!(kills.iter().all(|k| k.killer != Killer::Jetsam));
        }

        /// On a Mac: a process already reaped cannot be watched; it is
        /// left to the zombie fallback and not tried again.
        #[test]
        fn a_process_already_gone_is_not_watched() {
            let mut watch = ExitWatch::start();
            let mut child = std::process::Command::new("/usr/bin/true").spawn().unwrap();
            let (snap, tracked, _) = tracked_child(child.id());
            child.wait().unwrap();
            let (ended, kills) = watch.poll(&snap, &tracked);
            assert!(ended.is_empty() && kills.is_empty());
            assert_eq!(watch.state().watching, 0);
            assert_eq!(watch.state().errors, 0, "{:?}", watch.state());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::exit::ExitStatus;
    use crate::os::macos::parse::proc_exit::{
        JetsamKind, NOTE_EXIT_MEMORY, NOTE_EXIT_MEMORY_PID, WATCH_WITH_STATUS, decode,
    };

    fn id(pid: u32, start: u64) -> ProcessId {
        ProcessId { pid, start }
    }

    fn watched(id: ProcessId) -> Watched {
        Watched {
            id,
            name: "python3".into(),
            uid: Some(501),
            with_status: true,
        }
    }

    /// Plan, then settle every addition as made, with the start read back
    /// equal to the one listed.
    fn watch_all(book: &mut WatchBook, tracked: &HashSet<ProcessId>) -> Vec<u64> {
        let plan = book.plan(tracked);
        plan.add
            .into_iter()
            .map(|id| {
                let token = book.token();
                assert_eq!(
                    book.settle(token, watched(id), Ok(()), Some(id.start)),
                    Settled::Watching
                );
                token
            })
            .collect()
    }

    #[test]
    fn tracked_processes_are_watched_once_and_unwatched_when_no_longer_tracked() {
        let mut book = WatchBook::default();
        let a = id(10, 1000);
        let b = id(11, 1100);
        let tokens = watch_all(&mut book, &HashSet::from([a, b]));
        assert_eq!(tokens.len(), 2);
        assert_eq!(book.len(), 2);
        // Nothing new to do while the same are tracked.
        assert_eq!(book.plan(&HashSet::from([a, b])), Plan::default());
        // b no longer tracked: its watch is deleted.
        let plan = book.plan(&HashSet::from([a]));
        assert_eq!(plan.remove, vec![11]);
        assert!(plan.add.is_empty());
        assert_eq!(book.len(), 1);
    }

    #[test]
    fn an_exit_forgets_the_watch_and_a_stale_token_is_ignored() {
        let mut book = WatchBook::default();
        let a = id(10, 1000);
        let tracked = HashSet::from([a]);
        let token = watch_all(&mut book, &tracked)[0];
        let w = book.exited(token).unwrap();
        assert_eq!(w.id, a);
        assert!(book.is_empty());
        // The same event again, or one of a watch undone: no process.
        assert_eq!(book.exited(token), None);
        // Ended: not watched again while post-mortems still track it.
        assert!(book.plan(&tracked).add.is_empty());
    }

    #[test]
    fn the_number_watched_is_bounded() {
        let mut book = WatchBook::default();
        let many: HashSet<ProcessId> = (0..MAX_WATCHED as u32 + 10)
            .map(|p| id(100 + p, 1))
            .collect();
        let tokens = watch_all(&mut book, &many);
        assert_eq!(tokens.len(), MAX_WATCHED);
        assert_eq!(book.over_cap, 10);
        // Nothing more fits until a watch ends.
        assert!(book.plan(&many).add.is_empty());
        assert_eq!(book.over_cap, 10);
        book.exited(tokens[0]).unwrap();
        assert_eq!(book.plan(&many).add.len(), 1);
        assert_eq!(book.over_cap, 9);
    }

    #[test]
    fn a_pid_reused_before_the_watch_is_undone() {
        let mut book = WatchBook::default();
        let listed = id(42, 1000);
        let tracked = HashSet::from([listed]);
        let plan = book.plan(&tracked);
        assert_eq!(plan.add, vec![listed]);
        let token = book.token();
        // EV_ADD succeeded, but the pid's start time is now another's: the
        // process listed ended and its pid was reused in between.
        assert_eq!(
            book.settle(token, watched(listed), Ok(()), Some(2000)),
            Settled::Undo
        );
        assert!(book.is_empty());
        // An event of that watch, queued before the undo, names no process.
        assert_eq!(book.exited(token), None);
        // Not tried again while tracked.
        assert!(book.plan(&tracked).add.is_empty());
        // The pid gone altogether after EV_ADD: undone too.
        let other = id(43, 1000);
        book.plan(&HashSet::from([other]));
        let token = book.token();
        assert_eq!(
            book.settle(token, watched(other), Ok(()), None),
            Settled::Undo
        );
    }

    #[test]
    fn a_process_already_exiting_is_left_to_the_zombie_reader() {
        let mut book = WatchBook::default();
        let a = id(10, 1000);
        let tracked = HashSet::from([a]);
        book.plan(&tracked);
        let token = book.token();
        assert_eq!(
            book.settle(token, watched(a), Err(ESRCH), None),
            Settled::NotWatched(NotWatched::Gone)
        );
        assert_eq!(book.refused, 0, "ESRCH is no error");
        assert!(book.plan(&tracked).add.is_empty());
        // Once no longer tracked, it is forgotten.
        book.plan(&HashSet::new());
        assert!(book.not_watched.is_empty());
    }

    #[test]
    fn a_refusal_is_counted_and_said() {
        let mut book = WatchBook::default();
        let a = id(10, 1000);
        book.plan(&HashSet::from([a]));
        let token = book.token();
        // EPERM (1), e.g. from a MAC policy.
        assert_eq!(
            book.settle(token, watched(a), Err(1), None),
            Settled::NotWatched(NotWatched::Refused(1))
        );
        assert_eq!(book.refused, 1);
        assert!(book.last_refusal.as_deref().unwrap().contains("pid 10"));
    }

    #[test]
    fn one_watch_per_pid_until_the_earlier_one_is_gone() {
        let mut book = WatchBook::default();
        let old = id(42, 1000);
        let token = watch_all(&mut book, &HashSet::from([old]))[0];
        // The old process ended and the pid was reused; both are tracked
        // until the old one's post-mortem. The newcomer waits for the old
        // watch's event, so that event is never taken for the newcomer's.
        let new = id(42, 5000);
        let both = HashSet::from([old, new]);
        assert!(book.plan(&both).add.is_empty());
        book.exited(token).unwrap();
        assert_eq!(book.plan(&both).add, vec![new]);
    }

    #[test]
    fn names_follow_the_latest_sample() {
        let mut book = WatchBook::default();
        let a = id(10, 1000);
        let token = watch_all(&mut book, &HashSet::from([a]))[0];
        book.rename(|i| (*i == a).then_some("python3.11"));
        assert_eq!(book.exited(token).unwrap().name, "python3.11");
    }

    #[test]
    fn an_exit_becomes_a_status_and_a_jetsam_kill_becomes_a_kill() {
        let w = watched(id(42, 1000));
        // W_EXITCODE(0, SIGKILL) with NOTE_EXIT_MEMORY | NOTE_EXIT_MEMORY_PID
        // (filt_procevent, bsd/kern/kern_event.c, xnu-11417.101.15).
        let note = decode(
            WATCH_WITH_STATUS,
            i64::from(9 | NOTE_EXIT_MEMORY | NOTE_EXIT_MEMORY_PID),
        )
        .unwrap();
        assert_eq!(note.jetsam, Some(JetsamKind::PerProcessLimit));
        let (ended, kill) = records(&w, &note, Timestamp(5_000), Timestamp(6_000));
        let ended = ended.unwrap();
        assert_eq!(ended.id, w.id);
        assert_eq!(
            ended.status,
            ExitStatus::Signal {
                name: "SIGKILL".into(),
                core_dumped: false
            }
        );
        assert!(ended.source.starts_with("kqueue's NOTE_EXIT for pid 42"));
        let kill = kill.unwrap();
        assert_eq!(
            (kill.pid, kill.killer, kill.uid),
            (42, Killer::Jetsam, Some(501))
        );
        assert_eq!(kill.name, "python3");
        assert_eq!(kill.read_at, Timestamp(6_000));
        assert_eq!(
            kill.scope,
            "it went over its own memory limit (NOTE_EXIT_MEMORY_PID)"
        );
        // A plain exit: the status, no kill.
        let note = decode(WATCH_WITH_STATUS, 0x700).unwrap();
        let (ended, kill) = records(&w, &note, Timestamp(5_000), Timestamp(6_000));
        assert_eq!(ended.unwrap().status, ExitStatus::Code(7));
        assert!(kill.is_none());
    }

    #[test]
    fn the_status_says_what_is_watched_and_which_kills_carry_no_flag() {
        let s = status(&WatchState {
            watching: 3,
            without_status: 1,
            over_cap: 2,
            ..WatchState::default()
        });
        assert!(s.up);
        assert_eq!(s.name, "exit-watch");
        assert!(
            s.detail.contains("watching the exits of 3 processes"),
            "{}",
            s.detail
        );
        assert!(s.detail.contains("1 of them without their exit status"));
        assert!(s.detail.contains("2 more not watched"));
        assert!(s.detail.contains("low-swap kills"), "{}", s.detail);
        let check = crate::model::collector::check_of("exit-watch", &s);
        assert!(check.detail.contains("low-swap kills"));
        let down = status(&WatchState {
            down: Some("kqueue() failed: Too many open files".into()),
            errors: 0,
            ..WatchState::default()
        });
        assert!(!down.up && down.applicable);
        assert!(down.detail.contains("kqueue() failed"));
    }
}
