//! `headroom doctor` on macOS: each collector of [`super::MacSampler`] run
//! once, with what it found and what to do about it. Adding a check is
//! adding a function to [`CHECKS`]; the pressure notification is checked
//! through its collector (`sample::PressureEvents`, [`pressure_events`]).

use crate::model::Check;
use crate::report::format_bytes;

use super::ffi::mach as ffi_mach;
use super::iokit;
use super::parse::{gpu_stats, page_counts, pressure, procargs, vm};
use super::vm_source;
use crate::os::macos::ffi::proc as ffi_proc;
use crate::os::macos::parse::proc_info;
use crate::os::read_failure::ReadFailure;

/// The checks, in report order.
pub const CHECKS: &[fn() -> Check] = &[
    vm_statistics,
    swap,
    pressure_level,
    processes,
    process_args,
    gpu,
    gpu_clients,
    gpu_wired_limit,
    rosetta,
];

/// Run every check.
pub fn checks() -> Vec<Check> {
    CHECKS.iter().map(|check| check()).collect()
}

/// macOS version, kernel release and hardware.
pub fn facts() -> Vec<(&'static str, String)> {
    let get = |name| {
        crate::os::macos::ffi::sysctl::sysctl_string(name)
            .unwrap_or_else(|e| format!("unknown ({e})"))
    };
    vec![
        ("macos", get(c"kern.osproductversion")),
        ("kernel", get(c"kern.osrelease")),
        ("model", get(c"hw.model")),
        ("cpu", get(c"machdep.cpu.brand_string")),
    ]
}

/// What to do to watch every user's processes.
fn root_step() -> String {
    format!(
        "install the system service to watch every user's processes: {}",
        crate::os::this_process::sudo_command("service install --system")
    )
}

fn vm_statistics() -> Check {
    let (stats, count) = match vm_source::host_statistics_now() {
        Ok(s) => s,
        Err(e) => {
            return Check::fail(
                "vm-statistics",
                e.to_string(),
                "headroom cannot read system memory on this macOS; please report this output",
            );
        }
    };
    let (page, total) = match (ffi_mach::page_size(), ffi_mach::memsize()) {
        (Ok(p), Ok(t)) => (p, t),
        (Err(e), _) | (_, Err(e)) => {
            return Check::fail(
                "vm-statistics",
                format!("page size or hw.memsize unreadable: {e}"),
                "please report this output",
            );
        }
    };
    let m = vm::system_memory(&stats, page, total);
    let host = format!(
        "host_statistics64 works with a count of {count} words (REV1 needs {}); page size {}; {} total, {} available, {} wired, {} compressed",
        vm::REV1_COUNT,
        format_bytes(page),
        format_bytes(total),
        format_bytes(m.available),
        format_bytes(m.wired.unwrap_or(0)),
        format_bytes(m.compressed.unwrap_or(0)),
    );
    match vm_source::page_counts() {
        Ok(fresh) => {
            let held = page_counts::HeldStatistics {
                stats,
                compressor_bytes: fresh.compressor_bytes,
            };
            let by_sysctls =
                vm::system_memory(&page_counts::merge(&fresh, &held, page), page, total);
            Check::ok(
                "vm-statistics",
                format!(
                    "{host}; the page counts come from the vm.page_* sysctls on every read ({} available by them now), host_statistics64 at most once a second, since the kernel answers it from a cache past 2 to 10 calls a second",
                    format_bytes(by_sysctls.available),
                ),
            )
        }
        Err(why) => Check::warn(
            "vm-statistics",
            format!(
                "{host}; but {why}, so every figure comes from host_statistics64, which the kernel answers from a cache past 2 to 10 calls a second: between samples the figures may lag by up to a second"
            ),
            "headroom runs, but sees memory fall up to a second late; please report this output with your macOS version",
        ),
    }
}

fn swap() -> Check {
    match ffi_mach::swap_usage() {
        Ok(x) => Check::ok(
            "swap",
            format!(
                "vm.swapusage: {} of {} used{}",
                format_bytes(x.used),
                format_bytes(x.total),
                if x.encrypted { " (encrypted)" } else { "" }
            ),
        ),
        Err(e) => Check::warn(
            "swap",
            format!("vm.swapusage unreadable: {e}"),
            "swap is reported as 0; please report this output",
        ),
    }
}

fn pressure_level() -> Check {
    let free = ffi_mach::memorystatus_level()
        .ok()
        .and_then(pressure::free_percent)
        .map_or_else(|| "unreadable".to_owned(), |p| format!("{p}%"));
    match ffi_mach::pressure_level_raw() {
        Ok(raw) => match pressure::level_from_sysctl(raw) {
            Some(level) => Check::ok(
                "pressure-level",
                format!(
                    "kern.memorystatus_vm_pressure_level = {raw} ({level}); memory free per kern.memorystatus_level: {free}"
                ),
            ),
            None => Check::warn(
                "pressure-level",
                format!("kern.memorystatus_vm_pressure_level = {raw}, not 1, 2 or 4"),
                "the level is derived from available memory instead; please report this output",
            ),
        },
        Err(e) => Check::warn(
            "pressure-level",
            format!("kern.memorystatus_vm_pressure_level unreadable: {e}"),
            "the level is derived from available memory instead",
        ),
    }
}

/// The check of the memory-pressure notification (`sample::PressureEvents`):
/// a dispatch source registered and dropped.
pub fn pressure_events() -> Check {
    // Creating the source registers it with the kernel; dropping it cancels.
    let source = super::ffi::dispatch::MemoryPressureSource::open();
    drop(source);
    Check::ok(
        "pressure-events",
        "dispatch memory-pressure source registered (normal, warn, critical); the daemon wakes on each event",
    )
}

fn processes() -> Check {
    let mut pids = Vec::new();
    if let Err(errno) = ffi_proc::list_pids(&mut pids) {
        return Check::fail(
            "processes",
            format!(
                "proc_listallpids failed: {}",
                std::io::Error::from_raw_os_error(errno)
            ),
            "please report this output",
        );
    }
    let (mut readable, mut denied, mut other) = (0usize, 0usize, 0usize);
    for &pid in pids.iter().filter(|&&p| p > 0) {
        match ffi_proc::rusage(pid) {
            Ok(_) => readable += 1,
            Err(errno) => match proc_info::libproc_failure(errno) {
                ReadFailure::Denied => denied += 1,
                ReadFailure::Vanished => {}
                ReadFailure::Unreadable => other += 1,
            },
        }
    }
    let total = readable + denied + other;
    let detail = format!(
        "{total} processes; footprint (proc_pid_rusage) readable for {readable}, refused for {denied} (other users'), failed for {other}"
    );
    if denied > 0 {
        Check::warn("processes", detail, root_step())
    } else if other > 0 {
        Check::warn("processes", detail, "please report this output")
    } else {
        Check::ok("processes", detail)
    }
}

fn process_args() -> Check {
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let mut buf = Vec::new();
    match ffi_proc::procargs(me, &mut buf) {
        Ok(n) => match procargs::parse_answer(&buf[..n], buf.len()) {
            Ok(args) if args.complete => Check::ok(
                "process-args",
                format!(
                    "KERN_PROCARGS2 read this process's {} arguments; other users' need root",
                    args.argv.len()
                ),
            ),
            Ok(_) => Check::warn(
                "process-args",
                "KERN_PROCARGS2 answer for this process was cut short",
                "Jupyter kernels may not be recognised; please report this output",
            ),
            Err(e) => Check::warn(
                "process-args",
                e.to_string(),
                "Jupyter kernels may not be recognised; please report this output",
            ),
        },
        Err(errno) => Check::warn(
            "process-args",
            format!(
                "KERN_PROCARGS2 failed for this process: {}",
                std::io::Error::from_raw_os_error(errno)
            ),
            "workloads are classified by name only",
        ),
    }
}

fn gpu() -> Check {
    let readings = match iokit::read_accelerators(false) {
        Ok(r) => r,
        Err(e) => return Check::warn("gpu", e, "GPU memory is not reported"),
    };
    let described: Vec<String> = readings
        .iter()
        .filter(|r| !r.stats.is_empty())
        .map(|r| {
            let s = gpu_stats::accelerator_stats(&r.stats);
            let fmt = |v: Option<u64>| v.map_or_else(|| "?".to_owned(), format_bytes);
            format!(
                "{} ({}): {} in use, {} allocated, {} busy",
                r.model.as_deref().unwrap_or("unnamed"),
                r.class,
                fmt(s.in_use),
                fmt(s.allocated),
                s.utilization
                    .map_or_else(|| "?".to_owned(), |u| format!("{:.0}%", u * 100.0))
            )
        })
        .collect();
    if described.is_empty() {
        Check::not_applicable(
            "gpu",
            format!(
                "{} IOAccelerator service(s), none with PerformanceStatistics: GPU memory is not reported on this Mac",
                readings.len()
            ),
        )
    } else {
        Check::ok("gpu", described.join("; "))
    }
}

fn gpu_clients() -> Check {
    match iokit::read_accelerators(true) {
        Ok(readings) => {
            let mut clients: Vec<(u32, String)> = readings
                .into_iter()
                .flat_map(|r| r.clients)
                .map(|c| (c.pid, c.name))
                .collect();
            clients.sort();
            clients.dedup();
            if clients.is_empty() {
                return Check::not_applicable("gpu-clients", "no process holds a GPU connection");
            }
            let names: Vec<String> = clients
                .iter()
                .take(5)
                .map(|(pid, name)| format!("{name} ({pid})"))
                .collect();
            Check::ok(
                "gpu-clients",
                format!(
                    "{} GPU connections (IOUserClientCreator), e.g. {}",
                    clients.len(),
                    names.join(", ")
                ),
            )
        }
        Err(e) => Check::warn("gpu-clients", e, "GPU clients are not marked"),
    }
}

fn gpu_wired_limit() -> Check {
    match ffi_mach::wired_limit_mb() {
        Ok(Some(mb)) => match pressure::wired_limit_bytes(mb) {
            Some(bytes) => Check::ok(
                "gpu-wired-limit",
                format!("iogpu.wired_limit_mb = {mb} ({})", format_bytes(bytes)),
            ),
            None => Check::ok(
                "gpu-wired-limit",
                format!("iogpu.wired_limit_mb = {mb}: no limit set, the driver's default applies"),
            ),
        },
        Ok(None) => Check::not_applicable(
            "gpu-wired-limit",
            "no iogpu.wired_limit_mb on this Mac (Intel, or macOS before 14)",
        ),
        Err(e) => Check::warn(
            "gpu-wired-limit",
            format!("iogpu.wired_limit_mb unreadable: {e}"),
            "the GPU's wired ceiling is not reported",
        ),
    }
}

/// Whether headroom itself runs translated by Rosetta 2
/// (`sysctl.proc_translated`). ML processes that do are reported by the
/// end-to-end sample check, from their workload evidence.
fn rosetta() -> Check {
    match ffi_proc::this_process_translated() {
        Some(true) => Check::warn(
            "rosetta",
            "headroom runs as x86_64 code translated by Rosetta 2 (sysctl.proc_translated = 1)",
            "install headroom's arm64 (Apple Silicon) build; processes translated by Rosetta 2 are marked \"x86_64 under Rosetta 2\" in their workload evidence",
        ),
        Some(false) => Check::ok(
            "rosetta",
            "headroom runs natively; processes translated by Rosetta 2 are marked \"x86_64 under Rosetta 2\" in their workload evidence",
        ),
        None => Check::warn(
            "rosetta",
            "sysctl.proc_translated unreadable",
            "whether headroom runs translated is unknown; please report this output",
        ),
    }
}
