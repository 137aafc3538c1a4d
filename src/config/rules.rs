//! `[[rule]]` and `[protect]`, validated: which processes a rule watches, the
//! limits and system conditions that set it off, which process it picks, and
//! the ladder of actions it climbs, gently first.
//!
//! A rule **holds** for a process when the process matches, at least one of
//! its per-process limits is exceeded (if it has any), and all of its system
//! conditions hold (if it has any). A rule with system conditions but no
//! per-process limit picks one matching process with `select`.

use std::fmt;
use std::time::Duration;

use regex::Regex;
use serde::{Serialize, Serializer};
use toml::Spanned;

use super::error::{ConfigError, Source, rule_key};
use super::raw::{RawMatch, RawProtect, RawRule, RawStep, RawWhen};
use super::units::{self, Rate, SizeLimit, format_duration};
use crate::model::{Action, SignalName};
use crate::model::{PressureLevel, ProcessSample, WorkloadKind};

/// Default time between a rule's actions on the same process once its ladder ends.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(60);
/// Default window over which growth is measured for `time_to_exhaustion`.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);

/// How long a signal takes to stop a process's growth, at most, as measured
/// (`BENCHMARKS.md`, "Time from a signal to the end of growth"): a Python
/// loop that appends arrays stops within a few milliseconds of SIGINT, but
/// one allocation of a large array in C (`np.ones`, a tensor) runs to its
/// end before the interpreter raises KeyboardInterrupt. Part of a rule's
/// default [`Rule::lead`].
pub const SIGNAL_TAKES_EFFECT: Duration = Duration::from_millis(300);
/// Default hysteresis: a limit clears when the value falls 10% below it.
pub const DEFAULT_HYSTERESIS: f64 = 0.10;
/// Default time a hook may run before it is killed.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Names protected by default: the init systems, the window server, remote
/// login and the kernel's own tasks. PID 1, the daemon and its ancestors are
/// protected whatever the config says.
pub const DEFAULT_PROTECTED: &[&str] = &[
    "launchd",
    "kernel_task",
    "WindowServer",
    "loginwindow",
    "systemd",
    "init",
    "sshd",
    "dbus-daemon",
    "Xorg",
    "gnome-shell",
    "kwin_x11",
    "kwin_wayland",
];

/// A regular expression, compared and printed by its source text.
#[derive(Debug, Clone)]
pub struct Pattern(pub Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Serialize for Pattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.as_str())
    }
}

/// A workload a rule can match: one kind, or any ML kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadMatch {
    Kind(WorkloadKind),
    AnyMl,
}

impl WorkloadMatch {
    fn parse(s: &str) -> Option<Self> {
        if s == "any-ml" {
            return Some(WorkloadMatch::AnyMl);
        }
        WorkloadKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .map(WorkloadMatch::Kind)
    }

    fn as_str(self) -> &'static str {
        match self {
            WorkloadMatch::Kind(k) => k.as_str(),
            WorkloadMatch::AnyMl => "any-ml",
        }
    }
}

impl Serialize for WorkloadMatch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Which processes a rule looks at. Every given condition must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Matcher {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workload: Vec<WorkloadMatch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<Pattern>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Pattern>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exe: Option<Pattern>,
    /// The notebook a Jupyter kernel runs, as its server names it; a kernel
    /// whose notebook is not known (yet) does not match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notebook: Option<Pattern>,
}

/// One clause of `[rule.match]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clause {
    Workload,
    Name,
    Argv,
    User,
    Exe,
    Notebook,
}

impl Clause {
    pub const ALL: [Clause; 6] = [
        Clause::Workload,
        Clause::Name,
        Clause::Argv,
        Clause::User,
        Clause::Exe,
        Clause::Notebook,
    ];

    /// The key in `[rule.match]`.
    pub fn key(self) -> &'static str {
        match self {
            Clause::Workload => "workload",
            Clause::Name => "name",
            Clause::Argv => "argv",
            Clause::User => "user",
            Clause::Exe => "exe",
            Clause::Notebook => "notebook",
        }
    }
}

/// One clause of a [`Matcher`] judged against one process, in words, for
/// `headroom explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClauseCheck {
    pub clause: Clause,
    /// What the rule asks, as configured: `["jupyter"]`, `"^python"`.
    pub wanted: String,
    /// What the process has: `jupyter`, `"python3"`, `unknown`.
    pub found: String,
    pub holds: bool,
}

impl Matcher {
    /// True if every given condition holds for `p`.
    pub fn matches(&self, p: &ProcessSample) -> bool {
        Clause::ALL
            .into_iter()
            .all(|c| self.clause_holds(c, p) != Some(false))
    }

    /// Every clause the matcher gives, judged against `p`, in the order of
    /// [`Clause::ALL`]; empty for a matcher without clauses (it matches
    /// every process). The same predicates as [`Matcher::matches`].
    pub fn clauses(&self, p: &ProcessSample) -> Vec<ClauseCheck> {
        Clause::ALL
            .into_iter()
            .filter_map(|clause| {
                let holds = self.clause_holds(clause, p)?;
                let quoted = |re: &Option<Pattern>| {
                    re.as_ref()
                        .map(|re| format!("{:?}", re.0.as_str()))
                        .unwrap_or_default()
                };
                let known =
                    |v: Option<&str>| v.map_or_else(|| "unknown".to_string(), |v| format!("{v:?}"));
                let (wanted, found) = match clause {
                    Clause::Workload => {
                        let kinds: Vec<&str> = self.workload.iter().map(|w| w.as_str()).collect();
                        let mut found = p.workload.kind.as_str().to_string();
                        if !p.workload.frameworks.is_empty() {
                            let fw: Vec<&str> =
                                p.workload.frameworks.iter().map(|f| f.as_str()).collect();
                            found.push_str(&format!(" (frameworks: {})", fw.join(", ")));
                        }
                        (format!("{kinds:?}"), found)
                    }
                    Clause::Name => (quoted(&self.name), format!("{:?}", p.name)),
                    Clause::Argv => (quoted(&self.argv), format!("{:?}", p.argv.join(" "))),
                    Clause::User => (
                        format!("{:?}", self.user.as_deref().unwrap_or_default()),
                        known(p.user.as_deref()),
                    ),
                    Clause::Exe => (quoted(&self.exe), known(p.exe.as_deref())),
                    Clause::Notebook => (
                        quoted(&self.notebook),
                        p.workload.notebook.as_deref().map_or_else(
                            || "not known (no Jupyter server named it)".to_string(),
                            |n| format!("{n:?}"),
                        ),
                    ),
                };
                Some(ClauseCheck {
                    clause,
                    wanted,
                    found,
                    holds,
                })
            })
            .collect()
    }

    /// Whether `clause` holds for `p`; `None` when the matcher does not
    /// give it.
    fn clause_holds(&self, clause: Clause, p: &ProcessSample) -> Option<bool> {
        let pattern = |re: &Option<Pattern>, text: Option<&str>| {
            re.as_ref().map(|re| text.is_some_and(|t| re.0.is_match(t)))
        };
        match clause {
            Clause::Workload => (!self.workload.is_empty()).then(|| {
                self.workload.iter().any(|w| match w {
                    WorkloadMatch::AnyMl => p.workload.is_ml(),
                    WorkloadMatch::Kind(k) => p.workload.is(*k),
                })
            }),
            Clause::Name => pattern(&self.name, Some(&p.name)),
            Clause::Argv => self
                .argv
                .as_ref()
                .map(|re| re.0.is_match(&p.argv.join(" "))),
            Clause::User => self
                .user
                .as_ref()
                .map(|u| p.user.as_deref() == Some(u.as_str())),
            Clause::Exe => pattern(&self.exe, p.exe.as_deref()),
            Clause::Notebook => pattern(&self.notebook, p.workload.notebook.as_deref()),
        }
    }
}

/// What a `[rule.when]` condition is read against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    /// The machine: its available memory, swap and pressure.
    #[default]
    Machine,
    /// Each memory cgroup with a limit (a container, a pod, a Slurm job, a
    /// systemd unit with `MemoryMax=`) on its own: `available_below` is
    /// the cgroup's room under its limit (a percentage: of that limit),
    /// `swap_used_above` its swap (a percentage: of its swap limit, or of
    /// the machine's swap where it has none). The victim is picked among
    /// the matching processes whose ceiling that cgroup is.
    Cgroup,
}

impl Per {
    fn is_machine(&self) -> bool {
        *self == Per::Machine
    }
}

/// Conditions that gate a rule, read against the machine or against each
/// limited memory cgroup (`per`). All given ones must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SystemCondition {
    /// What the conditions are read against.
    #[serde(skip_serializing_if = "Per::is_machine")]
    pub per: Per,
    /// Pressure level at least this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pressure: Option<PressureLevel>,
    /// Available memory below this (bytes or % of physical memory; per
    /// cgroup: the cgroup's room, bytes or % of its limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_below: Option<SizeLimit>,
    /// Swap used above this (bytes or % of swap space).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_used_above: Option<SizeLimit>,
}

/// Which matching process a system-gated rule acts on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Select {
    /// The largest footprint.
    #[default]
    Largest,
    /// The fastest growth.
    FastestGrowing,
    /// The most recently started: long-running work survives.
    Newest,
}

impl Select {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "largest" => Some(Select::Largest),
            "fastest-growing" => Some(Select::FastestGrowing),
            "newest" => Some(Select::Newest),
            _ => None,
        }
    }
}

/// What a rule's limits and `select` weigh: a job as a whole, or each
/// process on its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// A matching job root is judged on its job's totals (every descendant
    /// counted, shared memory once) and acted on; the workers of a job whose
    /// root matches are not judged on their own. A matching process outside
    /// such a job is judged as itself.
    #[default]
    Job,
    /// Every matching process is judged on its own figures, workers too.
    Process,
}

impl Scope {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "job" => Some(Scope::Job),
            "process" => Some(Scope::Process),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Job => "job",
            Scope::Process => "process",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Per-process limits; exceeding any one of them sets the rule off.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub footprint: Option<SizeLimit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_memory: Option<SizeLimit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub growth: Option<Rate>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_duration"
    )]
    pub time_to_exhaustion: Option<Duration>,
}

impl Rule {
    /// How long before predicted exhaustion the rule's signals go out: its
    /// `lead`, else one sample at `fast_interval` (the daemon's interval
    /// near a limit: how late it may see the moment) plus
    /// [`SIGNAL_TAKES_EFFECT`].
    pub fn lead_or(&self, fast_interval: Duration) -> Duration {
        self.lead
            .unwrap_or_else(|| fast_interval.saturating_add(SIGNAL_TAKES_EFFECT))
    }
}

impl Limits {
    pub fn is_empty(&self) -> bool {
        self.footprint.is_none()
            && self.gpu_memory.is_none()
            && self.growth.is_none()
            && self.time_to_exhaustion.is_none()
    }
}

/// One step of a ladder: an action, `after` the previous step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub action: Action,
    /// Delay after the previous step (zero for the first).
    pub after: Duration,
    /// Whom a signal step is sent to: the process the rule judged, or the
    /// workers of the job it stands for.
    pub to: Target,
}

/// Whom a signal step is sent to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Target {
    /// The process the rule judged (a job's root, for a job).
    #[default]
    Process,
    /// The workers of the job the process stands for, each checked on its
    /// own (its identity, owner and protection), and not the root: a
    /// kernel's DataLoader workers, whose end makes the loader raise in the
    /// kernel while the kernel and its variables stay. A step with no
    /// workers to reach is skipped.
    Workers,
}

impl Target {
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Process => "process",
            Target::Workers => "workers",
        }
    }
}

impl Serialize for Step {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match &self.action {
            Action::Signal {
                signal,
                require_handler,
                process_group,
            } => {
                m.serialize_entry("signal", signal.as_str())?;
                m.serialize_entry("require_handler", require_handler)?;
                m.serialize_entry("process_group", process_group)?;
                if self.to != Target::Process {
                    m.serialize_entry("to", self.to.as_str())?;
                }
            }
            Action::Hook {
                command,
                args,
                timeout,
            } => {
                let mut argv = vec![command.display().to_string()];
                argv.extend(args.iter().cloned());
                m.serialize_entry("hook", &argv)?;
                m.serialize_entry("timeout", &format_duration(*timeout))?;
            }
            Action::Notify => m.serialize_entry("notify", &true)?,
        }
        // Always written: a later step may run with the one before it
        // (`after = "0s"`), and a later step without `after` does not parse.
        m.serialize_entry("after", &format_duration(self.after))?;
        m.end()
    }
}

/// One validated rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rule {
    pub name: String,
    #[serde(rename = "match")]
    pub matcher: Matcher,
    #[serde(flatten)]
    pub limits: Limits,
    /// Window over which growth is measured for `time_to_exhaustion`.
    #[serde(with = "units::duration")]
    pub window: Duration,
    /// How long before predicted exhaustion a signal or hook step goes out,
    /// when the rule holds by `time_to_exhaustion` alone: the time the
    /// action needs to take effect plus a margin. `None`: the daemon's
    /// `fast_interval` plus [`SIGNAL_TAKES_EFFECT`].
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_duration"
    )]
    pub lead: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<SystemCondition>,
    /// Set only for rules gated by `when` (default largest there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub select: Option<Select>,
    /// Jobs or single processes.
    pub scope: Scope,
    pub actions: Vec<Step>,
    #[serde(with = "units::duration")]
    pub cooldown: Duration,
    /// Share below a limit at which it clears (0–0.5).
    #[serde(serialize_with = "fraction_as_percent")]
    pub hysteresis: f64,
    pub dry_run: bool,
    /// Act on processes of users other than the daemon's.
    pub other_users: bool,
    /// Act on processes running as root.
    pub root: bool,
}

/// `[protect]`: processes never signalled, on top of PID 1, the daemon and its
/// ancestors, and kernel threads.
///
/// Names, patterns and executable paths protect a process only when it runs
/// as root or a system account (uid ≤ [`Protect::system_uid_max`]): anyone
/// can name a process `sshd` (`prctl(PR_SET_NAME)`, or a copy of a program
/// under that name), and a user can make `/proc/[pid]/exe` show a root-owned
/// path (a bind mount in a mount namespace of their own) or run a root-owned
/// program with a library of their own preloaded. Only root can start a
/// process as a system account, so for those the name and path are what
/// root made them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Protect {
    /// Include [`DEFAULT_PROTECTED`].
    pub defaults: bool,
    /// Exact process names.
    pub names: Vec<String>,
    /// Regular expressions matched against the process name.
    pub patterns: Vec<Pattern>,
    /// Absolute paths of executables, compared with the path the sampler
    /// read (`/proc/[pid]/exe`, `proc_pidpath`). A path protects only as
    /// long as only root can change what is there.
    pub exes: Vec<String>,
    /// The highest uid of a system account: name and path protection cover
    /// processes of uids up to this one. Default
    /// [`crate::os::accounts::SYSTEM_UID_MAX`] (999 on Linux, 499 on macOS).
    pub system_uid_max: u32,
}

impl Default for Protect {
    fn default() -> Self {
        Self {
            defaults: true,
            names: Vec::new(),
            patterns: Vec::new(),
            exes: Vec::new(),
            system_uid_max: crate::os::accounts::SYSTEM_UID_MAX,
        }
    }
}

impl Protect {
    /// True if the config lists a process with this name (whoever runs it:
    /// whether the listing protects it depends on its owner, see
    /// [`Protect::covers_owner`]).
    pub fn protects_name(&self, name: &str) -> bool {
        (self.defaults && DEFAULT_PROTECTED.contains(&name))
            || self.names.iter().any(|n| n == name)
            || self.patterns.iter().any(|p| p.0.is_match(name))
    }

    /// True if the config lists this executable path.
    pub fn protects_exe(&self, exe: &str) -> bool {
        self.exes.iter().any(|e| e == exe)
    }

    /// True if a listed name or path protects a process of `uid`: root and
    /// system accounts only.
    pub fn covers_owner(&self, uid: u32) -> bool {
        crate::os::accounts::is_system_account(uid, self.system_uid_max)
    }
}

fn opt_duration<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&format_duration(*d)),
        None => s.serialize_none(),
    }
}

fn fraction_as_percent<S: Serializer>(f: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{}%", f * 100.0))
}

impl fmt::Display for Select {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Select::Largest => "largest",
            Select::FastestGrowing => "fastest-growing",
            Select::Newest => "newest",
        })
    }
}

// ---------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------

/// Checks every `[[rule]]`.
pub(crate) fn validate_rules(
    raw: Vec<Spanned<RawRule>>,
    source: &Source<'_>,
) -> Result<Vec<Rule>, ConfigError> {
    let mut rules: Vec<Rule> = Vec::with_capacity(raw.len());
    for (index, spanned) in raw.into_iter().enumerate() {
        let span = spanned.span();
        let name_span = spanned.get_ref().name.as_ref().map(|n| n.span());
        let rule = validate_rule(index, spanned.into_inner(), span, source)?;
        if rules.iter().any(|r| r.name == rule.name) {
            return Err(source.error_at(
                name_span.unwrap_or_default(),
                &format!("{}.name", rule_key(rules.len(), Some(&rule.name))),
                "another rule has this name; give each rule its own (names label metrics \
                 and journal events)",
            ));
        }
        rules.push(rule);
    }
    Ok(rules)
}

/// Checks `[protect]`.
pub(crate) fn validate_protect(
    raw: RawProtect,
    source: &Source<'_>,
) -> Result<Protect, ConfigError> {
    let mut patterns = Vec::new();
    for (i, p) in raw.patterns.unwrap_or_default().into_iter().enumerate() {
        patterns.push(compile(&p, &format!("protect.patterns[{i}]"), source)?);
    }
    let names = raw
        .names
        .unwrap_or_default()
        .into_iter()
        .map(Spanned::into_inner)
        .collect();
    let mut exes = Vec::new();
    for (i, exe) in raw.exes.unwrap_or_default().into_iter().enumerate() {
        let key = format!("protect.exes[{i}]");
        source.refuse_nul(&exe.span(), &key, exe.get_ref())?;
        if !exe.get_ref().starts_with('/') {
            return Err(source.error_at(
                exe.span(),
                &key,
                "an executable to protect is an absolute path, e.g. \"/usr/sbin/sshd\" (the \
                 path the process was started from, as `ls -l /proc/PID/exe` shows it)",
            ));
        }
        exes.push(exe.into_inner());
    }
    let system_uid_max = match raw.system_uid_max {
        None => crate::os::accounts::SYSTEM_UID_MAX,
        Some(n) => {
            let span = n.span();
            match u32::try_from(*n.get_ref()) {
                Ok(uid) if uid < 65534 => uid,
                _ => {
                    return Err(source.error_at(
                        span,
                        "protect.system_uid_max",
                        "the highest uid of a system account is a uid from 0 to 65533, e.g. 999 \
                         (SYS_UID_MAX in /etc/login.defs; 499 on macOS)",
                    ));
                }
            }
        }
    };
    Ok(Protect {
        defaults: raw.defaults.unwrap_or(true),
        names,
        patterns,
        exes,
        system_uid_max,
    })
}

fn validate_rule(
    index: usize,
    raw: RawRule,
    span: std::ops::Range<usize>,
    source: &Source<'_>,
) -> Result<Rule, ConfigError> {
    let name = raw.name.as_ref().map(|n| n.get_ref().trim().to_string());
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        let at = raw.name.map_or(span, |n| n.span());
        return Err(source.error_at(
            at,
            &format!("{}.name", rule_key(index, None)),
            "every rule needs a non-empty name, e.g. name = \"notebook-runaway\"",
        ));
    };
    let rule = rule_key(index, Some(&name));
    let key = |k: &str| format!("{rule}.{k}");

    let matcher = validate_match(raw.matcher.unwrap_or_default(), &key("match"), source)?;
    if let Some(gpu) = &raw.gpu_memory
        && gpu.get_ref().of_limit()
    {
        return Err(source.error_at(
            gpu.span(),
            &key("gpu_memory"),
            "a gpu_memory percentage is of the GPU's memory, e.g. \"90%\"; \"of limit\" is \
             for footprint (a share of the process's memory-cgroup limit)",
        ));
    }
    let limits = Limits {
        footprint: raw.footprint.map(Spanned::into_inner),
        gpu_memory: raw.gpu_memory.map(Spanned::into_inner),
        growth: raw.growth.map(Spanned::into_inner),
        time_to_exhaustion: raw.time_to_exhaustion.map(|d| d.into_inner().0),
    };
    if let Some(growth) = &limits.growth
        && growth.bytes.0 == 0
    {
        return Err(source.error(
            None,
            Some(key("growth")),
            "a growth limit of zero would fire on any growth; use e.g. \"1GiB/10s\"",
        ));
    }
    let when = raw
        .when
        .map(|w| validate_when(w, &key("when"), source))
        .transpose()?;
    if limits.is_empty() && when.is_none() {
        return Err(without_value(source.error(
            Some(span),
            Some(rule.clone()),
            "the rule has no limit (footprint, gpu_memory, growth, time_to_exhaustion) and no \
             [rule.when] condition, so it would act on every matching process; add one",
        )));
    }
    let select = match raw.select {
        None => when.as_ref().map(|_| Select::default()),
        Some(s) => {
            if when.is_none() {
                return Err(source.error_at(
                    s.span(),
                    &key("select"),
                    "select picks one process when a system condition holds; add a \
                     [rule.when] condition or remove select",
                ));
            }
            match Select::parse(s.get_ref()) {
                Some(sel) => Some(sel),
                None => {
                    return Err(source.error_at(
                        s.span(),
                        &key("select"),
                        "expected \"largest\", \"fastest-growing\" or \"newest\"",
                    ));
                }
            }
        }
    };
    let scope = match raw.scope {
        None => Scope::default(),
        Some(s) => match Scope::parse(s.get_ref()) {
            Some(scope) => scope,
            None => {
                return Err(source.error_at(
                    s.span(),
                    &key("scope"),
                    "expected \"job\" (a job root judged on its job's totals: the process and \
                     its descendants) or \"process\" (every process on its own)",
                ));
            }
        },
    };
    let window = match raw.window {
        Some(w) => {
            let d = w.get_ref().0;
            if d < Duration::from_secs(1) || d > Duration::from_secs(3600) {
                return Err(source.error_at(
                    w.span(),
                    &key("window"),
                    "the growth window must be from \"1s\" to \"1h\", e.g. \"10s\"",
                ));
            }
            d
        }
        None => DEFAULT_WINDOW,
    };
    let lead = match raw.lead {
        Some(l) => {
            let d = l.get_ref().0;
            if d < Duration::from_millis(50) || d > Duration::from_secs(60) {
                return Err(source.error_at(
                    l.span(),
                    &key("lead"),
                    "the lead is how long before predicted exhaustion a signal goes out, from                      \"50ms\" to \"1m\", e.g. \"1s\"",
                ));
            }
            Some(d)
        }
        None => None,
    };
    let actions = validate_steps(raw.actions, &key("actions"), span, source)?;
    let hysteresis = match raw.hysteresis {
        None => DEFAULT_HYSTERESIS,
        Some(h) => match h.get_ref() {
            SizeLimit::Percent(p) if *p <= 50.0 => p / 100.0,
            _ => {
                return Err(source.error_at(
                    h.span(),
                    &key("hysteresis"),
                    "hysteresis is a percentage from 0% to 50%, e.g. \"10%\"",
                ));
            }
        },
    };
    Ok(Rule {
        name,
        matcher,
        limits,
        window,
        lead,
        when,
        select,
        scope,
        actions,
        cooldown: raw.cooldown.map_or(DEFAULT_COOLDOWN, |c| c.into_inner().0),
        hysteresis,
        dry_run: raw.dry_run.unwrap_or(false),
        other_users: raw.other_users.unwrap_or(false),
        root: raw.root.unwrap_or(false),
    })
}

fn validate_match(raw: RawMatch, key: &str, source: &Source<'_>) -> Result<Matcher, ConfigError> {
    let mut workload = Vec::new();
    for w in raw.workload.unwrap_or_default() {
        match WorkloadMatch::parse(w.get_ref()) {
            Some(m) => workload.push(m),
            None => {
                let kinds: Vec<&str> = WorkloadKind::ALL.iter().map(|k| k.as_str()).collect();
                return Err(source.error_at(
                    w.span(),
                    &format!("{key}.workload"),
                    format!(
                        "unknown workload; expected one of: {}, any-ml",
                        kinds.join(", ")
                    ),
                ));
            }
        }
    }
    let pattern = |p: Option<Spanned<String>>, k: &str| {
        p.map(|p| compile(&p, &format!("{key}.{k}"), source))
            .transpose()
    };
    Ok(Matcher {
        workload,
        name: pattern(raw.name, "name")?,
        argv: pattern(raw.argv, "argv")?,
        user: raw.user.map(Spanned::into_inner),
        exe: pattern(raw.exe, "exe")?,
        notebook: pattern(raw.notebook, "notebook")?,
    })
}

fn validate_when(
    raw: RawWhen,
    key: &str,
    source: &Source<'_>,
) -> Result<SystemCondition, ConfigError> {
    let pressure = match &raw.pressure {
        None => None,
        Some(p) => match p.get_ref().as_str() {
            "warn" => Some(PressureLevel::Warn),
            "critical" => Some(PressureLevel::Critical),
            _ => {
                return Err(source.error_at(
                    p.span(),
                    &format!("{key}.pressure"),
                    "expected \"warn\" or \"critical\" (the level at or above which the rule applies)",
                ));
            }
        },
    };
    let per = match &raw.per {
        None => Per::Machine,
        Some(p) => match p.get_ref().as_str() {
            "machine" => Per::Machine,
            "cgroup" => Per::Cgroup,
            _ => {
                return Err(source.error_at(
                    p.span(),
                    &format!("{key}.per"),
                    "expected \"machine\" (the machine's memory, the default) or \"cgroup\" \
                     (each memory cgroup with a limit on its own: a container, a pod, a Slurm job)",
                ));
            }
        },
    };
    if per == Per::Cgroup
        && let Some(p) = &raw.pressure
    {
        return Err(source.error_at(
            p.span(),
            &format!("{key}.pressure"),
            "pressure is the machine's; a per = \"cgroup\" condition reads each cgroup's \
             available_below and swap_used_above (or remove per to gate on the machine)",
        ));
    }
    for (name, limit) in [
        ("available_below", &raw.available_below),
        ("swap_used_above", &raw.swap_used_above),
    ] {
        if per == Per::Machine
            && let Some(l) = limit
            && l.get_ref().of_limit()
        {
            return Err(source.error_at(
                l.span(),
                &format!("{key}.{name}"),
                "\"of limit\" is a share of a cgroup's memory limit: add per = \"cgroup\" to \
                 read the condition in each limited cgroup, or write a share of the machine's \
                 memory such as \"10%\"",
            ));
        }
    }
    let of_limit = |l: SizeLimit| match l {
        SizeLimit::PercentOfLimit(p) => SizeLimit::Percent(p),
        other => other,
    };
    let cond = SystemCondition {
        per,
        pressure,
        available_below: raw.available_below.map(|l| of_limit(l.into_inner())),
        swap_used_above: raw.swap_used_above.map(|l| of_limit(l.into_inner())),
    };
    if cond.pressure.is_none() && cond.available_below.is_none() && cond.swap_used_above.is_none() {
        return Err(source.error(
            None,
            Some(key.to_string()),
            "[rule.when] is empty; give pressure, available_below or swap_used_above",
        ));
    }
    Ok(cond)
}

fn validate_steps(
    raw: Option<Spanned<Vec<Spanned<RawStep>>>>,
    key: &str,
    rule_span: std::ops::Range<usize>,
    source: &Source<'_>,
) -> Result<Vec<Step>, ConfigError> {
    let Some(raw) = raw else {
        return Err(without_value(source.error(
            Some(rule_span),
            Some(key.to_string()),
            "the rule has no actions; add e.g. actions = [{ signal = \"SIGINT\" }]",
        )));
    };
    let list_span = raw.span();
    let raw = raw.into_inner();
    if raw.is_empty() {
        return Err(source.error_at(
            list_span,
            key,
            "the rule has no actions; add e.g. actions = [{ signal = \"SIGINT\" }]",
        ));
    }
    let mut steps = Vec::with_capacity(raw.len());
    for (i, step) in raw.into_iter().enumerate() {
        let k = format!("{key}[{i}]");
        let span = step.span();
        let step = step.into_inner();
        let kinds = usize::from(step.signal.is_some())
            + usize::from(step.hook.is_some())
            + usize::from(step.notify == Some(true));
        if kinds != 1 {
            return Err(source.error_at(
                span.clone(),
                &k,
                "each step has exactly one of signal = \"SIGINT\", hook = [\"/path\", \"arg\"] \
                 or notify = true",
            ));
        }
        let after = match (i, step.after) {
            (0, Some(a)) if !a.get_ref().0.is_zero() => {
                return Err(source.error_at(
                    a.span(),
                    &format!("{k}.after"),
                    "the first step runs as soon as the limit is crossed; remove its after",
                ));
            }
            (0, _) => Duration::ZERO,
            (_, Some(a)) => a.into_inner().0,
            (_, None) => {
                return Err(source.error_at(
                    span.clone(),
                    &format!("{k}.after"),
                    "every step after the first needs after = \"30s\" (how long the previous \
                     step gets to work)",
                ));
            }
        };
        let mut to = Target::Process;
        let action = if let Some(sig) = step.signal {
            let Some(signal) = SignalName::parse(sig.get_ref()) else {
                return Err(source.error_at(
                    sig.span(),
                    &format!("{k}.signal"),
                    "expected one of SIGINT, SIGUSR1, SIGUSR2, SIGTERM, SIGKILL",
                ));
            };
            let require_handler = step.require_handler.unwrap_or(false);
            if require_handler && !signal.catchable() {
                return Err(source.error_at(
                    sig.span(),
                    &format!("{k}.require_handler"),
                    "SIGKILL cannot be caught, so require_handler would always skip it; remove \
                     require_handler",
                ));
            }
            if step.timeout.is_some() {
                return Err(source.error(
                    None,
                    Some(format!("{k}.timeout")),
                    "timeout applies to hooks only; remove it from this signal step",
                ));
            }
            let process_group = step.process_group.unwrap_or(false);
            if let Some(t) = &step.to {
                to = match t.get_ref().as_str() {
                    "process" => Target::Process,
                    "workers" if process_group => {
                        return Err(source.error_at(
                            t.span(),
                            &format!("{k}.to"),
                            "to = \"workers\" signals each worker on its own; remove \
                             process_group = true",
                        ));
                    }
                    "workers" => Target::Workers,
                    _ => {
                        return Err(source.error_at(
                            t.span(),
                            &format!("{k}.to"),
                            "expected \"process\" (the process the rule judged, a job's root) \
                             or \"workers\" (the workers of its job)",
                        ));
                    }
                };
            }
            Action::Signal {
                signal,
                require_handler,
                process_group,
            }
        } else if let Some(hook) = step.hook {
            let hook_span = hook.span();
            let mut argv = hook.into_inner().into_iter();
            let Some(command) = argv.next().filter(|c| c.starts_with('/')) else {
                return Err(source.error_at(
                    hook_span,
                    &format!("{k}.hook"),
                    "a hook is a list whose first item is an absolute path to a program, e.g. \
                     [\"/usr/local/bin/save-checkpoint\", \"--now\"]; it runs without a shell",
                ));
            };
            let args: Vec<String> = argv.collect();
            for (i, word) in std::iter::once(&command).chain(&args).enumerate() {
                source.refuse_nul(&hook_span, &format!("{k}.hook[{i}]"), word)?;
            }
            if step.require_handler.is_some() || step.process_group.is_some() {
                return Err(source.error(
                    None,
                    Some(k.clone()),
                    "require_handler and process_group apply to signal steps only",
                ));
            }
            Action::Hook {
                command: command.into(),
                args,
                timeout: step
                    .timeout
                    .map_or(DEFAULT_HOOK_TIMEOUT, |t| t.into_inner().0),
            }
        } else {
            Action::Notify
        };
        if !matches!(action, Action::Signal { .. })
            && let Some(t) = &step.to
        {
            return Err(source.error_at(
                t.span(),
                &format!("{k}.to"),
                "to applies to signal steps only",
            ));
        }
        steps.push(Step { action, after, to });
    }
    Ok(steps)
}

/// An error that points at a line but quotes no value (a whole table).
fn without_value(mut e: ConfigError) -> ConfigError {
    e.value = None;
    e
}

fn compile(p: &Spanned<String>, key: &str, source: &Source<'_>) -> Result<Pattern, ConfigError> {
    Regex::new(p.get_ref()).map(Pattern).map_err(|e| {
        let first = e.to_string();
        let reason = first.lines().last().unwrap_or("invalid pattern").trim();
        source.error_at(
            p.span(),
            key,
            format!("not a valid regular expression ({reason}); escape special characters, e.g. \"python\\\\.exe\""),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::Matcher;
    use crate::config::Config;
    use crate::model::WorkloadKind;
    use crate::model::build::{ProcessBuilder, process};

    fn config(text: &str) -> Result<Config, String> {
        Config::from_toml_str(text, "t.toml").map_err(|e| e.to_string())
    }

    /// ana's `python3 train.py` (pid 10) of `kind`.
    fn anas(kind: WorkloadKind) -> ProcessBuilder {
        process(10)
            .uid(1000)
            .user("ana")
            .name("python3")
            .exe("/usr/bin/python3")
            .argv(["python3", "train.py"])
            .kind(kind)
    }

    const MINIMAL: &str =
        "[[rule]]\nname = \"r\"\nfootprint = \"8GiB\"\nactions = [{ signal = \"SIGINT\" }]\n";

    #[test]
    fn a_minimal_rule_gets_its_defaults() {
        let c = config(MINIMAL).unwrap();
        let r = &c.rules[0];
        assert_eq!(r.cooldown, super::DEFAULT_COOLDOWN);
        assert_eq!(r.hysteresis, 0.10);
        assert!(!r.other_users && !r.root && !r.dry_run);
        assert_eq!(r.actions.len(), 1);
    }

    #[test]
    fn a_rule_without_limit_or_condition_is_rejected() {
        let e =
            config("[[rule]]\nname = \"r\"\nactions = [{ signal = \"SIGINT\" }]\n").unwrap_err();
        assert!(e.contains("rule[0] (\"r\"): the rule has no limit"), "{e}");
    }

    #[test]
    fn later_steps_need_after() {
        let e = config(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ signal = \"SIGINT\" }, { signal = \"SIGTERM\" }]\n",
        )
        .unwrap_err();
        assert!(e.contains("rule[0] (\"r\").actions[1].after"), "{e}");
    }

    #[test]
    fn select_needs_a_system_condition() {
        let e = config(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nselect = \"newest\"\nactions = [{ notify = true }]\n",
        )
        .unwrap_err();
        assert!(e.contains("rule[0] (\"r\").select"), "{e}");
    }

    #[test]
    fn hooks_must_be_absolute_paths() {
        let e = config(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ hook = [\"save.sh\"] }]\n",
        )
        .unwrap_err();
        assert!(e.contains("rule[0] (\"r\").actions[0].hook"), "{e}");
        assert!(e.contains("absolute path"), "{e}");
    }

    #[test]
    fn matcher_requires_every_condition() {
        let c = config(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n[rule.match]\nworkload = [\"pytorch\", \"jax\"]\nname = \"^python\"\nuser = \"ana\"\n",
        )
        .unwrap();
        let m = &c.rules[0].matcher;
        assert!(m.matches(&anas(WorkloadKind::Pytorch).build()));
        assert!(!m.matches(&anas(WorkloadKind::Jupyter).build()));
        assert!(!m.matches(&anas(WorkloadKind::Jax).name("ipython").build()));
        let other = anas(WorkloadKind::Jax).user("bo").build();
        assert!(!m.matches(&other));
    }

    #[test]
    fn notebook_matches_only_kernels_whose_notebook_is_known() {
        let cfg = config(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n\
             [rule.match]\nnotebook = \"^experiments/.*\\\\.ipynb$\"\n",
        )
        .unwrap();
        let m = &cfg.rules[0].matcher;
        let mut kernel = anas(WorkloadKind::Jupyter).build();
        assert!(!m.matches(&kernel), "notebook not known yet");
        kernel.workload.notebook = Some("experiments/train.ipynb".into());
        assert!(m.matches(&kernel));
        kernel.workload.notebook = Some("scratch.ipynb".into());
        assert!(!m.matches(&kernel));
    }

    #[test]
    fn clauses_say_what_each_wants_and_what_the_process_has() {
        let c = config(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\n\
             [rule.match]\nworkload = [\"jupyter\"]\nuser = \"bo\"\nnotebook = \"x\"\n",
        )
        .unwrap();
        let m = &c.rules[0].matcher;
        let p = anas(WorkloadKind::Jupyter).build();
        let clauses = m.clauses(&p);
        let keys: Vec<&str> = clauses.iter().map(|c| c.clause.key()).collect();
        assert_eq!(keys, ["workload", "user", "notebook"]);
        assert!(clauses[0].holds);
        assert_eq!(
            (
                clauses[1].wanted.as_str(),
                clauses[1].found.as_str(),
                clauses[1].holds
            ),
            ("\"bo\"", "\"ana\"", false)
        );
        assert!(
            clauses[2].found.starts_with("not known"),
            "{:?}",
            clauses[2]
        );
        assert_eq!(m.matches(&p), clauses.iter().all(|c| c.holds));
        assert!(Matcher::default().clauses(&p).is_empty());
    }

    #[test]
    fn any_ml_matches_a_kernel_but_not_plain_python() {
        let c = config(
            "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }]\nmatch = { workload = [\"any-ml\"] }\n",
        )
        .unwrap();
        let m = &c.rules[0].matcher;
        assert!(m.matches(&anas(WorkloadKind::Jupyter).build()));
        assert!(!m.matches(&anas(WorkloadKind::Python).build()));
    }

    #[test]
    fn rules_round_trip_through_to_toml() {
        let text = "[[rule]]\nname = \"r\"\nfootprint = \"60%\"\ngrowth = \"1GiB/10s\"\ncooldown = \"2m\"\nhysteresis = \"5%\"\nactions = [{ signal = \"SIGINT\", require_handler = true }, { signal = \"SIGTERM\", after = \"30s\", process_group = true }, { hook = [\"/bin/echo\", \"hi\"], after = \"5s\", timeout = \"3s\" }, { notify = true, after = \"1s\" }]\n[rule.match]\nworkload = [\"jupyter\"]\nargv = \"kernel-.*\\\\.json\"\n[rule.when]\npressure = \"warn\"\navailable_below = \"10%\"\n[protect]\nnames = [\"my-db\"]\npatterns = [\"^postgres\"]\nexes = [\"/usr/sbin/sshd\"]\nsystem_uid_max = 499\n";
        let c = config(text).unwrap();
        let back = config(&c.to_toml()).unwrap_or_else(|e| panic!("{e}\n{}", c.to_toml()));
        assert_eq!(back, c);
    }

    #[test]
    fn a_later_step_with_the_one_before_it_round_trips() {
        // Found by the config fuzz target: `after = "0s"` on a later step
        // parsed but was not written back, and the written config failed.
        let text = "[[rule]]\nname = \"r\"\nfootprint = \"1GiB\"\nactions = [{ notify = true }, { signal = \"SIGTERM\", after = \"0s\" }]\n";
        let c = config(text).unwrap();
        let back = config(&c.to_toml()).unwrap_or_else(|e| panic!("{e}\n{}", c.to_toml()));
        assert_eq!(back, c);
    }

    #[test]
    fn protect_takes_absolute_exes_and_a_system_uid_bound() {
        let c = config("[protect]\nexes = [\"/usr/sbin/sshd\"]\nsystem_uid_max = 499\n").unwrap();
        assert!(c.protect.protects_exe("/usr/sbin/sshd"));
        assert!(!c.protect.protects_exe("/home/ana/sshd"));
        assert!(c.protect.covers_owner(0) && c.protect.covers_owner(499));
        assert!(!c.protect.covers_owner(500));
    }

    #[test]
    fn the_system_uid_bound_defaults_to_the_platforms() {
        let c = config("").unwrap();
        assert_eq!(
            c.protect.system_uid_max,
            crate::os::accounts::SYSTEM_UID_MAX
        );
        assert!(!c.protect.covers_owner(65534), "nobody is anyone's");
    }

    #[test]
    fn a_relative_exe_is_refused_with_its_key() {
        let e = config("[protect]\nexes = [\"sshd\"]\n").unwrap_err();
        assert!(e.contains("protect.exes[0]"), "{e}");
        assert!(e.contains("absolute path"), "{e}");
    }

    #[test]
    fn a_system_uid_bound_out_of_range_is_refused() {
        for bad in ["-1", "65534", "4294967296"] {
            let e = config(&format!("[protect]\nsystem_uid_max = {bad}\n")).unwrap_err();
            assert!(e.contains("protect.system_uid_max"), "{e}");
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn protect_defaults_can_be_turned_off() {
        let c = config("[protect]\ndefaults = false\nnames = [\"x\"]\n").unwrap();
        assert!(!c.protect.protects_name("sshd"));
        assert!(c.protect.protects_name("x"));
        let d = config("").unwrap();
        assert!(d.protect.protects_name("sshd"));
    }
}
