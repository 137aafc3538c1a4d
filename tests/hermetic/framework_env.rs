//! The framework environment of a running process, end to end: a real
//! process whose interpreter path points into a fixture prefix, whose
//! `site-packages` holds tensorflow-macos 2.9.2 and tensorflow-metal 0.6.0
//! (the real `.dist-info` records of `tests/fixtures/pypi/`, the plugin's
//! version line set to 0.6.0, a release Apple's table pairs with
//! TensorFlow 2.10). `headroom doctor` names the pair, and the daemon's
//! JSON API shows it in the process's evidence.
//!
//! The process is `/bin/sh` run with `argv[0]` set to
//! `<prefix>/bin/python3.9` and `-c "import tensorflow …; sleep 60"`: what
//! headroom reads of a Python process (its argv) without needing Python
//! here. Costs are bounded: one process, a directory of three packages.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::hog::Sandbox;

const PAIR: &str = "tensorflow-metal 0.6.0 with tensorflow-macos 2.9.2: unsupported pair";

/// `<root>/lib/python3.9/site-packages` with the fixture records.
fn site_packages(root: &Path) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pypi");
    let sp = root.join("lib/python3.9/site-packages");
    for (from, to, edit) in [
        (
            "tensorflow_macos-2.9.2.dist-info",
            "tensorflow_macos-2.9.2.dist-info",
            None,
        ),
        (
            "tensorflow_metal-0.5.0.dist-info",
            "tensorflow_metal-0.6.0.dist-info",
            Some(("Version: 0.5.0", "Version: 0.6.0")),
        ),
    ] {
        let dir = sp.join(to);
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["METADATA", "WHEEL"] {
            let mut text = std::fs::read_to_string(fixtures.join(from).join(file)).unwrap();
            if let Some((a, b)) = edit {
                text = text.replace(a, b);
            }
            std::fs::write(dir.join(file), text).unwrap();
        }
    }
    std::fs::create_dir_all(root.join("bin")).unwrap();
}

/// The process, killed and reaped when dropped.
struct Kernel(Child);

impl Kernel {
    fn start(root: &Path) -> Self {
        let child = Command::new("/bin/sh")
            .arg0(root.join("bin/python3.9"))
            .args(["-c", "import tensorflow 2>/dev/null; sleep 60"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Kernel(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn doctor_names_the_unsupported_pair_of_a_running_process() {
    let dir = crate::support::private_dir();
    site_packages(dir.path());
    let kernel = Kernel::start(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .arg("doctor")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains(&format!("pid {} (", kernel.pid())))
        .unwrap_or_else(|| panic!("no line for pid {}:\n{text}", kernel.pid()));
    assert!(line.starts_with("warn  framework-env"), "{line}");
    assert!(line.contains(PAIR), "{line}");
    assert!(
        line.contains("see https://developer.apple.com/metal/tensorflow-plugin/"),
        "{line}"
    );
    assert!(
        line.contains(" — install versions that go together"),
        "{line}"
    );
}

#[test]
fn the_api_shows_the_pair_in_the_process_evidence() {
    let sb = Sandbox::new("framework-env");
    let root = sb.path("env");
    site_packages(&root);
    let kernel = Kernel::start(&root);
    let daemon = sb.start("", &[]);
    let path = format!("/api/v1/processes/{}", kernel.pid());
    // The reads run beside the samples; a sample after they come back
    // carries them.
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (status, body) = daemon.get(&path);
        if status == 200 && body.contains(PAIR) {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "no {PAIR:?} in {path}: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let evidence: Vec<&str> = json["process"]["workload"]["evidence"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    let holds = format!(
        "site-packages {} holds tensorflow-macos 2.9.2, tensorflow-metal 0.6.0",
        root.join("lib/python3.9/site-packages").display()
    );
    assert!(evidence.contains(&holds.as_str()), "{evidence:?}");
    assert!(
        evidence
            .iter()
            .any(|e| e.starts_with("unsupported: ") && e.contains(PAIR)),
        "{evidence:?}"
    );
    daemon.stop_with("TERM");
}
