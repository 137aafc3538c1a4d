//! The steps of a rule's ladder as configured: which signal, which hook.
//! Config parses into these, the policy schedules them and the actuator
//! carries them out, so they live below all three.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A signal a rule may send. Numbers come from the platform's libc: SIGUSR1
/// is 10 on Linux and 30 on macOS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SignalName {
    #[serde(rename = "SIGINT")]
    Int,
    #[serde(rename = "SIGUSR1")]
    Usr1,
    #[serde(rename = "SIGUSR2")]
    Usr2,
    #[serde(rename = "SIGTERM")]
    Term,
    #[serde(rename = "SIGKILL")]
    Kill,
}

impl SignalName {
    pub const ALL: [SignalName; 5] = [
        SignalName::Int,
        SignalName::Usr1,
        SignalName::Usr2,
        SignalName::Term,
        SignalName::Kill,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SignalName::Int => "SIGINT",
            SignalName::Usr1 => "SIGUSR1",
            SignalName::Usr2 => "SIGUSR2",
            SignalName::Term => "SIGTERM",
            SignalName::Kill => "SIGKILL",
        }
    }

    /// Parse `SIGINT`, `INT` or `sigint`.
    pub fn parse(s: &str) -> Option<Self> {
        let upper = s.trim().to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        Self::ALL
            .into_iter()
            .find(|sig| sig.as_str().strip_prefix("SIG") == Some(bare))
    }

    /// The signal number on this platform.
    pub fn number(self) -> i32 {
        match self {
            SignalName::Int => libc::SIGINT,
            SignalName::Usr1 => libc::SIGUSR1,
            SignalName::Usr2 => libc::SIGUSR2,
            SignalName::Term => libc::SIGTERM,
            SignalName::Kill => libc::SIGKILL,
        }
    }

    /// True for signals whose default action kills a process that does not
    /// catch them, and that a process can catch (all but SIGKILL).
    pub fn catchable(self) -> bool {
        self != SignalName::Kill
    }
}

impl std::fmt::Display for SignalName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of a ladder.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Action {
    /// Send a signal to the process (or its process group).
    Signal {
        signal: SignalName,
        /// Skip the step if the process does not catch the signal.
        require_handler: bool,
        /// Signal the whole process group instead of the process.
        process_group: bool,
    },
    /// Run a command with `HEADROOM_*` variables describing the process.
    Hook {
        command: PathBuf,
        args: Vec<String>,
        timeout: Duration,
    },
    /// A desktop notification where a user session exists.
    Notify,
}

impl Action {
    /// A short label for journals and metrics: `SIGINT`, `hook`, `notify`.
    pub fn label(&self) -> String {
        match self {
            Action::Signal { signal, .. } => signal.as_str().to_string(),
            Action::Hook { command, .. } => format!("hook {}", command.display()),
            Action::Notify => "notify".to_string(),
        }
    }

    /// The metric label value: `SIGINT`, `hook`, `notify`.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Signal { signal, .. } => signal.as_str(),
            Action::Hook { .. } => "hook",
            Action::Notify => "notify",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_parse_in_every_spelling() {
        assert_eq!(SignalName::parse("SIGINT"), Some(SignalName::Int));
        assert_eq!(SignalName::parse("int"), Some(SignalName::Int));
        assert_eq!(SignalName::parse("SigUsr1"), Some(SignalName::Usr1));
        assert_eq!(SignalName::parse("SIGHUP"), None);
        assert_eq!(SignalName::parse(""), None);
    }

    #[test]
    fn signal_numbers_come_from_the_platform() {
        assert_eq!(SignalName::Kill.number(), 9);
        assert_eq!(SignalName::Term.number(), 15);
        assert_eq!(SignalName::Int.number(), 2);
    }
}
