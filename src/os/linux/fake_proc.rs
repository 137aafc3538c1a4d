//! A `/proc` tree written by hand for the Linux sampler's unit tests
//! ([`FakeProc`]): the system files of the `basic` fixture, and processes
//! made up one call at a time, which a test can then change (its memory,
//! or the program it runs) between two samples.

use crate::os::linux::LinuxSampler;

/// `PF_RANDOMIZE` (0x400000, `include/linux/sched.h`): the flags of an
/// ordinary process in `stat`, as in the fixtures' captures.
const FLAGS: u32 = 0x0040_0000;
/// `PF_FORKNOEXEC` (0x40, `include/linux/sched.h`): forked, not exec'd yet.
const PF_FORKNOEXEC: u32 = 0x40;

/// A `/proc` tree in a temporary directory; see the module doc. Each
/// process has `resident` pages (none shared) in `statm` and `anon_kb` of
/// RssAnon in `status`.
pub(crate) struct FakeProc(pub(crate) tempfile::TempDir);

impl FakeProc {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let basic = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/proc/basic");
        for f in ["meminfo", "vmstat", "stat"] {
            std::fs::copy(format!("{basic}/{f}"), dir.path().join(f)).unwrap();
        }
        Self(dir)
    }

    /// A process named `name` running `name run`, whose code spans 5 pages
    /// (the fixtures' `sleep`, `basic/6445/statm`).
    pub(crate) fn process(&self, pid: u32, name: &str, resident: u64, anon_kb: u64) {
        let d = self.0.path().join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        self.stat(pid, name, FLAGS);
        std::fs::write(d.join("cmdline"), format!("{name}\0run\0")).unwrap();
        self.statm(pid, resident, 5);
        self.memory(pid, resident, anon_kb);
    }

    /// A child forked by `process`'s, not exec'd yet (`PF_FORKNOEXEC`).
    pub(crate) fn forked(&self, pid: u32, name: &str, resident: u64, anon_kb: u64) {
        self.process(pid, name, resident, anon_kb);
        self.stat(pid, name, FLAGS | PF_FORKNOEXEC);
    }

    /// The process `pid` calls exec: the same start time, a new name,
    /// command line and executable, whose code spans `text` pages, and
    /// `PF_FORKNOEXEC` cleared, as `begin_new_exec` (`fs/exec.c`) does.
    pub(crate) fn exec(&self, pid: u32, name: &str, argv: &[&str], text: u64) {
        self.stat(pid, name, FLAGS);
        self.argv(pid, argv);
        let resident = self.resident(pid);
        self.statm(pid, resident, text);
    }

    /// The command line of `pid`.
    pub(crate) fn argv(&self, pid: u32, argv: &[&str]) {
        let mut cmdline = argv.join("\0");
        cmdline.push('\0');
        std::fs::write(self.0.path().join(format!("{pid}/cmdline")), cmdline).unwrap();
    }

    /// The process renames itself (`prctl(PR_SET_NAME)`): only `comm` changes.
    pub(crate) fn rename(&self, pid: u32, name: &str) {
        let flags = self.flags(pid);
        self.stat(pid, name, flags);
    }

    /// New memory figures for `pid`, its code unchanged.
    pub(crate) fn memory(&self, pid: u32, resident: u64, anon_kb: u64) {
        let d = self.0.path().join(pid.to_string());
        let text = self.text(pid);
        self.statm(pid, resident, text);
        std::fs::write(
            d.join("status"),
            format!(
                "Name:\tx\nUid:\t0\t0\t0\t0\nVmRSS:\t{anon_kb} kB\nRssAnon:\t{anon_kb} kB\nRssFile:\t0 kB\nRssShmem:\t0 kB\nVmSwap:\t0 kB\n"
            ),
        )
        .unwrap();
    }

    /// A Python process (read in full every tick) and 40 small `sleep`s,
    /// pids 1000–1039 with 100 + i pages: the 13 smallest are not among
    /// the [`crate::os::linux::TOP_EXACT`] largest.
    pub(crate) fn busy() -> Self {
        let tree = Self::new();
        tree.process(100, "python3", 5000, 20_000);
        for i in 0..40 {
            tree.process(1000 + i, "sleep", 100 + u64::from(i), 400);
        }
        tree
    }

    /// A child of `ppid` forked without exec (`PF_FORKNOEXEC`), with
    /// `minflt` minor faults so far.
    pub(crate) fn child_of(&self, pid: u32, ppid: u32, name: &str, resident: u64, anon_kb: u64) {
        self.process(pid, name, resident, anon_kb);
        self.stat_full(pid, name, FLAGS | PF_FORKNOEXEC, ppid, 128);
    }

    /// `pid`'s minor faults so far (`stat` field 10), the rest unchanged.
    pub(crate) fn faults(&self, pid: u32, minflt: u64) {
        let name = std::fs::read_to_string(self.0.path().join(format!("{pid}/stat")))
            .ok()
            .and_then(|t| Some(t.split_once('(')?.1.rsplit_once(')')?.0.to_string()))
            .unwrap_or_default();
        let ppid = u32::try_from(self.field(pid, "stat", 3)).unwrap_or(1);
        let flags = self.flags(pid);
        self.stat_full(pid, &name, flags, ppid, minflt);
    }

    /// `pid`'s `smaps_rollup`, with `pss_anon_kb` of proportional share;
    /// `None` removes it (a read of it fails).
    pub(crate) fn shares(&self, pid: u32, pss_anon_kb: Option<u64>) {
        let path = self.0.path().join(format!("{pid}/smaps_rollup"));
        match pss_anon_kb {
            Some(kb) => std::fs::write(
                path,
                format!("Rss: {kb} kB\nPss: {kb} kB\nPss_Anon: {kb} kB\nPss_File: 0 kB\nPss_Shmem: 0 kB\nSwapPss: 0 kB\n"),
            )
            .unwrap(),
            None => {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// The machine's `AnonPages` in `meminfo`, kB.
    pub(crate) fn anon_pages(&self, kb: u64) {
        self.meminfo("AnonPages:", kb);
    }

    /// The line `key` (with its colon) of `meminfo`, kB.
    pub(crate) fn meminfo(&self, key: &str, kb: u64) {
        let path = self.0.path().join("meminfo");
        let text = std::fs::read_to_string(&path).unwrap();
        let text: String = text
            .lines()
            .map(|l| {
                if l.starts_with(key) {
                    format!("{key}      {kb} kB\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(path, text).unwrap();
    }

    pub(crate) fn sampler(&self) -> LinuxSampler {
        LinuxSampler::new(self.0.path()).with_passwd("/nonexistent/passwd")
    }

    fn stat(&self, pid: u32, name: &str, flags: u32) {
        self.stat_full(pid, name, flags, 1, 128);
    }

    fn stat_full(&self, pid: u32, name: &str, flags: u32, ppid: u32, minflt: u64) {
        std::fs::write(
            self.0.path().join(format!("{pid}/stat")),
            format!("{pid} ({name}) S {ppid} 6438 3887 0 -1 {flags} {minflt} 0 0 0 0 0 0 0 20 0 1 0 30134 2990080 402 0\n"),
        )
        .unwrap();
    }

    fn statm(&self, pid: u32, resident: u64, text: u64) {
        std::fs::write(
            self.0.path().join(format!("{pid}/statm")),
            format!("900 {resident} 0 {text} 0 89 0\n"),
        )
        .unwrap();
    }

    /// Field `n` (from 0) of `pid`'s `file`, 0 where there is none.
    fn field(&self, pid: u32, file: &str, n: usize) -> u64 {
        std::fs::read_to_string(self.0.path().join(format!("{pid}/{file}")))
            .ok()
            .and_then(|t| t.split_whitespace().nth(n)?.parse().ok())
            .unwrap_or(0)
    }

    fn resident(&self, pid: u32) -> u64 {
        self.field(pid, "statm", 1)
    }

    fn text(&self, pid: u32) -> u64 {
        self.field(pid, "statm", 3)
    }

    /// The flags of `stat` (field 9), whose name has no spaces here.
    fn flags(&self, pid: u32) -> u32 {
        u32::try_from(self.field(pid, "stat", 8)).unwrap_or(FLAGS)
    }
}
