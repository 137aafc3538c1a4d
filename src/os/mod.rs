//! Everything that talks to the operating system, and the only place that
//! names one. headroom runs on Linux and macOS; any other target fails to
//! compile here.
//!
//! - [`linux`] and [`macos`] export the same names for what each OS gives
//!   (see `docs/ARCHITECTURE.md`, "The OS layer"); [`native`] is the one for
//!   this build. Their `parse` modules, the pure parsers of what the OS
//!   returns (`/proc` and cgroup files, VM statistics, `kinfo_proc`, crash
//!   reports), are compiled on every OS, so that they are tested and fuzzed
//!   on Linux.
//! - The rest is shared by both: accounts and users ([`accounts`],
//!   [`passwd`], [`user_names`]), this process ([`this_process`],
//!   [`residency`], [`fd_limit`]), other processes ([`process_owner`],
//!   [`proc_visibility`], [`posix`]), sockets ([`sockets`]), paths only root
//!   can change ([`trusted_path`]) and where state files go ([`state_dirs`]).
//! - `unsafe` is allowed only in the modules named `ffi` (this one's and
//!   each OS's): thin, safe wrappers of the C calls, each `unsafe` block
//!   with its `// SAFETY:` reasoning; the crate root denies it everywhere
//!   else.

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
compile_error!("headroom runs on Linux and macOS only: build it for one of those targets");

pub mod linux;
pub mod macos;

#[cfg(target_os = "linux")]
pub use linux as native;
#[cfg(target_os = "macos")]
pub use macos as native;

pub mod accounts;
pub mod fd_limit;
#[allow(unsafe_code)]
pub mod ffi;
pub mod first_sight;
pub mod notification;
pub mod passwd;
pub mod posix;
pub mod proc_visibility;
pub mod process_facts;
pub mod process_owner;
pub mod read_failure;
pub mod residency;
pub mod sockets;
pub mod state_dirs;
pub mod this_process;
pub mod trusted_path;
pub mod user_names;
