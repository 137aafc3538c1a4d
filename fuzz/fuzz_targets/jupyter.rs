//! Fuzz target: what the daemon reads from Jupyter servers it did not start.
//! As root it reads other users' runtime directories, so a server file and
//! a `/api/sessions` answer are both hostile input. The first byte picks
//! the parser: a server file (`jpserver-PID.json`), a sessions answer, the
//! url a token may be sent to, or a runtime file's name. Each must return
//! a value or an error, and a url headroom accepts must be on loopback.

#![no_main]

use std::path::Path;

use headroom::jupyter::{runtime, sessions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match which % 4 {
        0 => {
            let file = Path::new("/home/ada/.local/share/jupyter/runtime/jpserver-1.json");
            if let Ok(server) = runtime::parse_server_file(file, &text, Some(1000)) {
                assert!(!server.url.is_empty());
                // A server file's url goes through the same check as any.
                if let Ok(url) = sessions::sessions_url(&server.url) {
                    assert_loopback(&url);
                }
            }
        }
        1 => {
            if let Ok(list) = sessions::parse_sessions(&text) {
                assert!(list.iter().all(|s| !s.path.is_empty()));
            }
        }
        2 => {
            if let Ok(url) = sessions::sessions_url(&text) {
                assert_loopback(&url);
            }
        }
        _ => {
            if runtime::is_server_file(&text) {
                assert!(text.ends_with(".json"));
            }
        }
    }
});

/// The token is only ever sent to this machine.
fn assert_loopback(url: &str) {
    assert!(
        url.starts_with("http://127.") || url.starts_with("http://[::1]:"),
        "{url}"
    );
    assert!(url.ends_with("/api/sessions"), "{url}");
}
