//! Jobs on the live machine: a launcher holding memory and the children it
//! forks are one job whose total matches what the machine actually gave
//! them, each child shown by its proportional share; children that write
//! to the pages they share (copy-on-write, no RSS moving) make the job's
//! total grow, and a real daemon reports that growth and predicts
//! exhaustion from it.
//!
//! The stand-in for the launcher is `headroom-hog` linked as `torchrun` (a
//! PyTorch launcher to the classifier, so a job root) with `--fork`. These
//! tests compare the job with the machine's own figures, which any other
//! test beside them would move: they live under `whole_machine::`, which
//! `scripts/test.sh` runs alone.
#![cfg(target_os = "linux")]

mod whole_machine {
    use std::path::Path;
    use std::process::Command;
    use std::time::{Duration, Instant};

    use headroom::model::{Basis, Snapshot};

    use crate::support;
    use crate::support::hog::{Daemon, Running, hog_path};

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    /// One test at a time, with every other `whole_machine::` test: each
    /// compares a job with the machine's figures.
    fn alone() -> std::sync::MutexGuard<'static, ()> {
        support::whole_machine()
    }

    /// The machine's anonymous memory now, bytes: `AnonPages + Shmem` and
    /// the swap in use, the memory a job's footprints count (its resident
    /// anonymous and shared pages and its swap). `MemAvailable` would also
    /// move with the page cache and its reclaim: on a VM here it drifted by
    /// hundreds of MiB while nothing was allocated.
    fn anonymous() -> u64 {
        let text = std::fs::read_to_string("/proc/meminfo").unwrap();
        let field = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        };
        (field("AnonPages:") + field("Shmem:") + field("SwapTotal:"))
            .saturating_sub(field("SwapFree:"))
    }

    /// Pss_Anon + Pss_Shmem + SwapPss of `pid`, bytes.
    fn pss(pid: u32) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
        text.lines()
            .filter(|l| {
                l.starts_with("Pss_Anon:")
                    || l.starts_with("Pss_Shmem:")
                    || l.starts_with("SwapPss:")
            })
            .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024)
            .sum()
    }

    /// The hog linked as `torchrun` in `dir`, started with `args`; its
    /// children's pids once all `forks` are made.
    fn launcher(dir: &Path, args: &[&str], forks: usize) -> (Running, Vec<u32>) {
        let link = dir.join("torchrun");
        std::os::unix::fs::symlink(hog_path(), &link).unwrap();
        let mut hog = Running::hog(&link, args);
        let kids = hog.forked(forks);
        (hog, kids)
    }

    /// One launcher holding 2 GiB with four forked children: the job as
    /// `headroom snapshot` counts it, what the machine gave it, and the
    /// children's shown figures against their PSS.
    fn measure(dir: &Path) -> (u64, u64, Vec<(u32, u64, u64)>) {
        let before = anonymous();
        let (hog, kids) = launcher(dir, &["--max", "2GiB", "--fork", "4"], 4);
        // Let the kernel's per-CPU counters settle.
        std::thread::sleep(Duration::from_secs(1));
        let after = anonymous();
        let out = Command::new(support::BIN)
            .args(["snapshot", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let snap: Snapshot = serde_json::from_slice(&out.stdout).unwrap();
        let job = snap.job(hog.pid()).expect("the launcher is a job's root");
        assert_eq!(job.members.len(), 5, "{job:?}");
        assert_eq!(job.basis, Basis::Pss);
        // Not five times 2 GiB.
        assert!(job.footprint < 3 * GIB, "{}", job.footprint);
        let children = kids
            .iter()
            .map(|&kid| {
                let p = snap.process(kid).unwrap();
                assert_eq!(p.basis, Basis::Pss);
                assert_eq!(p.job, Some(hog.pid()));
                (kid, p.footprint, pss(kid))
            })
            .collect();
        (job.footprint, after.saturating_sub(before), children)
    }

    #[test]
    fn a_parent_and_its_forked_children_add_up_to_what_the_machine_gave_them() {
        let _alone = alone();
        let dir = support::private_dir();
        // The machine's figure moves with anything else that runs; the
        // job's is read from the processes. Up to three launchers, each
        // measured afresh, until one is measured on a machine that held
        // still: every one's children are checked against their PSS.
        let mut tries = Vec::new();
        for attempt in 0..3 {
            let sub = dir.path().join(format!("try-{attempt}"));
            std::fs::create_dir(&sub).unwrap();
            let (job, taken, children) = measure(&sub);
            for (kid, shown, read) in children {
                assert!(
                    (shown as f64 - read as f64).abs() <= read as f64 * 0.02 + MIB as f64,
                    "child {kid}: shown {shown} bytes, its PSS is {read}"
                );
            }
            tries.push(format!(
                "job {} MiB, machine {} MiB",
                job / MIB,
                taken / MIB
            ));
            if (job as f64 - taken as f64).abs() <= taken as f64 * 0.05 {
                println!("shared memory counted once: {tries:?}");
                return;
            }
            // The launcher is gone; let its children's memory go too.
            std::thread::sleep(Duration::from_secs(2));
        }
        panic!("the job's total was never within 5% of what the machine gave it: {tries:?}");
    }

    /// A launcher in `dir` whose three children copy the 1 GiB they share,
    /// under a real daemon: the job's growth, which no RSS shows, must be
    /// reported as a crossing of a time-to-exhaustion rule within 15 s.
    fn copy_on_write_is_reported(dir: &Path) {
        // Three children each copy the 1 GiB they share at 100 MiB/s: the
        // job grows about 300 MiB/s while no RSS moves.
        let (hog, _kids) = launcher(
            dir,
            &["--max", "1GiB", "--fork", "3", "--fork-write", "100MiB/s"],
            3,
        );
        let config = format!(
            "[daemon]\ninterval = \"500ms\"\njournal = \"{}\"\n\n\
             [[rule]]\nname = \"cow\"\ntime_to_exhaustion = \"10m\"\nwindow = \"4s\"\n\
             dry_run = true\nroot = true\nother_users = true\nactions = [{{ notify = true }}]\n\
             [rule.match]\nname = \"^torchrun$\"\n",
            dir.join("journal.jsonl").display()
        );
        let daemon = Daemon::start(dir, &config);
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < Duration::from_secs(15) {
            std::thread::sleep(Duration::from_millis(500));
            let (code, body) = daemon.get(&format!("/api/v1/processes/{}", hog.pid()));
            assert_eq!(code, 200, "{body}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            let status = v["process"]["rules"]
                .as_array()
                .and_then(|r| r.iter().find(|s| s["rule"] == "cow"))
                .cloned();
            if let Some(s) = status {
                last = s.to_string();
                if s["state"].as_str().is_some_and(|w| {
                    w.starts_with("crossed") || w.starts_with("step") || w.starts_with("done")
                }) {
                    let detail = s["detail"].as_str().unwrap_or_default();
                    assert!(detail.contains("job of 4 ("), "{detail}");
                    assert!(detail.contains("exhausted in"), "{detail}");
                    let points = v["job_history"].as_array().map_or(0, Vec::len);
                    assert!(points >= 3, "the job's total has a series: {body}");
                    return;
                }
            }
        }
        panic!("the job's copy-on-write growth was never reported: {last}");
    }

    #[test]
    fn copy_on_write_by_the_workers_is_growth_the_daemon_reports_and_predicts_from() {
        let _alone = alone();
        let dir = support::private_dir();
        copy_on_write_is_reported(dir.path());
    }

    /// Another user's processes that each map one page 65 000 times cost
    /// a proportional-share read hundreds of times what their resident
    /// memory would say. Their reads must not make every other family's
    /// look as dear: each family's next read is priced by its own last
    /// one, so the job's copy-on-write growth is still read and reported.
    #[test]
    fn another_users_processes_with_many_mappings_do_not_hide_a_jobs_copy_on_write_growth() {
        use crate::support::attack::{
            ATTACKER, Proc, Stage, attacker_python, begin, chown, uid_of,
        };
        let _session = begin("many mappings beside a job");
        let _alone = alone();
        let stage = Stage::new();
        let files = stage.path("maps");
        std::fs::create_dir(&files).expect("mkdir maps");
        chown(&files, uid_of(ATTACKER));
        let files_arg = files.display().to_string();
        let mut attacker = Proc::spawn(attacker_python(
            &stage,
            &["maps", &files_arg, "7", "65000", "380"],
        ));
        attacker.expect_line("mapped ", Duration::from_secs(180));
        let dir = support::private_dir();
        copy_on_write_is_reported(dir.path());
        drop(attacker);
    }
}
