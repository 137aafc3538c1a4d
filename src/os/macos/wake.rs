//! macOS's "memory is getting tight" notification: a dispatch
//! memory-pressure source (`ffi/dispatch.rs`), awaited by the
//! daemon loop so that it samples at once. Linux exports the same names.

use super::ffi::dispatch::MemoryPressureSource;
use super::parse::pressure::level_from_dispatch_mask;
use crate::model::PressureLevel;

/// The dispatch source, if set up.
pub struct PressureWake {
    source: Option<MemoryPressureSource>,
}

impl PressureWake {
    /// Set up the dispatch source: the wake, and what was set up.
    pub fn open() -> (Self, Result<String, String>) {
        let note =
            "a dispatch memory-pressure source (the pressure sysctl is still read every tick)";
        (
            Self {
                source: Some(MemoryPressureSource::open()),
            },
            Ok(note.to_string()),
        )
    }

    /// No notification.
    pub fn none() -> Self {
        Self { source: None }
    }

    /// True if the source is set up.
    pub fn is_active(&self) -> bool {
        self.source.is_some()
    }

    /// Wait for the next event; never returns if there is no source. The
    /// level is the one the source names (`normal` when pressure went back
    /// down).
    pub async fn next(&mut self) -> Result<Option<PressureLevel>, String> {
        if let Some(source) = self.source.as_ref() {
            let level = level_from_dispatch_mask(source.wait().await);
            if let Some(level) = level {
                tracing::debug!("memory-pressure event: {level}");
            }
            return Ok(level);
        }
        std::future::pending().await
    }
}
