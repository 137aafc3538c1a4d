//! The ceiling collector: each sampled process's tightest memory-cgroup
//! limit ([`Ceiling`]), read from the cgroup file system once per distinct
//! cgroup per sample.
//!
//! The hierarchy's mount comes from `<proc root>/self/mountinfo` (the
//! daemon's own mount namespace); a process's memory path
//! ([`ProcessSample::cgroup`]) names v1's memory hierarchy where it is
//! mounted, else v2's. Each level from a process's cgroup up to (not
//! including) the root is read once per sample, however many processes
//! share it: the limits (v1 `memory.limit_in_bytes`, `memsw`,
//! `use_hierarchy`; v2 `memory.max`, `memory.high`, `memory.swap.max`) and,
//! where one limits, usage, `memory.stat`'s inactive file pages, swap and
//! the OOM and failure counters.
//!
//! The level with the least room is the ceiling; a limit at or above the
//! machine's memory is none. Limits and counters are re-read every
//! [`LIMITS_EVERY`] samples, a limited level's usage every sample; an
//! unlimited level costs nothing between (`benches/ceiling_cost.rs`,
//! figures in `BENCHMARKS.md`).
//!
//! Bounded against what other users can make: paths of at most
//! [`crate::os::linux::parse::procfs::CGROUP_PATH_MAX`] bytes, the
//! [`MAX_DEPTH`] levels nearest the root, [`MAX_LEVELS`] distinct levels a
//! sample (the rest skipped and said so in the collector's status), every
//! file read into one reused buffer of at most `MAX_FILE` bytes.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::model::{Ceiling, CgroupVersion, CollectorStatus, ProcessSample, SharedStr};
use crate::os::linux::parse::cgroupfs::{self, CgroupMount, CgroupMounts, Hierarchy, Unreachable};
use crate::report::format_bytes;
use crate::report::rate_limit::{self, RateLimit};

/// At most this many levels of one cgroup path are read.
pub const MAX_DEPTH: usize = 32;
/// At most this many distinct cgroup levels are read per sample.
pub const MAX_LEVELS: usize = 4096;
/// A level's limits (and its counters: limit hits, OOM kills) are read
/// again every this many samples; its usage and cache every sample. A limit
/// changed in between (`docker update`, `systemctl set-property`) is seen
/// within this many samples.
pub const LIMITS_EVERY: u64 = 10;
/// The most bytes read of one cgroup file (`memory.stat` is about 1.5 KiB).
const MAX_FILE: u64 = 64 * 1024;

/// The collector's name in [`CollectorStatus`] and `headroom doctor`.
pub const NAME: &str = "cgroups";

/// One cgroup level as read this sample.
#[derive(Debug, Clone)]
enum Level {
    /// No limit below the machine's memory (or gone since listed).
    Open,
    /// Limited: the figures, and for v1 whether it charges its children.
    Limited {
        ceiling: Ceiling,
        hierarchical: bool,
    },
    /// A file could not be read or parsed (counted, logged).
    Unreadable,
}

/// A level as kept between samples.
#[derive(Debug, Clone)]
struct Kept {
    level: Level,
    /// The sample its limits (and counters) were last read in.
    limits_at: u64,
    /// The sample it was last visited in: read, or its usage re-read.
    seen_at: u64,
}

/// What one sample found, for the status.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    cgroups: usize,
    processes: usize,
    outside: usize,
    skipped: usize,
    levels: usize,
    files: usize,
    /// Process cgroups under a ceiling.
    covered: usize,
}

/// See the module documentation.
#[derive(Debug)]
pub struct CeilingReader {
    mountinfo: PathBuf,
    /// Found on the first sample.
    mounts: Option<CgroupMounts>,
    /// The levels visited in recent samples, with what was read of them.
    levels: HashMap<String, Kept>,
    /// Samples taken, for [`LIMITS_EVERY`].
    sample: u64,
    /// Levels visited and files read this sample.
    visited: usize,
    files: usize,
    buf: String,
    errors: u64,
    last_error: Option<String>,
    error_log: RateLimit,
    tally: Tally,
    /// The ceiling with the least room this sample, in words.
    least_room: Option<String>,
}

impl CeilingReader {
    /// A reader of the hierarchies `<proc_root>/self/mountinfo` lists.
    pub fn new(proc_root: &Path) -> Self {
        Self {
            mountinfo: proc_root.join("self/mountinfo"),
            mounts: None,
            levels: HashMap::new(),
            sample: 0,
            visited: 0,
            files: 0,
            buf: String::new(),
            errors: 0,
            last_error: None,
            error_log: RateLimit::new(rate_limit::EVERY),
            tally: Tally::default(),
            least_room: None,
        }
    }

    /// A reader of the hierarchies `mounts` gives, whatever the mount table
    /// says (tests, benchmarks).
    pub fn with_mounts(mounts: CgroupMounts) -> Self {
        Self {
            mounts: Some(mounts),
            ..Self::new(Path::new("/nonexistent"))
        }
    }

    fn mounts(&mut self) -> &CgroupMounts {
        let path = &self.mountinfo;
        self.mounts.get_or_insert_with(|| {
            std::fs::read_to_string(path)
                .map(|text| cgroupfs::parse_mountinfo(&text))
                .unwrap_or_default()
        })
    }

    /// The ceilings of `processes` this sample; `total` is the machine's
    /// memory (a limit at or above it is not a ceiling).
    pub fn read(&mut self, processes: &[ProcessSample], total: u64) -> Vec<Ceiling> {
        let Some((hierarchy, mount)) = self.mounts().memory().map(|(h, m)| (h, m.clone())) else {
            return Vec::new();
        };
        self.sample += 1;
        self.visited = 0;
        self.files = 0;
        let mut tally = Tally::default();
        let mut out: Vec<Ceiling> = Vec::new();
        // The ceiling (index in `out`) of each distinct process cgroup.
        let mut done: HashMap<&str, Option<usize>> = HashMap::new();
        for p in processes {
            let Some(cgroup) = &p.cgroup else { continue };
            if let Some(found) = done.get(cgroup.as_str()) {
                tally.processes += usize::from(found.is_some());
                continue;
            }
            let found = self.ceiling_of(cgroup, hierarchy, &mount, total, &mut tally);
            let index = found.map(|ceiling| {
                let at = out.iter().position(|c| c.path == ceiling.path);
                let at = at.unwrap_or_else(|| {
                    out.push(ceiling);
                    out.len() - 1
                });
                out[at].cgroups.push(cgroup.clone());
                at
            });
            tally.processes += usize::from(index.is_some());
            done.insert(cgroup.as_str(), index);
        }
        // Levels no process is under any more are forgotten.
        let now = self.sample;
        self.levels.retain(|_, kept| kept.seen_at == now);
        tally.cgroups = out.len();
        tally.levels = self.visited;
        tally.files = self.files;
        tally.covered = out.iter().map(|c| c.cgroups.len()).sum();
        self.tally = tally;
        self.least_room = out.iter().min_by_key(|c| c.room()).map(|tightest| {
            format!(
                "; least room: {} in {} ({} limit {})",
                format_bytes(tightest.room()),
                crate::model::printable(&tightest.path),
                tightest.limit_file(),
                format_bytes(tightest.limit())
            )
        });
        out
    }

    /// The tightest limited level of `cgroup`, if any.
    fn ceiling_of(
        &mut self,
        cgroup: &SharedStr,
        hierarchy: Hierarchy,
        mount: &CgroupMount,
        total: u64,
        tally: &mut Tally,
    ) -> Option<Ceiling> {
        let all: Vec<&str> = cgroupfs::levels(cgroup).collect();
        // The levels nearest the root, where limits are set.
        let start = all.len().saturating_sub(MAX_DEPTH);
        let mut best: Option<Ceiling> = None;
        for (depth, level) in all[start..].iter().enumerate() {
            let now = self.sample;
            let kept = self.levels.get(*level);
            if kept.is_none_or(|k| k.seen_at != now) {
                if self.visited >= MAX_LEVELS {
                    tally.skipped += 1;
                    return best;
                }
                let dir = match cgroupfs::cgroup_dir(mount, level) {
                    Ok(dir) => dir,
                    Err(Unreachable::OutsideMount) => {
                        tally.outside += 1;
                        return None;
                    }
                    Err(Unreachable::Malformed) => return None,
                };
                // Limits change rarely: read again every LIMITS_EVERY
                // samples; usage every sample, for a limited level.
                let previous = kept
                    .filter(|k| now.saturating_sub(k.limits_at) < LIMITS_EVERY)
                    .map(|k| (k.level.clone(), k.limits_at));
                let (level_read, limits_at) = match previous {
                    Some((Level::Open, at)) => (Level::Open, at),
                    Some((
                        Level::Limited {
                            ceiling,
                            hierarchical,
                        },
                        at,
                    )) => (
                        self.reread_usage(&dir, ceiling, hierarchical, hierarchy),
                        at,
                    ),
                    _ => (self.read_level(&dir, level, hierarchy, total), now),
                };
                self.visited += 1;
                self.levels.insert(
                    (*level).to_string(),
                    Kept {
                        level: level_read,
                        limits_at,
                        seen_at: now,
                    },
                );
            }
            let Some(Kept {
                level:
                    Level::Limited {
                        ceiling,
                        hierarchical,
                    },
                ..
            }) = self.levels.get(*level)
            else {
                continue;
            };
            // `all` runs from the process's own cgroup up: depth 0 there.
            let own = start + depth == 0;
            if !own && !hierarchical {
                continue;
            }
            // The least room wins; on a tie, the deeper level (seen first).
            if best.as_ref().is_none_or(|b| ceiling.room() < b.room()) {
                best = Some(ceiling.clone());
            }
        }
        best
    }

    /// A limited level's usage, cache and swap read again, its limits and
    /// counters kept from the last full read.
    fn reread_usage(
        &mut self,
        dir: &Path,
        mut ceiling: Ceiling,
        hierarchical: bool,
        h: Hierarchy,
    ) -> Level {
        let read = (|| {
            let usage_file = match h {
                Hierarchy::V1 => "memory.usage_in_bytes",
                Hierarchy::V2 => "memory.current",
            };
            ceiling.usage = self.bytes(dir, usage_file)?;
            let stat = self.text(dir, "memory.stat")?;
            ceiling.reclaimable = cgroupfs::reclaimable_file(stat, h).unwrap_or(0);
            if ceiling.swap_used.is_some() {
                ceiling.swap_used = match h {
                    Hierarchy::V1 => self
                        .bytes(dir, "memory.memsw.usage_in_bytes")
                        .ok()
                        .map(|u| u.saturating_sub(ceiling.usage)),
                    Hierarchy::V2 => self.bytes(dir, "memory.swap.current").ok(),
                };
            }
            Ok(())
        })();
        match read {
            Ok(()) => Level::Limited {
                ceiling,
                hierarchical,
            },
            Err((_, e)) if e.kind() == io::ErrorKind::NotFound => Level::Open,
            Err((file, e)) => self.failed(dir, file, &e),
        }
    }

    /// Count, log (rate-limited) and keep a failed read.
    fn failed(&mut self, dir: &Path, file: &str, e: &io::Error) -> Level {
        self.errors = self.errors.saturating_add(1);
        let what = format!("{}: {e}", dir.join(file).display());
        if let Some(more) = self.error_log.due(Instant::now()) {
            tracing::warn!("cannot read a memory cgroup's limit: {what}{more}");
        }
        self.last_error = Some(what);
        Level::Unreadable
    }

    /// Read one level's files.
    fn read_level(&mut self, dir: &Path, level: &str, h: Hierarchy, total: u64) -> Level {
        match self.try_level(dir, level, h, total) {
            Ok(level) => level,
            // Gone since the process was listed: no limit this sample.
            Err((_, e)) if e.kind() == io::ErrorKind::NotFound => Level::Open,
            Err((file, e)) => self.failed(dir, file, &e),
        }
    }

    fn try_level(
        &mut self,
        dir: &Path,
        level: &str,
        h: Hierarchy,
        total: u64,
    ) -> Result<Level, (&'static str, io::Error)> {
        let limits = |v: Option<u64>| v.filter(|l| *l < total);
        let (version, max, high) = match h {
            Hierarchy::V1 => {
                let max = self.limit(dir, "memory.limit_in_bytes")?;
                (CgroupVersion::V1, limits(max), None)
            }
            Hierarchy::V2 => {
                let max = self.limit(dir, "memory.max")?;
                let high = self.limit(dir, "memory.high")?;
                (CgroupVersion::V2, limits(max), limits(high))
            }
        };
        if max.is_none() && high.is_none() {
            return Ok(Level::Open);
        }
        let mut ceiling = Ceiling {
            path: SharedStr::from(level),
            version,
            max,
            high,
            usage: 0,
            reclaimable: 0,
            swap_max: None,
            swap_used: None,
            limit_hits: None,
            oom_kills: None,
            cgroups: Vec::new(),
        };
        let mut hierarchical = true;
        let (usage_file, stat_key) = match h {
            Hierarchy::V1 => ("memory.usage_in_bytes", Hierarchy::V1),
            Hierarchy::V2 => ("memory.current", Hierarchy::V2),
        };
        ceiling.usage = self.bytes(dir, usage_file)?;
        let stat = self.text(dir, "memory.stat")?;
        ceiling.reclaimable = cgroupfs::reclaimable_file(stat, stat_key).unwrap_or(0);
        match h {
            Hierarchy::V1 => {
                // Only where the kernel accounts swap (swapaccount).
                if let (Ok(memsw_max), Ok(memsw_used)) = (
                    self.limit(dir, "memory.memsw.limit_in_bytes"),
                    self.bytes(dir, "memory.memsw.usage_in_bytes"),
                ) {
                    ceiling.swap_max =
                        memsw_max.map(|m| m.saturating_sub(ceiling.max.unwrap_or(0)));
                    ceiling.swap_used = Some(memsw_used.saturating_sub(ceiling.usage));
                }
                ceiling.limit_hits = self.bytes(dir, "memory.failcnt").ok();
                ceiling.oom_kills = self
                    .text(dir, "memory.oom_control")
                    .ok()
                    .and_then(|t| cgroupfs::keyed_value(t, "oom_kill"));
                hierarchical = self
                    .text(dir, "memory.use_hierarchy")
                    .map_or(true, |t| t.trim() != "0");
            }
            Hierarchy::V2 => {
                if let Ok(events) = self.text(dir, "memory.events") {
                    ceiling.limit_hits = cgroupfs::keyed_value(events, "max");
                    ceiling.oom_kills = cgroupfs::keyed_value(events, "oom_kill");
                }
                // Absent without swap accounting, and on the root.
                ceiling.swap_max = self.limit(dir, "memory.swap.max").ok().flatten();
                ceiling.swap_used = self.bytes(dir, "memory.swap.current").ok();
            }
        }
        Ok(Level::Limited {
            ceiling,
            hierarchical,
        })
    }

    /// One file's text, in the reused buffer.
    fn text(&mut self, dir: &Path, name: &'static str) -> Result<&str, (&'static str, io::Error)> {
        self.files += 1;
        self.buf.clear();
        File::open(dir.join(name))
            .and_then(|f| f.take(MAX_FILE).read_to_string(&mut self.buf))
            .map_err(|e| (name, e))?;
        Ok(&self.buf)
    }

    fn bytes(&mut self, dir: &Path, name: &'static str) -> Result<u64, (&'static str, io::Error)> {
        let text = self.text(dir, name)?;
        cgroupfs::parse_bytes(text)
            .map_err(|e| (name, io::Error::new(io::ErrorKind::InvalidData, e)))
    }

    fn limit(
        &mut self,
        dir: &Path,
        name: &'static str,
    ) -> Result<Option<u64>, (&'static str, io::Error)> {
        let text = self.text(dir, name)?;
        cgroupfs::parse_limit(text)
            .map_err(|e| (name, io::Error::new(io::ErrorKind::InvalidData, e)))
    }

    /// How the last read went, for metrics, the API and `headroom doctor`.
    pub fn status(&self) -> CollectorStatus {
        let Some((hierarchy, mount)) = self.mounts.as_ref().and_then(|m| m.memory()) else {
            return CollectorStatus {
                name: NAME.to_string(),
                up: false,
                detail: format!(
                    "no memory cgroup hierarchy is mounted ({} lists none): no process's \
                     memory limit (container, pod, Slurm job, systemd unit) is known",
                    self.mountinfo.display()
                ),
                errors: self.errors,
                applicable: false,
            };
        };
        let t = self.tally;
        let version = match hierarchy {
            Hierarchy::V1 => "cgroup v1 memory",
            Hierarchy::V2 => "cgroup v2",
        };
        let mut detail = format!(
            "{version} at {}: {} limited cgroup{} {} the ceiling of {} process cgroup{} \
             ({} level{} visited, {} file{} read this sample)",
            mount.point.display(),
            t.cgroups,
            if t.cgroups == 1 { "" } else { "s" },
            if t.cgroups == 1 { "is" } else { "are" },
            t.covered,
            if t.covered == 1 { "" } else { "s" },
            t.levels,
            if t.levels == 1 { "" } else { "s" },
            t.files,
            if t.files == 1 { "" } else { "s" },
        );
        if let Some(least_room) = &self.least_room {
            detail.push_str(least_room);
        }
        if t.outside > 0 {
            detail.push_str(&format!(
                "; {} cgroup{} outside the mounted part of the hierarchy (root {:?}): their \
                 limits are not visible here (mount the host's cgroup file system to see them)",
                t.outside,
                if t.outside == 1 { " is" } else { "s are" },
                mount.root
            ));
        }
        if t.skipped > 0 {
            detail.push_str(&format!(
                "; {} cgroup{} skipped this sample: more than {MAX_LEVELS} levels to read",
                t.skipped,
                if t.skipped == 1 { "" } else { "s" }
            ));
        }
        if let Some(e) = &self.last_error {
            detail.push_str(&format!("; last error: {}", crate::model::printable(e)));
        }
        CollectorStatus {
            name: NAME.to_string(),
            up: true,
            detail,
            errors: self.errors,
            applicable: true,
        }
    }
}

impl crate::model::Collector for CeilingReader {
    fn name(&self) -> &'static str {
        NAME
    }

    fn status(&self) -> Option<CollectorStatus> {
        Some(CeilingReader::status(self))
    }

    /// Whether the limits processes run under can be read here, from
    /// the mounts and this process's own cgroup, as a container sees them.
    fn doctor_check(&self) -> Option<crate::model::Check> {
        Some(super::container_view::cgroups_check(
            &super::container_view::View::read(),
        ))
    }
}
