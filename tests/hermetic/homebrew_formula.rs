//! The Homebrew formula's `service do` block behaves like the LaunchAgent
//! `headroom service install --user` writes: same command, restart policy,
//! throttle, process type, one log file and a PATH for hooks. Homebrew
//! turns each DSL line into the plist key checked here (Homebrew's
//! `Library/Homebrew/service.rb`, `to_plist`).

use std::path::{Path, PathBuf};

use headroom::service::{self, Manager, Params, Scope};

fn formula() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/homebrew/headroom.rb"),
    )
    .unwrap()
}

/// The lines of the `service do … end` block, trimmed.
fn service_block(text: &str) -> Vec<String> {
    let start = text.find("  service do\n").expect("a service block");
    let body = &text[start + "  service do\n".len()..];
    let end = body
        .find("\n  end\n")
        .expect("the end of the service block");
    body[..end].lines().map(|l| l.trim().to_owned()).collect()
}

fn agent() -> plist::Dictionary {
    let text = service::launchd_plist(&Params {
        manager: Manager::Launchd,
        scope: Scope::User,
        binary: PathBuf::from("/opt/homebrew/bin/headroom"),
        source: service::BinarySource::InPlace,
        config: None,
        home: Some(PathBuf::from("/Users/you")),
        uid: 501,
    })
    .unwrap();
    plist::Value::from_reader_xml(text.as_bytes())
        .unwrap()
        .into_dictionary()
        .unwrap()
}

fn line<'a>(block: &'a [String], keyword: &str) -> &'a str {
    block
        .iter()
        .find_map(|l| l.strip_prefix(keyword).map(str::trim))
        .unwrap_or_else(|| panic!("no `{keyword}` in the service block: {block:?}"))
}

#[test]
fn the_service_block_matches_the_launch_agent() {
    let block = service_block(&formula());
    let agent = agent();

    // run: headroom run --config FILE --log-file LOG, like ProgramArguments.
    let args: Vec<&str> = agent
        .get("ProgramArguments")
        .and_then(|v| v.as_array())
        .unwrap()
        .iter()
        .filter_map(|v| v.as_string())
        .collect();
    assert_eq!(&args[1..3], ["run", "--config"]);
    assert_eq!(args[4], "--log-file");
    assert_eq!(
        Some(args[5]),
        agent.get("StandardErrorPath").unwrap().as_string()
    );
    assert_eq!(
        line(&block, "run "),
        r#"[opt_bin/"headroom", "run", "--config", etc/"headroom/headroom.toml","#
    );
    assert_eq!(
        block[block.iter().position(|l| l.starts_with("run ")).unwrap() + 1],
        r#""--log-file", var/"log/headroom/headroom.log"]"#
    );

    // keep_alive successful_exit: false → KeepAlive { SuccessfulExit: false }.
    let keep = agent
        .get("KeepAlive")
        .and_then(|v| v.as_dictionary())
        .unwrap();
    assert_eq!(
        keep.get("SuccessfulExit").unwrap().as_boolean(),
        Some(false)
    );
    assert_eq!(line(&block, "keep_alive "), "successful_exit: false");

    // throttle_interval N → ThrottleInterval N.
    let throttle = agent
        .get("ThrottleInterval")
        .unwrap()
        .as_signed_integer()
        .unwrap();
    assert_eq!(line(&block, "throttle_interval "), throttle.to_string());

    // process_type :interactive → ProcessType "Interactive" (capitalized).
    let process_type = agent.get("ProcessType").unwrap().as_string().unwrap();
    assert_eq!(
        line(&block, "process_type "),
        format!(":{}", process_type.to_lowercase())
    );

    // One log file for both streams, as in the agent.
    assert_eq!(
        agent.get("StandardOutPath").unwrap().as_string(),
        agent.get("StandardErrorPath").unwrap().as_string()
    );
    let log = line(&block, "log_path ");
    assert_eq!(line(&block, "error_log_path "), log);
    assert!(log.ends_with(r#""log/headroom/headroom.log""#), "{log}");

    // A PATH for hooks, as the agent has.
    assert!(
        agent
            .get("EnvironmentVariables")
            .and_then(|v| v.as_dictionary())
            .is_some_and(|env| env.contains_key("PATH"))
    );
    assert_eq!(
        line(&block, "environment_variables "),
        "PATH: std_service_path_env"
    );

    // RunAtLoad true is the DSL's default (run_at_load), and the block sets
    // nothing launchd.plist(5) would not know.
    assert_eq!(agent.get("RunAtLoad").unwrap().as_boolean(), Some(true));
    assert!(!block.iter().any(|l| l.starts_with("run_at_load")));
    assert_eq!(block.len(), 8, "{block:?}");
}

#[test]
fn the_formula_builds_with_cargo_and_writes_the_default_config() {
    let text = formula();
    assert!(text.contains(r#"system "cargo", "install", *std_cargo_args"#));
    assert!(text.contains(r#"Utils.safe_popen_read(bin/"headroom", "print-config")"#));
    assert!(text.contains(r#"license any_of: ["MIT", "Apache-2.0"]"#));
}
