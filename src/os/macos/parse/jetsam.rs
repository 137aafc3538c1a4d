//! Jetsam kills as the macOS kernel logs them, read from `log stream
//! --style ndjson` (pure: compiled and tested on every OS).
//!
//! When memorystatus (jetsam) kills a process it writes one line to the
//! unified log, subsystem `com.apple.xnu`, category `memorystatus`, from the
//! kernel (`processID` 0). The forms, from `bsd/kern/kern_memorystatus.c`
//! and `bsd/kern/kern_proc.c` (xnu-11417.101.15, apple-oss-distributions/xnu):
//!
//! ```text
//! %lu.%03d memorystatus: killing_specific_process pid %d [%s] (%s %d %llus rf:%s) %lluKB - memorystatus_available_pages: %llu
//! memorystatus: %s pid %d [%s] (%s %d %llus rf:%s) %lluKB - memorystatus_available_pages: %llu compressor_size:%u
//! memorystatus: %s%d pid %d [%s] (%s %d %llus rf:%s - memorystatus_available_pages: %llu
//! memorystatus: killing_idle_process pid %d [%s] jetsam_reason->osr_code: %llu
//! memorystatus: killing largest compressed process %s [%d] %llu MB
//! memorystatus: killing %s [%d] due to swap exhaustion
//! ```
//!
//! where the second `%s` is `killing_top_process`, `killing_idle_process`
//! or `killing_highwater_process`, the third is `killing_*_aggressive`, and
//! the reason in parentheses is one of `memorystatus_kill_cause_name[]`
//! (`per-process-limit`, `vm-pageshortage`, `vnode-limit`, …; newer kernels
//! add ` type:%s`, older ones have no age, no `rf:` and no size). The size
//! is the victim's footprint when it was killed.
//!
//! [`PREDICATE`] selects those lines for `log stream`; [`parse_stream_line`]
//! reads one line of its `--style ndjson` output (one JSON object per log
//! entry, after a `Filtering the log data using …` preamble) and accepts a
//! kill only from the kernel (`processID` 0): any process can write
//! "memorystatus: killing …" to the log under its own pid, and such a line
//! is refused, not believed. [`parse_kill_message`] reads the message, and
//! only as a whole: the kernel's own lines quote process names too
//! (`memorystatus: NAME [PID] exceeded mem limit: …`), so a kill form is
//! matched from the message's start to the kernel's figures at its end.

use serde::Deserialize;

/// The `log stream --predicate` for the kernel's kill lines.
pub const PREDICATE: &str = r#"processID == 0 AND eventMessage CONTAINS "memorystatus: killing""#;

/// The arguments of `/usr/bin/log` that follow jetsam kills as they are
/// written.
pub const LOG_STREAM_ARGS: [&str; 5] = ["stream", "--style", "ndjson", "--predicate", PREDICATE];

/// The longest line of `log stream` output read; a longer one is refused.
pub const MAX_LINE: usize = 64 * 1024;

/// One jetsam kill as the kernel logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JetsamKill {
    pub pid: u32,
    /// The process name as jetsam wrote it (`p_name`, up to 32 bytes).
    pub name: String,
    /// What jetsam did: `killing_specific_process`, `killing_top_process`,
    /// `killing largest compressed process`, …
    pub action: String,
    /// The kill cause (`per-process-limit`, `vm-pageshortage`), where the
    /// line names it.
    pub reason: Option<String>,
    /// The jetsam priority band the victim was in.
    pub priority: Option<i32>,
    /// Its footprint when killed (for `killing largest compressed process`,
    /// its compressed size), in bytes.
    pub footprint_bytes: Option<u64>,
    /// The kernel's words.
    pub message: String,
}

/// What one line of `log stream --style ndjson` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamLine {
    /// A kernel kill line.
    Kill(JetsamKill),
    /// Something else `log` writes (its preamble, an entry that is not a
    /// kill): nothing to do.
    Other,
    /// A log entry that claims to be a kill but was not written by the
    /// kernel (its `processID` is not 0): refused.
    NotKernel { pid: Option<i64> },
    /// A line that is not what `log stream --style ndjson` writes.
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    #[serde(default)]
    event_message: Option<String>,
    #[serde(default, rename = "processID")]
    process_id: Option<i64>,
}

/// Read one line of `log stream --style ndjson` output.
pub fn parse_stream_line(line: &str) -> StreamLine {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.len() > MAX_LINE {
        return StreamLine::Invalid(format!(
            "a line of {} bytes (at most {MAX_LINE})",
            line.len()
        ));
    }
    if line.is_empty() || line.starts_with("Filtering the log data") {
        return StreamLine::Other;
    }
    if !line.starts_with('{') {
        return StreamLine::Invalid(format!("not a JSON object: {}", head(line)));
    }
    let entry: Entry = match serde_json::from_str(line) {
        Ok(e) => e,
        Err(e) => return StreamLine::Invalid(format!("{e}: {}", head(line))),
    };
    let Some(message) = entry.event_message else {
        return StreamLine::Other;
    };
    let Some(kill) = parse_kill_message(&message) else {
        return StreamLine::Other;
    };
    if entry.process_id != Some(0) {
        return StreamLine::NotKernel {
            pid: entry.process_id,
        };
    }
    StreamLine::Kill(kill)
}

/// The first 80 characters of `line`, for an error.
fn head(line: &str) -> String {
    line.chars().take(80).collect()
}

/// Read a kernel kill message (see the module documentation). The message
/// must be the kernel's line from its first byte to its last: other kernel
/// lines quote process names (`memorystatus: NAME [PID] exceeded mem
/// limit: …`), up to 32 bytes of another user's choice, and a name made to
/// read `killing_top_process pid 4242 [x]` must not make a kill.
pub fn parse_kill_message(message: &str) -> Option<JetsamKill> {
    let message = message.trim_end();
    // `%lu.%03d ` before `memorystatus:` in some forms.
    let rest = without_uptime(message)
        .strip_prefix("memorystatus: ")
        .filter(|r| r.starts_with("killing"))?;
    if let Some(rest) = rest.strip_prefix("killing largest compressed process ") {
        let (name, pid, after) = name_then_pid(rest)?;
        let mb: Option<u64> = after
            .trim()
            .strip_suffix(" MB")
            .and_then(|n| n.parse().ok());
        return Some(JetsamKill {
            pid,
            name: name.to_string(),
            action: "killing largest compressed process".into(),
            reason: Some("low-swap".into()),
            priority: None,
            footprint_bytes: mb.map(|m| m.saturating_mul(1 << 20)),
            message: message.to_string(),
        });
    }
    if let Some(rest) = rest.strip_prefix("killing ")
        && !rest.starts_with("process ")
        && rest.ends_with(" due to swap exhaustion")
    {
        let (name, pid, _) = name_then_pid(rest)?;
        return Some(JetsamKill {
            pid,
            name: name.to_string(),
            action: "killing".into(),
            reason: Some("low-swap".into()),
            priority: None,
            footprint_bytes: None,
            message: message.to_string(),
        });
    }
    // `killing_… pid N [NAME] (REASON PRIO AGEs rf:… type:…) SIZEKB - …`,
    // ending in the kernel's figures.
    if !ends_with_kill_figures(rest) {
        return None;
    }
    let (action, after) = rest.split_once(" pid ")?;
    if !action.starts_with("killing_") || action.contains(' ') {
        return None;
    }
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    let pid = after[..digits].parse().ok()?;
    let after = after[digits..].strip_prefix(" [")?;
    // The name is the process's choice and may hold `] (`: the kernel's
    // own `] (` is the last one (the reason holds no bracket).
    let (name, details) = match after.rfind("] (") {
        Some(i) => (&after[..i], Some(&after[i + 3..])),
        None => (after.rsplit_once(']').map(|(n, _)| n)?, None),
    };
    let mut reason = None;
    let mut priority = None;
    let mut footprint_bytes = None;
    if let Some(details) = details {
        let (inside, tail) = match details.find(')') {
            Some(i) => (&details[..i], &details[i + 1..]),
            None => (
                details
                    .split(" - memorystatus_available_pages")
                    .next()
                    .unwrap_or(details),
                "",
            ),
        };
        let mut words = inside.split_whitespace();
        reason = words.next().map(str::to_string);
        priority = words.next().and_then(|p| p.parse().ok());
        footprint_bytes = tail
            .split_whitespace()
            .next()
            .and_then(|w| w.strip_suffix("KB"))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb.saturating_mul(1024));
    }
    Some(JetsamKill {
        pid,
        name: name.to_string(),
        action: action.to_string(),
        reason,
        priority,
        footprint_bytes,
        message: message.to_string(),
    })
}

/// `message` without the `%lu.%03d ` uptime some forms start with.
fn without_uptime(message: &str) -> &str {
    let Some((stamp, rest)) = message.split_once(' ') else {
        return message;
    };
    let well_formed = stamp.split_once('.').is_some_and(|(secs, ms)| {
        !secs.is_empty()
            && secs.bytes().all(|b| b.is_ascii_digit())
            && ms.len() == 3
            && ms.bytes().all(|b| b.is_ascii_digit())
    });
    if well_formed { rest } else { message }
}

/// Whether a `killing_…` line ends as the kernel ends one:
/// `memorystatus_available_pages: N[ compressor_size:N]` or
/// `jetsam_reason->osr_code: N`.
fn ends_with_kill_figures(text: &str) -> bool {
    let number = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    let text = match text.rsplit_once(" compressor_size:") {
        Some((before, n)) if number(n) => before,
        _ => text,
    };
    [
        "memorystatus_available_pages: ",
        "jetsam_reason->osr_code: ",
    ]
    .iter()
    .any(|words| {
        text.rsplit_once(words)
            .is_some_and(|(before, n)| !before.is_empty() && number(n))
    })
}

/// `NAME [PID]…`: the name, the pid and what follows. The pid is in the
/// last `[digits]` group.
fn name_then_pid(text: &str) -> Option<(&str, u32, &str)> {
    let mut search = text.len();
    while let Some(open) = text[..search].rfind(" [") {
        let inner = &text[open + 2..];
        if let Some(close) = inner.find(']')
            && let Ok(pid) = inner[..close].parse()
        {
            return Some((&text[..open], pid, &inner[close + 1..]));
        }
        search = open;
    }
    None
}

/// A kill cause (`memorystatus_kill_cause_name[]`) in words.
pub fn reason_words(reason: &str) -> &'static str {
    match reason {
        "per-process-limit" => "it went over its own memory limit",
        "highwater" => "it went over its high-water mark",
        "vm-pageshortage" => "the machine ran short of free memory pages",
        "vnode-limit" => "the machine ran out of vnodes (open files)",
        "proc-thrashing" | "fc-thrashing" => "the machine was thrashing",
        "disk-space-shortage" => "the disk ran short of space",
        "idle-exit" | "long-idle-exit" => "it was idle and its memory was reclaimed",
        "zone-map-exhaustion" => "the kernel's memory zones ran out",
        "vm-compressor-thrashing" => "the memory compressor was thrashing",
        "vm-compressor-space-shortage" => "the memory compressor ran out of space",
        "low-swap" => "swap ran out",
        "sustained-memory-pressure" => "memory pressure was sustained",
        "vm-pageout-starvation" => "page-out was starved",
        "jettisoned" => "it was jettisoned",
        _ => "a reason jetsam named",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real kernel lines published by others, each after the line naming
    /// its source.
    const PUBLIC: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/jetsam/public-memorystatus-lines.txt"
    ));

    fn public(source: &str) -> Vec<&'static str> {
        crate::sample::fixture_block(PUBLIC, source)
    }

    /// `line` as `log stream --style ndjson` writes a kernel entry: the
    /// fields and their order of a real entry of the kernel
    /// (tests/fixtures/jetsam/ndjson-kernel-entry.json), the message
    /// replaced.
    fn ndjson(message: &str, pid: i64) -> String {
        let entry = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/jetsam/ndjson-kernel-entry.json"
        ));
        let mut v: serde_json::Value = serde_json::from_str(entry).unwrap();
        v["eventMessage"] = message.into();
        v["processID"] = pid.into();
        serde_json::to_string(&v).unwrap()
    }

    #[test]
    fn a_per_process_limit_kill_gives_pid_reason_and_footprint() {
        let lines = public("worthdoingbadly.com");
        let kill = lines
            .iter()
            .find_map(|l| parse_kill_message(l))
            .expect("a kill");
        assert_eq!((kill.pid, kill.name.as_str()), (449, "amfidebilitate"));
        assert_eq!(kill.action, "killing_specific_process");
        assert_eq!(kill.reason.as_deref(), Some("per-process-limit"));
        assert_eq!(kill.priority, Some(3));
        assert_eq!(kill.footprint_bytes, Some(2_331_079 * 1024));
        assert_eq!(
            reason_words("per-process-limit"),
            "it went over its own memory limit"
        );
    }

    #[test]
    fn the_newer_form_with_age_rf_and_type_is_read() {
        let lines = public("KeyboardSpike");
        let kills: Vec<JetsamKill> = lines.iter().filter_map(|l| parse_kill_message(l)).collect();
        assert_eq!(
            kills.len(),
            1,
            "the limit and band lines are not kills: {kills:#?}"
        );
        let k = &kills[0];
        assert_eq!((k.pid, k.name.as_str()), (994, "KeyboardSpike"));
        assert_eq!(k.reason.as_deref(), Some("per-process-limit"));
        assert_eq!(k.priority, Some(100));
        assert_eq!(k.footprint_bytes, Some(78_850 * 1024));
    }

    #[test]
    fn the_xnu_forms_are_each_read() {
        // The format strings of xnu-11417.101.15, filled in.
        let top = parse_kill_message("memorystatus: killing_top_process pid 901 [Python] (vm-pageshortage 0 86s rf:-) 41943040KB - memorystatus_available_pages: 5021 compressor_size:2304000").unwrap();
        assert_eq!(
            (top.pid, top.reason.as_deref()),
            (901, Some("vm-pageshortage"))
        );
        assert_eq!(top.footprint_bytes, Some(41_943_040 * 1024));
        let aggressive = parse_kill_message("memorystatus: killing_top_process_aggressive3 pid 77 [Python] (proc-thrashing 10 5s rf:- - memorystatus_available_pages: 12").unwrap();
        assert_eq!(
            (aggressive.pid, aggressive.reason.as_deref()),
            (77, Some("proc-thrashing"))
        );
        let idle = parse_kill_message("memorystatus: killing_idle_process pid 386 [wallpaperexportd] jetsam_reason->osr_code: 9").unwrap();
        assert_eq!((idle.pid, idle.reason), (386, None));
        let low_swap = parse_kill_message(
            "memorystatus: killing largest compressed process Python [4242] 30720 MB",
        )
        .unwrap();
        assert_eq!((low_swap.pid, low_swap.name.as_str()), (4242, "Python"));
        assert_eq!(low_swap.footprint_bytes, Some(30720 << 20));
        let swap = parse_kill_message("memorystatus: killing Python [4243] due to swap exhaustion")
            .unwrap();
        assert_eq!((swap.pid, swap.reason.as_deref()), (4243, Some("low-swap")));
    }

    #[test]
    fn other_memorystatus_lines_are_not_kills() {
        for line in [
            "memorystatus: Tunnel [1509] exceeded mem limit: ActiveHard 50 MB (fatal)",
            "memorystatus: killing process 994 [KeyboardSpike] in high band FOREGROUND (100) - memorystatus_available_pages: 113991",
            "memorystatus: killing due to \"vm-pageshortage\" - compression_ratio=4",
            "memorystatus: killing_top_process pid x [y] (z)",
        ] {
            assert_eq!(parse_kill_message(line), None, "{line}");
        }
    }

    #[test]
    fn a_name_made_to_look_like_the_kernel_s_words_stays_the_name() {
        let k = parse_kill_message(
            "memorystatus: killing_specific_process pid 12 [evil] (per-process-limit 0) 1KB] (vm-pageshortage 3 1s rf:-) 2048KB - memorystatus_available_pages: 1",
        )
        .unwrap();
        assert_eq!(k.pid, 12);
        assert_eq!(k.name, "evil] (per-process-limit 0) 1KB");
        assert_eq!(k.reason.as_deref(), Some("vm-pageshortage"));
        assert_eq!(k.footprint_bytes, Some(2048 * 1024));
    }

    #[test]
    fn a_name_made_to_look_like_a_kill_in_another_kernel_line_is_no_kill() {
        // The limit line quotes the process's name (32 bytes at most) first.
        for line in [
            "memorystatus: killing_top_process pid 4242 [x] [1509] exceeded mem limit: ActiveHard 50 MB (fatal)",
            "memorystatus: killing x [4242] due to swap [1509] exceeded mem limit: ActiveHard 50 MB (fatal)",
            "memorystatus: killing_idle_process pid 4242 [x] jetsam_reason->osr_code: 9 and more",
            "Sandbox: memorystatus: killing_idle_process pid 4242 [x] jetsam_reason->osr_code: 9",
            "x memorystatus: killing_idle_process pid 4242 [x] jetsam_reason->osr_code: 9",
        ] {
            assert_eq!(parse_kill_message(line), None, "{line}");
        }
        let stamped = parse_kill_message(
            "12.345 memorystatus: killing_idle_process pid 386 [wallpaperexportd] jetsam_reason->osr_code: 9",
        );
        assert_eq!(stamped.map(|k| k.pid), Some(386));
    }

    #[test]
    fn a_stream_line_is_believed_only_from_the_kernel() {
        let message = public("worthdoingbadly.com")
            .into_iter()
            .find(|l| l.contains("killing_specific_process"))
            .unwrap();
        match parse_stream_line(&ndjson(message, 0)) {
            StreamLine::Kill(k) => assert_eq!(k.pid, 449),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_stream_line(&ndjson(message, 4242)),
            StreamLine::NotKernel { pid: Some(4242) }
        );
    }

    #[test]
    fn the_preamble_and_other_entries_are_nothing_and_garbage_is_invalid() {
        let preamble = "Filtering the log data using \"processID == 0 AND eventMessage CONTAINS \\\"memorystatus: killing\\\"\"";
        assert_eq!(parse_stream_line(preamble), StreamLine::Other);
        let entry = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/jetsam/ndjson-kernel-entry.json"
        ));
        let one_line: serde_json::Value = serde_json::from_str(entry).unwrap();
        assert_eq!(parse_stream_line(&one_line.to_string()), StreamLine::Other);
        assert!(matches!(
            parse_stream_line("log: Must be admin to run 'stream' command"),
            StreamLine::Invalid(_)
        ));
        assert!(matches!(
            parse_stream_line("{\"eventMessage\": 3"),
            StreamLine::Invalid(_)
        ));
        let long = format!("{{\"eventMessage\":\"{}\"}}", "x".repeat(MAX_LINE));
        assert!(matches!(parse_stream_line(&long), StreamLine::Invalid(_)));
    }
}
