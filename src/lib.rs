//! headroom: a memory-pressure daemon for machine-learning workloads.
//!
//! Data flows one way: a [`sample::Sampler`] produces [`model::Snapshot`]s,
//! [`history`] keeps the recent past, and the [`daemon`] publishes both as
//! shared state that the CLI and HTTP read. [`config`] holds the validated
//! settings, [`workload`] says which processes are ML work and why.

pub mod cli;
pub mod config;
pub mod daemon;
pub mod history;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod model;
pub mod report;
pub mod sample;
pub mod state;
pub mod workload;
