//! Post-mortems: when a watched process ends, say what it was, how big it
//! got, how fast it was growing, and why it ended, with how that was
//! learned.
//!
//! Watched: every ML workload and every process headroom acted on.
//! [`PostMortems::observe`] compares each snapshot with what it tracked; a
//! process no longer listed, or a zombie, has ended. Its cause, most direct
//! evidence first:
//!
//! 1. the OS's record of a memory kill ([`MemoryKill`]: the OOM killer,
//!    jetsam), then of a crash ([`Crash`]: a kmsg fault line, a macOS crash
//!    report), for its pid and name, logged after it was first seen (so an
//!    earlier process with the same pid is never blamed);
//! 2. headroom's own signal: a SIGKILL, any signal delivered after the last
//!    sample that saw it alive, the signal its exit status names, or a
//!    SIGTERM it survived and ended within [`SHUTDOWN_GRACE`] of;
//! 3. a GPU fault naming its pid ([`GpuFault`]);
//! 4. its exit status, where the OS kept one (a zombie's `stat`);
//! 5. otherwise `unknown`, with what was looked at and found silent.
//!
//! An exit status that was read overrules a record it belies: the OOM
//! killer and jetsam end with SIGKILL, a crash with its own signal. A
//! process gone without a record is judged one sample later, and no sooner
//! than [`Observed::record_lag`], so that a record logged a moment late is
//! not missed.
//!
//! A job's workers ([`crate::model::Job`]) come and go with its work, so a
//! worker's end is reported only when headroom acted on it or a record names
//! a direct cause; a worker stays one when re-parented. The root's
//! post-mortem summarises the job ([`JobEnd`]).
//!
//! Pure: no I/O, no clock. The daemon reads the OS
//! ([`crate::sample::ExitCauses`]) on its blocking thread and hands the
//! result in.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use crate::event::{
    ActionTaken, Event, EventKind, ExitCause, ExitCauseKind, JobEnd, Outcome, ProcessRef,
};
use crate::history::{GROWTH_WINDOW, History};
use crate::model::Action;
use crate::model::{COMM_LEN, Job, ProcessId, ProcessSample, Snapshot, Timestamp};
use crate::policy::Decision;
use crate::sample::{Crash, Ended, GpuFault, Killer, MemoryKill, Observed};

/// How long kill records are kept for matching.
pub const KEEP_KILLS: Duration = Duration::from_secs(600);
/// Most kill records kept.
const MAX_KILLS: usize = 256;
/// How long a post-mortem waits for the outcome of a signal headroom was
/// sending when the process vanished.
pub const OUTCOME_WAIT: Duration = Duration::from_secs(5);
/// How long a process that handles SIGTERM is given to shut down: ending
/// within this of headroom's SIGTERM, it ended of it (Kubernetes gives a
/// pod's containers as long by default, `terminationGracePeriodSeconds`).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// What is remembered of a watched process.
#[derive(Debug, Clone)]
struct WatchedProcess {
    /// As last seen alive.
    process: ProcessRef,
    first_seen: Timestamp,
    last_alive: Timestamp,
    peak: u64,
    growth: Option<f64>,
    /// headroom decided to act on it.
    acted: bool,
    /// The root of the job it is a worker of, as last seen (kept when the
    /// root ends first).
    worker_of: Option<ProcessRef>,
    /// For the root of a job that has had workers: the job so far.
    job: Option<JobTally>,
    /// Its memory cgroup's ceiling at its last live sample.
    ceiling: Option<SeenCeiling>,
    /// Watched only as a large process under a binding ceiling: its end
    /// is reported only when a kill record names it.
    contained: bool,
    /// The framework versions it loaded that do not go together, as its
    /// last samples' evidence said
    /// ([`crate::sample::environment::problems`]), at most
    /// [`ENVIRONMENT_LINES`], each cut to [`ENVIRONMENT_LINE_MAX`] bytes.
    environment: Vec<String>,
}

/// Most lines about a process's framework environment a post-mortem recalls.
const ENVIRONMENT_LINES: usize = 4;
/// Longest such line kept, in bytes.
const ENVIRONMENT_LINE_MAX: usize = 512;

/// A ceiling as a post-mortem names it.
#[derive(Debug, Clone)]
struct SeenCeiling {
    path: crate::model::SharedStr,
    limit: u64,
    limit_file: &'static str,
    usage: u64,
}

/// A process under a ceiling tighter than the machine is watched (for its
/// cgroup's OOM killer) once its footprint is at least this share of the
/// limit: the kernel's OOM killer takes the largest, and at most this many
/// processes per cgroup can be that large, so what another user runs in a
/// container cannot make the daemon track every process.
const CONTAINED_SHARE: u64 = 16;

/// What a root's post-mortem will say of its job, kept while it lives.
#[derive(Debug, Clone, Default)]
struct JobTally {
    /// The workers' pids at the root's last live sample.
    workers: Vec<u32>,
    most_workers: u32,
    peak_footprint: u64,
}

/// A process found ended, not yet reported.
#[derive(Debug, Clone)]
struct Pending {
    id: ProcessId,
    ended_at: Timestamp,
    status: Option<Ended>,
    /// Samples since it was found ended.
    waited: u32,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct PostMortems {
    tracked: HashMap<ProcessId, WatchedProcess>,
    /// Reported while still listed (zombies): not tracked again.
    dead: HashSet<ProcessId>,
    pending: Vec<Pending>,
    kills: VecDeque<MemoryKill>,
    crashes: VecDeque<Crash>,
    gpu_faults: VecDeque<GpuFault>,
    /// How long after an end its record may still arrive (the latest poll's).
    record_lag: Duration,
    /// The last action carried out on each tracked process.
    last_action: HashMap<ProcessId, ActionTaken>,
    /// The last signal delivered to each, and the last SIGKILL.
    last_signal: HashMap<ProcessId, ActionTaken>,
    sigkill: HashMap<ProcessId, ActionTaken>,
    /// Signals handed to the actuator whose outcome has not come back.
    awaiting: HashMap<ProcessId, Timestamp>,
}

impl PostMortems {
    /// The processes whose end would be reported, for the OS reader.
    pub fn tracked(&self) -> HashSet<ProcessId> {
        self.tracked.keys().copied().collect()
    }

    /// Among `snap`'s processes, the tracked ones listed with no memory at
    /// all: dead (zombies) or dying; the OS reader looks at these.
    pub fn suspects(tracked: &HashSet<ProcessId>, snap: &Snapshot) -> Vec<ProcessId> {
        snap.processes
            .iter()
            .filter(|p| tracked.contains(&p.id) && p.footprint == 0 && p.resident == 0)
            .map(|p| p.id)
            .collect()
    }

    /// headroom decided to act on `d.process` at `at`: watch it, and wait
    /// for the outcome of a signal before judging its end.
    pub fn note_decision(&mut self, d: &Decision, at: Timestamp) {
        let id = d.process.id();
        if self.dead.contains(&id) {
            return;
        }
        let t = self.tracked.entry(id).or_insert_with(|| WatchedProcess {
            process: d.process.clone(),
            first_seen: at,
            last_alive: at,
            peak: d.process.footprint,
            growth: None,
            acted: true,
            worker_of: None,
            job: None,
            ceiling: None,
            contained: false,
            environment: Vec::new(),
        });
        t.acted = true;
        if matches!(d.action, Action::Signal { .. }) {
            self.awaiting.insert(id, at);
        }
    }

    /// An event came back from the journal: remember what headroom did.
    pub fn note_event(&mut self, event: &Event) {
        match &event.kind {
            EventKind::Action {
                rule,
                process,
                step,
                action,
                outcome,
                ..
            } => {
                let id = process.id();
                if !self.tracked.contains_key(&id) {
                    return;
                }
                if action.starts_with("SIG") {
                    self.awaiting.remove(&id);
                }
                if *outcome != Outcome::Done {
                    return;
                }
                let taken = ActionTaken {
                    rule: rule.clone(),
                    step: *step,
                    action: action.clone(),
                    at: event.at,
                };
                if action.starts_with("SIG") {
                    if action == "SIGKILL" {
                        self.sigkill.insert(id, taken.clone());
                    }
                    self.last_signal.insert(id, taken.clone());
                }
                self.last_action.insert(id, taken);
            }
            EventKind::Skipped { process, .. } => {
                self.awaiting.remove(&process.id());
            }
            _ => {}
        }
    }

    /// Take in a snapshot (already recorded in `history`) and what the OS
    /// said since the last one; returns the post-mortems due now.
    /// `silence` is what the absence of a kill record means on this machine.
    pub fn observe(
        &mut self,
        snap: &Snapshot,
        history: &History,
        observed: Observed,
        silence: &str,
    ) -> Vec<Event> {
        let now = snap.taken_at;
        keep_recent(&mut self.kills, observed.kills, now, |k| k.read_at);
        keep_recent(&mut self.crashes, observed.crashes, now, |c| c.read_at);
        keep_recent(&mut self.gpu_faults, observed.gpu_faults, now, |g| {
            g.read_at
        });
        self.record_lag = observed.record_lag;

        // Nothing tracked and nothing dead (an idle machine): no set of
        // every listed process to build.
        let present: HashSet<ProcessId> = if self.tracked.is_empty() && self.dead.is_empty() {
            HashSet::new()
        } else {
            snap.processes.iter().map(|p| p.id).collect()
        };
        let pending: HashSet<ProcessId> = self.pending.iter().map(|p| p.id).collect();
        for ended in observed.ended {
            // A status that comes in after its process was found gone (an
            // exit event read a moment after the sample that missed it).
            if let Some(p) = self.pending.iter_mut().find(|p| p.id == ended.id) {
                if p.status.is_none() {
                    p.status = Some(ended);
                }
                continue;
            }
            if self.tracked.contains_key(&ended.id) && self.dead.insert(ended.id) {
                self.pending.push(Pending {
                    id: ended.id,
                    ended_at: now,
                    status: Some(ended),
                    waited: 0,
                });
            }
        }
        for id in self.tracked.keys() {
            if !present.contains(id) && !pending.contains(id) && !self.dead.contains(id) {
                self.pending.push(Pending {
                    id: *id,
                    ended_at: now,
                    status: None,
                    waited: 0,
                });
            }
        }
        self.dead.retain(|id| present.contains(id));

        let mut out = Vec::new();
        // Pids listed alive now, built only when a job's root is reported.
        let mut alive: Option<HashSet<u32>> = None;
        for mut p in std::mem::take(&mut self.pending) {
            let Some(t) = self.tracked.get(&p.id) else {
                continue;
            };
            let cause = self.cause_of(&p, t, silence).bounded();
            let waiting = self
                .awaiting
                .get(&p.id)
                .is_some_and(|since| now.since(*since) < OUTCOME_WAIT);
            let direct = matches!(
                cause.kind,
                ExitCauseKind::OomKiller
                    | ExitCauseKind::Jetsam
                    | ExitCauseKind::SignalByHeadroom
                    | ExitCauseKind::Crashed
            );
            let lagging = now.since(p.ended_at) < self.record_lag;
            if !direct && (p.waited == 0 || waiting || lagging) {
                p.waited += 1;
                self.pending.push(p);
                continue;
            }
            let memory_kill =
                matches!(cause.kind, ExitCauseKind::OomKiller | ExitCauseKind::Jetsam);
            let reported = if t.contained {
                t.acted || memory_kill
            } else {
                t.worker_of.is_none() || t.acted || direct
            };
            if reported {
                let headroom_action = self.last_action.get(&p.id).cloned();
                let job = t.job.as_ref().filter(|j| j.most_workers > 0).map(|j| {
                    let alive = alive.get_or_insert_with(|| alive_pids(snap));
                    JobEnd {
                        workers: count(j.workers.len()),
                        most_workers: j.most_workers,
                        peak_footprint: j.peak_footprint.max(t.peak),
                        ended_with: count(j.workers.iter().filter(|w| !alive.contains(w)).count()),
                    }
                });
                out.push(Event {
                    at: p.ended_at,
                    kind: EventKind::Exited {
                        process: t.process.clone(),
                        last_action: headroom_action.as_ref().map(|a| a.action.clone()),
                        peak_footprint: t.peak,
                        last_growth_bytes_per_second: t.growth,
                        headroom_action,
                        cause: Some(cause),
                        job,
                        worker_of: t.worker_of.clone().map(Box::new),
                    },
                });
            }
            self.forget(&p.id);
        }

        // Roots of jobs are ML processes: the ML ones by pid, for workers to
        // name their root.
        let ml: HashMap<u32, &ProcessSample> = snap
            .processes
            .iter()
            .filter(|p| p.workload.is_ml())
            .map(|p| (p.id.pid, p))
            .collect();
        let jobs: HashMap<u32, &Job> = snap.jobs.iter().map(|j| (j.pid(), j)).collect();
        for p in &snap.processes {
            let ceiling = if snap.ceilings.is_empty() {
                None
            } else {
                snap.ceiling_of(p)
            };
            self.update(p, history, now, &ml, &jobs, ceiling);
        }
        out
    }

    fn update(
        &mut self,
        p: &ProcessSample,
        history: &History,
        now: Timestamp,
        ml: &HashMap<u32, &ProcessSample>,
        jobs: &HashMap<u32, &Job>,
        ceiling: Option<&crate::model::Ceiling>,
    ) {
        if self.dead.contains(&p.id) || self.pending.iter().any(|q| q.id == p.id) {
            return;
        }
        let known = self.tracked.contains_key(&p.id);
        // The root of the job it works for: from the jobs where the
        // snapshot has them, else an ML parent.
        let root = match p.job {
            Some(r) if r != p.id.pid => ml.get(&r),
            Some(_) => None,
            None if p.ppid != 0 && p.ppid != p.id.pid => ml.get(&p.ppid),
            None => None,
        };
        // A large process under a limit tighter than the machine: its
        // cgroup's OOM killer may take it.
        let contained =
            ceiling.is_some_and(|c| c.limit() > 0 && p.footprint >= c.limit() / CONTAINED_SHARE);
        if !known && !p.workload.is_ml() && root.is_none() && !contained {
            return;
        }
        // No memory at all: dead or dying; keep the last live figures.
        if known && p.footprint == 0 && p.resident == 0 {
            return;
        }
        let t = self.tracked.entry(p.id).or_insert_with(|| WatchedProcess {
            process: ProcessRef::of(p),
            first_seen: now,
            last_alive: now,
            peak: 0,
            growth: None,
            acted: false,
            worker_of: None,
            job: None,
            ceiling: None,
            contained: !p.workload.is_ml() && root.is_none(),
            environment: Vec::new(),
        });
        let environment: Vec<String> = crate::sample::environment::problems(&p.workload)
            .take(ENVIRONMENT_LINES)
            .map(|line| crate::model::text_caps::capped(line, ENVIRONMENT_LINE_MAX).into_owned())
            .collect();
        if !environment.is_empty() {
            t.environment = environment;
        }
        if p.workload.is_ml() || root.is_some() {
            t.contained = false;
        }
        t.ceiling = ceiling.map(|c| SeenCeiling {
            path: c.path.clone(),
            limit: c.limit(),
            limit_file: c.limit_file(),
            usage: c.usage,
        });
        t.process = ProcessRef::of(p);
        t.last_alive = now;
        t.peak = t.peak.max(p.footprint).max(p.peak_footprint.unwrap_or(0));
        t.growth = history
            .process(&p.id)
            .and_then(|track| track.growth_bytes_per_second(GROWTH_WINDOW));
        if let Some(r) = root {
            match &mut t.worker_of {
                Some(w) if w.id() == r.id && w.notebook == r.workload.notebook => {
                    w.footprint = r.footprint;
                }
                slot => *slot = Some(ProcessRef::of(r)),
            }
        } else if t.worker_of.is_none() {
            // A root (a worker re-parented when its root ended stays a
            // worker): its job so far.
            let job = jobs
                .get(&p.id.pid)
                .filter(|j| j.root == p.id && j.workers() > 0);
            match (job, &mut t.job) {
                (Some(j), tally) => {
                    let tally = tally.get_or_insert_with(JobTally::default);
                    tally.workers.clear();
                    tally.workers.extend(j.members.iter().skip(1).copied());
                    tally.most_workers = tally.most_workers.max(count(j.workers()));
                    let series_peak = history.job(&p.id).map_or(0, |s| s.peak_footprint);
                    tally.peak_footprint = tally.peak_footprint.max(j.footprint).max(series_peak);
                }
                (None, Some(tally)) => tally.workers.clear(),
                (None, None) => {}
            }
        }
    }

    fn forget(&mut self, id: &ProcessId) {
        self.tracked.remove(id);
        self.last_action.remove(id);
        self.last_signal.remove(id);
        self.sigkill.remove(id);
        self.awaiting.remove(id);
    }

    /// The signal headroom delivered that ended the process, if one did,
    /// and when, in words:
    /// - a SIGKILL, at any time (it cannot be caught);
    /// - any signal delivered after the last sample that saw it alive;
    /// - the signal its exit status names, when headroom delivered that
    ///   one;
    /// - a SIGTERM it handled (a later sample saw it alive) and ended within
    ///   [`SHUTDOWN_GRACE`] of: a clean shutdown.
    ///
    /// Never one its exit status belies (another signal ended it).
    fn signal_that_ended(&self, p: &Pending, t: &WatchedProcess) -> Option<(&ActionTaken, String)> {
        let status = p.status.as_ref().map(|e| &e.status);
        if let Some(s) = self.sigkill.get(&p.id)
            && ended_by(status, Some("SIGKILL"))
        {
            return Some((s, "which cannot be caught".to_string()));
        }
        let s = self
            .last_signal
            .get(&p.id)
            .filter(|s| s.at >= t.first_seen)?;
        let before = crate::event_line::ago(
            u64::try_from(p.ended_at.since(s.at).as_millis()).unwrap_or(u64::MAX),
        );
        let named = matches!(status, Some(crate::sample::ExitStatus::Signal { name, .. }) if *name == s.action);
        if named {
            return Some((
                s,
                format!(
                    "{before} before it was found ended, and its exit status names that signal"
                ),
            ));
        }
        // Another signal ended it (an exit code does not belie a signal the
        // process handled: it exited because of it).
        if matches!(status, Some(crate::sample::ExitStatus::Signal { .. })) {
            return None;
        }
        if s.at >= t.last_alive {
            return Some((s, "after the last sample that saw it alive".to_string()));
        }
        let shut_down = s.action == crate::model::SignalName::Term.as_str()
            && p.ended_at.since(s.at) <= SHUTDOWN_GRACE;
        shut_down.then(|| {
            (
                s,
                format!(
                    "{before} before it was found ended: a later sample saw it alive, so it handled the signal, and it ended within the {} a process is given to shut down after SIGTERM",
                    crate::event_line::ago(
                        u64::try_from(SHUTDOWN_GRACE.as_millis()).unwrap_or(u64::MAX)
                    )
                ),
            )
        })
    }

    /// What headroom sent a process whose end no signal of its explains, in
    /// words: `headroom sent it no signal`, or its last signal and that the
    /// process lived on after it.
    fn signals_sent(&self, p: &Pending, t: &WatchedProcess) -> String {
        match self.last_signal.get(&p.id).filter(|s| s.at >= t.first_seen) {
            None => "headroom sent it no signal".to_string(),
            Some(s) => format!(
                "headroom's last signal to it, {} (rule \"{}\", step {}) {} before it was found ended, did not end it: it lived on after it",
                s.action,
                s.rule,
                s.step + 1,
                crate::event_line::ago(
                    u64::try_from(p.ended_at.since(s.at).as_millis()).unwrap_or(u64::MAX)
                ),
            ),
        }
    }

    fn cause_of(&self, p: &Pending, t: &WatchedProcess, silence: &str) -> ExitCause {
        let pid = t.process.pid;
        let uid_fits = |uid: Option<u32>| match (uid, t.process.uid) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        let status = p.status.as_ref().map(|e| &e.status);
        // The OOM killer and jetsam end their victims with SIGKILL: an exit
        // status that says otherwise belies the record.
        let kill = self.kills.iter().rev().find(|k| {
            k.pid == pid
                && same_command(&k.name, &t.process.name)
                && k.read_at >= t.first_seen
                && uid_fits(k.uid)
                && ended_by(status, Some("SIGKILL"))
        });
        let status_words = p
            .status
            .as_ref()
            .map(|e| format!("; its exit status, read from {}: {}", e.source, e.status))
            .unwrap_or_default();
        if let Some(k) = kill {
            let (kind, killer) = match k.killer {
                Killer::OomKiller => (ExitCauseKind::OomKiller, "the kernel's OOM killer"),
                Killer::Jetsam => (ExitCauseKind::Jetsam, "jetsam"),
            };
            let resident = k
                .resident_bytes
                .map(|b| format!(", with {} resident", crate::report::format_bytes(b)))
                .unwrap_or_default();
            // A cgroup's OOM killer: name the cgroup and its limit, as
            // sampled before the kill.
            let seen = k
                .memcg
                .as_deref()
                .and_then(|m| t.ceiling.as_ref().filter(|c| *c.path == *m));
            let limit = match (&k.memcg, seen) {
                (_, Some(c)) => format!(
                    " of {} ({}; {} charged to it at the last sample)",
                    crate::report::format_bytes(c.limit),
                    c.limit_file,
                    crate::report::format_bytes(c.usage)
                ),
                (Some(_), None) => " (its limit was not read: it was not this process's \
                                    ceiling at the last sample)"
                    .to_string(),
                (None, None) => String::new(),
            };
            return ExitCause {
                kind,
                how: format!(
                    "{} recorded {killer} killing pid {} ({}){resident}: {}{limit}{status_words}",
                    k.source,
                    k.pid,
                    k.name,
                    crate::model::printable(&k.scope)
                ),
                detail: Some(k.message.clone()),
                cgroup: k.memcg.clone(),
                cgroup_limit: seen.map(|c| c.limit),
                ..ExitCause::default()
            };
        }
        let gpu = self.gpu_faults.iter().rev().find(|g| {
            g.pid == pid
                && (g.name.is_empty() || same_command(&g.name, &t.process.name))
                && g.read_at >= t.first_seen
        });
        let gpu_words = |g: &GpuFault| {
            format!(
                "{} recorded NVIDIA Xid {}{} on {} for pid {} ({})",
                witness(&g.source),
                g.code,
                g.meaning.map(|m| format!(" ({m})")).unwrap_or_default(),
                g.device,
                g.pid,
                g.name
            )
        };
        let crash = self
            .crashes
            .iter()
            .filter(|c| {
                c.pid == pid
                    && (c.thread.is_some() || same_command(&c.name, &t.process.name))
                    && c.read_at >= t.first_seen
                    && uid_fits(c.uid)
                    && ended_by(status, c.signal.as_deref())
            })
            .max_by_key(|c| (c.library.is_some(), c.read_at));
        if let Some(c) = crash {
            let thread = c
                .thread
                .as_ref()
                .map(|(tid, name)| format!(", in its thread {name} (tid {tid})"))
                .unwrap_or_default();
            let library = c
                .library
                .as_deref()
                .map(|l| format!(" in {l}"))
                .unwrap_or_default();
            let signal = c
                .signal
                .as_deref()
                .map(|s| format!(", which ends it with {s}"))
                .unwrap_or_default();
            let notes: String = c.notes.iter().map(|n| format!("; {n}")).collect();
            let memory = c
                .memory
                .as_deref()
                .map(|m| format!("; {m}"))
                .unwrap_or_default();
            let earlier = gpu
                .map(|g| format!("; before that, {}", gpu_words(g)))
                .unwrap_or_default();
            let environment = environment_words(t);
            return ExitCause {
                kind: ExitCauseKind::Crashed,
                how: format!(
                    "{} recorded a crash of pid {} ({}){thread}: {}{library}{signal}{notes}{memory}{earlier}{status_words}{environment}",
                    witness(&c.source),
                    c.pid,
                    t.process.name,
                    c.fault
                ),
                detail: Some(c.message.clone()),
                signal: c.signal.clone(),
                library: c.library.clone(),
                not_memory: c.memory.is_none(),
                ..ExitCause::default()
            };
        }
        if let Some((s, when)) = self.signal_that_ended(p, t) {
            return ExitCause {
                kind: ExitCauseKind::SignalByHeadroom,
                how: format!(
                    "headroom's journal: it delivered {} (rule \"{}\", step {}) {when}{status_words}",
                    s.action,
                    s.rule,
                    s.step + 1
                ),
                ..ExitCause::default()
            };
        }
        if let Some(g) = gpu {
            return ExitCause {
                kind: ExitCauseKind::GpuError,
                how: format!("{}, and it ended after{status_words}", gpu_words(g)),
                detail: Some(g.message.clone()),
                not_memory: true,
                ..ExitCause::default()
            };
        }
        match &p.status {
            Some(e)
                if matches!(
                    e.status,
                    crate::sample::ExitStatus::Code(_) | crate::sample::ExitStatus::LargeCode
                ) =>
            {
                ExitCause {
                    kind: ExitCauseKind::Exited,
                    how: format!(
                        "its exit status, read from {} before its parent collected it: {}{}",
                        e.source,
                        e.status,
                        if matches!(e.status, crate::sample::ExitStatus::Code(0)) {
                            String::new()
                        } else {
                            environment_words(t)
                        }
                    ),
                    ..ExitCause::default()
                }
            }
            Some(e) => ExitCause {
                kind: ExitCauseKind::Unknown,
                how: format!(
                    "its exit status, read from {} before its parent collected it: {}, but nothing says who sent the signal: {silence}, and {}{}",
                    e.source,
                    e.status,
                    self.signals_sent(p, t),
                    environment_words(t)
                ),
                ..ExitCause::default()
            },
            None => ExitCause {
                kind: ExitCauseKind::Unknown,
                how: format!(
                    "{silence}, {}, and it was gone before its exit status could be read (only its parent learns that)",
                    self.signals_sent(p, t)
                ),
                ..ExitCause::default()
            },
        }
    }
}

/// What a post-mortem of a crash or a failed exit adds about the
/// process's framework environment: each problem its last samples named
/// (`; unsupported: tensorflow-metal 0.6.0 with tensorflow-macos 2.9.2:
/// unsupported pair (…; see …)`), the likelier cause of a crash at import
/// or in a kernel than memory; empty where none was named.
fn environment_words(t: &WatchedProcess) -> String {
    t.environment
        .iter()
        .map(|line| format!("; {line}"))
        .collect()
}

/// The pids `snap` lists with memory (a zombie has none): alive.
fn alive_pids(snap: &Snapshot) -> HashSet<u32> {
    snap.processes
        .iter()
        .filter(|p| p.footprint > 0 || p.resident > 0)
        .map(|p| p.id.pid)
        .collect()
}

/// A count as the journal keeps it.
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Where a record was read, in words: `the kernel log (/dev/kmsg)`, `the
/// crash report /Library/Logs/DiagnosticReports/….ips`.
fn witness(source: &str) -> String {
    if source.ends_with(".ips") {
        format!("the crash report {source}")
    } else if source == "/dev/kmsg" {
        format!("the kernel log ({source})")
    } else {
        source.to_string()
    }
}

/// Add `new` to `kept` and drop what is older than [`KEEP_KILLS`] or beyond
/// [`MAX_KILLS`].
fn keep_recent<T>(
    kept: &mut VecDeque<T>,
    new: Vec<T>,
    now: Timestamp,
    read_at: impl Fn(&T) -> Timestamp,
) {
    kept.extend(new);
    while kept.len() > MAX_KILLS
        || kept
            .front()
            .is_some_and(|r| now.since(read_at(r)) > KEEP_KILLS)
    {
        kept.pop_front();
    }
}

/// Whether an exit status (if one was read) allows that `signal` ended the
/// process: no status, or death by that signal (any signal where `signal`
/// is unknown). An exit code means no signal ended it.
fn ended_by(status: Option<&crate::sample::ExitStatus>, signal: Option<&str>) -> bool {
    match status {
        None => true,
        Some(crate::sample::ExitStatus::Code(_) | crate::sample::ExitStatus::LargeCode) => false,
        Some(crate::sample::ExitStatus::Signal { name, .. }) => signal.is_none_or(|s| s == name),
    }
}

/// The same command name, allowing for the kernel's 15-byte cut.
fn same_command(recorded: &str, sampled: &str) -> bool {
    let cut = |s: &str| {
        s.as_bytes()
            .iter()
            .take(COMM_LEN)
            .copied()
            .collect::<Vec<u8>>()
    };
    cut(recorded) == cut(sampled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WorkloadKind;
    use crate::model::build::{kernel, snapshot};
    use crate::sample::ExitStatus;

    const SILENCE: &str = "no OOM-killer record for it in /dev/kmsg";
    const GIB: u64 = 1 << 30;

    /// ada's kernel of notebook `train.ipynb`, pid `pid` started at 7.
    fn adas_kernel(pid: u32, footprint: u64) -> ProcessSample {
        kernel(pid)
            .start(7)
            .uid(1000)
            .user("ada")
            .footprint(footprint)
            .resident(footprint)
            .kernel_id("3f2a0b1c")
            .notebook("train.ipynb")
            .build()
    }

    /// Feeds snapshots through a history and the post-mortems, like the daemon.
    struct Run {
        pm: PostMortems,
        history: History,
        events: Vec<Event>,
    }

    impl Run {
        fn new() -> Self {
            Self {
                pm: PostMortems::default(),
                history: History::new(Duration::from_secs(600)),
                events: Vec::new(),
            }
        }

        /// One sample, its jobs assembled as every sampler's are.
        fn feed(&mut self, mut s: Snapshot, observed: Observed) {
            crate::sample::jobs::assemble(&mut s);
            self.history.record(&s);
            let out = self.pm.observe(&s, &self.history, observed, SILENCE);
            self.events.extend(out);
        }

        fn cause(&self) -> &ExitCause {
            assert_eq!(self.events.len(), 1, "{:#?}", self.events);
            match &self.events[0].kind {
                EventKind::Exited { cause: Some(c), .. } => c,
                other => panic!("{other:?}"),
            }
        }
    }

    fn growing(run: &mut Run, until_ms: u64) {
        for t in (0..=until_ms).step_by(1000) {
            run.feed(
                snapshot(t)
                    .processes([adas_kernel(42, GIB + t * (1 << 20))])
                    .build(),
                Observed::default(),
            );
        }
    }

    fn oom_kill(pid: u32, read_at: u64) -> MemoryKill {
        MemoryKill {
            pid,
            name: "python3".into(),
            uid: Some(1000),
            killer: Killer::OomKiller,
            source: "/dev/kmsg".into(),
            message: "Out of memory: Killed process 42 (python3) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:1000".into(),
            resident_bytes: Some(1024),
            scope: "the machine ran out of memory".into(),
            memcg: None,
            read_at: Timestamp(read_at),
        }
    }

    #[test]
    fn an_oom_kill_is_named_at_once_with_notebook_peak_and_growth() {
        let mut run = Run::new();
        growing(&mut run, 10_000);
        let observed = Observed {
            kills: vec![oom_kill(42, 11_000)],
            ended: Vec::new(),
            ..Observed::default()
        };
        run.feed(snapshot(11_000).build(), observed);
        let cause = run.cause().clone();
        assert_eq!(cause.kind, ExitCauseKind::OomKiller);
        assert!(cause.how.starts_with("/dev/kmsg recorded the kernel's OOM killer killing pid 42 (python3), with 1.0 KiB resident: the machine ran out of memory"), "{}", cause.how);
        let EventKind::Exited {
            process,
            peak_footprint,
            last_growth_bytes_per_second,
            ..
        } = &run.events[0].kind
        else {
            unreachable!()
        };
        assert_eq!(run.events[0].at, Timestamp(11_000));
        assert_eq!(process.notebook.as_deref(), Some("train.ipynb"));
        assert_eq!(*peak_footprint, GIB + 10_000 * (1 << 20));
        let g = last_growth_bytes_per_second.unwrap();
        assert!((g - (1 << 20) as f64 * 1000.0).abs() < 1.0, "{g}");
    }

    #[test]
    fn a_kill_of_an_earlier_process_with_the_same_pid_is_not_blamed() {
        let mut run = Run::new();
        // pid 42 was OOM-killed before this process was first seen.
        run.feed(
            snapshot(0).build(),
            Observed {
                kills: vec![oom_kill(42, 0)],
                ended: Vec::new(),
                ..Observed::default()
            },
        );
        run.feed(
            snapshot(1000).processes([adas_kernel(42, GIB)]).build(),
            Observed::default(),
        );
        run.feed(snapshot(2000).build(), Observed::default());
        assert!(run.events.is_empty(), "judged one sample later");
        run.feed(snapshot(3000).build(), Observed::default());
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::Unknown);
        assert!(cause.how.starts_with(SILENCE), "{}", cause.how);
        assert!(
            cause.how.contains("headroom sent it no signal"),
            "{}",
            cause.how
        );
        assert_eq!(run.events[0].at, Timestamp(2000), "when it was found gone");
    }

    fn sigint_decision(at: u64) -> (Decision, Event) {
        let p = ProcessRef::of(&adas_kernel(42, GIB));
        let d = Decision {
            rule: "notebook-runaway".into(),
            process: p.clone(),
            step: 0,
            action: Action::Signal {
                signal: crate::model::SignalName::Int,
                require_handler: true,
                process_group: false,
            },
            dry_run: false,
            replayed: false,
            limit: String::new(),
            reason: String::new(),
            reach: crate::policy::Reach::own_user(0),
        };
        let e = Event {
            at: Timestamp(at),
            kind: EventKind::Action {
                rule: d.rule.clone(),
                process: p,
                step: 0,
                action: "SIGINT".into(),
                outcome: Outcome::Done,
                dry_run: false,
                detail: String::new(),
            },
        };
        (d, e)
    }

    #[test]
    fn a_signal_after_the_last_live_sample_is_headroom_s() {
        let mut run = Run::new();
        growing(&mut run, 3000);
        let (d, e) = sigint_decision(3010);
        run.pm.note_decision(&d, Timestamp(3000));
        run.pm.note_event(&e);
        run.feed(snapshot(4000).build(), Observed::default());
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::SignalByHeadroom);
        assert!(
            cause.how.contains("delivered SIGINT (rule \"notebook-runaway\", step 1) after the last sample that saw it alive"),
            "{}",
            cause.how
        );
    }

    #[test]
    fn an_earlier_sigint_survived_is_not_the_cause_but_is_recalled() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        let (d, e) = sigint_decision(2010);
        run.pm.note_decision(&d, Timestamp(2000));
        run.pm.note_event(&e);
        // Alive after the SIGINT (the cell was interrupted), then OOM-killed.
        run.feed(
            snapshot(3000).processes([adas_kernel(42, 2 * GIB)]).build(),
            Observed::default(),
        );
        let observed = Observed {
            kills: vec![oom_kill(42, 8000)],
            ended: Vec::new(),
            ..Observed::default()
        };
        run.feed(snapshot(8000).build(), observed);
        assert_eq!(run.cause().kind, ExitCauseKind::OomKiller);
        let EventKind::Exited {
            headroom_action,
            last_action,
            ..
        } = &run.events[0].kind
        else {
            unreachable!()
        };
        assert_eq!(headroom_action.as_ref().unwrap().at, Timestamp(2010));
        assert_eq!(last_action.as_deref(), Some("SIGINT"));
    }

    /// headroom's SIGTERM to ada's kernel, decided at `at` and delivered
    /// 10 ms later.
    fn sigterm_delivered(run: &mut Run, at: u64) {
        let (mut d, mut e) = sigint_decision(at + 10);
        d.action = Action::Signal {
            signal: crate::model::SignalName::Term,
            require_handler: false,
            process_group: false,
        };
        if let EventKind::Action { action, .. } = &mut e.kind {
            *action = "SIGTERM".into();
        }
        run.pm.note_decision(&d, Timestamp(at));
        run.pm.note_event(&e);
    }

    fn zombie(status: ExitStatus) -> (ProcessSample, Observed) {
        let mut z = adas_kernel(42, 0);
        z.resident = 0;
        let observed = Observed {
            ended: vec![Ended {
                id: z.id,
                status,
                source: "/proc/42/stat".into(),
            }],
            ..Observed::default()
        };
        (z, observed)
    }

    #[test]
    fn a_sigterm_handled_then_a_clean_shutdown_is_headroom_s() {
        // The process catches SIGTERM, a sample sees it alive, and it exits
        // 1.5 s after the signal.
        let mut run = Run::new();
        growing(&mut run, 3000);
        sigterm_delivered(&mut run, 3000);
        run.feed(
            snapshot(4000).processes([adas_kernel(42, 2 * GIB)]).build(),
            Observed::default(),
        );
        run.feed(snapshot(4510).build(), Observed::default());
        let cause = run.cause().clone();
        assert_eq!(cause.kind, ExitCauseKind::SignalByHeadroom, "{}", cause.how);
        assert!(
            cause.how.starts_with("headroom's journal: it delivered SIGTERM (rule \"notebook-runaway\", step 1) 1.5 s before it was found ended: a later sample saw it alive, so it handled the signal"),
            "{}",
            cause.how
        );
        let line = crate::event_line::postmortem(&run.events[0]).unwrap();
        assert!(
            line.contains("died: ended by headroom's SIGTERM (rule \"notebook-runaway\", step 1)"),
            "{line}"
        );
        assert!(!line.contains("no signal"), "{line}");
    }

    #[test]
    fn a_sigterm_outlived_beyond_the_grace_is_recalled_not_blamed() {
        let mut run = Run::new();
        growing(&mut run, 1000);
        sigterm_delivered(&mut run, 1000);
        for t in (2000..=40_000).step_by(1000) {
            run.feed(
                snapshot(t).processes([adas_kernel(42, GIB)]).build(),
                Observed::default(),
            );
        }
        run.feed(snapshot(41_000).build(), Observed::default());
        run.feed(snapshot(42_000).build(), Observed::default());
        let cause = run.cause().clone();
        assert_eq!(cause.kind, ExitCauseKind::Unknown);
        assert!(
            cause.how.contains("headroom's last signal to it, SIGTERM (rule \"notebook-runaway\", step 1) 40.0 s before it was found ended, did not end it: it lived on after it"),
            "{}",
            cause.how
        );
        assert!(!cause.how.contains("no signal"), "{}", cause.how);
        // Its exit code, read: it exited by itself, long after the signal.
        let mut run = Run::new();
        growing(&mut run, 1000);
        sigterm_delivered(&mut run, 1000);
        run.feed(
            snapshot(40_000).processes([adas_kernel(42, GIB)]).build(),
            Observed::default(),
        );
        let (z, observed) = zombie(ExitStatus::Code(0));
        run.feed(snapshot(41_000).processes([z.clone()]).build(), observed);
        run.feed(snapshot(42_000).processes([z]).build(), Observed::default());
        assert_eq!(run.cause().kind, ExitCauseKind::Exited);
    }

    #[test]
    fn an_exit_status_naming_headroom_s_signal_is_headroom_s() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        let (d, e) = sigint_decision(2010);
        run.pm.note_decision(&d, Timestamp(2000));
        run.pm.note_event(&e);
        for t in [3000, 60_000] {
            run.feed(
                snapshot(t).processes([adas_kernel(42, GIB)]).build(),
                Observed::default(),
            );
        }
        let (z, observed) = zombie(ExitStatus::Signal {
            name: "SIGINT".into(),
            core_dumped: false,
        });
        run.feed(snapshot(61_000).processes([z]).build(), observed);
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::SignalByHeadroom);
        assert!(
            cause.how.contains("and its exit status names that signal"),
            "{}",
            cause.how
        );
    }

    #[test]
    fn an_exit_status_belies_a_kill_or_crash_record_that_does_not_fit_it() {
        // A record of an OOM kill (which ends a process with SIGKILL) and a
        // crash of SIGSEGV, but the process died of SIGTERM.
        let mut run = Run::new();
        growing(&mut run, 2000);
        let (z, mut observed) = zombie(ExitStatus::Signal {
            name: "SIGTERM".into(),
            core_dumped: false,
        });
        observed.kills = vec![oom_kill(42, 3000)];
        observed.crashes = vec![segfault(42, 3000, Some("libc.so.6"))];
        run.feed(snapshot(3000).processes([z.clone()]).build(), observed);
        run.feed(snapshot(4000).processes([z]).build(), Observed::default());
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::Unknown, "{}", cause.how);
        assert!(
            cause
                .how
                .contains("killed by SIGTERM, but nothing says who sent the signal"),
            "{}",
            cause.how
        );
        // The same records with the status they imply are believed.
        for (status, kind) in [
            ("SIGKILL", ExitCauseKind::OomKiller),
            ("SIGSEGV", ExitCauseKind::Crashed),
        ] {
            let mut run = Run::new();
            growing(&mut run, 2000);
            let (z, mut observed) = zombie(ExitStatus::Signal {
                name: status.into(),
                core_dumped: false,
            });
            if kind == ExitCauseKind::OomKiller {
                observed.kills = vec![oom_kill(42, 3000)];
            }
            observed.crashes = vec![segfault(42, 3000, None)];
            run.feed(snapshot(3000).processes([z]).build(), observed);
            assert_eq!(run.cause().kind, kind);
        }
    }

    #[test]
    fn a_pending_signal_outcome_holds_the_verdict() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        let (d, e) = sigint_decision(3100);
        run.pm.note_decision(&d, Timestamp(2000));
        run.feed(snapshot(3000).build(), Observed::default());
        run.feed(snapshot(3050).build(), Observed::default());
        assert!(run.events.is_empty(), "waiting for the signal's outcome");
        run.pm.note_event(&e);
        run.feed(snapshot(3200).build(), Observed::default());
        assert_eq!(run.cause().kind, ExitCauseKind::SignalByHeadroom);
    }

    #[test]
    fn a_zombie_s_exit_status_tells_an_exit_from_an_unowned_signal() {
        for (status, kind, words) in [
            (
                ExitStatus::Code(0),
                ExitCauseKind::Exited,
                "exited with status 0",
            ),
            (
                ExitStatus::Signal {
                    name: "SIGKILL".into(),
                    core_dumped: false,
                },
                ExitCauseKind::Unknown,
                "collected it: killed by SIGKILL, but nothing says who sent the signal",
            ),
        ] {
            let mut run = Run::new();
            growing(&mut run, 2000);
            let id = ProcessId { pid: 42, start: 7 };
            let mut zombie = adas_kernel(42, 0);
            zombie.resident = 0;
            let observed = Observed {
                kills: Vec::new(),
                ended: vec![Ended {
                    id,
                    status: status.clone(),
                    source: "/proc/42/stat".into(),
                }],
                ..Observed::default()
            };
            assert_eq!(
                PostMortems::suspects(
                    &run.pm.tracked(),
                    &snapshot(3000).processes([zombie.clone()]).build()
                ),
                vec![id]
            );
            run.feed(snapshot(3000).processes([zombie.clone()]).build(), observed);
            run.feed(
                snapshot(4000).processes([zombie.clone()]).build(),
                Observed::default(),
            );
            let cause = run.cause().clone();
            assert_eq!(cause.kind, kind);
            assert!(cause.how.contains(words), "{}", cause.how);
            let EventKind::Exited { process, .. } = &run.events[0].kind else {
                unreachable!()
            };
            assert_eq!(
                process.footprint,
                GIB + 2000 * (1 << 20),
                "the last live footprint"
            );
            // Reaped later: no second post-mortem.
            run.feed(snapshot(5000).build(), Observed::default());
            run.feed(snapshot(6000).build(), Observed::default());
            assert_eq!(run.events.len(), 1);
        }
    }

    #[test]
    fn an_exit_status_read_a_sample_after_the_process_vanished_is_used() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        // Gone from this sample, its exit not read yet: judged no sooner
        // than the next sample.
        run.feed(snapshot(3000).build(), Observed::default());
        assert!(run.events.is_empty());
        let observed = Observed {
            ended: vec![Ended {
                id: ProcessId { pid: 42, start: 7 },
                status: ExitStatus::Code(0),
                source: "kqueue's NOTE_EXIT for pid 42".into(),
            }],
            ..Observed::default()
        };
        run.feed(snapshot(4000).build(), observed);
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::Exited, "{}", cause.how);
        assert!(
            cause
                .how
                .contains("read from kqueue's NOTE_EXIT for pid 42 before its parent collected it: exited with status 0"),
            "{}",
            cause.how
        );
    }

    #[test]
    fn a_jetsam_kill_from_the_exit_watch_is_named_with_its_status() {
        use crate::os::macos::exit_watch::{Watched, records};
        use crate::os::macos::parse::proc_exit::{
            NOTE_EXIT_MEMORY, NOTE_EXIT_MEMORY_VMPAGESHORTAGE, WATCH_WITH_STATUS, decode,
        };
        let mut run = Run::new();
        growing(&mut run, 2000);
        // W_EXITCODE(0, SIGKILL) | NOTE_EXIT_MEMORY | ..._VMPAGESHORTAGE, as
        // filt_procevent builds it (bsd/kern/kern_event.c, xnu-11417.101.15).
        let note = decode(
            WATCH_WITH_STATUS,
            i64::from(9 | NOTE_EXIT_MEMORY | NOTE_EXIT_MEMORY_VMPAGESHORTAGE),
        )
        .unwrap();
        let w = Watched {
            id: ProcessId { pid: 42, start: 7 },
            name: "python3".into(),
            uid: Some(1000),
            with_status: true,
        };
        let (ended, kill) = records(&w, &note, Timestamp(2500), Timestamp(3000));
        let observed = Observed {
            kills: kill.into_iter().collect(),
            ended: ended.into_iter().collect(),
            ..Observed::default()
        };
        run.feed(snapshot(3000).build(), observed);
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::Jetsam, "{}", cause.how);
        assert!(
            cause
                .how
                .starts_with("kqueue's NOTE_EXIT_MEMORY recorded jetsam killing pid 42 (python3): the machine ran short of memory"),
            "{}",
            cause.how
        );
        assert!(cause.how.contains("killed by SIGKILL"), "{}", cause.how);
    }

    #[test]
    fn workers_of_an_ml_process_are_reported_only_with_a_cause() {
        let mut run = Run::new();
        let mut parent = adas_kernel(10, GIB);
        parent.workload.kind = WorkloadKind::Pytorch;
        let mut worker = parent.clone();
        worker.id.pid = 11;
        worker.ppid = 10;
        run.feed(
            snapshot(0)
                .processes([parent.clone(), worker.clone()])
                .build(),
            Observed::default(),
        );
        run.feed(
            snapshot(1000).processes([parent.clone()]).build(),
            Observed::default(),
        );
        run.feed(
            snapshot(2000).processes([parent.clone()]).build(),
            Observed::default(),
        );
        assert!(run.events.is_empty(), "{:#?}", run.events);
        // A worker the OOM killer took is reported.
        let mut other = worker.clone();
        other.id.pid = 12;
        run.feed(
            snapshot(3000).processes([parent.clone(), other]).build(),
            Observed::default(),
        );
        let mut kill = oom_kill(12, 4000);
        kill.message = "Killed process 12".into();
        run.feed(
            snapshot(4000).processes([parent]).build(),
            Observed {
                kills: vec![kill],
                ended: Vec::new(),
                ..Observed::default()
            },
        );
        assert_eq!(run.cause().kind, ExitCauseKind::OomKiller);
    }

    fn segfault(pid: u32, read_at: u64, library: Option<&str>) -> Crash {
        Crash {
            pid,
            name: "python3".into(),
            signal: Some("SIGSEGV".into()),
            fault: "segfault at 0 ip 00007f93b040e0f9 sp 00007ffd54545408 error 4".into(),
            library: library.map(str::to_string),
            source: "/dev/kmsg".into(),
            message: "python3[42]: segfault at 0 …".into(),
            read_at: Timestamp(read_at),
            ..Crash::default()
        }
    }

    fn xid31(pid: u32, read_at: u64) -> GpuFault {
        GpuFault {
            pid,
            name: "python3".into(),
            code: 31,
            meaning: Some(
                "GPU memory page fault: the GPU program touched an address it has no mapping for",
            ),
            device: "PCI:0000:0a:00".into(),
            source: "/dev/kmsg".into(),
            message: "NVRM: Xid (PCI:0000:0a:00): 31, pid=42, name=python3, …".into(),
            read_at: Timestamp(read_at),
        }
    }

    #[test]
    fn a_crash_is_named_at_once_with_signal_library_and_not_memory() {
        let mut run = Run::new();
        growing(&mut run, 3000);
        let observed = Observed {
            // The fatal-signal record (no library) and the fault line: the
            // one naming the library wins.
            crashes: vec![
                segfault(42, 4000, Some("libtensorflow_framework.so.2")),
                segfault(42, 4000, None),
            ],
            ..Observed::default()
        };
        run.feed(snapshot(4000).build(), observed);
        let cause = run.cause().clone();
        assert_eq!(cause.kind, ExitCauseKind::Crashed);
        assert_eq!(cause.signal.as_deref(), Some("SIGSEGV"));
        assert_eq!(
            cause.library.as_deref(),
            Some("libtensorflow_framework.so.2")
        );
        assert!(cause.not_memory);
        assert!(
            cause.how.starts_with("the kernel log (/dev/kmsg) recorded a crash of pid 42 (python3): segfault at 0 ip 00007f93b040e0f9 sp 00007ffd54545408 error 4 in libtensorflow_framework.so.2, which ends it with SIGSEGV"),
            "{}",
            cause.how
        );
        let line = crate::event_line::postmortem(&run.events[0]).unwrap();
        assert!(
            line.contains("died: crashed: SIGSEGV in libtensorflow_framework.so.2; not for want of memory: 3.9 GiB at its last sample (peak 3.9 GiB)"),
            "{line}"
        );
    }

    #[test]
    fn a_crash_recalls_the_unsupported_framework_pair_it_ran_with() {
        // The line the environment reader adds to the evidence of a kernel
        // whose site-packages holds tensorflow-metal 0.6.0 beside
        // tensorflow-macos 2.9.2 (`sample::environment`).
        let pair = "unsupported: tensorflow-metal 0.6.0 with tensorflow-macos 2.9.2: unsupported pair (tensorflow-metal 0.6 is published for TensorFlow 2.10; see https://developer.apple.com/metal/tensorflow-plugin/)";
        let mut run = Run::new();
        for t in (0..=2000).step_by(1000) {
            let mut k = adas_kernel(42, GIB);
            k.workload.evidence.push(pair.to_owned());
            run.feed(snapshot(t).processes([k]).build(), Observed::default());
        }
        let observed = Observed {
            crashes: vec![segfault(42, 3000, Some("libmetal_plugin.dylib"))],
            ..Observed::default()
        };
        run.feed(snapshot(3000).build(), observed);
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::Crashed);
        assert!(cause.how.ends_with(&format!("; {pair}")), "{}", cause.how);
        // Without such a line, nothing is added.
        let mut plain = Run::new();
        growing(&mut plain, 2000);
        plain.feed(
            snapshot(3000).build(),
            Observed {
                crashes: vec![segfault(42, 3000, None)],
                ..Observed::default()
            },
        );
        assert!(
            !plain.cause().how.contains("unsupported"),
            "{}",
            plain.cause().how
        );
    }

    #[test]
    fn a_crash_in_a_thread_is_its_process_s() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        let mut c = segfault(42, 3000, Some("libtorch_cpu.so"));
        c.name = "pt_autograd_0".into();
        c.thread = Some((4243, "pt_autograd_0".into()));
        run.feed(
            snapshot(3000).build(),
            Observed {
                crashes: vec![c],
                ..Observed::default()
            },
        );
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::Crashed);
        assert!(
            cause
                .how
                .contains("pid 42 (python3), in its thread pt_autograd_0 (tid 4243)"),
            "{}",
            cause.how
        );
    }

    #[test]
    fn a_crash_of_another_process_with_the_pid_is_not_blamed() {
        let mut run = Run::new();
        // pid 42 crashed before this kernel was first seen.
        run.feed(
            snapshot(0).build(),
            Observed {
                crashes: vec![segfault(42, 0, None)],
                ..Observed::default()
            },
        );
        run.feed(
            snapshot(1000).processes([adas_kernel(42, GIB)]).build(),
            Observed::default(),
        );
        // A crash under the same pid with another name: not this process.
        let mut other = segfault(42, 2000, None);
        other.name = "bash".into();
        run.feed(
            snapshot(2000).build(),
            Observed {
                crashes: vec![other],
                ..Observed::default()
            },
        );
        run.feed(snapshot(3000).build(), Observed::default());
        assert_eq!(run.cause().kind, ExitCauseKind::Unknown);
    }

    #[test]
    fn a_gpu_fault_waits_for_a_crash_then_names_the_xid() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        run.feed(
            snapshot(3000).build(),
            Observed {
                gpu_faults: vec![xid31(42, 3000)],
                ..Observed::default()
            },
        );
        assert!(run.events.is_empty(), "a crash record may still come");
        run.feed(snapshot(4000).build(), Observed::default());
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::GpuError);
        assert!(cause.not_memory);
        assert!(
            cause.how.starts_with(
                "the kernel log (/dev/kmsg) recorded NVIDIA Xid 31 (GPU memory page fault"
            ),
            "{}",
            cause.how
        );
        assert!(
            cause
                .how
                .ends_with("for pid 42 (python3), and it ended after"),
            "{}",
            cause.how
        );
    }

    #[test]
    fn a_crash_after_a_gpu_fault_is_a_crash_that_recalls_it() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        run.feed(
            snapshot(3000).build(),
            Observed {
                gpu_faults: vec![xid31(42, 2500)],
                crashes: vec![segfault(42, 3000, Some("libcuda.so.1"))],
                ..Observed::default()
            },
        );
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::Crashed);
        assert!(
            cause
                .how
                .contains("; before that, the kernel log (/dev/kmsg) recorded NVIDIA Xid 31"),
            "{}",
            cause.how
        );
    }

    #[test]
    fn a_crash_the_report_blames_on_gpu_memory_is_not_said_to_be_not_memory() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        let mut c = segfault(42, 3000, Some("libsystem_kernel.dylib"));
        c.signal = Some("SIGABRT".into());
        c.source = "/Users/ada/Library/Logs/DiagnosticReports/Python-2026-01-01-000000.ips".into();
        c.memory = Some("its Metal command buffer failed for want of GPU memory".into());
        run.feed(
            snapshot(3000).build(),
            Observed {
                crashes: vec![c],
                ..Observed::default()
            },
        );
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::Crashed);
        assert!(!cause.not_memory);
        assert!(
            cause.how.starts_with("the crash report /Users/ada/"),
            "{}",
            cause.how
        );
        assert!(
            cause
                .how
                .contains("; its Metal command buffer failed for want of GPU memory"),
            "{}",
            cause.how
        );
    }

    #[test]
    fn a_record_lag_holds_an_unknown_verdict_until_it_passes() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        let lag = || Observed {
            record_lag: Duration::from_secs(15),
            ..Observed::default()
        };
        run.feed(snapshot(3000).build(), lag());
        run.feed(snapshot(4000).build(), lag());
        run.feed(snapshot(10_000).build(), lag());
        assert!(run.events.is_empty(), "a crash report may still be written");
        // The report arrives 12 s after the end: a crash, not "unknown".
        let mut c = segfault(42, 15_000, Some("libtensorflow_framework.2.dylib"));
        c.source = "/Library/Logs/DiagnosticReports/python3-x.ips".into();
        run.feed(
            snapshot(15_000).build(),
            Observed {
                crashes: vec![c],
                record_lag: Duration::from_secs(15),
                ..Observed::default()
            },
        );
        assert_eq!(run.cause().kind, ExitCauseKind::Crashed);
        assert_eq!(run.events[0].at, Timestamp(3000), "when it was found gone");
    }

    /// The kill of a JetsamEvent report (tests/fixtures/ips: wifianalyticsd
    /// at its high-water mark, from faisalmemon/ios-crash-dump-analysis-book),
    /// its pid and name replaced by the watched kernel's, read 30 s after
    /// the end under the longer wait of memory pressure.
    fn jetsam_report_kill(uid: Option<u32>, read_at: u64) -> MemoryKill {
        use crate::os::macos::parse::{jetsam_report, post_mortem_sources};
        let mut report = jetsam_report::parse_jetsam_event(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/ips/JetsamEvent-wifianalyticsd-highwater.ips"
        )))
        .unwrap();
        report.killed[0].pid = Some(42);
        report.killed[0].name = "python3".into();
        let source = "/Library/Logs/DiagnosticReports/JetsamEvent-x.ips";
        post_mortem_sources::jetsam_report_kills(&report, source, uid, Timestamp(read_at)).remove(0)
    }

    #[test]
    fn a_jetsam_event_report_read_late_names_the_kill_and_its_reason() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        let lag = Duration::from_secs(45);
        let waiting = || Observed {
            record_lag: lag,
            ..Observed::default()
        };
        run.feed(snapshot(3000).build(), waiting());
        run.feed(snapshot(20_000).build(), waiting());
        assert!(run.events.is_empty(), "a report may still be written");
        run.feed(
            snapshot(33_000).build(),
            Observed {
                kills: vec![jetsam_report_kill(None, 33_000)],
                record_lag: lag,
                ..Observed::default()
            },
        );
        let cause = run.cause();
        assert_eq!(cause.kind, ExitCauseKind::Jetsam);
        assert!(
            cause.how.starts_with(
                "the JetsamEvent report /Library/Logs/DiagnosticReports/JetsamEvent-x.ips recorded jetsam killing pid 42 (python3), with 6.0 MiB resident: it went over its high-water mark (highwater)"
            ),
            "{}",
            cause.how
        );
    }

    #[test]
    fn a_jetsam_event_report_another_user_owns_does_not_name_ada_s_kill() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        let lag = Duration::from_secs(45);
        run.feed(
            snapshot(3000).build(),
            Observed {
                kills: vec![jetsam_report_kill(Some(4242), 3000)],
                record_lag: lag,
                ..Observed::default()
            },
        );
        run.feed(
            snapshot(49_000).build(),
            Observed {
                record_lag: lag,
                ..Observed::default()
            },
        );
        assert_eq!(run.cause().kind, ExitCauseKind::Unknown);
    }

    #[test]
    fn names_match_across_the_kernels_cut() {
        assert!(same_command("ipykernel_launc", "ipykernel_launcher"));
        assert!(same_command("python3", "python3"));
        assert!(!same_command("python3", "python"));
    }

    /// ada's kernel 42 and `n` workers it forked (pids 43..), each holding
    /// `each` bytes; the kernel itself holds 1 GiB.
    fn kernel_and_workers(n: u32, each: u64) -> Vec<ProcessSample> {
        let mut all = vec![adas_kernel(42, GIB)];
        for i in 0..n {
            // A forked copy carries the kernel's command line and id.
            let mut w = adas_kernel(43 + i, each);
            w.ppid = 42;
            w.id.start = 8;
            all.push(w);
        }
        all
    }

    fn exited(event: &Event) -> (&ProcessRef, Option<&JobEnd>, Option<&ProcessRef>) {
        match &event.kind {
            EventKind::Exited {
                process,
                job,
                worker_of,
                ..
            } => (process, job.as_ref(), worker_of.as_deref()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_kernel_and_its_workers_end_in_one_postmortem_that_summarises_them() {
        let mut run = Run::new();
        for (t, each) in [(0, GIB), (1000, 2 * GIB), (2000, 3 * GIB)] {
            run.feed(
                snapshot(t).processes(kernel_and_workers(8, each)).build(),
                Observed::default(),
            );
        }
        // Three workers end routinely (the pool shrinks): nothing to say.
        let mut five = kernel_and_workers(8, GIB);
        five.truncate(6);
        for t in [3000, 4000] {
            run.feed(
                snapshot(t).processes(five.clone()).build(),
                Observed::default(),
            );
        }
        assert!(run.events.is_empty(), "{:#?}", run.events);
        // The kernel ends, and four of its five workers with it; the fifth
        // was re-parented and outlives it.
        let mut orphan = five[5].clone();
        orphan.ppid = 1;
        for t in [5000, 6000] {
            run.feed(
                snapshot(t).processes([orphan.clone()]).build(),
                Observed::default(),
            );
        }
        assert_eq!(run.events.len(), 1, "{:#?}", run.events);
        let (process, job, worker_of) = exited(&run.events[0]);
        assert_eq!(process.pid, 42);
        assert_eq!(process.notebook.as_deref(), Some("train.ipynb"));
        assert!(worker_of.is_none());
        assert_eq!(
            job,
            Some(&JobEnd {
                workers: 5,
                most_workers: 8,
                peak_footprint: GIB + 8 * 3 * GIB,
                ended_with: 4,
            })
        );
        let line = crate::event_line::postmortem(&run.events[0]).unwrap();
        assert!(
            line.contains("; its job had up to 8 workers and peaked at 25.0 GiB in all; 4 of the 5 at its end ended with it, 1 outlived it"),
            "{line}"
        );
        // The re-parented worker (now a process of its own, with the
        // kernel's command line) ends routinely: still a worker, no
        // post-mortem.
        run.feed(snapshot(7000).build(), Observed::default());
        run.feed(snapshot(8000).build(), Observed::default());
        assert_eq!(run.events.len(), 1, "{:#?}", run.events);
    }

    #[test]
    fn a_worker_the_oom_killer_took_is_reported_as_the_kernel_s_worker() {
        let mut run = Run::new();
        run.feed(
            snapshot(0).processes(kernel_and_workers(2, GIB)).build(),
            Observed::default(),
        );
        let mut kill = oom_kill(44, 1000);
        kill.message = "Out of memory: Killed process 44 (python3)".into();
        let mut left = kernel_and_workers(2, GIB);
        left.truncate(2);
        run.feed(
            snapshot(1000).processes(left).build(),
            Observed {
                kills: vec![kill],
                ..Observed::default()
            },
        );
        assert_eq!(run.cause().kind, ExitCauseKind::OomKiller);
        let (process, job, worker_of) = exited(&run.events[0]);
        assert_eq!(process.pid, 44);
        assert!(process.kernel_id.is_none(), "a worker is not the kernel");
        assert!(job.is_none());
        let root = worker_of.expect("whose worker");
        assert_eq!(
            (root.pid, root.notebook.as_deref()),
            (42, Some("train.ipynb"))
        );
        let line = crate::event_line::postmortem(&run.events[0]).unwrap();
        assert!(
            line.starts_with("python3 (pid 44), a worker of train.ipynb (kernel 3f2a…, pid 42), died: killed by the kernel OOM killer"),
            "{line}"
        );
    }

    #[test]
    fn a_worker_headroom_signalled_is_reported() {
        let mut run = Run::new();
        run.feed(
            snapshot(0).processes(kernel_and_workers(2, GIB)).build(),
            Observed::default(),
        );
        let mut w = kernel_and_workers(2, GIB)[1].clone();
        w.workload.kernel_id = None;
        let (mut d, mut e) = sigint_decision(1010);
        d.process = ProcessRef::of(&w);
        if let EventKind::Action { process, .. } = &mut e.kind {
            *process = ProcessRef::of(&w);
        }
        run.pm.note_decision(&d, Timestamp(1000));
        run.pm.note_event(&e);
        let mut left = kernel_and_workers(2, GIB);
        left.remove(1);
        run.feed(snapshot(2000).processes(left).build(), Observed::default());
        assert_eq!(run.cause().kind, ExitCauseKind::SignalByHeadroom);
        let (process, _, worker_of) = exited(&run.events[0]);
        assert_eq!(process.pid, 43);
        assert_eq!(worker_of.map(|r| r.pid), Some(42));
    }

    #[test]
    fn a_kernel_without_workers_says_nothing_of_a_job() {
        let mut run = Run::new();
        growing(&mut run, 2000);
        run.feed(snapshot(3000).build(), Observed::default());
        run.feed(snapshot(4000).build(), Observed::default());
        let (_, job, worker_of) = exited(&run.events[0]);
        assert_eq!((job, worker_of), (None, None));
    }
}
