//! The JSON API handlers and `/metrics`, `/healthz`.
//!
//! Every handler takes a copy of the current [`DaemonState`] (cheap: `Arc`s
//! and counters), lets go of the channel at once, and works on that copy, so
//! a slow client or a large response never holds up the sampler's next
//! publish. Parameters are parsed by [`super::query`]; errors are
//! [`ApiError`]s, JSON with a message.
//!
//! Answers that carry processes are cut from the snapshot's shared JSON
//! ([`super::snapshot_json`]) by what the [`Viewer`] may see, and each holds
//! a permit of the large-answer gate until it is sent.

use crate::policy::RuleStatus;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use bytes::Bytes;
use serde::Serialize;

use super::binding::Listening;
use super::gates::Gates;
use super::query::{self, SortKey, WorkloadFilter};
use super::snapshot_json::{Chunks, Forms, extend_object};
use super::viewer::{Sight, Viewer, listed_part, redact_config};
use super::{ApiError, Shared, current};
use crate::config::Config;
use crate::history::{
    GROWTH_WINDOW, ProcessPoint, SystemPoint, exhaustion_headroom, exhaustion_headroom_for,
    time_to_exhaustion,
};
use crate::metrics;
use crate::model::{
    Basis, CollectorErrors, GpuDevice, Job, Pressure, ProcessSample, SharedStr, Snapshot, Swap,
    SystemMemory, Timestamp,
};
use crate::state::State as DaemonState;

/// The latest snapshot, or 503 with the reason there is none yet.
fn latest(state: &DaemonState) -> Result<std::sync::Arc<Snapshot>, ApiError> {
    state
        .snapshot
        .clone()
        .ok_or_else(|| ApiError::no_sample(state))
}

/// `GET /metrics`: the Prometheus text exposition. Served also before the
/// first sample (with the daemon's own families only), so that Prometheus
/// sees the target up and `headroom_collector_up` says why data is missing.
/// A kernel's `notebook` label is filled only for a reader who may see it;
/// a reader from whom the OS hides other users' processes gets no series
/// of theirs.
pub async fn metrics(
    State(shared): State<Shared>,
    viewer: Viewer,
    RawQuery(q): RawQuery,
) -> Response {
    if let Err(e) = query::none(q.as_deref()) {
        return ApiError::from(e).into_response();
    }
    let mut state = current(&shared);
    let sight = viewer.sight(&state.config).await;
    if sight.omits_any()
        && let Some(snap) = &state.snapshot
    {
        state.snapshot = Some(Arc::new(listed_part(snap, sight)));
    }
    match metrics::render_for(&state, &|uid| sight.sees(uid)) {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(metrics::CONTENT_TYPE),
            )],
            text,
        )
            .into_response(),
        Err(e) => ApiError::internal(format!("cannot encode the metrics: {e}")).into_response(),
    }
}

/// `GET /healthz`.
#[derive(Debug, Serialize)]
pub struct Health {
    /// `ok`, `starting` (no sample yet) or `stale` (the last sample is too old).
    pub status: &'static str,
    pub started_at: Timestamp,
    pub samples: u64,
    pub last_sample_at: Option<Timestamp>,
    pub last_sample_age_seconds: Option<f64>,
    /// A sample older than this means the sampler is stuck.
    pub stale_after_seconds: f64,
    /// The last sampling error, until a sample succeeds again.
    pub sampler_error: Option<String>,
    /// Sampling at the fast interval because memory pressure is elevated.
    pub fast_mode: bool,
    /// Why events are not reaching the journal, while they are not (the
    /// daemon samples and acts on regardless).
    pub journal_error: Option<String>,
    /// When this HTTP listener was bound (`null` where the router runs
    /// without a server of its own).
    pub http_listening_since: Option<Timestamp>,
    /// The tries to listen that failed before it, while another process
    /// held the address (the daemon sampled and acted meanwhile).
    pub http_bind_failures: u64,
    /// Why the last of those tries failed.
    pub http_last_bind_error: Option<String>,
}

/// The sample age past which the sampler counts as stuck: three intervals and
/// some slack for a slow pass.
pub fn stale_after(config: &Config) -> Duration {
    config.daemon.interval * 3 + Duration::from_secs(5)
}

/// `GET /healthz`: 200 while samples keep coming, 503 before the first one
/// and when the last one is older than [`stale_after`].
pub async fn healthz(
    State(shared): State<Shared>,
    listening: Option<Extension<Arc<Listening>>>,
    RawQuery(q): RawQuery,
) -> Response {
    if let Err(e) = query::none(q.as_deref()) {
        return ApiError::from(e).into_response();
    }
    let state = current(&shared);
    let now = Timestamp::now();
    let stale_after = stale_after(&state.config);
    let last = state.snapshot.as_ref().map(|s| s.taken_at);
    let age = last.map(|t| now.since(t));
    let status = match age {
        None => "starting",
        Some(age) if age > stale_after => "stale",
        Some(_) => "ok",
    };
    let body = Health {
        status,
        started_at: state.started_at,
        samples: state.counters.samples,
        last_sample_at: last,
        last_sample_age_seconds: age.map(|a| a.as_secs_f64()),
        stale_after_seconds: stale_after.as_secs_f64(),
        sampler_error: state.last_error.clone(),
        fast_mode: state.fast_mode,
        journal_error: state.journal.problem(),
        http_listening_since: listening.as_ref().map(|l| l.since),
        http_bind_failures: listening.as_ref().map_or(0, |l| l.bind_failures),
        http_last_bind_error: listening.and_then(|l| l.last_bind_error.clone()),
    };
    let code = if status == "ok" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body)).into_response()
}

/// `GET /api/v1/snapshot`: the latest snapshot, every process included
/// (redacted where the viewer may not see its details).
pub async fn snapshot(
    State(shared): State<Shared>,
    Extension(gates): Extension<Arc<Gates>>,
    viewer: Viewer,
    RawQuery(q): RawQuery,
) -> Response {
    if let Err(e) = query::none(q.as_deref()) {
        return ApiError::from(e).into_response();
    }
    let state = current(&shared);
    let answer = async {
        let snap = latest(&state)?;
        let permit = gates.large(viewer.key().await).await?;
        let sight = viewer.sight(&state.config).await;
        let forms = Forms::of(&state.snapshot_json, &snap, sight).await?;
        Ok::<_, ApiError>(Chunks::new(forms.document(), Some(permit)))
    };
    match answer.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}

/// What a row of the process table adds to the process as sampled: what
/// its history says.
#[derive(Debug, Serialize)]
pub struct RowFigures {
    /// Robust slope of the footprint over the last 30 s; absent until the
    /// process has a few points of history.
    pub growth_bytes_per_second: Option<f64>,
    /// When memory and swap run out at that pace; only for growing processes.
    pub time_to_exhaustion_seconds: Option<f64>,
    /// The rules that watch the process, with their state (`watching`,
    /// `near`, `crossed`, `step 1/3`, `done`) and why, from the last sample.
    pub rules: Vec<RuleStatus>,
    /// The process's place in its job (`job` holds the root's pid): `root`
    /// or `worker`; `null` outside every job.
    pub job_role: Option<JobRole>,
    /// For a job's root, the job: its members, total and basis; `null` for
    /// a worker and outside every job.
    pub job_total: Option<JobTotal>,
    /// Its memory-cgroup ceiling (the tightest limited cgroup it is in):
    /// shown whether or not a rule watches it; `null` where it has none.
    pub ceiling: Option<RowCeiling>,
}

/// A process's ceiling as its row shows it.
#[derive(Debug, Serialize)]
pub struct RowCeiling {
    /// The limited cgroup (see the snapshot's `ceilings`).
    pub cgroup: SharedStr,
    /// The limit that stops it first, and the file it is read from.
    pub limit: u64,
    pub limit_file: &'static str,
    /// Charged to the cgroup now, page cache included.
    pub usage: u64,
    /// What the cgroup can still take: limit − (usage − reclaimable cache).
    pub room: u64,
    /// The room is less than the machine's available memory: the cgroup's
    /// OOM killer, not the machine, stops the process first.
    pub binding: bool,
}

/// A process's place in its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobRole {
    Root,
    Worker,
}

/// A job as its root's row shows it: pids and figures only (the OS shows
/// every process's pid and parent to everyone), no text of its members.
#[derive(Debug, Serialize)]
pub struct JobTotal {
    /// Every member's pid: the root first, then its descendants in pid order.
    pub members: Vec<u32>,
    /// How many members are not the root.
    pub workers: usize,
    /// The members' footprints added up (shared pages counted once where
    /// `basis` is `pss`).
    pub footprint: u64,
    /// The members' GPU memory added up, where any is known.
    pub gpu_memory: Option<u64>,
    /// How the total counts shared pages: `rss`, `pss` or `phys_footprint`.
    pub basis: Basis,
}

impl JobTotal {
    /// `job` with the members `listed` keeps (those the viewer is shown).
    fn of(job: &Job, listed: impl Fn(u32) -> bool) -> Self {
        Self {
            members: job.members.iter().copied().filter(|m| listed(*m)).collect(),
            workers: job.workers(),
            footprint: job.footprint,
            gpu_memory: job.gpu_memory,
            basis: job.basis,
        }
    }
}

fn figures(state: &DaemonState, snap: &Snapshot, p: &ProcessSample, sight: Sight) -> RowFigures {
    // Against its ceiling where that is tighter than the machine.
    let (headroom, _) = exhaustion_headroom_for(snap, p);
    let growth = state
        .history
        .process(&p.id)
        .and_then(|t| t.growth_bytes_per_second(GROWTH_WINDOW));
    RowFigures {
        growth_bytes_per_second: growth,
        time_to_exhaustion_seconds: growth
            .and_then(|g| time_to_exhaustion(headroom, g))
            .map(|d| d.as_secs_f64()),
        rules: state
            .rule_statuses
            .iter()
            .filter(|r| r.pid == p.id.pid && r.start == p.id.start)
            .cloned()
            .collect(),
        job_role: snap.job_of(p).map(|j| {
            if j.pid() == p.id.pid {
                JobRole::Root
            } else {
                JobRole::Worker
            }
        }),
        job_total: snap.job_of(p).filter(|j| j.pid() == p.id.pid).map(|j| {
            JobTotal::of(j, |pid| {
                !sight.omits_any() || snap.process(pid).is_some_and(|m| sight.lists(m.uid))
            })
        }),
        ceiling: snap.ceiling_of(p).map(|c| RowCeiling {
            cgroup: c.path.clone(),
            limit: c.limit(),
            limit_file: c.limit_file(),
            usage: c.usage,
            room: c.room(),
            binding: c.room() < snap.system.available,
        }),
    }
}

/// One row: process `index`'s shared object followed by its figures.
fn row(forms: &Forms, index: usize, figures: &RowFigures) -> Result<Vec<Bytes>, ApiError> {
    let open = forms
        .open_object(index)
        .ok_or_else(|| ApiError::internal(format!("process {index} is not in the encoding")))?;
    Ok(extend_object(open, figures))
}

/// The fields of `/api/v1/processes` before its rows.
#[derive(Debug, Serialize)]
pub struct ProcessTable {
    pub taken_at: Timestamp,
    /// Processes that passed the `workload` filter, before `limit`.
    pub matched: usize,
    /// Available memory plus free swap: what growth is measured against.
    pub headroom_bytes: u64,
    pub growth_window_seconds: u64,
}

/// `{…head fields…,"<key>":` followed by nothing: `head` with its closing
/// brace opened up for one more field.
fn open_with(head: &impl Serialize, key: &str) -> Result<Vec<u8>, ApiError> {
    let mut out = serde_json::to_vec(head)
        .map_err(|e| ApiError::internal(format!("cannot encode the answer: {e}")))?;
    out.pop();
    if out.len() > 1 {
        out.push(b',');
    }
    out.extend_from_slice(format!("\"{key}\":").as_bytes());
    Ok(out)
}

/// `GET /api/v1/processes?sort=footprint|growth|gpu&limit=N&workload=KIND|ml`.
pub async fn processes(
    State(shared): State<Shared>,
    Extension(gates): Extension<Arc<Gates>>,
    viewer: Viewer,
    RawQuery(q): RawQuery,
) -> Response {
    let parsed = match query::processes(q.as_deref()) {
        Ok(p) => p,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let state = current(&shared);
    let answer = async {
        let snap = latest(&state)?;
        let sight = viewer.sight(&state.config).await;
        let headroom = exhaustion_headroom(&snap);
        let mut rows: Vec<(usize, &ProcessSample, RowFigures)> = snap
            .processes
            .iter()
            .enumerate()
            .filter(|(_, p)| sight.lists(p.uid))
            .filter(|(_, p)| match parsed.workload {
                None => true,
                // A job's members are ML work, whatever each one runs.
                Some(WorkloadFilter::Ml) => p.workload.is_ml() || snap.job_of(p).is_some(),
                Some(WorkloadFilter::Kind(k)) => p.workload.is(k),
            })
            .map(|(i, p)| (i, p, figures(&state, &snap, p, sight)))
            .collect();
        let matched = rows.len();
        let key = |p: &ProcessSample, f: &RowFigures| -> f64 {
            match parsed.sort {
                SortKey::Footprint => p.footprint as f64,
                SortKey::Growth => f.growth_bytes_per_second.unwrap_or(f64::NEG_INFINITY),
                SortKey::Gpu => p.gpu_memory.map_or(-1.0, |g| g as f64),
            }
        };
        rows.sort_by(|(_, pa, fa), (_, pb, fb)| {
            key(pb, fb)
                .total_cmp(&key(pa, fa))
                .then(pb.footprint.cmp(&pa.footprint))
                .then(pa.id.pid.cmp(&pb.id.pid))
        });
        rows.truncate(parsed.limit);
        let permit = gates.large(viewer.key().await).await?;
        let forms = Forms::of(&state.snapshot_json, &snap, sight).await?;
        let head = ProcessTable {
            taken_at: snap.taken_at,
            matched,
            headroom_bytes: headroom,
            growth_window_seconds: GROWTH_WINDOW.as_secs(),
        };
        let mut open = open_with(&head, "processes")?;
        open.push(b'[');
        let mut chunks = vec![Bytes::from(open)];
        for (n, (index, _, figures)) in rows.iter().enumerate() {
            if n > 0 {
                chunks.push(Bytes::from_static(b","));
            }
            chunks.extend(row(&forms, *index, figures)?);
        }
        chunks.push(Bytes::from_static(b"]}"));
        Ok::<_, ApiError>(Chunks::new(chunks, Some(permit)))
    };
    match answer.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}

/// The fields of `/api/v1/processes/{pid}` besides the process's row.
#[derive(Debug, Serialize)]
pub struct ProcessDetail {
    pub taken_at: Timestamp,
    /// The footprint series kept for the process (ML workloads and the
    /// largest processes have one), oldest first; empty otherwise.
    pub history: Vec<ProcessPoint>,
    /// Largest footprint seen while tracked.
    pub tracked_peak_footprint: Option<u64>,
    /// For the root of a job with workers: the series of the job's total
    /// (members' footprints added up, shared memory counted once), oldest
    /// first, which rules with `scope = "job"` judge; empty otherwise.
    pub job_history: Vec<ProcessPoint>,
}

/// `GET /api/v1/processes/{pid}`: one process of the latest sample with its
/// recent history; 404 if the latest sample has no such process.
pub async fn process(
    State(shared): State<Shared>,
    Extension(gates): Extension<Arc<Gates>>,
    viewer: Viewer,
    Path(segment): Path<String>,
    RawQuery(q): RawQuery,
) -> Response {
    let pid = match query::pid(&segment).and_then(|pid| query::none(q.as_deref()).map(|()| pid)) {
        Ok(pid) => pid,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let state = current(&shared);
    let answer = async {
        let snap = latest(&state)?;
        let sight = viewer.sight(&state.config).await;
        // A process the OS hides from the viewer is as absent as a gone one.
        let Some((index, p)) = snap
            .processes
            .iter()
            .enumerate()
            .find(|(_, p)| p.id.pid == pid && sight.lists(p.uid))
        else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "no process with pid {pid} in the latest sample (taken at {}); it may have exited: list the processes with /api/v1/processes",
                    snap.taken_at
                ),
            ));
        };
        let track = state.history.process(&p.id);
        let detail = ProcessDetail {
            taken_at: snap.taken_at,
            history: track
                .map(|t| t.points.iter().copied().collect())
                .unwrap_or_default(),
            tracked_peak_footprint: track.map(|t| t.peak_footprint),
            job_history: state
                .history
                .job(&p.id)
                .map(|t| t.points.iter().copied().collect())
                .unwrap_or_default(),
        };
        let figures = figures(&state, &snap, p, sight);
        let permit = gates.large(viewer.key().await).await?;
        let forms = Forms::of(&state.snapshot_json, &snap, sight).await?;
        let mut chunks = vec![Bytes::from(open_with(&detail, "process")?)];
        chunks.extend(row(&forms, index, &figures)?);
        chunks.push(Bytes::from_static(b"}"));
        Ok(Chunks::new(chunks, Some(permit)))
    };
    match answer.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /api/v1/history`.
#[derive(Debug, Serialize)]
pub struct HistoryBody<'a> {
    /// How much history the daemon keeps (`daemon.history`).
    pub retention_seconds: u64,
    pub interval_seconds: f64,
    /// System points within the asked minutes of the newest one, oldest first.
    pub points: Vec<&'a SystemPoint>,
}

/// `GET /api/v1/history?minutes=N`: the system series (memory breakdown,
/// swap, pressure, GPU memory), at most the retention the daemon keeps.
pub async fn history(State(shared): State<Shared>, RawQuery(q): RawQuery) -> Response {
    let parsed = match query::history(q.as_deref()) {
        Ok(p) => p,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let state = current(&shared);
    if state.snapshot.is_none() {
        return ApiError::no_sample(&state).into_response();
    }
    let window = Duration::from_secs(u64::from(parsed.minutes) * 60);
    Json(HistoryBody {
        retention_seconds: state.history.retention().as_secs(),
        interval_seconds: state.config.daemon.interval.as_secs_f64(),
        points: state.history.system_since(window).collect(),
    })
    .into_response()
}

/// The fields of `/api/v1/events` before its list of events.
#[derive(Debug, Serialize)]
pub struct EventsHead {
    /// Where the daemon journals every event; this endpoint serves the most
    /// recent ones it keeps in memory.
    pub journal: Option<String>,
    /// How many of the events kept in memory this client may see (the
    /// daemon keeps at most [`crate::state::RECENT_EVENTS_BYTES`] of them,
    /// each user's share at most [`crate::state::KEEPER_SHARE_BYTES`]).
    pub kept: usize,
    /// Of those, how many are at or after `since`, before `limit`.
    pub matched: usize,
}

/// `GET /api/v1/events?since=T&limit=N`: limits crossed, signals sent,
/// steps skipped, processes exited, config reloads, from the daemon's memory
/// of its recent journal entries (`headroom events` reads the whole
/// journal), oldest first: the last `limit` at or after `since`. Each event
/// is one of the two encodings the state made when it kept it
/// ([`crate::state::KeptEvent`]), picked by what the viewer may see: in
/// full for root and the process's owner; redacted for anyone else (no
/// notebook, no kernel id, no kernel log record; `"redacted": true` in
/// `process`); not at all where the OS hides the process from the viewer.
/// Like other answers that can be large, it holds a permit of the
/// large-answer gate until it is sent.
pub async fn events(
    State(shared): State<Shared>,
    Extension(gates): Extension<Arc<Gates>>,
    viewer: Viewer,
    RawQuery(q): RawQuery,
) -> Response {
    let parsed = match query::events(q.as_deref()) {
        Ok(p) => p,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let answer = async {
        // The permit first: a request waiting for one holds no state.
        let permit = gates.large(viewer.key().await).await?;
        let (events, journal) = {
            let state = current(&shared);
            let journal = crate::journal::path_for(
                &state.config.daemon,
                crate::os::this_process::running_as_root(),
            );
            let sight = viewer.sight(&state.config).await;
            (shown_events(&state.events, sight), journal)
        };
        let kept = events.len();
        let matching: Vec<&(crate::model::Timestamp, Bytes)> = events
            .iter()
            .filter(|(at, _)| parsed.since.is_none_or(|since| *at >= since))
            .collect();
        let head = EventsHead {
            journal: Some(journal.display().to_string()),
            kept,
            matched: matching.len(),
        };
        let from = matching.len().saturating_sub(parsed.limit);
        let mut open = open_with(&head, "events")?;
        open.push(b'[');
        let mut chunks = vec![Bytes::from(open)];
        for (n, (_, json)) in matching[from..].iter().enumerate() {
            if n > 0 {
                chunks.push(Bytes::from_static(b","));
            }
            chunks.push(json.clone());
        }
        chunks.push(Bytes::from_static(b"]}"));
        Ok::<_, ApiError>(Chunks::new(chunks, Some(permit)))
    };
    match answer.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}

/// The kept events `sight` may see, oldest first, each in the form it may
/// see: the daemon's own and its own processes' in full, other users'
/// redacted, or left out where the OS hides them.
fn shown_events(
    events: &crate::state::RecentEvents,
    sight: Sight,
) -> Vec<(crate::model::Timestamp, Bytes)> {
    events
        .iter()
        .filter_map(|e| {
            let json = match e.about {
                None => &e.full,
                Some(uid) if sight.sees(uid) => &e.full,
                Some(uid) if sight.lists(uid) => &e.redacted,
                Some(_) => return None,
            };
            Some((e.at, json.clone()))
        })
        .collect()
}

/// `GET /api/v1/config`.
#[derive(Debug, Serialize)]
pub struct ConfigBody<'a> {
    /// The file the config was loaded from; `null` for the embedded default.
    pub file: Option<String>,
    /// The effective config, every key written out, hook arguments hidden.
    pub config: &'a Config,
}

/// `GET /api/v1/config`: the effective config, with every hook argument
/// after the program replaced by `"[redacted]"` (hooks are often handed
/// tokens and webhook URLs). Served before the first sample too: it does not
/// depend on one.
pub async fn config(State(shared): State<Shared>, RawQuery(q): RawQuery) -> Response {
    if let Err(e) = query::none(q.as_deref()) {
        return ApiError::from(e).into_response();
    }
    let state = current(&shared);
    let shown = redact_config(&state.config);
    Json(ConfigBody {
        file: state.config_path.as_ref().map(|p| p.display().to_string()),
        config: &shown,
    })
    .into_response()
}

/// What `/api/v1/stream` sends for each sample: the snapshot without its
/// process list, and the point the charts add.
#[derive(Debug, Serialize)]
pub struct SampleEvent<'a> {
    pub taken_at: Timestamp,
    pub source: &'a str,
    pub sample_micros: u64,
    pub system: &'a SystemMemory,
    pub swap: &'a Swap,
    pub pressure: &'a Pressure,
    pub gpus: &'a [GpuDevice],
    pub processes: usize,
    pub ml_processes: usize,
    pub errors: &'a CollectorErrors,
    pub fast_mode: bool,
    /// The newest point of `/api/v1/history`.
    pub point: Option<&'a SystemPoint>,
}

impl<'a> SampleEvent<'a> {
    pub fn of(state: &'a DaemonState, snap: &'a Snapshot) -> Self {
        Self {
            taken_at: snap.taken_at,
            source: &snap.source,
            sample_micros: snap.sample_micros,
            system: &snap.system,
            swap: &snap.swap,
            pressure: &snap.pressure,
            gpus: &snap.gpus,
            processes: snap.processes.len(),
            ml_processes: snap.processes.iter().filter(|p| p.workload.is_ml()).count(),
            errors: &snap.errors,
            fast_mode: state.fast_mode,
            point: state.history.system().back(),
        }
    }
}
