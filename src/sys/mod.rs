//! The platform layer: facts about the OS that more than one part of headroom
//! needs, behind functions that name no OS. `target_os` is allowed here (and
//! in `sample/` and `act/`), nowhere above.
//!
//! - [`accounts`]: which uids are root and system accounts (the ones name
//!   protection covers).
//! - [`fd_limit`]: the open-file limit, raised at start, and the share of it
//!   the HTTP server may use.
//! - [`residency`]: keeping the daemon resident and last in the OOM killer's
//!   choice while memory runs out.
//! - [`sockets`]: which user owns a TCP socket (a listener a Jupyter token is
//!   about to be sent to, the client end of a loopback HTTP connection), from
//!   the kernel's socket diagnostics ([`sock_diag`]) or its tables.
//! - [`state_dirs`]: where this platform keeps a service's state files.
//! - [`trusted_path`]: whether only root can change a path (with the
//!   macOS access control lists, [`macos_acl`]).
//! - [`passwd`]: the entries of `/etc/passwd` (user names, primary group,
//!   home), for the Linux sampler and the notifier.
//! - [`procfs`]: the pure parsers of the `/proc` files the Linux sampler,
//!   probe and actuator read (compiled and tested on every OS).
//! - [`cgroupfs`]: the pure parsers of the memory-cgroup file system (where
//!   it is mounted, limits, usage, `memory.stat`), for the ceilings.
//! - [`this_process`]: headroom's own effective uid (every privilege
//!   decision reads it here) and its threads' CPU priority.
//! - [`process_owner`]: whether a process exists and which user it runs as.
//! - [`proc_visibility`]: whether the OS hides other users' processes from a
//!   user (`/proc` mounted with `hidepid`).
//! - [`shm`]: the pure parsers of memory no process owns (SysV segments,
//!   tmpfs mounts, shared mappings and memfds); on Linux
//!   `linux_ffi_statx.rs` `stat`s the files it finds from cached
//!   attributes only, so that a FUSE file system cannot stall it.
//! - [`macos_libproc`]: the libproc calls and `bsd/sys/proc_info.h` socket
//!   layouts behind [`sockets`] on macOS (the layouts and their reading
//!   exist everywhere, so that they are tested everywhere).

pub mod accounts;
pub mod cgroupfs;
pub mod fd_limit;
#[cfg(unix)]
pub mod ffi_flock;
#[cfg(unix)]
pub mod ffi_fork;
#[cfg(target_os = "linux")]
pub(crate) mod linux_ffi_sock_diag;
#[cfg(target_os = "linux")]
pub(crate) mod linux_ffi_statx;
pub mod macos_acl;
#[cfg(target_os = "macos")]
pub(crate) mod macos_ffi_acl;
#[cfg(target_os = "macos")]
pub(crate) mod macos_ffi_proc;
pub mod macos_kinfo;
pub mod macos_libproc;
pub mod macos_proc_info;
#[cfg(target_os = "macos")]
pub(crate) mod macos_sysctl;
pub mod passwd;
pub mod proc_visibility;
pub mod process_owner;
pub mod procfs;
pub mod residency;
pub mod shm;
pub mod sock_diag;
pub mod sockets;
pub mod state_dirs;
pub mod this_process;
pub mod trusted_path;
