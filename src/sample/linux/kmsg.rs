//! The kernel log, `/dev/kmsg`, as the witness of the OOM killer.
//!
//! When the kernel runs out of memory (the whole machine, or a memory cgroup
//! at its limit) it picks a victim, sends it SIGKILL and says so in its log:
//!
//! ```text
//! 6,500,5827208834,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/lab,task_memcg=/lab,task=python3,pid=31984,uid=0
//! 3,501,5827208847,-;Memory cgroup out of memory: Killed process 31984 (python3) total-vm:82132kB, anon-rss:65152kB, file-rss:6644kB, shmem-rss:0kB, UID:0 pgtables:192kB oom_score_adj:0
//! ```
//!
//! Each read of `/dev/kmsg` returns one record: `priority,sequence,
//! microseconds since boot,flags[,…];message`, then continuation lines
//! (` KEY=value`) and a newline (`Documentation/ABI/testing/dev-kmsg`).
//! [`parse_record`] splits a record, [`parse_oom_message`] recognises the two
//! lines above in a message (and the older forms: `Killed process …` without
//! a prefix before Linux 5.1, no `UID:` before 5.2, no `oom-kill:` line
//! before 4.19), and [`OomJoiner`] joins them into one [`MemoryKill`] per
//! victim.
//!
//! The same records tell of crashes and GPU faults:
//! [`crate::sample::linux::kmsg_crash`] reads those.
//!
//! [`KmsgReader`] is the edge: it opens the device non-blocking and seeks to
//! its end (kills from before the daemon started concern no process it
//! watched), then each [`KmsgReader::read_new`] reads whatever records
//! arrived since: `EAGAIN` means nothing new, `EPIPE` means records were
//! overwritten in the ring buffer before they were read (counted, and
//! reading goes on with the oldest one left). Reading needs `CAP_SYSLOG`
//! where `kernel.dmesg_restrict = 1`: root has it unless a unit or a
//! container drops it.
//!
//! The pids in the log are those of the kernel's initial pid namespace: in a
//! container they are not the pids the container sees (and the container can
//! rarely read the log anyway).

use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::model::Timestamp;
use crate::sample::exit_causes::{Crash, GpuFault, Killer, MemoryKill};
use crate::sample::linux::kmsg_crash::{CrashJoiner, KernelRecord};

/// The longest record the kernel hands out (`CONSOLE_EXT_LOG_MAX`); a read
/// with a smaller buffer fails with `EINVAL`.
const RECORD_MAX: usize = 8192;

/// Most records read in one call, so that a flood of log lines cannot hold
/// the caller; the rest are read next time.
const MAX_RECORDS_PER_READ: usize = 4096;

/// Kill lines waiting for their partner line, at most this many.
const MAX_PENDING: usize = 64;

/// One record of the kernel log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Syslog level, 0 (emergency) to 7 (debug).
    pub level: u8,
    pub sequence: u64,
    /// When it was logged, microseconds since boot.
    pub micros: u64,
    /// The message, without the continuation lines.
    pub message: &'a str,
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
        level: u8::try_from(priority & 7).ok()?,
        sequence,
        micros,
        message,
    })
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
}

/// Recognise an OOM killer's line about its victim in a log message. Other
/// lines of an OOM report (`… invoked oom-killer`, the task list, `oom_reaper:
/// reaped process …`, the old `Out of memory: Kill process … score … or
/// sacrifice child`) give `None`.
pub fn parse_oom_message(message: &str) -> Option<OomLine> {
    if let Some(fields) = message.strip_prefix("oom-kill:") {
        return parse_constraint(fields);
    }
    let at = message.find("Killed process ")?;
    let reason = message[..at]
        .trim_end()
        .trim_end_matches(':')
        .trim()
        .to_string();
    let rest = &message[at + "Killed process ".len()..];
    let (pid, rest) = rest.split_once(' ')?;
    let pid = pid.parse().ok()?;
    let rest = rest.strip_prefix('(')?;
    // A command name may hold spaces and parentheses: `((resolved))`. It
    // ends at the `)` before ` total-vm:`, or at the last `)`.
    let end = match rest.find(" total-vm:") {
        Some(i) => rest[..i].rfind(')')?,
        None => rest.rfind(')')?,
    };
    let comm = rest[..end].to_string();
    let stats = &rest[end + 1..];
    Some(OomLine::Killed {
        pid,
        comm,
        reason,
        anon_rss_kb: kb_field(stats, "anon-rss:"),
        file_rss_kb: kb_field(stats, "file-rss:"),
        shmem_rss_kb: kb_field(stats, "shmem-rss:"),
        uid: number_after(stats, "UID:"),
    })
}

fn parse_constraint(fields: &str) -> Option<OomLine> {
    let mut pid = None;
    let mut task = None;
    let mut uid = None;
    let mut constraint = None;
    let mut oom_memcg = None;
    for field in fields.split(',') {
        match field.split_once('=') {
            Some(("pid", v)) => pid = v.parse().ok(),
            Some(("task", v)) => task = Some(v.to_string()),
            Some(("uid", v)) => uid = v.parse().ok(),
            Some(("constraint", v)) => constraint = Some(v.to_string()),
            Some(("oom_memcg", v)) => oom_memcg = Some(v.to_string()),
            _ => {}
        }
    }
    Some(OomLine::Constraint {
        pid: pid?,
        task: task?,
        uid,
        constraint: constraint?,
        oom_memcg,
    })
}

/// `anon-rss:65152kB` → 65152.
fn kb_field(stats: &str, key: &str) -> Option<u64> {
    let at = stats.find(key)? + key.len();
    let digits: String = stats[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let rest = &stats[at + digits.len()..];
    rest.starts_with("kB")
        .then(|| digits.parse().ok())
        .flatten()
}

/// `UID:1000 pgtables…` → 1000.
fn number_after<T: std::str::FromStr>(stats: &str, key: &str) -> Option<T> {
    let at = stats.find(key)? + key.len();
    let digits: String = stats[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Joins each victim's `oom-kill:` line (which comes first) with its
/// `Killed process` line into one [`MemoryKill`].
#[derive(Debug, Default)]
pub struct OomJoiner {
    constraints: HashMap<u32, (String, Option<String>)>,
}

impl OomJoiner {
    /// Take in one log message; a kill when it completes one.
    pub fn feed(&mut self, message: &str, source: &Path, read_at: Timestamp) -> Option<MemoryKill> {
        match parse_oom_message(message)? {
            OomLine::Constraint {
                pid,
                constraint,
                oom_memcg,
                ..
            } => {
                if self.constraints.len() >= MAX_PENDING {
                    self.constraints.clear();
                }
                self.constraints.insert(pid, (constraint, oom_memcg));
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
                let constraint = self.constraints.remove(&pid);
                let memcg = constraint.as_ref().and_then(|(_, m)| m.clone());
                let scope = match (&constraint, reason.as_str()) {
                    (Some((_, Some(memcg))), _) => {
                        format!("the memory cgroup {memcg} reached its limit")
                    }
                    (_, "Memory cgroup out of memory") => {
                        "a memory cgroup reached its limit".to_string()
                    }
                    (Some((c, None)), _) if c == "CONSTRAINT_NONE" => {
                        "the machine ran out of memory".to_string()
                    }
                    (Some((c, None)), _) => format!("out of memory under {c}"),
                    (None, _) => "out of memory".to_string(),
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
    /// Faults and fatal signals ([`crate::sample::linux::kmsg_crash`]).
    pub crashes: Vec<Crash>,
    /// NVIDIA Xid errors naming a process.
    pub gpu_faults: Vec<GpuFault>,
}

/// Reads new records from `/dev/kmsg` without ever blocking.
#[derive(Debug)]
pub struct KmsgReader {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    joiner: OomJoiner,
    crashes: CrashJoiner,
    /// Records overwritten before they could be read, since opening.
    pub lost: u64,
}

impl KmsgReader {
    /// Open `path` (normally `/dev/kmsg`) at its end.
    pub fn open(path: &Path) -> std::io::Result<Self> {
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
            joiner: OomJoiner::default(),
            crashes: CrashJoiner::default(),
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

    /// The OOM kills, crashes and GPU faults logged since the last call.
    pub fn read_new(&mut self, read_at: Timestamp) -> std::io::Result<KernelRecords> {
        let mut out = KernelRecords::default();
        let mut joiner = std::mem::take(&mut self.joiner);
        let mut crashes = std::mem::take(&mut self.crashes);
        let path = self.path.clone();
        let result = self.read_records(|raw| {
            let Some(record) = parse_record(raw) else {
                return;
            };
            if let Some(kill) = joiner.feed(record.message, &path, read_at) {
                out.kills.push(kill);
            }
            match crashes.feed(record.message, &path, read_at) {
                Some(KernelRecord::Crash(c)) => out.crashes.push(c),
                Some(KernelRecord::Gpu(g)) => out.gpu_faults.push(g),
                None => {}
            }
        });
        self.joiner = joiner;
        self.crashes = crashes;
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
    const MEMCG_V1_6_18: &str = include_str!("../../../tests/fixtures/kmsg/memcg-v1-oom-6.18.txt");

    /// Messages (the text after the timestamp) from OOM reports that people
    /// posted publicly; see the file for where each came from.
    const PUBLIC: &str = include_str!("../../../tests/fixtures/kmsg/public-oom-messages.txt");

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
        // Facility bits above the level are masked off.
        assert_eq!(parse_record("14,1,2,-;x").unwrap().level, 6);
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
        let mut joiner = OomJoiner::default();
        let k = joiner
            .feed(lines[1], Path::new("/dev/kmsg"), Timestamp(0))
            .expect("a kill");
        assert_eq!((k.pid, k.name.as_str()), (27438, "R"));
        assert_eq!(k.scope, "out of memory");
    }

    #[test]
    fn cgroup_kills_without_their_oom_kill_line_still_say_cgroup() {
        let lines = public("kubernetes-sigs/aws-efs-csi-driver/issues/1218");
        let mut joiner = OomJoiner::default();
        let k = joiner
            .feed(lines[0], Path::new("/dev/kmsg"), Timestamp(0))
            .expect("a kill");
        assert_eq!(
            (k.pid, k.name.as_str(), k.uid),
            (140339, "python3", Some(0))
        );
        assert_eq!(k.scope, "a memory cgroup reached its limit");
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
            let mine = |r: &String| parse_record(r).is_some_and(|r| r.message.ends_with(&marker));
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
