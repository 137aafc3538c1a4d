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

/// A hog's reaction under attack against the baseline's: at most
/// [`REACTION_FACTOR`] times as far past the limit and as late, plus a slack.
fn reaction_within_bounds(f: &mut Findings, base: Reaction, r: Reaction) {
    let bound_mib = REACTION_FACTOR * base.past_limit_mib.max(0.0) + REACTION_SLACK_MIB;
    f.check(r.past_limit_mib <= bound_mib, || {
        format!(
            "under attack the hog got {:.0} MiB past the limit before SIGTERM, more than \
             {REACTION_FACTOR}× the baseline's {:.0} MiB + {REACTION_SLACK_MIB} MiB = {bound_mib:.0} MiB",
            r.past_limit_mib, base.past_limit_mib
        )
    });
    let bound_ms = REACTION_FACTOR * base.ms_after_crossing + REACTION_SLACK_MS;
    f.check(r.ms_after_crossing <= bound_ms, || {
        format!(
            "under attack SIGTERM came {:.0} ms after the hog crossed the limit, more than \
             {REACTION_FACTOR}× the baseline's {:.0} ms + {REACTION_SLACK_MS} ms = {bound_ms:.0} ms",
            r.ms_after_crossing, base.ms_after_crossing
        )
    });
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
            reaction_within_bounds(f, base.reaction, r);
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
// The HTTP port taken before the daemon starts: a squatter serving a
// doctored snapshot must neither keep the daemon from enforcing nor pass for
// it with `headroom status` and `headroom explain`.
// ---------------------------------------------------------------------------

use crate::support::attack::status_bytes;

/// What the squatter writes into its doctored snapshot.
const SQUATTER_MARKER: &str = "doctored-by-the-port-squatter";

/// `headroom run` as root on `config`, told to listen on `listen` (as the
/// unit would, on its configured port), with the soft open-file limit
/// systemd gives a service; its log lines arrive through the [`Proc`].
fn squatted_daemon(config: &Path, listen: &str) -> Proc {
    let mut c = Command::new("prlimit");
    c.args([
        "--nofile=1024:",
        "--",
        HEADROOM,
        "run",
        "--listen",
        listen,
        "--config",
    ])
    .arg(config)
    .env("HEADROOM_LOG", "info");
    Proc::spawn(c)
}

/// A client command of `headroom` run as root (the daemon's user) against
/// `addr`: its exit code, stdout and stderr.
fn root_client(args: &[&str], addr: &str) -> (Option<i32>, String, String) {
    let out = Command::new("timeout")
        .args(["60", HEADROOM])
        .args(args)
        .args(["--address", addr])
        .output()
        .expect("run headroom as a client");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A client as root asked the squatter's port: it must refuse, naming the
/// port and the squatter's uid and user, print nothing of the doctored
/// snapshot, and say what to do.
fn refuses_the_squatter(f: &mut Findings, what: &str, args: &[&str], addr: &str, port: u16) {
    let attacker = uid_of(ATTACKER);
    let (code, stdout, stderr) = root_client(args, addr);
    f.note(format!(
        "`headroom {what}` at the squatted port: exit {code:?}: {}",
        stderr.trim()
    ));
    f.check(!stdout.contains(SQUATTER_MARKER), || {
        format!(
            "`headroom {what}` as root printed the snapshot of {ATTACKER}'s listener on port \
             {port} as the daemon's:\n{}",
            stdout.chars().take(400).collect::<String>()
        )
    });
    f.check(code == Some(1), || {
        format!(
            "`headroom {what}` as root at port {port}, held by {ATTACKER} (uid {attacker}), \
             exited {code:?}, not 1 (a refusal); stdout:\n{}\nstderr:\n{stderr}",
            stdout.chars().take(400).collect::<String>()
        )
    });
    f.check(
        stderr.contains(&port.to_string())
            && stderr.contains(&format!("uid {attacker}"))
            && stderr.contains(ATTACKER),
        || {
            format!(
                "`headroom {what}`'s refusal does not name port {port}, uid {attacker} and \
                 user {ATTACKER}: {stderr}"
            )
        },
    );
}

/// Every `action` event of the journal at `path`: the pid acted on, the
/// action and its outcome.
fn journaled_actions(path: &Path) -> Vec<(u64, String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "action")
        .map(|v| {
            (
                v["process"]["pid"].as_u64().unwrap_or(0),
                v["action"].as_str().unwrap_or_default().to_string(),
                v["outcome"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// `GET /healthz` at `addr` within a 1 s client timeout: the status and the
/// body, or why there was none.
fn healthz_at(addr: &str) -> Result<(u16, serde_json::Value), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(1)))
        .build()
        .into();
    let mut res = agent
        .get(&format!("http://{addr}/healthz"))
        .call()
        .map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    let body = res.body_mut().read_to_string().map_err(|e| e.to_string())?;
    Ok((status, serde_json::from_str(&body).unwrap_or_default()))
}

#[test]
fn a_squatted_http_port_neither_stops_enforcement_nor_passes_for_the_daemon() {
    let session = begin("HTTP port squatted before the daemon starts");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    // The attacker takes a port first and serves a doctored snapshot there.
    let mut squatter = Proc::spawn(attacker_python(&stage, &["squat", SQUATTER_MARKER]));
    let (_, line) = squatter.expect_line("port ", Duration::from_secs(30));
    let port: u16 = line["port ".len()..].trim().parse().expect("port");
    let addr = format!("127.0.0.1:{port}");
    // The daemon is configured for that port (as the unit runs it).
    let link = stage.hog_link("hogs", "hog-squat");
    let journal = dir.path().join("journal.jsonl");
    let cfg = dir.path().join("headroom.toml");
    std::fs::write(&cfg, config(dir.path(), &hog_rule(&link, None))).expect("write config");
    chmod(&cfg, 0o644);
    let mut daemon = squatted_daemon(&cfg, &addr);
    let sampling = daemon.wait_line("first sample:", Duration::from_secs(30));
    if sampling.is_none() {
        f.fail(format!(
            "the daemon did not sample with port {port} held by {ATTACKER} (running: {}; exit \
             {:?}); its log:\n{}",
            daemon.alive(),
            daemon.wait_exit(Duration::from_secs(1)),
            daemon.output()
        ));
    }
    // Root's clients refuse the squatter's answers, whether or not the
    // daemon runs.
    refuses_the_squatter(&mut f, "status", &["status", "--json"], &addr, port);
    let pid = squatter.pid().to_string();
    refuses_the_squatter(&mut f, "explain", &["explain", &pid], &addr, port);
    squatter.drain();
    let asked: Vec<String> = squatter
        .seen
        .iter()
        .filter(|(_, l)| l.starts_with("request "))
        .map(|(_, l)| l.clone())
        .collect();
    f.check(asked.is_empty(), || {
        format!(
            "root's clients sent {} request(s) to {ATTACKER}'s listener before refusing it:\n{}",
            asked.len(),
            asked.join("\n")
        )
    });
    if sampling.is_some() {
        let holder = daemon.last(&format!("cannot listen on {addr}"));
        f.note(format!("the daemon said: {holder:?}"));
        f.check(
            holder
                .as_deref()
                .is_some_and(|l| l.contains(&format!("uid {}", uid_of(ATTACKER)))),
            || {
                format!(
                    "the daemon's log does not say who holds {addr}:\n{}",
                    daemon.output()
                )
            },
        );
        let base_hwm = status_bytes(daemon.pid(), "VmHWM").unwrap_or(0);
        // Enforcement goes on while the port is held.
        let mut hog = hog_as(ATTACKER, &link);
        let reaction = match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
            Ok(r) => {
                f.note(format!(
                    "the hog was signalled {:.0} MiB past the limit, {:.0} ms after crossing, \
                     with the port squatted",
                    r.past_limit_mib, r.ms_after_crossing
                ));
                Some(r)
            }
            Err(why) => {
                f.fail(format!(
                    "the daemon did not act with its port squatted: {why}"
                ));
                None
            }
        };
        let hog_pid = u64::from(hog.pid());
        drop(hog);
        f.check(squatter.alive(), || {
            format!(
                "{ATTACKER}'s listener (pid {}), matched by no rule, died",
                squatter.pid()
            )
        });
        // The attacker lets go: the daemon binds the port and answers.
        squatter.kill();
        let released = Instant::now();
        let bound = daemon.wait_line(
            &format!("status page: http://{addr}/"),
            Duration::from_secs(30),
        );
        let bound_after = released.elapsed();
        f.check(bound.is_some(), || {
            format!(
                "the daemon did not listen on {addr} within 30 s of the port's release; its log:\n{}",
                daemon.output()
            )
        });
        if bound.is_some() {
            f.note(format!(
                "the daemon listened {} ms after the port was released",
                bound_after.as_millis()
            ));
            match healthz_at(&addr) {
                Ok((200, health)) => f.note(format!(
                    "/healthz: 200, {} samples, {} failed bind attempts",
                    health["samples"], health["http_bind_failures"]
                )),
                other => f.fail(format!("/healthz once the daemon listens: {other:?}")),
            }
            let (code, stdout, stderr) = root_client(&["status", "--json"], &addr);
            f.check(code == Some(0) && stdout.contains("\"processes\""), || {
                format!(
                    "`headroom status` as root refuses or fails the daemon itself: exit {code:?}, \
                     {stderr}"
                )
            });
        }
        // The journal holds the SIGTERM, and no action on anything else.
        std::thread::sleep(Duration::from_secs(1));
        let actions = journaled_actions(&journal);
        f.check(
            actions
                .iter()
                .any(|(p, a, o)| *p == hog_pid && a == "SIGTERM" && o == "done"),
            || format!("the journal lacks the hog's SIGTERM (pid {hog_pid}): {actions:?}"),
        );
        f.check(actions.iter().all(|(p, _, _)| *p == hog_pid), || {
            format!("the daemon acted on something besides the hog (pid {hog_pid}): {actions:?}")
        });
        let hwm = status_bytes(daemon.pid(), "VmHWM").unwrap_or(u64::MAX);
        f.check(hwm <= base_hwm + MEMORY_SLACK, || {
            format!(
                "the daemon's VmHWM went from {:.1} MiB to {:.1} MiB while retrying its port \
                 (bound: +{} MiB)",
                mib(base_hwm),
                mib(hwm),
                MEMORY_SLACK / MIB
            )
        });
        f.check(daemon.alive(), || "the daemon stopped".into());
        let fmt = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v:.0}"));
        f.figures(&[
            ("hwm_base_mib", format!("{:.1}", mib(base_hwm))),
            ("hwm_attack_mib", format!("{:.1}", mib(hwm))),
            ("past_attack_mib", fmt(reaction.map(|r| r.past_limit_mib))),
            ("ms_attack", fmt(reaction.map(|r| r.ms_after_crossing))),
            (
                "bind_after_release_ms",
                format!("{}", bound_after.as_millis()),
            ),
        ]);
    }
    daemon.kill();
    f.finish();
}

// ---------------------------------------------------------------------------
// Python processes whose /proc/PID/maps is hundreds of MB
// ---------------------------------------------------------------------------
//
// Any user can name a process `python3`, and the daemon lists the libraries
// of Python processes from their `maps` to find a framework. The attacker's
// processes each map one page of a file with a 3.8 KB path 65 000 times:
// 250 MB of `maps` each, which the kernel takes seconds to render. Read
// whole on the sampler's path, they blinded it (stale health, a fast hog
// signalled gigabytes late) and took the daemon's memory to hundreds of MB.

/// How fast the hogs of this attack grow: a blind second is 500 MiB.
const MAPS_HOG_RATE: &str = "500MiB/s";
/// How far they may grow, so that a late signal shows how late.
const MAPS_HOG_MAX: &str = "3GiB";
/// The attacker's processes, their mappings each, and the length of the
/// mapped file's path.
const MAPS_PROCESSES: &str = "7";
const MAPS_MAPPINGS: &str = "65000";
const MAPS_PATH_BYTES: &str = "3800";
/// How long `/healthz` is watched once the processes are up: their first
/// scans and the 30 s rescan after.
const MAPS_WATCH: Duration = Duration::from_secs(40);

/// A hog of the attacker's, through `link`, growing at [`MAPS_HOG_RATE`]
/// and catching SIGTERM.
fn maps_hog(link: &Path) -> Proc {
    let mut c = as_user(ATTACKER, link);
    c.args([
        "--rate",
        MAPS_HOG_RATE,
        "--max",
        MAPS_HOG_MAX,
        "--catch",
        "TERM",
    ]);
    Proc::spawn(c)
}

/// What `/healthz` said while it was watched.
#[derive(Debug, Default)]
struct HealthWatch {
    probes: usize,
    /// Answers other than 200 ("stale", "starting"), and no answer within 1 s.
    unhealthy: usize,
    /// The longest run of unhealthy probes in a row.
    longest_run: usize,
}

/// Probe `/healthz` at `addr` every 250 ms for `watch`, each with a 1 s
/// client timeout.
fn watch_health(addr: std::net::SocketAddr, watch: Duration) -> HealthWatch {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(1)))
        .build()
        .into();
    let url = format!("http://{addr}/healthz");
    let end = Instant::now() + watch;
    let mut seen = HealthWatch::default();
    let mut run = 0;
    while Instant::now() < end {
        let healthy = agent.get(&url).call().is_ok_and(|r| r.status() == 200);
        seen.probes += 1;
        if healthy {
            run = 0;
        } else {
            seen.unhealthy += 1;
            run += 1;
            seen.longest_run = seen.longest_run.max(run);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    seen
}

/// The journal's actions: (pid, action) of every `action` event.
fn journal_actions(journal: &Path) -> Vec<(u64, String)> {
    std::fs::read_to_string(journal)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "action")
        .filter_map(|e| {
            Some((
                e.pointer("/process/pid")?.as_u64()?,
                e["action"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Every hog in `hogs` has its SIGTERM in the journal, and no other
/// process has an action there.
fn journal_holds_the_hogs_and_no_one_else(f: &mut Findings, journal: &Path, hogs: &[u32]) {
    let actions = journal_actions(journal);
    f.note(format!("journal actions (pid, action): {actions:?}"));
    for &hog in hogs {
        f.check(
            actions
                .iter()
                .any(|(pid, a)| *pid == u64::from(hog) && a == "SIGTERM"),
            || format!("the journal holds no SIGTERM for the hog pid {hog}: {actions:?}"),
        );
    }
    for (pid, action) in &actions {
        f.check(hogs.iter().any(|&h| u64::from(h) == *pid), || {
            format!("the journal holds an action on pid {pid}, not a hog: {action}")
        });
    }
}

#[test]
fn python_processes_with_huge_maps_neither_blind_the_sampler_nor_grow_its_memory() {
    let session = begin("python3 processes with 250 MB of maps each");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    let journal = dir.path().join("journal.jsonl");
    let link = stage.hog_link("hogs", "hog-maps");
    let text = config(dir.path(), &hog_rule(&link, None));
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        let mut hogs = Vec::new();
        // The baseline: a fast hog, no attack.
        let mut hog = maps_hog(&link);
        hogs.push(hog.pid());
        let base = match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
            Ok(r) => Some(r),
            Err(why) => {
                f.fail(format!("baseline (no attack yet): {why}"));
                None
            }
        };
        drop(hog);
        let base_hwm = d.hwm();
        if let Some(b) = base {
            f.note(format!(
                "baseline: signalled {:.0} MiB past the limit, {:.0} ms after crossing; daemon \
                 VmHWM {:.1} MiB",
                b.past_limit_mib,
                b.ms_after_crossing,
                mib(base_hwm)
            ));
        }
        // The attack: the file lives in a directory of the attacker's.
        let files = stage.path("maps");
        std::fs::create_dir(&files).expect("mkdir maps");
        chown(&files, uid_of(ATTACKER));
        let files_arg = files.display().to_string();
        let mut attacker = Proc::spawn(attacker_python(
            &stage,
            &[
                "maps",
                &files_arg,
                MAPS_PROCESSES,
                MAPS_MAPPINGS,
                MAPS_PATH_BYTES,
            ],
        ));
        let (_, mapped) = attacker.expect_line("mapped ", Duration::from_secs(180));
        f.note(format!("attacker: {mapped}"));
        let pids: Vec<u32> = mapped
            .split("pids=")
            .nth(1)
            .map(|l| l.split(',').filter_map(|p| p.trim().parse().ok()).collect())
            .unwrap_or_default();
        // Health is watched through the first scans of the processes and
        // a rescan; a hog crosses the limit as they are first seen.
        let addr = d.addr;
        let watcher = std::thread::spawn(move || watch_health(addr, MAPS_WATCH));
        let mut hog = maps_hog(&link);
        hogs.push(hog.pid());
        let attacked = match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
            Ok(r) => {
                f.note(format!(
                    "under attack: signalled {:.0} MiB past the limit, {:.0} ms after crossing",
                    r.past_limit_mib, r.ms_after_crossing
                ));
                if let Some(b) = base {
                    reaction_within_bounds(&mut f, b, r);
                }
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
        };
        drop(hog);
        let health = watcher.join().unwrap_or_default();
        f.note(format!("/healthz during the attack: {health:?}"));
        f.check(health.unhealthy == 0 && health.probes > 0, || {
            format!(
                "/healthz was stale or silent for {} of {} probes (every 250 ms), up to {} in a \
                 row: the sampler stopped while it read the attacker's maps",
                health.unhealthy, health.probes, health.longest_run
            )
        });
        let hwm = memory_bounded(&mut f, &d, base_hwm);
        // Nothing innocent: the attacker's processes live on, and the
        // journal's actions are the hogs'.
        let alive_now = pids.iter().filter(|&&p| alive(p)).count();
        f.check(!pids.is_empty() && alive_now == pids.len(), || {
            format!(
                "{alive_now} of the attacker's {} python3 processes are alive",
                pids.len()
            )
        });
        journal_holds_the_hogs_and_no_one_else(&mut f, &journal, &hogs);
        attacker.kill();
        healthz_after(&mut f, &mut d);
        let fmt = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v:.0}"));
        f.figures(&[
            ("hwm_base_mib", format!("{:.1}", mib(base_hwm))),
            ("hwm_attack_mib", format!("{:.1}", mib(hwm))),
            ("past_base_mib", fmt(base.map(|r| r.past_limit_mib))),
            ("past_attack_mib", fmt(attacked.map(|r| r.past_limit_mib))),
            ("ms_base", fmt(base.map(|r| r.ms_after_crossing))),
            ("ms_attack", fmt(attacked.map(|r| r.ms_after_crossing))),
            (
                "healthz_unhealthy",
                format!("{}/{}", health.unhealthy, health.probes),
            ),
        ]);
    }
    f.finish();
}

// ---------------------------------------------------------------------------
// Jupyter servers of one user listing another user's kernel
// ---------------------------------------------------------------------------
//
// A kernel's id is in its command line, which every user can read. The
// attacker runs a fake Jupyter server (its own runtime file, its own port)
// that lists the victim's kernel id under a notebook of its choosing, and
// eight servers that accept and never answer, all in a runtime directory
// read before the victim's. The lookup kept the first server that listed
// an id: the victim's kernel lost its notebook for good, and every lookup
// waited on the silent servers.

/// The victim's kernel id, and the notebooks each side's server names.
const VICTIM_KERNEL: &str = "5b1f0c2e-7d3a-4e91-b6c8-0a9e8d7f6c5b";
const VICTIM_NOTEBOOK: &str = "victim/train.ipynb";
const ATTACKER_NOTEBOOK: &str = "attacker/stolen.ipynb";
/// The attacker's servers that never answer.
const SILENT_SERVERS: &str = "8";

/// `program` as the victim (uid [`VICTIM_UID`], no account), through
/// `setpriv`.
fn as_victim(program: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={VICTIM_UID}"),
        &format!("--regid={VICTIM_UID}"),
        "--clear-groups",
        "--",
        program,
    ]);
    c
}

/// A directory in `stage` owned by `uid`, open for reading to all.
fn owned_dir(stage: &Stage, name: &str, uid: u32) -> PathBuf {
    let dir = stage.path(name);
    std::fs::create_dir(&dir).expect("mkdir");
    chmod(&dir, 0o755);
    chown(&dir, uid);
    dir
}

/// A kernel connection file for `id` in `dir`, owned by `uid`, and a
/// process of `uid` that holds it (`tail -f …/kernel-<id>.json`: a kernel
/// as the classifier sees one).
fn kernel_of(dir: &Path, id: &str, uid: u32, mut command: Command) -> Proc {
    let file = dir.join(format!("kernel-{id}.json"));
    std::fs::write(&file, "{}\n").expect("write the connection file");
    chown(&file, uid);
    chmod(&file, 0o644);
    command.arg("-f").arg(&file);
    Proc::spawn(command)
}

/// The notebook root sees for `pid`, once the daemon's latest sample holds
/// it with one, or `None` after `within`.
fn notebook_of(d: &RootDaemon, pid: u32, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = support::get(&d.url(&format!("/api/v1/processes/{pid}")));
        if status == 200 {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            if let Some(n) = v
                .pointer("/process/workload/notebook")
                .and_then(|n| n.as_str())
            {
                return Some(n.to_string());
            }
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// How many requests the attacker's lying server and silent servers got.
fn asked_of_attackers_servers(liar: &mut Proc, silent: &mut Proc) -> (usize, usize) {
    liar.drain();
    silent.drain();
    let count =
        |p: &Proc, needle: &str| p.seen.iter().filter(|(_, l)| l.starts_with(needle)).count();
    (count(liar, "asked "), count(silent, "accepted "))
}

#[test]
fn another_users_jupyter_servers_neither_take_a_kernels_notebook_nor_hold_up_its_lookup() {
    let session = begin("Jupyter servers listing another user's kernel");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    let journal = dir.path().join("journal.jsonl");
    let attacker = uid_of(ATTACKER);
    let runtime_attacker = owned_dir(&stage, "attacker-runtime", attacker);
    let runtime_victim = owned_dir(&stage, "victim-runtime", VICTIM_UID);
    let kernels_attacker = owned_dir(&stage, "attacker-kernels", attacker);
    let kernels_victim = owned_dir(&stage, "victim-kernels", VICTIM_UID);
    let (ra, rv) = (
        runtime_attacker.display().to_string(),
        runtime_victim.display().to_string(),
    );
    // The servers, before any kernel: the attacker's lying one and its
    // silent ones, and the victim's.
    let mut liar = Proc::spawn(attacker_python(
        &stage,
        &["jupyter-server", &ra, VICTIM_KERNEL, ATTACKER_NOTEBOOK],
    ));
    liar.expect_line("port ", Duration::from_secs(30));
    let mut silent = Proc::spawn(attacker_python(
        &stage,
        &["jupyter-slow", &ra, SILENT_SERVERS],
    ));
    silent.expect_line("ports ", Duration::from_secs(30));
    let mut victim_server = Proc::spawn({
        let mut c = as_victim("/usr/bin/python3");
        c.arg("-u").arg(&stage.script).args([
            "jupyter-server",
            &rv,
            VICTIM_KERNEL,
            VICTIM_NOTEBOOK,
        ]);
        c
    });
    victim_server.expect_line("port ", Duration::from_secs(30));
    // The attacker's directory is read first.
    let link = stage.hog_link("hogs", "hog-jupyter");
    let text = config(
        dir.path(),
        &format!(
            "{}[jupyter]\nother_users = true\nruntime_dirs = [{}, {}]\n",
            hog_rule(&link, None),
            toml_str(&ra),
            toml_str(&rv)
        ),
    );
    if let Some(mut d) = start(&mut f, dir.path(), &text)
        && let Some(base) = baseline(&mut f, &d, &link)
    {
        // The victim's kernel: named from the victim's server, and no
        // server of the attacker's is asked about it.
        let victim_kernel = kernel_of(
            &kernels_victim,
            VICTIM_KERNEL,
            VICTIM_UID,
            as_victim("tail"),
        );
        let named = notebook_of(&d, victim_kernel.pid(), Duration::from_secs(30));
        d.drain();
        let lookup = d
            .log
            .iter()
            .rev()
            .find(|(_, l)| l.contains("Jupyter lookup"))
            .map(|(_, l)| l.clone());
        f.note(format!(
            "the victim's kernel: notebook {named:?}; lookup: {lookup:?}"
        ));
        f.check(named.as_deref() == Some(VICTIM_NOTEBOOK), || {
            format!(
                "for 30 s the victim's kernel (uid {VICTIM_UID}, pid {}) showed notebook \
                 {named:?}, not its own server's {VICTIM_NOTEBOOK:?}: another user's server \
                 that lists its id took the answer; the daemon's log:\n{}",
                victim_kernel.pid(),
                d.log_tail(20)
            )
        });
        let (lies, stalls) = asked_of_attackers_servers(&mut liar, &mut silent);
        f.check(lies == 0 && stalls == 0, || {
            format!(
                "the lookup for the victim's kernel asked the attacker's servers: the lying one \
                 {lies} time(s), the silent ones {stalls} time(s)"
            )
        });
        // The attacker runs a process with the victim's kernel id: its own
        // servers are asked (the silent ones hold that lookup), and the
        // victim keeps its notebook.
        let mimic = kernel_of(
            &kernels_attacker,
            VICTIM_KERNEL,
            attacker,
            as_user(ATTACKER, Path::new("tail")),
        );
        let asked = liar.wait_line("asked ", Duration::from_secs(30));
        f.check(asked.is_some(), || {
            "the attacker's own kernel was never looked up at its own server".into()
        });
        // The hog crosses while the silent servers hold the attacker's
        // lookup; then two more samples.
        let attacked = attacked_reaction(&mut f, &mut d, &link, &base);
        std::thread::sleep(Duration::from_secs(2));
        let kept = notebook_of(&d, victim_kernel.pid(), Duration::from_secs(5));
        let theirs = notebook_of(&d, mimic.pid(), Duration::from_secs(5));
        f.note(format!(
            "after the attacker's lookup: the victim's kernel {kept:?}, the attacker's {theirs:?}"
        ));
        f.check(kept.as_deref() == Some(VICTIM_NOTEBOOK), || {
            format!(
                "once the attacker's own kernel with the victim's id was looked up, the victim's \
                 kernel showed {kept:?}, not {VICTIM_NOTEBOOK:?}"
            )
        });
        // The attacker, asking the API, sees no notebook of the victim's.
        let mut get = Proc::spawn(attacker_python(
            &stage,
            &["get", &d.url("/api/v1/processes")],
        ));
        let _ = get.wait_exit(Duration::from_secs(30));
        get.drain();
        let answer = get.output();
        f.check(answer.starts_with("200"), || {
            format!(
                "the attacker's GET /api/v1/processes: {}",
                excerpt(&answer, "200")
            )
        });
        f.check(!answer.contains(VICTIM_NOTEBOOK), || {
            format!(
                "the attacker's GET /api/v1/processes shows the victim's notebook: {}",
                excerpt(&answer, VICTIM_NOTEBOOK)
            )
        });
        healthz_during(&mut f, &d);
        let hwm = memory_bounded(&mut f, &d, base.hwm);
        // Nothing innocent: the kernels and servers live on, and the
        // journal's actions are the hogs'.
        for (who, pid) in [
            ("the victim's kernel", victim_kernel.pid()),
            ("the victim's server", victim_server.pid()),
            ("the attacker's kernel", mimic.pid()),
        ] {
            f.check(alive(pid), || format!("{who} (pid {pid}) is gone"));
        }
        let innocent = [
            victim_kernel.pid(),
            victim_server.pid(),
            mimic.pid(),
            liar.pid(),
            silent.pid(),
        ];
        let actions = journal_actions(&journal);
        f.note(format!("journal actions (pid, action): {actions:?}"));
        f.check(
            actions
                .iter()
                .all(|(pid, _)| !innocent.iter().any(|&p| u64::from(p) == *pid)),
            || format!("the journal holds an action on a kernel or a server: {actions:?}"),
        );
        f.check(
            actions.len() == 2 && actions.iter().all(|(_, a)| a == "SIGTERM"),
            || format!("the journal holds {actions:?}, not the two hogs' SIGTERM"),
        );
        report_figures(&f, &base, hwm, attacked);
    }
    f.finish();
}

// ---------------------------------------------------------------------------
// Text other users control in events; the events endpoint; what the port
// shows of other users' processes (kernel log lines, mapped libraries,
// hidepid)
// ---------------------------------------------------------------------------

/// Jupyter servers of the attacker that name each of its short-lived
/// kernels with a notebook path of megabytes, and processes whose command
/// line carries a kernel id of kilobytes. Arguments: RUNTIME_DIR
/// KERNEL_DIR SERVERS BATCHES PATH_BYTES LIFETIME LONG_IDS. It serves
/// `/api/sessions` on SERVERS loopback ports, writes a runtime file for
/// each into RUNTIME_DIR, then starts BATCHES batches of one kernel per
/// server (each naming its batch's kernel), plus LONG_IDS processes with a
/// 3900-character kernel id, each living LIFETIME seconds. Prints
/// `servers N`, `kernels started=K` after each batch, then `done`.
const JUPYTER_FLOOD: &str = r#"
import json, os, subprocess, sys, threading, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()

runtime, kernel_dir = sys.argv[1], sys.argv[2]
servers, batches, path_bytes = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
lifetime, long_ids = float(sys.argv[6]), int(sys.argv[7])
current = [None] * servers
notebook = "n" * path_bytes + ".ipynb"

class Sessions(BaseHTTPRequestHandler):
    def do_GET(self):
        kid = current[self.server.index]
        sessions = [] if kid is None else [{
            "id": "s", "path": notebook, "name": "n.ipynb", "type": "notebook",
            "kernel": {"id": kid, "name": "python3"},
        }]
        body = json.dumps(sessions).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

pid = os.getpid()
for i in range(servers):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Sessions)
    srv.index = i
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    info = {"base_url": "/", "hostname": "127.0.0.1", "password": False, "pid": pid,
            "port": port, "root_dir": "/", "secure": False, "sock": "", "token": "t",
            "url": f"http://127.0.0.1:{port}/", "version": "2.14.0"}
    with open(os.path.join(runtime, f"jpserver-{pid}{i}.json"), "w") as out:
        json.dump(info, out)
say(f"servers {servers}")

def kernel(kid):
    path = os.path.join(kernel_dir, f"kernel-{kid}.json")
    return subprocess.Popen(["/bin/sh", "-c", f"sleep {lifetime}", "sh", path])

started = 0
for _ in range(batches):
    procs = []
    for i in range(servers):
        kid = str(uuid.uuid4())
        current[i] = kid
        procs.append(kernel(kid))
    for _ in range(long_ids):
        procs.append(kernel("k" * 3900 + uuid.uuid4().hex))
    started += len(procs)
    say(f"kernels started={started}")
    for p in procs:
        p.wait()
say("done")
while True:
    time.sleep(3600)
"#;

/// The daemon's kernels of the flood: batches of this many (one per
/// server, the most one user's servers are asked), each living this long.
const FLOOD_SERVERS: &str = "8";
const FLOOD_BATCHES: &str = "6";
const FLOOD_LIFETIME: &str = "6";
/// A notebook path just under the 4 MiB a Jupyter answer may be.
const FLOOD_PATH_BYTES: &str = "3900000";
/// Processes with a kernel id of 3900 characters, per batch.
const FLOOD_LONG_IDS: &str = "40";
/// Connections asking for `/api/v1/events` and never reading the answer.
const UNREAD_EVENT_LISTS: &str = "240";
/// The most bytes any kernel id and notebook path may keep (a file name;
/// `PATH_MAX`).
const KERNEL_ID_MAX: usize = 255;
const NOTEBOOK_MAX: usize = 4096;

/// `source`, written to the stage as `name`, run by python3 as the
/// attacker with `args` (with as many open files as root can give it).
fn attacker_program(stage: &Stage, name: &str, source: &str, args: &[&str]) -> Command {
    let script = stage.path(name);
    std::fs::write(&script, source).expect("write the attacker's program");
    chmod(&script, 0o644);
    crate::support::attack::python_as_attacker(&script, args)
}

/// A directory in the stage owned by the attacker.
fn attackers_dir(stage: &Stage, name: &str) -> PathBuf {
    let dir = stage.path(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    chmod(&dir, 0o755);
    chown(&dir, uid_of(ATTACKER));
    dir
}

/// `GET path` as root with a 30 s timeout and a 64 MiB body cap: the
/// status and body, or what went wrong.
fn root_get(d: &RootDaemon, path: &str) -> Result<(u16, String), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut res = agent
        .get(&d.url(path))
        .call()
        .map_err(|e| format!("GET {path} as root: {e}"))?;
    let status = res.status().as_u16();
    res.body_mut()
        .with_config()
        .limit(64 * MIB)
        .read_to_string()
        .map(|body| (status, body))
        .map_err(|e| format!("GET {path} as root: {e}"))
}

/// `GET path` as the attacker: the status (`"200"`) and the body.
fn attacker_get(stage: &Stage, d: &RootDaemon, path: &str) -> (String, String) {
    let out = attacker_python(stage, &["get", &d.url(path)])
        .output()
        .expect("attacker get");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    match text.split_once('\n') {
        Some((status, body)) => (status.to_string(), body.to_string()),
        None => (text, String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// The events of an `/api/v1/events` answer (empty when it is not one).
fn events_of(body: &str) -> Vec<serde_json::Value> {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["events"].as_array().cloned())
        .unwrap_or_default()
}

/// Waits up to `within` for root's `/api/v1/events` to hold an event
/// `wanted` picks; the event, or the last answer.
fn await_event(
    d: &RootDaemon,
    within: Duration,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> Result<serde_json::Value, String> {
    let deadline = Instant::now() + within;
    let mut last = String::new();
    while Instant::now() < deadline {
        match root_get(d, "/api/v1/events") {
            Ok((200, body)) => {
                if let Some(e) = events_of(&body).into_iter().find(|e| wanted(e)) {
                    return Ok(e);
                }
                last = body.chars().take(300).collect();
            }
            Ok((status, body)) => last = format!("{status} {}", excerpt(&body, "")),
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Err(last)
}

/// The journal (every file of it, as `headroom events` reads it) holds an
/// action on each of `pids`, and `headroom events` skipped no line.
fn journal_keeps_actions(f: &mut Findings, dir: &Path, pids: &[u32]) {
    std::thread::sleep(Duration::from_secs(1));
    let out = Command::new(HEADROOM)
        .args(["events", "--json", "--journal"])
        .arg(dir.join("journal.jsonl"))
        .output()
        .expect("headroom events");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    f.check(out.status.success(), || {
        format!("`headroom events` failed: {}", excerpt(&stderr, ""))
    });
    f.check(!stderr.contains("skipped"), || {
        format!(
            "`headroom events` skipped journal lines: {}",
            excerpt(&stderr, "skipped")
        )
    });
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    f.note(format!(
        "the journal holds {} events in {} bytes of `headroom events --json`",
        events.len(),
        stdout.len()
    ));
    for &pid in pids {
        let acted = events.iter().any(|e| {
            e["event"] == "action" && e["process"]["pid"].as_u64() == Some(u64::from(pid))
        });
        f.check(acted, || {
            format!("the journal lost the action on pid {pid} (or never had it)")
        });
    }
}

/// A hog crossing the limit: how soon it was signalled, or nothing (a
/// failure recorded), and its pid.
fn hog_reaction(
    f: &mut Findings,
    d: &mut RootDaemon,
    link: &Path,
    when: &str,
) -> (Option<Reaction>, u32) {
    let mut hog = hog_as(ATTACKER, link);
    let pid = hog.pid();
    match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
        Ok(r) => {
            f.note(format!(
                "{when}: the hog (pid {pid}) was signalled {:.0} MiB past the limit, {:.0} ms \
                 after crossing",
                r.past_limit_mib, r.ms_after_crossing
            ));
            (Some(r), pid)
        }
        Err(why) => {
            f.fail(format!(
                "{when}: {why}\ndaemon running: {}; its last log lines:\n{}",
                d.running(),
                d.log_tail(15)
            ));
            (None, pid)
        }
    }
}

/// A reaction under attack not much later than the baseline's (the bounds
/// of [`attacked_reaction`]).
fn within_baseline(f: &mut Findings, base: &Baseline, r: Reaction) {
    let b = base.reaction;
    let bound_mib = REACTION_FACTOR * b.past_limit_mib.max(0.0) + REACTION_SLACK_MIB;
    f.check(r.past_limit_mib <= bound_mib, || {
        format!(
            "under attack the hog got {:.0} MiB past the limit before SIGTERM, more than \
             {bound_mib:.0} MiB (baseline {:.0} MiB)",
            r.past_limit_mib, b.past_limit_mib
        )
    });
    let bound_ms = REACTION_FACTOR * b.ms_after_crossing + REACTION_SLACK_MS;
    f.check(r.ms_after_crossing <= bound_ms, || {
        format!(
            "under attack SIGTERM came {:.0} ms after the hog crossed the limit, more than \
             {bound_ms:.0} ms (baseline {:.0} ms)",
            r.ms_after_crossing, b.ms_after_crossing
        )
    });
}

#[test]
fn huge_notebook_paths_and_kernel_ids_cost_bounded_memory_and_keep_every_action() {
    let session = begin("megabyte notebook paths, kilobyte kernel ids, unread event lists");
    let mut f = Findings::new(&session);
    ensure_user(REGULAR_ATTACKER, false);
    let stage = Stage::new();
    let dir = private_dir();
    let runtime = attackers_dir(&stage, "runtime");
    let kernel_dir = attackers_dir(&stage, "kernels");
    let link = stage.hog_link("hogs", "hog-limit");
    let text = config(
        dir.path(),
        &format!(
            "{}{}[jupyter]\nother_users = true\nruntime_dirs = [{}]\n",
            http_cap(),
            hog_rule(&link, None),
            toml_str(&runtime.display().to_string())
        ),
    );
    // Root's Jupyter kernel, whose id is root's to see, and another user's
    // process that no rule matches.
    let victims = private_dir();
    let victim_id = "9d1e7c44-victim-kernel-5b2f0a";
    let mut victim = Some(fake_kernel(victims.path(), victim_id));
    let mut innocent = Proc::spawn({
        let mut c = as_user(
            REGULAR_ATTACKER,
            &stage.hog_link("innocent", "innocent-work"),
        );
        c.args(["--rate", "max", "--max", "400MiB", "--catch", "TERM"]);
        c
    });
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        let (base_reaction, base_pid) = hog_reaction(&mut f, &mut d, &link, "baseline");
        let base = Baseline {
            reaction: base_reaction.unwrap_or(Reaction {
                past_limit_mib: 0.0,
                ms_after_crossing: 0.0,
            }),
            hwm: d.hwm(),
        };
        f.note(format!("baseline: daemon VmHWM {:.1} MiB", mib(base.hwm)));
        let port = d.addr.port().to_string();
        let (r, k) = (
            runtime.display().to_string(),
            kernel_dir.display().to_string(),
        );
        let mut flood = Proc::spawn(attacker_program(
            &stage,
            "jupyter_flood.py",
            JUPYTER_FLOOD,
            &[
                &r,
                &k,
                FLOOD_SERVERS,
                FLOOD_BATCHES,
                FLOOD_PATH_BYTES,
                FLOOD_LIFETIME,
                FLOOD_LONG_IDS,
            ],
        ));
        let (_, servers) = flood.expect_line("servers", Duration::from_secs(30));
        f.note(format!(
            "attacker: {servers} Jupyter servers naming 3.9 MB notebooks"
        ));
        // Two batches in, the victim's kernel ends: its post-mortem names its id.
        flood.expect_line("kernels started=", Duration::from_secs(30));
        flood.expect_line("kernels started=", Duration::from_secs(30));
        drop(victim.take());
        let mut readers = Proc::spawn(attacker_python(
            &stage,
            &["noread", &port, UNREAD_EVENT_LISTS, "/api/v1/events"],
        ));
        let (_, sent) = readers.expect_line("sent", Duration::from_secs(60));
        f.note(format!(
            "attacker: {sent} /api/v1/events requests, never read"
        ));
        let finished = flood.wait_line("done", Duration::from_secs(90));
        let lookups = d.log_text().matches("Jupyter lookup").count();
        f.note(format!(
            "attacker: {}; the daemon logged {lookups} Jupyter lookups",
            flood
                .last("kernels started=")
                .unwrap_or_else(|| "no kernel started".into())
        ));
        f.check(finished.is_some(), || {
            format!("the attacker's kernels did not all end: {}", flood.output())
        });
        healthz_during(&mut f, &d);
        let (attacked, attacked_pid) = hog_reaction(&mut f, &mut d, &link, "under attack");
        if let (Some(_), Some(r)) = (base_reaction, attacked) {
            within_baseline(&mut f, &base, r);
        }
        let hwm = memory_bounded(&mut f, &d, base.hwm);
        readers.kill();
        // What root is shown: every text within its cap, the victim's
        // post-mortem there (the control for the attacker's view below).
        match root_get(&d, "/api/v1/events") {
            Ok((200, body)) => {
                let events = events_of(&body);
                f.note(format!(
                    "root's /api/v1/events: {} events in {} bytes",
                    events.len(),
                    body.len()
                ));
                let longest = |field: &str| {
                    events
                        .iter()
                        .filter_map(|e| e["process"][field].as_str())
                        .map(str::len)
                        .max()
                        .unwrap_or(0)
                };
                let (ids, notebooks) = (longest("kernel_id"), longest("notebook"));
                f.note(format!(
                    "longest kernel id {ids} bytes, longest notebook {notebooks} bytes"
                ));
                f.check(ids <= KERNEL_ID_MAX && notebooks <= NOTEBOOK_MAX, || {
                    format!(
                        "events carry a kernel id of {ids} bytes or a notebook path of \
                         {notebooks} bytes (at most {KERNEL_ID_MAX} and {NOTEBOOK_MAX})"
                    )
                });
                f.check(notebooks > 0, || {
                    "no event names an attacker's notebook: the daemon never looked them up, \
                     so the bounds above prove nothing"
                        .into()
                });
                f.check(body.contains(victim_id), || {
                    "root's events lack the victim kernel's post-mortem: its absence from the \
                     attacker's view proves nothing"
                        .into()
                });
            }
            Ok((status, body)) => f.fail(format!(
                "root's GET /api/v1/events: {status} {}",
                excerpt(&body, "")
            )),
            Err(e) => f.fail(e),
        }
        let (status, shown) = attacker_get(&stage, &d, "/api/v1/events");
        f.check(status == "200", || {
            format!("the attacker's GET /api/v1/events: {status}")
        });
        f.check(!shown.contains(victim_id), || {
            format!(
                "{ATTACKER} reads root's kernel id in /api/v1/events: {}",
                excerpt(&shown, victim_id)
            )
        });
        innocent.drain();
        f.check(innocent.last("signal").is_none(), || {
            format!(
                "{REGULAR_ATTACKER}'s innocent process was signalled: {}",
                innocent.output()
            )
        });
        journal_keeps_actions(&mut f, dir.path(), &[base_pid, attacked_pid]);
        healthz_after(&mut f, &mut d);
        report_figures(&f, &base, hwm, attacked);
    }
    innocent.kill();
    f.finish();
}

/// A native library whose function faults (a read of address 0), as a
/// crashing extension of another user's notebook would.
const CRASHING_LIBRARY: &str = "int crashing_op_segv(void) { return *(volatile int *)0; }\n";

/// Waits 4 s (two samples see it), then calls the faulting library named
/// by `argv[1]`; `argv[2]` names its Jupyter connection file.
const CRASH_AFTER_A_WHILE: &str = "import ctypes, sys, time; lib = ctypes.CDLL(sys.argv[1]); time.sleep(4); lib.crashing_op_segv()";

/// `source` (C) built with `cc` into the shared library `stage/lib/name`,
/// readable by everyone.
fn shared_library(stage: &Stage, name: &str, source: &str) -> PathBuf {
    let dir = stage.path("lib");
    std::fs::create_dir_all(&dir).expect("mkdir");
    chmod(&dir, 0o755);
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).expect("write the library's source");
    let lib = dir.join(name);
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&c)
        .output()
        .expect("cc (Debian package gcc)");
    assert!(
        cc.status.success(),
        "cc {name}: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    chmod(&lib, 0o755);
    lib
}

#[test]
fn another_users_crash_is_told_without_its_kernel_log_line() {
    let session = begin("another user's segfault line through /api/v1/events");
    let mut f = Findings::new(&session);
    ensure_user(REGULAR_ATTACKER, false);
    let trace = std::fs::read_to_string("/proc/sys/debug/exception-trace").unwrap_or_default();
    assert_eq!(
        trace.trim(),
        "1",
        "debug.exception-trace is off: the kernel logs no segfault line to redact \
         (`sysctl debug.exception-trace=1`)"
    );
    let stage = Stage::new();
    let dir = private_dir();
    let library = shared_library(&stage, "libcrashing_op.so", CRASHING_LIBRARY);
    let link = stage.hog_link("hogs", "hog-limit");
    let text = config(dir.path(), &hog_rule(&link, None));
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        // The victim's kernel-like process crashes inside the library.
        let connection = stage.path("victim/kernel-5e0c2b7d-crash.json");
        let mut victim = Proc::spawn({
            let mut c = as_user(REGULAR_ATTACKER, Path::new("/usr/bin/python3"));
            c.args(["-c", CRASH_AFTER_A_WHILE])
                .arg(&library)
                .arg(&connection);
            c
        });
        let victim_pid = u64::from(victim.pid());
        let status = victim.wait_exit(Duration::from_secs(30));
        f.note(format!(
            "the victim's process (pid {victim_pid}) ended: {status:?}"
        ));
        let is_victims = |e: &serde_json::Value| {
            e["event"] == "exited" && e["process"]["pid"].as_u64() == Some(victim_pid)
        };
        // Root's view: the kernel log's line and library (the control).
        match await_event(&d, Duration::from_secs(30), |e| {
            is_victims(e) && e["cause"]["kind"] == "crashed"
        }) {
            Ok(e) => {
                f.note(format!("root is told: {}", e["cause"]));
                f.check(e["cause"]["library"] == "libcrashing_op.so", || {
                    format!(
                        "root's post-mortem does not name the library, so its absence below \
                         proves nothing: {}",
                        e["cause"]
                    )
                });
            }
            Err(last) => f.fail(format!(
                "no post-mortem saying the victim (pid {victim_pid}) crashed within 30 s; \
                 root's last answer: {last}"
            )),
        }
        // The attacker's view: the crash, not the kernel log's words.
        let (status, body) = attacker_get(&stage, &d, "/api/v1/events");
        f.check(status == "200", || {
            format!("the attacker's GET /api/v1/events: {status}")
        });
        match events_of(&body).into_iter().find(|e| is_victims(e)) {
            Some(e) => {
                f.note(format!("the attacker is told: {}", e["cause"]));
                let text = e.to_string();
                for secret in ["libcrashing_op", "segfault", " ip ", "error 4", " sp "] {
                    f.check(!text.contains(secret), || {
                        format!(
                            "{ATTACKER} reads {secret:?} of {REGULAR_ATTACKER}'s crash, which \
                             only the kernel log (root's to read) says: {}",
                            excerpt(&text, secret)
                        )
                    });
                }
                f.check(e["cause"]["kind"] == "crashed", || {
                    format!("the attacker's post-mortem lost the kind: {}", e["cause"])
                });
            }
            None => f.note(format!(
                "the victim's post-mortem is not in the attacker's events: {}",
                excerpt(&body, "")
            )),
        }
        f.check(!body.contains("libcrashing_op"), || {
            format!(
                "{ATTACKER}'s /api/v1/events names the victim's library: {}",
                excerpt(&body, "libcrashing_op")
            )
        });
        // Enforcement goes on, and the journal keeps what it did.
        let (_, pid) = hog_reaction(&mut f, &mut d, &link, "after the crash");
        journal_keeps_actions(&mut f, dir.path(), &[pid]);
    }
    f.finish();
}

/// A stand-in for PyTorch's CPU library: only its name matters.
const TORCH_STUB: &str = "int torch_stub(void) { return 0; }\n";

/// Loads the library named by `argv[1]` and sleeps.
const LOAD_AND_SLEEP: &str =
    "import ctypes, sys, time; ctypes.CDLL(sys.argv[1]); time.sleep(100000)";

#[test]
fn the_libraries_another_users_process_maps_are_not_shown_to_the_attacker() {
    let session = begin("another user's mapped libraries through the API");
    let mut f = Findings::new(&session);
    ensure_user(REGULAR_ATTACKER, false);
    let stage = Stage::new();
    let dir = private_dir();
    let library = shared_library(&stage, "libtorch_cpu.so", TORCH_STUB);
    let link = stage.hog_link("hogs", "hog-limit");
    let text = config(dir.path(), &hog_rule(&link, None));
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        let victim = Proc::spawn({
            let mut c = as_user(REGULAR_ATTACKER, Path::new("/usr/bin/python3"));
            c.args(["-c", LOAD_AND_SLEEP]).arg(&library);
            c
        });
        let path = format!("/api/v1/processes/{}", victim.pid());
        // Root is told which library classified it (the control).
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = String::new();
        while Instant::now() < deadline && !seen.contains("maps libtorch_cpu.so") {
            std::thread::sleep(Duration::from_millis(500));
            seen = root_get(&d, &path).map(|(_, b)| b).unwrap_or_else(|e| e);
        }
        f.check(seen.contains("maps libtorch_cpu.so"), || {
            format!(
                "root is not told that the victim maps libtorch_cpu.so, so its absence below \
                 proves nothing: {}",
                excerpt(&seen, "evidence")
            )
        });
        for p in [
            path.as_str(),
            "/api/v1/snapshot",
            "/api/v1/processes?limit=100000",
            "/metrics",
        ] {
            let (status, body) = attacker_get(&stage, &d, p);
            f.check(status == "200", || {
                format!("the attacker's GET {p}: {status}")
            });
            f.check(!body.contains("libtorch_cpu"), || {
                format!(
                    "{ATTACKER} learns from {p} which libraries {REGULAR_ATTACKER}'s process \
                     maps (/proc/[pid]/maps is its owner's to read): {}",
                    excerpt(&body, "libtorch_cpu")
                )
            });
        }
        let (_, pid) = hog_reaction(&mut f, &mut d, &link, "beside the victim");
        journal_keeps_actions(&mut f, dir.path(), &[pid]);
        drop(victim);
    }
    f.finish();
}

/// Runs the rest of its command line in a mount namespace of its own whose
/// `/proc` is mounted with `hidepid=invisible`: the daemon sees a machine
/// whose `ps` shows each user their own processes only, and every other
/// test on this machine keeps its `/proc`.
const HIDEPID: [&str; 8] = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    "mount -t proc -o hidepid=invisible proc /proc && exec \"$@\"",
    "sh",
];

/// The pids and owners of the processes an answer lists.
fn listed(body: &str) -> Vec<(u64, Option<u64>)> {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["processes"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|p| (p["pid"].as_u64().unwrap_or(0), p["uid"].as_u64()))
        .collect()
}

#[test]
fn under_hidepid_the_attacker_is_shown_only_their_own_processes() {
    let session = begin("every process listed to every user under hidepid");
    let mut f = Findings::new(&session);
    ensure_user(REGULAR_ATTACKER, false);
    let attacker = u64::from(uid_of(ATTACKER));
    let stage = Stage::new();
    let dir = private_dir();
    let link = stage.hog_link("hogs", "hog-limit");
    let text = config(dir.path(), &hog_rule(&link, None));
    match RootDaemon::start_through(dir.path(), &text, &HIDEPID) {
        Err(e) => f.fail(format!(
            "the daemon did not start under hidepid (exit code {:?}); its log:\n{}",
            e.code, e.log
        )),
        Ok(mut d) => {
            // The victim: a long-lived process and a short-lived kernel.
            let victim = Proc::spawn({
                let mut c = as_user(REGULAR_ATTACKER, Path::new("/usr/bin/python3"));
                c.args(["-c", "import time; time.sleep(100000)"]);
                c
            });
            let kernel = Proc::spawn({
                let mut c = as_user(REGULAR_ATTACKER, Path::new("/bin/sh"));
                c.args(["-c", "sleep 6", "sh"])
                    .arg(stage.path("victim/kernel-7a41c0de-hidden.json"));
                c
            });
            let (victim_pid, kernel_pid) = (u64::from(victim.pid()), u64::from(kernel.pid()));
            // The attacker's own process, which it must still be shown.
            let own = Proc::spawn({
                let mut c = as_user(ATTACKER, Path::new("/bin/sleep"));
                c.arg("100000");
                c
            });
            let own_pid = u64::from(own.pid());
            std::thread::sleep(Duration::from_secs(3));
            // Root is shown everything (the control).
            let root_view = root_get(&d, "/api/v1/snapshot")
                .map(|(_, b)| listed(&b))
                .unwrap_or_default();
            let root_pids: Vec<u64> = root_view.iter().map(|(p, _)| *p).collect();
            f.check(
                [victim_pid, kernel_pid, own_pid]
                    .iter()
                    .all(|p| root_pids.contains(p)),
                || {
                    format!(
                        "root's snapshot lacks the victim ({victim_pid}, {kernel_pid}) or the \
                         attacker's process ({own_pid}): the daemon did not sample them"
                    )
                },
            );
            let root_metrics = root_get(&d, "/metrics").map(|(_, b)| b).unwrap_or_default();
            f.check(
                root_metrics.contains(&format!("pid=\"{kernel_pid}\"")),
                || {
                    "root's /metrics has no series of the victim's kernel, so its absence below \
                 proves nothing"
                        .into()
                },
            );
            for p in ["/api/v1/snapshot", "/api/v1/processes?limit=100000"] {
                let (status, body) = attacker_get(&stage, &d, p);
                let shown = listed(&body);
                f.note(format!(
                    "the attacker's {p}: {status}, {} processes",
                    shown.len()
                ));
                let others: Vec<&(u64, Option<u64>)> = shown
                    .iter()
                    .filter(|(_, uid)| *uid != Some(attacker))
                    .collect();
                f.check(status == "200" && others.is_empty(), || {
                    format!(
                        "{ATTACKER} (uid {attacker}) is shown {} processes of other users in \
                         {p}, which `ps` under hidepid=invisible does not show it: {:?}",
                        others.len(),
                        others.iter().take(10).collect::<Vec<_>>()
                    )
                });
                f.check(shown.iter().any(|(pid, _)| *pid == own_pid), || {
                    format!("{ATTACKER} is not shown its own process {own_pid} in {p}")
                });
            }
            let (status, _) = attacker_get(&stage, &d, &format!("/api/v1/processes/{victim_pid}"));
            f.check(status == "404", || {
                format!(
                    "the attacker's GET /api/v1/processes/{victim_pid} (another user's \
                     process): {status}, not 404"
                )
            });
            let (_, metrics) = attacker_get(&stage, &d, "/metrics");
            for pid in [victim_pid, kernel_pid] {
                f.check(!metrics.contains(&format!("pid=\"{pid}\"")), || {
                    format!(
                        "{ATTACKER}'s /metrics has series of {REGULAR_ATTACKER}'s pid {pid}: {}",
                        excerpt(&metrics, &format!("pid=\"{pid}\""))
                    )
                });
            }
            // The kernel ends: root is told, the attacker is not.
            let ended = |e: &serde_json::Value| {
                e["event"] == "exited" && e["process"]["pid"].as_u64() == Some(kernel_pid)
            };
            if let Err(last) = await_event(&d, Duration::from_secs(30), ended) {
                f.fail(format!(
                    "no post-mortem of the victim's kernel (pid {kernel_pid}) in root's \
                     events within 30 s: {last}"
                ));
            }
            let (hog_reacted, hog_pid) = hog_reaction(&mut f, &mut d, &link, "under hidepid");
            let (status, body) = attacker_get(&stage, &d, "/api/v1/events");
            let events = events_of(&body);
            let others: Vec<&serde_json::Value> = events
                .iter()
                .filter(|e| {
                    e["process"].is_object() && e["process"]["uid"].as_u64() != Some(attacker)
                })
                .collect();
            f.check(status == "200" && others.is_empty(), || {
                format!(
                    "{ATTACKER}'s /api/v1/events tells of {} events of other users' processes: \
                     {}",
                    others.len(),
                    others
                        .first()
                        .map(|e| excerpt(&e.to_string(), ""))
                        .unwrap_or_default()
                )
            });
            if hog_reacted.is_some() {
                f.check(
                    events.iter().any(|e| {
                        e["event"] == "action"
                            && e["process"]["pid"].as_u64() == Some(u64::from(hog_pid))
                    }),
                    || format!("{ATTACKER} is not told of the action on its own hog {hog_pid}"),
                );
            }
            journal_keeps_actions(&mut f, dir.path(), &[hog_pid]);
            drop((victim, kernel, own));
        }
    }
    f.finish();
}

// ---------------------------------------------------------------------------
// A flood of short-lived kernel-like processes against the journal and the log
// ---------------------------------------------------------------------------
//
// The attacker starts hundreds of processes a second that the daemon takes
// for Jupyter kernels (`tail -f …/kernel-<id>.json`, renamed), each living a
// couple of seconds: every one is watched, and its end is a post-mortem.
// With one journal for everything, the post-mortems rotated `started` and
// every signal out of all the journal's files, and every kernel cost two
// log lines. The journal here is the smallest the config allows (5 files of
// 64 KiB), so that the flood fills it in seconds instead of minutes.

/// Processes the flood starts a second, and how long each lives (long
/// enough for a sample to see it).
const FLOOD_RATE: &str = "300";
const FLOOD_LIFE: &str = "2";
/// How long the flood runs.
const FLOOD_FOR: Duration = Duration::from_secs(25);
/// The most log lines that may name the flood's processes: the daemon
/// bounds what it logs about one user's processes (30 lines a minute),
/// far below the two lines per process the flood asks for.
const FLOOD_LOG_LINES: usize = 100;
/// The most post-mortems of the attacker's that may be written in full:
/// each user's share of the journal is 100 process events a minute.
const FLOOD_FULL_POSTMORTEMS: usize = 250;

/// The journal's events as `headroom events --journal PATH --json` prints them.
fn journal_events(f: &mut Findings, journal: &Path) -> Vec<serde_json::Value> {
    let out = Command::new(HEADROOM)
        .args(["events", "--json", "--journal"])
        .arg(journal)
        .output()
        .expect("headroom events");
    f.check(out.status.success(), || {
        format!(
            "`headroom events --journal {}` failed: {}",
            journal.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Stop the daemon as its service manager would (SIGTERM) and wait for it.
fn stop_daemon(f: &mut Findings, d: &mut RootDaemon) {
    let _ = Command::new("kill")
        .args(["-TERM", &d.pid.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while d.running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    f.check(!d.running(), || {
        format!(
            "the daemon did not stop within 30 s of SIGTERM; its last log lines:\n{}",
            d.log_tail(15)
        )
    });
}

/// Every file of the journal's directory is root's and private (0600): a
/// user reads no one's post-mortems there.
fn journal_files_private(f: &mut Findings, dir: &Path) {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(dir) else {
        f.fail(format!(
            "cannot list the journal's directory {}",
            dir.display()
        ));
        return;
    };
    let mut names = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.contains("jsonl") {
            continue;
        }
        if let Ok(meta) = entry.metadata() {
            f.check(meta.uid() == 0 && meta.mode() & 0o077 == 0, || {
                format!(
                    "journal file {name} is owned by uid {} with mode {:04o}: other users \
                     may read it",
                    meta.uid(),
                    meta.mode() & 0o7777
                )
            });
        }
        names.push(name);
    }
    names.sort();
    f.note(format!("journal files: {}", names.join(" ")));
}

#[test]
fn a_flood_of_short_lived_kernels_leaves_the_journal_every_action_and_the_log_bounded() {
    let session = begin("short-lived kernel flood against the journal and the log");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    ensure_user(REGULAR_ATTACKER, false);
    let state = dir.path().join("state");
    let journal = state.join("journal.jsonl");
    // Connection files the kernel-like processes are given, and the
    // program they run, renamed so that the log says which lines are theirs.
    let flood = stage.path("flood");
    std::fs::create_dir(&flood).expect("mkdir flood");
    chmod(&flood, 0o755);
    for i in 0..16 {
        let file = flood.join(format!("kernel-flood{i:02}.json"));
        std::fs::write(&file, "{}\n").expect("write a connection file");
        chmod(&file, 0o644);
    }
    let program = flood.join("flood-kernel");
    std::os::unix::fs::symlink("/usr/bin/tail", &program).expect("link tail");
    // The victim's notebook kernel, ended during the flood.
    let victim_dir = stage.path("victim");
    std::fs::create_dir(&victim_dir).expect("mkdir victim");
    chmod(&victim_dir, 0o755);
    let victim_file = victim_dir.join("kernel-victim01.json");
    std::fs::write(&victim_file, "{}\n").expect("write the victim's connection file");
    chmod(&victim_file, 0o644);
    let victim_program = victim_dir.join("victim-kernel");
    std::os::unix::fs::symlink("/usr/bin/tail", &victim_program).expect("link tail");

    let link = stage.hog_link("hogs", "hog-flood");
    let text = config_with_journal(
        &journal,
        &format!(
            "journal_max_size = \"64KiB\"\njournal_files = 5\n\n{}",
            hog_rule(&link, None)
        ),
    );
    if let Some(mut d) = start(&mut f, dir.path(), &text)
        && let Some(base) = baseline(&mut f, &d, &link)
    {
        let mut victim = Proc::spawn({
            let mut c = as_user(REGULAR_ATTACKER, &victim_program);
            c.arg("-f").arg(&victim_file);
            c
        });
        let victim_pid = victim.pid();
        let program = program.display().to_string();
        let files = flood.display().to_string();
        let flood_started = Instant::now();
        let mut attacker = Proc::spawn(attacker_python(
            &stage,
            &["churn", &program, &files, FLOOD_RATE, FLOOD_LIFE],
        ));
        attacker.expect_line("status spawned=", Duration::from_secs(30));
        std::thread::sleep(Duration::from_secs(8));
        let attacked = attacked_reaction(&mut f, &mut d, &link, &base);
        // The victim closes the notebook in the middle of the flood.
        f.check(alive(victim_pid), || {
            format!("the victim's kernel (pid {victim_pid}) was ended during the flood")
        });
        victim.kill();
        let left = FLOOD_FOR.saturating_sub(flood_started.elapsed());
        std::thread::sleep(left);
        healthz_during(&mut f, &d);
        let spawned = attacker.last("status spawned=");
        f.note(format!(
            "attacker: {}",
            spawned.as_deref().unwrap_or("no status")
        ));
        attacker.kill();
        // The last ones' post-mortems.
        std::thread::sleep(Duration::from_secs(4));
        let hwm = memory_bounded(&mut f, &d, base.hwm);
        report_figures(&f, &base, hwm, attacked);
        stop_daemon(&mut f, &mut d);

        // The log: a bounded number of lines about the flood's processes,
        // and a line that says how many more there were.
        let log = d.log_text();
        let flood_lines = log.lines().filter(|l| l.contains("flood-kernel")).count();
        f.note(format!(
            "log: {} lines in all, {flood_lines} naming the flood's processes",
            log.lines().count()
        ));
        f.check(flood_lines <= FLOOD_LOG_LINES, || {
            format!(
                "the daemon logged {flood_lines} lines about {ATTACKER}'s short-lived processes \
                 (at most {FLOOD_LOG_LINES} expected): one user's processes make the log grow \
                 without bound"
            )
        });
        // The count comes when the source's minute ends, or at the stop.
        let source = format!("the processes of uid {}", uid_of(ATTACKER));
        let counted = log
            .lines()
            .find(|l| l.contains("more lines about") && l.contains(&source));
        f.check(counted.is_some(), || {
            format!("no log line says how many lines about {source} were suppressed")
        });
        if let Some(line) = counted {
            f.note(format!("log: {line}"));
        }

        // The journal: the daemon's start and stop, every signal, the
        // victim's post-mortem; the attacker's flood summarised.
        let events = journal_events(&mut f, &journal);
        let named = |name: &str| {
            events
                .iter()
                .filter(|e| e["event"] == name)
                .collect::<Vec<_>>()
        };
        f.note(format!(
            "journal: {} events, {} post-mortems",
            events.len(),
            named("exited").len()
        ));
        f.check(named("started").len() == 1, || {
            format!(
                "the journal holds {} `started` events (1 expected): the flood of post-mortems \
                 rotated the daemon's start out of every journal file",
                named("started").len()
            )
        });
        f.check(named("stopped").len() == 1, || {
            format!(
                "the journal holds {} `stopped` events (1 expected)",
                named("stopped").len()
            )
        });
        let actions = named("action");
        let sigterms = actions
            .iter()
            .filter(|e| e["action"] == "SIGTERM" && e["rule"] == "hog-limit")
            .count();
        f.check(sigterms == 2, || {
            format!(
                "the journal holds {sigterms} of the 2 SIGTERMs sent to the hogs (the first \
                 before the flood, the second during it): the flood pushed actions out"
            )
        });
        for a in &actions {
            f.check(a["process"]["name"] == "hog-flood", || {
                format!("the daemon acted on a process that is not the hog: {a}")
            });
        }
        let victim_end = named("exited")
            .into_iter()
            .any(|e| e["process"]["pid"] == victim_pid);
        f.check(victim_end, || {
            format!(
                "the journal has no post-mortem of the victim's kernel (pid {victim_pid}, \
                 {REGULAR_ATTACKER}), which ended during {ATTACKER}'s flood"
            )
        });
        let attacker_uid = uid_of(ATTACKER);
        let full = named("exited")
            .into_iter()
            .filter(|e| e["process"]["uid"] == attacker_uid)
            .count();
        let summaries = named("events-summarized");
        let summarized: u64 = summaries
            .iter()
            .filter(|e| e["uid"] == attacker_uid)
            .filter_map(|e| e["left_out"]["exited"].as_u64())
            .sum();
        f.note(format!(
            "journal: {full} of {ATTACKER}'s post-mortems written in full, {summarized} counted \
             in {} summaries",
            summaries.len()
        ));
        f.check(full <= FLOOD_FULL_POSTMORTEMS, || {
            format!(
                "{full} of {ATTACKER}'s post-mortems were written in full (at most \
                 {FLOOD_FULL_POSTMORTEMS} expected): one user has the journal to itself"
            )
        });
        f.check(summarized > 0, || {
            format!("no `events-summarized` event counts {ATTACKER}'s post-mortems left out")
        });
        journal_files_private(&mut f, &state);
    }
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
fn events_in_journal(path: &Path) -> Vec<serde_json::Value> {
    crate::support::journal::events(path)
}

/// The post-mortem (`exited` event) of `pid` in the journal, once written.
fn postmortem_of(journal: &Path, pid: u32, within: Duration) -> Option<serde_json::Value> {
    let deadline = Instant::now() + within;
    loop {
        let found = events_in_journal(journal)
            .into_iter()
            .find(|e| e["event"] == "exited" && e["process"]["pid"] == pid);
        if found.is_some() || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The journal's actions: `(pid, action, outcome)`.
fn actions_in_journal(journal: &Path) -> Vec<(u64, String, String)> {
    events_in_journal(journal)
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
    let actions = actions_in_journal(journal);
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
        let others = events_in_journal(&journal)
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

// ---------------------------------------------------------------------------
// A process group another user's hog joined (`process_group = true` in a
// session two users share)
// ---------------------------------------------------------------------------

use crate::support::attack::kill_group;

/// The root harness of a session two users share (as a `tmux` started for
/// both): it runs in a session of its own (through `setsid`), starts the
/// victim's job as the leader of a process group, says `victim PID`, then
/// starts the attacker's program, which joins the victim's group with
/// `setpgid(0, pgid)` (allowed within one session, whoever owns the group)
/// and execs the hog. The victim's job prints nothing; the hog's lines come
/// out on the harness's stdout.
const SHARED_SESSION: &str = r#"
import os, subprocess, sys
victim_user, attacker_user, hog = sys.argv[1:4]
def as_user(user, argv):
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"] + argv
victim = subprocess.Popen(
    as_user(victim_user, ["/bin/sh", "-c", "sleep 100000; : victim-job-XYZ"]),
    process_group=0, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
print(f"victim {victim.pid} session {os.getsid(0)}", flush=True)
join = "import os, sys; os.setpgid(0, int(sys.argv[1])); os.execv(sys.argv[2], sys.argv[2:])"
attacker = subprocess.Popen(
    as_user(attacker_user, ["/usr/bin/python3", "-c", join, str(victim.pid), hog] + sys.argv[4:]),
    stdin=subprocess.DEVNULL)
attacker.wait()
victim.wait()
"#;

/// The shared session: its harness, and the groups to kill when the test
/// ends (the harness's and the victim's, which the hog joined).
struct SharedSession {
    harness: Proc,
    victim: u32,
    session: u32,
}

impl SharedSession {
    /// Start the harness with the victim `victim_user` and the attacker's
    /// hog started through `link` (growing at the reaction hogs' rate).
    fn start(victim_user: &str, link: &Path) -> SharedSession {
        let mut c = Command::new("setsid");
        c.args(["--wait", "/usr/bin/python3", "-u", "-c", SHARED_SESSION])
            .args([victim_user, ATTACKER])
            .arg(link)
            .args([
                "--rate",
                crate::support::attack::HOG_RATE,
                "--max",
                crate::support::attack::HOG_MAX,
                "--catch",
                "TERM",
            ]);
        let mut harness = Proc::spawn(c);
        let (_, line) = harness.expect_line("victim ", Duration::from_secs(20));
        let mut words = line.split_whitespace().skip(1).step_by(2);
        let mut next = || words.next().and_then(|w| w.parse::<u32>().ok());
        let (Some(victim), Some(session)) = (next(), next()) else {
            panic!("the harness said {line:?}");
        };
        SharedSession {
            harness,
            victim,
            session,
        }
    }
}

impl Drop for SharedSession {
    fn drop(&mut self) {
        kill_group(self.victim);
        kill_group(self.session);
        self.harness.kill();
    }
}

/// The figures of an attack without a baseline hog: the daemon's peak
/// memory before and after, and how the attacker's hog was stopped.
fn report_reaction(f: &Findings, base_hwm: u64, hwm: u64, attacked: Option<Reaction>) {
    let fmt = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v:.0}"));
    f.figures(&[
        ("hwm_base_mib", format!("{:.1}", mib(base_hwm))),
        ("hwm_attack_mib", format!("{:.1}", mib(hwm))),
        ("past_attack_mib", fmt(attacked.map(|r| r.past_limit_mib))),
        ("ms_attack", fmt(attacked.map(|r| r.ms_after_crossing))),
    ]);
}

/// The members of process group `pgid` now, with their owners.
fn group_with_owners(pgid: u32) -> Vec<(u32, Option<u32>)> {
    headroom::act::identity::group_members(pgid)
        .unwrap_or_default()
        .into_iter()
        .map(|pid| {
            let owner = headroom::act::identity::member(pid)
                .ok()
                .flatten()
                .and_then(|m| m.uid);
            (pid, owner)
        })
        .collect()
}

/// The journal's `action` events on `pid` (in `dir/journal.jsonl`), once
/// there is one or after 10 s.
fn journaled_actions_on(dir: &Path, pid: u32) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap_or_default();
        let found: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["event"] == "action" && e["process"]["pid"] == pid)
            .collect();
        if !found.is_empty() || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_group_signal_spares_another_users_job_the_hog_joined() {
    let session = begin("process group joined in a shared session");
    let mut f = Findings::new(&session);
    // A second, ordinary account plays the victim.
    ensure_user(REGULAR_ATTACKER, false);
    let (victim_uid, attacker_uid) = (uid_of(REGULAR_ATTACKER), uid_of(ATTACKER));
    let stage = Stage::new();
    let dir = private_dir();
    let link = stage.hog_link("joined", "hog-joined");
    let text = config(
        dir.path(),
        &format!(
            "[[rule]]\nname = \"group-limit\"\nfootprint = \"{}MiB\"\nother_users = true\n\
             cooldown = \"1h\"\nactions = [{{ signal = \"SIGTERM\", process_group = true }}]\n\
             [rule.match]\nargv = {}\n",
            LIMIT / MIB,
            argv_pattern(&link)
        ),
    );
    if let Some(mut d) = start(&mut f, dir.path(), &text) {
        let base_hwm = d.hwm();
        let mut shared = SharedSession::start(REGULAR_ATTACKER, &link);
        let hog_pid = match shared.harness.wait_line("ready", Duration::from_secs(20)) {
            Some(_) => group_with_owners(shared.victim)
                .into_iter()
                .find(|&(_, owner)| owner == Some(attacker_uid))
                .map(|(pid, _)| pid),
            None => None,
        };
        let victims: Vec<u32> = group_with_owners(shared.victim)
            .into_iter()
            .filter(|&(_, owner)| owner == Some(victim_uid))
            .map(|(pid, _)| pid)
            .collect();
        f.note(format!(
            "process group {}: the victim's {victims:?} (uid {victim_uid}) and the attacker's hog \
             {hog_pid:?} (uid {attacker_uid})",
            shared.victim
        ));
        assert!(
            hog_pid.is_some() && !victims.is_empty(),
            "the attacker's hog did not join the victim's group {}: {:?}\n{}",
            shared.victim,
            group_with_owners(shared.victim),
            shared.harness.output()
        );
        let hog_pid = hog_pid.unwrap_or_default();
        let reaction = match await_reaction(&mut shared.harness, LIMIT, SIGNAL_WITHIN) {
            Ok(r) => {
                f.note(format!(
                    "the hog was signalled {:.0} MiB past the limit, {:.0} ms after crossing",
                    r.past_limit_mib, r.ms_after_crossing
                ));
                Some(r)
            }
            Err(why) => {
                f.fail(format!("the attacker's hog in the victim's group: {why}"));
                None
            }
        };
        std::thread::sleep(Duration::from_secs(2));
        for &pid in &victims {
            f.check(alive(pid), || {
                format!(
                    "the victim's process {pid} (uid {victim_uid}) died: the step signalled the \
                     process group {} that {ATTACKER}'s hog had joined",
                    shared.victim
                )
            });
        }
        // The journal records the step, and who was spared and why.
        let actions = journaled_actions_on(dir.path(), hog_pid);
        let spared = format!(
            "left alone: pid {} (uid {victim_uid}, not the target's owner uid {attacker_uid})",
            shared.victim
        );
        match actions.first() {
            Some(a) => {
                let detail = a["detail"].as_str().unwrap_or_default();
                f.note(format!("journal: {} {detail}", a["outcome"]));
                f.check(a["outcome"] == "done" && detail.contains(&spared), || {
                    format!("the journal's action on the hog does not say {spared:?}: {a}")
                });
            }
            None => f.fail(format!(
                "no action on the hog (pid {hog_pid}) in the journal within 10 s"
            )),
        }
        let log = d.log_text();
        f.check(log.contains(&spared), || {
            format!(
                "the daemon's log does not say {spared:?}; its last lines:\n{}",
                d.log_tail(10)
            )
        });
        // What the attacker reads of the event names no more than `ps` does.
        let out = attacker_python(&stage, &["get", &d.url("/api/v1/events")])
            .output()
            .expect("attacker get");
        let events = String::from_utf8_lossy(&out.stdout);
        f.check(!events.contains("victim-job-XYZ"), || {
            format!(
                "{ATTACKER} reads the victim's command line in /api/v1/events: {}",
                excerpt(&events, "victim-job-XYZ")
            )
        });
        let hwm = memory_bounded(&mut f, &d, base_hwm);
        report_reaction(&f, base_hwm, hwm, reaction);
    }
    f.finish();
}

// ---------------------------------------------------------------------------
// A notifier planted early on the daemon's PATH
// ---------------------------------------------------------------------------

/// The journal's `action` events of `rule` (in `dir/journal.jsonl`), once
/// there is one or after 20 s.
fn journaled_actions_of(dir: &Path, rule: &str) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap_or_default();
        let found: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["event"] == "action" && e["rule"] == rule)
            .collect();
        if !found.is_empty() || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn notifications_run_no_program_from_the_daemons_path() {
    let session = begin("notify-send planted on the daemon's PATH");
    let mut f = Findings::new(&session);
    let stage = Stage::new();
    let dir = private_dir();
    // The attacker's directory, group-writable, first on the daemon's PATH,
    // with a notify-send that records who ran it and with what.
    let bin = stage.path("attacker-bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let ran = bin.join("ran");
    let planted = bin.join("notify-send");
    std::fs::write(
        &planted,
        format!(
            "#!/bin/sh\necho \"uid $(id -u): $*\" >> {}\n",
            ran.display()
        ),
    )
    .expect("write notify-send");
    chmod(&planted, 0o755);
    let attacker = uid_of(ATTACKER);
    chown(&planted, attacker);
    chown(&bin, attacker);
    chmod(&bin, 0o775);
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    // Root's process crosses a notify rule; the attacker's hog a SIGTERM rule.
    let notified = stage.hog_link("notified", "hog-notified");
    let link = stage.hog_link("hogs", "hog-limit");
    let text = config(
        dir.path(),
        &format!(
            "[[rule]]\nname = \"notify-root\"\nfootprint = \"64MiB\"\nroot = true\n\
             cooldown = \"1h\"\nactions = [{{ notify = true }}]\n[rule.match]\nargv = {}\n\n{}",
            argv_pattern(&notified),
            hog_rule(&link, None)
        ),
    );
    // A session bus for root, so that only the notifier's lookup decides.
    let env = [
        ("PATH", path.as_str()),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus"),
    ];
    match RootDaemon::start_with_env(dir.path(), &text, &env) {
        Ok(mut d) => {
            let base_hwm = d.hwm();
            let mut root_hog = Proc::spawn({
                let mut c = Command::new(&notified);
                c.args(["--rate", "max", "--max", "128MiB", "--catch", "TERM"]);
                c
            });
            root_hog.expect_line("ready", Duration::from_secs(20));
            let mut hog = hog_as(ATTACKER, &link);
            let reaction = match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
                Ok(r) => {
                    f.note(format!(
                        "the attacker's hog was signalled {:.0} MiB past the limit, {:.0} ms \
                         after crossing",
                        r.past_limit_mib, r.ms_after_crossing
                    ));
                    Some(r)
                }
                Err(why) => {
                    f.fail(format!("the attacker's hog: {why}"));
                    None
                }
            };
            // The notification's outcome is journaled when its run ends.
            let notes = journaled_actions_of(dir.path(), "notify-root");
            match notes.first() {
                Some(a) => {
                    f.note(format!("journal: notify {} {}", a["outcome"], a["why"]));
                    f.check(a["process"]["pid"] == root_hog.pid(), || {
                        format!("the notify action is not on root's process: {a}")
                    });
                }
                None => f.fail("no notify action in the journal within 20 s".into()),
            }
            std::thread::sleep(Duration::from_secs(2));
            let said = std::fs::read_to_string(&ran).unwrap_or_default();
            f.check(said.is_empty(), || {
                format!(
                    "the daemon ran {} (owned by {ATTACKER}, first on its PATH): {}",
                    planted.display(),
                    said.trim()
                )
            });
            if let Some(line) = d
                .log_text()
                .lines()
                .find(|l| l.contains("notifications cannot be shown"))
            {
                f.note(format!("the daemon said: {line}"));
            }
            root_hog.drain();
            f.check(root_hog.last("signal ").is_none(), || {
                format!(
                    "root's process under the notify rule was signalled: {:?}",
                    root_hog.last("signal ")
                )
            });
            // The doctor, run with the same PATH, names no file of the attacker's.
            let doctor = Command::new(HEADROOM)
                .arg("doctor")
                .env("PATH", &path)
                .output()
                .expect("headroom doctor");
            let report = String::from_utf8_lossy(&doctor.stdout);
            let line = report
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some("notifier"))
                .unwrap_or_default()
                .to_string();
            f.note(format!("headroom doctor: {line}"));
            f.check(!line.is_empty() && !line.contains("attacker-bin"), || {
                format!("headroom doctor's notifier line: {line:?}")
            });
            let hwm = memory_bounded(&mut f, &d, base_hwm);
            report_reaction(&f, base_hwm, hwm, reaction);
        }
        Err(e) => f.fail(format!(
            "the daemon did not start (exit code {:?}); its log:\n{}",
            e.code, e.log
        )),
    }
    f.finish();
}

// ---------------------------------------------------------------------------
// The system service installed from a binary its user can replace
// ---------------------------------------------------------------------------

/// Where the README says a system service's own copy of headroom goes on
/// Linux.
const ROOT_COPY: &str = "/usr/local/sbin/headroom";

/// `headroom service install --system` for real, in a mount namespace of its
/// own (`unshare --mount`): tmpfs over `/etc/systemd/system` and
/// `/usr/local/sbin`, `/run/systemd/system` made where systemd does not run
/// this machine (the installer checks for it before writing anything), and
/// `systemctl` replaced by `$1`, which records its arguments. `$2` (the attacker's copy of headroom) installs the service on
/// the config `$3`; the script says what the unit runs and who owns the
/// service's copy, if one was made; then the attacker (`$5`) overwrites
/// `$2` with `$4`, and the script starts the unit's `ExecStart=` as systemd
/// would at the next boot: the daemon, in the namespace's place.
const PRIVATE_INSTALL: &str = r#"
set -e
for d in /etc/systemd/system /usr/local/sbin; do
    mount -t tmpfs -o mode=0755 headroom-install "$d"
done
if [ ! -d /run/systemd/system ]; then
    run=/run/systemd
    [ -d "$run" ] || run=/run
    mount -t tmpfs -o mode=0755 headroom-systemd "$run"
    mkdir -p /run/systemd/system
fi
mount --bind "$1" /usr/bin/systemctl
"$2" service install --system --config "$3"
exec_start=$(sed -n 's/^ExecStart=//p' /etc/systemd/system/headroom.service)
echo "unit runs: $exec_start"
echo "copy: $(stat -c 'uid=%u mode=%a' /usr/local/sbin/headroom 2>/dev/null || echo none)"
setpriv --reuid="$5" --regid="$5" --init-groups -- /bin/cp "$4" "$2"
echo "replaced $2"
exec $exec_start
"#;

#[test]
fn the_system_service_runs_no_binary_its_user_can_replace() {
    let session = begin("service installed from a binary its user can replace");
    let mut f = Findings::new(&session);
    need_tools_for_the_private_install();
    let stage = Stage::new();
    let dir = private_dir();
    // Root's, and open to the attacker, who must reach their home in it.
    chmod(dir.path(), 0o755);
    let attacker = uid_of(ATTACKER);
    // The attacker's `cargo install`: ~/.cargo/bin/headroom, theirs.
    let home = dir.path().join("home");
    let cargo_bin = home.join(".cargo/bin");
    std::fs::create_dir_all(&cargo_bin).expect("mkdir");
    let theirs = cargo_bin.join("headroom");
    std::fs::copy(HEADROOM, &theirs).expect("copy headroom");
    for p in [&home, &home.join(".cargo"), &cargo_bin, &theirs] {
        chmod(p, 0o755);
        chown(p, attacker);
    }
    // What they put there once root has installed the service: it notes
    // who ran it, then runs headroom, so that nothing looks amiss.
    let ran = home.join("ran-as");
    let evil = stage.path("evil-headroom");
    std::fs::write(
        &evil,
        format!(
            "#!/bin/sh\nid -u >> {}\nexec {HEADROOM} \"$@\"\n",
            ran.display()
        ),
    )
    .expect("write the replacement");
    chmod(&evil, 0o755);
    let systemctl = dir.path().join("systemctl");
    let calls = dir.path().join("systemctl-calls");
    std::fs::write(
        &systemctl,
        format!("#!/bin/sh\necho \"$*\" >> {}\n", calls.display()),
    )
    .expect("write systemctl");
    chmod(&systemctl, 0o755);
    let link = stage.hog_link("hogs", "hog-limit");
    let cfg = dir.path().join("headroom.toml");
    std::fs::write(
        &cfg,
        config(
            dir.path(),
            &format!(
                "[http]\nlisten = \"127.0.0.1:0\"\n\n{}",
                hog_rule(&link, None)
            ),
        ),
    )
    .expect("write config");
    chmod(&cfg, 0o644);
    let mut service = Proc::spawn({
        let mut c = Command::new("unshare");
        c.args(["--mount", "--propagation", "private", "/bin/sh", "-c"])
            .arg(PRIVATE_INSTALL)
            .arg("private-install")
            .args([&systemctl, &theirs, &cfg, &evil])
            .arg(ATTACKER)
            .env("HEADROOM_LOG", "info");
        c
    });
    let started = service.wait_line("first sample:", Duration::from_secs(60));
    for needle in [
        "unit runs: ",
        "copy: ",
        "stderr: installed ",
        "stderr: headroom: ",
    ] {
        if let Some(line) = service.last(needle) {
            f.note(format!("install: {line}"));
        }
    }
    let unit_runs = service.last("unit runs: ").unwrap_or_default();
    f.check(
        !unit_runs.is_empty() && !unit_runs.contains(&*theirs.display().to_string()),
        || {
            format!(
                "the system unit runs {} (owned by {ATTACKER}): {unit_runs:?}",
                theirs.display()
            )
        },
    );
    let copy = service.last("copy: ").unwrap_or_default();
    f.check(
        unit_runs.contains(ROOT_COPY) && copy.ends_with("uid=0 mode=755"),
        || {
            format!(
                "the unit does not run a root-owned copy at {ROOT_COPY}: {unit_runs:?}, {copy:?}"
            )
        },
    );
    if started.is_none() {
        f.fail(format!(
            "the installed service never took its first sample; its output:\n{}",
            service.output()
        ));
    } else {
        let base_hwm = status_bytes(service.pid(), "VmHWM").unwrap_or(0);
        let mut hog = hog_as(ATTACKER, &link);
        let reaction = match await_reaction(&mut hog, LIMIT, SIGNAL_WITHIN) {
            Ok(r) => {
                f.note(format!(
                    "the hog was signalled {:.0} MiB past the limit, {:.0} ms after crossing",
                    r.past_limit_mib, r.ms_after_crossing
                ));
                Some(r)
            }
            Err(why) => {
                f.fail(format!(
                    "the installed service: {why}\nits output:\n{}",
                    service.output()
                ));
                None
            }
        };
        let actions = journaled_actions_on(dir.path(), hog.pid());
        f.check(
            actions.first().is_some_and(|a| a["outcome"] == "done"),
            || format!("the journal holds no SIGTERM done on the hog: {actions:?}"),
        );
        let hwm = status_bytes(service.pid(), "VmHWM").unwrap_or(u64::MAX);
        f.check(hwm <= base_hwm + MEMORY_SLACK, || {
            format!(
                "the service's VmHWM {:.1} MiB, past its first sample's {:.1} MiB + {} MiB",
                mib(hwm),
                mib(base_hwm),
                MEMORY_SLACK / MIB
            )
        });
        report_reaction(&f, base_hwm, hwm, reaction);
    }
    let said = std::fs::read_to_string(&ran).unwrap_or_default();
    f.check(said.is_empty(), || {
        format!(
            "the service ran {ATTACKER}'s replacement of {} as uid {}",
            theirs.display(),
            said.trim()
        )
    });
    f.note(format!(
        "systemctl was called with: {:?}",
        std::fs::read_to_string(&calls)
            .unwrap_or_default()
            .lines()
            .collect::<Vec<_>>()
    ));
    service.kill();
    f.finish();
}

/// The private install needs `unshare` and `mount` (util-linux, mount) and
/// a `systemctl` to stand in for.
fn need_tools_for_the_private_install() {
    support::need_tools(&[("unshare", "util-linux"), ("mount", "mount")]);
    assert!(
        Path::new("/usr/bin/systemctl").exists() && Path::new("/etc/systemd/system").is_dir(),
        "the private install stands in for /usr/bin/systemctl and /etc/systemd/system: install \
         the Debian package systemd"
    );
}
