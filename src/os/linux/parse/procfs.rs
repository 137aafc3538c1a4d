//! Pure parsers for the `/proc` files the Linux sampler reads.
//!
//! Every function here takes the bytes (or text) of one file and returns
//! plain values; none of them touches the file system, so each is unit-tested
//! against captured real content and against truncated or garbage input. None
//! of them panics: malformed input gives `None` or `Err`.
//!
//! Units are converted to bytes here, once: `kB` in `meminfo` and `status`
//! means KiB (proc(5): "the kernel uses kB to mean 1024 bytes"). Files counted
//! in pages (`statm`, `vmstat`) are returned in pages; the caller multiplies by
//! the page size it got from `sysconf`.
//!
//! References: proc(5); the kernel's `Documentation/filesystems/proc.rst` and
//! `Documentation/accounting/psi.rst`.

use crate::model::{ARGV_MAX_BYTES, ArgvCap, PressureLevel, Psi, PsiLine, Swap, SystemMemory};

/// Bytes in the `kB` unit of `/proc/meminfo` and `/proc/[pid]/status`.
const KIB: u64 = 1024;

/// `PF_KTHREAD` in the `flags` field of `/proc/[pid]/stat`
/// (`include/linux/sched.h`): the task is a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;

/// `PF_FORKNOEXEC` in the same field: the task was forked and has not
/// called `exec` since, so it still shares its parent's anonymous pages
/// copy-on-write (a `multiprocessing` fork worker, a `DataLoader` worker).
pub const PF_FORKNOEXEC: u64 = 0x0000_0040;

// --- numbers --------------------------------------------------------------

/// A non-empty run of ASCII digits as `u64`; `None` on anything else or on
/// overflow.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(n)
}

/// A `/proc` directory entry name as a pid: digits only, fits in `u32`.
pub fn parse_pid(name: &[u8]) -> Option<u32> {
    parse_u64(name).and_then(|n| u32::try_from(n).ok())
}

/// The value of a `Key:   1234 kB` line (the part after the colon), in
/// bytes. The unit is required, so a line cut short is rejected rather than
/// read as a smaller number.
fn parse_kb_value(rest: &[u8]) -> Option<u64> {
    let mut words = rest
        .split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    let n = parse_u64(words.next()?)?;
    match (words.next(), words.next()) {
        (Some(b"kB"), None) => Some(n.saturating_mul(KIB)),
        _ => None,
    }
}

// --- /proc/meminfo --------------------------------------------------------

/// The `/proc/meminfo` fields the sampler uses, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meminfo {
    pub total: u64,
    pub free: u64,
    pub available: u64,
    pub buffers: Option<u64>,
    pub cached: Option<u64>,
    pub shmem: Option<u64>,
    pub anon_pages: Option<u64>,
    pub unevictable: Option<u64>,
    /// Only with `CONFIG_ZSWAP`.
    pub zswap: Option<u64>,
    pub swap_total: Option<u64>,
    pub swap_free: Option<u64>,
}

/// Parse `/proc/meminfo`. `MemTotal`, `MemFree` and `MemAvailable` (Linux ≥
/// 3.14) are required; the error names the first one missing or malformed.
pub fn parse_meminfo(text: &str) -> Result<Meminfo, String> {
    let mut total = None;
    let mut free = None;
    let mut available = None;
    let mut m = Meminfo::default();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let slot = match key {
            "MemTotal" => &mut total,
            "MemFree" => &mut free,
            "MemAvailable" => &mut available,
            "Buffers" => &mut m.buffers,
            "Cached" => &mut m.cached,
            "Shmem" => &mut m.shmem,
            "AnonPages" => &mut m.anon_pages,
            "Unevictable" => &mut m.unevictable,
            "Zswap" => &mut m.zswap,
            "SwapTotal" => &mut m.swap_total,
            "SwapFree" => &mut m.swap_free,
            _ => continue,
        };
        match parse_kb_value(rest.as_bytes()) {
            Some(v) => *slot = Some(v),
            None => return Err(format!("malformed line {line:?}")),
        }
    }
    m.total = total.ok_or("no MemTotal line")?;
    m.free = free.ok_or("no MemFree line")?;
    m.available = available.ok_or("no MemAvailable line")?;
    Ok(m)
}

/// System memory from `/proc/meminfo`, with the formulas of `free(1)` and
/// `Documentation/filesystems/proc.rst`.
pub fn system_memory(m: &Meminfo) -> SystemMemory {
    // Cached includes Shmem (tmpfs pages live in the page cache, proc.rst
    // "Shmem"), which cannot be dropped like file cache, so take it out:
    // cached = Cached + Buffers − Shmem, as procps' free(1) computes buff/cache
    // less shared.
    let cached = match (m.cached, m.buffers) {
        (None, None) => None,
        (c, b) => Some(
            c.unwrap_or(0)
                .saturating_add(b.unwrap_or(0))
                .saturating_sub(m.shmem.unwrap_or(0)),
        ),
    };
    SystemMemory {
        total: m.total,
        available: m.available,
        // used = MemTotal − MemAvailable: what cannot be handed out without
        // swapping (proc.rst "MemAvailable").
        used: m.total.saturating_sub(m.available),
        free: m.free,
        app: m.anon_pages,
        wired: m.unevictable,
        // Zswap's pool; the line is there even where zswap is off (the
        // default), so an empty pool is taken as no compression at all.
        compressed: m.zswap.filter(|&bytes| bytes > 0),
        cached,
        shmem: m.shmem,
        gpu_wired_limit: None,
    }
}

// --- /proc/vmstat ---------------------------------------------------------

/// Swap paging counters from `/proc/vmstat`, in pages since boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmstatSwap {
    pub pswpin: Option<u64>,
    pub pswpout: Option<u64>,
}

/// Parse the `pswpin` / `pswpout` lines of `/proc/vmstat`. Missing or
/// malformed lines are `None`.
pub fn parse_vmstat(text: &str) -> VmstatSwap {
    let mut v = VmstatSwap::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        match key {
            "pswpin" => v.pswpin = parse_u64(value.trim().as_bytes()),
            "pswpout" => v.pswpout = parse_u64(value.trim().as_bytes()),
            _ => continue,
        }
        if v.pswpin.is_some() && v.pswpout.is_some() {
            break;
        }
    }
    v
}

/// Swap figures from `/proc/meminfo` and `/proc/vmstat`.
pub fn swap(m: &Meminfo, vm: &VmstatSwap, page_size: u64) -> Swap {
    let total = m.swap_total.unwrap_or(0);
    Swap {
        total,
        // used = SwapTotal − SwapFree, as free(1) reports it. SwapCached
        // (pages both in RAM and in swap) is not subtracted: its swap slots
        // are still taken and the space is not free for new swap-outs.
        used: total.saturating_sub(m.swap_free.unwrap_or(0)),
        // pswpin/pswpout count pages (mm/vmstat.c, one per swapped page).
        swapped_in_bytes: vm.pswpin.map(|p| p.saturating_mul(page_size)),
        swapped_out_bytes: vm.pswpout.map(|p| p.saturating_mul(page_size)),
    }
}

// --- /proc/pressure/memory ------------------------------------------------

/// One `some …` / `full …` line: `avg10=0.00 avg60=0.00 avg300=0.00 total=0`.
fn parse_psi_line(rest: &str) -> Option<PsiLine> {
    let mut line = PsiLine::default();
    let (mut a10, mut a60, mut a300, mut tot) = (false, false, false, false);
    for field in rest.split_ascii_whitespace() {
        let (key, value) = field.split_once('=')?;
        match key {
            "avg10" => (line.avg10, a10) = (parse_percent(value)?, true),
            "avg60" => (line.avg60, a60) = (parse_percent(value)?, true),
            "avg300" => (line.avg300, a300) = (parse_percent(value)?, true),
            "total" => (line.total_micros, tot) = (parse_u64(value.as_bytes())?, true),
            _ => {}
        }
    }
    (a10 && a60 && a300 && tot).then_some(line)
}

/// A PSI average: a finite percentage, 0–100.
fn parse_percent(s: &str) -> Option<f64> {
    let v: f64 = s.parse().ok()?;
    (v.is_finite() && (0.0..=100.0).contains(&v)).then_some(v)
}

/// Parse `/proc/pressure/memory` (psi.rst "Pressure interface"). The `some`
/// line is required; `full` is optional.
pub fn parse_psi(text: &str) -> Option<Psi> {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("some ") {
            some = Some(parse_psi_line(rest)?);
        } else if let Some(rest) = line.strip_prefix("full ") {
            full = Some(parse_psi_line(rest)?);
        }
    }
    Some(Psi { some: some?, full })
}

/// `full avg10` at or above this is critical: for a tenth of the last 10 s
/// every non-idle task was stalled on memory at once, i.e. the machine did
/// no work at all for a second out of ten (psi.rst: "full" means lost
/// productivity, the thrashing signal oomd and systemd-oomd act on).
pub const PSI_FULL_CRITICAL: f64 = 10.0;
/// `some avg10` at or above this is critical: some task waited on memory
/// (reclaim, refaults, swap-in) for 40 % of the last 10 s. Sustained, this is
/// a workload slowed to a crawl even if others still run.
pub const PSI_SOME_CRITICAL: f64 = 40.0;
/// `some avg10` at or above this is a warning: a tenth of wall time lost by
/// some task to memory stalls is noticeable, and usually early.
pub const PSI_SOME_WARN: f64 = 10.0;
/// Available memory below this share of total (percent) is critical: the
/// kernel is about to reclaim hard, swap or OOM-kill regardless of PSI.
pub const AVAILABLE_CRITICAL_PERCENT: u64 = 5;
/// Available memory below this share of total (percent) is a warning.
pub const AVAILABLE_WARN_PERCENT: u64 = 10;

/// The pressure level from PSI (where the kernel has it) and from the share
/// of memory still available; whichever signal is worse wins.
pub fn pressure_level(psi: Option<&Psi>, available: u64, total: u64) -> PressureLevel {
    // available / total < pct / 100, without division or overflow.
    let below =
        |pct: u64| total > 0 && u128::from(available) * 100 < u128::from(total) * u128::from(pct);
    let some10 = psi.map_or(0.0, |p| p.some.avg10);
    let full10 = psi.and_then(|p| p.full).map_or(0.0, |f| f.avg10);
    if full10 >= PSI_FULL_CRITICAL
        || some10 >= PSI_SOME_CRITICAL
        || below(AVAILABLE_CRITICAL_PERCENT)
    {
        PressureLevel::Critical
    } else if some10 >= PSI_SOME_WARN || below(AVAILABLE_WARN_PERCENT) {
        PressureLevel::Warn
    } else {
        PressureLevel::Normal
    }
}

// --- /proc/stat -----------------------------------------------------------

/// `btime` from `/proc/stat`: boot time in seconds since the Unix epoch.
pub fn parse_btime(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| parse_u64(v.trim().as_bytes()))
}

// --- /proc/loadavg ---------------------------------------------------------

/// The last field of `/proc/loadavg`: the pid most recently handed out in
/// the reader's pid namespace (processes and threads alike). While it stays
/// the same, no process was created (proc(5)).
pub fn parse_last_pid(text: &str) -> Option<u32> {
    parse_pid(text.split_ascii_whitespace().nth(4)?.as_bytes())
}

// --- /proc/[pid]/statm ----------------------------------------------------

/// `/proc/[pid]/statm`, in pages (proc(5)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Statm {
    pub size: u64,
    /// Resident set: RssAnon + RssFile + RssShmem.
    pub resident: u64,
    /// Resident shared pages: RssFile + RssShmem (proc(5), since Linux 2.6.
    /// `fs/proc/task_mmu.c` `task_statm()`).
    pub shared: u64,
    /// The executable's code, in pages: `task_statm()` computes it from
    /// `mm->start_code` and `mm->end_code`, which `load_elf_binary`
    /// (`fs/binfmt_elf.c`) sets from the executable's segments at `exec`
    /// and nothing else moves (short of `prctl(PR_SET_MM)`, which needs
    /// `CAP_SYS_RESOURCE`). 0 for a kernel thread and a process whose memory
    /// is gone (exiting, a zombie).
    pub text: u64,
}

impl Statm {
    /// Whether `now`, a later read of the same process, shows another
    /// executable's code: both reads have one ([`Statm::text`] not 0) and
    /// its size differs. Two programs whose code spans as many pages look
    /// alike here; the name in `stat` tells those apart where it is read.
    pub fn other_program(&self, now: &Statm) -> bool {
        self.text != 0 && now.text != 0 && self.text != now.text
    }

    /// Anonymous resident pages: resident − shared = RssAnon (task_statm()
    /// computes shared as file + shmem pages).
    pub fn anon(&self) -> u64 {
        self.resident.saturating_sub(self.shared)
    }
}

/// Parse `size resident shared text lib data dt`; the first four are used,
/// the rest must be present but are ignored.
pub fn parse_statm(data: &[u8]) -> Option<Statm> {
    let mut f = data
        .split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    let size = parse_u64(f.next()?)?;
    let resident = parse_u64(f.next()?)?;
    let shared = parse_u64(f.next()?)?;
    let text = parse_u64(f.next()?)?;
    // lib data dt: a truncated file is rejected.
    for _ in 0..3 {
        parse_u64(f.next()?)?;
    }
    Some(Statm {
        size,
        resident,
        shared,
        text,
    })
}

// --- /proc/[pid]/stat -----------------------------------------------------

/// The fields of `/proc/[pid]/stat` the sampler uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat<'a> {
    pub pid: u32,
    /// Field 2 without the parentheses; may contain spaces and parentheses.
    pub comm: &'a [u8],
    /// Field 3: R, S, D, Z, …
    pub state: u8,
    /// Field 4.
    pub ppid: u32,
    /// Field 9: `PF_*` flags.
    pub flags: u64,
    /// Field 10: minor faults, the faults served without I/O. A write to a
    /// page shared copy-on-write since a fork is one (`do_wp_page` in
    /// `mm/memory.c` copies it and counts `PGFAULT`/`min_flt`), so is the
    /// first touch of a new anonymous page or of a page-cache page.
    pub minflt: u64,
    /// Field 22: start time in clock ticks since boot.
    pub start_ticks: u64,
}

impl Stat<'_> {
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }

    /// Forked and not exec'd since: it shares pages with its parent.
    pub fn forked_without_exec(&self) -> bool {
        self.flags & PF_FORKNOEXEC != 0
    }
}

// --- /proc/[pid]/smaps_rollup ----------------------------------------------

/// The proportional set size of a process from `smaps_rollup`, in bytes: a
/// page mapped by n processes counts 1/n in each (proc.rst, "The
/// /proc/PID/smaps_rollup file" and "Pss").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pss {
    pub rss: u64,
    pub pss_anon: u64,
    pub pss_shmem: u64,
    pub swap_pss: u64,
}

impl Pss {
    /// The proportional counterpart of the footprint (RssAnon + RssShmem +
    /// VmSwap): Pss_Anon + Pss_Shmem + SwapPss.
    pub fn footprint(&self) -> u64 {
        self.pss_anon
            .saturating_add(self.pss_shmem)
            .saturating_add(self.swap_pss)
    }
}

/// Parse `/proc/[pid]/smaps_rollup`. `Pss_Anon` and `Pss_Shmem` (Linux
/// 5.0 on) are required: without them the anonymous share cannot be told
/// from file pages, and `None` says so. `SwapPss` is 0 where absent.
pub fn parse_smaps_rollup(data: &[u8]) -> Option<Pss> {
    let mut pss = Pss::default();
    let (mut anon, mut shmem) = (false, false);
    for line in data.split(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let (key, rest) = (&line[..colon], &line[colon + 1..]);
        let slot = match key {
            b"Rss" => &mut pss.rss,
            b"Pss_Anon" => {
                anon = true;
                &mut pss.pss_anon
            }
            b"Pss_Shmem" => {
                shmem = true;
                &mut pss.pss_shmem
            }
            b"SwapPss" => &mut pss.swap_pss,
            _ => continue,
        };
        let number = rest
            .trim_ascii()
            .strip_suffix(b"kB")
            .map(<[u8]>::trim_ascii)?;
        *slot = parse_u64(number)?.checked_mul(KIB)?;
    }
    (anon && shmem).then_some(pss)
}

/// Parse `/proc/[pid]/stat`. The command name may itself contain `)` and
/// spaces, so it ends at the LAST `)` of the line (proc(5) notes the name is
/// in parentheses; only the final one is trustworthy).
pub fn parse_stat(data: &[u8]) -> Option<Stat<'_>> {
    let open = data.iter().position(|&c| c == b'(')?;
    let close = data.iter().rposition(|&c| c == b')')?;
    if close < open {
        return None;
    }
    let pid = parse_pid(data[..open].trim_ascii())?;
    let comm = &data[open + 1..close];
    let mut f = data[close + 1..]
        .split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    // Fields from 3 on; index i here is field i + 3.
    let state = match f.next()? {
        [s] => *s,
        _ => return None,
    };
    let ppid = parse_pid(f.next()?)?;
    let flags = parse_u64(f.nth(4)?)?; // skip pgrp session tty_nr tpgid
    let minflt = parse_u64(f.next()?)?;
    let start_ticks = parse_u64(f.nth(11)?)?; // skip fields 11..=21
    // vsize (23) must follow, so a file cut inside the start time is not
    // taken for a smaller start time.
    f.next()?;
    Some(Stat {
        pid,
        comm,
        state,
        ppid,
        flags,
        minflt,
        start_ticks,
    })
}

// --- /proc/[pid]/status ---------------------------------------------------

/// The fields of `/proc/[pid]/status` the sampler uses; sizes in bytes.
/// Kernel threads and zombies have no `Vm*`/`Rss*` lines: those are `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    /// Real uid (first of the four `Uid:` values).
    pub uid: u32,
    pub vm_rss: Option<u64>,
    /// Peak resident set size ("high water mark"), not a footprint peak.
    pub vm_hwm: Option<u64>,
    pub rss_anon: Option<u64>,
    pub rss_file: Option<u64>,
    pub rss_shmem: Option<u64>,
    pub vm_swap: Option<u64>,
}

impl Status {
    /// Footprint = RssAnon + RssShmem + VmSwap: the memory this process alone
    /// holds or pushed to swap; file pages can be dropped and re-read
    /// (proc.rst, "Contents of the status fields").
    pub fn footprint(&self) -> u64 {
        self.rss_anon
            .unwrap_or(0)
            .saturating_add(self.rss_shmem.unwrap_or(0))
            .saturating_add(self.vm_swap.unwrap_or(0))
    }
}

/// Parse `/proc/[pid]/status`. `Uid:` is required; a line we use that is
/// present but malformed rejects the whole file.
pub fn parse_status(data: &[u8]) -> Option<Status> {
    let mut uid = None;
    let mut s = Status::default();
    for line in data.split(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let (key, rest) = (&line[..colon], &line[colon + 1..]);
        let slot = match key {
            b"Uid" => {
                let first = rest
                    .split(|c| c.is_ascii_whitespace())
                    .find(|w| !w.is_empty())?;
                uid = Some(parse_pid(first)?);
                continue;
            }
            b"VmHWM" => &mut s.vm_hwm,
            b"VmRSS" => &mut s.vm_rss,
            b"RssAnon" => &mut s.rss_anon,
            b"RssFile" => &mut s.rss_file,
            b"RssShmem" => &mut s.rss_shmem,
            b"VmSwap" => &mut s.vm_swap,
            _ => continue,
        };
        *slot = Some(parse_kb_value(rest)?);
        if key == b"VmSwap" {
            // Nothing the sampler uses comes after VmSwap.
            break;
        }
    }
    s.uid = uid?;
    Some(s)
}

// --- /proc/[pid]/cmdline --------------------------------------------------

/// Split `/proc/[pid]/cmdline` (arguments separated and terminated by NUL)
/// into arguments, lossy UTF-8. Tolerates a missing final NUL (a process that
/// rewrote its arguments) and an empty file (zombies, kernel threads). Empty
/// arguments inside the list are kept.
///
/// `data` is what the sampler read: at most [`CMDLINE_READ`] bytes. More than
/// [`ARGV_MAX_BYTES`] means the command line goes on: its first
/// [`ARGV_MAX_BYTES`] are kept and marked as cut (see [`ArgvCap`]), and so is
/// one of more than [`crate::model::ARGV_MAX_ARGS`] arguments.
pub fn parse_cmdline(data: &[u8]) -> Vec<String> {
    let unread = data.len() > ARGV_MAX_BYTES;
    let data = if unread {
        &data[..ARGV_MAX_BYTES]
    } else {
        data.strip_suffix(b"\0").unwrap_or(data)
    };
    if data.is_empty() {
        return Vec::new();
    }
    let mut cap = ArgvCap::new();
    for arg in data.split(|&c| c == 0) {
        cap.push(arg);
    }
    cap.finish(unread)
}

/// How much of `/proc/[pid]/cmdline` the sampler reads: one byte past what it
/// keeps, to tell a command line that fits from one that goes on.
pub const CMDLINE_READ: usize = ARGV_MAX_BYTES + 1;

// --- /proc/[pid]/maps -----------------------------------------------------

/// Basenames of the shared objects mapped in `/proc/[pid]/maps`, sorted and
/// without duplicates. A line is `address perms offset dev inode pathname`;
/// the pathname may contain spaces and ends in ` (deleted)` when the file was
/// removed. A shared object is a name ending in `.so` or containing `.so.`
/// (`libc.so.6`, `_C.cpython-311-x86_64-linux-gnu.so`).
pub fn parse_maps_libraries(data: &[u8]) -> Vec<String> {
    let mut libs = MapsLibraries::new(|_: &str| true, usize::MAX);
    libs.feed(data);
    libs.finish(true)
}

/// Longest `maps` line looked at: the fixed fields and a path of
/// `PATH_MAX` (4096) with ` (deleted)`. A longer line is skipped whole.
pub const MAPS_LINE_MAX: usize = 4096 + 256;

/// Longest basename kept: `NAME_MAX`, the longest file name a Linux file
/// system holds.
pub const MAPS_NAME_MAX: usize = 255;

/// Most `site-packages` directories kept of one process: a virtual
/// environment and the installation below it, a user site and a vendored
/// copy are as many as an interpreter has.
pub const MAPS_SITE_PACKAGES_MAX: usize = 4;

/// The shared objects of `/proc/[pid]/maps` (see [`parse_maps_libraries`]),
/// taken a chunk at a time as the file is read, so that a read may stop
/// anywhere and what it holds stays small whatever the file's size: at
/// most one line of [`MAPS_LINE_MAX`] waiting for its end, and at most
/// `max` names, each of at most [`MAPS_NAME_MAX`] bytes, that `keep`
/// accepts. A process's owner decides how many mappings it has and what
/// their files are called.
pub struct MapsLibraries<F> {
    keep: F,
    max: usize,
    names: std::collections::BTreeSet<String>,
    /// The `site-packages` directories of the names kept, at most
    /// [`MAPS_SITE_PACKAGES_MAX`].
    site_packages: std::collections::BTreeSet<String>,
    /// The start of a line whose end has not come yet.
    partial: Vec<u8>,
    /// Inside a line longer than [`MAPS_LINE_MAX`]: skip to its end.
    skipping: bool,
}

impl<F: Fn(&str) -> bool> MapsLibraries<F> {
    /// Keep the names `keep` accepts, at most `max` of them.
    pub fn new(keep: F, max: usize) -> Self {
        Self {
            keep,
            max,
            names: std::collections::BTreeSet::new(),
            site_packages: std::collections::BTreeSet::new(),
            partial: Vec::new(),
            skipping: false,
        }
    }

    /// The next bytes of the file.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        while let Some(end) = chunk.iter().position(|&c| c == b'\n') {
            let (line, rest) = (&chunk[..end], &chunk[end + 1..]);
            chunk = rest;
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            if self.partial.is_empty() {
                if line.len() <= MAPS_LINE_MAX {
                    self.line(line);
                }
            } else if self.partial.len() + line.len() <= MAPS_LINE_MAX {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(line);
                self.line(&whole);
                whole.clear();
                self.partial = whole;
            } else {
                self.partial.clear();
            }
        }
        if self.skipping {
            return;
        }
        if self.partial.len() + chunk.len() > MAPS_LINE_MAX {
            self.partial.clear();
            self.skipping = true;
        } else {
            self.partial.extend_from_slice(chunk);
        }
    }

    /// The names found, sorted and unique. `ended`: the file was read to
    /// its end, so a last line without a newline counts; a read cut short
    /// leaves its last, unfinished line out.
    pub fn finish(self, ended: bool) -> Vec<String> {
        self.finish_with_site_packages(ended).0
    }

    /// [`MapsLibraries::finish`], and the `site-packages` (or
    /// `dist-packages`) directories the names kept were mapped from, sorted
    /// (`/home/ada/venv/lib/python3.11/site-packages` for
    /// `…/site-packages/torch/lib/libtorch_cpu.so`): where the process's
    /// interpreter loads its packages from.
    pub fn finish_with_site_packages(mut self, ended: bool) -> (Vec<String>, Vec<String>) {
        if ended && !self.skipping && !self.partial.is_empty() {
            let last = std::mem::take(&mut self.partial);
            self.line(&last);
        }
        (
            self.names.into_iter().collect(),
            self.site_packages.into_iter().collect(),
        )
    }

    fn line(&mut self, line: &[u8]) {
        if self.names.len() >= self.max {
            return;
        }
        let Some(path) = maps_pathname(line) else {
            return;
        };
        let path = path.strip_suffix(b" (deleted)").unwrap_or(path);
        if path.first() != Some(&b'/') {
            return; // [heap], [stack], anonymous
        }
        let base = path.rsplit(|&c| c == b'/').next().unwrap_or(path);
        if base.len() > MAPS_NAME_MAX || !is_shared_object(base) {
            return;
        }
        let name = String::from_utf8_lossy(base);
        if !(self.keep)(&name) {
            return;
        }
        if self.site_packages.len() < MAPS_SITE_PACKAGES_MAX
            && let Ok(path) = std::str::from_utf8(path)
            && let Some(dir) = crate::workload::site_packages_dir(path)
            && !self.site_packages.contains(dir)
        {
            self.site_packages.insert(dir.to_owned());
        }
        if !self.names.contains(name.as_ref()) {
            self.names.insert(name.into_owned());
        }
    }
}

/// The pathname column of one maps line: what follows the five fixed fields.
fn maps_pathname(line: &[u8]) -> Option<&[u8]> {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_ascii_start();
        let end = rest.iter().position(|c| c.is_ascii_whitespace())?;
        rest = &rest[end..];
    }
    let path = rest.trim_ascii();
    (!path.is_empty()).then_some(path)
}

fn is_shared_object(base: &[u8]) -> bool {
    base.ends_with(b".so") || base.windows(4).any(|w| w == b".so.")
}

// --- /proc/[pid]/cgroup --------------------------------------------------

/// The longest memory-cgroup path a sample keeps, in bytes. Real paths are
/// well under it (a Kubernetes container under the systemd driver,
/// `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/cri-containerd-<64 hex>.scope`,
/// is about 200 bytes; Docker in Docker or kind nest two such paths). The
/// names in a path can be chosen by another user (a systemd user unit, a
/// delegated subtree, a container name), and the kernel lets a path reach
/// `PATH_MAX` (4096): a longer path is not kept at all, since a path cut
/// short names another cgroup, or none.
pub const CGROUP_PATH_MAX: usize = 1024;

/// One line of `/proc/[pid]/cgroup`: `hierarchy-ID:controller-list:path`
/// (cgroups(7)). A cgroup v1 hierarchy has a non-zero ID and its
/// comma-separated controllers (`4:memory:/docker/…`, `1:cpu,cpuacct:/`,
/// `9:name=systemd:/…`); the v2 hierarchy is `0::/…`. The path is relative
/// to the hierarchy's root as seen from the reading process's cgroup
/// namespace, so from inside a namespace it can begin with `/..`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLine<'a> {
    pub hierarchy: u32,
    /// Empty for the v2 hierarchy.
    pub controllers: &'a str,
    /// The raw bytes: a cgroup name is any bytes but `/` (and `\n`, which
    /// `cgroup_mkdir` refuses precisely to keep this file parsable).
    pub path: &'a [u8],
}

impl CgroupLine<'_> {
    /// The line of the v2 (unified) hierarchy.
    pub fn is_unified(&self) -> bool {
        self.hierarchy == 0 && self.controllers.is_empty()
    }

    /// A v1 hierarchy with controller `name` (`memory`, `name=systemd`)
    /// bound to it.
    pub fn has_controller(&self, name: &str) -> bool {
        self.hierarchy != 0 && self.controllers.split(',').any(|c| c == name)
    }
}

/// The well-formed lines of `/proc/[pid]/cgroup`. Only lines ended by a
/// newline count (the kernel ends every line with one), so a read cut short
/// never yields a cut path; malformed lines are skipped.
pub fn cgroup_lines(data: &[u8]) -> impl Iterator<Item = CgroupLine<'_>> {
    let complete = match data.iter().rposition(|&c| c == b'\n') {
        Some(end) => &data[..end],
        None => &data[..0],
    };
    complete
        .split(|&c| c == b'\n')
        .filter_map(parse_cgroup_line)
}

fn parse_cgroup_line(line: &[u8]) -> Option<CgroupLine<'_>> {
    let mut parts = line.splitn(3, |&c| c == b':');
    let hierarchy = u32::try_from(parse_u64(parts.next()?)?).ok()?;
    let controllers = std::str::from_utf8(parts.next()?).ok()?;
    let path = parts.next()?;
    if path.first() != Some(&b'/') {
        return None;
    }
    let line = CgroupLine {
        hierarchy,
        controllers,
        path,
    };
    // `0:` with controllers, or a v1 ID without any, is no line the
    // kernel writes.
    (line.is_unified() || (hierarchy != 0 && !controllers.is_empty())).then_some(line)
}

/// Why a process's memory-cgroup path is not known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupPathError {
    /// No line for the v1 `memory` controller and no v2 line: a kernel
    /// without cgroups, or a file that is not `/proc/[pid]/cgroup`.
    NoMemoryLine,
    /// Longer than [`CGROUP_PATH_MAX`].
    TooLong(usize),
    /// Not UTF-8: lossy text would name another cgroup.
    NotUtf8,
}

impl std::fmt::Display for CgroupPathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoMemoryLine => f.write_str("no memory controller line and no cgroup v2 line"),
            Self::TooLong(n) => write!(
                f,
                "the path is {n} bytes, over the {CGROUP_PATH_MAX} bytes kept"
            ),
            Self::NotUtf8 => f.write_str("the path is not UTF-8"),
        }
    }
}

/// The process's path in the memory-cgroup hierarchy, from
/// `/proc/[pid]/cgroup`: the line of the v1 hierarchy that has the `memory`
/// controller where one exists (the kernel lists a v1 hierarchy only while
/// it is mounted somewhere; on a hybrid host memory is accounted there, not
/// in v2), else the v2 line `0::`. Bounded by [`CGROUP_PATH_MAX`].
pub fn parse_memory_cgroup(data: &[u8]) -> Result<&str, CgroupPathError> {
    let mut unified = None;
    let mut memory = None;
    for line in cgroup_lines(data) {
        if line.has_controller("memory") {
            memory = Some(line.path);
            break;
        }
        if line.is_unified() {
            unified = Some(line.path);
        }
    }
    let path = memory.or(unified).ok_or(CgroupPathError::NoMemoryLine)?;
    if path.len() > CGROUP_PATH_MAX {
        return Err(CgroupPathError::TooLong(path.len()));
    }
    std::str::from_utf8(path).map_err(|_| CgroupPathError::NotUtf8)
}

// --- /proc/self/limits ---------------------------------------------------

/// The soft limit on open files from `/proc/[pid]/limits` (`Max open files`
/// line: soft, hard, unit); `unlimited` is `u64::MAX`.
pub fn parse_max_open_files(text: &str) -> Option<u64> {
    let rest = text
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    match rest.split_ascii_whitespace().next()? {
        "unlimited" => Some(u64::MAX),
        soft => parse_u64(soft.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // `cat /proc/self/cgroup` on this project's Linux test machine (kernel
    // 6.18, a Firecracker VM with the v1 memory controller mounted at
    // /sys/fs/cgroup/memory and cgroup v2 at /sys/fs/cgroup/unified): a
    // process of the test runner, inside a v1 memory cgroup.
    const CGROUP_HYBRID: &[u8] = b"9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n\
5:devices:/\n4:memory:/process_api/94afa55c08af25b76ab7b7d1f415db95\n3:cpuset:/\n\
2:cpuacct:/\n1:cpu:/\n0::/\n";

    #[test]
    fn the_v1_memory_line_wins_on_a_hybrid_host() {
        assert_eq!(
            parse_memory_cgroup(CGROUP_HYBRID),
            Ok("/process_api/94afa55c08af25b76ab7b7d1f415db95")
        );
        let lines: Vec<_> = cgroup_lines(CGROUP_HYBRID).collect();
        assert_eq!(lines.len(), 10);
        assert!(lines[9].is_unified());
        assert!(lines[0].has_controller("name=systemd"));
    }

    #[test]
    fn a_v2_only_host_gives_the_unified_line() {
        // The format cgroups(7) gives for a v2-only host: one `0::` line.
        let data = b"0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope\n";
        assert_eq!(
            parse_memory_cgroup(data),
            Ok("/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope")
        );
    }

    #[test]
    fn controllers_are_matched_whole_in_their_list() {
        let data = b"3:cpu,memory_fake:/a\n2:cpuacct,memory:/b\n0::/c\n";
        assert_eq!(parse_memory_cgroup(data), Ok("/b"));
        let data = b"3:cpu,memory_fake:/a\n0::/c\n";
        assert_eq!(parse_memory_cgroup(data), Ok("/c"));
    }

    #[test]
    fn a_line_cut_short_is_not_read() {
        // A read that stopped inside the memory line: its path may be cut.
        let cut = &CGROUP_HYBRID[..CGROUP_HYBRID.len() - 40];
        assert!(!cut.ends_with(b"\n"));
        assert_eq!(parse_memory_cgroup(cut), Err(CgroupPathError::NoMemoryLine));
        assert_eq!(
            parse_memory_cgroup(b"4:memory:/a"),
            Err(CgroupPathError::NoMemoryLine)
        );
    }

    #[test]
    fn hostile_or_garbage_cgroup_files_give_errors_not_panics() {
        for data in [
            &b""[..],
            b"\n",
            b"::\n",
            b"0:memory:/x\n",
            b"4::/x\n",
            b"x:memory:/a\n",
            b"99999999999:memory:/a\n",
            b"4:memory:relative\n",
            b"4:memory\n",
            b"\xff\xfe:\xff:/\n",
        ] {
            assert_eq!(
                parse_memory_cgroup(data),
                Err(CgroupPathError::NoMemoryLine),
                "{data:?}"
            );
        }
        // A colon in a name stays in the path.
        assert_eq!(parse_memory_cgroup(b"0::/a:b\n"), Ok("/a:b"));
        assert_eq!(
            parse_memory_cgroup(b"4:memory:/caf\xe9\n"),
            Err(CgroupPathError::NotUtf8)
        );
    }

    #[test]
    fn a_path_past_the_cap_is_not_kept() {
        let mut data = b"0::/".to_vec();
        data.extend(std::iter::repeat_n(b'a', CGROUP_PATH_MAX));
        data.push(b'\n');
        assert_eq!(
            parse_memory_cgroup(&data),
            Err(CgroupPathError::TooLong(CGROUP_PATH_MAX + 1))
        );
        let fits = format!("0::/{}\n", "a".repeat(CGROUP_PATH_MAX - 1));
        assert_eq!(
            parse_memory_cgroup(fits.as_bytes()).map(str::len),
            Ok(CGROUP_PATH_MAX)
        );
    }

    // Captured on this project's Linux test machine (kernel 6.18); see
    // tests/fixtures/proc/README.md.
    const MEMINFO: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/meminfo"
    ));
    const VMSTAT: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/vmstat"
    ));
    const PROC_STAT: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/stat"
    ));
    const PY_STAT: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/6441/stat"
    ));
    const FORKED_STAT: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/forked/21539/stat"
    ));
    const FORKED_ROLLUP: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/forked/21539/smaps_rollup"
    ));
    const PARENT_ROLLUP: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/forked/21463/smaps_rollup"
    ));

    #[test]
    fn a_forked_child_shows_pf_forknoexec_and_its_parent_does_not() {
        let child = parse_stat(FORKED_STAT).unwrap();
        assert!(child.forked_without_exec());
        assert_eq!(child.ppid, 21463);
        assert!(!parse_stat(PY_STAT).unwrap().forked_without_exec());
    }

    #[test]
    fn smaps_rollup_gives_the_proportional_anonymous_share() {
        let child = parse_smaps_rollup(FORKED_ROLLUP).unwrap();
        assert_eq!(child.rss, 272_104 * KIB);
        assert_eq!(child.pss_anon, 133_888 * KIB);
        assert_eq!(child.footprint(), 133_888 * KIB);
        let parent = parse_smaps_rollup(PARENT_ROLLUP).unwrap();
        assert_eq!(parent.pss_anon, 101_256 * KIB);
    }

    #[test]
    fn smaps_rollup_without_the_anonymous_share_or_cut_short_is_not_read() {
        // Before Linux 5.0 there is no Pss_Anon line.
        assert_eq!(parse_smaps_rollup(b"Rss: 10 kB\nPss: 5 kB\n"), None);
        assert_eq!(parse_smaps_rollup(b"Pss_Anon: 12"), None);
        assert_eq!(parse_smaps_rollup(b""), None);
        assert_eq!(
            parse_smaps_rollup(b"Pss_Anon: x kB\nPss_Shmem: 0 kB\n"),
            None
        );
    }
    const PY_STATUS: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/6441/status"
    ));
    const PY_STATM: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/6441/statm"
    ));
    const PY_CMDLINE: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/6441/cmdline"
    ));
    const PY_MAPS: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/6441/maps"
    ));
    const KTHREAD_STAT: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/2/stat"
    ));
    const KTHREAD_STATUS: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/2/status"
    ));
    const ODD_STAT: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/proc/basic/6445/stat"
    ));
    const MIB: u64 = 1 << 20;

    #[test]
    fn parse_u64_rejects_non_digits_and_overflow() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"12a"), None);
        assert_eq!(parse_u64(b"-1"), None);
    }

    #[test]
    fn parse_pid_takes_only_numeric_names() {
        assert_eq!(parse_pid(b"4242"), Some(4242));
        assert_eq!(parse_pid(b"self"), None);
        assert_eq!(parse_pid(b"4294967296"), None);
    }

    #[test]
    fn meminfo_from_real_file_in_bytes() {
        let m = parse_meminfo(MEMINFO).unwrap();
        assert_eq!(m.total, 24_684_096 * 1024);
        assert_eq!(m.available, 23_927_592 * 1024);
        assert_eq!(m.zswap, Some(0));
        assert_eq!(m.swap_total, Some(0));
    }

    #[test]
    fn meminfo_without_memavailable_is_an_error() {
        let err = parse_meminfo("MemTotal: 100 kB\nMemFree: 50 kB\n").unwrap_err();
        assert!(err.contains("MemAvailable"), "{err}");
    }

    #[test]
    fn meminfo_with_garbage_value_is_an_error() {
        let err = parse_meminfo("MemTotal: lots kB\n").unwrap_err();
        assert!(err.contains("MemTotal"), "{err}");
    }

    #[test]
    fn meminfo_of_garbage_is_an_error_not_a_panic() {
        assert!(parse_meminfo("").is_err());
        assert!(parse_meminfo("\u{0}\u{1}::::\n:").is_err());
        assert!(parse_meminfo(&MEMINFO[..20]).is_err());
    }

    #[test]
    fn meminfo_values_saturate() {
        let m =
            parse_meminfo("MemTotal: 18446744073709551615 kB\nMemFree: 1 kB\nMemAvailable: 1 kB\n")
                .unwrap();
        assert_eq!(m.total, u64::MAX);
    }

    #[test]
    fn system_memory_formulas() {
        let m = Meminfo {
            total: 1000,
            free: 100,
            available: 600,
            buffers: Some(10),
            cached: Some(300),
            shmem: Some(50),
            anon_pages: Some(200),
            unevictable: Some(7),
            zswap: None,
            swap_total: None,
            swap_free: None,
        };
        let s = system_memory(&m);
        assert_eq!(s.used, 400);
        assert_eq!(s.cached, Some(260));
        assert_eq!(s.app, Some(200));
        assert_eq!(s.wired, Some(7));
        assert_eq!(s.compressed, None);
    }

    #[test]
    fn compressed_memory_is_reported_only_where_zswap_holds_some() {
        let with_zswap = |zswap| Meminfo {
            total: 1000,
            free: 100,
            available: 600,
            zswap,
            ..Meminfo::default()
        };
        // Every kernel with zswap built in has the line, at 0 while it is off.
        assert_eq!(system_memory(&with_zswap(Some(0))).compressed, None);
        assert_eq!(system_memory(&with_zswap(None)).compressed, None);
        assert_eq!(
            system_memory(&with_zswap(Some(4096))).compressed,
            Some(4096)
        );
    }

    #[test]
    fn cached_saturates_when_shmem_exceeds_cache() {
        let m = Meminfo {
            cached: Some(10),
            shmem: Some(50),
            ..Meminfo::default()
        };
        assert_eq!(system_memory(&m).cached, Some(0));
    }

    #[test]
    fn swap_used_is_total_minus_free_and_counters_scale_by_page() {
        let m = Meminfo {
            swap_total: Some(8 * MIB),
            swap_free: Some(6 * MIB),
            ..Meminfo::default()
        };
        let vm = VmstatSwap {
            pswpin: Some(3),
            pswpout: Some(5),
        };
        let s = swap(&m, &vm, 4096);
        assert_eq!(s.used, 2 * MIB);
        assert_eq!(s.swapped_in_bytes, Some(3 * 4096));
        assert_eq!(s.swapped_out_bytes, Some(5 * 4096));
    }

    #[test]
    fn vmstat_from_real_file() {
        let v = parse_vmstat(VMSTAT);
        assert_eq!(v.pswpin, Some(0));
        assert_eq!(v.pswpout, Some(0));
    }

    #[test]
    fn vmstat_garbage_gives_none() {
        assert_eq!(parse_vmstat("pswpin x\npswpout"), VmstatSwap::default());
    }

    #[test]
    fn psi_with_some_and_full() {
        let p = parse_psi(
            "some avg10=12.50 avg60=3.00 avg300=0.75 total=123456\n\
             full avg10=1.25 avg60=0.00 avg300=0.00 total=789\n",
        )
        .unwrap();
        assert_eq!(p.some.avg10, 12.5);
        assert_eq!(p.some.total_micros, 123_456);
        assert_eq!(p.full.unwrap().total_micros, 789);
    }

    #[test]
    fn psi_full_is_optional() {
        let p = parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n").unwrap();
        assert_eq!(p.full, None);
    }

    #[test]
    fn psi_truncated_or_garbage_is_none() {
        assert_eq!(parse_psi(""), None);
        assert_eq!(parse_psi("some avg10=0.00 avg60=0.00"), None);
        assert_eq!(
            parse_psi("some avg10=nan avg60=0.00 avg300=0.00 total=0"),
            None
        );
        assert_eq!(
            parse_psi("full avg10=0.00 avg60=0.00 avg300=0.00 total=0"),
            None
        );
    }

    fn psi(some10: f64, full10: f64) -> Psi {
        Psi {
            some: PsiLine {
                avg10: some10,
                ..PsiLine::default()
            },
            full: Some(PsiLine {
                avg10: full10,
                ..PsiLine::default()
            }),
        }
    }

    #[test]
    fn pressure_normal_when_quiet_and_plenty_available() {
        assert_eq!(
            pressure_level(Some(&psi(1.0, 0.0)), 50, 100),
            PressureLevel::Normal
        );
    }

    #[test]
    fn pressure_warn_from_some_avg10() {
        assert_eq!(
            pressure_level(Some(&psi(10.0, 0.0)), 50, 100),
            PressureLevel::Warn
        );
    }

    #[test]
    fn pressure_critical_from_full_or_some() {
        assert_eq!(
            pressure_level(Some(&psi(0.0, 10.0)), 50, 100),
            PressureLevel::Critical
        );
        assert_eq!(
            pressure_level(Some(&psi(40.0, 0.0)), 50, 100),
            PressureLevel::Critical
        );
    }

    #[test]
    fn pressure_from_available_share_without_psi() {
        assert_eq!(pressure_level(None, 10, 100), PressureLevel::Normal);
        assert_eq!(pressure_level(None, 9, 100), PressureLevel::Warn);
        assert_eq!(pressure_level(None, 4, 100), PressureLevel::Critical);
        assert_eq!(pressure_level(None, 0, 0), PressureLevel::Normal);
        assert_eq!(
            pressure_level(None, u64::MAX / 2, u64::MAX),
            PressureLevel::Normal
        );
    }

    #[test]
    fn last_pid_from_loadavg() {
        assert_eq!(parse_last_pid("0.25 1.80 2.63 1/1090 15780\n"), Some(15780));
        assert_eq!(parse_last_pid("0.25 1.80 2.63 1/1090\n"), None);
        assert_eq!(parse_last_pid("0.25 1.80 2.63 1/1090 -1\n"), None);
    }

    #[test]
    fn btime_from_real_file() {
        assert_eq!(parse_btime(PROC_STAT), Some(1_795_317_273));
        assert_eq!(parse_btime("cpu 1 2 3\n"), None);
        assert_eq!(parse_btime("btime soon\n"), None);
    }

    #[test]
    fn statm_from_real_file() {
        let s = parse_statm(PY_STATM).unwrap();
        assert_eq!(s.resident, 16193);
        assert_eq!(s.shared, 1676);
        assert_eq!(s.text, 1);
        assert_eq!(s.anon(), 16193 - 1676);
    }

    /// The code size tells an `exec` into another program: the fixtures'
    /// `python3` (`basic/6441`, text 1 page) and `sleep` (`basic/6445`, 5
    /// pages), captured on the same machine; a kernel thread's all-zero
    /// `statm` (`basic/2`) and a zombie's say nothing.
    #[test]
    fn statm_text_tells_another_program() {
        let fixture = |pid: &str| {
            let path = format!(
                "{}/tests/fixtures/proc/basic/{pid}/statm",
                env!("CARGO_MANIFEST_DIR")
            );
            parse_statm(&std::fs::read(path).unwrap()).unwrap()
        };
        let (python, sleep, kthread) = (fixture("6441"), fixture("6445"), fixture("2"));
        assert_eq!(sleep.text, 5);
        assert!(sleep.other_program(&python));
        assert!(python.other_program(&sleep));
        // The same program, its memory grown: no.
        let grown = Statm {
            resident: python.resident * 2,
            ..python
        };
        assert!(!python.other_program(&grown));
        assert!(!python.other_program(&kthread));
        assert!(!kthread.other_program(&python));
    }

    #[test]
    fn statm_truncated_or_garbage_is_none() {
        assert_eq!(parse_statm(b""), None);
        assert_eq!(parse_statm(b"16942 16193"), None);
        assert_eq!(parse_statm(b"16942 16193 1676 1 0"), None);
        assert_eq!(parse_statm(b"a b c d e f g"), None);
    }

    #[test]
    fn statm_anon_saturates() {
        let s = Statm {
            size: 0,
            resident: 1,
            shared: 2,
            text: 0,
        };
        assert_eq!(s.anon(), 0);
    }

    #[test]
    fn stat_from_real_python_process() {
        let s = parse_stat(PY_STAT).unwrap();
        assert_eq!(s.pid, 6441);
        assert_eq!(s.comm, b"python3");
        assert_eq!(s.state, b'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.start_ticks, 30133);
        assert_eq!(s.minflt, 15673, "field 10");
        assert!(!s.is_kernel_thread());
    }

    #[test]
    fn stat_of_kernel_thread_has_pf_kthread() {
        let s = parse_stat(KTHREAD_STAT).unwrap();
        assert_eq!(s.comm, b"kthreadd");
        assert!(s.is_kernel_thread());
    }

    #[test]
    fn stat_comm_with_spaces_and_parentheses() {
        let s = parse_stat(ODD_STAT).unwrap();
        assert_eq!(s.comm, b"my (odd) name");
        assert_eq!(s.ppid, 1);
        assert_eq!(s.start_ticks, 30134);
    }

    #[test]
    fn stat_comm_ending_in_paren_space() {
        let line = b"7 (a) b) R 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.comm, b"a) b");
        assert_eq!(s.start_ticks, 99);
    }

    #[test]
    fn stat_truncated_or_garbage_is_none() {
        for cut in 0..PY_STAT.len() {
            let s = parse_stat(&PY_STAT[..cut]);
            // Only cuts after start time may still parse.
            if let Some(s) = s {
                assert_eq!(s.start_ticks, 30133, "cut at {cut}");
            }
        }
        assert_eq!(parse_stat(b""), None);
        assert_eq!(parse_stat(b")("), None);
        assert_eq!(parse_stat(b"x (y) S 1 2 3 4 5 6"), None);
        assert_eq!(parse_stat(b"\xff\xfe (\xff) \xff"), None);
    }

    #[test]
    fn status_from_real_python_process() {
        let s = parse_status(PY_STATUS).unwrap();
        assert_eq!(s.uid, 0);
        assert_eq!(s.rss_anon, Some(58068 * 1024));
        assert_eq!(s.rss_file, Some(6704 * 1024));
        assert_eq!(s.rss_shmem, Some(0));
        assert_eq!(s.vm_swap, Some(0));
        assert_eq!(s.vm_rss, Some(64772 * 1024));
        assert_eq!(s.vm_hwm, Some(64772 * 1024));
        assert_eq!(s.footprint(), 58068 * 1024);
    }

    #[test]
    fn status_of_kernel_thread_has_no_memory_lines() {
        let s = parse_status(KTHREAD_STATUS).unwrap();
        assert_eq!(s.vm_rss, None);
        assert_eq!(s.footprint(), 0);
    }

    #[test]
    fn status_footprint_sums_anon_shmem_swap() {
        let s = parse_status(
            b"Uid:\t1000\t1000\t1000\t1000\nRssAnon:\t 10 kB\nRssShmem:\t 2 kB\nVmSwap:\t 3 kB\n",
        )
        .unwrap();
        assert_eq!(s.uid, 1000);
        assert_eq!(s.footprint(), 15 * 1024);
    }

    #[test]
    fn status_garbage_is_none() {
        assert_eq!(parse_status(b""), None);
        assert_eq!(parse_status(b"Name:\tx\n"), None);
        assert_eq!(parse_status(b"Uid:\tnot-a-number\n"), None);
        assert_eq!(parse_status(b"Uid:\t0\nRssAnon:\t12 MB?\n"), None);
        assert_eq!(parse_status(b"Uid:"), None);
        let garbage = include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/proc/basic/31337/status"
        ));
        assert_eq!(parse_status(garbage), None);
    }

    #[test]
    fn status_truncated_never_panics() {
        for cut in 0..PY_STATUS.len() {
            let _ = parse_status(&PY_STATUS[..cut]);
        }
    }

    #[test]
    fn cmdline_from_real_python_process() {
        let argv = parse_cmdline(PY_CMDLINE);
        assert_eq!(
            argv,
            [
                "/root/.pyenv/versions/3.11.7/bin/python3",
                "-c",
                "import time; x=bytearray(50<<20); time.sleep(600)",
            ]
        );
    }

    #[test]
    fn a_cmdline_past_the_cap_keeps_its_start_and_a_mark() {
        let mut data = b"python3\0-m\0ipykernel_launcher\0-f\0/run/kernel-1.json\0".to_vec();
        data.resize(CMDLINE_READ, b'x');
        let argv = parse_cmdline(&data);
        assert_eq!(
            argv[..5],
            [
                "python3",
                "-m",
                "ipykernel_launcher",
                "-f",
                "/run/kernel-1.json"
            ]
        );
        let kept: usize = argv[..argv.len() - 1].iter().map(|a| a.len() + 1).sum();
        assert!(kept <= ARGV_MAX_BYTES, "{kept}");
        assert_eq!(argv.last().unwrap(), "…[argv truncated: over 4096 bytes]");
    }

    #[test]
    fn a_cmdline_that_fits_exactly_is_not_marked() {
        let mut data = vec![b'a'; ARGV_MAX_BYTES - 1];
        data.push(0);
        let argv = parse_cmdline(&data);
        assert_eq!(argv.len(), 1);
        assert_eq!(argv[0].len(), ARGV_MAX_BYTES - 1);
    }

    #[test]
    fn cmdline_without_trailing_nul_or_empty() {
        assert_eq!(
            parse_cmdline(b"nginx: worker process"),
            ["nginx: worker process"]
        );
        assert!(parse_cmdline(b"").is_empty());
        assert_eq!(parse_cmdline(b"a\0\0b\0"), ["a", "", "b"]);
        assert_eq!(parse_cmdline(b"\xff\0"), ["\u{fffd}"]);
    }

    #[test]
    fn maps_libraries_from_real_python_process() {
        let libs = parse_maps_libraries(PY_MAPS);
        assert!(libs.contains(&"libc.so.6".to_owned()), "{libs:?}");
        assert!(libs.contains(&"libpython3.11.so.1.0".to_owned()));
        assert!(libs.contains(&"math.cpython-311-x86_64-linux-gnu.so".to_owned()));
        assert!(
            !libs
                .iter()
                .any(|l| l.contains("python3.11") && !l.contains(".so"))
        );
        let mut sorted = libs.clone();
        sorted.dedup();
        assert_eq!(sorted, libs);
    }

    #[test]
    fn maps_pathnames_with_spaces_and_deleted() {
        let maps = b"7f00-7f01 r-xp 00000000 08:01 12 /opt/my libs/libtorch_cpu.so (deleted)\n\
                     7f01-7f02 rw-p 00000000 00:00 0 \n\
                     7f02-7f03 rw-p 00000000 00:00 0 [heap]\n\
                     7f03-7f04 r--p 00000000 08:01 13 /usr/lib/libsomething.sox\n";
        assert_eq!(parse_maps_libraries(maps), ["libtorch_cpu.so"]);
    }

    #[test]
    fn maps_garbage_gives_nothing() {
        assert!(parse_maps_libraries(b"").is_empty());
        assert!(parse_maps_libraries(b"garbage\n\xff\xff /x.so").is_empty());
        for cut in 0..PY_MAPS.len().min(2000) {
            let _ = parse_maps_libraries(&PY_MAPS[..cut]);
        }
    }

    #[test]
    fn maps_read_in_chunks_gives_what_the_whole_file_gives() {
        let whole = parse_maps_libraries(PY_MAPS);
        for size in [1, 7, 100, 4096] {
            let mut libs = MapsLibraries::new(|_: &str| true, usize::MAX);
            for chunk in PY_MAPS.chunks(size) {
                libs.feed(chunk);
            }
            assert_eq!(libs.finish(true), whole, "chunks of {size}");
        }
    }

    #[test]
    fn a_maps_read_cut_short_leaves_its_unfinished_line_out() {
        let maps = b"7f00-7f01 r-xp 00000000 08:01 12 /usr/lib/liba.so\n\
                     7f01-7f02 r-xp 00000000 08:01 13 /usr/lib/libb.so";
        let mut cut = MapsLibraries::new(|_: &str| true, usize::MAX);
        cut.feed(&maps[..maps.len() - 3]);
        assert_eq!(cut.finish(false), ["liba.so"]);
        let mut ended = MapsLibraries::new(|_: &str| true, usize::MAX);
        ended.feed(maps);
        assert_eq!(ended.finish(true), ["liba.so", "libb.so"]);
    }

    #[test]
    fn maps_lines_and_names_beyond_their_bounds_are_skipped() {
        let long_dir = "d".repeat(MAPS_LINE_MAX);
        let long_name = format!("lib{}.so", "n".repeat(MAPS_NAME_MAX));
        let maps = format!(
            "7f00-7f01 r-xp 00000000 08:01 12 /{long_dir}/libhidden.so\n\
             7f01-7f02 r-xp 00000000 08:01 13 /usr/lib/{long_name}\n\
             7f02-7f03 r-xp 00000000 08:01 14 /usr/lib/libseen.so\n"
        );
        for size in [maps.len(), 1000, 3] {
            let mut libs = MapsLibraries::new(|_: &str| true, usize::MAX);
            for chunk in maps.as_bytes().chunks(size) {
                libs.feed(chunk);
                assert!(libs.partial.len() <= MAPS_LINE_MAX);
            }
            assert_eq!(libs.finish(true), ["libseen.so"], "chunks of {size}");
        }
    }

    #[test]
    fn maps_gives_the_site_packages_of_the_libraries_kept() {
        // Lines of the form of PY_MAPS (a pip-installed PyTorch in a
        // virtual environment, and a Debian package's TensorFlow).
        let maps = b"7f00-7f01 r-xp 00000000 08:01 12 /home/ada/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so\n\
                     7f01-7f02 r-xp 00000000 08:01 13 /home/ada/venv/lib/python3.11/site-packages/numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so\n\
                     7f02-7f03 r-xp 00000000 08:01 14 /usr/lib/python3/dist-packages/tensorflow/libtensorflow_framework.so.2 (deleted)\n\
                     7f03-7f04 r-xp 00000000 08:01 15 /usr/lib/x86_64-linux-gnu/libc.so.6\n";
        let mut libs = MapsLibraries::new(crate::workload::library_shows_framework, 32);
        libs.feed(maps);
        let (names, dirs) = libs.finish_with_site_packages(true);
        assert_eq!(names, ["libtensorflow_framework.so.2", "libtorch_cpu.so"]);
        assert_eq!(
            dirs,
            [
                "/home/ada/venv/lib/python3.11/site-packages",
                "/usr/lib/python3/dist-packages"
            ]
        );
    }

    #[test]
    fn maps_keeps_only_the_names_asked_for_and_at_most_max() {
        let maps: String = (0..100)
            .map(|i| format!("7f{i:02}-7f{i:02} r-xp 00000000 08:01 {i} /x/lib{i:03}.so\n"))
            .collect();
        let mut libs = MapsLibraries::new(|n: &str| n.starts_with("lib0"), 5);
        libs.feed(maps.as_bytes());
        assert_eq!(
            libs.finish(true),
            [
                "lib000.so",
                "lib001.so",
                "lib002.so",
                "lib003.so",
                "lib004.so"
            ]
        );
    }

    #[test]
    fn max_open_files_is_the_soft_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             96365                96365                processes \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_open_files(limits), Some(1024));
        assert_eq!(
            parse_max_open_files("Max open files unlimited unlimited files\n"),
            Some(u64::MAX)
        );
        assert_eq!(parse_max_open_files("Max open files\n"), None);
        assert_eq!(parse_max_open_files(""), None);
    }
}
