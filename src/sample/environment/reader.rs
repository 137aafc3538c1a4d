//! Reading one `site-packages` directory as the process's owner sees it:
//! which framework packages it holds, at which versions ([`read`]), and a
//! cache that reads a directory again only when it changed ([`Cache`]).
//!
//! **The files are the owner's, and hostile.** A root daemon could read
//! what the process's owner cannot, and show it back to them, so each step
//! is allowed only where the owner's permission bits would allow it: every
//! directory on the way searchable (`x`) and the `site-packages` directory
//! readable (`r`) by the owner, through the owner bits where the owner owns
//! it and through the bits for others otherwise (group grants are not
//! counted: a group-shared environment owned by someone else is read only
//! where everyone may read it). A process of root's is read as root.
//! Files are opened with [`crate::regular_file::read_untrusted_prefix`] (no
//! link followed, no blocking, a regular file only) and their own
//! permissions checked on the open file. A path swapped between the check
//! and the read can show at most the name and version in a package file
//! that everyone may read.
//!
//! **Bounded.** At most [`MAX_ENTRIES`] entries of a directory looked at,
//! [`MAX_DISTS`] packages read, [`METADATA_HEAD`] bytes of a `METADATA` and
//! [`WHEEL_MAX`] of a `WHEEL`. Only the packages [`is_relevant`] names are
//! read.

use std::collections::HashMap;
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use super::compat::{Installed, is_cuda_runtime};
use super::metadata::{dist_info_dir, parse_metadata, parse_wheel_tags};

/// Entries of one `site-packages` looked at, at most: a large environment
/// (PyTorch, TensorFlow, JAX and the Jupyter stack) holds about 1 000.
pub const MAX_ENTRIES: usize = 16 << 10;

/// Packages read of one environment, at most.
pub const MAX_DISTS: usize = 48;

/// Bytes of a `METADATA` read: its headers come first, and even
/// tensorflow's (about 40 `Requires-Dist` lines) take less than 4 KiB.
pub const METADATA_HEAD: u64 = 32 << 10;

/// The largest `WHEEL` read: a few lines.
pub const WHEEL_MAX: u64 = 4 << 10;

/// Most directories the cache keeps.
pub const MAX_CACHED: usize = 256;

/// The framework packages whose versions are read: TensorFlow and its
/// macOS builds and plugin, Keras, PyTorch, JAX, MLX and the CUDA runtime's
/// wheels.
pub fn is_relevant(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "tensorflow",
        "tensorflow-macos",
        "tensorflow-metal",
        "tensorflow-cpu",
        "tensorflow-gpu",
        "tensorflow-intel",
        "tensorflow-estimator",
        "keras",
        "tf-keras",
        "torch",
        "torchvision",
        "torchaudio",
        "jax",
        "jaxlib",
        "jax-cuda11-plugin",
        "jax-cuda12-plugin",
        "jax-cuda12-pjrt",
        "mlx",
        "mlx-metal",
    ];
    NAMES.contains(&name) || is_cuda_runtime(name)
}

/// What one `site-packages` held, or why it was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvRead {
    pub dir: String,
    /// The framework packages found, sorted by name.
    pub packages: Vec<Installed>,
    /// Why the directory, or part of it, was not read; `None` when read
    /// whole.
    pub problem: Option<String>,
    /// No such directory: not an environment of this process after all
    /// (a guessed prefix), and nothing to report.
    pub missing: bool,
}

impl EnvRead {
    fn failed(dir: &str, problem: String) -> Self {
        EnvRead {
            dir: dir.to_owned(),
            packages: Vec::new(),
            problem: Some(problem),
            missing: false,
        }
    }
}

/// Whether the owner `uid` may do what `(user_bits, other_bits)` of
/// `meta`'s mode allow: the owner bits where `uid` owns it, the bits for
/// others otherwise; root may do anything.
fn owner_may(meta: &Metadata, uid: u32, (user_bits, other_bits): (u32, u32)) -> bool {
    if uid == 0 {
        return true;
    }
    let mode = meta.permissions().mode();
    if meta.uid() == uid {
        mode & user_bits == user_bits
    } else {
        mode & other_bits == other_bits
    }
}

const SEARCH: (u32, u32) = (0o100, 0o001);
const LIST: (u32, u32) = (0o500, 0o005);
const READ: (u32, u32) = (0o400, 0o004);

/// Read the framework packages of `dir` as `owner` may (see the module doc).
pub fn read(dir: &str, owner: u32) -> EnvRead {
    let path = Path::new(dir);
    if !path.is_absolute() {
        return EnvRead::failed(dir, "not an absolute path".to_owned());
    }
    if let Err(e) = owner_may_reach(path, owner) {
        return match e {
            Reach::Missing => EnvRead {
                missing: true,
                ..EnvRead::failed(dir, "no such directory".to_owned())
            },
            Reach::Refused(why) => EnvRead::failed(dir, why),
        };
    }
    let entries = match std::fs::read_dir(path) {
        Ok(e) => e,
        Err(e) => return EnvRead::failed(dir, format!("cannot list it: {e}")),
    };
    let mut found: Vec<(String, String)> = Vec::new();
    let mut problem = None;
    for (seen, entry) in entries.enumerate() {
        if seen >= MAX_ENTRIES {
            problem = Some(format!(
                "more than {MAX_ENTRIES} entries: the rest not looked at"
            ));
            break;
        }
        let Ok(entry) = entry else { continue };
        let Some(file_name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Some((name, _)) = dist_info_dir(&file_name) else {
            continue;
        };
        if is_relevant(&name) && !found.iter().any(|(n, _)| *n == name) {
            if found.len() >= MAX_DISTS {
                problem = Some(format!(
                    "more than {MAX_DISTS} framework packages: the rest not read"
                ));
                break;
            }
            found.push((name, file_name));
        }
    }
    found.sort();
    let mut packages = Vec::with_capacity(found.len());
    for (name, dist_dir) in found {
        match read_dist(&path.join(&dist_dir), &dist_dir, owner) {
            Ok(p) => packages.push(p),
            Err(e) => {
                problem.get_or_insert_with(|| format!("{name}: {e}"));
            }
        }
    }
    EnvRead {
        dir: dir.to_owned(),
        packages,
        problem,
        missing: false,
    }
}

/// Why a directory was not reached.
enum Reach {
    Missing,
    Refused(String),
}

/// Every directory from `/` to `dir` searchable by `owner`, and `dir`
/// itself listable; `dir` resolved first (links on the way are the
/// owner's to set, and lead where they lead for the owner too).
fn owner_may_reach(dir: &Path, owner: u32) -> Result<(), Reach> {
    let real = match std::fs::canonicalize(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Reach::Missing),
        Err(e) => return Err(Reach::Refused(format!("cannot resolve it: {e}"))),
    };
    let mut at = PathBuf::new();
    let components: Vec<Component<'_>> = real.components().collect();
    for (i, c) in components.iter().enumerate() {
        at.push(c);
        let meta = std::fs::symlink_metadata(&at)
            .map_err(|e| Reach::Refused(format!("{}: {e}", at.display())))?;
        if !meta.is_dir() {
            return Err(Reach::Refused(format!(
                "{} is not a directory",
                at.display()
            )));
        }
        let last = i + 1 == components.len();
        if !owner_may(&meta, owner, if last { LIST } else { SEARCH }) {
            return Err(Reach::Refused(format!(
                "{} is not {} by the process's owner (uid {owner})",
                at.display(),
                if last { "readable" } else { "searchable" }
            )));
        }
    }
    Ok(())
}

/// One package's `METADATA` head and `WHEEL`.
fn read_dist(dist: &Path, dist_name: &str, owner: u32) -> Result<Installed, String> {
    let meta = std::fs::symlink_metadata(dist).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err(format!("{dist_name} is not a directory"));
    }
    if !owner_may(&meta, owner, SEARCH) {
        return Err(format!(
            "{dist_name} is not searchable by the process's owner"
        ));
    }
    let (head, complete) = read_owned(&dist.join("METADATA"), METADATA_HEAD, owner)
        .map_err(|e| format!("{dist_name}/METADATA: {e}"))?;
    let m = parse_metadata(&String::from_utf8_lossy(&head), complete);
    let (dir_name, dir_version) = dist_info_dir(dist_name).unwrap_or_default();
    let name = m
        .name
        .as_deref()
        .map(super::metadata::normalize)
        .unwrap_or(dir_name);
    let version = m.version.unwrap_or_else(|| dir_version.to_owned());
    let tags = read_owned(&dist.join("WHEEL"), WHEEL_MAX, owner)
        .map(|(bytes, _)| parse_wheel_tags(&String::from_utf8_lossy(&bytes)))
        .unwrap_or_default();
    Ok(Installed {
        name,
        version: version.chars().take(64).collect(),
        requires_python: m.requires_python,
        requires_dist: m.requires_dist,
        tags,
    })
}

/// At most `max` bytes of a file the owner may read, and whether that was
/// all of it.
fn read_owned(path: &Path, max: u64, owner: u32) -> io::Result<(Vec<u8>, bool)> {
    let (bytes, meta, cut) = crate::regular_file::read_untrusted_prefix(path, max)?;
    if !owner_may(&meta, owner, READ) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not readable by the process's owner",
        ));
    }
    Ok((bytes, !cut))
}

/// Reads kept per directory and owner, read again when the directory's
/// modification time changes (installing or removing a package adds or
/// removes a `.dist-info` directory in it, which changes it).
#[derive(Debug, Default)]
pub struct Cache {
    entries: HashMap<(String, u32), (Option<SystemTime>, Arc<EnvRead>)>,
}

impl Cache {
    /// `dir` as `owner` sees it, from the cache where the directory has
    /// not changed. The second value: whether it was read now.
    pub fn get(&mut self, dir: &str, owner: u32) -> (Arc<EnvRead>, bool) {
        let mtime = std::fs::metadata(dir).and_then(|m| m.modified()).ok();
        let key = (dir.to_owned(), owner);
        if let Some((seen, read)) = self.entries.get(&key)
            && *seen == mtime
            && mtime.is_some()
        {
            return (Arc::clone(read), false);
        }
        let read = Arc::new(read(dir, owner));
        if self.entries.len() >= MAX_CACHED {
            self.entries.clear();
        }
        self.entries.insert(key, (mtime, Arc::clone(&read)));
        (read, true)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sample::environment::metadata::tests::{
        TF_MACOS_292_METADATA, TF_MACOS_292_WHEEL, TF_METAL_050_METADATA,
    };

    /// A `site-packages` made as pip makes it (the "Recording installed
    /// projects" spec: one `<name>-<version>.dist-info` directory per
    /// package holding `METADATA` and `WHEEL`), with the real heads of
    /// tensorflow-macos 2.9.2 and, at `metal`'s version, tensorflow-metal
    /// 0.5.0's (its version line changed for other versions), a package
    /// that is no framework, and a framework's package directory.
    pub(crate) fn site_packages(root: &Path, metal: &str) -> PathBuf {
        let sp = root.join("lib/python3.9/site-packages");
        let dist = |dir: &str, metadata: &str, wheel: &str| {
            let d = sp.join(dir);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("METADATA"), metadata).unwrap();
            std::fs::write(d.join("WHEEL"), wheel).unwrap();
        };
        dist(
            "tensorflow_macos-2.9.2.dist-info",
            TF_MACOS_292_METADATA,
            TF_MACOS_292_WHEEL,
        );
        dist(
            &format!("tensorflow_metal-{metal}.dist-info"),
            &TF_METAL_050_METADATA.replace("Version: 0.5.0", &format!("Version: {metal}")),
            "Wheel-Version: 1.0\nTag: cp39-cp39-macosx_12_0_arm64\n",
        );
        dist(
            "six-1.16.0.dist-info",
            "Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n",
            "Tag: py2-none-any\nTag: py3-none-any\n",
        );
        std::fs::create_dir_all(sp.join("tensorflow")).unwrap();
        sp
    }

    fn uid() -> u32 {
        crate::os::this_process::effective_uid()
    }

    #[test]
    fn a_site_packages_gives_its_framework_packages() {
        let root = tempfile::tempdir().unwrap();
        let sp = site_packages(root.path(), "0.6.0");
        let r = read(sp.to_str().unwrap(), uid());
        assert_eq!(r.problem, None);
        let names: Vec<(&str, &str)> = r
            .packages
            .iter()
            .map(|p| (p.name.as_str(), p.version.as_str()))
            .collect();
        assert_eq!(
            names,
            [("tensorflow-macos", "2.9.2"), ("tensorflow-metal", "0.6.0")]
        );
        assert_eq!(r.packages[0].tags, ["cp39-cp39-macosx_11_0_arm64"]);
        assert_eq!(r.packages[0].requires_python.as_deref(), Some(">=3.7"));
    }

    #[test]
    fn a_missing_directory_is_missing_and_a_relative_one_refused() {
        let r = read("/nonexistent/lib/python3.11/site-packages", 1000);
        assert!(r.missing);
        assert!(!read("lib/python3.11/site-packages", 1000).missing);
    }

    #[test]
    fn links_are_not_followed_to_metadata() {
        let root = tempfile::tempdir().unwrap();
        let sp = site_packages(root.path(), "0.5.0");
        let meta = sp.join("tensorflow_metal-0.5.0.dist-info/METADATA");
        std::fs::remove_file(&meta).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &meta).unwrap();
        let r = read(sp.to_str().unwrap(), uid());
        assert_eq!(r.packages.len(), 1, "{r:?}");
        assert!(r.problem.unwrap().contains("symbolic link"));
    }

    #[test]
    fn what_the_owner_may_not_read_is_not_read() {
        // Permission bits are judged for the owner named, whoever runs
        // the test: a directory of this user's that is 0700 is not
        // searchable by another uid, a file of this user's that is 0600
        // not readable by another uid.
        let root = tempfile::tempdir().unwrap();
        let sp = site_packages(root.path(), "0.5.0");
        let other = uid().wrapping_add(4242).max(1);
        for d in [
            root.path().to_path_buf(),
            root.path().join("lib"),
            root.path().join("lib/python3.9"),
            sp.clone(),
        ] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let all = |p: &Path| {
            for e in std::fs::read_dir(p).unwrap() {
                let e = e.unwrap().path();
                let mode = if e.is_dir() { 0o755 } else { 0o644 };
                std::fs::set_permissions(&e, std::fs::Permissions::from_mode(mode)).unwrap();
            }
        };
        for d in std::fs::read_dir(&sp).unwrap() {
            all(&d.unwrap().path());
        }
        let ancestors_open = Path::new(sp.to_str().unwrap())
            .ancestors()
            .skip(1)
            .all(|a| std::fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
        if ancestors_open {
            assert_eq!(read(sp.to_str().unwrap(), other).packages.len(), 2);
        }
        let meta = sp.join("tensorflow_metal-0.5.0.dist-info/METADATA");
        std::fs::set_permissions(&meta, std::fs::Permissions::from_mode(0o600)).unwrap();
        let r = read(sp.to_str().unwrap(), other);
        assert!(
            r.packages.iter().all(|p| p.name != "tensorflow-metal"),
            "{r:?}"
        );
        std::fs::set_permissions(
            root.path().join("lib"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        let r = read(sp.to_str().unwrap(), other);
        assert!(r.packages.is_empty());
        assert!(
            r.problem
                .unwrap()
                .contains("is not searchable by the process's owner")
        );
        // The owner itself still reads it.
        assert_eq!(read(sp.to_str().unwrap(), uid()).packages.len(), 2);
    }

    #[test]
    fn the_cache_reads_again_only_when_the_directory_changes() {
        let root = tempfile::tempdir().unwrap();
        let sp = site_packages(root.path(), "0.5.0");
        let dir = sp.to_str().unwrap();
        let mut cache = Cache::default();
        assert!(cache.get(dir, uid()).1, "first read");
        assert!(!cache.get(dir, uid()).1, "unchanged: from the cache");
        // pip uninstall removes the dist-info directory; set the time
        // explicitly so that a coarse clock cannot hide the change.
        std::fs::remove_dir_all(sp.join("tensorflow_metal-0.5.0.dist-info")).unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::open(&sp)
            .unwrap()
            .set_modified(later)
            .unwrap();
        let (r, fresh) = cache.get(dir, uid());
        assert!(fresh);
        assert_eq!(r.packages.len(), 1);
    }

    #[test]
    fn only_framework_packages_are_relevant() {
        for n in [
            "tensorflow-metal",
            "keras",
            "jaxlib",
            "nvidia-cuda-runtime-cu12",
            "mlx",
        ] {
            assert!(is_relevant(n), "{n}");
        }
        for n in ["six", "numpy", "nvidia-cudnn-cu12", "tensorflow-io"] {
            assert!(!is_relevant(n), "{n}");
        }
    }
}
