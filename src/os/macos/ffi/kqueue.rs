//! A kqueue for `EVFILT_PROC` exit events: open one ([`Kqueue::open`]),
//! add or delete one process's watch ([`Kqueue::watch_exit`],
//! [`Kqueue::unwatch`]), wait for events ([`Kqueue::wait`]). Each returns
//! plain values or the errno; [`crate::os::macos::parse::proc_exit`]
//! decodes an event, [`crate::os::macos::exit_watch`] keeps the books.
//!
//! Changes are made with `EV_RECEIPT` and room for one answer, so the call
//! answers at once with the change's own result (`EV_ERROR` set, `data`
//! 0 or the errno: `kevent_register`, `bsd/kern/kern_event.c`) and never
//! takes another event off the queue: the waiting thread gets every exit.
//! kevent calls on one kqueue from several threads are serialised by the
//! kernel (`kqlock`). A kqueue is not inherited across `fork` (kqueue(2)).
//! The descriptor closes when the `Kqueue` drops.

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::time::Duration;

/// `struct kevent64_s` (`bsd/sys/event.h`): the same on arm64 and x86_64.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<libc::kevent64_s>() == 48);
    assert!(offset_of!(libc::kevent64_s, ident) == 0);
    assert!(offset_of!(libc::kevent64_s, filter) == 8);
    assert!(offset_of!(libc::kevent64_s, flags) == 10);
    assert!(offset_of!(libc::kevent64_s, fflags) == 12);
    assert!(offset_of!(libc::kevent64_s, data) == 16);
    assert!(offset_of!(libc::kevent64_s, udata) == 24);
    assert!(offset_of!(libc::kevent64_s, ext) == 32);
    // bsd/sys/event.h: EVFILT_PROC (-5), EV_ADD 0x1, EV_DELETE 0x2,
    // EV_RECEIPT 0x40, EV_ERROR 0x4000, EV_EOF 0x8000.
    assert!(libc::EVFILT_PROC == -5);
    assert!(libc::EV_ADD == 0x1 && libc::EV_DELETE == 0x2 && libc::EV_RECEIPT == 0x40);
    assert!(libc::EV_ERROR == 0x4000 && libc::EV_EOF == 0x8000);
};

/// One event taken off the queue, as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcEvent {
    /// The pid watched (`ident`).
    pub pid: u64,
    pub filter: i16,
    pub flags: u16,
    pub fflags: u32,
    pub data: i64,
    /// The token given with the watch (`udata`).
    pub token: u64,
}

/// An open kqueue.
#[derive(Debug)]
pub struct Kqueue {
    fd: OwnedFd,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn change(pid: i32, flags: u16, fflags: u32, token: u64) -> libc::kevent64_s {
    libc::kevent64_s {
        ident: u64::try_from(pid).unwrap_or(0),
        filter: libc::EVFILT_PROC,
        flags: flags | libc::EV_RECEIPT,
        fflags,
        data: 0,
        udata: token,
        ext: [0; 2],
    }
}

impl Kqueue {
    /// `kqueue()`.
    pub fn open() -> Result<Self, i32> {
        // SAFETY: kqueue takes no arguments; it returns a new descriptor or -1.
        let fd = unsafe { libc::kqueue() };
        if fd < 0 {
            return Err(errno());
        }
        // SAFETY: `fd` is a descriptor kqueue just returned, owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// Make one change and return its own result (0 or the errno).
    fn apply(&self, mut kev: libc::kevent64_s) -> Result<(), i32> {
        let mut out = kev;
        // SAFETY: `kev` is one valid change and `out` room for one answer;
        // the kernel reads one and writes at most one; a null timeout is
        // never reached (EV_RECEIPT answers at once).
        let n = unsafe {
            libc::kevent64(
                self.fd.as_raw_fd(),
                &mut kev,
                1,
                &mut out,
                1,
                0,
                std::ptr::null(),
            )
        };
        if n < 0 {
            return Err(errno());
        }
        if n == 1 && out.flags & libc::EV_ERROR != 0 && out.data != 0 {
            return Err(i32::try_from(out.data).unwrap_or(libc::EINVAL));
        }
        Ok(())
    }

    /// Watch `pid`'s exit with `fflags` (`NOTE_EXIT | …`), events carrying
    /// `token`. `ESRCH`: no such process, or one already exiting (a zombie
    /// is not found: `proc_find` skips `P_REF_DEAD`); `EACCES`:
    /// `NOTE_EXITSTATUS` asked for a process this one may not signal.
    pub fn watch_exit(&self, pid: i32, fflags: u32, token: u64) -> Result<(), i32> {
        self.apply(change(pid, libc::EV_ADD, fflags, token))
    }

    /// Stop watching `pid`; `ENOENT` if its watch is gone (its exit was
    /// already taken off the queue).
    pub fn unwatch(&self, pid: i32) -> Result<(), i32> {
        self.apply(change(pid, libc::EV_DELETE, 0, 0))
    }

    /// Wait up to `timeout` for events; appends them to `out` (at most
    /// `max`). An interrupted wait returns no events.
    pub fn wait(&self, out: &mut Vec<ProcEvent>, max: usize, timeout: Duration) -> Result<(), i32> {
        let max = max.clamp(1, 64);
        let mut events = [libc::kevent64_s {
            ident: 0,
            filter: 0,
            flags: 0,
            fflags: 0,
            data: 0,
            udata: 0,
            ext: [0; 2],
        }; 64];
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
        };
        // SAFETY: no changes (null, 0); `events` has room for `max` ≤ 64
        // events and `ts` is a valid timespec, both outliving the call.
        let n = unsafe {
            libc::kevent64(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                events.as_mut_ptr(),
                i32::try_from(max).unwrap_or(64),
                0,
                &ts,
            )
        };
        if n < 0 {
            let e = errno();
            return if e == libc::EINTR { Ok(()) } else { Err(e) };
        }
        let n = usize::try_from(n).unwrap_or(0).min(max);
        out.extend(events[..n].iter().map(|e| ProcEvent {
            pid: e.ident,
            filter: e.filter,
            flags: e.flags,
            fflags: e.fflags,
            data: e.data,
            token: e.udata,
        }));
        Ok(())
    }
}
