//! What an installed Python package says of itself, parsed from the files
//! pip leaves in `site-packages` (the "Recording installed projects" spec,
//! from PEP 376 and PEP 627:
//! <https://packaging.python.org/en/latest/specifications/recording-installed-packages/>):
//!
//! - the `<name>-<version>.dist-info` directory's name ([`dist_info_dir`]):
//!   name and version escaped so that neither holds a `-` (PEP 427, "Escaping
//!   and Unicode"), the name compared after PEP 503's normalisation
//!   ([`normalize`]);
//! - its `METADATA` ([`parse_metadata`]): RFC 822-style headers up to the
//!   first blank line (PEP 566, "Core metadata specifications"); only
//!   `Name`, `Version`, `Requires-Python` and `Requires-Dist` are kept;
//! - a `Requires-Dist` value ([`Requirement::parse`], PEP 508): a name,
//!   extras, a specifier (bare or in parentheses, the older form), and an
//!   environment marker after `;` ([`Marker`], evaluated three-valued: what
//!   cannot be known here is neither true nor false);
//! - its `WHEEL` file's `Tag:` lines ([`parse_wheel_tags`], PEP 427): which
//!   interpreter and ABI the installed build was made for.
//!
//! Everything here is text a package's installer, and so a user, wrote: no
//! parse fails on it, and what is not understood is left out.

use super::version::{Specifier, Version};

/// A name normalised as PEP 503 says (`re.sub(r"[-_.]+", "-", name).lower()`):
/// `TensorFlow_Metal` and `tensorflow-metal` are one project.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
            continue;
        }
        if sep && !out.is_empty() {
            out.push('-');
        }
        sep = false;
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The normalised name and the version text of a `.dist-info` directory's
/// name (`tensorflow_metal-0.5.0.dist-info` → `tensorflow-metal`, `0.5.0`);
/// `None` for any other name.
pub fn dist_info_dir(dir_name: &str) -> Option<(String, &str)> {
    let stem = dir_name.strip_suffix(".dist-info")?;
    let (name, version) = stem.split_once('-')?;
    if name.is_empty() || version.is_empty() {
        return None;
    }
    Some((normalize(name), version))
}

/// The headers of an installed package's `METADATA` that matter here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pub name: Option<String>,
    pub version: Option<String>,
    pub requires_python: Option<String>,
    pub requires_dist: Vec<String>,
}

/// Most `Requires-Dist` lines kept of one file (tensorflow 2.16 declares
/// about 40, with its extras).
pub const MAX_REQUIREMENTS: usize = 128;

/// The longest header value kept: a version (`2.11.0+cu130`), a
/// `Requires-Python` or one `Requires-Dist` take a few dozen bytes. A
/// longer value, which only a file made to be long would hold, is not
/// kept, so what the evidence quotes of the owner's files stays short.
pub const MAX_VALUE: usize = 256;

/// Parse the headers of a `METADATA` file: `Key: value` lines up to the
/// first empty line (after which comes the description); a line that
/// starts with white space continues the header before it and is not
/// needed here. Keys are compared without case. `text` may be a prefix of
/// the file: an unfinished last line is ignored.
pub fn parse_metadata(text: &str, complete: bool) -> Metadata {
    let mut m = Metadata::default();
    let mut lines: Vec<&str> = text.split('\n').collect();
    if !complete {
        lines.pop();
    }
    for line in lines {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if value.len() > MAX_VALUE {
            continue;
        }
        match key.trim().to_ascii_lowercase().as_str() {
            "name" if m.name.is_none() => m.name = Some(value.to_owned()),
            "version" if m.version.is_none() => m.version = Some(value.to_owned()),
            "requires-python" if m.requires_python.is_none() => {
                m.requires_python = Some(value.to_owned());
            }
            "requires-dist" if m.requires_dist.len() < MAX_REQUIREMENTS => {
                m.requires_dist.push(value.to_owned());
            }
            _ => {}
        }
    }
    m
}

/// The `Tag:` values of a `WHEEL` file (`cp39-cp39-macosx_11_0_arm64`).
pub fn parse_wheel_tags(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let (key, value) = l.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case("tag")
                .then(|| value.trim().to_owned())
        })
        .filter(|t| !t.is_empty())
        .take(16)
        .collect()
}

/// One `Requires-Dist`: `keras (<2.10.0,>=2.9.0rc0)`, `tensorflow ==2.13.0 ;
/// platform_system == "Darwin"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Normalised.
    pub name: String,
    /// `None` for any version (or a URL requirement).
    pub specifier: Option<Specifier>,
    pub marker: Option<Marker>,
}

impl Requirement {
    /// Parse a PEP 508 requirement; `None` for text this does not
    /// understand (a specifier that does not parse, a marker that does
    /// not: such a requirement is left out rather than misread).
    pub fn parse(text: &str) -> Option<Requirement> {
        let (req, marker) = match text.split_once(';') {
            Some((r, m)) => (r, Some(Marker::parse(m)?)),
            None => (text, None),
        };
        let req = req.trim();
        let end = req
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
            .unwrap_or(req.len());
        let (name, mut rest) = req.split_at(end);
        if name.is_empty() {
            return None;
        }
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('[') {
            rest = after.split_once(']')?.1.trim_start();
        }
        if rest.starts_with('@') {
            return Some(Requirement {
                name: normalize(name),
                specifier: None,
                marker,
            });
        }
        let rest = rest.trim();
        let rest = rest
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or(rest)
            .trim();
        let specifier = if rest.is_empty() {
            None
        } else {
            Some(Specifier::parse(rest)?)
        };
        Some(Requirement {
            name: normalize(name),
            specifier,
            marker,
        })
    }
}

/// What a marker may ask of the environment that is known here. An
/// unknown value (`None`) makes a comparison unknown.
#[derive(Debug, Clone, Copy, Default)]
pub struct MarkerEnv<'a> {
    /// `3.11`.
    pub python_version: Option<&'a str>,
    /// `darwin`, `linux`.
    pub sys_platform: Option<&'a str>,
    /// `Darwin`, `Linux`.
    pub platform_system: Option<&'a str>,
    /// `arm64`, `x86_64` (`platform.machine()` of the process's Python).
    pub platform_machine: Option<&'a str>,
}

/// A PEP 508 environment marker: comparisons joined by `and` and `or`,
/// with parentheses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    Compare {
        left: Operand,
        op: String,
        right: Operand,
    },
    And(Box<Marker>, Box<Marker>),
    Or(Box<Marker>, Box<Marker>),
}

/// A marker variable or a quoted string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operand {
    Variable(String),
    Text(String),
}

/// Deepest nesting of parentheses a marker may have.
const MARKER_DEPTH: usize = 16;

impl Marker {
    /// Parse a marker; `None` for text that is not one.
    pub fn parse(text: &str) -> Option<Marker> {
        let tokens = tokenize(text)?;
        let mut pos = 0;
        let m = parse_or(&tokens, &mut pos, 0)?;
        (pos == tokens.len()).then_some(m)
    }

    /// True, false, or `None` where it depends on what is not known here
    /// (`platform_machine` where the caller does not say, a variable not
    /// read here).
    pub fn evaluate(&self, env: &MarkerEnv<'_>) -> Option<bool> {
        match self {
            Marker::And(a, b) => match (a.evaluate(env), b.evaluate(env)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Marker::Or(a, b) => match (a.evaluate(env), b.evaluate(env)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            Marker::Compare { left, op, right } => compare(left, op, right, env),
        }
    }
}

fn compare(left: &Operand, op: &str, right: &Operand, env: &MarkerEnv<'_>) -> Option<bool> {
    // `extra == "and-cuda"`: a requirement of an extra, which applies only
    // if the extra was asked for at install time, which no file records.
    let is_extra = |o: &Operand| matches!(o, Operand::Variable(v) if v == "extra");
    if is_extra(left) || is_extra(right) {
        return Some(op == "!=" || op == "not in");
    }
    let value = |o: &Operand| -> Option<(String, bool)> {
        match o {
            Operand::Text(t) => Some((t.clone(), false)),
            Operand::Variable(v) => {
                let known = match v.as_str() {
                    "python_version" => env.python_version,
                    "sys_platform" => env.sys_platform,
                    "platform_system" => env.platform_system,
                    "platform_machine" => env.platform_machine,
                    "os_name" => Some("posix"),
                    _ => None,
                };
                known.map(|k| (k.to_owned(), v == "python_version"))
            }
        }
    };
    let (l, l_version) = value(left)?;
    let (r, r_version) = value(right)?;
    if l_version || r_version {
        if let (Some(a), Some(b)) = (Version::parse(&l), Version::parse(&r)) {
            return match op {
                "==" => Some(a == b),
                "!=" => Some(a != b),
                "<" => Some(a < b),
                "<=" => Some(a <= b),
                ">" => Some(a > b),
                ">=" => Some(a >= b),
                _ => None,
            };
        }
        return None;
    }
    match op {
        "==" => Some(l == r),
        "!=" => Some(l != r),
        "in" => Some(r.contains(&l)),
        "not in" => Some(!r.contains(&l)),
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Open,
    Close,
    And,
    Or,
    Op(String),
    Operand(Operand),
}

fn tokenize(text: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let c = rest.chars().next()?;
        if c == '(' {
            out.push(Token::Open);
            rest = &rest[1..];
        } else if c == ')' {
            out.push(Token::Close);
            rest = &rest[1..];
        } else if c == '"' || c == '\'' {
            let body = &rest[1..];
            let end = body.find(c)?;
            out.push(Token::Operand(Operand::Text(body[..end].to_owned())));
            rest = &body[end + 1..];
        } else if let Some(op) = ["===", "==", "!=", "<=", ">=", "~=", "<", ">"]
            .iter()
            .find(|op| rest.starts_with(**op))
        {
            out.push(Token::Op((*op).to_owned()));
            rest = &rest[op.len()..];
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_' || ch == '.'))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            rest = &rest[end..];
            match word {
                "and" => out.push(Token::And),
                "or" => out.push(Token::Or),
                "in" => out.push(Token::Op("in".to_owned())),
                "not" => {
                    let after = rest.trim_start();
                    let after = after.strip_prefix("in")?;
                    out.push(Token::Op("not in".to_owned()));
                    rest = after;
                }
                _ => out.push(Token::Operand(Operand::Variable(word.to_owned()))),
            }
        } else {
            return None;
        }
        rest = rest.trim_start();
    }
    Some(out)
}

fn parse_or(t: &[Token], pos: &mut usize, depth: usize) -> Option<Marker> {
    let mut left = parse_and(t, pos, depth)?;
    while t.get(*pos) == Some(&Token::Or) {
        *pos += 1;
        let right = parse_and(t, pos, depth)?;
        left = Marker::Or(Box::new(left), Box::new(right));
    }
    Some(left)
}

fn parse_and(t: &[Token], pos: &mut usize, depth: usize) -> Option<Marker> {
    let mut left = parse_atom(t, pos, depth)?;
    while t.get(*pos) == Some(&Token::And) {
        *pos += 1;
        let right = parse_atom(t, pos, depth)?;
        left = Marker::And(Box::new(left), Box::new(right));
    }
    Some(left)
}

fn parse_atom(t: &[Token], pos: &mut usize, depth: usize) -> Option<Marker> {
    if t.get(*pos) == Some(&Token::Open) {
        if depth >= MARKER_DEPTH {
            return None;
        }
        *pos += 1;
        let inner = parse_or(t, pos, depth + 1)?;
        if t.get(*pos) != Some(&Token::Close) {
            return None;
        }
        *pos += 1;
        return Some(inner);
    }
    let (Some(Token::Operand(left)), Some(Token::Op(op)), Some(Token::Operand(right))) =
        (t.get(*pos), t.get(*pos + 1), t.get(*pos + 2))
    else {
        return None;
    };
    *pos += 3;
    Some(Marker::Compare {
        left: left.clone(),
        op: op.clone(),
        right: right.clone(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `tensorflow_metal-0.5.0.dist-info/METADATA` from
    /// `tensorflow_metal-0.5.0-cp39-cp39-macosx_11_0_arm64.whl` (PyPI; see
    /// `tests/fixtures/pypi/README.md`).
    pub(crate) const TF_METAL_050_METADATA: &str =
        include_str!("../../../tests/fixtures/pypi/tensorflow_metal-0.5.0.dist-info/METADATA");

    /// `tensorflow_macos-2.9.2.dist-info/METADATA` from
    /// `tensorflow_macos-2.9.2-cp39-cp39-macosx_11_0_arm64.whl` (PyPI).
    pub(crate) const TF_MACOS_292_METADATA: &str =
        include_str!("../../../tests/fixtures/pypi/tensorflow_macos-2.9.2.dist-info/METADATA");

    /// `tensorflow_macos-2.9.2.dist-info/WHEEL` from the same wheel.
    pub(crate) const TF_MACOS_292_WHEEL: &str =
        include_str!("../../../tests/fixtures/pypi/tensorflow_macos-2.9.2.dist-info/WHEEL");

    /// `tensorflow_metal-1.2.0.dist-info/METADATA` from
    /// `tensorflow_metal-1.2.0-cp311-cp311-macosx_12_0_arm64.whl` (PyPI): its
    /// description carries Apple's compatibility table.
    pub(crate) const TF_METAL_120_METADATA: &str =
        include_str!("../../../tests/fixtures/pypi/tensorflow_metal-1.2.0.dist-info/METADATA");

    #[test]
    fn names_are_normalised_as_pep_503_says() {
        // PEP 503's examples: all of these are one name.
        for n in [
            "friendly-bard",
            "Friendly-Bard",
            "FRIENDLY-BARD",
            "friendly.bard",
            "friendly_bard",
            "friendly--bard",
            "FrIeNdLy-._.-bArD",
        ] {
            assert_eq!(normalize(n), "friendly-bard", "{n}");
        }
    }

    #[test]
    fn a_header_value_past_the_cap_is_not_kept() {
        let long = "9".repeat(MAX_VALUE + 1);
        let text = format!(
            "Metadata-Version: 2.1\nName: tensorflow\nVersion: {long}\nRequires-Dist: keras ({long})\nRequires-Python: >=3.9\n\n"
        );
        let m = parse_metadata(&text, true);
        assert_eq!(m.name.as_deref(), Some("tensorflow"));
        assert_eq!(m.version, None);
        assert!(m.requires_dist.is_empty());
        assert_eq!(m.requires_python.as_deref(), Some(">=3.9"));
        let at_cap = "9".repeat(MAX_VALUE);
        let m = parse_metadata(&format!("Name: tensorflow\nVersion: {at_cap}\n"), true);
        assert_eq!(m.version.as_deref(), Some(at_cap.as_str()));
    }

    #[test]
    fn dist_info_directory_names_give_name_and_version() {
        // The directory names pip writes for the wheels above (PEP 427:
        // `-` in the name escaped as `_`).
        assert_eq!(
            dist_info_dir("tensorflow_metal-0.5.0.dist-info"),
            Some(("tensorflow-metal".to_owned(), "0.5.0"))
        );
        assert_eq!(
            dist_info_dir("nvidia_cuda_runtime_cu12-12.1.105.dist-info"),
            Some(("nvidia-cuda-runtime-cu12".to_owned(), "12.1.105"))
        );
        assert_eq!(dist_info_dir("tensorflow"), None);
        assert_eq!(dist_info_dir("tensorflow-2.9.0.egg-info"), None);
        assert_eq!(dist_info_dir("-1.0.dist-info"), None);
    }

    #[test]
    fn real_metadata_heads_give_their_headers() {
        let metal = parse_metadata(TF_METAL_050_METADATA, true);
        assert_eq!(metal.name.as_deref(), Some("tensorflow-metal"));
        assert_eq!(metal.version.as_deref(), Some("0.5.0"));
        assert_eq!(metal.requires_python, None);
        assert_eq!(metal.requires_dist, ["wheel (~=0.35)", "six (~=1.15.0)"]);
        let tf = parse_metadata(TF_MACOS_292_METADATA, true);
        assert_eq!(tf.version.as_deref(), Some("2.9.2"));
        assert_eq!(tf.requires_python.as_deref(), Some(">=3.7"));
        assert_eq!(tf.requires_dist.len(), 21);
        assert_eq!(tf.requires_dist[20], "keras (<2.10.0,>=2.9.0rc0)");
        let metal12 = parse_metadata(TF_METAL_120_METADATA, true);
        assert_eq!(metal12.version.as_deref(), Some("1.2.0"));
        assert_eq!(metal12.requires_dist, ["wheel~=0.35", "six>=1.15.0"]);
        // A prefix cut inside a line leaves that line out.
        let cut = &TF_METAL_050_METADATA[..TF_METAL_050_METADATA.find("0.5.0").unwrap() + 2];
        let m = parse_metadata(cut, false);
        assert_eq!(
            (m.name.as_deref(), m.version),
            (Some("tensorflow-metal"), None)
        );
        assert_eq!(
            parse_wheel_tags(TF_MACOS_292_WHEEL),
            ["cp39-cp39-macosx_11_0_arm64"]
        );
    }

    #[test]
    fn requirements_in_both_spellings_parse() {
        let old = Requirement::parse("keras (<2.10.0,>=2.9.0rc0)").unwrap();
        assert_eq!(old.name, "keras");
        assert_eq!(old.specifier.unwrap().to_string(), "<2.10.0,>=2.9.0rc0");
        // tensorflow_metal-1.2.0's METADATA: `Requires-Dist: wheel~=0.35`.
        let new = Requirement::parse("wheel~=0.35").unwrap();
        assert_eq!(
            (new.name.as_str(), new.specifier.is_some()),
            ("wheel", true)
        );
        let extras = Requirement::parse("jax[cpu] >=0.4.1").unwrap();
        assert_eq!(extras.name, "jax");
        let bare = Requirement::parse("packaging").unwrap();
        assert_eq!((bare.name.as_str(), bare.specifier), ("packaging", None));
        assert_eq!(Requirement::parse("keras (>>2)"), None);
        assert_eq!(Requirement::parse(""), None);
    }

    #[test]
    fn markers_evaluate_to_what_is_known() {
        // The form of the markers in tensorflow 2.16's and torch 2.1's
        // METADATA (`tensorflow-intel ==2.16.1 ; platform_system ==
        // "Windows"`, `nvidia-cuda-runtime-cu12 ==12.1.105 ;
        // platform_system == "Linux" and platform_machine == "x86_64"`,
        // `tensorflow-io-gcs-filesystem >=0.23.1 ; python_version <
        // "3.12"`, `tensorrt ; extra == "and-cuda"`).
        let mac = MarkerEnv {
            python_version: Some("3.11"),
            sys_platform: Some("darwin"),
            platform_system: Some("Darwin"),
            platform_machine: None,
        };
        let eval = |m: &str| Marker::parse(m).unwrap().evaluate(&mac);
        assert_eq!(eval(r#"platform_system == "Windows""#), Some(false));
        assert_eq!(eval(r#"platform_system == "Darwin""#), Some(true));
        assert_eq!(
            eval(r#"platform_system == "Linux" and platform_machine == "x86_64""#),
            Some(false)
        );
        assert_eq!(
            eval(r#"platform_system == "Darwin" and platform_machine == "arm64""#),
            None
        );
        assert_eq!(eval(r#"python_version < "3.12""#), Some(true));
        assert_eq!(eval(r#"python_version >= "3.12""#), Some(false));
        assert_eq!(eval(r#"extra == "and-cuda""#), Some(false));
        assert_eq!(
            eval(
                r#"(sys_platform == "linux" or sys_platform == "darwin") and python_version > "3.8""#
            ),
            Some(true)
        );
        assert_eq!(Marker::parse(r#"platform_system == "#), None);
        assert_eq!(Marker::parse(&"(".repeat(100)), None);
        let req = Requirement::parse(
            r#"nvidia-cuda-runtime-cu12 ==12.1.105 ; platform_system == "Linux" and platform_machine == "x86_64""#,
        )
        .unwrap();
        assert_eq!(req.name, "nvidia-cuda-runtime-cu12");
        assert!(req.marker.is_some());
    }
}
