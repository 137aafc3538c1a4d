//! Which notebook each Jupyter kernel runs.
//!
//! The classifier (`workload.rs`) reads a kernel's id from its command line
//! (`-f …/kernel-<id>.json`); only the Jupyter server that started it knows
//! the notebook. headroom finds the servers from their runtime files
//! ([`runtime`]), asks each for `/api/sessions` ([`sessions`]), and keeps the
//! answer in a [`NotebookMap`] from kernel id to notebook path.
//!
//! **When it asks.** Only when a kernel id appears that the map cannot
//! answer, never on every sample. A kernel that no server knows (one started
//! by an editor, or seen a moment before its server registered the session)
//! is asked about again after 2 s, then 4 s, 8 s, … up to every 10 minutes,
//! so an unmappable kernel costs a handful of lookups, not one per tick.
//!
//! **Where it runs.** Lookups read files and talk HTTP, so they run on a
//! thread of their own (`headroom-jupyter`), never on the async workers and
//! never inside a sample. The daemon calls [`Notebooks::annotate`] on each
//! new snapshot: a few hash lookups in the latest published map, no I/O; a
//! kernel id the map lacks sends the set of present kernel ids to the thread,
//! which decides whether a lookup is due, does it, and publishes a new map.
//! A new kernel is therefore named from the sample after the lookup answered
//! (one sampling interval, plus the servers' answer time).
//!
//! **Whose files.** Run as a user, headroom reads that user's runtime
//! directories. Run as root, it reads root's own and the configured
//! `runtime_dirs`, and every user's only with `[jupyter] other_users = true`:
//! the files hold the servers' tokens, which let whoever holds them run code
//! as that user. The files are read as untrusted input ([`runtime`]: no
//! links, no FIFOs or devices, a size cap, the owner from the file read).
//! Tokens are sent only to loopback addresses, and only while the file's pid
//! is alive and its owner's and the port is held by the file's owner
//! ([`listener_check`]): a stale file whose port someone else took gets
//! nothing. A server's answer is trusted only for kernels of the user who
//! owns its runtime file (or any kernel, for a file root owns), so one user
//! cannot name another's kernels; servers are told apart by url and owner,
//! so one user's file cannot hide another's server at the same url.
//!
//! **Bounds.** At most [`MAX_SERVERS`] servers are asked per lookup, and
//! [`MAX_SERVERS_PER_OWNER`] of one user's. Requests to the thread queue in
//! a channel of [`REQUEST_QUEUE`] places; when it is full (a lookup is
//! slow), a new request is dropped: the next sample sends the kernel set
//! again.
//!
//! **Failures.** A runtime file that does not parse, a server that does not
//! answer, answers 403 or sends garbage costs one log line (repeated only
//! when the problem changes) and leaves its kernels unmapped. It never fails
//! or delays a sample. Text from files and answers is logged with its
//! control characters escaped.

pub mod listener_check;
pub mod runtime;
pub mod sessions;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::config::JupyterConfig;
use crate::model::{CollectorStatus, Snapshot};

/// The first retry for a kernel id no server knew.
pub const RETRY_FIRST: Duration = Duration::from_secs(2);
/// The longest wait between retries for such a kernel.
pub const RETRY_MAX: Duration = Duration::from_secs(600);

/// Most servers asked in one lookup (each may take up to [`sessions::TIMEOUT`]);
/// runtime files beyond these are left for a later lookup.
pub const MAX_SERVERS: usize = 64;

/// Most servers of one user (the owner of their runtime files) asked in one
/// lookup: one user's many servers cannot use up a lookup's time.
pub const MAX_SERVERS_PER_OWNER: usize = 8;

/// Requests waiting for the lookup thread, at most. One is all it needs (a
/// lookup answers for the latest kernel set); a few absorb a reload.
pub const REQUEST_QUEUE: usize = 4;

/// Where users' homes are, for `other_users`.
const HOME_ROOTS: [&str; 2] = ["/home", "/Users"];

/// What a server said about one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    /// The notebook path as the server names it (relative to its root).
    pub notebook: String,
    pub kernel_name: Option<String>,
    /// The owner of the runtime file the answer came through.
    pub owner_uid: Option<u32>,
    /// The server's url, for logs.
    pub server: String,
}

impl Mapped {
    /// Whether this answer may name a kernel run by `kernel_uid`: the file's
    /// owner's kernels, or any kernel for a file root owns. Where either uid
    /// is unknown (an OS without uids) it is trusted.
    pub fn trusted_for(&self, kernel_uid: Option<u32>) -> bool {
        match (self.owner_uid, kernel_uid) {
            (Some(owner), Some(uid)) => owner == 0 || owner == uid,
            _ => true,
        }
    }
}

/// A kernel id that no server knew, and when to ask again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Miss {
    tries: u32,
    retry_at: Instant,
}

/// The cache: kernel id → notebook, and the ids no server knew.
#[derive(Debug, Clone, Default)]
pub struct NotebookMap {
    entries: HashMap<String, Mapped>,
    misses: HashMap<String, Miss>,
}

impl NotebookMap {
    pub fn get(&self, kernel_id: &str) -> Option<&Mapped> {
        self.entries.get(kernel_id)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The ids among `present` that call for a lookup at `now`: not in the
    /// map, and not a recent miss still waiting for its retry.
    pub fn due(&self, present: &HashSet<String>, now: Instant) -> Vec<String> {
        let mut due: Vec<String> = present
            .iter()
            .filter(|id| !self.entries.contains_key(*id))
            .filter(|id| self.misses.get(*id).is_none_or(|m| now >= m.retry_at))
            .cloned()
            .collect();
        due.sort();
        due
    }

    /// Take in a lookup's answers (`found`, every kernel the servers listed)
    /// made because of `asked`. The map keeps the answers for kernels still
    /// `present` (an entry whose server did not answer this time is kept
    /// while its kernel runs), and schedules a retry for each asked id
    /// nobody knew.
    pub fn refreshed(
        &mut self,
        found: HashMap<String, Mapped>,
        asked: &[String],
        present: &HashSet<String>,
        now: Instant,
    ) {
        self.entries.retain(|id, _| present.contains(id));
        for (id, m) in found {
            if present.contains(&id) {
                self.entries.insert(id, m);
            }
        }
        self.misses.retain(|id, _| present.contains(id));
        for id in asked {
            if self.entries.contains_key(id) {
                self.misses.remove(id);
                continue;
            }
            let tries = self.misses.get(id).map_or(0, |m| m.tries) + 1;
            let wait = RETRY_FIRST
                .saturating_mul(1u32 << (tries - 1).min(16))
                .min(RETRY_MAX);
            self.misses.insert(
                id.clone(),
                Miss {
                    tries,
                    retry_at: now + wait,
                },
            );
        }
    }
}

/// Fill in `notebook` and `kernel_name` of every kernel of `snap` that `map`
/// names (and may name, see [`Mapped::trusted_for`]). Returns the kernel ids
/// present and whether any of them is missing from the map.
pub fn apply(map: &HashMap<String, Mapped>, snap: &mut Snapshot) -> (HashSet<String>, bool) {
    let mut present = HashSet::new();
    let mut unknown = false;
    for p in &mut snap.processes {
        let Some(id) = p.workload.kernel_id.as_ref() else {
            continue;
        };
        present.insert(id.clone());
        match map.get(id) {
            Some(m) if m.trusted_for(p.uid) => {
                p.workload.notebook = Some(m.notebook.clone());
                p.workload.kernel_name = m.kernel_name.clone();
            }
            Some(_) => {}
            None => unknown = true,
        }
    }
    (present, unknown)
}

/// Ask every server found in `dirs` for its sessions. Returns every kernel
/// they listed (the first server to list an id wins) and the problems met,
/// as (what, message): `what` names the file or server, so that a problem is
/// logged once per thing that has it.
pub fn look_up(dirs: &[PathBuf], timeout: Duration) -> (HashMap<String, Mapped>, Vec<Problem>) {
    look_up_kept(dirs, timeout, &|_| true)
}

/// [`look_up`], keeping only the kernels `wanted` names: a server may list
/// as many sessions as its answer's cap holds, and only the kernels running
/// here are worth memory.
pub fn look_up_kept(
    dirs: &[PathBuf],
    timeout: Duration,
    wanted: &dyn Fn(&str) -> bool,
) -> (HashMap<String, Mapped>, Vec<Problem>) {
    let mut found = HashMap::new();
    let mut problems = Vec::new();
    // Servers that answered, by (sessions url, owner): another user's file
    // naming the same url is a different claim and is checked on its own.
    let mut answered: HashSet<(String, Option<u32>)> = HashSet::new();
    let mut asked = 0usize;
    let mut asked_of: HashMap<Option<u32>, usize> = HashMap::new();
    for dir in dirs {
        let (servers, file_problems) = runtime::read(dir);
        problems.extend(
            file_problems
                .into_iter()
                .map(|p| Problem::new(format!("read {}", p.path.display()), &p.message)),
        );
        for server in servers {
            problems.push(Problem::cleared(format!("read {}", server.file.display())));
            let what = format!("ask {}", server.file.display());
            let file = server.file.display();
            let target = match sessions::target(&server.url) {
                Ok(target) => target,
                Err(why) => {
                    problems.push(Problem::new(
                        what,
                        &format!(
                            "Jupyter server {} (from {file}): {why}; its kernels stay unmapped",
                            server.url
                        ),
                    ));
                    continue;
                }
            };
            if answered.contains(&(target.url.clone(), server.owner_uid)) {
                continue;
            }
            if asked >= MAX_SERVERS {
                problems.push(Problem::new(
                    "max servers".to_string(),
                    &format!(
                        "more than {MAX_SERVERS} Jupyter servers to ask; {file} and those after \
                         it were not asked"
                    ),
                ));
                return (found, problems);
            }
            let of_owner = asked_of.entry(server.owner_uid).or_default();
            if *of_owner >= MAX_SERVERS_PER_OWNER {
                let owner = server
                    .owner_uid
                    .map_or_else(|| "one user".to_string(), |uid| format!("uid {uid}"));
                problems.push(Problem::new(
                    what,
                    &format!(
                        "{owner} has more than {MAX_SERVERS_PER_OWNER} Jupyter servers to ask; \
                         {file} was not asked"
                    ),
                ));
                continue;
            }
            if let Err(why) =
                listener_check::check(server.owner_uid, server.pid, target.ip, target.port)
            {
                problems.push(Problem::new(
                    what,
                    &format!(
                        "not sending the token of {file} to {}: {why}; its kernels stay unmapped",
                        server.url
                    ),
                ));
                continue;
            }
            asked += 1;
            *of_owner += 1;
            match sessions::fetch(&server, &target, timeout) {
                Ok(list) => {
                    problems.push(Problem::cleared(what));
                    answered.insert((target.url.clone(), server.owner_uid));
                    for s in list.into_iter().filter(|s| wanted(&s.kernel_id)) {
                        found.entry(s.kernel_id).or_insert_with(|| Mapped {
                            notebook: s.path,
                            kernel_name: s.kernel_name,
                            owner_uid: server.owner_uid,
                            server: server.url.clone(),
                        });
                    }
                }
                Err(e) => problems.push(Problem::new(
                    what,
                    &format!(
                        "Jupyter server {} (from {file}): {e}; its kernels stay unmapped",
                        server.url
                    ),
                )),
            }
        }
    }
    (found, problems)
}

/// A problem of one file or server, or (empty message) the news that it
/// works again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub what: String,
    pub message: String,
}

impl Problem {
    /// A problem of `what`; `message` (which may quote file names, urls and
    /// servers' answers) with its control characters escaped.
    fn new(what: String, message: &str) -> Self {
        Self {
            what,
            message: printable(message).into_owned(),
        }
    }

    fn cleared(what: String) -> Self {
        Self {
            what,
            message: String::new(),
        }
    }
}

use crate::model::printable;
use crate::model::text_caps::capped;

/// Logs each problem once: again only when the message for the same thing
/// changes, or after it worked in between.
#[derive(Debug, Default)]
pub struct ProblemLog {
    last: HashMap<String, String>,
}

impl ProblemLog {
    /// The messages of `problems` that are news.
    pub fn news(&mut self, problems: Vec<Problem>) -> Vec<String> {
        let mut out = Vec::new();
        for p in problems {
            if p.message.is_empty() {
                self.last.remove(&p.what);
            } else if self.last.get(&p.what) != Some(&p.message) {
                self.last.insert(p.what, p.message.clone());
                out.push(p.message);
            }
        }
        out
    }
}

/// What the lookup thread needs to know where to look.
#[derive(Debug, Clone)]
struct Settings {
    enabled: bool,
    extra: Vec<PathBuf>,
    other_users: bool,
    as_root: bool,
    env: runtime::Env,
}

impl Settings {
    fn dirs(&self) -> Vec<PathBuf> {
        let homes = if self.as_root && self.other_users {
            let roots: Vec<&Path> = HOME_ROOTS.iter().map(Path::new).collect();
            runtime::homes_under(&roots)
        } else {
            Vec::new()
        };
        runtime::candidate_dirs(&self.env, &self.extra, &homes)
    }
}

/// What the daemon asks of the lookup thread.
enum Request {
    /// Look up what is due among these kernel ids (the ones present now).
    Lookup(HashSet<String>),
    /// New settings wait in the shared slot ([`Pending`]).
    Reconfigure,
}

type Published = Arc<Mutex<Arc<HashMap<String, Mapped>>>>;

/// Settings written by [`Notebooks::configure`] for the thread to take up
/// before its next lookup: a reload is never lost to a full queue.
type Pending = Arc<Mutex<Option<Settings>>>;

/// How the thread asks the servers of some directories for the kernels
/// present: [`look_up_kept`], or a stand-in in tests.
type LookupFn =
    Box<dyn Fn(&[PathBuf], &HashSet<String>) -> (HashMap<String, Mapped>, Vec<Problem>) + Send>;

/// The daemon's end of the lookup thread: see the module documentation.
pub struct Notebooks {
    tx: Option<SyncSender<Request>>,
    pending: Pending,
    latest: Published,
    enabled: AtomicBool,
    as_root: bool,
    dropped: AtomicU64,
}

impl Notebooks {
    /// Start the lookup thread with `config`; `as_root` says whether the
    /// daemon runs as root (which `other_users` applies to).
    pub fn start(config: &JupyterConfig, as_root: bool) -> Self {
        Self::start_with(
            config,
            as_root,
            Box::new(|dirs, wanted| {
                look_up_kept(dirs, sessions::TIMEOUT, &|id| wanted.contains(id))
            }),
        )
    }

    fn start_with(config: &JupyterConfig, as_root: bool, lookup: LookupFn) -> Self {
        let settings = settings(config, as_root);
        let latest: Published = Arc::default();
        let pending: Pending = Arc::default();
        let (tx, rx) = mpsc::sync_channel(REQUEST_QUEUE);
        let published = Arc::clone(&latest);
        let thread_pending = Arc::clone(&pending);
        let initial = settings.clone();
        let spawned = std::thread::Builder::new()
            .name("headroom-jupyter".into())
            .spawn(move || lookup_thread(rx, published, thread_pending, initial, lookup));
        let tx = match spawned {
            Ok(_) => Some(tx),
            Err(e) => {
                warn!("cannot start the Jupyter lookup thread, kernels stay unmapped: {e}");
                None
            }
        };
        if config.enabled {
            debug!(
                "Jupyter runtime directories: {}",
                settings
                    .dirs()
                    .iter()
                    .map(|d| printable(&d.display().to_string()).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if config.other_users && !as_root {
            info!(
                "[jupyter] other_users applies to a daemon running as root; as a user, headroom reads that user's runtime files only"
            );
        }
        Self {
            tx,
            pending,
            latest,
            enabled: AtomicBool::new(config.enabled),
            as_root,
            dropped: AtomicU64::new(0),
        }
    }

    /// Name the notebook of every kernel in `snap` that the latest map
    /// knows; hand the kernel ids to the lookup thread when one is missing.
    /// No I/O: cheap enough for every sample.
    pub fn annotate(&self, snap: &mut Snapshot) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let (present, unknown) = apply(&self.latest(), snap);
        if unknown {
            self.send(Request::Lookup(present));
        }
    }

    /// Apply a reloaded `[jupyter]` section.
    pub fn configure(&self, config: &JupyterConfig) {
        self.enabled.store(config.enabled, Ordering::Relaxed);
        let new = settings(config, self.as_root);
        match self.pending.lock() {
            Ok(mut slot) => *slot = Some(new),
            Err(poisoned) => *poisoned.into_inner() = Some(new),
        }
        // A full queue means the thread is busy: it takes up the pending
        // settings when it gets to the queued requests.
        self.send(Request::Reconfigure);
    }

    /// How the notebook lookup stands, for `/metrics` and the API: up while
    /// it is turned on and its thread runs; the requests dropped because a
    /// lookup was slow count as its errors.
    pub fn status(&self) -> CollectorStatus {
        let enabled = self.enabled.load(Ordering::Relaxed);
        let dropped = self.dropped_requests();
        let (up, detail) = match (enabled, self.tx.is_some()) {
            (false, _) => (
                false,
                "turned off in the config ([jupyter] enabled = false)".to_owned(),
            ),
            (true, false) => (
                false,
                "the lookup thread could not be started: kernels stay unnamed".to_owned(),
            ),
            (true, true) => (
                true,
                format!(
                    "kernels named from Jupyter servers' runtime files; {dropped} lookups dropped while one was slow"
                ),
            ),
        };
        CollectorStatus {
            name: "jupyter".to_owned(),
            up,
            detail,
            errors: dropped,
            applicable: enabled,
        }
    }

    /// Requests dropped because the queue was full (a lookup was slow).
    pub fn dropped_requests(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The map the thread published last.
    fn latest(&self) -> Arc<HashMap<String, Mapped>> {
        match self.latest.lock() {
            Ok(guard) => Arc::clone(&guard),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Queue `request` unless the queue is full; whether it was queued. The
    /// thread may be gone (it logged why): kernels then stay unmapped.
    fn send(&self, request: Request) -> bool {
        let Some(tx) = &self.tx else { return false };
        match tx.try_send(request) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

/// Name the notebooks of `snap`'s kernels with one lookup made now, for a
/// one-shot command (`headroom snapshot`); blocks for the servers' answers
/// (at most [`sessions::TIMEOUT`] each). Returns the problems met, to show.
pub fn annotate_once(config: &JupyterConfig, as_root: bool, snap: &mut Snapshot) -> Vec<String> {
    let has_kernels = snap
        .processes
        .iter()
        .any(|p| p.workload.kernel_id.is_some());
    if !config.enabled || !has_kernels {
        return Vec::new();
    }
    let (found, problems) = look_up(&settings(config, as_root).dirs(), sessions::TIMEOUT);
    apply(&found, snap);
    ProblemLog::default().news(problems)
}

fn settings(config: &JupyterConfig, as_root: bool) -> Settings {
    Settings {
        enabled: config.enabled,
        extra: config.runtime_dirs.clone(),
        other_users: config.other_users,
        as_root,
        env: runtime::Env::current(),
    }
}

fn lookup_thread(
    rx: Receiver<Request>,
    published: Published,
    pending: Pending,
    mut settings: Settings,
    lookup: LookupFn,
) {
    let mut map = NotebookMap::default();
    let mut log = ProblemLog::default();
    while let Ok(first) = rx.recv() {
        // Requests that queued up during a lookup: only the latest matters.
        let mut present = None;
        for request in std::iter::once(first).chain(rx.try_iter()) {
            if let Request::Lookup(ids) = request {
                present = Some(ids);
            }
        }
        let new = match pending.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(new) = new {
            settings = new;
            // Other directories may know the misses: ask again.
            map.misses.clear();
        }
        let Some(present) = present else { continue };
        if !settings.enabled {
            continue;
        }
        let due = map.due(&present, Instant::now());
        if due.is_empty() {
            continue;
        }
        // A kernel asked about before and still unknown is logged quietly.
        let first_time = due.iter().any(|id| !map.misses.contains_key(id));
        let started = Instant::now();
        let dirs = settings.dirs();
        let (found, problems) = lookup(&dirs, &present);
        for line in log.news(problems) {
            warn!("{line}");
        }
        map.refreshed(found, &due, &present, Instant::now());
        let named: Vec<String> = due
            .iter()
            .filter_map(|id| map.get(id).map(|m| (id, m)))
            .map(|(id, m)| {
                let notebook = capped(&m.notebook, LOGGED_NOTEBOOK_MAX);
                format!("{} → {}", short(id), printable(&notebook))
            })
            .collect();
        let outcome = logged_list(&named);
        let took = started.elapsed().as_millis();
        if first_time || !named.is_empty() {
            info!(
                "Jupyter lookup for {} new kernel(s) in {took} ms: {outcome}",
                due.len()
            );
        } else {
            debug!(
                "Jupyter lookup again for {} kernel(s) in {took} ms: {outcome}",
                due.len()
            );
        }
        let snapshot = Arc::new(map.entries.clone());
        match published.lock() {
            Ok(mut guard) => *guard = snapshot,
            Err(poisoned) => *poisoned.into_inner() = snapshot,
        }
    }
}

/// The most kernels one lookup's log line names, and the most bytes of
/// each notebook path it shows: a line stays short whatever the servers
/// say.
const LOGGED_KERNELS: usize = 8;
const LOGGED_NOTEBOOK_MAX: usize = 256;

/// A lookup's outcome for the log: at most [`LOGGED_KERNELS`] kernels
/// named, then how many more.
fn logged_list(named: &[String]) -> String {
    if named.is_empty() {
        return "no server knows them (asking again later)".to_string();
    }
    let mut out = named
        .iter()
        .take(LOGGED_KERNELS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if named.len() > LOGGED_KERNELS {
        out.push_str(&format!(" and {} more", named.len() - LOGGED_KERNELS));
    }
    out
}

/// The first 8 characters of a kernel id, for logs (escaped: the id comes
/// from a process's command line).
fn short(id: &str) -> String {
    let start: String = id.chars().take(8).collect();
    printable(&start).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(notebook: &str, owner: Option<u32>) -> Mapped {
        Mapped {
            notebook: notebook.into(),
            kernel_name: Some("python3".into()),
            owner_uid: owner,
            server: "http://127.0.0.1:8888/".into(),
        }
    }

    fn ids(list: &[&str]) -> HashSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_unknown_kernels_are_due() {
        let now = Instant::now();
        let mut map = NotebookMap::default();
        assert_eq!(map.due(&ids(&["a", "b"]), now), vec!["a", "b"]);
        let found = HashMap::from([("a".to_string(), mapped("a.ipynb", None))]);
        map.refreshed(found, &["a".into(), "b".into()], &ids(&["a", "b"]), now);
        assert_eq!(map.get("a").unwrap().notebook, "a.ipynb");
        // "b" was asked about and nobody knew it: not due again at once.
        assert!(map.due(&ids(&["a", "b"]), now).is_empty());
        assert!(
            map.due(&ids(&["a", "b"]), now + Duration::from_secs(1))
                .is_empty()
        );
        assert_eq!(map.due(&ids(&["a", "b"]), now + RETRY_FIRST), vec!["b"]);
        // A new kernel is due at once, whatever the misses.
        assert_eq!(map.due(&ids(&["a", "b", "c"]), now), vec!["c"]);
    }

    #[test]
    fn misses_back_off_up_to_the_maximum() {
        let mut map = NotebookMap::default();
        let mut now = Instant::now();
        let present = ids(&["x"]);
        let mut waits = Vec::new();
        for _ in 0..12 {
            map.refreshed(HashMap::new(), &["x".into()], &present, now);
            let retry = map.misses["x"].retry_at;
            waits.push(retry - now);
            now = retry;
        }
        assert_eq!(waits[0], RETRY_FIRST);
        assert_eq!(waits[1], RETRY_FIRST * 2);
        assert_eq!(waits[2], RETRY_FIRST * 4);
        assert_eq!(*waits.last().unwrap(), RETRY_MAX);
    }

    #[test]
    fn entries_of_gone_kernels_are_dropped_and_others_kept() {
        let now = Instant::now();
        let mut map = NotebookMap::default();
        let found = HashMap::from([
            ("a".to_string(), mapped("a.ipynb", None)),
            ("b".to_string(), mapped("b.ipynb", None)),
        ]);
        map.refreshed(found, &["a".into(), "b".into()], &ids(&["a", "b"]), now);
        // "b" ended, "c" started; the server that knew "a" did not answer.
        map.refreshed(HashMap::new(), &["c".into()], &ids(&["a", "c"]), now);
        assert!(map.get("a").is_some(), "kept while its kernel runs");
        assert!(map.get("b").is_none());
        assert_eq!(map.len(), 1);
    }

    #[test]
    fn answers_are_trusted_for_the_owners_kernels_only() {
        assert!(mapped("n", Some(1000)).trusted_for(Some(1000)));
        assert!(!mapped("n", Some(1000)).trusted_for(Some(1001)));
        assert!(mapped("n", Some(0)).trusted_for(Some(1001)));
        assert!(mapped("n", None).trusted_for(Some(1001)));
    }

    #[test]
    fn a_blocked_lookup_keeps_the_request_queue_bounded() {
        use std::sync::atomic::AtomicUsize;
        let (entered_tx, entered_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        let lookups = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&lookups);
        let last_queued = format!("k{}", REQUEST_QUEUE - 1);
        let answer = HashMap::from([
            ("k".to_string(), mapped("first.ipynb", None)),
            (last_queued.clone(), mapped("latest.ipynb", None)),
        ]);
        let notebooks = Notebooks::start_with(
            &JupyterConfig::default(),
            false,
            Box::new(move |_, _| {
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = entered_tx.send(());
                // Blocks until the test releases it (drops the sender).
                let _ = release_rx.lock().map(|rx| rx.recv());
                (answer.clone(), Vec::new())
            }),
        );
        assert!(notebooks.send(Request::Lookup(ids(&["k"]))));
        entered_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the lookup thread took the first request");
        // The thread is stuck in a lookup: the queue takes REQUEST_QUEUE
        // requests and drops every other one.
        let sent = 10_000;
        let queued = (0..sent)
            .filter(|i| notebooks.send(Request::Lookup(ids(&[&format!("k{i}")]))))
            .count();
        assert_eq!(queued, REQUEST_QUEUE);
        assert_eq!(notebooks.dropped_requests(), (sent - REQUEST_QUEUE) as u64);
        // Released, the thread serves the latest queued request in one
        // lookup and publishes its answer.
        drop(release_tx);
        let deadline = Instant::now() + Duration::from_secs(30);
        while notebooks.latest().get(&last_queued).is_none() {
            assert!(Instant::now() < deadline, "the thread never caught up");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(notebooks.latest()[&last_queued].notebook, "latest.ipynb");
        assert_eq!(
            lookups.load(Ordering::SeqCst),
            2,
            "the queued requests were served by one lookup"
        );
    }

    #[test]
    fn a_reload_is_taken_up_even_when_the_queue_is_full() {
        let (entered_tx, entered_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        let seen_dirs = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&seen_dirs);
        let notebooks = Notebooks::start_with(
            &JupyterConfig::default(),
            false,
            Box::new(move |dirs, _| {
                seen.lock().unwrap().push(dirs.to_vec());
                let _ = entered_tx.send(());
                let _ = release_rx.lock().map(|rx| rx.recv());
                (HashMap::new(), Vec::new())
            }),
        );
        assert!(notebooks.send(Request::Lookup(ids(&["a"]))));
        entered_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        for _ in 0..REQUEST_QUEUE {
            assert!(notebooks.send(Request::Lookup(ids(&["b"]))));
        }
        let reloaded = JupyterConfig {
            runtime_dirs: vec![PathBuf::from("/srv/reloaded/runtime")],
            ..JupyterConfig::default()
        };
        notebooks.configure(&reloaded);
        assert_eq!(notebooks.dropped_requests(), 1, "the wake-up was dropped");
        drop(release_tx);
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen_dirs.lock().unwrap().len() < 2 {
            assert!(Instant::now() < deadline, "no second lookup");
            std::thread::sleep(Duration::from_millis(5));
        }
        let second = seen_dirs.lock().unwrap()[1].clone();
        assert!(
            second.contains(&PathBuf::from("/srv/reloaded/runtime")),
            "{second:?}"
        );
    }

    #[test]
    fn a_lookups_log_line_names_a_few_kernels_and_counts_the_rest() {
        let named: Vec<String> = (0..20).map(|i| format!("k{i} → n{i}.ipynb")).collect();
        let line = logged_list(&named);
        assert!(line.starts_with("k0 → n0.ipynb, k1"), "{line}");
        assert!(line.ends_with(" and 12 more"), "{line}");
        assert!(!line.contains("k8 "), "{line}");
        assert_eq!(logged_list(&named[..1]), "k0 → n0.ipynb");
        assert!(logged_list(&[]).contains("no server knows them"));
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain ünïcode"), "plain ünïcode");
        assert_eq!(
            printable("a\nFAKE LOG LINE\u{1b}[31m"),
            "a\\nFAKE LOG LINE\\u{1b}[31m"
        );
        let p = Problem::new("x".into(), "bad\r\nname");
        assert_eq!(p.message, "bad\\r\\nname");
    }

    #[test]
    fn problems_are_logged_once_until_they_change_or_clear() {
        let mut log = ProblemLog::default();
        let p = |m: &str| Problem {
            what: "s".into(),
            message: m.into(),
        };
        assert_eq!(log.news(vec![p("403")]), vec!["403"]);
        assert!(log.news(vec![p("403")]).is_empty());
        assert_eq!(log.news(vec![p("timeout")]), vec!["timeout"]);
        assert!(log.news(vec![Problem::cleared("s".into())]).is_empty());
        assert_eq!(log.news(vec![p("timeout")]), vec!["timeout"]);
    }
}
