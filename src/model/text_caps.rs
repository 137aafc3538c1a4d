//! Caps on the text other users control, applied where it enters the model.
//!
//! A root daemon copies some text it did not write into every event, journal
//! line, log line and hook variable about a process: its name, a Jupyter
//! kernel's id (part of a file name on the kernel's command line), the
//! notebook its server names (from a server another user runs) and what the
//! kernel log says of its end. Copied whole, a user who names a notebook with
//! four megabytes swells the daemon's locked memory, rotates its journal away
//! and makes a hook fail with `E2BIG`. Each text is cut here to a size that
//! fits its use, at a character boundary, ending in [`CUT_MARK`] when cut:
//!
//! - a file name, a kernel id and a kernel spec's name: [`NAME_MAX`], the
//!   longest name a file system takes (a kernel id longer than its
//!   connection file's name can be is no kernel id at all);
//! - a notebook path: [`PATH_MAX`], the longest path the OS opens;
//! - a record the kernel log or a crash report wrote: [`RECORD_MAX`], a kernel
//!   log line's size; what headroom says of it: [`CAUSE_MAX`].

use std::borrow::Cow;

/// The most bytes of one file name (`NAME_MAX` on Linux and macOS).
pub const NAME_MAX: usize = 255;

/// The most bytes of a path the OS opens (`PATH_MAX` on Linux).
pub const PATH_MAX: usize = 4096;

/// The most bytes kept of one record of the kernel log or a crash report
/// quoted in a post-mortem (the kernel writes lines of at most 1 KiB).
pub const RECORD_MAX: usize = 1024;

/// The most bytes of a post-mortem's account of how a cause was learned.
pub const CAUSE_MAX: usize = 2048;

/// The most bytes of a signal's name as a record names it (`SIGSEGV`).
pub const SIGNAL_NAME_MAX: usize = 32;

/// How a cut text ends.
pub const CUT_MARK: &str = "…";

/// `text` within `max` bytes: whole if it fits, else its start cut at a
/// character boundary and followed by [`CUT_MARK`], the mark included in
/// the `max` bytes.
pub fn capped(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub(CUT_MARK.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + CUT_MARK.len());
    out.push_str(&text[..end]);
    if out.len() + CUT_MARK.len() <= max {
        out.push_str(CUT_MARK);
    }
    Cow::Owned(out)
}

/// [`capped`] for an owned text: no copy when it fits.
pub fn cap(text: String, max: usize) -> String {
    match capped(&text, max) {
        Cow::Borrowed(_) => text,
        Cow::Owned(cut) => cut,
    }
}

/// [`cap`] for an optional text.
pub fn cap_opt(text: Option<String>, max: usize) -> Option<String> {
    text.map(|t| cap(t, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_that_fits_is_kept_whole_and_not_copied() {
        assert!(matches!(capped("train.ipynb", NAME_MAX), Cow::Borrowed(_)));
        let exact = "a".repeat(PATH_MAX);
        assert_eq!(capped(&exact, PATH_MAX), exact);
    }

    #[test]
    fn a_long_text_is_cut_to_the_cap_with_its_mark() {
        let long = "n".repeat(3_900_000);
        let cut = cap(long, PATH_MAX);
        assert_eq!(cut.len(), PATH_MAX);
        assert!(cut.ends_with(CUT_MARK));
        assert!(cut.starts_with("nnn"));
    }

    #[test]
    fn a_cut_falls_on_a_character_boundary() {
        // 'é' is two bytes: the cut may not split one.
        let text = "é".repeat(300);
        let cut = capped(&text, NAME_MAX);
        assert!(cut.len() <= NAME_MAX, "{}", cut.len());
        assert!(cut.ends_with(CUT_MARK));
        assert!(cut.trim_end_matches(CUT_MARK).chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_cap_smaller_than_the_mark_still_holds() {
        assert!(capped("abcdef", 2).len() <= 2);
        assert_eq!(capped("abcdef", 0), "");
    }

    #[test]
    fn optional_texts_are_capped_too() {
        assert_eq!(cap_opt(None, 4), None);
        assert_eq!(cap_opt(Some("ab".into()), 4).as_deref(), Some("ab"));
        assert!(cap_opt(Some("abcdefgh".into()), 5).unwrap().len() <= 5);
    }
}
