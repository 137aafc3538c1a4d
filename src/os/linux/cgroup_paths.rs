//! Each process's memory-cgroup path ([`ProcessSample::cgroup`]): read from
//! `/proc/[pid]/cgroup` at first sight, and again once every
//! [`VERIFY_PERIOD`] full ticks with the round-robin identity check, since
//! a process can be moved to another cgroup while it runs (systemd, Slurm
//! adopting an ssh session into a job, `cgclassify`, a container runtime's
//! `exec`).
//!
//! Paths are interned: the processes of one cgroup (a container, a Slurm
//! job, a pod) share one string, and a re-read that finds the path
//! unchanged allocates nothing. Strings no tracked process holds any more
//! are dropped after each full tick, so the set holds at most one entry
//! per distinct cgroup of live processes, each at most
//! [`procfs::CGROUP_PATH_MAX`] bytes.
//!
//! [`ProcessSample::cgroup`]: crate::model::ProcessSample::cgroup
//! [`VERIFY_PERIOD`]: super::VERIFY_PERIOD

use std::collections::HashSet;
use std::time::Instant;

use crate::model::SharedStr;
use crate::os::linux::parse::procfs::{self, CgroupPathError};
use crate::report::rate_limit::{self, RateLimit};

use super::proc_reader::ProcReader;
use crate::os::read_failure::ReadFailure;

/// The interned memory-cgroup paths of the tracked processes.
#[derive(Debug)]
pub(super) struct CgroupPaths {
    known: HashSet<SharedStr>,
    /// A path that is not kept (too long, not UTF-8) is logged at most
    /// once a minute: another user can make such paths at will.
    not_kept_log: RateLimit,
}

impl Default for CgroupPaths {
    fn default() -> Self {
        Self {
            known: HashSet::new(),
            not_kept_log: RateLimit::new(rate_limit::EVERY),
        }
    }
}

impl CgroupPaths {
    /// The memory-cgroup path of `pid`, `current` if unchanged. `None`
    /// where the file cannot be read (the process is gone: its other reads
    /// say so and count it), where the kernel lists no memory hierarchy, or
    /// where the path is not kept ([`CgroupPathError`], logged).
    pub(super) fn read(
        &mut self,
        reader: &mut ProcReader,
        pid: u32,
        current: Option<&SharedStr>,
    ) -> Option<SharedStr> {
        let data = match reader.read_pid(pid, "cgroup") {
            Ok(data) => data,
            Err(ReadFailure::Vanished | ReadFailure::Denied | ReadFailure::Unreadable) => {
                return None;
            }
        };
        match procfs::parse_memory_cgroup(data) {
            Ok(path) => Some(match current {
                Some(c) if **c == *path => c.clone(),
                _ => self.intern(path),
            }),
            Err(CgroupPathError::NoMemoryLine) => None,
            Err(e) => {
                if let Some(more) = self.not_kept_log.due(Instant::now()) {
                    tracing::warn!(
                        "/proc/{pid}/cgroup: the memory cgroup path is not kept ({e}); \
                         no cgroup limit is applied to the process{more}"
                    );
                }
                None
            }
        }
    }

    /// The one shared copy of `path`.
    fn intern(&mut self, path: &str) -> SharedStr {
        if let Some(known) = self.known.get(path) {
            return known.clone();
        }
        let shared = SharedStr::from(path);
        self.known.insert(shared.clone());
        shared
    }

    /// Drop the paths no process holds any more (after a full tick).
    pub(super) fn prune(&mut self) {
        self.known.retain(|path| path.holders() > 1);
    }

    /// Distinct paths held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.known.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_of_one_cgroup_share_one_string_until_none_holds_it() {
        let mut paths = CgroupPaths::default();
        let a = paths.intern("/kubepods/pod1/c1");
        let b = paths.intern("/kubepods/pod1/c1");
        assert!(SharedStr::ptr_eq(&a, &b));
        let c = paths.intern("/slurm/uid_1000/job_7");
        assert_eq!(paths.len(), 2);
        drop((a, b));
        paths.prune();
        assert_eq!(paths.len(), 1, "only the Slurm path is still held");
        drop(c);
        paths.prune();
        assert_eq!(paths.len(), 0);
    }

    #[test]
    fn this_process_path_is_read_from_proc() {
        let mut reader = ProcReader::new("/proc".into());
        let mut paths = CgroupPaths::default();
        let me = std::process::id();
        let expected = std::fs::read("/proc/self/cgroup")
            .ok()
            .and_then(|d| procfs::parse_memory_cgroup(&d).ok().map(str::to_owned));
        let read = paths.read(&mut reader, me, None);
        assert_eq!(read.as_deref(), expected.as_deref());
        if let Some(first) = read {
            let again = paths.read(&mut reader, me, Some(&first)).unwrap();
            assert!(
                SharedStr::ptr_eq(&first, &again),
                "unchanged: no new string"
            );
        }
    }
}
