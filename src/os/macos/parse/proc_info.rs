//! Per-process values from libproc (`proc_pidinfo`, `proc_pid_rusage`) and
//! the errno of a failed call, as plain values.
//!
//! - Start time: `pbi_start_tvsec` and `pbi_start_tvusec` of
//!   `struct proc_bsdinfo` (`bsd/sys/proc_info.h`), the process's
//!   `p_start`. headroom uses microseconds since the epoch as the identity
//!   ([`crate::model::ProcessId::start`]).
//! - Names: `pbi_name` (up to 31 bytes of the executable's file name)
//!   when set, else `pbi_comm` (up to 15 bytes), both NUL-padded C strings
//!   (`proc_pidbsdinfo` in `bsd/kern/proc_info.c` cuts them there). Where
//!   `PROC_PIDTBSDINFO` is refused, [`fallback_name`] rebuilds the same name
//!   from `kinfo_proc`'s 16-byte `p_comm` and the executable's path.
//! - Pids: a `pid_t` is an `i32`; [`darwin_pid`] says which `u32` can be one.
//! - Ends: `rusage_info`'s `ri_proc_exit_abstime`, in mach ticks, into wall
//!   time ([`abstime_to_wall`]).
//! - Programs: `exec` keeps the identity (XNU copies `p_start` and
//!   `ps_start` into the process `exec` makes, `bsd/kern/kern_fork.c`) and
//!   changes the executable, which `rusage_info`'s `ri_uuid` names: the
//!   `LC_UUID` of the main executable (`proc_setexecutableuuid` at exec in
//!   `bsd/kern/kern_exec.c`, read by `gather_rusage_info` in
//!   `bsd/kern/kern_resource.c`). [`image_changed`] compares two readings,
//!   [`Program::changed`] what a fresh read gave.
//! - Errors: libproc and sysctl report why through errno; which errno
//!   means what depends on the call, so each call site picks a rule here.

use crate::model::Timestamp;
use crate::os::read_failure::ReadFailure;

/// `MAXCOMLEN` (`bsd/sys/param.h`): `p_comm` holds this many bytes of the
/// executable's name (`set_proc_name` in `bsd/kern/kern_exec.c`).
pub const MAXCOMLEN: usize = 16;

/// The most bytes of a name `PROC_PIDTBSDINFO` returns in `pbi_name`:
/// `2 * MAXCOMLEN` with the last byte forced to NUL (`proc_pidbsdinfo`).
pub const PBI_NAME_MAX: usize = 2 * MAXCOMLEN - 1;

#[cfg(target_os = "macos")]
const _: () = assert!(MAXCOMLEN == libc::MAXCOMLEN);

/// `pid` as a Darwin `pid_t`; `None` for a number no process can have
/// (above `i32::MAX`): such a pid names no process, which callers report
/// as "no such process", not as bad input.
pub fn darwin_pid(pid: u32) -> Option<i32> {
    i32::try_from(pid).ok()
}

/// Microseconds since the epoch from a `timeval`-style pair, saturating;
/// a microsecond part of a second or more is clamped (it never is, but the
/// value comes from the kernel).
pub fn start_micros(tv_sec: u64, tv_usec: u64) -> u64 {
    tv_sec
        .saturating_mul(1_000_000)
        .saturating_add(tv_usec.min(999_999))
}

/// The wall-clock start of a process from its identity value.
pub fn started_at(start_micros: u64) -> Timestamp {
    Timestamp(start_micros / 1000)
}

/// A NUL-padded C string field as text (lossy UTF-8), up to the first NUL
/// or the end of the field.
pub fn c_field(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The process name: `pbi_name` if the kernel filled it, else `pbi_comm`.
pub fn process_name(pbi_name: &[u8], pbi_comm: &[u8]) -> String {
    let name = c_field(pbi_name);
    if name.is_empty() {
        c_field(pbi_comm)
    } else {
        name
    }
}

/// The name `PROC_PIDTBSDINFO` would have given, rebuilt from what any user
/// may read: `kinfo_proc`'s `p_comm` (the first [`MAXCOMLEN`] bytes of the
/// executable's file name) and `proc_pidpath` (which needs no privilege).
///
/// `p_comm` and `p_name` are cut from the same file name at `exec`
/// (`set_proc_name`), so when the path's last component starts with a
/// `p_comm` that fills all 16 bytes, that component is the longer name; it
/// is cut to [`PBI_NAME_MAX`] bytes, as `pbi_name` is. Otherwise (a shorter
/// `p_comm` was never cut; a path that does not match, or none) `p_comm` is
/// the name. So both ways of reading a process give the same name, and the
/// same workload classification, whenever the executable can be read.
pub fn fallback_name(comm: &str, exe: Option<&str>) -> String {
    if comm.len() < MAXCOMLEN {
        return comm.to_owned();
    }
    let base = exe.and_then(|e| e.rsplit('/').next()).unwrap_or("");
    if base.len() <= comm.len() || !base.starts_with(comm) {
        return comm.to_owned();
    }
    let mut end = base.len().min(PBI_NAME_MAX);
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    base[..end].to_owned()
}

/// The wall-clock moment of a mach absolute time `then` (an `ri_proc_*
/// _abstime`), given the mach time and the wall clock read together now and
/// the timebase (`mach_timebase_info`: ticks × numer / denom = ns; 1/1 on
/// Intel, 125/3 on Apple Silicon). Mach absolute time stops while the Mac
/// sleeps, so across a sleep the moment comes out later than it was, by the
/// time slept. A `then` in the future, or a zero denominator, gives `now`.
pub fn abstime_to_wall(
    then: u64,
    now: u64,
    now_wall: Timestamp,
    numer: u32,
    denom: u32,
) -> Timestamp {
    if denom == 0 || then >= now {
        return now_wall;
    }
    let ns = u128::from(now - then) * u128::from(numer) / u128::from(denom);
    let ms = u64::try_from(ns / 1_000_000).unwrap_or(u64::MAX);
    Timestamp(now_wall.0.saturating_sub(ms))
}

/// Whether a process's executable changed between two `ri_uuid` readings:
/// both name one, and not the same. An executable built without `LC_UUID`
/// gives all zeros (`load_result_null` in `bsd/kern/mach_loader.c`; only
/// `load_uuid` sets it), which tells nothing.
pub fn image_changed(known: &[u8; 16], now: &[u8; 16]) -> bool {
    let named = |u: &[u8; 16]| u.iter().any(|&b| b != 0);
    named(known) && named(now) && known != now
}

/// What a process ran, as the sampler read it: the name, the executable's
/// path and its `ri_uuid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program<'a> {
    pub name: &'a str,
    pub exe: Option<&'a str>,
    pub image: &'a [u8; 16],
}

impl Program<'_> {
    /// Whether `now`, a later read of the same identity, runs another
    /// program: another executable (by `ri_uuid`, or by path where both
    /// were read) or another name. On macOS only `exec` changes a process's
    /// name (`set_proc_name` in `bsd/kern/kern_exec.c` is the one writer of
    /// `p_comm` and `p_name` after fork), so any of them is an exec.
    pub fn changed(&self, now: &Program<'_>) -> bool {
        let exe_differs = matches!((self.exe, now.exe), (Some(a), Some(b)) if a != b);
        image_changed(self.image, now.image) || exe_differs || self.name != now.name
    }
}

/// Who a process runs as: the real uid (who started it: `pbi_ruid`,
/// `kinfo_proc`'s `p_ruid`, what headroom reports as its owner, as Linux's
/// first `Uid:` value) and the effective uid (`pbi_uid`, `cr_uid`: what the
/// kernel checks access with). They differ for setuid programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub real: u32,
    pub effective: u32,
}

/// The failure kind of a libproc call (`proc_pidinfo`, `proc_pid_rusage`,
/// `proc_pidpath`): ESRCH for a gone process, EPERM for one the caller may
/// not inspect (`proc_security_policy` in `bsd/kern/proc_info.c`).
pub fn libproc_failure(errno: i32) -> ReadFailure {
    match errno {
        libc::ESRCH => ReadFailure::Vanished,
        libc::EPERM | libc::EACCES => ReadFailure::Denied,
        _ => ReadFailure::Unreadable,
    }
}

/// The failure kind of a `KERN_PROCARGS2` sysctl. The kernel answers EINVAL
/// both for a pid that is gone and for another user's process when the
/// caller is not root (`sysctl_procargsx` in `bsd/kern/kern_sysctl.c`), so
/// the owner decides which one it was. The kernel compares EFFECTIVE uids
/// (`kauth_cred_getuid` of both credentials), so the target's effective uid
/// is compared with `my_euid`, this process's effective uid.
pub fn procargs_failure(errno: i32, owner: Option<Owner>, my_euid: u32) -> ReadFailure {
    let others = my_euid != 0 && owner.is_some_and(|o| o.effective != my_euid);
    match errno {
        libc::EINVAL if others => ReadFailure::Denied,
        libc::EINVAL | libc::ESRCH => ReadFailure::Vanished,
        libc::EPERM | libc::EACCES => ReadFailure::Denied,
        _ => ReadFailure::Unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_microseconds_since_the_epoch() {
        // A process started at 2024-11-22 03:33:31.250731 UTC.
        assert_eq!(start_micros(1_732_246_411, 250_731), 1_732_246_411_250_731);
        assert_eq!(
            started_at(1_732_246_411_250_731).to_string(),
            "2024-11-22T03:33:31.250Z"
        );
    }

    #[test]
    fn start_time_saturates_and_clamps() {
        assert_eq!(start_micros(u64::MAX, 5), u64::MAX);
        assert_eq!(start_micros(1, 5_000_000), 1_999_999);
    }

    #[test]
    fn names_prefer_the_long_field() {
        // Safari's GPU process: its name is longer than MAXCOMLEN.
        let mut name = [0u8; 32];
        name[..20].copy_from_slice(b"com.apple.WebKit.GPU");
        let comm: [u8; 16] = *b"com.apple.WebKit";
        // A 16-byte comm without a NUL is still read whole.
        assert_eq!(c_field(&comm), "com.apple.WebKit");
        assert_eq!(process_name(&name, &comm), "com.apple.WebKit.GPU");
        // Invalid UTF-8 is replaced, not rejected.
        assert_eq!(c_field(b"caf\xe9\0\0"), "caf\u{fffd}");
        assert_eq!(process_name(&[0; 32], &comm), "com.apple.WebKit");
        assert_eq!(process_name(&[0; 32], &[0; 16]), "");
    }

    /// `ri_uuid` values: the `LC_UUID`s of two different executables are
    /// two random UUIDs (any two distinct byte strings stand for them); all
    /// zeros is what an executable without `LC_UUID` gives
    /// (`load_result_null`, `bsd/kern/mach_loader.c`).
    #[test]
    fn a_new_executable_shows_in_ri_uuid() {
        let sh = [0x11; 16];
        let sleep = [0x22; 16];
        let none = [0; 16];
        assert!(image_changed(&sh, &sleep));
        assert!(!image_changed(&sh, &sh));
        assert!(
            !image_changed(&none, &sleep),
            "no UUID before: nothing known"
        );
        assert!(!image_changed(&sh, &none), "no UUID now: nothing known");
    }

    #[test]
    fn a_program_changes_with_its_executable_or_its_name() {
        let (a, b) = ([0x11; 16], [0x22; 16]);
        let sh = Program {
            name: "sh",
            exe: Some("/bin/sh"),
            image: &a,
        };
        assert!(!sh.changed(&sh));
        // `sh -c 'exec /bin/sleep 5'`: all three change.
        let sleep = Program {
            name: "sleep",
            exe: Some("/bin/sleep"),
            image: &b,
        };
        assert!(sh.changed(&sleep));
        // A different executable under the same name and path (reinstalled
        // in place), by its UUID alone.
        assert!(sh.changed(&Program { image: &b, ..sh }));
        // The path alone (another copy of the same build, same UUID).
        assert!(sh.changed(&Program {
            exe: Some("/usr/local/bin/sh"),
            ..sh
        }));
        // The name alone (the path unreadable now).
        assert!(sh.changed(&Program {
            name: "zsh",
            exe: None,
            ..sh
        }));
        // A path that could not be read says nothing.
        assert!(!sh.changed(&Program { exe: None, ..sh }));
    }

    #[test]
    fn pids_above_i32_max_are_no_darwin_pids() {
        assert_eq!(darwin_pid(0), Some(0));
        assert_eq!(darwin_pid(i32::MAX as u32), Some(i32::MAX));
        assert_eq!(darwin_pid(i32::MAX as u32 + 1), None);
        assert_eq!(darwin_pid(u32::MAX), None);
    }

    #[test]
    fn a_cut_comm_is_completed_from_the_executable() {
        // p_comm keeps 16 bytes of "ollama_llama_server"; pbi_name would
        // have the whole name.
        let comm = "ollama_llama_ser";
        let exe = Some("/Applications/Ollama.app/Contents/Resources/ollama_llama_server");
        assert_eq!(fallback_name(comm, exe), "ollama_llama_server");
        // A name longer than pbi_name holds is cut where pbi_name cuts it.
        let long = "com.apple.WebKit.WebContent.Development.xpc";
        let got = fallback_name(&long[..16], Some(&format!("/S/L/F/{long}")));
        assert_eq!(got, &long[..PBI_NAME_MAX]);
    }

    #[test]
    fn a_comm_that_was_not_cut_or_does_not_match_is_kept() {
        // Shorter than 16 bytes: never cut, and the same as p_name.
        assert_eq!(fallback_name("Python", Some("/usr/bin/python3")), "Python");
        // The path names another file (a rewritten path, a hard link).
        assert_eq!(
            fallback_name("ollama_llama_ser", Some("/usr/local/bin/ollama")),
            "ollama_llama_ser"
        );
        assert_eq!(fallback_name("ollama_llama_ser", None), "ollama_llama_ser");
        // The path's name IS p_comm: nothing longer to take.
        assert_eq!(
            fallback_name("ollama_llama_ser", Some("/x/ollama_llama_ser")),
            "ollama_llama_ser"
        );
    }

    #[test]
    fn mach_ticks_become_wall_time_with_the_timebase() {
        let now_wall = Timestamp(1_732_246_411_250);
        // Apple Silicon: 24 MHz ticks, 125/3 ns each. 24 000 000 ticks = 1 s.
        assert_eq!(
            abstime_to_wall(76_000_000, 100_000_000, now_wall, 125, 3),
            Timestamp(now_wall.0 - 1000)
        );
        // Intel: ticks are nanoseconds.
        assert_eq!(
            abstime_to_wall(1_000_000_000, 3_500_000_000, now_wall, 1, 1),
            Timestamp(now_wall.0 - 2500)
        );
        // A moment not yet reached, or no timebase: now.
        assert_eq!(abstime_to_wall(5, 4, now_wall, 1, 1), now_wall);
        assert_eq!(abstime_to_wall(1, 4, now_wall, 1, 0), now_wall);
        // Saturates at the epoch instead of wrapping.
        assert_eq!(
            abstime_to_wall(0, u64::MAX, Timestamp(5), 1, 1),
            Timestamp(0)
        );
    }

    #[test]
    fn libproc_errnos_sort_into_failures() {
        assert_eq!(libproc_failure(libc::ESRCH), ReadFailure::Vanished);
        assert_eq!(libproc_failure(libc::EPERM), ReadFailure::Denied);
        assert_eq!(libproc_failure(libc::EINVAL), ReadFailure::Unreadable);
    }

    #[test]
    fn procargs_einval_is_denied_only_for_other_users_when_not_root() {
        let user = |uid| {
            Some(Owner {
                real: uid,
                effective: uid,
            })
        };
        // Unprivileged, another user's process: denied.
        assert_eq!(
            procargs_failure(libc::EINVAL, user(0), 501),
            ReadFailure::Denied
        );
        // Our own process: it must be gone (or a zombie without a stack).
        assert_eq!(
            procargs_failure(libc::EINVAL, user(501), 501),
            ReadFailure::Vanished
        );
        // Root sees everyone: EINVAL means gone.
        assert_eq!(
            procargs_failure(libc::EINVAL, user(501), 0),
            ReadFailure::Vanished
        );
        // Owner unknown: assume gone rather than blame permissions.
        assert_eq!(
            procargs_failure(libc::EINVAL, None, 501),
            ReadFailure::Vanished
        );
        assert_eq!(
            procargs_failure(libc::ENOMEM, None, 501),
            ReadFailure::Unreadable
        );
    }

    #[test]
    fn procargs_refusals_follow_the_effective_uid() {
        // A setuid-root program that user 501 started: real 501, effective
        // 0. The kernel refuses 501 its arguments, so EINVAL is a refusal,
        // not an exit.
        let setuid_root = Some(Owner {
            real: 501,
            effective: 0,
        });
        assert_eq!(
            procargs_failure(libc::EINVAL, setuid_root, 501),
            ReadFailure::Denied
        );
        // The other way round: started by root, running as 501 (a daemon
        // that dropped privileges with seteuid): 501 may read it, so EINVAL
        // means it is gone.
        let dropped = Some(Owner {
            real: 0,
            effective: 501,
        });
        assert_eq!(
            procargs_failure(libc::EINVAL, dropped, 501),
            ReadFailure::Vanished
        );
    }
}
