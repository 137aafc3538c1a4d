//! The module graph goes one way. Each top-level module of `src/` sits in a
//! layer (docs/ARCHITECTURE.md draws them); its non-test code may name only
//! modules of lower layers. A new module must be given a layer here, and an
//! arrow that points up or sideways fails with the file, the line and the
//! path that drew it. `target_os` appears only in the folders that
//! `TARGET_OS_ALLOWED` names.
//!
//! Every file of `src/` is parsed with `syn`, as the compiler reads it:
//! paths in `use` trees (groups, globs, renames), expressions, types,
//! patterns and macro paths, and the `crate::`/`super::`/`self::` paths in
//! the tokens of macro calls (`format!`, `matches!`, `macro_rules!`
//! bodies). `super::` is resolved from the module the file (and any inline
//! `mod` around the path) stands for. Items under `#[cfg(test)]`, and files
//! declared by a `#[cfg(test)] mod name;`, draw no arrows: test helpers may
//! reach anywhere. String and char literals and comments are not code and
//! draw nothing. `target_os` is looked for in every attribute and macro
//! call, test code included. Each file must be the module its place in
//! `src/` names (declared by a `mod` line, no `#[path]`), since `super::`
//! is resolved from that place.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use crate::support::source_tree::rust_files;
use std::sync::OnceLock;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};

/// The layers, lowest first. A module may use modules of lower layers only.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "model: the picture of a machine and the shared vocabulary",
        &["model"],
    ),
    (
        "foundation: formatting, events, classification",
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

/// The folders of `src/` whose files may mention `target_os` (in `cfg` and
/// `cfg_attr` attributes and in macro calls such as `cfg!`): the OS layer
/// alone.
const TARGET_OS_ALLOWED: &[&str] = &["os"];

/// One source file of `src/`: where it is and the module it stands for.
struct Source {
    /// The path relative to `src/`, as `sample/linux/mod.rs`.
    rel: PathBuf,
    /// The module path: `["sample", "linux"]`; empty for a crate root.
    module: Vec<String>,
    /// `src/lib.rs`, `src/main.rs` or a `src/bin/` program.
    crate_root: bool,
    text: String,
}

impl Source {
    fn new(rel: &Path, text: String) -> Source {
        let mut module: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let last = module.pop().unwrap_or_default();
        let stem = last.strip_suffix(".rs").unwrap_or(&last).to_owned();
        let crate_root = (module.is_empty() && matches!(stem.as_str(), "lib" | "main"))
            || module.first().is_some_and(|m| m == "bin");
        if crate_root {
            module.clear();
        } else if stem != "mod" {
            module.push(stem);
        }
        Source {
            rel: rel.to_owned(),
            module,
            crate_root,
            text,
        }
    }

    fn top(&self) -> Option<&str> {
        self.module.first().map(String::as_str)
    }
}

/// A top-level module that a path names.
#[derive(Debug)]
struct Arrow {
    to: String,
    line: usize,
    /// The path as written, `crate::policy::Action`.
    path: String,
}

/// What the parser found in one file.
#[derive(Debug, Default)]
struct Reading {
    /// Arrows drawn by code outside `#[cfg(test)]`.
    arrows: Vec<Arrow>,
    /// Lines where `target_os` appears, and in what.
    target_os: Vec<(usize, String)>,
    /// Modules declared `mod name;` (in a file of their own), and whether
    /// they are `#[cfg(test)]`.
    declared: Vec<(Vec<String>, bool)>,
    /// What this reader cannot follow: `#[path]`, `super::` past the crate
    /// root, a glob of the crate root.
    unreadable: Vec<(usize, String)>,
}

/// Parses one file and reads its paths, its `target_os` and its `mod`
/// declarations.
fn read(source: &Source) -> Result<Reading, String> {
    let file = syn::parse_file(&source.text).map_err(|e| {
        format!(
            "src/{}:{}: does not parse: {e}",
            source.rel.display(),
            e.span().start().line
        )
    })?;
    let mut reader = Reader {
        module: source.module.clone(),
        in_test: 0,
        reading: Reading::default(),
    };
    if is_test_only(&file.attrs) {
        reader.in_test += 1;
    }
    reader.visit_file(&file);
    Ok(reader.reading)
}

struct Reader {
    /// The module the code being read is in: the file's, plus inline `mod`s.
    module: Vec<String>,
    /// How many `#[cfg(test)]` items enclose the code being read.
    in_test: usize,
    reading: Reading,
}

/// A path's names, each with the line it is on.
type Segments = Vec<(String, usize)>;

impl Reader {
    /// Records the top-level module a path names, if it names one of this
    /// crate: `crate::a::…` names `a`; `super::` and `self::` climb from the
    /// module being read. The line is that of the name of the module, or of
    /// the path's start when the path stays in the module read.
    fn path(&mut self, segments: &[(String, usize)], glob: Option<usize>) {
        let written = || {
            let mut s = segments
                .iter()
                .map(|(name, _)| name.as_str())
                .collect::<Vec<_>>()
                .join("::");
            if glob.is_some() {
                s.push_str("::*");
            }
            s
        };
        let Some((first, first_line)) = segments.first() else {
            return;
        };
        let mut at = self.module.clone();
        let mut rest = &segments[1..];
        match first.as_str() {
            "crate" => at.clear(),
            "self" | "super" => {
                rest = segments;
                while let Some((s, line)) = rest.first() {
                    match s.as_str() {
                        "self" => {}
                        "super" => {
                            if at.pop().is_none() {
                                let what = format!("`{}` climbs past the crate root", written());
                                self.reading.unreadable.push((*line, what));
                                return;
                            }
                        }
                        _ => break,
                    }
                    rest = &rest[1..];
                }
            }
            _ => return, // another crate, or a name in scope
        }
        let (to, line) = match (at.first(), rest.first()) {
            (Some(top), _) => (top.clone(), *first_line),
            (None, Some((name, line))) => (name.clone(), *line),
            (None, None) => {
                if let Some(line) = glob {
                    let what = format!(
                        "`{}` imports the crate root whole; name the modules",
                        written()
                    );
                    self.reading.unreadable.push((line, what));
                }
                return;
            }
        };
        if self.in_test == 0 {
            self.reading.arrows.push(Arrow {
                to,
                line,
                path: written(),
            });
        }
    }

    /// Every path of a `use` tree, with its prefix.
    fn use_tree(&mut self, prefix: &mut Segments, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(named(&p.ident));
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_leaf(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.use_leaf(prefix, &r.ident),
            syn::UseTree::Glob(g) => self.path(prefix, Some(g.star_token.spans[0].start().line)),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn use_leaf(&mut self, prefix: &mut Segments, ident: &syn::Ident) {
        prefix.push(named(ident));
        self.path(prefix, None);
        prefix.pop();
    }

    /// The tokens of a macro call or an attribute: `target_os`, and the
    /// `crate::`, `$crate::`, `super::` and `self::` paths in them.
    fn tokens(&mut self, tokens: TokenStream, what: &str) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.tokens(g.stream(), what),
                TokenTree::Ident(id) if id == "target_os" => self
                    .reading
                    .target_os
                    .push((ident_line(id), what.to_owned())),
                TokenTree::Ident(id)
                    if (id == "crate" || id == "super" || id == "self")
                        && !follows_path_separator(&trees[..i]) =>
                {
                    let mut segments = vec![named(id)];
                    let mut j = i + 1;
                    while is_path_separator(&trees[j..]) {
                        match trees.get(j + 2) {
                            Some(TokenTree::Ident(next)) => {
                                segments.push(named(next));
                                j += 3;
                            }
                            Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                                // `crate::{a, b::c}`: read as a `use` tree.
                                let group =
                                    Punctuated::<syn::UseTree, syn::Token![,]>::parse_terminated;
                                if let Ok(items) = group.parse2(g.stream()) {
                                    for tree in &items {
                                        self.use_tree(&mut segments, tree);
                                    }
                                }
                                segments.clear();
                                j += 3;
                                break;
                            }
                            _ => break,
                        }
                    }
                    if segments.len() > 1 {
                        self.path(&segments, None);
                    }
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }

    fn item(&mut self, attrs: &[syn::Attribute], visit: impl FnOnce(&mut Self)) {
        let test = is_test_only(attrs);
        self.in_test += usize::from(test);
        visit(self);
        self.in_test -= usize::from(test);
    }
}

impl<'ast> Visit<'ast> for Reader {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        self.item(item_attrs(item), |me| visit::visit_item(me, item));
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs: &[syn::Attribute] = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        self.item(attrs, |me| visit::visit_impl_item(me, item));
    }

    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        let attrs: &[syn::Attribute] = match item {
            syn::TraitItem::Const(i) => &i.attrs,
            syn::TraitItem::Fn(i) => &i.attrs,
            syn::TraitItem::Type(i) => &i.attrs,
            syn::TraitItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        self.item(attrs, |me| visit::visit_trait_item(me, item));
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        self.item(&local.attrs, |me| visit::visit_local(me, local));
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let mut module = self.module.clone();
        module.push(m.ident.to_string());
        if m.content.is_none() {
            let test = self.in_test > 0 || is_test_only(&m.attrs);
            self.reading.declared.push((module.clone(), test));
        }
        let outer = std::mem::replace(&mut self.module, module);
        visit::visit_item_mod(self, m);
        self.module = outer;
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        for attr in &u.attrs {
            self.visit_attribute(attr);
        }
        // A leading `::` names another crate.
        if u.leading_colon.is_none() {
            self.use_tree(&mut Vec::new(), &u.tree);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segments: Segments = path.segments.iter().map(|s| named(&s.ident)).collect();
            self.path(&segments, None);
        }
        visit::visit_path(self, path);
    }

    /// `pub(in crate::x)` says who may see an item, not what it uses.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        let path = attr.path();
        let path_in_cfg_attr = path.is_ident("cfg_attr")
            && matches!(&attr.meta, syn::Meta::List(list) if names_path_attribute(&list.tokens));
        if path.is_ident("path") || path_in_cfg_attr {
            self.reading.unreadable.push((
                ident_line(&path.segments[0].ident),
                "`#[path]` puts a module in a file of another name; this test maps files to modules by their place in src/".to_owned(),
            ));
        }
        if let syn::Meta::List(list) = &attr.meta {
            let name = path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect::<Vec<_>>()
                .join("::");
            self.tokens(list.tokens.clone(), &format!("#[{name}(…)]"));
        }
        visit::visit_attribute(self, attr);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        self.tokens(mac.tokens.clone(), &format!("{name}!(…)"));
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Whether these attributes compile the item only for tests:
/// `#[cfg(test)]`, or `#[cfg(all(test, …))]`.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && match attr.parse_args::<syn::Meta>() {
                Ok(syn::Meta::Path(p)) => p.is_ident("test"),
                Ok(syn::Meta::List(all)) if all.path.is_ident("all") => all
                    .parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
                    .is_ok_and(|preds| {
                        preds
                            .iter()
                            .any(|p| matches!(p, syn::Meta::Path(p) if p.is_ident("test")))
                    }),
                _ => false,
            }
    })
}

fn named(ident: &proc_macro2::Ident) -> (String, usize) {
    (ident.to_string(), ident_line(ident))
}

fn ident_line(ident: &proc_macro2::Ident) -> usize {
    ident.span().start().line
}

/// Whether the tokens of a `cfg_attr` hold a `path = "…"`.
fn names_path_attribute(tokens: &TokenStream) -> bool {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    trees.windows(2).any(|w| {
        matches!(w, [TokenTree::Ident(id), TokenTree::Punct(eq)] if id == "path" && eq.as_char() == '=')
    })
}

/// Whether `trees` starts with `::`.
fn is_path_separator(trees: &[TokenTree]) -> bool {
    matches!(
        trees,
        [TokenTree::Punct(a), TokenTree::Punct(b), ..]
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

/// Whether `trees` ends with `::` (so the next name is not a path's start).
fn follows_path_separator(trees: &[TokenTree]) -> bool {
    trees.len() >= 2 && is_path_separator(&trees[trees.len() - 2..])
}

/// Every file of the tree, read once for all the tests below.
struct Tree {
    files: Vec<(Source, Result<Reading, String>)>,
}

impl Tree {
    fn get() -> &'static Tree {
        static TREE: OnceLock<Tree> = OnceLock::new();
        TREE.get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
            let mut paths = Vec::new();
            rust_files(&src, &mut paths);
            paths.sort();
            let sources: Vec<Source> = paths
                .iter()
                .map(|p| {
                    let text = std::fs::read_to_string(p)
                        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                    Source::new(p.strip_prefix(&src).unwrap(), text)
                })
                .collect();
            // Two threads: the parse is most of this test's time.
            let half = sources.len() / 2;
            let mut sources = sources;
            let second = sources.split_off(half);
            let (mut files, rest) = std::thread::scope(|s| {
                let other = s.spawn(|| read_all(second));
                (read_all(sources), other.join().unwrap())
            });
            files.extend(rest);
            Tree { files }
        })
    }

    /// Modules declared with `mod name;` in the library, and whether each
    /// is compiled only for tests.
    fn declared(&self) -> BTreeMap<&[String], bool> {
        let mut declared = BTreeMap::new();
        for (source, reading) in &self.files {
            if source.crate_root && source.rel != Path::new("lib.rs") {
                continue;
            }
            if let Ok(reading) = reading {
                for (module, test) in &reading.declared {
                    declared.insert(module.as_slice(), *test);
                }
            }
        }
        declared
    }

    /// Whether a module is compiled only for tests: it, or a module above
    /// it, is declared `#[cfg(test)] mod name;`.
    fn test_only(declared: &BTreeMap<&[String], bool>, module: &[String]) -> bool {
        (1..=module.len()).any(|n| declared.get(&module[..n]) == Some(&true))
    }
}

fn read_all(sources: Vec<Source>) -> Vec<(Source, Result<Reading, String>)> {
    sources
        .into_iter()
        .map(|s| {
            let reading = read(&s);
            (s, reading)
        })
        .collect()
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

/// The arrows of one file that point up or sideways, one line each. Code
/// of a crate root (`lib.rs`, the binaries) and of test-only files draws
/// none that count.
fn wrong_arrows(source: &Source, reading: &Reading, test_only: bool) -> Vec<String> {
    let layers = layer_of();
    let (Some(from), false, false) = (source.top(), source.crate_root, test_only) else {
        return Vec::new();
    };
    let Some(&from_layer) = layers.get(from) else {
        return Vec::new(); // reported by every_module_has_a_layer
    };
    reading
        .arrows
        .iter()
        .filter(|a| a.to != from)
        .filter_map(|a| {
            // A name that is no module is a crate-root item (`crate::VERSION`).
            let &to_layer = layers.get(a.to.as_str())?;
            (to_layer >= from_layer).then(|| {
                format!(
                    "src/{}:{}: {from} ({}) uses {} ({}) through `{}`",
                    source.rel.display(),
                    a.line,
                    LAYERS[from_layer].0,
                    a.to,
                    LAYERS[to_layer].0,
                    a.path,
                )
            })
        })
        .collect()
}

/// Where `target_os` appears outside `TARGET_OS_ALLOWED`, one line each.
fn misplaced_target_os(source: &Source, reading: &Reading) -> Vec<String> {
    let allowed = TARGET_OS_ALLOWED.iter().any(|dir| {
        let mut rel = source.rel.components();
        Path::new(dir).components().all(|c| rel.next() == Some(c))
            && matches!(rel.next(), Some(Component::Normal(_)))
    });
    if allowed {
        return Vec::new();
    }
    reading
        .target_os
        .iter()
        .map(|(line, what)| {
            format!(
                "src/{}:{line}: target_os in {what}, outside src/{{{}}}/",
                source.rel.display(),
                TARGET_OS_ALLOWED.join(",")
            )
        })
        .collect()
}

#[test]
fn every_module_has_a_layer() {
    let layers = layer_of();
    let tree = Tree::get();
    let mut missing: Vec<&str> = tree
        .files
        .iter()
        .filter_map(|(s, _)| s.top())
        .filter(|m| !layers.contains_key(m))
        .collect();
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "give these modules a layer in tests/hermetic/layers.rs and docs/ARCHITECTURE.md: {missing:?}"
    );
    let tops: BTreeSet<&str> = tree.files.iter().filter_map(|(s, _)| s.top()).collect();
    for m in layers.keys() {
        assert!(
            tops.contains(m),
            "{m} is listed in a layer but is not a module of src/"
        );
    }
}

#[test]
fn every_file_is_parsed_and_is_the_module_its_place_names() {
    let tree = Tree::get();
    let declared = tree.declared();
    let mut wrong = Vec::new();
    for (source, reading) in &tree.files {
        match reading {
            Err(e) => wrong.push(e.clone()),
            Ok(reading) => wrong.extend(
                reading
                    .unreadable
                    .iter()
                    .map(|(line, what)| format!("src/{}:{line}: {what}", source.rel.display())),
            ),
        }
        if !source.crate_root && !declared.contains_key(source.module.as_slice()) {
            wrong.push(format!(
                "src/{}: no `mod` line of the library declares {}: it is not compiled, or a `#[path]` places it",
                source.rel.display(),
                source.module.join("::")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_module_reaches_up_or_sideways() {
    let tree = Tree::get();
    let mut wrong = Vec::new();
    let declared = tree.declared();
    let mut arrows = 0;
    for (source, reading) in &tree.files {
        let Ok(reading) = reading else {
            continue; // reported by every_file_is_parsed…
        };
        let test_only = Tree::test_only(&declared, &source.module);
        if !source.crate_root && !test_only {
            arrows += reading.arrows.len();
        }
        wrong.extend(wrong_arrows(source, reading, test_only));
    }
    assert!(
        arrows > 500,
        "only {arrows} paths into the crate found: the reader is broken"
    );
    assert!(
        wrong.is_empty(),
        "arrows that point up or sideways:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn target_os_stays_in_the_platform_code() {
    let tree = Tree::get();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for (source, reading) in &tree.files {
        if let Ok(reading) = reading {
            seen += reading.target_os.len();
            wrong.extend(misplaced_target_os(source, reading));
        }
    }
    // At least the switch between Linux and macOS.
    assert!(
        seen >= 2,
        "only {seen} target_os found: the reader is broken"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Reads a source string as the file `rel` of `src/` and returns what the
/// tree checks would report for it.
fn check(rel: &str, text: &str) -> Vec<String> {
    let source = Source::new(Path::new(rel), text.to_owned());
    let reading = read(&source).unwrap();
    let mut found = wrong_arrows(&source, &reading, false);
    found.extend(misplaced_target_os(&source, &reading));
    found
}

#[test]
fn an_upward_arrow_in_a_use_group_is_caught() {
    let found = check(
        "config/mod.rs",
        "//! Settings.\nuse crate::{model::Snapshot, report::bytes,\n    policy::{Action, Rule as R}};\n",
    );
    assert_eq!(
        found,
        [
            "src/config/mod.rs:3: config (settings: validated config, one-line event text) \
          uses policy (policy: rules against the history) through `crate::policy::Action`",
            "src/config/mod.rs:3: config (settings: validated config, one-line event text) \
          uses policy (policy: rules against the history) through `crate::policy::Rule`"
        ]
    );
}

#[test]
fn an_upward_arrow_in_an_inline_path_is_caught() {
    let found = check(
        "history/ring.rs",
        "fn f() -> Option<u8> {\n    let _ = crate::model::X;\n    crate::daemon::tick()\n}\n\
         fn g(_: &crate::state::Published) {}\n",
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("src/history/ring.rs:3: history ("),
        "{found:?}"
    );
    assert!(
        found[0].ends_with("through `crate::daemon::tick`"),
        "{found:?}"
    );
    assert!(
        found[1].starts_with("src/history/ring.rs:5: history ("),
        "{found:?}"
    );
    assert!(found[1].contains("uses state ("), "{found:?}");
}

#[test]
fn an_upward_arrow_in_a_macro_call_is_caught() {
    let found = check(
        "model/check.rs",
        "fn f(a: u8) -> bool {\n    matches!(a, crate::os::LIMIT) \n|| format!(\"{}\", $crate::report::x()).is_empty()\n}\n",
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].contains(":2: model (") && found[0].ends_with("`crate::os::LIMIT`"),
        "{found:?}"
    );
    assert!(
        found[1].contains(":3: model (") && found[1].ends_with("`crate::report::x`"),
        "{found:?}"
    );
}

#[test]
fn super_super_climbing_into_another_module_is_caught() {
    // From `config::daemon`, `super::super` is the crate root, so the path
    // names `policy`; from `config::a::b` it would stay in `config`.
    let found = check("config/daemon.rs", "use super::super::policy::Action;\n");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("src/config/daemon.rs:1: config ("),
        "{found:?}"
    );
    assert!(found[0].contains("uses policy ("), "{found:?}");
    assert!(check("config/a/b.rs", "use super::super::policy::Action;\n").is_empty());
    // `self::` stays in the module read.
    assert!(
        check(
            "config/mod.rs",
            "use self::daemon::Daemon;\nfn f() { self::super::config::x(); }\n"
        )
        .is_empty()
    );
    // An inline module is one more level to climb.
    let found = check(
        "config/mod.rs",
        "mod inner {\n    fn f() { super::super::policy::run(); }\n}\n",
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("src/config/mod.rs:2:"), "{found:?}");
}

#[test]
fn target_os_outside_the_platform_code_is_caught() {
    let text = "#[cfg(target_os = \"linux\")]\nfn a() {}\n\
                #[cfg_attr(target_os = \"macos\", allow(dead_code))]\nfn b() {}\n\
                fn c() -> bool { cfg!(target_os = \"linux\") }\n\
                #[cfg(test)]\nmod tests {\n    #[cfg(all(test, target_os = \"linux\"))]\n    fn d() {}\n}\n";
    let found = check("http/router.rs", text);
    let lines: Vec<&str> = found
        .iter()
        .map(|f| f.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "src/http/router.rs:1",
            "src/http/router.rs:3",
            "src/http/router.rs:5",
            "src/http/router.rs:8"
        ],
        "{found:?}"
    );
    assert!(found[2].contains("target_os in cfg!(…)"), "{found:?}");
    for dir in TARGET_OS_ALLOWED {
        assert!(check(&format!("{dir}/x.rs"), text).is_empty(), "{dir}");
    }
    // A file named like an allowed folder is not in it.
    assert!(!check(&format!("{}.rs", TARGET_OS_ALLOWED[0]), text).is_empty());
}

#[test]
fn literals_and_comments_draw_no_arrow() {
    let text = "fn f(c: char) -> bool {\n    c == '\"' || c == '\\'' \n}\n\
                // crate::http in a comment\n/* crate::cli */\n\
                /// Doc: `crate::daemon::run`\nfn g() -> &'static str { \"crate::http\" }\n\
                fn h() -> String { format!(\"crate::cli {}\", '\"') }\n\
                fn i() -> &'static str { r#\"use crate::state;\"# }\n";
    let source = Source::new(Path::new("model/x.rs"), text.to_owned());
    let reading = read(&source).unwrap();
    assert!(reading.arrows.is_empty(), "{:?}", reading.arrows);
    // The same text with one real path after the char literal is read.
    let found = check(
        "model/x.rs",
        &format!("{text}fn j() {{ crate::cli::run(); }}\n"),
    );
    assert_eq!(found.len(), 1, "{found:?}");
}

#[test]
fn test_code_draws_no_arrow() {
    let text = "#[cfg(test)]\nmod tests {\n    use crate::cli;\n    fn f() { crate::http::serve(); }\n}\n\
                #[cfg(test)]\nfn helper() { crate::daemon::run(); }\n\
                #[cfg(all(test, unix))]\nuse crate::state::X;\n\
                struct S;\nimpl S {\n    #[cfg(test)]\n    fn t() { crate::cli::go(); }\n}\n\
                #[cfg(not(test))]\nuse crate::metrics::M;\n";
    let found = check("model/x.rs", text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("src/model/x.rs:16:"), "{found:?}");
    // A file declared `#[cfg(test)] mod name;` is test code whole.
    let source = Source::new(Path::new("model/x.rs"), "use crate::cli;".to_owned());
    let reading = read(&source).unwrap();
    assert_eq!(reading.arrows.len(), 1);
    assert!(wrong_arrows(&source, &reading, true).is_empty());
    let parent = Source::new(
        Path::new("model/mod.rs"),
        "#[cfg(test)]\nmod x;\nmod y;\n".to_owned(),
    );
    let declared = read(&parent).unwrap().declared;
    assert_eq!(
        declared,
        [
            (vec!["model".to_owned(), "x".to_owned()], true),
            (vec!["model".to_owned(), "y".to_owned()], false)
        ]
    );
}

#[test]
fn path_attributes_and_runaway_super_are_refused() {
    let source = Source::new(
        Path::new("model/mod.rs"),
        "#[path = \"elsewhere.rs\"]\nmod x;\nuse super::super::y;\nuse crate::*;\n\
         #[cfg_attr(unix, path = \"unix.rs\")]\nmod z;\n"
            .to_owned(),
    );
    let reading = read(&source).unwrap();
    let lines: Vec<usize> = reading.unreadable.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [1, 3, 4, 5], "{:?}", reading.unreadable);
}
