//! Fuzz target: the JSON API's query-string and path-parameter parsers. The
//! first byte picks the endpoint, the rest is the raw query string (or the
//! `{pid}` path segment). Each must return its parameters or a 400 error
//! naming a parameter, with the quoted value cut to a bounded length.

#![no_main]

use headroom::http::query;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let q = Some(text);
    let result = match which % 5 {
        0 => query::processes(q).map(|p| {
            assert!((1..=query::ProcessesQuery::MAX_LIMIT).contains(&p.limit));
        }),
        1 => query::history(q).map(|h| {
            assert!((1..=query::HistoryQuery::MAX_MINUTES).contains(&h.minutes));
        }),
        2 => query::events(q).map(drop),
        3 => query::none(q),
        _ => query::pid(text).map(|pid| assert!(pid > 0)),
    };
    if let Err(e) = result {
        assert!(e.parameter.chars().count() <= 64);
        assert!(e.value.as_ref().is_none_or(|v| v.chars().count() <= 65));
        let _ = e.to_string();
    }
});
