//! [`ReadFailure`]: why reading something about a process failed, as every
//! sampler counts it in [`CollectorErrors`].
//!
//! Each OS sorts its own errors into it (Linux: [`ReadFailure::of`] for
//! `/proc` files; macOS: `parse::proc_info::libproc_failure` and
//! `procargs_failure` for libproc and sysctl errnos) and counts it with
//! [`ReadFailure::count`] or [`counted`].

use std::io;

use crate::model::CollectorErrors;

/// Why a per-process read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFailure {
    /// The process exited between being listed and being read (ENOENT or
    /// ESRCH, or an empty file where content is required).
    Vanished,
    /// Another user's process and headroom is not root, or `hidepid`
    /// (EACCES, EPERM).
    Denied,
    /// Anything else, or content that did not parse.
    Unreadable,
}

impl ReadFailure {
    /// The failure kind of a file read (a `/proc` file of a process that is
    /// gone answers ENOENT or ESRCH).
    pub fn of(e: &io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENOENT | libc::ESRCH) => ReadFailure::Vanished,
            Some(libc::EACCES | libc::EPERM) => ReadFailure::Denied,
            _ => match e.kind() {
                io::ErrorKind::NotFound => ReadFailure::Vanished,
                io::ErrorKind::PermissionDenied => ReadFailure::Denied,
                _ => ReadFailure::Unreadable,
            },
        }
    }

    /// Count this failure in its collector-error counter (saturating).
    #[inline]
    pub fn count(self, errors: &mut CollectorErrors) {
        let slot = match self {
            ReadFailure::Vanished => &mut errors.vanished,
            ReadFailure::Denied => &mut errors.permission_denied,
            ReadFailure::Unreadable => &mut errors.unreadable,
        };
        *slot = slot.saturating_add(1);
    }
}

/// The value of a read, or `None` with its failure counted.
#[inline]
pub fn counted<T>(read: Result<T, ReadFailure>, errors: &mut CollectorErrors) -> Option<T> {
    read.map_err(|f| f.count(errors)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_sorted_by_errno() {
        let f = |errno| ReadFailure::of(&io::Error::from_raw_os_error(errno));
        assert_eq!(f(libc::ENOENT), ReadFailure::Vanished);
        assert_eq!(f(libc::ESRCH), ReadFailure::Vanished);
        assert_eq!(f(libc::EACCES), ReadFailure::Denied);
        assert_eq!(f(libc::EPERM), ReadFailure::Denied);
        assert_eq!(f(libc::EIO), ReadFailure::Unreadable);
        let other = io::Error::new(io::ErrorKind::NotFound, "gone");
        assert_eq!(ReadFailure::of(&other), ReadFailure::Vanished);
    }

    #[test]
    fn each_failure_counts_in_its_own_counter() {
        let mut errors = CollectorErrors::default();
        ReadFailure::Vanished.count(&mut errors);
        ReadFailure::Denied.count(&mut errors);
        ReadFailure::Denied.count(&mut errors);
        assert_eq!(
            counted::<()>(Err(ReadFailure::Unreadable), &mut errors),
            None
        );
        assert_eq!(counted(Ok(7), &mut errors), Some(7));
        assert_eq!(
            (errors.vanished, errors.permission_denied, errors.unreadable),
            (1, 2, 1)
        );
        assert_eq!(errors.kernel_threads, 0);
    }

    #[test]
    fn counters_saturate() {
        let mut errors = CollectorErrors {
            unreadable: u64::MAX,
            ..CollectorErrors::default()
        };
        ReadFailure::Unreadable.count(&mut errors);
        assert_eq!(errors.unreadable, u64::MAX);
    }
}
