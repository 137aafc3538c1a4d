//! Fuzz target: the size, size-limit, rate and duration parsers of the
//! config (`"8GiB"`, `"60%"`, `"1GiB/10s"`, `"1m 30s"`). The first byte
//! picks the parser. Each must return a value or an error naming the input,
//! never panic or overflow; a value must print as text that parses back to
//! the same value.

#![no_main]

use headroom::config::{format_duration, parse_duration, parse_rate, parse_size, parse_size_limit};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match which % 4 {
        0 => match parse_size(text) {
            Ok(size) => assert_eq!(parse_size(&size.to_string()), Ok(size)),
            Err(e) => assert_eq!(e.input(), text),
        },
        1 => match parse_size_limit(text) {
            Ok(limit) => {
                assert_eq!(parse_size_limit(&limit.to_string()), Ok(limit));
                let _ = limit.resolve(u64::MAX);
                let _ = limit.resolve(0);
            }
            Err(e) => assert_eq!(e.input(), text),
        },
        2 => match parse_rate(text) {
            Ok(rate) => {
                assert!(!rate.per.is_zero());
                assert_eq!(parse_rate(&rate.to_string()), Ok(rate));
                assert!(rate.bytes_per_second().is_finite());
            }
            Err(e) => assert_eq!(e.input(), text),
        },
        _ => match parse_duration(text) {
            Ok(d) => assert_eq!(parse_duration(&format_duration(d)), Ok(d)),
            Err(e) => assert_eq!(e.input(), text),
        },
    }
});
