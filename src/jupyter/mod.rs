//! Which notebook each Jupyter kernel runs.
//!
//! The classifier reads a kernel's id from its command line; only the
//! Jupyter server that started it knows the notebook. headroom finds the
//! servers from their runtime files ([`runtime`], read as untrusted input),
//! asks them for `/api/sessions` ([`sessions`]) and keeps a [`NotebookMap`]
//! from kernel to notebook path. A kernel is its id *and* its user
//! ([`Kernel`]): any user can put an id into a command line of their own.
//!
//! - **Whose answer.** Only a server of the kernel's owner (its runtime file
//!   that user's, its port held only by that user: [`listener_check`]) or of
//!   root's is asked about a kernel, so another user's server can neither
//!   name, erase nor overwrite its label. Tokens go only to loopback, only
//!   while the file's pid lives and its owner holds the port.
//! - **Whose files.** As a user, that user's runtime directories; as root,
//!   root's and `runtime_dirs`, and every user's only with `[jupyter]
//!   other_users = true` (the files hold tokens that run code as that user).
//! - **When.** Only for a kernel the map cannot answer; one no server knows
//!   is asked again after 2 s, 4 s, … up to every 10 minutes.
//! - **Where.** [`Notebooks::annotate`] only reads the published map; the
//!   lookups run on the `headroom-jupyter` thread, one thread per user and
//!   at most [`MAX_LOOKUPS_AT_ONCE`], so one user's slow servers hold up
//!   only that user's kernels. A new kernel is named from the sample after
//!   its lookup answered.
//! - **Bounds.** [`MAX_SERVERS_PER_OWNER`] servers of the owner and of root,
//!   each for at most [`sessions::TIMEOUT`]; requests beyond
//!   [`REQUEST_QUEUE`] are dropped (the next sample sends them again).
//! - **Failures** cost one log line (repeated when the problem changes,
//!   control characters escaped) and leave kernels unmapped; they never
//!   fail or delay a sample.

pub mod listener_check;
mod lookup_thread;
pub mod runtime;
pub mod sessions;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::config::JupyterConfig;
use crate::model::{Collector, CollectorStatus, Snapshot};

use lookup_thread::LookupThread;

/// The first retry for a kernel id no server knew.
pub const RETRY_FIRST: Duration = Duration::from_secs(2);
/// The longest wait between retries for such a kernel.
pub const RETRY_MAX: Duration = Duration::from_secs(600);

/// Most servers of one user (the owner of their runtime files) asked in one
/// lookup (each may take up to [`sessions::TIMEOUT`]); runtime files beyond
/// these are left for a later lookup.
pub const MAX_SERVERS_PER_OWNER: usize = 8;

/// Most lookups under way at once (each for the kernels of one user).
pub const MAX_LOOKUPS_AT_ONCE: usize = 8;

/// How often the lookup thread looks for finished lookups while some are
/// under way.
const ANSWER_POLL: Duration = Duration::from_millis(20);

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

/// A kernel as a sample shows it: its id, from its command line (which any
/// user can read, and put into a process of their own), and the user that
/// runs it (`None` where the OS does not say).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kernel {
    pub id: String,
    pub uid: Option<u32>,
}

impl Kernel {
    pub fn new(id: impl Into<String>, uid: Option<u32>) -> Self {
        Self { id: id.into(), uid }
    }
}

/// A kernel that no server knew, and when to ask again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Miss {
    tries: u32,
    retry_at: Instant,
}

/// The cache: kernel → notebook, and the kernels no server knew.
#[derive(Debug, Clone, Default)]
pub struct NotebookMap {
    entries: HashMap<Kernel, Mapped>,
    misses: HashMap<Kernel, Miss>,
}

impl NotebookMap {
    pub fn get(&self, kernel: &Kernel) -> Option<&Mapped> {
        self.entries.get(kernel)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The kernels among `present` that call for a lookup at `now`: not in
    /// the map, and not a recent miss still waiting for its retry.
    pub fn due(&self, present: &HashSet<Kernel>, now: Instant) -> Vec<Kernel> {
        let mut due: Vec<Kernel> = present
            .iter()
            .filter(|k| !self.entries.contains_key(*k))
            .filter(|k| self.misses.get(*k).is_none_or(|m| now >= m.retry_at))
            .cloned()
            .collect();
        due.sort();
        due
    }

    /// Take in a lookup's answers (`found`: what servers trusted for each
    /// kernel's owner said of it) made because of `asked`. The map keeps
    /// the answers for kernels still `present` (an entry whose server did
    /// not answer this time is kept while its kernel runs), and schedules
    /// a retry for each asked kernel nobody knew.
    pub fn refreshed(
        &mut self,
        found: HashMap<Kernel, Mapped>,
        asked: &[Kernel],
        present: &HashSet<Kernel>,
        now: Instant,
    ) {
        self.entries.retain(|k, _| present.contains(k));
        for (k, m) in found {
            if present.contains(&k) && m.trusted_for(k.uid) {
                self.entries.insert(k, m);
            }
        }
        self.misses.retain(|k, _| present.contains(k));
        for k in asked {
            if self.entries.contains_key(k) {
                self.misses.remove(k);
                continue;
            }
            let tries = self.misses.get(k).map_or(0, |m| m.tries) + 1;
            let wait = RETRY_FIRST
                .saturating_mul(1u32 << (tries - 1).min(16))
                .min(RETRY_MAX);
            self.misses.insert(
                k.clone(),
                Miss {
                    tries,
                    retry_at: now + wait,
                },
            );
        }
    }
}

/// Fill in `notebook` and `kernel_name` of every kernel of `snap` that `map`
/// names. Returns the kernels present and whether any of them is missing
/// from the map.
pub fn apply(map: &HashMap<Kernel, Mapped>, snap: &mut Snapshot) -> (HashSet<Kernel>, bool) {
    let mut present = HashSet::new();
    let mut unknown = false;
    for p in &mut snap.processes {
        let Some(id) = p.workload.kernel_id.as_ref() else {
            continue;
        };
        let kernel = Kernel::new(id.clone(), p.uid);
        match map.get(&kernel) {
            Some(m) if m.trusted_for(p.uid) => {
                p.workload.notebook = Some(m.notebook.clone());
                p.workload.kernel_name = m.kernel_name.clone();
            }
            Some(_) => {}
            None => unknown = true,
        }
        present.insert(kernel);
    }
    (present, unknown)
}

/// Whose servers a lookup for `owner`'s kernels asks, in order: `owner`'s
/// own first (rank 0), then root's and those whose owner the OS does not
/// say (rank 1); `None` for a server whose answer may not name `owner`'s
/// kernels. For kernels whose owner is unknown (`owner` `None`), every
/// server, in the order found.
fn rank(server_owner: Option<u32>, owner: Option<u32>) -> Option<u8> {
    match (server_owner, owner) {
        (_, None) => Some(1),
        (Some(s), Some(o)) if s == o => Some(0),
        (Some(0) | None, Some(_)) => Some(1),
        _ => None,
    }
}

/// Ask the servers found in `dirs` whose answers may name the kernels of
/// `owner` (see `rank`: that user's, then root's; every server for kernels
/// whose owner is unknown), each for at most `timeout`. Returns every
/// kernel id they listed, with the answer of the first server to list it,
/// and the problems met, as (what, message): `what` names the file or
/// server, so that a problem is logged once per thing that has it.
pub fn look_up(
    dirs: &[PathBuf],
    owner: Option<u32>,
    timeout: Duration,
) -> (HashMap<String, Mapped>, Vec<Problem>) {
    let mut found: HashMap<String, Mapped> = HashMap::new();
    let mut problems = Vec::new();
    let mut servers = Vec::new();
    for dir in dirs {
        let (listed, file_problems) = runtime::read(dir);
        problems.extend(
            file_problems
                .into_iter()
                .map(|p| Problem::new(format!("read {}", p.path.display()), &p.message)),
        );
        for server in listed {
            problems.push(Problem::cleared(format!("read {}", server.file.display())));
            if let Some(rank) = rank(server.owner_uid, owner) {
                servers.push((rank, server));
            }
        }
    }
    // The owner's own servers first (a stable sort keeps the order found).
    servers.sort_by_key(|(rank, _)| *rank);
    // Servers that answered, by (sessions url, owner): another user's file
    // naming the same url is a different claim and is checked on its own.
    let mut answered: HashSet<(String, Option<u32>)> = HashSet::new();
    let mut asked_of: HashMap<Option<u32>, usize> = HashMap::new();
    for (_, server) in servers {
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
        let of_owner = asked_of.entry(server.owner_uid).or_default();
        if *of_owner >= MAX_SERVERS_PER_OWNER {
            let whose = server
                .owner_uid
                .map_or_else(|| "one user".to_string(), |uid| format!("uid {uid}"));
            problems.push(Problem::new(
                what,
                &format!(
                    "{whose} has more than {MAX_SERVERS_PER_OWNER} Jupyter servers to ask; \
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
        *of_owner += 1;
        match sessions::fetch(&server, &target, timeout) {
            Ok(list) => {
                problems.push(Problem::cleared(what));
                answered.insert((target.url.clone(), server.owner_uid));
                for s in list {
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
    (found, problems)
}

/// The answers of one lookup for `owner`'s kernels, keyed by kernel: an
/// id listed there stands for the kernel of that id that `owner` runs.
fn for_owner(found: HashMap<String, Mapped>, owner: Option<u32>) -> HashMap<Kernel, Mapped> {
    found
        .into_iter()
        .map(|(id, m)| (Kernel::new(id, owner), m))
        .collect()
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
    /// Look up what is due among these kernels (the ones present now).
    Lookup(HashSet<Kernel>),
    /// New settings wait in the shared slot ([`Pending`]).
    Reconfigure,
}

type Published = Arc<Mutex<Arc<HashMap<Kernel, Mapped>>>>;

/// Settings written by [`Notebooks::configure`] for the thread to take up
/// before its next lookup: a reload is never lost to a full queue.
type Pending = Arc<Mutex<Option<Settings>>>;

/// How a lookup asks the servers of some directories about one user's
/// kernels: [`look_up`], or a stand-in in tests.
type LookupFn =
    Arc<dyn Fn(&[PathBuf], Option<u32>) -> (HashMap<String, Mapped>, Vec<Problem>) + Send + Sync>;

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
            Arc::new(|dirs, owner| look_up(dirs, owner, sessions::TIMEOUT)),
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
            .spawn(move || {
                LookupThread::new(published, thread_pending, initial, lookup).run(&rx);
            });
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
    /// knows; hand the kernels to the lookup thread when one is missing.
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

    /// Requests dropped because the queue was full.
    pub fn dropped_requests(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The map the thread published last.
    fn latest(&self) -> Arc<HashMap<Kernel, Mapped>> {
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

impl Collector for Notebooks {
    fn name(&self) -> &'static str {
        "jupyter"
    }

    /// How the notebook lookup stands, for `/metrics` and the API: up while
    /// it is turned on and its thread runs; the requests dropped because
    /// the queue was full count as its errors.
    fn status(&self) -> Option<CollectorStatus> {
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
                    "kernels named from Jupyter servers' runtime files; {dropped} lookups dropped while the queue was full"
                ),
            ),
        };
        Some(CollectorStatus {
            name: "jupyter".to_owned(),
            up,
            detail,
            errors: dropped,
            applicable: enabled,
        })
    }
}

/// Name the notebooks of `snap`'s kernels with lookups made now, one per
/// user whose kernels it shows, side by side, for a one-shot command
/// (`headroom snapshot`); blocks for the servers' answers (at most
/// [`sessions::TIMEOUT`] each). Returns the problems met, to show.
pub fn annotate_once(config: &JupyterConfig, as_root: bool, snap: &mut Snapshot) -> Vec<String> {
    let owners: BTreeSet<Option<u32>> = snap
        .processes
        .iter()
        .filter(|p| p.workload.kernel_id.is_some())
        .map(|p| p.uid)
        .collect();
    if !config.enabled || owners.is_empty() {
        return Vec::new();
    }
    let dirs = settings(config, as_root).dirs();
    let answers: Vec<_> = std::thread::scope(|scope| {
        let asking: Vec<_> = owners
            .iter()
            .map(|&owner| {
                let dirs = &dirs;
                scope.spawn(move || (owner, look_up(dirs, owner, sessions::TIMEOUT)))
            })
            .collect();
        asking.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let mut map = HashMap::new();
    let mut problems = Vec::new();
    for (owner, (found, met)) in answers {
        map.extend(for_owner(found, owner));
        problems.extend(met);
    }
    apply(&map, snap);
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

    fn k(id: &str) -> Kernel {
        Kernel::new(id, None)
    }

    fn ids(list: &[&str]) -> HashSet<Kernel> {
        list.iter().map(|s| k(s)).collect()
    }

    fn found(list: &[(&str, Mapped)]) -> HashMap<Kernel, Mapped> {
        list.iter().map(|(id, m)| (k(id), m.clone())).collect()
    }

    #[test]
    fn only_unknown_kernels_are_due() {
        let now = Instant::now();
        let mut map = NotebookMap::default();
        assert_eq!(map.due(&ids(&["a", "b"]), now), vec![k("a"), k("b")]);
        let answer = found(&[("a", mapped("a.ipynb", None))]);
        map.refreshed(answer, &[k("a"), k("b")], &ids(&["a", "b"]), now);
        assert_eq!(map.get(&k("a")).unwrap().notebook, "a.ipynb");
        // "b" was asked about and nobody knew it: not due again at once.
        assert!(map.due(&ids(&["a", "b"]), now).is_empty());
        assert!(
            map.due(&ids(&["a", "b"]), now + Duration::from_secs(1))
                .is_empty()
        );
        assert_eq!(map.due(&ids(&["a", "b"]), now + RETRY_FIRST), vec![k("b")]);
        // A new kernel is due at once, whatever the misses.
        assert_eq!(map.due(&ids(&["a", "b", "c"]), now), vec![k("c")]);
    }

    #[test]
    fn misses_back_off_up_to_the_maximum() {
        let mut map = NotebookMap::default();
        let mut now = Instant::now();
        let present = ids(&["x"]);
        let mut waits = Vec::new();
        for _ in 0..12 {
            map.refreshed(HashMap::new(), &[k("x")], &present, now);
            let retry = map.misses[&k("x")].retry_at;
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
        let answer = found(&[
            ("a", mapped("a.ipynb", None)),
            ("b", mapped("b.ipynb", None)),
        ]);
        map.refreshed(answer, &[k("a"), k("b")], &ids(&["a", "b"]), now);
        // "b" ended, "c" started; the server that knew "a" did not answer.
        map.refreshed(HashMap::new(), &[k("c")], &ids(&["a", "c"]), now);
        assert!(map.get(&k("a")).is_some(), "kept while its kernel runs");
        assert!(map.get(&k("b")).is_none());
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
    fn a_lookup_asks_the_owners_servers_then_roots_and_no_one_elses() {
        assert_eq!(rank(Some(1000), Some(1000)), Some(0));
        assert_eq!(rank(Some(0), Some(1000)), Some(1));
        assert_eq!(rank(None, Some(1000)), Some(1));
        assert_eq!(rank(Some(1001), Some(1000)), None);
        assert_eq!(
            rank(Some(1000), Some(0)),
            None,
            "root's kernels: root's servers"
        );
        assert_eq!(rank(Some(1001), None), Some(1), "owner unknown: any server");
    }

    #[test]
    fn another_users_server_neither_names_erases_nor_overwrites_a_kernels_label() {
        let now = Instant::now();
        let id = "3f2a9c1e";
        let victim = Kernel::new(id, Some(1000));
        let mimic = Kernel::new(id, Some(1001));
        let present: HashSet<Kernel> = [victim.clone()].into();
        let mut map = NotebookMap::default();
        // uid 1001's lookup lists the victim's id: it stands for a kernel
        // of uid 1001's, which does not run.
        let theirs = HashMap::from([(id.to_string(), mapped("stolen.ipynb", Some(1001)))]);
        map.refreshed(for_owner(theirs.clone(), Some(1001)), &[], &present, now);
        assert!(map.get(&victim).is_none());
        let ours = HashMap::from([(id.to_string(), mapped("train.ipynb", Some(1000)))]);
        map.refreshed(
            for_owner(ours, Some(1000)),
            std::slice::from_ref(&victim),
            &present,
            now,
        );
        assert_eq!(map.get(&victim).unwrap().notebook, "train.ipynb");
        // uid 1001 now runs a process with the same id: it gets its own
        // server's label, and the victim keeps theirs.
        let both: HashSet<Kernel> = [victim.clone(), mimic.clone()].into();
        map.refreshed(
            for_owner(theirs, Some(1001)),
            std::slice::from_ref(&mimic),
            &both,
            now,
        );
        assert_eq!(map.get(&victim).unwrap().notebook, "train.ipynb");
        assert_eq!(map.get(&mimic).unwrap().notebook, "stolen.ipynb");
        // An answer under the victim's key from a server of another user's
        // is refused, whoever hands it in.
        let forged = HashMap::from([(victim.clone(), mapped("forged.ipynb", Some(1001)))]);
        map.refreshed(forged, std::slice::from_ref(&victim), &both, now);
        assert_eq!(map.get(&victim).unwrap().notebook, "train.ipynb");
    }

    /// The owners a stand-in lookup was called for, in order.
    type Calls = Arc<Mutex<Vec<Option<u32>>>>;

    /// A lookup that blocks, for the kernels of `slow`, until `release`
    /// is dropped, and answers every other user's at once (`id` →
    /// `<uid>.ipynb`); counts the lookups of each user.
    fn gated(
        slow: Option<u32>,
        release: mpsc::Receiver<()>,
    ) -> (LookupFn, Calls, mpsc::Receiver<()>) {
        let (entered_tx, entered) = mpsc::channel();
        let entered_tx = Mutex::new(entered_tx);
        let release = Mutex::new(release);
        let calls = Arc::new(Mutex::new(Vec::new()));
        let counted = Arc::clone(&calls);
        let lookup: LookupFn = Arc::new(move |_, owner| {
            counted.lock().unwrap().push(owner);
            if owner == slow {
                let _ = entered_tx.lock().unwrap().send(());
                let _ = release.lock().map(|rx| rx.recv());
            }
            let name = format!("{}.ipynb", owner.unwrap_or(0));
            let found = HashMap::from([("k".to_string(), mapped(&name, owner))]);
            (found, Vec::new())
        });
        (lookup, calls, entered)
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "{what}: not within 30 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn one_users_stuck_lookup_holds_up_no_other_users_and_is_not_started_twice() {
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (lookup, calls, entered) = gated(Some(1001), release_rx);
        let notebooks = Notebooks::start_with(&JupyterConfig::default(), false, lookup);
        let attacker = Kernel::new("k", Some(1001));
        let victim = Kernel::new("k", Some(1000));
        let both: HashSet<Kernel> = [attacker.clone(), victim.clone()].into();
        assert!(notebooks.send(Request::Lookup([attacker.clone()].into())));
        entered
            .recv_timeout(Duration::from_secs(30))
            .expect("uid 1001's lookup started");
        // uid 1001's lookup is stuck; uid 1000's kernel appears.
        assert!(notebooks.send(Request::Lookup(both.clone())));
        wait_for("uid 1000's kernel named", || {
            notebooks.latest().contains_key(&victim)
        });
        assert_eq!(notebooks.latest()[&victim].notebook, "1000.ipynb");
        // More samples while it is stuck start no second lookup of uid 1001.
        for _ in 0..50 {
            assert!(notebooks.send(Request::Lookup(both.clone())));
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(release_tx);
        wait_for("uid 1001's kernel named", || {
            notebooks.latest().contains_key(&attacker)
        });
        assert_eq!(notebooks.latest()[&attacker].notebook, "1001.ipynb");
        assert_eq!(notebooks.latest()[&victim].notebook, "1000.ipynb");
        let calls = calls.lock().unwrap().clone();
        assert_eq!(
            calls.iter().filter(|&&o| o == Some(1001)).count(),
            1,
            "{calls:?}"
        );
        assert_eq!(notebooks.dropped_requests(), 0);
    }

    #[test]
    fn a_lookup_that_fails_leaves_its_users_next_one_free_to_start() {
        use std::sync::atomic::AtomicUsize;
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let notebooks = Notebooks::start_with(
            &JupyterConfig::default(),
            false,
            Arc::new(move |_, owner| {
                if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("a lookup that fails");
                }
                let found = HashMap::from([("k".to_string(), mapped("n.ipynb", owner))]);
                (found, Vec::new())
            }),
        );
        let kernel = Kernel::new("k", Some(1000));
        let mut tries = 0;
        wait_for("the kernel named after a failed lookup", || {
            // The failed lookup's retry waits RETRY_FIRST; a reload clears it.
            if tries % 50 == 0 {
                notebooks.configure(&JupyterConfig::default());
            }
            tries += 1;
            notebooks.send(Request::Lookup([kernel.clone()].into()));
            notebooks.latest().contains_key(&kernel)
        });
        assert!(calls.load(Ordering::SeqCst) >= 2);
    }

    #[test]
    fn a_reload_is_taken_up_by_the_next_lookup() {
        let seen_dirs = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&seen_dirs);
        let notebooks = Notebooks::start_with(
            &JupyterConfig::default(),
            false,
            Arc::new(move |dirs, _| {
                seen.lock().unwrap().push(dirs.to_vec());
                (HashMap::new(), Vec::new())
            }),
        );
        let reloaded = JupyterConfig {
            runtime_dirs: vec![PathBuf::from("/srv/reloaded/runtime")],
            ..JupyterConfig::default()
        };
        notebooks.configure(&reloaded);
        assert!(notebooks.send(Request::Lookup(ids(&["a"]))));
        wait_for("a lookup", || !seen_dirs.lock().unwrap().is_empty());
        let first = seen_dirs.lock().unwrap()[0].clone();
        assert!(
            first.contains(&PathBuf::from("/srv/reloaded/runtime")),
            "{first:?}"
        );
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
