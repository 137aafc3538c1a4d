//! The traces shipped under `tests/fixtures/traces/` read back through the
//! replay sampler and show what their README says they show.

use std::path::Path;

use headroom::model::{ProcessId, Snapshot, WorkloadKind};
use headroom::sample::replay::read_trace;

fn trace(name: &str) -> Vec<Snapshot> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/traces")
        .join(name);
    read_trace(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_idle_trace_is_eleven_snapshots_a_second_apart() {
    let snaps = trace("idle-linux-6.18.jsonl");
    assert_eq!(snaps.len(), 11);
    for w in snaps.windows(2) {
        let gap = w[1].taken_at.since(w[0].taken_at).as_millis();
        assert!((900..=1100).contains(&gap), "gap {gap} ms");
        assert_eq!(w[0].system.total, w[1].system.total);
    }
    assert!(
        snaps
            .iter()
            .all(|s| s.source == "linux" && !s.processes.is_empty())
    );
}

#[test]
fn the_growth_trace_shows_one_python_process_growing_to_1_5_gib() {
    let snaps = trace("growth-linux-6.18.jsonl");
    assert_eq!(snaps.len(), 31);
    let first = snaps
        .iter()
        .flat_map(|s| &s.processes)
        .find(|p| p.argv.iter().any(|a| a.ends_with("grow.py")))
        .expect("the growing script is in the trace");
    let id: ProcessId = first.id;
    assert_eq!(first.workload.kind, WorkloadKind::Python);

    let series: Vec<u64> = snaps
        .iter()
        .filter_map(|s| s.processes.iter().find(|p| p.id == id))
        .map(|p| p.footprint)
        .collect();
    assert_eq!(series.len(), snaps.len(), "present in every snapshot");
    assert!(series.windows(2).all(|w| w[1] >= w[0]), "never shrinks");
    let start = series[0];
    let end = series[series.len() - 1];
    assert!(start < 16 << 20, "starts small: {start}");
    let grown = end - start;
    assert!(
        (1500u64 << 20..=1600 << 20).contains(&grown),
        "grew by 24 × 64 MiB: {grown}"
    );
}
