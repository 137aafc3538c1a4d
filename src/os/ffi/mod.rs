//! The thin POSIX calls both OSes make, one file per concern. Each is a safe
//! function that takes and returns plain values (`io::Result` for the C
//! convention of -1 and `errno`); every `unsafe` block says why it is sound
//! in a `// SAFETY:` comment. The decisions that use these calls (which pid
//! may be signalled, what limit to ask for) stay in the modules above, and
//! only [`fork`] (for `headroom-hog`) is seen outside the crate.

pub(crate) mod flock;
pub mod fork;
#[cfg(target_os = "linux")]
pub(crate) mod mlock;
#[cfg(target_os = "linux")]
pub(crate) mod priority;
pub(crate) mod rlimit;
pub(crate) mod signal;
pub(crate) mod stdio;
pub(crate) mod uid;
