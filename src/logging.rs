//! Log setup: human-readable lines or JSON objects on request (for journald,
//! launchd log files or a log shipper). Everything goes to stderr, where
//! systemd and launchd collect it; with `run --log-file` (the launchd
//! plists pass it) stderr is that file, which the daemon rotates itself
//! ([`log_file`]).
//!
//! The level comes from `HEADROOM_LOG` (or `RUST_LOG`), in `tracing`'s
//! filter syntax, default `info`.
//!
//! Log records carry text other users control (process names, command
//! lines, notebook names, a hook's output). Whatever a call site forgets to
//! escape, the writer installed here ([`Escaping`]) escapes every control
//! character of a record except its final newline (`\n`, `\u{1b}`, as
//! [`crate::report::printable`] writes them) before it reaches stderr: a
//! record is one line, and no field can start a forged line or send an
//! escape sequence to the terminal of whoever reads the log. So the human
//! format has no ANSI colours, on a terminal too: colour codes are escape
//! sequences, and they would be escaped like any other. JSON records
//! already escape control characters inside strings (serde_json writes
//! `\u001b`); they go through the same writer, which leaves them as they are.
//!
//! A replay (`headroom run --replay`) marks every record, whichever thread
//! logs it: a human line starts with `[replay] `, a JSON record with
//! `"replay":true`, so that no line of a replay reads as this machine's.

pub mod log_file;

use std::io::{self, Write};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::config::LogFormat;
use crate::report::printable;

/// Install the global subscriber, marking every record as a replay's if
/// `replay`. Calling it twice keeps the first one.
pub fn init(format: LogFormat, replay: bool) {
    let filter = std::env::var("HEADROOM_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Escaping(io::stderr).marking_replay(replay));
    let result = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        LogFormat::Human => builder.with_ansi(false).with_target(false).try_init(),
    };
    // A subscriber already installed (tests, a second init) is not an error.
    drop(result);
}

/// A [`MakeWriter`] that escapes the control characters of each record
/// before handing it to the inner writer; see the module documentation.
#[derive(Debug, Clone)]
pub struct Escaping<M>(pub M);

impl<M> Escaping<M> {
    /// Mark every record as a replay's if `replay`.
    pub fn marking_replay(self, replay: bool) -> Marking<M> {
        Marking {
            inner: self.0,
            replay,
        }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Escaping<M> {
    type Writer = EscapingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        EscapingWriter {
            inner: self.0.make_writer(),
            record: Vec::new(),
            replay: false,
        }
    }
}

/// [`Escaping`], marking every record as a replay's where asked.
#[derive(Debug, Clone)]
pub struct Marking<M> {
    inner: M,
    replay: bool,
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Marking<M> {
    type Writer = EscapingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        EscapingWriter {
            inner: self.inner.make_writer(),
            record: Vec::new(),
            replay: self.replay,
        }
    }
}

/// One record's writer: collects what the formatter writes, and writes it
/// escaped, in one piece, when dropped (the formatter makes one writer per
/// record), or when flushed.
pub struct EscapingWriter<W: Write> {
    inner: W,
    record: Vec<u8>,
    /// Mark the record as a replay's ([`mark_replay`]).
    replay: bool,
}

impl<W: Write> EscapingWriter<W> {
    fn emit(&mut self) -> io::Result<()> {
        if self.record.is_empty() {
            return Ok(());
        }
        let mut line = escape_record(&self.record);
        if self.replay {
            line = mark_replay(&line);
        }
        self.record.clear();
        self.inner.write_all(line.as_bytes())?;
        self.inner.flush()?;
        log_file::wrote(line.len());
        Ok(())
    }
}

impl<W: Write> Write for EscapingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.record.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.emit()
    }
}

impl<W: Write> Drop for EscapingWriter<W> {
    fn drop(&mut self) {
        // Nowhere left to report a failing stderr.
        let _ = self.emit();
    }
}

/// `record` with every control character escaped, but for one final
/// newline, which is kept (and added if missing). Bytes that are not UTF-8
/// become U+FFFD.
pub fn escape_record(record: &[u8]) -> String {
    let text = String::from_utf8_lossy(record);
    let body = text.strip_suffix('\n').unwrap_or(&text);
    let mut line = printable(body).into_owned();
    line.push('\n');
    line
}

/// `line` (one escaped record) marked as a replay's: `{"replay":true,…}`
/// for a JSON record, `[replay] …` for a human one.
pub fn mark_replay(line: &str) -> String {
    match line.strip_prefix('{') {
        Some(rest) if rest.trim_start().starts_with('}') => format!("{{\"replay\":true{rest}"),
        Some(rest) => format!("{{\"replay\":true,{rest}"),
        None => format!("[replay] {line}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    const HOSTILE: &str = "\u{1b}[31mRED\n\u{7}<b>";

    /// A writer into a shared buffer, for reading back what was logged.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn assert_no_raw_controls(text: &str) {
        let body = text.strip_suffix('\n').unwrap_or(text);
        for c in body.chars() {
            assert!(!c.is_control() || c == '\n', "raw {c:?} in {text:?}");
        }
    }

    #[test]
    fn only_the_final_newline_stays() {
        assert_eq!(
            escape_record(b"a\nb\x1b[31m\x07\n"),
            "a\\nb\\u{1b}[31m\\u{7}\n"
        );
        assert_eq!(escape_record(b"plain"), "plain\n");
        assert_eq!(escape_record(b"two\n\n"), "two\\n\n");
    }

    #[test]
    fn a_human_record_with_a_hostile_field_is_one_escaped_line() {
        let out = Buffer::default();
        let writer = {
            let out = out.clone();
            Escaping(move || out.clone())
        };
        let subscriber = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(name = %HOSTILE, "dry run: would send SIGINT to {HOSTILE}");
        });
        let text = out.text();
        assert_eq!(text.matches('\n').count(), 1, "{text:?}");
        assert!(text.ends_with('\n'));
        assert_no_raw_controls(&text);
        assert!(text.contains("name=\\u{1b}[31mRED\\n\\u{7}<b>"), "{text}");
    }

    #[test]
    fn a_replays_records_are_marked_in_either_format() {
        for json in [false, true] {
            let out = Buffer::default();
            let writer = {
                let out = out.clone();
                Escaping(move || out.clone()).marking_replay(true)
            };
            let builder = tracing_subscriber::fmt()
                .with_writer(writer)
                .with_ansi(false);
            let log = || tracing::warn!(pid = 42, "dry run: replay: would send SIGTERM");
            if json {
                tracing::subscriber::with_default(builder.json().flatten_event(true).finish(), log);
                let text = out.text();
                let v: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
                assert_eq!(v["replay"], true, "{text}");
                assert_eq!(v["pid"], 42, "{text}");
            } else {
                tracing::subscriber::with_default(builder.finish(), log);
                let text = out.text();
                assert!(text.starts_with("[replay] "), "{text}");
                assert!(text.contains("would send SIGTERM"), "{text}");
            }
        }
        assert_eq!(mark_replay("{}\n"), "{\"replay\":true}\n");
    }

    #[test]
    fn a_json_record_escapes_hostile_text_on_its_own() {
        let out = Buffer::default();
        let raw = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || raw.clone())
            .json()
            .flatten_event(true)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(name = %HOSTILE, "would send SIGINT to {HOSTILE}");
        });
        // Without the escaping writer: serde_json already escapes.
        let text = out.text();
        assert_eq!(text.matches('\n').count(), 1, "{text:?}");
        assert_no_raw_controls(&text);
        let v: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(v["name"], HOSTILE);
        // And the escaping writer leaves a JSON record as it is.
        assert_eq!(escape_record(text.as_bytes()), text);
    }
}
