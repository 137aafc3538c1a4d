//! What `headroom top` shows, apart from drawing it: the figures a source
//! delivers ([`Feed`]), what the viewer chose (sort, filter, scroll, panels:
//! [`ViewState`], changed by [`ViewState::on_key`]), and the screen made of
//! both ([`screen`]): plain lines and table rows, sorted, filtered and
//! formatted. Pure and deterministic (time comes in as an argument), so it
//! is tested without a terminal; `draw.rs` lays the [`Screen`] out.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use crate::history::{exhaustion_headroom, time_to_exhaustion};
use crate::model::{ProcessSample, Snapshot, Timestamp, printable};
use crate::policy::RuleStatus;
use crate::report::{format_bytes, percent};

/// The order of the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SortKey {
    /// Largest footprint first.
    #[default]
    Footprint,
    /// Fastest growth first (processes without a trend last).
    Growth,
    /// Lowest pid first.
    Pid,
    /// By name, then pid.
    Name,
    /// Most GPU memory first (processes without GPU memory last).
    Gpu,
}

impl SortKey {
    /// The key after this one, in the order `s` cycles through.
    pub fn next(self) -> Self {
        match self {
            SortKey::Footprint => SortKey::Growth,
            SortKey::Growth => SortKey::Pid,
            SortKey::Pid => SortKey::Name,
            SortKey::Name => SortKey::Gpu,
            SortKey::Gpu => SortKey::Footprint,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Footprint => "footprint",
            SortKey::Growth => "growth",
            SortKey::Pid => "pid",
            SortKey::Name => "name",
            SortKey::Gpu => "gpu",
        }
    }

    /// Whether the natural order is largest first.
    fn descending(self) -> bool {
        matches!(self, SortKey::Footprint | SortKey::Growth | SortKey::Gpu)
    }

    /// The table column this key sorts.
    fn column(self) -> Column {
        match self {
            SortKey::Footprint => Column::Footprint,
            SortKey::Growth => Column::Growth,
            SortKey::Pid => Column::Pid,
            SortKey::Name => Column::Name,
            SortKey::Gpu => Column::Gpu,
        }
    }
}

/// What the history says of one process, from the daemon's process table
/// or from the history kept here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub growth: Option<f64>,
    pub exhaustion_seconds: Option<f64>,
    pub rules: Vec<RuleStatus>,
}

/// A rule's last action, from the events.
#[derive(Debug, Clone, PartialEq)]
pub struct LastAction {
    pub at: Timestamp,
    /// `SIGINT → python3 (pid 4821) done`.
    pub text: String,
}

/// Everything one refresh delivers.
#[derive(Debug, Clone, Default)]
pub struct Feed {
    pub snapshot: Snapshot,
    /// Per process, by (pid, start).
    pub figures: HashMap<(u32, u64), Figures>,
    /// The configured rules' names, in the config's order.
    pub rules: Vec<String>,
    /// Per rule, its most recent action; `None` where actions are not known
    /// (a local view acts on nothing).
    pub last_actions: Option<HashMap<String, LastAction>>,
    /// The machine's growth (swap used minus available memory), bytes per
    /// second over the growth window.
    pub machine_growth: Option<f64>,
    /// Whether the rules only say what they would do.
    pub dry_run: bool,
}

/// Where the figures come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// A running daemon's API.
    Daemon(SocketAddr),
    /// This machine, sampled by this command; `why` says why not a daemon.
    Local { why: Option<String> },
}

/// The state of the source: the last feed, and whether it still answers.
#[derive(Debug, Clone)]
pub struct Link {
    pub origin: Origin,
    pub interval: Duration,
    pub feed: Option<Feed>,
    /// Since when, and why, refreshes fail; `None` while they succeed.
    pub failing: Option<(Timestamp, String)>,
}

impl Link {
    pub fn new(origin: Origin, interval: Duration) -> Self {
        Self {
            origin,
            interval,
            feed: None,
            failing: None,
        }
    }

    /// A refresh's outcome, at `now`.
    pub fn update(&mut self, outcome: Result<Feed, String>, now: Timestamp) {
        match outcome {
            Ok(feed) => {
                self.feed = Some(feed);
                self.failing = None;
            }
            Err(why) => {
                let since = self.failing.as_ref().map_or(now, |(since, _)| *since);
                self.failing = Some((since, why));
            }
        }
    }
}

/// A key, as the view understands it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Ctrl(char),
    Esc,
    Enter,
    Backspace,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    F(u8),
}

/// Whether to go on after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Go,
    Quit,
}

/// What the viewer chose.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewState {
    pub sort: SortKey,
    /// The sort's natural order turned around.
    pub reversed: bool,
    /// Rows whose pid, name, user, kind, notebook or command line contain
    /// this text (case-insensitive); empty: every row.
    pub filter: String,
    /// The filter is being typed.
    pub editing: bool,
    /// ML workloads and job members only.
    pub ml_only: bool,
    pub show_gpus: bool,
    pub show_help: bool,
    /// The first table row shown.
    pub scroll: usize,
}

impl Default for ViewState {
    fn default() -> Self {
        Self {
            sort: SortKey::default(),
            reversed: false,
            filter: String::new(),
            editing: false,
            ml_only: false,
            show_gpus: true,
            show_help: false,
            scroll: 0,
        }
    }
}

/// The longest filter kept (a paste of a whole file is not a filter).
const MAX_FILTER: usize = 200;

impl ViewState {
    /// Apply `key`; `page` is how many table rows fit on the screen.
    pub fn on_key(&mut self, key: Key, page: usize) -> Flow {
        if key == Key::Ctrl('c') {
            return Flow::Quit;
        }
        if self.editing {
            match key {
                Key::Enter => self.editing = false,
                Key::Esc => {
                    self.editing = false;
                    self.filter.clear();
                }
                Key::Backspace => {
                    self.filter.pop();
                }
                Key::Char(c) if !c.is_control() && self.filter.chars().count() < MAX_FILTER => {
                    self.filter.push(c);
                    self.scroll = 0;
                }
                _ => {}
            }
            return Flow::Go;
        }
        if self.show_help {
            // Any key closes the help; q still quits.
            self.show_help = false;
            return if key == Key::Char('q') {
                Flow::Quit
            } else {
                Flow::Go
            };
        }
        let page = page.max(1);
        match key {
            Key::Char('q') | Key::Esc => return Flow::Quit,
            Key::Char('s') | Key::F(6) => {
                self.sort = self.sort.next();
                self.scroll = 0;
            }
            Key::Char('r') => self.reversed = !self.reversed,
            Key::Char('/') => self.editing = true,
            Key::Char('m') => {
                self.ml_only = !self.ml_only;
                self.scroll = 0;
            }
            Key::Char('g') => self.show_gpus = !self.show_gpus,
            Key::Char('?') | Key::Char('h') | Key::F(1) => self.show_help = true,
            Key::Char('j') | Key::Down => self.scroll = self.scroll.saturating_add(1),
            Key::Char('k') | Key::Up => self.scroll = self.scroll.saturating_sub(1),
            Key::PageDown | Key::Char(' ') => self.scroll = self.scroll.saturating_add(page),
            Key::PageUp => self.scroll = self.scroll.saturating_sub(page),
            Key::Home => self.scroll = 0,
            Key::End => self.scroll = usize::MAX,
            _ => {}
        }
        Flow::Go
    }
}

/// The process table's columns, left to right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Pid,
    User,
    Kind,
    Footprint,
    Growth,
    Eta,
    Gpu,
    Job,
    Rules,
    Name,
}

impl Column {
    pub const ALL: [Column; 10] = [
        Column::Pid,
        Column::User,
        Column::Kind,
        Column::Footprint,
        Column::Growth,
        Column::Eta,
        Column::Gpu,
        Column::Job,
        Column::Rules,
        Column::Name,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Column::Pid => "PID",
            Column::User => "USER",
            Column::Kind => "KIND",
            Column::Footprint => "FOOTPRINT",
            Column::Growth => "GROWTH",
            Column::Eta => "FULL IN",
            Column::Gpu => "GPU",
            Column::Job => "JOB",
            Column::Rules => "RULES",
            Column::Name => "NAME / NOTEBOOK",
        }
    }

    /// The column's width; `None` for the last, which takes the rest.
    pub fn width(self) -> Option<u16> {
        Some(match self {
            Column::Pid => 7,
            Column::User => 8,
            Column::Kind => 10,
            Column::Footprint => 13,
            Column::Growth => 11,
            Column::Eta => 7,
            Column::Gpu => 9,
            Column::Job => 8,
            Column::Rules => 22,
            Column::Name => return None,
        })
    }

    /// Whether figures in it are aligned right.
    pub fn right_aligned(self) -> bool {
        matches!(
            self,
            Column::Pid | Column::Footprint | Column::Growth | Column::Eta | Column::Gpu
        )
    }
}

/// One row of the process table, its cells in [`Column::ALL`]'s order.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub pid: u32,
    pub cells: Vec<String>,
    /// A rule holds for it (crossed, acting or held without acting).
    pub flagged: bool,
}

/// The whole screen, as text.
#[derive(Debug, Clone, PartialEq)]
pub struct Screen {
    /// The first line: the source, the sample's time, the sort and filter.
    pub title: String,
    /// Memory, swap, pressure, trend.
    pub memory: Vec<String>,
    /// The GPU panel, `None` when hidden.
    pub gpus: Option<Vec<String>>,
    pub jobs: Vec<String>,
    pub rules: Vec<String>,
    /// The table's header cells, the sorted one marked.
    pub header: Vec<String>,
    pub sorted_column: usize,
    pub rows: Vec<Row>,
    /// How many processes the filter and the ML toggle left out.
    pub hidden: usize,
    /// The last line: a failing source, the filter being typed, or the keys.
    pub footer: String,
    /// The source fails: the footer is a warning.
    pub alert: bool,
    pub help: Option<Vec<String>>,
}

/// The help screen's lines.
pub const HELP: &[&str] = &[
    "headroom top: keys",
    "",
    "  q, Esc        quit",
    "  s, F6         next sort: footprint, growth, pid, name, gpu",
    "  r             reverse the sort",
    "  /             filter by text (pid, name, user, kind, notebook, command line);",
    "                Enter keeps it, Esc clears it",
    "  m             ML workloads and their jobs only / every process",
    "  g             show / hide the GPU panel",
    "  j, k, arrows  scroll one row; PgUp, PgDn, Space a page; Home, End",
    "  ?, h, F1      this help (any key closes it)",
    "",
    "FOOTPRINT: the memory a process holds (basis: rss, pss or phys_footprint).",
    "GROWTH: its slope over the last 30 s; FULL IN: when memory and swap (or its",
    "cgroup's limit) run out at that pace. RULES: the rule nearest to acting on it.",
];

/// `hh:mm:ss` of `at` in the local zone.
pub fn clock(at: Timestamp) -> String {
    let full = crate::local_time::format(at);
    full.split(' ').nth(1).unwrap_or(&full).to_owned()
}

/// `+1.5 MiB/s`, `-300 KiB/s`, `~0` under 1 KiB/s either way.
pub fn format_rate(bytes_per_second: f64) -> String {
    if !bytes_per_second.is_finite() {
        return String::new();
    }
    if bytes_per_second.abs() < 1024.0 {
        return "~0".into();
    }
    let sign = if bytes_per_second > 0.0 { '+' } else { '-' };
    format!(
        "{sign}{}/s",
        format_bytes(bytes_per_second.abs().min(u64::MAX as f64) as u64)
    )
}

/// `45s`, `3m20s`, `2h05m`, `3d04h`.
pub fn format_eta(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return String::new();
    }
    let s = seconds.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

/// How far a rule's status goes toward acting: higher is nearer.
fn severity(status: &RuleStatus) -> u8 {
    let s = status.state.as_str();
    if s.contains("not acting") {
        3
    } else if s.starts_with("step") || s.starts_with("done") {
        4
    } else if s.starts_with("crossed") || s.starts_with("held") {
        3
    } else if s.starts_with("near") {
        2
    } else {
        1
    }
}

/// The rule nearest to acting on a process, in a few words.
fn rules_cell(statuses: &[RuleStatus]) -> String {
    statuses
        .iter()
        .max_by_key(|s| severity(s))
        .map(|s| {
            let state = s.state.split(',').next().unwrap_or(&s.state);
            let more = if statuses.len() > 1 {
                format!(" +{}", statuses.len() - 1)
            } else {
                String::new()
            };
            format!("{state} {}{more}", s.rule)
        })
        .unwrap_or_default()
}

/// The process's name, and its notebook where a kernel runs one.
fn name_cell(p: &ProcessSample) -> String {
    let name = printable(&p.name);
    match &p.workload.notebook {
        Some(nb) => format!("{name} · {}", printable(nb)),
        None => name.into_owned(),
    }
}

fn job_cell(snap: &Snapshot, p: &ProcessSample) -> String {
    match snap.job_of(p) {
        Some(job) if job.pid() == p.id.pid => match job.workers() {
            0 => "root".into(),
            n => format!("root+{n}"),
        },
        Some(job) => format!("w:{}", job.pid()),
        None => String::new(),
    }
}

fn matches_filter(p: &ProcessSample, needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    let needle = needle.to_lowercase();
    let hay = [
        p.id.pid.to_string(),
        p.name.to_string(),
        p.user.as_deref().unwrap_or_default().to_owned(),
        p.workload.kind.to_string(),
        p.workload.notebook.clone().unwrap_or_default(),
        p.argv.join(" "),
    ];
    hay.iter().any(|h| h.to_lowercase().contains(&needle))
}

/// The processes to list, in order.
fn ordered<'a>(feed: &'a Feed, state: &ViewState) -> (Vec<&'a ProcessSample>, usize) {
    let snap = &feed.snapshot;
    let total = snap.processes.len();
    let mut listed: Vec<&ProcessSample> = snap
        .processes
        .iter()
        .filter(|p| !state.ml_only || p.workload.is_ml() || p.job.is_some())
        .filter(|p| matches_filter(p, &state.filter))
        .collect();
    let growth = |p: &ProcessSample| {
        feed.figures
            .get(&(p.id.pid, p.id.start))
            .and_then(|f| f.growth)
    };
    // Unknown figures go last whichever way the sort runs.
    let known_first = |a: bool, b: bool| b.cmp(&a);
    listed.sort_by(|a, b| {
        let natural = match state.sort {
            SortKey::Footprint => b.footprint.cmp(&a.footprint),
            SortKey::Growth => {
                let (ga, gb) = (growth(a), growth(b));
                known_first(ga.is_some(), gb.is_some()).then_with(|| {
                    let by = gb.unwrap_or(0.0).total_cmp(&ga.unwrap_or(0.0));
                    if state.reversed { by.reverse() } else { by }
                })
            }
            SortKey::Pid => a.id.pid.cmp(&b.id.pid),
            SortKey::Name => a.name.to_lowercase().cmp(&b.name.to_lowercase()),
            SortKey::Gpu => {
                known_first(a.gpu_memory.is_some(), b.gpu_memory.is_some()).then_with(|| {
                    let by = b.gpu_memory.cmp(&a.gpu_memory);
                    if state.reversed { by.reverse() } else { by }
                })
            }
        };
        let natural = match state.sort {
            // Their reversal is inside, after the unknown ones are put last.
            SortKey::Growth | SortKey::Gpu => natural,
            _ if state.reversed => natural.reverse(),
            _ => natural,
        };
        natural.then(a.id.pid.cmp(&b.id.pid))
    });
    let hidden = total - listed.len();
    (listed, hidden)
}

fn row(feed: &Feed, p: &ProcessSample) -> Row {
    let figures = feed.figures.get(&(p.id.pid, p.id.start));
    let statuses = figures.map(|f| f.rules.as_slice()).unwrap_or_default();
    let footprint = match p.basis {
        crate::model::Basis::Pss => format!("{} pss", format_bytes(p.footprint)),
        _ => format_bytes(p.footprint),
    };
    let cells = Column::ALL
        .iter()
        .map(|c| match c {
            Column::Pid => p.id.pid.to_string(),
            Column::User => p
                .user
                .as_deref()
                .map(|u| printable(u).into_owned())
                .or_else(|| p.uid.map(|u| u.to_string()))
                .unwrap_or_default(),
            Column::Kind => p.workload.kind.to_string(),
            Column::Footprint => footprint.clone(),
            Column::Growth => figures
                .and_then(|f| f.growth)
                .map(format_rate)
                .unwrap_or_default(),
            Column::Eta => figures
                .and_then(|f| f.exhaustion_seconds)
                .map(format_eta)
                .unwrap_or_default(),
            Column::Gpu => p.gpu_memory.map(format_bytes).unwrap_or_default(),
            Column::Job => job_cell(&feed.snapshot, p),
            Column::Rules => rules_cell(statuses),
            Column::Name => name_cell(p),
        })
        .collect();
    Row {
        pid: p.id.pid,
        cells,
        flagged: statuses.iter().any(|s| severity(s) >= 3),
    }
}

fn memory_lines(feed: &Feed) -> Vec<String> {
    let snap = &feed.snapshot;
    let m = &snap.system;
    let mut lines = vec![format!(
        "memory   {} available of {}   {} used ({:.0}%)",
        format_bytes(m.available),
        format_bytes(m.total),
        format_bytes(m.used),
        percent(m.used, m.total),
    )];
    let swap = if snap.swap.total == 0 {
        "swap     none".to_owned()
    } else {
        format!(
            "swap     {} used of {}",
            format_bytes(snap.swap.used),
            format_bytes(snap.swap.total)
        )
    };
    let mut pressure = format!("pressure {}", snap.pressure.level);
    if let Some(psi) = &snap.pressure.psi {
        let _ = write!(
            pressure,
            " (stalled {:.1}% of the last 10 s)",
            psi.some.avg10
        );
    } else if let Some(free) = snap.pressure.free_percent {
        let _ = write!(pressure, " ({free}% free as the kernel counts)");
    }
    lines.push(format!("{swap}   {pressure}"));
    let headroom = exhaustion_headroom(snap);
    lines.push(match feed.machine_growth {
        None => "trend    not known yet (needs a few samples)".to_owned(),
        Some(g) if g.abs() < 1024.0 => "trend    steady".to_owned(),
        Some(g) => match time_to_exhaustion(headroom, g) {
            Some(eta) => format!(
                "trend    {} taken: memory and swap exhausted in {} at this pace",
                format_rate(g),
                format_eta(eta.as_secs_f64())
            ),
            None => format!("trend    {} (being freed)", format_rate(g)),
        },
    });
    lines
}

fn gpu_lines(snap: &Snapshot) -> Vec<String> {
    if snap.gpus.is_empty() {
        let why = snap
            .collectors
            .iter()
            .find(|c| c.name == "nvml" || c.name == "gpu")
            .map(|c| format!(": {}", printable(&c.detail)))
            .unwrap_or_default();
        return vec![format!("no GPU reported{why}")];
    }
    let mut lines = Vec::new();
    for gpu in &snap.gpus {
        let mut line = format!("gpu{} {}", gpu.index, printable(&gpu.name));
        match (gpu.memory_used, gpu.memory_total) {
            (Some(used), Some(total)) => {
                let _ = write!(
                    line,
                    "   {} used of {} ({:.0}%)",
                    format_bytes(used),
                    format_bytes(total),
                    percent(used, total)
                );
            }
            (Some(used), None) => {
                let _ = write!(line, "   {} used", format_bytes(used));
            }
            _ => line.push_str("   memory not reported"),
        }
        if let Some(u) = gpu.utilization {
            let _ = write!(line, "   busy {:.0}%", u * 100.0);
        }
        lines.push(line);
        let mut procs: Vec<_> = gpu.processes.iter().collect();
        procs.sort_by(|a, b| b.memory.cmp(&a.memory).then(a.pid.cmp(&b.pid)));
        for gp in procs {
            let name = snap
                .process(gp.pid)
                .map(name_cell)
                .unwrap_or_else(|| "(not sampled)".into());
            let memory = gp.memory.map(format_bytes).unwrap_or_else(|| "?".into());
            lines.push(format!("    {:>7}  {:>10}  {name}", gp.pid, memory));
        }
    }
    lines
}

/// At most this many jobs are listed; the rest are counted.
const MAX_JOBS: usize = 6;

fn job_lines(snap: &Snapshot) -> Vec<String> {
    if snap.jobs.is_empty() {
        return vec!["no ML jobs".into()];
    }
    let mut jobs: Vec<_> = snap.jobs.iter().collect();
    jobs.sort_by(|a, b| b.footprint.cmp(&a.footprint).then(a.pid().cmp(&b.pid())));
    let mut lines: Vec<String> = jobs
        .iter()
        .take(MAX_JOBS)
        .map(|job| {
            let root = snap.process(job.pid());
            let name = root.map(name_cell).unwrap_or_else(|| "(gone)".into());
            let kind = root
                .map(|p| p.workload.kind.to_string())
                .unwrap_or_default();
            let members = match job.workers() {
                0 => format!("{kind}, no workers"),
                1 => format!("{kind} + 1 worker"),
                n => format!("{kind} + {n} workers"),
            };
            let gpu = job
                .gpu_memory
                .map(|g| format!("   gpu {}", format_bytes(g)))
                .unwrap_or_default();
            format!(
                "{:>7}  {:>10} {:<14} {members}{gpu}   {name}",
                job.pid(),
                format_bytes(job.footprint),
                format!("({})", job.basis),
            )
        })
        .collect();
    if jobs.len() > MAX_JOBS {
        lines.push(format!("… and {} more jobs", jobs.len() - MAX_JOBS));
    }
    lines
}

fn rule_lines(feed: &Feed) -> Vec<String> {
    let mut names: Vec<&str> = feed.rules.iter().map(String::as_str).collect();
    for f in feed.figures.values() {
        for s in &f.rules {
            if !names.contains(&s.rule.as_str()) {
                names.push(&s.rule);
            }
        }
    }
    if names.is_empty() {
        return vec!["no rules".into()];
    }
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    names
        .iter()
        .map(|name| {
            let statuses: Vec<(u32, &RuleStatus)> = feed
                .figures
                .iter()
                .flat_map(|(&(pid, _), f)| f.rules.iter().map(move |s| (pid, s)))
                .filter(|(_, s)| s.rule == *name)
                .collect();
            let count = |pred: &dyn Fn(&RuleStatus) -> bool| {
                statuses.iter().filter(|(_, s)| pred(s)).count()
            };
            let cooldown = count(&|s| {
                s.not_acting
                    .as_deref()
                    .is_some_and(|w| w.contains("cooldown"))
            });
            let mut line = format!(
                "{name:<width$}  watching {}  near {}  holds {}  acting {}  not acting {}",
                statuses.len(),
                count(&|s| severity(s) == 2),
                count(&|s| severity(s) == 3 && !s.state.contains("not acting")),
                count(&|s| severity(s) == 4),
                count(&|s| s.state.contains("not acting")),
            );
            if cooldown > 0 {
                let _ = write!(line, " ({cooldown} in cooldown)");
            }
            if let Some(actions) = &feed.last_actions {
                match actions.get(*name) {
                    Some(a) => {
                        let _ = write!(line, "   last: {} at {}", a.text, clock(a.at));
                    }
                    None => line.push_str("   last: none"),
                }
            }
            // The process it is nearest to acting on, and why.
            if let Some((pid, s)) = statuses
                .iter()
                .filter(|(_, s)| severity(s) >= 2)
                .max_by_key(|(pid, s)| (severity(s), std::cmp::Reverse(*pid)))
            {
                let _ = write!(line, "   pid {pid}: {}, {}", s.state, s.detail);
            }
            line
        })
        .collect()
}

fn source_text(link: &Link) -> String {
    match &link.origin {
        Origin::Daemon(addr) => format!("daemon {addr}"),
        Origin::Local { .. } => "this machine (sampled here)".into(),
    }
}

/// The screen for `link`'s figures as `state` chooses, at `now`.
pub fn screen(link: &Link, state: &ViewState, now: Timestamp) -> Screen {
    let sort = format!(
        "sort: {} {}",
        state.sort.label(),
        if state.sort.descending() != state.reversed {
            "↓"
        } else {
            "↑"
        }
    );
    let mut title = format!(
        "headroom top · {} · every {}",
        source_text(link),
        humantime::format_duration(link.interval)
    );
    if let Some(feed) = &link.feed {
        let _ = write!(
            title,
            " · sampled {}",
            clock(feed.snapshot.taken_at.min(now))
        );
        if feed.dry_run {
            title.push_str(" · dry run");
        }
    }
    let _ = write!(title, " · {sort}");
    if !state.filter.is_empty() {
        let _ = write!(title, " · filter: {}", state.filter);
    }
    if state.ml_only {
        title.push_str(" · ML only");
    }

    let header: Vec<String> = Column::ALL.iter().map(|c| c.title().to_owned()).collect();
    let sorted_column = Column::ALL
        .iter()
        .position(|c| *c == state.sort.column())
        .unwrap_or(0);

    let (memory, gpus, jobs, rules, rows, hidden) = match &link.feed {
        None => (
            vec!["waiting for the first sample…".to_owned()],
            None,
            Vec::new(),
            Vec::new(),
            Vec::new(),
            0,
        ),
        Some(feed) => {
            let (listed, hidden) = ordered(feed, state);
            (
                memory_lines(feed),
                state.show_gpus.then(|| gpu_lines(&feed.snapshot)),
                job_lines(&feed.snapshot),
                rule_lines(feed),
                listed.iter().map(|p| row(feed, p)).collect(),
                hidden,
            )
        }
    };

    let (footer, alert) = if state.editing {
        (
            format!(
                "filter: {}_   (Enter keeps it, Esc clears it)",
                state.filter
            ),
            false,
        )
    } else if let Some((since, why)) = &link.failing {
        let what = match &link.origin {
            Origin::Daemon(addr) => {
                format!("daemon at {addr} not answering since {}", clock(*since))
            }
            Origin::Local { .. } => format!("sampling fails since {}", clock(*since)),
        };
        let shown = if link.feed.is_some() {
            "; showing its last figures"
        } else {
            ""
        };
        (format!("{what} ({why}){shown}; retrying"), true)
    } else {
        let mut keys = "q quit  s sort  r reverse  / filter  m ML only  g GPUs  ? help".to_owned();
        if let Origin::Local { why: Some(why) } = &link.origin {
            keys = format!("{why}   {keys}");
        }
        if hidden > 0 {
            let _ = write!(keys, "   ({hidden} processes not shown)");
        }
        (keys, false)
    };

    Screen {
        title,
        memory,
        gpus,
        jobs,
        rules,
        header,
        sorted_column,
        rows,
        hidden,
        footer,
        alert,
        help: state
            .show_help
            .then(|| HELP.iter().map(|l| (*l).to_owned()).collect()),
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::model::build::{kernel, process, snapshot};
    use crate::model::{Basis, GpuDevice, GpuProcess, PressureLevel, WorkloadKind};

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    /// A fixed machine: a notebook kernel with two workers holding a GPU,
    /// a growing training script, and two ordinary processes.
    pub fn fixture() -> Link {
        let snap = snapshot(1_795_319_493_713)
            .memory(64 * GIB, 20 * GIB)
            .swap(8 * GIB, GIB)
            .pressure_level(PressureLevel::Warn)
            .process(
                kernel(4821)
                    .user("ana")
                    .uid(1000)
                    .footprint(12 * GIB)
                    .gpu_memory(10 * GIB)
                    .notebook("experiments/train.ipynb")
                    .basis(Basis::Pss)
                    .job(4821),
            )
            .process(
                process(4830)
                    .name("python3")
                    .user("ana")
                    .ppid(4821)
                    .footprint(2 * GIB)
                    .kind(WorkloadKind::Python)
                    .job(4821),
            )
            .process(
                process(4831)
                    .name("python3")
                    .user("ana")
                    .ppid(4821)
                    .footprint(GIB)
                    .kind(WorkloadKind::Python)
                    .job(4821),
            )
            .process(
                process(5100)
                    .name("train.py")
                    .user("bo")
                    .footprint(6 * GIB)
                    .kind(WorkloadKind::Pytorch)
                    .argv(["python", "train.py", "--epochs", "3"]),
            )
            .process(process(900).name("sshd").user("root").footprint(8 * MIB))
            .process(
                process(77)
                    .name("postgres")
                    .user("postgres")
                    .footprint(300 * MIB),
            )
            .job_of(4821, Basis::Pss)
            .gpus([GpuDevice {
                index: 0,
                name: "NVIDIA H100 80GB HBM3".into(),
                uuid: None,
                memory_total: Some(80 * GIB),
                memory_used: Some(11 * GIB),
                utilization: Some(0.45),
                memory_reserved: None,
                processes: vec![GpuProcess {
                    pid: 4821,
                    memory: Some(10 * GIB),
                    compute: true,
                    graphics: false,
                    joined: true,
                }],
                cuda_version: None,
            }])
            .build();
        let status = |rule: &str, pid: u32, state: &str, detail: &str| RuleStatus {
            rule: rule.into(),
            pid,
            start: 1,
            state: state.into(),
            detail: detail.into(),
            not_acting: None,
            waits: None,
            next_step: Some(0),
        };
        let mut figures = HashMap::new();
        figures.insert(
            (4821, 1),
            Figures {
                growth: Some(0.0),
                exhaustion_seconds: None,
                rules: vec![status(
                    "notebook-runaway",
                    4821,
                    "near",
                    "footprint > 16.0 GiB",
                )],
            },
        );
        figures.insert(
            (5100, 1),
            Figures {
                growth: Some(64.0 * MIB as f64),
                exhaustion_seconds: Some(432.0),
                rules: vec![status(
                    "training-growth",
                    5100,
                    "step 1/2",
                    "growth 64.0 MiB/s > 50.0 MiB/s",
                )],
            },
        );
        let mut last = HashMap::new();
        last.insert(
            "training-growth".to_owned(),
            LastAction {
                at: Timestamp(1_795_319_490_000),
                text: "SIGINT → train.py (pid 5100) done".into(),
            },
        );
        let feed = Feed {
            snapshot: snap,
            figures,
            rules: vec!["notebook-runaway".into(), "training-growth".into()],
            last_actions: Some(last),
            machine_growth: Some(64.0 * MIB as f64),
            dry_run: false,
        };
        let mut link = Link::new(
            Origin::Daemon("127.0.0.1:9717".parse().unwrap()),
            Duration::from_secs(1),
        );
        link.update(Ok(feed), Timestamp(1_795_319_494_000));
        link
    }

    fn pids(screen: &Screen) -> Vec<u32> {
        screen.rows.iter().map(|r| r.pid).collect()
    }

    fn now() -> Timestamp {
        Timestamp(1_795_319_494_000)
    }

    #[test]
    fn rows_come_largest_footprint_first_by_default() {
        let s = screen(&fixture(), &ViewState::default(), now());
        assert_eq!(pids(&s), [4821, 5100, 4830, 4831, 77, 900]);
        assert!(s.title.contains("sort: footprint ↓"), "{}", s.title);
        assert_eq!(s.header[s.sorted_column], "FOOTPRINT");
    }

    #[test]
    fn s_cycles_through_every_sort_and_back() {
        let link = fixture();
        let mut state = ViewState::default();
        let mut seen = Vec::new();
        for _ in 0..5 {
            assert_eq!(state.on_key(Key::Char('s'), 10), Flow::Go);
            let s = screen(&link, &state, now());
            seen.push((state.sort, pids(&s)));
        }
        assert_eq!(
            seen,
            [
                // Growing first; processes without a trend last, by pid.
                (SortKey::Growth, vec![5100, 4821, 77, 900, 4830, 4831]),
                (SortKey::Pid, vec![77, 900, 4821, 4830, 4831, 5100]),
                (SortKey::Name, vec![77, 4821, 4830, 4831, 900, 5100]),
                (SortKey::Gpu, vec![4821, 77, 900, 4830, 4831, 5100]),
                (SortKey::Footprint, vec![4821, 5100, 4830, 4831, 77, 900]),
            ]
        );
        state.on_key(Key::F(6), 10);
        assert_eq!(state.sort, SortKey::Growth);
    }

    #[test]
    fn reversing_keeps_unknown_figures_last() {
        let link = fixture();
        let state = ViewState {
            sort: SortKey::Growth,
            reversed: true,
            ..ViewState::default()
        };
        let s = screen(&link, &state, now());
        assert_eq!(pids(&s), [4821, 5100, 77, 900, 4830, 4831]);
        assert!(s.title.contains("sort: growth ↑"), "{}", s.title);
        let state = ViewState {
            sort: SortKey::Pid,
            reversed: true,
            ..ViewState::default()
        };
        assert_eq!(
            pids(&screen(&link, &state, now())),
            [5100, 4831, 4830, 4821, 900, 77]
        );
    }

    #[test]
    fn the_filter_matches_name_user_notebook_and_command_line() {
        let link = fixture();
        let mut state = ViewState::default();
        state.on_key(Key::Char('/'), 10);
        for c in "TRAIN".chars() {
            state.on_key(Key::Char(c), 10);
        }
        // Typing: q is text, not quit.
        assert_eq!(state.on_key(Key::Char('q'), 10), Flow::Go);
        state.on_key(Key::Backspace, 10);
        let s = screen(&link, &state, now());
        assert!(s.footer.starts_with("filter: TRAIN_"), "{}", s.footer);
        state.on_key(Key::Enter, 10);
        let s = screen(&link, &state, now());
        // train.ipynb (notebook) and train.py (name, argv).
        assert_eq!(pids(&s), [4821, 5100]);
        assert_eq!(s.hidden, 4);
        assert!(s.title.contains("filter: TRAIN"), "{}", s.title);
        assert!(s.footer.contains("(4 processes not shown)"), "{}", s.footer);
        state.filter = "bo".into();
        assert_eq!(pids(&screen(&link, &state, now())), [5100]);
        state.filter = "4830".into();
        assert_eq!(pids(&screen(&link, &state, now())), [4830]);
        state.on_key(Key::Char('/'), 10);
        state.on_key(Key::Esc, 10);
        assert_eq!(state.filter, "");
        assert!(!state.editing);
    }

    #[test]
    fn ml_only_keeps_ml_workloads_and_job_members() {
        let mut state = ViewState::default();
        state.on_key(Key::Char('m'), 10);
        let s = screen(&fixture(), &state, now());
        assert_eq!(pids(&s), [4821, 5100, 4830, 4831]);
        assert!(s.title.contains("ML only"));
    }

    #[test]
    fn cells_show_growth_eta_gpu_job_rules_and_notebook() {
        let s = screen(&fixture(), &ViewState::default(), now());
        let cells = |pid: u32| {
            s.rows
                .iter()
                .find(|r| r.pid == pid)
                .map(|r| r.cells.clone())
                .unwrap()
        };
        assert_eq!(
            cells(4821),
            [
                "4821",
                "ana",
                "jupyter",
                "12.0 GiB pss",
                "~0",
                "",
                "10.0 GiB",
                "root+2",
                "near notebook-runaway",
                "python3 · experiments/train.ipynb"
            ]
        );
        assert_eq!(
            cells(5100)[3..9],
            [
                "6.0 GiB",
                "+64.0 MiB/s",
                "7m12s",
                "",
                "",
                "step 1/2 training-growth"
            ]
        );
        assert_eq!(cells(4830)[7], "w:4821");
        assert!(s.rows.iter().find(|r| r.pid == 5100).unwrap().flagged);
        assert!(!s.rows.iter().find(|r| r.pid == 4821).unwrap().flagged);
    }

    #[test]
    fn panels_show_memory_gpus_jobs_and_rules() {
        let s = screen(&fixture(), &ViewState::default(), now());
        assert_eq!(
            s.memory[0],
            "memory   20.0 GiB available of 64.0 GiB   44.0 GiB used (69%)"
        );
        assert!(s.memory[1].starts_with("swap     1.0 GiB used of 8.0 GiB   pressure warn"));
        // 27 GiB of room (20 available + 7 free swap) at 64 MiB/s.
        assert_eq!(
            s.memory[2],
            "trend    +64.0 MiB/s taken: memory and swap exhausted in 7m12s at this pace"
        );
        let gpus = s.gpus.as_ref().unwrap();
        assert_eq!(
            gpus[0],
            "gpu0 NVIDIA H100 80GB HBM3   11.0 GiB used of 80.0 GiB (14%)   busy 45%"
        );
        assert!(gpus[1].contains("4821") && gpus[1].contains("10.0 GiB"));
        assert!(gpus[1].ends_with("python3 · experiments/train.ipynb"));
        assert!(s.jobs[0].contains("jupyter + 2 workers"), "{}", s.jobs[0]);
        assert!(s.jobs[0].contains("15.0 GiB (pss)"), "{}", s.jobs[0]);
        assert!(s.rules[0].starts_with("notebook-runaway  watching 1  near 1  holds 0"));
        assert!(s.rules[0].contains("last: none"), "{}", s.rules[0]);
        assert!(s.rules[0].contains("pid 4821: near, footprint > 16.0 GiB"));
        assert!(s.rules[1].contains("acting 1"), "{}", s.rules[1]);
        assert!(
            s.rules[1].contains("last: SIGINT → train.py (pid 5100) done at "),
            "{}",
            s.rules[1]
        );
    }

    #[test]
    fn g_hides_the_gpu_panel_and_help_closes_on_any_key() {
        let mut state = ViewState::default();
        state.on_key(Key::Char('g'), 10);
        assert!(screen(&fixture(), &state, now()).gpus.is_none());
        state.on_key(Key::Char('?'), 10);
        assert!(screen(&fixture(), &state, now()).help.is_some());
        assert_eq!(state.on_key(Key::Esc, 10), Flow::Go);
        assert!(!state.show_help);
        assert_eq!(state.on_key(Key::Esc, 10), Flow::Quit);
        assert_eq!(ViewState::default().on_key(Key::Ctrl('c'), 10), Flow::Quit);
    }

    #[test]
    fn a_failing_source_is_shown_with_its_first_failure() {
        let mut link = fixture();
        link.update(
            Err("connection refused".into()),
            Timestamp(1_795_319_500_000),
        );
        link.update(
            Err("connection refused".into()),
            Timestamp(1_795_319_510_000),
        );
        let s = screen(&link, &ViewState::default(), now());
        assert!(s.alert);
        let since = clock(Timestamp(1_795_319_500_000));
        assert_eq!(
            s.footer,
            format!(
                "daemon at 127.0.0.1:9717 not answering since {since} (connection refused); \
                 showing its last figures; retrying"
            )
        );
        // The figures stay.
        assert_eq!(s.rows.len(), 6);
        link.update(Ok(link.feed.clone().unwrap()), Timestamp(1_795_319_511_000));
        assert!(!screen(&link, &ViewState::default(), now()).alert);
    }

    #[test]
    fn figures_format_in_binary_units_and_short_durations() {
        assert_eq!(format_rate(1536.0), "+1.5 KiB/s");
        assert_eq!(format_rate(-300.0 * 1024.0), "-300 KiB/s");
        assert_eq!(format_rate(10.0), "~0");
        assert_eq!(format_rate(f64::NAN), "");
        assert_eq!(format_eta(45.4), "45s");
        assert_eq!(format_eta(200.0), "3m20s");
        assert_eq!(format_eta(7500.0), "2h05m");
        assert_eq!(format_eta(3.0 * 86400.0 + 4.0 * 3600.0), "3d04h");
        assert_eq!(format_eta(-1.0), "");
    }

    #[test]
    fn hostile_names_are_printed_escaped() {
        let mut link = fixture();
        let feed = link.feed.as_mut().unwrap();
        feed.snapshot
            .processes
            .push(process(6666).name("evil\x1b[2Jname").footprint(1).build());
        let s = screen(&link, &ViewState::default(), now());
        let row = s.rows.iter().find(|r| r.pid == 6666).unwrap();
        assert!(!row.cells[9].contains('\x1b'), "{:?}", row.cells[9]);
    }
}
