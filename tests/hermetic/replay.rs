//! Trace files: writing snapshots with `TraceWriter` and playing them back
//! with `ReplaySampler`, including traces cut short or damaged.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use headroom::model::{
    Basis, Ceiling, CgroupVersion, CollectorErrors, CollectorStatus, Detail, Framework, GpuDevice,
    GpuProcess, Job, Pressure, PressureLevel, ProcessId, ProcessSample, Psi, PsiLine, Snapshot,
    Swap, SystemMemory, SysvSegment, Timestamp, TmpfsFile, Unowned, build,
};
use headroom::sample::replay::{ReplaySampler, TraceWriter, read_trace};
use headroom::sample::{SampleError, Sampler};

const GIB: u64 = 1 << 30;

fn kernel(pid: u32, footprint: u64) -> ProcessSample {
    build::kernel(pid)
        .start(123_456)
        .uid(1000)
        .user("ada")
        .name("python")
        .exe("/usr/bin/python3.11")
        .cgroup("/kubepods/burstable/pod1/c1")
        .argv([
            "python",
            "-m",
            "ipykernel_launcher",
            "-f",
            "/run/user/1000/jupyter/runtime/kernel-42.json",
        ])
        .started_at(Timestamp(1_700_000_000_000))
        .footprint(footprint)
        .peak_footprint(footprint + GIB)
        .resident(footprint / 2)
        .swapped(0)
        .detail(Detail::Estimated)
        .frameworks([Framework::Pytorch, Framework::Cuda])
        .kernel_id("42")
        .evidence(["argv[2] is ipykernel_launcher"])
        .build()
}

/// A snapshot at `ms` with a kernel of `footprint` bytes, every field set:
/// written out in full (no `..Default::default()`), so that a field added to
/// `Snapshot` must be given a value here and is round-tripped too.
fn every_field(ms: u64, footprint: u64) -> Snapshot {
    Snapshot {
        taken_at: Timestamp(ms),
        source: "linux".into(),
        replayed: false,
        sample_micros: 850,
        system: SystemMemory {
            total: 64 * GIB,
            available: 20 * GIB,
            used: 44 * GIB,
            free: 2 * GIB,
            app: Some(30 * GIB),
            wired: Some(GIB),
            compressed: None,
            cached: Some(10 * GIB),
            shmem: Some(GIB / 4),
            gpu_wired_limit: None,
        },
        swap: Swap {
            total: 8 * GIB,
            used: GIB,
            swapped_in_bytes: Some(4096),
            swapped_out_bytes: Some(8192),
        },
        pressure: Pressure {
            level: PressureLevel::Warn,
            psi: Some(Psi {
                some: PsiLine {
                    avg10: 12.5,
                    avg60: 3.25,
                    avg300: 0.5,
                    total_micros: 987_654,
                },
                full: None,
            }),
            free_percent: None,
        },
        gpus: vec![GpuDevice {
            index: 0,
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: Some("GPU-1234".into()),
            memory_total: Some(80 * GIB),
            memory_used: Some(10 * GIB),
            utilization: Some(0.75),
            memory_reserved: Some(GIB / 2),
            processes: vec![GpuProcess {
                pid: 4242,
                memory: Some(9 * GIB),
                compute: true,
                graphics: false,
                joined: true,
            }],
            cuda_version: None,
        }],
        processes: vec![kernel(4242, footprint), kernel(4343, footprint / 3)],
        jobs: vec![Job {
            root: ProcessId {
                pid: 4242,
                start: 1,
            },
            members: vec![4242],
            footprint,
            gpu_memory: Some(9 * GIB),
            basis: Basis::Pss,
            ended_root: None,
        }],
        unowned: Unowned {
            known: true,
            tmpfs_bytes: 5 * GIB,
            sysv_orphan_bytes: GIB,
            tmpfs_files: vec![TmpfsFile {
                path: "/dev/shm/blob".into(),
                bytes: 5 * GIB,
                uid: Some(1001),
                user: Some("mallory".into()),
                mapped_by: Vec::new(),
                open_by: Vec::new(),
                redacted: false,
            }],
            sysv_segments: vec![SysvSegment {
                key: 0x1234,
                id: 7,
                bytes: GIB,
                uid: Some(1001),
                user: Some("mallory".into()),
                attached: 0,
                creator_pid: 77,
                last_pid: 78,
            }],
            cut_short: Some("the walk of tmpfs stopped at 50000 entries".into()),
            unexplained_shmem: Some(3 * GIB),
        },
        ceilings: vec![Ceiling {
            path: "/kubepods/burstable/pod1".into(),
            version: CgroupVersion::V2,
            max: Some(16 * GIB),
            high: Some(12 * GIB),
            usage: 10 * GIB,
            reclaimable: GIB,
            swap_max: Some(0),
            swap_used: Some(0),
            limit_hits: Some(3),
            oom_kills: Some(1),
            cgroups: vec!["/kubepods/burstable/pod1/c1".into()],
        }],
        errors: CollectorErrors {
            vanished: 1,
            permission_denied: 2,
            unreadable: 0,
            kernel_threads: 97,
        },
        collectors: vec![CollectorStatus {
            name: "nvml".into(),
            up: true,
            detail: "1 GPU: NVIDIA H100 80GB HBM3".into(),
            errors: 0,
            applicable: true,
        }],
        notes: vec!["a note".into()],
    }
}

/// `s` as the replay sampler hands it back: marked as replayed.
fn replayed(s: &Snapshot) -> Snapshot {
    Snapshot {
        replayed: true,
        ..s.clone()
    }
}

/// Whatever a trace says of itself, every snapshot played is marked as
/// replayed, and `read_trace` (the trace as data) leaves it as recorded.
#[test]
fn every_played_snapshot_is_marked_replayed_whatever_the_trace_says() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let snaps = three();
    write_trace(&path, &snaps);
    // A line that claims to be live.
    let mut claims_live = serde_json::to_value(&snaps[0]).unwrap();
    claims_live["replayed"] = serde_json::Value::Bool(false);
    append(&path, &format!("{claims_live}\n"));
    assert!(
        !fs::read_to_string(&path)
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .contains("replayed"),
        "a live snapshot is written without the mark"
    );

    let mut replay = ReplaySampler::open(&path).unwrap();
    for _ in 0..4 {
        assert!(replay.sample().unwrap().replayed);
    }
    assert!(read_trace(&path).unwrap().iter().all(|s| !s.replayed));
}

fn write_trace(path: &Path, snaps: &[Snapshot]) {
    let mut w = TraceWriter::create(path).unwrap();
    for s in snaps {
        w.write(s).unwrap();
    }
    w.finish().unwrap();
}

fn append(path: &Path, text: &str) {
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn three() -> Vec<Snapshot> {
    vec![
        every_field(1_700_000_001_000, GIB),
        every_field(1_700_000_002_000, 2 * GIB),
        every_field(1_700_000_003_000, 3 * GIB),
    ]
}

#[test]
fn written_snapshots_read_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let snaps = three();
    write_trace(&path, &snaps);

    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 3, "one line per snapshot");
    assert!(text.ends_with('\n'));
    assert_eq!(read_trace(&path).unwrap(), snaps);
}

#[test]
fn replay_plays_snapshots_as_recorded_then_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let snaps = three();
    write_trace(&path, &snaps);

    let mut replay = ReplaySampler::open(&path).unwrap();
    assert_eq!(replay.name(), "replay");
    for expected in &snaps {
        let got = replay.sample().unwrap();
        assert_eq!(got, replayed(expected));
        assert_eq!(got.source, "linux", "source is kept as recorded");
    }
    for _ in 0..3 {
        assert!(matches!(replay.sample(), Err(SampleError::EndOfTrace)));
    }
}

#[test]
fn lines_written_before_an_interruption_are_readable_without_finish() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let mut w = TraceWriter::create(&path).unwrap();
    w.write(&every_field(1000, GIB)).unwrap();
    // No finish(), writer still open: the line is already in the file.
    assert_eq!(read_trace(&path).unwrap(), vec![every_field(1000, GIB)]);
    drop(w);
}

#[test]
fn torn_last_line_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let snaps = three();
    write_trace(&path, &snaps[..2]);
    let whole = serde_json::to_string(&snaps[2]).unwrap();
    append(&path, &whole[..whole.len() / 2]);

    assert_eq!(read_trace(&path).unwrap(), snaps[..2].to_vec());
    let mut replay = ReplaySampler::open(&path).unwrap();
    replay.sample().unwrap();
    replay.sample().unwrap();
    assert!(matches!(replay.sample(), Err(SampleError::EndOfTrace)));
}

#[test]
fn complete_last_line_without_newline_is_played() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let snaps = three();
    write_trace(&path, &snaps[..2]);
    append(&path, &serde_json::to_string(&snaps[2]).unwrap());

    assert_eq!(read_trace(&path).unwrap(), snaps);
}

#[test]
fn bad_middle_line_reports_its_line_number_and_playback_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let snaps = three();
    write_trace(&path, &snaps[..1]);
    append(&path, "{\"taken_at\": \"yesterday\"}\n");
    append(
        &path,
        &format!("{}\n", serde_json::to_string(&snaps[1]).unwrap()),
    );

    let mut replay = ReplaySampler::open(&path).unwrap();
    assert_eq!(replay.sample().unwrap(), replayed(&snaps[0]));
    match replay.sample() {
        Err(e @ SampleError::Trace { line: 2, .. }) => {
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("{}:2: not a snapshot", path.display())),
                "{msg}"
            );
        }
        other => panic!("expected a Trace error on line 2, got {other:?}"),
    }
    assert_eq!(replay.sample().unwrap(), replayed(&snaps[1]));
    assert!(matches!(replay.sample(), Err(SampleError::EndOfTrace)));

    assert!(matches!(
        read_trace(&path),
        Err(SampleError::Trace { line: 2, .. })
    ));
}

#[test]
fn terminated_bad_last_line_is_an_error_not_a_torn_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    write_trace(&path, &three()[..1]);
    append(&path, "not json\n");

    assert!(matches!(
        read_trace(&path),
        Err(SampleError::Trace { line: 2, .. })
    ));
}

#[test]
fn blank_lines_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let snaps = three();
    write_trace(&path, &snaps[..1]);
    append(&path, "\n   \nbroken\n");

    let mut replay = ReplaySampler::open(&path).unwrap();
    replay.sample().unwrap();
    assert!(matches!(
        replay.sample(),
        Err(SampleError::Trace { line: 4, .. })
    ));
}

#[test]
fn missing_file_is_a_read_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.jsonl");
    match ReplaySampler::open(&path) {
        Err(SampleError::Read { path: p, .. }) => assert_eq!(p, path.display().to_string()),
        other => panic!("expected a Read error, got {other:?}"),
    }
}

fn assert_strictly_increasing(times: &[u64]) {
    for w in times.windows(2) {
        assert!(w[0] < w[1], "{times:?}");
    }
}

#[test]
fn looped_playback_shifts_timestamps_forward_each_pass() {
    let snaps = three();
    let mut replay = ReplaySampler::from_snapshots(snaps.clone()).looped(true);
    let played: Vec<Snapshot> = (0..9).map(|_| replay.sample().unwrap()).collect();
    let times: Vec<u64> = played.iter().map(|s| s.taken_at.as_millis()).collect();

    assert_strictly_increasing(&times);
    // Span 2 s plus one 1 s interval: each pass starts 3 s after the last.
    let t0 = snaps[0].taken_at.as_millis();
    assert_eq!(
        times,
        [0, 1, 2, 3, 4, 5, 6, 7, 8].map(|i| t0 + i * 1000).to_vec()
    );
    // Only the timestamp changes (and every snapshot is marked).
    let mut again = played[4].clone();
    again.taken_at = snaps[1].taken_at;
    assert_eq!(again, replayed(&snaps[1]));
}

#[test]
fn looped_file_playback_rewinds_and_skips_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let snaps = vec![every_field(10_000, GIB), every_field(15_000, 2 * GIB)];
    write_trace(&path, &snaps);
    append(&path, "{\"taken_at\": 2");

    let mut replay = ReplaySampler::open(&path).unwrap().looped(true);
    let times: Vec<u64> = (0..6)
        .map(|_| replay.sample().unwrap().taken_at.as_millis())
        .collect();
    assert_eq!(times, [10_000, 15_000, 20_000, 25_000, 30_000, 35_000]);
}

#[test]
fn looped_empty_trace_still_ends() {
    let mut replay = ReplaySampler::from_snapshots(Vec::new()).looped(true);
    assert!(matches!(replay.sample(), Err(SampleError::EndOfTrace)));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.jsonl");
    fs::write(&path, "").unwrap();
    let mut replay = ReplaySampler::open(&path).unwrap().looped(true);
    assert!(matches!(replay.sample(), Err(SampleError::EndOfTrace)));
}

#[test]
fn from_snapshots_plays_in_order_then_ends() {
    let snaps = three();
    let mut replay = ReplaySampler::from_snapshots(snaps.clone());
    for s in &snaps {
        assert_eq!(replay.sample().unwrap(), replayed(s));
    }
    assert!(matches!(replay.sample(), Err(SampleError::EndOfTrace)));
}
