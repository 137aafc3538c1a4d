//! Fuzz target: every `/proc` parser of the Linux sampler (and those of the
//! memory-cgroup files), and the figures computed from what they return. The first byte picks the parser, the rest
//! is the file's content, so one target and one corpus cover them all
//! (`fuzz/corpus/proc_files` holds the real fixtures, each behind its byte).
//! Each parser must return a value or `None`/`Err` for any bytes: never
//! panic, overflow or read past the input.

#![no_main]

use headroom::os::linux::parse::{cgroupfs, procfs};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, file)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(file);
    match which % 16 {
        0 => {
            if let Ok(m) = procfs::parse_meminfo(&text) {
                let s = procfs::system_memory(&m);
                assert!(s.used <= s.total);
                let _ = procfs::pressure_level(None, m.available, m.total);
                let _ = procfs::swap(&m, &procfs::VmstatSwap::default(), u64::MAX);
            }
        }
        1 => {
            let v = procfs::parse_vmstat(&text);
            let _ = procfs::swap(&procfs::Meminfo::default(), &v, 65536);
        }
        2 => {
            if let Some(p) = procfs::parse_psi(&text) {
                assert!((0.0..=100.0).contains(&p.some.avg10));
                let _ = procfs::pressure_level(Some(&p), u64::MAX, 1);
            }
        }
        3 => {
            let _ = procfs::parse_btime(&text);
        }
        4 => {
            if let Some(s) = procfs::parse_statm(file) {
                assert!(s.anon() <= s.resident);
            }
        }
        5 => {
            if let Some(s) = procfs::parse_stat(file) {
                // The name is a slice of the input, between its parentheses.
                assert!(s.comm.len() < file.len());
                let _ = s.is_kernel_thread();
            }
        }
        6 => {
            if let Some(s) = procfs::parse_status(file) {
                let _ = s.footprint();
            }
        }
        7 => {
            let argv = procfs::parse_cmdline(file);
            assert!(argv.len() <= file.len());
        }
        8 => {
            let libs = procfs::parse_maps_libraries(file);
            assert!(libs.windows(2).all(|w| w[0] < w[1]), "sorted, unique");
        }
        9 => {
            for entry in headroom::os::passwd::entries(&text) {
                assert!(!entry.name.is_empty());
            }
        }
        10 => {
            let _ = procfs::parse_max_open_files(&text);
        }
        12 => {
            if let Ok(path) = procfs::parse_memory_cgroup(file) {
                assert!(path.len() <= procfs::CGROUP_PATH_MAX);
            }
            for line in procfs::cgroup_lines(file) {
                assert!(line.path.starts_with(b"/"));
            }
        }
        13 => {
            let mounts = cgroupfs::parse_mountinfo(&text);
            if let Some((_, mount)) = mounts.memory() {
                for path in ["/", "/a/b", "/../x", "/a/../b"] {
                    if let Ok(dir) = cgroupfs::cgroup_dir(mount, path) {
                        assert!(dir.starts_with(&mount.point), "{dir:?} outside the mount");
                    }
                }
            }
        }
        14 => {
            let _ = cgroupfs::parse_limit(&text);
            let _ = cgroupfs::reclaimable_file(&text, cgroupfs::Hierarchy::V1);
            let _ = cgroupfs::reclaimable_file(&text, cgroupfs::Hierarchy::V2);
            let _ = cgroupfs::keyed_value(&text, "oom_kill");
            for level in cgroupfs::levels(&text) {
                assert!(!level.is_empty());
            }
        }
        _ => {
            if let Some(pid) = procfs::parse_pid(file) {
                let digits = std::str::from_utf8(file).expect("a pid is ASCII digits");
                assert_eq!(digits.parse::<u32>().ok(), Some(pid));
            }
        }
    }
});
