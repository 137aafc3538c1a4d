//! What the OS records about how a process ended, read cheaply enough to
//! poll after every sample: kills for want of memory, crashes, GPU faults
//! and exit statuses (the records are in `model::exit`).
//!
//! [`ExitCauses`] is the one handle: [`exit_causes`] opens this OS's
//! records (`os::<os>::exit_records`: the kernel log and zombies on Linux;
//! zombies, jetsam's log lines and crash reports on macOS),
//! [`ExitCauses::poll`] returns what was recorded since the last poll and
//! the exit statuses of the suspects, [`ExitCauses::collectors`] its
//! sources, and [`ExitCauses::silence`] what the absence of a record
//! means here, for a post-mortem that found none.

use std::collections::HashSet;

pub use crate::model::exit::{Crash, Ended, ExitStatus, GpuFault, Killer, MemoryKill, Observed};
use crate::model::{Collector, ProcessId, Snapshot};
use crate::os::native::exit_records::ExitRecords;

/// This OS's record of how processes end; see the module documentation.
pub struct ExitCauses {
    records: ExitRecords,
    silence: String,
}

/// Open this OS's record of how processes end. The second value says what
/// was opened, or why nothing could be (to be logged once).
pub fn exit_causes() -> (ExitCauses, Result<String, String>) {
    let (records, silence, note) = ExitRecords::open();
    (ExitCauses { records, silence }, note)
}

impl ExitCauses {
    /// A source that never reports a kill; `why` is what that means, for
    /// post-mortems (tests, replayed traces).
    pub fn none(why: &str) -> Self {
        Self {
            records: ExitRecords::none(why),
            silence: why.to_string(),
        }
    }

    /// What it means that no kill of a process was recorded: the words a
    /// post-mortem with an unknown cause gives as `how`.
    pub fn silence(&self) -> &str {
        &self.silence
    }

    /// Its sources, for the snapshot's collector list and `headroom
    /// doctor` (the kernel log on Linux; the jetsam log and crash reports
    /// on macOS).
    pub fn collectors(&self) -> Vec<&dyn Collector> {
        self.records.collectors()
    }

    /// What was recorded since the last poll (stamped as read at the time
    /// `snap` was taken), and which of `suspects` (processes listed with no
    /// memory left) are dead and how they ended. `tracked` are the
    /// processes post-mortems watch. Never blocks; a failing read is counted
    /// and logged, never fatal.
    pub fn poll(
        &mut self,
        snap: &Snapshot,
        tracked: &HashSet<ProcessId>,
        suspects: &[ProcessId],
    ) -> Observed {
        self.records.poll(snap, tracked, suspects)
    }
}
