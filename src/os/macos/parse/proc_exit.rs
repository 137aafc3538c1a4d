//! A kqueue `EVFILT_PROC` exit event, decoded: the `fflags` and `data` of a
//! `kevent64_s` that reported `NOTE_EXIT` for a process watched with
//! `NOTE_EXIT | NOTE_EXITSTATUS | NOTE_EXIT_DETAIL` ([`decode`] gives an
//! [`ExitNote`]).
//!
//! What the kernel puts there (`filt_procevent`, `bsd/kern/kern_event.c`,
//! the same from xnu-8792.41.9 to xnu-11417.121.6):
//!
//! - `fflags`: the events asked for that happened, `NOTE_EXIT` and, when
//!   asked for, `NOTE_EXITSTATUS` and `NOTE_EXIT_DETAIL`;
//! - `data` (`kn_hook32`, a `uint32_t`): with `NOTE_EXITSTATUS`, the wait
//!   status in its low 16 bits (`proc_exit` fires the knote with
//!   `NOTE_EXIT | (p->p_xstat & 0xffff)`, `bsd/kern/kern_exit.c`: what the
//!   parent's `waitpid` gets, `W_EXITCODE(code, signal)` with `WCOREFLAG`
//!   0x80, `bsd/sys/wait.h`); with `NOTE_EXIT_DETAIL`, why it ended:
//!   `NOTE_EXIT_DECRYPTFAIL` (`P_LTERM_DECRYPTFAIL`), `NOTE_EXIT_CSERROR`
//!   (`CS_KILLED`: a code-signing kill) and `NOTE_EXIT_MEMORY` (`P_LTERM_JETSAM`),
//!   the latter with one of the `NOTE_EXIT_MEMORY_*` bits in bits 25–31 for
//!   the kind of jetsam kill (`P_JETSAM_MASK` of `p_lflag`).
//!
//! `P_LTERM_JETSAM` is set by `memorystatus_do_kill` → `jetsam_do_kill` →
//! `exit_with_reason` (`bsd/kern/kern_memorystatus.c`): every memorystatus
//! kill. The low-swap kills of `no_paging_space_action`
//! (`bsd/kern/kern_proc.c`: "killing largest compressed process", and a
//! `P_PCKILL` process's kill in `proc_dopcontrol`) send SIGKILL with
//! `psignal_with_reason` and set no flag, in every version from
//! xnu-8792.41.9 to xnu-11417.121.6: their victims end with SIGKILL and no
//! `NOTE_EXIT_MEMORY` ([`NO_FLAG_KILLS`]).
//!
//! Values from `bsd/sys/event.h` (the `NOTE_EXIT_MEMORY_*` bits are public
//! there in xnu-8792.41.9 and moved to `bsd/sys/event_private.h` by
//! xnu-11417.101.15, unchanged); on macOS they are checked against libc's
//! where libc has them.

use crate::model::exit::ExitStatus;

/// `NOTE_EXIT`: the process exited.
pub const NOTE_EXIT: u32 = 0x8000_0000;
/// `NOTE_EXITSTATUS`: the wait status in `data` (allowed to the parent and
/// to whoever may send the process SIGKILL: `filt_procattach`).
pub const NOTE_EXITSTATUS: u32 = 0x0400_0000;
/// `NOTE_EXIT_DETAIL`: why it exited, in `data` (no permission check).
pub const NOTE_EXIT_DETAIL: u32 = 0x0200_0000;
/// `NOTE_PDATAMASK`: the part of a hint that carries data.
pub const NOTE_PDATAMASK: u32 = 0x000f_ffff;
/// `NOTE_EXIT_DETAIL_MASK` and its bits.
pub const NOTE_EXIT_DETAIL_MASK: u32 = 0x0007_0000;
pub const NOTE_EXIT_DECRYPTFAIL: u32 = 0x0001_0000;
pub const NOTE_EXIT_MEMORY: u32 = 0x0002_0000;
pub const NOTE_EXIT_CSERROR: u32 = 0x0004_0000;
/// `NOTE_EXIT_MEMORY_DETAIL_MASK` and its bits: which kind of jetsam kill.
pub const NOTE_EXIT_MEMORY_DETAIL_MASK: u32 = 0xfe00_0000;
pub const NOTE_EXIT_MEMORY_VMPAGESHORTAGE: u32 = 0x8000_0000;
pub const NOTE_EXIT_MEMORY_VMTHRASHING: u32 = 0x4000_0000;
pub const NOTE_EXIT_MEMORY_HIWAT: u32 = 0x2000_0000;
pub const NOTE_EXIT_MEMORY_PID: u32 = 0x1000_0000;
pub const NOTE_EXIT_MEMORY_IDLE: u32 = 0x0800_0000;
pub const NOTE_EXIT_MEMORY_VNODE: u32 = 0x0400_0000;
pub const NOTE_EXIT_MEMORY_FCTHRASHING: u32 = 0x0200_0000;

/// What a watch asks for: the exit, its status and its detail.
pub const WATCH_WITH_STATUS: u32 = NOTE_EXIT | NOTE_EXITSTATUS | NOTE_EXIT_DETAIL;
/// What a watch asks for where the status is refused (`EACCES`: not the
/// parent, and not allowed to send the process SIGKILL): the exit and its
/// detail, which `filt_procattach` checks no permission for.
pub const WATCH_WITHOUT_STATUS: u32 = NOTE_EXIT | NOTE_EXIT_DETAIL;

/// The kills for want of memory that carry no `NOTE_EXIT_MEMORY`, in words
/// for the module docs, the collector's status and `doctor`.
pub const NO_FLAG_KILLS: &str = "low-swap kills (no_paging_space_action: the process holding \
    the most compressed memory, or one marked to be killed when swap runs out) send SIGKILL \
    without the jetsam flag, so they end with SIGKILL and no NOTE_EXIT_MEMORY";

#[cfg(target_os = "macos")]
const _: () = {
    assert!(NOTE_EXIT == libc::NOTE_EXIT);
    assert!(NOTE_EXITSTATUS == libc::NOTE_EXITSTATUS);
    assert!(NOTE_EXIT_DETAIL == libc::NOTE_EXIT_DETAIL);
    assert!(NOTE_PDATAMASK == libc::NOTE_PDATAMASK);
    assert!(NOTE_EXIT_DETAIL_MASK == libc::NOTE_EXIT_DETAIL_MASK);
    assert!(NOTE_EXIT_DECRYPTFAIL == libc::NOTE_EXIT_DECRYPTFAIL);
    assert!(NOTE_EXIT_MEMORY == libc::NOTE_EXIT_MEMORY);
    assert!(NOTE_EXIT_CSERROR == libc::NOTE_EXIT_CSERROR);
};

/// The kind of jetsam kill a `NOTE_EXIT_MEMORY_*` bit names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JetsamKind {
    /// `NOTE_EXIT_MEMORY_VMPAGESHORTAGE`. `P_JETSAM_VMPAGESHORTAGE` is 0
    /// (`bsd/sys/proc_internal.h`), so every kill cause that
    /// `memorystatus_do_kill` maps to no flag of its own (zone-map
    /// exhaustion, disk-space shortage, sustained pressure…) reads as this.
    PageShortage,
    /// `NOTE_EXIT_MEMORY_VMTHRASHING`: the compressor thrashing or out of space.
    CompressorThrashing,
    /// `NOTE_EXIT_MEMORY_HIWAT`: over its high-water mark.
    HighWater,
    /// `NOTE_EXIT_MEMORY_PID`: `memorystatus_do_kill` sets it for
    /// `kMemorystatusKilledPerProcessLimit` (the header's comment says
    /// "special pid kill").
    PerProcessLimit,
    /// `NOTE_EXIT_MEMORY_IDLE`: reclaimed while idle.
    IdleExit,
    /// `NOTE_EXIT_MEMORY_VNODE`: out of vnodes.
    Vnode,
    /// `NOTE_EXIT_MEMORY_FCTHRASHING`: the file cache thrashing.
    FileCacheThrashing,
    /// No bit, or bits this build does not know: the raw bits.
    Other(u32),
}

impl JetsamKind {
    fn of(data: u32) -> Self {
        match data & NOTE_EXIT_MEMORY_DETAIL_MASK {
            NOTE_EXIT_MEMORY_VMPAGESHORTAGE => Self::PageShortage,
            NOTE_EXIT_MEMORY_VMTHRASHING => Self::CompressorThrashing,
            NOTE_EXIT_MEMORY_HIWAT => Self::HighWater,
            NOTE_EXIT_MEMORY_PID => Self::PerProcessLimit,
            NOTE_EXIT_MEMORY_IDLE => Self::IdleExit,
            NOTE_EXIT_MEMORY_VNODE => Self::Vnode,
            NOTE_EXIT_MEMORY_FCTHRASHING => Self::FileCacheThrashing,
            bits => Self::Other(bits),
        }
    }

    /// The flag's name as the header spells it.
    pub fn flag(self) -> String {
        match self {
            Self::PageShortage => "NOTE_EXIT_MEMORY_VMPAGESHORTAGE".into(),
            Self::CompressorThrashing => "NOTE_EXIT_MEMORY_VMTHRASHING".into(),
            Self::HighWater => "NOTE_EXIT_MEMORY_HIWAT".into(),
            Self::PerProcessLimit => "NOTE_EXIT_MEMORY_PID".into(),
            Self::IdleExit => "NOTE_EXIT_MEMORY_IDLE".into(),
            Self::Vnode => "NOTE_EXIT_MEMORY_VNODE".into(),
            Self::FileCacheThrashing => "NOTE_EXIT_MEMORY_FCTHRASHING".into(),
            Self::Other(bits) => format!("jetsam detail bits {bits:#010x}"),
        }
    }

    /// What ran out, in words.
    pub fn words(self) -> &'static str {
        match self {
            Self::PageShortage => {
                "the machine ran short of memory (page shortage, or a jetsam cause without a flag of its own)"
            }
            Self::CompressorThrashing => "the memory compressor was thrashing or ran out of space",
            Self::HighWater => "it went over its high-water mark",
            Self::PerProcessLimit => "it went over its own memory limit",
            Self::IdleExit => "it was idle and its memory was reclaimed",
            Self::Vnode => "the machine ran out of vnodes (open files)",
            Self::FileCacheThrashing => "the file cache was thrashing",
            Self::Other(_) => "jetsam named a kind this build does not know",
        }
    }
}

/// One exit event, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitNote {
    /// How it ended, where the status was asked for and is an exit.
    pub status: Option<ExitStatus>,
    /// `NOTE_EXIT_MEMORY`: jetsam killed it, and which kind of kill.
    pub jetsam: Option<JetsamKind>,
    /// `NOTE_EXIT_DECRYPTFAIL`: it could not decrypt its own pages.
    pub decrypt_failed: bool,
    /// `NOTE_EXIT_CSERROR`: killed for a code-signing error.
    pub code_signing: bool,
}

/// Decode an event's `fflags` and `data`. `None` for an event that is no
/// exit (`NOTE_EXIT` not among the flags).
pub fn decode(fflags: u32, data: i64) -> Option<ExitNote> {
    if fflags & NOTE_EXIT == 0 {
        return None;
    }
    // `data` carries a `uint32_t` (`kn_hook32`): its low 32 bits.
    let word = (data as u64 & 0xffff_ffff) as u32;
    let status = if fflags & NOTE_EXITSTATUS != 0 {
        super::super::exits::decode((word & 0xffff) as u16)
    } else {
        None
    };
    let detail = fflags & NOTE_EXIT_DETAIL != 0;
    let bit = |b: u32| detail && word & b != 0;
    Some(ExitNote {
        status,
        jetsam: bit(NOTE_EXIT_MEMORY).then(|| JetsamKind::of(word)),
        decrypt_failed: bit(NOTE_EXIT_DECRYPTFAIL),
        code_signing: bit(NOTE_EXIT_CSERROR),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every `data` below is built as `filt_procevent` builds `kn_hook32`
    // (bsd/kern/kern_event.c, xnu-11417.101.15): `p_xstat & 0xffff` with
    // the NOTE_EXIT_* detail bits ORed in; the wait statuses are
    // `W_EXITCODE(code, signal)` = `code << 8 | signal` and `WCOREFLAG`
    // 0x80 (bsd/sys/wait.h), signal numbers from bsd/sys/signal.h.

    #[test]
    fn the_header_values() {
        // bsd/sys/event.h, xnu-8792.41.9 … xnu-11417.121.6.
        assert_eq!(
            NOTE_EXIT_DETAIL_MASK,
            NOTE_EXIT_DECRYPTFAIL | NOTE_EXIT_MEMORY | NOTE_EXIT_CSERROR
        );
        // The memory-kind bits sit above the wait status and detail bits.
        assert_eq!(NOTE_EXIT_MEMORY_DETAIL_MASK & NOTE_PDATAMASK, 0);
        assert_eq!(
            NOTE_EXIT_MEMORY_DETAIL_MASK,
            NOTE_EXIT_MEMORY_VMPAGESHORTAGE
                | NOTE_EXIT_MEMORY_VMTHRASHING
                | NOTE_EXIT_MEMORY_HIWAT
                | NOTE_EXIT_MEMORY_PID
                | NOTE_EXIT_MEMORY_IDLE
                | NOTE_EXIT_MEMORY_VNODE
                | NOTE_EXIT_MEMORY_FCTHRASHING
        );
    }

    #[test]
    fn a_normal_exit_gives_its_code() {
        // `exit(7)`: W_EXITCODE(7, 0) = 0x700.
        let note = decode(WATCH_WITH_STATUS, 0x700).unwrap();
        assert_eq!(note.status, Some(ExitStatus::Code(7)));
        assert_eq!(note.jetsam, None);
        assert!(!note.decrypt_failed && !note.code_signing);
        // `exit(0)`.
        assert_eq!(
            decode(WATCH_WITH_STATUS, 0).unwrap().status,
            Some(ExitStatus::Code(0))
        );
    }

    #[test]
    fn exit_256_reads_as_its_parent_saw_it() {
        // `exit(256)`: p_xstat = 256 << 8 = 0x10000; the knote carries
        // `p_xstat & 0xffff` = 0, as `waitpid` does (`0xffff & p->p_xstat`).
        assert_eq!(
            decode(WATCH_WITH_STATUS, 0x1_0000 & 0xffff).unwrap().status,
            Some(ExitStatus::Code(0))
        );
    }

    #[test]
    fn a_signal_and_a_core_dump_are_named() {
        // W_EXITCODE(0, SIGKILL) = 9.
        assert_eq!(
            decode(WATCH_WITH_STATUS, 9).unwrap().status,
            Some(ExitStatus::Signal {
                name: "SIGKILL".into(),
                core_dumped: false
            })
        );
        // SIGSEGV (11) with WCOREFLAG.
        assert_eq!(
            decode(WATCH_WITH_STATUS, 11 | 0x80).unwrap().status,
            Some(ExitStatus::Signal {
                name: "SIGSEGV".into(),
                core_dumped: true
            })
        );
    }

    #[test]
    fn a_jetsam_kill_carries_the_memory_flag_and_its_kind() {
        // jetsam_do_kill: exit_with_reason(p, W_EXITCODE(0, SIGKILL), …,
        // P_LTERM_JETSAM | P_JETSAM_PID) for a per-process limit; the knote
        // ORs NOTE_EXIT_MEMORY and NOTE_EXIT_MEMORY_PID into the status.
        let data = i64::from(9 | NOTE_EXIT_MEMORY | NOTE_EXIT_MEMORY_PID);
        let note = decode(WATCH_WITH_STATUS, data).unwrap();
        assert_eq!(
            note.status,
            Some(ExitStatus::Signal {
                name: "SIGKILL".into(),
                core_dumped: false
            })
        );
        assert_eq!(note.jetsam, Some(JetsamKind::PerProcessLimit));
        // P_JETSAM_VMPAGESHORTAGE (0): bit 31 of the u32, zero-extended
        // into the 64-bit `data` by knote_fill_kevent.
        let data = i64::from(9 | NOTE_EXIT_MEMORY | NOTE_EXIT_MEMORY_VMPAGESHORTAGE);
        assert!(data > 0);
        let note = decode(WATCH_WITH_STATUS, data).unwrap();
        assert_eq!(note.jetsam, Some(JetsamKind::PageShortage));
        assert_eq!(
            note.jetsam.unwrap().flag(),
            "NOTE_EXIT_MEMORY_VMPAGESHORTAGE"
        );
        // Unknown kind bits are kept, not guessed.
        let data = i64::from(9 | NOTE_EXIT_MEMORY | 0xc000_0000);
        assert_eq!(
            decode(WATCH_WITH_STATUS, data).unwrap().jetsam,
            Some(JetsamKind::Other(0xc000_0000))
        );
    }

    #[test]
    fn a_low_swap_kill_is_a_sigkill_without_the_flag() {
        // psignal_with_reason(p, SIGKILL, …) in no_paging_space_action: the
        // process exits of the signal with no P_LTERM_JETSAM.
        let note = decode(WATCH_WITH_STATUS, 9).unwrap();
        assert_eq!(note.jetsam, None);
        assert!(NO_FLAG_KILLS.contains("no NOTE_EXIT_MEMORY"));
    }

    #[test]
    fn without_the_status_only_the_detail_is_read() {
        // Registered without NOTE_EXITSTATUS (EACCES): kn_hook32 holds only
        // the detail bits.
        let data = i64::from(NOTE_EXIT_MEMORY | NOTE_EXIT_MEMORY_HIWAT);
        let note = decode(NOTE_EXIT | NOTE_EXIT_DETAIL, data).unwrap();
        assert_eq!(note.status, None);
        assert_eq!(note.jetsam, Some(JetsamKind::HighWater));
        // Detail bits without NOTE_EXIT_DETAIL among the flags are not read.
        let note = decode(NOTE_EXIT | NOTE_EXITSTATUS, data).unwrap();
        assert_eq!(note.jetsam, None);
    }

    #[test]
    fn code_signing_and_decryption_kills_are_flagged() {
        // W_EXITCODE(0, SIGKILL) with NOTE_EXIT_CSERROR (CS_KILLED).
        let note = decode(WATCH_WITH_STATUS, i64::from(9 | NOTE_EXIT_CSERROR)).unwrap();
        assert!(note.code_signing && !note.decrypt_failed);
        let note = decode(WATCH_WITH_STATUS, i64::from(9 | NOTE_EXIT_DECRYPTFAIL)).unwrap();
        assert!(note.decrypt_failed && !note.code_signing);
    }

    #[test]
    fn an_event_that_is_no_exit_is_none() {
        // NOTE_EXEC (0x20000000) alone.
        assert_eq!(decode(0x2000_0000, 0), None);
    }
}
