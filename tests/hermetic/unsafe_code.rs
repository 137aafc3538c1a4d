//! `unsafe` lives only in FFI files, and each use says why it is sound.
//!
//! The compiler enforces the first half: the crate roots deny `unsafe_code`
//! and only the modules named `ffi` allow it back. This test keeps that
//! arrangement from being undone quietly. It reads `src/` as text (with
//! comments, strings and char literals blanked out) and asserts that:
//! - every `unsafe` (block, fn, impl, extern block) is in a file of an `ffi`
//!   module (`…/ffi/*.rs` or `…/ffi.rs`);
//! - each is preceded by a `// SAFETY:` comment (for a statement that spans
//!   lines, above the line where the statement starts);
//! - `unsafe_code` is allowed only on `mod ffi;` declarations, and every
//!   crate root (`lib.rs`, `main.rs`, each example) denies it.

use std::path::{Path, PathBuf};

use crate::support::source_tree::rust_files;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `text` with the contents of comments, string literals and char literals
/// replaced by spaces; line breaks are kept, so line numbers still match.
fn blank_non_code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_is_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // Block comments nest.
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if !prev_is_ident && (c == 'r' || (c == 'b' || c == 'c') && next == Some('r')) && {
            // A raw string: r"…", r#"…"#, br"…", cr#"…"#.
            let start = if c == 'r' { i + 1 } else { i + 2 };
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            chars.get(start + hashes) == Some(&'"')
        } {
            let start = if c == 'r' { i + 1 } else { i + 2 };
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            let body = start + hashes + 1;
            let closing: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let end = (body..chars.len())
                .find(|&j| chars[j..].starts_with(&closing))
                .map_or(chars.len(), |j| j + closing.len());
            out.extend(chars[i..body].iter());
            out.extend(
                chars[body..end.saturating_sub(closing.len()).max(body)]
                    .iter()
                    .map(|&c| blank(c)),
            );
            out.extend(chars[end.saturating_sub(closing.len()).max(body)..end].iter());
            i = end;
        } else if c == '"' {
            // A string (also b"…" and c"…": the prefix was copied as code).
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    out.push(' ');
                    out.push(blank(chars[i + 1]));
                    i += 2;
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            if i < chars.len() {
                out.push('"');
                i += 1;
            }
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}', '"') or a lifetime ('a).
            let end = if next == Some('\\') {
                (i + 3..chars.len()).find(|&j| chars[j] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    out.push('\'');
                    out.extend(chars[i + 1..end].iter().map(|_| ' '));
                    out.push('\'');
                    i = end + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether `word` occurs in `line` as a whole word (not `unsafe_code`).
fn has_word(line: &str, word: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(word).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Whether the file at `rel` (relative to `src/`) belongs to an `ffi` module.
fn in_ffi_module(rel: &Path) -> bool {
    rel.components().any(|c| c.as_os_str() == "ffi")
        || rel.file_name().is_some_and(|n| n == "ffi.rs")
}

/// Whether the `unsafe` on line `at` has a `// SAFETY:` comment: in the
/// comments (and attributes) right above it, or, if it sits in a statement
/// begun on an earlier line (`let x =` then `unsafe { … }`), right above
/// the line where that statement starts.
fn has_safety_comment(original: &[&str], code: &[&str], at: usize) -> bool {
    let mut line = at;
    loop {
        let mut above = line;
        while above > 0 {
            let text = original[above - 1].trim_start();
            if text.starts_with("//") || text.starts_with("#[") {
                if text.contains("SAFETY:") || text.contains("# Safety") {
                    return true;
                }
                above -= 1;
            } else {
                break;
            }
        }
        // Nothing above, or only comments without SAFETY: the statement may
        // have begun on the code line above.
        if above != line || above == 0 {
            return false;
        }
        let previous = code[above - 1].trim_end();
        let continues = !previous.is_empty()
            && !previous.ends_with(';')
            && !previous.ends_with('{')
            && !previous.ends_with('}');
        if !continues {
            return false;
        }
        line = above - 1;
    }
}

/// Every breach of the rules in one file; `rel` is its path under `src/`.
fn breaches(rel: &Path, text: &str) -> Vec<String> {
    let code = blank_non_code(text);
    let code_lines: Vec<&str> = code.lines().collect();
    let original: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let shown = rel.display();
    for (i, line) in code_lines.iter().enumerate() {
        if has_word(line, "unsafe") {
            if !in_ffi_module(rel) {
                found.push(format!(
                    "{shown}:{}: unsafe outside an ffi module: move the call into a safe \
                     wrapper under an ffi/ directory",
                    i + 1
                ));
            }
            if !has_safety_comment(&original, &code_lines, i) {
                found.push(format!(
                    "{shown}:{}: unsafe without a // SAFETY: comment above it",
                    i + 1
                ));
            }
        }
        if has_word(line, "unsafe_code") {
            let trimmed = line.trim();
            let root_deny = matches!(trimmed, "#![deny(unsafe_code)]" | "#![forbid(unsafe_code)]");
            let ffi_allow = trimmed == "#[allow(unsafe_code)]"
                && code_lines[i + 1..]
                    .iter()
                    .map(|l| l.trim())
                    .find(|l| !l.is_empty() && !l.starts_with("#["))
                    .is_some_and(|l| {
                        matches!(l, "mod ffi;" | "pub mod ffi;" | "pub(crate) mod ffi;")
                    });
            if !root_deny && !ffi_allow {
                found.push(format!(
                    "{shown}:{}: `{trimmed}`: unsafe_code may be allowed only on a `mod ffi;` \
                     declaration",
                    i + 1
                ));
            }
        }
    }
    found
}

/// `(files, unsafe sites)` over `src/`, and every breach.
fn scan_src() -> (usize, usize, Vec<String>) {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut sites = 0;
    let mut wrong = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        sites += blank_non_code(&text)
            .lines()
            .filter(|l| has_word(l, "unsafe"))
            .count();
        wrong.extend(breaches(file.strip_prefix(src()).unwrap(), &text));
    }
    (files.len(), sites, wrong)
}

#[test]
fn unsafe_is_only_in_ffi_modules_and_always_explained() {
    let (files, sites, wrong) = scan_src();
    // The reader finds what is there: the FFI files hold dozens of unsafe
    // blocks (a reader that saw none would pass everything).
    assert!(files > 100, "only {files} files under src/");
    assert!(
        sites > 50,
        "only {sites} unsafe sites found: the reader is broken"
    );
    assert!(wrong.is_empty(), "unsafe breaches:\n{}", wrong.join("\n"));
}

#[test]
fn every_crate_root_denies_unsafe_code() {
    // The daemon's two roots, and the test program (a Cargo example).
    let mut roots = vec![src().join("lib.rs"), src().join("main.rs")];
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples"),
        &mut roots,
    );
    for root in &roots {
        let text = std::fs::read_to_string(root).unwrap();
        assert!(
            text.lines().any(|l| l.trim() == "#![deny(unsafe_code)]"),
            "{} does not deny unsafe_code",
            root.display()
        );
    }
    // The ffi modules that allow it back exist where the rule says.
    for ffi in [
        "os/ffi/mod.rs",
        "os/linux/ffi/mod.rs",
        "os/macos/ffi/mod.rs",
        "local_time/ffi.rs",
    ] {
        assert!(src().join(ffi).is_file(), "src/{ffi} is missing");
    }
}

#[test]
fn planted_breaches_are_caught() {
    // An unsafe block outside an ffi module, even with its comment.
    let outside =
        "fn f() -> i32 {\n    // SAFETY: no arguments.\n    unsafe { libc::getpgrp() }\n}\n";
    let found = breaches(Path::new("os/posix.rs"), outside);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("os/posix.rs:3: unsafe outside an ffi module"));

    // A quote in a char literal does not hide the code after it.
    let after_quote = "fn f() -> i32 {\n    let q = '\"'; let e = '\\''; let rc = unsafe { libc::getpgrp() };\n    rc\n}\n";
    let found = breaches(Path::new("local_time.rs"), after_quote);
    assert_eq!(found.len(), 2, "{found:?}");

    // In an ffi module but unexplained; and a comment cut off from the
    // block by a statement between them.
    let unexplained = "fn f() {\n    let rc = unsafe { libc::getpgrp() };\n}\n\
                       fn g() {\n    // SAFETY: no arguments.\n    let a = 1;\n    \
                       unsafe { libc::getpgrp() };\n}\nunsafe impl Send for X {}\n";
    let found = breaches(Path::new("os/ffi/signal.rs"), unexplained);
    assert_eq!(
        found,
        [
            "os/ffi/signal.rs:2: unsafe without a // SAFETY: comment above it",
            "os/ffi/signal.rs:7: unsafe without a // SAFETY: comment above it",
            "os/ffi/signal.rs:9: unsafe without a // SAFETY: comment above it",
        ]
    );

    // unsafe_code allowed on anything but `mod ffi;`, or inside a file.
    let allowed = "#[allow(unsafe_code)]\nmod helpers;\n#![allow(unsafe_code)]\n\
                   #[allow(unsafe_code)]\nfn f() {}\n";
    let found = breaches(Path::new("os/mod.rs"), allowed);
    assert_eq!(found.len(), 3, "{found:?}");
}

#[test]
fn what_is_not_unsafe_code_passes() {
    // Comments, strings, raw strings, c-strings, char literals (a quote in
    // one must not start a string) and identifiers that contain the word.
    let text = "//! No unsafe here.\n\
                fn f(c: char) -> bool { c == '\"' || c == '\\'' }\n\
                const A: &str = \"unsafe { }\";\n\
                const B: &str = r#\"unsafe \"{\" }\"#;\n\
                const C: &std::ffi::CStr = c\"unsafe\";\n\
                fn g<'a>(x: &'a str) -> &'a str { /* unsafe /* nested */ unsafe */ x }\n\
                fn unsafe_code_is_denied() {}\n";
    assert_eq!(
        breaches(Path::new("os/posix.rs"), text),
        Vec::<String>::new()
    );

    // The accepted forms in an ffi module: the comment above the block, above
    // a statement that continues onto the next line, and attributes between.
    let text = "fn f() -> i32 {\n    // SAFETY: no arguments.\n    unsafe { libc::getpgrp() }\n}\n\
                fn g() -> i32 {\n    // SAFETY: no arguments.\n    let rc =\n        \
                unsafe { libc::getpgrp() };\n    rc\n}\n\
                // SAFETY: X holds only an opaque handle, used from one thread at a time.\n\
                #[allow(clippy::non_send_fields_in_send_ty)]\nunsafe impl Send for X {}\n";
    assert_eq!(
        breaches(Path::new("local_time/ffi.rs"), text),
        Vec::<String>::new()
    );

    // The declarations that allow it back, with a cfg before them.
    let text = "#![deny(unsafe_code)]\n#[cfg(target_os = \"linux\")]\n#[allow(unsafe_code)]\n\
                pub(crate) mod ffi;\n";
    assert_eq!(breaches(Path::new("lib.rs"), text), Vec::<String>::new());
}
