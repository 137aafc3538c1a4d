//! A library is code: loading it runs its constructors. As root, a planted
//! `libnvidia-ml` (a constructor that leaves a marker file, built with `cc`)
//! in a directory others can write is not loaded by the daemon, at start or
//! at a retry after it appeared there, and the collector says why; the same
//! library where only root writes is loaded (the marker shows the
//! constructor would have run). Libraries are built under `target/tmp`,
//! which root trusts, unlike `/tmp`.
//!
//! Every test needs root and fails without it.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use headroom::model::Snapshot;
use headroom::os::linux::nvml::NvmlCollector;
use headroom::sample::gpu::{GpuMonitor, RETRY_AFTER};

use crate::support;
use crate::support::hog::Daemon;
use crate::support::{chmod, need_root};

/// Build, at `library`, a shared library whose constructor writes `marker`
/// when the library is loaded: what a user would plant.
fn build_planted(library: &Path, marker: &Path) {
    let source = library.with_extension("c");
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n\
             #include <unistd.h>\n\
             __attribute__((constructor)) static void planted(void) {{\n\
                 FILE *f = fopen(\"{}\", \"w\");\n\
                 if (f) {{ fprintf(f, \"ran as uid %d\\n\", (int)geteuid()); fclose(f); }}\n\
             }}\n",
            marker.display()
        ),
    )
    .unwrap();
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(library)
        .arg(&source)
        .output()
        .expect("run cc (the C compiler that links Rust programs)");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_root_daemon_does_not_load_a_library_from_a_directory_others_can_write() {
    need_root();
    let dir = support::private_dir();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    chmod(&open, 0o777);
    let library = open.join("libnvidia-ml.so.1");
    let marker = dir.path().join("constructor-ran");
    build_planted(&library, &marker);
    let config = dir.path().join("headroom.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval = \"100ms\"\njournal = \"{}\"\n\n[gpu]\nnvml_library = \"{}\"\n",
            dir.path().join("journal.jsonl").display(),
            library.display()
        ),
    )
    .unwrap();
    chmod(&config, 0o644);
    let mut d = Daemon::run(&["run", "--config", config.to_str().unwrap()]);
    let addr = d.addr;
    let (status, body) = support::get(&format!("http://{addr}/api/v1/snapshot"));
    assert_eq!(status, 200);
    let snap: Snapshot = serde_json::from_str(&body).unwrap();
    let nvml = snap
        .collectors
        .iter()
        .find(|c| c.name == "nvml")
        .expect("the nvml collector's status");
    d.signal("TERM");
    d.wait_exit(Duration::from_secs(10));
    assert!(!marker.exists(), "the planted library ran as root");
    assert!(!nvml.up);
    for needle in [
        &format!(
            "configured {} did not load: refused, since ",
            library.display()
        ),
        &format!(
            "{} is writable by users other than root (mode 0777)",
            open.display()
        ),
        "could run their code as root",
        &format!("chmod go-w {}", open.display()),
    ] {
        assert!(
            nvml.detail.contains(needle),
            "{needle:?} not in {}",
            nvml.detail
        );
    }
    let logged = d
        .seen
        .iter()
        .find(|l| l.contains("did not load: refused"))
        .expect("the refusal in the log");
    assert!(logged.contains("WARN"), "{logged}");
}

#[test]
fn a_library_planted_after_start_is_not_loaded_at_the_retry() {
    need_root();
    let dir = support::private_dir();
    let libdir = dir.path().join("lib");
    std::fs::create_dir(&libdir).unwrap();
    chmod(&libdir, 0o755);
    let library = libdir.join("libnvidia-ml.so.1");
    let marker = dir.path().join("constructor-ran");
    let mut m = GpuMonitor::new(Box::new(NvmlCollector::new(Some(library.clone()))));
    let t0 = Instant::now();

    // At start: nothing there, like a machine without the driver.
    let first = m.poll(t0);
    assert!(!first.status.up);
    assert!(
        first
            .status
            .detail
            .contains(&format!("configured {} did not load", library.display())),
        "{}",
        first.status.detail
    );

    // Later the directory is opened up and a library appears in it.
    chmod(&libdir, 0o777);
    build_planted(&library, &marker);
    let retry = m.poll(t0 + RETRY_AFTER);
    assert!(!retry.status.up);
    assert!(
        retry.status.detail.contains(&format!(
            "configured {} did not load: refused, since {} is writable by users other than root",
            library.display(),
            libdir.display()
        )),
        "{}",
        retry.status.detail
    );
    assert!(!marker.exists(), "the planted library ran as root");
    // Closed to others again (the file is root's: the test built it), the
    // next retry loads it: the check, not the library, kept it out.
    chmod(&libdir, 0o755);
    let fixed = m.poll(t0 + RETRY_AFTER * 2);
    assert!(
        !fixed.status.detail.contains("refused"),
        "{}",
        fixed.status.detail
    );
    assert!(marker.exists(), "the library was not loaded once trusted");
}
