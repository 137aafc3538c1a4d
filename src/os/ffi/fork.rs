//! Forked copies of a process that share its memory: `headroom-hog
//! --fork`, the stand-in for a notebook's `multiprocessing` and
//! `DataLoader` workers in tests and benchmarks.
//!
//! A child made by [`fork_sharer`] runs no Rust beyond a loop of plain
//! memory writes and async-signal-safe calls (`prctl`, `nanosleep`,
//! `pause`): after `fork` in a threaded process only those are safe. It
//! allocates nothing and takes no lock.

use std::io;
use std::time::Duration;

/// Bytes between the bytes a writer touches: one per 4 KiB page.
const PAGE: usize = 4096;
/// A writer sleeps after each this many bytes: a sleep per page would
/// take longer than the page at any useful rate.
const STEP: usize = 1 << 20;

/// Fork a child that shares `blocks` with this process copy-on-write and,
/// when `write_per_second` is given, writes one byte in every page of them
/// at that many bytes a second (turning shared pages into its own copies),
/// then waits until it is killed. On Linux it is killed when this process
/// ends (`PR_SET_PDEATHSIG`). Returns the child's pid.
pub fn fork_sharer(blocks: &mut [Vec<u8>], write_per_second: Option<f64>) -> io::Result<u32> {
    // Worked out before the fork: the child computes nothing that allocates.
    let pause_per_page = write_per_second
        .filter(|r| r.is_finite() && *r > 0.0)
        .map(|r| Duration::from_secs_f64(STEP as f64 / r));
    // SAFETY: fork has no memory-safety preconditions; the child below only
    // writes to memory it owns (its copy of `blocks`) and makes
    // async-signal-safe calls until it is killed.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid > 0 {
        return Ok(pid as u32);
    }
    die_with_parent();
    if let Some(pause) = pause_per_page {
        let nap = libc::timespec {
            tv_sec: pause.as_secs() as libc::time_t,
            tv_nsec: pause.subsec_nanos() as libc::c_long,
        };
        for block in blocks.iter_mut() {
            let mut i = 0;
            let mut since_nap = 0;
            while i < block.len() {
                block[i] = block[i].wrapping_add(1);
                i += PAGE;
                since_nap += PAGE;
                if since_nap >= STEP {
                    since_nap = 0;
                    // SAFETY: nanosleep reads `nap` and writes nothing (no
                    // remainder pointer); it is async-signal-safe.
                    unsafe { libc::nanosleep(&nap, std::ptr::null_mut()) };
                }
            }
        }
    }
    loop {
        // SAFETY: pause takes no arguments and is async-signal-safe.
        unsafe { libc::pause() };
    }
}

#[cfg(target_os = "linux")]
fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and touches no
    // memory of ours; it is a plain system call.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent() {}
