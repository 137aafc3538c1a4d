//! Whether a server's token may be sent to the address its runtime file
//! names.
//!
//! A runtime file outlives a crashed server, and its port is then free for
//! anyone to listen on: a token sent there goes to whoever took the port,
//! and lets them run code as the file's owner. So before each request:
//!
//! 1. the pid the file names must be alive and run as the file's owner
//!    (for a file root owns, any user): a pid that is gone is a stale file,
//!    one that runs as someone else was reused;
//! 2. the socket that will take the connection must be the owner's. Linux
//!    lists every listening socket with its uid (`/proc/net/tcp{,6}`), and
//!    every one listening where the connection arrives (the address, or a
//!    wildcard) must belong to the file's owner. macOS lists no owners; it
//!    lists a process's descriptors, and the file's (checked) pid itself
//!    must hold a socket listening there.
//!
//! Whatever cannot be checked (no owner, no pid, a table that cannot be
//! read, an OS that tells nothing) withholds the token, with the reason.
//! [`judge_pid`] and [`judge_listeners`] decide from the facts;
//! [`check`] gathers them from [`crate::os`].

use std::io;
use std::net::IpAddr;

use crate::os::process_owner;
use crate::os::sockets::{self, Listeners};

/// Check that a server whose runtime file is owned by `owner` and names
/// `pid` may be sent its token at `ip`:`port`. `Err` says why not.
pub fn check(owner: Option<u32>, pid: Option<u32>, ip: IpAddr, port: u16) -> Result<(), String> {
    let owner = owner.ok_or_else(|| {
        "the file's owner is unknown on this OS, so whose port it names cannot be checked"
            .to_string()
    })?;
    let pid = pid.ok_or_else(|| {
        "the file names no pid, so whether its server still runs cannot be checked".to_string()
    })?;
    judge_pid(owner, pid, process_owner::uid_of(pid))?;
    judge_listeners(owner, pid, port, sockets::listeners(ip, port, pid))
}

/// The verdict on the file's pid, from `pid_uid` (who runs it: `None` for
/// no such process).
pub fn judge_pid(owner: u32, pid: u32, pid_uid: io::Result<Option<u32>>) -> Result<(), String> {
    match pid_uid {
        Ok(None) => Err(format!(
            "the server's pid {pid} is gone: a stale runtime file"
        )),
        Ok(Some(uid)) if owner == 0 || uid == owner => Ok(()),
        Ok(Some(uid)) => Err(format!(
            "the server's pid {pid} runs as uid {uid}, not as the file's owner uid {owner}: \
             a stale runtime file whose pid was reused"
        )),
        Err(e) => Err(format!("cannot tell who runs the server's pid {pid}: {e}")),
    }
}

/// The verdict on who listens on `port`, for a file of `owner` naming `pid`.
pub fn judge_listeners(
    owner: u32,
    pid: u32,
    port: u16,
    listeners: io::Result<Listeners>,
) -> Result<(), String> {
    match listeners {
        Ok(Listeners::Owners(uids)) if uids.is_empty() => Err(format!(
            "nothing listens on port {port}: a stale runtime file, or the server moved"
        )),
        Ok(Listeners::Owners(uids)) => match uids.iter().find(|&&uid| uid != owner) {
            Some(other) => Err(format!(
                "port {port} is held by uid {other}, not the file's owner uid {owner}"
            )),
            None => Ok(()),
        },
        Ok(Listeners::HeldByPid(true)) => Ok(()),
        Ok(Listeners::HeldByPid(false)) => Err(format!(
            "the server's pid {pid} does not listen on port {port}"
        )),
        Ok(Listeners::Unknown) => Err(format!(
            "this OS does not tell headroom who listens on port {port}"
        )),
        Err(e) => Err(format!("cannot tell who listens on port {port}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_pid_of_the_owner_passes() {
        assert_eq!(judge_pid(1000, 42, Ok(Some(1000))), Ok(()));
    }

    #[test]
    fn a_gone_pid_is_a_stale_file() {
        let e = judge_pid(1000, 42, Ok(None)).unwrap_err();
        assert_eq!(e, "the server's pid 42 is gone: a stale runtime file");
    }

    #[test]
    fn a_pid_of_another_user_was_reused() {
        let e = judge_pid(1000, 42, Ok(Some(1001))).unwrap_err();
        assert!(
            e.contains("runs as uid 1001, not as the file's owner uid 1000"),
            "{e}"
        );
    }

    #[test]
    fn a_root_file_may_name_any_users_pid() {
        assert_eq!(judge_pid(0, 42, Ok(Some(1001))), Ok(()));
    }

    #[test]
    fn an_unreadable_pid_withholds_the_token() {
        let e = judge_pid(1000, 42, Err(io::Error::other("EPERM"))).unwrap_err();
        assert!(
            e.contains("cannot tell who runs the server's pid 42: EPERM"),
            "{e}"
        );
    }

    #[test]
    fn every_listener_must_be_the_owners() {
        assert_eq!(
            judge_listeners(1000, 42, 8888, Ok(Listeners::Owners(vec![1000, 1000]))),
            Ok(())
        );
        let e =
            judge_listeners(1000, 42, 8888, Ok(Listeners::Owners(vec![1000, 65534]))).unwrap_err();
        assert_eq!(
            e,
            "port 8888 is held by uid 65534, not the file's owner uid 1000"
        );
    }

    #[test]
    fn a_root_file_needs_a_root_listener() {
        let e = judge_listeners(0, 42, 8888, Ok(Listeners::Owners(vec![1000]))).unwrap_err();
        assert!(
            e.contains("held by uid 1000, not the file's owner uid 0"),
            "{e}"
        );
    }

    #[test]
    fn no_listener_is_a_stale_file() {
        let e = judge_listeners(1000, 42, 8888, Ok(Listeners::Owners(vec![]))).unwrap_err();
        assert!(e.starts_with("nothing listens on port 8888"), "{e}");
    }

    #[test]
    fn on_macos_the_pid_itself_must_listen() {
        assert_eq!(
            judge_listeners(1000, 42, 8888, Ok(Listeners::HeldByPid(true))),
            Ok(())
        );
        let e = judge_listeners(1000, 42, 8888, Ok(Listeners::HeldByPid(false))).unwrap_err();
        assert_eq!(e, "the server's pid 42 does not listen on port 8888");
    }

    #[test]
    fn what_cannot_be_checked_withholds_the_token() {
        let e = judge_listeners(1000, 42, 8888, Ok(Listeners::Unknown)).unwrap_err();
        assert!(e.contains("does not tell"), "{e}");
        let e = judge_listeners(1000, 42, 8888, Err(io::Error::other("EACCES"))).unwrap_err();
        assert!(
            e.contains("cannot tell who listens on port 8888: EACCES"),
            "{e}"
        );
        let e = check(None, Some(1), "127.0.0.1".parse().unwrap(), 1).unwrap_err();
        assert!(e.contains("owner is unknown"), "{e}");
        let e = check(Some(0), None, "127.0.0.1".parse().unwrap(), 1).unwrap_err();
        assert!(e.contains("names no pid"), "{e}");
    }
}
