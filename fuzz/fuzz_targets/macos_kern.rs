//! Fuzz target: the macOS parsers of kernel answers, compiled and fuzzed on
//! any OS: the `sysctl(KERN_PROCARGS2)` buffer (argc, exec path, argv, env)
//! and the `sysctl(KERN_PROC_PID)` `kinfo_proc` record. The first byte picks
//! the parser (and, for the arguments, whether the answer filled its buffer,
//! when only argc may be read). Neither may panic or read past the buffer,
//! whatever a racing or hostile process leaves in its argument area.

#![no_main]

use headroom::model::{ARGV_MAX_ARGS, ARGV_MAX_BYTES, ARGV_TRUNCATED};
use headroom::os::macos::parse::procargs;
use headroom::os::macos::parse::kinfo as kinfo;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, buf)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        let filled = which % 4 == 2;
        let parsed = if filled {
            procargs::parse_answer(buf, buf.len())
        } else {
            procargs::parse(buf)
        };
        if let Ok(p) = parsed {
            // A filled buffer may be a tail: nothing but argc is read.
            assert!(!filled || (p.cut_at_front && p.exec_path.is_empty() && p.argv.len() == 1));
            // What is kept is bounded whatever the buffer holds.
            assert!(p.argv.len() <= ARGV_MAX_ARGS);
            assert!(p.env.len() <= ARGV_MAX_ARGS);
            assert!(p.env.iter().map(|e| e.len() + 1).sum::<usize>() <= ARGV_MAX_BYTES);
            let cut = p.argv.last().is_some_and(|a| a.starts_with(ARGV_TRUNCATED));
            let kept = if cut {
                &p.argv[..p.argv.len() - 1]
            } else {
                &p.argv[..]
            };
            assert!(kept.iter().map(|a| a.len() + 1).sum::<usize>() <= ARGV_MAX_BYTES);
            // Never more arguments than argc (a cut one and its mark count
            // for one more at most), and complete means all of them, unless
            // the cap cut them.
            assert!(p.argv.len() <= p.argc as usize + usize::from(cut));
            assert!(!p.complete || cut || p.argv.len() == p.argc as usize);
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
