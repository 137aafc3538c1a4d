//! The actuator against real processes: `headroom-hog` children that catch
//! (or do not catch) signals, real hooks run through `/bin/sh`, a stand-in
//! `notify-send` that records its arguments, and the events that come back
//! on the channel. Hooks see only the documented environment, with what
//! other users named escaped. That a root actuator refuses a hook handed a
//! script others can write is in the environment tier
//! (`tests/environment/actuator.rs`).
//!
//! Files hooks are handed live under `target/tmp`: as root, a hook's
//! argument under the shared `/tmp` is refused like the hook itself.
//!
//! Safety refusals aimed at this test's own process and its parent run as
//! dry runs: every check runs before the dry run stops delivery, so a
//! refusal shows the same, and a broken check cannot hit the test runner.

#![cfg(unix)]

use std::io::{BufRead as _, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use headroom::act::{Actuator, ActuatorOptions, identity};
use headroom::event::{EventKind, Outcome, ProcessRef};
use headroom::policy::{Action, SignalName};

use crate::support::actuator::{
    WAIT, actuator, decision, hook, outcome, process, refusal, run, signal,
};
use crate::support::hog::hog_path;

/// A process name as hostile as a user can make it: a colour escape, a
/// newline that would start a forged log line, a bell, and markup.
const HOSTILE: &str = "\u{1b}[31mRED\n\u{7}<b>";

fn is_root() -> bool {
    headroom::os::this_process::effective_uid() == 0
}

/// A private directory under `target/tmp` (root trusts it, unlike `/tmp`).
fn private_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A running hog and the lines it prints.
struct Hog {
    child: Child,
    lines: Receiver<String>,
    /// Every line read so far.
    seen: Vec<String>,
    pid: u32,
}

impl Hog {
    /// Start a hog with `args` (plus a small --max) in a process group of
    /// its own, and wait for its `ready` line.
    fn start(args: &[&str]) -> Hog {
        Self::start_in(args, true)
    }

    fn start_in(args: &[&str], own_group: bool) -> Hog {
        let mut cmd = Command::new(hog_path());
        cmd.args(["--max", "4MiB"])
            .args(args)
            .stdout(Stdio::piped())
            .stdin(Stdio::null());
        if own_group {
            cmd.process_group(0);
        }
        let mut child = cmd.spawn().expect("start headroom-hog");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let pid = child.id();
        let mut hog = Hog {
            child,
            lines,
            seen: Vec::new(),
            pid,
        };
        hog.expect_line(&format!("ready pid={pid}"));
        hog
    }

    /// Wait for a line starting with `prefix`; the line.
    fn expect_line(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(e) => panic!("no line starting with {prefix:?} from the hog: {e}"),
            }
        }
    }

    /// Lines printed so far, without waiting.
    #[cfg(target_os = "linux")]
    fn printed(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// True if the hog is still running after a moment for a signal to land.
    fn alive_after_a_moment(&mut self) -> bool {
        std::thread::sleep(Duration::from_millis(300));
        self.child.try_wait().unwrap().is_none()
    }

    fn process(&self) -> ProcessRef {
        process(self.pid)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn sigint_is_delivered_and_received() {
    let mut hog = Hog::start(&["--catch", "INT"]);
    let d = decision(hog.process(), signal(SignalName::Int));
    let kind = run(&d);
    let EventKind::Action {
        rule,
        step,
        action,
        dry_run,
        ..
    } = &kind
    else {
        panic!("expected an action event, got {kind:?}");
    };
    assert_eq!(
        (rule.as_str(), *step, action.as_str(), *dry_run),
        ("test-rule", 0, "SIGINT", false)
    );
    assert_eq!(
        outcome(kind),
        (Outcome::Done, "footprint 4 MiB > 2 MiB".to_string())
    );
    let line = hog.expect_line("signal ");
    assert!(line.starts_with("signal SIGINT footprint="), "{line}");
    assert!(hog.alive_after_a_moment(), "the hog catches SIGINT");
}

#[test]
fn a_changed_identity_sends_nothing() {
    // The hog does not catch SIGINT: a delivered one would end it.
    let mut hog = Hog::start(&[]);
    let mut p = hog.process();
    p.start += 1;
    let d = decision(p, signal(SignalName::Int));
    assert_eq!(outcome(run(&d)).0, Outcome::IdentityChanged);
    assert!(hog.alive_after_a_moment(), "a signal reached the hog");
}

/// A shell picked under its name that execs into another program before
/// the signal: the identity (pid, start time, pidfd) still matches, but the
/// decision judged `sh`, so nothing is sent; a decision made on what it
/// runs now is carried out.
#[test]
fn a_process_that_exec_d_since_the_decision_is_not_signalled() {
    let dir = private_dir();
    let go = dir.path().join("go");
    // The hog does not catch SIGTERM: a delivered one ends it.
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(r#"while [ ! -e "$0" ]; do sleep 0.05; done; exec "$1" --max 4MiB"#)
        .arg(&go)
        .arg(hog_path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let picked = identity::current(pid).unwrap().expect("the shell runs");
    let mut p = process(pid);
    p.name = picked.name.clone();
    std::fs::write(&go, b"").unwrap();
    let deadline = Instant::now() + WAIT;
    let now = loop {
        let now = identity::current(pid).unwrap().expect("it runs");
        if now.name != picked.name || Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        (now.name.as_str(), now.start),
        ("headroom-hog", picked.start)
    );
    let why = refusal(run(&decision(p.clone(), signal(SignalName::Term))));
    std::thread::sleep(Duration::from_millis(300));
    let alive = child.try_wait().unwrap().is_none();
    p.name = now.name;
    let after = outcome(run(&decision(p, signal(SignalName::Term)))).0;
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert_eq!(
        why,
        format!(
            "pid {pid} ({}) now goes by headroom-hog: it exec'd (or renamed itself) after the \
             sample this decision judged, so it is not signalled for what it ran then; the next \
             sample classifies what it runs now",
            picked.name
        )
    );
    assert!(
        alive,
        "the exec'd process got the signal meant for the shell"
    );
    assert_eq!(after, Outcome::Done);
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}

/// A process that goes by another name at every signal than in the
/// decision (a Linux process may rename itself at will) is refused once,
/// then signalled: renaming cannot switch enforcement off.
#[test]
fn a_process_whose_name_keeps_changing_is_refused_once_then_signalled() {
    // The hog does not catch SIGTERM: a delivered one ends it.
    let mut hog = Hog::start(&[]);
    let mut p = hog.process();
    p.name = "renamed-since".to_string();
    let d = decision(p, signal(SignalName::Term));
    let (mut act, rx) = actuator();
    act.execute(&d);
    let first = refusal(rx.recv_timeout(WAIT).expect("an event").kind);
    assert!(first.contains("now goes by headroom-hog"), "{first}");
    assert!(hog.alive_after_a_moment(), "the first change is refused");
    act.execute(&d);
    let second = outcome(rx.recv_timeout(WAIT).expect("an event").kind).0;
    assert_eq!(second, Outcome::Done);
    let status = hog.child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}

#[test]
fn a_reaped_process_is_gone() {
    let mut hog = Hog::start(&[]);
    let p = hog.process();
    hog.child.kill().unwrap();
    hog.child.wait().unwrap();
    let d = decision(p, signal(SignalName::Int));
    assert_eq!(outcome(run(&d)).0, Outcome::Gone);
}

#[test]
fn pid_1_is_refused() {
    let mut p = process(std::process::id());
    p.pid = 1;
    let mut d = decision(p, signal(SignalName::Term));
    d.dry_run = true;
    assert_eq!(refusal(run(&d)), "pid 1 is init; headroom never signals it");
}

#[test]
fn headroom_itself_is_refused() {
    let me = std::process::id();
    let mut d = decision(process(me), signal(SignalName::Term));
    d.dry_run = true;
    assert_eq!(
        refusal(run(&d)),
        format!("pid {me} (headroom-hog) is headroom itself")
    );
}

#[test]
fn headroom_ancestors_are_refused() {
    let parent = std::os::unix::process::parent_id();
    let grandparent = identity::parent(parent).unwrap();
    for pid in std::iter::once(parent).chain(grandparent.filter(|&p| p > 1)) {
        let mut d = decision(process(pid), signal(SignalName::Term));
        d.dry_run = true;
        let why = refusal(run(&d));
        assert!(
            why.contains("is an ancestor of headroom"),
            "pid {pid}: {why}"
        );
    }
}

// The handler check reads /proc on Linux; other platforms bring their own.
#[cfg(target_os = "linux")]
#[test]
fn require_handler_skips_a_process_that_does_not_catch_the_signal() {
    let mut hog = Hog::start(&["--catch", "INT"]);
    let d = decision(
        hog.process(),
        Action::Signal {
            signal: SignalName::Usr1,
            require_handler: true,
            process_group: false,
        },
    );
    match run(&d) {
        EventKind::Skipped { reason, action, .. } => {
            assert_eq!(action, "SIGUSR1");
            assert_eq!(
                reason,
                format!(
                    "pid {} does not catch SIGUSR1 (its default action would kill it)",
                    hog.pid
                )
            );
        }
        other => panic!("expected a skip, got {other:?}"),
    }
    assert!(hog.alive_after_a_moment(), "SIGUSR1 reached the hog");
    assert!(hog.printed().iter().all(|l| !l.starts_with("signal")));
}

// The handler check reads /proc on Linux; other platforms bring their own.
#[cfg(target_os = "linux")]
#[test]
fn require_handler_delivers_to_a_process_that_catches_the_signal() {
    let mut hog = Hog::start(&["--catch", "USR1"]);
    let d = decision(
        hog.process(),
        Action::Signal {
            signal: SignalName::Usr1,
            require_handler: true,
            process_group: false,
        },
    );
    assert_eq!(outcome(run(&d)).0, Outcome::Done);
    hog.expect_line("signal SIGUSR1 ");
    assert!(hog.alive_after_a_moment());
}

// The handler check reads /proc on Linux; other platforms bring their own.
#[cfg(target_os = "linux")]
#[test]
fn the_process_group_signal_reaches_the_hogs_child() {
    let mut hog = Hog::start(&["--catch", "INT", "--child"]);
    // The child line comes before `ready`: it was read while waiting.
    let child_pid: u32 = hog
        .seen
        .iter()
        .find_map(|l| l.strip_prefix("child pid="))
        .expect("a child line")
        .parse()
        .unwrap();
    let stat = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    let d = decision(
        hog.process(),
        Action::Signal {
            signal: SignalName::Int,
            require_handler: true,
            process_group: true,
        },
    );
    let (o, _) = outcome(run(&d));
    assert_eq!(o, Outcome::Done);
    hog.expect_line("signal SIGINT ");
    // The child `sleep` does not catch SIGINT: it ends (a zombie until the
    // hog exits, or gone).
    let deadline = Instant::now() + WAIT;
    loop {
        match stat(child_pid) {
            None => break,
            Some(s)
                if s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z')) =>
            {
                break;
            }
            Some(_) if Instant::now() > deadline => panic!("the child {child_pid} still runs"),
            Some(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    assert!(hog.alive_after_a_moment());
}

#[test]
fn headrooms_own_process_group_is_refused() {
    // Spawned without a group of its own: it shares the test's group.
    let mut hog = Hog::start_in(&[], false);
    let d = decision(
        hog.process(),
        Action::Signal {
            signal: SignalName::Int,
            require_handler: false,
            process_group: true,
        },
    );
    let why = refusal(run(&d));
    assert!(why.contains("is in headroom's own process group"), "{why}");
    assert!(hog.alive_after_a_moment());
}

#[test]
fn a_dry_run_sends_nothing() {
    let mut hog = Hog::start(&[]);
    let mut d = decision(hog.process(), signal(SignalName::Int));
    d.dry_run = true;
    let kind = run(&d);
    assert!(matches!(kind, EventKind::Action { dry_run: true, .. }));
    assert_eq!(
        outcome(kind),
        (
            Outcome::DryRun,
            format!("would send SIGINT to pid {} (headroom-hog)", hog.pid)
        )
    );
    assert!(hog.alive_after_a_moment(), "the dry run sent SIGINT");
}

/// The environment a process started with, from `/proc/PID/environ`
/// (or, elsewhere, as `env` prints it): `NAME=value` each, sorted.
fn read_environ(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap();
    let mut vars: Vec<String> = bytes
        .split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
        .collect();
    vars.sort();
    vars
}

/// A hook that copies its whole starting environment to `out`.
fn env_dumping_hook(out: &Path) -> Action {
    hook(
        &[
            "-c",
            "if [ -r /proc/$$/environ ]; then cat /proc/$$/environ; \
             else env | tr '\\n' '\\000'; fi > \"$1\"",
            "hook",
            out.to_str().unwrap(),
        ],
        WAIT,
    )
}

#[test]
fn a_hook_sees_the_headroom_variables() {
    let dir = private_dir();
    let out = dir.path().join("env");
    let mut p = process(std::process::id());
    p.name = "python3".into();
    p.user = Some("ada".into());
    p.kernel_id = Some("3f2a9c".into());
    p.notebook = Some("experiments/train.ipynb".into());
    let d = decision(p.clone(), env_dumping_hook(&out));
    let (o, detail) = outcome(run(&d));
    assert_eq!(
        (o, detail.as_str()),
        (Outcome::Done, "footprint 4 MiB > 2 MiB")
    );
    let env = read_environ(&out);
    let home = if is_root() {
        "/".to_string()
    } else {
        std::env::var("HOME").unwrap_or_else(|_| "/".into())
    };
    let expected = [
        "HEADROOM_ACTION=hook /bin/sh".to_string(),
        "HEADROOM_DRY_RUN=0".to_string(),
        format!("HEADROOM_FOOTPRINT_BYTES={}", 4 << 20),
        "HEADROOM_KERNEL_ID=3f2a9c".to_string(),
        "HEADROOM_LIMIT=footprint > 2 MiB".to_string(),
        "HEADROOM_NAME=python3".to_string(),
        "HEADROOM_NOTEBOOK=experiments/train.ipynb".to_string(),
        format!("HEADROOM_PID={}", p.pid),
        "HEADROOM_REASON=footprint 4 MiB > 2 MiB".to_string(),
        "HEADROOM_RULE=test-rule".to_string(),
        "HEADROOM_STEP=0".to_string(),
        "HEADROOM_USER=ada".to_string(),
        format!("HOME={home}"),
        "LANG=C.UTF-8".to_string(),
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
    ];
    assert_eq!(env, expected);
}

#[test]
fn a_hook_gets_nothing_of_headrooms_environment_and_escaped_hostile_text() {
    let dir = private_dir();
    let out = dir.path().join("env");
    let mut p = process(std::process::id());
    p.name = HOSTILE.into();
    p.user = Some("ada\u{1b}[2J".into());
    p.kernel_id = Some("3f2a\n\u{7}".into());
    // A NUL cannot be in an environment variable: it must be escaped, or
    // the hook would not start at all.
    p.notebook = Some("a\u{0}b.ipynb".into());
    let mut d = decision(p, env_dumping_hook(&out));
    d.reason = format!("{HOSTILE} grew");
    // What the test runner's environment holds (CARGO_*, RUST_*, HOME, a
    // PATH with the user's directories) must not reach the hook.
    let ours: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
    assert!(ours.iter().any(|k| k.starts_with("CARGO")), "{ours:?}");
    assert_eq!(outcome(run(&d)).0, Outcome::Done);
    let env = read_environ(&out);
    let names: Vec<&str> = env.iter().map(|v| v.split('=').next().unwrap()).collect();
    assert_eq!(
        names,
        [
            "HEADROOM_ACTION",
            "HEADROOM_DRY_RUN",
            "HEADROOM_FOOTPRINT_BYTES",
            "HEADROOM_KERNEL_ID",
            "HEADROOM_LIMIT",
            "HEADROOM_NAME",
            "HEADROOM_NOTEBOOK",
            "HEADROOM_PID",
            "HEADROOM_REASON",
            "HEADROOM_RULE",
            "HEADROOM_STEP",
            "HEADROOM_USER",
            "HOME",
            "LANG",
            "PATH",
        ]
    );
    for v in &env {
        assert!(
            !v.chars().any(char::is_control),
            "raw control byte in {v:?}"
        );
    }
    for expected in [
        "HEADROOM_NAME=\\u{1b}[31mRED\\n\\u{7}<b>",
        "HEADROOM_USER=ada\\u{1b}[2J",
        "HEADROOM_KERNEL_ID=3f2a\\n\\u{7}",
        "HEADROOM_NOTEBOOK=a\\u{0}b.ipynb",
        "HEADROOM_REASON=\\u{1b}[31mRED\\n\\u{7}<b> grew",
    ] {
        assert!(
            env.iter().any(|v| v == expected),
            "{expected} not in {env:?}"
        );
    }
}

#[test]
fn a_hook_runs_in_the_root_directory() {
    let dir = private_dir();
    let out = dir.path().join("cwd");
    let d = decision(
        process(std::process::id()),
        hook(&["-c", "pwd > \"$1\"", "hook", out.to_str().unwrap()], WAIT),
    );
    assert_eq!(outcome(run(&d)).0, Outcome::Done);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "/\n");
}

#[test]
fn a_hook_that_exits_3_failed() {
    let d = decision(process(std::process::id()), hook(&["-c", "exit 3"], WAIT));
    assert_eq!(outcome(run(&d)).0, Outcome::Failed("exit status 3".into()));
}

#[test]
fn a_hook_past_its_timeout_is_killed() {
    let dir = private_dir();
    let pidfile = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let d = decision(
        process(std::process::id()),
        hook(&["-c", &script], Duration::from_millis(300)),
    );
    let (mut act, rx) = actuator();
    let began = Instant::now();
    act.execute(&d);
    // execute returns at once; the hook reports later.
    assert!(rx.try_recv().is_err());
    let kind = rx.recv_timeout(WAIT).expect("the hook's event").kind;
    assert_eq!(
        outcome(kind).0,
        Outcome::Failed("timed out after 300ms".into())
    );
    assert!(began.elapsed() >= Duration::from_millis(300));
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        identity::current_start(pid).unwrap(),
        None,
        "the hook still runs"
    );
    // The thread reports before it returns: give it a moment to end.
    let deadline = Instant::now() + WAIT;
    while act.pending() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(act.pending(), 0);
}

#[test]
fn a_relative_hook_command_is_refused() {
    let mut d = decision(process(std::process::id()), hook(&[], WAIT));
    d.action = Action::Hook {
        command: PathBuf::from("bin/hook"),
        args: Vec::new(),
        timeout: WAIT,
    };
    let why = refusal(run(&d));
    assert!(why.contains("bin/hook is not an absolute path"), "{why}");
}

#[test]
fn a_dry_run_runs_no_hook() {
    let dir = private_dir();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let mut d = decision(process(std::process::id()), hook(&["-c", &script], WAIT));
    d.dry_run = true;
    let (o, detail) = outcome(run(&d));
    assert_eq!(o, Outcome::DryRun);
    assert_eq!(detail, format!("would run /bin/sh -c {script}"));
    assert!(!marker.exists());
}

#[cfg(target_os = "linux")]
#[test]
fn a_notification_without_a_notifier_fails_with_the_reason() {
    let empty = tempfile::tempdir().unwrap();
    let (tx, rx) = mpsc::channel();
    let opts = ActuatorOptions {
        notifier_dirs: vec![empty.path().to_path_buf()],
        ..ActuatorOptions::default()
    };
    let mut act = Actuator::new(opts, tx);
    let d = decision(process(std::process::id()), Action::Notify);
    act.execute(&d);
    act.execute(&d);
    for _ in 0..2 {
        let kind = rx.recv_timeout(WAIT).unwrap().kind;
        match outcome(kind).0 {
            Outcome::Failed(why) => assert!(
                why.starts_with("no desktop notifier: notify-send not found in "),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
    }
}

/// A stand-in `notify-send` in a directory of its own that writes its
/// arguments, NUL-separated, to `args` in the same directory; and a runtime
/// directory with a session bus for headroom's own uid.
#[cfg(target_os = "linux")]
fn recording_notifier() -> (tempfile::TempDir, PathBuf, ActuatorOptions) {
    let dir = private_dir();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let args = dir.path().join("args");
    let notifier = bin.join("notify-send");
    std::fs::write(
        &notifier,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\000' \"$a\"; done > {}\n",
            args.display()
        ),
    )
    .unwrap();
    crate::support::chmod(&notifier, 0o755);
    let runtime = dir.path().join("run");
    let own = runtime.join(headroom::os::this_process::effective_uid().to_string());
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join("bus"), "").unwrap();
    let opts = ActuatorOptions {
        notifier_dirs: vec![bin],
        runtime_dir: runtime,
        ..ActuatorOptions::default()
    };
    (dir, args, opts)
}

#[cfg(target_os = "linux")]
#[test]
fn a_notification_body_carries_no_markup_and_no_control_characters() {
    let (_dir, args, opts) = recording_notifier();
    let (tx, rx) = mpsc::channel();
    let mut act = Actuator::new(opts, tx);
    let mut p = process(std::process::id());
    p.name = HOSTILE.into();
    // The notification goes to headroom's own session.
    p.uid = None;
    let mut d = decision(p, Action::Notify);
    d.reason = "footprint 4 MiB > 2 MiB & <i>growing</i>".into();
    act.execute(&d);
    let kind = rx.recv_timeout(WAIT).unwrap().kind;
    assert_eq!(outcome(kind).0, Outcome::Done);
    let bytes = std::fs::read(&args).unwrap();
    let argv: Vec<String> = bytes
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8(a.to_vec()).unwrap())
        .collect();
    assert_eq!(
        argv,
        [
            "--app-name=headroom",
            "--urgency=critical",
            "--",
            "headroom: test-rule",
            &format!(
                "\\u{{1b}}[31mRED\\n\\u{{7}}&lt;b&gt; (pid {}): footprint 4 MiB &gt; 2 MiB \
                 &amp; &lt;i&gt;growing&lt;/i&gt;",
                std::process::id()
            ),
        ]
    );
}

#[test]
fn a_dry_run_notification_names_the_process_escaped() {
    let (tx, rx) = mpsc::channel();
    let mut act = Actuator::new(ActuatorOptions::default(), tx);
    let mut p = process(std::process::id());
    p.name = HOSTILE.into();
    let mut d = decision(p, Action::Notify);
    d.dry_run = true;
    act.execute(&d);
    let (o, detail) = outcome(rx.recv_timeout(WAIT).unwrap().kind);
    assert_eq!(o, Outcome::DryRun);
    assert!(!detail.chars().any(char::is_control), "{detail:?}");
    assert!(
        detail.contains("\\u{1b}[31mRED\\n\\u{7}<b> (pid "),
        "{detail}"
    );
}
