//! What the policy asks the actuator to do: one step of one rule's ladder,
//! aimed at one process identity.

use serde::Serialize;

use crate::event::ProcessRef;
use crate::model::Action;

/// The policy's request: carry out `action` (step `step` of `rule`) on `process`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub rule: String,
    pub process: ProcessRef,
    pub step: usize,
    pub action: Action,
    /// Log instead of acting (the rule's or the daemon's dry run, or a
    /// replay).
    pub dry_run: bool,
    /// Decided on a replayed snapshot ([`crate::model::Snapshot::replayed`]):
    /// its process is the trace's, never one of this machine's, and the
    /// actuator carries out nothing for it, whatever `dry_run` says.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
    /// The limit, in words, for hooks and notifications: `footprint > 8 GiB`.
    pub limit: String,
    /// Why now, in words: `footprint 9.1 GiB > 8 GiB`.
    pub reason: String,
    /// Whom the action may reach besides the target: what the actuator
    /// checks each member of a process group against.
    pub reach: super::Reach,
}
