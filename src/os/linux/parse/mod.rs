//! The pure parsers of what Linux gives (compiled and tested on every OS):
//! the `/proc` files ([`procfs`]), the memory-cgroup file system
//! ([`cgroupfs`]), memory no process owns ([`shm`]) and socket diagnostics
//! ([`sock_diag`]).

pub mod cgroupfs;
pub mod kmsg_access;
pub mod procfs;
pub mod shm;
pub mod sock_diag;
