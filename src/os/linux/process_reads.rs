//! What the Linux sampler reads about one process: `statm` (through a kept
//! file or not), the identity in `stat`, and everything read once at first
//! sight of a pid (`stat`, `status`, a bounded `cmdline`, the `exe` link and
//! the memory-cgroup path; where the classifier asks for `maps`, the process
//! is marked for the library thread). [`Io`] holds the `/proc` reader and
//! the facts read once for the whole sampler (page size, clock ticks, boot
//! time, user names).

use std::fs::File;

use crate::model::{Argv, CollectorErrors, SharedStr, Timestamp};
use crate::os::linux::parse::procfs::{self, Statm, Status};
use crate::os::user_names::{PasswdFile, UserNames};
use crate::workload::{self, ProcessFacts};

use super::cgroup_paths::CgroupPaths;
use super::library_rescan::LibraryScan;
use super::proc_reader::{Failure, ProcReader};
use super::tracker::TrackedProcess;

/// Everything that reads: the `/proc` reader and what is read once.
#[derive(Debug)]
pub(super) struct Io {
    pub(super) reader: ProcReader,
    pub(super) page_size: u64,
    pub(super) clock_ticks: u64,
    /// `btime` of `/proc/stat`, seconds since the epoch; read on the first
    /// sample (outer `None` until then).
    pub(super) boot_time: Option<Option<u64>>,
    pub(super) users: UserNames<PasswdFile>,
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
    pub(super) fn read_statm(&mut self, pid: u32) -> Result<(Statm, File), Failure> {
        let file = self.reader.open_pid(pid, "statm")?;
        let statm = self.read_held_statm(&file)?;
        Ok((statm, file))
    }

    /// `statm` re-read through a kept file.
    #[inline]
    pub(super) fn read_held_statm(&mut self, file: &File) -> Result<Statm, Failure> {
        let data = self.reader.read_held(file)?;
        procfs::parse_statm(data).ok_or(Failure::Unreadable)
    }

    /// `stat` of a pid: (start ticks, ppid, is kernel thread).
    pub(super) fn read_stat_identity(&mut self, pid: u32) -> Result<(u64, u32, bool), Failure> {
        let data = self.reader.read_pid(pid, "stat")?;
        let st = procfs::parse_stat(data).ok_or(Failure::Unreadable)?;
        Ok((st.start_ticks, st.ppid, st.is_kernel_thread()))
    }

    /// Everything read once per identity. `None` if the process vanished or
    /// its `stat`/`status` could not be read or parsed (counted).
    pub(super) fn first_sight(
        &mut self,
        pid: u32,
        statm: Statm,
        tick: u64,
        errors: &mut CollectorErrors,
    ) -> Option<TrackedProcess> {
        let (start, ppid, name, kernel_thread, forked) = match self.reader.read_pid(pid, "stat") {
            Ok(data) => match procfs::parse_stat(data) {
                Some(st) => (
                    st.start_ticks,
                    st.ppid,
                    SharedStr::from(String::from_utf8_lossy(st.comm).into_owned()),
                    st.is_kernel_thread(),
                    st.forked_without_exec(),
                ),
                None => {
                    Failure::Unreadable.count(errors);
                    return None;
                }
            },
            Err(f) => {
                f.count(errors);
                return None;
            }
        };
        if kernel_thread {
            return Some(TrackedProcess {
                start,
                seen: tick,
                kernel_thread,
                ppid,
                name,
                ..TrackedProcess::default()
            });
        }
        let status = match self.reader.read_pid(pid, "status") {
            Ok(data) => match procfs::parse_status(data) {
                Some(status) => Some(status),
                None => {
                    Failure::Unreadable.count(errors);
                    return None;
                }
            },
            // Keep the process with what statm and stat gave.
            Err(Failure::Denied) => {
                Failure::Denied.count(errors);
                None
            }
            Err(f) => {
                f.count(errors);
                return None;
            }
        };
        // Bounded: a user can give a process megabytes of arguments.
        let argv = match self
            .reader
            .read_pid_prefix(pid, "cmdline", procfs::CMDLINE_READ)
        {
            Ok(data) => Argv::from(procfs::parse_cmdline(data)),
            Err(Failure::Vanished) => {
                Failure::Vanished.count(errors);
                return None;
            }
            Err(f) => {
                f.count(errors);
                Argv::default()
            }
        };
        // Unreadable for other users' processes unless root, and for
        // zombies: that is normal, not a collector error.
        let exe = self
            .reader
            .read_pid_link(pid, "exe")
            .ok()
            .map(SharedStr::from);
        let cgroup = self.cgroups.read(&mut self.reader, pid, None);
        let uid = status.map(|s| s.uid);
        let user = uid.and_then(|uid| self.users.name(&uid));
        let started_at = self.boot_time.flatten().map(|boot| {
            // proc(5) stat field 22: start time in clock ticks after boot.
            let ms = start.saturating_mul(1000) / self.clock_ticks;
            Timestamp(boot.saturating_mul(1000).saturating_add(ms))
        });
        let mut t = TrackedProcess {
            start,
            seen: tick,
            ppid,
            uid,
            user,
            name,
            exe,
            argv,
            started_at,
            statm,
            forked,
            cgroup,
            ..TrackedProcess::default()
        };
        if let Some(status) = status {
            self.set_status(&mut t, status, tick);
        }
        if forked {
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
        t.workload = t.classify();
        Some(t)
    }

    /// Record a full `status` read.
    pub(super) fn set_status(&mut self, t: &mut TrackedProcess, status: Status, tick: u64) {
        if t.uid != Some(status.uid) {
            t.uid = Some(status.uid);
            t.user = self.users.name(&status.uid);
        }
        t.status = Some(status);
        t.status_tick = tick;
    }
}
