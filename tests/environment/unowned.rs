//! Memory no process owns, made by a real unprivileged user and seen by
//! `headroom snapshot` as root: a `/dev/shm` file the user allocated with
//! `fallocate` and nobody maps names its owner and counts as unowned; a
//! memfd the user's process holds open and never maps is that process's
//! `held_open`, inside its footprint. The hermetic tier
//! (`tests/hermetic/unowned.rs`) holds the same for the user running it.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::support::attack::{ATTACKER, as_user, ensure_user, uid_of};
use crate::support::hog::HEADROOM;
use crate::support::{need_root, need_tools};

const MIB: u64 = 1 << 20;

/// Removes the file when dropped, also when the test fails.
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Kills and reaps the child when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `headroom snapshot --json` as root, parsed.
fn snapshot() -> serde_json::Value {
    let out = Command::new(HEADROOM)
        .args(["snapshot", "--json"])
        .output()
        .expect("run headroom snapshot");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("snapshot JSON")
}

#[test]
fn another_user_s_dev_shm_file_nobody_maps_names_its_owner() {
    need_root();
    need_tools(&[("setpriv", "util-linux"), ("fallocate", "util-linux")]);
    ensure_user(ATTACKER, true);
    const BYTES: u64 = 1024 * MIB;
    let path = Path::new("/dev/shm").join(format!("headroom-env-blob-{}", std::process::id()));
    let _removed = Removed(path.clone());
    let out = as_user(ATTACKER, Path::new("fallocate"))
        .args(["-l", &BYTES.to_string()])
        .arg(&path)
        .output()
        .expect("run fallocate as the other user");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let snap = snapshot();
    let u = &snap["unowned"];
    assert_eq!(u["known"], true);
    let files = u["tmpfs_files"].as_array().expect("tmpfs_files");
    let file = files
        .iter()
        .find(|f| f["path"] == path.display().to_string())
        .unwrap_or_else(|| panic!("{} not among {files:?}", path.display()));
    assert_eq!(file["bytes"], BYTES);
    assert_eq!(file["user"], ATTACKER);
    assert_eq!(file["uid"], uid_of(ATTACKER));
    assert_eq!(file["mapped_by"], serde_json::json!([]));
    assert_eq!(file["open_by"], serde_json::json!([]));
    assert!(u["tmpfs_bytes"].as_u64().expect("tmpfs_bytes") >= BYTES);

    // The table names it too.
    let out = Command::new(HEADROOM)
        .arg("snapshot")
        .output()
        .expect("run headroom snapshot");
    let table = String::from_utf8_lossy(&out.stdout);
    let line = table
        .lines()
        .find(|l| l.contains(&*path.display().to_string()))
        .unwrap_or_else(|| panic!("no line for the file in\n{table}"));
    assert!(
        line.contains(ATTACKER) && line.ends_with("nobody"),
        "{line}"
    );
}

#[test]
fn another_user_s_memfd_held_open_unmapped_is_its_holder_s() {
    need_root();
    need_tools(&[("setpriv", "util-linux"), ("python3", "python3")]);
    ensure_user(ATTACKER, true);
    const BYTES: u64 = 512 * MIB;
    let script = format!(
        "import os, sys, time\n\
         fd = os.memfd_create('headroom-env-held')\n\
         os.posix_fallocate(fd, 0, {BYTES})\n\
         print('ready', flush=True)\n\
         time.sleep(120)\n"
    );
    let mut child = Reaped(
        as_user(ATTACKER, Path::new("/usr/bin/python3"))
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn python3 as the other user"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the child's line");
    assert_eq!(line.trim(), "ready");
    let pid = u64::from(child.0.id());

    let snap = snapshot();
    let p = snap["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .find(|p| p["pid"] == pid)
        .expect("the holder is sampled");
    assert_eq!(p["held_open"], BYTES, "{p}");
    assert!(p["footprint"].as_u64().expect("footprint") >= BYTES);
    let file = snap["unowned"]["tmpfs_files"]
        .as_array()
        .expect("tmpfs_files")
        .iter()
        .find(|f| f["path"] == "memfd:headroom-env-held")
        .expect("the memfd is listed");
    assert_eq!(file["open_by"], serde_json::json!([pid]));
    assert_eq!(file["user"], ATTACKER);
}
