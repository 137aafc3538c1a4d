//! [`VmSource`]: this Mac's VM statistics for the probe and the sampler,
//! fresh on every read although `host_statistics64` is rate-limited.
//!
//! The kernel answers a third-party caller's `host_statistics64` from a
//! cache past 2 to 10 calls per 1 s window, shared by every monitor on the
//! machine (`osfmk/kern/host.c`; the details and citations are in
//! [`super::parse::page_counts`]). So each read takes the page counts from
//! the `vm.page_*` sysctls and `vm.compressor_bytes_used`, resolved to
//! their numbers once per process and read by number (no rate limit), and
//! calls `host_statistics64` at most once a second for the figures only it
//! gives (wired, the compressor's pages, active and inactive, the paging
//! counters). That call is shared by every reader in this process, so the
//! probe and the sampler together make one a second.
//!
//! Where a sysctl is missing (some future or past macOS), every read falls
//! back to `host_statistics64` alone: it says so in the log once, in
//! `headroom doctor` and in its collector status (`vm-page-counts`, down),
//! and its readings carry the window they may lag by
//! ([`VmReading::cached_for`]), which the daemon's trend allows for.

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::ffi::mach::VmInfoReader;
use super::ffi::sysctl::Mib;
use super::parse::page_counts::{
    self, AtMostOncePer, HOST_STATISTICS_WINDOW, HeldStatistics, PAGE_SYSCTLS, PageCounts,
};
use super::parse::vm::{VmInfoError, VmStatistics};
use crate::model::sampling::SampleError;
use crate::model::{Collector, CollectorStatus};

/// The collector's name in the snapshot, `/metrics` and `doctor`.
pub const NAME: &str = "vm-page-counts";

/// One reading of the VM statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmReading {
    pub stats: VmStatistics,
    /// How long its figures may lag the kernel's: zero when the page
    /// counts came from the sysctls, the rate limit's window when they
    /// came from `host_statistics64` alone.
    pub cached_for: Duration,
}

/// `host_statistics64` for this whole process: the count it accepts and
/// its last answer, read at most once per window.
struct Host {
    reader: VmInfoReader,
    held: AtMostOncePer<HeldStatistics>,
}

static HOST: Mutex<Host> = Mutex::new(Host {
    reader: VmInfoReader::new(),
    held: AtMostOncePer::new(HOST_STATISTICS_WINDOW),
});

fn host() -> std::sync::MutexGuard<'static, Host> {
    // A panic elsewhere while holding it leaves a count and a copy of
    // plain numbers, both still valid.
    HOST.lock().unwrap_or_else(PoisonError::into_inner)
}

fn host_error(e: VmInfoError) -> SampleError {
    SampleError::Parse {
        path: "host_statistics64(HOST_VM_INFO64)".into(),
        reason: e.to_string(),
    }
}

/// The per-tick sysctls' numbers, resolved once per process; why not,
/// naming the sysctl, where one is missing.
fn mibs() -> &'static Result<[Mib; 6], String> {
    static MIBS: OnceLock<Result<[Mib; 6], String>> = OnceLock::new();
    MIBS.get_or_init(|| {
        let mut out = Vec::with_capacity(PAGE_SYSCTLS.len());
        for sysctl in &PAGE_SYSCTLS {
            match Mib::resolve(sysctl.name) {
                Ok(mib) => out.push(mib),
                Err(e) => {
                    let why = format!("sysctl {} unavailable: {e}", sysctl.name.to_string_lossy());
                    tracing::warn!(
                        "{why}; memory figures come from host_statistics64 alone, which the kernel answers from a cache past 2 to 10 calls a second: they may lag by up to a second"
                    );
                    return Err(why);
                }
            }
        }
        <[Mib; 6]>::try_from(out).map_err(|_| "the page-count sysctls did not all resolve".into())
    })
}

/// The per-tick page counts, read now by number.
pub fn page_counts() -> Result<PageCounts, String> {
    let mibs = mibs().as_ref().map_err(Clone::clone)?;
    let mut values = [0u64; 6];
    let mut buf = [0u8; 8];
    for ((mib, sysctl), value) in mibs.iter().zip(&PAGE_SYSCTLS).zip(&mut values) {
        let n = mib
            .read(&mut buf)
            .map_err(|e| format!("sysctl {}: {e}", sysctl.name.to_string_lossy()))?;
        *value = page_counts::decode(sysctl, &buf[..n])?;
    }
    Ok(PageCounts::from_values(values))
}

/// One `host_statistics64` call now, outside the once-a-window holder
/// (for `doctor`'s comparison and the native tests), with the count of
/// words the kernel accepted.
pub fn host_statistics_now() -> Result<(VmStatistics, u32), VmInfoError> {
    let mut host = host();
    let stats = host.reader.read()?;
    Ok((stats, host.reader.count()))
}

/// Reads this Mac's VM statistics; see the module documentation.
#[derive(Debug, Default)]
pub struct VmSource {
    /// Reads that fell back to `host_statistics64` alone.
    fallbacks: u64,
    /// Why the last read fell back, if it did.
    fell_back: Option<String>,
    /// Whether a read has been made.
    read_once: bool,
}

impl VmSource {
    pub fn new() -> Self {
        Self::default()
    }

    /// The VM statistics now; `page_size` is the kernel's.
    pub fn read(&mut self, page_size: u64) -> Result<VmReading, SampleError> {
        self.read_once = true;
        match page_counts() {
            Ok(fresh) => {
                self.fell_back = None;
                let now = Instant::now();
                let mut guard = host();
                let Host { reader, held } = &mut *guard;
                let held = held
                    .get(now, || {
                        reader.read().map(|stats| HeldStatistics {
                            stats,
                            compressor_bytes: fresh.compressor_bytes,
                        })
                    })
                    .map_err(host_error)?;
                Ok(VmReading {
                    stats: page_counts::merge(&fresh, held, page_size),
                    cached_for: Duration::ZERO,
                })
            }
            Err(why) => {
                self.fallbacks = self.fallbacks.saturating_add(1);
                self.fell_back = Some(why);
                let stats = host().reader.read().map_err(host_error)?;
                Ok(VmReading {
                    stats,
                    cached_for: HOST_STATISTICS_WINDOW,
                })
            }
        }
    }
}

impl Collector for VmSource {
    fn name(&self) -> &'static str {
        NAME
    }

    fn status(&self) -> Option<CollectorStatus> {
        if !self.read_once {
            return None;
        }
        let (up, detail) = match &self.fell_back {
            None => (
                true,
                "page counts from the vm.page_* sysctls on every read; wired and compressed from host_statistics64 at most once a second".to_owned(),
            ),
            Some(why) => (
                false,
                format!(
                    "{why}: memory figures come from host_statistics64 alone, which the kernel answers from a cache past 2 to 10 calls a second; they may lag by up to a second"
                ),
            ),
        };
        Some(CollectorStatus {
            name: NAME.to_owned(),
            up,
            detail,
            errors: self.fallbacks,
            applicable: true,
        })
    }
}

#[cfg(test)]
mod tests {
    //! These run on a Mac only: the sysctl path against the machine.

    use super::*;
    use crate::os::macos::ffi::mach as ffi_mach;
    use crate::os::macos::parse::page_counts::LOCAL_QUEUE_LIMIT;
    use crate::os::macos::parse::vm::system_memory;

    fn page_size() -> u64 {
        ffi_mach::page_size().unwrap()
    }

    #[test]
    fn the_page_count_sysctls_exist_and_read_sane_figures() {
        let c = page_counts().unwrap();
        let total_pages = ffi_mach::memsize().unwrap() / page_size();
        // A running Mac has free pages (the pageout daemon keeps a
        // reserve) and anonymous and file-backed pages on its queues.
        assert!(c.free > 0 && c.internal > 0 && c.external > 0, "{c:?}");
        for n in [c.free, c.speculative, c.internal, c.external, c.purgeable] {
            assert!(n <= total_pages, "{c:?} against {total_pages} pages");
        }
        assert!(c.internal + c.external + c.free <= total_pages, "{c:?}");
    }

    #[test]
    fn two_reads_30_ms_apart_are_both_fresh() {
        let mut source = VmSource::new();
        let page = page_size();
        let total = ffi_mach::memsize().unwrap();
        let first = source.read(page).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let second = source.read(page).unwrap();
        for r in [first, second] {
            assert_eq!(r.cached_for, Duration::ZERO, "the sysctl path answered");
            let m = system_memory(&r.stats, page, total);
            assert!(m.available > 0 && m.available <= m.total, "{m:?}");
            assert!(r.stats.wire_count > 0);
        }
        let status = source.status().unwrap();
        assert!(status.up && status.errors == 0, "{status:?}");
    }

    #[test]
    fn the_sysctls_agree_with_host_statistics_at_the_same_moment() {
        let page = page_size();
        let total = ffi_mach::memsize().unwrap();
        let before = page_counts().unwrap();
        let (host, _) = host_statistics_now().unwrap();
        let after = page_counts().unwrap();
        let held = HeldStatistics {
            stats: host,
            compressor_bytes: after.compressor_bytes,
        };
        let by_host = system_memory(&host, page, total).available;
        let by_sysctls = [before, after].map(|fresh| {
            system_memory(&page_counts::merge(&fresh, &held, page), page, total).available
        });
        // The per-CPU queues' pages (at most 500 per CPU) are in
        // host_statistics64's figure only; the rest is what moved between
        // the reads, or a cached answer from within the last second on a
        // busy machine: 2 % of memory allows for that.
        let cpus = std::thread::available_parallelism().map_or(64, |n| n.get() as u64);
        let slack = cpus * LOCAL_QUEUE_LIMIT * page + total / 50;
        let low = by_sysctls.iter().min().unwrap().saturating_sub(slack);
        let high = by_sysctls.iter().max().unwrap() + slack;
        assert!(
            (low..=high).contains(&by_host),
            "host_statistics64 {by_host}, sysctls {by_sysctls:?}, slack {slack}"
        );
    }
}
