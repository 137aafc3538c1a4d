//! The kernel log, `/dev/kmsg`, as the witness of crashes and GPU faults.
//!
//! The forms read, each captured from a real kernel under
//! `tests/fixtures/kmsg/`: x86_64's `segfault at …` and `traps: …` lines
//! (`show_signal_msg` in `arch/x86/mm/fault.c`, `arch/x86/kernel/traps.c`),
//! arm64's `unhandled exception: …` (`arm64_show_signal`; the signal follows
//! from the fault's name), the `potentially unexpected fatal signal` line
//! with the register dump that names its pid (`print_fatal_signal`, only
//! with `kernel.print-fatal-signals = 1`), and NVIDIA's `NVRM: Xid` GPU
//! faults.
//!
//! The kernel prints a fault only while `debug.exception-trace` is 1 (the
//! default on x86, not on arm64: `headroom doctor` says so), only for a
//! signal the process does not handle, and about ten every five seconds.
//!
//! [`parse_kernel_line`] recognises one message; [`CrashJoiner`] turns the
//! stream into [`Crash`] and [`GpuFault`] records. The pid in a fault line
//! is the faulting *thread*'s; the reader
//! ([`mod@crate::sample::exit_causes`]) maps it to its process.
//!
//! The lines quote what other users choose (the command name, the file the
//! fault was in, up to 255 bytes of anything but `/`), so each form is
//! matched from the message's first byte to its last, nothing is read
//! inside a file name, and only the kernel's own records are handed over
//! ([`super::kmsg::Record::from_kernel`]); `forged-6.18.txt` holds such
//! lines. Not recognised, and never guessed at: arm64 faults no table
//! names, a SIGBUS past a mapped file's end, and `abort()`.

use std::path::Path;

use crate::model::Timestamp;
use crate::model::exit::{Crash, GpuFault};

/// Records a fatal-signal line waits for its register dump, at most.
const DUMP_WITHIN: u32 = 8;

/// The longest command name the kernel prints (`TASK_COMM_LEN` − 1 bytes).
const COMM_MAX: usize = crate::model::COMM_LEN;

/// One kernel log message this module recognises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelLine {
    /// A fault the process did not handle: it dies of `signal`.
    Fault {
        pid: u32,
        comm: String,
        /// The signal number, where the fault's kind tells it.
        signal: Option<i32>,
        /// The fault in the kernel's words (`segfault at 0 ip … error 4`,
        /// `trap invalid opcode`, `general protection fault`).
        fault: String,
        /// The file the faulting instruction was mapped from.
        library: Option<String>,
    },
    /// `HEAD: potentially unexpected fatal signal N.`: HEAD is `EXE: COMM`
    /// (Linux 6.x: the program's file name, the process's choice, then its
    /// command name), `COMM/PID` (before) or `COMM`. The process is the one
    /// the register dump after it names ([`KernelLine::DumpHead`]).
    FatalSignal { head: String, signal: i32 },
    /// `CPU: 1 UID: 0 PID: 17658 Comm: python3 …`, the head of a register
    /// dump.
    DumpHead {
        pid: u32,
        comm: String,
        uid: Option<u32>,
    },
    /// `NVRM: Xid (PCI:…): N, pid=P, name=C, …`.
    Xid {
        device: String,
        code: u32,
        /// `None` where the driver wrote `pid='<unknown>'` or no pid at all.
        pid: Option<u32>,
        name: Option<String>,
    },
}

/// Recognise one message (the text after the record's `;`). Each form is
/// matched from the message's first byte (the command name, at most 15
/// bytes, then the kernel's words) to its last: a file name quoted in a
/// line (`… in FILE[…]`, a fatal-signal line's program) is another user's
/// choice, and no form is looked for inside it.
pub fn parse_kernel_line(message: &str) -> Option<KernelLine> {
    // First: this line starts with a file name of the process's choosing,
    // which may be made to look like any other form.
    if let Some((head, tail)) = message.rsplit_once(": potentially unexpected fatal signal ") {
        let signal = digits(tail.strip_suffix('.')?)?;
        return Some(KernelLine::FatalSignal {
            head: head.to_string(),
            signal,
        });
    }
    if let Some(rest) = message.strip_prefix("NVRM: Xid (") {
        return parse_xid(rest);
    }
    if let Some(rest) = message.strip_prefix("traps: ") {
        return parse_trap(rest);
    }
    if let Some(rest) = message.strip_prefix("CPU: ") {
        return parse_dump_head(rest);
    }
    if let Some(task) = leading_task(message, "]: segfault at ") {
        return parse_segfault(task);
    }
    if let Some(task) = leading_task(message, "]: unhandled ") {
        return parse_arm64_fault(task);
    }
    // Kernels before the `traps:` prefix: `comm[pid] general protection ip:…`.
    if let Some(task) = leading_task(message, "] general protection ") {
        return parse_trap_after(task, "general protection");
    }
    None
}

/// A number in decimal digits only.
fn digits<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A number in hexadecimal digits only.
fn is_hex(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// How many bytes `text` stands for as `/dev/kmsg` writes it: each byte
/// outside printable ASCII (and `\` itself) is written `\xNN`.
fn raw_len(text: &str) -> usize {
    text.len() - 3 * text.matches("\\x").count()
}

/// The task at the start of a line: `COMM[PID]` then `after` (the kernel's
/// words, starting with `]`). COMM, at most [`COMM_MAX`] bytes, is the
/// process's choice and may hold brackets; the kernel's `[PID]` is the
/// last one a command name fits before.
struct Task<'a> {
    comm: &'a str,
    pid: u32,
    /// What follows `after`.
    rest: &'a str,
}

fn leading_task<'a>(text: &'a str, after: &str) -> Option<Task<'a>> {
    // A command name of 15 bytes, each written `\xNN`, then `[`.
    let window = 4 * COMM_MAX + 1;
    let mut found = None;
    for (open, _) in text.match_indices('[') {
        if open > window {
            break;
        }
        let comm = &text[..open];
        if raw_len(comm) > COMM_MAX {
            break;
        }
        let inner = &text[open + 1..];
        let n = inner.bytes().take_while(u8::is_ascii_digit).count();
        if let (Some(pid), Some(rest)) = (digits(&inner[..n]), inner[n..].strip_prefix(after)) {
            found = Some(Task { comm, pid, rest });
        }
    }
    found
}

/// `segfault at ADDR ip IP sp SP error E[ in LIB[…]][ likely on CPU …]`
/// (after `COMM[PID]: segfault at `; `show_signal_msg` in
/// `arch/x86/mm/fault.c`).
fn parse_segfault(task: Task<'_>) -> Option<KernelLine> {
    let (addr, rest) = task.rest.split_once(' ')?;
    let rest = rest.strip_prefix("ip ")?;
    let (ip, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix("sp ")?;
    let (sp, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix("error ")?;
    let code = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
    if !(is_hex(addr) && is_hex(ip) && is_hex(sp) && code > 0) {
        return None;
    }
    let fault_len = task.rest.len() - rest.len() + code;
    let library = mapping(without_cpu(&rest[code..]))?;
    Some(KernelLine::Fault {
        pid: task.pid,
        comm: task.comm.to_string(),
        signal: Some(libc::SIGSEGV),
        fault: format!("segfault at {}", &task.rest[..fault_len]),
        library,
    })
}

/// `COMM[PID] DESC ip:IP sp:SP error:E[ in LIB[…]]` (after `traps: `:
/// `do_trap`, `exc_general_protection` and `do_int3_user` in
/// `arch/x86/kernel/traps.c`).
fn parse_trap(text: &str) -> Option<KernelLine> {
    let task = leading_task(text, "] ")?;
    parse_trap_after(task, "")
}

/// The trap after its task: `lead` is the part of its description already
/// matched (`general protection` in the older form).
fn parse_trap_after<'a>(task: Task<'a>, lead: &'a str) -> Option<KernelLine> {
    let (desc, rest) = if lead.is_empty() {
        task.rest.split_once(" ip:")?
    } else {
        (lead, task.rest.strip_prefix("ip:")?)
    };
    // The kernel's own words: letters, digits and spaces.
    if desc.is_empty() || !desc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b' ') {
        return None;
    }
    let (ip, rest) = rest.split_once(" sp:")?;
    let (sp, rest) = rest.split_once(" error:")?;
    let code = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
    if !(is_hex(ip) && is_hex(sp) && code > 0) {
        return None;
    }
    let library = mapping(&rest[code..])?;
    let kind = desc.strip_prefix("trap ").unwrap_or(desc);
    Some(KernelLine::Fault {
        pid: task.pid,
        comm: task.comm.to_string(),
        signal: trap_signal(kind),
        fault: desc.to_string(),
        library,
    })
}

/// The signal the kernel sends for a trap it describes as `kind`
/// (`arch/x86/kernel/traps.c`: `DEFINE_IDTENTRY` handlers and their
/// `do_error_trap` calls; `exc_general_protection`; `do_int3_user`).
fn trap_signal(kind: &str) -> Option<i32> {
    Some(match kind {
        "invalid opcode" => libc::SIGILL,
        "divide error" | "coprocessor segment overrun" => libc::SIGFPE,
        "int3" => libc::SIGTRAP,
        "general protection fault"
        | "general protection"
        | "bounds"
        | "invalid TSS"
        | "overflow"
        | "control protection" => libc::SIGSEGV,
        "stack segment" | "segment not present" | "alignment check" => libc::SIGBUS,
        _ => return None,
    })
}

/// `tail` without the ` likely on CPU N (core N, socket N)` the kernel
/// appends (Linux 6.1 on), if it ends so.
fn without_cpu(tail: &str) -> &str {
    let Some((before, cpu)) = tail.rsplit_once(" likely on CPU ") else {
        return tail;
    };
    let well_formed = cpu
        .split_once(" (core ")
        .and_then(|(n, rest)| Some((n, rest.strip_suffix(')')?.split_once(", socket ")?)))
        .is_some_and(|(n, (core, socket))| {
            digits::<u32>(n).is_some()
                && digits::<u32>(core).is_some()
                && digits::<u32>(socket).is_some()
        });
    if well_formed { before } else { tail }
}

/// What follows a fault's error code: nothing (`Some(None)`), or ` in
/// LIB[…]` (`Some(Some(LIB))`); anything else is not the kernel's line.
fn mapping(tail: &str) -> Option<Option<String>> {
    if tail.is_empty() {
        return Some(None);
    }
    let file = mapped_file(tail.strip_prefix(" in ")?)?;
    Some(Some(file.to_string()))
}

/// `LIB[OFF,BASE+SIZE]` or `LIB[BASE+SIZE]` (`print_vma_addr`): `LIB`. The
/// file's name is another user's choice and may hold brackets: the last
/// bracketed group, made of hex digits, `,` and `+` only, is the kernel's.
fn mapped_file(text: &str) -> Option<&str> {
    let inner = text.strip_suffix(']')?;
    let open = inner.rfind('[')?;
    let numbers = &inner[open + 1..];
    let well_formed = !numbers.is_empty()
        && numbers.contains('+')
        && numbers
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b',' || b == b'+');
    (well_formed && open > 0).then(|| &inner[..open])
}

/// arm64 (`arm64_show_signal` in `arch/arm64/kernel/traps.c`, 4.19 and
/// later): `COMM[PID]: unhandled exception: [CLASS, ESR 0xESR, ]DESC[ in
/// LIB[BASE+SIZE]]`, DESC being the fault's name (`level 3 translation
/// fault`, `undefined instruction`, `User debug trap`, …). Before 4.19:
/// `COMM[PID]: unhandled DESC (SIGNAL) at 0xADDR, esr 0xESR[, in LIB[…]]`.
fn parse_arm64_fault(task: Task<'_>) -> Option<KernelLine> {
    let rest = task.rest;
    let (fault, signal, library) = match rest.strip_prefix("exception: ") {
        Some(rest) => {
            // The kernel's words hold no ` in `: the first one starts the
            // mapping.
            let (fault, library) = match rest.split_once(" in ") {
                Some((fault, tail)) => (fault, Some(mapped_file(tail)?.to_string())),
                None => (rest, None),
            };
            let desc = fault
                .split_once(", ESR 0x")
                .and_then(|(_, after)| after.split_once(", "))
                .map_or(fault, |(_, desc)| desc);
            // An instruction fetch from an unmapped address: the kernel
            // names the mapping above the pc (`print_vma_addr` takes the
            // first mapping that ends above it), which the pc is not in.
            let jumped_to_nowhere =
                fault.starts_with("IABT") && desc.ends_with("translation fault");
            let library = library.filter(|_| !jumped_to_nowhere);
            (fault, arm64_fault_signal(desc), library)
        }
        None => {
            let (desc, after) = rest.split_once(" (")?;
            let (signal, after) = after.split_once(") at 0x")?;
            let signal = digits(signal)?;
            let (addr, after) = after.split_once(", esr 0x")?;
            let code = after.bytes().take_while(u8::is_ascii_hexdigit).count();
            if !is_hex(addr) || code == 0 {
                return None;
            }
            let library = match &after[code..] {
                "" => None,
                tail => Some(mapped_file(tail.strip_prefix(", in ")?)?.to_string()),
            };
            (desc, Some(signal), library)
        }
    };
    Some(KernelLine::Fault {
        pid: task.pid,
        comm: task.comm.to_string(),
        signal,
        fault: fault.to_string(),
        library,
    })
}

/// The signal arm64 sends for a fault it names `desc`: the `fault_info`
/// table of `arch/arm64/mm/fault.c` (data and instruction aborts by their
/// status code) and the undefined-instruction and breakpoint handlers of
/// `arch/arm64/kernel/traps.c` and `debug-monitors.c`. Names the table
/// maps to SIGKILL (parity errors, TLB conflicts, table-walk aborts) and
/// anything unknown give no signal rather than a guess.
fn arm64_fault_signal(desc: &str) -> Option<i32> {
    if desc.contains("(translation table walk)") || desc.contains("parity or ECC") {
        return None;
    }
    let segv = [
        "translation fault",
        "access flag fault",
        "permission fault",
        "address size fault",
        "tag check fault",
        "illegal memory access",
    ];
    if segv.iter().any(|k| desc.ends_with(k)) {
        return Some(libc::SIGSEGV);
    }
    Some(match desc {
        "alignment fault" | "synchronous external abort" | "SP/PC alignment exception" => {
            libc::SIGBUS
        }
        "undefined instruction" => libc::SIGILL,
        "User debug trap" => libc::SIGTRAP,
        _ => return None,
    })
}

/// Whether a fatal-signal line's HEAD names the process a register dump
/// names: `EXE: COMM` or `COMM` (Linux 6.x), or `COMM/PID` (before).
fn head_names(head: &str, pid: u32, comm: &str) -> bool {
    head == comm
        || head
            .strip_suffix(comm)
            .is_some_and(|exe| exe.ends_with(": ") && exe.len() > 2)
        || head
            .strip_prefix(comm)
            .and_then(|p| p.strip_prefix('/'))
            .and_then(digits::<u32>)
            == Some(pid)
}

/// `N [UID: U ]PID: P Comm: C Not tainted …` / `… Tainted: …` (after
/// `CPU: `; `dump_stack_print_info` in `lib/dump_stack.c`).
fn parse_dump_head(rest: &str) -> Option<KernelLine> {
    let (cpu, rest) = rest.split_once(' ')?;
    digits::<u32>(cpu)?;
    let (uid, rest) = match rest.strip_prefix("UID: ") {
        Some(r) => {
            let (uid, r) = r.split_once(' ')?;
            (Some(digits(uid)?), r)
        }
        None => (None, rest),
    };
    let rest = rest.strip_prefix("PID: ")?;
    let (pid, after) = rest.split_once(" Comm: ")?;
    let pid = digits(pid)?;
    // The command name (at most 15 bytes) ends where the kernel's words
    // begin: the last place a command name fits before.
    let end = [" Not tainted", " Tainted: "]
        .iter()
        .flat_map(|words| after.match_indices(words).map(|(i, _)| i))
        .filter(|&i| raw_len(&after[..i]) <= COMM_MAX)
        .max()?;
    Some(KernelLine::DumpHead {
        pid,
        comm: after[..end].to_string(),
        uid,
    })
}

/// `PCI:0000:0a:00): 31, pid=13332, name=cuda_plot_k32_v, …` (after
/// `NVRM: Xid (`); older drivers write no pid (`): 79, GPU has fallen off
/// the bus.`, `): 13, 0001 00000000 …`).
fn parse_xid(rest: &str) -> Option<KernelLine> {
    let (device, rest) = rest.split_once("): ")?;
    let n = rest.bytes().take_while(u8::is_ascii_digit).count();
    let code = digits(&rest[..n])?;
    let rest = &rest[n..];
    let pid = rest
        .strip_prefix(", pid=")
        .map(|r| r.split(',').next().unwrap_or(r))
        .and_then(digits);
    let name = rest
        .split_once(", name=")
        .map(|(_, r)| r.split(", ").next().unwrap_or(r))
        .filter(|n| *n != "<unknown>")
        .map(str::to_string);
    Some(KernelLine::Xid {
        device: device.to_string(),
        code,
        pid,
        name,
    })
}

/// What an Xid means, by NVIDIA's Xid catalogue
/// (<https://docs.nvidia.com/deploy/xid-errors/>), for the errors an ML
/// job is likely to meet.
pub fn xid_meaning(code: u32) -> Option<&'static str> {
    Some(match code {
        13 => {
            "Graphics Engine Exception: the GPU program faulted (an out-of-range access, an illegal instruction)"
        }
        31 => "GPU memory page fault: the GPU program touched an address it has no mapping for",
        32 => "Invalid or corrupted push buffer stream",
        43 => "GPU stopped processing: the program's work was stopped after a fault",
        45 => {
            "Preemptive cleanup, due to previous errors: the work was ended because of an earlier fault"
        }
        48 => "Double Bit ECC Error: an uncorrectable GPU memory error",
        61 => "Internal micro-controller breakpoint/warning",
        62 => "Internal micro-controller halt",
        63 => "ECC page retirement or row remapping recording event",
        64 => "ECC page retirement or row remapper recording failure",
        68 => "NVDEC0 Exception: the video decoder faulted",
        69 => "Graphics Engine class error",
        74 => "NVLINK Error",
        79 => "GPU has fallen off the bus: the GPU stopped answering the host",
        92 => "High single-bit ECC error rate",
        94 => {
            "Contained ECC error: an uncorrectable memory error, contained to the program that touched it"
        }
        95 => "Uncontained ECC error: an uncorrectable memory error that could not be contained",
        109 => "Context Switch Timeout Error",
        119 => "GSP RPC Timeout",
        120 => "GSP Error",
        _ => return None,
    })
}

/// A fatal-signal line waiting for the register dump that names its pid.
#[derive(Debug, Clone)]
struct Waiting {
    /// The line's `EXE: COMM`, `COMM/PID` or `COMM`.
    head: String,
    signal: i32,
    message: String,
    /// Records seen since.
    age: u32,
}

/// What one message completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelRecord {
    Crash(Crash),
    Gpu(GpuFault),
}

/// Turns kernel log messages into crash and GPU-fault records.
#[derive(Debug, Default)]
pub struct CrashJoiner {
    waiting: Option<Waiting>,
}

impl CrashJoiner {
    /// Take in one message; the record it completes, if any.
    pub fn feed(
        &mut self,
        message: &str,
        source: &Path,
        read_at: Timestamp,
    ) -> Option<KernelRecord> {
        let source = source.display().to_string();
        if let Some(w) = &mut self.waiting {
            w.age += 1;
            if w.age > DUMP_WITHIN {
                self.waiting = None;
            }
        }
        match parse_kernel_line(message)? {
            KernelLine::Fault {
                pid,
                comm,
                signal,
                fault,
                library,
            } => Some(KernelRecord::Crash(Crash {
                pid,
                name: comm,
                signal: signal.map(super::zombie::signal_name),
                fault,
                library,
                source,
                message: message.to_string(),
                read_at,
                ..Crash::default()
            })),
            // The line's head is the program file's name, the process's
            // choice: the process is the one its register dump names.
            KernelLine::FatalSignal { head, signal } => {
                self.waiting = Some(Waiting {
                    head,
                    signal,
                    message: message.to_string(),
                    age: 0,
                });
                None
            }
            KernelLine::DumpHead { pid, comm, uid } => {
                let w = self.waiting.take_if(|w| head_names(&w.head, pid, &comm))?;
                let mut crash = fatal(pid, comm, w.signal, &w.message, source, read_at);
                crash.uid = uid;
                Some(KernelRecord::Crash(crash))
            }
            KernelLine::Xid {
                device,
                code,
                pid: Some(pid),
                name,
            } => Some(KernelRecord::Gpu(GpuFault {
                pid,
                name: name.unwrap_or_default(),
                code,
                meaning: xid_meaning(code),
                device,
                source,
                message: message.to_string(),
                read_at,
            })),
            KernelLine::Xid { pid: None, .. } => None,
        }
    }
}

fn fatal(
    pid: u32,
    comm: String,
    signal: i32,
    message: &str,
    source: String,
    read_at: Timestamp,
) -> Crash {
    Crash {
        pid,
        name: comm,
        signal: Some(super::zombie::signal_name(signal)),
        fault: format!("fatal signal {signal}"),
        source,
        message: message.to_string(),
        notes: vec![
            "the kernel logs such a signal whether the process raised it itself (abort(), a failed assertion) or another process sent it".to_string(),
        ],
        read_at,
        ..Crash::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::linux::kmsg::parse_record;

    /// Records read from `/dev/kmsg` on Linux 6.18 (x86_64) while real
    /// processes crashed; the file's head says how.
    const CAPTURED: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kmsg/crashes-6.18.txt"
    ));

    /// NVIDIA Xid messages from public reports; the file names each source.
    const XIDS: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kmsg/public-xid-messages.txt"
    ));

    fn captured() -> Vec<KernelRecord> {
        records_of(CAPTURED)
    }

    /// The records a joiner makes of a captured file's `/dev/kmsg` lines.
    fn records_of(capture: &str) -> Vec<KernelRecord> {
        let mut joiner = CrashJoiner::default();
        capture
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| {
                let r = parse_record(l).expect("every captured line is a record");
                joiner.feed(r.message, Path::new("/dev/kmsg"), Timestamp(9))
            })
            .collect()
    }

    fn crash_of(records: &[KernelRecord], pid: u32) -> &Crash {
        records
            .iter()
            .find_map(|r| match r {
                KernelRecord::Crash(c) if c.pid == pid => Some(c),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no crash of {pid} in {records:#?}"))
    }

    #[test]
    fn a_segfault_in_a_library_names_signal_and_library() {
        let records = captured();
        let c = crash_of(&records, 17560);
        assert_eq!(c.name, "python3");
        assert_eq!(c.signal.as_deref(), Some("SIGSEGV"));
        assert_eq!(c.library.as_deref(), Some("libcrashing_op.so"));
        assert_eq!(
            c.fault,
            "segfault at 0 ip 00007f93b040e0f9 sp 00007ffd54545408 error 4"
        );
        assert_eq!((c.source.as_str(), c.read_at), ("/dev/kmsg", Timestamp(9)));
        // libc, when Python reads address 0 through ctypes.
        assert_eq!(
            crash_of(&records, 15507).library.as_deref(),
            Some("libc.so.6")
        );
    }

    #[test]
    fn an_illegal_instruction_is_sigill_in_its_library() {
        let records = captured();
        let c = crash_of(&records, 17570);
        assert_eq!(c.signal.as_deref(), Some("SIGILL"));
        assert_eq!(c.fault, "trap invalid opcode");
        assert_eq!(c.library.as_deref(), Some("libcrashing_op.so"));
    }

    #[test]
    fn other_traps_map_to_their_signals() {
        let records = captured();
        let gp = crash_of(&records, 14655);
        assert_eq!(
            (gp.signal.as_deref(), gp.fault.as_str()),
            (Some("SIGSEGV"), "general protection fault")
        );
        assert_eq!(crash_of(&records, 15499).signal.as_deref(), Some("SIGFPE"));
        assert_eq!(crash_of(&records, 14665).signal.as_deref(), Some("SIGTRAP"));
    }

    /// Records read on a real arm64 kernel (6.1) while processes crashed;
    /// the file's head says how.
    const ARM64: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kmsg/crashes-arm64-6.1.txt"
    ));

    fn arm64() -> Vec<KernelRecord> {
        records_of(ARM64)
    }

    #[test]
    fn arm64_faults_name_their_signal_and_library() {
        let records = arm64();
        assert_eq!(records.len(), 5, "{records:#?}");
        let lib = crash_of(&records, 82);
        assert_eq!(lib.name, "python3");
        assert_eq!(lib.signal.as_deref(), Some("SIGSEGV"));
        assert_eq!(lib.library.as_deref(), Some("libcrashing_op.so"));
        assert_eq!(
            lib.fault,
            "DABT (lower EL), ESR 0x0000000092000044, level 0 translation fault"
        );
        let exe = crash_of(&records, 78);
        assert_eq!(exe.signal.as_deref(), Some("SIGSEGV"));
        assert_eq!(exe.library.as_deref(), Some("init"));
        let ill = crash_of(&records, 79);
        assert_eq!(
            (ill.signal.as_deref(), ill.fault.as_str()),
            (Some("SIGILL"), "undefined instruction")
        );
        assert_eq!(crash_of(&records, 80).signal.as_deref(), Some("SIGTRAP"));
    }

    #[test]
    fn an_arm64_jump_to_nowhere_names_no_library() {
        // The kernel printed `in init[…]`, the mapping above pc 0x1000.
        let records = arm64();
        let c = crash_of(&records, 81);
        assert_eq!(c.signal.as_deref(), Some("SIGSEGV"));
        assert_eq!(c.library, None);
        assert!(c.fault.starts_with("IABT (lower EL)"), "{}", c.fault);
    }

    #[test]
    fn the_arm64_form_before_4_19_carries_its_signal() {
        // Quoted in the message of Linux commit 5ee39a71fd89 ("arm64:
        // Disable unhandled signal log messages by default"), from a 4.15
        // kernel on QEMU's virt machine.
        let line = "sigsegv[33]: unhandled level 2 translation fault (11) at 0x00000000, \
                    esr 0x92000046, in sigsegv[400000+71000]";
        assert_eq!(
            parse_kernel_line(line),
            Some(KernelLine::Fault {
                pid: 33,
                comm: "sigsegv".into(),
                signal: Some(11),
                fault: "level 2 translation fault".into(),
                library: Some("sigsegv".into()),
            })
        );
    }

    #[test]
    fn arm64_fault_names_map_to_the_kernels_signals() {
        for (desc, signal) in [
            ("level 3 permission fault", Some(libc::SIGSEGV)),
            ("level 1 access flag fault", Some(libc::SIGSEGV)),
            ("synchronous tag check fault", Some(libc::SIGSEGV)),
            ("alignment fault", Some(libc::SIGBUS)),
            ("synchronous external abort", Some(libc::SIGBUS)),
            (
                "level 0 synchronous external abort (translation table walk)",
                None,
            ),
            ("synchronous parity or ECC error", None),
            ("unknown or unrecoverable error", None),
        ] {
            assert_eq!(arm64_fault_signal(desc), signal, "{desc}");
        }
        // Names a process chose cannot move the pid or the library.
        let line = "a[1] b[77]: unhandled exception: DABT (lower EL), ESR 0x92000046, \
                    level 2 translation fault in x[9]y.so[7fbd4f0000+6000]";
        match parse_kernel_line(line) {
            Some(KernelLine::Fault {
                pid,
                comm,
                library,
                signal,
                ..
            }) => {
                assert_eq!((pid, comm.as_str()), (77, "a[1] b"));
                assert_eq!(library.as_deref(), Some("x[9]y.so"));
                assert_eq!(signal, Some(libc::SIGSEGV));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_kernel_line("x[abc]: unhandled exception: alignment fault"),
            None
        );
    }

    #[test]
    fn a_jump_to_no_mapping_has_no_library() {
        let records = captured();
        let c = crash_of(&records, 17582);
        assert_eq!(c.signal.as_deref(), Some("SIGSEGV"));
        assert_eq!(c.library, None);
        assert!(c.fault.ends_with("error 14"), "{}", c.fault);
    }

    #[test]
    fn a_fatal_signal_is_joined_with_the_pid_of_its_register_dump() {
        let records = captured();
        let abort = crash_of(&records, 17657);
        assert_eq!(
            (abort.name.as_str(), abort.signal.as_deref()),
            ("crash", Some("SIGABRT"))
        );
        assert_eq!(abort.fault, "fatal signal 6");
        assert!(
            abort
                .message
                .ends_with("potentially unexpected fatal signal 6.")
        );
        let bus = crash_of(&records, 17659);
        assert_eq!(bus.signal.as_deref(), Some("SIGBUS"));
        // The SIGILL above came twice: its trap line, then its fatal signal.
        let sigill = records
            .iter()
            .filter(|r| matches!(r, KernelRecord::Crash(c) if c.pid == 17658))
            .count();
        assert_eq!(sigill, 2);
    }

    #[test]
    fn the_code_lines_and_register_dumps_are_not_crashes() {
        for message in [
            "Code: 48 89 45 f8 48 8b 45 f8 <8b> 00 e9 32 01 00 00",
            "RIP: 0033:0x7fa3a3094eec",
            "Code: Unable to access opcode bytes at 0xffffffffffffffde.",
            "CPU: 1 UID: 0 PID: 17657 Comm: crash Not tainted 6.18.44-fc-v657 #1 PREEMPT(none) ",
        ] {
            let mut joiner = CrashJoiner::default();
            assert_eq!(
                joiner.feed(message, Path::new("/dev/kmsg"), Timestamp(0)),
                None,
                "{message}"
            );
        }
    }

    #[test]
    fn older_kernel_forms_are_read_too() {
        // Linux 4.x: no CPU suffix, `[BASE+SIZE]` without an offset.
        let line = "python[4242]: segfault at 0 ip 00007f12 sp 00007ffc error 4 in libtensorflow_framework.so.2[7f10000+2a000]";
        match parse_kernel_line(line) {
            Some(KernelLine::Fault { library, pid, .. }) => {
                assert_eq!(pid, 4242);
                assert_eq!(library.as_deref(), Some("libtensorflow_framework.so.2"));
            }
            other => panic!("{other:?}"),
        }
        // Before 6.x: `comm/pid: potentially unexpected fatal signal N.`,
        // its register dump after it.
        let fatal = "python3/31337: potentially unexpected fatal signal 11.";
        assert_eq!(
            parse_kernel_line(fatal),
            Some(KernelLine::FatalSignal {
                head: "python3/31337".into(),
                signal: 11
            })
        );
        let mut joiner = CrashJoiner::default();
        assert_eq!(
            joiner.feed(fatal, Path::new("/dev/kmsg"), Timestamp(0)),
            None
        );
        let dump = "CPU: 3 PID: 31337 Comm: python3 Not tainted 5.4.0-150-generic #167-Ubuntu";
        match joiner.feed(dump, Path::new("/dev/kmsg"), Timestamp(0)) {
            Some(KernelRecord::Crash(c)) => {
                assert_eq!((c.pid, c.signal.as_deref()), (31337, Some("SIGSEGV")));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn names_chosen_to_mislead_do_not_move_the_pid_or_the_library() {
        // A comm with brackets, a library whose name ends in brackets.
        let line = "a[1] b[77]: segfault at 0 ip 0 sp 0 error 4 in x[9]y.so[10f9,7f00+1000]";
        match parse_kernel_line(line) {
            Some(KernelLine::Fault {
                pid, comm, library, ..
            }) => {
                assert_eq!((pid, comm.as_str()), (77, "a[1] b"));
                assert_eq!(library.as_deref(), Some("x[9]y.so"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parse_kernel_line("x[abc]: segfault at 0"), None);
    }

    #[test]
    fn no_form_is_read_inside_a_file_name_the_line_quotes() {
        for line in [
            // A trap whose program file holds a trap's words, its process
            // named with a pid in brackets.
            "traps: a[9] x[22000] trap invalid opcode ip:1 sp:2 error:0 in y[1] z ip:0 sp:0 error:0[11a2,562e+1000]",
            "traps: a[9] x[22000]: segfault at 0 ip 0000 sp 0000 error 4 in evil ip:0 sp:0 error:0[11a9,55ee+1000]",
            // A fault line with words after its mapping.
            "crash[5]: segfault at 0 ip 0 sp 0 error 4 in x[1+1]' started with executable stack",
            "process '/tmp/a[1] general protection ip:1 sp:1 error:1' started with executable stack",
        ] {
            match parse_kernel_line(line) {
                None => {}
                Some(KernelLine::Fault { pid, .. }) => assert_eq!(pid, 22000, "{line}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        // A fatal-signal line starts with the program file's name, which
        // may be named like any other line: it stays a fatal-signal line.
        for exe in [
            "traps: victim[99999] trap invalid opcode ip:0 sp:0 error:0",
            "NVRM: Xid (PCI:0000:0a:00): 31, pid=99999, name=victim, Ch 00000010",
            "CPU: 0 PID: 99999 Comm: victim Not tainted 6.18.44",
            "victim[99999]: segfault at 0 ip 0 sp 0 error 4",
        ] {
            let line = format!("{exe}: crash: potentially unexpected fatal signal 11.");
            assert!(
                matches!(
                    parse_kernel_line(&line),
                    Some(KernelLine::FatalSignal { signal: 11, .. })
                ),
                "{line}"
            );
        }
        // A file name ending like the kernel's CPU words is still the file's.
        let line = "crash[5]: segfault at 0 ip 0 sp 0 error 4 in e.so[1,2+3] likely on CPU 0 (core 0, socket x)[11a9,55ee+1000]";
        match parse_kernel_line(line) {
            Some(KernelLine::Fault {
                pid: 5, library, ..
            }) => assert_eq!(
                library.as_deref(),
                Some("e.so[1,2+3] likely on CPU 0 (core 0, socket x)")
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_fatal_signal_is_joined_only_with_the_dump_of_the_process_it_names() {
        let dump = |pid: u32, comm: &str| {
            format!(
                "CPU: 0 UID: 999 PID: {pid} Comm: {comm} Not tainted 6.18.44-fc-v669 #1 PREEMPT(none) "
            )
        };
        let joined = |fatal: &str, dump: &str| {
            let mut joiner = CrashJoiner::default();
            assert_eq!(
                joiner.feed(fatal, Path::new("/dev/kmsg"), Timestamp(0)),
                None
            );
            match joiner.feed(dump, Path::new("/dev/kmsg"), Timestamp(0)) {
                Some(KernelRecord::Crash(c)) => Some((c.pid, c.uid)),
                None => None,
                other => panic!("{other:?}"),
            }
        };
        // Linux 6.x: a process named `victim/99999` is not pid 99999.
        let six = "evil: victim/99999: potentially unexpected fatal signal 11.";
        assert_eq!(
            joined(six, &dump(22091, "victim/99999")),
            Some((22091, Some(999)))
        );
        // The older form's pid must be the dump's.
        let five = "victim/99999: potentially unexpected fatal signal 11.";
        assert_eq!(joined(five, &dump(22091, "victim")), None);
        assert_eq!(
            joined(five, &dump(99999, "victim")),
            Some((99999, Some(999)))
        );
        // Another process's dump.
        assert_eq!(joined(six, &dump(22091, "python3")), None);
        // A command name holding the kernel's words after it.
        let odd = "x: a Not tainted: potentially unexpected fatal signal 6.";
        assert_eq!(joined(odd, &dump(7, "a Not tainted")), Some((7, Some(999))));
    }

    #[test]
    fn the_general_protection_form_before_the_traps_prefix_is_read() {
        let line =
            "python[4242] general protection ip:7f12 sp:7ffc error:0 in libfoo.so[7f10000+2a000]";
        assert_eq!(
            parse_kernel_line(line),
            Some(KernelLine::Fault {
                pid: 4242,
                comm: "python".into(),
                signal: Some(libc::SIGSEGV),
                fault: "general protection".into(),
                library: Some("libfoo.so".into()),
            })
        );
    }

    #[test]
    fn xids_name_pid_process_and_meaning() {
        let mut joiner = CrashJoiner::default();
        let faults: Vec<GpuFault> = XIDS
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(
                |m| match joiner.feed(m, Path::new("/dev/kmsg"), Timestamp(0)) {
                    Some(KernelRecord::Gpu(g)) => Some(g),
                    _ => None,
                },
            )
            .collect();
        let mmu = faults.iter().find(|g| g.code == 31).expect("Xid 31");
        assert_eq!(
            (mmu.pid, mmu.name.as_str(), mmu.device.as_str()),
            (13332, "cuda_plot_k32_v", "PCI:0000:0a:00")
        );
        assert!(mmu.meaning.unwrap().starts_with("GPU memory page fault"));
        let cleanup = faults.iter().find(|g| g.code == 45).expect("Xid 45");
        assert_eq!((cleanup.pid, cleanup.name.as_str()), (1818990, "python3"));
        let timeout = faults.iter().find(|g| g.code == 109).expect("Xid 109");
        assert_eq!(timeout.name, "pt_main_thread");
        // Lines with no pid (`pid='<unknown>'`, or none at all) name no process.
        assert!(faults.iter().all(|g| g.pid != 0));
        assert!(!faults.iter().any(|g| g.code == 79 || g.code == 62));
    }

    #[test]
    fn the_common_xids_have_meanings() {
        for code in [13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 74, 79, 92, 94, 95] {
            assert!(xid_meaning(code).is_some(), "Xid {code}");
        }
        assert_eq!(xid_meaning(1), None);
        assert!(xid_meaning(79).unwrap().contains("fallen off the bus"));
    }
}
