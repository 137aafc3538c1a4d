//! [`ConfigError`]: what went wrong in a configuration file, where (file, line, column,
//! key path), with which value, and what to do about it.
//!
//! Errors come from three places, each with its own constructor: reading the file
//! ([`ConfigError::read`]), parsing and deserializing the TOML
//! ([`ConfigError::from_toml`], [`ConfigError::from_deserialize`]), and validating the
//! values ([`Source::error_at`]). serde's wording is rewritten into the project's:
//! `unknown key "intervall"; expected one of: interval, fast_interval, ...`.

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

/// A configuration that cannot be used. `Display` gives
/// `{file}:{line}:{column}: {key}: {message} (got {value})`, leaving out the parts that
/// are not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file, as given by the caller (a path, or a name such as `<embedded default>`).
    pub file: String,
    /// 1-based line of the offending text, when it can be located.
    pub line: Option<usize>,
    /// 1-based column, in characters, of the offending text.
    pub column: Option<usize>,
    /// Dotted key path, e.g. `daemon.interval`.
    pub key: Option<String>,
    /// The offending value as written in the file, e.g. `"12XB"` (quotes included).
    pub value: Option<String>,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        f.write_str(": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(value) = &self.value {
            write!(f, " (got {value})")?;
        }
        Ok(())
    }
}

/// Longest value or key quoted in an error; longer ones are cut with an ellipsis.
const MAX_VALUE_CHARS: usize = 60;

/// Longest message taken from the TOML parser or serde, which may quote the
/// input at length; longer ones are cut with an ellipsis.
const MAX_MESSAGE_CHARS: usize = 400;

/// `text`, cut to `max` characters with an ellipsis.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    } else {
        text.to_owned()
    }
}

impl ConfigError {
    /// An error about the file as a whole, with no position in it.
    pub fn whole_file(file: &str, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_owned(),
            line: None,
            column: None,
            key: None,
            value: None,
            message: message.into(),
        }
    }

    /// The file could not be read.
    pub fn read(path: &Path, error: &io::Error) -> Self {
        let message = match error.kind() {
            io::ErrorKind::NotFound => "the file does not exist; check the path, or start from \
                 the commented default that `headroom print-config` prints"
                .to_owned(),
            io::ErrorKind::PermissionDenied => "permission denied; make the file readable by \
                 the user headroom runs as"
                .to_owned(),
            io::ErrorKind::IsADirectory => {
                "this is a directory; give the path of a TOML file".to_owned()
            }
            // A FIFO, a device or a socket (`regular_file::open`).
            io::ErrorKind::InvalidInput => format!("this is {error}; give the path of a TOML file"),
            io::ErrorKind::FileTooLarge => format!(
                "the file is {error}, far more than any config; check that this is the right file"
            ),
            _ => format!("cannot read the file: {error}"),
        };
        Self::whole_file(&path.display().to_string(), message)
    }

    /// The TOML could not be parsed (syntax errors, duplicate keys).
    pub(crate) fn from_toml(source: &Source<'_>, error: &toml::de::Error) -> Self {
        let message = shorten(
            &error.message().trim_end().replace('\n', "; "),
            MAX_MESSAGE_CHARS,
        );
        let mut err = source.error(error.span(), None, format!("invalid TOML: {message}"));
        if message == "duplicate key" {
            // The span covers the repeated key (or table name); name it in the message.
            let name = err.value.take().unwrap_or_default();
            err.message = format!(
                "duplicate key {name:?}: a key or table may appear only once; remove or \
                 merge the repeated one"
            );
        }
        err
    }

    /// The TOML parsed but does not fit the expected structure (unknown keys, wrong
    /// types, values that are not sizes or durations).
    pub(crate) fn from_deserialize(
        source: &Source<'_>,
        error: serde_path_to_error::Error<toml::de::Error>,
    ) -> Self {
        let key = key_path(error.path()).map(|k| name_the_rule(k, source.text));
        let inner = error.inner();
        let raw = inner.message().trim_end();
        if let Some(unknown) = unknown_field(raw) {
            // The toml span covers the unknown key; it is named in the message and the
            // key path, so it is not repeated as the value.
            // serde_path_to_error's path already ends with the unknown key.
            let full_key = match key {
                Some(key) if key == unknown.key || key.ends_with(&format!(".{}", unknown.key)) => {
                    key
                }
                other => join_key(other.as_deref(), &unknown.key),
            };
            let mut err = source.error(inner.span(), Some(full_key), unknown.message);
            err.value = None;
            if source.is_table_header(inner.span()) {
                err.message = err.message.replacen("unknown key", "unknown section", 1);
            }
            return err;
        }
        let message = shorten(&rewrite_message(raw), MAX_MESSAGE_CHARS);
        let mut err = source.error(inner.span(), key, message);
        if err.value.as_deref().is_some_and(|v| v.starts_with('[')) {
            // A span covering a whole table header tells nothing about the value.
            err.value = None;
        }
        err
    }
}

/// The text being loaded and its name, to turn byte spans into line, column and the
/// offending value.
pub(crate) struct Source<'a> {
    pub(crate) origin: &'a str,
    pub(crate) text: &'a str,
}

impl Source<'_> {
    /// An error located at `span` (a byte range in the text), quoting the text there.
    pub(crate) fn error(
        &self,
        span: Option<Range<usize>>,
        key: Option<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        let (line, column) = match span.as_ref() {
            Some(span) => {
                let (line, column) = self.line_column(span.start);
                (Some(line), Some(column))
            }
            None => (None, None),
        };
        ConfigError {
            file: self.origin.to_owned(),
            line,
            column,
            key,
            value: span.and_then(|span| self.snippet(span)),
            message: message.into(),
        }
    }

    /// A validation error about the value at `span` under `key`.
    pub(crate) fn error_at(
        &self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> ConfigError {
        self.error(Some(span), Some(key.to_owned()), message)
    }

    /// An error at `span` if `path` holds a NUL character, which no file
    /// name can: the OS would refuse it only when the daemon first uses the
    /// path, long after the config was accepted.
    pub(crate) fn refuse_nul(
        &self,
        span: &Range<usize>,
        key: &str,
        path: &str,
    ) -> Result<(), ConfigError> {
        if path.contains('\0') {
            return Err(self.error_at(
                span.clone(),
                key,
                "contains a NUL character (\\u0000), which no file name or program argument can hold; remove it",
            ));
        }
        Ok(())
    }

    /// Whether `span` is the name in a `[table]` or `[[array]]` header.
    fn is_table_header(&self, span: Option<Range<usize>>) -> bool {
        span.and_then(|span| self.text.get(..span.start))
            .and_then(|before| before.lines().last())
            .is_some_and(|line| line.trim_end().ends_with('['))
    }

    /// 1-based line and column (in characters) of byte offset `offset`.
    pub(crate) fn line_column(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }

    /// The text at `span`, first line only, shortened if long; `None` if empty.
    fn snippet(&self, span: Range<usize>) -> Option<String> {
        let text = self.text.get(span)?;
        let first_line = text.lines().next().unwrap_or("").trim();
        if first_line.is_empty() {
            return None;
        }
        Some(shorten(first_line, MAX_VALUE_CHARS))
    }
}

/// How an error names a rule: its place among the `[[rule]]` tables and,
/// where it has one, its name, as users write both: `rule[0]
/// ("notebook-runaway")`; a key within it follows (`rule[0]
/// ("notebook-runaway").footprint`). Every config error and refusal names
/// rules this way.
pub fn rule_key(index: usize, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("rule[{index}] ({:?})", shorten(name, MAX_VALUE_CHARS)),
        None => format!("rule[{index}]"),
    }
}

/// A key path from serde (`rule[2].footprint`) with the rule's name from
/// the TOML `text` put in, as [`rule_key`] writes it.
fn name_the_rule(key: String, text: &str) -> String {
    static RULE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^rule\[(\d+)\]").expect("valid regex"));
    let Some(index) = RULE
        .captures(&key)
        .and_then(|c| c.get(1)?.as_str().parse::<usize>().ok())
    else {
        return key;
    };
    let table: Option<toml::Table> = toml::from_str(text).ok();
    let name = table
        .as_ref()
        .and_then(|t| t.get("rule")?.as_array()?.get(index)?.get("name")?.as_str())
        .map(str::trim)
        .filter(|n| !n.is_empty());
    let head = format!("rule[{index}]");
    format!("{}{}", rule_key(index, name), &key[head.len()..])
}

/// `daemon.interval`, `rule[2].limit`; `None` at the top level. The segments
/// `toml::Spanned` adds internally are dropped.
fn key_path(path: &serde_path_to_error::Path) -> Option<String> {
    use serde_path_to_error::Segment;

    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Map { key } if key.starts_with("$__serde_spanned") => {}
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&shorten(key, MAX_VALUE_CHARS));
            }
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Unknown => {}
        }
    }
    (!out.is_empty()).then_some(out)
}

fn join_key(parent: Option<&str>, key: &str) -> String {
    match parent {
        Some(parent) => format!("{parent}.{key}"),
        None => key.to_owned(),
    }
}

struct UnknownField {
    key: String,
    message: String,
}

/// Names in serde's backquoted lists: "`a`, `b` or `c`".
static QUOTED: LazyLock<Regex> = LazyLock::new(|| Regex::new("`([^`]*)`").expect("valid regex"));

fn quoted_names(list: &str) -> Vec<&str> {
    QUOTED
        .captures_iter(list)
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect()
}

/// serde's "unknown field `x`, expected one of `a`, `b`" (from `deny_unknown_fields`).
fn unknown_field(message: &str) -> Option<UnknownField> {
    static RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new("^unknown field `([^`]*)`, (?:expected (.*)|there are no fields)$")
            .expect("valid regex")
    });
    let caps = RE.captures(message)?;
    // Cut as `key_path` cuts it, so the two still end alike.
    let key = shorten(caps.get(1)?.as_str(), MAX_VALUE_CHARS);
    let message = match caps.get(2) {
        Some(list) => format!(
            "unknown key {key:?}; expected one of: {}",
            quoted_names(list.as_str()).join(", ")
        ),
        None => format!("unknown key {key:?}; this table takes no keys"),
    };
    Some(UnknownField { key, message })
}

/// serde's wording for enums and types, made to say what to write.
fn rewrite_message(message: &str) -> String {
    static VARIANT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new("^unknown variant `([^`]*)`, expected (.*)$").expect("valid regex")
    });
    static TYPE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new("^invalid type: (.*), expected (.*)$").expect("valid regex"));
    if let Some(caps) = VARIANT.captures(message) {
        let names = caps
            .get(2)
            .map_or_else(Vec::new, |m| quoted_names(m.as_str()));
        let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
        return format!("unknown value; expected one of: {}", quoted.join(", "));
    }
    if let Some(caps) = TYPE.captures(message) {
        let found = caps.get(1).map_or("", |m| m.as_str());
        let expected = match caps.get(2).map_or("", |m| m.as_str()) {
            "a boolean" => "true or false",
            "i64" | "u64" | "i32" | "u32" | "usize" => "an integer",
            other => other,
        };
        return format!(
            "wrong type: expected {expected}, found {}",
            type_name(found)
        );
    }
    message.to_owned()
}

/// serde's `Unexpected` ("string \"yes\"", "boolean `true`") as a TOML type name;
/// the value itself is shown separately.
fn type_name(unexpected: &str) -> &str {
    let kind = unexpected
        .split_once([' ', '`', '"'])
        .map_or(unexpected, |(kind, _)| kind);
    match kind {
        "string" | "char" => "a string",
        "boolean" => "a boolean",
        "integer" => "an integer",
        "floating" => "a float",
        "map" => "a table",
        "sequence" => "an array",
        _ => unexpected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> Source<'_> {
        Source {
            origin: "test.toml",
            text,
        }
    }

    fn error(line: Option<usize>, key: Option<&str>, value: Option<&str>) -> ConfigError {
        ConfigError {
            file: "f.toml".into(),
            line,
            column: line.map(|_| 7),
            key: key.map(Into::into),
            value: value.map(Into::into),
            message: "bad".into(),
        }
    }

    #[test]
    fn display_with_all_parts() {
        let e = error(Some(3), Some("daemon.interval"), Some("\"5x\""));
        assert_eq!(
            e.to_string(),
            "f.toml:3:7: daemon.interval: bad (got \"5x\")"
        );
    }

    #[test]
    fn display_leaves_out_missing_parts() {
        assert_eq!(error(None, None, None).to_string(), "f.toml: bad");
        assert_eq!(error(Some(2), None, None).to_string(), "f.toml:2:7: bad");
        assert_eq!(
            error(None, Some("daemon"), None).to_string(),
            "f.toml: daemon: bad"
        );
    }

    #[test]
    fn line_column_counts_characters() {
        let s = source("a = 1\nbé = \"x\"\n");
        assert_eq!(s.line_column(0), (1, 1));
        assert_eq!(s.line_column(6), (2, 1));
        assert_eq!(s.line_column(12), (2, 6)); // after the two-byte 'é'
        assert_eq!(s.line_column(7), (2, 2)); // inside 'é': rounded down
        assert_eq!(s.line_column(999), (3, 1));
    }

    #[test]
    fn snippet_is_first_line_and_short() {
        let long = format!("x = \"{}\"\nnext", "a".repeat(100));
        let s = source(&long);
        let snippet = s.snippet(4..long.len()).unwrap();
        assert_eq!(snippet.chars().count(), MAX_VALUE_CHARS + 1);
        assert!(snippet.ends_with('…'));
        assert_eq!(s.snippet(0..0), None);
        assert_eq!(s.snippet(0..9999), None);
    }

    #[test]
    fn unknown_field_lists_expected_keys() {
        let u = unknown_field("unknown field `intervall`, expected one of `interval`, `history`")
            .unwrap();
        assert_eq!(u.key, "intervall");
        assert_eq!(
            u.message,
            "unknown key \"intervall\"; expected one of: interval, history"
        );
        let u = unknown_field("unknown field `x`, expected `daemon`").unwrap();
        assert_eq!(u.message, "unknown key \"x\"; expected one of: daemon");
    }

    #[test]
    fn unknown_variant_is_rewritten() {
        assert_eq!(
            rewrite_message("unknown variant `xml`, expected `human` or `json`"),
            "unknown value; expected one of: \"human\", \"json\""
        );
    }

    #[test]
    fn invalid_type_is_rewritten() {
        assert_eq!(
            rewrite_message("invalid type: string \"yes\", expected a boolean"),
            "wrong type: expected true or false, found a string"
        );
        assert_eq!(
            rewrite_message("invalid type: string \"5\", expected i64"),
            "wrong type: expected an integer, found a string"
        );
    }

    #[test]
    fn missing_file_names_the_path() {
        let e = ConfigError::read(
            Path::new("/nowhere/headroom.toml"),
            &io::Error::from(io::ErrorKind::NotFound),
        );
        assert_eq!(e.file, "/nowhere/headroom.toml");
        assert!(
            e.to_string()
                .starts_with("/nowhere/headroom.toml: the file does not exist;")
        );
    }
}
