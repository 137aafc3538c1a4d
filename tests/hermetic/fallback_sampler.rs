//! The sysinfo-backed sampler against the real machine: this test process,
//! a child it spawns, the memory it allocates, and the system totals.

use std::process::{Child, Command};
use std::time::Duration;

use headroom::model::{Detail, ProcessSample, Snapshot, WorkloadKind};
use headroom::sample::Sampler;
use headroom::sample::fallback::SysinfoSampler;

const MIB: u64 = 1 << 20;

fn me(snap: &Snapshot) -> &ProcessSample {
    snap.process(std::process::id())
        .unwrap_or_else(|| panic!("this test process is not in the snapshot"))
}

/// Kills the child when the test ends, also on failure.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn source_and_system_figures_are_consistent() {
    let mut sampler = SysinfoSampler::new();
    assert_eq!(sampler.name(), "sysinfo");
    let snap = sampler.sample().unwrap();
    assert_eq!(snap.source, "sysinfo");
    let m = snap.system;
    assert!(m.total > 0);
    assert!(m.available <= m.total);
    assert_eq!(m.used, m.total - m.available);
    assert!(m.free <= m.total);
    assert!(snap.swap.used <= snap.swap.total);
    assert!(snap.pressure.psi.is_none());
    assert_eq!(
        snap.pressure.level,
        headroom::sample::fallback::level_from_available(m.available, m.total)
    );
    let pids: Vec<u32> = snap.processes.iter().map(|p| p.id.pid).collect();
    assert!(
        pids.windows(2).all(|w| w[0] < w[1]),
        "sorted by pid, no duplicates"
    );
}

#[test]
fn this_process_is_listed_with_its_argv() {
    let mut sampler = SysinfoSampler::new();
    let snap = sampler.sample().unwrap();
    let p = me(&snap);
    let argv: Vec<String> = std::env::args().collect();
    assert_eq!(p.argv, argv);
    assert!(p.resident > 0);
    assert_eq!(p.footprint, p.resident);
    assert_eq!(p.detail, Detail::Estimated);
    assert_eq!(p.swapped, None);
    assert!(p.started_at.is_some());
    assert_eq!(p.workload.kind, WorkloadKind::Other);

    // The second sample reuses what it read once: the same identity.
    let again = sampler.sample().unwrap();
    let q = me(&again);
    assert_eq!(q.id, p.id);
    assert_eq!(q.argv, argv);
}

#[test]
fn spawned_child_appears_with_this_process_as_parent() {
    let child = Reaped(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = child.0.id();
    let mut sampler = SysinfoSampler::new();
    let snap = sampler.sample().unwrap();
    let p = snap
        .process(pid)
        .unwrap_or_else(|| panic!("child {pid} not listed"));
    assert_eq!(p.ppid, std::process::id());
    assert_eq!(p.name, "sleep");
    assert_eq!(p.argv, ["sleep", "30"]);
    assert!(p.exe.as_deref().is_some_and(|e| e.ends_with("sleep")));
    assert_eq!(p.workload.kind, WorkloadKind::Other);
}

#[test]
fn touched_allocation_shows_in_resident_size() {
    let mut sampler = SysinfoSampler::new();
    let before = me(&sampler.sample().unwrap()).resident;

    let size = 256 * MIB as usize;
    let mut block = vec![0u8; size];
    for i in (0..size).step_by(4096) {
        block[i] = 1;
    }
    std::hint::black_box(&block);
    let after = me(&sampler.sample().unwrap()).resident;
    drop(block);

    assert!(
        after >= before + 240 * MIB,
        "resident grew by {} MiB only",
        after.saturating_sub(before) / MIB
    );
}

#[cfg(target_os = "linux")]
#[test]
fn total_matches_proc_meminfo() {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let expected = kib * 1024;
    let total = SysinfoSampler::new().sample().unwrap().system.total;
    let diff = total.abs_diff(expected);
    assert!(
        diff * 100 <= expected,
        "sysinfo {total} vs meminfo {expected}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn uid_and_user_name_match_proc_and_passwd() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid: u32 = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let name = passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
    });

    let mut sampler = SysinfoSampler::new();
    let snap = sampler.sample().unwrap();
    let p = me(&snap);
    assert_eq!(p.uid, Some(uid));
    assert_eq!(p.user.as_deref(), name.as_deref());
}

#[test]
fn exited_child_is_gone_from_the_next_sample() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let mut sampler = SysinfoSampler::new();
    assert!(sampler.sample().unwrap().process(pid).is_some());
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(sampler.sample().unwrap().process(pid).is_none());
}
