//! Human-readable rendering of snapshots for the terminal: sizes in binary
//! units, a summary of the machine's memory, and the process table that
//! `headroom snapshot` prints, with memory no process owns below it
//! (`report/unowned.rs`). [`rate_limit`] keeps a recurring condition
//! from flooding the log.

pub mod rate_limit;
mod unowned;

use std::fmt::Write as _;

use crate::model::{Detail, ProcessSample, Snapshot};

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

fn render_processes(out: &mut String, snap: &Snapshot, opts: TableOptions) {
    let sorted = snap.by_footprint();
    let shown: Vec<&ProcessSample> = if opts.all {
        sorted
    } else {
        sorted.into_iter().take(opts.top).collect()
    };
    let has_gpu = shown.iter().any(|p| p.gpu_memory.is_some());
    let mut header = format!(
        "{:>8} {:<10} {:>10} {:>10} {:>9}",
        "PID", "USER", "FOOTPRINT", "RESIDENT", "SWAPPED"
    );
    if has_gpu {
        let _ = write!(header, " {:>9}", "GPU");
    }
    let _ = write!(header, " {:<11} {:<16} COMMAND", "WORKLOAD", "NAME");
    let _ = writeln!(out, "{header}");
    for p in &shown {
        let user = p
            .user
            .as_ref()
            .map(ToString::to_string)
            .or_else(|| p.uid.map(|u| u.to_string()))
            .unwrap_or_else(|| "?".into());
        let mut footprint = format_bytes(p.footprint);
        if p.detail == Detail::Estimated {
            footprint.insert(0, '~');
        }
        let mut line = format!(
            "{:>8} {:<10} {:>10} {:>10} {:>9}",
            p.id.pid,
            truncate(&printable(&user), 10),
            footprint,
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
    let hidden = snap.processes.len().saturating_sub(shown.len());
    if hidden > 0 {
        let _ = writeln!(
            out,
            "… and {hidden} more processes (--all lists every one); ~ marks an estimated footprint"
        );
    } else if shown.iter().any(|p| p.detail == Detail::Estimated) {
        let _ = writeln!(out, "~ marks an estimated footprint");
    }
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

    #[test]
    fn truncate_marks_the_cut() {
        assert_eq!(truncate("ipykernel_launcher", 8), "ipykern…");
        assert_eq!(truncate("short", 8), "short");
    }
}
