//! The macOS calls that need `unsafe`, one file per concern, each a safe
//! function or type that hands back plain values: Mach host statistics
//! ([`mach`]), libproc and the process sysctls ([`proc`]), `sysctlbyname`
//! ([`sysctl`]), extended ACLs ([`acl`]), IOKit ([`iokit`]), the dispatch
//! memory-pressure source ([`dispatch`]), the kqueue that watches
//! processes' exits ([`kqueue`]) and this process's groups ([`groups`]).
//! Every `unsafe` block carries its
//! `// SAFETY:` reasoning; the pure functions in `parse/` read what these
//! return.

pub mod acl;
pub mod dispatch;
pub mod groups;
pub mod iokit;
pub mod kqueue;
pub mod mach;
pub mod passwd;
pub mod proc;
pub mod sysctl;
