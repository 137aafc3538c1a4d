//! Python package versions and version specifiers, as the packaging
//! specifications define them: [`Version`] (PEP 440, "Version specifiers",
//! <https://packaging.python.org/en/latest/specifications/version-specifiers/>)
//! ordered as PEP 440 orders them, and [`Specifier`] (`>=2.9.0rc0,<2.10.0`,
//! `~=0.35`, `==2.13.*`) with the comparison rules of the same spec,
//! pre-releases allowed (as `pip check` judges what is installed).
//!
//! [`python_clause_excludes`] judges a `Requires-Python` specifier against
//! an interpreter known only by its major and minor version (`3.11`, from a
//! path): it says "excluded" only where every patch release of that minor
//! version is excluded, never on a guess.

use std::cmp::Ordering;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

/// A PEP 440 version: epoch, release numbers, pre-, post- and
/// development-release parts; a local label (`+cu121`) is kept as a mark
/// only (it orders after the same public version, and no specifier used
/// here names one). Equal as PEP 440 compares (`2.9 == 2.9.0`).
#[derive(Debug, Clone)]
pub struct Version {
    epoch: u64,
    release: Vec<u64>,
    /// `a` = 0, `b` = 1, `rc` = 2, with its number.
    pre: Option<(u8, u64)>,
    post: Option<u64>,
    dev: Option<u64>,
    local: bool,
}

/// PEP 440's appendix "Parsing version strings with regular expressions",
/// the permissive form that accepts every spelling the spec normalises
/// (`2.9.0rc0`, `1.0-1`, `v1.0`, `1.0.post1.dev2`, `2.1.0+cu121`).
static VERSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)^\s*v?
        (?:(?P<epoch>[0-9]+)!)?
        (?P<release>[0-9]+(?:\.[0-9]+)*)
        (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?
        (?P<post>-(?P<post_n1>[0-9]+)|[-_.]?(?:post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?
        (?P<dev>[-_.]?dev[-_.]?(?P<dev_n>[0-9]+)?)?
        (?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?
        \s*$",
    )
    .expect("a valid regex")
});

impl Version {
    /// Parse a version string; `None` for one PEP 440 does not accept (a
    /// legacy version such as `2004d` or a name another user made up).
    pub fn parse(text: &str) -> Option<Version> {
        let c = VERSION.captures(text)?;
        let num = |name: &str| -> Option<Option<u64>> {
            match c.name(name) {
                Some(m) => m.as_str().parse().ok().map(Some),
                None => Some(None),
            }
        };
        let mut release = Vec::new();
        for part in c.name("release")?.as_str().split('.') {
            release.push(part.parse().ok()?);
        }
        let pre = match c.name("pre_l") {
            Some(l) => {
                let kind = match l.as_str().to_ascii_lowercase().as_str() {
                    "a" | "alpha" => 0,
                    "b" | "beta" => 1,
                    _ => 2,
                };
                Some((kind, num("pre_n")?.unwrap_or(0)))
            }
            None => None,
        };
        // `1.0.post` and `1.0.dev` without a number are 0.
        let post = match c.name("post") {
            Some(_) => Some(num("post_n1")?.or(num("post_n2")?).unwrap_or(0)),
            None => None,
        };
        let dev = match c.name("dev") {
            Some(_) => Some(num("dev_n")?.unwrap_or(0)),
            None => None,
        };
        Some(Version {
            epoch: num("epoch")?.unwrap_or(0),
            release,
            pre,
            post,
            dev,
            local: text.contains('+'),
        })
    }

    /// The release numbers (`[2, 9, 2]` for `2.9.2`).
    pub fn release(&self) -> &[u64] {
        &self.release
    }

    /// Release number `i`, 0 past the end (`2.9` is `2.9.0`).
    pub fn part(&self, i: usize) -> u64 {
        self.release.get(i).copied().unwrap_or(0)
    }

    /// A pre-release or development release.
    pub fn is_prerelease(&self) -> bool {
        self.pre.is_some() || self.dev.is_some()
    }

    /// The same version without pre-, post-, dev- or local parts.
    fn base(&self) -> Version {
        Version {
            epoch: self.epoch,
            release: self.release.clone(),
            pre: None,
            post: None,
            dev: None,
            local: false,
        }
    }

    /// Where the suffixes put it among the releases of one release
    /// number, as PEP 440 orders them: `1.0.dev0 < 1.0a1.dev0 < 1.0a1 <
    /// 1.0rc1 < 1.0 < 1.0.post1.dev0 < 1.0.post1`.
    fn suffix_key(&self) -> (u8, u64, u8, u64, u8, u64) {
        let pre = match (self.pre, self.post, self.dev) {
            (Some((kind, n)), _, _) => (1 + kind, n),
            (None, None, Some(_)) => (0, 0),
            _ => (4, 0),
        };
        let post = self.post.map_or((0, 0), |n| (1, n));
        let dev = self.dev.map_or((1, 0), |n| (0, n));
        (pre.0, pre.1, post.0, post.1, dev.0, dev.1)
    }
}

/// Release numbers compared with missing parts as 0 (`2.9 == 2.9.0`).
fn cmp_release(a: &[u64], b: &[u64]) -> Ordering {
    let len = a.len().max(b.len());
    for i in 0..len {
        let (x, y) = (a.get(i).unwrap_or(&0), b.get(i).unwrap_or(&0));
        match x.cmp(y) {
            Ordering::Equal => {}
            other => return other,
        }
    }
    Ordering::Equal
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.epoch
            .cmp(&other.epoch)
            .then_with(|| cmp_release(&self.release, &other.release))
            .then_with(|| self.suffix_key().cmp(&other.suffix_key()))
            .then_with(|| self.local.cmp(&other.local))
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.epoch != 0 {
            write!(f, "{}!", self.epoch)?;
        }
        let parts: Vec<String> = self.release.iter().map(u64::to_string).collect();
        f.write_str(&parts.join("."))?;
        if let Some((kind, n)) = self.pre {
            let l = ["a", "b", "rc"][usize::from(kind.min(2))];
            write!(f, "{l}{n}")?;
        }
        if let Some(n) = self.post {
            write!(f, ".post{n}")?;
        }
        if let Some(n) = self.dev {
            write!(f, ".dev{n}")?;
        }
        Ok(())
    }
}

/// One comparison of a specifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Compatible,
    Equal,
    NotEqual,
    LessEqual,
    GreaterEqual,
    Less,
    Greater,
    Arbitrary,
}

/// One clause: `>=2.9.0rc0`, `==2.13.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Clause {
    op: Op,
    /// The version as written (for `===`, compared as text).
    text: String,
    version: Option<Version>,
    /// `==V.*` or `!=V.*`.
    wildcard: bool,
}

/// A version specifier: clauses separated by commas, all of which must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Specifier {
    clauses: Vec<Clause>,
    /// As written, for messages.
    text: String,
}

impl Specifier {
    /// Parse `>=2.9.0rc0,<2.10.0` (spaces allowed anywhere between tokens).
    /// `None` for text that is not a specifier; an empty text is `None` too
    /// (no constraint is no specifier).
    pub fn parse(text: &str) -> Option<Specifier> {
        let mut clauses = Vec::new();
        for raw in text.split(',') {
            let raw = raw.trim();
            if raw.is_empty() {
                return None;
            }
            let (op, rest) = [
                ("===", Op::Arbitrary),
                ("~=", Op::Compatible),
                ("==", Op::Equal),
                ("!=", Op::NotEqual),
                ("<=", Op::LessEqual),
                (">=", Op::GreaterEqual),
                ("<", Op::Less),
                (">", Op::Greater),
            ]
            .iter()
            .find_map(|(p, op)| raw.strip_prefix(p).map(|r| (*op, r.trim())))?;
            if rest.is_empty() {
                return None;
            }
            let (body, wildcard) = match rest.strip_suffix(".*") {
                Some(b) if matches!(op, Op::Equal | Op::NotEqual) => (b, true),
                Some(_) => return None,
                None => (rest, false),
            };
            let version = Version::parse(body);
            if op != Op::Arbitrary && version.is_none() {
                return None;
            }
            if op == Op::Compatible && version.as_ref().is_some_and(|v| v.release.len() < 2) {
                return None;
            }
            clauses.push(Clause {
                op,
                text: body.to_owned(),
                version,
                wildcard,
            });
        }
        Some(Specifier {
            clauses,
            text: text.split(',').map(str::trim).collect::<Vec<_>>().join(","),
        })
    }

    /// Whether `v` satisfies every clause (pre-releases allowed).
    pub fn contains(&self, v: &Version) -> bool {
        self.clauses.iter().all(|c| c.contains(v))
    }
}

impl fmt::Display for Specifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Clause {
    fn contains(&self, v: &Version) -> bool {
        let Some(s) = &self.version else {
            // `===`: the text itself.
            return self.op == Op::Arbitrary && v.to_string().eq_ignore_ascii_case(&self.text);
        };
        match self.op {
            Op::Arbitrary => v.to_string().eq_ignore_ascii_case(&self.text),
            Op::Equal if self.wildcard => prefix_match(v, s),
            Op::NotEqual if self.wildcard => !prefix_match(v, s),
            // Without a local label in the specifier, a local label of the
            // candidate is ignored.
            Op::Equal => strip_local(v).cmp(s) == Ordering::Equal,
            Op::NotEqual => strip_local(v).cmp(s) != Ordering::Equal,
            Op::LessEqual => strip_local(v) <= *s,
            Op::GreaterEqual => strip_local(v) >= *s,
            // `<V` admits no pre-release of V itself unless V is one.
            Op::Less => {
                strip_local(v) < *s
                    && !(!s.is_prerelease()
                        && v.is_prerelease()
                        && cmp_release(&v.release, &s.release) == Ordering::Equal
                        && v.epoch == s.epoch)
            }
            // `>V` admits no post-release of V unless V is one, and no
            // local version of V.
            Op::Greater => {
                strip_local(v) > *s
                    && !(s.post.is_none()
                        && v.post.is_some()
                        && v.base().cmp(&s.base()) == Ordering::Equal
                        && v.pre == s.pre)
                    && !(v.local && strip_local(v).cmp(s) == Ordering::Equal)
            }
            Op::Compatible => {
                let prefix = Version {
                    release: s.release[..s.release.len() - 1].to_vec(),
                    ..s.base()
                };
                strip_local(v) >= *s && prefix_match(v, &prefix)
            }
        }
    }
}

fn strip_local(v: &Version) -> Version {
    Version {
        local: false,
        ..v.clone()
    }
}

/// `==prefix.*`: the candidate's epoch and leading release numbers equal the
/// prefix's (missing parts of the candidate counting as 0).
fn prefix_match(v: &Version, prefix: &Version) -> bool {
    v.epoch == prefix.epoch
        && prefix
            .release
            .iter()
            .enumerate()
            .all(|(i, p)| v.part(i) == *p)
}

/// Whether `spec` (a `Requires-Python`) excludes every release of Python
/// `major.minor`, judging each clause on what the major and minor version
/// settle (`<3.11` excludes 3.11 whatever its patch; `<3.11.4` excludes
/// only some 3.11 releases, so it is not counted). `===` is never judged.
pub fn python_clause_excludes(spec: &Specifier, major: u64, minor: u64) -> bool {
    spec.clauses.iter().any(|c| {
        let Some(v) = &c.version else {
            return false;
        };
        let mm = (major, minor);
        let vm = (v.part(0), v.part(1));
        // Parts of the clause's version beyond major.minor that are not 0:
        // then the clause splits the minor version's releases.
        let finer = v.release.iter().skip(2).any(|&p| p != 0) || v.is_prerelease();
        match c.op {
            Op::Arbitrary => false,
            Op::GreaterEqual | Op::Greater => mm < vm,
            Op::LessEqual => mm > vm,
            Op::Less => mm > vm || (mm == vm && !finer),
            Op::Equal if c.wildcard => {
                // `==3.*`, `==3.11.*`: the parts given must match.
                (v.release.first().is_some_and(|&p| p != major))
                    || (v.release.len() >= 2 && v.part(1) != minor)
            }
            Op::Equal => v.release.len() >= 2 && mm != vm,
            Op::NotEqual if c.wildcard => {
                // `!=3.11.*` excludes all of 3.11; `!=3.*` all of 3.
                match v.release.len() {
                    1 => v.part(0) == major,
                    2 => mm == vm,
                    _ => false,
                }
            }
            Op::NotEqual => false,
            Op::Compatible => {
                // `~=3.8` is `>=3.8, ==3.*`; `~=3.8.1` is `>=3.8.1, ==3.8.*`.
                let below = mm < vm;
                let prefix_len = v.release.len() - 1;
                let outside = match prefix_len {
                    1 => v.part(0) != major,
                    _ => mm != vm,
                };
                below || outside
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap_or_else(|| panic!("{s} parses"))
    }

    fn spec(s: &str) -> Specifier {
        Specifier::parse(s).unwrap_or_else(|| panic!("{s} parses"))
    }

    #[test]
    fn versions_order_as_pep_440_orders_them() {
        // The ordering example of PEP 440, "Summary of permitted suffixes
        // and relative ordering".
        let ordered = [
            "1.dev0",
            "1.0.dev456",
            "1.0a1",
            "1.0a2.dev456",
            "1.0a12.dev456",
            "1.0a12",
            "1.0b1.dev456",
            "1.0b2",
            "1.0b2.post345.dev456",
            "1.0b2.post345",
            "1.0rc1.dev456",
            "1.0rc1",
            "1.0",
            "1.0+abc.5",
            "1.0.post456.dev34",
            "1.0.post456",
            "1.0.15",
            "1.1.dev1",
        ];
        for pair in ordered.windows(2) {
            assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(v("2.9").cmp(&v("2.9.0")), Ordering::Equal);
        assert!(v("1!0.1") > v("99.0"), "the epoch comes first");
    }

    #[test]
    fn spellings_pep_440_normalises_parse() {
        // PEP 440, "Normalization": each of these is a spelling of the same
        // version as the one beside it.
        for (a, b) in [
            ("1.0-1", "1.0.post1"),
            ("1.0.post", "1.0.post0"),
            ("1.0-rc1", "1.0rc1"),
            ("1.0alpha1", "1.0a1"),
            ("v2.9.0", "2.9.0"),
            ("1.0.dev", "1.0.dev0"),
        ] {
            assert_eq!(v(a).cmp(&v(b)), Ordering::Equal, "{a} is {b}");
        }
        assert_eq!(v("2.9.0rc0").to_string(), "2.9.0rc0");
        assert_eq!(Version::parse("2004d"), None);
        assert_eq!(Version::parse("not a version"), None);
        assert_eq!(Version::parse(""), None);
    }

    #[test]
    fn real_requires_dist_specifiers_hold_or_not() {
        // tensorflow_macos-2.9.2-cp39-cp39-macosx_11_0_arm64.whl's METADATA
        // (PyPI): `Requires-Dist: keras (<2.10.0,>=2.9.0rc0)`.
        let keras = spec("<2.10.0,>=2.9.0rc0");
        assert!(keras.contains(&v("2.9.0")));
        assert!(keras.contains(&v("2.9.0rc0")));
        assert!(!keras.contains(&v("2.10.0")));
        assert!(
            !keras.contains(&v("2.10.0rc1")),
            "<V admits no pre-release of V"
        );
        assert!(!keras.contains(&v("3.3.3")));
        // tensorflow_metal-1.1.0's METADATA: `Requires-Dist: wheel ~=0.35`.
        let wheel = spec("~=0.35");
        assert!(wheel.contains(&v("0.41.2")));
        assert!(!wheel.contains(&v("1.0")));
        assert!(!wheel.contains(&v("0.34")));
        // PEP 440's examples of `==` and `!=` with `.*`.
        assert!(spec("==1.1.*").contains(&v("1.1.post1")));
        assert!(!spec("==1.1.*").contains(&v("1.2")));
        assert!(spec("!=1.1.*").contains(&v("1.2")));
        assert!(spec("==1.1").contains(&v("1.1.0")));
        assert!(
            spec("==2.1.0").contains(&v("2.1.0+cu121")),
            "a local label is ignored"
        );
        assert!(
            !spec(">1.7").contains(&v("1.7.0.post1")),
            ">V admits no post-release of V"
        );
        assert!(spec(">1.7").contains(&v("1.7.1")));
    }

    #[test]
    fn text_that_is_no_specifier_is_refused() {
        for bad in ["", ">=", "~=1", "2.9", ">=2.9,", "<=2.*", ">=x.y"] {
            assert_eq!(Specifier::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn requires_python_excludes_a_minor_version_only_when_all_of_it() {
        // `Requires-Python: >=3.7` (tensorflow-macos 2.9.2's METADATA).
        assert!(python_clause_excludes(&spec(">=3.7"), 3, 6));
        assert!(!python_clause_excludes(&spec(">=3.7"), 3, 11));
        // `>=3.9` (tensorflow 2.16's) and the bound TensorFlow 2.15 states
        // as `<3.12`.
        assert!(python_clause_excludes(&spec(">=3.9"), 3, 8));
        assert!(python_clause_excludes(&spec(">=3.9,<3.12"), 3, 12));
        assert!(!python_clause_excludes(&spec(">=3.9,<3.12"), 3, 11));
        // A bound inside a minor version decides nothing about it.
        assert!(!python_clause_excludes(&spec("<3.11.4"), 3, 11));
        assert!(!python_clause_excludes(&spec(">=3.8.1"), 3, 8));
        assert!(python_clause_excludes(&spec("!=3.11.*"), 3, 11));
        assert!(!python_clause_excludes(&spec("!=3.11.2"), 3, 11));
        assert!(python_clause_excludes(&spec("==3.*"), 2, 7));
        assert!(python_clause_excludes(&spec("~=3.8"), 4, 0));
        assert!(!python_clause_excludes(&spec("~=3.8"), 3, 12));
    }
}
