//! Pure functions from what a GPU driver lists to the snapshot: merging the
//! compute and graphics process lists, removing duplicate pids, keeping
//! unknown figures unknown, and joining the result into the process samples
//! by pid.
//!
//! No I/O here: the collector hands raw readings in, tests hand in fakes.
//!
//! Rules:
//! - One entry per (pid, MIG GPU instance): a pid listed twice for the same
//!   instance (once with a compute and once with a graphics context, or twice
//!   in one list) is one process, and NVML's figure is the process's total on
//!   the device, so the largest known figure is kept, never a sum. A figure
//!   the driver reports as unavailable (`NVML_VALUE_NOT_AVAILABLE`: MIG, some
//!   drivers) stays `None`; a known figure for the same entry wins over it.
//! - One entry per pid and device: the entries of different MIG instances are
//!   added up.
//! - A process's total over all devices adds the known parts: where some
//!   device does not report a figure, the total is a lower bound and the
//!   evidence names that device; with no known part it is `None`.
//! - Joining is by pid, and only where the driver's pids are this pid
//!   namespace's ([`PidView::Host`]). From inside a container the driver's
//!   host pids would name the wrong processes, so nothing is joined and a
//!   note says why.

use std::collections::{BTreeMap, HashMap};

use crate::model::{Framework, GpuDevice, GpuProcess, Snapshot};
use crate::report::format_bytes;

use super::pid_namespace::PidView;
use super::{DeviceReading, RawGpuProcess};

/// The compute and graphics lists of one device merged into one entry per
/// pid, sorted by pid.
pub fn merge_processes(compute: &[RawGpuProcess], graphics: &[RawGpuProcess]) -> Vec<GpuProcess> {
    /// One (pid, instance) entry while merging.
    #[derive(Default)]
    struct Entry {
        memory: Option<u64>,
        compute: bool,
        graphics: bool,
    }
    let mut by_instance: BTreeMap<(u32, Option<u32>), Entry> = BTreeMap::new();
    let tagged = compute
        .iter()
        .map(|p| (p, true))
        .chain(graphics.iter().map(|p| (p, false)));
    for (p, is_compute) in tagged {
        let e = by_instance.entry((p.pid, p.gpu_instance)).or_default();
        e.memory = max_known(e.memory, p.memory);
        if is_compute {
            e.compute = true;
        } else {
            e.graphics = true;
        }
    }

    let mut out: Vec<GpuProcess> = Vec::new();
    // BTreeMap order: all instances of a pid are adjacent.
    for ((pid, _), e) in by_instance {
        match out.last_mut() {
            Some(last) if last.pid == pid => {
                last.memory = add_known(last.memory, e.memory);
                last.compute |= e.compute;
                last.graphics |= e.graphics;
            }
            _ => out.push(GpuProcess {
                pid,
                memory: e.memory,
                compute: e.compute,
                graphics: e.graphics,
                joined: false,
            }),
        }
    }
    out
}

/// The larger of two figures, a known one winning over an unknown one.
fn max_known(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The sum of the known figures; `None` only when neither is known.
fn add_known(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

/// A device reading as the snapshot's [`GpuDevice`], its process lists merged.
pub fn device(reading: &DeviceReading) -> GpuDevice {
    GpuDevice {
        index: reading.index,
        name: reading.name.clone(),
        uuid: reading.uuid.clone(),
        memory_total: reading.memory_total,
        memory_used: reading.memory_used,
        utilization: reading.utilization,
        memory_reserved: reading.memory_reserved,
        processes: merge_processes(&reading.compute, &reading.graphics),
        cuda_version: reading.cuda_version.clone(),
    }
}

/// What one process holds on one device.
#[derive(Debug, Clone, Copy)]
struct Holding {
    device: u32,
    memory: Option<u64>,
    compute: bool,
}

/// Adds `devices` to the snapshot and joins their processes into the process
/// samples by pid, where `view` allows it; leaves a note where it does not,
/// or where a pid is not among the sampled processes.
///
/// A joined process gets `gpu_memory` (the sum of the known figures), one
/// line of evidence per device, and [`Framework::Cuda`] when it holds a
/// compute context (so it counts as ML work); its kind is kept. A process
/// with only a graphics context (a desktop, a browser) gets the figure and
/// the evidence but no framework.
pub fn join(snapshot: &mut Snapshot, mut devices: Vec<GpuDevice>, view: &PidView) {
    match view {
        PidView::Host => join_by_pid(snapshot, &mut devices),
        PidView::Container { why } => {
            let listed: Vec<&GpuProcess> = devices.iter().flat_map(|d| &d.processes).collect();
            if !listed.is_empty() {
                snapshot.notes.push(format!(
                    "the GPU driver lists {} by host pid, and headroom runs in another pid \
                     namespace ({why}), where those pids name other processes or none: {} \
                     shown per GPU, not matched to processes. Run headroom on the host, or in \
                     a container that shares the host's pid namespace (docker run --pid=host), \
                     to see who holds GPU memory",
                    count(listed.len(), "process", "processes"),
                    held(listed.iter().map(|p| p.memory)),
                ));
            }
        }
    }
    snapshot.gpus.append(&mut devices);
}

fn join_by_pid(snapshot: &mut Snapshot, devices: &mut [GpuDevice]) {
    let mut holdings: HashMap<u32, Vec<Holding>> = HashMap::new();
    for d in devices.iter() {
        for p in &d.processes {
            holdings.entry(p.pid).or_default().push(Holding {
                device: d.index,
                memory: p.memory,
                compute: p.compute,
            });
        }
    }
    if holdings.is_empty() {
        return;
    }

    for process in &mut snapshot.processes {
        let Some(held) = holdings.remove(&process.id.pid) else {
            continue;
        };
        process.gpu_memory = held.iter().fold(None, |sum, h| add_known(sum, h.memory));
        let w = &mut process.workload;
        for h in &held {
            w.evidence.push(match h.memory {
                Some(bytes) => format!(
                    "holds {} of GPU memory on GPU {}",
                    format_bytes(bytes),
                    h.device
                ),
                None => format!(
                    "has a context on GPU {}, whose driver does not report its memory",
                    h.device
                ),
            });
        }
        if held.iter().any(|h| h.compute) && !w.frameworks.contains(&Framework::Cuda) {
            w.frameworks.push(Framework::Cuda);
        }
    }

    // What is left in `holdings` matched no sampled process.
    for d in devices.iter_mut() {
        for p in &mut d.processes {
            p.joined = !holdings.contains_key(&p.pid);
        }
    }
    if !holdings.is_empty() {
        let mut pids: Vec<u32> = holdings.keys().copied().collect();
        pids.sort_unstable();
        let memory = holdings.values().flatten().map(|h| h.memory);
        snapshot.notes.push(format!(
            "the GPU driver lists {} not among the sampled processes ({}: {}): exited since, \
             or hidden from this user (/proc mounted with hidepid); run headroom as root to \
             see every process",
            count(pids.len(), "pid", "pids"),
            held(memory),
            pid_list(&pids),
        ));
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// "12 GiB held", "at least 12 GiB held" when some figures are unknown,
/// "memory not reported" when all are.
fn held(memory: impl Iterator<Item = Option<u64>>) -> String {
    let (mut sum, mut known, mut unknown) = (0u64, false, false);
    for m in memory {
        match m {
            Some(b) => {
                sum = sum.saturating_add(b);
                known = true;
            }
            None => unknown = true,
        }
    }
    match (known, unknown) {
        (true, true) => format!("at least {} held", format_bytes(sum)),
        (false, true) => "memory not reported".to_string(),
        _ => format!("{} held", format_bytes(sum)),
    }
}

/// "pid 7", "pids 7, 9, 12", at most ten of them.
fn pid_list(pids: &[u32]) -> String {
    const SHOWN: usize = 10;
    let mut s: Vec<String> = pids.iter().take(SHOWN).map(u32::to_string).collect();
    if pids.len() > SHOWN {
        s.push(format!("and {} more", pids.len() - SHOWN));
    }
    format!(
        "{} {}",
        if pids.len() == 1 { "pid" } else { "pids" },
        s.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WorkloadKind;
    use crate::model::build::{process, snapshot};

    const GIB: u64 = 1 << 30;

    fn raw(pid: u32, memory: Option<u64>) -> RawGpuProcess {
        RawGpuProcess {
            pid,
            memory,
            gpu_instance: None,
        }
    }

    fn on_instance(pid: u32, memory: Option<u64>, instance: u32) -> RawGpuProcess {
        RawGpuProcess {
            gpu_instance: Some(instance),
            ..raw(pid, memory)
        }
    }

    fn gpu(index: u32, processes: Vec<GpuProcess>) -> GpuDevice {
        GpuDevice {
            index,
            name: format!("GPU{index}"),
            uuid: None,
            memory_total: Some(80 * GIB),
            memory_used: Some(10 * GIB),
            utilization: None,
            memory_reserved: None,
            processes,
            cuda_version: None,
        }
    }

    fn compute(pid: u32, memory: Option<u64>) -> GpuProcess {
        GpuProcess {
            pid,
            memory,
            compute: true,
            graphics: false,
            joined: false,
        }
    }

    fn graphics(pid: u32, memory: Option<u64>) -> GpuProcess {
        GpuProcess {
            compute: false,
            graphics: true,
            ..compute(pid, memory)
        }
    }

    #[test]
    fn a_pid_in_both_lists_is_one_process_with_both_contexts() {
        let merged = merge_processes(&[raw(7, Some(4 * GIB))], &[raw(7, Some(4 * GIB))]);
        assert_eq!(
            merged,
            [GpuProcess {
                pid: 7,
                memory: Some(4 * GIB),
                compute: true,
                graphics: true,
                joined: false,
            }]
        );
    }

    #[test]
    fn a_duplicate_is_not_added_up_and_the_larger_figure_is_kept() {
        let merged = merge_processes(&[raw(7, Some(GIB)), raw(7, Some(3 * GIB))], &[]);
        assert_eq!(merged, [compute(7, Some(3 * GIB))]);
    }

    #[test]
    fn an_unavailable_figure_stays_unknown_not_zero() {
        let merged = merge_processes(&[raw(7, None)], &[raw(9, Some(0))]);
        assert_eq!(merged, [compute(7, None), graphics(9, Some(0))]);
    }

    #[test]
    fn a_known_figure_wins_over_an_unknown_one_for_the_same_process() {
        let merged = merge_processes(&[raw(7, None)], &[raw(7, Some(2 * GIB))]);
        assert_eq!(merged[0].memory, Some(2 * GIB));
        let merged = merge_processes(&[raw(7, Some(2 * GIB))], &[raw(7, None)]);
        assert_eq!(merged[0].memory, Some(2 * GIB));
    }

    #[test]
    fn mig_instances_of_one_process_are_added_up() {
        let merged = merge_processes(
            &[
                on_instance(7, Some(GIB), 1),
                on_instance(7, Some(2 * GIB), 2),
            ],
            &[],
        );
        assert_eq!(merged, [compute(7, Some(3 * GIB))]);
    }

    #[test]
    fn mig_instances_with_unknown_figures_stay_unknown_together() {
        let merged = merge_processes(&[on_instance(7, None, 1), on_instance(7, None, 2)], &[]);
        assert_eq!(merged, [compute(7, None)]);
    }

    #[test]
    fn merged_list_is_sorted_by_pid() {
        let merged = merge_processes(&[raw(30, None), raw(10, None)], &[raw(20, None)]);
        let pids: Vec<u32> = merged.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [10, 20, 30]);
    }

    #[test]
    fn device_keeps_the_reading_figures() {
        let reading = DeviceReading {
            index: 1,
            name: "NVIDIA A100-SXM4-40GB".into(),
            uuid: Some("GPU-abc".into()),
            memory_total: Some(40 * GIB),
            memory_used: Some(5 * GIB),
            memory_reserved: Some(GIB / 2),
            utilization: Some(0.25),
            compute: vec![raw(3, Some(GIB))],
            graphics: vec![],
            problems: vec![],
            cuda_version: Some("12.2".into()),
        };
        let d = device(&reading);
        assert_eq!(
            (d.index, d.memory_total, d.memory_used, d.memory_reserved),
            (1, Some(40 * GIB), Some(5 * GIB), Some(GIB / 2))
        );
        assert_eq!(d.utilization, Some(0.25));
        assert_eq!(d.processes, [compute(3, Some(GIB))]);
        assert_eq!(d.cuda_version.as_deref(), Some("12.2"));
    }

    #[test]
    fn join_fills_gpu_memory_evidence_and_cuda() {
        let mut snap = snapshot(0)
            .processes([
                process(100).kind(WorkloadKind::Python),
                process(200).kind(WorkloadKind::Other),
            ])
            .build();
        join(
            &mut snap,
            vec![gpu(0, vec![compute(100, Some(8 * GIB))])],
            &PidView::Host,
        );
        let p = snap.process(100).unwrap();
        assert_eq!(p.gpu_memory, Some(8 * GIB));
        assert_eq!(p.workload.kind, WorkloadKind::Python);
        assert_eq!(p.workload.frameworks, [Framework::Cuda]);
        assert!(p.workload.is_ml());
        assert_eq!(
            p.workload.evidence,
            ["holds 8.0 GiB of GPU memory on GPU 0"]
        );
        let other = snap.process(200).unwrap();
        assert_eq!(other.gpu_memory, None);
        assert!(!other.workload.is_ml());
        assert!(snap.gpus[0].processes[0].joined);
        assert!(snap.notes.is_empty(), "{:?}", snap.notes);
    }

    #[test]
    fn join_adds_up_devices_and_keeps_an_existing_framework_once() {
        let p = process(100)
            .kind(WorkloadKind::Pytorch)
            .frameworks([Framework::Pytorch, Framework::Cuda]);
        let mut snap = snapshot(0).process(p).build();
        join(
            &mut snap,
            vec![
                gpu(0, vec![compute(100, Some(2 * GIB))]),
                gpu(1, vec![compute(100, Some(GIB))]),
            ],
            &PidView::Host,
        );
        let p = snap.process(100).unwrap();
        assert_eq!(p.gpu_memory, Some(3 * GIB));
        assert_eq!(p.workload.frameworks, [Framework::Pytorch, Framework::Cuda]);
        assert_eq!(
            p.workload.evidence,
            [
                "holds 2.0 GiB of GPU memory on GPU 0",
                "holds 1.0 GiB of GPU memory on GPU 1"
            ]
        );
    }

    #[test]
    fn join_keeps_an_unknown_figure_unknown_and_says_so() {
        let mut snap = snapshot(0)
            .processes([process(100).kind(WorkloadKind::Other)])
            .build();
        join(
            &mut snap,
            vec![gpu(0, vec![compute(100, None)])],
            &PidView::Host,
        );
        let p = snap.process(100).unwrap();
        assert_eq!(p.gpu_memory, None);
        assert_eq!(p.workload.frameworks, [Framework::Cuda]);
        assert_eq!(
            p.workload.evidence,
            ["has a context on GPU 0, whose driver does not report its memory"]
        );
        assert!(snap.gpus[0].processes[0].joined);
    }

    #[test]
    fn join_adds_the_known_part_when_one_device_does_not_report() {
        let mut snap = snapshot(0)
            .processes([process(100).kind(WorkloadKind::Other)])
            .build();
        join(
            &mut snap,
            vec![
                gpu(0, vec![compute(100, Some(4 * GIB))]),
                gpu(1, vec![compute(100, None)]),
            ],
            &PidView::Host,
        );
        let p = snap.process(100).unwrap();
        assert_eq!(p.gpu_memory, Some(4 * GIB));
        assert_eq!(p.workload.evidence.len(), 2);
        assert!(p.workload.evidence[1].contains("GPU 1, whose driver does not report"));
    }

    #[test]
    fn a_graphics_context_alone_is_not_ml_work() {
        let mut snap = snapshot(0)
            .processes([process(100).kind(WorkloadKind::Other)])
            .build();
        join(
            &mut snap,
            vec![gpu(0, vec![graphics(100, Some(300 << 20))])],
            &PidView::Host,
        );
        let p = snap.process(100).unwrap();
        assert_eq!(p.gpu_memory, Some(300 << 20));
        assert!(p.workload.frameworks.is_empty());
        assert!(!p.workload.is_ml());
        assert_eq!(
            p.workload.evidence,
            ["holds 300 MiB of GPU memory on GPU 0"]
        );
    }

    #[test]
    fn a_pid_that_is_not_sampled_is_kept_on_the_device_and_noted() {
        let mut snap = snapshot(0)
            .processes([process(100).kind(WorkloadKind::Other)])
            .build();
        join(
            &mut snap,
            vec![gpu(
                0,
                vec![compute(100, Some(GIB)), compute(4321, Some(2 * GIB))],
            )],
            &PidView::Host,
        );
        let listed = &snap.gpus[0].processes;
        assert_eq!((listed[0].pid, listed[0].joined), (100, true));
        assert_eq!((listed[1].pid, listed[1].joined), (4321, false));
        assert_eq!(
            snap.notes,
            [
                "the GPU driver lists 1 pid not among the sampled processes (2.0 GiB held: \
              pid 4321): exited since, or hidden from this user (/proc mounted with hidepid); \
              run headroom as root to see every process"
            ]
        );
    }

    #[test]
    fn in_a_container_nothing_is_joined_even_where_a_pid_exists() {
        let mut snap = snapshot(0)
            .processes([process(100).kind(WorkloadKind::Other)])
            .build();
        join(
            &mut snap,
            vec![gpu(0, vec![compute(100, Some(GIB)), compute(200, None)])],
            &PidView::Container {
                why: "pid:[4026532511]".into(),
            },
        );
        let p = snap.process(100).unwrap();
        assert_eq!(p.gpu_memory, None);
        assert!(p.workload.evidence.is_empty());
        assert!(snap.gpus[0].processes.iter().all(|p| !p.joined));
        assert_eq!(snap.gpus[0].processes.len(), 2);
        assert_eq!(snap.notes.len(), 1);
        assert!(
            snap.notes[0].starts_with(
                "the GPU driver lists 2 processes by host pid, and headroom runs in another \
                 pid namespace (pid:[4026532511]), where those pids name other processes or \
                 none: at least 1.0 GiB held shown per GPU"
            ),
            "{}",
            snap.notes[0]
        );
    }

    #[test]
    fn in_a_container_with_an_idle_gpu_there_is_nothing_to_say() {
        let mut snap = snapshot(0).build();
        join(
            &mut snap,
            vec![gpu(0, vec![])],
            &PidView::Container { why: "x".into() },
        );
        assert!(snap.notes.is_empty());
        assert_eq!(snap.gpus.len(), 1);
    }

    #[test]
    fn unmatched_pids_without_figures_are_not_said_to_hold_zero() {
        let mut snap = snapshot(0).build();
        join(
            &mut snap,
            vec![gpu(0, vec![compute(7, None)])],
            &PidView::Host,
        );
        assert!(
            snap.notes[0].contains("(memory not reported: pid 7)"),
            "{}",
            snap.notes[0]
        );
    }

    #[test]
    fn many_unmatched_pids_are_cut_to_ten() {
        let mut snap = snapshot(0).build();
        let listed = (1..=12).map(|pid| compute(pid, Some(GIB))).collect();
        join(&mut snap, vec![gpu(0, listed)], &PidView::Host);
        assert!(
            snap.notes[0]
                .contains("(12.0 GiB held: pids 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, and 2 more)"),
            "{}",
            snap.notes[0]
        );
    }
}
