//! Facts about headroom's own process that decide what it may do: the
//! effective uid (the one the kernel checks for signals and for reading
//! other users' processes), whether that is root, the calling thread's
//! CPU priority, and the file of its own program (which the service
//! installer copies). Every privilege decision reads the effective uid from
//! here, so the daemon, the doctor and the service installer agree; and
//! every hint to run headroom as root names this program by its path
//! ([`sudo_command`]).

use std::io;
use std::path::{Path, PathBuf};

/// Send this process's stdout and stderr to `file` from now on (the
/// daemon's own log file).
pub fn log_to(file: &std::fs::File) -> io::Result<()> {
    crate::os::ffi::stdio::onto_stdout_and_stderr(file)
}

/// The effective uid of this process (`geteuid`, which cannot fail).
pub fn effective_uid() -> u32 {
    crate::os::ffi::uid::effective_uid()
}

/// The file to read for the program this process runs, if `exe` (a path
/// of the executable) is its path: on Linux `/proc/self/exe`, which opens
/// the file the process was started from even if another took its path
/// since; elsewhere `exe` itself.
pub fn own_image(exe: &Path) -> PathBuf {
    if cfg!(target_os = "linux") {
        PathBuf::from("/proc/self/exe")
    } else {
        exe.to_path_buf()
    }
}

/// `sudo`, this headroom and `args` as a shell command: the program by its
/// absolute path, because sudo's `secure_path` leaves out the directories
/// users install into (`~/.cargo/bin`), so `sudo headroom` may find no
/// headroom or another one. Where the path is unknown, `sudo "$(command -v
/// headroom)"`.
pub fn sudo_command(args: &str) -> String {
    let program = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .ok()
        .and_then(|p| p.to_str().map(shell_word))
        .unwrap_or_else(|| "\"$(command -v headroom)\"".to_owned());
    format!("sudo {program} {args}")
}

/// `s` as one shell word: as it is if plain, otherwise single-quoted.
pub fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@%,".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Whether headroom runs as root (effective uid 0).
pub fn running_as_root() -> bool {
    effective_uid() == 0
}

/// Lower the calling thread's CPU priority by `steps` nice levels where the
/// OS keeps one per thread (Linux); elsewhere do nothing (`Ok(None)`). The
/// HTTP server's thread runs so, that scrapers hammering it never delay a
/// sample or a signal on a busy machine. Returns the thread's new nice value.
pub fn lower_this_thread_priority(steps: i32) -> io::Result<Option<i32>> {
    #[cfg(target_os = "linux")]
    {
        lower_linux_thread_priority(steps).map(Some)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = steps;
        Ok(None)
    }
}

/// Raise the calling thread's CPU priority to nice `nice` (negative: above
/// the default) where the OS keeps one per thread (Linux) and it is below
/// the current value; threads it starts afterwards inherit it. Needs root
/// (`CAP_SYS_NICE`). Elsewhere, or already as high, nothing (`Ok(None)`).
/// The enforcement loop runs so, as earlyoom's `-p` does, so that CPU-bound
/// work beside it (data loaders, compilers) cannot delay a signal.
pub fn raise_this_thread_priority(nice: i32) -> io::Result<Option<i32>> {
    #[cfg(target_os = "linux")]
    {
        use crate::os::ffi::priority;
        let current = priority::thread_nice()?;
        if nice >= current {
            return Ok(None);
        }
        priority::set_thread_nice(nice.max(-20))?;
        Ok(Some(nice.max(-20)))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
        Ok(None)
    }
}

/// How far a budgeted reader's thread (proportional shares, library scans,
/// framework environments) runs below the thread that started it: their
/// reads are paid from a CPU budget, and wait for the user's work.
pub const BACKGROUND_NICE: i32 = 10;

/// Put the calling thread [`BACKGROUND_NICE`] steps below the thread that
/// started it, where the OS keeps a priority per thread; a failure only
/// leaves it where it was.
pub fn run_in_background() {
    if let Err(e) = lower_this_thread_priority(BACKGROUND_NICE) {
        tracing::debug!("cannot lower a reader thread's priority: {e}");
    }
}

/// Lower the calling thread's nice value by `steps` (capped at 19, the lowest
/// priority). On Linux a nice value belongs to a thread, and `who = 0` with
/// `PRIO_PROCESS` names the calling thread (setpriority(2), NOTES). Returns
/// the new value.
#[cfg(target_os = "linux")]
fn lower_linux_thread_priority(steps: i32) -> io::Result<i32> {
    use crate::os::ffi::priority;
    let current = priority::thread_nice()?;
    let wanted = current.saturating_add(steps).min(19);
    priority::set_thread_nice(wanted)?;
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effective_uid_is_the_one_proc_reports() {
        let status = std::fs::read_to_string("/proc/self/status");
        if let Ok(status) = status {
            // Uid: real effective saved filesystem
            let uids: Vec<u32> = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .unwrap()
                .split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect();
            assert_eq!(effective_uid(), uids[1]);
        }
        assert_eq!(running_as_root(), effective_uid() == 0);
    }

    #[cfg(target_os = "linux")]
    fn own_nice() -> i32 {
        crate::os::ffi::priority::thread_nice().unwrap()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn raising_a_threads_priority_takes_root_and_its_new_threads_inherit_it() {
        let before = own_nice();
        let (raised, inherited) = std::thread::spawn(move || {
            let raised = raise_this_thread_priority(before - 1);
            let inherited = std::thread::spawn(own_nice).join().unwrap();
            (raised, inherited)
        })
        .join()
        .unwrap();
        if running_as_root() {
            assert_eq!(raised.unwrap(), Some(before - 1));
            assert_eq!(inherited, before - 1, "a thread started after it");
        } else {
            // Refused, unless RLIMIT_NICE lets this user go that high.
            match raised {
                Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}"),
                Ok(got) => assert_eq!(got, Some(before - 1)),
            }
        }
        // Not a raise: nothing to do.
        assert_eq!(raise_this_thread_priority(before + 1).unwrap(), None);
        assert_eq!(own_nice(), before, "the test thread itself is untouched");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn lowering_a_threads_priority_leaves_the_others_alone() {
        let before = own_nice();
        let (first, second, seen) = std::thread::spawn(|| {
            let first = lower_this_thread_priority(2).unwrap().unwrap();
            let second = lower_this_thread_priority(2).unwrap().unwrap();
            (first, second, own_nice())
        })
        .join()
        .unwrap();
        assert_eq!(second, (first + 2).min(19));
        assert_eq!(seen, second);
        assert_eq!(own_nice(), before, "only the calling thread changes");
    }

    #[test]
    fn the_sudo_command_names_this_program_by_its_absolute_path() {
        let said = sudo_command("service install --system");
        let exe = std::env::current_exe().unwrap().canonicalize().unwrap();
        assert_eq!(
            said,
            format!(
                "sudo {} service install --system",
                shell_word(exe.to_str().unwrap())
            )
        );
        assert_eq!(shell_word("/usr/bin/headroom"), "/usr/bin/headroom");
        assert_eq!(
            shell_word("/opt/my tools/headroom"),
            "'/opt/my tools/headroom'"
        );
        assert_eq!(shell_word("/opt/it's/headroom"), "'/opt/it'\\''s/headroom'");
    }
}
