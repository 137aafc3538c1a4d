//! Fuzz target: the lines of `log stream --style ndjson` the macOS daemon
//! reads (as root or an administrator) to learn of jetsam kills. A local
//! user can write any text to the unified log, so a line is hostile until
//! proven the kernel's. The input is a stream of lines; each goes through
//! the stream-line parser
//! and, as a bare message, the kill-message parser. Any bytes must give a
//! kill, nothing, a refusal or an error: never a panic, and a kill's name
//! comes from the line.

#![no_main]

use headroom::os::macos::parse::jetsam::{self, StreamLine};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.split('\n') {
        match jetsam::parse_stream_line(line) {
            StreamLine::Kill(k) => assert!(line.len() >= k.name.len()),
            StreamLine::Other | StreamLine::NotKernel { .. } | StreamLine::Invalid(_) => {}
        }
        if let Some(k) = jetsam::parse_kill_message(line) {
            assert!(line.contains(&k.name));
            let _ = jetsam::reason_words(k.reason.as_deref().unwrap_or(""));
        }
    }
});
