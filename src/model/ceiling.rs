//! Ceilings: the memory limits that stop a process before the machine does.
//!
//! A process in a memory cgroup (a container, a Kubernetes pod, a Slurm job,
//! a JupyterHub user's server, a systemd unit with `MemoryMax=`) is killed by
//! its cgroup's OOM killer when the cgroup reaches its limit, however much
//! memory the machine has left. Its ceiling is the tightest limited level
//! of its cgroup and the cgroups above it: the one with the least room.
//! The sampler reads each limited cgroup once per sample and lists it in
//! [`crate::model::Snapshot::ceilings`], with the cgroups of the processes
//! whose ceiling it is; what a process can still get is the smaller of the
//! machine's available memory and its ceiling's room
//! ([`crate::model::Snapshot::available_to`]).

use serde::{Deserialize, Serialize};

use super::SharedStr;

/// Which cgroup hierarchy a ceiling was read from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// Cgroup v1, the `memory` controller's hierarchy.
    #[default]
    V1,
    /// Cgroup v2, the unified hierarchy.
    V2,
}

impl CgroupVersion {
    /// The file that holds the hard limit.
    pub fn max_file(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "memory.limit_in_bytes",
            CgroupVersion::V2 => "memory.max",
        }
    }
}

/// A memory cgroup with a limit below the machine's memory, as read in one
/// sample: the ceiling of the processes in [`Ceiling::cgroups`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// The cgroup whose limit it is, as [`crate::model::ProcessSample::cgroup`]
    /// writes paths.
    pub path: SharedStr,
    pub version: CgroupVersion,
    /// The hard limit: `memory.max` (v2), `memory.limit_in_bytes` (v1).
    /// Reaching it calls the cgroup's OOM killer. `None` where only
    /// `memory.high` is set.
    pub max: Option<u64>,
    /// The v2 throttle, `memory.high`: above it the kernel reclaims hard and
    /// makes the cgroup's tasks wait on every allocation. Work there
    /// stalls, so it counts as a limit too.
    #[serde(default)]
    pub high: Option<u64>,
    /// Memory charged to the cgroup and everything below it:
    /// `memory.current` (v2), `memory.usage_in_bytes` (v1). It includes
    /// page cache and kernel memory, not only the processes' footprints.
    pub usage: u64,
    /// The page cache the kernel reclaims before it kills: the inactive
    /// file pages of the subtree (see `os::linux::parse::cgroupfs::reclaimable_file`).
    pub reclaimable: u64,
    /// The swap the cgroup may use in all: `memory.swap.max` (v2),
    /// `memory.memsw.limit_in_bytes` − `memory.limit_in_bytes` (v1); `None`
    /// where no swap limit is set (or the kernel does not account swap): the
    /// machine's free swap is the bound.
    #[serde(default)]
    pub swap_max: Option<u64>,
    /// The swap it uses: `memory.swap.current` (v2),
    /// `memory.memsw.usage_in_bytes` − `memory.usage_in_bytes` (v1).
    #[serde(default)]
    pub swap_used: Option<u64>,
    /// How often usage hit the limit: `memory.failcnt` (v1), the `max`
    /// count of `memory.events` (v2).
    #[serde(default)]
    pub limit_hits: Option<u64>,
    /// Processes its OOM killer killed: `oom_kill` of `memory.events` (v2)
    /// or `memory.oom_control` (v1, Linux 4.13 on).
    #[serde(default)]
    pub oom_kills: Option<u64>,
    /// The cgroups of the processes whose ceiling it is: itself and cgroups
    /// below it.
    #[serde(default)]
    pub cgroups: Vec<SharedStr>,
}

impl Ceiling {
    /// The limit that stops the cgroup first: the lower of `max` and `high`.
    pub fn limit(&self) -> u64 {
        match (self.max, self.high) {
            (Some(m), Some(h)) => m.min(h),
            (Some(l), None) | (None, Some(l)) => l,
            (None, None) => u64::MAX,
        }
    }

    /// The file the limit of [`Self::limit`] comes from.
    pub fn limit_file(&self) -> &'static str {
        match (self.max, self.high) {
            (Some(m), Some(h)) if h < m => "memory.high",
            (None, Some(_)) => "memory.high",
            _ => self.version.max_file(),
        }
    }

    /// What the cgroup can still take before its limit's reclaim fails:
    /// the limit less what reclaim cannot give back (usage − reclaimable
    /// page cache).
    pub fn room(&self) -> u64 {
        let kept = self.usage.saturating_sub(self.reclaimable.min(self.usage));
        self.limit().saturating_sub(kept)
    }

    /// Swap the cgroup can still fill, given the machine's free swap.
    pub fn swap_room(&self, machine_free_swap: u64) -> u64 {
        match self.swap_max {
            Some(max) => max
                .saturating_sub(self.swap_used.unwrap_or(0))
                .min(machine_free_swap),
            None => machine_free_swap,
        }
    }

    /// How much more the cgroup can hold before its OOM killer acts: its
    /// room in memory and what it may still swap out.
    pub fn headroom(&self, machine_free_swap: u64) -> u64 {
        self.room()
            .saturating_add(self.swap_room(machine_free_swap))
    }

    /// Whether this is the ceiling of processes in cgroup `path`.
    pub fn covers(&self, path: &SharedStr) -> bool {
        self.cgroups.iter().any(|c| c == path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn ceiling(max: u64, usage: u64, reclaimable: u64) -> Ceiling {
        Ceiling {
            path: "/lab".into(),
            version: CgroupVersion::V1,
            max: Some(max),
            high: None,
            usage,
            reclaimable,
            swap_max: None,
            swap_used: None,
            limit_hits: None,
            oom_kills: None,
            cgroups: vec!["/lab".into()],
        }
    }

    #[test]
    fn room_counts_reclaimable_cache_and_never_passes_the_limit() {
        let c = ceiling(2 * GIB, GIB + GIB / 2, GIB / 4);
        assert_eq!(c.room(), GIB / 2 + GIB / 4);
        // A limit lowered below what reclaim cannot give back: no room.
        assert_eq!(ceiling(GIB, 2 * GIB, GIB / 8).room(), 0);
        assert_eq!(ceiling(GIB, 2 * GIB, 3 * GIB / 2).room(), GIB / 2);
        // Cache larger than usage (a torn read): capped.
        assert_eq!(ceiling(GIB, GIB / 2, 4 * GIB).room(), GIB);
    }

    #[test]
    fn memory_high_below_max_is_the_limit() {
        let mut c = ceiling(4 * GIB, GIB, 0);
        c.version = CgroupVersion::V2;
        c.high = Some(2 * GIB);
        assert_eq!(c.limit(), 2 * GIB);
        assert_eq!(c.limit_file(), "memory.high");
        assert_eq!(c.room(), GIB);
        c.high = Some(8 * GIB);
        assert_eq!(c.limit_file(), "memory.max");
    }

    #[test]
    fn swap_room_is_bounded_by_the_cgroup_and_the_machine() {
        let mut c = ceiling(GIB, GIB, 0);
        assert_eq!(c.swap_room(3 * GIB), 3 * GIB, "no swap limit");
        c.swap_max = Some(GIB);
        c.swap_used = Some(GIB / 4);
        assert_eq!(c.swap_room(3 * GIB), 3 * GIB / 4);
        assert_eq!(c.swap_room(GIB / 8), GIB / 8);
        assert_eq!(c.headroom(GIB / 8), GIB / 8);
    }
}
