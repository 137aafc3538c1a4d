//! The daemon loop behind `headroom run`.
//!
//! Every tick it takes a sample on a blocking thread (never on the async
//! workers), reads there too what the OS recorded about processes that
//! ended ([`ExitCauses`]), names Jupyter kernels by their notebook from the
//! latest lookup ([`Notebooks`], no I/O on this path), records the sample in
//! the history and publishes the new [`State`] through a `watch` channel;
//! then runs the policy and writes the post-mortems of watched processes
//! that ended ([`PostMortems`]). It samples at the normal interval while memory
//! is calm and at the fast interval while pressure is elevated, and wakes at
//! once when the OS reports pressure (a PSI trigger on Linux). SIGHUP reloads
//! the config file (a bad new file is rejected and the old config kept);
//! SIGTERM and SIGINT stop it cleanly.
//!
//! Between ticks, while a rule's system condition (`[rule.when]`) comes
//! near, the system probe ([`crate::sample::probe`]) reads the machine-wide
//! figures alone, faster the nearer the condition and just past its
//! predicted crossing; a condition that newly holds is sampled at once, so
//! the policy picks its victim on it. Most ticks are light (new, ML,
//! rule-matched and the largest processes read, the rest carried); the
//! whole process table is read every few intervals and whenever memory
//! moves.
//! [`cadence`] holds those decisions as pure functions; this file does the
//! I/O and the wiring. How late each timer wake comes against its schedule
//! is counted and published with the next sample
//! (`headroom_wake_lateness_seconds`): a daemon starved of CPU shows there.
//!
//! A kernel pressure event counts as at least the level it stands for on
//! the sample it wakes (Linux: `warn`, since the PSI trigger fires on 15 %
//! of a second stalled, a rate above the warn threshold that the 10-second
//! average would reach only seconds later), so a `pressure` condition is
//! evaluated on that very sample; the snapshot's notes say so.

pub mod cadence;
pub mod watched;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tracing::{debug, error, info, trace, warn};

use crate::config::{Config, format_duration};
use crate::event::EventKind;
use crate::jupyter::Notebooks;
use crate::model::Action;
use crate::model::{PressureLevel, ProcessId, Snapshot, Timestamp};
use crate::pipeline::Pipeline;
use crate::policy::{Context, Decision, Evaluation, PolicyState, Reach, evaluate};
use crate::postmortem::PostMortems;
use crate::report::rate_limit::RateLimit;
use crate::report::{format_bytes, printable};
use crate::sample::probe::{Probe, Reading};
use crate::sample::{ExitCauses, Observed, PressureEvents, SampleError, Sampler};
use crate::state::{DurationHistogram, State};
use cadence::{AfterProbe, Cadence, Cause, Depth};

/// How long the loop stays at the fast interval after an OS pressure event.
pub const FAST_AFTER_EVENT: Duration = Duration::from_secs(10);

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot install the {0} signal handler: {1}")]
    Signal(&'static str, #[source] std::io::Error),
    #[error("the sampler thread crashed: {0}")]
    SamplerCrashed(String),
}

/// What `headroom run` was asked to do.
pub struct RunOptions {
    pub config: Config,
    /// The file to re-read on SIGHUP; `None` runs on the embedded default.
    pub config_path: Option<PathBuf>,
    /// `--dry-run` on the command line: wins over the config, also after reloads.
    pub force_dry_run: bool,
}

/// A daemon ready to run: the loop's inputs and the state it publishes.
pub struct Daemon {
    opts: RunOptions,
    sampler: Option<Box<dyn Sampler>>,
    events: PressureEvents,
    tx: watch::Sender<State>,
    /// The OS's record of how processes end, read after each sample.
    exit_causes: Option<ExitCauses>,
    /// What the absence of such a record means, for post-mortems.
    silence: String,
    /// The cheap machine-wide probe between ticks, where the OS has one.
    probe: Option<Box<dyn Probe>>,
}

impl Daemon {
    pub fn new(mut opts: RunOptions, sampler: Box<dyn Sampler>, events: PressureEvents) -> Self {
        if opts.force_dry_run {
            opts.config.daemon.dry_run = true;
        }
        let state = State::new(
            opts.config.clone(),
            opts.config_path.clone(),
            Timestamp::now(),
        );
        let (tx, _rx) = watch::channel(state);
        let silence = "this daemon reads no record of how processes end";
        Self {
            opts,
            sampler: Some(sampler),
            events,
            tx,
            exit_causes: Some(ExitCauses::none(silence)),
            silence: silence.to_string(),
            probe: None,
        }
    }

    /// Probe the machine-wide figures between ticks with `probe` while a
    /// rule's system condition comes near (the default has none: only
    /// ticks).
    pub fn with_probe(mut self, probe: Option<Box<dyn Probe>>) -> Self {
        self.probe = probe;
        self
    }

    /// Read `causes` after each sample for post-mortems (the default reads
    /// nothing: tests and replayed traces).
    pub fn with_exit_causes(mut self, causes: ExitCauses) -> Self {
        self.silence = causes.silence().to_string();
        self.exit_causes = Some(causes);
        self
    }

    /// A receiver of the published state (for the HTTP server and tests).
    pub fn subscribe(&self) -> watch::Receiver<State> {
        self.tx.subscribe()
    }

    /// Run until SIGTERM or SIGINT.
    pub async fn run(mut self) -> Result<(), DaemonError> {
        let mut sigterm =
            signal(SignalKind::terminate()).map_err(|e| DaemonError::Signal("SIGTERM", e))?;
        let mut sigint =
            signal(SignalKind::interrupt()).map_err(|e| DaemonError::Signal("SIGINT", e))?;
        let mut sighup =
            signal(SignalKind::hangup()).map_err(|e| DaemonError::Signal("SIGHUP", e))?;

        self.log_start();
        let mut pipeline = self.start_pipeline();
        let journal = pipeline.journal_health();
        self.tx.send_modify(|s| s.journal = journal);
        let notebooks = Notebooks::start(
            &self.tx.borrow().config.jupyter,
            crate::sys::this_process::running_as_root(),
        );
        let ctx = Context {
            self_pid: std::process::id(),
            self_uid: crate::sys::this_process::effective_uid(),
        };
        let mut policy = PolicyState::default();
        let mut tracker = Tracker::default();
        let mut postmortems = PostMortems::default();
        let mut cadence = Cadence::new(
            gates(&self.tx.borrow().config),
            crate::sample::probe::available_floor,
        );
        let mut watched: Arc<[u32]> = Arc::from([]);
        // The snapshot the last one replaced, let go of on the sampler's
        // thread (see `sample_once`).
        let mut retired: Option<Arc<Snapshot>> = None;
        let mut next_tick = Instant::now();
        let mut next_probe: Option<Instant> = None;
        let mut fast_until: Option<Instant> = None;
        let mut probe_failures: u64 = 0;
        let mut probe_failure_log = RateLimit::default();
        // How late each timer wake came, published with the next sample.
        let mut lateness = DurationHistogram::default();

        loop {
            let wake = next_probe.map_or(next_tick, |p| p.min(next_tick));
            let mut cause = Cause::Tick;
            let mut event_level = None;
            tokio::select! {
                _ = sleep_until(wake) => {
                    let late = Instant::now().saturating_duration_since(wake);
                    lateness.observe(u64::try_from(late.as_micros()).unwrap_or(u64::MAX));
                }
                event = self.events.next() => {
                    match event {
                        Ok(level) => {
                            info!("memory pressure event from the kernel: sampling now");
                            self.tx.send_modify(|s| s.counters.pressure_events += 1);
                            fast_until = Some(Instant::now() + FAST_AFTER_EVENT);
                            cause = Cause::Crossing;
                            event_level = level;
                        }
                        Err(why) => warn!("{why}"),
                    }
                }
                Some(event) = pipeline.journaled.recv() => {
                    postmortems.note_event(&event);
                    self.tx.send_modify(|s| s.add_event(event));
                    continue;
                }
                _ = sigterm.recv() => { info!("SIGTERM received: shutting down"); break; }
                _ = sigint.recv() => { info!("SIGINT received: shutting down"); break; }
                _ = sighup.recv() => {
                    self.reload(&pipeline);
                    notebooks.configure(&self.tx.borrow().config.jupyter);
                    cadence.set_gates(gates(&self.tx.borrow().config));
                    continue;
                }
            }

            let normal = self.tx.borrow().config.daemon.interval;
            let mut depth = None;
            if cause == Cause::Tick && Instant::now() < next_tick {
                // Woken to probe, not to tick.
                match self.probe_once(cadence.wants_pressure()).await? {
                    Some(Ok(reading)) => {
                        probe_failures = 0;
                        probe_failure_log.reset();
                        match cadence.probed(reading, normal) {
                            AfterProbe::Wait => {
                                next_probe = cadence.next_probe().map(Instant::from_std);
                                trace!(
                                    "probe: {} available, {} swap used; next in {:?}",
                                    format_bytes(reading.available),
                                    format_bytes(reading.swap_used),
                                    next_probe.map(|p| p.saturating_duration_since(Instant::now()))
                                );
                                continue;
                            }
                            AfterProbe::Sample(d, c) => {
                                debug!(
                                    "probe: {} available, {} swap used: sampling now",
                                    format_bytes(reading.available),
                                    format_bytes(reading.swap_used)
                                );
                                depth = Some(d);
                                cause = c;
                            }
                        }
                    }
                    Some(Err(e)) => {
                        probe_failures += 1;
                        if probe_failure_log.due(Instant::now().into_std()).is_some() {
                            warn!("system probe failed ({probe_failures} in a row): {e}");
                        }
                        next_probe = None;
                        continue;
                    }
                    None => {
                        next_probe = None;
                        continue;
                    }
                }
            }

            let started = Instant::now();
            let depth = depth.unwrap_or_else(|| cadence.depth(cause, started.into_std(), normal));
            let outcome = self
                .sample_once(
                    depth,
                    Arc::clone(&watched),
                    postmortems.tracked(),
                    retired.take(),
                )
                .await?;
            let (level, evaluation) = match outcome {
                Ok((mut snap, observed)) => {
                    if let Some(level) = event_level {
                        raise_to_event_level(&mut snap, level);
                    }
                    notebooks.annotate(&mut snap);
                    // The daemon's own collectors, next to the sampler's.
                    // (The exit-cause sources add theirs while sampling.)
                    snap.collectors.push(self.events.status());
                    snap.collectors.push(notebooks.status());
                    cadence.sampled(Reading::of(&snap, started.into_std()), depth);
                    // After every sample: a process a light tick saw for
                    // the first time is watched from the next one on.
                    watched = watched::watched(&self.tx.borrow().config.rules, &snap);
                    tracker.observe(&snap, depth);
                    let level = snap.pressure.level;
                    self.tx.send_modify(|s| {
                        s.counters.wake_lateness = lateness;
                        retired = s.publish(snap);
                    });
                    let evaluation = self.decide(&mut policy, ctx, &pipeline, &mut postmortems);
                    self.report_ends(&mut postmortems, observed, &pipeline);
                    (Some(level), evaluation)
                }
                Err(e) => {
                    cadence.failed();
                    // Published before it is logged: a reader who saw the
                    // log line finds the failure counted.
                    let msg = e.to_string();
                    self.tx.send_modify(|s| {
                        s.counters.wake_lateness = lateness;
                        s.counters.sample_failures += 1;
                        s.last_error = Some(msg);
                    });
                    tracker.failed(&e);
                    (None, Evaluation::default())
                }
            };

            let now = Instant::now();
            let fast = cadence::is_fast(
                level,
                fast_until.map(Instant::into_std),
                evaluation.within_reach,
                now.into_std(),
            );
            let (was_fast, quick) = {
                let s = self.tx.borrow();
                (s.fast_mode, s.config.daemon.fast_interval)
            };
            if fast != was_fast {
                if fast {
                    info!(
                        "pressure elevated or a limit within reach: sampling every {}",
                        format_duration(quick)
                    );
                } else {
                    info!(
                        "pressure back to normal: sampling every {}",
                        format_duration(normal)
                    );
                }
                self.tx.send_modify(|s| s.fast_mode = fast);
            }
            next_tick = Instant::from_std(cadence::next_tick(
                started.into_std(),
                now.into_std(),
                if fast { quick } else { normal },
                evaluation.next_check,
            ));
            if depth == Depth::Light && cadence.full_due() {
                // Memory moved since the last full read: read it all now.
                next_tick = now;
            }
            next_probe = if self.probe.is_some() {
                cadence.next_probe().map(Instant::from_std)
            } else {
                None
            };
        }
        pipeline.record(EventKind::Stopped);
        // Fold in what the journal already handed back; the rest is on disk.
        while let Ok(event) = pipeline.journaled.try_recv() {
            self.tx.send_modify(|s| s.add_event(event));
        }
        tokio::task::spawn_blocking(move || pipeline.shut_down())
            .await
            .map_err(|e| DaemonError::SamplerCrashed(format!("shutting down: {e}")))?;
        info!("headroom stopped");
        Ok(())
    }

    /// Start the actuator and journal threads and journal the start.
    fn start_pipeline(&self) -> Pipeline {
        let state = self.tx.borrow();
        let d = &state.config.daemon;
        let path = crate::journal::path_for(d, crate::sys::this_process::running_as_root());
        let opts = crate::journal::JournalOptions::from_config(d);
        let pipeline = Pipeline::start(path, opts);
        pipeline.record(EventKind::Started {
            version: env!("CARGO_PKG_VERSION").to_string(),
            config: self
                .opts
                .config_path
                .as_ref()
                .map(|p| p.display().to_string()),
            dry_run: d.dry_run,
        });
        if state.config.rules.is_empty() {
            warn!("the config has no rules: headroom watches and reports, and acts on nothing");
        }
        pipeline
    }

    /// Run the policy on the latest snapshot; journal its events and hand
    /// its decisions to the actuator.
    fn decide(
        &self,
        policy: &mut PolicyState,
        ctx: Context,
        pipeline: &Pipeline,
        postmortems: &mut PostMortems,
    ) -> Evaluation {
        let evaluation = {
            let state = self.tx.borrow();
            let Some(snap) = state.snapshot.clone() else {
                return Evaluation::default();
            };
            evaluate(
                &state.config,
                policy,
                &state.history,
                &snap,
                ctx,
                snap.taken_at,
            )
        };
        let at = self
            .tx
            .borrow()
            .snapshot
            .as_ref()
            .map_or_else(Timestamp::now, |s| s.taken_at);
        for kind in &evaluation.events {
            log_policy_event(kind);
            pipeline.record_at(at, kind.clone());
        }
        for d in &evaluation.decisions {
            postmortems.note_decision(d, at);
            pipeline.act(d.clone());
        }
        let statuses = std::sync::Arc::new(evaluation.statuses.clone());
        self.tx.send_modify(|s| s.rule_statuses = statuses);
        evaluation
    }

    /// Journal the post-mortems of the watched processes that ended (and
    /// notify, where `[postmortem] notify` asks for it).
    fn report_ends(&self, postmortems: &mut PostMortems, observed: Observed, pipeline: &Pipeline) {
        let (ended, notify, dry_run) = {
            let state = self.tx.borrow();
            let Some(snap) = state.snapshot.clone() else {
                return;
            };
            (
                postmortems.observe(&snap, &state.history, observed, &self.silence),
                state.config.postmortem.notify,
                state.config.daemon.dry_run,
            )
        };
        for event in ended {
            let sentence = crate::event_line::postmortem(&event).unwrap_or_default();
            if let EventKind::Exited { process, .. } = &event.kind {
                info!(pid = process.pid, "{sentence}");
                if notify {
                    pipeline.act(Decision {
                        rule: "postmortem".to_string(),
                        process: process.clone(),
                        step: 0,
                        action: Action::Notify,
                        dry_run,
                        limit: String::new(),
                        reason: sentence,
                        reach: Reach::own_user(crate::sys::this_process::effective_uid()),
                    });
                }
            }
            pipeline.record_at(event.at, event.kind);
        }
    }

    /// One sample on the blocking pool, then what the OS recorded about the
    /// ends of the `tracked` processes (see [`PostMortems::suspects`]).
    ///
    /// `retired`, the snapshot the latest one replaced, is let go of there
    /// too, first: unless a reader still holds it, that frees its process
    /// list and releases the text each process shares with the sampler,
    /// work that would otherwise sit on the loop between a sample and the
    /// policy, on another CPU than the one that last touched that text.
    async fn sample_once(
        &mut self,
        depth: Depth,
        watched: Arc<[u32]>,
        tracked: HashSet<ProcessId>,
        retired: Option<Arc<Snapshot>>,
    ) -> Result<Result<(Snapshot, Observed), SampleError>, DaemonError> {
        let Some(mut sampler) = self.sampler.take() else {
            return Err(DaemonError::SamplerCrashed("no sampler".into()));
        };
        let mut causes = self.exit_causes.take();
        let joined = tokio::task::spawn_blocking(move || {
            drop(retired);
            let sampled = match depth {
                Depth::Full => sampler.sample(),
                Depth::Light => sampler.sample_light(&watched),
            };
            let result = sampled.map(|mut snap| {
                let suspects = PostMortems::suspects(&tracked, &snap);
                let observed = causes
                    .as_mut()
                    .map(|c| {
                        let statuses = c.collectors();
                        let observed = c.poll(&snap, &tracked, &suspects);
                        snap.collectors.extend(statuses);
                        observed
                    })
                    .unwrap_or_default();
                (snap, observed)
            });
            (sampler, causes, result)
        })
        .await;
        match joined {
            Ok((sampler, causes, result)) => {
                self.sampler = Some(sampler);
                self.exit_causes = causes;
                Ok(result)
            }
            Err(e) => Err(DaemonError::SamplerCrashed(e.to_string())),
        }
    }

    /// One probe reading on the blocking pool; `None` without a probe.
    async fn probe_once(
        &mut self,
        pressure: bool,
    ) -> Result<Option<Result<Reading, SampleError>>, DaemonError> {
        let Some(mut probe) = self.probe.take() else {
            return Ok(None);
        };
        let joined = tokio::task::spawn_blocking(move || {
            let reading = probe.read(pressure);
            (probe, reading)
        })
        .await;
        match joined {
            Ok((probe, reading)) => {
                self.probe = Some(probe);
                Ok(Some(reading))
            }
            Err(e) => Err(DaemonError::SamplerCrashed(format!(
                "the system probe: {e}"
            ))),
        }
    }

    fn log_start(&self) {
        let state = self.tx.borrow();
        let d = &state.config.daemon;
        let source = match &self.opts.config_path {
            Some(p) => p.display().to_string(),
            None => "the embedded default".to_string(),
        };
        let sampler = self.sampler.as_ref().map_or("none", |s| s.name());
        info!(
            "headroom {} running: config from {source}, {sampler} sampler, every {} ({} under pressure){}",
            env!("CARGO_PKG_VERSION"),
            format_duration(d.interval),
            format_duration(d.fast_interval),
            if d.dry_run {
                ", dry run: actions are logged, not taken"
            } else {
                ""
            },
        );
    }

    fn reload(&mut self, pipeline: &Pipeline) {
        let Some(path) = self.opts.config_path.clone() else {
            info!(
                "SIGHUP received, but headroom runs on its embedded default config: nothing to reload (start it with --config FILE to use a file)"
            );
            return;
        };
        // As root, the new file must pass the same permission checks as at start.
        let loaded = match Config::load(&path) {
            Ok(config) => crate::permissions::check_for_root(
                Some(&path),
                &config,
                crate::sys::this_process::effective_uid(),
            )
            .map(|()| config),
            Err(e) => Err(e),
        };
        match loaded {
            Ok(mut config) => {
                if self.opts.force_dry_run {
                    config.daemon.dry_run = true;
                }
                // The HTTP server keeps the settings it was started with.
                let running_http = self.tx.borrow().config.http.clone();
                if config.http != running_http {
                    info!(
                        "[http] changes in {} take effect at restart",
                        path.display()
                    );
                    config.http = running_http;
                }
                info!(
                    "config reloaded from {}: sampling every {} ({} under pressure)",
                    path.display(),
                    format_duration(config.daemon.interval),
                    format_duration(config.daemon.fast_interval)
                );
                self.tx.send_modify(|s| s.replace_config(config));
                pipeline.record(EventKind::ConfigReloaded {
                    path: path.display().to_string(),
                    error: None,
                });
            }
            Err(e) => {
                error!("config reload rejected, keeping the previous config: {e}");
                self.tx.send_modify(|s| s.counters.reload_failures += 1);
                pipeline.record(EventKind::ConfigReloaded {
                    path: path.display().to_string(),
                    error: Some(e.to_string()),
                });
            }
        }
    }
}

/// Remembers enough between samples to log changes rather than states.
#[derive(Default)]
struct Tracker {
    samples: u64,
    consecutive_failures: u64,
    failure_log: RateLimit,
    level: Option<PressureLevel>,
    ml: HashSet<ProcessId>,
}

impl Tracker {
    fn observe(&mut self, snap: &Snapshot, depth: Depth) {
        self.samples += 1;
        if self.consecutive_failures > 0 {
            info!(
                "sampling works again after {} failed attempts",
                self.consecutive_failures
            );
            self.consecutive_failures = 0;
            self.failure_log.reset();
        }
        let m = &snap.system;
        if self.samples == 1 {
            let ml = snap.processes.iter().filter(|p| p.workload.is_ml()).count();
            let swap = if snap.swap.total == 0 {
                "no swap".to_string()
            } else {
                format!(
                    "swap {} used of {}",
                    format_bytes(snap.swap.used),
                    format_bytes(snap.swap.total)
                )
            };
            info!(
                "first sample: {} used of {}, {} available, {swap}, pressure {}; {} processes, {} ML workloads; took {} ms",
                format_bytes(m.used),
                format_bytes(m.total),
                format_bytes(m.available),
                snap.pressure.level,
                snap.processes.len(),
                ml,
                snap.sample_micros / 1000,
            );
        } else {
            debug!(
                "sample: {} used, {} available, pressure {}, {} processes, {} µs{}",
                format_bytes(m.used),
                format_bytes(m.available),
                snap.pressure.level,
                snap.processes.len(),
                snap.sample_micros,
                if depth == Depth::Light { ", light" } else { "" }
            );
        }
        let level = snap.pressure.level;
        if let Some(prev) = self.level
            && prev != level
        {
            let msg = format!(
                "memory pressure {level} (was {prev}): {} available of {}",
                format_bytes(m.available),
                format_bytes(m.total)
            );
            if level > prev {
                warn!("{msg}");
            } else {
                info!("{msg}");
            }
        }
        self.level = Some(level);

        let mut seen = HashSet::new();
        for p in snap.processes.iter().filter(|p| p.workload.is_ml()) {
            seen.insert(p.id);
            if !self.ml.contains(&p.id) {
                info!(
                    pid = p.id.pid,
                    workload = p.workload.kind.as_str(),
                    "watching {} {} (pid {}), footprint {}{}",
                    p.workload.kind,
                    printable(&p.name),
                    p.id.pid,
                    format_bytes(p.footprint),
                    p.workload
                        .evidence
                        .first()
                        .map(|e| format!(": {}", printable(e)))
                        .unwrap_or_default()
                );
            }
        }
        self.ml = seen;
    }

    fn failed(&mut self, e: &SampleError) {
        self.consecutive_failures += 1;
        let n = self.consecutive_failures;
        if self.failure_log.due(std::time::Instant::now()).is_some() {
            error!("sampling failed ({n} in a row): {e}");
        }
    }
}

/// The rules' system conditions, in rule order, for the cadence.
fn gates(config: &Config) -> Vec<crate::config::SystemCondition> {
    config.rules.iter().filter_map(|r| r.when.clone()).collect()
}

/// A kernel pressure event woke this sample: report at least the level the
/// event stands for, and say why in the snapshot's notes.
fn raise_to_event_level(snap: &mut Snapshot, level: PressureLevel) {
    if snap.pressure.level < level {
        snap.notes.push(format!(
            "pressure reported as {level} (the figures say {}): the kernel's memory-pressure \
             notification fired just before this sample",
            snap.pressure.level
        ));
        snap.pressure.level = level;
    }
}

/// Policy events in the log: crossings at warn, the rest at info.
fn log_policy_event(kind: &EventKind) {
    match kind {
        EventKind::LimitCrossed {
            rule,
            process,
            detail,
        } => warn!(
            rule = %rule,
            pid = process.pid,
            "rule {rule}: {} (pid {}) crossed its limit: {detail}",
            printable(&process.name),
            process.pid
        ),
        EventKind::LimitHeldNotActing {
            rule,
            process,
            reason,
            ..
        } => warn!(
            rule = %rule,
            pid = process.pid,
            "rule {rule}: {} (pid {}) crossed its limit and the rule does not act: {reason}",
            printable(&process.name),
            process.pid
        ),
        EventKind::LimitCleared { rule, process, .. } => info!(
            rule = %rule,
            pid = process.pid,
            "rule {rule}: {} (pid {}) is back below its limit",
            printable(&process.name),
            process.pid
        ),
        _ => {}
    }
}
