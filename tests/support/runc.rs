//! A real OCI container for the environment tier: Debian's `runc` runs a
//! command with pid, mount, IPC and UTS namespaces of its own, in a memory
//! cgroup that runc creates (or joins) and limits itself, on a read-only
//! root made of the host's `/usr` and `/etc` (the paths a test names bound
//! at the same place, read-only or writable), with the host's network, as
//! `docker run --network host` would give it. The command runs under a
//! shell as the container's init, the way `docker run --init` puts `tini`
//! in front of it, so that it is not its pid namespace's PID 1.
//!
//! The container is killed and deleted when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// `runc` on this machine, if installed.
pub fn runc() -> Option<PathBuf> {
    ["/usr/sbin/runc", "/usr/bin/runc"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// What to run and how.
pub struct Spec<'a> {
    /// The container's id (`runc list`).
    pub id: &'a str,
    /// The cgroup path runc is given (`linux.cgroupsPath`).
    pub cgroup_path: &'a str,
    /// `linux.resources.memory.limit`, bytes; swap is held to the same.
    pub memory_limit: u64,
    /// The command, run as `sh -c 'CMD & wait'` under the container's init.
    pub command: Vec<String>,
    /// Host paths bound read-only at the same place.
    pub read_only: Vec<PathBuf>,
    /// Host paths bound writable at the same place (after the read-only ones).
    pub writable: Vec<PathBuf>,
    /// The environment of the command (`PATH` is always set).
    pub env: Vec<(String, String)>,
    /// Where runc's and the command's output go.
    pub log: PathBuf,
}

/// A running container.
pub struct Container {
    runc: PathBuf,
    id: String,
    child: Child,
}

/// Quote `word` for `sh -c`.
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The OCI runtime config of `spec` (runtime-spec 1.0), rootfs `rootfs`.
fn config(spec: &Spec<'_>, rootfs: &Path) -> Value {
    let line: Vec<String> = spec.command.iter().map(|w| quoted(w)).collect();
    let mut env = vec!["PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".to_string()];
    env.extend(spec.env.iter().map(|(k, v)| format!("{k}={v}")));
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc"}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts",
               "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]}),
        json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
               "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
        json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "nodev", "mode=1777"]}),
        // The host's network namespace is kept, so sysfs cannot be mounted
        // afresh (it belongs to a network namespace): the host's, read-only.
        json!({"destination": "/sys", "type": "bind", "source": "/sys",
               "options": ["rbind", "ro", "nosuid", "noexec", "nodev"]}),
    ];
    for p in ["/usr", "/etc"]
        .iter()
        .map(PathBuf::from)
        .chain(spec.read_only.iter().cloned())
    {
        mounts.push(json!({"destination": p, "type": "bind", "source": p,
                           "options": ["rbind", "ro"]}));
    }
    for p in &spec.writable {
        mounts.push(json!({"destination": p, "type": "bind", "source": p,
                           "options": ["rbind", "rw"]}));
    }
    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": ["/bin/sh", "-c", format!("{} & wait", line.join(" "))],
            "env": env,
            "cwd": "/",
            "noNewPrivileges": true,
        },
        "root": {"path": rootfs, "readonly": true},
        "hostname": spec.id,
        "mounts": mounts,
        "linux": {
            "namespaces": [
                {"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}
            ],
            "cgroupsPath": spec.cgroup_path,
            "resources": {"memory": {"limit": spec.memory_limit, "swap": spec.memory_limit}},
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list"],
        },
    })
}

impl Container {
    /// Write a bundle under `bundle` (made here) and start `spec` in it
    /// with `runc run`. Panics with runc's output if it does not start
    /// within 20 s.
    pub fn start(runc: &Path, bundle: &Path, spec: &Spec<'_>) -> Self {
        let rootfs = bundle.join("rootfs");
        for d in ["usr", "etc", "proc", "dev", "sys", "tmp"] {
            std::fs::create_dir_all(rootfs.join(d)).expect("make the rootfs");
        }
        // Debian's merged /usr: the top-level links every program expects.
        for l in ["bin", "lib", "lib64", "sbin"] {
            let link = rootfs.join(l);
            if !link.exists() && Path::new("/").join(l).exists() {
                std::os::unix::fs::symlink(format!("usr/{l}"), &link).expect("link in the rootfs");
            }
        }
        for p in spec.read_only.iter().chain(&spec.writable) {
            let inside = rootfs.join(p.strip_prefix("/").unwrap_or(p));
            std::fs::create_dir_all(&inside).expect("a mount point in the rootfs");
        }
        let text = serde_json::to_string_pretty(&config(spec, &rootfs)).unwrap();
        std::fs::write(bundle.join("config.json"), text).expect("write config.json");
        let log = std::fs::File::create(&spec.log).expect("the container's log");
        let child = Command::new(runc)
            .args(["run", "--bundle"])
            .arg(bundle)
            .arg(spec.id)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start runc run");
        let container = Self {
            runc: runc.to_path_buf(),
            id: spec.id.to_string(),
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !container.running() {
            let said = std::fs::read_to_string(&spec.log).unwrap_or_default();
            assert!(
                Instant::now() < deadline,
                "runc did not start the container {}: {said}",
                spec.id
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        container
    }

    /// Whether `runc state` says it runs.
    pub fn running(&self) -> bool {
        let out = Command::new(&self.runc)
            .args(["state", &self.id])
            .output()
            .ok();
        out.and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
            .is_some_and(|v| v["status"] == "running")
    }

    /// The host pid of its init (`runc state`).
    pub fn init_pid(&self) -> Option<u32> {
        let out = Command::new(&self.runc)
            .args(["state", &self.id])
            .output()
            .ok()?;
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["pid"].as_u64().and_then(|p| u32::try_from(p).ok())
    }
}

/// A process's pid in the innermost pid namespace it is in (the last
/// `NSpid` of its `status`).
pub fn namespace_pid(host_pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{host_pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

/// The host pids of the children of `parent`.
pub fn children(parent: u32) -> Vec<u32> {
    let path = format!("/proc/{parent}/task/{parent}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new(&self.runc)
            .args(["kill", &self.id, "KILL"])
            .status();
        let _ = self.child.wait();
        let _ = Command::new(&self.runc)
            .args(["delete", "--force", &self.id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
