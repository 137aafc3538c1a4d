//! The policy: pure decisions from config, history and the latest snapshot.

pub mod decision;

pub use decision::{Action, Decision, SignalName};
