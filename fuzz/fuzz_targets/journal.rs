//! Fuzz target: the journal reader, as `headroom events` runs it on a
//! journal file that may be torn, corrupt or hostile. Any bytes must read
//! as events, torn and corrupt lines without a panic; each event must render
//! as its display line (with any time-zone offset), and write back as a
//! journal line that reads as the same event.

#![no_main]

use std::path::Path;

use headroom::event::Event;
use headroom::journal::{ReadOutcome, read_from};
use headroom::{event_line, local_time};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut out = ReadOutcome::default();
    read_from(data, Path::new("fuzz.jsonl"), None, &mut out).expect("reading bytes cannot fail");
    assert!(out.torn <= 1);
    assert_eq!(out.corrupt > 0, out.first_corrupt.is_some());
    for event in &out.events {
        for offset in [0, 14 * 3600, -12 * 3600] {
            let time = local_time::format_with_offset(event.at, offset);
            let _ = event_line::render(event, &time);
        }
        let line = serde_json::to_string(event).expect("an event encodes");
        let back: Event = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("written event does not read back: {e}\n{line}"));
        assert_eq!(&back, event, "{line}");
    }
});
