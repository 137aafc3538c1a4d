//! Events: what headroom saw cross a line and what it did about it.
//!
//! The policy decides, the actuator acts, and both outcomes become
//! [`Event`]s that the journal appends (one JSON object per line), the
//! metrics count, and the API and status page show.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::text_caps::{
    CAUSE_MAX, NAME_MAX, PATH_MAX, RECORD_MAX, SIGNAL_NAME_MAX, cap, cap_opt, capped,
};
use crate::model::{LabelSet, ProcessId, ProcessSample, Timestamp, WorkloadKind};

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
    /// Who the process belonged to: its pod, container, Slurm job or
    /// systemd unit, as its cgroup said. Absent where nothing was known,
    /// and in journals written before labels existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<LabelSet>,
}

impl ProcessRef {
    /// `p` as an event names it. Its texts come from what its owner
    /// controls (its name, its command line, its Jupyter server's answer);
    /// each is kept to its cap ([`crate::model::text_caps`]) whatever the
    /// sampler read, so that every event, journal line, log line and hook
    /// variable made from it is bounded.
    pub fn of(p: &ProcessSample) -> Self {
        Self {
            pid: p.id.pid,
            start: p.id.start,
            name: capped(&p.name, NAME_MAX).into_owned(),
            user: p.user.as_ref().map(|u| capped(u, NAME_MAX).into_owned()),
            uid: p.uid,
            workload: p.workload.kind,
            footprint: p.footprint,
            kernel_id: p
                .workload
                .kernel_id
                .as_deref()
                .map(|k| capped(k, NAME_MAX).into_owned()),
            notebook: p
                .workload
                .notebook
                .as_deref()
                .map(|n| capped(n, PATH_MAX).into_owned()),
            labels: p.labels.as_ref().map(|l| (**l).clone()),
        }
    }

    /// Left out for a viewer who does not own the process: its kernel id
    /// and notebook (known only from its command line and its own Jupyter
    /// server).
    fn redact(&mut self) {
        self.kernel_id = None;
        self.notebook = None;
        // A Docker container's name comes from Docker's root-only directory;
        // the ids in the cgroup path, which anyone may read, stay.
        if let Some(labels) = &mut self.labels {
            *labels = labels.without_private_names();
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
    /// A user's process events (post-mortems, limits crossed or cleared)
    /// past that user's share of the journal, counted instead of written:
    /// one summary per user for each minute in which the share ran out (see
    /// [`crate::journal::shares`]). Written to the journal only.
    EventsSummarized {
        /// The owner of the processes; `None` where it could not be read.
        uid: Option<u32>,
        user: Option<String>,
        /// When the minute summarised began; the event's `at` is when it
        /// ended.
        since: Timestamp,
        /// The user's process events written in full in that minute.
        written: u64,
        /// The events left out, by name (`exited`, `limit-crossed`, ...).
        left_out: BTreeMap<String, u64>,
        /// The post-mortems among them, by cause (`unknown`, `oom-killer`,
        /// ...).
        #[serde(default)]
        causes: BTreeMap<String, u64>,
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

impl Event {
    /// The uid of the process the event is about: `None` for the daemon's
    /// own events (started, stopped, config reloaded), `Some(None)` for a
    /// process whose owner is unknown.
    pub fn about_uid(&self) -> Option<Option<u32>> {
        self.kind.process().map(|p| p.uid)
    }

    /// The event as a viewer who does not own its process may see it: the
    /// process's kernel id and notebook left out (also of the job's root a
    /// worker's post-mortem names), and of a post-mortem's cause everything
    /// the kernel log or a crash report said ([`ExitCause::redacted`]):
    /// the OS shows another user's kernel log lines to no one but root.
    pub fn redacted(&self) -> Event {
        let mut e = self.clone();
        match &mut e.kind {
            EventKind::LimitCrossed { process, .. }
            | EventKind::LimitCleared { process, .. }
            | EventKind::LimitHeldNotActing { process, .. }
            | EventKind::Action { process, .. }
            | EventKind::Skipped { process, .. } => process.redact(),
            EventKind::Exited {
                process,
                cause,
                worker_of,
                ..
            } => {
                process.redact();
                if let Some(root) = worker_of {
                    root.redact();
                }
                if let Some(cause) = cause {
                    *cause = cause.redacted();
                }
            }
            // A summary names a user and counts of events: nothing `ps`
            // would not show.
            EventKind::Started { .. }
            | EventKind::Stopped
            | EventKind::ConfigReloaded { .. }
            | EventKind::EventsSummarized { .. } => {}
        }
        e
    }
}

impl EventKind {
    /// The process the event is about; `None` for the daemon's own events
    /// and for a summary of a user's events (written to the journal only).
    pub fn process(&self) -> Option<&ProcessRef> {
        match self {
            EventKind::LimitCrossed { process, .. }
            | EventKind::LimitCleared { process, .. }
            | EventKind::LimitHeldNotActing { process, .. }
            | EventKind::Action { process, .. }
            | EventKind::Skipped { process, .. }
            | EventKind::Exited { process, .. } => Some(process),
            EventKind::Started { .. }
            | EventKind::Stopped
            | EventKind::ConfigReloaded { .. }
            | EventKind::EventsSummarized { .. } => None,
        }
    }

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
            EventKind::EventsSummarized { .. } => "events-summarized",
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

impl ExitCause {
    /// A cause built from a record: its texts kept to their caps
    /// ([`crate::model::text_caps`]), since a record quotes what the
    /// process's owner controls (its name, its libraries' names).
    pub fn bounded(self) -> ExitCause {
        ExitCause {
            how: cap(self.how, CAUSE_MAX),
            detail: cap_opt(self.detail, RECORD_MAX),
            signal: cap_opt(self.signal, SIGNAL_NAME_MAX),
            library: cap_opt(self.library, NAME_MAX),
            cgroup: cap_opt(self.cgroup, PATH_MAX),
            ..self
        }
    }

    /// The cause as a viewer who does not own the process may see it: the
    /// kind, the signal and whether memory was the reason stay; the record
    /// (`detail`, with its addresses), the library and `how` (which quotes
    /// the record) are left out where a record said why, and `how` says
    /// that the record is shown to root and the process's owner only.
    pub fn redacted(&self) -> ExitCause {
        let from_a_record = self.detail.is_some()
            || self.library.is_some()
            || matches!(
                self.kind,
                ExitCauseKind::OomKiller
                    | ExitCauseKind::Jetsam
                    | ExitCauseKind::Crashed
                    | ExitCauseKind::GpuError
            );
        if !from_a_record {
            return self.clone();
        }
        ExitCause {
            kind: self.kind,
            how: format!(
                "{}; the record is shown only to root and to the process's owner",
                self.kind.in_words()
            ),
            detail: None,
            signal: self.signal.clone(),
            library: None,
            not_memory: self.not_memory,
            // Anyone may read a process's cgroup (`/proc/[pid]/cgroup`) and
            // its limit: the cgroup and limit stay.
            cgroup: self.cgroup.clone(),
            cgroup_limit: self.cgroup_limit,
        }
    }
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

    /// What a record of this kind says, in words, without the record.
    pub fn in_words(self) -> &'static str {
        match self {
            ExitCauseKind::SignalByHeadroom => "headroom's signal ended it",
            ExitCauseKind::OomKiller => "the kernel log recorded the OOM killer ending it",
            ExitCauseKind::Jetsam => "the system log recorded jetsam ending it",
            ExitCauseKind::Crashed => "the kernel log or a crash report recorded a crash",
            ExitCauseKind::GpuError => "the kernel log recorded a GPU error in its work",
            ExitCauseKind::Exited => "it exited by itself",
            ExitCauseKind::Unknown => "nothing says why it ended",
        }
    }

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
                    labels: None,
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
                    labels: None,
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
    fn a_process_ref_keeps_each_text_to_its_cap() {
        use crate::model::build::process;
        let p = process(7)
            .name("n".repeat(4000))
            .user("u".repeat(4000))
            .kernel_id("k".repeat(4000))
            .notebook("p".repeat(3_900_000))
            .build();
        let r = ProcessRef::of(&p);
        assert!(r.name.len() <= NAME_MAX && r.name.starts_with("nnn"));
        assert!(r.user.as_ref().unwrap().len() <= NAME_MAX);
        assert!(r.kernel_id.as_ref().unwrap().len() <= NAME_MAX);
        assert_eq!(r.notebook.as_ref().unwrap().len(), PATH_MAX);
        let short = ProcessRef::of(&process(8).notebook("work/train.ipynb").build());
        assert_eq!(short.notebook.as_deref(), Some("work/train.ipynb"));
    }

    fn crash() -> ExitCause {
        ExitCause {
            kind: ExitCauseKind::Crashed,
            how: "the kernel log (/dev/kmsg) recorded a crash of pid 42 (python3): segfault at 0 \
                  in libsecret_op.so, which ends it with SIGSEGV"
                .into(),
            detail: Some(
                "python3[42]: segfault at 0 ip 00007f7b7b6a2101 sp 00007ffdc205c448 error 4 in \
                 libsecret_op.so[7f7b7b6a2000+1000]"
                    .into(),
            ),
            signal: Some("SIGSEGV".into()),
            library: Some("libsecret_op.so".into()),
            not_memory: true,
            ..ExitCause::default()
        }
    }

    #[test]
    fn a_cause_from_a_record_is_bounded() {
        let long = ExitCause {
            how: "h".repeat(100_000),
            detail: Some("d".repeat(100_000)),
            signal: Some("S".repeat(100)),
            library: Some("l".repeat(10_000)),
            ..crash()
        }
        .bounded();
        assert!(long.how.len() <= CAUSE_MAX);
        assert!(long.detail.unwrap().len() <= RECORD_MAX);
        assert!(long.signal.unwrap().len() <= SIGNAL_NAME_MAX);
        assert!(long.library.unwrap().len() <= NAME_MAX);
        assert_eq!(crash().bounded(), crash());
    }

    #[test]
    fn a_redacted_post_mortem_keeps_the_kind_and_signal_and_nothing_of_the_record() {
        let root = ProcessRef {
            pid: 40,
            start: 1,
            name: "python3".into(),
            user: Some("ana".into()),
            uid: Some(1000),
            workload: WorkloadKind::Jupyter,
            footprint: 10,
            kernel_id: Some("3f2a".into()),
            notebook: Some("secret/plans.ipynb".into()),
            labels: None,
        };
        let e = Event {
            at: Timestamp(5),
            kind: EventKind::Exited {
                process: ProcessRef {
                    pid: 42,
                    workload: WorkloadKind::Pytorch,
                    ..root.clone()
                },
                last_action: None,
                peak_footprint: 10,
                last_growth_bytes_per_second: None,
                headroom_action: None,
                cause: Some(crash()),
                job: None,
                worker_of: Some(Box::new(root)),
            },
        };
        assert_eq!(e.about_uid(), Some(Some(1000)));
        let r = e.redacted();
        let json = serde_json::to_string(&r).unwrap();
        for secret in [
            "plans.ipynb",
            "3f2a",
            "libsecret",
            "segfault",
            "7f7b7b6a2101",
        ] {
            assert!(!json.contains(secret), "{secret} in {json}");
        }
        let EventKind::Exited { cause, process, .. } = &r.kind else {
            panic!("{r:?}")
        };
        let cause = cause.as_ref().unwrap();
        assert_eq!(cause.kind, ExitCauseKind::Crashed);
        assert_eq!(cause.signal.as_deref(), Some("SIGSEGV"));
        assert!(cause.not_memory);
        assert!(cause.how.contains("shown only to root"), "{}", cause.how);
        assert_eq!((process.pid, process.uid), (42, Some(1000)));
    }

    #[test]
    fn a_cause_without_a_record_is_kept_whole_for_others() {
        let exited = ExitCause {
            kind: ExitCauseKind::Exited,
            how: "its exit status, read from /proc/42/stat before its parent collected it: 0"
                .into(),
            ..ExitCause::default()
        };
        assert_eq!(exited.redacted(), exited);
        let started = Event {
            at: Timestamp(1),
            kind: EventKind::Stopped,
        };
        assert_eq!(started.about_uid(), None);
        assert_eq!(started.redacted(), started);
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
