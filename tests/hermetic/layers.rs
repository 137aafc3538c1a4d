//! The module graph goes one way. Each top-level module of `src/` sits in a
//! layer (docs/ARCHITECTURE.md draws them); its non-test code may name only
//! modules of lower layers through `crate::` paths. A new module must be
//! given a layer here, and an arrow that points up or sideways fails with
//! the file that drew it. `target_os` appears only in the platform layer
//! (`sys/`) and in `sample/` and `act/`.
//!
//! Paths are read from the source text: `crate::name` anywhere (in `use`
//! lines, `use crate::{a, b::c}` groups and inline paths), after removing
//! comments and `#[cfg(test)]` modules, whose helpers may reach anywhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may use modules of lower layers only.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "model: the picture of a machine and the shared vocabulary",
        &["model"],
    ),
    (
        "foundation: formatting, events, classification, the platform",
        &["report", "local_time", "event", "workload", "regular_file"],
    ),
    (
        "the OS layer: everything that talks to the OS, one module per OS",
        &["os"],
    ),
    (
        "settings: validated config, one-line event text",
        &["config", "event_line"],
    ),
    (
        "readers: samplers, history, trust checks, Jupyter, logging",
        &["sample", "history", "permissions", "jupyter", "logging"],
    ),
    ("policy: rules against the history", &["policy"]),
    (
        "consequences: signals, the journal, post-mortems",
        &["act", "journal", "postmortem"],
    ),
    (
        "pipeline: decisions carried out and recorded; the doctor",
        &["pipeline", "doctor"],
    ),
    ("published state", &["state"]),
    ("the loop and its readers", &["daemon", "metrics"]),
    ("outside interfaces", &["http", "service"]),
    ("command line", &["cli"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to: `src/sample/linux/mod.rs` is
/// `sample`, `src/model.rs` is `model`; `None` for the crate roots and bins.
fn top_module(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src()).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main" | "bin")).then(|| name.to_owned())
}

/// The source without comments (line, block, doc) and string literals'
/// contents are left alone, which is safe here: no string in `src/` spells
/// a `crate::` path that is not also imported.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else if rest.starts_with('"') {
            // Skip a string literal whole, so that "//" inside it is kept.
            let bytes = rest.as_bytes();
            let mut i = 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            let end = (i + 1).min(rest.len());
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The source without `#[cfg(test)]` items that are modules (`mod tests {
/// … }`), found by brace matching.
fn without_test_modules(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let item = after.trim_start();
        let is_module = item.starts_with("mod ")
            || item.starts_with("pub mod ")
            || item.starts_with("pub(crate) mod ");
        match (is_module, item.find(['{', ';'])) {
            (true, Some(open)) if item.as_bytes()[open] == b'{' => {
                let mut depth = 0usize;
                let mut end = item.len();
                for (i, b) in item.bytes().enumerate().skip(open) {
                    match b {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &item[end..];
            }
            // `#[cfg(test)] mod x;` (a file of tests) or another item:
            // keep going after the attribute.
            _ => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// Every top-level module named through a `crate::` path.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let preceded_by_ident = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        rest = &rest[at + "crate::".len()..];
        if preceded_by_ident {
            continue; // `$crate::`, `headroom_crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, d::{e, f}}`: the first name of each entry at
            // the group's own depth.
            let mut depth = 0usize;
            let mut start_of_entry = true;
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start_of_entry = true,
                    c if start_of_entry && (c.is_alphanumeric() || c == '_') => name.push(c),
                    _ if start_of_entry && !name.is_empty() => {
                        found.push(std::mem::take(&mut name));
                        start_of_entry = false;
                    }
                    _ => {}
                }
            }
            if !name.is_empty() {
                found.push(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push(name);
            }
        }
    }
    found
}

fn layer_of() -> BTreeMap<&'static str, usize> {
    let mut map = BTreeMap::new();
    for (i, (_, modules)) in LAYERS.iter().enumerate() {
        for m in *modules {
            assert!(map.insert(*m, i).is_none(), "{m} is in two layers");
        }
    }
    map
}

#[test]
fn every_module_has_a_layer() {
    let layers = layer_of();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut missing: Vec<String> = files
        .iter()
        .filter_map(|f| top_module(f))
        .filter(|m| !layers.contains_key(m.as_str()))
        .collect();
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "give these modules a layer in tests/hermetic/layers.rs and docs/ARCHITECTURE.md: {missing:?}"
    );
    for m in layers.keys() {
        let file = src().join(format!("{m}.rs"));
        let dir = src().join(m);
        assert!(
            file.exists() || dir.is_dir(),
            "{m} is listed in a layer but is not a module of src/"
        );
    }
}

#[test]
fn no_module_reaches_up_or_sideways() {
    let layers = layer_of();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut wrong = Vec::new();
    let mut arrows = 0;
    for file in &files {
        let Some(from) = top_module(file) else {
            continue;
        };
        let Some(&from_layer) = layers.get(from.as_str()) else {
            continue; // reported by every_module_has_a_layer
        };
        let text = std::fs::read_to_string(file).unwrap();
        let code = without_test_modules(&without_comments(&text));
        for to in crate_paths(&code) {
            if to == from || to == "self" {
                continue;
            }
            let Some(&to_layer) = layers.get(to.as_str()) else {
                continue; // a crate-root item (a macro, `crate::VERSION`)
            };
            arrows += 1;
            if to_layer >= from_layer {
                wrong.push(format!(
                    "{}: {from} ({}) uses {to} ({})",
                    file.strip_prefix(src()).unwrap().display(),
                    LAYERS[from_layer].0,
                    LAYERS[to_layer].0,
                ));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        arrows > 100,
        "only {arrows} crate:: paths found: the reader is broken"
    );
    assert!(
        wrong.is_empty(),
        "arrows that point up or sideways:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn target_os_stays_in_the_platform_layer() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let allowed = ["os"];
    let mut wrong: Vec<String> = files
        .iter()
        .filter(|f| {
            let top = top_module(f);
            !top.as_deref().is_some_and(|t| allowed.contains(&t))
        })
        .filter(|f| without_comments(&std::fs::read_to_string(f).unwrap()).contains("target_os"))
        .map(|f| f.strip_prefix(src()).unwrap().display().to_string())
        .collect();
    wrong.sort();
    assert!(wrong.is_empty(), "target_os outside os/: {wrong:?}");
}

#[test]
fn the_reader_finds_grouped_inline_and_nested_paths_and_skips_tests() {
    let code = "use crate::model::{A, B};\nuse crate::{config::Config, sys::{x, y}, report};\n\
                fn f() { crate::policy::evaluate(); }\n\
                #[cfg(test)]\nmod tests { use crate::cli::X; fn g() { if true { } } }\n\
                // crate::http in a comment\nfn h() { let _ = \"// not a comment\"; crate::act::go(); }";
    let code = without_test_modules(&without_comments(code));
    assert_eq!(
        crate_paths(&code),
        ["model", "config", "sys", "report", "policy", "act"]
    );
}

#[test]
fn an_upward_arrow_is_caught() {
    // A positive control for the rule itself: `config` naming `policy`
    // (the arrow this layering removed) would be refused.
    let layers = layer_of();
    assert!(layers["policy"] > layers["config"]);
    let code = without_test_modules(&without_comments("use crate::policy::Action;"));
    let to = crate_paths(&code);
    assert_eq!(to, ["policy"]);
    assert!(layers[to[0].as_str()] >= layers["config"]);
}
