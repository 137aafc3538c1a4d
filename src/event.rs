//! Events: what headroom saw cross a line and what it did about it.
//!
//! The policy decides, the actuator acts, and both outcomes become
//! [`Event`]s that the journal appends (one JSON object per line), the
//! metrics count, and the API and status page show.

use serde::{Deserialize, Serialize};

use crate::model::{ProcessId, ProcessSample, Timestamp, WorkloadKind};

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at: Timestamp,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The process an event is about, as it was when the event happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRef {
    pub pid: u32,
    pub start: u64,
    pub name: String,
    pub user: Option<String>,
    pub uid: Option<u32>,
    pub workload: WorkloadKind,
    pub footprint: u64,
    pub kernel_id: Option<String>,
    /// The notebook the kernel runs, where its Jupyter server said.
    #[serde(default)]
    pub notebook: Option<String>,
}

impl ProcessRef {
    pub fn of(p: &ProcessSample) -> Self {
        Self {
            pid: p.id.pid,
            start: p.id.start,
            name: p.name.to_string(),
            user: p.user.as_ref().map(ToString::to_string),
            uid: p.uid,
            workload: p.workload.kind,
            footprint: p.footprint,
            kernel_id: p.workload.kernel_id.clone(),
            notebook: p.workload.notebook.clone(),
        }
    }

    pub fn id(&self) -> ProcessId {
        ProcessId {
            pid: self.pid,
            start: self.start,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum EventKind {
    /// The daemon started.
    Started {
        version: String,
        config: Option<String>,
        dry_run: bool,
    },
    /// The daemon stopped cleanly.
    Stopped,
    /// A config reload was applied (`error: None`) or rejected.
    ConfigReloaded { path: String, error: Option<String> },
    /// A rule's condition started to hold for a process.
    LimitCrossed {
        rule: String,
        process: ProcessRef,
        /// Which limit, in words: `footprint 9.1 GiB > 8 GiB`.
        detail: String,
    },
    /// A rule's limit or condition started to hold for a process the rule
    /// does not act on, and why: its owner (`other_users`, `root`), its
    /// protection, a cooldown, another process taken first. Once per
    /// crossing and reason, not once per sample; `limit-cleared` ends it.
    LimitHeldNotActing {
        rule: String,
        process: ProcessRef,
        /// Which limit, in words: `footprint 9.1 GiB > 8 GiB`.
        detail: String,
        /// Why the rule does not act, and what would change that: `owned by
        /// root and the rule has root = false; add root = true to act on
        /// root's processes`.
        reason: String,
    },
    /// A rule's condition stopped holding (below the hysteresis margin); its
    /// ladder starts again from the first step next time.
    LimitCleared {
        rule: String,
        process: ProcessRef,
        detail: String,
    },
    /// A step of a ladder was carried out (or, in a dry run, would have been).
    Action {
        rule: String,
        process: ProcessRef,
        /// 0-based index of the step in the rule's ladder.
        step: usize,
        /// `SIGINT`, `hook /usr/local/bin/x`, `notify`.
        action: String,
        /// Written as `"outcome": "done"` (plus `"why"` for refused and failed).
        #[serde(flatten)]
        outcome: Outcome,
        dry_run: bool,
        detail: String,
    },
    /// A step was not carried out, and why (no handler, protected, cooldown).
    Skipped {
        rule: String,
        process: ProcessRef,
        step: usize,
        action: String,
        reason: String,
    },
    /// A watched process (an ML workload, or one headroom acted on) has
    /// ended: its post-mortem. `at` is when headroom found it dead or gone,
    /// within one sampling interval of its end.
    Exited {
        /// As last seen alive: `footprint` is its last footprint.
        process: ProcessRef,
        /// The label of the last action headroom carried out on it, if any.
        last_action: Option<String>,
        /// The largest footprint seen: the OS's lifetime maximum where it
        /// keeps one (macOS `ri_lifetime_max_phys_footprint`), else the
        /// largest headroom sampled.
        peak_footprint: u64,
        /// How fast its footprint grew over its last 30 s, bytes per second.
        #[serde(default)]
        last_growth_bytes_per_second: Option<f64>,
        /// The last action headroom carried out on it, in full.
        #[serde(default)]
        headroom_action: Option<ActionTaken>,
        /// Why it ended, and how that was learned. Absent in journals
        /// written before post-mortems existed.
        #[serde(default)]
        cause: Option<ExitCause>,
        /// For the root of a job that had workers: the job summarised.
        /// Absent in journals written before jobs existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job: Option<JobEnd>,
        /// For a worker of a job (reported only when headroom acted on it
        /// or a record names its end): the job's root, as last seen.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_of: Option<Box<ProcessRef>>,
    },
}

/// A job's root ended: what its post-mortem says of the job (the root and
/// the processes below it, see [`crate::model::Job`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEnd {
    /// Its workers at the root's last live sample.
    pub workers: u32,
    /// The most workers it had at once.
    pub most_workers: u32,
    /// The largest total footprint of the job (the root and its workers,
    /// shared pages counted as the job's basis counts them).
    pub peak_footprint: u64,
    /// Of the workers at the root's last live sample, those that were gone
    /// (or dead, not yet collected) when the post-mortem was written; the
    /// others outlived it.
    pub ended_with: u32,
}

impl EventKind {
    /// The event's name as written in the journal (`limit-crossed`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Started { .. } => "started",
            EventKind::Stopped => "stopped",
            EventKind::ConfigReloaded { .. } => "config-reloaded",
            EventKind::LimitCrossed { .. } => "limit-crossed",
            EventKind::LimitHeldNotActing { .. } => "limit-held-not-acting",
            EventKind::LimitCleared { .. } => "limit-cleared",
            EventKind::Action { .. } => "action",
            EventKind::Skipped { .. } => "skipped",
            EventKind::Exited { .. } => "exited",
        }
    }
}

/// A step headroom carried out on a process, as its post-mortem recalls it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionTaken {
    pub rule: String,
    /// 0-based index of the step in the rule's ladder.
    pub step: usize,
    /// `SIGINT`, `hook /usr/local/bin/x`, `notify`.
    pub action: String,
    pub at: Timestamp,
}

/// Why a process ended, as far as it could be learned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitCause {
    pub kind: ExitCauseKind,
    /// How the cause was learned (or why it could not be), in words: the
    /// record that says so, or what was looked at and found silent.
    pub how: String,
    /// The record's own words, where there is one (the kernel's `Killed
    /// process …` line).
    #[serde(default)]
    pub detail: Option<String>,
    /// For a crash: the signal that ended it (`SIGSEGV`, `SIGILL`), as the
    /// record names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// For a crash: the library or program the faulting instruction was in
    /// (`libtensorflow_framework.so.2`), as the record names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// The record shows that running out of memory was not the reason (a
    /// crash, a GPU fault): the post-mortem says so, with the footprint at
    /// the last sample.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_memory: bool,
    /// For a kill by a memory cgroup's OOM killer: the cgroup whose limit
    /// was reached, as the kernel named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// That cgroup's limit in bytes, as last sampled before the kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_limit: Option<u64>,
}

/// The kinds of [`ExitCause`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExitCauseKind {
    /// headroom's own signal ended it.
    SignalByHeadroom,
    /// The Linux kernel's OOM killer (the machine's or a memory cgroup's).
    OomKiller,
    /// macOS's jetsam.
    Jetsam,
    /// It crashed: the OS recorded a fatal fault in it (a segfault, an
    /// illegal instruction, a general protection fault: the kernel log on
    /// Linux; a crash report on macOS).
    Crashed,
    /// The GPU driver recorded a fault in its GPU work (an NVIDIA Xid
    /// naming its pid), and it ended after.
    GpuError,
    /// It exited by itself (its exit status says so).
    Exited,
    /// Nothing says why.
    #[default]
    Unknown,
}

impl ExitCauseKind {
    /// Every kind, for metrics that list each one from the start.
    pub const ALL: [ExitCauseKind; 7] = [
        ExitCauseKind::OomKiller,
        ExitCauseKind::SignalByHeadroom,
        ExitCauseKind::Jetsam,
        ExitCauseKind::Crashed,
        ExitCauseKind::GpuError,
        ExitCauseKind::Exited,
        ExitCauseKind::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExitCauseKind::SignalByHeadroom => "signal-by-headroom",
            ExitCauseKind::OomKiller => "oom-killer",
            ExitCauseKind::Jetsam => "jetsam",
            ExitCauseKind::Crashed => "crashed",
            ExitCauseKind::GpuError => "gpu-error",
            ExitCauseKind::Exited => "exited",
            ExitCauseKind::Unknown => "unknown",
        }
    }
}

/// How an action ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "why", rename_all = "kebab-case")]
pub enum Outcome {
    /// The signal was delivered / the hook ran / the notification was shown.
    Done,
    /// Dry run: logged, nothing sent.
    DryRun,
    /// The process exited before the action could reach it.
    Gone,
    /// The pid now belongs to another process (start time differs): nothing sent.
    IdentityChanged,
    /// Refused by the safety checks (PID 1, the daemon, a protected process).
    Refused(String),
    /// The action failed (permission, hook exit status, timeout).
    Failed(String),
}

impl Outcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::DryRun => "dry-run",
            Outcome::Gone => "gone",
            Outcome::IdentityChanged => "identity-changed",
            Outcome::Refused(_) => "refused",
            Outcome::Failed(_) => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_a_kebab_case_tag() {
        let e = Event {
            at: Timestamp(1),
            kind: EventKind::ConfigReloaded {
                path: "/etc/headroom.toml".into(),
                error: None,
            },
        };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"at":1,"event":"config-reloaded","path":"/etc/headroom.toml","error":null}"#
        );
        let back: Event = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn an_action_event_reads_flat() {
        let e = Event {
            at: Timestamp(1),
            kind: EventKind::Action {
                rule: "r".into(),
                process: ProcessRef {
                    pid: 7,
                    start: 1,
                    name: "python3".into(),
                    user: None,
                    uid: Some(0),
                    workload: WorkloadKind::Jupyter,
                    footprint: 10,
                    kernel_id: None,
                    notebook: None,
                },
                step: 0,
                action: "SIGINT".into(),
                outcome: Outcome::Failed("EPERM".into()),
                dry_run: false,
                detail: "footprint 9 GiB > 8 GiB".into(),
            },
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["outcome"], "failed");
        assert_eq!(v["why"], "EPERM");
        assert_eq!(v["detail"], "footprint 9 GiB > 8 GiB");
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn a_held_crossing_reads_with_its_reason() {
        let e = Event {
            at: Timestamp(1),
            kind: EventKind::LimitHeldNotActing {
                rule: "notebook-runaway".into(),
                process: ProcessRef {
                    pid: 7,
                    start: 1,
                    name: "python3".into(),
                    user: Some("root".into()),
                    uid: Some(0),
                    workload: WorkloadKind::Jupyter,
                    footprint: 10,
                    kernel_id: None,
                    notebook: None,
                },
                detail: "footprint 9 GiB > 8 GiB".into(),
                reason: "owned by root and the rule has root = false".into(),
            },
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["event"], "limit-held-not-acting");
        assert_eq!(v["reason"], "owned by root and the rule has root = false");
        assert_eq!(e.kind.name(), "limit-held-not-acting");
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn outcomes_round_trip() {
        for o in [
            Outcome::Done,
            Outcome::DryRun,
            Outcome::Gone,
            Outcome::IdentityChanged,
            Outcome::Refused("pid 1".into()),
            Outcome::Failed("EPERM".into()),
        ] {
            let json = serde_json::to_string(&o).unwrap();
            assert_eq!(serde_json::from_str::<Outcome>(&json).unwrap(), o);
        }
    }

    #[test]
    fn an_exit_written_before_jobs_reads_without_a_job_and_a_job_round_trips() {
        let old = r#"{"at":5,"event":"exited","process":{"pid":7,"start":1,"name":"python3","user":null,"uid":0,"workload":"jupyter","footprint":10,"kernel_id":null},"last_action":null,"peak_footprint":20,"cause":null}"#;
        let e: Event = serde_json::from_str(old).unwrap();
        let EventKind::Exited { job, worker_of, .. } = &e.kind else {
            panic!("{e:?}")
        };
        assert_eq!((job, worker_of), (&None, &None));
        // Not written where there is nothing to say.
        let json = serde_json::to_string(&e).unwrap();
        assert!(
            !json.contains("\"job\"") && !json.contains("worker_of"),
            "{json}"
        );

        let mut with_job = e.clone();
        if let EventKind::Exited { job, .. } = &mut with_job.kind {
            *job = Some(JobEnd {
                workers: 8,
                most_workers: 8,
                peak_footprint: 21 << 30,
                ended_with: 7,
            });
        }
        let v = serde_json::to_value(&with_job).unwrap();
        assert_eq!(v["job"]["workers"], 8);
        assert_eq!(v["job"]["ended_with"], 7);
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(back, with_job);
    }
}
