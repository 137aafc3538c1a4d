//! The environment tier: integration tests that need what a Rust toolchain
//! does not bring. `scripts/test.sh` installs it all (Debian packages, the
//! Jupyter virtual environment) and runs this tier as root after the
//! hermetic one:
//!
//! ```sh
//! cargo test --test environment
//! ```
//!
//! Plain `cargo test` does not build it (`test = false` in `Cargo.toml`).
//! The attacks (`attacks::`) and the soak (`soak::`) measure the daemon's
//! memory, reaction and sampling jitter, the thrash test (`thrash::`)
//! switches on a swap file and locks most of the memory, and the ceilings
//! (`ceilings::`) grow hogs at a set pace toward their memory cgroups'
//! limits and make the kernel's OOM killer act, and the scenario corpus
//! (`scenarios::`) runs real kernels' benign and harmful work in memory
//! cgroups under the embedded default rules: `scripts/test.sh` runs them
//! after the rest (`-- --skip attacks:: --skip soak:: --skip thrash:: --skip
//! ceilings:: --skip scenarios::`), each set alone, as their figures mean
//! nothing with a browser or Prometheus busy beside them.
//!
//! A test belongs here when it needs any of:
//! - root: a root daemon's refusals of files other users can change, and
//!   processes or files of another user (`headroom-test`, uid 65534), made
//!   with `useradd` and entered with `setpriv`;
//! - an installed tool: headless Chromium and chromedriver, Prometheus and
//!   promtool, `systemd-analyze`, `setfacl`, `wrk`, `python3`, `tmux`, the Jupyter
//!   virtual environment (`scripts/jupyter-venv.sh`);
//! - minutes of wall time under load (the soak test);
//! - a swap file and most of the memory locked (the thrash test).
//!
//! Such a test never passes by doing nothing: missing root fails it with
//! "run as root (scripts/test.sh does)", a missing tool with its name and
//! the package that has it (`support::need_root`, `support::need_tools`,
//! `support::tool`). One module per concern; a module of the same name in
//! the hermetic tier (`tests/hermetic/main.rs`) holds that concern's tests
//! that need nothing more. Shared helpers live in `tests/support/`.

#[path = "../support/mod.rs"]
mod support;

mod actuator;
mod attacks;
mod ceilings;
mod crash_postmortems;
mod http_router;
mod jobs;
mod journal;
mod jupyter;
mod jupyter_lookup;
mod labels;
mod limits;
mod nvml_library;
mod package;
mod permissions;
mod privileges;
mod prometheus;
mod scenarios;
mod service;
mod soak;
mod status_page_browser;
mod thrash;
mod top;
mod unowned;
