//! The daemon loop behind `headroom run`.
//!
//! Every tick it samples on a blocking thread (with what the OS recorded
//! about ended processes, [`ExitCauses`]), names Jupyter kernels from the
//! latest lookup ([`Notebooks`], no I/O here), records and publishes the
//! sample, runs the policy and writes the post-mortems ([`PostMortems`]).
//! SIGHUP reloads the config (a bad file is rejected, the old one kept);
//! SIGTERM and SIGINT stop it cleanly.
//!
//! The loop owns its config and history ([`Working`]) and what it carries
//! between samples (`Running`: the policy's memory, the post-mortems, the
//! cadence, the pipeline). The [`State`] in the `watch` channel is for
//! readers (HTTP, metrics, the CLI): the loop copies `Arc`s into it and
//! never reads its own data back from it.
//!
//! When to sample is decided in [`cadence`] as pure functions: the fast
//! interval while pressure is elevated, light ticks most of the time with a
//! full one every few intervals and whenever memory moves, and the system
//! probe ([`crate::sample::probe`]) between ticks while a rule's `[rule.when]`
//! condition comes near, sampling at once when it holds. The OS's pressure
//! wake (a PSI trigger on Linux) samples at once, and counts as at least the
//! level it stands for on that sample. Each timer wake's lateness is
//! published (`headroom_wake_lateness_seconds`): a daemon starved of CPU
//! shows there.

pub mod cadence;
pub mod sample_log;
pub mod watched;
pub mod working;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tracing::{debug, error, info, trace, warn};

use crate::config::{Config, format_duration};
use crate::event::{Event, EventKind};
use crate::jupyter::Notebooks;
use crate::model::Action;
use crate::model::sampling::Tripwire;
use crate::model::{PressureLevel, ProcessId, Snapshot, Timestamp};
use crate::pipeline::Pipeline;
use crate::policy::{Context, Decision, Evaluation, PolicyState, Reach, evaluate};
use crate::postmortem::PostMortems;
use crate::report::format_bytes;
use crate::report::rate_limit::RateLimit;
use crate::sample::probe::{Probe, ProbeReading};
use crate::sample::{ExitCauses, Observed, PressureEvents, SampleError, Sampler};
use crate::state::{DurationHistogram, State};
use cadence::{AfterProbe, Cadence, Cause, Depth};
use sample_log::SampleLog;
pub use working::Working;

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
    /// The journal's path, `None` for none at all (a replay not told where
    /// to journal). See [`journal_for`].
    pub journal: Option<PathBuf>,
    /// The trace being replayed (`run --replay`), if one is: then the
    /// daemon runs dry whatever its config says, also after reloads.
    pub replay: Option<PathBuf>,
}

/// Where a daemon journals: `--journal` if given, else the config's
/// `daemon.journal` or the platform default for root or a user; a replay
/// journals only where `--journal` says (`None`: nowhere), never into the
/// live daemon's journal.
pub fn journal_for(
    config: &Config,
    flag: Option<&Path>,
    replay: bool,
    is_root: bool,
) -> Option<PathBuf> {
    match (flag, replay) {
        (Some(path), _) => Some(path.to_path_buf()),
        (None, true) => None,
        (None, false) => Some(crate::journal::path_for(&config.daemon, is_root)),
    }
}

/// A daemon ready to run: the loop's inputs, its own data and the state it
/// publishes.
pub struct Daemon {
    /// The file to re-read on SIGHUP; `None` runs on the embedded default.
    config_path: Option<PathBuf>,
    /// `--dry-run` on the command line, or a replay: wins over the config,
    /// also after reloads.
    force_dry_run: bool,
    /// The journal's path; `None` keeps none.
    journal: Option<PathBuf>,
    /// The trace being replayed, if one is.
    replay: Option<PathBuf>,
    /// The loop's config and history; the published state holds copies.
    working: Working,
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

/// What one run of the loop carries from one sample to the next, besides
/// its [`Working`] data.
struct Running {
    pipeline: Pipeline,
    notebooks: Notebooks,
    ctx: Context,
    policy: PolicyState,
    sample_log: SampleLog,
    postmortems: PostMortems,
    cadence: Cadence,
    /// The pids a light tick reads afresh: those a rule watches.
    watched: Arc<[u32]>,
    /// The snapshot the last one replaced, let go of on the sampler's
    /// thread (see `sample_once`).
    retired: Option<Arc<Snapshot>>,
    /// How late each timer wake came, published with the next sample.
    lateness: DurationHistogram,
    /// Sampling at the fast interval (published as `fast_mode`).
    fast: bool,
}

/// What a sample step leaves for the scheduling of the next one.
struct Stepped {
    /// The sample's pressure level; `None` when it failed.
    level: Option<PressureLevel>,
    evaluation: Evaluation,
    /// How deep the sample read: a full one cut short for a crossing is
    /// light.
    depth: Depth,
}

impl Daemon {
    pub fn new(opts: RunOptions, sampler: Box<dyn Sampler>, events: PressureEvents) -> Self {
        let RunOptions {
            mut config,
            config_path,
            force_dry_run,
            journal,
            replay,
        } = opts;
        let force_dry_run = force_dry_run || replay.is_some();
        pin(&mut config, force_dry_run, replay.is_some());
        let working = Working::new(config);
        let state = working.initial_state(config_path.clone(), Timestamp::now());
        let (tx, _rx) = watch::channel(state);
        let silence = "this daemon reads no record of how processes end";
        Self {
            config_path,
            force_dry_run,
            journal,
            replay,
            working,
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
        let mut run = self.start();
        let mut next_tick = Instant::now();
        let mut next_probe: Option<Instant> = None;
        let mut fast_until: Option<Instant> = None;
        let mut probe_failures: u64 = 0;
        let mut probe_failure_log = RateLimit::default();

        loop {
            let wake = next_probe.map_or(next_tick, |p| p.min(next_tick));
            let mut cause = Cause::Tick;
            let mut event_level = None;
            tokio::select! {
                _ = sleep_until(wake) => {
                    let late = Instant::now().saturating_duration_since(wake);
                    run.lateness.observe(u64::try_from(late.as_micros()).unwrap_or(u64::MAX));
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
                Some(event) = run.pipeline.journaled.recv() => {
                    self.journaled(&mut run, event);
                    continue;
                }
                _ = sigterm.recv() => { info!("SIGTERM received: shutting down"); break; }
                _ = sigint.recv() => { info!("SIGINT received: shutting down"); break; }
                _ = sighup.recv() => {
                    self.reload(&mut run);
                    continue;
                }
            }

            let normal = self.working.config().daemon.interval;
            let mut depth = None;
            if cause == Cause::Tick && Instant::now() < next_tick {
                // Woken to probe, not to tick.
                match self.probe_once(run.cadence.wants_pressure()).await? {
                    Some(Ok(reading)) => {
                        probe_failures = 0;
                        probe_failure_log.reset();
                        match run.cadence.probed(reading, normal) {
                            AfterProbe::Wait => {
                                next_probe = run.cadence.next_probe().map(Instant::from_std);
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
            let depth =
                depth.unwrap_or_else(|| run.cadence.depth(cause, started.into_std(), normal));
            let stepped = self.step(&mut run, depth, started, event_level).await?;

            let now = Instant::now();
            let fast = cadence::is_fast(
                stepped.level,
                fast_until.map(Instant::into_std),
                stepped.evaluation.within_reach,
                now.into_std(),
            );
            let quick = self.working.config().daemon.fast_interval;
            if fast != run.fast {
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
                run.fast = fast;
                self.tx.send_modify(|s| s.fast_mode = fast);
            }
            next_tick = Instant::from_std(cadence::next_tick(
                started.into_std(),
                now.into_std(),
                if fast { quick } else { normal },
                stepped.evaluation.next_check,
            ));
            if stepped.depth == Depth::Light && run.cadence.full_due() {
                // Memory moved since the last full read: read it all now.
                next_tick = now;
            }
            next_probe = if self.probe.is_some() {
                run.cadence.next_probe().map(Instant::from_std)
            } else {
                None
            };
        }
        self.stop(run).await
    }

    /// Start the pipeline, the notebook lookup and what the loop keeps
    /// between samples.
    fn start(&self) -> Running {
        let pipeline = self.start_pipeline();
        let journal = pipeline.journal_health();
        self.tx.send_modify(|s| s.journal = journal);
        let config = self.working.config();
        let notebooks =
            Notebooks::start(&config.jupyter, crate::os::this_process::running_as_root());
        Running {
            pipeline,
            notebooks,
            ctx: Context {
                self_pid: std::process::id(),
                self_uid: crate::os::this_process::effective_uid(),
            },
            policy: PolicyState::default(),
            sample_log: SampleLog::default(),
            postmortems: PostMortems::default(),
            cadence: Cadence::new(gates(config), crate::sample::probe::available_floor),
            watched: Arc::from([]),
            retired: None,
            lateness: DurationHistogram::default(),
            fast: false,
        }
    }

    /// Journal the stop, hand the readers what the journal already handed
    /// back (the rest is on disk) and wait for the pipeline's threads.
    async fn stop(&self, mut run: Running) -> Result<(), DaemonError> {
        run.sample_log.drain();
        run.pipeline.record(EventKind::Stopped);
        while let Ok(event) = run.pipeline.journaled.try_recv() {
            self.tx.send_modify(|s| s.add_event(event));
        }
        let pipeline = run.pipeline;
        tokio::task::spawn_blocking(move || pipeline.shut_down())
            .await
            .map_err(|e| DaemonError::SamplerCrashed(format!("shutting down: {e}")))?;
        info!("headroom stopped");
        Ok(())
    }

    /// An event the journal handed back: for the post-mortems, and for
    /// readers.
    fn journaled(&self, run: &mut Running, event: Event) {
        run.postmortems.note_event(&event);
        self.tx.send_modify(|s| s.add_event(event));
    }

    /// Start the actuator and journal threads and journal the start.
    fn start_pipeline(&self) -> Pipeline {
        let config = self.working.config();
        let d = &config.daemon;
        let opts = crate::journal::JournalOptions::from_config(d);
        let pipeline = match &self.replay {
            None => Pipeline::start(self.journal.clone(), opts),
            Some(_) => Pipeline::start_replay(self.journal.clone(), opts),
        };
        pipeline.record(EventKind::Started {
            version: env!("CARGO_PKG_VERSION").to_string(),
            config: self.config_path.as_ref().map(|p| p.display().to_string()),
            dry_run: d.dry_run,
        });
        if config.rules.is_empty() {
            warn!("the config has no rules: headroom watches and reports, and acts on nothing");
        }
        pipeline
    }

    /// One sample at `depth` (started at `started`, woken by a kernel
    /// pressure event of `event_level` if any) and everything that follows
    /// it, or the failure counted.
    async fn step(
        &mut self,
        run: &mut Running,
        depth: Depth,
        started: Instant,
        event_level: Option<PressureLevel>,
    ) -> Result<Stepped, DaemonError> {
        let outcome = self
            .sample_once(
                depth,
                run.cadence.tripwire(),
                Arc::clone(&run.watched),
                run.postmortems.tracked(),
                run.retired.take(),
            )
            .await?;
        Ok(match outcome {
            Ok((mut snap, observed, read)) => {
                if read != depth {
                    debug!(
                        "full sample cut short: a rule's machine-wide condition crossed while \
                         it read the process table; the rest carried, as on a light sample"
                    );
                }
                let depth = read;
                if let Some(level) = event_level {
                    raise_to_event_level(&mut snap, level);
                }
                let level = snap.pressure.level;
                let evaluation = self.after_sample(run, snap, observed, depth, started);
                Stepped {
                    level: Some(level),
                    evaluation,
                    depth,
                }
            }
            Err(e) => {
                self.after_failure(run, &e);
                Stepped {
                    level: None,
                    evaluation: Evaluation::default(),
                    depth,
                }
            }
        })
    }

    /// What follows a good sample: name the notebooks, list the loop's own
    /// collectors, feed the cadence, record and publish, run the policy and
    /// report the watched processes that ended.
    fn after_sample(
        &mut self,
        run: &mut Running,
        mut snap: Snapshot,
        observed: Observed,
        depth: Depth,
        started: Instant,
    ) -> Evaluation {
        run.notebooks.annotate(&mut snap);
        // The loop's own collectors, after the sampler's.
        let own =
            crate::doctor::loop_collectors(self.exit_causes.as_ref(), &self.events, &run.notebooks);
        snap.collectors
            .extend(crate::model::collector::gather(&own));
        run.cadence
            .sampled(ProbeReading::of(&snap, started.into_std()), depth);
        // After every sample: a process a light tick saw for the first time
        // is watched from the next one on.
        run.watched = watched::watched(&self.working.config().rules, &snap);
        let snap = Arc::new(snap);
        let lateness = run.lateness;
        let working = &mut self.working;
        self.tx.send_modify(|s| {
            s.counters.wake_lateness = lateness;
            run.retired = working.record(Arc::clone(&snap), s);
        });
        // Logged after it is published: a reader who saw `first sample:`
        // finds it counted.
        run.sample_log.observe(&snap, depth);
        let evaluation = self.decide(run, &snap);
        self.report_ends(run, &snap, observed);
        run.sample_log.notices();
        evaluation
    }

    /// A failed sample: counted and published (the last good snapshot stays
    /// the latest), logged.
    fn after_failure(&self, run: &mut Running, e: &SampleError) {
        run.cadence.failed();
        // Published before it is logged: a reader who saw the log line
        // finds the failure counted.
        let msg = e.to_string();
        let lateness = run.lateness;
        self.tx.send_modify(|s| {
            s.counters.wake_lateness = lateness;
            s.counters.sample_failures += 1;
            s.last_error = Some(msg);
        });
        run.sample_log.failed(e);
    }

    /// Run the policy on `snap` with the loop's config and history; journal
    /// its events, hand its decisions to the actuator and publish the
    /// rules' statuses.
    fn decide(&self, run: &mut Running, snap: &Snapshot) -> Evaluation {
        let at = snap.taken_at;
        let evaluation = evaluate(
            self.working.config(),
            &mut run.policy,
            self.working.history(),
            snap,
            run.ctx,
            at,
        );
        for kind in &evaluation.events {
            run.sample_log.policy_event(kind);
            run.pipeline.record_at(at, kind.clone());
        }
        for d in &evaluation.decisions {
            run.postmortems.note_decision(d, at);
            run.pipeline.act(d.clone());
        }
        let statuses = Arc::new(evaluation.statuses.clone());
        self.tx.send_modify(|s| s.rule_statuses = statuses);
        evaluation
    }

    /// Journal the post-mortems of the watched processes that ended (and
    /// notify, where `[postmortem] notify` asks for it).
    fn report_ends(&self, run: &mut Running, snap: &Snapshot, observed: Observed) {
        let ended = run
            .postmortems
            .observe(snap, self.working.history(), observed, &self.silence);
        let config = self.working.config();
        let (notify, dry_run) = (
            config.postmortem.notify,
            config.daemon.dry_run || snap.replayed,
        );
        for event in ended {
            let sentence = crate::event_line::postmortem(&event).unwrap_or_default();
            if let EventKind::Exited { process, .. } = &event.kind {
                run.sample_log.postmortem(process, &sentence);
                if notify {
                    run.pipeline.act(Decision {
                        rule: "postmortem".to_string(),
                        process: process.clone(),
                        step: 0,
                        action: Action::Notify,
                        dry_run,
                        replayed: snap.replayed,
                        limit: String::new(),
                        reason: sentence,
                        reach: Reach::own_user(crate::os::this_process::effective_uid()),
                    });
                }
            }
            run.pipeline.record_at(event.at, event.kind);
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
    ///
    /// A full sample stops reading the process table when `trip` holds (a
    /// rule's machine-wide condition crossed while it read) and finishes
    /// light: the depth it was read at comes back with it.
    async fn sample_once(
        &mut self,
        depth: Depth,
        trip: Tripwire,
        watched: Arc<[u32]>,
        tracked: HashSet<ProcessId>,
        retired: Option<Arc<Snapshot>>,
    ) -> Result<Result<(Snapshot, Observed, Depth), SampleError>, DaemonError> {
        let Some(mut sampler) = self.sampler.take() else {
            return Err(DaemonError::SamplerCrashed("no sampler".into()));
        };
        let mut causes = self.exit_causes.take();
        let joined = tokio::task::spawn_blocking(move || {
            drop(retired);
            let sampled = match depth {
                Depth::Full => sampler.sample_unless(&watched, &trip),
                Depth::Light => sampler.sample_light(&watched).map(|snap| (snap, false)),
            };
            let result = sampled.map(|(snap, full)| {
                let depth = if full { Depth::Full } else { Depth::Light };
                let suspects = PostMortems::suspects(&tracked, &snap);
                let observed = causes
                    .as_mut()
                    .map(|c| c.poll(&snap, &tracked, &suspects))
                    .unwrap_or_default();
                (snap, observed, depth)
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
    ) -> Result<Option<Result<ProbeReading, SampleError>>, DaemonError> {
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
        let d = &self.working.config().daemon;
        let source = match &self.config_path {
            Some(p) => p.display().to_string(),
            None => "the embedded default".to_string(),
        };
        let sampler = self.sampler.as_ref().map_or("none", |s| s.name());
        if let Some(trace) = &self.replay {
            let journal = match &self.journal {
                Some(path) => format!(
                    "its events go to {} (every line marked as a replay)",
                    path.display()
                ),
                None => "it keeps no journal (--journal FILE keeps one)".to_string(),
            };
            warn!(
                "replaying {}: a dry run whatever the config or the command line say; no signal, \
                 hook or notification reaches this machine's processes, and every log line is \
                 marked as a replay; {journal}",
                trace.display()
            );
        }
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

    /// Re-read the config file (SIGHUP); a file that does not load, or that
    /// a root daemon must refuse, is rejected and the running config kept.
    fn reload(&mut self, run: &mut Running) {
        let Some(path) = self.config_path.clone() else {
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
                crate::os::this_process::effective_uid(),
            )
            .map(|()| config),
            Err(e) => Err(e),
        };
        match loaded {
            Ok(config) => {
                self.apply_config(run, config, &path);
                run.pipeline.record(EventKind::ConfigReloaded {
                    path: path.display().to_string(),
                    error: None,
                });
            }
            Err(e) => {
                error!("config reload rejected, keeping the previous config: {e}");
                self.tx.send_modify(|s| s.counters.reload_failures += 1);
                run.pipeline.record(EventKind::ConfigReloaded {
                    path: path.display().to_string(),
                    error: Some(e.to_string()),
                });
            }
        }
    }

    /// Run on `config`, reloaded from `path`, from now on: the loop's copy
    /// first, then the published one; the notebook lookup and the cadence
    /// follow it.
    fn apply_config(&mut self, run: &mut Running, mut config: Config, path: &Path) {
        pin(&mut config, self.force_dry_run, self.replay.is_some());
        // The journal stays where it was opened.
        let running_journal = &self.working.config().daemon.journal;
        if config.daemon.journal != *running_journal {
            info!(
                "daemon.journal changes in {} take effect at restart",
                path.display()
            );
            config.daemon.journal = running_journal.clone();
        }
        // The HTTP server keeps the settings it was started with.
        let running_http = &self.working.config().http;
        if config.http != *running_http {
            info!(
                "[http] changes in {} take effect at restart",
                path.display()
            );
            config.http = running_http.clone();
        }
        info!(
            "config reloaded from {}: sampling every {} ({} under pressure)",
            path.display(),
            format_duration(config.daemon.interval),
            format_duration(config.daemon.fast_interval)
        );
        let working = &mut self.working;
        self.tx.send_modify(|s| working.replace_config(config, s));
        let config = self.working.config();
        run.notebooks.configure(&config.jupyter);
        run.cadence.set_gates(gates(config));
    }
}

/// What the command line holds over every config, the first and each
/// reloaded: `--dry-run` (or a replay) runs dry; a replay looks up no
/// Jupyter server of this machine (the trace's processes are not its).
fn pin(config: &mut Config, dry_run: bool, replay: bool) {
    if dry_run {
        config.daemon.dry_run = true;
    }
    if replay {
        config.jupyter.enabled = false;
    }
}

/// The rules' system conditions, in rule order, for the cadence.
/// The machine-wide `[rule.when]` conditions, which the probe watches
/// between samples (a per-cgroup one is read in each sample: the policy
/// asks for fast sampling when one comes near).
fn gates(config: &Config) -> Vec<crate::config::SystemCondition> {
    config
        .rules
        .iter()
        .filter_map(|r| r.when.clone())
        .filter(|w| w.per == crate::config::Per::Machine)
        .collect()
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

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::event::Outcome;
    use crate::model::build;

    const GIB: u64 = 1 << 30;

    /// A rule that acts (by notifying) on any process over 1 GiB, whoever
    /// owns it.
    const BIG: &str = "[[rule]]\nname = \"big\"\nfootprint = \"1GiB\"\nother_users = true\n\
                       root = true\nactions = [{ notify = true }]\n";

    /// Hands out the samples it was given, in order, then fails.
    struct Scripted(VecDeque<Result<Snapshot, SampleError>>);

    impl Sampler for Scripted {
        fn name(&self) -> &'static str {
            "scripted"
        }

        fn sample(&mut self) -> Result<Snapshot, SampleError> {
            self.0.pop_front().unwrap_or(Err(SampleError::EndOfTrace))
        }

        fn collectors(&self) -> Vec<&dyn crate::model::Collector> {
            Vec::new()
        }
    }

    /// A machine of 16 GiB, half of it available, at `ms`, with one process
    /// (pid 4242) of `footprint` bytes.
    fn machine(ms: u64, footprint: u64) -> Snapshot {
        build::snapshot(ms)
            .memory(16 * GIB, 8 * GIB)
            .process(
                build::process(4242)
                    .start(7)
                    .uid(crate::os::this_process::effective_uid())
                    .name("python3")
                    .footprint(footprint),
            )
            .build()
    }

    /// A dry-run daemon journaling into a directory of its own, started as
    /// `run` starts it, with no signal handlers.
    struct Loop {
        daemon: Daemon,
        run: Running,
        published: watch::Receiver<State>,
        dir: tempfile::TempDir,
    }

    impl Loop {
        /// On the config `text` (TOML), sampling `samples` in order.
        fn start(text: &str, samples: Vec<Result<Snapshot, SampleError>>) -> Self {
            let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
            std::fs::create_dir_all(&base).expect("target/tmp");
            let dir = tempfile::tempdir_in(&base).expect("tempdir");
            let mut config =
                Config::from_toml_str(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
            let journal = dir.path().join("journal.jsonl");
            config.daemon.journal = Some(journal.clone());
            config.jupyter.enabled = false;
            let daemon = Daemon::new(
                RunOptions {
                    config,
                    config_path: Some(dir.path().join("headroom.toml")),
                    force_dry_run: true,
                    journal: Some(journal),
                    replay: None,
                },
                Box::new(Scripted(samples.into())),
                PressureEvents::none(),
            );
            let published = daemon.subscribe();
            let run = daemon.start();
            Self {
                daemon,
                run,
                published,
                dir,
            }
        }

        /// One full sample and what follows it.
        async fn step(&mut self) -> Stepped {
            self.step_woken_by(None).await
        }

        /// One full sample woken by a kernel event of `level`.
        async fn step_woken_by(&mut self, level: Option<PressureLevel>) -> Stepped {
            self.daemon
                .step(&mut self.run, Depth::Full, Instant::now(), level)
                .await
                .expect("the sampler thread runs")
        }

        /// Write `text` to the config file and reload it, as on SIGHUP.
        fn reload(&mut self, text: &str) {
            let path = self.dir.path().join("headroom.toml");
            std::fs::write(&path, text).expect("write the config");
            self.daemon.reload(&mut self.run);
        }

        /// Stop as `run` does and read back what was journaled.
        async fn journaled(self) -> Vec<EventKind> {
            self.daemon.stop(self.run).await.expect("stops");
            let path = self.dir.path().join("journal.jsonl");
            let read = crate::journal::read_events(&path, None).expect("read the journal");
            read.events.into_iter().map(|e| e.kind).collect()
        }
    }

    #[tokio::test]
    async fn a_sample_is_published_with_the_loops_history_holding_it() {
        let mut l = Loop::start("", vec![Ok(machine(1_000, GIB))]);
        let stepped = l.step().await;
        assert_eq!(stepped.level, Some(PressureLevel::Normal));
        let state = l.published.borrow();
        let snap = state.snapshot.as_ref().expect("published");
        assert_eq!(snap.taken_at, Timestamp(1_000));
        assert_eq!(state.counters.samples, 1);
        assert!(Arc::ptr_eq(&state.history, l.daemon.working.history()));
        assert_eq!(state.history.system().len(), 1);
        assert!(
            state
                .history
                .process(&ProcessId {
                    pid: 4242,
                    start: 7
                })
                .is_some()
        );
    }

    #[tokio::test]
    async fn samples_no_reader_holds_the_history_for_record_it_in_place() {
        let samples = vec![Ok(machine(1_000, GIB)), Ok(machine(2_000, GIB))];
        let mut l = Loop::start("", samples);
        l.step().await;
        let before = Arc::as_ptr(l.daemon.working.history());
        l.step().await;
        assert_eq!(Arc::as_ptr(l.daemon.working.history()), before, "copied");
        assert_eq!(l.published.borrow().history.system().len(), 2);
    }

    #[tokio::test]
    async fn a_reload_replaces_the_loops_config_and_then_publishes_it() {
        let mut l = Loop::start("", vec![]);
        l.reload(&format!("[daemon]\nhistory = \"2m\"\n{BIG}"));
        let working = &l.daemon.working;
        assert_eq!(working.config().rules.len(), 1);
        assert!(working.config().daemon.dry_run, "--dry-run survives");
        assert_eq!(working.history().retention(), Duration::from_secs(120));
        let state = l.published.borrow();
        assert!(Arc::ptr_eq(&state.config, working.config()));
        assert!(Arc::ptr_eq(&state.history, working.history()));
        assert_eq!(state.counters.reloads, 1);
    }

    #[tokio::test]
    async fn a_rejected_reload_keeps_the_loops_config_and_is_counted() {
        let mut l = Loop::start(BIG, vec![]);
        l.reload("[daemon]\ninterval = \"5 parsecs\"\n");
        assert_eq!(l.daemon.working.config().rules.len(), 1);
        let state = l.published.borrow();
        assert_eq!(state.counters.reload_failures, 1);
        assert_eq!(state.counters.reloads, 0);
    }

    #[tokio::test]
    async fn the_policy_runs_on_the_loops_config_after_a_reload_not_the_published_one() {
        let mut l = Loop::start("", vec![Ok(machine(1_000, 2 * GIB))]);
        l.reload(BIG);
        // What readers see has no rule; the loop's config has one.
        let none = Arc::new(Config::from_toml_str("", "t.toml").expect("empty config"));
        l.daemon.tx.send_modify(|s| s.config = none);
        let stepped = l.step().await;
        let rules: Vec<&str> = stepped
            .evaluation
            .decisions
            .iter()
            .map(|d| d.rule.as_str())
            .collect();
        assert_eq!(rules, ["big"]);
    }

    #[tokio::test]
    async fn a_failed_sample_is_counted_and_the_last_good_snapshot_stays_published() {
        let failure = SampleError::Parse {
            path: "/proc/meminfo".into(),
            reason: "no MemTotal".into(),
        };
        let mut l = Loop::start("", vec![Ok(machine(1_000, GIB)), Err(failure)]);
        l.step().await;
        let stepped = l.step().await;
        assert_eq!(stepped.level, None);
        let state = l.published.borrow();
        assert_eq!(state.counters.sample_failures, 1);
        assert_eq!(state.counters.samples, 1);
        let error = state
            .last_error
            .as_deref()
            .expect("the failure is published");
        assert!(error.contains("/proc/meminfo"), "{error}");
        let snap = state.snapshot.as_ref().expect("still published");
        assert_eq!(snap.taken_at, Timestamp(1_000));
    }

    #[tokio::test]
    async fn a_crossing_in_the_snapshot_is_journaled_with_its_dry_run_action() {
        let mut l = Loop::start(BIG, vec![Ok(machine(1_000, 2 * GIB))]);
        l.step().await;
        let events = l.journaled().await;
        assert!(
            events.iter().any(|k| matches!(
                k,
                EventKind::LimitCrossed { rule, process, .. }
                    if rule == "big" && process.pid == 4242
            )),
            "{events:?}"
        );
        assert!(
            events.iter().any(|k| matches!(
                k,
                EventKind::Action { rule, outcome: Outcome::DryRun, dry_run: true, .. }
                    if rule == "big"
            )),
            "{events:?}"
        );
    }

    #[tokio::test]
    async fn a_process_under_its_limit_is_journaled_as_nothing() {
        let mut l = Loop::start(BIG, vec![Ok(machine(1_000, GIB / 2))]);
        l.step().await;
        let events = l.journaled().await;
        assert!(
            events
                .iter()
                .all(|k| matches!(k, EventKind::Started { .. } | EventKind::Stopped)),
            "{events:?}"
        );
    }

    #[tokio::test]
    async fn the_published_rule_statuses_are_the_evaluations() {
        let mut l = Loop::start(BIG, vec![Ok(machine(1_000, 2 * GIB))]);
        let stepped = l.step().await;
        assert!(!stepped.evaluation.statuses.is_empty());
        let state = l.published.borrow();
        assert_eq!(*state.rule_statuses, stepped.evaluation.statuses);
    }

    #[tokio::test]
    async fn a_kernel_event_raises_the_published_level_and_says_so() {
        let mut l = Loop::start("", vec![Ok(machine(1_000, GIB))]);
        let stepped = l.step_woken_by(Some(PressureLevel::Warn)).await;
        assert_eq!(stepped.level, Some(PressureLevel::Warn));
        let state = l.published.borrow();
        let snap = state.snapshot.as_ref().expect("published");
        assert_eq!(snap.pressure.level, PressureLevel::Warn);
        assert!(
            snap.notes.iter().any(|n| n.contains("memory-pressure")),
            "{:?}",
            snap.notes
        );
    }
}
