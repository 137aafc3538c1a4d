//! Memory no process owns and memory held open without a mapping, as the
//! real Linux sampler sees them on this machine: a memfd a child holds open
//! and never maps (its `held_open`, in its footprint), a `/dev/shm` file
//! nobody maps or holds (`tmpfs_bytes`), a `/dev/shm` file this process
//! maps (`mapped_by`, not unowned), and an orphaned SysV segment.
#![cfg(target_os = "linux")]

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use headroom::model::Snapshot;
use headroom::os::linux::LinuxSampler;
use headroom::sample::Sampler;

use crate::support::sys::{SharedMapping, SysvSegment, memfd};

const MIB: u64 = 1 << 20;

/// Kills and reaps the child when dropped, also when the test fails.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Removes the file when dropped.
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Sample until a scan of memory no process owns has completed (it runs
/// within a time budget per tick, so it may take several).
fn sample_until_scanned(sampler: &mut LinuxSampler) -> Snapshot {
    for _ in 0..1000 {
        let snap = sampler.sample().expect("sample");
        if sampler.unowned_scans() > 0 {
            return snap;
        }
    }
    panic!("no scan of memory no process owns completed in 1000 samples");
}

#[test]
fn a_memfd_held_open_unmapped_counts_in_its_holder_s_footprint() {
    const BYTES: u64 = 24 * MIB;
    let name = format!("headroom-test-held-{}", std::process::id());
    let held = memfd(&name, BYTES as usize);
    // The child's stdin is the memfd: open, never mapped.
    let child = Reaped(
        Command::new("sleep")
            .arg("60")
            .stdin(Stdio::from(held))
            .spawn()
            .expect("spawn sleep"),
    );
    let pid = child.0.id();

    let mut sampler = LinuxSampler::new("/proc");
    let snap = sample_until_scanned(&mut sampler);
    assert!(snap.unowned.known);
    let p = snap
        .processes
        .iter()
        .find(|p| p.id.pid == pid)
        .expect("the child is sampled");
    assert_eq!(p.held_open, BYTES, "{p:?}");
    assert!(
        p.footprint >= BYTES,
        "footprint {} < held {BYTES}",
        p.footprint
    );
    let file = snap
        .unowned
        .tmpfs_files
        .iter()
        .find(|f| f.path == format!("memfd:{name}"))
        .expect("the memfd is among the largest files");
    assert_eq!(file.bytes, BYTES);
    assert_eq!(file.open_by, [pid]);
    assert!(file.mapped_by.is_empty());

    // Carried between scans: the next tick says the same.
    let next = sampler.sample().expect("sample");
    let p = next
        .processes
        .iter()
        .find(|p| p.id.pid == pid)
        .expect("child");
    assert_eq!(p.held_open, BYTES);
    assert!(next.unowned.known);
}

#[test]
fn a_dev_shm_file_nobody_maps_is_unowned() {
    let dir = PathBuf::from("/dev/shm");
    let path = dir.join(format!("headroom-test-unowned-{}", std::process::id()));
    let Ok(mut file) = fs::File::create(&path) else {
        eprintln!("skipped: /dev/shm is not writable here");
        return;
    };
    let _removed = Removed(path.clone());
    let chunk = vec![0x5au8; MIB as usize];
    for _ in 0..16 {
        file.write_all(&chunk).expect("write /dev/shm file");
    }
    drop(file);

    let mut sampler = LinuxSampler::new("/proc");
    let snap = sample_until_scanned(&mut sampler);
    let u = &snap.unowned;
    assert!(u.known);
    let shown = path.display().to_string();
    let file = u
        .tmpfs_files
        .iter()
        .find(|f| f.path == shown)
        .unwrap_or_else(|| panic!("{shown} not among {:?}", u.tmpfs_files));
    assert_eq!(file.bytes, 16 * MIB);
    assert!(
        file.mapped_by.is_empty() && file.open_by.is_empty(),
        "{file:?}"
    );
    assert_eq!(file.uid, Some(headroom::os::this_process::effective_uid()));
    assert!(u.tmpfs_bytes >= 16 * MIB, "tmpfs_bytes {}", u.tmpfs_bytes);
    assert!(u.bytes() >= 16 * MIB);
}

#[test]
fn a_dev_shm_file_this_process_maps_is_mapped_by_it() {
    const BYTES: usize = 8 << 20;
    let path =
        PathBuf::from("/dev/shm").join(format!("headroom-test-mapped-{}", std::process::id()));
    let Ok(file) = fs::File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
    else {
        eprintln!("skipped: /dev/shm is not writable here");
        return;
    };
    let _removed = Removed(path.clone());
    file.set_len(BYTES as u64).expect("size the file");
    let _mapping = SharedMapping::of(&file, BYTES);
    // Mapped, and no longer open.
    drop(file);

    let mut sampler = LinuxSampler::new("/proc");
    let snap = sample_until_scanned(&mut sampler);
    let shown = path.display().to_string();
    let f = snap
        .unowned
        .tmpfs_files
        .iter()
        .find(|f| f.path == shown)
        .unwrap_or_else(|| panic!("{shown} not among {:?}", snap.unowned.tmpfs_files));
    assert_eq!(f.bytes, BYTES as u64);
    assert!(f.mapped_by.contains(&std::process::id()), "{f:?}");
    assert!(!f.open_by.contains(&std::process::id()), "{f:?}");
}

#[test]
fn an_orphaned_sysv_segment_is_marked() {
    const BYTES: u64 = 8 * MIB;
    let segment = SysvSegment::orphan(BYTES as usize);
    let mut sampler = LinuxSampler::new("/proc");
    let snap = sample_until_scanned(&mut sampler);
    let u = &snap.unowned;
    let seg = u
        .sysv_segments
        .iter()
        .find(|s| s.id == u64::try_from(segment.id).expect("id"))
        .unwrap_or_else(|| panic!("segment {} not among {:?}", segment.id, u.sysv_segments));
    assert!(seg.orphan());
    assert_eq!(seg.attached, 0);
    assert_eq!(seg.bytes, BYTES);
    assert_eq!(seg.creator_pid, std::process::id());
    assert!(u.sysv_orphan_bytes >= BYTES);
}

/// Removes the directory tree when dropped.
struct RemovedTree(PathBuf);

impl Drop for RemovedTree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_file_deeper_than_the_walk_makes_the_scan_short_and_its_shmem_unexplained() {
    const BYTES: u64 = 128 * MIB;
    let top = PathBuf::from(format!(
        "/dev/shm/headroom-test-deep-{}",
        std::process::id()
    ));
    let mut dir = top.clone();
    for level in 0..headroom::os::linux::UNOWNED_WALK_DEPTH + 1 {
        dir.push(format!("l{level}"));
    }
    fs::create_dir_all(&dir).expect("make the deep directories under /dev/shm");
    let _removed = RemovedTree(top);
    let before = sample_until_scanned(&mut LinuxSampler::new("/proc"));
    let mut file = fs::File::create(dir.join("blob")).expect("create the deep file");
    let chunk = vec![0x5au8; MIB as usize];
    for _ in 0..BYTES / MIB {
        file.write_all(&chunk).expect("write the deep file");
    }
    drop(file);

    let snap = sample_until_scanned(&mut LinuxSampler::new("/proc"));
    let u = &snap.unowned;
    let why = u.cut_short.as_deref().unwrap_or_default();
    assert!(why.contains("deeper than the"), "{u:?}");
    // The scan did not see it; Shmem did, and no mapping explains it.
    assert!(u.tmpfs_files.iter().all(|f| !f.path.ends_with("/blob")));
    let grew = u
        .unexplained_shmem
        .unwrap_or(0)
        .saturating_sub(before.unowned.unexplained_shmem.unwrap_or(0));
    assert!(
        grew >= BYTES / 2,
        "shared memory nothing accounts for grew {} MiB, the file holds {} MiB",
        grew / MIB,
        BYTES / MIB
    );
}
