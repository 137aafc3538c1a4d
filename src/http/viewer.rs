//! Who is asking, and what they may see: the HTTP surface reveals to a local
//! user no more than the OS would.
//!
//! The viewer is the uid owning the client end of the TCP connection,
//! looked up once per connection ([`Peer`], through
//! [`crate::os::sockets::client_uid`]); a client that cannot be identified
//! is an unprivileged stranger. Unless `http.show_all_users = true`:
//!
//! - A process's `argv`, `exe`, notebook, kernel id and the evidence drawn
//!   from them or its libraries go only to root and its owner (`hidepid`
//!   hides command lines, `maps` is private, notebooks come from the user's
//!   own server); anyone else gets `"redacted": true`. Where `/proc` hides
//!   other users' processes ([`crate::os::proc_visibility`]), a viewer
//!   outside the exempt group sees only their own ([`Sight::OwnOnly`]) in
//!   processes, jobs, metrics and events.
//! - An event about another user's process
//!   ([`crate::event::Event::redacted`]) loses the notebook, the kernel id
//!   and what the kernel log said (the OS shows it to root only).
//! - Container names read from a directory others may not list (Docker's)
//!   are hidden likewise; pod, namespace and cgroup ids stay.
//! - Memory no process owns ([`redact_unowned`]): `/dev/shm` and SysV
//!   entries stay; other tmpfs paths and memfd names become
//!   [`HIDDEN_PATH`] and their holders are left out, for every viewer who
//!   does not see everything (their owners too).
//! - Hook arguments in `/api/v1/config` (webhook URLs, tokens) are hidden
//!   from everyone, root included.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use tokio::sync::OnceCell;

use crate::config::Config;
use crate::model::{
    Action, Argv, HIDDEN_PATH, Job, Labels, ProcessSample, Snapshot, TmpfsFile, Unowned, Workload,
};
use crate::os::proc_visibility::{self, ProcVisibility};

/// What replaces each hidden hook argument.
pub const REDACTED: &str = "[redacted]";

/// The server's own address on a connection, beside axum's
/// [`ConnectInfo`] (the client's address) in each request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalAddr(pub SocketAddr);

/// The client of one connection and, once asked, the uid that owns its
/// socket. Cloned into each request of the connection, so the lookup runs
/// at most once per connection.
#[derive(Debug, Clone)]
pub struct Peer {
    client: Option<SocketAddr>,
    server: Option<SocketAddr>,
    uid: Arc<OnceCell<Option<u32>>>,
}

impl Peer {
    /// The client at `client` of the server at `server`; its uid is looked
    /// up when first needed.
    pub fn new(client: SocketAddr, server: SocketAddr) -> Self {
        Self {
            client: Some(client),
            server: Some(server),
            uid: Arc::new(OnceCell::new()),
        }
    }

    /// A client whose uid is already known (`None`: unknown).
    pub fn known(uid: Option<u32>) -> Self {
        Self {
            client: None,
            server: None,
            uid: Arc::new(OnceCell::new_with(Some(uid))),
        }
    }

    /// The uid owning the client's socket, or `None` when it cannot be told.
    pub async fn uid(&self) -> Option<u32> {
        let (client, server) = (self.client, self.server);
        *self
            .uid
            .get_or_init(|| async move {
                let (Some(client), Some(server)) = (client, server) else {
                    return None;
                };
                lookup(client, server).await
            })
            .await
    }
}

/// Only a loopback client's socket is in this machine's table under the
/// address the server saw.
async fn lookup(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    if !client.ip().is_loopback() {
        return None;
    }
    let found =
        tokio::task::spawn_blocking(move || crate::os::sockets::client_uid(client, server)).await;
    match found {
        Ok(Ok(uid)) => uid,
        Ok(Err(e)) => {
            tracing::debug!("cannot tell the user of HTTP client {client}: {e}");
            None
        }
        Err(e) => {
            tracing::debug!("cannot tell the user of HTTP client {client}: {e}");
            None
        }
    }
}

/// Who a request is counted against in the gates' shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ViewerKey {
    /// A local client, by the uid owning its socket.
    Uid(u32),
    /// A client beyond loopback (`http.allow_remote`), by its address.
    Remote(IpAddr),
    /// Every local client whose uid could not be told, together.
    Unidentified,
}

/// The viewer of a request, from its [`Peer`] (or, without one, its
/// [`ConnectInfo`] and [`LocalAddr`]); unknown when neither is there.
#[derive(Debug, Clone)]
pub struct Viewer(Peer);

impl Viewer {
    pub async fn uid(&self) -> Option<u32> {
        self.0.uid().await
    }

    /// Whose share of the gates ([`super::gates`]) this viewer's requests
    /// take: its uid, else a remote client's address, else the share of
    /// every unidentified local client.
    pub async fn key(&self) -> ViewerKey {
        match (self.uid().await, self.0.client) {
            (Some(uid), _) => ViewerKey::Uid(uid),
            (None, Some(client)) if !client.ip().is_loopback() => ViewerKey::Remote(client.ip()),
            (None, _) => ViewerKey::Unidentified,
        }
    }

    /// What this viewer may see, given the config's `show_all_users` and
    /// how the OS shows other users' processes.
    pub async fn sight(&self, config: &Config) -> Sight {
        if config.http.show_all_users {
            return Sight::Everything;
        }
        let uid = self.uid().await;
        if uid == Some(0) {
            return Sight::Everything;
        }
        let hidden = tokio::task::spawn_blocking(move || {
            let v = proc_visibility_now();
            match uid {
                Some(uid) => proc_visibility::hidden_from(v, uid),
                None => v.hides_others,
            }
        })
        .await
        // Showing too little is the safe mistake.
        .unwrap_or(true);
        Sight::under(uid, hidden)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Viewer {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        if let Some(peer) = parts.extensions.get::<Peer>() {
            return Ok(Viewer(peer.clone()));
        }
        let client = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        let server = parts.extensions.get::<LocalAddr>();
        Ok(Viewer(match (client, server) {
            (Some(ConnectInfo(client)), Some(LocalAddr(server))) => Peer::new(*client, *server),
            _ => Peer::known(None),
        }))
    }
}

/// How long what the OS shows is taken as known before `/proc`'s mount
/// options are read again.
const VISIBILITY_FOR: Duration = Duration::from_secs(5);

/// How `/proc` shows other users' processes, read at most once every
/// [`VISIBILITY_FOR`] (a remount takes effect within that).
fn proc_visibility_now() -> ProcVisibility {
    static LAST: Mutex<Option<(Instant, ProcVisibility)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    match *last {
        Some((at, v)) if at.elapsed() < VISIBILITY_FOR => v,
        _ => {
            let v = proc_visibility::read();
            *last = Some((Instant::now(), v));
            v
        }
    }
}

/// Which processes a viewer is shown, and whose private details.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sight {
    /// Every process, in full (root, or `show_all_users`).
    Everything,
    /// Every process; in full only those owned by this uid.
    Own(u32),
    /// Every process, none in full (an unknown viewer).
    Nothing,
    /// Only the processes owned by this uid, in full: the OS hides other
    /// users' processes from it (`hidepid`).
    OwnOnly(u32),
    /// No process at all: an unknown viewer where the OS hides other
    /// users' processes.
    NoneListed,
}

impl Sight {
    /// The sight of a viewer with this uid (`None`: unknown) where the OS
    /// shows every process to everyone.
    pub fn of(uid: Option<u32>) -> Self {
        Self::under(uid, false)
    }

    /// The sight of a viewer with this uid (`None`: unknown); `hidden`:
    /// the OS hides other users' processes from it.
    pub fn under(uid: Option<u32>, hidden: bool) -> Self {
        match (uid, hidden) {
            (Some(0), _) => Sight::Everything,
            (Some(uid), false) => Sight::Own(uid),
            (Some(uid), true) => Sight::OwnOnly(uid),
            (None, false) => Sight::Nothing,
            (None, true) => Sight::NoneListed,
        }
    }

    /// Whether the viewer sees the details of a process owned by `owner`.
    pub fn sees(self, owner: Option<u32>) -> bool {
        match self {
            Sight::Everything => true,
            Sight::Own(uid) | Sight::OwnOnly(uid) => owner == Some(uid),
            Sight::Nothing | Sight::NoneListed => false,
        }
    }

    /// Whether a process owned by `owner` is shown to the viewer at all.
    pub fn lists(self, owner: Option<u32>) -> bool {
        match self {
            Sight::Everything | Sight::Own(_) | Sight::Nothing => true,
            Sight::OwnOnly(uid) => owner == Some(uid),
            Sight::NoneListed => false,
        }
    }

    /// Whether some process may be left out of what the viewer is shown.
    pub fn omits_any(self) -> bool {
        matches!(self, Sight::OwnOnly(_) | Sight::NoneListed)
    }
}

/// `p` with what the OS would hide from other users left out: the command
/// line, the executable, the notebook and kernel id, and the workload
/// evidence that quotes them.
pub fn redact_process(p: &ProcessSample) -> ProcessSample {
    ProcessSample {
        exe: None,
        argv: Argv::default(),
        workload: redact_workload(&p.workload),
        labels: p.labels.as_ref().map(redact_labels),
        ..p.clone()
    }
}

/// The jobs of `snap` shown to a viewer with `sight`: those whose root it
/// is shown, with the members it is shown.
pub fn listed_jobs(snap: &Snapshot, sight: Sight) -> Vec<Job> {
    if !sight.omits_any() {
        return snap.jobs.clone();
    }
    let owners: std::collections::HashMap<u32, Option<u32>> =
        snap.processes.iter().map(|p| (p.id.pid, p.uid)).collect();
    let listed = |pid: u32| owners.get(&pid).is_some_and(|uid| sight.lists(*uid));
    snap.jobs
        .iter()
        .filter(|j| listed(j.pid()))
        .map(|j| Job {
            members: j.members.iter().copied().filter(|m| listed(*m)).collect(),
            ..j.clone()
        })
        .collect()
}

/// `snap` with only the processes and jobs shown to a viewer with `sight`
/// (all of them unless the OS hides some from it).
pub fn listed_part(snap: &Snapshot, sight: Sight) -> Snapshot {
    // No `..`: a field added to Snapshot must be considered here.
    let Snapshot {
        taken_at,
        source,
        replayed,
        sample_micros,
        system,
        swap,
        pressure,
        gpus,
        processes,
        jobs: _,
        unowned,
        ceilings,
        errors,
        collectors,
        notes,
    } = snap;
    Snapshot {
        taken_at: *taken_at,
        source: source.clone(),
        replayed: *replayed,
        sample_micros: *sample_micros,
        system: *system,
        swap: *swap,
        pressure: *pressure,
        gpus: gpus.clone(),
        processes: processes
            .iter()
            .filter(|p| sight.lists(p.uid))
            .cloned()
            .collect(),
        jobs: listed_jobs(snap, sight),
        unowned: unowned.clone(),
        ceilings: ceilings.clone(),
        errors: *errors,
        collectors: collectors.clone(),
        notes: notes.clone(),
    }
}

/// `labels` without the names read where other users may not look (a
/// Docker container's name: Docker's directory is root's alone); the ids,
/// which the process's cgroup shows to everyone, stay. Shared, not copied,
/// where nothing needs hiding.
fn redact_labels(labels: &Labels) -> Labels {
    if labels.private_names {
        Labels::new(labels.without_private_names())
    } else {
        labels.clone()
    }
}

/// `u` as a viewer who does not see everything may see it (see the module
/// doc).
pub fn redact_unowned(u: &Unowned) -> Unowned {
    Unowned {
        tmpfs_files: u
            .tmpfs_files
            .iter()
            .map(|f| TmpfsFile {
                path: if f.listed_for_anyone() {
                    f.path.clone()
                } else {
                    HIDDEN_PATH.to_owned()
                },
                mapped_by: Vec::new(),
                open_by: Vec::new(),
                redacted: true,
                ..f.clone()
            })
            .collect(),
        // Where it stopped short may speak of another user's process (its
        // descriptors): that it did is all a viewer learns.
        cut_short: u
            .cut_short
            .as_ref()
            .map(|_| "it stopped short of what it looks at".to_owned()),
        ..u.clone()
    }
}

fn redact_workload(w: &Workload) -> Workload {
    Workload {
        kernel_id: None,
        notebook: None,
        evidence: w
            .evidence
            .iter()
            .filter(|e| evidence_is_public(e))
            .cloned()
            .collect(),
        ..w.clone()
    }
}

/// Evidence lines that quote nothing but the process name (now or before
/// an exec), GPU figures, and pids and workload kinds (`worker of jupyter
/// kernel 4821: its parent`; see `crate::workload`, `crate::sample::gpu`
/// and the job assembly in `crate::sample`); every other line may quote the
/// command line, the executable or the libraries the process maps (`maps
/// libtorch_cpu.so`, from `/proc/[pid]/maps`, which the OS shows to its
/// owner only).
fn evidence_is_public(line: &str) -> bool {
    [
        "process name is ",
        "holds ",
        "has a context on GPU ",
        "worker of ",
        crate::workload::EXEC_EVIDENCE,
        crate::workload::RENAMED_EVIDENCE,
    ]
    .iter()
    .any(|prefix| line.starts_with(prefix))
}

/// `config` with every hook argument after the program replaced by
/// [`REDACTED`].
pub fn redact_config(config: &Config) -> Config {
    let mut config = config.clone();
    for rule in &mut config.rules {
        for step in &mut rule.actions {
            if let Action::Hook { args, .. } = &mut step.action {
                for arg in args.iter_mut() {
                    *arg = REDACTED.to_string();
                }
            }
        }
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventKind, ProcessRef};
    use crate::model::WorkloadKind;
    use crate::model::build::process;

    fn kernel(uid: u32) -> ProcessSample {
        process(42)
            .start(7)
            .uid(uid)
            .user("ana")
            .name("python3")
            .exe("/usr/bin/python3.12")
            .argv([
                "python",
                "-m",
                "ipykernel_launcher",
                "-f",
                "/home/ana/kernel-3f2a.json",
            ])
            .footprint(5 << 30)
            .workload(Workload {
                kind: WorkloadKind::Jupyter,
                frameworks: vec![crate::model::Framework::Pytorch],
                kernel_id: Some("3f2a".into()),
                notebook: Some("secret/plans.ipynb".into()),
                kernel_name: Some("python3".into()),
                evidence: vec![
                    "argv[2] is ipykernel_launcher".into(),
                    "argv[4] is connection file kernel-3f2a.json".into(),
                    "executable is python3.12".into(),
                    "maps libtorch_cpu.so".into(),
                    "holds 1.0 GiB of GPU memory on GPU 0".into(),
                ],
            })
            .build()
    }

    #[test]
    fn unowned_memory_keeps_what_anyone_can_list() {
        let file = |path: &str| TmpfsFile {
            path: path.into(),
            bytes: 5 << 30,
            uid: Some(1001),
            user: Some("bob".into()),
            mapped_by: vec![77],
            open_by: vec![78],
            redacted: false,
        };
        let u = Unowned {
            known: true,
            tmpfs_bytes: 5 << 30,
            sysv_orphan_bytes: 1 << 20,
            tmpfs_files: vec![
                file("/dev/shm/blob"),
                file("/run/user/1001/secret-name"),
                file("memfd:torch-secret"),
                file("/dev/shm/private-dir/x"),
            ],
            sysv_segments: Vec::new(),
            cut_short: None,
            unexplained_shmem: None,
        };
        let r = redact_unowned(&u);
        let paths: Vec<&str> = r.tmpfs_files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/dev/shm/blob", HIDDEN_PATH, HIDDEN_PATH, HIDDEN_PATH]
        );
        for f in &r.tmpfs_files {
            assert!(f.redacted);
            assert!(f.mapped_by.is_empty() && f.open_by.is_empty());
            assert!(!f.held_by_nobody(), "hidden holders are not \"nobody\"");
            assert_eq!((f.bytes, f.uid), (5 << 30, Some(1001)));
        }
        assert_eq!((r.tmpfs_bytes, r.sysv_orphan_bytes), (5 << 30, 1 << 20));
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("secret"), "{json}");
    }

    #[test]
    fn root_sees_everything_and_owners_their_own() {
        assert!(Sight::of(Some(0)).sees(Some(1000)));
        assert!(Sight::of(Some(0)).sees(None));
        assert!(Sight::of(Some(1000)).sees(Some(1000)));
        assert!(!Sight::of(Some(1000)).sees(Some(1001)));
        assert!(!Sight::of(Some(1000)).sees(None));
        assert!(!Sight::of(None).sees(Some(0)));
    }

    #[test]
    fn a_redacted_process_keeps_what_ps_shows() {
        let p = kernel(1000);
        let r = redact_process(&p);
        assert!(r.argv.is_empty());
        assert_eq!(r.exe, None);
        assert_eq!(r.workload.notebook, None);
        assert_eq!(r.workload.kernel_id, None);
        assert_eq!(
            r.workload.evidence,
            ["holds 1.0 GiB of GPU memory on GPU 0"],
            "the libraries it maps are its owner's to see"
        );
        assert_eq!((r.id, r.uid, r.footprint), (p.id, p.uid, p.footprint));
        assert_eq!((&r.name, &r.user), (&p.name, &p.user));
        assert_eq!(r.workload.kind, WorkloadKind::Jupyter);
    }

    /// The name a process had before it exec'd is what `ps` showed then:
    /// the line stays for every viewer.
    #[test]
    fn what_a_process_ran_before_an_exec_stays() {
        let mut p = kernel(1000);
        crate::workload::EarlierProgram {
            name: "sh".into(),
            exec: true,
            noticed: crate::model::Timestamp(1_700_000_000_000),
        }
        .note(&mut p.workload);
        let r = redact_process(&p);
        assert_eq!(
            r.workload.evidence,
            [
                "holds 1.0 GiB of GPU memory on GPU 0",
                "exec'd from sh (noticed 2023-11-14T22:13:20.000Z)"
            ]
        );
    }

    #[test]
    fn a_workers_evidence_of_its_job_stays_and_its_job_too() {
        let mut worker = kernel(1000);
        worker.workload.kind = WorkloadKind::Pytorch;
        worker.workload.notebook = None;
        worker.workload.kernel_id = None;
        worker.workload.evidence = vec![
            "worker of jupyter kernel 4821: its parent".into(),
            "argv[2] is ipykernel_launcher".into(),
        ];
        worker.job = Some(4821);
        worker.basis = crate::model::Basis::Pss;
        let r = redact_process(&worker);
        assert_eq!(
            r.workload.evidence,
            ["worker of jupyter kernel 4821: its parent"]
        );
        assert_eq!((r.job, r.basis), (Some(4821), crate::model::Basis::Pss));
    }

    #[test]
    fn where_the_os_hides_other_users_processes_a_user_is_shown_only_their_own() {
        let own = Sight::under(Some(1000), true);
        assert_eq!(own, Sight::OwnOnly(1000));
        assert!(own.lists(Some(1000)) && own.sees(Some(1000)));
        assert!(!own.lists(Some(1001)) && !own.lists(Some(0)) && !own.lists(None));
        let unknown = Sight::under(None, true);
        assert!(!unknown.lists(Some(0)) && !unknown.sees(Some(0)));
        assert_eq!(Sight::under(Some(0), true), Sight::Everything);
        assert!(own.omits_any() && unknown.omits_any());
        for open in [Sight::of(Some(1000)), Sight::of(None), Sight::of(Some(0))] {
            assert!(open.lists(Some(4242)) && !open.omits_any());
        }
    }

    #[test]
    fn a_docker_name_is_hidden_from_other_users_and_pod_names_and_ids_are_not() {
        use crate::model::{LabelSet, Runtime};
        let id = "3f2a9c1b7d0e5f64a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718";
        let docker = LabelSet {
            container: Some("jupyter-ana".into()),
            container_id: Some(id.into()),
            runtime: Some(Runtime::Docker),
            private_names: true,
            ..LabelSet::default()
        };
        let p: ProcessSample = process(42).uid(1000).labels(docker.clone()).into();
        let shown = redact_process(&p);
        let labels = shown.labels.expect("the ids stay");
        assert_eq!(labels.container, None);
        assert_eq!(labels.container_id.as_deref(), Some(id));
        let event = Event {
            at: crate::model::Timestamp(1),
            kind: EventKind::LimitCrossed {
                rule: "r".into(),
                process: ProcessRef::of(&p),
                detail: "d".into(),
            },
        };
        let EventKind::LimitCrossed { process: seen, .. } = event.redacted().kind else {
            panic!("kind kept");
        };
        let labels = seen.labels.expect("the ids stay");
        assert_eq!(
            (labels.container, labels.container_id.as_deref()),
            (None, Some(id))
        );
        // The kubelet's directories are world-readable: a pod's names stay.
        let pod = LabelSet {
            namespace: Some("ml".into()),
            pod: Some("train-0".into()),
            container: Some("trainer".into()),
            ..LabelSet::default()
        };
        let p: ProcessSample = process(43).uid(1000).labels(pod.clone()).into();
        let kept = redact_process(&p).labels.unwrap();
        assert!(crate::model::Labels::ptr_eq(
            &kept,
            p.labels.as_ref().unwrap()
        ));
        assert_eq!(*kept, pod);
    }

    #[test]
    fn hook_arguments_are_hidden_but_the_program_is_kept() {
        let config = Config::from_toml_str(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ hook = [\"/usr/local/bin/page\", \"--token\", \"s3cret\"] }]\n",
            "t.toml",
        )
        .unwrap();
        let shown = serde_json::to_string(&redact_config(&config)).unwrap();
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains(r#""hook":["/usr/local/bin/page","[redacted]","[redacted]"]"#),
            "{shown}"
        );
    }
}
