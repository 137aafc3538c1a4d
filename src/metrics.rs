//! Prometheus metrics: a [`prometheus::Registry`] built from one [`State`], and
//! its text exposition for `/metrics`.
//!
//! Every metric family headroom exports is defined here, one function per group
//! (memory, swap, pressure, GPUs, processes, workloads, the sampler, build info),
//! all called from [`registry`]. A new group (limit breaches and actions taken,
//! by rule, action and outcome) is one more function and one more line there.
//!
//! Conventions: the prefix `headroom_`, base units (`_bytes`, `_seconds`),
//! ratios 0–1, counters ending in `_total` and derived from monotonic sources
//! (the OS's own counters or [`crate::state::Counters`], never one sample's
//! counts), help text on every family. A family whose value the platform does
//! not report (e.g. `wired` on Linux, PSI on macOS) is left out rather than
//! exported as zero. Per-process series exist only for ML workloads, the
//! largest first, capped by `http.max_process_series`, because `pid` labels
//! churn; per-job series (a root ML process and its descendants, memory
//! counted once) likewise, by the root's pid, under the same cap. How a
//! footprint counts shared memory (`rss`, `pss`, `phys_footprint`) is an
//! info series beside the figures, so that a change of basis does not start
//! a new footprint series. Who a process belongs to (its pod, namespace and
//! container, its container's id, its Slurm job, its systemd unit) is on
//! that info series too, for the same reason, and joined on `pid`: one
//! value per process adds no series, whereas on the figures' series a
//! label found a sample late would start new ones. A kernel's `notebook`
//! label is shown only to a reader allowed to see it ([`render_for`]; the
//! HTTP server decides who is), and so are a Docker container's name (read
//! in root's own directory) and the path of a tmpfs file no user could list
//! (see `unowned`).

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::{CounterVec, Encoder, GaugeVec, Opts, Registry, TextEncoder};

use crate::event::ExitCauseKind;
use crate::history::{GROWTH_WINDOW, exhaustion_headroom_for, time_to_exhaustion};
use crate::model::{
    Action, HIDDEN_PATH, Job, PressureLevel, ProcessSample, Snapshot, WorkloadKind,
};
use crate::state::{DurationHistogram, State};

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The text exposition of [`registry`].
pub fn render(state: &State) -> Result<String, prometheus::Error> {
    render_for(state, &|_| true)
}

/// The text exposition for a reader who sees the notebook of a process
/// owned by `uid` only where `shows(uid)` holds (other processes' series
/// carry an empty `notebook` label).
pub fn render_for(
    state: &State,
    shows: &dyn Fn(Option<u32>) -> bool,
) -> Result<String, prometheus::Error> {
    let families = registry_for(state, shows)?.gather();
    let mut out = Vec::with_capacity(16 * 1024);
    TextEncoder::new().encode(&families, &mut out)?;
    String::from_utf8(out).map_err(|e| prometheus::Error::Msg(e.to_string()))
}

/// A registry holding every metric family, with the values of `state`.
///
/// Built afresh for each scrape from an immutable state, so a scrape never
/// touches what the sampler writes. Fails only on a programming error (an
/// invalid or duplicate family), which the unit tests rule out.
pub fn registry(state: &State) -> Result<Registry, prometheus::Error> {
    registry_for(state, &|_| true)
}

/// [`registry`], with notebooks shown as [`render_for`] says.
pub fn registry_for(
    state: &State,
    shows: &dyn Fn(Option<u32>) -> bool,
) -> Result<Registry, prometheus::Error> {
    let reg = Registry::new();
    build_info(&reg, state)?;
    sampler(&reg, state)?;
    if let Some(snap) = state.snapshot.as_deref() {
        memory(&reg, snap)?;
        swap(&reg, snap)?;
        pressure(&reg, snap)?;
        gpus(&reg, snap)?;
        processes(&reg, state, snap, shows)?;
        jobs(&reg, state, snap, shows)?;
        workloads(&reg, snap)?;
        unowned(&reg, snap, shows)?;
    }
    actions(&reg, state)?;
    Ok(reg)
}

/// What the rules did: limit crossings by rule, and actions by rule, action
/// (`SIGINT`, `hook`, `notify`, ...) and outcome (`done`, `dry-run`, `gone`,
/// `identity-changed`, `refused`, `failed`, `skipped`). Every rule of the
/// config has its crossing series from the start, at 0, and every step of
/// its ladder a series at 0 for each outcome it can end in
/// ([`possible_outcomes`]), so that the first action is an increase; a
/// reload's new rules and steps get theirs with the new config.
fn actions(reg: &Registry, state: &State) -> prometheus::Result<()> {
    let crossings = counter(
        reg,
        "headroom_limit_breaches_total",
        "Times a rule's limit started to hold for a process since the daemon started, by rule.",
        &["rule"],
    )?;
    for rule in &state.config.rules {
        crossings.with_label_values(&[rule.name.as_str()]);
    }
    for (rule, n) in &state.actions.crossings {
        crossings
            .with_label_values(&[rule.as_str()])
            .inc_by(*n as f64);
    }
    let held = counter(
        reg,
        "headroom_limit_held_not_acting_total",
        "Times a rule's limit started to hold for a process the rule does not act on (another user's or root's process, a protected one, a cooldown), by rule.",
        &["rule"],
    )?;
    for rule in &state.config.rules {
        held.with_label_values(&[rule.name.as_str()]);
    }
    for (rule, n) in &state.actions.held_not_acting {
        held.with_label_values(&[rule.as_str()]).inc_by(*n as f64);
    }
    let actions = counter(
        reg,
        "headroom_actions_total",
        "Steps of the rules' ladders since the daemon started, by rule, action and outcome (skipped: not taken, e.g. no handler).",
        &["rule", "action", "outcome"],
    )?;
    for rule in &state.config.rules {
        let dry_run = crate::policy::assess::dry_run_reason(rule, &state.config).is_some();
        for step in &rule.actions {
            for outcome in possible_outcomes(&step.action, dry_run) {
                actions.with_label_values(&[rule.name.as_str(), step.action.kind(), outcome]);
            }
        }
    }
    for ((rule, action, outcome), n) in &state.actions.actions {
        actions
            .with_label_values(&[rule.as_str(), action.as_str(), outcome.as_str()])
            .inc_by(*n as f64);
    }
    let exits = counter(
        reg,
        "headroom_process_exits_total",
        "Watched processes that ended since the daemon started, by the cause their post-mortem found (oom-killer, signal-by-headroom, jetsam, crashed, gpu-error, exited, unknown).",
        &["cause"],
    )?;
    for kind in ExitCauseKind::ALL {
        exits.with_label_values(&[kind.as_str()]);
    }
    for (cause, n) in &state.actions.exits {
        exits.with_label_values(&[cause.as_str()]).inc_by(*n as f64);
    }
    Ok(())
}

/// The outcomes a step of `action` can end in (the `outcome` label of
/// `headroom_actions_total`), so that each has its series at 0 before it
/// first happens and `increase()` sees the first one. Under a dry run a
/// step ends `dry-run` where it would end `done` (the actuator runs no
/// hook and shows no notification in a dry run).
pub fn possible_outcomes(action: &Action, dry_run: bool) -> Vec<&'static str> {
    let sent = if dry_run { "dry-run" } else { "done" };
    match action {
        // Checked right before delivery: the pid may be gone or reused, the
        // target refused (PID 1, headroom, a kernel thread), the send fail.
        Action::Signal {
            require_handler, ..
        } => {
            let mut all = vec![sent, "gone", "identity-changed", "refused", "failed"];
            if *require_handler {
                all.push("skipped");
            }
            all
        }
        // A hook is refused where its program may not run as root, and
        // fails on its exit status or timeout.
        Action::Hook { .. } => vec![sent, "refused", "failed"],
        // A notification fails where no desktop session or notifier exists.
        Action::Notify => vec![sent, "failed"],
    }
}

fn gauge(reg: &Registry, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<GaugeVec> {
    let g = GaugeVec::new(Opts::new(name, help), labels)?;
    reg.register(Box::new(g.clone()))?;
    Ok(g)
}

fn counter(
    reg: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<CounterVec> {
    let c = CounterVec::new(Opts::new(name, help), labels)?;
    reg.register(Box::new(c.clone()))?;
    Ok(c)
}

/// A gauge without labels, set to `value`.
fn single(reg: &Registry, name: &str, help: &str, value: f64) -> prometheus::Result<()> {
    gauge(reg, name, help, &[])?
        .with_label_values::<&str>(&[])
        .set(value);
    Ok(())
}

/// A gauge without labels, registered only when the value is known.
fn optional(reg: &Registry, name: &str, help: &str, value: Option<u64>) -> prometheus::Result<()> {
    match value {
        Some(v) => single(reg, name, help, v as f64),
        None => Ok(()),
    }
}

fn build_info(reg: &Registry, state: &State) -> prometheus::Result<()> {
    gauge(
        reg,
        "headroom_build_info",
        "Always 1; labelled with the headroom version and the OS and CPU architecture it was built for.",
        &["version", "os", "arch"],
    )?
    .with_label_values(&[
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH,
    ])
    .set(1.0);
    single(
        reg,
        "headroom_start_time_seconds",
        "When the daemon started, in seconds since the Unix epoch.",
        state.started_at.as_millis() as f64 / 1000.0,
    )
}

fn sampler(reg: &Registry, state: &State) -> prometheus::Result<()> {
    let c = &state.counters;
    counter(
        reg,
        "headroom_samples_total",
        "Samples taken and published since the daemon started.",
        &[],
    )?
    .with_label_values::<&str>(&[])
    .inc_by(c.samples as f64);

    let errors = counter(
        reg,
        "headroom_collector_errors_total",
        "Reads that failed since the daemon started, by collector and reason. A failing read is counted, never fatal.",
        &["collector", "reason"],
    )?;
    let e = &c.collector_errors;
    for (collector, reason, n) in [
        ("sampler", "failed", c.sample_failures),
        ("processes", "vanished", e.vanished),
        ("processes", "permission_denied", e.permission_denied),
        ("processes", "unreadable", e.unreadable),
    ] {
        errors
            .with_label_values(&[collector, reason])
            .inc_by(n as f64);
    }

    let up = gauge(
        reg,
        "headroom_collector_up",
        "1 if the collector's last attempt produced data, 0 if it failed.",
        &["collector"],
    )?;
    let sampled = state.snapshot.is_some() && state.last_error.is_none();
    let processes = state
        .snapshot
        .as_deref()
        .is_some_and(|s| !s.processes.is_empty());
    up.with_label_values(&["sampler"])
        .set(f64::from(u8::from(sampled)));
    up.with_label_values(&["processes"])
        .set(f64::from(u8::from(sampled && processes)));
    up.with_label_values(&["journal"])
        .set(f64::from(u8::from(state.journal.problem().is_none())));
    // The optional collectors (NVML, the pressure notification, the kernel
    // log, the Jupyter lookup): up or not, whether this machine has what
    // they read at all, and their failed reads.
    let applicable = gauge(
        reg,
        "headroom_collector_applicable",
        "1 if this machine has what the collector reads, 0 if not (no NVIDIA driver, no kernel log for a daemon that is not root): a collector down and not applicable is not failing.",
        &["collector"],
    )?;
    let optional = state
        .snapshot
        .as_deref()
        .map_or(&[][..], |s| &s.collectors[..]);
    for c in optional {
        up.with_label_values(&[c.name.as_str()])
            .set(f64::from(u8::from(c.up)));
        applicable
            .with_label_values(&[c.name.as_str()])
            .set(f64::from(u8::from(c.applicable)));
        errors
            .with_label_values(&[c.name.as_str(), "failed"])
            .inc_by(c.errors as f64);
    }
    counter(
        reg,
        "headroom_journal_unwritten_events_total",
        "Events that did not reach the journal (it could not be opened, was refused, or a write failed) since the daemon started; they were logged and kept in memory.",
        &[],
    )?
    .with_label_values::<&str>(&[])
    .inc_by(state.journal.unwritten() as f64);

    reg.register(Box::new(Durations::new(
        "headroom_sample_duration_seconds",
        "How long one sampling pass took (memory, swap, pressure and every process).",
        c.sample_durations,
    )?))?;
    reg.register(Box::new(Durations::new(
        "headroom_wake_lateness_seconds",
        "How late the daemon's loop woke for a scheduled sample or system probe, against its \
         schedule: near zero normally, more when the machine starves the daemon of CPU or memory.",
        c.wake_lateness,
    )?))?;

    counter(
        reg,
        "headroom_pressure_events_total",
        "Memory-pressure notifications from the OS (e.g. PSI triggers) since the daemon started.",
        &[],
    )?
    .with_label_values::<&str>(&[])
    .inc_by(c.pressure_events as f64);
    let reloads = counter(
        reg,
        "headroom_config_reloads_total",
        "Config reloads (SIGHUP) since the daemon started, by outcome.",
        &["outcome"],
    )?;
    reloads
        .with_label_values(&["applied"])
        .inc_by(c.reloads as f64);
    reloads
        .with_label_values(&["rejected"])
        .inc_by(c.reload_failures as f64);

    let d = &state.config.daemon;
    let interval = if state.fast_mode {
        d.fast_interval
    } else {
        d.interval
    };
    single(
        reg,
        "headroom_sampling_interval_seconds",
        "The current sampling interval: shorter while memory pressure is elevated.",
        interval.as_secs_f64(),
    )?;
    if let Some(snap) = state.snapshot.as_deref() {
        single(
            reg,
            "headroom_last_sample_timestamp_seconds",
            "When the latest published sample was taken, in seconds since the Unix epoch.",
            snap.taken_at.as_millis() as f64 / 1000.0,
        )?;
    }
    Ok(())
}

fn memory(reg: &Registry, snap: &Snapshot) -> prometheus::Result<()> {
    let m = &snap.system;
    single(
        reg,
        "headroom_memory_total_bytes",
        "Physical memory installed.",
        m.total as f64,
    )?;
    single(
        reg,
        "headroom_memory_available_bytes",
        "Memory that can be handed out without swapping (Linux MemAvailable; macOS free, inactive and speculative pages).",
        m.available as f64,
    )?;
    single(
        reg,
        "headroom_memory_used_bytes",
        "Memory in use by processes and the kernel (total - available on Linux; app + wired + compressed on macOS).",
        m.used as f64,
    )?;
    single(
        reg,
        "headroom_memory_free_bytes",
        "Entirely unused memory.",
        m.free as f64,
    )?;
    optional(
        reg,
        "headroom_memory_app_bytes",
        "Anonymous memory of processes (Linux AnonPages; macOS app memory).",
        m.app,
    )?;
    optional(
        reg,
        "headroom_memory_wired_bytes",
        "Memory the kernel cannot page out (macOS wired; Linux Unevictable).",
        m.wired,
    )?;
    optional(
        reg,
        "headroom_memory_compressed_bytes",
        "Compressed memory (macOS compressor; Linux zswap pool).",
        m.compressed,
    )?;
    optional(
        reg,
        "headroom_memory_cached_bytes",
        "File-backed cache the kernel can drop (Linux Cached + Buffers - Shmem; macOS external + purgeable).",
        m.cached,
    )?;
    optional(
        reg,
        "headroom_memory_shmem_bytes",
        "Shared memory and tmpfs (Linux Shmem).",
        m.shmem,
    )
}

fn swap(reg: &Registry, snap: &Snapshot) -> prometheus::Result<()> {
    let s = &snap.swap;
    single(
        reg,
        "headroom_swap_total_bytes",
        "Swap space configured.",
        s.total as f64,
    )?;
    single(
        reg,
        "headroom_swap_used_bytes",
        "Swap space in use.",
        s.used as f64,
    )?;
    if let Some(v) = s.swapped_in_bytes {
        counter(
            reg,
            "headroom_swap_in_bytes_total",
            "Bytes read back from swap since boot, as the OS counts them.",
            &[],
        )?
        .with_label_values::<&str>(&[])
        .inc_by(v as f64);
    }
    if let Some(v) = s.swapped_out_bytes {
        counter(
            reg,
            "headroom_swap_out_bytes_total",
            "Bytes written out to swap since boot, as the OS counts them.",
            &[],
        )?
        .with_label_values::<&str>(&[])
        .inc_by(v as f64);
    }
    Ok(())
}

fn pressure(reg: &Registry, snap: &Snapshot) -> prometheus::Result<()> {
    let level = gauge(
        reg,
        "headroom_memory_pressure",
        "Memory pressure as a state set: 1 for the current level (normal, warn or critical), 0 for the others.",
        &["level"],
    )?;
    for l in [
        PressureLevel::Normal,
        PressureLevel::Warn,
        PressureLevel::Critical,
    ] {
        level
            .with_label_values(&[l.as_str()])
            .set(f64::from(u8::from(snap.pressure.level == l)));
    }
    if let Some(psi) = snap.pressure.psi {
        let stall = counter(
            reg,
            "headroom_pressure_stall_seconds_total",
            "Time tasks stalled waiting for memory since boot (Linux PSI): kind=some when at least one task stalled, kind=full when all non-idle tasks did.",
            &["kind"],
        )?;
        stall
            .with_label_values(&["some"])
            .inc_by(psi.some.total_micros as f64 / 1e6);
        if let Some(full) = psi.full {
            stall
                .with_label_values(&["full"])
                .inc_by(full.total_micros as f64 / 1e6);
        }
    }
    if let Some(free) = snap.pressure.free_percent {
        single(
            reg,
            "headroom_memory_kernel_free_ratio",
            "The share of memory the kernel considers free (macOS kern.memorystatus_level), 0-1.",
            f64::from(free) / 100.0,
        )?;
    }
    Ok(())
}

fn gpus(reg: &Registry, snap: &Snapshot) -> prometheus::Result<()> {
    if snap.gpus.is_empty() {
        return Ok(());
    }
    let labels = ["gpu", "name"];
    let used = gauge(
        reg,
        "headroom_gpu_memory_used_bytes",
        "GPU memory in use, per device.",
        &labels,
    )?;
    let total = gauge(
        reg,
        "headroom_gpu_memory_total_bytes",
        "GPU memory on the device.",
        &labels,
    )?;
    let util = gauge(
        reg,
        "headroom_gpu_utilization_ratio",
        "The share of time the GPU was busy, 0-1.",
        &labels,
    )?;
    for g in &snap.gpus {
        let index = g.index.to_string();
        let l = [index.as_str(), g.name.as_str()];
        if let Some(v) = g.memory_used {
            used.with_label_values(&l).set(v as f64);
        }
        if let Some(v) = g.memory_total {
            total.with_label_values(&l).set(v as f64);
        }
        if let Some(v) = g.utilization {
            util.with_label_values(&l).set(v);
        }
    }
    Ok(())
}

/// Series per tmpfs file and per SysV segment: the largest this many.
pub const UNOWNED_SERIES: usize = 10;

/// Memory no process owns, where the sampler read it: the totals, and the
/// largest tmpfs files and SysV segments (at most [`UNOWNED_SERIES`] each)
/// with their owner. A file's `path` is shown only where any user could
/// list it (directly in `/dev/shm`) or `shows` its owner; files whose
/// labels then coincide add up in one series.
fn unowned(
    reg: &Registry,
    snap: &Snapshot,
    shows: &dyn Fn(Option<u32>) -> bool,
) -> prometheus::Result<()> {
    let u = &snap.unowned;
    if !u.known {
        return Ok(());
    }
    single(
        reg,
        "headroom_unowned_tmpfs_bytes",
        "Bytes in tmpfs files (/dev/shm, other tmpfs mounts) that no process maps or holds open: no process can free them by ending.",
        u.tmpfs_bytes as f64,
    )?;
    single(
        reg,
        "headroom_unowned_sysv_orphan_bytes",
        "Bytes in SysV shared memory segments no process is attached to (ipcrm -m ID frees one).",
        u.sysv_orphan_bytes as f64,
    )?;
    if let Some(bytes) = u.unexplained_shmem {
        single(
            reg,
            "headroom_unowned_unexplained_shmem_bytes",
            "Shared memory (Shmem) that neither a process's mapping nor the last scan of memory no process owns accounts for, this sample: the most that may be owned by no process beyond the scan's figures.",
            bytes as f64,
        )?;
    }
    single(
        reg,
        "headroom_unowned_scan_complete",
        "1 if the last scan of memory no process owns saw everything it looks at, 0 if it stopped short (entries, depth, descriptors, mounts); what it missed is shared memory, which headroom_unowned_unexplained_shmem_bytes counts.",
        if u.cut_short.is_some() { 0.0 } else { 1.0 },
    )?;
    let files = gauge(
        reg,
        "headroom_tmpfs_file_bytes",
        "Memory held by the largest tmpfs files and memfds, by path, owner and who holds it (mapped, open: held open without a mapping, nobody, hidden: not shown to this reader).",
        &["path", "user", "held"],
    )?;
    for f in u.tmpfs_files.iter().take(UNOWNED_SERIES) {
        let visible = shows(f.uid) && !f.redacted;
        let path = if visible || f.listed_for_anyone() {
            f.path.as_str()
        } else {
            HIDDEN_PATH
        };
        let held = if !visible {
            "hidden"
        } else if !f.mapped_by.is_empty() {
            "mapped"
        } else if !f.open_by.is_empty() {
            "open"
        } else {
            "nobody"
        };
        let uid = f.uid.map(|u| u.to_string()).unwrap_or_default();
        let user = f.user.as_deref().unwrap_or(&uid);
        files
            .with_label_values(&[path, user, held])
            .add(f.bytes as f64);
    }
    let segments = gauge(
        reg,
        "headroom_sysv_segment_bytes",
        "Memory held by the largest SysV shared memory segments, by id, owner and whether no process is attached (orphan).",
        &["id", "user", "orphan"],
    )?;
    for s in u.sysv_segments.iter().take(UNOWNED_SERIES) {
        let id = s.id.to_string();
        let uid = s.uid.map(|u| u.to_string()).unwrap_or_default();
        let user = s.user.as_deref().unwrap_or(&uid);
        let orphan = if s.orphan() { "true" } else { "false" };
        segments
            .with_label_values(&[id.as_str(), user, orphan])
            .set(s.bytes as f64);
    }
    Ok(())
}

/// The labels of `headroom_process_info`. Those after `job_role` say who
/// the process belongs to ([`Placement`]): one value per pid, so they add
/// no series, only the bytes of one longer line per process; the figures'
/// series do not carry them, so a name found a sample late (or a pod
/// renamed) starts no new footprint series, and a query joins them on
/// `pid` (kube-state-metrics' `kube_pod_info` is joined the same way).
const INFO_LABELS: [&str; 11] = [
    "pid",
    "basis",
    "job_root_pid",
    "job_role",
    "namespace",
    "pod",
    "pod_uid",
    "container",
    "container_id",
    "slurm_job",
    "unit",
];

/// Who a process belongs to, as `headroom_process_info` labels it: each
/// empty where unknown; a name read where other users may not look (a
/// Docker container's) empty for a reader who may not see the process's
/// command line.
struct Placement<'a> {
    namespace: &'a str,
    pod: &'a str,
    pod_uid: &'a str,
    container: &'a str,
    container_id: &'a str,
    slurm_job: &'a str,
    unit: &'a str,
}

impl<'a> Placement<'a> {
    fn of(p: &'a ProcessSample, reader_sees_names: bool) -> Self {
        let Some(l) = p.labels.as_deref() else {
            return Self {
                namespace: "",
                pod: "",
                pod_uid: "",
                container: "",
                container_id: "",
                slurm_job: "",
                unit: "",
            };
        };
        let name = |n: &'a Option<String>| match n {
            Some(n) if reader_sees_names || !l.private_names => n.as_str(),
            _ => "",
        };
        let id = |n: &'a Option<String>| n.as_deref().unwrap_or("");
        Self {
            namespace: name(&l.namespace),
            pod: name(&l.pod),
            pod_uid: id(&l.pod_uid),
            container: name(&l.container),
            container_id: id(&l.container_id),
            slurm_job: id(&l.slurm_job),
            unit: id(&l.unit),
        }
    }

    /// In [`INFO_LABELS`]' order, after `job_role`.
    fn values(&self) -> [&'a str; 7] {
        [
            self.namespace,
            self.pod,
            self.pod_uid,
            self.container,
            self.container_id,
            self.slurm_job,
            self.unit,
        ]
    }
}

/// The processes that get their own series: ML workloads, largest first, at
/// most `cap`.
pub fn exported_processes(snap: &Snapshot, cap: usize) -> Vec<&ProcessSample> {
    let mut ml: Vec<&ProcessSample> = snap
        .processes
        .iter()
        .filter(|p| p.workload.is_ml())
        .collect();
    ml.sort_by(|a, b| b.footprint.cmp(&a.footprint).then(a.id.pid.cmp(&b.id.pid)));
    ml.truncate(cap);
    ml
}

fn processes(
    reg: &Registry,
    state: &State,
    snap: &Snapshot,
    shows: &dyn Fn(Option<u32>) -> bool,
) -> prometheus::Result<()> {
    let cap = state.config.http.max_process_series;
    let ml_count = snap.processes.iter().filter(|p| p.workload.is_ml()).count();
    let shown = exported_processes(snap, cap);
    single(
        reg,
        "headroom_process_series_omitted",
        "ML processes left without their own series because of http.max_process_series.",
        ml_count.saturating_sub(shown.len()) as f64,
    )?;
    // `notebook`: the Jupyter notebook a kernel runs, empty for other processes
    // and for kernels whose notebook the reader may not see.
    let labels = ["pid", "name", "workload", "notebook"];
    let footprint = gauge(
        reg,
        "headroom_process_footprint_bytes",
        "Memory an ML process is responsible for (Linux RssAnon + RssShmem + VmSwap; macOS phys_footprint).",
        &labels,
    )?;
    let resident = gauge(
        reg,
        "headroom_process_resident_bytes",
        "Resident memory of an ML process.",
        &labels,
    )?;
    let swapped = gauge(
        reg,
        "headroom_process_swapped_bytes",
        "Memory of an ML process that is swapped out.",
        &labels,
    )?;
    let gpu = gauge(
        reg,
        "headroom_process_gpu_memory_bytes",
        "GPU memory held by an ML process.",
        &labels,
    )?;
    let growth = gauge(
        reg,
        "headroom_process_growth_bytes_per_second",
        "How fast an ML process's footprint grows (robust slope over the last 30 s; negative when shrinking).",
        &labels,
    )?;
    let eta = gauge(
        reg,
        "headroom_process_exhaustion_seconds",
        "When memory and swap run out if an ML process keeps growing at its current pace (its memory cgroup's limit where that is tighter than the machine); only for growing processes.",
        &labels,
    )?;
    let info = gauge(
        reg,
        "headroom_process_info",
        "Always 1 for an ML process with series: how its footprint counts memory it shares (basis: rss counts a shared page in every process that maps it, pss splits it among them, phys_footprint is macOS's count), the root of its job (job_root_pid, empty outside every job) and its role there (job_role: root, worker or empty), and who it belongs to as its cgroup says (namespace, pod, pod_uid and container of a Kubernetes pod; container and container_id of a Docker, containerd, CRI-O or Podman container; slurm_job; the systemd unit), empty where unknown. Join on pid to group the other per-process series by pod, container or job.",
        &INFO_LABELS,
    )?;
    for p in shown {
        let (headroom, _) = exhaustion_headroom_for(snap, p);
        let pid = p.id.pid.to_string();
        let notebook = match p.workload.notebook.as_deref() {
            Some(notebook) if shows(p.uid) => notebook,
            _ => "",
        };
        let l = [
            pid.as_str(),
            p.name.as_str(),
            p.workload.kind.as_str(),
            notebook,
        ];
        footprint.with_label_values(&l).set(p.footprint as f64);
        let root = snap.job_of(p).map(|j| j.pid());
        let (root_label, role) = match root {
            Some(r) if r == p.id.pid => (r.to_string(), "root"),
            Some(r) => (r.to_string(), "worker"),
            None => (String::new(), ""),
        };
        let placement = Placement::of(p, shows(p.uid));
        let mut values = vec![pid.as_str(), p.basis.as_str(), &root_label, role];
        values.extend(placement.values());
        info.with_label_values(&values).set(1.0);
        resident.with_label_values(&l).set(p.resident as f64);
        if let Some(v) = p.swapped {
            swapped.with_label_values(&l).set(v as f64);
        }
        if let Some(v) = p.gpu_memory {
            gpu.with_label_values(&l).set(v as f64);
        }
        let rate = state
            .history
            .process(&p.id)
            .and_then(|t| t.growth_bytes_per_second(GROWTH_WINDOW));
        if let Some(rate) = rate {
            growth.with_label_values(&l).set(rate);
            if let Some(t) = time_to_exhaustion(headroom, rate) {
                eta.with_label_values(&l).set(t.as_secs_f64());
            }
        }
    }
    Ok(())
}

/// The jobs that get their own series: those whose root was sampled,
/// largest first, at most `cap`.
pub fn exported_jobs(snap: &Snapshot, cap: usize) -> Vec<(&Job, &ProcessSample)> {
    let mut jobs: Vec<(&Job, &ProcessSample)> = snap
        .jobs
        .iter()
        .filter_map(|j| snap.process(j.pid()).map(|root| (j, root)))
        .collect();
    jobs.sort_by(|(a, _), (b, _)| b.footprint.cmp(&a.footprint).then(a.pid().cmp(&b.pid())));
    jobs.truncate(cap);
    jobs
}

/// Per-job series, by the root's pid, named and labelled after the root.
fn jobs(
    reg: &Registry,
    state: &State,
    snap: &Snapshot,
    shows: &dyn Fn(Option<u32>) -> bool,
) -> prometheus::Result<()> {
    let cap = state.config.http.max_process_series;
    let shown = exported_jobs(snap, cap);
    single(
        reg,
        "headroom_job_series_omitted",
        "Jobs left without their own series because of http.max_process_series.",
        snap.jobs.len().saturating_sub(shown.len()) as f64,
    )?;
    // The root's pid, command name and workload kind; `notebook` as for
    // processes: the kernel's notebook, empty where the reader may not see it.
    let labels = ["root_pid", "name", "workload", "notebook"];
    let footprint = gauge(
        reg,
        "headroom_job_footprint_bytes",
        "Memory a job (an ML process and its descendants: a kernel and its workers, a launcher and its ranks) holds, its members' footprints added up; a page shared among members is counted once where they are counted by pss (see headroom_job_info).",
        &labels,
    )?;
    let members = gauge(
        reg,
        "headroom_job_members",
        "Processes in a job, its root included.",
        &labels,
    )?;
    let gpu = gauge(
        reg,
        "headroom_job_gpu_memory_bytes",
        "GPU memory held by a job's members, added up, where known.",
        &labels,
    )?;
    let info = gauge(
        reg,
        "headroom_job_info",
        "Always 1 for a job with series: how its total counts shared memory (basis: pss when every member that shares memory is counted by its proportional share, else the weakest of its members').",
        &["root_pid", "basis"],
    )?;
    for (job, root) in shown {
        let pid = job.pid().to_string();
        let notebook = match root.workload.notebook.as_deref() {
            Some(notebook) if shows(root.uid) => notebook,
            _ => "",
        };
        let l = [
            pid.as_str(),
            root.name.as_str(),
            root.workload.kind.as_str(),
            notebook,
        ];
        footprint.with_label_values(&l).set(job.footprint as f64);
        members.with_label_values(&l).set(job.members.len() as f64);
        if let Some(v) = job.gpu_memory {
            gpu.with_label_values(&l).set(v as f64);
        }
        info.with_label_values(&[pid.as_str(), job.basis.as_str()])
            .set(1.0);
    }
    Ok(())
}

fn workloads(reg: &Registry, snap: &Snapshot) -> prometheus::Result<()> {
    let labels = ["workload"];
    let count = gauge(
        reg,
        "headroom_workload_processes",
        "Processes of each workload kind (jupyter, pytorch, ..., python, other).",
        &labels,
    )?;
    let footprint = gauge(
        reg,
        "headroom_workload_footprint_bytes",
        "Total footprint of the processes of each workload kind.",
        &labels,
    )?;
    let gpu = gauge(
        reg,
        "headroom_workload_gpu_memory_bytes",
        "Total GPU memory held by the processes of each workload kind, where known.",
        &labels,
    )?;
    let mut totals = [(0u64, 0u64, 0u64); WorkloadKind::ALL.len()];
    for p in &snap.processes {
        let i = WorkloadKind::ALL
            .iter()
            .position(|k| *k == p.workload.kind)
            .unwrap_or(WorkloadKind::ALL.len() - 1);
        let t = &mut totals[i];
        t.0 += 1;
        t.1 = t.1.saturating_add(p.footprint);
        t.2 = t.2.saturating_add(p.gpu_memory.unwrap_or(0));
    }
    for (kind, (n, bytes, gpu_bytes)) in WorkloadKind::ALL.iter().zip(totals) {
        let l = [kind.as_str()];
        count.with_label_values(&l).set(n as f64);
        footprint.with_label_values(&l).set(bytes as f64);
        gpu.with_label_values(&l).set(gpu_bytes as f64);
    }
    Ok(())
}

/// A histogram of durations whose buckets were counted by the daemon
/// ([`DurationHistogram`]), exposed as they are:
/// `headroom_sample_duration_seconds`, `headroom_wake_lateness_seconds`.
struct Durations {
    desc: Desc,
    name: &'static str,
    hist: DurationHistogram,
}

impl Durations {
    fn new(name: &'static str, help: &str, hist: DurationHistogram) -> prometheus::Result<Self> {
        let desc = Desc::new(name.into(), help.into(), vec![], Default::default())?;
        Ok(Self { desc, name, hist })
    }
}

impl Collector for Durations {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut cumulative = 0;
        let buckets = DurationHistogram::BOUNDS_MICROS
            .iter()
            .zip(self.hist.counts)
            .map(|(&bound, n)| {
                cumulative += n;
                let mut b = proto::Bucket::default();
                b.set_upper_bound(bound as f64 / 1e6);
                b.set_cumulative_count(cumulative);
                b
            })
            .collect();
        let mut h = proto::Histogram::default();
        h.set_bucket(buckets);
        h.set_sample_count(self.hist.count);
        h.set_sample_sum(self.hist.sum_micros as f64 / 1e6);
        let mut m = proto::Metric::default();
        m.set_histogram(h);
        let mut family = MetricFamily::default();
        family.set_name(self.name.into());
        family.set_help(self.desc.help.clone());
        family.set_field_type(MetricType::HISTOGRAM);
        family.set_metric(vec![m]);
        vec![family]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::build::{ProcessBuilder, SnapshotBuilder, process, snapshot};
    use crate::model::*;

    /// A process of uid 1000 with its footprint resident and no swap.
    fn sampled(pid: u32, footprint: u64, kind: WorkloadKind) -> ProcessBuilder {
        process(pid)
            .uid(1000)
            .footprint(footprint)
            .resident(footprint)
            .swapped(0)
            .kind(kind)
    }

    /// A 16 GiB machine under some pressure with every figure set, at `at_ms`.
    fn machine(at_ms: u64) -> SnapshotBuilder {
        snapshot(at_ms)
            .sample_micros(1500)
            .system(SystemMemory {
                total: 16 << 30,
                available: 8 << 30,
                used: 8 << 30,
                free: 1 << 30,
                app: Some(6 << 30),
                ..SystemMemory::default()
            })
            .swap_figures(Swap {
                total: 2 << 30,
                used: 0,
                swapped_in_bytes: Some(4096),
                swapped_out_bytes: Some(8192),
            })
            .pressure(Pressure {
                level: PressureLevel::Warn,
                psi: Some(Psi {
                    some: PsiLine {
                        total_micros: 2_500_000,
                        ..PsiLine::default()
                    },
                    full: None,
                }),
                free_percent: None,
            })
            .errors(CollectorErrors {
                permission_denied: 2,
                ..CollectorErrors::default()
            })
    }

    fn state_with(snaps: Vec<Snapshot>, cap: usize) -> State {
        let mut config = Config::default();
        config.http.max_process_series = cap;
        let mut working = crate::daemon::Working::new(config);
        let mut state = working.initial_state(None, Timestamp(0));
        for s in snaps {
            working.record(std::sync::Arc::new(s), &mut state);
        }
        state
    }

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    fn with_unowned(known: bool) -> Snapshot {
        let file = |path: &str, uid: u32, mapped_by: Vec<u32>| TmpfsFile {
            path: path.into(),
            bytes: 5 << 30,
            uid: Some(uid),
            user: Some(format!("u{uid}").into()),
            mapped_by,
            open_by: Vec::new(),
            redacted: false,
        };
        machine(0)
            .unowned(Unowned {
                known,
                tmpfs_bytes: 10 << 30,
                sysv_orphan_bytes: 1 << 20,
                tmpfs_files: vec![
                    file("/dev/shm/blob", 1001, Vec::new()),
                    file("/run/user/1001/secret", 1001, Vec::new()),
                    file("/dev/shm/torch_1", 1000, vec![42]),
                ],
                sysv_segments: vec![SysvSegment {
                    key: 0,
                    id: 7,
                    bytes: 1 << 20,
                    uid: Some(1001),
                    user: Some("u1001".into()),
                    attached: 0,
                    creator_pid: 5,
                    last_pid: 5,
                }],
                cut_short: None,
                unexplained_shmem: None,
            })
            .build()
    }

    #[test]
    fn memory_no_process_owns_names_its_owners() {
        let text = render(&state_with(vec![with_unowned(true)], 50)).unwrap();
        assert_eq!(
            line(&text, "headroom_unowned_tmpfs_bytes "),
            Some("headroom_unowned_tmpfs_bytes 10737418240")
        );
        assert!(text.contains("headroom_unowned_sysv_orphan_bytes 1048576"));
        assert!(text.contains("headroom_unowned_scan_complete 1"), "{text}");
        assert!(text.contains(
            r#"headroom_tmpfs_file_bytes{held="nobody",path="/dev/shm/blob",user="u1001"} 5368709120"#
        ));
        assert!(text.contains(
            r#"headroom_tmpfs_file_bytes{held="mapped",path="/dev/shm/torch_1",user="u1000"}"#
        ));
        assert!(
            text.contains(
                r#"headroom_sysv_segment_bytes{id="7",orphan="true",user="u1001"} 1048576"#
            )
        );
    }

    #[test]
    fn another_user_s_unlisted_tmpfs_paths_are_hidden_from_a_reader() {
        let state = state_with(vec![with_unowned(true)], 50);
        let text = render_for(&state, &|uid| uid == Some(1000)).unwrap();
        assert!(!text.contains("secret"), "{text}");
        assert!(text.contains(
            r#"headroom_tmpfs_file_bytes{held="hidden",path="/dev/shm/blob",user="u1001"}"#
        ));
        assert!(text.contains(&format!(
            r#"headroom_tmpfs_file_bytes{{held="hidden",path="{HIDDEN_PATH}",user="u1001"}}"#
        )));
        // The reader's own file, with who maps it.
        assert!(text.contains(r#"held="mapped",path="/dev/shm/torch_1""#));
    }

    #[test]
    fn unread_unowned_memory_exports_nothing() {
        let text = render(&state_with(vec![with_unowned(false)], 50)).unwrap();
        assert!(!text.contains("headroom_unowned_"));
        assert!(!text.contains("headroom_tmpfs_file_bytes"));
    }

    #[test]
    fn every_family_has_help_and_a_type() {
        let text = render(&state_with(vec![machine(0).build()], 50)).unwrap();
        let mut families = 0;
        for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = l.split(' ').nth(2).unwrap();
            assert!(name.starts_with("headroom_"), "{name}");
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no help"
            );
            families += 1;
        }
        assert!(families > 20, "{families} families");
    }

    #[test]
    fn before_the_first_sample_only_daemon_families_are_exported() {
        let text = render(&state_with(vec![], 50)).unwrap();
        assert!(text.contains("headroom_build_info{"));
        assert!(text.contains("headroom_samples_total 0"));
        assert!(text.contains("headroom_collector_up{collector=\"sampler\"} 0"));
        assert!(!text.contains("headroom_memory_total_bytes"));
    }

    #[test]
    fn every_collector_reports_up_applicable_and_errors() {
        let mut snap = machine(0).build();
        snap.collectors = vec![
            CollectorStatus {
                name: "nvml".into(),
                up: false,
                detail: "libnvidia-ml.so.1 not found (no NVIDIA driver)".into(),
                errors: 1,
                applicable: false,
            },
            CollectorStatus {
                name: "kernel-log".into(),
                up: true,
                detail: "memory kills read from the kernel log".into(),
                errors: 3,
                applicable: true,
            },
        ];
        let text = render(&state_with(vec![snap], 50)).unwrap();
        for expected in [
            "headroom_collector_up{collector=\"nvml\"} 0",
            "headroom_collector_applicable{collector=\"nvml\"} 0",
            "headroom_collector_errors_total{collector=\"nvml\",reason=\"failed\"} 1",
            "headroom_collector_up{collector=\"kernel-log\"} 1",
            "headroom_collector_applicable{collector=\"kernel-log\"} 1",
            "headroom_collector_errors_total{collector=\"kernel-log\",reason=\"failed\"} 3",
            "headroom_collector_up{collector=\"sampler\"} 1",
        ] {
            assert!(text.contains(expected), "{expected} missing:\n{text}");
        }
    }

    #[test]
    fn memory_and_pressure_are_in_base_units() {
        let text = render(&state_with(vec![machine(0).build()], 50)).unwrap();
        assert_eq!(
            line(&text, "headroom_memory_total_bytes "),
            Some("headroom_memory_total_bytes 17179869184")
        );
        assert_eq!(
            line(
                &text,
                "headroom_pressure_stall_seconds_total{kind=\"some\"}"
            ),
            Some("headroom_pressure_stall_seconds_total{kind=\"some\"} 2.5")
        );
        assert!(text.contains("headroom_memory_pressure{level=\"warn\"} 1"));
        assert!(text.contains("headroom_memory_pressure{level=\"normal\"} 0"));
        // Linux has no wired figure: no series rather than a made-up zero.
        assert!(!text.contains("headroom_memory_wired_bytes"));
    }

    #[test]
    fn collector_errors_add_up_over_samples() {
        let state = state_with(vec![machine(0).build(), machine(1000).build()], 50);
        let text = render(&state).unwrap();
        assert!(text.contains(
            "headroom_collector_errors_total{collector=\"processes\",reason=\"permission_denied\"} 4"
        ));
        assert!(text.contains("headroom_samples_total 2"));
        assert!(text.contains("headroom_sample_duration_seconds_bucket{le=\"0.0025\"} 2"));
        assert!(text.contains("headroom_sample_duration_seconds_count 2"));
    }

    #[test]
    fn wake_lateness_is_a_histogram_in_seconds() {
        let mut state = state_with(vec![machine(0).build()], 50);
        for micros in [300, 700, 40_000, 2_000_000] {
            state.counters.wake_lateness.observe(micros);
        }
        let text = render(&state).unwrap();
        assert!(text.contains("# TYPE headroom_wake_lateness_seconds histogram"));
        assert!(text.contains("headroom_wake_lateness_seconds_bucket{le=\"0.0005\"} 1"));
        assert!(text.contains("headroom_wake_lateness_seconds_bucket{le=\"0.05\"} 3"));
        assert!(text.contains("headroom_wake_lateness_seconds_bucket{le=\"+Inf\"} 4"));
        assert!(text.contains("headroom_wake_lateness_seconds_sum 2.041"));
    }

    #[test]
    fn only_ml_processes_get_series_and_the_biggest_win_the_cap() {
        let procs = vec![
            sampled(10, 100, WorkloadKind::Jupyter),
            sampled(11, 300, WorkloadKind::Pytorch),
            sampled(12, 200, WorkloadKind::Jax),
            sampled(13, 900, WorkloadKind::Other),
        ];
        let text = render(&state_with(vec![machine(0).processes(procs).build()], 2)).unwrap();
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("headroom_process_footprint_bytes{"))
            .collect();
        assert_eq!(
            series,
            [
                "headroom_process_footprint_bytes{name=\"p11\",notebook=\"\",pid=\"11\",workload=\"pytorch\"} 300",
                "headroom_process_footprint_bytes{name=\"p12\",notebook=\"\",pid=\"12\",workload=\"jax\"} 200",
            ]
        );
        assert!(text.contains("headroom_process_series_omitted 1"));
        assert!(text.contains("headroom_workload_footprint_bytes{workload=\"other\"} 900"));
        assert!(text.contains("headroom_workload_processes{workload=\"mlx\"} 0"));
    }

    #[test]
    fn a_kernel_series_carries_its_notebook() {
        let kernel = sampled(10, 100, WorkloadKind::Jupyter)
            .kernel_id("3f2a")
            .notebook("work/train.ipynb");
        let text = render(&state_with(vec![machine(0).process(kernel).build()], 5)).unwrap();
        assert!(
            text.contains(
                "headroom_process_footprint_bytes{name=\"p10\",notebook=\"work/train.ipynb\",pid=\"10\",workload=\"jupyter\"} 100"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_kernel_of_another_user_has_no_notebook_label() {
        let kernel = sampled(10, 100, WorkloadKind::Jupyter)
            .uid(1000)
            .notebook("work/train.ipynb");
        let state = state_with(vec![machine(1000).process(kernel).build()], 50);
        let text = render_for(&state, &|uid| uid == Some(1001)).unwrap();
        assert!(
            text.contains(
                "headroom_process_footprint_bytes{name=\"p10\",notebook=\"\",pid=\"10\",workload=\"jupyter\"} 100"
            ),
            "{text}"
        );
        assert!(!text.contains("train.ipynb"));
        let own = render_for(&state, &|uid| uid == Some(1000)).unwrap();
        assert!(own.contains("notebook=\"work/train.ipynb\""));
    }

    /// A kernel of uid 1000 (pid 10, 2 GiB, `work/train.ipynb`) with two
    /// 1 GiB workers counted by PSS, and a 5 GiB server (pid 30) with one
    /// runner holding GPU memory.
    fn two_jobs() -> Snapshot {
        machine(0)
            .process(
                sampled(10, 2 << 30, WorkloadKind::Jupyter)
                    .notebook("work/train.ipynb")
                    .basis(Basis::Pss)
                    .job(10),
            )
            .processes((11..=12).map(|pid| {
                sampled(pid, 1 << 30, WorkloadKind::Pytorch)
                    .ppid(10)
                    .basis(Basis::Pss)
                    .job(10)
            }))
            .process(sampled(30, 1 << 30, WorkloadKind::LlmServer).job(30))
            .process(
                sampled(31, 4 << 30, WorkloadKind::LlmServer)
                    .ppid(30)
                    .gpu_memory(3 << 30)
                    .job(30),
            )
            .job_of(10, Basis::Pss)
            .job_of(30, Basis::Rss)
            .build()
    }

    #[test]
    fn a_job_has_its_total_members_gpu_memory_and_basis() {
        let text = render(&state_with(vec![two_jobs()], 50)).unwrap();
        for expected in [
            "headroom_job_footprint_bytes{name=\"p10\",notebook=\"work/train.ipynb\",root_pid=\"10\",workload=\"jupyter\"} 4294967296",
            "headroom_job_members{name=\"p10\",notebook=\"work/train.ipynb\",root_pid=\"10\",workload=\"jupyter\"} 3",
            "headroom_job_footprint_bytes{name=\"p30\",notebook=\"\",root_pid=\"30\",workload=\"llm-server\"} 5368709120",
            "headroom_job_gpu_memory_bytes{name=\"p30\",notebook=\"\",root_pid=\"30\",workload=\"llm-server\"} 3221225472",
            "headroom_job_info{basis=\"pss\",root_pid=\"10\"} 1",
            "headroom_job_info{basis=\"rss\",root_pid=\"30\"} 1",
            "headroom_job_series_omitted 0",
            "headroom_process_info{basis=\"pss\",container=\"\",container_id=\"\",job_role=\"root\",job_root_pid=\"10\",namespace=\"\",pid=\"10\",pod=\"\",pod_uid=\"\",slurm_job=\"\",unit=\"\"} 1",
            "headroom_process_info{basis=\"pss\",container=\"\",container_id=\"\",job_role=\"worker\",job_root_pid=\"10\",namespace=\"\",pid=\"11\",pod=\"\",pod_uid=\"\",slurm_job=\"\",unit=\"\"} 1",
        ] {
            assert!(text.contains(expected), "{expected} missing:\n{text}");
        }
        assert!(
            !text.contains("headroom_job_gpu_memory_bytes{name=\"p10\""),
            "no GPU figure, no series"
        );
    }

    #[test]
    fn a_process_outside_every_job_has_empty_job_labels() {
        let snap = machine(0).process(sampled(7, 1, WorkloadKind::Jax)).build();
        let text = render(&state_with(vec![snap], 50)).unwrap();
        assert!(
            text.contains(
                "headroom_process_info{basis=\"rss\",container=\"\",container_id=\"\",job_role=\"\",job_root_pid=\"\",namespace=\"\",pid=\"7\",pod=\"\",pod_uid=\"\",slurm_job=\"\",unit=\"\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("headroom_job_series_omitted 0"));
        assert!(!text.contains("headroom_job_footprint_bytes{"));
    }

    #[test]
    fn a_process_s_pod_container_job_and_unit_are_info_labels_joined_by_pid() {
        use crate::model::{LabelSet, Runtime};
        let id = "3f2a9c1b7d0e5f64a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718";
        let pod = LabelSet {
            namespace: Some("ml".into()),
            pod: Some("train-0".into()),
            pod_uid: Some("18d34ce4-50c7-452c-9df8-53c4a3fdf363".into()),
            container: Some("trainer".into()),
            container_id: Some(id.into()),
            runtime: Some(Runtime::Containerd),
            ..LabelSet::default()
        };
        let docker = LabelSet {
            container: Some("jupyter-ana".into()),
            container_id: Some(id.into()),
            runtime: Some(Runtime::Docker),
            private_names: true,
            ..LabelSet::default()
        };
        let job = LabelSet {
            slurm_job: Some("4749".into()),
            slurm_step: Some("0".into()),
            unit: Some("slurmstepd.scope".into()),
            ..LabelSet::default()
        };
        let snap = machine(0)
            .process(sampled(7, 3, WorkloadKind::Pytorch).uid(1000).labels(pod))
            .process(
                sampled(8, 2, WorkloadKind::Jupyter)
                    .uid(1000)
                    .labels(docker),
            )
            .process(sampled(9, 1, WorkloadKind::Jax).uid(1000).labels(job))
            .build();
        let state = state_with(vec![snap], 50);
        let text = render(&state).unwrap();
        for expected in [
            format!(
                "headroom_process_info{{basis=\"rss\",container=\"trainer\",container_id=\"{id}\",job_role=\"\",job_root_pid=\"\",namespace=\"ml\",pid=\"7\",pod=\"train-0\",pod_uid=\"18d34ce4-50c7-452c-9df8-53c4a3fdf363\",slurm_job=\"\",unit=\"\"}} 1"
            ),
            format!(
                "headroom_process_info{{basis=\"rss\",container=\"jupyter-ana\",container_id=\"{id}\",job_role=\"\",job_root_pid=\"\",namespace=\"\",pid=\"8\",pod=\"\",pod_uid=\"\",slurm_job=\"\",unit=\"\"}} 1"
            ),
            "headroom_process_info{basis=\"rss\",container=\"\",container_id=\"\",job_role=\"\",job_root_pid=\"\",namespace=\"\",pid=\"9\",pod=\"\",pod_uid=\"\",slurm_job=\"4749\",unit=\"slurmstepd.scope\"} 1".to_string(),
        ] {
            assert!(text.contains(&expected), "{expected} missing:\n{text}");
        }
        // The footprint's series carry no placement: a name found later
        // starts no new series.
        assert!(text.contains("headroom_process_footprint_bytes{name=\"p7\",notebook=\"\",pid=\"7\",workload=\"pytorch\"}"));
        // Docker's name is read in root's directory: another user's reader
        // does not get it; the pod's names and the ids stay.
        let stranger = render_for(&state, &|uid| uid == Some(1001)).unwrap();
        assert!(stranger.contains(&format!("container=\"\",container_id=\"{id}\",job_role=\"\",job_root_pid=\"\",namespace=\"\",pid=\"8\"")), "{stranger}");
        assert!(stranger.contains("container=\"trainer\""));
    }

    #[test]
    fn job_series_are_capped_the_largest_first() {
        let text = render(&state_with(vec![two_jobs()], 1)).unwrap();
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("headroom_job_footprint_bytes{"))
            .collect();
        assert_eq!(series.len(), 1, "{series:?}");
        assert!(series[0].contains("root_pid=\"30\""), "5 GiB beats 4 GiB");
        assert!(text.contains("headroom_job_series_omitted 1"));
        assert!(!text.contains("headroom_job_info{basis=\"pss\""));
    }

    #[test]
    fn a_job_of_another_users_kernel_has_no_notebook_label() {
        let state = state_with(vec![two_jobs()], 50);
        let text = render_for(&state, &|uid| uid == Some(1001)).unwrap();
        assert!(!text.contains("train.ipynb"), "{text}");
        assert!(text.contains(
            "headroom_job_footprint_bytes{name=\"p10\",notebook=\"\",root_pid=\"10\",workload=\"jupyter\"} 4294967296"
        ));
    }

    #[test]
    fn a_growing_process_has_a_rate_and_an_exhaustion_time() {
        let snaps = (0..10)
            .map(|s| {
                machine(s * 1000)
                    .process(sampled(7, (1 << 30) + s * (1 << 20), WorkloadKind::Jupyter))
                    .build()
            })
            .collect();
        let text = render(&state_with(snaps, 50)).unwrap();
        let rate = line(&text, "headroom_process_growth_bytes_per_second{").unwrap();
        assert!(rate.ends_with(" 1048576"), "{rate}");
        // 8 GiB available + 2 GiB free swap at 1 MiB/s.
        let eta = line(&text, "headroom_process_exhaustion_seconds{").unwrap();
        assert!(eta.ends_with(" 10240"), "{eta}");
    }

    #[test]
    fn crossings_and_actions_are_counted_by_rule_action_and_outcome() {
        use crate::event::{Event, EventKind, Outcome, ProcessRef};
        let mut state = state_with(vec![machine(0).build()], 50);
        let process = ProcessRef {
            pid: 7,
            start: 1,
            name: "python3".into(),
            user: None,
            uid: Some(1000),
            workload: WorkloadKind::Jupyter,
            footprint: 1,
            kernel_id: None,
            notebook: None,
            labels: None,
        };
        let crossed = EventKind::LimitCrossed {
            rule: "notebook-runaway".into(),
            process: process.clone(),
            detail: String::new(),
        };
        let action = |outcome: Outcome| EventKind::Action {
            rule: "notebook-runaway".into(),
            process: process.clone(),
            step: 0,
            action: "SIGINT".into(),
            outcome,
            dry_run: false,
            detail: String::new(),
        };
        for kind in [
            crossed.clone(),
            crossed,
            action(Outcome::Done),
            action(Outcome::Done),
            action(Outcome::Gone),
            EventKind::Skipped {
                rule: "notebook-runaway".into(),
                process: process.clone(),
                step: 1,
                action: "hook /usr/local/bin/save".into(),
                reason: "x".into(),
            },
            EventKind::LimitHeldNotActing {
                rule: "notebook-runaway".into(),
                process: process.clone(),
                detail: String::new(),
                reason: "owned by root and the rule has root = false".into(),
            },
        ] {
            state.add_event(Event {
                at: Timestamp(1),
                kind,
            });
        }
        let text = render(&state).unwrap();
        assert!(
            text.contains("headroom_limit_breaches_total{rule=\"notebook-runaway\"} 2"),
            "{text}"
        );
        assert!(text.contains("headroom_limit_breaches_total{rule=\"pressure-warning\"} 0"));
        assert!(text.contains("headroom_limit_held_not_acting_total{rule=\"notebook-runaway\"} 1"));
        assert!(text.contains("headroom_limit_held_not_acting_total{rule=\"pressure-warning\"} 0"));
        assert!(text.contains(
            "headroom_actions_total{action=\"SIGINT\",outcome=\"done\",rule=\"notebook-runaway\"} 2"
        ));
        assert!(text.contains(
            "headroom_actions_total{action=\"SIGINT\",outcome=\"gone\",rule=\"notebook-runaway\"} 1"
        ));
        assert!(text.contains(
            "headroom_actions_total{action=\"hook\",outcome=\"skipped\",rule=\"notebook-runaway\"} 1"
        ));
    }

    /// The `headroom_actions_total` series of `text`, as `rule action outcome value`.
    fn action_series(text: &str) -> Vec<String> {
        static SERIES: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
            regex::Regex::new(
                r#"^headroom_actions_total\{action="([^"]*)",outcome="([^"]*)",rule="([^"]*)"\} (\S+)$"#,
            )
            .unwrap()
        });
        text.lines()
            .filter_map(|l| SERIES.captures(l))
            .map(|c| format!("{} {} {} {}", &c[3], &c[1], &c[2], &c[4]))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    #[test]
    fn every_step_of_every_rule_has_its_action_series_at_0_before_it_acts() {
        let working = crate::daemon::Working::new(Config::embedded_default());
        let state = working.initial_state(None, Timestamp(0));
        let series = action_series(&render(&state).unwrap());
        assert_eq!(
            series,
            [
                "ml-process-over-half-ram notify done 0",
                "ml-process-over-half-ram notify failed 0",
                "notebook-runaway SIGINT done 0",
                "notebook-runaway SIGINT failed 0",
                "notebook-runaway SIGINT gone 0",
                "notebook-runaway SIGINT identity-changed 0",
                "notebook-runaway SIGINT refused 0",
                "notebook-runaway SIGINT skipped 0",
                "notebook-runaway SIGTERM done 0",
                "notebook-runaway SIGTERM failed 0",
                "notebook-runaway SIGTERM gone 0",
                "notebook-runaway SIGTERM identity-changed 0",
                "notebook-runaway SIGTERM refused 0",
                "notebook-runaway notify done 0",
                "notebook-runaway notify failed 0",
                "pressure-warning notify done 0",
                "pressure-warning notify failed 0",
            ]
        );
    }

    #[test]
    fn a_reload_s_new_rules_start_at_0_and_a_dry_run_at_dry_run() {
        let config = |text: &str| Config::from_toml_str(text, "t.toml").unwrap();
        let mut state = state_with(vec![machine(0).build()], 50);
        state.replace_config(
            std::sync::Arc::new(config(
                "[[rule]]\nname = \"cap\"\nfootprint = \"8GiB\"\ndry_run = true\nactions = \
                 [{ signal = \"SIGTERM\" }, { hook = [\"/usr/local/bin/save\"], after = \"5s\" }]\n",
            )),
            std::sync::Arc::default(),
        );
        let series = action_series(&render(&state).unwrap());
        assert_eq!(
            series,
            [
                "cap SIGTERM dry-run 0",
                "cap SIGTERM failed 0",
                "cap SIGTERM gone 0",
                "cap SIGTERM identity-changed 0",
                "cap SIGTERM refused 0",
                "cap hook dry-run 0",
                "cap hook failed 0",
                "cap hook refused 0",
            ]
        );
    }

    #[test]
    fn post_mortems_are_counted_by_cause() {
        use crate::event::{Event, EventKind, ExitCause, ExitCauseKind, ProcessRef};
        let mut state = state_with(vec![machine(0).build()], 50);
        let ended = |kind| EventKind::Exited {
            process: ProcessRef::of(&sampled(7, 1, WorkloadKind::Jupyter).build()),
            last_action: None,
            peak_footprint: 1,
            last_growth_bytes_per_second: None,
            headroom_action: None,
            cause: Some(ExitCause {
                kind,
                ..ExitCause::default()
            }),
            job: None,
            worker_of: None,
        };
        for kind in [
            ExitCauseKind::OomKiller,
            ExitCauseKind::OomKiller,
            ExitCauseKind::Crashed,
            ExitCauseKind::Unknown,
        ] {
            state.add_event(Event {
                at: Timestamp(1),
                kind: ended(kind),
            });
        }
        let text = render(&state).unwrap();
        assert!(
            text.contains("headroom_process_exits_total{cause=\"oom-killer\"} 2"),
            "{text}"
        );
        assert!(text.contains("headroom_process_exits_total{cause=\"unknown\"} 1"));
        assert!(text.contains("headroom_process_exits_total{cause=\"signal-by-headroom\"} 0"));
        assert!(text.contains("headroom_process_exits_total{cause=\"crashed\"} 1"));
        assert!(text.contains("headroom_process_exits_total{cause=\"gpu-error\"} 0"));
    }
}
