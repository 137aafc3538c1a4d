//! Linux identity checks: the start time is field 22 of `/proc/[pid]/stat`
//! (clock ticks since boot, the value the Linux sampler records), handlers
//! are the `SigCgt` mask of `/proc/[pid]/status` (proc(5): "Masks (expressed
//! in hexadecimal) of signals being … caught"), bit `n - 1` for signal `n`.

use std::io;

use crate::sample::linux::procfs;

/// Highest signal number on Linux (`SIGRTMAX`, 64 on every architecture
/// headroom builds for).
const SIGMAX: i32 = 64;

fn gone(pid: u32) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("process {pid} is gone (no /proc/{pid})"),
    )
}

/// A read error, named after the file; a missing file or ESRCH (the
/// process exited during the read) mean the process is gone.
fn read(pid: u32, file: &str) -> io::Result<Option<Vec<u8>>> {
    let path = format!("/proc/{pid}/{file}");
    match std::fs::read(&path) {
        Ok(data) => Ok(Some(data)),
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            Ok(None)
        }
        Err(e) => Err(io::Error::new(e.kind(), format!("cannot read {path}: {e}"))),
    }
}

pub fn current_start(pid: u32) -> io::Result<Option<u64>> {
    let Some(data) = read(pid, "stat")? else {
        return Ok(None);
    };
    procfs::parse_stat(&data)
        .map(|st| Some(st.start_ticks))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "/proc/{pid}/stat does not parse: {}",
                    String::from_utf8_lossy(&data)
                ),
            )
        })
}

/// A hexadecimal signal mask line (`SigCgt:\t0000000000004002`) of a
/// `status` file.
fn sig_mask(status: &[u8], key: &str) -> Option<u64> {
    status.split(|&b| b == b'\n').find_map(|line| {
        let rest = line.strip_prefix(key.as_bytes())?.strip_prefix(b":")?;
        let hex = std::str::from_utf8(rest).ok()?.trim();
        u64::from_str_radix(hex, 16).ok()
    })
}

pub fn catches_signal(pid: u32, signal: i32) -> io::Result<bool> {
    if !(1..=SIGMAX).contains(&signal) {
        return Err(super::identity::bad_signal(signal));
    }
    let Some(status) = read(pid, "status")? else {
        return Err(gone(pid));
    };
    let mask = sig_mask(&status, "SigCgt").ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/status has no SigCgt line"),
        )
    })?;
    Ok(mask & (1u64 << (signal - 1)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signal lines of `/proc/[pid]/status` of an `ipykernel` process
    /// (Python catches SIGINT, bit 1; ipykernel adds SIGCHLD, bit 16;
    /// SIGPIPE and SIGXFSZ ignored), shaped as the kernel prints them.
    const STATUS: &[u8] = b"Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nShdPnd:\t0000000000000000\nSigBlk:\t0000000000000000\nSigIgn:\t0000000001001000\nSigCgt:\t0000000180014002\nCapInh:\t0000000000000000\n";

    #[test]
    fn sigcgt_is_read_as_hex() {
        assert_eq!(sig_mask(STATUS, "SigCgt"), Some(0x0000_0001_8001_4002));
        assert_eq!(sig_mask(STATUS, "SigIgn"), Some(0x0100_1000));
        let mask = sig_mask(STATUS, "SigCgt").unwrap();
        assert!(mask & (1 << (libc::SIGINT - 1)) != 0);
        assert!(mask & (1 << (libc::SIGUSR1 - 1)) == 0);
    }

    #[test]
    fn a_missing_or_garbled_line_is_none() {
        assert_eq!(sig_mask(b"Name:\tx\n", "SigCgt"), None);
        assert_eq!(sig_mask(b"SigCgt:\tzz\n", "SigCgt"), None);
        // A longer key that starts with the same letters is not it.
        assert_eq!(sig_mask(b"SigCgtX:\t01\n", "SigCgt"), None);
    }

    #[test]
    fn signal_64_is_a_signal_and_65_is_not() {
        let me = std::process::id();
        assert!(catches_signal(me, 64).is_ok());
        assert!(catches_signal(me, 65).is_err());
    }
}
