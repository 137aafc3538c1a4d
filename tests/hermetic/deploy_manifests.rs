//! The Kubernetes deployment (`deploy/kubernetes/`) agrees with headroom:
//! its ConfigMap is a valid config that serves the port the DaemonSet
//! exposes and reads the kubelet directories the DaemonSet mounts, and the
//! DaemonSet grants the capabilities the systemd unit keeps (less
//! CAP_SYSLOG, which a container cannot use; see the DaemonSet's comments).
//! The schemas of the manifests are checked by `scripts/deploy-check.sh`,
//! which needs tools from PyPI.

use std::path::Path;

use headroom::config::Config;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The block scalar under `key: |` in a YAML text, dedented.
fn block_scalar(text: &str, key: &str) -> String {
    let mut lines = text.lines();
    let header = format!("{key}: |");
    lines
        .by_ref()
        .find(|l| l.trim() == header)
        .unwrap_or_else(|| panic!("no {header}"));
    let body: Vec<&str> = lines
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .collect();
    let indent = body
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap();
    body.iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn config_map() -> Config {
    let text = block_scalar(&read("deploy/kubernetes/configmap.yaml"), "headroom.toml");
    Config::from_toml_str(&text, "configmap.yaml").unwrap_or_else(|e| panic!("{e}"))
}

/// The values of every `key:` line in `text` (a list item's too), unquoted.
fn value_of<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| {
            l.trim()
                .trim_start_matches("- ")
                .strip_prefix(&format!("{key}:"))
        })
        .map(|v| v.trim().trim_matches('"'))
        .collect()
}

#[test]
fn the_config_map_serves_the_port_the_daemonset_exposes() {
    let config = config_map();
    let daemonset = read("deploy/kubernetes/daemonset.yaml");
    assert!(
        config.http.allow_remote,
        "Prometheus scrapes from another address"
    );
    assert_eq!(config.http.listen.ip().to_string(), "0.0.0.0");
    let port = config.http.listen.port().to_string();
    assert!(value_of(&daemonset, "containerPort").contains(&port.as_str()));
    assert!(value_of(&daemonset, "prometheus.io/port").contains(&port.as_str()));
    assert_eq!(
        value_of(&daemonset, "args"),
        [r#"["run", "--config", "/etc/headroom/headroom.toml"]"#]
    );
}

#[test]
fn the_config_map_reads_names_where_the_daemonset_mounts_them() {
    let config = config_map();
    let daemonset = read("deploy/kubernetes/daemonset.yaml");
    let mounts = value_of(&daemonset, "mountPath");
    for dir in [
        &config.labels.pods_log_dir,
        &config.labels.containers_log_dir,
    ] {
        let dir = dir.to_str().unwrap();
        assert!(mounts.contains(&dir), "{dir} is not mounted: {mounts:?}");
    }
    assert!(
        config.labels.docker_containers_dir.as_os_str().is_empty(),
        "Docker's directory is not mounted, so it is not read"
    );
    let journal = config.daemon.journal.expect("the journal on the node");
    assert!(mounts.contains(&journal.parent().unwrap().to_str().unwrap()));
    assert!(mounts.contains(&"/sys/fs/cgroup"));
}

#[test]
fn the_daemonset_adds_the_unit_s_capabilities_but_syslog() {
    let unit = read("systemd/headroom.service");
    let mut bounding: Vec<String> = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .unwrap()
        .split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_string())
        .filter(|c| c != "SYSLOG")
        .collect();
    bounding.sort();
    let daemonset = read("deploy/kubernetes/daemonset.yaml");
    let added = value_of(&daemonset, "add");
    assert_eq!(added.len(), 1, "{added:?}");
    let mut added: Vec<String> = added[0]
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(|c| c.trim().trim_matches('"').to_string())
        .collect();
    added.sort();
    assert_eq!(added, bounding);
    assert!(value_of(&daemonset, "drop").contains(&r#"["ALL"]"#));
    assert!(value_of(&daemonset, "privileged").contains(&"false"));
    assert!(value_of(&daemonset, "allowPrivilegeEscalation").contains(&"false"));
    assert!(value_of(&daemonset, "hostPID").contains(&"true"));
}
