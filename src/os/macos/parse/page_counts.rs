//! The per-tick page counts: which `vm.*` sysctls give the figures of
//! [`super::vm::system_memory`] without `host_statistics64`'s rate limit,
//! how their answers decode, how they combine with the figures only
//! `host_statistics64` gives ([`merge`]), and the holder that calls it at
//! most once per window ([`AtMostOncePer`]).
//!
//! **The rate limit.** `host_statistics64_from_user` (`osfmk/kern/host.c`,
//! xnu-8792.41.9 to xnu-11417.121.6, unchanged) passes every caller that is
//! not a platform binary through `rate_limit_host_statistics`: per flavor,
//! a window of `HOST_STATISTICS_TIME_WINDOW` (1 s) opens at the first call,
//! and past a random `HOST_STATISTICS_MIN_REQUESTS` (2) to
//! `HOST_STATISTICS_MAX_REQUESTS` (10) calls in it, `get_cached_info`
//! copies the last fresh answer back and the call returns `KERN_SUCCESS`.
//! The cache (`g_host_stats_cache`) is one per flavor for the whole
//! machine, filled by any third-party caller (`cache_host_statistics`), so
//! other monitors spend the same allowance. XNU's own test of the limit,
//! `tests/host_statistics_rate_limiting.c`, uses a 1 s window and expects
//! identical answers after 10 calls. Read every 20 ms, the figures repeat
//! for most of each second and then jump.
//!
//! **The sysctls.** `bsd/vm/vm_unix.c` exports the kernel globals that
//! `vm_stats()` in `osfmk/kern/host.c` copies into `vm_statistics64`, read
//! at the moment of the call (`SYSCTL_UINT`/`SYSCTL_INT` point at the
//! global itself), in every release kernel from xnu-8792.41.9 to
//! xnu-11417.121.6 (outside any `DEVELOPMENT || DEBUG` block):
//!
//! | sysctl | type | global | `vm_statistics64` field (host.c) |
//! |---|---|---|---|
//! | `vm.page_free_count` | `SYSCTL_UINT` | `vm_page_free_count` | `free_count` = it + speculative |
//! | `vm.page_speculative_count` | `SYSCTL_UINT` | `vm_page_speculative_count` | `speculative_count` |
//! | `vm.page_pageable_internal_count` | `SYSCTL_UINT` | `vm_page_pageable_internal_count` | `internal_page_count` = it + per-CPU queues |
//! | `vm.page_pageable_external_count` | `SYSCTL_UINT` | `vm_page_pageable_external_count` | `external_page_count` = it + per-CPU queues |
//! | `vm.page_purgeable_count` | `SYSCTL_INT` | `vm_page_purgeable_count` | `purgeable_count` |
//! | `vm.compressor_bytes_used` | `SYSCTL_QUAD` (`bsd/kern/kern_sysctl.c`) | `compressor_bytes_used` | none (see [`compressor_pages`]) |
//!
//! A real `sysctl -a` from a Mac lists the first four under these names
//! (OCSInventory-NG/UnixAgent#436).
//!
//! What only `host_statistics64` gives: `wire_count` (`vm.page_wire_count`
//! exists only in `DEVELOPMENT || DEBUG` kernels, `bsd/kern/kern_sysctl.c`
//! in every tag above), `compressor_page_count`
//! (`compressor_object->resident_page_count`, no sysctl), the active and
//! inactive counts (no sysctl) and the cumulative counters (swapins,
//! swapouts). Those are taken at most once per window and held between.
//!
//! One difference remains: host.c adds the pages on the per-CPU active
//! queues (`vm_page_local_q`, at most `vm_page_local_q_hard_limit` = 500
//! each, `osfmk/vm/vm_resident.c`) to the internal and external counts; the
//! sysctls do not. The sysctl figure of file-backed pages is lower by those
//! pages, so `available` can be lower by up to 500 pages per CPU, never
//! higher.

use std::ffi::CStr;
use std::time::{Duration, Instant};

use super::vm::VmStatistics;

/// `HOST_STATISTICS_TIME_WINDOW` (`osfmk/kern/host.c`): the window of the
/// rate limit, and the longest a cached answer can follow a fresh one.
pub const HOST_STATISTICS_WINDOW: Duration = Duration::from_secs(1);

/// `HOST_STATISTICS_MIN_REQUESTS` (`osfmk/kern/host.c`): fresh answers per
/// window that every third-party caller together is sure to get.
pub const HOST_STATISTICS_MIN_REQUESTS: u32 = 2;

/// `HOST_STATISTICS_MAX_REQUESTS` (`osfmk/kern/host.c`): the most fresh
/// answers in one window.
pub const HOST_STATISTICS_MAX_REQUESTS: u32 = 10;

/// `vm_page_local_q_hard_limit` (`osfmk/vm/vm_resident.c`, every tag
/// above): pages one CPU's local active queue holds before it is drained.
pub const LOCAL_QUEUE_LIMIT: u64 = 500;

/// How a sysctl answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// `SYSCTL_UINT`: 4 bytes, unsigned.
    UInt,
    /// `SYSCTL_INT`: 4 bytes, signed (a page count is never negative).
    Int,
    /// `SYSCTL_QUAD`: 8 bytes.
    Quad,
}

/// One per-tick sysctl.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSysctl {
    pub name: &'static CStr,
    pub width: Width,
}

/// The per-tick sysctls, in the order of [`PageCounts::from_values`].
pub const PAGE_SYSCTLS: [PageSysctl; 6] = [
    PageSysctl {
        name: c"vm.page_free_count",
        width: Width::UInt,
    },
    PageSysctl {
        name: c"vm.page_speculative_count",
        width: Width::UInt,
    },
    PageSysctl {
        name: c"vm.page_pageable_internal_count",
        width: Width::UInt,
    },
    PageSysctl {
        name: c"vm.page_pageable_external_count",
        width: Width::UInt,
    },
    PageSysctl {
        name: c"vm.page_purgeable_count",
        width: Width::Int,
    },
    PageSysctl {
        name: c"vm.compressor_bytes_used",
        width: Width::Quad,
    },
];

/// Decode one sysctl's answer, or say what was wrong with it. A 4-byte
/// answer is read as the sysctl's declared type; an 8-byte one as a
/// 64-bit count whatever the declaration, so that a kernel that widens a
/// counter still reads.
pub fn decode(sysctl: &PageSysctl, bytes: &[u8]) -> Result<u64, String> {
    let name = sysctl.name.to_string_lossy();
    match (bytes.len(), sysctl.width) {
        (4, Width::Int) => {
            let v = i32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            u64::try_from(v).map_err(|_| format!("sysctl {name} reads {v}, a negative page count"))
        }
        (4, _) => Ok(u64::from(u32::from_ne_bytes([
            bytes[0], bytes[1], bytes[2], bytes[3],
        ]))),
        (8, _) => {
            let mut b = [0u8; 8];
            b.copy_from_slice(bytes);
            Ok(u64::from_ne_bytes(b))
        }
        (n, _) => Err(format!(
            "sysctl {name} answered {n} bytes, not a 4- or 8-byte count"
        )),
    }
}

/// The per-tick figures, as the kernel's globals hold them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageCounts {
    /// `vm_page_free_count`: free pages, speculative ones NOT included.
    pub free: u64,
    pub speculative: u64,
    /// Anonymous pages on the global pageable queues.
    pub internal: u64,
    /// File-backed pages on the global pageable queues.
    pub external: u64,
    pub purgeable: u64,
    /// Bytes the compressed data occupies in memory.
    pub compressor_bytes: u64,
}

impl PageCounts {
    /// From the decoded answers of [`PAGE_SYSCTLS`], in that order.
    pub fn from_values(v: [u64; 6]) -> Self {
        Self {
            free: v[0],
            speculative: v[1],
            internal: v[2],
            external: v[3],
            purgeable: v[4],
            compressor_bytes: v[5],
        }
    }
}

/// What one `host_statistics64` call gave, and `vm.compressor_bytes_used`
/// read beside it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeldStatistics {
    pub stats: VmStatistics,
    pub compressor_bytes: u64,
}

/// The pages the compressor occupies now, from those it occupied at the
/// last `host_statistics64` call and how its bytes moved since: the bytes'
/// change in pages, and never fewer pages than the bytes fill. XNU's
/// compressor takes its fragmentation as `resident_page_count × PAGE_SIZE
/// − compressor_bytes_used` (`osfmk/vm/vm_compressor.c`, the minor
/// compaction test in xnu-8792.41.9 and xnu-11417.101.15), so the pages
/// always hold at least the bytes; between calls the fragmentation is
/// taken as it was.
pub fn compressor_pages(held_pages: u64, held_bytes: u64, bytes_now: u64, page_size: u64) -> u64 {
    if page_size == 0 {
        return held_pages;
    }
    let moved = i128::from(bytes_now) - i128::from(held_bytes);
    let pages = (i128::from(held_pages) + moved / i128::from(page_size)).max(0);
    let floor = bytes_now.div_ceil(page_size);
    u64::try_from(pages).unwrap_or(u64::MAX).max(floor)
}

/// The `vm_statistics64` fields as `host_statistics64` would give them
/// now: the per-tick figures where a sysctl has them (`free_count` with
/// speculative pages added, as host.c fills it), the compressor's pages
/// carried forward by its bytes ([`compressor_pages`]), the rest as held.
pub fn merge(fresh: &PageCounts, held: &HeldStatistics, page_size: u64) -> VmStatistics {
    VmStatistics {
        free_count: fresh.free.saturating_add(fresh.speculative),
        speculative_count: fresh.speculative,
        internal_page_count: fresh.internal,
        external_page_count: fresh.external,
        purgeable_count: fresh.purgeable,
        compressor_page_count: compressor_pages(
            held.stats.compressor_page_count,
            held.compressor_bytes,
            fresh.compressor_bytes,
            page_size,
        ),
        ..held.stats
    }
}

/// A value read at most once per window: [`AtMostOncePer::get`] reads
/// again only once the window has passed since the last good read. A
/// failed read leaves nothing new held and is retried on the next call.
#[derive(Debug, Clone)]
pub struct AtMostOncePer<T> {
    window: Duration,
    held: Option<(Instant, T)>,
}

impl<T> AtMostOncePer<T> {
    pub const fn new(window: Duration) -> Self {
        Self { window, held: None }
    }

    /// Whether a read made at `now` would call the source.
    pub fn due(&self, now: Instant) -> bool {
        self.held
            .as_ref()
            .is_none_or(|(at, _)| now.saturating_duration_since(*at) >= self.window)
    }

    /// The held value, read afresh with `read` if it is due.
    pub fn get<E>(&mut self, now: Instant, read: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        let held = match self.held.take() {
            Some((at, value)) if now.saturating_duration_since(at) < self.window => (at, value),
            old => match read() {
                Ok(value) => (now, value),
                Err(e) => {
                    self.held = old;
                    return Err(e);
                }
            },
        };
        Ok(&self.held.insert(held).1)
    }

    /// When the held value was read, if there is one.
    pub fn read_at(&self) -> Option<Instant> {
        self.held.as_ref().map(|(at, _)| *at)
    }
}

#[cfg(test)]
mod tests {
    use super::super::vm::system_memory;
    use super::*;

    const GIB: u64 = 1 << 30;

    /// `vm_stat` on an Apple Silicon Mac (page size 16384), posted in
    /// HMCL-dev/HMCL#4876: "Pages free: 3857, active: 446206, inactive:
    /// 443760, speculative: 1075, throttled: 0, wired down: 181483,
    /// purgeable: 17340, File-backed pages: 294894, Anonymous pages:
    /// 596147, Pages occupied by compressor: 442179". `vm_stat` prints
    /// free_count − speculative_count as "Pages free" (system_cmds
    /// vm_stat.c), so free_count is the sum. The counts add up to 23.2 GiB;
    /// the report gives no hw.memsize, so 24 GiB is taken as the total.
    fn apple_silicon_hmcl() -> (VmStatistics, u64, u64) {
        let vm = VmStatistics {
            free_count: 3_857 + 1_075,
            active_count: 446_206,
            inactive_count: 443_760,
            speculative_count: 1_075,
            throttled_count: 0,
            wire_count: 181_483,
            purgeable_count: 17_340,
            external_page_count: 294_894,
            internal_page_count: 596_147,
            compressor_page_count: 442_179,
            total_uncompressed_pages_in_compressor: 1_943_619,
            ..VmStatistics::default()
        };
        (vm, 16_384, 24 * GIB)
    }

    /// `vm_stat` on an Intel Mac (page size 4096) in apple.stackexchange.com
    /// question 347037 ("What is the purpose of speculative memory?"):
    /// free 334212, active 1450252, inactive 1367584, speculative 81968,
    /// wired 794478, purgeable 377078, file-backed 597869, anonymous
    /// 2301935, occupied by compressor 165553. The counts add up to 16 GiB
    /// less 257 pages: a 16 GiB Mac.
    fn intel_stackexchange() -> (VmStatistics, u64, u64) {
        let vm = VmStatistics {
            free_count: 334_212 + 81_968,
            active_count: 1_450_252,
            inactive_count: 1_367_584,
            speculative_count: 81_968,
            wire_count: 794_478,
            purgeable_count: 377_078,
            external_page_count: 597_869,
            internal_page_count: 2_301_935,
            compressor_page_count: 165_553,
            total_uncompressed_pages_in_compressor: 1_170_377,
            ..VmStatistics::default()
        };
        (vm, 4096, 16 * GIB)
    }

    /// `vm_stat` on an Intel Mac (page size 4096) with nothing compressed,
    /// posted in wazuh/wazuh#22113 (the capture of `vm::tests`).
    fn intel_wazuh() -> (VmStatistics, u64, u64) {
        let vm = VmStatistics {
            free_count: 6_127_229 + 430_715,
            active_count: 485_320,
            inactive_count: 628_646,
            speculative_count: 430_715,
            wire_count: 715_958,
            purgeable_count: 11_820,
            external_page_count: 1_080_348,
            internal_page_count: 464_333,
            ..VmStatistics::default()
        };
        (vm, 4096, 32 * GIB)
    }

    /// What the sysctls read at the instant `host_statistics64` filled
    /// `vm`, through the globals both read (host.c `vm_stats()`,
    /// vm_unix.c): `vm_page_free_count` is free_count − speculative; the
    /// pageable counts are host.c's less the per-CPU queues' pages.
    fn sysctls_at(
        vm: &VmStatistics,
        local_internal: u64,
        local_external: u64,
        compressor_bytes: u64,
    ) -> PageCounts {
        PageCounts {
            free: vm.free_count - vm.speculative_count,
            speculative: vm.speculative_count,
            internal: vm.internal_page_count - local_internal,
            external: vm.external_page_count - local_external,
            purgeable: vm.purgeable_count,
            compressor_bytes,
        }
    }

    #[test]
    fn both_sources_give_the_same_figures_on_real_captures() {
        for (label, (vm, page, total)) in [
            ("HMCL-dev/HMCL#4876", apple_silicon_hmcl()),
            ("apple.stackexchange 347037", intel_stackexchange()),
            ("wazuh/wazuh#22113", intel_wazuh()),
        ] {
            // The compressor's bytes read beside the held call; the same
            // bytes now: nothing moved in between.
            let bytes = vm.compressor_page_count * page / 2;
            let held = HeldStatistics {
                stats: vm,
                compressor_bytes: bytes,
            };
            let fresh = sysctls_at(&vm, 0, 0, bytes);
            let merged = merge(&fresh, &held, page);
            assert_eq!(merged, vm, "{label}");
            assert_eq!(
                system_memory(&merged, page, total),
                system_memory(&vm, page, total),
                "{label}"
            );
        }
    }

    #[test]
    fn under_compression_available_comes_from_the_sysctls_alone() {
        // On the Apple Silicon capture, free + file-backed + purgeable
        // (317 166 pages, 4.8 GiB) is below total − used (370 395 pages):
        // wired and compressed, the held figures, do not enter it.
        let (vm, page, total) = apple_silicon_hmcl();
        let m = system_memory(&vm, page, total);
        assert_eq!(m.available, (3_857 + 1_075 + 294_894 + 17_340) * page);
        let stale = HeldStatistics {
            stats: VmStatistics {
                wire_count: vm.wire_count - 10_000,
                compressor_page_count: vm.compressor_page_count - 10_000,
                ..vm
            },
            compressor_bytes: 0,
        };
        let fresh = sysctls_at(&vm, 0, 0, 0);
        let from_sysctls = system_memory(&merge(&fresh, &stale, page), page, total);
        assert_eq!(from_sysctls.available, m.available);
    }

    #[test]
    fn the_per_cpu_queues_make_the_sysctl_figure_lower_never_higher() {
        // Ten CPUs' local queues at the hard limit, 60 % of it file-backed.
        let (vm, page, total) = apple_silicon_hmcl();
        let (local_internal, local_external) = (2_000, 3_000);
        let held = HeldStatistics {
            stats: vm,
            compressor_bytes: 0,
        };
        let fresh = sysctls_at(&vm, local_internal, local_external, 0);
        let from_sysctls = system_memory(&merge(&fresh, &held, page), page, total);
        let from_host = system_memory(&vm, page, total);
        assert!(from_sysctls.available <= from_host.available);
        assert_eq!(
            from_host.available - from_sysctls.available,
            local_external * page
        );
        assert!(local_internal + local_external <= 10 * LOCAL_QUEUE_LIMIT);
    }

    #[test]
    fn compressed_pages_follow_the_compressors_bytes_and_hold_them() {
        let page = 16_384;
        // 1000 pages holding 12 MiB: 4 MiB of fragmentation.
        let (pages, bytes) = (1_000, 12 << 20);
        assert_eq!(compressor_pages(pages, bytes, bytes, page), 1_000);
        // 160 MiB more compressed: 10 240 pages more.
        assert_eq!(
            compressor_pages(pages, bytes, bytes + (160 << 20), page),
            11_240
        );
        // Shrunk to nothing: no pages below what the bytes fill.
        assert_eq!(compressor_pages(pages, bytes, 0, page), 232);
        // Held pages that cannot hold the bytes now (a cached answer older
        // than the bytes): at least the bytes' pages.
        assert_eq!(compressor_pages(0, 0, 16_385, page), 2);
        assert_eq!(compressor_pages(7, 0, 0, 0), 7);
        assert_eq!(compressor_pages(u64::MAX, 0, u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn answers_decode_by_width_and_bad_ones_name_the_sysctl() {
        let [free, .., purgeable, bytes] = PAGE_SYSCTLS;
        assert_eq!(decode(&free, &3_025u32.to_ne_bytes()), Ok(3_025));
        assert_eq!(decode(&purgeable, &42_222i32.to_ne_bytes()), Ok(42_222));
        assert_eq!(
            decode(&bytes, &12_187_353_088u64.to_ne_bytes()),
            Ok(12_187_353_088)
        );
        // A counter widened to 64 bits, or a quad that fits 32, still reads.
        assert_eq!(decode(&free, &7u64.to_ne_bytes()), Ok(7));
        assert_eq!(decode(&bytes, &9u32.to_ne_bytes()), Ok(9));
        let short = decode(&bytes, &[0; 3]).unwrap_err();
        assert!(
            short.contains("vm.compressor_bytes_used") && short.contains("3 bytes"),
            "{short}"
        );
        let negative = decode(&purgeable, &(-1i32).to_ne_bytes()).unwrap_err();
        assert!(negative.contains("vm.page_purgeable_count"), "{negative}");
        assert!(decode(&free, &[]).is_err());
    }

    #[test]
    fn the_values_land_in_the_fields_their_names_say() {
        let names: Vec<String> = PAGE_SYSCTLS
            .iter()
            .map(|s| s.name.to_string_lossy().into_owned())
            .collect();
        let c = PageCounts::from_values([1, 2, 3, 4, 5, 6]);
        let by_name = |n: &str| names.iter().position(|x| x == n).unwrap() as u64 + 1;
        assert_eq!(c.free, by_name("vm.page_free_count"));
        assert_eq!(c.speculative, by_name("vm.page_speculative_count"));
        assert_eq!(c.internal, by_name("vm.page_pageable_internal_count"));
        assert_eq!(c.external, by_name("vm.page_pageable_external_count"));
        assert_eq!(c.purgeable, by_name("vm.page_purgeable_count"));
        assert_eq!(c.compressor_bytes, by_name("vm.compressor_bytes_used"));
    }

    #[test]
    fn the_source_is_read_at_most_once_per_window() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut held = AtMostOncePer::new(HOST_STATISTICS_WINDOW);
        let mut calls = 0;
        let mut read = |v: u32| {
            calls += 1;
            Ok::<u32, String>(v)
        };
        // Every 20 ms for 2.5 s: a read at 0, 1000 and 2000 ms.
        let mut seen = Vec::new();
        for i in 0..125u64 {
            let v = *held.get(ms(i * 20), || read(i as u32)).unwrap();
            if seen.last() != Some(&v) {
                seen.push(v);
            }
        }
        assert_eq!(seen, [0, 50, 100]);
        assert_eq!(calls, 3);
        assert_eq!(held.read_at(), Some(ms(2000)));
    }

    #[test]
    fn a_failed_read_is_retried_at_the_next_call() {
        let t0 = Instant::now();
        let mut held: AtMostOncePer<u32> = AtMostOncePer::new(HOST_STATISTICS_WINDOW);
        assert!(held.due(t0));
        assert_eq!(
            held.get(t0, || Err("kern_return_t 5")),
            Err("kern_return_t 5")
        );
        assert!(held.due(t0), "nothing held: the next call reads");
        let later = t0 + Duration::from_millis(20);
        assert_eq!(held.get(later, || Ok::<u32, &str>(7)), Ok(&7));
        assert!(!held.due(later + Duration::from_millis(999)));
        // Past the window a failing source fails the call; what was held
        // stays for the retry to replace.
        let next = later + HOST_STATISTICS_WINDOW;
        assert_eq!(held.get(next, || Err("gone")), Err("gone"));
        assert_eq!(held.read_at(), Some(later));
    }
}
