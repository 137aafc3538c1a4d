//! The kernel log, `/dev/kmsg`, as the witness of the OOM killer.
//!
//! A kill shows as an `oom-kill:constraint=…,task=…,pid=…` line and a
//! `Killed process PID (NAME) total-vm:… UID:…` line. Each read of
//! `/dev/kmsg` returns one record, `priority,sequence,µs since
//! boot,flags;message` (`Documentation/ABI/testing/dev-kmsg`).
//! [`parse_record`] splits a record, [`parse_oom_message`] recognises the
//! lines (and their forms before Linux 5.2), and [`OomJoiner`] joins them
//! into one [`MemoryKill`] per victim; [`super::kmsg_crash`] reads crashes
//! and GPU faults from the same records.
//!
//! The log quotes names other users choose, so a kill is believed only
//! from a record of the kernel's own facility (`LOG_KERN`, which user space
//! cannot write), whose message is the kernel's line from first byte to
//! last, and, on kernels from 4.19, after the victim's `oom-kill:` line (or
//! a whole cgroup's `memory.oom.group` announcement).
//! `tests/fixtures/kmsg/forged-6.18.txt` holds forged lines. The kernel
//! rate-limits the report but not the kill, so some kills go unrecorded.
//!
//! [`KmsgReader`] opens the device non-blocking at its end (earlier kills
//! concern no watched process); [`KmsgReader::read_new`] reads what arrived
//! since, counting records overwritten before they were read (`EPIPE`). It
//! needs `CAP_SYSLOG` where `kernel.dmesg_restrict = 1`. The pids are those
//! of the initial pid namespace, not a container's.

use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::model::Timestamp;
use crate::model::exit::{Crash, GpuFault, Killer, MemoryKill};
use crate::os::linux::kmsg_crash::{CrashJoiner, KernelRecord};

/// The longest record the kernel hands out (`CONSOLE_EXT_LOG_MAX`); a read
/// with a smaller buffer fails with `EINVAL`.
const RECORD_MAX: usize = 8192;

/// Most records read in one call, so that a flood of log lines cannot hold
/// the caller; the rest are read next time.
const MAX_RECORDS_PER_READ: usize = 4096;

/// Kill lines waiting for their partner line, at most this many.
const MAX_PENDING: usize = 64;

/// Records a cgroup's kill announcement (`Tasks in … memory.oom.group set`)
/// vouches for the `Killed process` lines after it, at most.
const GROUP_WINDOW: u32 = 4096;

/// The syslog facility of the kernel's own messages (`LOG_KERN`).
pub const KERNEL_FACILITY: u32 = 0;

/// One record of the kernel log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Syslog facility: [`KERNEL_FACILITY`] for the kernel's own messages;
    /// a write to `/dev/kmsg` from user space has another (see the module
    /// documentation).
    pub facility: u32,
    /// Syslog level, 0 (emergency) to 7 (debug).
    pub level: u8,
    pub sequence: u64,
    /// When it was logged, microseconds since boot.
    pub micros: u64,
    /// The message, without the continuation lines.
    pub message: &'a str,
}

impl Record<'_> {
    /// Whether the kernel itself logged it (not a program writing to
    /// `/dev/kmsg`).
    pub fn from_kernel(&self) -> bool {
        self.facility == KERNEL_FACILITY
    }
}

/// Split one record as read from `/dev/kmsg`; `None` if it is not one.
pub fn parse_record(raw: &str) -> Option<Record<'_>> {
    let (header, rest) = raw.split_once(';')?;
    let mut fields = header.split(',');
    let priority: u32 = fields.next()?.parse().ok()?;
    let sequence = fields.next()?.parse().ok()?;
    let micros = fields.next()?.parse().ok()?;
    let message = rest.split('\n').next().unwrap_or(rest);
    Some(Record {
        facility: priority >> 3,
        level: u8::try_from(priority & 7).ok()?,
        sequence,
        micros,
        message,
    })
}

/// Whether a kernel of this release (`uname -r`, `/proc/sys/kernel/osrelease`)
/// prints an `oom-kill:` line before each kill (Linux 4.19 on: `dump_oom_summary`
/// in `mm/oom_kill.c`). `None` if the release cannot be read.
pub fn prints_oom_kill_line(release: &str) -> Option<bool> {
    let mut parts = release.trim().split('.');
    let major: u32 = digits(parts.next()?)?;
    let minor = parts.next()?;
    let n = minor.bytes().take_while(u8::is_ascii_digit).count();
    let minor: u32 = digits(&minor[..n])?;
    Some((major, minor) >= (4, 19))
}

/// One of the OOM killer's lines about its victim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OomLine {
    /// `… Killed process PID (COMM) total-vm:…kB, anon-rss:…kB, file-rss:…kB,
    /// shmem-rss:…kB, UID:… …`: the kill itself.
    Killed {
        pid: u32,
        comm: String,
        /// The words before `Killed process`: `Out of memory`, `Memory cgroup
        /// out of memory`, or empty on kernels before 5.1.
        reason: String,
        anon_rss_kb: Option<u64>,
        file_rss_kb: Option<u64>,
        shmem_rss_kb: Option<u64>,
        uid: Option<u32>,
    },
    /// `oom-kill:constraint=…,task=COMM,pid=PID,uid=UID`: why, and where
    /// (Linux 4.19 on).
    Constraint {
        pid: u32,
        task: String,
        uid: Option<u32>,
        /// `CONSTRAINT_NONE` (the whole machine), `CONSTRAINT_MEMCG`, `CONSTRAINT_CPUSET`, …
        constraint: String,
        /// The cgroup whose limit was hit, for `CONSTRAINT_MEMCG`.
        oom_memcg: Option<String>,
    },
    /// `Tasks in CGROUP are going to be killed due to memory.oom.group set`
    /// (`mem_cgroup_print_oom_group` in `mm/memcontrol.c`): every task of
    /// the cgroup is killed next, each with a `Killed process` line and no
    /// `oom-kill:` line of its own.
    GroupKill { cgroup: String },
}

/// The words the kernel writes before `: Killed process` (the message
/// `out_of_memory` and `mem_cgroup_out_of_memory` hand to
/// `oom_kill_process`, Linux 5.1 on).
const KILL_REASONS: [&str; 3] = [
    "Out of memory",
    "Memory cgroup out of memory",
    "Out of memory (oom_kill_allocating_task)",
];

/// Recognise an OOM killer's line about its victim in a log message: the
/// whole message must be the kernel's line, from its first byte to its
/// last. Other lines of an OOM report (`… invoked oom-killer`, the task
/// list, `oom_reaper: reaped process …`, the old `Out of memory: Kill
/// process … score … or sacrifice child`) and any line that merely holds
/// such words give `None`.
pub fn parse_oom_message(message: &str) -> Option<OomLine> {
    if let Some(fields) = message.strip_prefix("oom-kill:") {
        return parse_constraint(fields);
    }
    if let Some(rest) = message.strip_prefix("Tasks in ") {
        let cgroup = rest.strip_suffix(" are going to be killed due to memory.oom.group set")?;
        return Some(OomLine::GroupKill {
            cgroup: cgroup.to_string(),
        });
    }
    let (reason, rest) = match message.strip_prefix("Killed process ") {
        Some(rest) => ("", rest),
        None => {
            let (reason, rest) = message.split_once(": Killed process ")?;
            if !KILL_REASONS.contains(&reason) {
                return None;
            }
            (reason, rest)
        }
    };
    let (pid, rest) = rest.split_once(" (")?;
    let pid = digits(pid)?;
    // A command name may hold spaces and parentheses (`(resolved)`); the
    // figures after it hold none, so it ends at the last `)`.
    let end = rest.rfind(')')?;
    let comm = &rest[..end];
    let stats = parse_kill_figures(&rest[end + 1..])?;
    Some(OomLine::Killed {
        pid,
        comm: comm.to_string(),
        reason: reason.to_string(),
        anon_rss_kb: Some(stats.anon_rss_kb),
        file_rss_kb: Some(stats.file_rss_kb),
        shmem_rss_kb: stats.shmem_rss_kb,
        uid: stats.uid,
    })
}

/// The figures of a `Killed process` line.
struct KillFigures {
    anon_rss_kb: u64,
    file_rss_kb: u64,
    shmem_rss_kb: Option<u64>,
    uid: Option<u32>,
}

/// ` total-vm:NkB, anon-rss:NkB, file-rss:NkB[, shmem-rss:NkB[, UID:N[
/// pgtables:NkB oom_score_adj:N]]]` and nothing after: the forms of
/// `__oom_kill_process` from Linux 3.x (no shmem) through 4.6 (shmem-rss),
/// 5.2 (UID) and 5.10 (pgtables, oom_score_adj).
fn parse_kill_figures(text: &str) -> Option<KillFigures> {
    let rest = text.strip_prefix(" total-vm:")?;
    let (_, rest) = kb(rest)?;
    let rest = rest.strip_prefix(", anon-rss:")?;
    let (anon_rss_kb, rest) = kb(rest)?;
    let rest = rest.strip_prefix(", file-rss:")?;
    let (file_rss_kb, rest) = kb(rest)?;
    let mut figures = KillFigures {
        anon_rss_kb,
        file_rss_kb,
        shmem_rss_kb: None,
        uid: None,
    };
    let Some(rest) = rest.strip_prefix(", shmem-rss:") else {
        return rest.is_empty().then_some(figures);
    };
    let (shmem, rest) = kb(rest)?;
    figures.shmem_rss_kb = Some(shmem);
    let Some(rest) = rest.strip_prefix(", UID:") else {
        return rest.is_empty().then_some(figures);
    };
    let n = rest.bytes().take_while(u8::is_ascii_digit).count();
    figures.uid = Some(digits(&rest[..n])?);
    let rest = &rest[n..];
    let Some(rest) = rest.strip_prefix(" pgtables:") else {
        return rest.is_empty().then_some(figures);
    };
    let (_, rest) = kb(rest)?;
    let adj = rest.strip_prefix(" oom_score_adj:")?;
    let adj = adj.strip_prefix('-').unwrap_or(adj);
    digits::<u32>(adj)?;
    Some(figures)
}

/// `65152kB…` → (65152, `…`).
fn kb(text: &str) -> Option<(u64, &str)> {
    let n = text.bytes().take_while(u8::is_ascii_digit).count();
    let value = digits(&text[..n])?;
    let rest = text[n..].strip_prefix("kB")?;
    Some((value, rest))
}

/// A number written in decimal digits only (no sign, no space).
fn digits<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `constraint=C,nodemask=…,cpuset=…,mems_allowed=…[,oom_memcg=M|,global_oom],
/// task_memcg=…,task=COMM,pid=P,uid=U` (after `oom-kill:`), ending at the
/// uid. Cgroup and cpuset names are their creators' choice and may hold
/// commas: the pid and uid are read from the end, where the kernel puts
/// them.
fn parse_constraint(fields: &str) -> Option<OomLine> {
    let rest = fields.strip_prefix("constraint=")?;
    let (constraint, rest) = rest.split_once(',')?;
    let known = constraint
        .strip_prefix("CONSTRAINT_")
        .is_some_and(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'));
    if !known || !rest.starts_with("nodemask=") {
        return None;
    }
    let (rest, uid) = rest.rsplit_once(",uid=")?;
    let uid = digits(uid)?;
    let (rest, pid) = rest.rsplit_once(",pid=")?;
    let pid = digits(pid)?;
    let (rest, task) = rest.rsplit_once(",task=")?;
    let (head, _) = rest.rsplit_once(",task_memcg=")?;
    let oom_memcg = head
        .rsplit_once(",oom_memcg=")
        .map(|(_, memcg)| memcg.to_string());
    Some(OomLine::Constraint {
        pid,
        task: task.to_string(),
        uid: Some(uid),
        constraint: constraint.to_string(),
        oom_memcg,
    })
}

/// A victim's `oom-kill:` line, waiting for its `Killed process` line.
#[derive(Debug)]
struct Announced {
    /// The whole line: it must end in `,task=COMM,pid=PID,uid=UID` with the
    /// kill line's command name and pid.
    line: String,
    uid: Option<u32>,
    constraint: String,
    oom_memcg: Option<String>,
}

/// Joins each victim's `oom-kill:` line (which comes first) with its
/// `Killed process` line into one [`MemoryKill`]. On kernels that print an
/// `oom-kill:` line (the default: see [`OomJoiner::for_release`]) a
/// `Killed process` line without one is no kill, unless a cgroup's kill
/// announcement came just before it.
#[derive(Debug)]
pub struct OomJoiner {
    constraints: HashMap<u32, Announced>,
    /// Whether the kernel prints an `oom-kill:` line before each kill.
    paired: bool,
    /// A cgroup whose tasks are being killed, and the records it still
    /// vouches for.
    group: Option<(String, u32)>,
}

impl Default for OomJoiner {
    fn default() -> Self {
        Self {
            constraints: HashMap::new(),
            paired: true,
            group: None,
        }
    }
}

impl OomJoiner {
    /// A joiner for the kernel `release` (`/proc/sys/kernel/osrelease`):
    /// kernels before 4.19 print no `oom-kill:` line, so there a `Killed
    /// process` line is a kill by itself. An unreadable release is taken to
    /// be a kernel that prints one.
    pub fn for_release(release: Option<&str>) -> Self {
        Self {
            paired: release.and_then(prints_oom_kill_line).unwrap_or(true),
            ..Self::default()
        }
    }

    /// Take in one log message of the kernel's own (see
    /// [`Record::from_kernel`]); a kill when it completes one.
    pub fn feed(&mut self, message: &str, source: &Path, read_at: Timestamp) -> Option<MemoryKill> {
        if let Some((_, left)) = &mut self.group {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.group = None;
            }
        }
        match parse_oom_message(message)? {
            OomLine::Constraint {
                pid,
                uid,
                constraint,
                oom_memcg,
                ..
            } => {
                if self.constraints.len() >= MAX_PENDING {
                    self.constraints.clear();
                }
                self.constraints.insert(
                    pid,
                    Announced {
                        line: message.to_string(),
                        uid,
                        constraint,
                        oom_memcg,
                    },
                );
                None
            }
            OomLine::GroupKill { cgroup } => {
                self.group = Some((cgroup, GROUP_WINDOW));
                None
            }
            OomLine::Killed {
                pid,
                comm,
                reason,
                anon_rss_kb,
                file_rss_kb,
                shmem_rss_kb,
                uid,
            } => {
                // Both lines must name the same process: a command name may
                // hold `,task=`, so the `oom-kill:` line's whole tail is
                // compared.
                let announced = self.constraints.remove(&pid).filter(|a| {
                    let uid = a.uid.map_or(String::new(), |u| u.to_string());
                    a.line
                        .ends_with(&format!(",task={comm},pid={pid},uid={uid}"))
                });
                let group = self.group.as_ref().map(|(cgroup, _)| cgroup.as_str());
                // The cgroup whose limit was reached, where the kernel said.
                let memcg = announced
                    .as_ref()
                    .and_then(|a| a.oom_memcg.clone())
                    .or_else(|| group.map(str::to_string));
                if self.paired && announced.is_none() && group.is_none() {
                    return None;
                }
                let scope = match (&announced, group, reason.as_str()) {
                    (Some(a), _, _) => match (&a.oom_memcg, a.constraint.as_str()) {
                        (Some(memcg), _) => {
                            format!("the memory cgroup {memcg} reached its limit")
                        }
                        (None, "CONSTRAINT_NONE") => "the machine ran out of memory".to_string(),
                        (None, c) => format!("out of memory under {c}"),
                    },
                    (None, Some(cgroup), _) => format!(
                        "its memory cgroup {cgroup} was killed whole (memory.oom.group) when memory ran out"
                    ),
                    (None, None, "Memory cgroup out of memory") => {
                        "a memory cgroup reached its limit".to_string()
                    }
                    (None, None, _) => "out of memory".to_string(),
                };
                let resident = [anon_rss_kb, file_rss_kb, shmem_rss_kb]
                    .into_iter()
                    .try_fold(0u64, |sum, kb| Some(sum.saturating_add(kb?)))
                    .map(|kb| kb.saturating_mul(1024));
                Some(MemoryKill {
                    pid,
                    name: comm,
                    uid,
                    killer: Killer::OomKiller,
                    source: source.display().to_string(),
                    message: message.to_string(),
                    resident_bytes: resident,
                    scope,
                    memcg,
                    read_at,
                })
            }
        }
    }
}

/// What the kernel logged since the last read about how processes end.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KernelRecords {
    pub kills: Vec<MemoryKill>,
    /// Faults and fatal signals ([`crate::os::linux::kmsg_crash`]).
    pub crashes: Vec<Crash>,
    /// NVIDIA Xid errors naming a process.
    pub gpu_faults: Vec<GpuFault>,
}

/// What the records mean: each record read goes through [`KernelLog::take`],
/// which keeps the kernel's own records and hands their messages to the
/// OOM joiner and the crash joiner.
#[derive(Debug, Default)]
pub struct KernelLog {
    joiner: OomJoiner,
    crashes: CrashJoiner,
}

impl KernelLog {
    /// For the kernel `release` ([`OomJoiner::for_release`]).
    pub fn for_release(release: Option<&str>) -> Self {
        Self {
            joiner: OomJoiner::for_release(release),
            crashes: CrashJoiner::default(),
        }
    }

    /// Take in one record as read from the device (`raw`); what it
    /// completes goes to `out`. A record that is not the kernel's own is
    /// ignored.
    pub fn take(&mut self, raw: &str, source: &Path, read_at: Timestamp, out: &mut KernelRecords) {
        let Some(record) = parse_record(raw).filter(Record::from_kernel) else {
            return;
        };
        if let Some(kill) = self.joiner.feed(record.message, source, read_at) {
            out.kills.push(kill);
        }
        match self.crashes.feed(record.message, source, read_at) {
            Some(KernelRecord::Crash(c)) => out.crashes.push(c),
            Some(KernelRecord::Gpu(g)) => out.gpu_faults.push(g),
            None => {}
        }
    }
}

/// Reads new records from `/dev/kmsg` without ever blocking.
#[derive(Debug)]
pub struct KmsgReader {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    log: KernelLog,
    /// Records overwritten before they could be read, since opening.
    pub lost: u64,
}

impl KmsgReader {
    /// Open `path` (normally `/dev/kmsg`) at its end, for the kernel whose
    /// release `/proc/sys/kernel/osrelease` names.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok();
        Self::open_for(path, release.as_deref())
    }

    /// Open `path` at its end, reading it as a kernel of `release` writes
    /// it ([`OomJoiner::for_release`]).
    pub fn open_for(path: &Path, release: Option<&str>) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        file.seek(SeekFrom::End(0))?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
            buf: vec![0; RECORD_MAX],
            log: KernelLog::for_release(release),
            lost: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The records logged since the last call (at most
    /// `MAX_RECORDS_PER_READ`), each handed to `each` as read.
    pub fn read_records(&mut self, mut each: impl FnMut(&str)) -> std::io::Result<()> {
        for _ in 0..MAX_RECORDS_PER_READ {
            match self.file.read(&mut self.buf) {
                Ok(0) => return Ok(()),
                Ok(n) => each(&String::from_utf8_lossy(&self.buf[..n])),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Overwritten before read: the next read returns the oldest
                // record still there.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => self.lost += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The OOM kills, crashes and GPU faults the kernel logged since the
    /// last call. Records of another facility (written to `/dev/kmsg` from
    /// user space) are skipped.
    pub fn read_new(&mut self, read_at: Timestamp) -> std::io::Result<KernelRecords> {
        let mut out = KernelRecords::default();
        let mut log = std::mem::take(&mut self.log);
        let path = self.path.clone();
        let result = self.read_records(|raw| log.take(raw, &path, read_at, &mut out));
        self.log = log;
        result.map(|()| out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole OOM report from `/dev/kmsg`, captured on Linux 6.18 by putting
    /// `python3` allocating 8 MiB at a time into a cgroup-v1 memory cgroup
    /// with `memory.limit_in_bytes` = 64 MiB: each read of the device
    /// appended as it came.
    const MEMCG_V1_6_18: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kmsg/memcg-v1-oom-6.18.txt"
    ));

    /// Messages (the text after the timestamp) from OOM reports that people
    /// posted publicly; see the file for where each came from.
    const PUBLIC: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kmsg/public-oom-messages.txt"
    ));

    fn records(text: &str) -> Vec<Record<'_>> {
        text.split_inclusive('\n')
            .map(|raw| parse_record(raw).expect("every line of the capture is a record"))
            .collect()
    }

    /// Each public message, after the line naming its source.
    fn public(source: &str) -> Vec<&'static str> {
        crate::sample::fixture_block(PUBLIC, source)
    }

    #[test]
    fn a_record_splits_into_level_sequence_time_and_message() {
        let r = parse_record(
            "3,501,5827208847,-;Memory cgroup out of memory: Killed process 1\n SUBSYSTEM=x\n",
        )
        .unwrap();
        assert_eq!((r.level, r.sequence, r.micros), (3, 501, 5_827_208_847));
        assert_eq!(r.message, "Memory cgroup out of memory: Killed process 1");
        assert!(r.from_kernel());
        // The facility is the bits above the level: 14 is LOG_USER, level 6.
        let user = parse_record("14,1,2,-;x").unwrap();
        assert_eq!((user.facility, user.level), (1, 6));
        assert!(!user.from_kernel());
        assert_eq!(parse_record("no header"), None);
        assert_eq!(parse_record("a,b,c,-;x"), None);
    }

    #[test]
    fn the_captured_report_yields_one_kill_with_its_cgroup() {
        let all = records(MEMCG_V1_6_18);
        assert_eq!(all.len(), 78);
        assert!(all.windows(2).all(|w| w[1].sequence == w[0].sequence + 1));
        let mut joiner = OomJoiner::default();
        let kills: Vec<MemoryKill> = all
            .iter()
            .filter_map(|r| joiner.feed(r.message, Path::new("/dev/kmsg"), Timestamp(7)))
            .collect();
        assert_eq!(kills.len(), 1, "{kills:#?}");
        let k = &kills[0];
        assert_eq!((k.pid, k.name.as_str(), k.uid), (31984, "python3", Some(0)));
        assert_eq!(k.killer, Killer::OomKiller);
        assert_eq!(
            k.scope,
            "the memory cgroup /headroom-oomcapture reached its limit"
        );
        // anon 65152 kB + file 6644 kB + shmem 0 kB
        assert_eq!(k.resident_bytes, Some((65152 + 6644) * 1024));
        assert!(
            k.message
                .starts_with("Memory cgroup out of memory: Killed process 31984")
        );
        assert_eq!((k.source.as_str(), k.read_at), ("/dev/kmsg", Timestamp(7)));
    }

    #[test]
    fn the_rest_of_an_oom_report_is_not_a_kill() {
        for r in records(MEMCG_V1_6_18) {
            let line = parse_oom_message(r.message);
            let expected = r.message.starts_with("oom-kill:")
                || r.message.starts_with("Memory cgroup out of memory: Killed");
            assert_eq!(line.is_some(), expected, "{}", r.message);
        }
    }

    #[test]
    fn a_global_oom_of_linux_6_names_pid_user_and_sizes() {
        let lines = public("equinor/ert/issues/7797");
        let mut joiner = OomJoiner::default();
        let kills: Vec<MemoryKill> = lines
            .iter()
            .filter_map(|m| joiner.feed(m, Path::new("/dev/kmsg"), Timestamp(0)))
            .collect();
        assert_eq!(kills.len(), 1);
        let k = &kills[0];
        assert_eq!(
            (k.pid, k.name.as_str(), k.uid),
            (1440763, "perl", Some(21417))
        );
        assert_eq!(k.scope, "the machine ran out of memory");
        assert_eq!(k.resident_bytes, Some(60356340 * 1024));
    }

    #[test]
    fn linux_5_lines_without_uid_and_names_with_parentheses() {
        let lines = public("docker/for-linux/issues/1001");
        let parsed: Vec<OomLine> = lines.iter().filter_map(|m| parse_oom_message(m)).collect();
        assert_eq!(parsed.len(), 2, "the oom_reaper lines are not kills");
        assert_eq!(
            parsed[0],
            OomLine::Killed {
                pid: 15784,
                comm: "python3".into(),
                reason: "Out of memory".into(),
                anon_rss_kb: Some(4288),
                file_rss_kb: Some(3028),
                shmem_rss_kb: Some(0),
                uid: None,
            }
        );
        match &parsed[1] {
            OomLine::Killed { pid, comm, .. } => {
                assert_eq!((*pid, comm.as_str()), (15925, "(resolved)"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn linux_4_kills_have_no_prefix_and_the_selection_line_is_no_kill() {
        let lines = public("genular/pandora/issues/49");
        assert_eq!(lines.len(), 2);
        assert_eq!(parse_oom_message(lines[0]), None, "{}", lines[0]);
        // A kernel before 4.19 prints no `oom-kill:` line: the kill line
        // stands alone.
        let mut joiner = OomJoiner::for_release(Some("4.15.0-45-generic"));
        let k = joiner
            .feed(lines[1], Path::new("/dev/kmsg"), Timestamp(0))
            .expect("a kill");
        assert_eq!((k.pid, k.name.as_str()), (27438, "R"));
        assert_eq!(k.scope, "out of memory");
    }

    #[test]
    fn a_kill_line_alone_is_no_kill_where_the_kernel_prints_an_oom_kill_line() {
        // A Linux 5.10+ line (UID, pgtables) posted without its `oom-kill:`
        // line: alone, it proves nothing on such a kernel.
        let lines = public("kubernetes-sigs/aws-efs-csi-driver/issues/1218");
        assert!(matches!(
            parse_oom_message(lines[0]),
            Some(OomLine::Killed { pid: 140339, .. })
        ));
        let mut joiner = OomJoiner::for_release(Some("6.8.0-1009-aws"));
        assert_eq!(
            joiner.feed(lines[0], Path::new("/dev/kmsg"), Timestamp(0)),
            None
        );
        // Before 4.19 the same words would be a kill, and say cgroup.
        let mut old = OomJoiner::for_release(Some("4.14.0"));
        let k = old
            .feed(lines[0], Path::new("/dev/kmsg"), Timestamp(0))
            .expect("a kill");
        assert_eq!(k.scope, "a memory cgroup reached its limit");
    }

    #[test]
    fn a_kill_line_must_name_the_process_its_oom_kill_line_named() {
        let constraint = "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=python3,pid=42,uid=1000";
        let kill = |comm: &str, pid: u32| {
            format!(
                "Out of memory: Killed process {pid} ({comm}) total-vm:8kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:0kB oom_score_adj:0"
            )
        };
        let fed = |second: &str| {
            let mut joiner = OomJoiner::default();
            assert_eq!(
                joiner.feed(constraint, Path::new("/dev/kmsg"), Timestamp(0)),
                None
            );
            joiner.feed(second, Path::new("/dev/kmsg"), Timestamp(0))
        };
        assert!(fed(&kill("python3", 42)).is_some());
        assert_eq!(fed(&kill("bash", 42)), None, "another command");
        assert_eq!(fed(&kill("python3", 43)), None, "another pid");
        // A command name holding `,task=` is read whole.
        let odd = "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=a,task=b,pid=42,uid=0";
        let mut joiner = OomJoiner::default();
        joiner.feed(odd, Path::new("/dev/kmsg"), Timestamp(0));
        let k = joiner
            .feed(&kill("a,task=b", 42), Path::new("/dev/kmsg"), Timestamp(0))
            .expect("a kill");
        assert_eq!(k.name, "a,task=b");
    }

    #[test]
    fn a_kill_line_is_the_kernels_only_from_its_first_byte_to_its_last() {
        let line = "Out of memory: Killed process 7 (victim) total-vm:1kB, anon-rss:20971520kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:0kB oom_score_adj:-998";
        assert!(matches!(
            parse_oom_message(line),
            Some(OomLine::Killed {
                pid: 7,
                uid: Some(1000),
                ..
            })
        ));
        for forged in [
            // Quoted inside another line: a crash in a file named so.
            format!("crash[4]: segfault at 0 ip 0 sp 0 error 4 in {line}[11a9,55ee+1000]"),
            // Followed by other words: a fatal-signal line whose program
            // file is named so.
            format!("{line}: crash: potentially unexpected fatal signal 11."),
            // Words the kernel never puts before it.
            line.replacen("Out of memory", "Out of memory, really", 1),
            // Figures out of order, or not numbers.
            line.replace("anon-rss:20971520kB", "anon-rss:lots"),
            line.replace(", UID:1000", " UID:1000"),
            line.replacen(" (victim)", " victim", 1),
            line.replacen("process 7 ", "process -7 ", 1),
        ] {
            assert_eq!(parse_oom_message(&forged), None, "{forged}");
        }
        for forged in [
            "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=x,pid=7,uid=0: x: potentially unexpected fatal signal 11.",
            "oom-kill:constraint=none,nodemask=(null),task_memcg=/,task=x,pid=7,uid=0",
            "oom-kill:task=x,pid=7,uid=0",
            "Tasks in /lab are going to be killed due to memory.oom.group set: x: potentially unexpected fatal signal 11.",
        ] {
            assert_eq!(parse_oom_message(forged), None, "{forged}");
        }
        // The older forms the kernel wrote are still its own.
        for (old, shmem, uid) in [
            (
                "Killed process 7 (x) total-vm:1kB, anon-rss:2kB, file-rss:3kB",
                None,
                None,
            ),
            (
                "Killed process 7 (x) total-vm:1kB, anon-rss:2kB, file-rss:3kB, shmem-rss:4kB",
                Some(4),
                None,
            ),
            (
                "Out of memory: Killed process 7 (x) total-vm:1kB, anon-rss:2kB, file-rss:3kB, shmem-rss:4kB, UID:5",
                Some(4),
                Some(5),
            ),
            (
                "Out of memory (oom_kill_allocating_task): Killed process 7 (x) total-vm:1kB, anon-rss:2kB, file-rss:3kB, shmem-rss:4kB, UID:5 pgtables:6kB oom_score_adj:0",
                Some(4),
                Some(5),
            ),
        ] {
            match parse_oom_message(old) {
                Some(OomLine::Killed {
                    pid: 7,
                    shmem_rss_kb,
                    uid: u,
                    ..
                }) => {
                    assert_eq!((shmem_rss_kb, u), (shmem, uid), "{old}");
                }
                other => panic!("{old}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_tasks_of_a_cgroup_killed_whole_are_kills_without_their_own_oom_kill_line() {
        // `mem_cgroup_print_oom_group` (mm/memcontrol.c) and
        // `__oom_kill_process` (mm/oom_kill.c) of Linux 6.x, filled in: the
        // victim with its `oom-kill:` line, then the announcement, then each
        // task of the cgroup.
        let lines = [
            "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/pod,task_memcg=/pod/app,task=python3,pid=40,uid=1000",
            "Memory cgroup out of memory: Killed process 40 (python3) total-vm:9kB, anon-rss:8kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:0kB oom_score_adj:0",
            "Tasks in /pod/app are going to be killed due to memory.oom.group set",
            "Memory cgroup out of memory: Killed process 41 (worker) total-vm:9kB, anon-rss:8kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:0kB oom_score_adj:0",
            "Memory cgroup out of memory: Killed process 42 (worker) total-vm:9kB, anon-rss:8kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:0kB oom_score_adj:0",
        ];
        let mut joiner = OomJoiner::default();
        let kills: Vec<MemoryKill> = lines
            .iter()
            .filter_map(|m| joiner.feed(m, Path::new("/dev/kmsg"), Timestamp(0)))
            .collect();
        let pids: Vec<u32> = kills.iter().map(|k| k.pid).collect();
        assert_eq!(pids, [40, 41, 42]);
        assert_eq!(kills[0].scope, "the memory cgroup /pod reached its limit");
        assert!(
            kills[1].scope.contains("/pod/app was killed whole"),
            "{}",
            kills[1].scope
        );
        // The announcement vouches for the kills right after it only.
        let mut joiner = OomJoiner::default();
        joiner.feed(lines[2], Path::new("/dev/kmsg"), Timestamp(0));
        for _ in 0..GROUP_WINDOW {
            joiner.feed("x", Path::new("/dev/kmsg"), Timestamp(0));
        }
        assert_eq!(
            joiner.feed(lines[3], Path::new("/dev/kmsg"), Timestamp(0)),
            None
        );
    }

    #[test]
    fn kernel_releases_say_whether_an_oom_kill_line_is_printed() {
        for (release, prints) in [
            ("6.18.44-fc-v669", Some(true)),
            ("4.19.0-27-amd64", Some(true)),
            ("4.18.20", Some(false)),
            ("4.15.0-45-generic", Some(false)),
            ("3.10.0-957.21.3.el7.x86_64", Some(false)),
            ("5.4\n", Some(true)),
            ("10.0", Some(true)),
            ("", None),
            ("linux", None),
            ("4", None),
        ] {
            assert_eq!(prints_oom_kill_line(release), prints, "{release:?}");
        }
    }

    /// Records read from a real kernel while a user and root tried to forge
    /// kills and crashes; the file's head says how.
    const FORGED: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kmsg/forged-6.18.txt"
    ));

    #[test]
    fn forged_records_of_a_real_kernel_make_no_kill_and_blame_no_other_pid() {
        let mut log = KernelLog::for_release(Some("6.18.44-fc-v669"));
        let mut out = KernelRecords::default();
        let mut lines = 0;
        for raw in FORGED.lines().filter(|l| !l.starts_with('#')) {
            lines += 1;
            log.take(raw, Path::new("/dev/kmsg"), Timestamp(1), &mut out);
        }
        assert_eq!(lines, 37);
        assert!(out.kills.is_empty(), "{:#?}", out.kills);
        assert!(out.gpu_faults.is_empty(), "{:#?}", out.gpu_faults);
        // Every crash is the crashing program's own, under its own pid.
        let pids: Vec<u32> = out.crashes.iter().map(|c| c.pid).collect();
        assert_eq!(
            pids,
            [
                21627, 21647, 21666, 21703, 21730, 22074, 22074, 22091, 22091
            ]
        );
        // The line whose program is named "a[1]: segfault " is its own.
        let named = &out.crashes[3];
        assert_eq!(named.name, "a[1]: segfault ");
        assert_eq!(
            named.library.as_deref(),
            Some("victim[99999]: segfault at 0 ip 0 sp 0 error 4 in libvictim.so[1,2+3]")
        );
        // Root's writes are not the kernel's, whatever level they name.
        for raw in FORGED.lines().filter(|l| !l.starts_with('#')) {
            let r = parse_record(raw).unwrap();
            let written = r.message.starts_with("Out of memory: Killed process 99999")
                && !r.message.ends_with('.')
                || r.message.starts_with("oom-kill:");
            assert_eq!(r.from_kernel(), !written, "{raw}");
        }
    }

    #[test]
    fn reading_the_real_device_never_blocks_and_sees_new_records() {
        let path = Path::new("/dev/kmsg");
        let mut reader = match KmsgReader::open(path) {
            Ok(r) => r,
            Err(e) => {
                // Not root (dmesg_restrict) or no such device (a container):
                // the reason is what the daemon reports; nothing to read.
                assert!(
                    matches!(e.kind(), ErrorKind::PermissionDenied | ErrorKind::NotFound),
                    "unexpected error opening /dev/kmsg: {e}"
                );
                return;
            }
        };
        // At its end: the old records are not read again.
        let mut old = 0;
        reader.read_records(|_| old += 1).unwrap();
        assert_eq!(old, 0, "open seeks to the end");
        // Root may add a record of its own (with a newline, or the kernel
        // holds it back for a continuation) and must read it back. Writes
        // are rate limited (`kernel.printk_devkmsg = ratelimit`: 10 per 5 s,
        // all writers together), so a dropped one is tried again.
        let marker = format!("headroom kmsg reader test {}", std::process::id());
        let mut seen = Vec::new();
        for attempt in 0..3 {
            let wrote = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|mut f| {
                    std::io::Write::write_all(&mut f, format!("{marker}\n").as_bytes())
                });
            if wrote.is_err() {
                break;
            }
            reader
                .read_records(|raw| seen.push(raw.to_string()))
                .unwrap();
            // Written from user space: not the kernel's own record.
            let mine = |r: &String| {
                parse_record(r).is_some_and(|r| r.message.ends_with(&marker) && !r.from_kernel())
            };
            if seen.iter().any(mine) {
                break;
            }
            assert!(
                attempt < 2,
                "the record written was not read back: {seen:?}"
            );
            std::thread::sleep(std::time::Duration::from_secs(3));
        }
        assert!(reader.read_new(Timestamp(0)).unwrap().kills.is_empty());
    }
}
