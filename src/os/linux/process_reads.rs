//! What the Linux sampler reads about one process: `statm` (through a kept
//! file or not), the identity in `stat`, and everything read once at first
//! sight of a pid (`stat`, the `exe` link, `status` and a bounded `cmdline`,
//! by the shared [`crate::os::first_sight`] policy; then the memory-cgroup
//! path; where the classifier asks for `maps`, the process is marked for the
//! library thread). [`Io`] holds the `/proc` reader and
//! the facts read once for the whole sampler (page size, clock ticks, boot
//! time, user names).

use std::fs::File;

use crate::model::{Argv, CollectorErrors, SharedStr, Timestamp};
use crate::os::first_sight::{FirstSightReads, first_sight};
use crate::os::linux::parse::procfs::{self, Statm, Status};
use crate::os::user_names::UserNames;
use crate::workload::{self, ProcessFacts};

use super::cgroup_paths::CgroupPaths;
use super::library_rescan::LibraryScan;
use super::proc_reader::ProcReader;
use super::tracker::TrackedProcess;
use crate::os::read_failure::ReadFailure;

/// Everything that reads: the `/proc` reader and what is read once.
#[derive(Debug)]
pub(super) struct Io {
    pub(super) reader: ProcReader,
    pub(super) page_size: u64,
    pub(super) clock_ticks: u64,
    /// `btime` of `/proc/stat`, seconds since the epoch; read on the first
    /// sample (outer `None` until then).
    pub(super) boot_time: Option<Option<u64>>,
    pub(super) users: UserNames,
    /// The memory-cgroup paths of the tracked processes, interned.
    pub(super) cgroups: CgroupPaths,
}

impl Io {
    /// A system file's path, for error messages.
    pub(super) fn root_file(&self, rel: &str) -> String {
        self.reader.root().join(rel).display().to_string()
    }

    /// The last pid handed out, from `/proc/loadavg`; `None` if unreadable.
    pub(super) fn read_last_pid(&mut self) -> Option<u32> {
        self.reader
            .read_root("loadavg")
            .ok()
            .and_then(procfs::parse_last_pid)
    }

    /// `statm` of a pid, in pages, and the open file for keeping.
    #[inline]
    pub(super) fn read_statm(&mut self, pid: u32) -> Result<(Statm, File), ReadFailure> {
        let file = self.reader.open_pid(pid, "statm")?;
        let statm = self.read_held_statm(&file)?;
        Ok((statm, file))
    }

    /// `statm` re-read through a kept file.
    #[inline]
    pub(super) fn read_held_statm(&mut self, file: &File) -> Result<Statm, ReadFailure> {
        let data = self.reader.read_held(file)?;
        procfs::parse_statm(data).ok_or(ReadFailure::Unreadable)
    }

    /// `stat` of a pid: (start ticks, ppid, is kernel thread).
    pub(super) fn read_stat_identity(&mut self, pid: u32) -> Result<(u64, u32, bool), ReadFailure> {
        let data = self.reader.read_pid(pid, "stat")?;
        let st = procfs::parse_stat(data).ok_or(ReadFailure::Unreadable)?;
        Ok((st.start_ticks, st.ppid, st.is_kernel_thread()))
    }

    /// Everything read once per identity ([`first_sight`]'s policy), then
    /// the memory-cgroup path, the user name and the start time. `None` if
    /// the process was left out (counted).
    pub(super) fn first_sight(
        &mut self,
        pid: u32,
        statm: Statm,
        tick: u64,
        errors: &mut CollectorErrors,
    ) -> Option<TrackedProcess> {
        let mut reads = ProcReads {
            reader: &mut self.reader,
            pid,
        };
        let seen = first_sight(&mut reads, errors)?;
        let stat = seen.identity;
        let name = SharedStr::from(seen.name);
        if stat.kernel_thread {
            return Some(TrackedProcess {
                start: stat.start,
                seen: tick,
                kernel_thread: true,
                ppid: stat.ppid,
                name,
                ..TrackedProcess::default()
            });
        }
        let cgroup = self.cgroups.read(&mut self.reader, pid, None);
        let status = seen.owner;
        let uid = status.map(|s| s.uid);
        let user = uid.and_then(|uid| self.users.name(uid));
        let started_at = self.boot_time.flatten().map(|boot| {
            // proc(5) stat field 22: start time in clock ticks after boot.
            let ms = stat.start.saturating_mul(1000) / self.clock_ticks;
            Timestamp(boot.saturating_mul(1000).saturating_add(ms))
        });
        let mut t = TrackedProcess {
            start: stat.start,
            seen: tick,
            ppid: stat.ppid,
            uid,
            user,
            name,
            exe: seen.exe.map(SharedStr::from),
            argv: seen.argv,
            started_at,
            statm,
            statm_tick: tick,
            forked: stat.forked,
            cgroup,
            workload: seen.workload,
            ..TrackedProcess::default()
        };
        if let Some(status) = status {
            self.set_status(&mut t, status, tick);
        }
        if stat.forked {
            t.fork_baseline = Some(t.own_footprint(tick, self.page_size).0);
        }
        let wants_scan = workload::wants_library_scan(&ProcessFacts {
            name: &t.name,
            exe: t.exe.as_deref(),
            argv: &t.argv,
            libraries: &[],
        });
        if wants_scan {
            // Scanned off this path, by the library thread.
            t.scan = Some(LibraryScan::first());
        }
        Some(t)
    }

    /// Record a full `status` read.
    pub(super) fn set_status(&mut self, t: &mut TrackedProcess, status: Status, tick: u64) {
        if t.uid != Some(status.uid) {
            t.uid = Some(status.uid);
            t.user = self.users.name(status.uid);
        }
        t.status = Some(status);
        t.status_tick = tick;
        t.status_read_tick = tick;
        t.status_statm = Some(t.statm);
    }
}

/// What `stat` says of a process at first sight.
#[derive(Debug)]
pub(super) struct StatIdentity {
    start: u64,
    ppid: u32,
    comm: String,
    kernel_thread: bool,
    forked: bool,
}

/// The first-sight reads of one pid under `/proc`: `stat`, the `exe` link,
/// `status` and a bounded `cmdline`.
struct ProcReads<'a> {
    reader: &'a mut ProcReader,
    pid: u32,
}

impl FirstSightReads for ProcReads<'_> {
    type Identity = StatIdentity;
    type Owner = Status;

    fn identity(&mut self) -> Result<StatIdentity, ReadFailure> {
        let data = self.reader.read_pid(self.pid, "stat")?;
        let st = procfs::parse_stat(data).ok_or(ReadFailure::Unreadable)?;
        Ok(StatIdentity {
            start: st.start_ticks,
            ppid: st.ppid,
            comm: String::from_utf8_lossy(st.comm).into_owned(),
            kernel_thread: st.is_kernel_thread(),
            forked: st.forked_without_exec(),
        })
    }

    fn is_kernel_thread(identity: &StatIdentity) -> bool {
        identity.kernel_thread
    }

    fn exe(&mut self) -> Result<Option<String>, ReadFailure> {
        // Unreadable for other users' processes unless root, and for
        // zombies (ENOENT, as for a process that is gone): that is normal,
        // not a collector error, and the process stays.
        Ok(self.reader.read_pid_link(self.pid, "exe").ok())
    }

    fn owner(&mut self, _: &StatIdentity) -> Result<Status, ReadFailure> {
        let data = self.reader.read_pid(self.pid, "status")?;
        procfs::parse_status(data).ok_or(ReadFailure::Unreadable)
    }

    fn argv(&mut self, _: Option<&Status>) -> Result<Argv, ReadFailure> {
        // Bounded: a user can give a process megabytes of arguments.
        let data = self
            .reader
            .read_pid_prefix(self.pid, "cmdline", procfs::CMDLINE_READ)?;
        Ok(Argv::from(procfs::parse_cmdline(data)))
    }

    /// `comm`, the kernel's 15-byte name: Linux has no longer one to read.
    fn name(identity: &mut StatIdentity, _exe: Option<&str>) -> String {
        std::mem::take(&mut identity.comm)
    }
}
