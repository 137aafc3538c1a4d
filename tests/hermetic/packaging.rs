//! The packages agree with headroom: the Debian package's unit is the one
//! `headroom service install --system` writes for the packaged binary, the
//! package ships that binary (and not the test program) where the unit and
//! the installer expect a root-only binary, the config where the unit reads
//! it, and files that exist; the container image runs the same binary on the
//! same config path; `cargo install` installs the daemon alone (the test
//! program is an example). Building and installing the package is the environment
//! tier's (`tests/environment/package.rs`).

use std::path::{Path, PathBuf};

use headroom::service::{self, BinarySource, Manager, Params, Scope};

const PACKAGED_BINARY: &str = "/usr/bin/headroom";
const PACKAGED_CONFIG: &str = "/etc/headroom/headroom.toml";

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The unit from its `[Unit]` section on: what systemd reads, without the
/// comment at the top that says who wrote the file.
fn sections(unit: &str) -> &str {
    let at = unit.find("\n[Unit]\n").expect("a [Unit] section");
    &unit[at..]
}

fn deb_metadata() -> toml::Table {
    let manifest: toml::Table = toml::from_str(&read("Cargo.toml")).unwrap();
    manifest["package"]["metadata"]["deb"]
        .as_table()
        .expect("[package.metadata.deb]")
        .clone()
}

/// The package's assets as (source, destination, mode).
fn assets() -> Vec<(String, String, String)> {
    deb_metadata()["assets"]
        .as_array()
        .expect("assets")
        .iter()
        .map(|a| {
            let a = a.as_array().expect("[source, dest, mode]");
            let s = |i: usize| a[i].as_str().unwrap().to_owned();
            (s(0), s(1), s(2))
        })
        .collect()
}

#[test]
fn the_packaged_unit_is_the_installers_for_the_packaged_binary() {
    // The installer runs a root-owned /usr/bin/headroom where it is.
    let (binary, source) = service::choose(
        Manager::Systemd,
        Scope::System,
        Path::new(PACKAGED_BINARY),
        Ok(()),
    );
    assert_eq!(source, BinarySource::InPlace);
    let installer = service::systemd_unit(&Params {
        manager: Manager::Systemd,
        scope: Scope::System,
        binary,
        source,
        config: None,
        home: None,
        uid: 0,
    })
    .unwrap();
    let packaged = read("packaging/debian/headroom.service");
    assert_eq!(
        sections(&packaged),
        sections(&installer),
        "packaging/debian/headroom.service has drifted from the unit `headroom service install \
         --system` writes for {PACKAGED_BINARY}; below its header comment it must read:\n{}",
        sections(&installer)
    );
    assert!(
        packaged.contains("Installed by the headroom Debian package"),
        "the header says where the file comes from"
    );
    assert!(packaged.contains(&format!(
        "\nExecStart={PACKAGED_BINARY} run --config {PACKAGED_CONFIG}\n"
    )));
}

#[test]
fn the_package_ships_the_daemon_where_the_unit_runs_it_and_not_the_test_program() {
    let assets = assets();
    let binaries: Vec<_> = assets
        .iter()
        .filter(|(src, _, _)| src.starts_with("target/release/"))
        .collect();
    assert_eq!(
        binaries,
        [&(
            "target/release/headroom".to_owned(),
            "usr/bin/".to_owned(),
            "755".to_owned()
        )],
        "only the daemon, at /usr/bin/headroom, mode 0755"
    );
    assert!(
        !assets.iter().any(|(src, _, _)| src.contains("hog")),
        "the headroom-hog test program is not packaged: {assets:?}"
    );
    let config = assets
        .iter()
        .find(|(_, dest, _)| format!("/{dest}") == PACKAGED_CONFIG)
        .expect("the config the unit reads is packaged");
    assert_eq!(config.2, "644");
    // Written by scripts/package-deb.sh from `headroom print-config`.
    assert_eq!(config.0, "target/package/headroom.toml");
    assert!(read("scripts/package-deb.sh").contains("print-config >target/package/headroom.toml"));
}

/// The package's targets as cargo sees them: (name, kinds).
fn cargo_targets() -> Vec<(String, Vec<String>)> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    assert_eq!(packages.len(), 1, "one package in the manifest");
    packages[0]["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|target| {
            let kinds = target["kind"].as_array().expect("a target's kinds");
            (
                target["name"].as_str().expect("a target's name").to_owned(),
                kinds
                    .iter()
                    .map(|k| k.as_str().unwrap_or_default().to_owned())
                    .collect(),
            )
        })
        .collect()
}

/// `cargo install`, the Homebrew formula (`cargo install` through
/// `std_cargo_args`) and any build of the package's binaries produce the
/// daemon alone: the test program that grows memory on purpose is an
/// example, which cargo never installs, so it neither lands on a user's
/// PATH nor adds what only it needs to the daemon's dependencies.
#[test]
fn cargo_installs_the_daemon_alone_and_the_test_program_is_an_example() {
    let targets = cargo_targets();
    let binaries: Vec<&str> = targets
        .iter()
        .filter(|(_, kinds)| kinds.iter().any(|k| k == "bin"))
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        binaries,
        ["headroom"],
        "the installable binaries: {targets:?}"
    );
    let hog = targets
        .iter()
        .find(|(name, _)| name == "headroom-hog")
        .unwrap_or_else(|| panic!("a headroom-hog target: {targets:?}"));
    assert_eq!(hog.1, ["example"], "headroom-hog is an example");
}

#[test]
fn every_other_packaged_file_exists_and_none_is_writable_by_others() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dests = Vec::new();
    for (src, dest, mode) in assets() {
        let mode = u32::from_str_radix(&mode, 8).unwrap();
        assert_eq!(mode & 0o022, 0, "{dest} would be writable by others");
        if !src.starts_with("target/") {
            assert!(root.join(&src).is_file(), "{src} is packaged but missing");
        }
        dests.push(PathBuf::from(dest).join(Path::new(&src).file_name().unwrap()));
    }
    for want in [
        "usr/share/headroom/grafana/headroom.json",
        "usr/share/headroom/prometheus/alerts.yml",
        "usr/share/doc/headroom/README.md",
    ] {
        assert!(
            dests.iter().any(|d| d == Path::new(want)),
            "{want} in {dests:?}"
        );
    }
}

#[test]
fn the_package_enables_the_unit_and_computes_its_dependencies() {
    let deb = deb_metadata();
    assert!(deb["depends"].as_str().unwrap().contains("$auto"));
    let units = deb["systemd-units"].as_table().expect("systemd-units");
    assert_eq!(units["enable"].as_bool(), Some(true));
    assert_eq!(units["start"].as_bool(), Some(true));
    let dir = units["unit-scripts"].as_str().unwrap();
    assert!(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(dir)
            .join("headroom.service")
            .is_file()
    );
    let scripts = deb["maintainer-scripts"].as_str().unwrap();
    for script in ["postinst", "postrm"] {
        let text = read(&format!("{scripts}/{script}"));
        // cargo-deb replaces every occurrence, comments included.
        assert_eq!(
            text.matches("#DEBHELPER#").count(),
            1,
            "{script} must hold the marker for cargo-deb's systemd snippets once"
        );
        assert!(
            text.contains("\n#DEBHELPER#\n"),
            "{script}: the marker on a line of its own"
        );
    }
    assert!(
        read(&format!("{scripts}/postrm")).contains("rm -rf /var/lib/headroom /var/log/headroom")
    );
}

#[test]
fn the_container_image_runs_the_packaged_binary_on_the_packaged_config() {
    let image = read("deploy/Containerfile");
    assert!(
        image.contains(&format!("/src/target/release/headroom {PACKAGED_BINARY}\n")),
        "the image copies the release binary to {PACKAGED_BINARY}"
    );
    assert!(image.contains(&format!("ENTRYPOINT [\"{PACKAGED_BINARY}\"]")));
    assert!(image.contains(&format!(
        "CMD [\"run\", \"--config\", \"{PACKAGED_CONFIG}\"]"
    )));
    assert!(
        image.contains("print-config > /src/headroom.toml")
            && image.contains(&format!("/src/headroom.toml {PACKAGED_CONFIG}")),
        "the image's config is the embedded default, written out as the package's is"
    );
}
