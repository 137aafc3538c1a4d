//! Attacks by an unprivileged local user on a root daemon, replayed against
//! the real thing: `headroom run` as root on a private config, and the
//! attacker as the system user `headroom-test` (created with `useradd`,
//! switched to with `setpriv`) running the programs in
//! `tests/support/attacker.py` or `headroom-hog`. Each test is one attack
//! and asserts what the daemon must still do: signal the attacker's own hog
//! that crosses a SIGTERM rule, keep its memory bounded, keep sampling,
//! answer `/healthz`, and give away nothing (tokens, other users' argv,
//! hook arguments), whatever the attacker does.
//!
//! The floods also measure the reaction to a hog (MiB past the limit and ms
//! from crossing to signal) and the daemon's peak memory (VmHWM), first
//! without the attack and then during it, on the same daemon: the attacked
//! figures are compared with that baseline, a ratio against a peer measured
//! in the same run. Every test prints its figures on an `attack-figures`
//! line (`scripts/attack-bench.sh` makes a table of them).
//!
//! Every test needs root (`scripts/test.sh` runs them as root) and fails
//! without it. The tests run one at a time (a lock), each with its own
//! daemon, and kill every process they start; `scripts/test.sh` runs them
//! apart from the rest of the tier (`cargo test --test environment
//! attacks::`), whose browser and Prometheus would distort the figures.
//!
//! A new attack goes here as one `#[test]` named after what the daemon must
//! still do, starting with `let session = begin("…");`
//! and ending with `f.finish()`; a new attacker program is a subcommand of
//! `tests/support/attacker.py`, and a new way to watch the daemon a method of
//! `RootDaemon` in `tests/support/attack.rs`.
#![cfg(target_os = "linux")]

use crate::support;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::attack::{
    ATTACKER, Findings, LEAK_VAR, MIB, Probe, Proc, REGULAR_ATTACKER, Reaction, RootDaemon, Stage,
    VICTIM_UID, alive, argv_pattern, as_user, attacker_python, await_reaction, begin, chmod, chown,
    ensure_user, hog_as, toml_str, uid_of,
};
use crate::support::hog::HEADROOM;
use crate::support::{fake_kernel, private_dir};

/// The SIGTERM rule's footprint limit (a multiple of 64 MiB: the hog
/// reports its size every 64 MiB, which dates the crossing).
const LIMIT: u64 = 320 * MIB;
/// The HTTP connection cap the floods run against (`[http] max_connections`).
const MAX_CONNECTIONS: usize = 256;
/// Sockets a daemon holds besides its HTTP clients (its listener, a Jupyter
/// lookup, the journal's and the log's are files).
const SOCKET_SLACK: usize = 16;
/// How much more than its baseline peak (VmHWM) a daemon may hold under an
/// attack: generous for a daemon whose every input is capped. Not enough
/// for 256 connections each buffering 400 KB of headers (100 MB): the
/// connection cap alone does not bound memory, header sizes must be too.
const MEMORY_SLACK: u64 = 64 * MIB;
/// The reaction under attack may be this many times the baseline's, plus
/// the slack below (a 2-core machine runs the attacker beside the daemon).
const REACTION_FACTOR: f64 = 3.0;
const REACTION_SLACK_MIB: f64 = 150.0;
const REACTION_SLACK_MS: f64 = 1500.0;
/// The idle connections of the descriptor flood: more than the daemon's
/// 1024 open files.
const IDLE_CONNECTIONS: usize = 1100;
/// The connections of the header flood, and the unfinished headers each
/// sends (just under hyper's 408 KiB read buffer, which would end it).
const HEADER_FLOODS: usize = 1500;
const HEADER_BYTES: usize = 400_000;
/// How long after crossing the limit a hog may go unsignalled.
const SIGNAL_WITHIN: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Configs
// ---------------------------------------------------------------------------

/// `[daemon]` sampling every second with its journal in `dir`, then `rest`.
fn config(dir: &Path, rest: &str) -> String {
    config_with_journal(&dir.join("journal.jsonl"), rest)
}

fn config_with_journal(journal: &Path, rest: &str) -> String {
    format!(
        "[daemon]\ninterval = \"1s\"\njournal = {}\n\n{rest}",
        toml_str(&journal.display().to_string())
    )
}

/// The enforcement under test: SIGTERM to `user`'s processes started
/// through `link` once they pass [`LIMIT`].
fn hog_rule(link: &Path, user: Option<&str>) -> String {
    let user = user.map_or(String::new(), |u| format!("user = {}\n", toml_str(u)));
    format!(
        "[[rule]]\nname = \"hog-limit\"\nfootprint = \"{}MiB\"\nother_users = true\n\
         cooldown = \"1h\"\nactions = [{{ signal = \"SIGTERM\" }}]\n[rule.match]\nargv = {}\n{user}\n",
        LIMIT / MIB,
        argv_pattern(link)
    )
}

/// `[http]` with the connection cap.
fn http_cap() -> String {
    format!("[http]\nmax_connections = {MAX_CONNECTIONS}\n\n")
}

fn start(f: &mut Findings, dir: &Path, text: &str) -> Option<RootDaemon> {
    match RootDaemon::start(dir, text) {
        Ok(d) => Some(d),
        Err(e) => {
            f.fail(format!(
                "the daemon did not start (exit code {:?}); its log:\n{}\nits config:\n{text}",
                e.code, e.log
            ));
            None
        }
    }
}

// ---------------------------------------------------------------------------
// Floods: reaction and memory against a baseline on the same daemon
// ---------------------------------------------------------------------------

/// What the daemon did with no attack running.
struct Baseline {
    reaction: Reaction,
    hwm: u64,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// A root daemon with the hog rule and the connection cap, and the link
/// its hogs are started through.
fn flood_daemon(f: &mut Findings, stage: &Stage, dir: &Path) -> Option<(RootDaemon, PathBuf)> {
    let link = stage.hog_link("hogs", "hog-limit");
    let text = config(dir, &format!("{}{}", http_cap(), hog_rule(&link, None)));
    start(f, dir, &text).map(|d| (d, link))
}

/// The hog crossing the limit with no attack running; the daemon's peak
/// memory after it.
fn baseline(f: &mut Findings, d: &RootDaemon, link: &Path) -> Option<Baseline> {
    let mut hog = hog_as(ATTACKER, link);
    match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
        Ok(reaction) => {
            drop(hog);
            let hwm = d.hwm();
            f.note(format!(
                "baseline: signalled {:.0} MiB past the limit, {:.0} ms after crossing; daemon VmHWM {:.1} MiB",
                reaction.past_limit_mib,
                reaction.ms_after_crossing,
                mib(hwm)
            ));
            Some(Baseline { reaction, hwm })
        }
        Err(why) => {
            f.fail(format!(
                "baseline (no attack yet): {why}; the reaction under attack cannot be compared"
            ));
            None
        }
    }
}

/// A hog crossing the limit during the attack must be signalled, not much
/// later than in the baseline.
fn attacked_reaction(
    f: &mut Findings,
    d: &mut RootDaemon,
    link: &Path,
    base: &Baseline,
) -> Option<Reaction> {
    let mut hog = hog_as(ATTACKER, link);
    match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
        Ok(r) => {
            f.note(format!(
                "under attack: signalled {:.0} MiB past the limit, {:.0} ms after crossing",
                r.past_limit_mib, r.ms_after_crossing
            ));
            let b = base.reaction;
            let bound_mib = REACTION_FACTOR * b.past_limit_mib.max(0.0) + REACTION_SLACK_MIB;
            f.check(r.past_limit_mib <= bound_mib, || {
                format!(
                    "under attack the hog got {:.0} MiB past the limit before SIGTERM, more than \
                     {REACTION_FACTOR}× the baseline's {:.0} MiB + {REACTION_SLACK_MIB} MiB = {bound_mib:.0} MiB",
                    r.past_limit_mib, b.past_limit_mib
                )
            });
            let bound_ms = REACTION_FACTOR * b.ms_after_crossing + REACTION_SLACK_MS;
            f.check(r.ms_after_crossing <= bound_ms, || {
                format!(
                    "under attack SIGTERM came {:.0} ms after the hog crossed the limit, more than \
                     {REACTION_FACTOR}× the baseline's {:.0} ms + {REACTION_SLACK_MS} ms = {bound_ms:.0} ms",
                    r.ms_after_crossing, b.ms_after_crossing
                )
            });
            Some(r)
        }
        Err(why) => {
            f.fail(format!(
                "under attack: {why}\ndaemon running: {}; its last log lines:\n{}",
                d.running(),
                d.log_tail(15)
            ));
            None
        }
    }
}

/// During the flood a new `/healthz` request gets an answer or a prompt
/// refusal within 1 s, never silence.
fn healthz_during(f: &mut Findings, d: &RootDaemon) {
    match d.healthz(Duration::from_secs(1)) {
        Probe::Answered { status, took, .. } => {
            f.note(format!(
                "/healthz during the flood: answered {status} in {} ms",
                took.as_millis()
            ));
        }
        Probe::Refused { error, took } => {
            f.note(format!(
                "/healthz during the flood: refused promptly in {} ms ({error})",
                took.as_millis()
            ));
        }
        Probe::TimedOut { error, took } => f.fail(format!(
            "/healthz during the flood got neither an answer nor a refusal within {} ms ({error}): \
             the flood holds every connection slot and the listen queue",
            took.as_millis()
        )),
    }
}

/// Once the attack stops, `/healthz` answers 200 within a 1 s client
/// timeout (three tries).
fn healthz_after(f: &mut Findings, d: &mut RootDaemon) {
    match d.healthz_recovers(3) {
        Ok(Probe::Answered { took, .. }) => {
            f.note(format!(
                "/healthz after the attack: 200 in {} ms",
                took.as_millis()
            ));
        }
        Ok(other) => f.fail(format!("/healthz after the attack: {other:?}")),
        Err(tries) => f.fail(format!(
            "/healthz did not answer 200 within a 1 s client timeout in 3 tries once the attack \
             stopped: {tries:?}; daemon running: {}; last log lines:\n{}",
            d.running(),
            d.log_tail(15)
        )),
    }
}

/// The daemon's peak memory stays within [`MEMORY_SLACK`] of the baseline.
fn memory_bounded(f: &mut Findings, d: &RootDaemon, base_hwm: u64) -> u64 {
    let hwm = d.hwm();
    let bound = base_hwm + MEMORY_SLACK;
    if let Some(rss) = d.killed_by_watchdog() {
        f.fail(format!(
            "the daemon reached {:.0} MiB resident and was killed by the test's watchdog",
            mib(rss)
        ));
    }
    f.check(hwm <= bound, || {
        format!(
            "the daemon's peak memory (VmHWM) reached {:.1} MiB, above the bound of its baseline \
             {:.1} MiB + {} MiB = {:.1} MiB",
            mib(hwm),
            mib(base_hwm),
            MEMORY_SLACK / MIB,
            mib(bound)
        )
    });
    f.note(format!(
        "daemon VmHWM under attack {:.1} MiB (bound {:.1} MiB)",
        mib(hwm),
        mib(bound)
    ));
    hwm
}

/// The daemon's sockets stay within the connection cap.
fn sockets_capped(f: &mut Findings, d: &RootDaemon, when: &str) {
    let n = d.sockets();
    f.note(format!("daemon sockets {when}: {n}"));
    f.check(n <= MAX_CONNECTIONS + SOCKET_SLACK, || {
        format!(
            "the daemon held {n} sockets {when}, beyond max_connections = {MAX_CONNECTIONS} \
             (+{SOCKET_SLACK} of its own)"
        )
    });
}

fn report_figures(f: &Findings, base: &Baseline, hwm: u64, attacked: Option<Reaction>) {
    let fmt = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v:.0}"));
    f.figures(&[
        ("hwm_base_mib", format!("{:.1}", mib(base.hwm))),
        ("hwm_attack_mib", format!("{:.1}", mib(hwm))),
        (
            "past_base_mib",
            format!("{:.0}", base.reaction.past_limit_mib),
        ),
        ("past_attack_mib", fmt(attacked.map(|r| r.past_limit_mib))),
        ("ms_base", format!("{:.0}", base.reaction.ms_after_crossing)),
        ("ms_attack", fmt(attacked.map(|r| r.ms_after_crossing))),
    ]);
}

#[test]
fn an_idle_connection_flood_neither_blinds_enforcement_nor_silences_health() {
    let session = begin("idle connection flood");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    if let Some((mut d, link)) = flood_daemon(&mut f, &stage, dir.path())
        && let Some(base) = baseline(&mut f, &d, &link)
    {
        let port = d.addr.port().to_string();
        let n = IDLE_CONNECTIONS.to_string();
        let mut attacker = Proc::spawn(attacker_python(&stage, &["hold", &port, &n]));
        let (_, connected) = attacker.expect_line("connected", Duration::from_secs(60));
        f.note(format!("attacker: {connected}"));
        healthz_during(&mut f, &d);
        sockets_capped(
            &mut f,
            &d,
            &format!("with {IDLE_CONNECTIONS} idle connections open"),
        );
        let attacked = attacked_reaction(&mut f, &mut d, &link, &base);
        sockets_capped(&mut f, &d, "after the hog");
        if let Some(status) = attacker.last("status ") {
            f.note(format!("attacker: {status}"));
        }
        attacker.kill();
        healthz_after(&mut f, &mut d);
        let hwm = memory_bounded(&mut f, &d, base.hwm);
        report_figures(&f, &base, hwm, attacked);
    }
    f.finish();
}

#[test]
fn endless_headers_on_many_connections_are_cut_and_cost_bounded_memory() {
    let session = begin("slowloris with payload");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    if let Some((mut d, link)) = flood_daemon(&mut f, &stage, dir.path())
        && let Some(base) = baseline(&mut f, &d, &link)
    {
        let port = d.addr.port().to_string();
        let (n, bytes) = (HEADER_FLOODS.to_string(), HEADER_BYTES.to_string());
        let mut attacker = Proc::spawn(attacker_python(&stage, &["slowloris", &port, &n, &bytes]));
        let (_, connected) = attacker.expect_line("connected", Duration::from_secs(60));
        f.note(format!("attacker: {connected}"));
        let (sent_at, sent) = attacker.expect_line("sent bytes=", Duration::from_secs(60));
        f.note(format!("attacker: {sent}"));
        healthz_during(&mut f, &d);
        sockets_capped(
            &mut f,
            &d,
            &format!("with {HEADER_FLOODS} header floods open"),
        );
        let attacked = attacked_reaction(&mut f, &mut d, &link, &base);
        // The daemon cuts connections whose headers never end.
        let cut = wait_for_cut(&mut attacker, sent_at + Duration::from_secs(60));
        f.check(cut.is_some_and(|c| c > 0), || {
            format!(
                "the daemon cut none of the {HEADER_FLOODS} connections sending endless headers \
                 within 60 s of the last byte sent (attacker's last status: {:?})",
                attacker.last("status ")
            )
        });
        if let Some(status) = attacker.last("status ") {
            f.note(format!("attacker: {status}"));
        }
        sockets_capped(&mut f, &d, "60 s into the flood");
        attacker.kill();
        healthz_after(&mut f, &mut d);
        let hwm = memory_bounded(&mut f, &d, base.hwm);
        report_figures(&f, &base, hwm, attacked);
    }
    f.finish();
}

/// The number of connections the daemon cut, from the attacker's `status`
/// lines, once it is above 0 or at `deadline`.
fn wait_for_cut(attacker: &mut Proc, deadline: Instant) -> Option<usize> {
    let mut cut = None;
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Some((_, line)) = attacker.wait_line("status ", left) {
            cut = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("cut="))
                .and_then(|n| n.parse::<usize>().ok());
            if cut.is_some_and(|c| c > 0) {
                break;
            }
        }
    }
    cut
}

#[test]
fn huge_argv_and_unread_snapshots_cost_bounded_memory() {
    let session = begin("huge argv and unread snapshots");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    if let Some((mut d, link)) = flood_daemon(&mut f, &stage, dir.path())
        && let Some(base) = baseline(&mut f, &d, &link)
    {
        let port = d.addr.port().to_string();
        // 40 processes with 2 MB of argv each: 80 MB for a daemon that reads it all.
        let mut argv = Proc::spawn(attacker_python(&stage, &["argv", "40", "2000000"]));
        let (_, spawned) = argv.expect_line("spawned", Duration::from_secs(60));
        let pids: Vec<u32> = spawned
            .split("pids=")
            .nth(1)
            .map(|l| l.split(',').filter_map(|p| p.trim().parse().ok()).collect())
            .unwrap_or_default();
        f.note(format!(
            "attacker: spawned {} processes with 2 MB of argv",
            pids.len()
        ));
        // Two samples of them, then snapshots asked for and never read.
        std::thread::sleep(Duration::from_secs(3));
        let mut readers = Proc::spawn(attacker_python(
            &stage,
            &["noread", &port, "10", "/api/v1/snapshot"],
        ));
        let (_, sent) = readers.expect_line("sent", Duration::from_secs(60));
        f.note(format!(
            "attacker: {sent} snapshot requests, never reading the answers"
        ));
        std::thread::sleep(Duration::from_secs(2));
        healthz_during(&mut f, &d);
        let attacked = attacked_reaction(&mut f, &mut d, &link, &base);
        let hwm = memory_bounded(&mut f, &d, base.hwm);
        // The daemon keeps a bounded piece of each argv (about 4 KiB).
        if let Some(&pid) = pids.first() {
            argv_is_capped(&mut f, &d, pid);
        }
        readers.kill();
        argv.kill();
        healthz_after(&mut f, &mut d);
        report_figures(&f, &base, hwm, attacked);
    }
    f.finish();
}

#[test]
fn one_user_holding_streams_and_unread_answers_leaves_others_their_share() {
    let session = begin("every event stream and large answer held");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    if let Some(d) = start(&mut f, dir.path(), &config(dir.path(), "")) {
        std::thread::sleep(Duration::from_millis(2500));
        let port = d.addr.port().to_string();
        // More streams than the daemon serves at once (16), all held unread.
        let mut streams = Proc::spawn(attacker_python(&stage, &["streams", &port, "20"]));
        let (_, got) = streams.expect_line("streams ok=", Duration::from_secs(60));
        f.note(format!("attacker: 20 event streams asked for: {got}"));
        f.check(got.contains("streams ok=4 refused=16"), || {
            format!(
                "{ATTACKER} was given other than one viewer's share of event streams (4 of \
                 16): {got}"
            )
        });
        let mut answers = Proc::spawn(attacker_python(
            &stage,
            &["noread", &port, "10", "/api/v1/snapshot"],
        ));
        let (_, sent) = answers.expect_line("sent", Duration::from_secs(60));
        f.note(format!("attacker: {sent} snapshot requests, never read"));
        std::thread::sleep(Duration::from_secs(1));
        // Root's status page still gets its live stream and its table.
        match first_stream_event(&d) {
            Ok(took) => f.note(format!(
                "root's event stream: first sample after {} ms",
                took.as_millis()
            )),
            Err(e) => f.fail(format!(
                "root's GET /api/v1/stream while {ATTACKER} holds streams: {e}"
            )),
        }
        let (status, body) = support::get(&d.url("/api/v1/snapshot"));
        f.check(status == 200, || {
            format!(
                "root's GET /api/v1/snapshot while {ATTACKER}'s answers are unread: {status} {}",
                body.chars().take(300).collect::<String>()
            )
        });
        streams.kill();
        answers.kill();
    }
    f.finish();
}

/// Opens `/api/v1/stream` as root and reads until its first `sample` event:
/// how long that took, or what came instead.
fn first_stream_event(d: &RootDaemon) -> Result<Duration, String> {
    let started = Instant::now();
    let mut s = TcpStream::connect(d.addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /api/v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&seen);
        if !text.is_empty() && !text.starts_with("HTTP/1.1 200") && text.contains("\r\n\r\n") {
            return Err(text.chars().take(400).collect());
        }
        if text.contains("event: sample") {
            return Ok(started.elapsed());
        }
        match s.read(&mut buf) {
            Ok(0) => return Err(format!("closed after {text:?}")),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("{e} after {text:?}")),
        }
    }
}

/// Root's view of `pid` (one of the huge-argv processes) holds at most
/// 16 KiB of its argv. Waits up to 10 s for a sample that has the process.
fn argv_is_capped(f: &mut Findings, d: &RootDaemon, pid: u32) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let url = d.url(&format!("/api/v1/processes/{pid}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = String::new();
    while Instant::now() < deadline {
        let answer = agent
            .get(&url)
            .call()
            .map_err(|e| e.to_string())
            .and_then(|mut r| {
                let status = r.status().as_u16();
                r.body_mut()
                    .with_config()
                    .limit(64 * MIB)
                    .read_to_string()
                    .map(|body| (status, body))
                    .map_err(|e| e.to_string())
            });
        match answer {
            Ok((200, body)) => {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                let bytes = v
                    .pointer("/process/argv")
                    .and_then(|a| a.as_array())
                    .map(|a| {
                        a.iter()
                            .filter_map(|s| s.as_str())
                            .map(str::len)
                            .sum::<usize>()
                    });
                f.note(format!(
                    "root sees {bytes:?} bytes of pid {pid}'s 2 MB argv"
                ));
                f.check(bytes.is_some_and(|b| b <= 16 * 1024), || {
                    format!(
                        "the daemon keeps {bytes:?} bytes of pid {pid}'s 2 MB argv (at most \
                         16 KiB expected)"
                    )
                });
                return;
            }
            Ok((status, body)) => {
                last = format!("{status} {}", body.chars().take(300).collect::<String>())
            }
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    f.fail(format!(
        "for 10 s the daemon's latest sample did not hold pid {pid} (one of the huge-argv \
         processes, running since before the attack): GET {url} as root: {last}"
    ));
}

// ---------------------------------------------------------------------------
// Jupyter runtime files
// ---------------------------------------------------------------------------

/// A kernel id for the fake kernel that makes the daemon look up notebooks.
const KERNEL_ID: &str = "3f2a9c1e-0b7d-4e5f-8a6b-1c2d3e4f5a6b";

#[test]
fn a_jupyter_token_goes_to_no_listener_but_the_runtime_files_owner() {
    let session = begin("Jupyter token theft");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    // The attacker listens; a runtime file of another user names its port.
    let mut listener = Proc::spawn(attacker_python(&stage, &["listen"]));
    let (_, line) = listener.expect_line("port ", Duration::from_secs(30));
    let port: u16 = line["port ".len()..].trim().parse().expect("port");
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).expect("mkdir runtime");
    chmod(&runtime, 0o755);
    // The pid is root's (this test's), not the victim's.
    let pid = std::process::id();
    let file = runtime.join(format!("jpserver-{pid}.json"));
    let info = serde_json::json!({
        "base_url": "/", "hostname": "127.0.0.1", "password": false, "pid": pid,
        "port": port, "root_dir": "/srv/victim", "secure": false, "sock": "",
        "token": "secret-jupyter-token-XYZ",
        "url": format!("http://127.0.0.1:{port}/"), "version": "2.21.1",
    });
    std::fs::write(&file, info.to_string()).expect("write the runtime file");
    chown(&file, VICTIM_UID);
    chmod(&file, 0o600);
    let text = config(
        dir.path(),
        &format!(
            "[jupyter]\nother_users = true\nruntime_dirs = [{}]\n",
            toml_str(&runtime.display().to_string())
        ),
    );
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        let kernels = private_dir();
        let _kernel = fake_kernel(kernels.path(), KERNEL_ID);
        let lookup = d.wait_log("Jupyter lookup", Duration::from_secs(10));
        f.note(format!("the daemon's lookup: {lookup:?}"));
        std::thread::sleep(Duration::from_secs(2));
        listener.drain();
        let received: Vec<String> = listener
            .seen
            .iter()
            .filter(|(_, l)| l.starts_with("received"))
            .map(|(_, l)| l.clone())
            .collect();
        f.check(received.is_empty(), || {
            format!(
                "the attacker's listener on port {port}, named by a runtime file of uid \
                 {VICTIM_UID}, received the daemon's request:\n{}",
                received.join("\n")
            )
        });
        f.check(d.running(), || "the daemon stopped".into());
    }
    f.finish();
}

#[test]
fn runtime_files_that_are_dev_zero_or_a_fifo_cost_nothing() {
    let session = begin("runtime files: /dev/zero and a FIFO");
    let mut f = Findings::new(&session);
    let dir = private_dir();
    let attacker = uid_of(ATTACKER);
    // A runtime directory the attacker owns and fills.
    let runtime = dir.path().join("attacker-runtime");
    std::fs::create_dir(&runtime).expect("mkdir");
    chmod(&runtime, 0o755);
    chown(&runtime, attacker);
    let zero = runtime.join("jpserver-2.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
    chown(&zero, attacker);
    let fifo = runtime.join("jpserver-3.json");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", fifo.display());
    chown(&fifo, attacker);
    let text = config(
        dir.path(),
        &format!(
            "[jupyter]\nruntime_dirs = [{}]\n",
            toml_str(&runtime.display().to_string())
        ),
    );
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        std::thread::sleep(Duration::from_secs(2));
        let base_hwm = d.hwm();
        let before = d.samples();
        let kernels = private_dir();
        let _kernel = fake_kernel(kernels.path(), KERNEL_ID);
        let lookup = d.wait_log("Jupyter lookup", Duration::from_secs(10));
        f.note(format!("the daemon's lookup: {lookup:?}"));
        std::thread::sleep(Duration::from_secs(5));
        let after = d.samples();
        f.check(
            matches!((before, after), (Some(b), Some(a)) if a >= b + 3),
            || format!("the daemon stopped sampling: /healthz samples went from {before:?} to {after:?} in 5+ s"),
        );
        match d.healthz(Duration::from_secs(1)) {
            Probe::Answered { status: 200, .. } => {}
            other => f.fail(format!("/healthz within 1 s: {other:?}")),
        }
        let hwm = memory_bounded(&mut f, &d, base_hwm);
        f.figures(&[
            ("hwm_base_mib", format!("{:.1}", mib(base_hwm))),
            ("hwm_attack_mib", format!("{:.1}", mib(hwm))),
        ]);
    }
    f.finish();
}

// ---------------------------------------------------------------------------
// What a root daemon loads, writes and runs
// ---------------------------------------------------------------------------

/// A shared library whose constructor creates `$EVIL_MARKER`, or the file
/// put in place of `@MARKER_PATH@` when that is not set.
const EVIL_LIBRARY: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void loaded(void) {
    const char *path = getenv("EVIL_MARKER");
    int fd = open(path ? path : "@MARKER_PATH@", O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
}
"#;

#[test]
fn an_nvml_library_in_the_attackers_home_is_never_loaded() {
    let session = begin("NVML library from the attacker's home");
    let mut f = Findings::new(&session);
    let dir = private_dir();
    let home = dir.path().join("home-headroom-test");
    std::fs::create_dir(&home).expect("mkdir");
    chmod(&home, 0o755);
    let marker = dir.path().join("loaded-as-root");
    let source = home.join("evil.c");
    std::fs::write(
        &source,
        EVIL_LIBRARY.replace("@MARKER_PATH@", &marker.display().to_string()),
    )
    .expect("write evil.c");
    let library = home.join("libnvidia-ml.so.1");
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .output()
        .expect("cc (Debian package gcc)");
    assert!(
        cc.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let attacker = uid_of(ATTACKER);
    for p in [&home, &source, &library] {
        chown(p, attacker);
    }
    // Positive control: loading the library creates a marker.
    let control = dir.path().join("control-marker");
    let loaded = Command::new("/usr/bin/python3")
        .args(["-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])"])
        .arg(&library)
        .env("EVIL_MARKER", &control)
        .status()
        .expect("python3");
    assert!(
        loaded.success() && control.exists(),
        "the test library does not mark its loading"
    );

    let text = config(
        dir.path(),
        &format!(
            "[gpu]\nnvml_library = {}\n",
            toml_str(&library.display().to_string())
        ),
    );
    match RootDaemon::start(dir.path(), &text) {
        Ok(mut d) => {
            // The collector loads the library at start and retries later.
            std::thread::sleep(Duration::from_secs(5));
            let said: Vec<String> = d
                .log_text()
                .lines()
                .filter(|l| l.contains("nvml") || l.contains("NVML"))
                .map(str::to_string)
                .collect();
            f.note(format!("the daemon runs; its NVML lines: {said:?}"));
        }
        Err(e) => {
            f.note(format!("the daemon refused to start: exit {:?}", e.code));
            f.check(e.code == Some(2) && e.log.contains("nvml_library"), || {
                format!(
                    "a refusal is exit 2 with a message naming gpu.nvml_library; got exit {:?}:\n{}",
                    e.code, e.log
                )
            });
        }
    }
    f.check(!marker.exists(), || {
        format!(
            "the root daemon loaded {} (owned by {ATTACKER}): its constructor created {}",
            library.display(),
            marker.display()
        )
    });
    f.finish();
}

#[test]
fn a_journal_the_attacker_prepared_is_left_alone_and_enforcement_goes_on() {
    let session = begin("pre-created journal");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    let attacker = uid_of(ATTACKER);
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("mkdir");
    chown(&state, attacker);
    chmod(&state, 0o777);
    let journal = state.join("journal.jsonl");
    let forged =
        b"{\"at\":\"2020-01-01T00:00:00Z\",\"kind\":\"forged\",\"by\":\"headroom-test\"}\n";
    std::fs::write(&journal, forged).expect("write the forged journal");
    chown(&journal, attacker);
    chmod(&journal, 0o666);
    let link = stage.hog_link("hogs", "hog-journal");
    let text = config_with_journal(&journal, &hog_rule(&link, None));
    if let Some(d) = start(&mut f, dir.path(), &text) {
        let before = d.samples();
        let mut hog = hog_as(ATTACKER, &link);
        match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
            Ok(r) => f.note(format!(
                "the hog was signalled {:.0} MiB past the limit",
                r.past_limit_mib
            )),
            Err(why) => f.fail(format!("the daemon no longer acts: {why}")),
        }
        drop(hog);
        std::thread::sleep(Duration::from_secs(2));
        let after = d.samples();
        f.check(
            matches!((before, after), (Some(b), Some(a)) if a > b),
            || format!("the daemon stopped sampling: /healthz samples {before:?} then {after:?}"),
        );
    } else {
        f.note("a daemon that refuses to start stops sampling and acting as surely".into());
    }
    let now = std::fs::read(&journal).unwrap_or_default();
    f.check(now == forged, || {
        format!(
            "the root daemon wrote to {} (owned by {ATTACKER}, mode 0666): it now holds {} bytes \
             instead of the {} the attacker left:\n{}",
            journal.display(),
            now.len(),
            forged.len(),
            String::from_utf8_lossy(&now)
                .chars()
                .take(600)
                .collect::<String>()
        )
    });
    f.finish();
}

/// Characters no text handed to a log, a terminal or a hook may carry raw
/// (escape, bell and the other control characters; line feeds and tabs are
/// judged by what they do to lines).
fn control_bytes(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c.is_control() && c != '\n' && c != '\t')
        .collect()
}

#[test]
fn hooks_get_a_clean_environment_and_must_be_root_owned_whole() {
    let session = begin("hook environment and interpreter argument");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    // A name with an escape sequence, a bell and a forged variable line.
    let name = "\u{1b}]0;pwn\u{7}\nX=1";
    let link = stage.hog_link("hooked", name);
    let out = dir.path().join("hook-env");
    let script = dir.path().join("dump-env.sh");
    // The shell's own environment as exec gave it, before the shell adds to it.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat /proc/$$/environ > {0}.tmp && mv {0}.tmp {0}\n",
            out.display()
        ),
    )
    .expect("write hook");
    chmod(&script, 0o755);
    let text = config(
        dir.path(),
        &format!(
            "[[rule]]\nname = \"hooked\"\nfootprint = \"64MiB\"\nother_users = true\ncooldown = \"1h\"\n\
             actions = [{{ hook = [{}] }}]\n[rule.match]\nargv = {}\n",
            toml_str(&script.display().to_string()),
            argv_pattern(&stage.path("hooked"))
        ),
    );
    if let Some(_d) = start(&mut f, dir.path(), &text) {
        let mut hog = Proc::spawn({
            let mut c = as_user(ATTACKER, &link);
            c.args(["--rate", "max", "--max", "128MiB"]);
            c
        });
        hog.expect_line("ready", Duration::from_secs(20));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !out.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        match std::fs::read(&out) {
            Ok(env) => check_hook_env(&mut f, &env, hog.pid()),
            Err(e) => f.fail(format!("the hook did not run within 30 s ({e})")),
        }
    }

    // A root-owned interpreter running a script the attacker can write.
    let bin = dir.path().join("attacker-bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let user_script = bin.join("save.sh");
    std::fs::write(&user_script, "#!/bin/sh\nexit 0\n").expect("write");
    chmod(&user_script, 0o755);
    let attacker = uid_of(ATTACKER);
    chown(&bin, attacker);
    chown(&user_script, attacker);
    let refused_dir = dir.path().join("refused");
    std::fs::create_dir(&refused_dir).expect("mkdir");
    let cfg = refused_dir.join("headroom.toml");
    std::fs::write(
        &cfg,
        config(
            &refused_dir,
            &format!(
                "[[rule]]\nname = \"save\"\nfootprint = \"1TiB\"\nactions = [{{ hook = [\"/bin/sh\", {}] }}]\n",
                toml_str(&user_script.display().to_string())
            ),
        ),
    )
    .expect("write config");
    let shown = user_script.display().to_string();
    let check = Command::new(HEADROOM)
        .arg("check-config")
        .arg(&cfg)
        .output()
        .expect("headroom check-config");
    let said = String::from_utf8_lossy(&check.stderr);
    f.check(
        check.status.code() == Some(2) && said.contains(&shown),
        || {
            format!(
                "`headroom check-config` as root must refuse a hook running {shown} (owned by \
             {ATTACKER}) with exit 2 naming it; got exit {:?}: {said}",
                check.status.code()
            )
        },
    );
    let run = Command::new("timeout")
        .arg("15")
        .arg(HEADROOM)
        .args(["run", "--listen", "127.0.0.1:0", "--config"])
        .arg(&cfg)
        .output()
        .expect("timeout headroom run");
    let said = String::from_utf8_lossy(&run.stderr);
    f.check(run.status.code() == Some(2) && said.contains(&shown), || {
        format!(
            "`headroom run` as root must refuse a hook running {shown} (owned by {ATTACKER}) with \
             exit 2 naming it; got exit {:?} (124: it ran until killed): {}",
            run.status.code(),
            said.lines().take(5).collect::<Vec<_>>().join("\n")
        )
    });
    f.finish();
}

/// The hook's environment (`/proc/<pid>/environ`): only the documented fixed
/// `PATH`, `HOME=/` and `LANG=C.UTF-8` of a root daemon, and documented
/// `HEADROOM_*` variables: none of the daemon's own, no raw control bytes;
/// `HEADROOM_PID` names the hog.
fn check_hook_env(f: &mut Findings, environ: &[u8], hog_pid: u32) {
    let vars: Vec<(String, String)> = environ
        .split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| {
            let v = String::from_utf8_lossy(v);
            match v.split_once('=') {
                Some((k, val)) => (k.to_string(), val.to_string()),
                None => (v.to_string(), String::new()),
            }
        })
        .collect();
    let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
    f.note(format!("hook environment: {}", names.join(" ")));
    let undocumented: Vec<&str> = names
        .iter()
        .copied()
        .filter(|k| !matches!(*k, "PATH" | "HOME" | "LANG") && !k.starts_with("HEADROOM_"))
        .collect();
    f.check(undocumented.is_empty(), || {
        format!(
            "the hook got {} variable(s) that are neither PATH, HOME, LANG nor HEADROOM_* (the \
             daemon's own environment): {}",
            undocumented.len(),
            undocumented.join(" ")
        )
    });
    for (key, value) in &vars {
        f.check(key != LEAK_VAR, || {
            format!("the daemon's own {LEAK_VAR}={value} leaked into the hook's environment")
        });
        let raw = control_bytes(value);
        f.check(raw.is_empty() && !value.contains('\n'), || {
            format!("{key} reaches the hook with raw control bytes: {value:?}")
        });
    }
    for (key, fixed) in [("HOME", "/"), ("LANG", "C.UTF-8")] {
        if let Some((_, value)) = vars.iter().find(|(k, _)| k == key) {
            f.check(value == fixed, || {
                format!("{key} is {value:?} in the hook, not the documented {fixed:?}")
            });
        }
    }
    match vars.iter().find(|(k, _)| k == "PATH") {
        Some((_, path)) => f.check(!path.contains("nonexistent-attacker-bin"), || {
            format!("the hook inherited the daemon's PATH {path:?} instead of a fixed one")
        }),
        None => f.fail("the hook has no PATH (a fixed one is documented)".into()),
    }
    let pid = vars
        .iter()
        .find(|(k, _)| k == "HEADROOM_PID")
        .map(|(_, v)| v.clone());
    f.check(pid == Some(hog_pid.to_string()), || {
        format!("HEADROOM_PID is {pid:?}, not the hog's {hog_pid}")
    });
}

// ---------------------------------------------------------------------------
// What the HTTP surface shows
// ---------------------------------------------------------------------------

#[test]
fn the_api_shows_the_attacker_no_hook_arguments_and_no_one_elses_argv() {
    let session = begin("API redaction");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    let text = config(
        dir.path(),
        "[[rule]]\nname = \"never\"\nfootprint = \"1TiB\"\n\
         actions = [{ hook = [\"/bin/true\", \"secret-token-XYZ\"] }]\n",
    );
    // A root process with a secret on its command line.
    let mut secret = Command::new("/bin/sh");
    secret.args(["-c", "sleep 100000; :", "sh", "secret-argv-XYZ"]);
    let secret = Proc::spawn(secret);
    if let Some(d) = start(&mut f, dir.path(), &text) {
        std::thread::sleep(Duration::from_millis(2500));
        let get = |path: &str| -> (String, String) {
            let out = attacker_python(&stage, &["get", &d.url(path)])
                .output()
                .expect("attacker get");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            match text.split_once('\n') {
                Some((status, body)) => (status.to_string(), body.to_string()),
                None => (text, String::from_utf8_lossy(&out.stderr).into_owned()),
            }
        };
        let (status, config) = get("/api/v1/config");
        f.check(status == "200", || {
            format!("GET /api/v1/config as {ATTACKER}: {status} {config}")
        });
        f.check(!config.contains("secret-token-XYZ"), || {
            format!(
                "{ATTACKER} reads a hook's argument in /api/v1/config: {}",
                excerpt(&config, "secret-token-XYZ")
            )
        });
        f.check(config.contains("[redacted]"), || {
            format!(
                "/api/v1/config as {ATTACKER} shows no \"[redacted]\" hook argument: {}",
                excerpt(&config, "hook")
            )
        });
        let (status, snapshot) = get("/api/v1/snapshot");
        f.check(status == "200", || {
            format!("GET /api/v1/snapshot as {ATTACKER}: {status}")
        });
        f.check(!snapshot.contains("secret-argv-XYZ"), || {
            format!(
                "{ATTACKER} reads root's argv in /api/v1/snapshot: {}",
                excerpt(&snapshot, "secret-argv-XYZ")
            )
        });
        let entry = serde_json::from_str::<serde_json::Value>(&snapshot)
            .ok()
            .and_then(|v| {
                v["processes"]
                    .as_array()?
                    .iter()
                    .find(|p| p["pid"].as_u64() == Some(u64::from(secret.pid())))
                    .cloned()
            });
        match entry {
            Some(p) => f.check(
                p["argv"].as_array().is_some_and(Vec::is_empty) && p["exe"].is_null(),
                || {
                    format!(
                        "root's process as {ATTACKER} sees it: argv {} exe {}",
                        p["argv"], p["exe"]
                    )
                },
            ),
            None => f.note(format!(
                "root's pid {} is not in the attacker's snapshot",
                secret.pid()
            )),
        }
        // Positive control: root sees the marker.
        let (_, as_root) = support::get(&d.url("/api/v1/snapshot"));
        f.check(as_root.contains("secret-argv-XYZ"), || {
            "root's own snapshot lacks the root process's argv: the daemon did not read it, so its \
             absence above proves nothing"
                .into()
        });
    }
    f.finish();
}

/// Up to 200 characters around `needle` in `text`.
fn excerpt(text: &str, needle: &str) -> String {
    let at = text.find(needle).unwrap_or(0);
    let before: String = text[..at].chars().rev().take(100).collect();
    let after: String = text[at..].chars().take(100).collect();
    format!("{}{after}", before.chars().rev().collect::<String>())
}

/// The status code of a raw `GET /healthz` with `Host: host`.
fn status_for_host(d: &RootDaemon, host: &str) -> Result<u16, String> {
    let mut s = TcpStream::connect(d.addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status line in {text:?}"))
}

#[test]
fn host_headers_naming_another_host_are_misdirected() {
    let session = begin("Host header confusion");
    let mut f = Findings::new(&session);
    let dir = private_dir();
    if let Some(d) = start(&mut f, dir.path(), &config(dir.path(), "")) {
        let port = d.addr.port();
        for (host, want) in [
            ("localhost:9717@evil.com".to_string(), 421),
            ("[::1]evil.com".to_string(), 421),
            (format!("localhost:{port}"), 200),
            (format!("127.0.0.1:{port}"), 200),
        ] {
            let got = status_for_host(&d, &host);
            f.check(got == Ok(want), || {
                format!("Host: {host} answered {got:?}, not {want}")
            });
        }
    }
    f.finish();
}

// ---------------------------------------------------------------------------
// Policy: protection by name, process groups
// ---------------------------------------------------------------------------

#[test]
fn a_users_process_named_sshd_is_not_protected() {
    let session = begin("hog named sshd");
    let mut f = Findings::new(&session);
    // An ordinary account: the protected names still cover system accounts.
    ensure_user(REGULAR_ATTACKER, false);
    let stage = Stage::new();
    let dir = private_dir();
    let link = stage.hog_link("sshd-home", "sshd");
    let text = config(dir.path(), &hog_rule(&link, Some(REGULAR_ATTACKER)));
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        let mut hog = hog_as(REGULAR_ATTACKER, &link);
        let (_, ready) = hog.expect_line("ready", Duration::from_secs(20));
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", hog.pid())).unwrap_or_default();
        f.note(format!(
            "{ready}: process name {:?}, uid {}",
            comm.trim(),
            uid_of(REGULAR_ATTACKER)
        ));
        assert_eq!(comm.trim(), "sshd", "the hog runs under the name sshd");
        match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
            Ok(r) => f.note(format!(
                "signalled {:.0} MiB past the limit",
                r.past_limit_mib
            )),
            Err(why) => {
                let said: Vec<String> = d
                    .log_text()
                    .lines()
                    .filter(|l| l.contains("hog-limit") || l.contains("protect"))
                    .take(5)
                    .map(str::to_string)
                    .collect();
                f.fail(format!(
                    "{REGULAR_ATTACKER}'s hog named sshd escaped the SIGTERM rule: {why}\nthe daemon said:\n{}",
                    said.join("\n")
                ));
            }
        }
    }
    f.finish();
}

#[test]
fn a_group_signal_spares_the_groups_root_member() {
    let session = begin("process group with a root member");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    let link = stage.hog_link("group", "hog-group");
    let text = config(
        dir.path(),
        &format!(
            "[[rule]]\nname = \"group-limit\"\nfootprint = \"{}MiB\"\nother_users = true\nroot = false\n\
             cooldown = \"1h\"\nactions = [{{ signal = \"SIGTERM\", process_group = true }}]\n\
             [rule.match]\nargv = {}\n",
            LIMIT / MIB,
            argv_pattern(&link)
        ),
    );
    if let Some(_d) = start(&mut f, dir.path(), &text) {
        // Root starts a group: a root `sleep`, then the attacker's hog as its leader.
        let mut group = Command::new("/bin/sh");
        group
            .arg("-c")
            .arg(format!(
                "sleep 100000 >/dev/null 2>&1 & echo \"root-member $!\"; \
                 exec setpriv --reuid={ATTACKER} --regid={ATTACKER} --init-groups -- \"$0\" \
                 --rate 100MiB/s --max 1GiB --catch TERM"
            ))
            .arg(&link);
        let mut hog = Proc::spawn(group);
        let (_, line) = hog.expect_line("root-member", Duration::from_secs(20));
        let root_member: u32 = line["root-member ".len()..].trim().parse().expect("pid");
        let stat = std::fs::read_to_string(format!("/proc/{root_member}/stat")).unwrap_or_default();
        let pgid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .and_then(|p| p.parse::<u32>().ok());
        assert_eq!(
            pgid,
            Some(hog.pid()),
            "the root sleep is in the hog's process group"
        );
        match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
            Ok(r) => f.note(format!(
                "the hog was signalled {:.0} MiB past the limit",
                r.past_limit_mib
            )),
            Err(why) => f.fail(format!("the hog leading the group: {why}")),
        }
        std::thread::sleep(Duration::from_secs(2));
        f.check(alive(root_member), || {
            format!(
                "root's sleep (pid {root_member}) in the attacker's process group {} died: a \
                 rule with root = false signalled it through the group",
                hog.pid()
            )
        });
    }
    f.finish();
}

// ---------------------------------------------------------------------------
// Untrusted text in logs and the journal
// ---------------------------------------------------------------------------

/// Raw escape or bell bytes, or a line forged by a newline in `name`, in
/// `text` (a log or `headroom events` output).
fn forged(text: &str, what: &str) -> Vec<String> {
    let mut found = Vec::new();
    let raw = control_bytes(text);
    if !raw.is_empty() {
        found.push(format!("{what} holds raw control characters {raw:?}"));
    }
    for line in text.lines() {
        let bare = line.trim_start_matches('\u{7}');
        if bare.starts_with("<b>") || (line.contains("<b>") && !line.contains("RED")) {
            found.push(format!(
                "{what} has a line forged by the process name: {line:?}"
            ));
        }
    }
    found
}

#[test]
fn a_process_name_with_escapes_and_newlines_forges_nothing() {
    let session = begin("control bytes in a process name");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    let link = stage.hog_link("ctl", "\u{1b}[31mRED\n\u{7}<b>");
    let text = config(
        dir.path(),
        &format!(
            "[[rule]]\nname = \"odd-name\"\nfootprint = \"64MiB\"\nother_users = true\ndry_run = true\n\
             cooldown = \"1h\"\nactions = [{{ notify = true }}]\n[rule.match]\nargv = {}\n",
            argv_pattern(&stage.path("ctl"))
        ),
    );
    let journal = dir.path().join("journal.jsonl");
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        let mut hog = Proc::spawn({
            let mut c = as_user(ATTACKER, &link);
            c.args(["--rate", "max", "--max", "128MiB"]);
            c
        });
        hog.expect_line("ready", Duration::from_secs(20));
        let needle = format!("\"pid\":{}", hog.pid());
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut journaled = false;
        while !journaled && Instant::now() < deadline {
            journaled = std::fs::read_to_string(&journal).is_ok_and(|j| j.contains(&needle));
            std::thread::sleep(Duration::from_millis(200));
        }
        f.check(journaled, || {
            format!(
                "no journal event for the hog (pid {}) within 30 s",
                hog.pid()
            )
        });
        std::thread::sleep(Duration::from_secs(1));
        let log = d.log_text();
        for problem in forged(&log, "the daemon's log") {
            f.fail(problem);
        }
        let events = Command::new(HEADROOM)
            .args(["events", "--journal"])
            .arg(&journal)
            .output()
            .expect("headroom events");
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&events.stdout),
            String::from_utf8_lossy(&events.stderr)
        );
        f.check(
            events.status.success() && shown.contains("odd-name"),
            || format!("`headroom events` shows no event of rule odd-name: {shown}"),
        );
        for problem in forged(&shown, "`headroom events`") {
            f.fail(problem);
        }
    }
    f.finish();
}

/// `MemAvailable` now, bytes.
fn mem_available() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").expect("read /proc/meminfo");
    text.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .expect("MemAvailable")
        * 1024
}

/// Removes a file when dropped, also when the test fails.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn memory_no_process_owns_steers_no_machine_wide_rule_onto_an_innocent_process() {
    let session = begin("unowned memory: /dev/shm blob against available_below + largest");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    ensure_user(REGULAR_ATTACKER, false);
    // The victim's process: the largest of its user, holding 300 MiB and
    // catching SIGTERM (it says so if one comes).
    let link = stage.hog_link("victim", "victim-work");
    let mut victim = Proc::spawn({
        let mut c = as_user(REGULAR_ATTACKER, &link);
        c.args(["--rate", "max", "--max", "300MiB", "--catch", "TERM"]);
        c
    });
    victim.expect_line("holding", Duration::from_secs(30));
    // The attacker fills /dev/shm with a file nobody maps.
    const BLOB: u64 = 3 << 30;
    let before = mem_available();
    let blob = Path::new("/dev/shm").join(format!("headroom-attack-blob-{}", std::process::id()));
    let _removed = RemovedOnDrop(blob.clone());
    let out = as_user(ATTACKER, Path::new("fallocate"))
        .args(["-l", &BLOB.to_string()])
        .arg(&blob)
        .output()
        .expect("fallocate as the attacker");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = mem_available();
    f.note(format!(
        "MemAvailable {} MiB before the blob, {} MiB after",
        before / MIB,
        after / MIB
    ));
    // The rule holds by 1 GiB: the blob (3 GiB) holds all of the shortfall.
    let threshold = after + (1 << 30);
    let text = config(
        dir.path(),
        &format!(
            "[[rule]]\nname = \"low\"\nselect = \"largest\"\nother_users = true\ncooldown = \"5s\"\n\
             actions = [{{ signal = \"SIGTERM\" }}]\n[rule.when]\navailable_below = \"{}MiB\"\n",
            threshold / MIB
        ),
    );
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        let said = d.wait_log("memory no process owns", Duration::from_secs(20));
        f.check(said.is_some(), || {
            format!(
                "the daemon never said why it held back; its log:\n{}",
                d.log_tail(30)
            )
        });
        if let Some(line) = &said {
            f.note(format!("the daemon said: {line}"));
            f.check(line.contains(&*blob.display().to_string()), || {
                format!("the log line does not name the file: {line}")
            });
            f.check(line.contains(ATTACKER), || {
                format!("the log line does not name its owner: {line}")
            });
        }
        // Several cooldowns: no victim, ever.
        std::thread::sleep(Duration::from_secs(12));
        victim.drain();
        f.check(victim.last("signal SIGTERM").is_none(), || {
            "the victim's largest process was sent SIGTERM".into()
        });
        let acted = d.log_text();
        f.check(!acted.contains("sent SIGTERM"), || {
            format!("the daemon signalled a process:\n{}", d.log_tail(30))
        });
        // Metrics and explain name the owner too.
        let metrics = support::get(&format!("http://{}/metrics", d.addr)).1;
        f.check(
            metrics.lines().any(|l| {
                l.starts_with("headroom_tmpfs_file_bytes")
                    && l.contains(&*blob.display().to_string())
                    && l.contains(ATTACKER)
            }),
            || "no headroom_tmpfs_file_bytes series names the blob and its owner".into(),
        );
        let explain = Command::new(HEADROOM)
            .args(["explain", &victim.pid().to_string(), "--address"])
            .arg(d.addr.to_string())
            .output()
            .expect("headroom explain");
        let said = String::from_utf8_lossy(&explain.stdout);
        f.check(
            said.contains("memory no process owns") && said.contains(ATTACKER),
            || {
                format!(
                    "explain does not name the unowned memory and its owner:\n{said}{}",
                    String::from_utf8_lossy(&explain.stderr)
                )
            },
        );
        f.check(d.running(), || "the daemon stopped".into());
    }
    victim.kill();
    f.finish();
}

// ---------------------------------------------------------------------------
// Kernel-log records an unprivileged user can provoke (a crash in a file
// named like the OOM killer's lines), and post-mortems of a process that
// handles SIGTERM
// ---------------------------------------------------------------------------

/// The attacker's crashing program: a read of address 0.
const CRASH_AT_ZERO_C: &str = "int main(void) { return *(volatile int *)0; }\n";

/// `program` run as the account-less uid `uid`, with no supplementary
/// groups: the victim's side.
fn as_uid(uid: u32, program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={uid}"),
        &format!("--regid={uid}"),
        "--clear-groups",
        "--",
    ])
    .arg(program);
    c
}

/// Every event of the journal at `path` (a line that does not parse is left
/// out: the daemon may be writing it).
fn journal_events(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The post-mortem (`exited` event) of `pid` in the journal, once written.
fn postmortem_of(journal: &Path, pid: u32, within: Duration) -> Option<serde_json::Value> {
    let deadline = Instant::now() + within;
    loop {
        let found = journal_events(journal)
            .into_iter()
            .find(|e| e["event"] == "exited" && e["process"]["pid"] == pid);
        if found.is_some() || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The journal's actions: `(pid, action, outcome)`.
fn journal_actions(journal: &Path) -> Vec<(u64, String, String)> {
    journal_events(journal)
        .into_iter()
        .filter(|e| e["event"] == "action")
        .map(|e| {
            (
                e["process"]["pid"].as_u64().unwrap_or(0),
                e["action"].as_str().unwrap_or("").to_string(),
                e["outcome"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The journal has `SIGTERM` delivered to `pid`, and no action on any other
/// process (the rule matches only the hog).
fn journal_keeps_only_the_hogs_sigterm(f: &mut Findings, journal: &Path, pid: u32) {
    let actions = journal_actions(journal);
    f.check(
        actions
            .iter()
            .any(|(p, a, o)| *p == u64::from(pid) && a == "SIGTERM" && o == "done"),
        || format!("the journal lacks the SIGTERM delivered to the hog (pid {pid}): {actions:?}"),
    );
    let others: Vec<_> = actions
        .iter()
        .filter(|(p, _, _)| *p != u64::from(pid))
        .collect();
    f.check(others.is_empty(), || {
        format!("the daemon acted on processes other than the hog: {others:?}")
    });
}

/// `headroom events`' post-mortem line for `pid`.
fn postmortem_line(journal: &Path, pid: u32) -> Option<String> {
    let out = Command::new(HEADROOM)
        .args(["events", "--journal"])
        .arg(journal)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains("post-mortem") && l.contains(&format!("(pid {pid}")))
        .map(str::to_string)
}

/// The kernel log from the moment it was opened: the test reads it as root
/// to see that the kernel logged what the attacker provoked.
struct KernelLogSince(std::fs::File);

impl KernelLogSince {
    fn open() -> KernelLogSince {
        use std::io::Seek as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/kmsg")
            .expect("open /dev/kmsg as root");
        file.seek(std::io::SeekFrom::End(0))
            .expect("seek /dev/kmsg");
        KernelLogSince(file)
    }

    /// The records logged since the last call.
    fn read(&mut self) -> Vec<String> {
        let mut records = Vec::new();
        let mut buf = vec![0u8; 8192];
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => return records,
                Ok(n) => records.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
                Err(_) => return records,
            }
        }
    }
}

/// `name` as a file of the attacker's holding the crashing program, run
/// through a link named `crash` until the kernel logs the crash (it logs
/// about ten faults in five seconds, all users together). The record, if
/// logged.
fn crash_in_file_named(
    stage: &Stage,
    program: &Path,
    name: &str,
    log: &mut KernelLogSince,
) -> Option<String> {
    let dir = stage.path("forge");
    for _ in 0..4 {
        let _ = as_user(ATTACKER, Path::new("/bin/sh"))
            .args([
                "-c",
                "mkdir -p \"$1\" && cp \"$0\" \"$1/$2\" && ln -sfn \"$1/$2\" \"$1/crash\" && exec \"$1/crash\"",
            ])
            .arg(program)
            .arg(&dir)
            .arg(name)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        std::thread::sleep(Duration::from_millis(300));
        if let Some(r) = log.read().into_iter().find(|r| r.contains(name)) {
            return Some(r);
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    None
}

/// The `attack-figures` line of an attack with no flood to compare: the
/// daemon's peak memory before and after, and the hog's reaction during it.
fn reaction_figures(f: &Findings, base_hwm: u64, hwm: u64, reaction: Option<&Reaction>) {
    let fmt = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v:.0}"));
    f.figures(&[
        ("hwm_base_mib", format!("{:.1}", mib(base_hwm))),
        ("hwm_attack_mib", format!("{:.1}", mib(hwm))),
        ("past_attack_mib", fmt(reaction.map(|r| r.past_limit_mib))),
        ("ms_attack", fmt(reaction.map(|r| r.ms_after_crossing))),
    ]);
}

/// The value of the Prometheus series `name{labels}` in `text`.
fn series_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn a_crash_in_a_file_named_like_a_kill_line_forges_no_oom_postmortem() {
    let session = begin("crash in a file named like an OOM kill line");
    let mut f = Findings::new(&session);
    let trace = std::fs::read_to_string("/proc/sys/debug/exception-trace").unwrap_or_default();
    assert_eq!(
        trace.trim(),
        "1",
        "debug.exception-trace is {:?}: the kernel logs no fault lines, so the attack cannot be \
         replayed; `sysctl debug.exception-trace=1` turns them on",
        trace.trim()
    );
    let stage = Stage::new();
    let dir = private_dir();
    let journal = dir.path().join("journal.jsonl");
    // The attacker's program, built here, copied by the attacker under the
    // names below.
    let source = stage.path("crash.c");
    std::fs::write(&source, CRASH_AT_ZERO_C).expect("write crash.c");
    let program = stage.path("crash-at-zero");
    let built = Command::new(support::tool("cc", "CC", "gcc"))
        .args(["-O0", "-o"])
        .arg(&program)
        .arg(&source)
        .status()
        .expect("run cc");
    assert!(built.success(), "cc failed to build {}", program.display());
    chmod(&program, 0o755);
    let forge = stage.path("forge");
    std::fs::create_dir(&forge).expect("mkdir forge");
    chown(&forge, uid_of(ATTACKER));
    chmod(&forge, 0o755);
    // The victim: another user's Jupyter kernel (a fake one), watched from
    // its first sample.
    let kernels = stage.path("victim");
    std::fs::create_dir(&kernels).expect("mkdir victim");
    chmod(&kernels, 0o755);
    let connection = kernels.join("kernel-forged-oom.json");
    std::fs::write(&connection, "{}\n").expect("write connection file");
    chmod(&connection, 0o644);
    let link = stage.hog_link("hogs", "hog-limit");
    let text = config(dir.path(), &hog_rule(&link, Some(ATTACKER)));
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        let base_hwm = d.hwm();
        let mut victim = Proc::spawn({
            let mut c = as_uid(VICTIM_UID, Path::new("/usr/bin/tail"));
            c.arg("-f").arg(&connection);
            c
        });
        let pid = victim.pid();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut listed = false;
        while !listed && Instant::now() < deadline {
            let (status, body) = support::get(&d.url(&format!("/api/v1/processes/{pid}")));
            listed = status == 200 && body.contains("\"jupyter\"");
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(
            listed,
            "the daemon never listed the victim's kernel (pid {pid})"
        );
        // The attack, while the attacker's own hog crosses its rule: a
        // crash in a file named like the oom-kill line, then one named like
        // the kill line, both naming the victim's pid, command and uid (a
        // file name holds no `/`: the cgroups are named without).
        let mut hog = hog_as(ATTACKER, &link);
        let mut log = KernelLogSince::open();
        let names = [
            format!(
                "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=user.slice,mems_allowed=0,global_oom,task_memcg=user.slice,task=tail,pid={pid},uid={VICTIM_UID}"
            ),
            format!(
                "Out of memory: Killed process {pid} (tail) total-vm:20971520kB, anon-rss:20971520kB, file-rss:0kB, shmem-rss:0kB, UID:{VICTIM_UID} pgtables:40960kB oom_score_adj:0"
            ),
        ];
        for name in &names {
            match crash_in_file_named(&stage, &program, name, &mut log) {
                Some(record) => f.note(format!("the kernel logged: {}", record.trim_end())),
                None => f.fail(format!(
                    "the kernel logged no crash in the file {name:?} in 4 tries (rate limit?): the \
                     attack was not replayed"
                )),
            }
        }
        let reaction = await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN);
        match &reaction {
            Ok(r) => f.note(format!(
                "the attacker's hog was signalled {:.0} MiB past the limit, {:.0} ms after crossing",
                r.past_limit_mib, r.ms_after_crossing
            )),
            Err(why) => f.fail(format!("the attacker's hog during the attack: {why}")),
        }
        let hog_pid = hog.pid();
        drop(hog);
        // The daemon reads the records with its next samples; then the
        // victim ends its kernel with SIGTERM (left a zombie: its exit
        // status is there to read).
        std::thread::sleep(Duration::from_secs(3));
        let killed = as_uid(VICTIM_UID, Path::new("/bin/kill"))
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill as the victim");
        assert!(killed.success(), "the victim could not SIGTERM its kernel");
        match postmortem_of(&journal, pid, Duration::from_secs(30)) {
            None => f.fail(format!(
                "no post-mortem of the victim's kernel (pid {pid}) within 30 s; the daemon's log:\n{}",
                d.log_tail(20)
            )),
            Some(ended) => {
                let cause = &ended["cause"];
                f.note(format!(
                    "the victim's post-mortem: {} ({})",
                    cause["kind"], cause["how"]
                ));
                f.check(cause["kind"] != "oom-killer", || {
                    format!("the forged record made the victim's post-mortem say OOM killer: {cause}")
                });
                let words = cause.to_string();
                f.check(
                    !words.contains("Killed process") && !words.contains("20.0 GiB"),
                    || format!("the victim's post-mortem quotes the forged record: {cause}"),
                );
            }
        }
        if let Some(line) = postmortem_line(&journal, pid) {
            f.check(!line.contains("OOM killer"), || {
                format!("`headroom events` says the OOM killer ended the victim's kernel: {line}")
            });
        }
        // The metric counts only real OOM post-mortems (other tests on this
        // machine may provoke some), never the victim's.
        let others = journal_events(&journal)
            .iter()
            .filter(|e| {
                e["event"] == "exited"
                    && e["cause"]["kind"] == "oom-killer"
                    && e["process"]["pid"] != pid
            })
            .count();
        let metrics = support::get(&d.url("/metrics")).1;
        let counted = series_value(
            &metrics,
            "headroom_process_exits_total{cause=\"oom-killer\"}",
        );
        f.check(counted == Some(others as f64), || {
            format!(
                "headroom_process_exits_total{{cause=\"oom-killer\"}} is {counted:?}: it counts \
                 the victim's kernel (the journal holds {others} OOM post-mortems of other processes)"
            )
        });
        // What the attacker reads of the victim's end: no forged OOM kill.
        let out = attacker_python(&stage, &["get", &d.url("/api/v1/events")])
            .output()
            .expect("attacker get");
        let events = String::from_utf8_lossy(&out.stdout);
        let shown = events
            .split_once('\n')
            .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(body).ok())
            .and_then(|v| {
                let list = v
                    .as_array()
                    .cloned()
                    .or_else(|| v["events"].as_array().cloned())?;
                list.into_iter()
                    .find(|e| e["event"] == "exited" && e["process"]["pid"] == pid)
            });
        match shown {
            Some(e) => {
                f.note(format!(
                    "{ATTACKER} reads the victim's end as {}",
                    e["cause"]["kind"]
                ));
                f.check(e["cause"]["kind"] != "oom-killer", || {
                    format!("{ATTACKER} reads a forged OOM kill of the victim's kernel: {e}")
                });
            }
            None => f.note(format!(
                "{ATTACKER}'s /api/v1/events holds no post-mortem of the victim's kernel"
            )),
        }
        journal_keeps_only_the_hogs_sigterm(&mut f, &journal, hog_pid);
        let hwm = memory_bounded(&mut f, &d, base_hwm);
        reaction_figures(&f, base_hwm, hwm, reaction.as_ref().ok());
        f.check(d.running(), || "the daemon stopped".into());
        victim.kill();
    }
    f.finish();
}

#[test]
fn a_process_that_handles_sigterm_and_exits_later_is_ended_by_headroom_s_sigterm() {
    let session = begin("hog that handles SIGTERM and exits 1.5 s later");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    let journal = dir.path().join("journal.jsonl");
    let link = stage.hog_link("graceful", "graceful-hog");
    let text = config(dir.path(), &hog_rule(&link, Some(ATTACKER)));
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        let base_hwm = d.hwm();
        // The hog catches SIGTERM, stops growing and exits 1.5 s later.
        let mut hog = Proc::spawn({
            let mut c = as_user(ATTACKER, &link);
            c.args([
                "--rate",
                crate::support::attack::HOG_RATE,
                "--max",
                crate::support::attack::HOG_MAX,
                "--catch",
                "TERM",
                "--hold",
                "1500ms",
            ]);
            c
        });
        let pid = hog.pid();
        let reaction = await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN);
        match &reaction {
            Ok(r) => f.note(format!(
                "signalled {:.0} MiB past the limit, {:.0} ms after crossing",
                r.past_limit_mib, r.ms_after_crossing
            )),
            Err(why) => f.fail(format!("the hog: {why}")),
        }
        // Reaped at once, as a shell or a supervisor would: no exit status
        // is left for the daemon to read.
        match hog.wait_exit(Duration::from_secs(10)) {
            Some(status) => f.note(format!("the hog ended: {status}")),
            None => f.fail(format!(
                "the hog did not exit within 10 s of SIGTERM: {}",
                hog.output()
            )),
        }
        match postmortem_of(&journal, pid, Duration::from_secs(30)) {
            None => f.fail(format!(
                "no post-mortem of the hog (pid {pid}) within 30 s; the daemon's log:\n{}",
                d.log_tail(20)
            )),
            Some(ended) => {
                let cause = &ended["cause"];
                let how = cause["how"].as_str().unwrap_or_default();
                f.note(format!("post-mortem: {} ({how})", cause["kind"]));
                f.check(cause["kind"] == "signal-by-headroom", || {
                    format!("the hog's end was not put down to headroom's SIGTERM: {cause}")
                });
                f.check(
                    how.contains("SIGTERM") && !how.contains("no signal"),
                    || {
                        format!(
                            "the post-mortem's How contradicts the SIGTERM the journal holds: {how}"
                        )
                    },
                );
            }
        }
        match postmortem_line(&journal, pid) {
            Some(line) => {
                f.note(format!("headroom events: {line}"));
                f.check(
                    line.contains("ended by headroom's SIGTERM (rule \"hog-limit\", step 1)")
                        && !line.contains("no signal"),
                    || format!("`headroom events` contradicts itself: {line}"),
                );
            }
            None => f.fail("`headroom events` shows no post-mortem of the hog".into()),
        }
        journal_keeps_only_the_hogs_sigterm(&mut f, &journal, pid);
        let hwm = memory_bounded(&mut f, &d, base_hwm);
        reaction_figures(&f, base_hwm, hwm, reaction.as_ref().ok());
        f.check(d.running(), || "the daemon stopped".into());
    }
    f.finish();
}
