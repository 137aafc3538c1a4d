//! The points the history keeps: one of the system per snapshot, and per
//! tracked process identity a series of its footprint ([`ProcessTrack`]).
//! What the points say about growth is worked out in `trend.rs`.

use std::collections::VecDeque;

use serde::Serialize;

use crate::model::{Detail, PressureLevel, Snapshot, Timestamp};

/// One point of the system series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SystemPoint {
    pub at: Timestamp,
    pub total: u64,
    pub available: u64,
    pub used: u64,
    pub app: Option<u64>,
    pub wired: Option<u64>,
    pub compressed: Option<u64>,
    pub cached: Option<u64>,
    pub swap_used: u64,
    pub pressure: PressureLevel,
    /// PSI `some` avg10 where the OS has it.
    pub psi_some_avg10: Option<f64>,
    /// Sum of GPU memory used over all devices, where known.
    pub gpu_used: Option<u64>,
}

impl SystemPoint {
    pub(super) fn of(snap: &Snapshot) -> Self {
        let gpu_used = snap
            .gpus
            .iter()
            .filter_map(|g| g.memory_used)
            .reduce(|a, b| a.saturating_add(b));
        Self {
            at: snap.taken_at,
            total: snap.system.total,
            available: snap.system.available,
            used: snap.system.used,
            app: snap.system.app,
            wired: snap.system.wired,
            compressed: snap.system.compressed,
            cached: snap.system.cached,
            swap_used: snap.swap.used,
            pressure: snap.pressure.level,
            psi_some_avg10: snap.pressure.psi.map(|p| p.some.avg10),
            gpu_used,
        }
    }
}

/// One point of a process's series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProcessPoint {
    pub at: Timestamp,
    pub footprint: u64,
    pub gpu_memory: Option<u64>,
    /// Whether `footprint` was read in full or estimated: the two differ for
    /// the same process, so growth compares points of one kind only.
    #[serde(default)]
    pub detail: Detail,
}

/// The series of one process identity.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcessTrack {
    pub points: VecDeque<ProcessPoint>,
    /// Largest footprint seen while tracked.
    pub peak_footprint: u64,
    pub last_seen: Option<Timestamp>,
}

impl ProcessTrack {
    /// The latest point.
    pub fn last(&self) -> Option<&ProcessPoint> {
        self.points.back()
    }
}
