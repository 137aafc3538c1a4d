//! `headroom doctor`: run each collector once on this machine and say which
//! work, which need root, and which are unavailable, with the next step for
//! each, in a plain-text report made to be pasted into a bug report.
//!
//! A check is one function returning a [`Check`]. Every collector the
//! daemon lists in its snapshots checks itself
//! ([`Collector::doctor_check`]), asked in the order the snapshot lists
//! them: the sampler's, then the loop's own ([`loop_collectors`]). The
//! OS-specific checks that are no collector's live with their sampler
//! (`crate::sample::doctor_checks`); this module adds the checks every OS
//! shares, renders the report and decides the exit status: 0 unless a
//! needed check failed.

use std::fmt::Write as _;

use crate::jupyter::Notebooks;
use crate::model::collector::doctor_checks;
use crate::model::{Check, CheckStatus, Collector, Snapshot};
use crate::sample::{ExitCauses, PressureEvents, Sampler, platform_sampler};

/// A whole report: facts about the machine, then the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub facts: Vec<(&'static str, String)>,
    pub checks: Vec<Check>,
}

impl Report {
    /// True if every needed check passed (no [`CheckStatus::Fail`]).
    pub fn healthy(&self) -> bool {
        self.checks.iter().all(|c| c.status != CheckStatus::Fail)
    }

    /// The report as text: a header of facts, one line per check
    /// (`status  name  detail — next step`), and a count by status.
    pub fn render(&self) -> String {
        let mut out = String::from("headroom doctor\n");
        let width = self.facts.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in &self.facts {
            let _ = writeln!(out, "{k:<width$}  {v}");
        }
        out.push('\n');
        let name_width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &self.checks {
            let _ = write!(
                out,
                "{:<4}  {:<name_width$}  {}",
                c.status.label(),
                c.name,
                c.detail
            );
            if let Some(next) = &c.next {
                let _ = write!(out, " — {next}");
            }
            out.push('\n');
        }
        let count = |s: CheckStatus| self.checks.iter().filter(|c| c.status == s).count();
        let _ = writeln!(
            out,
            "\n{} ok, {} warn, {} fail, {} n/a",
            count(CheckStatus::Ok),
            count(CheckStatus::Warn),
            count(CheckStatus::Fail),
            count(CheckStatus::NotApplicable)
        );
        out
    }
}

/// The facts every OS reports: version, OS, architecture, uid.
fn common_facts() -> Vec<(&'static str, String)> {
    let uid = match crate::os::this_process::effective_uid() {
        0 => "0 (root)".to_owned(),
        uid => format!("{uid} (not root)"),
    };
    vec![
        ("version", env!("CARGO_PKG_VERSION").to_owned()),
        ("os", std::env::consts::OS.to_owned()),
        ("arch", std::env::consts::ARCH.to_owned()),
        ("uid", uid),
    ]
}

/// One full sample through the daemon's own sampler: the end-to-end check,
/// then what the sample shows that needs doing (ML work translated by
/// Rosetta 2, framework versions that do not go together:
/// [`crate::sample::environment::doctor_checks`]).
fn sample_checks(sampler: &mut dyn Sampler) -> Vec<Check> {
    let (check, snap) = sample_check(sampler);
    let mut checks = vec![check];
    checks.extend(snap.as_ref().and_then(translated_ml));
    if let Some(snap) = &snap {
        checks.extend(crate::sample::environment::doctor_checks(snap));
    }
    checks
}

/// ML processes the sampler marked as translated by Rosetta 2 (macOS): a
/// warning naming them and what to install instead; `None` if there are
/// none (every other OS).
fn translated_ml(snap: &Snapshot) -> Option<Check> {
    let translated: Vec<_> = snap
        .processes
        .iter()
        .filter(|p| crate::workload::is_translated(&p.workload))
        .filter_map(|p| Some((p, crate::workload::translated_advice(&p.workload)?)))
        .collect();
    let (_, advice) = translated.first()?;
    let named: Vec<String> = translated
        .iter()
        .take(5)
        .map(|(p, _)| format!("{} ({})", crate::model::printable(&p.name), p.id.pid))
        .collect();
    Some(Check::warn(
        "rosetta-ml",
        format!(
            "{} ML process(es) run as x86_64 code under Rosetta 2: {}",
            translated.len(),
            named.join(", ")
        ),
        advice.clone(),
    ))
}

/// The end-to-end check and the snapshot it took.
fn sample_check(sampler: &mut dyn Sampler) -> (Check, Option<Snapshot>) {
    match sampler.sample() {
        Ok(snap) => {
            let e = snap.errors;
            let ml = snap.processes.iter().filter(|p| p.workload.is_ml()).count();
            let detail = format!(
                "{} sampler: {} processes ({} ML), {} GPU(s), {:.1} ms; not read: {} vanished, {} permission denied, {} unreadable",
                sampler.name(),
                snap.processes.len(),
                ml,
                snap.gpus.len(),
                snap.sample_micros as f64 / 1000.0,
                e.vanished,
                e.permission_denied,
                e.unreadable,
            );
            let check = if e.unreadable > 0 {
                Check::warn(
                    "sample",
                    detail,
                    "some sources could not be read; see the checks below",
                )
            } else {
                Check::ok("sample", detail)
            };
            (check, Some(snap))
        }
        Err(e) => (
            Check::fail(
                "sample",
                format!("{} sampler failed: {e}", sampler.name()),
                "headroom cannot run on this machine; please report this output",
            ),
            None,
        ),
    }
}

/// The collectors the daemon's loop holds beside its sampler's, in the
/// order its snapshots list them, after the sampler's: the record of how
/// processes end (`exits`, where one is read), the pressure notification,
/// the notebook lookup.
pub fn loop_collectors<'a>(
    exits: Option<&'a ExitCauses>,
    events: &'a PressureEvents,
    notebooks: &'a Notebooks,
) -> Vec<&'a dyn Collector> {
    let mut sources = exits.map(ExitCauses::collectors).unwrap_or_default();
    sources.push(events);
    sources.push(notebooks);
    sources
}

/// Run every check on this machine.
pub fn run() -> Report {
    let mut facts = common_facts();
    facts.extend(crate::sample::doctor_facts());
    let mut collectors = Collectors::open();
    let mut checks = sample_checks(collectors.sampler.as_mut());
    checks.extend(crate::sample::doctor_checks());
    checks.extend(doctor_checks(&collectors.list()));
    checks.push(crate::act::doctor::signals());
    checks.push(http_port());
    checks.push(daemon());
    checks.push(crate::act::doctor::notifier());
    Report { facts, checks }
}

/// The daemon's collectors as it starts them with the default config. The
/// pressure notification is not set up: its check registers one of its
/// own.
struct Collectors {
    sampler: Box<dyn Sampler>,
    exits: ExitCauses,
    events: PressureEvents,
    notebooks: Notebooks,
}

impl Collectors {
    fn open() -> Self {
        let gpu = crate::config::GpuConfig::default();
        let labels = crate::config::LabelsConfig::default();
        let (exits, _) = crate::sample::exit_causes();
        Self {
            sampler: platform_sampler(&gpu, &labels),
            exits,
            events: PressureEvents::none(),
            notebooks: Notebooks::start(
                &crate::config::JupyterConfig::default(),
                crate::os::this_process::running_as_root(),
            ),
        }
    }

    /// Every one, in the order the daemon's snapshots list them.
    fn list(&self) -> Vec<&dyn Collector> {
        let mut sources = self.sampler.collectors();
        sources.extend(self.own());
        sources
    }

    /// The loop's own.
    fn own(&self) -> Vec<&dyn Collector> {
        loop_collectors(Some(&self.exits), &self.events, &self.notebooks)
    }
}

/// Whether a daemon runs on the default state directory of whoever runs
/// the check (root's `/var/lib/headroom`, a user's own), and which.
fn daemon() -> Check {
    let journal = crate::journal::default_path(crate::os::this_process::effective_uid() == 0);
    daemon_check(&journal, crate::journal::state_lock::holder_of(&journal))
}

/// The `daemon` check, from what the lock of `journal`'s state directory
/// says: no daemon is no fault (`doctor` is often run before one is
/// started), and a lock that cannot be read is a warning saying why.
pub fn daemon_check(
    journal: &std::path::Path,
    held: std::io::Result<Option<Option<crate::journal::state_lock::Holder>>>,
) -> Check {
    const NAME: &str = "daemon";
    let dir = journal.parent().unwrap_or(journal).display();
    match held {
        Ok(None) => Check::ok(NAME, format!("no daemon runs on the state directory {dir}")),
        Ok(Some(Some(holder))) => Check::ok(
            NAME,
            format!(
                "a daemon runs on the state directory {dir}: {}",
                holder.describe()
            ),
        ),
        Ok(Some(None)) => Check::ok(
            NAME,
            format!("a daemon runs on the state directory {dir}; its lock file names no holder"),
        ),
        Err(e) => Check::warn(
            NAME,
            format!("cannot tell whether a daemon runs on the state directory {dir}: {e}"),
            "run `headroom doctor` as the daemon's user (root for the system service)",
        ),
    }
}

/// Who listens on the default HTTP address (`http.listen` of the embedded
/// default config).
fn http_port() -> Check {
    let addr = crate::config::Config::embedded_default().http.listen;
    http_port_check(
        addr,
        crate::os::sockets::listener_uids(addr.ip(), addr.port()),
        crate::os::this_process::effective_uid(),
        crate::os::user_names::user_name,
    )
}

/// The `http-port` check, from the uids listening on `addr` (`Ok(None)`:
/// the OS does not say), the uid running the check `me`, and `name` for a
/// uid's user. A listener of root or of `me` may be the daemon; one of
/// another user keeps a daemon from serving HTTP there (it samples and acts
/// regardless) and is refused by `headroom status`.
pub fn http_port_check(
    addr: std::net::SocketAddr,
    listeners: std::io::Result<Option<Vec<u32>>>,
    me: u32,
    name: impl Fn(u32) -> Option<String>,
) -> Check {
    const NAME: &str = "http-port";
    let named = |uid: u32| match name(uid) {
        Some(user) => format!("uid {uid} ({})", crate::model::printable(&user)),
        None => format!("uid {uid}"),
    };
    match listeners {
        Ok(None) => Check::not_applicable(
            NAME,
            format!("this OS does not tell who listens on {addr} (the default http.listen)"),
        ),
        Ok(Some(uids)) => match (uids.iter().find(|&&u| u != 0 && u != me), uids.first()) {
            (Some(&other), _) => Check::warn(
                NAME,
                format!(
                    "{addr} (the default http.listen) is held by {}: a daemon configured for it \
                     samples and acts, but serves no HTTP until the port is free, and \
                     `headroom status` refuses to ask it",
                    named(other)
                ),
                "stop that program, or set http.listen in the config to another port",
            ),
            (None, Some(&uid)) => Check::ok(
                NAME,
                format!(
                    "{addr} (the default http.listen) is held by {}: a running headroom \
                     daemon, or another program of that user",
                    named(uid)
                ),
            ),
            (None, None) => Check::ok(
                NAME,
                format!("{addr} (the default http.listen) is free for the daemon"),
            ),
        },
        Err(e) => Check::warn(
            NAME,
            format!("cannot tell who listens on {addr} (the default http.listen): {e}"),
            "run `headroom doctor` as root",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_check_names_the_holder_or_says_none_runs() {
        use crate::journal::state_lock::Holder;
        let journal = std::path::Path::new("/var/lib/headroom/journal.jsonl");
        let none = daemon_check(journal, Ok(None));
        assert_eq!(none.status, CheckStatus::Ok);
        assert_eq!(
            none.detail,
            "no daemon runs on the state directory /var/lib/headroom"
        );
        let holder = Holder {
            pid: 4242,
            uid: 0,
            user: Some("root".into()),
            command: "headroom run".into(),
            started: crate::model::Timestamp(1_764_000_000_000),
            address: Some("127.0.0.1:9717".into()),
            listening: true,
        };
        let held = daemon_check(journal, Ok(Some(Some(holder))));
        assert_eq!(held.status, CheckStatus::Ok);
        assert!(
            held.detail.contains("pid 4242 (user root)")
                && held.detail.contains("serving http://127.0.0.1:9717/"),
            "{}",
            held.detail
        );
        let denied = daemon_check(
            journal,
            Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied)),
        );
        assert_eq!(denied.status, CheckStatus::Warn);
        assert!(denied.detail.contains("cannot tell"), "{}", denied.detail);
    }

    #[test]
    fn doctor_asks_each_collector_the_snapshot_lists_once_in_its_order() {
        let mut collectors = Collectors::open();
        let mut snap = collectors
            .sampler
            .sample()
            .expect("a sample of this machine");
        // As the daemon's loop completes the list.
        snap.collectors
            .extend(crate::model::collector::gather(&collectors.own()));
        let listed: Vec<&str> = snap.collectors.iter().map(|c| c.name.as_str()).collect();
        let sources = collectors.list();
        let asked: Vec<&str> = sources
            .iter()
            .filter(|c| c.status().is_some())
            .map(|c| c.name())
            .collect();
        assert_eq!(asked, listed);
        let unique: std::collections::HashSet<&str> = listed.iter().copied().collect();
        assert_eq!(unique.len(), listed.len(), "a name twice: {listed:?}");
        // The sources every machine has, whatever it reads.
        for name in ["pressure-events", "jupyter"] {
            assert!(listed.contains(&name), "no {name} in {listed:?}");
        }
        if std::env::consts::OS == "linux" {
            for name in ["cgroups", "kernel-log"] {
                assert!(listed.contains(&name), "no {name} in {listed:?}");
            }
        }
        // Each one's check is a line of the report.
        let lines: Vec<&str> = doctor_checks(&sources).iter().map(|c| c.name).collect();
        for line in ["post-mortems", "jupyter"] {
            assert!(lines.contains(&line), "no {line} in {lines:?}");
        }
    }

    #[test]
    fn the_report_has_one_line_per_check_with_the_next_step() {
        let report = Report {
            facts: vec![("version", "0.1.0".into()), ("os", "linux".into())],
            checks: vec![
                Check::ok("proc", "/proc readable"),
                Check::warn("psi-trigger", "refused: EPERM", "run as root"),
                Check::not_applicable("gpu", "no GPU collector"),
            ],
        };
        let text = report.render();
        assert!(text.starts_with("headroom doctor\nversion  0.1.0\nos       linux\n\n"));
        assert!(
            text.contains("\nok    proc         /proc readable\n"),
            "{text}"
        );
        assert!(
            text.contains("\nwarn  psi-trigger  refused: EPERM — run as root\n"),
            "{text}"
        );
        assert!(
            text.contains("\nn/a   gpu          no GPU collector\n"),
            "{text}"
        );
        assert!(text.ends_with("\n1 ok, 1 warn, 0 fail, 1 n/a\n"), "{text}");
        assert!(report.healthy());
    }

    fn port_check(listeners: std::io::Result<Option<Vec<u32>>>) -> Check {
        let name = |uid| (uid == 999).then(|| "mallory".to_string());
        http_port_check("127.0.0.1:9717".parse().unwrap(), listeners, 1000, name)
    }

    #[test]
    fn a_port_held_by_another_user_is_a_warning_naming_them() {
        let c = port_check(Ok(Some(vec![999])));
        assert_eq!(c.status, CheckStatus::Warn);
        assert!(
            c.detail.contains("127.0.0.1:9717") && c.detail.contains("uid 999 (mallory)"),
            "{}",
            c.detail
        );
        assert!(c.next.is_some_and(|n| n.contains("http.listen")));
    }

    #[test]
    fn a_free_port_or_one_of_root_or_the_caller_is_fine() {
        for uids in [vec![], vec![0], vec![1000]] {
            let c = port_check(Ok(Some(uids.clone())));
            assert_eq!(c.status, CheckStatus::Ok, "{uids:?}: {}", c.detail);
        }
        assert_eq!(port_check(Ok(None)).status, CheckStatus::NotApplicable);
        let c = port_check(Err(std::io::Error::other("EACCES")));
        assert_eq!(c.status, CheckStatus::Warn);
        assert!(c.detail.contains("EACCES"), "{}", c.detail);
    }

    #[test]
    fn only_a_failed_check_makes_the_report_unhealthy() {
        let mut report = Report {
            facts: vec![],
            checks: vec![Check::warn("x", "partly", "do y")],
        };
        assert!(report.healthy());
        report
            .checks
            .push(Check::fail("sample", "broken", "report it"));
        assert!(!report.healthy());
    }

    #[test]
    fn the_sample_check_runs_this_machines_sampler() {
        let checks = sample_checks(
            platform_sampler(
                &crate::config::GpuConfig::default(),
                &crate::config::LabelsConfig::default(),
            )
            .as_mut(),
        );
        let check = &checks[0];
        assert_ne!(check.status, CheckStatus::Fail, "{check:?}");
        assert!(check.detail.contains("processes"), "{check:?}");
    }

    #[test]
    fn ml_work_under_rosetta_is_a_warning_with_what_to_install() {
        use crate::model::build::{process, snapshot};
        use crate::model::{Framework, WorkloadKind};
        let mut kernel = process(4242)
            .name("python3.9")
            .kind(WorkloadKind::Jupyter)
            .frameworks([Framework::Tensorflow])
            .build();
        crate::workload::mark_translated(&mut kernel.workload);
        let mut shell = process(77).name("zsh").build();
        crate::workload::mark_translated(&mut shell.workload);
        let native = process(5).name("python3").build();
        let mut snap = snapshot(0).processes([kernel, shell, native]).build();
        let check = translated_ml(&snap).expect("a translated ML process");
        assert_eq!(check.status, CheckStatus::Warn);
        assert_eq!(check.name, "rosetta-ml");
        assert!(check.detail.starts_with("1 ML process(es)"), "{check:?}");
        assert!(check.detail.contains("python3.9 (4242)"), "{check:?}");
        assert!(!check.detail.contains("zsh"), "{check:?}");
        let next = check.next.as_deref().unwrap_or("");
        assert!(
            next.contains("arm64 Python") && next.contains("2.13"),
            "{next}"
        );
        // Without translated ML work there is nothing to say.
        snap.processes.remove(0);
        assert_eq!(translated_ml(&snap), None);
    }
}
