//! The Linux calls that need `unsafe`, one file per concern, each a safe
//! function that hands back plain values or owned descriptors, with a
//! `// SAFETY:` comment on every `unsafe` block. What they are used for is
//! decided in the modules above (`process`, `psi_trigger`, `nvml`,
//! `unowned`, `sampler`, `os::sockets`).

pub mod nvml;
pub mod pidfd;
pub mod psi;
pub mod sock_diag;
pub mod statx;
pub mod sysconf;
