//! Workload classification: which processes are ML work, and the evidence.

use crate::model::Workload;

/// What a sampler knows of a process when classifying it.
#[derive(Debug, Clone, Copy)]
pub struct ProcessFacts<'a> {
    pub name: &'a str,
    pub exe: Option<&'a str>,
    pub argv: &'a [String],
    /// File names (basenames) of shared libraries mapped into the process,
    /// where the platform can list them cheaply; empty otherwise.
    pub libraries: &'a [String],
}

/// Classify a process from its facts.
pub fn classify(_facts: &ProcessFacts<'_>) -> Workload {
    Workload::default()
}

/// True if the process's mapped libraries could reveal a framework that its
/// argv does not (a Python interpreter), so a sampler should list them.
pub fn wants_library_scan(_facts: &ProcessFacts<'_>) -> bool {
    false
}
