//! headroom: a memory-pressure daemon for machine-learning workloads.
//!
//! Data flows one way: a [`sample::Sampler`] produces [`model::Snapshot`]s,
//! [`history`] keeps the recent past, the [`policy`] turns config, history
//! and snapshot into decisions, the [`act`]uator carries them out, and the
//! [`journal`] records every [`event`]. The [`daemon`] publishes the result
//! as shared [`state`] that the CLI and HTTP read. [`config`] holds the
//! validated settings, [`workload`] says which processes are ML work and why.
//!
//! `unsafe` is denied here and allowed back only on the modules named `ffi`
//! (`os::ffi`, `os::linux::ffi`, `os::macos::ffi`, `local_time::ffi`): thin,
//! safe wrappers of the C calls, each `unsafe` block with a `// SAFETY:`
//! comment (`tests/hermetic/unsafe_code.rs` checks both).

#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod act;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod doctor;
pub mod event;
pub mod event_line;
pub mod history;
pub mod http;
pub mod journal;
pub mod jupyter;
pub mod local_time;
pub mod logging;
pub mod metrics;
pub mod model;
pub mod os;
pub mod permissions;
pub mod pipeline;
pub mod policy;
pub mod postmortem;
pub mod regular_file;
pub mod report;
pub mod sample;
pub mod service;
pub mod state;

pub mod workload;
