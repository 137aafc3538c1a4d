//! The `[postmortem]` section, validated: what headroom does besides
//! journaling when a watched process ends (a Jupyter kernel, an ML job, or a
//! process it acted on).

use serde::Serialize;

use super::raw::RawPostmortem;

/// What to do with a post-mortem. Every field has a default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PostmortemConfig {
    /// Show a desktop notification for each post-mortem, to the user who ran
    /// the process. Default false: every post-mortem is journaled and shown by
    /// `headroom events` and the status page either way.
    pub notify: bool,
}

/// Fills in defaults; a boolean needs no other check.
pub(crate) fn validate(raw: RawPostmortem) -> PostmortemConfig {
    PostmortemConfig {
        notify: raw.notify.unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;

    #[test]
    fn notify_is_off_unless_asked_for() {
        let off = Config::from_toml_str("[postmortem]\n", "t.toml").unwrap();
        assert!(!off.postmortem.notify);
        let on = Config::from_toml_str("[postmortem]\nnotify = true\n", "t.toml").unwrap();
        assert!(on.postmortem.notify);
    }
}
