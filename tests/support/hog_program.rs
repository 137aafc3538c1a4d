//! Where the `headroom-hog` program is, for the tests and the benchmarks
//! (`benches/common` includes this file). The hog is a Cargo example, so
//! that `cargo install` and the packages carry only the daemon; plain
//! `cargo test` builds it with the other examples, but a single target
//! (`cargo test --test hermetic`, `cargo bench --bench reaction`) does not.
//! So the first call runs `cargo build --example headroom-hog` with the
//! cargo that built this program, for the profile of the `headroom` binary
//! under test (`debug` is `dev`, `release` is `release`, any other directory
//! is a custom profile of that name), and returns the executable cargo
//! reports: always the hog of the current source, and a no-op when it is
//! fresh. Cargo holds no build lock while it runs tests or benchmarks.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The `headroom-hog` executable, built on the first call.
pub fn hog_path() -> &'static Path {
    static HOG: OnceLock<PathBuf> = OnceLock::new();
    HOG.get_or_init(build)
}

/// The cargo profile whose output directory holds the `headroom` binary
/// under test: `<target>/<profile dir>/headroom`.
fn profile() -> String {
    let headroom = Path::new(env!("CARGO_BIN_EXE_headroom"));
    let dir = headroom
        .parent()
        .and_then(Path::file_name)
        .and_then(|name| name.to_str())
        .unwrap_or_else(|| {
            panic!(
                "cannot tell the cargo profile from the path of {}",
                headroom.display()
            )
        });
    match dir {
        "debug" => "dev".to_owned(),
        other => other.to_owned(),
    }
}

fn build() -> PathBuf {
    let profile = profile();
    let mut child = Command::new(env!("CARGO"))
        .args([
            "build",
            "--locked",
            "--example",
            "headroom-hog",
            "--profile",
        ])
        .arg(&profile)
        .arg("--message-format=json-render-diagnostics")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {} build: {e}", env!("CARGO")));
    let stdout = child.stdout.take().expect("cargo's stdout is piped");
    let mut executable = None;
    for line in std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
    {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if message["reason"] == "compiler-artifact"
            && message["target"]["name"] == "headroom-hog"
            && let Some(path) = message["executable"].as_str()
        {
            executable = Some(PathBuf::from(path));
        }
    }
    let status = child.wait().expect("wait for cargo build");
    assert!(
        status.success(),
        "cargo build --example headroom-hog --profile {profile} failed ({status}): see its errors above"
    );
    executable.unwrap_or_else(|| {
        panic!("cargo build --example headroom-hog --profile {profile} reported no executable")
    })
}
