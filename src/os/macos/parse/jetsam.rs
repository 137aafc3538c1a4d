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
//! ([`kill_cause_name`]; newer kernels add ` type:%s`, older ones have no
//! age, no `rf:` and no size). The size is the victim's footprint when it
//! was killed.
//!
//! **Swap exhaustion.** When the compressor can no longer swap out,
//! `no_paging_space_action` (`bsd/kern/kern_proc.c`) kills the process
//! holding the most compressed memory, or one that its spawner or itself
//! marked to be killed then (`P_PCKILL`: `POSIX_SPAWN_PCONTROL_KILL`,
//! `PROC_SELFSET_PCONTROL`), or leaves it to memorystatus
//! (`vm-compressor-space-shortage`, a `killing_…` line above). Both of its
//! own kills are `JETSAM_REASON_LOWSWAP` ([`LowSwap`]). Before
//! xnu-11417 they are the kernel's `printf`, which reaches the unified log
//! as a kernel entry (`processID` 0) with no subsystem and no category
//! (`osfmk/kern/printf.c`, `vprintf_internal` → `os_log_with_args` on
//! `OS_LOG_DEFAULT`):
//!
//! ```text
//! low swap: killing largest compressed process with pid %d (%s) and size %llu MB
//! low swap: killing pid %d (%s)
//! ```
//!
//! (xnu-8792.41.9 to xnu-11215.81.4; `%s` is `p_comm`, at most
//! [`MAXCOMLEN`] bytes). xnu-11417 writes the two `memorystatus:` forms
//! above instead. The size is the victim's compressed memory
//! (`get_task_compressed`, the `internal_compressed` ledger, in bytes) in
//! MiB.
//!
//! [`PREDICATE`] selects those lines for `log stream`; [`parse_stream_line`]
//! reads one line of its `--style ndjson` output (one JSON object per log
//! entry, after a `Filtering the log data using …` preamble) and accepts a
//! kill only from the kernel (`processID` 0): any process can write
//! "memorystatus: killing …" or "low swap: killing …" to the log under its
//! own pid, and such a line is refused, not believed. [`parse_kill_message`]
//! reads the message, and only as a whole: the kernel's own lines quote
//! process names too (`memorystatus: NAME [PID] exceeded mem limit: …`), so
//! a kill form is matched from the message's start to the kernel's figures
//! at its end.

use serde::Deserialize;

/// The `log stream --predicate` for the kernel's kill lines: the kernel's
/// entries (`processID` 0) whose message holds `memorystatus: killing` (the
/// memorystatus forms, some after an uptime) or starts with `low swap:
/// killing` (the `printf` of swap exhaustion before xnu-11417). It relies
/// on the process and the message alone: the `printf` lines carry no
/// subsystem or category. `BEGINSWITH` and `CONTAINS` are the string
/// operators of the Cocoa predicates `log` takes (`man log`, PREDICATE
/// FILTERING).
pub const PREDICATE: &str = r#"processID == 0 AND (eventMessage CONTAINS "memorystatus: killing" OR eventMessage BEGINSWITH "low swap: killing")"#;

/// The arguments of `/usr/bin/log` that follow jetsam kills as they are
/// written.
pub const LOG_STREAM_ARGS: [&str; 5] = ["stream", "--style", "ndjson", "--predicate", PREDICATE];

/// The longest line of `log stream` output read; a longer one is refused.
pub const MAX_LINE: usize = 64 * 1024;

/// The longest command name the kernel keeps (`p_comm[MAXCOMLEN + 1]`,
/// `bsd/sys/param.h`, `bsd/sys/proc_internal.h`): the name in the `low
/// swap:` lines.
pub const MAXCOMLEN: usize = 16;

/// One jetsam kill as the kernel logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JetsamKill {
    pub pid: u32,
    /// The process name as jetsam wrote it (`p_name`, up to 32 bytes;
    /// `p_comm`, up to 16, in the `low swap:` lines).
    pub name: String,
    /// What jetsam did: `killing_specific_process`, `killing_top_process`,
    /// `killing largest compressed process`, …
    pub action: String,
    /// The kill cause (`per-process-limit`, `vm-pageshortage`, `low-swap`),
    /// where the line names it or its code.
    pub reason: Option<String>,
    /// Which of the kills for swap exhaustion, for those.
    pub low_swap: Option<LowSwap>,
    /// The jetsam priority band the victim was in.
    pub priority: Option<i32>,
    /// Its footprint when killed, in bytes.
    pub footprint_bytes: Option<u64>,
    /// Its compressed memory when killed for swap exhaustion as the
    /// process holding the most, in bytes (the kernel's MiB).
    pub compressed_bytes: Option<u64>,
    /// The kernel's words.
    pub message: String,
}

/// The two kills of `no_paging_space_action` when swap runs out, both
/// `JETSAM_REASON_LOWSWAP` (`low-swap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LowSwap {
    /// The process holding the most compressed memory.
    LargestCompressed,
    /// A process marked to be killed when swap runs out (`P_PCKILL`, set by
    /// its spawner's `POSIX_SPAWN_PCONTROL_KILL` or its own
    /// `PROC_SELFSET_PCONTROL`).
    Marked,
}

/// The kill causes, `memorystatus_kill_cause_name[]` by code
/// (`JETSAM_REASON_*`, `bsd/sys/kern_memorystatus.h`; the names from
/// `bsd/kern/kern_memorystatus.c`, xnu-11417.101.15). The kernel's table
/// leaves 0 (`kMemorystatusInvalid`) and 16 (held for a conclave's memory
/// limit: `JETSAM_REASON_MEMORY_LONGIDLE_EXIT` is 17, "Skips 16 on purpose
/// to make room for conclave limit reason") empty; here they have names of
/// their own. 15 appears in xnu-10002, 17 in xnu-11417.
const KILL_CAUSES: [&str; 18] = [
    "invalid",
    "jettisoned",
    "highwater",
    "vnode-limit",
    "vm-pageshortage",
    "proc-thrashing",
    "fc-thrashing",
    "per-process-limit",
    "disk-space-shortage",
    "idle-exit",
    "zone-map-exhaustion",
    "vm-compressor-thrashing",
    "vm-compressor-space-shortage",
    "low-swap",
    "sustained-memory-pressure",
    "vm-pageout-starvation",
    "conclave-limit",
    "long-idle-exit",
];

/// The name of kill cause `code` (a `JETSAM_REASON_*`, as in
/// `jetsam_reason->osr_code`), `None` for a code no kernel here defines.
pub fn kill_cause_name(code: u64) -> Option<&'static str> {
    usize::try_from(code)
        .ok()
        .and_then(|i| KILL_CAUSES.get(i))
        .copied()
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
    if let Some(rest) = message.strip_prefix("low swap: killing ") {
        return low_swap_printf(rest, message);
    }
    // `%lu.%03d ` before `memorystatus:` in some forms.
    let rest = without_uptime(message)
        .strip_prefix("memorystatus: ")
        .filter(|r| r.starts_with("killing"))?;
    if let Some(rest) = rest.strip_prefix("killing largest compressed process ") {
        let (name, pid, after) = name_then_pid(rest)?;
        let mb = after
            .strip_prefix(' ')
            .and_then(|a| a.strip_suffix(" MB"))
            .and_then(number)?;
        return Some(low_swap_kill(
            pid,
            name,
            LowSwap::LargestCompressed,
            Some(mb),
            message,
        ));
    }
    if let Some(rest) = rest.strip_prefix("killing ")
        && !rest.starts_with("process ")
        && let Some(rest) = rest.strip_suffix(" due to swap exhaustion")
    {
        let (name, pid, after) = name_then_pid(rest)?;
        if !after.is_empty() {
            return None;
        }
        return Some(low_swap_kill(pid, name, LowSwap::Marked, None, message));
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
        // `(%s %d …`: an empty cause name (0 or 16, see `KILL_CAUSES`)
        // leaves the space first.
        let (named, figures) = match inside.strip_prefix(' ') {
            Some(figures) => ("", figures),
            None => inside.split_once(' ').unwrap_or((inside, "")),
        };
        reason = Some(named.to_string());
        priority = figures
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok());
        footprint_bytes = tail
            .split_whitespace()
            .next()
            .and_then(|w| w.strip_suffix("KB"))
            .and_then(number)
            .map(|kb| kb.saturating_mul(1024));
    } else if let Some((_, code)) = rest.rsplit_once(" jetsam_reason->osr_code: ") {
        // `killing_idle_process … jetsam_reason->osr_code: %llu`: the
        // cause by its code.
        reason = number(code).and_then(kill_cause_name).map(str::to_string);
    }
    Some(JetsamKill {
        pid,
        name: name.to_string(),
        action: action.to_string(),
        reason,
        low_swap: None,
        priority,
        footprint_bytes,
        compressed_bytes: None,
        message: message.to_string(),
    })
}

/// The `printf` forms of `no_paging_space_action` before xnu-11417, after
/// `low swap: killing `:
/// `largest compressed process with pid %d (%s) and size %llu MB` and
/// `pid %d (%s)`. The name is `p_comm` (at most [`MAXCOMLEN`] bytes) and
/// may hold `)` or ` and size `: the kernel's own words are the last ones.
fn low_swap_printf(rest: &str, message: &str) -> Option<JetsamKill> {
    let (form, rest) = match rest.strip_prefix("largest compressed process with pid ") {
        Some(rest) => (LowSwap::LargestCompressed, rest),
        None => (LowSwap::Marked, rest.strip_prefix("pid ")?),
    };
    let (pid, rest) = rest.split_once(" (")?;
    let pid = number(pid).and_then(|p| u32::try_from(p).ok())?;
    let (name, mb) = match form {
        LowSwap::LargestCompressed => {
            let (name, size) = rest.rsplit_once(") and size ")?;
            (name, Some(number(size.strip_suffix(" MB")?)?))
        }
        LowSwap::Marked => (rest.strip_suffix(')')?, None),
    };
    if name.len() > MAXCOMLEN {
        return None;
    }
    Some(low_swap_kill(pid, name, form, mb, message))
}

fn low_swap_kill(
    pid: u32,
    name: &str,
    form: LowSwap,
    compressed_mib: Option<u64>,
    message: &str,
) -> JetsamKill {
    JetsamKill {
        pid,
        name: name.to_string(),
        action: match form {
            LowSwap::LargestCompressed => "killing largest compressed process",
            LowSwap::Marked => "killing a process marked to be killed on swap exhaustion",
        }
        .to_string(),
        reason: kill_cause_name(JETSAM_REASON_LOWSWAP).map(str::to_string),
        low_swap: Some(form),
        priority: None,
        footprint_bytes: None,
        compressed_bytes: compressed_mib.map(|m| m.saturating_mul(1 << 20)),
        message: message.to_string(),
    }
}

/// `JETSAM_REASON_LOWSWAP` (`bsd/sys/kern_memorystatus.h`).
const JETSAM_REASON_LOWSWAP: u64 = 13;

/// `text` as a decimal number, digits only.
fn number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
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

/// A kill cause (`memorystatus_kill_cause_name[]`, [`kill_cause_name`]) in
/// words.
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
        "low-swap" => "swap space ran out",
        "sustained-memory-pressure" => "memory pressure was sustained",
        "vm-pageout-starvation" => "page-out was starved",
        "jettisoned" => "it was jettisoned",
        "conclave-limit" => "a conclave went over its memory limit",
        "invalid" | "" => "jetsam gave no cause (its name for the cause was empty)",
        _ => "a reason jetsam named",
    }
}

/// Why jetsam killed, in words, with the cause's name where the line has
/// one: the two kills for swap exhaustion say which they were.
pub fn kill_words(k: &JetsamKill) -> String {
    let words = match (k.low_swap, &k.reason) {
        (Some(LowSwap::LargestCompressed), _) => format!(
            "swap space ran out and it held the most compressed memory{}",
            k.compressed_bytes
                .map(|b| format!(" ({} MiB in the compressor)", b >> 20))
                .unwrap_or_default()
        ),
        (Some(LowSwap::Marked), _) => "swap space ran out and it was marked to be killed when \
                                       that happens (by its spawner or itself)"
            .to_string(),
        (None, Some(r)) => reason_words(r).to_string(),
        (None, None) => return "jetsam named no reason".to_string(),
    };
    match &k.reason {
        Some(r) if !r.is_empty() => format!("{words} ({r})"),
        _ => words,
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
        assert_eq!((idle.pid, idle.reason.as_deref()), (386, Some("idle-exit")));
    }

    /// `format` (a C format string as the XNU source spells it) with its
    /// conversions replaced by `args`, in order: the line the kernel writes.
    fn printf(format: &str, args: &[&str]) -> String {
        let mut out = String::new();
        let mut args = args.iter();
        let mut rest = format.trim_end_matches('\n');
        while let Some(i) = rest.find('%') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            let len = ["llu", "lu", "03d", "d", "s", "u"]
                .iter()
                .find(|c| after.starts_with(*c))
                .map(|c| c.len())
                .expect("a conversion this helper knows");
            out.push_str(args.next().expect("an argument per conversion"));
            rest = &after[len..];
        }
        out.push_str(rest);
        assert!(args.next().is_none(), "more arguments than conversions");
        out
    }

    /// The `printf` of `no_paging_space_action`'s two kills, as each tag
    /// spells it (bsd/kern/kern_proc.c, apple-oss-distributions/xnu).
    const LOW_SWAP_PRINTF: [(&str, u32, u32); 11] = [
        // (tag, line of the largest compressed process, line of pid)
        ("xnu-8792.41.9", 4564, 4345),
        ("xnu-8792.61.2", 4568, 4349),
        ("xnu-8792.81.2", 4568, 4349),
        ("xnu-10002.1.13", 4531, 4312),
        ("xnu-10002.81.5", 4537, 4318),
        ("xnu-10063.101.15", 4571, 4352),
        ("xnu-10063.141.1", 4571, 4352),
        ("xnu-11215.1.10", 4629, 4407),
        ("xnu-11215.41.3", 4629, 4407),
        ("xnu-11215.61.5", 4629, 4407),
        ("xnu-11215.81.4", 4629, 4407),
    ];
    /// The format strings at those lines, the same in every one of those tags.
    const LARGEST_COMPRESSED_PRINTF: &str =
        "low swap: killing largest compressed process with pid %d (%s) and size %llu MB\n";
    const MARKED_PRINTF: &str = "low swap: killing pid %d (%s)\n";

    #[test]
    fn the_low_swap_printf_kills_of_macos_13_to_15_3_are_read() {
        for (tag, largest_line, marked_line) in LOW_SWAP_PRINTF {
            let line = printf(LARGEST_COMPRESSED_PRINTF, &["4242", "Python", "30720"]);
            let k = parse_kill_message(&line)
                .unwrap_or_else(|| panic!("{tag} kern_proc.c:{largest_line}: {line}"));
            assert_eq!((k.pid, k.name.as_str()), (4242, "Python"), "{tag}");
            assert_eq!(k.low_swap, Some(LowSwap::LargestCompressed));
            assert_eq!(k.reason.as_deref(), Some("low-swap"));
            assert_eq!(k.compressed_bytes, Some(30720 << 20));
            assert_eq!(k.footprint_bytes, None, "the size is compressed memory");
            let line = printf(MARKED_PRINTF, &["4243", "Python"]);
            let k = parse_kill_message(&line)
                .unwrap_or_else(|| panic!("{tag} kern_proc.c:{marked_line}: {line}"));
            assert_eq!((k.pid, k.name.as_str()), (4243, "Python"), "{tag}");
            assert_eq!(k.low_swap, Some(LowSwap::Marked));
            assert_eq!(k.reason.as_deref(), Some("low-swap"));
        }
    }

    #[test]
    fn the_low_swap_memorystatus_kills_of_macos_15_4_are_read() {
        // xnu-11417.101.15 bsd/kern/kern_proc.c:4691-4692 (one string in
        // two literals) and :4489.
        let largest = printf(
            "memorystatus: killing largest compressed process %s [%d] %llu MB\n",
            &["Python", "4242", "30720"],
        );
        let k = parse_kill_message(&largest).unwrap();
        assert_eq!((k.pid, k.name.as_str()), (4242, "Python"));
        assert_eq!(k.low_swap, Some(LowSwap::LargestCompressed));
        assert_eq!(k.compressed_bytes, Some(30720 << 20));
        let marked = printf(
            "memorystatus: killing %s [%d] due to swap exhaustion\n",
            &["Python", "4243"],
        );
        let k = parse_kill_message(&marked).unwrap();
        assert_eq!((k.pid, k.reason.as_deref()), (4243, Some("low-swap")));
        assert_eq!(k.low_swap, Some(LowSwap::Marked));
    }

    #[test]
    fn the_published_low_swap_capture_is_a_kill_from_the_kernel() {
        let lines = public("mongodb/jasper");
        let k = parse_kill_message(lines[0]).unwrap();
        assert_eq!((k.pid, k.name.as_str()), (29670, "mongod"));
        assert_eq!(k.compressed_bytes, Some(1 << 20));
        assert_eq!(
            kill_words(&k),
            "swap space ran out and it held the most compressed memory (1 MiB in the compressor) (low-swap)"
        );
        // A kernel printf is a kernel entry with no subsystem or category,
        // like the entry of tests/fixtures/jetsam/ndjson-kernel-entry.json.
        match parse_stream_line(&ndjson(lines[0], 0)) {
            StreamLine::Kill(k) => assert_eq!(k.pid, 29670),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_stream_line(&ndjson(lines[0], 501)),
            StreamLine::NotKernel { pid: Some(501) }
        );
    }

    #[test]
    fn the_other_swap_exhaustion_lines_are_not_kills() {
        for (source, line) in [
            // xnu-8792.81.2 bsd/kern/kern_proc.c:4336, 4342, 4398, 4404, 4412, 4622
            (
                "8792:4336",
                printf("low swap: throttling pid %d (%s)\n", &["7", "x"]),
            ),
            (
                "8792:4342",
                printf("low swap: suspending pid %d (%s)\n", &["7", "x"]),
            ),
            (
                "8792:4398",
                printf("low swap: unthrottling pid %d (%s)\n", &["7", "x"]),
            ),
            (
                "8792:4404",
                printf("low swap: resuming pid %d (%s)\n", &["7", "x"]),
            ),
            (
                "8792:4412",
                printf(
                    "low swap: attempt to unkill pid %d (%s) ignored\n",
                    &["7", "x"],
                ),
            ),
            (
                "8792:4622",
                printf(
                    "low swap: unable to find any eligible processes to take action on\n",
                    &[],
                ),
            ),
            // xnu-11215.81.4 bsd/kern/kern_proc.c:4591
            (
                "11215:4591",
                printf("low swap: triggering no paging space action\n", &[]),
            ),
            // xnu-11417.101.15 bsd/kern/kern_proc.c:4474, 4481, 4496,
            // 4723-4724
            (
                "11417:4474",
                printf(
                    "memorystatus: throttling %s [%d] due to swap exhaustion\n",
                    &["x", "7"],
                ),
            ),
            (
                "11417:4481",
                printf(
                    "memorystatus: suspending %s [%d] due to swap exhaustion\n",
                    &["x", "7"],
                ),
            ),
            (
                "11417:4496",
                printf(
                    "memorystatus: skipping %s [%d] without pcontrol\n",
                    &["x", "7"],
                ),
            ),
            (
                "11417:4723",
                printf("memorystatus: doing pcontrol on %s [%d]\n", &["x", "7"]),
            ),
            // xnu-11215.81.4 bsd/kern/kern_memorystatus.c:6245-6247: before
            // an aggressive kill's own line
            (
                "11215:6245",
                printf(
                    "memorystatus: killing %s [%d] in band %d with high relaunch probability\n",
                    &["x", "7", "0"],
                ),
            ),
        ] {
            assert_eq!(parse_kill_message(&line), None, "{source}: {line}");
        }
    }

    #[test]
    fn a_low_swap_name_cannot_move_the_kernel_s_words() {
        // `p_comm` may hold `)` and ` and size `: the kernel's are the last.
        let k = parse_kill_message(&printf(
            LARGEST_COMPRESSED_PRINTF,
            &["12", "a) and size 9", "5"],
        ))
        .unwrap();
        assert_eq!((k.pid, k.name.as_str()), (12, "a) and size 9"));
        assert_eq!(k.compressed_bytes, Some(5 << 20));
        let k = parse_kill_message(&printf(MARKED_PRINTF, &["13", "b) (c"])).unwrap();
        assert_eq!((k.pid, k.name.as_str()), (13, "b) (c"));
        // Longer than p_comm holds: not the kernel's line.
        let long = printf(MARKED_PRINTF, &["14", "seventeen-bytes-x"]);
        assert_eq!(parse_kill_message(&long), None);
        for line in [
            "low swap: killing pid x (y)",
            "low swap: killing pid 4 (y) and more",
            "low swap: killing largest compressed process with pid 4 (y) and size x MB",
            "x low swap: killing pid 4 (y)",
        ] {
            assert_eq!(parse_kill_message(line), None, "{line}");
        }
    }

    #[test]
    fn kill_causes_have_the_header_s_codes_and_none_is_empty() {
        // bsd/sys/kern_memorystatus.h, xnu-11417.101.15 lines 274-291:
        // JETSAM_REASON_INVALID 0, _GENERIC 1, _MEMORY_IDLE_EXIT 9,
        // _LOWSWAP 13, _MEMORY_VMPAGEOUT_STARVATION 15,
        // _MEMORY_LONGIDLE_EXIT 17 ("Skips 16 on purpose to make room for
        // conclave limit reason"); kern_memorystatus.c:105-124 names 0 and
        // 16 "".
        for (code, name) in [
            (0, "invalid"),
            (1, "jettisoned"),
            (9, "idle-exit"),
            (13, "low-swap"),
            (15, "vm-pageout-starvation"),
            (16, "conclave-limit"),
            (17, "long-idle-exit"),
        ] {
            assert_eq!(kill_cause_name(code), Some(name), "{code}");
        }
        assert_eq!(kill_cause_name(18), None);
        assert!(KILL_CAUSES.iter().all(|n| !n.is_empty()));
        assert!(
            KILL_CAUSES
                .iter()
                .all(|n| reason_words(n) != reason_words("not a cause")),
            "every cause has its own words"
        );
        // xnu-11417.101.15 kern_memorystatus.c:3937, osr_code 17.
        let idle = parse_kill_message(&printf(
            "memorystatus: killing_idle_process pid %d [%s] jetsam_reason->osr_code: %llu\n",
            &["386", "mdworker", "17"],
        ))
        .unwrap();
        assert_eq!(idle.reason.as_deref(), Some("long-idle-exit"));
        // A cause whose kernel name is empty prints `(` then a space
        // (xnu-11417.101.15 kern_memorystatus.c, the `%s pid %d [%s] (%s %d
        // %llus rf:%s) %lluKB` form): the band is still the band.
        let unnamed = parse_kill_message("memorystatus: killing_top_process pid 5 [x] ( 10 3s rf:-) 64KB - memorystatus_available_pages: 9 compressor_size:1").unwrap();
        assert_eq!(unnamed.reason.as_deref(), Some(""));
        assert_eq!(unnamed.priority, Some(10));
        assert_eq!(unnamed.footprint_bytes, Some(64 * 1024));
        assert_eq!(
            kill_words(&unnamed),
            "jetsam gave no cause (its name for the cause was empty)"
        );
    }

    /// The message clauses of [`PREDICATE`], applied as `log` applies
    /// them (`CONTAINS`, `BEGINSWITH`, joined by `OR`).
    fn selected(message: &str) -> bool {
        let clauses: Vec<(&str, &str)> = PREDICATE
            .split("eventMessage ")
            .skip(1)
            .map(|c| {
                let (op, rest) = c.split_once(" \"").unwrap();
                (op, rest.split('"').next().unwrap())
            })
            .collect();
        assert_eq!(clauses.len(), 2, "{PREDICATE}");
        clauses.iter().any(|(op, text)| match *op {
            "CONTAINS" => message.contains(text),
            "BEGINSWITH" => message.starts_with(text),
            other => panic!("operator {other}"),
        })
    }

    #[test]
    fn the_predicate_selects_every_kill_form_and_keeps_to_the_kernel() {
        assert!(PREDICATE.starts_with("processID == 0 AND ("), "{PREDICATE}");
        let mut forms: Vec<String> = PUBLIC
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter(|l| parse_kill_message(l).is_some())
            .map(str::to_string)
            .collect();
        forms.push(printf(LARGEST_COMPRESSED_PRINTF, &["1", "a", "2"]));
        forms.push(printf(MARKED_PRINTF, &["1", "a"]));
        forms.push("memorystatus: killing largest compressed process a [1] 2 MB".into());
        forms.push("memorystatus: killing a [1] due to swap exhaustion".into());
        assert!(forms.len() >= 7, "{forms:#?}");
        for form in &forms {
            assert!(selected(form), "{form}");
        }
        assert!(!selected("low swap: throttling pid 1 (a)"));
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
