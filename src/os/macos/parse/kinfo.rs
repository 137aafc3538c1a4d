//! The `sysctl({CTL_KERN, KERN_PROC, KERN_PROC_PID, pid})` answer, a
//! `struct kinfo_proc`, into the facts headroom needs about any process:
//! start time (its identity), parent, real and effective uid, short name,
//! which signals it catches or ignores, whether it runs translated by
//! Rosetta 2 (`P_TRANSLATED` in `p_flag`), and for a zombie its exit status
//! (`p_xstat`). The sysctl answers for zombies too (`sysctl_prochandle`
//! walks `PROC_ALLPROCLIST | PROC_ZOMBPROCLIST`).
//!
//! Unlike `proc_pidinfo(PROC_PIDTBSDINFO)`, which XNU refuses for other
//! users' processes unless the caller is root (`proc_security_policy` with
//! `CHECK_SAME_USER`, `bsd/kern/proc_info.c`), this sysctl answers for every
//! process, as `ps` relies on. It is how an unprivileged agent still knows
//! who a pid is, and where `p_sigcatch` comes from for the handler check
//! before a signal.
//!
//! libc has no `kinfo_proc` for Apple targets, so `KinfoProc` mirrors the
//! LP64 layout of `bsd/sys/sysctl.h` and `bsd/sys/proc.h`, field for field
//! as golang.org/x/sys/unix generates it from the SDK headers
//! (`ztypes_darwin_{amd64,arm64}.go`, `SizeofKinfoProc = 0x288`). The
//! parser reads the bytes the kernel wrote at the mirror's offsets, so it
//! runs (and is tested) anywhere; compile-time assertions pin every offset
//! it reads to the number the SDK's layout gives, worked out field by field
//! from the headers (and matching the explicit padding in the Go file).

use std::mem::{offset_of, size_of};

/// The C structs, mirrored. Never constructed or read: they exist so the
/// compiler computes the offsets the parser reads at.
mod layout {
    /// `struct timeval` on LP64 Darwin: `long` seconds and an `int` (`suseconds_t`)
    /// of microseconds, padded to 16 bytes.
    #[repr(C)]
    pub struct Timeval {
        pub(super) tv_sec: i64,
        pub(super) tv_usec: i32,
    }

    #[repr(C)]
    pub struct Itimerval {
        pub(super) it_interval: Timeval,
        pub(super) it_value: Timeval,
    }

    /// `struct extern_proc`. Pointers are `u64` (LP64).
    #[repr(C)]
    pub struct ExternProc {
        /// `p_un.__p_starttime`: the union's timeval arm is the one filled.
        pub(super) p_starttime: Timeval,
        pub(super) p_vmspace: u64,
        pub(super) p_sigacts: u64,
        pub(super) p_flag: i32,
        pub(super) p_stat: i8,
        pub(super) p_pid: i32,
        pub(super) p_oppid: i32,
        pub(super) p_dupfd: i32,
        pub(super) user_stack: u64,
        pub(super) exit_thread: u64,
        pub(super) p_debugger: i32,
        pub(super) sigwait: i32,
        pub(super) p_estcpu: u32,
        pub(super) p_cpticks: i32,
        pub(super) p_pctcpu: u32,
        pub(super) p_wchan: u64,
        pub(super) p_wmesg: u64,
        pub(super) p_swtime: u32,
        pub(super) p_slptime: u32,
        pub(super) p_realtimer: Itimerval,
        pub(super) p_rtime: Timeval,
        pub(super) p_uticks: u64,
        pub(super) p_sticks: u64,
        pub(super) p_iticks: u64,
        pub(super) p_traceflag: i32,
        pub(super) p_tracep: u64,
        pub(super) p_siglist: i32,
        pub(super) p_textvp: u64,
        pub(super) p_holdcnt: i32,
        pub(super) p_sigmask: u32,
        pub(super) p_sigignore: u32,
        pub(super) p_sigcatch: u32,
        pub(super) p_priority: u8,
        pub(super) p_usrpri: u8,
        pub(super) p_nice: i8,
        pub(super) p_comm: [u8; super::MAXCOMLEN + 1],
        pub(super) p_pgrp: u64,
        pub(super) p_addr: u64,
        pub(super) p_xstat: u16,
        pub(super) p_acflag: u16,
        pub(super) p_ru: u64,
    }

    #[repr(C)]
    pub struct Pcred {
        pub(super) pc_lock: [u8; 72],
        pub(super) pc_ucred: u64,
        pub(super) p_ruid: u32,
        pub(super) p_svuid: u32,
        pub(super) p_rgid: u32,
        pub(super) p_svgid: u32,
        pub(super) p_refcnt: i32,
    }

    #[repr(C)]
    pub struct Ucred {
        pub(super) cr_ref: i32,
        pub(super) cr_uid: u32,
        pub(super) cr_ngroups: i16,
        pub(super) cr_groups: [u32; 16],
    }

    #[repr(C)]
    pub struct Vmspace {
        pub(super) vm_refcnt: i32,
        pub(super) vm_shm: u64,
        pub(super) vm_rssize: [i32; 5],
        pub(super) vm_taddr: [u64; 3],
    }

    /// `struct eproc`.
    #[repr(C)]
    pub struct Eproc {
        pub(super) e_paddr: u64,
        pub(super) e_sess: u64,
        pub(super) e_pcred: Pcred,
        pub(super) e_ucred: Ucred,
        pub(super) e_vm: Vmspace,
        pub(super) e_ppid: i32,
        pub(super) e_pgid: i32,
        pub(super) e_jobc: i16,
        pub(super) e_tdev: i32,
        pub(super) e_tpgid: i32,
        pub(super) e_tsess: u64,
        pub(super) e_wmesg: [u8; 8],
        pub(super) e_xsize: i32,
        pub(super) e_xrssize: i16,
        pub(super) e_xccount: i16,
        pub(super) e_xswrss: i16,
        pub(super) e_flag: i32,
        pub(super) e_login: [u8; 12],
        pub(super) e_spare: [i32; 4],
    }

    /// `struct kinfo_proc` on LP64 Darwin.
    #[repr(C)]
    pub struct KinfoProc {
        pub(super) kp_proc: ExternProc,
        pub(super) kp_eproc: Eproc,
    }
}

use layout::{Eproc, ExternProc, KinfoProc, Pcred, Timeval, Ucred};

use super::proc_info::{MAXCOMLEN, Owner};

/// `SZOMB` (`bsd/sys/proc.h`): exited, waiting for its parent.
const SZOMB: i8 = 5;

/// `P_TRANSLATED` (`bsd/sys/proc.h`, `0x00020000`): the process runs
/// translated, an x86_64 program under Rosetta 2 on Apple Silicon;
/// `fill_user64_externproc` copies `p_flag` as it is.
pub const P_TRANSLATED: i32 = 0x0002_0000;

#[cfg(target_os = "macos")]
const _: () = assert!(SZOMB as u32 == libc::SZOMB);

/// Bytes in a `kinfo_proc`, what the sysctl writes for a live pid.
pub const KINFO_PROC_SIZE: usize = size_of::<KinfoProc>();

const EXTERN: usize = offset_of!(KinfoProc, kp_proc);
const EPROC: usize = offset_of!(KinfoProc, kp_eproc);
const START_SEC: usize = EXTERN + offset_of!(ExternProc, p_starttime) + offset_of!(Timeval, tv_sec);
const START_USEC: usize =
    EXTERN + offset_of!(ExternProc, p_starttime) + offset_of!(Timeval, tv_usec);
const FLAG: usize = EXTERN + offset_of!(ExternProc, p_flag);
const STAT: usize = EXTERN + offset_of!(ExternProc, p_stat);
const PID: usize = EXTERN + offset_of!(ExternProc, p_pid);
const SIGIGNORE: usize = EXTERN + offset_of!(ExternProc, p_sigignore);
const SIGCATCH: usize = EXTERN + offset_of!(ExternProc, p_sigcatch);
const COMM: usize = EXTERN + offset_of!(ExternProc, p_comm);
const XSTAT: usize = EXTERN + offset_of!(ExternProc, p_xstat);
const RUID: usize = EPROC + offset_of!(Eproc, e_pcred) + offset_of!(Pcred, p_ruid);
const EUID: usize = EPROC + offset_of!(Eproc, e_ucred) + offset_of!(Ucred, cr_uid);
const PPID: usize = EPROC + offset_of!(Eproc, e_ppid);

// The LP64 layout of `struct kinfo_proc` (`bsd/sys/sysctl.h`), `struct
// extern_proc` (`bsd/sys/proc.h`), `struct eproc`, `struct _pcred` and
// `struct _ucred` (`bsd/sys/sysctl.h`), the same on arm64 and x86_64: the
// size and every offset the parser reads, as the SDK's declarations give
// them (8-byte pointers and `long`, `struct timeval` of 16 bytes, `pc_lock`
// a 72-byte `struct lock__bsd__`, `NGROUPS` 16). A field added to, or lost
// from, the mirror moves one of these and stops the build.
const _: () = {
    assert!(KINFO_PROC_SIZE == 0x288); // SizeofKinfoProc in golang.org/x/sys/unix
    assert!(size_of::<ExternProc>() == 296);
    assert!(size_of::<Eproc>() == 352);
    assert!(size_of::<Pcred>() == 104);
    assert!(size_of::<Ucred>() == 76);
    assert!(START_SEC == 0 && START_USEC == 8);
    assert!(FLAG == 32);
    assert!(STAT == 36);
    assert!(PID == 40);
    assert!(SIGIGNORE == 232);
    assert!(SIGCATCH == 236);
    assert!(COMM == 243);
    assert!(XSTAT == 280);
    assert!(EPROC == 296);
    assert!(RUID == 296 + 16 + 80);
    assert!(EUID == 296 + 120 + 4);
    assert!(PPID == 296 + 264);
};

/// What headroom reads from a `kinfo_proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KinfoFacts {
    pub pid: u32,
    /// Start time in microseconds since the epoch, the same value as
    /// `proc_bsdinfo`'s `pbi_start_tvsec`/`tvusec` (both copy `p->p_start`).
    pub start_micros: u64,
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    /// Effective uid.
    pub euid: u32,
    /// `p_comm`: the first 16 bytes of the executable's name.
    pub comm: String,
    /// Signals with a handler installed: bit `n - 1` for signal `n`.
    pub sigcatch: u32,
    /// Signals set to `SIG_IGN`.
    pub sigignore: u32,
    pub zombie: bool,
    /// `P_TRANSLATED`: an x86_64 program run by Rosetta 2.
    pub translated: bool,
    /// `p_xstat`: for a zombie, how it ended, as `waitpid` reports it
    /// (`W_EXITCODE(code, signal)`, `WCOREFLAG` 0x80), capped at 16 bits
    /// by the kernel; 0 for a live process.
    pub xstat: u16,
}

impl KinfoFacts {
    /// Real and effective uid.
    pub fn owner(&self) -> Owner {
        Owner {
            real: self.uid,
            effective: self.euid,
        }
    }
}

/// Why a `kinfo_proc` answer could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "kinfo_proc answer of {got} bytes, expected {KINFO_PROC_SIZE}: not the LP64 layout this build knows"
)]
pub struct KinfoError {
    pub got: usize,
}

fn read<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    if let Some(src) = buf.get(at..at + N) {
        out.copy_from_slice(src);
    }
    out
}

/// Parse the sysctl's answer. An empty answer is how the kernel says there
/// is no such pid: `Ok(None)`.
pub fn parse(buf: &[u8]) -> Result<Option<KinfoFacts>, KinfoError> {
    if buf.is_empty() {
        return Ok(None);
    }
    if buf.len() != KINFO_PROC_SIZE {
        return Err(KinfoError { got: buf.len() });
    }
    let u32_at = |at| u32::from_ne_bytes(read(buf, at));
    let i32_at = |at| i32::from_ne_bytes(read(buf, at));
    let sec = i64::from_ne_bytes(read(buf, START_SEC));
    let usec = i32_at(START_USEC);
    let comm: [u8; MAXCOMLEN + 1] = read(buf, COMM);
    let comm_len = comm.iter().position(|&b| b == 0).unwrap_or(MAXCOMLEN);
    Ok(Some(KinfoFacts {
        pid: u32::try_from(i32_at(PID)).unwrap_or(0),
        start_micros: super::proc_info::start_micros(
            u64::try_from(sec).unwrap_or(0),
            u64::try_from(usec).unwrap_or(0),
        ),
        ppid: u32::try_from(i32_at(PPID)).unwrap_or(0),
        uid: u32_at(RUID),
        euid: u32_at(EUID),
        comm: String::from_utf8_lossy(&comm[..comm_len]).into_owned(),
        sigcatch: u32_at(SIGCATCH),
        sigignore: u32_at(SIGIGNORE),
        zombie: i8::from_ne_bytes(read(buf, STAT)) == SZOMB,
        translated: i32_at(FLAG) & P_TRANSLATED != 0,
        xstat: u16::from_ne_bytes(read(buf, XSTAT)),
    }))
}

/// `NSIG` on Darwin: signals are 1–31, a `sigset_t` is 32 bits.
pub const NSIG: i32 = 32;

/// Whether signal `signal` is set in a Darwin `sigset_t` mask; `None` for
/// a number that is not a Darwin signal.
pub fn in_mask(mask: u32, signal: i32) -> Option<bool> {
    if !(1..NSIG).contains(&signal) {
        return None;
    }
    Some(mask & (1u32 << (signal - 1)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kinfo_proc with the given values written where the kernel writes
    /// them (the offsets the compile-time assertions above pin to the SDK's
    /// layout).
    fn answer(f: &KinfoFacts, sec: i64, usec: i32, stat: i8) -> Vec<u8> {
        let mut b = vec![0u8; KINFO_PROC_SIZE];
        let mut put = |at: usize, bytes: &[u8]| b[at..at + bytes.len()].copy_from_slice(bytes);
        put(START_SEC, &sec.to_ne_bytes());
        put(START_USEC, &usec.to_ne_bytes());
        put(STAT, &stat.to_ne_bytes());
        // P_LP64 | P_EXEC, as every 64-bit program that exec'd has, and
        // P_TRANSLATED where asked.
        let flag = 0x4 | 0x4000 | if f.translated { P_TRANSLATED } else { 0 };
        put(FLAG, &flag.to_ne_bytes());
        put(XSTAT, &f.xstat.to_ne_bytes());
        put(PID, &i32::try_from(f.pid).unwrap().to_ne_bytes());
        put(PPID, &i32::try_from(f.ppid).unwrap().to_ne_bytes());
        put(RUID, &f.uid.to_ne_bytes());
        put(EUID, &f.euid.to_ne_bytes());
        put(SIGCATCH, &f.sigcatch.to_ne_bytes());
        put(SIGIGNORE, &f.sigignore.to_ne_bytes());
        put(COMM, f.comm.as_bytes());
        b
    }

    /// A Python interpreter as CPython sets it up (signal module docs:
    /// SIGPIPE and SIGXFSZ ignored, SIGINT turned into KeyboardInterrupt):
    /// caught = SIGINT (2), ignored = SIGPIPE (13) and SIGXFSZ (25).
    fn python() -> KinfoFacts {
        KinfoFacts {
            pid: 6441,
            start_micros: 1_732_246_411_000_000 + 250_731,
            ppid: 6380,
            uid: 501,
            euid: 501,
            comm: "Python".into(),
            sigcatch: 1 << (2 - 1),
            sigignore: 1 << (13 - 1) | 1 << (25 - 1),
            zombie: false,
            translated: false,
            xstat: 0,
        }
    }

    #[test]
    fn a_python_process_reads_back_with_its_handlers() {
        let want = python();
        let got = parse(&answer(&want, 1_732_246_411, 250_731, 2)).unwrap();
        assert_eq!(got, Some(want.clone()));
        assert_eq!(in_mask(want.sigcatch, 2), Some(true)); // SIGINT caught
        assert_eq!(in_mask(want.sigcatch, 30), Some(false)); // SIGUSR1 not
        assert_eq!(in_mask(want.sigignore, 13), Some(true)); // SIGPIPE ignored
    }

    #[test]
    fn a_sixteen_byte_name_fills_p_comm_without_a_nul() {
        let mut f = python();
        f.comm = "ollama_llama_ser".into();
        let got = parse(&answer(&f, 1, 0, 2)).unwrap().unwrap();
        assert_eq!(got.comm, "ollama_llama_ser");
    }

    #[test]
    fn zombies_are_flagged_with_their_exit_status() {
        // Killed by SIGKILL: W_EXITCODE(0, 9).
        let mut f = python();
        f.zombie = true;
        f.xstat = 9;
        let got = parse(&answer(&f, 1, 0, SZOMB)).unwrap().unwrap();
        assert!(got.zombie);
        assert_eq!(got.xstat, 9);
    }

    #[test]
    fn a_translated_process_is_seen_by_its_flag_alone() {
        let mut f = python();
        f.translated = true;
        let got = parse(&answer(&f, 1, 0, 2)).unwrap().unwrap();
        assert!(got.translated);
        // The other p_flag bits (P_LP64, P_EXEC) are not P_TRANSLATED.
        let native = parse(&answer(&python(), 1, 0, 2)).unwrap().unwrap();
        assert!(!native.translated);
    }

    #[test]
    fn a_setuid_process_has_two_uids() {
        let mut f = python();
        f.euid = 0;
        let got = parse(&answer(&f, 1, 0, 2)).unwrap().unwrap();
        assert_eq!(
            got.owner(),
            Owner {
                real: 501,
                effective: 0
            }
        );
    }

    #[test]
    fn an_empty_answer_means_no_such_process() {
        assert_eq!(parse(&[]), Ok(None));
    }

    #[test]
    fn a_wrong_size_is_an_error_naming_both_sizes() {
        let err = parse(&[0; 492]).unwrap_err();
        assert_eq!(err, KinfoError { got: 492 });
        let msg = err.to_string();
        assert!(msg.contains("492") && msg.contains("648"), "{msg}");
    }

    #[test]
    fn negative_times_and_pids_do_not_wrap() {
        let mut f = python();
        f.pid = 0;
        let got = parse(&answer(&f, -5, -1, 2)).unwrap().unwrap();
        assert_eq!(got.start_micros, 0);
    }

    #[test]
    fn signal_numbers_outside_darwins_range_are_rejected() {
        assert_eq!(in_mask(u32::MAX, 0), None);
        assert_eq!(in_mask(u32::MAX, 32), None);
        assert_eq!(in_mask(u32::MAX, -2), None);
        assert_eq!(in_mask(1 << 30, 31), Some(true)); // SIGUSR2
    }
}
