//! The actuator: carries out the policy's decisions and reports every outcome
//! as an [`Event`].
//!
//! [`Actuator::execute`] is quick enough to call from the daemon loop:
//! signals are checked and sent synchronously (microseconds; see
//! `signal.rs` for the safety checks that run before every one), while hooks
//! and notifications run on a thread each and report their completion as an
//! event of their own when they end. Every event goes to the channel given to
//! [`Actuator::new`], stamped with the time it happened.
//!
//! A replay never acts: a decision made on a replayed snapshot
//! ([`Decision::replayed`]), or any decision given to an actuator started
//! for a replay ([`ActuatorOptions::replay`]), is logged and reported as a
//! dry run before anything else is done: no signal (not even the identity
//! checks, which would look at this machine's processes), no hook, no
//! notification, whatever the config or `dry_run` say.
//!
//! What the OS is asked lives in `os::<os>::process` (pidfds and `/proc` on
//! Linux; `proc_pidinfo` and `kinfo_proc` on macOS), behind the neutral
//! [`identity`] functions, and `os::posix` (`kill` and process groups);
//! `group.rs` signals a process group member by member.

pub mod doctor;
mod group;
mod hook;
pub mod identity;
mod notify;
mod signal;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::event::{Event, EventKind, Outcome, ProcessRef};
use crate::model::Action;
use crate::model::Timestamp;
use crate::policy::Decision;
use crate::report::printable;

pub use hook::OUTPUT_LIMIT as HOOK_OUTPUT_LIMIT;

/// Settings of the actuator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActuatorOptions {
    /// How long a desktop notification command may run. Default 10s.
    pub notify_timeout: Duration,
    /// The directories the notifier (`notify-send`, `osascript`) is looked
    /// for in, in order; default `notify::NOTIFIER_DIRS`. Never `$PATH`,
    /// and a notifier is run only if only root (or headroom's own uid) can
    /// change it and every directory above it (`notify::find_notifier`).
    pub notifier_dirs: Vec<PathBuf>,
    /// Parent of the per-user runtime directories holding session buses.
    /// Default `/run/user`.
    pub runtime_dir: PathBuf,
    /// Run hooks in a dry run too, with `HEADROOM_DRY_RUN=1`, leaving it to
    /// the hook to act or only log. Default false: a dry run runs nothing.
    pub run_hooks_in_dry_run: bool,
    /// The actuator of a replay (`headroom run --replay`): it carries out
    /// no decision at all, whatever the decision says. Default false.
    pub replay: bool,
}

impl Default for ActuatorOptions {
    fn default() -> Self {
        Self {
            notify_timeout: Duration::from_secs(10),
            notifier_dirs: notify::NOTIFIER_DIRS.iter().map(PathBuf::from).collect(),
            runtime_dir: PathBuf::from("/run/user"),
            run_hooks_in_dry_run: false,
            replay: false,
        }
    }
}

/// Carries out decisions; see the module documentation.
pub struct Actuator {
    opts: ActuatorOptions,
    events: Sender<Event>,
    /// Hook and notification threads not yet known to have finished.
    running: Vec<JoinHandle<()>>,
    /// Set once "no desktop notifier" has been logged.
    notifier_missing_logged: Arc<AtomicBool>,
    /// The processes already refused once for a changed program.
    program_changes: signal::ProgramChanges,
}

impl Actuator {
    pub fn new(opts: ActuatorOptions, events: Sender<Event>) -> Self {
        Self {
            opts,
            events,
            running: Vec::new(),
            notifier_missing_logged: Arc::new(AtomicBool::new(false)),
            program_changes: signal::ProgramChanges::default(),
        }
    }

    /// Carry out one decision. Signals are done when this returns; hooks and
    /// notifications report later, from their own thread.
    pub fn execute(&mut self, d: &Decision) {
        if d.replayed || self.opts.replay {
            self.replayed(d);
            return;
        }
        match &d.action {
            Action::Signal {
                signal,
                require_handler,
                process_group,
            } => {
                let verdict = signal::deliver(
                    d,
                    *signal,
                    *require_handler,
                    *process_group,
                    &mut self.program_changes,
                );
                let event = match verdict {
                    signal::Verdict::Ended(outcome, what) => {
                        let detail = match &outcome {
                            Outcome::DryRun => format!("would send {what}"),
                            _ => d.reason.clone(),
                        };
                        log_outcome(d, &outcome, &detail);
                        action_event(d, outcome, detail)
                    }
                    signal::Verdict::Group(outcome, report) => {
                        let detail = match &outcome {
                            Outcome::DryRun => format!("would send {report}"),
                            Outcome::Done => format!("{}; sent {report}", d.reason),
                            _ => d.reason.clone(),
                        };
                        log_outcome(d, &outcome, &detail);
                        action_event(d, outcome, detail)
                    }
                    signal::Verdict::Skipped(reason) => {
                        tracing::info!(rule = %d.rule, pid = d.process.pid, "skipped {}: {reason}", d.action.label());
                        skipped_event(d, reason)
                    }
                };
                self.emit(event);
            }
            Action::Hook {
                command,
                args,
                timeout,
            } => self.hook(d, command, args, *timeout),
            Action::Notify => self.notify(d),
        }
    }

    /// A decision of a replay: said and reported, never carried out.
    fn replayed(&self, d: &Decision) {
        let detail = format!("replay: would {}", would(d));
        log_outcome(d, &Outcome::DryRun, &detail);
        self.emit(action_event(d, Outcome::DryRun, detail));
    }

    /// How many hooks and notifications are still running.
    pub fn pending(&mut self) -> usize {
        self.running.retain(|h| !h.is_finished());
        self.running.len()
    }

    fn emit(&self, event: Event) {
        if self.events.send(event).is_err() {
            tracing::debug!("an action event was dropped: nobody is listening any more");
        }
    }

    fn hook(&mut self, d: &Decision, command: &Path, args: &[String], timeout: Duration) {
        if !command.is_absolute() {
            let why = format!(
                "hook command {} is not an absolute path; write it out in full",
                command.display()
            );
            log_outcome(d, &Outcome::Refused(why.clone()), &d.reason);
            self.emit(action_event(d, Outcome::Refused(why), d.reason.clone()));
            return;
        }
        // Checked at config load, and again here: as root, the program and
        // the files among its arguments must still be root's alone.
        let euid = crate::os::this_process::effective_uid();
        if euid == 0
            && let Err(problem) = crate::permissions::check_hook(command, args, euid)
        {
            let why = format!(
                "refusing to run hook {} as root: {problem}",
                command.display()
            );
            log_outcome(d, &Outcome::Refused(why.clone()), &d.reason);
            self.emit(action_event(d, Outcome::Refused(why), d.reason.clone()));
            return;
        }
        let line = std::iter::once(command.display().to_string())
            .chain(args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        if d.dry_run && !self.opts.run_hooks_in_dry_run {
            let detail = format!("would run {line}");
            log_outcome(d, &Outcome::DryRun, &detail);
            self.emit(action_event(d, Outcome::DryRun, detail));
            return;
        }
        let mut cmd = Command::new(command);
        cmd.args(args)
            .env_clear()
            .envs(hook_env(d))
            .current_dir("/");
        let (events, decision) = (self.events.clone(), d.clone());
        self.spawn(d, "headroom-hook", move || {
            let finished = hook::run(cmd, timeout);
            log_output(&decision, &line, &finished);
            log_outcome(&decision, &finished.outcome, &decision.reason);
            let _ = events.send(action_event(
                &decision,
                finished.outcome,
                decision.reason.clone(),
            ));
        });
    }

    fn notify(&mut self, d: &Decision) {
        let message = notify::Message {
            title: format!("headroom: {}", d.rule),
            body: format!("{} (pid {}): {}", d.process.name, d.process.pid, d.reason),
        };
        if d.dry_run {
            let detail = format!(
                "would show \"{}: {}\"",
                printable(&message.title),
                printable(&message.body)
            );
            log_outcome(d, &Outcome::DryRun, &detail);
            self.emit(action_event(d, Outcome::DryRun, detail));
            return;
        }
        let audience = notify::Audience {
            target_uid: d.process.uid,
            own_uid: crate::os::this_process::effective_uid(),
        };
        let cmd = notify::command(
            &message,
            audience,
            &self.opts.notifier_dirs,
            &self.opts.runtime_dir,
            || std::fs::read_to_string(crate::os::passwd::SYSTEM_PASSWD),
        );
        let cmd = match cmd {
            Ok(cmd) => cmd,
            Err(why) => {
                // Not an error of headroom's: a headless machine has no desktop.
                if !self.notifier_missing_logged.swap(true, Ordering::Relaxed) {
                    tracing::warn!("notifications cannot be shown: {why}");
                }
                self.emit(action_event(d, Outcome::Failed(why), d.reason.clone()));
                return;
            }
        };
        let timeout = self.opts.notify_timeout;
        let (events, decision) = (self.events.clone(), d.clone());
        self.spawn(d, "headroom-notify", move || {
            let finished = hook::run(cmd, timeout);
            log_output(&decision, "the notifier", &finished);
            log_outcome(&decision, &finished.outcome, &decision.reason);
            let _ = events.send(action_event(
                &decision,
                finished.outcome,
                decision.reason.clone(),
            ));
        });
    }

    fn spawn(&mut self, d: &Decision, name: &str, work: impl FnOnce() + Send + 'static) {
        self.running.retain(|h| !h.is_finished());
        match std::thread::Builder::new().name(name.into()).spawn(work) {
            Ok(handle) => self.running.push(handle),
            Err(e) => {
                let why = format!("cannot start a thread to run it: {e}");
                log_outcome(d, &Outcome::Failed(why.clone()), &d.reason);
                self.emit(action_event(d, Outcome::Failed(why), d.reason.clone()));
            }
        }
    }
}

/// `PATH` of a hook: the system's directories, which only root changes.
/// `/usr/local/bin` and `/usr/local/sbin` are left out on purpose: on a Mac
/// with Homebrew (Intel) they belong to the admin user who installed it, and
/// on Debian the `staff` group may write to `/usr/local`; a hook that needs
/// a program from there names it by its absolute path.
pub const HOOK_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// The whole environment a hook runs with. Nothing of headroom's own
/// environment is passed on:
///
/// - `PATH` = [`HOOK_PATH`], `LANG` = `C.UTF-8`, and `HOME` = `/` for a root
///   daemon (no user's settings are read), the daemon's own `HOME` for a
///   user's daemon (`/` if it has none);
/// - `HEADROOM_PID`, `HEADROOM_NAME`, `HEADROOM_RULE`, `HEADROOM_STEP`,
///   `HEADROOM_FOOTPRINT_BYTES`, `HEADROOM_LIMIT`, `HEADROOM_ACTION`,
///   `HEADROOM_REASON`, `HEADROOM_DRY_RUN`, and where known
///   `HEADROOM_USER`, `HEADROOM_KERNEL_ID` and `HEADROOM_NOTEBOOK`.
///
/// The `HEADROOM_*` values come in part from what other users control
/// (process names, kernel ids, notebook paths): every control character in
/// them is escaped as [`crate::report::printable`] writes it (`\n`,
/// `\u{1b}`, `\u{0}`), so a value is one line with no escape sequence and
/// no NUL.
pub fn hook_env(d: &Decision) -> Vec<(String, String)> {
    let home = if crate::os::this_process::effective_uid() == 0 {
        "/".to_string()
    } else {
        std::env::var("HOME")
            .ok()
            .filter(|h| h.starts_with('/'))
            .unwrap_or_else(|| "/".to_string())
    };
    let mut env = vec![
        ("PATH".to_string(), HOOK_PATH.to_string()),
        ("HOME".to_string(), home),
        ("LANG".to_string(), "C.UTF-8".to_string()),
    ];
    env.extend(headroom_env(d));
    env
}

/// The `HEADROOM_*` variables of [`hook_env`], escaped.
fn headroom_env(d: &Decision) -> Vec<(String, String)> {
    let p = &d.process;
    let mut env = vec![
        ("HEADROOM_PID", p.pid.to_string()),
        ("HEADROOM_NAME", p.name.clone()),
        ("HEADROOM_RULE", d.rule.clone()),
        ("HEADROOM_STEP", d.step.to_string()),
        ("HEADROOM_FOOTPRINT_BYTES", p.footprint.to_string()),
        ("HEADROOM_LIMIT", d.limit.clone()),
        ("HEADROOM_ACTION", d.action.label()),
        ("HEADROOM_REASON", d.reason.clone()),
        (
            "HEADROOM_DRY_RUN",
            if d.dry_run { "1" } else { "0" }.to_string(),
        ),
    ];
    if let Some(user) = p.user.clone().or_else(|| p.uid.map(|u| u.to_string())) {
        env.push(("HEADROOM_USER", user));
    }
    if let Some(kernel) = &p.kernel_id {
        env.push(("HEADROOM_KERNEL_ID", kernel.clone()));
    }
    if let Some(notebook) = &p.notebook {
        env.push(("HEADROOM_NOTEBOOK", notebook.clone()));
    }
    env.into_iter()
        .map(|(k, v)| (k.to_string(), printable(&v).into_owned()))
        .collect()
}

/// What carrying out `d` would be, in words: `send SIGTERM to pid 42
/// (python3)`, `run /usr/local/bin/hook`, `show a notification`.
fn would(d: &Decision) -> String {
    let target = format!("pid {} ({})", d.process.pid, printable(&d.process.name));
    match &d.action {
        Action::Signal {
            signal,
            process_group: false,
            ..
        } => format!("send {signal} to {target}"),
        Action::Signal {
            signal,
            process_group: true,
            ..
        } => format!("send {signal} to the process group of {target}"),
        Action::Hook { command, args, .. } => {
            let line = std::iter::once(command.display().to_string())
                .chain(args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            format!("run {} for {target}", printable(&line))
        }
        Action::Notify => format!("show a notification about {target}"),
    }
}

fn action_event(d: &Decision, outcome: Outcome, detail: String) -> Event {
    Event {
        at: Timestamp::now(),
        kind: EventKind::Action {
            rule: d.rule.clone(),
            process: d.process.clone(),
            step: d.step,
            action: d.action.label(),
            outcome,
            dry_run: d.dry_run || d.replayed,
            detail,
        },
    }
}

fn skipped_event(d: &Decision, reason: String) -> Event {
    Event {
        at: Timestamp::now(),
        kind: EventKind::Skipped {
            rule: d.rule.clone(),
            process: d.process.clone(),
            step: d.step,
            action: d.action.label(),
            reason,
        },
    }
}

fn log_outcome(d: &Decision, outcome: &Outcome, detail: &str) {
    let ProcessRef { pid, name, .. } = &d.process;
    let action = d.action.label();
    let rule = &d.rule;
    match outcome {
        Outcome::Done => tracing::info!(%rule, pid, %name, "{action}: done ({detail})"),
        Outcome::DryRun => tracing::warn!(%rule, pid, %name, "dry run: {detail}"),
        Outcome::Gone => tracing::info!(%rule, pid, %name, "{action}: the process has exited"),
        Outcome::IdentityChanged => tracing::warn!(
            %rule, pid, %name,
            "{action}: pid {pid} now belongs to another process; nothing sent"
        ),
        Outcome::Refused(why) => tracing::warn!(%rule, pid, %name, "{action} refused: {why}"),
        Outcome::Failed(why) => tracing::warn!(%rule, pid, %name, "{action} failed: {why}"),
    }
}

fn log_output(d: &Decision, what: &str, finished: &hook::Finished) {
    for (stream, bytes) in [("stdout", &finished.stdout), ("stderr", &finished.stderr)] {
        if !bytes.is_empty() {
            tracing::info!(
                rule = %d.rule,
                pid = d.process.pid,
                "{what} {stream} (ran {:?}): {}",
                finished.elapsed,
                String::from_utf8_lossy(bytes).trim_end()
            );
        }
    }
}
