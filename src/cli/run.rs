//! `headroom run`: the daemon's wiring. First everything that can be wrong
//! with the command line and the config is checked (the config, the
//! overrides, the trace to replay, the journal), so that a usage error
//! exits 2 before anything is taken; then it sets up logging, takes the
//! lock of its state directory ([`StateLock`]: one daemon per state
//! directory; a second exits 1 naming the holder), raises the open-file
//! limit, stays resident, tries to bind the HTTP listener, opens the
//! pressure events, exit causes and system probe, then runs the loop and
//! the HTTP server until a signal stops them.
//!
//! A replay (`--replay TRACE`) samples nothing of this machine and acts on
//! nothing: it runs dry whatever the config says, its actuator carries out
//! nothing, every log line is marked as a replay, and it keeps no journal
//! (and takes no lock) unless `--journal FILE` names one outside the live
//! daemon's state directory.
//!
//! Enforcement never depends on the HTTP listener: an address another
//! process holds (any local user can listen on the port first) is logged
//! with who holds it, and the server tries again on its own thread until
//! the address is free, while the loop samples and acts.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{CliError, browsable, load_config};
use crate::config::{Config, HttpConfig, LogFormat};
use crate::daemon::{Daemon, RunOptions, journal_for};
use crate::journal::state_lock::{Holder, LockError, StateLock, state_dir};
use crate::sample::replay::ReplaySampler;
use crate::sample::{ExitCauses, PressureEvents, Sampler, exit_causes, platform_sampler};

/// `run`'s command-line settings for the HTTP server, over the config's.
pub struct HttpOverrides {
    pub listen: Option<SocketAddr>,
    pub allow_remote: bool,
}

/// As root, say so when the running binary is one others can change (`sudo
/// brew services start`, a unit written by hand naming `~/.cargo/bin`):
/// whoever can change it runs their code as root at the next start. The
/// daemon runs on; `service install --system` installs a copy root alone
/// can change.
fn warn_if_others_can_replace_this_binary() {
    if crate::os::this_process::effective_uid() != 0 {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    if let Err(u) = crate::os::trusted_path::check_path(&exe, 0) {
        tracing::warn!(
            "running as root from {}, but {}: whoever can change it runs their code as root at \
             the next start; `{}` installs a copy only root can change and runs that",
            exe.display(),
            u.what(),
            crate::os::this_process::sudo_command("service install --system")
        );
    }
}

/// The nice value a root daemon's enforcement loop runs at: above ordinary
/// work (0), as earlyoom's `-p` (-20) is, but below what real-time and
/// audio services are usually given.
pub const DAEMON_NICE: i32 = -10;

/// Run the daemon in the foreground until SIGTERM or SIGINT.
pub fn run_daemon(
    config_path: Option<PathBuf>,
    force_dry_run: bool,
    log_format: Option<LogFormat>,
    replay: Option<PathBuf>,
    journal_flag: Option<PathBuf>,
    http: HttpOverrides,
    log_file: Option<PathBuf>,
) -> Result<(), CliError> {
    // Everything the command line and the config can get wrong, before
    // anything is taken (the state directory's lock, the port).
    let mut config = load_config(config_path.as_deref())?;
    // As root: a config or hook that others can change is refused (exit 2).
    let euid = crate::os::this_process::effective_uid();
    crate::permissions::check_for_root(config_path.as_deref(), &config, euid)?;
    if let Some(addr) = http.listen {
        config.http.listen = addr;
        config.http.enabled = true;
    }
    config.http.allow_remote |= http.allow_remote;
    if let Some(addr) = http.listen {
        HttpConfig::check_listen(addr, config.http.allow_remote)
            .map_err(|why| CliError::Usage(format!("--listen {addr}: {why}")))?;
    }
    let replayed = match &replay {
        Some(path) => Some(
            ReplaySampler::open(path)
                .map_err(|e| CliError::Usage(format!("cannot replay {}: {e}", path.display())))?
                .looped(true),
        ),
        None => None,
    };
    let is_root = euid == 0;
    if replay.is_some()
        && let Some(journal) = &journal_flag
    {
        check_replay_journal(journal, &config, is_root)?;
    }
    let journal = journal_for(&config, journal_flag.as_deref(), replay.is_some(), is_root);
    if let Some(path) = &journal {
        config.daemon.journal = Some(path.clone());
    }

    // The log file first, so that every record goes there.
    let log_warning = match &log_file {
        Some(path) => crate::logging::log_file::take_over(path).map_err(|e| {
            CliError::Runtime(format!("cannot write the log file {}: {e}", path.display()))
        })?,
        None => None,
    };
    crate::logging::init(
        log_format.unwrap_or(config.daemon.log_format),
        replay.is_some(),
    );
    if let Some(warning) = log_warning {
        tracing::warn!("{warning}");
    }
    // One daemon per state directory, taken before sampling; a replay with
    // no journal has no state directory and takes none. Only another
    // daemon holding it stops this one: a lock that cannot be taken (a
    // directory another user can change, a planted file) leaves the daemon
    // sampling and acting without the guard, as a refused journal does, so
    // that no other user can keep enforcement from starting.
    let mut lock = match &journal {
        Some(path) => {
            match StateLock::acquire(path, is_root.then_some(0), Holder::this_process()) {
                Ok(lock) => Some(lock),
                Err(held @ LockError::Held { .. }) => {
                    return Err(CliError::Runtime(held.to_string()));
                }
                Err(e) => {
                    tracing::warn!(
                        "{e}. Sampling and acting go on without the one-daemon-per-state-directory                          guard"
                    );
                    None
                }
            }
        }
        None => None,
    };
    if let Some(lock) = &lock {
        tracing::info!(
            "state directory locked: {} (one daemon per state directory)",
            lock.path().display()
        );
    }
    warn_if_others_can_replace_this_binary();
    // Room for enforcement's descriptors whatever HTTP clients open; the
    // HTTP server keeps a reserve out of what this leaves.
    match crate::os::fd_limit::raise_open_files() {
        Ok(limit) => tracing::info!("{}", limit.describe()),
        Err(e) => tracing::warn!("{e}; the HTTP server keeps within the current limit"),
    }
    stay_resident();
    // As root, the loop, its samples, probes and signals run above ordinary
    // work (every thread started from here inherits it; the HTTP server's
    // and the budgeted readers' threads lower themselves again).
    if is_root && replay.is_none() {
        match crate::os::this_process::raise_this_thread_priority(DAEMON_NICE) {
            Ok(Some(nice)) => tracing::info!(
                "the enforcement loop runs at nice {nice}, above ordinary work on a busy machine"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(
                "cannot raise the enforcement loop's CPU priority ({e}); on a busy machine a \
                 signal may wait for the CPU"
            ),
        }
    }
    // The first try at the port, before the loop starts, so that a free port
    // is served from the first sample on; a taken one is tried again later.
    let listener = config.http.enabled.then(|| {
        crate::http::bind(config.http.listen).inspect_err(|e| {
            tracing::warn!(
                "{}. Sampling and acting go on without HTTP; the listener is tried again every \
                 few seconds until the address is free",
                crate::http::binding::explained(e)
            );
        })
    });

    let sampler: Box<dyn Sampler> = match replayed {
        Some(replayed) => crate::sample::jobs::with_jobs(Box::new(replayed)),
        None => platform_sampler(&config.gpu, &config.labels),
    };
    // The daemon loop is the runtime's only task (the HTTP server has a
    // runtime and thread of its own; samples, probes and actions run on
    // blocking threads): one thread drives it, its timers and its pressure
    // events, so a tick wakes this thread alone instead of a worker that
    // then wakes another.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .thread_name("headroom")
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async move {
        let events = if replay.is_some() {
            PressureEvents::none()
        } else {
            let (events, note) = PressureEvents::open();
            match note {
                Ok(what) => tracing::info!("waking on memory pressure through {what}"),
                Err(why) => tracing::info!("{why}; sampling on the interval instead"),
            }
            events
        };
        let opts = RunOptions {
            config,
            config_path,
            force_dry_run,
            journal,
            replay: replay.clone(),
        };
        let causes = if replay.is_some() {
            ExitCauses::none("a replayed trace holds no record of how its processes ended")
        } else {
            let (causes, note) = exit_causes();
            match note {
                Ok(what) => tracing::info!("post-mortems: {what}"),
                Err(why) => tracing::info!("post-mortems: {why}"),
            }
            causes
        };
        let probe = if replay.is_some() {
            None
        } else {
            match crate::sample::probe::platform_probe() {
                Ok(probe) => {
                    tracing::info!(
                        "system probe ready: machine-wide figures read between samples while a rule's [rule.when] comes near"
                    );
                    Some(probe)
                }
                Err(why) => {
                    tracing::info!("no system probe ({why}); sampling on the interval");
                    None
                }
            }
        };
        let daemon = Daemon::new(opts, sampler, events)
            .with_exit_causes(causes)
            .with_probe(probe);
        let server = match listener {
            Some(bound) => {
                let started = match bound {
                    Ok(listener) => crate::http::Server::start(listener, daemon.subscribe()),
                    Err(failed) => crate::http::Server::start_when_free(failed, daemon.subscribe()),
                };
                let server = started
                    .map_err(|e| CliError::Runtime(format!("cannot start the HTTP server: {e}")))?;
                let addr = server.local_addr();
                if let Some(lock) = &mut lock
                    && let Err(e) = lock.set_address(addr.to_string(), server.listening_at_start())
                {
                    tracing::warn!("{e}; a second daemon refused will not see this address");
                }
                if !addr.ip().is_loopback() {
                    tracing::warn!(
                        "serving HTTP on {addr}, beyond this machine (allow_remote): anyone who can reach it can read the process list"
                    );
                }
                if server.listening_at_start() {
                    tracing::info!(
                        "status page: http://{}/ (metrics at /metrics)",
                        browsable(addr)
                    );
                }
                Some(server)
            }
            None => {
                tracing::info!("HTTP server disabled (http.enabled = false)");
                None
            }
        };
        let result = daemon.run().await;
        if let Some(server) = server
            && let Err(e) = server.stop(Duration::from_secs(3))
        {
            tracing::warn!("the HTTP server stopped with an error: {e}");
        }
        // The lock is held to the end (the kernel would release it anyway).
        drop(lock);
        result.map_err(|e| CliError::Runtime(e.to_string()))
    })
}

/// A replay's `--journal`: never in the live daemon's state directory (the
/// directory of the journal `config` names, or of the default one), where
/// its lines would mix with the record of what headroom did on this
/// machine and its lock would stop the live daemon's restart.
fn check_replay_journal(journal: &Path, config: &Config, is_root: bool) -> Result<(), CliError> {
    let mut live = vec![state_dir(&crate::journal::path_for(
        &config.daemon,
        is_root,
    ))];
    live.push(state_dir(&crate::journal::default_path(is_root)));
    let given = comparable(&state_dir(journal));
    if let Some(dir) = live.iter().find(|d| comparable(d) == given) {
        return Err(CliError::Usage(format!(
            "--journal {}: that is the live daemon's state directory ({}); a replay's events \
             must not mix with the record of what headroom did on this machine: name a file \
             in another directory",
            journal.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// `dir` as it is reached: its real path where it exists, else as given
/// made absolute.
fn comparable(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|cwd| cwd.join(dir))
            .unwrap_or_else(|_| dir.to_path_buf())
    })
}

/// Keep the daemon's pages in memory and out of the OOM killer's choice, so
/// that it still samples and acts while the machine thrashes; say what the
/// platform and the daemon's rights allowed.
fn stay_resident() {
    use crate::os::residency::{self, Locked};
    match residency::lock_memory() {
        Locked::All => tracing::info!("memory locked: the daemon's pages stay resident"),
        Locked::Skipped(why) => tracing::info!("{why}"),
    }
    match residency::shield_from_oom_killer() {
        Ok(Some(score)) => {
            tracing::info!("oom_score_adj {score}: the OOM killer picks headroom last")
        }
        Ok(None) => {}
        Err(e) => tracing::info!(
            "{e}; the OOM killer may choose headroom like any process: lowering oom_score_adj \
             needs CAP_SYS_RESOURCE, which root has unless a container or a capability \
             bounding set drops it (the systemd unit sets OOMScoreAdjust=-900 itself)"
        ),
    }
}
