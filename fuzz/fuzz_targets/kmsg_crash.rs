//! Fuzz target: the kernel log's crash and GPU-fault lines, which the
//! daemon reads from `/dev/kmsg` as root. Process names and library file
//! names in them are other users' choices. The input is a stream of
//! messages, one per line, each fed through the record parser (or taken as
//! a bare message) to the line parser and the joiner that pairs a fatal
//! signal with its register dump, as `KmsgReader::read_new` does. Any bytes
//! must give records or nothing: never a panic, an overflow or a slice out
//! of bounds, and a record's text comes from the line it was read from.

#![no_main]

use std::path::Path;

use headroom::model::Timestamp;
use headroom::os::linux::kmsg;
use headroom::os::linux::kmsg_crash::{self, CrashJoiner, KernelLine, KernelRecord};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut joiner = CrashJoiner::default();
    for raw in text.split('\n') {
        let message = kmsg::parse_record(raw).map_or(raw, |r| r.message);
        match kmsg_crash::parse_kernel_line(message) {
            Some(KernelLine::Fault {
                comm,
                library,
                fault,
                ..
            }) => {
                assert!(comm.len() <= message.len());
                assert!(fault.len() <= message.len());
                assert!(library.is_none_or(|l| message.contains(&l)));
            }
            Some(KernelLine::Xid { device, name, .. }) => {
                assert!(message.contains(&device));
                assert!(name.is_none_or(|n| message.contains(&n)));
            }
            Some(KernelLine::FatalSignal { head, .. }) => assert!(message.starts_with(&head)),
            Some(KernelLine::DumpHead { comm, .. }) => assert!(message.contains(&comm)),
            None => {}
        }
        match joiner.feed(message, Path::new("/dev/kmsg"), Timestamp(1)) {
            Some(KernelRecord::Crash(c)) => assert!(!c.message.is_empty()),
            Some(KernelRecord::Gpu(g)) => assert!(g.message == message),
            None => {}
        }
    }
});
