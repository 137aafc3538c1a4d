//! Where this platform keeps a service's state files: the journal's
//! default place follows it.

/// How a platform lays out a service's state files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateDirs {
    /// FHS and XDG: `/var/lib` for root, `$XDG_STATE_HOME` (or
    /// `~/.local/state`) for a user.
    Xdg,
    /// `/Library/Application Support` for root, `~/Library/Application
    /// Support` for a user.
    MacOs,
}

/// This platform's layout.
pub fn state_dirs() -> StateDirs {
    if cfg!(target_os = "macos") {
        StateDirs::MacOs
    } else {
        StateDirs::Xdg
    }
}
