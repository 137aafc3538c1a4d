//! `headroom service install|uninstall --print` for both service managers,
//! run as the real binary: the launchd plists are read back with the
//! `plist` crate (keys, absolute paths, program arguments the CLI accepts),
//! the systemd units run headroom on the given config, a system service runs
//! a binary only root can change (a root-owned copy of one others can), and
//! the files shipped in `launchd/` and `systemd/` are exactly what the
//! installer writes, and `run --log-file` (which the plists pass) writes the
//! daemon's log to that file with a private mode.
//! `systemd-analyze verify` of the units is in the environment tier
//! (`tests/environment/service.rs`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::Parser;
use headroom::cli::{Cli, Command as Sub};
use headroom::service::{self, Manager, Params, Scope};

fn binary() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_headroom"))
        .canonicalize()
        .unwrap()
}

fn headroom(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(args)
        .env("HOME", home)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The text of the file a printed plan writes to `path`.
fn written(plan: &str, path: &str) -> String {
    let header = format!("# write {path}, mode 0644:\n");
    let start = plan
        .find(&header)
        .unwrap_or_else(|| panic!("no {header} in\n{plan}"))
        + header.len();
    let rest = &plan[start..];
    let end = ["\n\nlaunchctl ", "\n\nsystemctl "]
        .iter()
        .filter_map(|m| rest.find(m))
        .min()
        .expect("commands after the file");
    rest[..=end].to_owned()
}

fn valid_config() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/valid");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "toml"))
        .expect("a valid config fixture");
    file.canonicalize().unwrap()
}

/// The keys of launchd.plist(5) each plist may use.
const DOCUMENTED: &[&str] = &[
    "Label",
    "ProgramArguments",
    "RunAtLoad",
    "KeepAlive",
    "ThrottleInterval",
    "ProcessType",
    "ExitTimeOut",
    "Umask",
    "SoftResourceLimits",
    "HardResourceLimits",
    "StandardOutPath",
    "StandardErrorPath",
    "EnvironmentVariables",
];

/// The binary a service of `scope` runs when installed by the test binary:
/// for the system, the test binary itself if only root can change it,
/// otherwise the root-owned copy the installer makes.
fn service_binary(manager: Manager, scope: Scope) -> PathBuf {
    let trusted = headroom::os::trusted_path::check_path(&binary(), 0);
    service::choose(manager, scope, &binary(), trusted).0
}

/// Program arguments must be what `headroom run --config FILE` parses to,
/// with `program` first.
fn assert_runs_with_config(args: &[String], program: &Path, config: &Path) {
    assert_eq!(Path::new(&args[0]), program);
    let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    match cli.command {
        Sub::Run {
            config: Some(c),
            dry_run: false,
            replay: None,
            ..
        } => assert_eq!(c, config),
        other => panic!("{args:?} parse as {other:?}"),
    }
}

fn check_plist(
    text: &str,
    label: &str,
    log_dir: &Path,
    program: &Path,
    config: &Path,
) -> plist::Dictionary {
    let dict = plist::Value::from_reader_xml(text.as_bytes())
        .unwrap_or_else(|e| panic!("{e}:\n{text}"))
        .into_dictionary()
        .unwrap();
    for key in dict.keys() {
        assert!(DOCUMENTED.contains(&key.as_str()), "undocumented key {key}");
    }
    assert_eq!(dict.get("Label").unwrap().as_string(), Some(label));
    let args: Vec<String> = dict
        .get("ProgramArguments")
        .and_then(|v| v.as_array())
        .unwrap()
        .iter()
        .map(|v| v.as_string().unwrap().to_owned())
        .collect();
    assert_runs_with_config(&args, program, config);
    assert_eq!(dict.get("RunAtLoad").unwrap().as_boolean(), Some(true));
    let keep = dict
        .get("KeepAlive")
        .and_then(|v| v.as_dictionary())
        .unwrap();
    assert_eq!(
        keep.get("SuccessfulExit").unwrap().as_boolean(),
        Some(false)
    );
    assert_ne!(
        dict.get("ProcessType").unwrap().as_string(),
        Some("Background"),
        "the daemon must act under pressure"
    );
    assert!(
        dict.get("ThrottleInterval")
            .unwrap()
            .as_signed_integer()
            .unwrap()
            > 0
    );
    assert!(
        dict.get("ExitTimeOut")
            .unwrap()
            .as_signed_integer()
            .unwrap()
            > 0
    );
    // An open-file limit above launchd's default of 256 (soft), to the
    // systemd unit's 65536 (hard); the daemon raises soft to hard.
    let files = |key: &str| {
        dict.get(key)
            .and_then(|v| v.as_dictionary())
            .and_then(|d| d.get("NumberOfFiles"))
            .and_then(|v| v.as_signed_integer())
            .unwrap_or_else(|| panic!("{key} NumberOfFiles in\n{text}"))
    };
    assert_eq!(files("SoftResourceLimits"), 4096);
    assert_eq!(files("HardResourceLimits"), 65536);
    for key in ["StandardOutPath", "StandardErrorPath"] {
        let path = Path::new(dict.get(key).unwrap().as_string().unwrap());
        assert!(path.is_absolute(), "{key} {}", path.display());
        assert_eq!(path.parent(), Some(log_dir), "{key}");
    }
    for arg in &args {
        if arg.starts_with('/') || arg.contains(".toml") {
            assert!(Path::new(arg).is_absolute(), "{arg}");
        }
    }
    dict
}

#[test]
fn the_launch_daemon_plist_runs_headroom_as_root_on_the_given_config() {
    let home = tempfile::tempdir().unwrap();
    let config = valid_config();
    let plan = stdout(&headroom(
        &[
            "service",
            "install",
            "--print",
            "--manager",
            "launchd",
            "--system",
            "--config",
            config.to_str().unwrap(),
        ],
        home.path(),
    ));
    let plist = written(&plan, "/Library/LaunchDaemons/io.headroom.daemon.plist");
    let dict = check_plist(
        &plist,
        "io.headroom.daemon",
        Path::new("/Library/Logs/headroom"),
        &service_binary(Manager::Launchd, Scope::System),
        &config,
    );
    assert!(dict.get("EnvironmentVariables").is_none());
    assert!(dict.get("UserName").is_none(), "LaunchDaemons run as root");
    assert!(
        plan.contains("\nlaunchctl enable system/io.headroom.daemon\n"),
        "{plan}"
    );
    assert!(plan.contains(
        "\nlaunchctl bootstrap system /Library/LaunchDaemons/io.headroom.daemon.plist\n"
    ));
    // A given config is used where it is: no default is written.
    assert!(!plan.contains("embedded default config"), "{plan}");
}

#[test]
fn the_launch_agent_plist_lives_in_the_users_library() {
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().canonicalize().unwrap();
    let plan = stdout(&headroom(
        &[
            "service",
            "install",
            "--print",
            "--manager",
            "launchd",
            "--user",
        ],
        &home_path,
    ));
    let plist_path = home_path.join("Library/LaunchAgents/io.headroom.agent.plist");
    let plist = written(&plan, plist_path.to_str().unwrap());
    let config = home_path.join("Library/Application Support/headroom/headroom.toml");
    let dict = check_plist(
        &plist,
        "io.headroom.agent",
        &home_path.join("Library/Logs/headroom"),
        &binary(),
        &config,
    );
    let env = dict
        .get("EnvironmentVariables")
        .and_then(|v| v.as_dictionary())
        .unwrap();
    assert!(env.get("PATH").is_some());
    // The default config is created from the embedded one if missing.
    assert!(plan.contains("embedded default config"), "{plan}");
    assert!(plan.contains("launchctl bootstrap gui/"), "{plan}");
    // --print wrote nothing.
    assert!(!plist_path.exists());
    assert!(!home_path.join("Library").exists());
}

#[test]
fn uninstall_prints_bootout_and_removal() {
    let home = tempfile::tempdir().unwrap();
    let plan = stdout(&headroom(
        &[
            "service",
            "uninstall",
            "--print",
            "--manager",
            "launchd",
            "--system",
        ],
        home.path(),
    ));
    assert!(
        plan.contains("\nrm -f /Library/LaunchDaemons/io.headroom.daemon.plist\n"),
        "{plan}"
    );
    assert!(
        plan.contains("\nlaunchctl bootout system/io.headroom.daemon  # may fail"),
        "{plan}"
    );
    let plan = stdout(&headroom(
        &[
            "service",
            "uninstall",
            "--print",
            "--manager",
            "systemd",
            "--user",
        ],
        home.path(),
    ));
    assert!(
        plan.contains("systemctl --user disable --now headroom.service"),
        "{plan}"
    );
}

#[test]
fn an_invalid_config_is_refused_before_anything_is_printed() {
    let home = tempfile::tempdir().unwrap();
    let bad = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config/invalid/unknown_key.toml");
    let out = headroom(
        &[
            "service",
            "install",
            "--print",
            "--manager",
            "systemd",
            "--config",
            bad.to_str().unwrap(),
        ],
        home.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown_key.toml"), "{err}");
}

#[test]
fn another_oss_manager_is_only_printed() {
    let other = match Manager::native() {
        Some(Manager::Launchd) => "systemd",
        _ => "launchd",
    };
    let home = tempfile::tempdir().unwrap();
    let out = headroom(
        &["service", "install", "--manager", other, "--user"],
        home.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--print"), "{err}");
    assert!(!home.path().join("Library").exists());
    assert!(!home.path().join(".config").exists());
}

fn repo(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The parameters the shipped files are rendered with: the agent runs a
/// binary installed in /usr/local/bin, the daemon its root-owned copy (made
/// from there by the installer), the default config, and (for the agent) a
/// placeholder home that `headroom service install --user` replaces.
fn shipped(manager: Manager, scope: Scope) -> Params {
    let (binary, source) = service::choose(
        manager,
        scope,
        Path::new("/usr/local/bin/headroom"),
        Err(headroom::os::trusted_path::Untrusted {
            path: PathBuf::from("/usr/local/bin"),
            problem: headroom::os::trusted_path::Problem::Owner { uid: 501 },
        }),
    );
    Params {
        manager,
        scope,
        binary,
        source,
        config: None,
        home: Some(PathBuf::from("/Users/you")),
        uid: 501,
    }
}

#[test]
fn the_shipped_files_are_what_the_installer_writes() {
    assert_eq!(
        repo("launchd/io.headroom.daemon.plist"),
        service::launchd_plist(&shipped(Manager::Launchd, Scope::System)).unwrap()
    );
    assert_eq!(
        repo("launchd/io.headroom.agent.plist"),
        service::launchd_plist(&shipped(Manager::Launchd, Scope::User)).unwrap()
    );
    assert_eq!(
        repo("systemd/headroom.service"),
        service::systemd_unit(&shipped(Manager::Systemd, Scope::System)).unwrap()
    );
    // And they parse: the daemon's keys are the documented ones.
    let keys: BTreeSet<String> =
        plist::Value::from_reader_xml(repo("launchd/io.headroom.daemon.plist").as_bytes())
            .unwrap()
            .into_dictionary()
            .unwrap()
            .keys()
            .cloned()
            .collect();
    let want: BTreeSet<String> = DOCUMENTED
        .iter()
        .filter(|k| **k != "EnvironmentVariables")
        .map(|k| (*k).to_owned())
        .collect();
    assert_eq!(keys, want);
}

#[cfg(target_os = "linux")]
#[test]
fn the_systemd_units_run_headroom_on_the_given_config() {
    let home = tempfile::tempdir().unwrap();
    let config = valid_config();
    for scope in ["--system", "--user"] {
        let plan = stdout(&headroom(
            &[
                "service",
                "install",
                "--print",
                "--manager",
                "systemd",
                scope,
                "--config",
                config.to_str().unwrap(),
            ],
            home.path(),
        ));
        let unit_path = if scope == "--system" {
            "/etc/systemd/system/headroom.service".to_owned()
        } else {
            home.path()
                .join(".config/systemd/user/headroom.service")
                .display()
                .to_string()
        };
        let unit = written(&plan, &unit_path);
        let exec = unit
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .unwrap();
        let args: Vec<String> = exec.split(' ').map(str::to_owned).collect();
        let program = if scope == "--system" {
            service_binary(Manager::Systemd, Scope::System)
        } else {
            binary()
        };
        assert_runs_with_config(&args, &program, &config);
    }
}

/// The test binary, hard-linked into a directory every user can write,
/// inside the checkout's `target/` (the same file system).
fn binary_others_can_replace() -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::tempdir_in(&base).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let linked = dir.path().join("headroom");
    std::fs::hard_link(binary(), &linked).unwrap();
    (dir, linked)
}

#[test]
fn a_system_service_runs_a_root_owned_copy_of_a_binary_others_can_replace() {
    let (dir, linked) = binary_others_can_replace();
    let home = tempfile::tempdir().unwrap();
    let config = valid_config();
    for (manager, service_file, copy, group) in [
        (
            "systemd",
            "/etc/systemd/system/headroom.service",
            "/usr/local/sbin/headroom",
            "root",
        ),
        (
            "launchd",
            "/Library/LaunchDaemons/io.headroom.daemon.plist",
            "/usr/local/libexec/headroom/headroom",
            "wheel",
        ),
    ] {
        let out = Command::new(&linked)
            .args([
                "service",
                "install",
                "--print",
                "--system",
                "--manager",
                manager,
            ])
            .args(["--config", config.to_str().unwrap()])
            .env("HOME", home.path())
            .output()
            .unwrap();
        let plan = stdout(&out);
        let why = format!(
            "# {} is writable by users other than root (mode 0777): a service that runs as root \
             must not run a program anyone else can replace, so a copy of {} is installed at \
             {copy} (owned by root, mode 0755) and the service runs that",
            dir.path().display(),
            linked.display()
        );
        assert!(plan.contains(&why), "{plan}");
        assert!(
            plan.contains(&format!(
                "\ninstall -o root -g {group} -m 0755 {} {copy}  # the service's own copy",
                linked.display()
            )),
            "{plan}"
        );
        let file = written(&plan, service_file);
        assert!(file.contains(copy), "{file}");
        assert!(!file.contains(&linked.display().to_string()), "{file}");
    }
    // A user service runs the user's binary where it is.
    let out = Command::new(&linked)
        .args([
            "service",
            "install",
            "--print",
            "--user",
            "--manager",
            "systemd",
        ])
        .env("HOME", home.path())
        .output()
        .unwrap();
    let plan = stdout(&out);
    assert!(!plan.contains("install -o root"), "{plan}");
    assert!(
        plan.contains(&format!("ExecStart={} run", linked.display())),
        "{plan}"
    );
}

/// The commands of a printed plan: its lines that start with a manager's
/// command.
fn commands(plan: &str) -> Vec<&str> {
    plan.lines()
        .filter(|l| l.starts_with("systemctl ") || l.starts_with("launchctl "))
        .collect()
}

#[test]
fn no_start_writes_and_enables_the_service_and_starts_nothing() {
    let home = tempfile::tempdir().unwrap();
    let config = valid_config();
    let config = config.to_str().unwrap();
    let plan = stdout(&headroom(
        &[
            "service",
            "install",
            "--print",
            "--no-start",
            "--system",
            "--manager",
            "systemd",
            "--config",
            config,
        ],
        home.path(),
    ));
    assert_eq!(
        commands(&plan),
        [
            "systemctl daemon-reload",
            "systemctl enable headroom.service"
        ],
        "{plan}"
    );
    assert!(
        plan.contains("\n# --no-start: the unit is enabled and starts at the next boot"),
        "{plan}"
    );
    assert!(written(&plan, "/etc/systemd/system/headroom.service").contains("ExecStart="));
    let plan = stdout(&headroom(
        &[
            "service",
            "install",
            "--print",
            "--no-start",
            "--user",
            "--manager",
            "launchd",
            "--config",
            config,
        ],
        home.path(),
    ));
    let uid = headroom::os::this_process::effective_uid();
    assert_eq!(
        commands(&plan),
        [format!("launchctl enable gui/{uid}/io.headroom.agent")],
        "{plan}"
    );
}

#[test]
fn a_service_of_a_build_output_is_pointed_to_cargo_install_not_to_homebrew() {
    // The test binary is a build output: target/debug/headroom.
    let home = tempfile::tempdir().unwrap();
    for manager in ["systemd", "launchd"] {
        let plan = stdout(&headroom(
            &[
                "service",
                "install",
                "--print",
                "--user",
                "--manager",
                manager,
            ],
            home.path(),
        ));
        let note = plan
            .lines()
            .find(|l| l.contains("a build output of a source checkout"))
            .unwrap_or_else(|| panic!("no note on the build output in\n{plan}"));
        assert!(note.contains("`cargo install --locked --path .`"), "{note}");
        assert!(!note.contains("brew"), "{note}");
    }
}

#[test]
fn run_with_a_log_file_writes_its_log_there_with_a_private_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    // As root, the log's directory must be one only root can change.
    let dir = crate::support::private_dir();
    let log = dir.path().join("headroom.log");
    let child = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["run", "--listen", "127.0.0.1:0", "--journal"])
        .arg(dir.path().join("state/journal.jsonl"))
        .arg("--log-file")
        .arg(&log)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: the first sample is logged within a second or two.
    let mut text = String::new();
    for _ in 0..300 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("first sample:") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    headroom::os::posix::kill(child.id(), libc::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(text.contains("first sample:"), "log file: {text}");
    assert!(out.status.success(), "{:?}", out.status);
    // Everything went to the file: nothing was left on the pipes.
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o777;
    let root = headroom::os::this_process::effective_uid() == 0;
    assert_eq!(mode, if root { 0o640 } else { 0o600 });
}
