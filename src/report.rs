//! Human-readable rendering of snapshots for the terminal: sizes in binary
//! units, a summary of the machine's memory, and the process table that
//! `headroom snapshot` and `headroom status` print: each job's workers
//! listed under its root, with the job's total, and each footprint with its
//! counting basis where that is not the OS's usual one, and memory no
//! process owns below it (`report/unowned.rs`). [`rate_limit`]
//! keeps a recurring condition from flooding the log, [`source_limit`] one
//! user's processes.

pub mod rate_limit;
pub mod source_limit;
mod unowned;

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::model::{Basis, Detail, Job, ProcessSample, Snapshot, WorkloadKind};

pub use crate::model::printable;

/// `1536` → `"1.5 KiB"`; bytes under 1 KiB print exactly.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value >= 100.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `value` in the unit [`format_bytes`] picks, with enough decimals that
/// it reads differently from `format_bytes(threshold)` whenever the two
/// differ: `300.2 MiB` against `300 MiB`, never `300 MiB > 300 MiB`. Where
/// three decimals do not tell them apart, the exact count of bytes does.
pub fn format_bytes_against(value: u64, threshold: u64) -> String {
    let plain = format_bytes(value);
    if value == threshold || plain != format_bytes(threshold) {
        return plain;
    }
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut scaled = value as f64;
    let mut unit = 0;
    while scaled >= 1024.0 && unit < UNITS.len() - 1 {
        scaled /= 1024.0;
        unit += 1;
    }
    let mut scaled_threshold = threshold as f64;
    for _ in 0..unit {
        scaled_threshold /= 1024.0;
    }
    for places in 1..=3 {
        let a = format!("{scaled:.places$}");
        let b = format!("{scaled_threshold:.places$}");
        if a != b {
            return format!("{a} {}", UNITS[unit]);
        }
    }
    format!("{value} B")
}

/// `part` as a percentage of `whole`, `0` when `whole` is zero.
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// What to include in the process table.
#[derive(Debug, Clone, Copy)]
pub struct TableOptions {
    /// List every process instead of the top ones.
    pub all: bool,
    /// How many processes to list when not `all`.
    pub top: usize,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self {
            all: false,
            top: 15,
        }
    }
}

/// The memory summary and process table of `headroom snapshot`.
pub fn render_snapshot(snap: &Snapshot, opts: TableOptions) -> String {
    let mut out = String::new();
    render_summary(&mut out, snap);
    out.push('\n');
    render_processes(&mut out, snap, opts);
    unowned::render_unowned(&mut out, snap);
    out
}

fn render_summary(out: &mut String, snap: &Snapshot) {
    let m = &snap.system;
    let _ = writeln!(
        out,
        "memory   {} used of {} ({:.0}%), {} available, {} free   pressure: {}",
        format_bytes(m.used),
        format_bytes(m.total),
        percent(m.used, m.total),
        format_bytes(m.available),
        format_bytes(m.free),
        snap.pressure.level,
    );
    let mut parts = Vec::new();
    for (label, value) in [
        ("app", m.app),
        ("wired", m.wired),
        ("compressed", m.compressed),
        ("cached", m.cached),
        ("shmem", m.shmem),
    ] {
        if let Some(v) = value {
            parts.push(format!("{label} {}", format_bytes(v)));
        }
    }
    if !parts.is_empty() {
        let _ = writeln!(out, "         {}", parts.join(", "));
    }
    let s = &snap.swap;
    if s.total == 0 {
        let _ = write!(out, "swap     none");
    } else {
        let _ = write!(
            out,
            "swap     {} used of {}",
            format_bytes(s.used),
            format_bytes(s.total)
        );
    }
    if let (Some(i), Some(o)) = (s.swapped_in_bytes, s.swapped_out_bytes) {
        let _ = write!(
            out,
            " (since boot: {} in, {} out)",
            format_bytes(i),
            format_bytes(o)
        );
    }
    out.push('\n');
    if let Some(psi) = snap.pressure.psi {
        let _ = write!(
            out,
            "psi      some {:.2}% / {:.2}% / {:.2}% (10s/60s/300s)",
            psi.some.avg10, psi.some.avg60, psi.some.avg300
        );
        if let Some(full) = psi.full {
            let _ = write!(
                out,
                ", full {:.2}% / {:.2}% / {:.2}%",
                full.avg10, full.avg60, full.avg300
            );
        }
        out.push('\n');
    }
    if let Some(free) = snap.pressure.free_percent {
        let _ = writeln!(out, "         kernel reports {free}% of memory free");
    }
    for gpu in &snap.gpus {
        let used = gpu.memory_used.map_or("?".to_string(), format_bytes);
        let total = gpu.memory_total.map_or("?".to_string(), format_bytes);
        let _ = write!(
            out,
            "gpu {}    {}: {used} used of {total}",
            gpu.index, gpu.name
        );
        if let Some(reserved) = gpu.memory_reserved.filter(|r| *r > 0) {
            let _ = write!(out, ", {} reserved", format_bytes(reserved));
        }
        if let Some(busy) = gpu.utilization {
            let _ = write!(out, ", {:.0}% busy", busy * 100.0);
        }
        if !gpu.processes.is_empty() {
            let n = gpu.processes.len();
            let _ = write!(out, ", {n} process{}", if n == 1 { "" } else { "es" });
        }
        out.push('\n');
    }
    for c in snap.collectors.iter().filter(|c| !c.up) {
        let _ = writeln!(out, "{:<8} unavailable: {}", c.name, c.detail);
    }
    for note in &snap.notes {
        let _ = writeln!(out, "note     {note}");
    }
    let e = &snap.errors;
    if e.vanished + e.permission_denied + e.unreadable > 0 {
        let _ = writeln!(
            out,
            "note     {} processes exited while being read, {} refused (need root), {} unreadable",
            e.vanished, e.permission_denied, e.unreadable
        );
    }
}

/// The basis a footprint of this snapshot's OS counts by unless it says
/// otherwise: `phys_footprint` on macOS, `rss` elsewhere. Only a footprint
/// counted another way carries its basis in the table.
fn default_basis(snap: &Snapshot) -> Basis {
    if snap.source == "macos" {
        Basis::PhysFootprint
    } else {
        Basis::Rss
    }
}

/// The most workers listed under their root without `--all`; the rest are
/// counted on one line.
const WORKERS_SHOWN: usize = 8;

/// A line of the process table: a process on its own or a job's root, a
/// worker under its root, the workers left out, or a job's total.
enum Row<'a> {
    Process(&'a ProcessSample),
    Worker(&'a ProcessSample),
    MoreWorkers(usize),
    Total(&'a ProcessSample, &'a Job),
}

/// The table's lines in order: processes that are no job's worker, largest
/// first (the top ones unless `all`), each job's root followed by its
/// workers (largest first) and the job's total. A worker whose root was not
/// sampled stands on its own.
fn table_rows<'a>(snap: &'a Snapshot, opts: TableOptions) -> (Vec<Row<'a>>, usize) {
    let by_pid: HashMap<u32, &ProcessSample> =
        snap.processes.iter().map(|p| (p.id.pid, p)).collect();
    let job_of_root = |p: &ProcessSample| -> Option<&'a Job> {
        snap.job(p.id.pid).filter(|j| p.job == Some(j.pid()))
    };
    let is_worker = |p: &ProcessSample| -> bool {
        p.job.is_some_and(|root| {
            root != p.id.pid && by_pid.contains_key(&root) && snap.job(root).is_some()
        })
    };
    let mut heads: Vec<&ProcessSample> = snap
        .by_footprint()
        .into_iter()
        .filter(|p| !is_worker(p))
        .collect();
    if !opts.all {
        heads.truncate(opts.top);
    }
    let mut rows = Vec::new();
    let mut shown = 0;
    for p in heads {
        rows.push(Row::Process(p));
        shown += 1;
        let Some(job) = job_of_root(p) else {
            continue;
        };
        let mut workers: Vec<&ProcessSample> = job
            .members
            .iter()
            .filter(|&&pid| pid != p.id.pid)
            .filter_map(|pid| by_pid.get(pid).copied())
            .filter(|w| w.job == Some(p.id.pid))
            .collect();
        workers.sort_by(|a, b| b.footprint.cmp(&a.footprint).then(a.id.pid.cmp(&b.id.pid)));
        let listed = if opts.all {
            workers.len()
        } else {
            workers.len().min(WORKERS_SHOWN)
        };
        for w in &workers[..listed] {
            rows.push(Row::Worker(w));
        }
        shown += workers.len();
        if listed < workers.len() {
            rows.push(Row::MoreWorkers(workers.len() - listed));
        }
        rows.push(Row::Total(p, job));
    }
    let hidden = snap.processes.len().saturating_sub(shown);
    (rows, hidden)
}

fn render_processes(out: &mut String, snap: &Snapshot, opts: TableOptions) {
    let (rows, hidden) = table_rows(snap, opts);
    let listed = || {
        rows.iter().filter_map(|r| match r {
            Row::Process(p) | Row::Worker(p) => Some(*p),
            _ => None,
        })
    };
    let has_gpu = listed().any(|p| p.gpu_memory.is_some());
    let usual = default_basis(snap);
    let mut header = format!(
        "{:>8} {:<10} {:>14} {:>10} {:>9}",
        "PID", "USER", "FOOTPRINT", "RESIDENT", "SWAPPED"
    );
    if has_gpu {
        let _ = write!(header, " {:>9}", "GPU");
    }
    let _ = write!(header, " {:<11} {:<16} COMMAND", "WORKLOAD", "NAME");
    let _ = writeln!(out, "{header}");
    for row in &rows {
        match row {
            Row::Process(p) => process_line(out, p, p.id.pid.to_string(), has_gpu, usual),
            Row::Worker(p) => process_line(out, p, format!("└ {}", p.id.pid), has_gpu, usual),
            Row::MoreWorkers(n) => {
                let _ = writeln!(
                    out,
                    "{:>8} … and {n} more worker{} (--all lists every one)",
                    "└",
                    if *n == 1 { "" } else { "s" }
                );
            }
            Row::Total(root, job) => {
                let _ = writeln!(out, "{:>8} {}", "", job_total(root, job));
            }
        }
    }
    let estimated = listed().any(|p| p.detail == Detail::Estimated);
    if hidden > 0 {
        let _ = writeln!(
            out,
            "… and {hidden} more processes (--all lists every one); ~ marks an estimated footprint"
        );
    } else if estimated {
        let _ = writeln!(out, "~ marks an estimated footprint");
    }
    let pss = listed().any(|p| p.basis == Basis::Pss)
        || rows
            .iter()
            .any(|r| matches!(r, Row::Total(_, j) if j.basis == Basis::Pss));
    if pss {
        let _ = writeln!(
            out,
            "pss: the proportional share, each page shared by n processes counted 1/n in each"
        );
    }
}

/// One process's line; `pid` is what its PID column shows.
fn process_line(out: &mut String, p: &ProcessSample, pid: String, has_gpu: bool, usual: Basis) {
    let user = p
        .user
        .as_ref()
        .map(ToString::to_string)
        .or_else(|| p.uid.map(|u| u.to_string()))
        .unwrap_or_else(|| "?".into());
    let mut line = format!(
        "{:>8} {:<10} {:>14} {:>10} {:>9}",
        pid,
        truncate(&printable(&user), 10),
        footprint_cell(p, usual),
        format_bytes(p.resident),
        p.swapped.map_or("-".to_string(), format_bytes),
    );
    if has_gpu {
        let _ = write!(
            line,
            " {:>9}",
            p.gpu_memory.map_or("-".to_string(), format_bytes)
        );
    }
    let workload = match &p.workload.kernel_id {
        Some(_) => format!("{}*", p.workload.kind),
        None => p.workload.kind.to_string(),
    };
    let _ = write!(
        line,
        " {:<11} {:<16} {}",
        workload,
        truncate(&printable(&p.name), 16),
        truncate(&command_column(p), 80)
    );
    let _ = writeln!(out, "{}", line.trim_end());
}

/// The footprint, `~` before an estimated one, its basis after where it is
/// not the OS's usual one: `~410 MiB pss`.
fn footprint_cell(p: &ProcessSample, usual: Basis) -> String {
    let mut cell = format_bytes(p.footprint);
    if p.detail == Detail::Estimated {
        cell.insert(0, '~');
    }
    if p.basis != usual {
        cell.push(' ');
        cell.push_str(p.basis.as_str());
    }
    cell
}

/// A job's total line: `job: kernel + 8 workers, 12.3 GiB (pss)`, with its
/// GPU memory where known.
fn job_total(root: &ProcessSample, job: &Job) -> String {
    let what = if root.workload.kind == WorkloadKind::Jupyter {
        "kernel".to_string()
    } else {
        truncate(&printable(&root.name), 16)
    };
    let n = job.workers();
    let mut line = format!(
        "job: {what} + {n} worker{}, {} ({})",
        if n == 1 { "" } else { "s" },
        format_bytes(job.footprint),
        job.basis
    );
    if let Some(gpu) = job.gpu_memory {
        let _ = write!(line, ", {} GPU", format_bytes(gpu));
    }
    line
}

/// The command line, after the notebook in brackets for a Jupyter kernel
/// whose notebook is known: `[work/train.ipynb] python3 -m ipykernel_launcher …`.
fn command_column(p: &ProcessSample) -> String {
    match &p.workload.notebook {
        Some(notebook) => format!("[{}] {}", printable(notebook), command_line(p)),
        None => command_line(p),
    }
}

/// The argv joined by spaces, or the name in brackets when argv is empty.
fn command_line(p: &ProcessSample) -> String {
    if p.argv.is_empty() {
        format!("[{}]", printable(&p.name))
    } else {
        printable(&p.argv.join(" ")).into_owned()
    }
}

/// At most `max` characters, with an ellipsis when cut.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_under_a_kibibyte_print_exactly() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
    }

    #[test]
    fn a_value_over_a_threshold_never_reads_as_equal_to_it() {
        const MIB: u64 = 1 << 20;
        let limit = 300 * MIB;
        assert_eq!(
            format_bytes(limit + MIB / 5),
            format_bytes(limit),
            "the bug"
        );
        assert_eq!(format_bytes_against(limit + MIB / 5, limit), "300.2 MiB");
        assert_eq!(format_bytes_against(limit + MIB / 50, limit), "300.02 MiB");
        assert_eq!(format_bytes_against(limit + 1024, limit), "300.001 MiB");
        assert_eq!(format_bytes_against(limit + 1, limit), "314572801 B");
        assert_eq!(format_bytes_against(limit - MIB / 5, limit), "299.8 MiB");
        // Apart already, or equal: as format_bytes writes them.
        assert_eq!(format_bytes_against(310 * MIB, limit), "310 MiB");
        assert_eq!(format_bytes_against(limit, limit), "300 MiB");
        assert_eq!(format_bytes_against(8 << 30, 8 << 30), "8.0 GiB");
        assert_eq!(
            format_bytes_against((8 << 30) + 20 * MIB, 8 << 30),
            "8.02 GiB"
        );
        assert_eq!(format_bytes_against(1000, 999), "1000 B");
    }

    #[test]
    fn bytes_scale_to_binary_units() {
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(256 << 20), "256 MiB");
        assert_eq!(format_bytes(41 * (1 << 30) + (1 << 29)), "41.5 GiB");
        assert_eq!(format_bytes(u64::MAX), "16384 PiB");
    }

    #[test]
    fn percent_of_zero_is_zero() {
        assert_eq!(percent(5, 0), 0.0);
        assert_eq!(percent(1, 4), 25.0);
    }

    #[test]
    fn a_kernels_notebook_leads_its_command() {
        let p = crate::model::build::kernel(7)
            .uid(1000)
            .user("ada")
            .footprint(1 << 30)
            .resident(1 << 30)
            .kernel_id("3f2a")
            .notebook("work/train.ipynb")
            .build();
        assert_eq!(
            command_column(&p),
            "[work/train.ipynb] python3 -m ipykernel_launcher"
        );
        let plain = ProcessSample {
            workload: crate::model::Workload::default(),
            ..p
        };
        assert_eq!(command_column(&plain), "python3 -m ipykernel_launcher");
    }

    use crate::model::build::{kernel, process, snapshot};

    /// A kernel (pid 4821, 2 GiB) with `workers` workers of 410 MiB each
    /// (pids 4830…), counted by PSS, beside a plain 1 GiB process (pid 7).
    fn notebook_job(workers: u32) -> crate::model::build::SnapshotBuilder {
        let mut b = snapshot(0)
            .source("linux")
            .memory(32 << 30, 16 << 30)
            .process(
                kernel(4821)
                    .user("ada")
                    .footprint(2 << 30)
                    .basis(Basis::Pss)
                    .kernel_id("3f2a")
                    .notebook("train.ipynb")
                    .job(4821),
            )
            .process(process(7).name("firefox").footprint(1 << 30));
        for i in 0..workers {
            b = b.process(
                process(4830 + i)
                    .ppid(4821)
                    .user("ada")
                    .name("python3")
                    .footprint(410 << 20)
                    .basis(Basis::Pss)
                    .kind(WorkloadKind::Pytorch)
                    .evidence(["worker of jupyter kernel 4821: its parent"])
                    .job(4821),
            );
        }
        b.job_of(4821, Basis::Pss)
    }

    fn table(snap: &Snapshot, opts: TableOptions) -> Vec<String> {
        let mut out = String::new();
        render_processes(&mut out, snap, opts);
        out.lines().map(str::to_owned).collect()
    }

    #[test]
    fn workers_are_listed_under_their_root_with_the_jobs_total() {
        let snap = notebook_job(2).build();
        let lines = table(&snap, TableOptions::default());
        let at = |prefix: &str| {
            lines
                .iter()
                .position(|l| l.trim_start().starts_with(prefix))
                .unwrap_or_else(|| panic!("no line starting {prefix}: {lines:#?}"))
        };
        let (root, w1, w2, total, other) = (
            at("4821 "),
            at("└ 4830 "),
            at("└ 4831 "),
            at("job: "),
            at("7 "),
        );
        assert_eq!(
            (w1, w2, total),
            (root + 1, root + 2, root + 3),
            "{lines:#?}"
        );
        assert!(other > total, "the 1 GiB process follows the 2.8 GiB job");
        assert!(lines[w1].contains("410 MiB pss"), "{}", lines[w1]);
        assert!(lines[root].contains("2.0 GiB pss"), "{}", lines[root]);
        assert!(lines[root].contains("[train.ipynb]"));
        assert_eq!(
            lines[total].trim(),
            "job: kernel + 2 workers, 2.8 GiB (pss)"
        );
        assert!(
            !lines[other].contains("rss"),
            "the usual basis is not shown"
        );
        assert!(
            lines
                .last()
                .unwrap()
                .starts_with("pss: the proportional share")
        );
    }

    #[test]
    fn workers_do_not_take_places_of_the_top_and_many_are_counted() {
        let snap = notebook_job(12).build();
        let lines = table(&snap, TableOptions { all: false, top: 1 });
        let workers = lines.iter().filter(|l| l.contains("└ 48")).count();
        assert_eq!(workers, WORKERS_SHOWN, "{lines:#?}");
        assert!(
            lines
                .iter()
                .any(|l| l.trim() == "└ … and 4 more workers (--all lists every one)"),
            "{lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.trim() == "job: kernel + 12 workers, 6.8 GiB (pss)")
        );
        assert!(
            !lines.iter().any(|l| l.contains("firefox")),
            "top 1 is the job"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("… and 1 more processes")),
            "{lines:#?}"
        );
        let all = table(&snap, TableOptions { all: true, top: 1 });
        assert_eq!(all.iter().filter(|l| l.contains("└ 48")).count(), 12);
    }

    #[test]
    fn a_worker_whose_root_was_not_sampled_stands_alone() {
        let snap = snapshot(0)
            .process(process(5).job(4).footprint(1 << 20))
            .build();
        let lines = table(&snap, TableOptions::default());
        assert!(
            lines.iter().any(|l| l.trim_start().starts_with("5 ")),
            "{lines:#?}"
        );
        assert!(!lines.iter().any(|l| l.contains("job:")));
    }

    #[test]
    fn a_servers_job_is_named_by_the_root_and_shows_its_gpu_memory() {
        let snap = snapshot(0)
            .source("macos")
            .process(
                process(20)
                    .name("ollama")
                    .kind(WorkloadKind::LlmServer)
                    .footprint(1 << 30)
                    .basis(Basis::PhysFootprint)
                    .job(20),
            )
            .process(
                process(21)
                    .ppid(20)
                    .name("ollama")
                    .kind(WorkloadKind::LlmServer)
                    .footprint(3 << 30)
                    .gpu_memory(2 << 30)
                    .basis(Basis::PhysFootprint)
                    .job(20),
            )
            .job_of(20, Basis::PhysFootprint)
            .build();
        let lines = table(&snap, TableOptions::default());
        assert!(
            lines.iter().any(
                |l| l.trim() == "job: ollama + 1 worker, 4.0 GiB (phys_footprint), 2.0 GiB GPU"
            ),
            "{lines:#?}"
        );
        assert!(
            !lines.iter().any(|l| l.contains("GiB phys_footprint ")),
            "phys_footprint is macOS's usual basis: {lines:#?}"
        );
    }

    #[test]
    fn truncate_marks_the_cut() {
        assert_eq!(truncate("ipykernel_launcher", 8), "ipykern…");
        assert_eq!(truncate("short", 8), "short");
    }
}
