//! Whether the pids a GPU driver reports name this pid namespace's processes.
//!
//! NVML reports pids of the host's (the initial) pid namespace. Where headroom
//! runs in another pid namespace (a container without `--pid=host`), those
//! pids name other processes or none, so joining by pid would pin GPU memory
//! on the wrong process.
//!
//! The test: the link `/proc/self/ns/pid` reads `pid:[4026531836]` in the
//! initial pid namespace, whose inode number the kernel fixes
//! (`PROC_PID_INIT_INO = 0xEFFFFFFC` in `include/linux/proc_ns.h`, since
//! Linux 3.8). Comparing it with `/proc/1/ns/pid` would not do: inside a
//! container both are the container's. Marker files (`/.dockerenv`,
//! `/run/.containerenv`) are only a fallback for when the link cannot be
//! read, because they also exist where the pid namespace is shared (this
//! project's own build machines are VMs with a `/.dockerenv` and the host's
//! pid namespace).

use std::path::Path;

/// The link text of the initial pid namespace.
pub const INITIAL_PID_NAMESPACE: &str = "pid:[4026531836]";

/// Files that container runtimes leave in a container's root: Docker's and
/// Podman's.
pub const CONTAINER_MARKERS: [&str; 2] = [".dockerenv", "run/.containerenv"];

/// How a GPU driver's pids relate to the processes headroom can see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PidView {
    /// headroom sees the host's pids: join by pid.
    Host,
    /// headroom runs in another pid namespace: do not join; `why` says how
    /// that was found out, for the note in the snapshot.
    Container { why: String },
}

/// Looks at `proc_root` (`/proc`) and `fs_root` (`/`); roots are
/// injectable for tests.
pub fn detect(proc_root: &Path, fs_root: &Path) -> PidView {
    let link = std::fs::read_link(proc_root.join("self/ns/pid"))
        .ok()
        .map(|target| target.to_string_lossy().into_owned());
    let marker = CONTAINER_MARKERS
        .iter()
        .find(|m| fs_root.join(m).exists())
        .copied();
    classify(link.as_deref(), marker)
}

/// The decision, from the text of `/proc/self/ns/pid` (if it could be read)
/// and the container marker file found (if any).
pub fn classify(ns_link: Option<&str>, marker: Option<&str>) -> PidView {
    match (ns_link, marker) {
        (Some(INITIAL_PID_NAMESPACE), _) => PidView::Host,
        (Some(other), _) => PidView::Container {
            why: format!("/proc/self/ns/pid is {other}, not the host's {INITIAL_PID_NAMESPACE}"),
        },
        (None, Some(marker)) => PidView::Container {
            why: format!("/proc/self/ns/pid is unreadable and /{marker} exists"),
        },
        (None, None) => PidView::Host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_namespace_is_the_host_even_with_a_marker() {
        assert_eq!(classify(Some("pid:[4026531836]"), None), PidView::Host);
        assert_eq!(
            classify(Some("pid:[4026531836]"), Some(".dockerenv")),
            PidView::Host
        );
    }

    #[test]
    fn another_namespace_is_a_container() {
        let PidView::Container { why } = classify(Some("pid:[4026532614]"), None) else {
            panic!("taken for the host");
        };
        assert!(why.contains("pid:[4026532614]"), "{why}");
    }

    #[test]
    fn an_unreadable_link_falls_back_to_the_markers() {
        assert_eq!(classify(None, None), PidView::Host);
        assert!(matches!(
            classify(None, Some("run/.containerenv")),
            PidView::Container { .. }
        ));
    }

    #[test]
    fn detect_reads_the_link_under_the_given_root() {
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path().join("proc");
        std::fs::create_dir_all(proc_root.join("self/ns")).unwrap();
        std::os::unix::fs::symlink("pid:[4026532999]", proc_root.join("self/ns/pid")).unwrap();
        let fs_root = dir.path().join("root");
        std::fs::create_dir_all(&fs_root).unwrap();
        assert!(matches!(
            detect(&proc_root, &fs_root),
            PidView::Container { why } if why.contains("4026532999")
        ));

        std::fs::remove_file(proc_root.join("self/ns/pid")).unwrap();
        std::os::unix::fs::symlink(INITIAL_PID_NAMESPACE, proc_root.join("self/ns/pid")).unwrap();
        std::fs::write(fs_root.join(".dockerenv"), "").unwrap();
        assert_eq!(detect(&proc_root, &fs_root), PidView::Host);
    }

    #[test]
    fn detect_without_a_link_uses_the_marker() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("run")).unwrap();
        std::fs::write(dir.path().join("run/.containerenv"), "").unwrap();
        assert!(matches!(
            detect(&dir.path().join("no-proc"), dir.path()),
            PidView::Container { why } if why.contains("/run/.containerenv")
        ));
        assert_eq!(
            detect(&dir.path().join("no-proc"), &dir.path().join("empty")),
            PidView::Host
        );
    }
}
