//! The actuator driven in-process, shared by both tiers' actuator tests: a
//! decision on a process, the actuator that carries it out, and the outcome
//! of the event that comes back on its channel.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use headroom::act::{Actuator, ActuatorOptions, identity};
use headroom::event::{Event, EventKind, Outcome, ProcessRef};
use headroom::model::WorkloadKind;
use headroom::policy::{Action, Decision, Reach, SignalName};

/// How long a test waits for the actuator's event or a hog's line.
pub const WAIT: Duration = Duration::from_secs(10);

/// A reference to the live process `pid`, named `headroom-hog`, 4 MiB.
pub fn process(pid: u32) -> ProcessRef {
    ProcessRef {
        pid,
        start: identity::current_start(pid)
            .unwrap()
            .expect("the process exists"),
        name: "headroom-hog".into(),
        user: None,
        uid: None,
        workload: WorkloadKind::Other,
        footprint: 4 << 20,
        kernel_id: None,
        notebook: None,
        labels: None,
    }
}

/// Rule `test-rule`'s first step on `process`, over a 2 MiB limit, reaching
/// this user's processes.
pub fn decision(process: ProcessRef, action: Action) -> Decision {
    Decision {
        rule: "test-rule".into(),
        process,
        step: 0,
        action,
        dry_run: false,
        replayed: false,
        limit: "footprint > 2 MiB".into(),
        reason: "footprint 4 MiB > 2 MiB".into(),
        reach: Reach::own_user(headroom::os::this_process::effective_uid()),
    }
}

/// A plain signal step.
pub fn signal(signal: SignalName) -> Action {
    Action::Signal {
        signal,
        require_handler: false,
        process_group: false,
    }
}

/// An actuator with default options and the channel its events come on.
pub fn actuator() -> (Actuator, Receiver<Event>) {
    let (tx, rx) = mpsc::channel();
    (Actuator::new(ActuatorOptions::default(), tx), rx)
}

/// Execute one decision and return the event it produced.
pub fn run(d: &Decision) -> EventKind {
    let (mut act, rx) = actuator();
    act.execute(d);
    rx.recv_timeout(WAIT).expect("an event").kind
}

/// The outcome and detail of an `Action` event.
pub fn outcome(kind: EventKind) -> (Outcome, String) {
    match kind {
        EventKind::Action {
            outcome, detail, ..
        } => (outcome, detail),
        other => panic!("expected an action event, got {other:?}"),
    }
}

/// The reason of a `Refused` outcome.
pub fn refusal(kind: EventKind) -> String {
    match outcome(kind).0 {
        Outcome::Refused(why) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A hook step: `/bin/sh ARGS`, killed after `timeout`.
pub fn hook(args: &[&str], timeout: Duration) -> Action {
    Action::Hook {
        command: PathBuf::from("/bin/sh"),
        args: args.iter().map(|a| a.to_string()).collect(),
        timeout,
    }
}
