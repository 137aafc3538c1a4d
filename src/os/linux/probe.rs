//! The Linux probe: `/proc/meminfo` for available memory and swap, and
//! `/proc/pressure/memory` when a rule asks about pressure.
//!
//! Both are `single_open` files (`fs/proc/meminfo.c`,
//! `kernel/sched/psi.c`): the kernel renders the whole file on each read
//! from offset 0. They are opened once and re-read with `pread` at offset 0,
//! which skips the path walk, `open` and `close` of every probe
//! (`benches/probe_cost.rs` measures both ways). `/proc/vmstat` is not read:
//! the swap condition is on swap used, which `meminfo` has, and the paging
//! counters would cost a render of a much larger file on every probe.
//!
//! The parsers are the sampler's ([`crate::os::linux::parse::procfs`]), so a probe and
//! a sample of the same instant agree.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::model::sampling::{Probe, ProbeReading, SampleError};

use crate::os::linux::parse::procfs;

/// `meminfo` is about 1.5 KiB, the pressure file under 200 bytes.
const INITIAL_BUFFER: usize = 4096;
/// A file longer than this is not what the probe expects.
const MAX_BUFFER: usize = 64 * 1024;

/// Kept-open `meminfo` and pressure files below one `/proc` root.
#[derive(Debug)]
pub struct LinuxProbe {
    root: PathBuf,
    meminfo: File,
    /// `None` on kernels without PSI (or booted with `psi=0`).
    pressure: Option<File>,
    buf: Vec<u8>,
}

impl LinuxProbe {
    /// Open `root/meminfo` (required) and `root/pressure/memory` (if the
    /// kernel has it).
    pub fn open(root: &Path) -> Result<Self, SampleError> {
        let path = root.join("meminfo");
        let meminfo = File::open(&path).map_err(|source| SampleError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut probe = Self {
            root: root.to_path_buf(),
            meminfo,
            pressure: File::open(root.join("pressure/memory")).ok(),
            buf: vec![0; INITIAL_BUFFER],
        };
        // Fail now, not at the first probe, if meminfo does not parse.
        probe.read(true)?;
        Ok(probe)
    }

    fn path(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }
}

/// Read a kept-open `single_open` file from offset 0 into `buf`, growing it
/// (up to [`MAX_BUFFER`]) until one read returns less than the buffer
/// holds: the whole file.
fn pread_all<'a>(file: &File, buf: &'a mut Vec<u8>) -> io::Result<&'a str> {
    loop {
        let n = match file.read_at(buf, 0) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n < buf.len() {
            return std::str::from_utf8(&buf[..n])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e));
        }
        if buf.len() >= MAX_BUFFER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("longer than {MAX_BUFFER} bytes"),
            ));
        }
        buf.resize(buf.len() * 2, 0);
    }
}

impl Probe for LinuxProbe {
    fn read(&mut self, pressure: bool) -> Result<ProbeReading, SampleError> {
        let at = Instant::now();
        let m = match pread_all(&self.meminfo, &mut self.buf) {
            Ok(text) => procfs::parse_meminfo(text).map_err(|reason| SampleError::Parse {
                path: self.path("meminfo"),
                reason,
            })?,
            Err(source) => {
                return Err(SampleError::Read {
                    path: self.path("meminfo"),
                    source,
                });
            }
        };
        let psi = match (&self.pressure, pressure) {
            (Some(file), true) => match pread_all(file, &mut self.buf) {
                Ok(text) => procfs::parse_psi(text),
                // EOPNOTSUPP: booted with psi=0; stop trying.
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    self.pressure = None;
                    None
                }
                Err(_) => None,
            },
            _ => None,
        };
        let swap_total = m.swap_total.unwrap_or(0);
        Ok(ProbeReading {
            at,
            total: m.total,
            available: m.available,
            swap_total,
            // As the sampler computes it (procfs::swap).
            swap_used: swap_total.saturating_sub(m.swap_free.unwrap_or(0)),
            pressure: procfs::pressure_level(psi.as_ref(), m.available, m.total),
            // meminfo is rendered afresh on every read.
            cached_for: std::time::Duration::ZERO,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PressureLevel;
    use crate::model::sampling::Sampler;

    fn fixture(tree: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/proc")
            .join(tree)
    }

    #[test]
    fn a_probe_agrees_with_a_sample_of_the_same_tree() {
        let root = fixture("basic");
        let reading = LinuxProbe::open(&root).unwrap().read(true).unwrap();
        let snap = crate::os::linux::LinuxSampler::new(&root).sample().unwrap();
        assert_eq!(reading.total, snap.system.total);
        assert_eq!(reading.available, snap.system.available);
        assert_eq!(reading.swap_total, snap.swap.total);
        assert_eq!(reading.swap_used, snap.swap.used);
        assert_eq!(reading.pressure, snap.pressure.level);
    }

    #[test]
    fn kept_files_are_read_afresh_each_time() {
        let dir = tempfile::tempdir().unwrap();
        let meminfo = std::fs::read_to_string(fixture("basic").join("meminfo")).unwrap();
        std::fs::write(dir.path().join("meminfo"), &meminfo).unwrap();
        let mut probe = LinuxProbe::open(dir.path()).unwrap();
        let before = probe.read(false).unwrap().available;
        let changed = meminfo
            .lines()
            .map(|l| {
                if l.starts_with("MemAvailable:") {
                    "MemAvailable:      1024 kB".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(dir.path().join("meminfo"), changed).unwrap();
        let after = probe.read(false).unwrap();
        assert_ne!(before, after.available);
        assert_eq!(after.available, 1 << 20);
        // 1 MiB available of several GiB: critical from the share alone.
        assert_eq!(after.pressure, PressureLevel::Critical);
    }

    #[test]
    fn without_pressure_the_level_comes_from_the_available_share() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(fixture("basic").join("meminfo"), dir.path().join("meminfo")).unwrap();
        std::fs::create_dir(dir.path().join("pressure")).unwrap();
        std::fs::write(
            dir.path().join("pressure/memory"),
            "some avg10=50.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        let mut probe = LinuxProbe::open(dir.path()).unwrap();
        assert_eq!(probe.read(true).unwrap().pressure, PressureLevel::Critical);
        assert_eq!(probe.read(false).unwrap().pressure, PressureLevel::Normal);
    }

    #[test]
    fn a_missing_meminfo_names_the_path() {
        let err = LinuxProbe::open(Path::new("/nonexistent/proc")).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/proc/meminfo"),
            "{err}"
        );
    }

    #[test]
    fn a_garbage_meminfo_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("meminfo"), "MemTotal: lots\n").unwrap();
        let err = LinuxProbe::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("meminfo"), "{err}");
    }

    #[test]
    fn the_real_meminfo_reads_back() {
        let r = LinuxProbe::open(Path::new("/proc"))
            .unwrap()
            .read(true)
            .unwrap();
        assert!(r.total > 0 && r.available <= r.total);
        assert!(r.swap_used <= r.swap_total);
    }
}
