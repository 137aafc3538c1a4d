//! Ceilings with real memory cgroups (environment tier: root, a memory
//! cgroup hierarchy, the kernel log): the hog grows at 100 MiB/s in a
//! cgroup limited to 2 GiB on a machine with far more memory available.
//! A `time_to_exhaustion` rule predicts against the cgroup's limit and
//! signals the hog before the cgroup's OOM killer takes it, and `explain`
//! shows the ceiling; with no rule, the OOM killer takes it and the
//! post-mortem names the cgroup and its limit; and a rule whose condition
//! is read per cgroup picks its victim inside the cgroup near its limit,
//! not the largest process of the machine.
//!
//! The cgroups are made by the tests at the top of the memory hierarchy
//! (v1's `memory` controller where mounted, as on this project's test
//! machine, else v2's) and removed when dropped, whatever the outcome: the
//! hogs in them are killed first. Fails, saying why, without root or
//! without a memory cgroup hierarchy.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::hog::{Daemon, HEADROOM, Running, Sandbox};
use crate::support::{self, need_root};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// A memory cgroup of the test's own with a limit, removed when dropped.
struct LimitedCgroup {
    dir: PathBuf,
    /// Its path as `/proc/[pid]/cgroup` names it.
    path: String,
    v1: bool,
}

impl LimitedCgroup {
    fn new(tag: &str, limit: u64) -> Self {
        need_root();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mounts = headroom::os::linux::parse::cgroupfs::parse_mountinfo(&mountinfo);
        let (v1, mount) = match (&mounts.v1_memory, &mounts.v2) {
            (Some(m), _) => (true, m.point.clone()),
            (None, Some(m)) => (false, m.point.clone()),
            (None, None) => panic!(
                "no memory cgroup hierarchy is mounted (/proc/self/mountinfo): \
                 tests/environment/ceilings.rs needs one, v1 or v2"
            ),
        };
        let name = format!("headroom-ceiling-{tag}-{}", std::process::id());
        let dir = mount.join(&name);
        // One left by a run that was killed: empty, so it can go.
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot make the memory cgroup {}: {e}", dir.display()));
        let cgroup = Self {
            dir,
            path: format!("/{name}"),
            v1,
        };
        let limit_file = if v1 {
            "memory.limit_in_bytes"
        } else {
            "memory.max"
        };
        std::fs::write(cgroup.dir.join(limit_file), limit.to_string())
            .unwrap_or_else(|e| panic!("cannot set {limit_file} of {}: {e}", cgroup.path));
        // No swap to grow into, where the cgroup has the knob: the limit is
        // where it ends.
        let _ = std::fs::write(cgroup.dir.join("memory.swappiness"), "0");
        let _ = std::fs::write(cgroup.dir.join("memory.swap.max"), "0");
        cgroup
    }

    /// The hog with `args`, started inside this cgroup (a shell writes its
    /// own pid to `cgroup.procs`, then becomes the hog: same pid), through
    /// the sandbox's uniquely named link.
    fn hog(&self, sb: &Sandbox, args: &[&str]) -> Running {
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg("echo $$ > \"$1\" && shift && exec \"$@\"")
            .arg("sh")
            .arg(self.dir.join("cgroup.procs"))
            .arg(&sb.hog)
            .args(args);
        let mut hog = Running::hog_command(command);
        hog.expect_line("ready");
        hog
    }

    /// How many processes its OOM killer has killed.
    fn oom_kills(&self) -> u64 {
        let file = if self.v1 {
            "memory.oom_control"
        } else {
            "memory.events"
        };
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        headroom::os::linux::parse::cgroupfs::keyed_value(&text, "oom_kill").unwrap_or(0)
    }
}

impl Drop for LimitedCgroup {
    fn drop(&mut self) {
        // Only the tests' own hogs are in it; those still alive are killed
        // by their `Running` before this runs, but a child of theirs could
        // linger: it is ours too.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `headroom explain PID` against the daemon.
fn explain(daemon: &Daemon, pid: u32) -> String {
    let out = Command::new(HEADROOM)
        .args([
            "explain",
            &pid.to_string(),
            "--address",
            &daemon.addr.to_string(),
        ])
        .output()
        .expect("run headroom explain");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The process row of `pid` from the daemon's API.
fn row(daemon: &Daemon, pid: u32) -> Value {
    let (status, body) = daemon.get(&format!("/api/v1/processes/{pid}"));
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["process"].clone()
}

/// The journal's post-mortem of `pid`, once written.
fn postmortem_of(sb: &Sandbox, pid: u32) -> Value {
    support::wait_for(Duration::from_secs(60), "the post-mortem", || {
        sb.journal()
            .into_iter()
            .find(|e| e["event"] == "exited" && e["process"]["pid"] == pid)
    })
}

/// The footprint of a `signal SIGTERM footprint=N at_ms=M` line.
fn signalled_footprint(line: &str) -> u64 {
    crate::support::hog::parse_signal_line(line)
        .unwrap_or_else(|| panic!("not a signal line: {line:?}"))
        .1
}

#[test]
fn a_time_to_exhaustion_rule_signals_before_the_cgroups_oom_killer() {
    let cgroup = LimitedCgroup::new("tte", 2 * GIB);
    let sb = Sandbox::new("ceiling-tte");
    // The rule: 30 s to exhaustion, 80% of memory, SIGTERM.
    let daemon = sb.start(
        &sb.rule(
            "time_to_exhaustion = \"30s\"\nfootprint = \"80%\"\nactions = [{ signal = \"SIGTERM\" }]",
        ),
        &[],
    );
    let mut hog = cgroup.hog(
        &sb,
        &["--rate", "100MiB/s", "--max", "3GiB", "--catch", "TERM"],
    );
    let pid = hog.pid();
    let line = hog
        .wait_line("signal SIGTERM", Duration::from_secs(40))
        .unwrap_or_else(|| panic!("no SIGTERM before the OOM killer; hog said {:?}", hog.seen));
    let footprint = signalled_footprint(&line);
    assert!(
        footprint < 2 * GIB,
        "signalled at {footprint} bytes, past the limit"
    );
    // It stops growing and lives: the cgroup's OOM killer never acted.
    hog.expect_line("holding");
    assert!(hog.alive());
    assert_eq!(cgroup.oom_kills(), 0);
    let action = sb.first_action_on(pid);
    let reason = action["detail"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!(
            "left under the memory cgroup {}'s limit of 2.0 GiB",
            cgroup.path
        )),
        "{action}"
    );
    // The machine alone would not have been near: far more is available.
    let (_, snap) = daemon.get("/api/v1/snapshot");
    let snap: Value = serde_json::from_str(&snap).unwrap();
    assert!(
        snap["system"]["available"].as_u64().unwrap() > 4 * GIB,
        "{}",
        snap["system"]
    );
    // explain and the API show the ceiling.
    let text = explain(&daemon, pid);
    assert!(
        text.contains(&format!(
            "memory limit: the memory cgroup {}'s limit of 2.0 GiB ({})",
            cgroup.path,
            if cgroup.v1 {
                "memory.limit_in_bytes"
            } else {
                "memory.max"
            }
        )),
        "{text}"
    );
    assert!(
        text.contains("the cgroup's OOM killer stops it first"),
        "{text}"
    );
    let row = row(&daemon, pid);
    assert_eq!(row["cgroup"], cgroup.path.as_str());
    assert_eq!(row["ceiling"]["cgroup"], cgroup.path.as_str());
    assert_eq!(row["ceiling"]["limit"], 2 * GIB);
    assert_eq!(row["ceiling"]["binding"], true);
}

#[test]
fn with_no_rule_the_cgroup_oom_kill_gets_a_postmortem_naming_the_cgroup_and_its_limit() {
    let cgroup = LimitedCgroup::new("oom", 2 * GIB);
    let sb = Sandbox::new("ceiling-oom");
    // No rule at all: nothing watches the hog but its ceiling.
    let daemon = sb.start("", &[]);
    let mut hog = cgroup.hog(&sb, &["--rate", "100MiB/s", "--max", "3GiB"]);
    let pid = hog.pid();
    // Seen under its ceiling before it dies.
    support::wait_for(Duration::from_secs(20), "the hog under its ceiling", || {
        let (status, body) = daemon.get(&format!("/api/v1/processes/{pid}"));
        let row = (status == 200)
            .then(|| serde_json::from_str::<Value>(&body).ok())
            .flatten()?["process"]
            .clone();
        (row["ceiling"]["cgroup"] == cgroup.path.as_str()
            && row["footprint"].as_u64().unwrap_or(0) > 256 * MIB)
            .then_some(())
    });
    let status = hog
        .wait_exit(Duration::from_secs(60))
        .expect("the cgroup's OOM killer ends the hog");
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(9), "{status:?}: {:?}", hog.seen);
    assert!(cgroup.oom_kills() >= 1);
    let ended = postmortem_of(&sb, pid);
    let cause = &ended["cause"];
    assert_eq!(cause["kind"], "oom-killer", "{ended}");
    assert_eq!(cause["cgroup"], cgroup.path.as_str(), "{ended}");
    assert_eq!(cause["cgroup_limit"], 2 * GIB, "{ended}");
    let how = cause["how"].as_str().unwrap();
    assert!(
        how.contains(&format!(
            "the memory cgroup {} reached its limit of 2.0 GiB",
            cgroup.path
        )),
        "{how}"
    );
    // The log says so too.
    let out = Command::new(HEADROOM)
        .args(["events", "--journal"])
        .arg(sb.path("journal.jsonl"))
        .output()
        .expect("run headroom events");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("killed by the kernel OOM killer"), "{text}");
    drop(daemon);
}

#[test]
fn a_per_cgroup_rule_picks_its_victim_inside_the_cgroup_near_its_limit() {
    // A: 1 GiB, two hogs holding 700 and 100 MiB: under a quarter left.
    // B: 2 GiB, one hog holding 1.2 GiB, the largest process: 40% left.
    let a = LimitedCgroup::new("near", GIB);
    let b = LimitedCgroup::new("roomy", 2 * GIB);
    let sb = Sandbox::new("ceiling-per-cgroup");
    let hold = |max: &'static str| ["--rate", "max", "--max", max, "--catch", "TERM"];
    let mut big_in_b = b.hog(&sb, &hold("1200MiB"));
    let mut large_in_a = a.hog(&sb, &hold("700MiB"));
    let mut small_in_a = a.hog(&sb, &hold("100MiB"));
    for hog in [&mut big_in_b, &mut large_in_a, &mut small_in_a] {
        hog.expect_line("holding");
    }
    // The rule starts once they hold, so that its one victim is judged on
    // what each cgroup holds.
    let _daemon = sb.start(
        &format!(
            "[[rule]]\nname = \"near-its-limit\"\nroot = true\nother_users = true\n\
             select = \"largest\"\ncooldown = \"10m\"\nactions = [{{ signal = \"SIGTERM\" }}]\n\
             [rule.match]\nargv = \"{}\"\n[rule.when]\nper = \"cgroup\"\n\
             available_below = \"25%\"\n",
            sb.hog_pattern()
        ),
        &[],
    );
    let line = large_in_a
        .wait_line("signal SIGTERM", Duration::from_secs(20))
        .unwrap_or_else(|| panic!("the largest hog in {} was not signalled", a.path));
    assert!(signalled_footprint(&line) >= 600 * MIB, "{line}");
    let action = sb.first_action_on(large_in_a.pid());
    assert!(
        action["detail"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("memory cgroup {}: room", a.path)),
        "{action}"
    );
    // A whole second more of samples: nobody else is touched.
    for hog in [&mut big_in_b, &mut small_in_a] {
        let later = hog.drain(Duration::from_millis(1000));
        assert!(later.iter().all(|l| !l.starts_with("signal")), "{later:?}");
        assert!(sb.actions_on(hog.pid()).is_empty());
    }
}
