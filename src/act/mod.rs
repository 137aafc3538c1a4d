//! Acting on processes. [`identity`] answers, right before a signal, the
//! two questions that make sending it safe: is this still the process that
//! was sampled (its start time), and does it handle the signal. The
//! platform modules implement them.

pub mod identity;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "macos")]
mod macos;
