//! What the privilege tests of both tiers share: one-shot `headroom`
//! commands on a free port, their stderr, and a config that samples fast and
//! journals into the test's directory.

use std::path::Path;
use std::process::{Command, Output};

use super::hog::HEADROOM;

/// `headroom ARGS` to completion.
pub fn headroom(args: &[&str]) -> Output {
    Command::new(HEADROOM)
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .expect("run headroom")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A config with a fast interval and a journal in `dir`, then `rest`.
pub fn write_config(path: &Path, dir: &Path, rest: &str) {
    let text = format!(
        "[daemon]\ninterval = \"100ms\"\nfast_interval = \"50ms\"\njournal = \"{}\"\n\n{rest}",
        dir.join("journal.jsonl").display()
    );
    std::fs::write(path, text).expect("write config");
}
