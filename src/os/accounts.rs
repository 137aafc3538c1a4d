//! Which uids belong to system accounts: root and the accounts that system
//! services run as (`sshd`, `messagebus`, `_windowserver`), as opposed to
//! the accounts of people.
//!
//! `[protect]` protects processes by name or executable path only when they
//! run as one of these: anyone can name a process `sshd`, and a user can even
//! make `/proc/[pid]/exe` show a root-owned path (a bind mount in a mount
//! namespace of their own), but only root can start a process as a system
//! account.

/// The highest uid of a system account on this platform, the default of
/// `[protect] system_uid_max`.
///
/// - Linux: 999. `SYS_UID_MAX` in `/etc/login.defs` as shadow-utils ships
///   it (Debian, Ubuntu, Fedora, Arch); people's accounts start at
///   `UID_MIN` 1000. `nobody` (65534) is not a system account here: it is
///   where unprivileged work runs, and it can be anyone's.
/// - macOS: 499. System accounts (`_www` 70, `_windowserver` 88, …) are
///   below 500 and users start at 501 (the user IDs that System Settings
///   assigns).
pub const SYSTEM_UID_MAX: u32 = if cfg!(target_os = "macos") { 499 } else { 999 };

/// True if `uid` is root or a system account, given the highest system uid.
pub fn is_system_account(uid: u32, system_uid_max: u32) -> bool {
    uid <= system_uid_max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_service_accounts_are_system_accounts() {
        assert!(is_system_account(0, SYSTEM_UID_MAX));
        assert!(is_system_account(88, SYSTEM_UID_MAX));
    }

    #[test]
    fn people_and_nobody_are_not() {
        assert!(!is_system_account(1000, SYSTEM_UID_MAX));
        assert!(!is_system_account(65534, SYSTEM_UID_MAX));
        assert!(!is_system_account(501, 499));
    }
}
