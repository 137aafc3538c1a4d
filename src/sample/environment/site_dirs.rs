//! Where a Python process's packages are: the `site-packages` directories
//! ([`candidates`]) and the interpreter's version, from what the sampler
//! knows of it. Pure: paths in, paths out.
//!
//! In the order they are trusted:
//!
//! 1. the `site-packages` (or Debian's `dist-packages`) directories of the
//!    framework libraries the process maps (Linux: from
//!    `/proc/[pid]/maps`, `ProcessSample::site_packages`): what the
//!    interpreter actually loaded;
//! 2. the environment's prefix from the interpreter's path, `argv[0]` first
//!    (a virtual environment's `bin/python`, which the kernel resolves away
//!    in the executable's path), then the executable: `<prefix>/bin/python3.11`
//!    gives `<prefix>/lib/python3.11/site-packages` (CPython's `site`
//!    module, "site-specific configuration hook": `lib/pythonX.Y/site-packages`
//!    under `sys.prefix` on Unix), and a macOS framework build's
//!    `…/Python.framework/Versions/3.11/Resources/Python.app/Contents/MacOS/Python`
//!    gives `…/Python.framework/Versions/3.11/lib/python3.11/site-packages`.
//!
//! The version comes from the directory (`lib/python3.11/site-packages`),
//! else from the interpreter's name (`python3.11`) or framework path; a
//! prefix whose version no name gives is not guessed at.

/// Most directories looked at for one process.
pub const MAX_CANDIDATES: usize = 3;

/// Longest path taken (Linux's `PATH_MAX`).
pub const MAX_PATH: usize = 4096;

/// One directory to read, and the Python it belongs to where known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub dir: String,
    pub python: Option<(u64, u64)>,
}

/// The directories of one process, most trusted first, without repeats,
/// at most [`MAX_CANDIDATES`].
pub fn candidates(exe: Option<&str>, argv0: Option<&str>, mapped: &[&str]) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut push = |dir: String, python: Option<(u64, u64)>| {
        if dir.len() <= MAX_PATH && out.len() < MAX_CANDIDATES && !out.iter().any(|c| c.dir == dir)
        {
            out.push(Candidate { dir, python });
        }
    };
    for dir in mapped {
        push((*dir).to_owned(), python_of_dir(dir));
    }
    let exe = exe.map(|e| e.strip_suffix(" (deleted)").unwrap_or(e));
    let argv0 = argv0.filter(|a| a.starts_with('/'));
    let version = [exe, argv0]
        .into_iter()
        .flatten()
        .find_map(|p| python_of_name(basename(p)).or_else(|| framework(p).map(|(_, v)| v)));
    for path in [argv0, exe].into_iter().flatten() {
        if let Some((prefix, v)) = framework(path) {
            push(
                format!("{prefix}/lib/python{}.{}/site-packages", v.0, v.1),
                Some(v),
            );
        } else if let (Some(prefix), Some(v)) = (bin_prefix(path), version) {
            push(
                format!("{prefix}/lib/python{}.{}/site-packages", v.0, v.1),
                Some(v),
            );
        }
    }
    out
}

/// The version of `…/lib/python3.11/site-packages`; `None` for a directory
/// whose parent names no minor version (`/usr/lib/python3/dist-packages`).
pub fn python_of_dir(dir: &str) -> Option<(u64, u64)> {
    let mut parts = dir.rsplit('/').filter(|p| !p.is_empty());
    let last = parts.next()?;
    if last != "site-packages" && last != "dist-packages" {
        return None;
    }
    python_of_name(parts.next()?)
}

/// The version in an interpreter's or directory's name: `python3.11`,
/// `python3.13t` → 3.11, 3.13; `python3`, `python` → `None`.
pub fn python_of_name(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix("python")?;
    let rest = rest.trim_end_matches(['d', 'm', 't']);
    let (major, minor) = rest.split_once('.')?;
    let ok = |s: &str| !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit());
    if !ok(major) || !ok(minor) {
        return None;
    }
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// A macOS framework build's prefix and version, from any path inside
/// `…/Python.framework/Versions/X.Y/`.
fn framework(path: &str) -> Option<(&str, (u64, u64))> {
    const MARK: &str = "/Python.framework/Versions/";
    let at = path.find(MARK)?;
    let after = &path[at + MARK.len()..];
    let version = after.split('/').next()?;
    let v = python_of_name(&format!("python{version}"))?;
    Some((&path[..at + MARK.len() + version.len()], v))
}

/// `<prefix>` of `<prefix>/bin/<name>`.
fn bin_prefix(path: &str) -> Option<&str> {
    let dir = path.rsplit_once('/')?.0;
    let (prefix, bin) = dir.rsplit_once('/')?;
    (bin == "bin").then_some(prefix)
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(c: &[Candidate]) -> Vec<&str> {
        c.iter().map(|c| c.dir.as_str()).collect()
    }

    #[test]
    fn a_mapped_directory_comes_first_with_its_version() {
        // A pip-installed PyTorch in a virtual environment: the library path
        // `/proc/[pid]/maps` shows, cut at site-packages by the sampler.
        let c = candidates(
            Some("/usr/bin/python3.11"),
            Some("/home/ada/venv/bin/python"),
            &["/home/ada/venv/lib/python3.11/site-packages"],
        );
        assert_eq!(
            dirs(&c),
            [
                "/home/ada/venv/lib/python3.11/site-packages",
                "/usr/lib/python3.11/site-packages"
            ]
        );
        assert_eq!(c[0].python, Some((3, 11)));
    }

    #[test]
    fn a_virtual_environment_is_found_from_argv0_and_the_resolved_executable() {
        // Linux resolves `venv/bin/python` to the interpreter it links to;
        // argv[0] keeps the environment (a Jupyter kernelspec's argv[0] is
        // the environment's `sys.executable`).
        let c = candidates(
            Some("/usr/bin/python3.12"),
            Some("/home/ada/venv/bin/python"),
            &[],
        );
        assert_eq!(
            dirs(&c),
            [
                "/home/ada/venv/lib/python3.12/site-packages",
                "/usr/lib/python3.12/site-packages"
            ]
        );
        // A Miniforge environment on a Mac: the executable is the
        // environment's own `python3.9`.
        let c = candidates(
            Some("/Users/ada/miniforge3/envs/tf/bin/python3.9"),
            Some("python"),
            &[],
        );
        assert_eq!(
            dirs(&c),
            ["/Users/ada/miniforge3/envs/tf/lib/python3.9/site-packages"]
        );
        assert_eq!(c[0].python, Some((3, 9)));
    }

    #[test]
    fn a_framework_build_is_found_from_its_app_path() {
        // python.org's and Homebrew's framework builds run
        // `Python.app/Contents/MacOS/Python` inside the framework.
        let exe = "/opt/homebrew/Cellar/python@3.11/3.11.6/Frameworks/Python.framework/Versions/3.11/Resources/Python.app/Contents/MacOS/Python";
        let c = candidates(Some(exe), Some("/Users/ada/venv/bin/python3"), &[]);
        assert_eq!(
            dirs(&c),
            [
                "/Users/ada/venv/lib/python3.11/site-packages",
                "/opt/homebrew/Cellar/python@3.11/3.11.6/Frameworks/Python.framework/Versions/3.11/lib/python3.11/site-packages"
            ]
        );
    }

    #[test]
    fn nothing_is_guessed_without_a_version_or_a_bin_directory() {
        assert!(candidates(Some("/usr/bin/python3"), Some("python3"), &[]).is_empty());
        assert!(candidates(Some("/opt/tool/python3.11"), None, &[]).is_empty());
        assert!(candidates(None, Some("relative/bin/python3.11"), &[]).is_empty());
        assert_eq!(python_of_dir("/usr/lib/python3/dist-packages"), None);
        assert_eq!(
            python_of_dir("/usr/local/lib/python3.11/dist-packages"),
            Some((3, 11))
        );
        assert_eq!(python_of_name("python3.13t"), Some((3, 13)));
        assert_eq!(python_of_name("python3.x"), None);
        assert_eq!(python_of_name("python3.99999"), None);
    }

    #[test]
    fn at_most_max_candidates_and_no_path_too_long() {
        let mapped: Vec<String> = (0..10)
            .map(|i| format!("/e{i}/lib/python3.11/site-packages"))
            .collect();
        let refs: Vec<&str> = mapped.iter().map(String::as_str).collect();
        assert_eq!(candidates(None, None, &refs).len(), MAX_CANDIDATES);
        let long = format!("/{}/lib/python3.11/site-packages", "d".repeat(MAX_PATH));
        assert!(candidates(None, None, &[&long]).is_empty());
    }
}
