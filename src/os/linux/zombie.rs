//! The exit status a dead process keeps until its parent reaps it.
//!
//! Only a parent learns how its child ended (`waitpid`). But between its
//! death and the parent's `waitpid` the process is a zombie, and
//! `/proc/[pid]/stat` field 52, `exit_code` (Linux 3.5 on), holds the status
//! "in the form reported by waitpid(2)" (proc(5)). A Jupyter server reaps a
//! dead kernel within a few seconds, so a daemon sampling every second or
//! faster usually sees the zombie and can say "killed by SIGKILL" or "exited
//! with status 1" instead of nothing. Only a process the sampler already
//! lists with no memory at all (a zombie has none) is looked at.

use std::path::Path;

use crate::model::ProcessId;
use crate::model::exit::{Ended, ExitStatus};
use crate::os::linux::parse::procfs::{parse_stat, parse_u64};

/// A zombie's start time and `exit_code`, from the text of its
/// `/proc/[pid]/stat`; `None` for a process that is not a zombie or a file
/// cut short.
pub fn parse_zombie_stat(data: &[u8]) -> Option<(u64, i64)> {
    let stat = parse_stat(data)?;
    if stat.state != b'Z' {
        return None;
    }
    let close = data.iter().rposition(|&c| c == b')')?;
    // Field 52 is the 50th field after the command name (fields 3..=52).
    let exit_code = data[close + 1..]
        .split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .nth(49)?;
    let exit_code = i64::try_from(parse_u64(exit_code)?).ok()?;
    Some((stat.start_ticks, exit_code))
}

/// A `waitpid` status in words: a normal exit's code, or the signal.
pub fn decode(status: i64) -> ExitStatus {
    let signal = status & 0x7f;
    if signal == 0 {
        ExitStatus::Code(((status >> 8) & 0xff) as i32)
    } else {
        ExitStatus::Signal {
            name: signal_name(signal as i32),
            core_dumped: status & 0x80 != 0,
        }
    }
}

/// `9` → `SIGKILL`, for the signals a post-mortem is likely to meet.
pub(crate) fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        other => return format!("signal {other}"),
    };
    name.to_string()
}

/// How each of `suspects` ended, for those that are zombies of the same
/// identity under `proc_root` now.
pub fn read_ended(proc_root: &Path, suspects: &[ProcessId]) -> Vec<Ended> {
    suspects
        .iter()
        .filter_map(|id| {
            let path = proc_root.join(id.pid.to_string()).join("stat");
            let data = std::fs::read(&path).ok()?;
            let (start, code) = parse_zombie_stat(&data)?;
            (start == id.start).then(|| Ended {
                id: *id,
                status: decode(code),
                source: path.display().to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/[pid]/stat` of two zombies read on Linux 6.18 before their
    /// parent (python3) reaped them: `sleep 0.1`, which exited with status
    /// 0, and `sh -c 'kill -9 $$'`, which killed itself with SIGKILL.
    const EXITED: &[u8] = b"1972 (sleep) Z 1931 1929 30433 0 -1 4227084 76 0 0 0 0 0 0 0 20 0 1 0 607806 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    const KILLED: &[u8] = b"1973 (sh) Z 1931 1929 30433 0 -1 4228108 62 0 0 0 0 0 0 0 20 0 1 0 607856 0 0 18446744073709551615 0 0 0 0 0 0 0 0 65538 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 9\n";

    #[test]
    fn a_zombie_gives_its_start_and_status() {
        assert_eq!(parse_zombie_stat(EXITED), Some((607806, 0)));
        assert_eq!(parse_zombie_stat(KILLED), Some((607856, 9)));
        assert_eq!(decode(0), ExitStatus::Code(0));
    }

    #[test]
    fn a_living_process_is_not_a_zombie() {
        let living = String::from_utf8(EXITED.to_vec())
            .unwrap()
            .replacen(" Z ", " S ", 1);
        assert_eq!(parse_zombie_stat(living.as_bytes()), None);
    }

    #[test]
    fn statuses_decode_like_waitpid() {
        assert_eq!(decode(1 << 8), ExitStatus::Code(1));
        assert_eq!(
            decode(i64::from(libc::SIGKILL)),
            ExitStatus::Signal {
                name: "SIGKILL".into(),
                core_dumped: false
            }
        );
        assert_eq!(
            decode(i64::from(libc::SIGSEGV) | 0x80),
            ExitStatus::Signal {
                name: "SIGSEGV".into(),
                core_dumped: true
            }
        );
    }

    #[test]
    fn a_real_zombie_is_read_and_a_reused_pid_is_not() {
        use std::process::Command;
        let mut child = Command::new("/bin/sh")
            .args(["-c", "kill -9 $$"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let stat_path = Path::new("/proc").join(pid.to_string()).join("stat");
        // Wait for it to die, without reaping it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let start = loop {
            let data = std::fs::read(&stat_path).unwrap();
            if let Some((start, _)) = parse_zombie_stat(&data) {
                break start;
            }
            assert!(std::time::Instant::now() < deadline, "the child never died");
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let id = ProcessId { pid, start };
        let other = ProcessId {
            pid,
            start: start + 1,
        };
        let ended = read_ended(Path::new("/proc"), &[id, other]);
        assert_eq!(ended.len(), 1, "{ended:?}");
        assert_eq!(ended[0].id, id);
        assert_eq!(
            ended[0].status,
            ExitStatus::Signal {
                name: "SIGKILL".into(),
                core_dumped: false
            }
        );
        child.wait().unwrap();
        assert!(read_ended(Path::new("/proc"), &[id]).is_empty(), "reaped");
    }
}
