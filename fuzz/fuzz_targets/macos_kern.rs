//! Fuzz target: the macOS parsers of kernel answers, compiled and fuzzed on
//! any OS: the `sysctl(KERN_PROCARGS2)` buffer (argc, exec path, argv, env)
//! and the `sysctl(KERN_PROC_PID)` `kinfo_proc` record. The first byte picks
//! the parser. Neither may panic or read past the buffer, whatever a racing
//! or hostile process leaves in its argument area.

#![no_main]

use headroom::sample::macos::{kinfo, procargs};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, buf)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        if let Ok(p) = procargs::parse(buf) {
            // Never more arguments than argc, and complete means all of them.
            assert!(p.argv.len() <= p.argc as usize);
            assert!(!p.complete || p.argv.len() == p.argc as usize);
            assert!(p.complete || p.env.is_empty());
        }
    } else {
        match kinfo::parse(buf) {
            Ok(Some(facts)) => {
                assert_eq!(buf.len(), kinfo::KINFO_PROC_SIZE);
                assert!(facts.comm.len() <= 3 * 16, "p_comm is 16 bytes, lossy");
                for signal in 0..40 {
                    let _ = kinfo::in_mask(facts.sigcatch, signal);
                }
            }
            Ok(None) => assert!(buf.is_empty()),
            Err(e) => assert_eq!(e.got, buf.len()),
        }
    }
});
