//! Linux's "memory is getting tight" notification: a PSI trigger on
//! `/proc/pressure/memory` ([`super::psi_trigger`]), awaited by the daemon
//! loop so that it samples at once. macOS exports the same names.

use super::psi_trigger::{PsiTrigger, TRIGGER_LEVEL};
use crate::model::PressureLevel;

/// The registered trigger, if any.
pub struct PressureWake {
    trigger: Option<PsiTrigger>,
}

impl PressureWake {
    /// Register the trigger: the wake, and what was set up or why nothing
    /// could be (the caller polls every tick then).
    pub fn open() -> (Self, Result<String, String>) {
        let path = std::path::Path::new("/proc/pressure/memory");
        match PsiTrigger::register(path) {
            Ok(t) => {
                let note = format!("PSI trigger \"{}\" on {}", t.spec(), path.display());
                (Self { trigger: Some(t) }, Ok(note))
            }
            Err(e) => (Self::none(), Err(e.to_string())),
        }
    }

    /// No notification.
    pub fn none() -> Self {
        Self { trigger: None }
    }

    /// True if a trigger is registered.
    pub fn is_active(&self) -> bool {
        self.trigger.is_some()
    }

    /// Wait for the next trigger; never returns if none is registered. The
    /// level is the least a trigger stands for ([`TRIGGER_LEVEL`]). An
    /// error drops the trigger.
    pub async fn next(&mut self) -> Result<Option<PressureLevel>, String> {
        if let Some(t) = self.trigger.as_mut() {
            if let Err(e) = t.wait().await {
                self.trigger = None;
                return Err(format!(
                    "PSI trigger stopped working: {e}; polling every tick"
                ));
            }
            return Ok(Some(TRIGGER_LEVEL));
        }
        std::future::pending().await
    }
}
