//! The actuator's own `headroom doctor` checks: can it read what it checks
//! before every signal (the process's identity, the signals it catches)?
//! Which desktop notifier would it run, if any ([`notifier`])?

use crate::model::Check;

/// Can the actuator read this very process's identity and handlers?
pub fn signals() -> Check {
    crate::os::native::process::signals_check()
}

/// The notifier a `{ notify = true }` step would run, found the way the
/// actuator finds it (`notify::find_notifier` in
/// `notify::NOTIFIER_DIRS`, never on `PATH`): `ok` with its path,
/// `warn` when one is there but others could change it, `n/a` when there is
/// none (a machine without a desktop).
pub fn notifier() -> Check {
    use super::notify::{NOTIFIER, NOTIFIER_DIRS, find_notifier};
    let name = NOTIFIER;
    let dirs: Vec<std::path::PathBuf> = NOTIFIER_DIRS.iter().map(Into::into).collect();
    let euid = crate::os::this_process::effective_uid();
    match find_notifier(name, &dirs, euid) {
        Ok(path) => Check::ok(
            "notifier",
            format!(
                "{} shows {{ notify = true }} steps; only root can change it",
                path.display()
            ),
        ),
        Err(why) if why.starts_with("no trusted") => Check::warn(
            "notifier",
            why,
            "make it and its directories root's alone (chown root, chmod go-w); until then \
             notifications are not shown",
        ),
        Err(why) => Check::not_applicable(
            "notifier",
            format!("{why}: {{ notify = true }} steps show nothing on this machine"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CheckStatus;

    /// On Linux and macOS the actuator reads this very process's identity
    /// and handlers; the check must pass here.
    #[test]
    fn the_actuator_can_read_this_process() {
        let check = signals();
        assert_eq!(check.name, "signals");
        assert_eq!(check.status, CheckStatus::Ok, "{check:?}");
    }

    /// The notifier check names what it found, or where it looked.
    #[test]
    fn the_notifier_check_names_the_file_or_where_it_looked() {
        let check = notifier();
        assert_eq!(check.name, "notifier");
        assert!(
            check.detail.contains("/usr/bin"),
            "names /usr/bin either way: {check:?}"
        );
        assert_ne!(check.status, CheckStatus::Fail, "{check:?}");
    }
}
