//! `headroom service install|uninstall`: run the daemon under launchd
//! (macOS) or systemd (Linux), for the whole machine or for one user.
//!
//! Installing is planned first and carried out second. [`plan_install`] and
//! [`plan_uninstall`] are pure: from [`Params`] they work out every
//! directory, file and command, render the launchd plist or systemd unit,
//! and return a [`Plan`]. `--print` shows the plan ([`Plan::render`]);
//! [`Plan::execute`] carries it out. Tests check the plans for both
//! managers on any OS.
//!
//! | | launchd (macOS) | systemd (Linux) |
//! |---|---|---|
//! | `--system` | LaunchDaemon `io.headroom.daemon` in `/Library/LaunchDaemons`, root, every user's processes | `/etc/systemd/system/headroom.service`, root with four capabilities |
//! | `--user` | LaunchAgent `io.headroom.agent` in `~/Library/LaunchAgents`, this user's processes | `~/.config/systemd/user/headroom.service` |
//!
//! The plist is written by a small emitter here (strings, booleans,
//! integers, arrays, dictionaries: what the plists use) rather than an XML
//! library; the tests read it back with the `plist` crate.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The launchd label of the LaunchDaemon.
pub const DAEMON_LABEL: &str = "io.headroom.daemon";
/// The launchd label of the LaunchAgent.
pub const AGENT_LABEL: &str = "io.headroom.agent";
/// The systemd unit name.
pub const UNIT_NAME: &str = "headroom.service";

/// `admin` on macOS: the group of administrator accounts, which may read
/// the LaunchDaemon's logs without sudo.
const MACOS_ADMIN_GID: u32 = 80;

/// Which service manager to write for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Manager {
    Launchd,
    Systemd,
}

impl Manager {
    /// This OS's manager, `None` where headroom knows none.
    pub fn native() -> Option<Self> {
        match std::env::consts::OS {
            "macos" => Some(Manager::Launchd),
            "linux" => Some(Manager::Systemd),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Manager::Launchd => "launchd",
            Manager::Systemd => "systemd",
        }
    }
}

/// Whole machine (root) or one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    System,
    User,
}

impl Scope {
    pub fn flag(self) -> &'static str {
        match self {
            Scope::System => "--system",
            Scope::User => "--user",
        }
    }
}

/// Everything a plan depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub manager: Manager,
    pub scope: Scope,
    /// The headroom executable, absolute.
    pub binary: PathBuf,
    /// The config file passed to `headroom run --config`, absolute; `None`
    /// for the default path of this manager and scope.
    pub config: Option<PathBuf>,
    /// The user's home directory (user scope).
    pub home: Option<PathBuf>,
    /// The user's uid (the launchd domain `gui/<uid>`).
    pub uid: u32,
}

/// Why no plan could be made or carried out.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{what} must be an absolute path, got {path}")]
    NotAbsolute { what: &'static str, path: PathBuf },
    #[error(
        "{what} {path} cannot go into a {manager} file: it is not UTF-8 or holds control characters; move it to a plainer path"
    )]
    Unwritable {
        what: &'static str,
        path: PathBuf,
        manager: &'static str,
    },
    #[error("the user service needs a home directory: set HOME")]
    NoHome,
    #[error("{path} is a symbolic link; refusing to write through it (remove it and try again)")]
    Symlink { path: PathBuf },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{command}` failed ({status}); the steps before it were done, see above")]
    Command { command: String, status: String },
}

/// The paths a manager and scope use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The plist or unit file.
    pub service_file: PathBuf,
    pub config_dir: PathBuf,
    pub config_file: PathBuf,
    /// Where headroom keeps state; created by the installer under launchd,
    /// by systemd itself (`StateDirectory=`) under systemd.
    pub state_dir: PathBuf,
    /// The log directory (launchd's StandardOutPath/StandardErrorPath, or
    /// systemd's `LogsDirectory=`).
    pub log_dir: PathBuf,
}

fn home(params: &Params) -> Result<&Path, ServiceError> {
    let home = params.home.as_deref().ok_or(ServiceError::NoHome)?;
    absolute("the home directory", home)?;
    Ok(home)
}

fn absolute(what: &'static str, path: &Path) -> Result<(), ServiceError> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(ServiceError::NotAbsolute {
            what,
            path: path.to_owned(),
        })
    }
}

/// The paths for these parameters.
pub fn layout(params: &Params) -> Result<Layout, ServiceError> {
    let l = match (params.manager, params.scope) {
        (Manager::Launchd, Scope::System) => {
            let support = PathBuf::from("/Library/Application Support/headroom");
            Layout {
                service_file: PathBuf::from(format!("/Library/LaunchDaemons/{DAEMON_LABEL}.plist")),
                config_file: support.join("headroom.toml"),
                state_dir: support.join("state"),
                config_dir: support,
                log_dir: PathBuf::from("/Library/Logs/headroom"),
            }
        }
        (Manager::Launchd, Scope::User) => {
            let home = home(params)?;
            let support = home.join("Library/Application Support/headroom");
            Layout {
                service_file: home.join(format!("Library/LaunchAgents/{AGENT_LABEL}.plist")),
                config_file: support.join("headroom.toml"),
                state_dir: support.join("state"),
                config_dir: support,
                log_dir: home.join("Library/Logs/headroom"),
            }
        }
        (Manager::Systemd, Scope::System) => Layout {
            service_file: PathBuf::from(format!("/etc/systemd/system/{UNIT_NAME}")),
            config_dir: PathBuf::from("/etc/headroom"),
            config_file: PathBuf::from("/etc/headroom/headroom.toml"),
            state_dir: PathBuf::from("/var/lib/headroom"),
            log_dir: PathBuf::from("/var/log/headroom"),
        },
        (Manager::Systemd, Scope::User) => {
            // systemd's user-mode StateDirectory= and LogsDirectory= live
            // under $XDG_STATE_HOME (~/.local/state); headroom assumes the
            // default location.
            let home = home(params)?;
            Layout {
                service_file: home.join(format!(".config/systemd/user/{UNIT_NAME}")),
                config_dir: home.join(".config/headroom"),
                config_file: home.join(".config/headroom/headroom.toml"),
                state_dir: home.join(".local/state/headroom"),
                log_dir: home.join(".local/state/log/headroom"),
            }
        }
    };
    Ok(l)
}

/// The config file the service will run with.
pub fn config_path(params: &Params, layout: &Layout) -> Result<PathBuf, ServiceError> {
    match &params.config {
        Some(c) => {
            absolute("the config file", c)?;
            Ok(c.clone())
        }
        None => Ok(layout.config_file.clone()),
    }
}

/// `headroom run --config FILE` as an argument vector.
pub fn program_arguments(binary: &Path, config: &Path) -> Vec<String> {
    vec![
        binary.display().to_string(),
        "run".to_owned(),
        "--config".to_owned(),
        config.display().to_string(),
    ]
}

// --- plist ---------------------------------------------------------------

/// A property-list value of the kinds the plists use.
#[derive(Debug, Clone, PartialEq)]
pub enum PlistValue {
    String(String),
    Bool(bool),
    Integer(i64),
    Array(Vec<PlistValue>),
    Dict(Vec<(String, PlistValue)>),
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

fn write_plist_value(out: &mut String, v: &PlistValue, depth: usize) {
    let pad = "\t".repeat(depth);
    match v {
        PlistValue::String(s) => {
            let _ = writeln!(out, "{pad}<string>{}</string>", xml_escape(s));
        }
        PlistValue::Bool(b) => {
            let _ = writeln!(out, "{pad}<{b}/>");
        }
        PlistValue::Integer(n) => {
            let _ = writeln!(out, "{pad}<integer>{n}</integer>");
        }
        PlistValue::Array(items) => {
            let _ = writeln!(out, "{pad}<array>");
            for item in items {
                write_plist_value(out, item, depth + 1);
            }
            let _ = writeln!(out, "{pad}</array>");
        }
        PlistValue::Dict(entries) => {
            let _ = writeln!(out, "{pad}<dict>");
            for (k, item) in entries {
                let _ = writeln!(out, "{pad}\t<key>{}</key>", xml_escape(k));
                write_plist_value(out, item, depth + 1);
            }
            let _ = writeln!(out, "{pad}</dict>");
        }
    }
}

/// An XML property list (the format `plutil -lint` accepts) of a top-level
/// dictionary.
pub fn render_plist(dict: Vec<(String, PlistValue)>) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n",
    );
    write_plist_value(&mut out, &PlistValue::Dict(dict), 0);
    out.push_str("</plist>\n");
    out
}

/// Text for a plist or unit: UTF-8 without control characters.
fn text_of(what: &'static str, path: &Path, manager: Manager) -> Result<String, ServiceError> {
    match path.to_str() {
        Some(s) if !s.chars().any(char::is_control) => Ok(s.to_owned()),
        _ => Err(ServiceError::Unwritable {
            what,
            path: path.to_owned(),
            manager: manager.as_str(),
        }),
    }
}

/// The open-file limits the launchd plists set (`NumberOfFiles`): the soft
/// limit the daemon starts with and the hard limit it may raise it to. The
/// hard one matches the systemd unit's `LimitNOFILE`.
pub const SOFT_OPEN_FILES: i64 = 4096;
pub const HARD_OPEN_FILES: i64 = 65536;

/// The launchd plist. Each key, and why:
///
/// - `Label`: the job's name in launchctl commands.
/// - `ProgramArguments`: `headroom run --config FILE`, absolute paths
///   (launchd neither searches PATH nor expands `~`).
/// - `RunAtLoad`: start at boot (daemon) or login (agent), not on demand:
///   there is nothing to demand it, it watches.
/// - `KeepAlive` = {`SuccessfulExit`: false}: restart after a crash or a
///   failed start, not after a clean exit (`launchctl kill TERM`, or a stop
///   on purpose).
/// - `ThrottleInterval` 10: at most one restart per 10 s, so a config that
///   keeps failing does not spin.
/// - `ProcessType` Interactive: launchd applies "no resource limits", like
///   an app. Standard (the default) and Background throttle CPU and I/O,
///   and the daemon has to act exactly when the machine is short of memory
///   and paging: a throttled watcher reacts too late.
/// - `ExitTimeOut` 10: seconds between SIGTERM and SIGKILL at stop; the
///   daemon shuts down within one tick.
/// - `Umask` 0o077 (63): the journal, post-mortems and anything else the
///   daemon creates are its owner's alone; they name other users'
///   processes and notebooks.
/// - `SoftResourceLimits`/`HardResourceLimits` `NumberOfFiles` 4096/65536:
///   launchd's default soft limit is 256 open files, which a few dozen HTTP
///   clients would use up; the daemon raises its soft limit to the hard one
///   at start, as with systemd's `LimitNOFILE=65536`.
/// - `StandardOutPath`/`StandardErrorPath`: one log file in
///   `/Library/Logs/headroom/` (daemon) or `~/Library/Logs/headroom/`
///   (agent), where Console.app finds it. headroom logs to stderr.
/// - `EnvironmentVariables`: none for the daemon, which keeps launchd's
///   PATH of system directories: root must not resolve hook commands in
///   Homebrew's user-writable prefixes (give hooks absolute paths). The
///   agent runs as the user and gets Homebrew's prefixes on its PATH, so
///   hooks find the user's tools.
pub fn launchd_plist(params: &Params) -> Result<String, ServiceError> {
    let layout = layout(params)?;
    let config = config_path(params, &layout)?;
    absolute("the headroom binary", &params.binary)?;
    text_of("the headroom binary", &params.binary, Manager::Launchd)?;
    text_of("the config file", &config, Manager::Launchd)?;
    let log = text_of(
        "the log file",
        &layout.log_dir.join("headroom.log"),
        Manager::Launchd,
    )?;
    let label = match params.scope {
        Scope::System => DAEMON_LABEL,
        Scope::User => AGENT_LABEL,
    };
    let s = |v: &str| PlistValue::String(v.to_owned());
    let mut dict = vec![
        ("Label".to_owned(), s(label)),
        (
            "ProgramArguments".to_owned(),
            PlistValue::Array(
                program_arguments(&params.binary, &config)
                    .into_iter()
                    .map(PlistValue::String)
                    .collect(),
            ),
        ),
        ("RunAtLoad".to_owned(), PlistValue::Bool(true)),
        (
            "KeepAlive".to_owned(),
            PlistValue::Dict(vec![("SuccessfulExit".to_owned(), PlistValue::Bool(false))]),
        ),
        ("ThrottleInterval".to_owned(), PlistValue::Integer(10)),
        ("ProcessType".to_owned(), s("Interactive")),
        ("ExitTimeOut".to_owned(), PlistValue::Integer(10)),
        ("Umask".to_owned(), PlistValue::Integer(0o077)),
        (
            "SoftResourceLimits".to_owned(),
            PlistValue::Dict(vec![(
                "NumberOfFiles".to_owned(),
                PlistValue::Integer(SOFT_OPEN_FILES),
            )]),
        ),
        (
            "HardResourceLimits".to_owned(),
            PlistValue::Dict(vec![(
                "NumberOfFiles".to_owned(),
                PlistValue::Integer(HARD_OPEN_FILES),
            )]),
        ),
        ("StandardOutPath".to_owned(), s(&log)),
        ("StandardErrorPath".to_owned(), s(&log)),
    ];
    if params.scope == Scope::User {
        dict.push((
            "EnvironmentVariables".to_owned(),
            PlistValue::Dict(vec![(
                "PATH".to_owned(),
                s("/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
            )]),
        ));
    }
    Ok(render_plist(dict))
}

// --- systemd -------------------------------------------------------------

/// One `ExecStart=` word, quoted for systemd where needed: `%` is a
/// specifier and `$` a variable, both doubled; whitespace, quotes and
/// backslashes need double quotes (systemd.service(5), "Command lines").
fn systemd_word(s: &str) -> String {
    let escaped = s.replace('%', "%%").replace('$', "$$");
    if escaped.is_empty()
        || escaped
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';'))
    {
        format!("\"{}\"", escaped.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        escaped
    }
}

/// The systemd unit. The system unit runs as root but keeps only the
/// capabilities headroom uses, and is sandboxed otherwise; see the comments
/// in the unit itself.
pub fn systemd_unit(params: &Params) -> Result<String, ServiceError> {
    let layout = layout(params)?;
    let config = config_path(params, &layout)?;
    absolute("the headroom binary", &params.binary)?;
    let binary = text_of("the headroom binary", &params.binary, Manager::Systemd)?;
    let config = text_of("the config file", &config, Manager::Systemd)?;
    let exec = program_arguments(Path::new(&binary), Path::new(&config))
        .iter()
        .map(|w| systemd_word(w))
        .collect::<Vec<_>>()
        .join(" ");
    let unit = match params.scope {
        Scope::System => format!(
            "\
# headroom: memory-pressure daemon for ML workloads, for the whole machine.
# Written by `headroom service install --system`; `headroom service
# uninstall --system` removes it. Reload the config: systemctl reload headroom.

[Unit]
Description=headroom memory-pressure daemon for ML workloads
After=local-fs.target

[Service]
Type=exec
ExecStart={exec}
ExecReload=kill -HUP $MAINPID
Restart=on-failure
RestartSec=5s
TimeoutStopSec=10s

# The sampler keeps /proc/[pid]/statm open between ticks, up to half the
# soft limit of open files.
LimitNOFILE=65536
# Killed last by the OOM killer: headroom is what acts before it has to.
OOMScoreAdjust=-900

# /var/lib/headroom, /var/log/headroom and /etc/headroom. What the daemon
# creates (the journal names other users' processes) is root's alone.
UMask=0077
StateDirectory=headroom
StateDirectoryMode=0700
LogsDirectory=headroom
LogsDirectoryMode=0750
ConfigurationDirectory=headroom

# Root, with only the capabilities it uses: CAP_KILL to signal other
# users' processes, CAP_SYS_PTRACE to read their /proc/[pid]/maps and exe,
# CAP_DAC_READ_SEARCH to read their owner-only /proc entries, and
# CAP_SYS_RESOURCE for PSI triggers with a 1 s window (psi.rst: without it,
# windows must be multiples of 2 s).
CapabilityBoundingSet=CAP_KILL CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_SYS_RESOURCE
NoNewPrivileges=yes

# Sandbox. /proc stays writable (PSI triggers are written to
# /proc/pressure/memory); no PrivateDevices=, which would hide GPUs.
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
SystemCallArchitectures=native
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6

[Install]
WantedBy=multi-user.target
"
        ),
        Scope::User => format!(
            "\
# headroom: memory-pressure daemon for ML workloads, for this user's
# processes. Written by `headroom service install --user`; `headroom
# service uninstall --user` removes it.

[Unit]
Description=headroom memory-pressure daemon for ML workloads (this user)

[Service]
Type=exec
ExecStart={exec}
ExecReload=kill -HUP $MAINPID
Restart=on-failure
RestartSec=5s
TimeoutStopSec=10s
# The sampler keeps /proc/[pid]/statm open between ticks.
LimitNOFILE=65536
# ~/.local/state/headroom, this user's alone.
UMask=0077
StateDirectory=headroom
StateDirectoryMode=0700
NoNewPrivileges=yes

[Install]
WantedBy=default.target
"
        ),
    };
    Ok(unit)
}

// --- plans ---------------------------------------------------------------

/// A directory to create (or fix up) with a mode and, as root, an owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirStep {
    pub path: PathBuf,
    pub mode: u32,
    /// (uid, gid) to chown to; `None` leaves the creator's.
    pub owner: Option<(u32, u32)>,
    pub what: &'static str,
}

/// What a file step writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contents {
    /// This text, replacing the file.
    Text(String),
    /// The embedded default config, only if no file is there.
    DefaultConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStep {
    pub path: PathBuf,
    pub mode: u32,
    pub contents: Contents,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandStep {
    pub argv: Vec<String>,
    /// A failure is expected in some states (bootout of a job that is not
    /// loaded) and does not stop the plan.
    pub may_fail: bool,
}

/// Everything an install or uninstall does, in order: directories, files,
/// removals, commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub title: String,
    pub notes: Vec<String>,
    pub dirs: Vec<DirStep>,
    pub files: Vec<FileStep>,
    pub remove: Vec<PathBuf>,
    pub commands: Vec<CommandStep>,
}

impl Plan {
    /// The service file itself (0644), and for a per-user service the
    /// directory it goes in (`what` names that directory for people); a
    /// system service's directory exists already.
    fn add_service_file(&mut self, l: &Layout, system: bool, what: &'static str, text: String) {
        if let Some(parent) = l.service_file.parent().filter(|_| !system) {
            self.dirs.push(DirStep {
                path: parent.to_owned(),
                mode: 0o755,
                owner: None,
                what,
            });
        }
        self.files.push(FileStep {
            path: l.service_file.clone(),
            mode: 0o644,
            contents: Contents::Text(text),
        });
    }
}

fn command(argv: &[&str], may_fail: bool) -> CommandStep {
    CommandStep {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        may_fail,
    }
}

fn launchd_target(params: &Params) -> (String, String) {
    match params.scope {
        Scope::System => ("system".to_owned(), format!("system/{DAEMON_LABEL}")),
        Scope::User => (
            format!("gui/{}", params.uid),
            format!("gui/{}/{AGENT_LABEL}", params.uid),
        ),
    }
}

fn systemctl(params: &Params, args: &[&str]) -> CommandStep {
    let mut argv = vec!["systemctl"];
    if params.scope == Scope::User {
        argv.push("--user");
    }
    argv.extend_from_slice(args);
    command(&argv, false)
}

/// The plan for `headroom service install`.
pub fn plan_install(params: &Params) -> Result<Plan, ServiceError> {
    let l = layout(params)?;
    let config = config_path(params, &l)?;
    let system = params.scope == Scope::System;
    let mut plan = Plan {
        title: format!(
            "headroom service install {} ({})",
            params.scope.flag(),
            params.manager.as_str()
        ),
        notes: Vec::new(),
        dirs: Vec::new(),
        files: Vec::new(),
        remove: Vec::new(),
        commands: Vec::new(),
    };
    let private = if system { 0o750 } else { 0o700 };
    if params.config.is_none() {
        plan.dirs.push(DirStep {
            path: l.config_dir.clone(),
            mode: 0o755,
            owner: system.then_some((0, 0)),
            what: "config",
        });
        plan.files.push(FileStep {
            path: config.clone(),
            mode: 0o644,
            contents: Contents::DefaultConfig,
        });
    }
    match params.manager {
        Manager::Launchd => {
            plan.notes.push(match params.scope {
                Scope::System => format!(
                    "LaunchDaemon {DAEMON_LABEL}: runs as root at boot and watches every user's processes"
                ),
                Scope::User => format!(
                    "LaunchAgent {AGENT_LABEL}: runs as you at login and watches your processes only"
                ),
            });
            plan.dirs.push(DirStep {
                path: l.log_dir.clone(),
                mode: private,
                owner: system.then_some((0, MACOS_ADMIN_GID)),
                what: if system {
                    "logs (admins may read them)"
                } else {
                    "logs"
                },
            });
            plan.dirs.push(DirStep {
                path: l.state_dir.clone(),
                mode: 0o700,
                owner: system.then_some((0, 0)),
                what: "state",
            });
            plan.add_service_file(&l, system, "LaunchAgents", launchd_plist(params)?);
            let (domain, target) = launchd_target(params);
            let plist = l.service_file.display().to_string();
            // A job already loaded (reinstall) must be booted out first:
            // bootstrap refuses a loaded label. enable before bootstrap:
            // bootstrap refuses a disabled one.
            plan.commands = vec![
                command(&["launchctl", "bootout", &target], true),
                command(&["launchctl", "enable", &target], false),
                command(&["launchctl", "bootstrap", &domain, &plist], false),
            ];
        }
        Manager::Systemd => {
            plan.notes.push(match params.scope {
                Scope::System => format!(
                    "systemd unit {UNIT_NAME}: runs as root with four capabilities at boot; {} and {} are created by systemd",
                    l.state_dir.display(),
                    l.log_dir.display()
                ),
                Scope::User => format!(
                    "systemd user unit {UNIT_NAME}: runs as you while you are logged in (loginctl enable-linger to keep it running); logs go to journalctl --user -u headroom"
                ),
            });
            plan.add_service_file(&l, system, "systemd user units", systemd_unit(params)?);
            plan.commands = vec![
                systemctl(params, &["daemon-reload"]),
                systemctl(params, &["enable", UNIT_NAME]),
                systemctl(params, &["restart", UNIT_NAME]),
            ];
        }
    }
    Ok(plan)
}

/// The plan for `headroom service uninstall`: stop the service and remove
/// its file. Config, state and logs stay.
pub fn plan_uninstall(params: &Params) -> Result<Plan, ServiceError> {
    let l = layout(params)?;
    let mut plan = Plan {
        title: format!(
            "headroom service uninstall {} ({})",
            params.scope.flag(),
            params.manager.as_str()
        ),
        notes: vec![format!(
            "kept: config {}, state {}, logs {}",
            l.config_dir.display(),
            l.state_dir.display(),
            l.log_dir.display()
        )],
        dirs: Vec::new(),
        files: Vec::new(),
        remove: vec![l.service_file.clone()],
        commands: Vec::new(),
    };
    match params.manager {
        Manager::Launchd => {
            let (_, target) = launchd_target(params);
            plan.commands = vec![command(&["launchctl", "bootout", &target], true)];
        }
        Manager::Systemd => {
            let mut disable = systemctl(params, &["disable", "--now", UNIT_NAME]);
            disable.may_fail = true;
            plan.commands = vec![disable, systemctl(params, &["daemon-reload"])];
        }
    }
    Ok(plan)
}

/// A word for a shell command line, single-quoted where needed.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@%,".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn owner_name(owner: (u32, u32), manager: Manager) -> String {
    let user = if owner.0 == 0 {
        "root".to_owned()
    } else {
        owner.0.to_string()
    };
    let group = match (owner.1, manager) {
        (0, Manager::Launchd) => "wheel".to_owned(),
        (0, Manager::Systemd) => "root".to_owned(),
        (MACOS_ADMIN_GID, Manager::Launchd) => "admin".to_owned(),
        (g, _) => g.to_string(),
    };
    format!("{user}:{group}")
}

impl Plan {
    /// The plan as text, for `--print`: shell-like lines, file contents in
    /// full, comments after `#`.
    pub fn render(&self, manager: Manager) -> String {
        let mut out = format!(
            "# {}: what it would do (--print: nothing is written or run)\n",
            self.title
        );
        for n in &self.notes {
            let _ = writeln!(out, "# {n}");
        }
        if !self.dirs.is_empty() {
            out.push('\n');
        }
        for d in &self.dirs {
            let _ = write!(
                out,
                "mkdir -p -m {:04o} {}",
                d.mode,
                shell_word(&d.path.display().to_string())
            );
            if let Some(owner) = d.owner {
                let _ = write!(
                    out,
                    " && chown {} {}",
                    owner_name(owner, manager),
                    shell_word(&d.path.display().to_string())
                );
            }
            let _ = writeln!(out, "  # {}", d.what);
        }
        for f in &self.files {
            let path = shell_word(&f.path.display().to_string());
            match &f.contents {
                Contents::DefaultConfig => {
                    let _ = writeln!(
                        out,
                        "\n# if {path} does not exist: write the embedded default config (headroom print-config), mode {:04o}",
                        f.mode
                    );
                }
                Contents::Text(text) => {
                    let _ = write!(out, "\n# write {path}, mode {:04o}:\n{text}", f.mode);
                }
            }
        }
        for r in &self.remove {
            let _ = writeln!(out, "\nrm -f {}", shell_word(&r.display().to_string()));
        }
        out.push('\n');
        for c in &self.commands {
            let line: Vec<String> = c.argv.iter().map(|w| shell_word(w)).collect();
            let _ = write!(out, "{}", line.join(" "));
            if c.may_fail {
                out.push_str("  # may fail: not loaded");
            }
            out.push('\n');
        }
        out
    }

    /// Carry the plan out: directories, files, removals, then commands,
    /// stopping at the first failure that matters. Symbolic links are never
    /// written through.
    pub fn execute(&self) -> Result<(), ServiceError> {
        for d in &self.dirs {
            make_dir(d)?;
        }
        for f in &self.files {
            write_file(f)?;
        }
        for r in &self.remove {
            match std::fs::remove_file(r) {
                Ok(()) => eprintln!("removed {}", r.display()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ServiceError::Io {
                        action: "remove",
                        path: r.clone(),
                        source,
                    });
                }
            }
        }
        for c in &self.commands {
            run(c)?;
        }
        Ok(())
    }
}

fn refuse_symlink(path: &Path) -> Result<Option<std::fs::Metadata>, ServiceError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(ServiceError::Symlink {
            path: path.to_owned(),
        }),
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ServiceError::Io {
            action: "inspect",
            path: path.to_owned(),
            source,
        }),
    }
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ServiceError + 'a {
    move |source| ServiceError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

fn make_dir(d: &DirStep) -> Result<(), ServiceError> {
    use std::os::unix::fs::PermissionsExt;
    refuse_symlink(&d.path)?;
    std::fs::create_dir_all(&d.path).map_err(io_err("create", &d.path))?;
    if let Some((uid, gid)) = d.owner {
        std::os::unix::fs::chown(&d.path, Some(uid), Some(gid))
            .map_err(io_err("change the owner of", &d.path))?;
    }
    std::fs::set_permissions(&d.path, std::fs::Permissions::from_mode(d.mode))
        .map_err(io_err("set the mode of", &d.path))?;
    Ok(())
}

fn write_file(f: &FileStep) -> Result<(), ServiceError> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let existing = refuse_symlink(&f.path)?;
    let text = match &f.contents {
        Contents::DefaultConfig if existing.is_some() => {
            eprintln!("kept {}", f.path.display());
            return Ok(());
        }
        Contents::DefaultConfig => crate::config::DEFAULT_TOML.to_owned(),
        Contents::Text(t) => t.clone(),
    };
    // Write a sibling and rename it over the target, so a reader never sees
    // half a file; create_new refuses a planted file or link.
    let tmp = f.path.with_extension("tmp-headroom");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(f.mode)
        .open(&tmp)
        .map_err(io_err("create", &tmp))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_err("write", &tmp))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(f.mode))
        .map_err(io_err("set the mode of", &tmp))?;
    std::fs::rename(&tmp, &f.path).map_err(io_err("replace", &f.path))?;
    eprintln!("wrote {}", f.path.display());
    Ok(())
}

fn run(c: &CommandStep) -> Result<(), ServiceError> {
    let shown = c.argv.join(" ");
    let Some((program, args)) = c.argv.split_first() else {
        return Ok(());
    };
    eprintln!("running {shown}");
    let status = Command::new(program).args(args).status();
    match status {
        Ok(s) if s.success() => Ok(()),
        _ if c.may_fail => Ok(()),
        Ok(s) => Err(ServiceError::Command {
            command: shown,
            status: s.to_string(),
        }),
        Err(e) => Err(ServiceError::Command {
            command: shown,
            status: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(manager: Manager, scope: Scope) -> Params {
        Params {
            manager,
            scope,
            binary: PathBuf::from("/usr/local/bin/headroom"),
            config: None,
            home: Some(PathBuf::from("/Users/ann")),
            uid: 501,
        }
    }

    fn parse_plist(text: &str) -> plist::Dictionary {
        plist::Value::from_reader_xml(text.as_bytes())
            .unwrap()
            .into_dictionary()
            .unwrap()
    }

    #[test]
    fn the_emitter_escapes_what_xml_needs() {
        let text = render_plist(vec![
            ("A&B".into(), PlistValue::String("<x> & \"y\" 'z'".into())),
            ("N".into(), PlistValue::Integer(-3)),
            (
                "L".into(),
                PlistValue::Array(vec![PlistValue::Bool(true), PlistValue::Bool(false)]),
            ),
        ]);
        let d = parse_plist(&text);
        assert_eq!(
            d.get("A&B").and_then(|v| v.as_string()),
            Some("<x> & \"y\" 'z'")
        );
        assert_eq!(d.get("N").and_then(|v| v.as_signed_integer()), Some(-3));
        let l = d.get("L").and_then(|v| v.as_array()).unwrap();
        assert_eq!(l[0].as_boolean(), Some(true));
        assert_eq!(l[1].as_boolean(), Some(false));
    }

    #[test]
    fn the_daemon_plist_runs_headroom_as_root_with_absolute_paths() {
        let d = parse_plist(&launchd_plist(&params(Manager::Launchd, Scope::System)).unwrap());
        assert_eq!(d.get("Label").unwrap().as_string(), Some(DAEMON_LABEL));
        let args: Vec<&str> = d
            .get("ProgramArguments")
            .and_then(|v| v.as_array())
            .unwrap()
            .iter()
            .filter_map(|v| v.as_string())
            .collect();
        assert_eq!(
            args,
            [
                "/usr/local/bin/headroom",
                "run",
                "--config",
                "/Library/Application Support/headroom/headroom.toml"
            ]
        );
        assert_eq!(
            d.get("StandardErrorPath").unwrap().as_string(),
            Some("/Library/Logs/headroom/headroom.log")
        );
        assert!(d.get("UserName").is_none(), "LaunchDaemons run as root");
        assert!(d.get("EnvironmentVariables").is_none());
        assert_eq!(
            d.get("ProcessType").unwrap().as_string(),
            Some("Interactive")
        );
        assert_eq!(
            d.get("Umask").and_then(|v| v.as_signed_integer()),
            Some(0o077)
        );
        let files = |key: &str| {
            d.get(key)
                .and_then(|v| v.as_dictionary())
                .and_then(|l| l.get("NumberOfFiles"))
                .and_then(|v| v.as_signed_integer())
        };
        assert_eq!(files("SoftResourceLimits"), Some(4096));
        assert_eq!(files("HardResourceLimits"), Some(65536));
    }

    #[test]
    fn the_agent_plist_lives_in_the_home_directory() {
        let d = parse_plist(&launchd_plist(&params(Manager::Launchd, Scope::User)).unwrap());
        assert_eq!(d.get("Label").unwrap().as_string(), Some(AGENT_LABEL));
        assert_eq!(
            d.get("StandardOutPath").unwrap().as_string(),
            Some("/Users/ann/Library/Logs/headroom/headroom.log")
        );
        let env = d
            .get("EnvironmentVariables")
            .and_then(|v| v.as_dictionary())
            .unwrap();
        assert!(
            env.get("PATH")
                .unwrap()
                .as_string()
                .unwrap()
                .starts_with("/opt/homebrew/bin:")
        );
    }

    #[test]
    fn relative_and_unprintable_paths_are_refused() {
        let mut p = params(Manager::Launchd, Scope::System);
        p.binary = PathBuf::from("target/debug/headroom");
        assert!(matches!(
            launchd_plist(&p),
            Err(ServiceError::NotAbsolute { .. })
        ));
        let mut p = params(Manager::Systemd, Scope::System);
        p.config = Some(PathBuf::from("/etc/head\nroom.toml"));
        let err = systemd_unit(&p).unwrap_err();
        assert!(err.to_string().contains("control characters"), "{err}");
        let mut p = params(Manager::Launchd, Scope::User);
        p.home = None;
        assert!(matches!(layout(&p), Err(ServiceError::NoHome)));
    }

    #[test]
    fn systemd_words_are_quoted_only_when_needed() {
        assert_eq!(systemd_word("/usr/bin/headroom"), "/usr/bin/headroom");
        assert_eq!(systemd_word("/opt/my dir/x"), "\"/opt/my dir/x\"");
        assert_eq!(systemd_word("50%"), "50%%");
        assert_eq!(systemd_word("a\"b"), "\"a\\\"b\"");
        assert_eq!(systemd_word("$HOME"), "$$HOME");
        assert_eq!(systemd_word(""), "\"\"");
    }

    #[test]
    fn the_system_unit_keeps_four_capabilities_and_the_limits() {
        let unit = systemd_unit(&params(Manager::Systemd, Scope::System)).unwrap();
        assert!(unit.contains(
            "\nExecStart=/usr/local/bin/headroom run --config /etc/headroom/headroom.toml\n"
        ));
        assert!(unit.contains(
            "\nCapabilityBoundingSet=CAP_KILL CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_SYS_RESOURCE\n"
        ));
        for line in [
            "LimitNOFILE=65536",
            "UMask=0077",
            "StateDirectory=headroom",
            "StateDirectoryMode=0700",
            "LogsDirectory=headroom",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "WantedBy=multi-user.target",
        ] {
            assert!(unit.contains(&format!("\n{line}\n")), "{line}");
        }
        assert!(
            !unit.lines().any(|l| l.starts_with("PrivateDevices=")),
            "GPUs must stay visible"
        );
    }

    #[test]
    fn install_plans_boot_out_enable_and_bootstrap_in_that_order() {
        let plan = plan_install(&params(Manager::Launchd, Scope::User)).unwrap();
        let cmds: Vec<String> = plan.commands.iter().map(|c| c.argv.join(" ")).collect();
        assert_eq!(
            cmds,
            [
                "launchctl bootout gui/501/io.headroom.agent",
                "launchctl enable gui/501/io.headroom.agent",
                "launchctl bootstrap gui/501 /Users/ann/Library/LaunchAgents/io.headroom.agent.plist"
            ]
        );
        assert!(plan.commands[0].may_fail && !plan.commands[2].may_fail);
        let dirs: Vec<_> = plan.dirs.iter().map(|d| (d.path.clone(), d.mode)).collect();
        assert!(dirs.contains(&(PathBuf::from("/Users/ann/Library/Logs/headroom"), 0o700)));
        assert!(
            plan.files
                .iter()
                .any(|f| f.contents == Contents::DefaultConfig)
        );
    }

    #[test]
    fn a_given_config_is_used_as_is_and_not_created() {
        let mut p = params(Manager::Systemd, Scope::System);
        p.config = Some(PathBuf::from("/srv/ml/headroom.toml"));
        let plan = plan_install(&p).unwrap();
        assert!(
            plan.files
                .iter()
                .all(|f| f.contents != Contents::DefaultConfig)
        );
        assert!(
            plan.dirs.is_empty(),
            "systemd creates the state and log directories"
        );
        let unit = match &plan.files[0].contents {
            Contents::Text(t) => t.clone(),
            Contents::DefaultConfig => unreachable!(),
        };
        assert!(unit.contains("--config /srv/ml/headroom.toml\n"));
        let cmds: Vec<String> = plan.commands.iter().map(|c| c.argv.join(" ")).collect();
        assert_eq!(
            cmds,
            [
                "systemctl daemon-reload",
                "systemctl enable headroom.service",
                "systemctl restart headroom.service"
            ]
        );
    }

    #[test]
    fn uninstall_boots_out_and_removes_only_the_service_file() {
        let plan = plan_uninstall(&params(Manager::Launchd, Scope::System)).unwrap();
        assert_eq!(
            plan.remove,
            [PathBuf::from(
                "/Library/LaunchDaemons/io.headroom.daemon.plist"
            )]
        );
        assert_eq!(
            plan.commands[0].argv.join(" "),
            "launchctl bootout system/io.headroom.daemon"
        );
        let plan = plan_uninstall(&params(Manager::Systemd, Scope::User)).unwrap();
        let cmds: Vec<String> = plan.commands.iter().map(|c| c.argv.join(" ")).collect();
        assert_eq!(
            cmds,
            [
                "systemctl --user disable --now headroom.service",
                "systemctl --user daemon-reload"
            ]
        );
    }

    #[test]
    fn the_printed_plan_quotes_paths_with_spaces() {
        let text = plan_install(&params(Manager::Launchd, Scope::System))
            .unwrap()
            .render(Manager::Launchd);
        assert!(text.contains(
            "\nmkdir -p -m 0750 /Library/Logs/headroom && chown root:admin /Library/Logs/headroom  # logs"
        ), "{text}");
        assert!(
            text.contains("mkdir -p -m 0700 '/Library/Application Support/headroom/state'"),
            "{text}"
        );
        assert!(
            text.contains(
                "\nlaunchctl bootstrap system /Library/LaunchDaemons/io.headroom.daemon.plist\n"
            ),
            "{text}"
        );
        assert!(text.contains("<key>ProgramArguments</key>"), "{text}");
    }

    #[test]
    fn executing_a_plan_creates_directories_files_and_runs_commands() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("conf/headroom.toml");
        let unit = dir.path().join("units/headroom.service");
        let plan = Plan {
            title: "test".into(),
            notes: vec![],
            dirs: vec![
                DirStep {
                    path: dir.path().join("conf"),
                    mode: 0o755,
                    owner: None,
                    what: "config",
                },
                DirStep {
                    path: dir.path().join("units"),
                    mode: 0o700,
                    owner: None,
                    what: "units",
                },
            ],
            files: vec![
                FileStep {
                    path: config.clone(),
                    mode: 0o644,
                    contents: Contents::DefaultConfig,
                },
                FileStep {
                    path: unit.clone(),
                    mode: 0o600,
                    contents: Contents::Text("[Service]\n".into()),
                },
            ],
            remove: vec![dir.path().join("absent")],
            commands: vec![command(&["false"], true), command(&["true"], false)],
        };
        plan.execute().unwrap();
        assert_eq!(
            std::fs::read_to_string(&config).unwrap(),
            crate::config::DEFAULT_TOML
        );
        assert_eq!(std::fs::read_to_string(&unit).unwrap(), "[Service]\n");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&unit), 0o600);
        assert_eq!(mode(&dir.path().join("units")), 0o700);
        // A second run keeps an edited config and replaces the unit.
        std::fs::write(&config, "# edited\n").unwrap();
        plan.execute().unwrap();
        assert_eq!(std::fs::read_to_string(&config).unwrap(), "# edited\n");
        // A failing command that matters stops the plan with its name.
        let failing = Plan {
            commands: vec![command(&["false"], false)],
            ..plan.clone()
        };
        let err = failing.execute().unwrap_err();
        assert!(err.to_string().contains("`false` failed"), "{err}");
    }

    #[test]
    fn a_symlink_in_place_of_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "x").unwrap();
        let link = dir.path().join("headroom.service");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = write_file(&FileStep {
            path: link,
            mode: 0o644,
            contents: Contents::Text("y".into()),
        })
        .unwrap_err();
        assert!(matches!(err, ServiceError::Symlink { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "x");
    }
}
