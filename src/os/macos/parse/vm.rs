//! `host_statistics64(HOST_VM_INFO64)` and `vm.swapusage` into system memory
//! and swap, with the breakdown of Activity Monitor's Memory tab (app,
//! wired, compressed, cached) as other tools compute it; Apple publishes no
//! formula, see [`system_memory`].
//!
//! The kernel fills an array of `integer_t` words with a `vm_statistics64`
//! struct. That struct has grown: 38 words up to macOS 15 (REV1), 40 or 62
//! in macOS 26 and 104 in macOS 27 (counts reported in jundot/omlx#1749,
//! #2983 and PlummersSoftwareLLC/tmog-feedback#193), and the kernel answers
//! `MIG_ARRAY_TOO_LARGE` (-307) with the count it wants when the caller's
//! count is too small for what it has to say. So the caller asks with a
//! count, retries once with the kernel's count on -307 ([`after_call`]), and
//! this module reads only the REV1 prefix ([`VmStatistics::from_words`]),
//! whose layout has not changed since macOS 10.9.
//!
//! Every conversion is saturating: the counters are the kernel's and a
//! wrapped subtraction would report exabytes.

use crate::model::{PressureLevel, Swap, SystemMemory};

/// `HOST_VM_INFO64_REV1_COUNT`: words in the REV1 `vm_statistics64`
/// (`osfmk/mach/host_info.h`), the prefix this module reads.
pub const REV1_COUNT: u32 = 38;

/// `MIG_ARRAY_TOO_LARGE` (`osfmk/mach/mig_errors.h`): the reply did not fit
/// the caller's count; the count now holds the size the kernel wanted.
pub const MIG_ARRAY_TOO_LARGE: i32 = -307;

/// `KERN_SUCCESS`.
const KERN_SUCCESS: i32 = 0;

/// The REV1 fields of `struct vm_statistics64` (`osfmk/mach/vm_statistics.h`),
/// all widened to `u64`. Counts are in pages of the kernel's page size;
/// the fault and paging counters are cumulative since boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmStatistics {
    /// Free pages, INCLUDING speculative ones: `osfmk/kern/host.c` fills it
    /// as `vm_page_free_count + vm_page_speculative_count` (which is why
    /// `vm_stat` prints "Pages free" as `free_count - speculative_count`).
    pub free_count: u64,
    pub active_count: u64,
    pub inactive_count: u64,
    /// Wired pages (on macOS this includes throttled pages, host.c).
    pub wire_count: u64,
    pub zero_fill_count: u64,
    pub reactivations: u64,
    pub pageins: u64,
    pub pageouts: u64,
    pub faults: u64,
    pub cow_faults: u64,
    pub lookups: u64,
    pub hits: u64,
    pub purges: u64,
    pub purgeable_count: u64,
    pub speculative_count: u64,
    pub decompressions: u64,
    pub compressions: u64,
    /// Pages swapped in (via compression segments), cumulative.
    pub swapins: u64,
    /// Pages swapped out (via compression segments), cumulative.
    pub swapouts: u64,
    /// Pages the compressor occupies ("Pages occupied by compressor").
    pub compressor_page_count: u64,
    pub throttled_count: u64,
    /// File-backed pages ("File-backed pages").
    pub external_page_count: u64,
    /// Anonymous pages ("Anonymous pages").
    pub internal_page_count: u64,
    /// Pages stored in the compressor, uncompressed size.
    pub total_uncompressed_pages_in_compressor: u64,
}

/// Word index of each REV1 field; 64-bit fields take two words. The layout
/// is the C struct's: natural_t (u32) and uint64_t members, 4-byte packed
/// words, `__attribute__((aligned(8)))` on the whole.
pub(crate) mod word {
    pub const FREE: usize = 0;
    pub const ACTIVE: usize = 1;
    pub const INACTIVE: usize = 2;
    pub const WIRE: usize = 3;
    pub const ZERO_FILL: usize = 4;
    pub const REACTIVATIONS: usize = 6;
    pub const PAGEINS: usize = 8;
    pub const PAGEOUTS: usize = 10;
    pub const FAULTS: usize = 12;
    pub const COW_FAULTS: usize = 14;
    pub const LOOKUPS: usize = 16;
    pub const HITS: usize = 18;
    pub const PURGES: usize = 20;
    pub const PURGEABLE: usize = 22;
    pub const SPECULATIVE: usize = 23;
    pub const DECOMPRESSIONS: usize = 24;
    pub const COMPRESSIONS: usize = 26;
    pub const SWAPINS: usize = 28;
    pub const SWAPOUTS: usize = 30;
    pub const COMPRESSOR: usize = 32;
    pub const THROTTLED: usize = 33;
    pub const EXTERNAL: usize = 34;
    pub const INTERNAL: usize = 35;
    pub const UNCOMPRESSED: usize = 36;
}

impl VmStatistics {
    /// Decode the REV1 prefix of the words the kernel filled. `None` if
    /// fewer than [`REV1_COUNT`] words are given. Words past the prefix
    /// (macOS 26 and later) are ignored.
    pub fn from_words(words: &[u32]) -> Option<Self> {
        if words.len() < REV1_COUNT as usize {
            return None;
        }
        let w32 = |i: usize| u64::from(words[i]);
        // A uint64_t member spans two words in memory order; rebuilding it
        // from the words' native bytes is right on either endianness.
        let w64 = |i: usize| {
            let (lo, hi) = (words[i].to_ne_bytes(), words[i + 1].to_ne_bytes());
            u64::from_ne_bytes([lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]])
        };
        Some(Self {
            free_count: w32(word::FREE),
            active_count: w32(word::ACTIVE),
            inactive_count: w32(word::INACTIVE),
            wire_count: w32(word::WIRE),
            zero_fill_count: w64(word::ZERO_FILL),
            reactivations: w64(word::REACTIVATIONS),
            pageins: w64(word::PAGEINS),
            pageouts: w64(word::PAGEOUTS),
            faults: w64(word::FAULTS),
            cow_faults: w64(word::COW_FAULTS),
            lookups: w64(word::LOOKUPS),
            hits: w64(word::HITS),
            purges: w64(word::PURGES),
            purgeable_count: w32(word::PURGEABLE),
            speculative_count: w32(word::SPECULATIVE),
            decompressions: w64(word::DECOMPRESSIONS),
            compressions: w64(word::COMPRESSIONS),
            swapins: w64(word::SWAPINS),
            swapouts: w64(word::SWAPOUTS),
            compressor_page_count: w32(word::COMPRESSOR),
            throttled_count: w32(word::THROTTLED),
            external_page_count: w32(word::EXTERNAL),
            internal_page_count: w32(word::INTERNAL),
            total_uncompressed_pages_in_compressor: w64(word::UNCOMPRESSED),
        })
    }
}

/// What to do after one `host_statistics64` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Success: this many words were filled (at least [`REV1_COUNT`]).
    Accept(u32),
    /// The kernel wants a larger count that fits the buffer: call again
    /// with it.
    Retry(u32),
    /// Give up for this sample, with the reason.
    Fail(VmInfoError),
}

/// Why `host_statistics64` gave nothing usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VmInfoError {
    #[error(
        "host_statistics64 returned {count} words, fewer than the {REV1_COUNT} of vm_statistics64 REV1"
    )]
    TooShort { count: u32 },
    #[error(
        "host_statistics64 wants {wanted} words (MIG_ARRAY_TOO_LARGE) but the buffer holds {capacity}; this macOS grew vm_statistics64 past what headroom reserves"
    )]
    TooLarge { wanted: u32, capacity: u32 },
    #[error("host_statistics64 failed with kern_return_t {0}")]
    Kernel(i32),
}

/// Decide what follows a call that passed `asked` words and got `kr` back
/// with `count_out` in the count. `capacity` is the buffer's size in words;
/// `retried` says whether this call was already the retry.
pub fn after_call(kr: i32, count_out: u32, asked: u32, capacity: u32, retried: bool) -> Step {
    match kr {
        KERN_SUCCESS if count_out >= REV1_COUNT && count_out <= asked.min(capacity) => {
            Step::Accept(count_out)
        }
        KERN_SUCCESS => Step::Fail(VmInfoError::TooShort { count: count_out }),
        MIG_ARRAY_TOO_LARGE if count_out > capacity => Step::Fail(VmInfoError::TooLarge {
            wanted: count_out,
            capacity,
        }),
        // Retry once, and only with a count that changes the question.
        MIG_ARRAY_TOO_LARGE if !retried && count_out >= REV1_COUNT && count_out != asked => {
            Step::Retry(count_out)
        }
        other => Step::Fail(VmInfoError::Kernel(other)),
    }
}

/// Bytes of `pages` pages, saturating.
fn bytes(pages: u64, page_size: u64) -> u64 {
    pages.saturating_mul(page_size)
}

/// System memory from the VM statistics, the kernel page size and
/// `hw.memsize` (`total`).
///
/// - app = internal − purgeable; wired = wire; compressed = pages occupied
///   by the compressor; used = app + wired + compressed; free = free −
///   speculative: exactly sysinfo's `used` and `free`
///   (`src/unix/apple/system.rs`). cached = external + purgeable, which
///   sysinfo does not report, is exelban/stats' "cache"
///   (`Modules/RAM/readers.swift`). stats computes app and used otherwise
///   (used = active + inactive + speculative + wired + compressed −
///   purgeable − external, app = used − wired − compressed, free = total −
///   used), so its app, used and free differ from these. Activity Monitor's
///   own formulas are not published.
/// - available = what can be handed to new allocations without compressing
///   or swapping anything: free + file-backed + purgeable pages, and never
///   more than total − used. This is the meaning Linux gives
///   `MemAvailable`, so `available_below = "10%"` says the same thing on
///   both. It is the pool that jetsam watches on kernels built with
///   `CONFIG_JETSAM` (file-backed, free, secluded-over-target and
///   purgeable, `VM_CHECK_MEMORYSTATUS` in `osfmk/vm/vm_page.h`,
///   `doc/vm/memorystatus_notify.md`), but macOS is not one of them: its
///   kernel configurations (`config/MASTER.x86_64`,
///   `config/MASTER.arm64.MacOSX`, xnu-8792.41.9 to xnu-11417.121.6) have
///   `memorystatus` without `jetsam`, and there
///   `memorystatus_available_pages` is `AVAILABLE_NON_COMPRESSED_MEMORY`
///   (active + inactive + free + speculative: `vm_pressure_response` in
///   `osfmk/vm/vm_pageout.c` up to xnu-11215, `VM_CHECK_MEMORYSTATUS`'s
///   macOS branch in `osfmk/vm/vm_page.h` in xnu-11417), the figure a
///   macOS jetsam line prints and `kern.memorystatus_level` is a percentage
///   of. This function deliberately does NOT report that quantity: it
///   counts app memory in use as available and rarely falls under 10 %
///   even while the machine compresses and swaps (an M4 Pro with 6.2 GiB
///   compressed still showed 57 % by that measure). It drives the kernel's
///   pressure level instead ([`kernel_pressure_level`]).
/// - free = free_count − speculative, `vm_stat`'s "Pages free".
///
/// `free_count` already includes speculative pages (see
/// [`VmStatistics::free_count`]); whether the kernel also counts them as
/// file-backed is not documented, which is one reason for the total − used
/// bound. `used` and `available` are capped at `total`.
pub fn system_memory(vm: &VmStatistics, page_size: u64, total: u64) -> SystemMemory {
    let app = bytes(
        vm.internal_page_count.saturating_sub(vm.purgeable_count),
        page_size,
    );
    let wired = bytes(vm.wire_count, page_size);
    let compressed = bytes(vm.compressor_page_count, page_size);
    let used = app.saturating_add(wired).saturating_add(compressed);
    let cached = bytes(
        vm.external_page_count.saturating_add(vm.purgeable_count),
        page_size,
    );
    let reclaimable = bytes(
        vm.free_count
            .saturating_add(vm.external_page_count)
            .saturating_add(vm.purgeable_count),
        page_size,
    );
    let available = reclaimable.min(total.saturating_sub(used));
    let free = bytes(
        vm.free_count.saturating_sub(vm.speculative_count),
        page_size,
    );
    SystemMemory {
        total,
        available: available.min(total),
        used: used.min(total),
        free: free.min(total),
        app: Some(app),
        wired: Some(wired),
        compressed: Some(compressed),
        cached: Some(cached),
        shmem: None,
        gpu_wired_limit: None,
    }
}

/// The pressure level the kernel itself would report from these counts,
/// for when `kern.memorystatus_vm_pressure_level` cannot be read. XNU
/// compares `AVAILABLE_NON_COMPRESSED_MEMORY` (active + inactive + free +
/// speculative) with `AVAILABLE_MEMORY` (that plus the compressed pages),
/// per `doc/vm/memorystatus_notify.md`: warning below
/// `VM_PAGE_COMPRESSOR_COMPACT_THRESHOLD` (0.5 × available memory), critical
/// below 1.2 × `VM_PAGE_COMPRESSOR_SWAP_UNTHROTTLE_THRESHOLD` (1.2 × 0.29 on
/// macOS = 0.348). The kernel's falling thresholds (1.2× and 1.4× those) are
/// a hysteresis this stateless reading does not have: it drops back at the
/// rising threshold.
pub fn kernel_pressure_level(vm: &VmStatistics) -> PressureLevel {
    // free_count already includes speculative pages.
    let non_compressed =
        u128::from(vm.active_count) + u128::from(vm.inactive_count) + u128::from(vm.free_count);
    let available_memory = non_compressed + u128::from(vm.compressor_page_count);
    if available_memory == 0 {
        return PressureLevel::Normal;
    }
    if non_compressed * 1000 < available_memory * 348 {
        PressureLevel::Critical
    } else if non_compressed * 2 < available_memory {
        PressureLevel::Warn
    } else {
        PressureLevel::Normal
    }
}

/// `struct xsw_usage` (`bsd/sys/sysctl.h`), the answer to `vm.swapusage`.
/// Sizes in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XswUsage {
    pub total: u64,
    pub avail: u64,
    pub used: u64,
    pub page_size: u32,
    pub encrypted: bool,
}

/// Bytes in a `struct xsw_usage`: three `u64`, a `u32` page size and a
/// `boolean_t` (int).
pub const XSW_USAGE_SIZE: usize = 32;

impl XswUsage {
    /// Decode the bytes `sysctl vm.swapusage` wrote: `xsu_total`,
    /// `xsu_avail`, `xsu_used`, `xsu_pagesize`, `xsu_encrypted`, native
    /// endian. `None` unless exactly [`XSW_USAGE_SIZE`] bytes were written.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let b: &[u8; XSW_USAGE_SIZE] = b.try_into().ok()?;
        let u64_at = |i: usize| {
            u64::from_ne_bytes([
                b[i],
                b[i + 1],
                b[i + 2],
                b[i + 3],
                b[i + 4],
                b[i + 5],
                b[i + 6],
                b[i + 7],
            ])
        };
        Some(Self {
            total: u64_at(0),
            avail: u64_at(8),
            used: u64_at(16),
            page_size: u32::from_ne_bytes([b[24], b[25], b[26], b[27]]),
            encrypted: i32::from_ne_bytes([b[28], b[29], b[30], b[31]]) != 0,
        })
    }
}

/// Swap from `vm.swapusage` and the VM statistics' swap-in/out counters
/// (pages, `vm_statistics.h`: "# of pages swapped in (via compression
/// segments)"). Without `xsw_usage` (the sysctl failed) the sizes are 0
/// and the counters are still reported. `used` is capped at `total`.
pub fn swap(xsw: Option<&XswUsage>, vm: &VmStatistics, page_size: u64) -> Swap {
    let (total, used) = xsw.map_or((0, 0), |x| (x.total, x.used.min(x.total)));
    Swap {
        total,
        used,
        swapped_in_bytes: Some(bytes(vm.swapins, page_size)),
        swapped_out_bytes: Some(bytes(vm.swapouts, page_size)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Lay out a REV1 struct as the kernel would, the inverse of
    /// `from_words`, to feed values read off `vm_stat` to the decoder.
    fn to_words(v: &VmStatistics) -> Vec<u32> {
        let mut w = vec![0u32; REV1_COUNT as usize];
        let put32 = |w: &mut Vec<u32>, i: usize, x: u64| w[i] = u32::try_from(x).unwrap();
        let put64 = |w: &mut Vec<u32>, i: usize, x: u64| {
            let b = x.to_ne_bytes();
            w[i] = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            w[i + 1] = u32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
        };
        put32(&mut w, word::FREE, v.free_count);
        put32(&mut w, word::ACTIVE, v.active_count);
        put32(&mut w, word::INACTIVE, v.inactive_count);
        put32(&mut w, word::WIRE, v.wire_count);
        put64(&mut w, word::ZERO_FILL, v.zero_fill_count);
        put64(&mut w, word::REACTIVATIONS, v.reactivations);
        put64(&mut w, word::PAGEINS, v.pageins);
        put64(&mut w, word::PAGEOUTS, v.pageouts);
        put64(&mut w, word::FAULTS, v.faults);
        put64(&mut w, word::COW_FAULTS, v.cow_faults);
        put64(&mut w, word::LOOKUPS, v.lookups);
        put64(&mut w, word::HITS, v.hits);
        put64(&mut w, word::PURGES, v.purges);
        put32(&mut w, word::PURGEABLE, v.purgeable_count);
        put32(&mut w, word::SPECULATIVE, v.speculative_count);
        put64(&mut w, word::DECOMPRESSIONS, v.decompressions);
        put64(&mut w, word::COMPRESSIONS, v.compressions);
        put64(&mut w, word::SWAPINS, v.swapins);
        put64(&mut w, word::SWAPOUTS, v.swapouts);
        put32(&mut w, word::COMPRESSOR, v.compressor_page_count);
        put32(&mut w, word::THROTTLED, v.throttled_count);
        put32(&mut w, word::EXTERNAL, v.external_page_count);
        put32(&mut w, word::INTERNAL, v.internal_page_count);
        put64(
            &mut w,
            word::UNCOMPRESSED,
            v.total_uncompressed_pages_in_compressor,
        );
        w
    }

    /// `vm_stat` as run as root on an Intel Mac (page size 4096), posted in
    /// wazuh/wazuh#22113. `vm_stat` prints free_count − speculative_count as
    /// "Pages free" (system_cmds vm_stat.c), so free_count is the sum of the
    /// two lines. `vm_stat` does not print lookups and hits.
    fn intel_wazuh() -> VmStatistics {
        VmStatistics {
            free_count: 6_127_229 + 430_715,
            active_count: 485_320,
            inactive_count: 628_646,
            speculative_count: 430_715,
            throttled_count: 0,
            wire_count: 715_958,
            purgeable_count: 11_820,
            faults: 11_477_162,
            cow_faults: 356_264,
            zero_fill_count: 7_628_050,
            reactivations: 9_561,
            purges: 1_423,
            external_page_count: 1_080_348,
            internal_page_count: 464_333,
            total_uncompressed_pages_in_compressor: 0,
            compressor_page_count: 0,
            decompressions: 0,
            compressions: 0,
            pageins: 280_307,
            pageouts: 0,
            swapins: 0,
            swapouts: 0,
            lookups: 0,
            hits: 0,
        }
    }

    /// The raw struct fields printed by a C program on an M4 Pro with 24 GB
    /// under macOS 15.7.9 (count returned: 38), posted in
    /// PlummersSoftwareLLC/tmog-feedback#193. Only these five were printed;
    /// the rest stay 0 and the test asserts only what they determine.
    fn m4_pro_tmog() -> VmStatistics {
        VmStatistics {
            free_count: 13_573,
            active_count: 444_474,
            inactive_count: 437_999,
            wire_count: 225_232,
            compressor_page_count: 409_180,
            ..VmStatistics::default()
        }
    }

    #[test]
    fn rev1_words_decode_at_the_documented_offsets() {
        // A distinct value in every field, so a swapped offset shows.
        let v = VmStatistics {
            free_count: 1,
            active_count: 2,
            inactive_count: 3,
            wire_count: 4,
            zero_fill_count: 5 << 32 | 5,
            reactivations: 6,
            pageins: 7,
            pageouts: 8,
            faults: 9,
            cow_faults: 10,
            lookups: 11,
            hits: 12,
            purges: 13,
            purgeable_count: 14,
            speculative_count: 15,
            decompressions: 16,
            compressions: 17,
            swapins: 18,
            swapouts: 19,
            compressor_page_count: 20,
            throttled_count: 21,
            external_page_count: 22,
            internal_page_count: 23,
            total_uncompressed_pages_in_compressor: 24 << 40,
        };
        let words = to_words(&v);
        assert_eq!(words.len(), 38);
        assert_eq!(VmStatistics::from_words(&words), Some(v));
        // Spot-check the raw layout against vm_statistics.h: purgeable is
        // the 23rd word, internal the 36th, the last u64 ends the struct.
        assert_eq!(words[22], 14);
        assert_eq!(words[35], 23);
    }

    #[test]
    fn words_past_rev1_are_ignored_and_short_buffers_rejected() {
        let v = intel_wazuh();
        let mut words = to_words(&v);
        // macOS 26 appends swapped_count (and more in 27); garbage there
        // must not matter.
        words.extend([0xdead_beef; 66]);
        assert_eq!(VmStatistics::from_words(&words), Some(v));
        assert_eq!(VmStatistics::from_words(&words[..37]), None);
        assert_eq!(VmStatistics::from_words(&[]), None);
    }

    #[test]
    fn intel_vm_stat_gives_activity_monitor_figures() {
        let page = 4096;
        // The wazuh report gives no hw.memsize; the page counts add up to 32 GiB
        // (8 387 868 of 8 388 608 pages), so that is the total used here.
        let total = 32 << 30;
        let m = system_memory(&intel_wazuh(), page, total);
        let app = (464_333 - 11_820) * page;
        let wired = 715_958 * page;
        assert_eq!(m.app, Some(app));
        assert_eq!(m.wired, Some(wired));
        assert_eq!(m.compressed, Some(0));
        assert_eq!(m.used, app + wired);
        assert_eq!(m.cached, Some((1_080_348 + 11_820) * page));
        // free (speculative included) + file-backed + purgeable: 29.2 GiB,
        // more than the 27.5 GiB that app, wired and compressed leave, so
        // the bound holds it to total − used.
        let reclaimable = (6_127_229 + 430_715 + 1_080_348 + 11_820) * page;
        assert!(reclaimable > total - m.used);
        assert_eq!(m.available, total - m.used);
        assert_eq!(m.free, 6_127_229 * page);
        assert_eq!(m.total, total);
        assert_eq!(m.shmem, None);
        // Roughly 1.8 GiB of apps and 2.7 GiB wired on an idle 32 GiB Mac.
        assert!(m.used > 4 << 30 && m.used < 5 << 30, "{}", m.used);
    }

    #[test]
    fn apple_silicon_counts_use_16k_pages() {
        let page = 16_384;
        let m = system_memory(&m4_pro_tmog(), page, 24 << 30);
        assert_eq!(m.wired, Some(225_232 * page));
        assert_eq!(m.compressed, Some(409_180 * page));
        // 6.2 GiB compressed, 3.4 GiB wired: the figures jetsam cannot
        // simply drop.
        assert!(m.compressed.unwrap() > 6 << 30);
    }

    #[test]
    fn breakdown_saturates_instead_of_wrapping() {
        let odd = VmStatistics {
            // More purgeable than anonymous pages (the counters are read
            // without a lock and can disagree for an instant).
            internal_page_count: 10,
            purgeable_count: 20,
            speculative_count: 50,
            free_count: 40,
            wire_count: u64::from(u32::MAX),
            ..VmStatistics::default()
        };
        let m = system_memory(&odd, u64::MAX, 1 << 30);
        assert_eq!(m.app, Some(0));
        assert_eq!(m.free, 0);
        assert_eq!(m.wired, Some(u64::MAX));
        assert_eq!(m.used, 1 << 30, "capped at the total");
        assert_eq!(m.available, 0, "nothing is left when used fills the total");
    }

    #[test]
    fn available_is_free_file_backed_and_purgeable_within_what_is_unused() {
        let page = 16_384;
        let total = 1000 * page;
        let vm = VmStatistics {
            free_count: 50,
            external_page_count: 30,
            purgeable_count: 20,
            internal_page_count: 600,
            wire_count: 200,
            compressor_page_count: 100,
            // App memory the kernel calls active: not available.
            active_count: 500,
            inactive_count: 100,
            ..VmStatistics::default()
        };
        let m = system_memory(&vm, page, total);
        assert_eq!(m.available, (50 + 30 + 20) * page);
        // The same counts with app memory grown by 50 pages: used reaches
        // 930 pages, and only 70 are left whatever the counters say.
        let grown = VmStatistics {
            internal_page_count: 650,
            ..vm
        };
        let m = system_memory(&grown, page, total);
        assert_eq!(m.available, 70 * page);
    }

    #[test]
    fn the_m4_pro_capture_is_normal_by_the_kernels_rule() {
        // 13.7 GiB not compressed against 6.2 GiB compressed: 69 % of the
        // kernel's available memory is uncompressed, above the 50 % warning.
        assert_eq!(kernel_pressure_level(&m4_pro_tmog()), PressureLevel::Normal);
    }

    #[test]
    fn the_kernels_rule_warns_at_half_and_is_critical_at_0_348() {
        let level = |non_compressed: u64, compressed: u64| {
            kernel_pressure_level(&VmStatistics {
                active_count: non_compressed,
                compressor_page_count: compressed,
                ..VmStatistics::default()
            })
        };
        assert_eq!(level(500, 500), PressureLevel::Normal);
        assert_eq!(level(499, 501), PressureLevel::Warn);
        assert_eq!(level(348, 652), PressureLevel::Warn);
        assert_eq!(level(347, 653), PressureLevel::Critical);
        assert_eq!(level(0, 0), PressureLevel::Normal);
        assert_eq!(level(u64::MAX, u64::MAX), PressureLevel::Normal);
    }

    #[test]
    fn a_success_with_at_least_rev1_words_is_accepted() {
        // macOS 15 answers 38 to a request for 38 (tmog#193).
        assert_eq!(after_call(0, 38, 38, 256, false), Step::Accept(38));
        // macOS 15 answers 38 to a request for 62 (the same report).
        assert_eq!(after_call(0, 38, 62, 256, false), Step::Accept(38));
        assert_eq!(after_call(0, 62, 62, 256, true), Step::Accept(62));
    }

    #[test]
    fn a_success_with_fewer_words_than_rev1_is_refused() {
        assert_eq!(
            after_call(0, 30, 38, 256, false),
            Step::Fail(VmInfoError::TooShort { count: 30 })
        );
        // A count larger than what was asked cannot have been filled.
        assert_eq!(
            after_call(0, 300, 38, 256, false),
            Step::Fail(VmInfoError::TooShort { count: 300 })
        );
    }

    #[test]
    fn mig_array_too_large_retries_once_with_the_kernels_count() {
        // macOS 27 beta: 38 asked, -307 with the larger count (omlx#1749).
        assert_eq!(
            after_call(MIG_ARRAY_TOO_LARGE, 104, 38, 256, false),
            Step::Retry(104)
        );
        // The retry failing the same way is the end of it.
        assert_eq!(
            after_call(MIG_ARRAY_TOO_LARGE, 104, 104, 256, true),
            Step::Fail(VmInfoError::Kernel(MIG_ARRAY_TOO_LARGE))
        );
        // A count beyond the buffer is never passed to the kernel.
        assert_eq!(
            after_call(MIG_ARRAY_TOO_LARGE, 300, 38, 256, false),
            Step::Fail(VmInfoError::TooLarge {
                wanted: 300,
                capacity: 256
            })
        );
        // Nor is a count below REV1.
        assert_eq!(
            after_call(MIG_ARRAY_TOO_LARGE, 12, 38, 256, false),
            Step::Fail(VmInfoError::Kernel(MIG_ARRAY_TOO_LARGE))
        );
    }

    #[test]
    fn other_kernel_errors_fail_with_their_code() {
        // KERN_INVALID_ARGUMENT
        assert_eq!(
            after_call(4, 0, 38, 256, false),
            Step::Fail(VmInfoError::Kernel(4))
        );
        let msg = VmInfoError::TooLarge {
            wanted: 300,
            capacity: 256,
        }
        .to_string();
        assert!(msg.contains("300") && msg.contains("256"), "{msg}");
    }

    #[test]
    fn swapusage_from_sysctl_and_counters_from_vm_stats() {
        // `sysctl vm.swapusage` printed "total = 4096.00M  used = 2743.50M
        // free = 1352.50M  (encrypted)" in walles/px#80; sysctl divides the
        // xsw_usage byte counts by 1 MiB, so these are the struct's values.
        let xsw = XswUsage {
            total: 4096 * MIB,
            used: 2743 * MIB + MIB / 2,
            avail: 1352 * MIB + MIB / 2,
            page_size: 4096,
            encrypted: true,
        };
        let vm = VmStatistics {
            swapins: 1_000,
            swapouts: 2_500,
            ..VmStatistics::default()
        };
        let s = swap(Some(&xsw), &vm, 16_384);
        assert_eq!(s.total, 4096 * MIB);
        assert_eq!(s.used, 2743 * MIB + MIB / 2);
        assert_eq!(s.swapped_in_bytes, Some(1_000 * 16_384));
        assert_eq!(s.swapped_out_bytes, Some(2_500 * 16_384));
    }

    #[test]
    fn xsw_usage_decodes_from_the_sysctls_bytes() {
        let mut b = Vec::new();
        b.extend_from_slice(&(2048 * MIB).to_ne_bytes()); // total
        b.extend_from_slice(&(1536 * MIB).to_ne_bytes()); // avail
        b.extend_from_slice(&(512 * MIB).to_ne_bytes()); // used
        b.extend_from_slice(&16_384u32.to_ne_bytes());
        b.extend_from_slice(&1i32.to_ne_bytes());
        let x = XswUsage::from_bytes(&b).unwrap();
        assert_eq!(
            x,
            XswUsage {
                total: 2048 * MIB,
                avail: 1536 * MIB,
                used: 512 * MIB,
                page_size: 16_384,
                encrypted: true
            }
        );
        assert_eq!(XswUsage::from_bytes(&b[..31]), None);
        assert_eq!(XswUsage::from_bytes(&[]), None);
    }

    #[test]
    fn no_swap_file_and_an_unreadable_sysctl_read_as_zero_sizes() {
        // "total = 0.00M  used = 0.00M  free = 0.00M  (encrypted)" is what
        // a Mac with no swap file yet prints.
        let vm = VmStatistics::default();
        let none = XswUsage {
            encrypted: true,
            ..XswUsage::default()
        };
        assert_eq!(swap(Some(&none), &vm, 4096).total, 0);
        let s = swap(None, &vm, 4096);
        assert_eq!((s.total, s.used), (0, 0));
        assert_eq!(s.swapped_in_bytes, Some(0));
        // used beyond total (a torn read) is capped.
        let torn = XswUsage {
            total: MIB,
            used: 2 * MIB,
            ..XswUsage::default()
        };
        assert_eq!(swap(Some(&torn), &vm, 4096).used, MIB);
    }
}
