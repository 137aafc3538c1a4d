//! Which installed framework packages do not go together, from what they
//! declare and what their makers publish. [`check`] takes the packages an
//! environment holds ([`Installed`]) and what is known of the process
//! ([`Context`]: its Python, the driver's CUDA version) and gives one
//! [`Finding`] per problem, in words that name both sides and the source:
//!
//! 1. **tensorflow-metal against TensorFlow**: Apple's compatibility table
//!    ([`METAL_TABLE`]), published on the plugin's page
//!    (<https://developer.apple.com/metal/tensorflow-plugin/>) and in the
//!    description of the tensorflow-metal 1.1.0 and 1.2.0 wheels on PyPI;
//!    the plugin's own `Requires-Dist` names no TensorFlow, so this table
//!    is the only statement of which goes with which.
//! 2. **tensorflow and tensorflow-macos both installed** at different
//!    versions: both wheels install the one `tensorflow` package
//!    (`top_level.txt` of each is `tensorflow`), so the files imported
//!    are a mix of two versions.
//! 3. **What a package's METADATA requires** of another framework package
//!    installed beside it (`Requires-Dist: keras (<2.10.0,>=2.9.0rc0)` of
//!    tensorflow-macos 2.9.2, jax's pin of jaxlib), where its environment
//!    marker holds here.
//! 4. **The Python the build is for**: a `Requires-Python` that excludes
//!    the interpreter's minor version, and a `WHEEL` tag for another
//!    CPython (`cp39` in a Python 3.11 environment: its extension modules
//!    do not load).
//! 5. **CUDA wheels against the driver** (Linux): `nvidia-cuda-runtime-cu*`'s
//!    version against the CUDA version the driver supports (NVML's
//!    `nvmlSystemGetCudaDriverVersion`). A newer major version does not run
//!    on the driver; a newer minor version of the same major runs under
//!    CUDA minor version compatibility with a limited feature set
//!    (<https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html>).
//!
//! Pure: no I/O. Nothing is said where a version does not parse or a fact
//! is unknown.

use super::metadata::{MarkerEnv, Requirement};
use super::version::{Specifier, Version, python_clause_excludes};

/// Apple's page for the tensorflow-metal plugin, which publishes the table.
pub const APPLE_METAL_URL: &str = "https://developer.apple.com/metal/tensorflow-plugin/";

/// NVIDIA's statement of CUDA minor version compatibility.
pub const CUDA_COMPAT_URL: &str =
    "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html";

/// Apple's compatibility table: each tensorflow-metal release series
/// (major, minor) and the TensorFlow 2.x minor versions it is published
/// for, first and last (`None`: no last one stated). From the table in
/// the description of `tensorflow_metal-1.2.0-cp311-cp311-macosx_12_0_arm64.whl`
/// (PyPI), which is Apple's page's table: v2.5–v0.1.2, v2.6–v0.2.0,
/// v2.7–v0.3.0, v2.8–v0.4.0, v2.9–v0.5.0, v2.10–v0.6.0, v2.11–v0.7.0,
/// v2.12–v0.8.0, v2.13–v1.0.0, "v2.14-v2.18"–v1.1.0, and a last row for
/// 2.18 "Fixes compatibility with 2.18+ TF versions" (the 1.2.0 release).
/// A series is matched by major and minor (0.5.1 is of the 0.5 series,
/// for 2.9); a release not in the table is not judged.
pub const METAL_TABLE: &[((u64, u64), u64, Option<u64>)] = &[
    ((0, 1), 5, Some(5)),
    ((0, 2), 6, Some(6)),
    ((0, 3), 7, Some(7)),
    ((0, 4), 8, Some(8)),
    ((0, 5), 9, Some(9)),
    ((0, 6), 10, Some(10)),
    ((0, 7), 11, Some(11)),
    ((0, 8), 12, Some(12)),
    ((1, 0), 13, Some(13)),
    ((1, 1), 14, Some(18)),
    ((1, 2), 18, None),
];

/// One installed package, as its `.dist-info` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// Normalised (PEP 503).
    pub name: String,
    /// As written in `METADATA` (or the directory's name).
    pub version: String,
    pub requires_python: Option<String>,
    pub requires_dist: Vec<String>,
    /// Its `WHEEL` file's tags; empty where there is none.
    pub tags: Vec<String>,
}

impl Installed {
    fn parsed(&self) -> Option<Version> {
        Version::parse(&self.version)
    }
}

/// What is known of the process the environment serves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    /// Its Python's major and minor version.
    pub python: Option<(u64, u64)>,
    /// The CUDA version the NVIDIA driver supports, major and minor.
    pub cuda_driver: Option<(u64, u64)>,
    /// For environment markers.
    pub markers: MarkerEnv<'a>,
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Runs with less than it should (CUDA minor version compatibility).
    Limited,
    /// A pair its makers do not support.
    Unsupported,
}

/// One problem, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub text: String,
}

/// Every problem of `installed` in `ctx` (see the module doc), in the
/// order of the module doc's list.
pub fn check(installed: &[Installed], ctx: &Context<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let find = |name: &str| installed.iter().find(|p| p.name == name);
    let bases: Vec<&Installed> = ["tensorflow-macos", "tensorflow"]
        .iter()
        .filter_map(|n| find(n))
        .collect();
    if let Some(metal) = find("tensorflow-metal") {
        metal_findings(metal, &bases, &mut out);
    }
    if let [a, b] = bases[..]
        && let (Some(va), Some(vb)) = (a.parsed(), b.parsed())
        && (va.part(0), va.part(1)) != (vb.part(0), vb.part(1))
    {
        out.push(unsupported(format!(
            "{} {} and {} {} are both installed: both install the one `tensorflow` package, so what is imported is a mix of the two",
            a.name, a.version, b.name, b.version
        )));
    }
    for p in installed {
        requirement_findings(p, installed, ctx, &mut out);
    }
    if let Some(py) = ctx.python {
        for p in installed {
            python_findings(p, py, &mut out);
        }
    }
    if let Some(driver) = ctx.cuda_driver {
        for p in installed.iter().filter(|p| is_cuda_runtime(&p.name)) {
            cuda_findings(p, driver, &mut out);
        }
    }
    out
}

/// True for the CUDA runtime's wheels (`nvidia-cuda-runtime-cu12`, and
/// the suffix-free name of later releases): their version is the CUDA
/// version they carry.
pub fn is_cuda_runtime(name: &str) -> bool {
    name == "nvidia-cuda-runtime"
        || name
            .strip_prefix("nvidia-cuda-runtime-cu")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn unsupported(text: String) -> Finding {
    Finding {
        severity: Severity::Unsupported,
        text,
    }
}

fn metal_findings(metal: &Installed, bases: &[&Installed], out: &mut Vec<Finding>) {
    let Some(mv) = metal.parsed() else {
        return;
    };
    let Some(&(_, lo, hi)) = METAL_TABLE
        .iter()
        .find(|(series, _, _)| *series == (mv.part(0), mv.part(1)))
    else {
        return;
    };
    let published = match hi {
        Some(hi) if hi == lo => format!("TensorFlow 2.{lo}"),
        Some(hi) => format!("TensorFlow 2.{lo} to 2.{hi}"),
        None => format!("TensorFlow 2.{lo} and later"),
    };
    let mut judged = Vec::new();
    for base in bases {
        let Some(tv) = base.parsed() else {
            continue;
        };
        let minor = (tv.part(0), tv.part(1));
        if judged.contains(&minor) {
            continue;
        }
        judged.push(minor);
        let fits = minor.0 == 2 && minor.1 >= lo && hi.is_none_or(|hi| minor.1 <= hi);
        if !fits {
            out.push(unsupported(format!(
                "tensorflow-metal {} with {} {}: unsupported pair (tensorflow-metal {}.{} is published for {published}; see {APPLE_METAL_URL})",
                metal.version,
                base.name,
                base.version,
                mv.part(0),
                mv.part(1)
            )));
        }
    }
}

/// Frameworks' requirements of each other: only packages [`check`] was
/// given, so only pairs of relevant packages.
fn requirement_findings(
    p: &Installed,
    installed: &[Installed],
    ctx: &Context<'_>,
    out: &mut Vec<Finding>,
) {
    for text in &p.requires_dist {
        let Some(req) = Requirement::parse(text) else {
            continue;
        };
        let Some(spec) = &req.specifier else {
            continue;
        };
        if req.name == p.name {
            continue;
        }
        let Some(other) = installed.iter().find(|q| q.name == req.name) else {
            continue;
        };
        let applies = req
            .marker
            .as_ref()
            .is_none_or(|m| m.evaluate(&ctx.markers) == Some(true));
        if !applies {
            continue;
        }
        let Some(ov) = other.parsed() else {
            continue;
        };
        if !spec.contains(&ov) {
            out.push(unsupported(format!(
                "{} {} with {} {}: unsupported pair ({} {} requires {} {spec}, in its METADATA)",
                other.name, other.version, p.name, p.version, p.name, p.version, other.name
            )));
        }
    }
}

fn python_findings(p: &Installed, (major, minor): (u64, u64), out: &mut Vec<Finding>) {
    if let Some(rp) = p.requires_python.as_deref().and_then(Specifier::parse)
        && python_clause_excludes(&rp, major, minor)
    {
        out.push(unsupported(format!(
            "{} {} on Python {major}.{minor}: it requires Python {rp} (its METADATA)",
            p.name, p.version
        )));
        return;
    }
    let tags: Vec<WheelTag> = p.tags.iter().filter_map(|t| WheelTag::parse(t)).collect();
    if tags.is_empty() || tags.iter().any(|t| t.runs_on(major, minor) != Some(false)) {
        return;
    }
    if let Some(t) = tags.first() {
        out.push(unsupported(format!(
            "{} {} on Python {major}.{minor}: the build installed is for CPython {}.{} (WHEEL tag {}), and its compiled modules do not load in another Python",
            p.name, p.version, t.major, t.minor, t.text
        )));
    }
}

/// A wheel tag's interpreter and ABI, where they name one CPython.
struct WheelTag<'a> {
    text: &'a str,
    major: u64,
    minor: u64,
    /// `abi3`: the stable ABI, for this CPython and later ones.
    stable_abi: bool,
}

impl<'a> WheelTag<'a> {
    /// `cp39-cp39-macosx_11_0_arm64`, `cp38-abi3-manylinux2014_x86_64`;
    /// `None` for a tag that names no CPython version (`py3-none-any`).
    fn parse(text: &'a str) -> Option<Self> {
        let mut parts = text.split('-');
        let interpreter = parts.next()?;
        let abi = parts.next()?;
        let digits = interpreter.strip_prefix("cp")?;
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let major = digits[..1].parse().ok()?;
        let minor = digits[1..].parse().ok()?;
        Some(WheelTag {
            text,
            major,
            minor,
            stable_abi: abi == "abi3",
        })
    }

    /// Whether the build loads in CPython `major.minor` (PEP 425: a
    /// `cpXY` ABI tag is that version's only, `abi3` that version's and
    /// later ones').
    fn runs_on(&self, major: u64, minor: u64) -> Option<bool> {
        if self.stable_abi {
            return Some(major == self.major && minor >= self.minor);
        }
        Some((major, minor) == (self.major, self.minor))
    }
}

fn cuda_findings(p: &Installed, (dmaj, dmin): (u64, u64), out: &mut Vec<Finding>) {
    let Some(v) = p.parsed() else {
        return;
    };
    let (rmaj, rmin) = (v.part(0), v.part(1));
    if rmaj > dmaj {
        out.push(unsupported(format!(
            "{} {} with a driver for CUDA {dmaj}.{dmin}: unsupported pair (CUDA {rmaj} needs a driver of its major version; see {CUDA_COMPAT_URL})",
            p.name, p.version
        )));
    } else if rmaj == dmaj && rmin > dmin {
        out.push(Finding {
            severity: Severity::Limited,
            text: format!(
                "{} {} with a driver for CUDA {dmaj}.{dmin}: runs under CUDA minor version compatibility, without what needs a newer driver (PTX from a newer toolkit does not load; see {CUDA_COMPAT_URL})",
                p.name, p.version
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::environment::metadata::{
        self, parse_metadata,
        tests::{
            TF_MACOS_292_METADATA, TF_MACOS_292_WHEEL, TF_METAL_050_METADATA, TF_METAL_120_METADATA,
        },
    };

    #[test]
    fn the_table_is_apples_as_the_wheel_carries_it() {
        // Each row of the table in tensorflow-metal 1.2.0's description
        // (`|v2.9 |v0.5.0|12.1+|Distributed training    |`): the TensorFlow
        // minor versions of the row lie in the range METAL_TABLE gives the
        // plugin's series.
        let mut rows = 0;
        for line in TF_METAL_120_METADATA.lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let (Some(tf), Some(metal)) = (cells.get(1), cells.get(2)) else {
                continue;
            };
            let (Some(tf), Some(metal)) = (tf.strip_prefix("v2."), metal.strip_prefix('v')) else {
                continue;
            };
            let metal = Version::parse(metal).unwrap();
            let series = (metal.part(0), metal.part(1));
            let &(_, lo, hi) = METAL_TABLE
                .iter()
                .find(|(s, _, _)| *s == series)
                .unwrap_or_else(|| panic!("{line}: no series {series:?}"));
            let (first, last) = match tf.split_once("-v2.") {
                Some((a, b)) => (a, b),
                None => (tf, tf),
            };
            for minor in [first, last] {
                let minor: u64 = minor.parse().unwrap();
                assert!(minor >= lo && hi.is_none_or(|hi| minor <= hi), "{line}");
            }
            rows += 1;
        }
        assert_eq!(rows, 11, "every row of the table was read");
    }

    /// A package as its dist-info's files give it.
    fn from_files(metadata_text: &str, wheel: &str) -> Installed {
        let m = parse_metadata(metadata_text, true);
        Installed {
            name: metadata::normalize(m.name.as_deref().unwrap()),
            version: m.version.unwrap(),
            requires_python: m.requires_python,
            requires_dist: m.requires_dist,
            tags: metadata::parse_wheel_tags(wheel),
        }
    }

    /// A package known by name and version alone.
    fn bare(name: &str, version: &str) -> Installed {
        Installed {
            name: name.to_owned(),
            version: version.to_owned(),
            requires_python: None,
            requires_dist: Vec::new(),
            tags: Vec::new(),
        }
    }

    fn mac(python: Option<(u64, u64)>) -> Context<'static> {
        Context {
            python,
            cuda_driver: None,
            markers: MarkerEnv {
                python_version: None,
                sys_platform: Some("darwin"),
                platform_system: Some("Darwin"),
                platform_machine: None,
            },
        }
    }

    fn texts(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.text.as_str()).collect()
    }

    #[test]
    fn the_pair_apple_publishes_is_not_flagged() {
        // The real heads of tensorflow-metal 0.5.0 and tensorflow-macos
        // 2.9.2 (PyPI wheels): Apple's table pairs 0.5.0 with 2.9.
        let installed = [
            from_files(TF_METAL_050_METADATA, "Tag: cp39-cp39-macosx_12_0_arm64\n"),
            from_files(TF_MACOS_292_METADATA, TF_MACOS_292_WHEEL),
            bare("keras", "2.9.0"),
        ];
        assert_eq!(
            texts(&check(&installed, &mac(Some((3, 9))))),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn a_plugin_for_another_tensorflow_is_an_unsupported_pair() {
        let installed = [
            bare("tensorflow-metal", "0.6.0"),
            from_files(TF_MACOS_292_METADATA, TF_MACOS_292_WHEEL),
        ];
        let found = check(&installed, &mac(Some((3, 9))));
        assert_eq!(
            texts(&found),
            [format!(
                "tensorflow-metal 0.6.0 with tensorflow-macos 2.9.2: unsupported pair (tensorflow-metal 0.6 is published for TensorFlow 2.10; see {APPLE_METAL_URL})"
            )]
        );
        assert_eq!(found[0].severity, Severity::Unsupported);
        // 1.1.0 spans 2.14 to 2.18; 1.2.0 is for 2.18 on; a release not in
        // the table is not judged.
        let pair = |m: &str, t: &str| {
            check(
                &[bare("tensorflow-metal", m), bare("tensorflow", t)],
                &mac(None),
            )
            .len()
        };
        assert_eq!(pair("1.1.0", "2.16.2"), 0);
        assert_eq!(pair("1.1.0", "2.19.0"), 1);
        assert_eq!(pair("1.2.0", "2.17.0"), 1);
        assert_eq!(pair("1.2.0", "2.20.0"), 0);
        assert_eq!(pair("0.5.1", "2.9.0"), 0);
        assert_eq!(pair("9.9.0", "2.9.0"), 0);
        // tensorflow-macos 2.13 and later requires tensorflow of the same
        // version: the two are judged once.
        let both = [
            bare("tensorflow-metal", "0.8.0"),
            bare("tensorflow-macos", "2.13.0"),
            bare("tensorflow", "2.13.0"),
        ];
        assert_eq!(check(&both, &mac(None)).len(), 1);
    }

    #[test]
    fn two_tensorflows_of_different_versions_are_a_mix() {
        let found = check(
            &[
                bare("tensorflow-macos", "2.9.2"),
                bare("tensorflow", "2.15.0"),
            ],
            &mac(None),
        );
        assert_eq!(found.len(), 1);
        assert!(
            found[0]
                .text
                .contains("both install the one `tensorflow` package")
        );
    }

    #[test]
    fn what_a_metadata_requires_of_an_installed_framework_is_checked() {
        // tensorflow-macos 2.9.2 requires keras <2.10.0,>=2.9.0rc0.
        let installed = [
            from_files(TF_MACOS_292_METADATA, TF_MACOS_292_WHEEL),
            bare("keras", "3.3.3"),
        ];
        assert_eq!(
            texts(&check(&installed, &mac(Some((3, 9))))),
            [
                "keras 3.3.3 with tensorflow-macos 2.9.2: unsupported pair (tensorflow-macos 2.9.2 requires keras <2.10.0,>=2.9.0rc0, in its METADATA)"
            ]
        );
        // A requirement under a marker that does not hold here, or may not,
        // is not judged.
        let mut jax = bare("jax", "0.4.30");
        jax.requires_dist = vec![
            r#"jaxlib <=0.4.30,>=0.4.27"#.to_owned(),
            r#"jaxlib ==0.4.20 ; platform_system == "Windows""#.to_owned(),
            r#"jaxlib ==0.4.21 ; platform_machine == "arm64""#.to_owned(),
            r#"jaxlib ==0.4.22 ; extra == "cpu""#.to_owned(),
        ];
        assert!(check(&[jax.clone(), bare("jaxlib", "0.4.30")], &mac(None)).is_empty());
        assert_eq!(check(&[jax, bare("jaxlib", "0.4.26")], &mac(None)).len(), 1);
    }

    #[test]
    fn a_build_for_another_python_is_flagged() {
        let tf = from_files(TF_MACOS_292_METADATA, TF_MACOS_292_WHEEL);
        let found = check(std::slice::from_ref(&tf), &mac(Some((3, 11))));
        assert_eq!(
            texts(&found),
            [
                "tensorflow-macos 2.9.2 on Python 3.11: the build installed is for CPython 3.9 (WHEEL tag cp39-cp39-macosx_11_0_arm64), and its compiled modules do not load in another Python"
            ]
        );
        // `Requires-Python: >=3.7` excludes 3.6.
        let found = check(std::slice::from_ref(&tf), &mac(Some((3, 6))));
        assert!(
            found[0].text.contains("it requires Python >=3.7"),
            "{found:?}"
        );
        // abi3 builds load in later versions; py3 tags name no CPython.
        let mut abi3 = bare("mlx", "0.1.0");
        abi3.tags = vec!["cp38-abi3-macosx_13_0_arm64".to_owned()];
        assert!(check(std::slice::from_ref(&abi3), &mac(Some((3, 12)))).is_empty());
        assert_eq!(
            check(std::slice::from_ref(&abi3), &mac(Some((3, 7)))).len(),
            1
        );
        let mut pure = bare("keras", "3.3.3");
        pure.tags = vec!["py3-none-any".to_owned()];
        assert!(check(&[pure], &mac(Some((3, 12)))).is_empty());
    }

    /// The four packages of `tests/fixtures/pypi/h100-venv/` (a Python 3.12
    /// virtual environment on a Linux machine with an H100, driver
    /// 580.159.04, NVML's CUDA version 13000), from their records.
    fn h100_venv() -> Vec<Installed> {
        macro_rules! record {
            ($dir:literal) => {
                from_files(
                    include_str!(concat!(
                        "../../../tests/fixtures/pypi/h100-venv/",
                        $dir,
                        "/METADATA"
                    )),
                    include_str!(concat!(
                        "../../../tests/fixtures/pypi/h100-venv/",
                        $dir,
                        "/WHEEL"
                    )),
                )
            };
        }
        vec![
            record!("jax-0.11.2.dist-info"),
            record!("jaxlib-0.11.2.dist-info"),
            record!("nvidia_cuda_runtime-13.0.96.dist-info"),
            record!("torch-2.11.0.dist-info"),
        ]
    }

    fn linux(python: (u64, u64), driver: (u64, u64)) -> Context<'static> {
        Context {
            python: Some(python),
            cuda_driver: Some(driver),
            markers: MarkerEnv {
                python_version: Some("3.12"),
                sys_platform: Some("linux"),
                platform_system: Some("Linux"),
                platform_machine: Some("x86_64"),
            },
        }
    }

    #[test]
    fn the_h100_environment_as_found_goes_together() {
        let env = h100_venv();
        assert!(check(&env, &linux((3, 12), (13, 0))).is_empty());
        // The same wheels under a driver for CUDA 12.8 (the 570 series).
        let older = check(&env, &linux((3, 12), (12, 8)));
        assert_eq!(
            texts(&older),
            [format!(
                "nvidia-cuda-runtime 13.0.96 with a driver for CUDA 12.8: unsupported pair (CUDA 13 needs a driver of its major version; see {CUDA_COMPAT_URL})"
            )]
        );
        // jax 0.11.2 requires `jaxlib<=0.11.2,>=0.11.2`.
        let mut mixed = env.clone();
        mixed[1].version = "0.11.1".to_owned();
        let found = check(&mixed, &linux((3, 12), (13, 0)));
        assert_eq!(
            texts(&found),
            [
                "jaxlib 0.11.1 with jax 0.11.2: unsupported pair (jax 0.11.2 requires jaxlib <=0.11.2,>=0.11.2, in its METADATA)"
            ]
        );
        // In a Python 3.11 environment the cp312 builds do not load, and
        // jax says `Requires-Python: >=3.12`.
        let found = check(&env, &linux((3, 11), (13, 0)));
        let t = texts(&found);
        assert!(
            t.contains(&"jax 0.11.2 on Python 3.11: it requires Python >=3.12 (its METADATA)"),
            "{t:?}"
        );
        assert!(
            t.iter().any(|l| l.starts_with("torch 2.11.0 on Python 3.11: the build installed is for CPython 3.12 (WHEEL tag cp312-cp312-manylinux_2_28_x86_64)")),
            "{t:?}"
        );
    }

    #[test]
    fn cuda_runtime_wheels_are_judged_against_the_driver() {
        // torch 2.1.0's pin: `nvidia-cuda-runtime-cu12 ==12.1.105`.
        let rt = [bare("nvidia-cuda-runtime-cu12", "12.1.105")];
        let on = |driver| {
            let ctx = Context {
                cuda_driver: driver,
                ..mac(None)
            };
            check(&rt, &ctx)
        };
        assert!(on(Some((12, 2))).is_empty());
        assert!(on(Some((12, 1))).is_empty());
        assert!(on(None).is_empty(), "no driver known, nothing said");
        let minor = on(Some((12, 0)));
        assert_eq!(minor[0].severity, Severity::Limited);
        let major = on(Some((11, 8)));
        assert_eq!(
            texts(&major),
            [format!(
                "nvidia-cuda-runtime-cu12 12.1.105 with a driver for CUDA 11.8: unsupported pair (CUDA 12 needs a driver of its major version; see {CUDA_COMPAT_URL})"
            )]
        );
        assert!(is_cuda_runtime("nvidia-cuda-runtime-cu11"));
        assert!(!is_cuda_runtime("nvidia-cuda-runtime-cuXY"));
        assert!(!is_cuda_runtime("nvidia-cudnn-cu12"));
    }
}
