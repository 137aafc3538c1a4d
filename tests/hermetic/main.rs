//! The hermetic tier: every integration test that needs nothing but what
//! building headroom needs. Plain `cargo test` runs it (with the unit tests
//! of the library and binaries), and it passes on a machine that has only a
//! Rust toolchain, a C compiler (`cc`, which links Rust programs), coreutils
//! and a POSIX `/bin/sh`, run by an ordinary user or by root.
//!
//! A test belongs here when:
//! - it runs only headroom's own programs (`headroom` and the `headroom-hog`
//!   example, `support::hog_program`), this test binary, `/bin/sh`, coreutils or `cc`; nothing installed for it
//!   (no browser, Prometheus, Jupyter, Python, `setpriv`, `setfacl`, `wrk`,
//!   systemd);
//! - it asserts what holds for whoever runs it: a test whose point is what
//!   a root daemon refuses, or what one user's process does to another's,
//!   needs root and a second user and goes in the environment tier
//!   (`tests/environment/main.rs`); a test may adapt what it expects to the
//!   user running it only where both cases assert something real;
//! - it keeps its files in the checkout's `target/tmp` (`support::private_dir`)
//!   where a root daemon would refuse a shared `/tmp`.
//!
//! One module per concern; a module of the same name in the environment
//! tier holds that concern's tests that need more. Shared helpers live in
//! `tests/support/`, used by both tiers.

#[path = "../support/mod.rs"]
mod support;

mod actuator;
mod bad_inputs;
mod ceilings;
mod config_files;
mod crash_safety;
mod daemon;
mod deploy_manifests;
mod doctor;
mod events_cli;
mod framework_env;

mod gpu_join;
mod hog;
mod homebrew_formula;
mod http_router;
mod jobs;
mod journal;
mod jupyter_lookup;
mod layers;
mod limits;
mod linux_sampler;
mod live_views;
mod nvml_library;
mod one_daemon;
mod packaging;
mod policy;
mod policy_safety;
mod privileges;
mod recorded_traces;
mod replay;
mod safe_replay;
mod service;
mod system_probe;
mod unowned;
mod unsafe_code;
