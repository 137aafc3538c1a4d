//! Pod and container names from the kubelet's log directories, which name
//! them on every node without any API:
//!
//! - `/var/log/pods/NAMESPACE_NAME_UID/` holds one directory per pod (the
//!   kubelet's `podLogsDir`; kubelets before 1.14 named it by the UID
//!   alone, which names nothing);
//! - `/var/log/containers/POD_NAMESPACE_CONTAINER-ID.log` is a link per
//!   container, named after its pod, namespace, name and id (the kubelet
//!   cuts the name to 255 bytes, which can cut the id off: that container
//!   stays unnamed).
//!
//! Namespaces, pod names and container names are DNS labels or subdomains,
//! so `_` cannot occur in them and splits these names unambiguously. Only
//! names of exactly that form are taken: the directories are root's, but
//! the names in them are what users called their pods.
//!
//! A root daemon reads a directory only if only root can change it and the
//! directories above it ([`crate::os::trusted_path`]): anyone else could
//! otherwise name any pod anything. Each listing is kept while its
//! directory is unchanged (its modification time and inode), so a process
//! in a new cgroup costs one `stat` per directory, and a listing is read
//! again only after the kubelet has added or removed something. A listing
//! holds at most [`MAX_ENTRIES`] names.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use super::cgroup_path::{is_container_id, pod_uid};

/// The most entries kept from one directory: a node runs a few hundred
/// pods at most (110 by default), with a few links per container kept
/// after restarts; past this, names are not read (and the status says so).
pub const MAX_ENTRIES: usize = 16_384;

/// A pod as `/var/log/pods` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDir {
    pub namespace: String,
    pub name: String,
    /// Dashed, as Kubernetes writes it.
    pub uid: String,
}

/// A container as its `/var/log/containers` link names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLink {
    pub pod: String,
    pub namespace: String,
    pub container: String,
    pub id: String,
}

/// `NAMESPACE_NAME_UID`, an entry of `/var/log/pods`.
pub fn parse_pod_dir(entry: &str) -> Option<PodDir> {
    let mut parts = entry.split('_');
    let (namespace, name, uid) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !is_dns_label(namespace) || !is_dns_subdomain(name) {
        return None;
    }
    Some(PodDir {
        namespace: namespace.to_string(),
        name: name.to_string(),
        uid: pod_uid(uid, '-')?,
    })
}

/// `POD_NAMESPACE_CONTAINER-ID.log`, an entry of `/var/log/containers`.
pub fn parse_container_link(entry: &str) -> Option<ContainerLink> {
    let stem = entry.strip_suffix(".log")?;
    let mut parts = stem.split('_');
    let (pod, namespace, rest) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (container, id) = rest.rsplit_once('-')?;
    let valid = is_dns_subdomain(pod)
        && is_dns_label(namespace)
        && is_dns_label(container)
        && is_container_id(id);
    valid.then(|| ContainerLink {
        pod: pod.to_string(),
        namespace: namespace.to_string(),
        container: container.to_string(),
        id: id.to_string(),
    })
}

/// An RFC 1123 label (namespaces, container names): at most 63 lowercase
/// letters, digits and `-`, starting and ending alphanumeric.
pub fn is_dns_label(text: &str) -> bool {
    text.len() <= 63 && is_dns_part(text)
}

/// An RFC 1123 subdomain (pod names): labels joined by `.`, at most 253.
pub fn is_dns_subdomain(text: &str) -> bool {
    !text.is_empty() && text.len() <= 253 && text.split('.').all(is_dns_part)
}

fn is_dns_part(text: &str) -> bool {
    let bytes = text.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Names the kubelet's directories give one pod container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodNames {
    pub namespace: Option<String>,
    pub pod: Option<String>,
    pub container: Option<String>,
    /// Some name came from a directory others may not list.
    pub private: bool,
}

/// The kubelet's two directories, listed when they change.
#[derive(Debug)]
pub struct KubeletNames {
    pods: Listing<(String, String)>,
    containers: Listing<ContainerLink>,
}

impl KubeletNames {
    /// `None` for a directory not to read. Directories that other users
    /// could change are refused unless owned by root or `trusted_uid`.
    pub fn new(
        pods_dir: Option<PathBuf>,
        containers_dir: Option<PathBuf>,
        trusted_uid: u32,
    ) -> Self {
        Self {
            pods: Listing::new(pods_dir, trusted_uid, |name| {
                parse_pod_dir(name).map(|p| (p.uid, (p.namespace, p.name)))
            }),
            containers: Listing::new(containers_dir, trusted_uid, |name| {
                parse_container_link(name).map(|c| (c.id.clone(), c))
            }),
        }
    }

    /// The names of the pod with `uid` and of its container `container_id`,
    /// as far as the directories say.
    pub fn lookup(&mut self, uid: &str, container_id: Option<&str>) -> PodNames {
        let mut names = PodNames::default();
        if let Some((namespace, pod)) = self.pods.get(uid) {
            names.namespace = Some(namespace.clone());
            names.pod = Some(pod.clone());
            names.private |= !self.pods.public;
        }
        if let Some(link) = container_id.and_then(|id| self.containers.get(id)) {
            // The pod's directory is the better witness; the link names the
            // pod too, and does when that directory is gone or unread.
            let agrees = names.pod.as_ref().is_none_or(|pod| {
                *pod == link.pod && names.namespace.as_deref() == Some(&link.namespace)
            });
            if agrees {
                names.namespace = Some(link.namespace.clone());
                names.pod = Some(link.pod.clone());
                names.container = Some(link.container.clone());
                names.private |= !self.containers.public;
            }
        }
        names
    }

    /// Each directory in words, for the collector's status:
    /// `/var/log/pods: 12 pods`, `/var/log/containers: not found`.
    pub fn describe(&self) -> Vec<String> {
        vec![
            self.pods.describe("pods"),
            self.containers.describe("containers"),
        ]
    }

    /// A directory exists that could be read.
    pub fn present(&self) -> bool {
        self.pods.present() || self.containers.present()
    }

    /// Why a directory that exists could not be used, if one could not.
    pub fn problems(&self) -> Vec<String> {
        [self.pods.problem(), self.containers.problem()]
            .into_iter()
            .flatten()
            .collect()
    }
}

/// One directory's parsed entries, read again when it changes.
#[derive(Debug)]
struct Listing<T> {
    dir: Option<PathBuf>,
    trusted_uid: u32,
    parse: fn(&str) -> Option<(String, T)>,
    /// (device, inode, mtime seconds, mtime nanoseconds) when last read.
    stamp: Option<(u64, u64, i64, i64)>,
    entries: HashMap<String, T>,
    /// How the last read went.
    state: State,
    /// Others may list the directory (and reach it).
    public: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Not configured, or not looked at yet.
    Unread,
    /// Not there (no kubelet on this machine).
    Missing,
    /// Read: entries taken, entries skipped (not of the kubelet's form),
    /// and whether it held more than [`MAX_ENTRIES`].
    Read { skipped: usize, truncated: bool },
    /// Refused or unreadable, and why.
    Failed(String),
}

impl<T> Listing<T> {
    fn new(dir: Option<PathBuf>, trusted_uid: u32, parse: fn(&str) -> Option<(String, T)>) -> Self {
        Self {
            dir,
            trusted_uid,
            parse,
            stamp: None,
            entries: HashMap::new(),
            state: State::Unread,
            public: false,
        }
    }

    fn get(&mut self, key: &str) -> Option<&T> {
        self.refresh();
        self.entries.get(key)
    }

    /// Read the directory again if it changed since it was last read.
    fn refresh(&mut self) {
        let Some(dir) = self.dir.clone() else {
            return;
        };
        let meta = match std::fs::metadata(&dir) {
            Ok(meta) => meta,
            Err(e) => {
                self.stamp = None;
                self.entries.clear();
                self.state = if e.kind() == std::io::ErrorKind::NotFound {
                    State::Missing
                } else {
                    State::Failed(format!("{}: {e}", dir.display()))
                };
                return;
            }
        };
        let stamp = (meta.dev(), meta.ino(), meta.mtime(), meta.mtime_nsec());
        if self.stamp == Some(stamp) {
            return;
        }
        self.stamp = Some(stamp);
        self.entries.clear();
        if let Err(untrusted) = crate::os::trusted_path::check_path(&dir, self.trusted_uid) {
            self.state = State::Failed(format!(
                "{} not read: {untrusted}; names there could be anyone's",
                dir.display()
            ));
            return;
        }
        self.public = listable_by_anyone(&dir);
        self.state = match self.read(&dir) {
            Ok((skipped, truncated)) => State::Read { skipped, truncated },
            Err(e) => State::Failed(format!("{}: {e}", dir.display())),
        };
    }

    fn read(&mut self, dir: &Path) -> std::io::Result<(usize, bool)> {
        let mut skipped = 0;
        for entry in std::fs::read_dir(dir)? {
            if self.entries.len() >= MAX_ENTRIES {
                return Ok((skipped, true));
            }
            let entry = entry?;
            let parsed = entry.file_name().to_str().and_then(self.parse);
            match parsed {
                Some((key, value)) => {
                    self.entries.insert(key, value);
                }
                None => skipped += 1,
            }
        }
        Ok((skipped, false))
    }

    fn present(&self) -> bool {
        matches!(self.state, State::Read { .. } | State::Failed(_))
    }

    fn problem(&self) -> Option<String> {
        match &self.state {
            State::Failed(why) => Some(why.clone()),
            _ => None,
        }
    }

    fn describe(&self, what: &str) -> String {
        let Some(dir) = &self.dir else {
            return format!("{what}: not read (turned off)");
        };
        let dir = dir.display();
        match &self.state {
            State::Unread => format!("{dir}: not read yet"),
            State::Missing => format!("{dir}: not found"),
            State::Read { skipped, truncated } => {
                let mut text = format!("{dir}: {} {what}", self.entries.len());
                if *skipped > 0 {
                    text.push_str(&format!(", {skipped} entries of another form skipped"));
                }
                if *truncated {
                    text.push_str(&format!(", more than {MAX_ENTRIES}: the rest not read"));
                }
                text
            }
            State::Failed(why) => why.clone(),
        }
    }
}

/// Whether every user may list `dir`: it is readable and searchable by
/// others, and every directory above it searchable. Names read from a
/// directory that is not are shown only to whoever may see the process's
/// command line.
pub fn listable_by_anyone(dir: &Path) -> bool {
    let readable = std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o005 == 0o005);
    readable
        && dir
            .ancestors()
            .skip(1)
            .all(|a| std::fs::metadata(a).is_ok_and(|m| m.mode() & 0o001 != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_directory_names_namespace_pod_and_uid() {
        // https://github.com/fluent/fluent-operator/issues/855 (a static
        // pod: its UID is a 32-digit hash).
        let p = parse_pod_dir(
            "kube-system_kube-apiserver-pa-drs-cluster_8b1e9057c80f383869339e73f7286d7b",
        )
        .unwrap();
        assert_eq!(p.namespace, "kube-system");
        assert_eq!(p.name, "kube-apiserver-pa-drs-cluster");
        assert_eq!(p.uid, "8b1e9057c80f383869339e73f7286d7b");
        let dashed = parse_pod_dir("ml_train-0_18d34ce4-50c7-452c-9df8-53c4a3fdf363").unwrap();
        assert_eq!(dashed.uid, "18d34ce4-50c7-452c-9df8-53c4a3fdf363");
    }

    #[test]
    fn an_old_kubelet_s_uid_only_directory_names_nothing() {
        // https://github.com/rancher/rancher/issues/7688 (Kubernetes 1.7).
        assert_eq!(parse_pod_dir("9bc2402d-6ed7-11e7-8f37-02b893ed240a"), None);
    }

    #[test]
    fn a_container_link_names_pod_namespace_container_and_id() {
        // https://github.com/fluent/fluent-operator/issues/855
        let c = parse_container_link(
            "kube-apiserver-pa-drs-cluster_kube-system_kube-apiserver-1ba81788e9d8a48998fea25d5fe511c774f9de76eaaca81c50ff44b5960223b2.log",
        )
        .unwrap();
        assert_eq!(c.pod, "kube-apiserver-pa-drs-cluster");
        assert_eq!(c.namespace, "kube-system");
        assert_eq!(c.container, "kube-apiserver");
        assert_eq!(
            c.id,
            "1ba81788e9d8a48998fea25d5fe511c774f9de76eaaca81c50ff44b5960223b2"
        );
        // https://github.com/rancher/rancher/issues/7688: a pod name with
        // dashes and a generated suffix.
        let dns = parse_container_link(
            "kube-dns-2981845537-flr73_kube-system_dnsmasq-0e606b95031fe96602cc405db9708a7032226782831a7908cdeba8b2735e6960.log",
        )
        .unwrap();
        assert_eq!(
            (dns.pod.as_str(), dns.container.as_str()),
            ("kube-dns-2981845537-flr73", "dnsmasq")
        );
    }

    #[test]
    fn names_outside_the_kubelet_s_form_are_not_taken() {
        for entry in [
            "a_b_c_d-0e606b95031fe96602cc405db9708a7032226782831a7908cdeba8b2735e6960.log",
            "Pod_ns_c-0e606b95031fe96602cc405db9708a7032226782831a7908cdeba8b2735e6960.log",
            "pod_ns_c\u{1b}[31m-0e606b95031fe96602cc405db9708a7032226782831a7908cdeba8b2735e6960.log",
            "pod_ns_c-0e606b95031f.log",
            "pod_ns_c-0e606b95031fe96602cc405db9708a7032226782831a7908cdeba8b2735e6960",
            "pod_ns_-0e606b95031fe96602cc405db9708a7032226782831a7908cdeba8b2735e6960.log",
        ] {
            assert_eq!(parse_container_link(entry), None, "{entry}");
        }
        let long = format!("{}_ml_18d34ce4-50c7-452c-9df8-53c4a3fdf363", "a".repeat(64));
        assert!(parse_pod_dir(&long).is_none(), "a namespace is one label");
        assert!(parse_pod_dir("ml_-bad_18d34ce4-50c7-452c-9df8-53c4a3fdf363").is_none());
    }

    #[test]
    fn dns_names() {
        assert!(is_dns_label("kube-system"));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label("a-"));
        assert!(!is_dns_label(""));
        assert!(is_dns_subdomain("web-0.example"));
        assert!(!is_dns_subdomain("web..0"));
    }
}
