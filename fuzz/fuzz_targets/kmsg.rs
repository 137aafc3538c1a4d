//! Fuzz target: the kernel log records the daemon reads from `/dev/kmsg`
//! (as root, to learn which process the OOM killer took). The input is a
//! stream of records, one per line; each goes through the record parser,
//! the OOM-line parser and the joiner that pairs `oom-kill:` and `Killed
//! process` lines, and through `KernelLog::take`, as `KmsgReader::read_new`
//! does. Any bytes must give records or nothing: never a panic, an overflow
//! or a slice out of bounds.

#![no_main]

use std::path::Path;

use headroom::model::Timestamp;
use headroom::os::linux::kmsg::{self, KernelLog, KernelRecords, OomJoiner, OomLine};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut joiner = OomJoiner::default();
    let mut log = KernelLog::for_release(Some("6.18.44"));
    let mut records = KernelRecords::default();
    for raw in text.split('\n') {
        log.take(raw, Path::new("/dev/kmsg"), Timestamp(1), &mut records);
        // A record parsed from the line, or the line as a bare message:
        // both paths reach the OOM parser.
        let message = match kmsg::parse_record(raw) {
            Some(record) => {
                assert!(record.level <= 7);
                assert!(record.message.len() <= raw.len());
                record.message
            }
            None => raw,
        };
        match kmsg::parse_oom_message(message) {
            Some(OomLine::Killed { comm, .. }) => assert!(comm.len() <= message.len()),
            Some(OomLine::Constraint { task, .. }) => assert!(task.len() <= message.len()),
            Some(OomLine::GroupKill { cgroup }) => assert!(cgroup.len() <= message.len()),
            None => {}
        }
        if let Some(kill) = joiner.feed(message, Path::new("/dev/kmsg"), Timestamp(1)) {
            let _ = format!("{kill:?}");
        }
    }
    // Only the kernel's records count, and a kill is of a line read.
    assert!(records.kills.iter().all(|k| text.contains(&k.message)));
});
