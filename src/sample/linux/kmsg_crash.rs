//! The kernel log, `/dev/kmsg`, as the witness of crashes and GPU faults.
//!
//! When a user process dies of a fault it did not handle, the kernel says
//! so (x86_64; captured here, see `tests/fixtures/kmsg/crashes-6.18.txt`):
//!
//! ```text
//! python3[17560]: segfault at 0 ip 00007f93b040e0f9 sp 00007ffd54545408 error 4 in libcrashing_op.so[10f9,7f93b040e000+1000] likely on CPU 0 (core 0, socket 0)
//! traps: python3[17570] trap invalid opcode ip:7f7b7b6a2101 sp:7ffdc205c448 error:0 in libcrashing_op.so[1101,7f7b7b6a2000+1000]
//! traps: crash[14655] general protection fault ip:55d109de2218 sp:7ffdd5df1e80 error:0 in crash[1218,55d109de2000+1000]
//! ```
//!
//! (`show_signal_msg` in `arch/x86/mm/fault.c`, `show_signal` and
//! `do_general_protection` in `arch/x86/kernel/traps.c`.) arm64 writes one
//! form for every fault (`arm64_show_signal` in `arch/arm64/kernel/traps.c`;
//! captured on Linux 6.1, see `tests/fixtures/kmsg/crashes-arm64-6.1.txt`),
//! the signal left to the fault's name:
//!
//! ```text
//! python3[82]: unhandled exception: DABT (lower EL), ESR 0x0000000092000044, level 0 translation fault in libcrashing_op.so[ffff90680000+1000]
//! python3[79]: unhandled exception: undefined instruction in init[aaaac3000000+2000]
//! ```
//!
//! The kernel prints these only while `debug.exception-trace`
//! (`/proc/sys/debug/exception-trace`, `show_unhandled_signals`) is 1, the
//! default on x86 but not on arm64, where it is 0 (`headroom doctor` says
//! so); only for a signal the
//! process does not handle (Python's `faulthandler`, when enabled, handles
//! SIGSEGV and re-raises it: no line); and at most about ten every five
//! seconds (`printk_ratelimit`). With `kernel.print-fatal-signals = 1` (off
//! by default) it also logs every signal that would dump core, the process
//! named in the register dump that follows (`print_fatal_signal` in
//! `kernel/signal.c`):
//!
//! ```text
//! python3.11: python3: potentially unexpected fatal signal 4.
//! CPU: 1 UID: 0 PID: 17658 Comm: python3 Not tainted 6.18.44-fc-v657 #1 PREEMPT(none)
//! ```
//!
//! NVIDIA's driver logs GPU faults as Xid errors, naming the process where
//! it knows it (lines from public reports, see
//! `tests/fixtures/kmsg/public-xid-messages.txt`):
//!
//! ```text
//! NVRM: Xid (PCI:0000:0a:00): 31, pid=13332, name=cuda_plot_k32_v, Ch 00000010, intr 00000000. MMU Fault: …
//! ```
//!
//! [`parse_kernel_line`] recognises one message; [`CrashJoiner`] turns the
//! stream into [`Crash`] and [`GpuFault`] records, joining a fatal-signal
//! line with the register dump that names its pid. The pid in a fault line
//! is the faulting *thread*'s (`task_pid_nr`), and the name the thread's:
//! the reader ([`crate::sample::exit_causes`]) maps it to its process.
//!
//! Not recognised (and so never guessed at): arm64 fault names the kernel
//! kills with SIGKILL or that no table names (their signal is left unknown),
//! a SIGBUS from a file mapping read past its end (the kernel logs nothing),
//! and signals a process raises itself (`abort()`: nothing unless
//! `print-fatal-signals` is on).

use std::path::Path;

use crate::model::Timestamp;
use crate::sample::exit_causes::{Crash, GpuFault};

/// Records a fatal-signal line waits for its register dump, at most.
const DUMP_WITHIN: u32 = 8;

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
    /// `… potentially unexpected fatal signal N.`: the pid is in the next
    /// register dump, except on old kernels (`comm/pid: …`).
    FatalSignal {
        comm: String,
        pid: Option<u32>,
        signal: i32,
    },
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

/// Recognise one message (the text after the record's `;`).
pub fn parse_kernel_line(message: &str) -> Option<KernelLine> {
    if let Some(rest) = message.strip_prefix("NVRM: Xid (") {
        return parse_xid(rest);
    }
    if let Some(rest) = message.strip_prefix("traps: ") {
        return parse_trap(rest);
    }
    if let Some(rest) = message.strip_prefix("CPU: ") {
        return parse_dump_head(rest);
    }
    if let Some((head, tail)) = message.rsplit_once(": potentially unexpected fatal signal ") {
        return parse_fatal_signal(head, tail);
    }
    if message.contains("]: segfault at ") {
        return parse_segfault(message);
    }
    if message.contains("]: unhandled ") {
        return parse_arm64_fault(message);
    }
    // Kernels before the `traps:` prefix: `comm[pid] general protection ip:…`.
    if message.contains("] general protection ") {
        return parse_trap(message);
    }
    None
}

/// `comm[1234]` at the start of `text`, followed by `after`: the comm, the
/// pid and what follows `after`. The comm (15 bytes at most, chosen by the
/// process) may hold brackets; the pid is the digits in the last `[…]`
/// before the first `]` + `after`.
fn comm_and_pid<'a>(text: &'a str, after: &str) -> Option<(&'a str, u32, &'a str)> {
    let close = text.find(&format!("]{after}"))?;
    let open = text[..close].rfind('[')?;
    let pid = text[open + 1..close].parse().ok()?;
    Some((&text[..open], pid, &text[close + 1 + after.len()..]))
}

/// `comm[pid]: segfault at ADDR ip IP sp SP error E[ in LIB[…]][ likely on CPU …]`.
fn parse_segfault(message: &str) -> Option<KernelLine> {
    let (comm, pid, rest) = comm_and_pid(message, ": ")?;
    let rest = rest.strip_prefix("segfault at ")?;
    let (fault, library) = fault_and_library(rest, "error ")?;
    Some(KernelLine::Fault {
        pid,
        comm: comm.to_string(),
        signal: Some(libc::SIGSEGV),
        fault: format!("segfault at {fault}"),
        library,
    })
}

/// `comm[pid] [trap ]DESC ip:IP sp:SP error:E[ in LIB[…]]` (after `traps: `).
fn parse_trap(text: &str) -> Option<KernelLine> {
    let (comm, pid, rest) = comm_and_pid(text, " ")?;
    let (desc, _) = rest.split_once(" ip:")?;
    let (_, library) = fault_and_library(rest, "error:")?;
    let kind = desc.strip_prefix("trap ").unwrap_or(desc);
    Some(KernelLine::Fault {
        pid,
        comm: comm.to_string(),
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

/// Split `… {error_key}E[ in LIB[…]][ likely on CPU …]` into the fault's
/// words (up to the error code) and the library.
fn fault_and_library<'a>(rest: &'a str, error_key: &str) -> Option<(&'a str, Option<String>)> {
    let at = rest.find(error_key)? + error_key.len();
    let code_len = rest[at..].bytes().take_while(u8::is_ascii_hexdigit).count();
    let end = at + code_len;
    let fault = &rest[..end];
    let tail = &rest[end..];
    let tail = match tail.rfind(" likely on CPU ") {
        Some(i) => &tail[..i],
        None => tail,
    };
    let library = tail
        .strip_prefix(" in ")
        .and_then(mapped_file)
        .map(str::to_string);
    Some((fault, library))
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
/// later): `comm[pid]: unhandled exception: [CLASS, ESR 0xESR, ]DESC[ in
/// LIB[BASE+SIZE]]`, DESC being the fault's name (`level 3 translation
/// fault`, `undefined instruction`, `User debug trap`, …). Before 4.19:
/// `comm[pid]: unhandled DESC (SIGNAL) at 0xADDR, esr 0xESR[, in LIB[…]]`.
fn parse_arm64_fault(message: &str) -> Option<KernelLine> {
    let (comm, pid, rest) = comm_and_pid(message, ": ")?;
    let rest = rest.strip_prefix("unhandled ")?;
    let (fault, signal, library) = match rest.strip_prefix("exception: ") {
        Some(rest) => {
            let (fault, library) = match rest.rsplit_once(" in ") {
                Some((fault, tail)) if mapped_file(tail).is_some() => {
                    (fault, mapped_file(tail).map(str::to_string))
                }
                _ => (rest, None),
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
            let signal = signal.parse().ok()?;
            let library = after
                .split_once(", in ")
                .and_then(|(_, tail)| mapped_file(tail))
                .map(str::to_string);
            (desc, Some(signal), library)
        }
    };
    Some(KernelLine::Fault {
        pid,
        comm: comm.to_string(),
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

/// `[EXE: ]COMM` or `COMM/PID`, then `N.`.
fn parse_fatal_signal(head: &str, tail: &str) -> Option<KernelLine> {
    let signal = tail.strip_suffix('.').unwrap_or(tail).trim().parse().ok()?;
    // Linux 5.x and earlier: `comm/pid`. Since 6.x (print_fatal_signal with
    // `%pD`): `exe: comm`.
    if let Some((comm, pid)) = head.rsplit_once('/')
        && let Ok(pid) = pid.parse()
    {
        return Some(KernelLine::FatalSignal {
            comm: comm.to_string(),
            pid: Some(pid),
            signal,
        });
    }
    let comm = head.split_once(": ").map_or(head, |(_, comm)| comm);
    Some(KernelLine::FatalSignal {
        comm: comm.to_string(),
        pid: None,
        signal,
    })
}

/// `N [UID: U ]PID: P Comm: C Not tainted …` / `… Tainted: …` (after `CPU: `).
fn parse_dump_head(rest: &str) -> Option<KernelLine> {
    let uid = rest
        .split_once(" UID: ")
        .and_then(|(_, r)| r.split(' ').next())
        .and_then(|u| u.parse().ok());
    let (_, after_pid) = rest.split_once(" PID: ")?;
    let (pid, after) = after_pid.split_once(" Comm: ")?;
    let pid = pid.parse().ok()?;
    let end = after
        .rfind(" Not tainted")
        .or_else(|| after.rfind(" Tainted: "))?;
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
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let code = rest[..digits].parse().ok()?;
    let rest = &rest[digits..];
    let pid = rest
        .strip_prefix(", pid=")
        .map(|r| r.split(',').next().unwrap_or(r))
        .and_then(|p| p.parse().ok());
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
    comm: String,
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
            KernelLine::FatalSignal {
                comm,
                pid: Some(pid),
                signal,
            } => Some(KernelRecord::Crash(fatal(
                pid, comm, signal, message, source, read_at,
            ))),
            KernelLine::FatalSignal {
                comm,
                pid: None,
                signal,
            } => {
                self.waiting = Some(Waiting {
                    comm,
                    signal,
                    message: message.to_string(),
                    age: 0,
                });
                None
            }
            KernelLine::DumpHead { pid, comm, .. } => {
                let w = self.waiting.take_if(|w| w.comm == comm)?;
                Some(KernelRecord::Crash(fatal(
                    pid, comm, w.signal, &w.message, source, read_at,
                )))
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
    use crate::sample::linux::kmsg::parse_record;

    /// Records read from `/dev/kmsg` on Linux 6.18 (x86_64) while real
    /// processes crashed; the file's head says how.
    const CAPTURED: &str = include_str!("../../../tests/fixtures/kmsg/crashes-6.18.txt");

    /// NVIDIA Xid messages from public reports; the file names each source.
    const XIDS: &str = include_str!("../../../tests/fixtures/kmsg/public-xid-messages.txt");

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
    const ARM64: &str = include_str!("../../../tests/fixtures/kmsg/crashes-arm64-6.1.txt");

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
        // Before 6.x: `comm/pid: potentially unexpected fatal signal N.`
        assert_eq!(
            parse_kernel_line("python3/31337: potentially unexpected fatal signal 11."),
            Some(KernelLine::FatalSignal {
                comm: "python3".into(),
                pid: Some(31337),
                signal: 11
            })
        );
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
