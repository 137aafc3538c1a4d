//! The `sysctl({CTL_KERN, KERN_PROCARGS2, pid})` buffer into a process's
//! executable path, arguments and environment.
//!
//! Layout, from `sysctl_procargsx()` in XNU's `bsd/kern/kern_sysctl.c`:
//!
//! ```text
//! argc                  int, native endian (suword)
//! exec_path \0          the path given to execve, "executable_path=" stripped
//! \0 …                  padding to pointer alignment, 0 to 7 bytes
//! argv[0] \0 … argv[argc-1] \0
//! env[0] \0 … env[n] \0 the environment (left out for other users' hardened
//!                       processes), followed on some versions by the
//!                       loader's own key=value "apple" strings
//! ```
//!
//! The padding (`exec_extract_strings`, `bsd/kern/kern_exec.c`) brings the
//! strings to a multiple of 8 counted from the stripped 16-byte key, so
//! `argv[0]` begins at [`ARGV_ALIGN`] past the path's NUL. Only that many
//! NULs are padding: an empty `argv[0]` is one more, and skipping every NUL
//! would shift argv by one.
//!
//! A process with the `no-read-procargs` entitlement (macOS 26) gets a
//! synthetic buffer: argc 1, its path, two NULs, the path again. That exact
//! shape is read as `[exec_path]` ([`ProcArgs::saved_path`]).
//!
//! The parser never panics or reads past the buffer. A buffer cut short
//! gives what was complete ([`ProcArgs::complete`]), dropping a string cut
//! off (a truncated `-f kernel-….json` would name the wrong kernel). A
//! buffer the answer filled was copied from the area's tail
//! ([`parse_answer`]): argv is then one mark, `…[argv truncated: over 4096
//! bytes]` ([`ProcArgs::cut_at_front`]). What is kept is bounded by
//! [`ARGV_MAX_BYTES`] and [`ARGV_MAX_ARGS`], cut with a visible last element
//! ([`ArgvCap`]); the environment within the same bounds, without a mark.

use crate::model::{ARGV_MAX_ARGS, ARGV_MAX_BYTES, ArgvCap};

/// The pointer size of a 64-bit image: the strings before `argv[0]` are
/// padded to a multiple of it (`exec_extract_strings`, `new_ptr_size`).
pub const ARGV_ALIGN: usize = 8;

/// Bytes of `executable_path=`, the key the kernel saves before the path
/// and `sysctl_procargsx` strips (`EXECUTABLE_KEY`): a multiple of
/// [`ARGV_ALIGN`], so the padding can be counted from the path's start.
const EXECUTABLE_KEY_LEN: usize = "executable_path=".len();
const _: () = assert!(EXECUTABLE_KEY_LEN.is_multiple_of(ARGV_ALIGN));

/// What a `KERN_PROCARGS2` buffer holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcArgs {
    /// The argument count the kernel reported.
    pub argc: u32,
    /// The path passed to `execve` (may be relative, as the caller gave it).
    pub exec_path: String,
    /// The arguments found, within the caps; fewer than `argc` if the
    /// buffer ended early.
    pub argv: Vec<String>,
    /// The strings after the arguments, up to the first empty one, within
    /// the caps.
    pub env: Vec<String>,
    /// All `argc` arguments were present and NUL-terminated.
    pub complete: bool,
    /// The answer filled the whole buffer, so it may be the tail of a larger
    /// argument area: nothing but argc was read, and argv is one mark.
    pub cut_at_front: bool,
    /// The kernel's synthetic answer for a process with the
    /// `no-read-procargs` entitlement: argv is its saved exec path, not the
    /// arguments it was started with.
    pub saved_path: bool,
}

/// A buffer that is not a `KERN_PROCARGS2` answer at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProcArgsError {
    #[error("KERN_PROCARGS2 buffer of {0} bytes has no room for argc")]
    TooShort(usize),
    #[error("KERN_PROCARGS2 buffer says argc is {0}")]
    NegativeArgc(i32),
}

/// Split off one NUL-terminated string; `None` if no NUL is left.
fn take_string(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = data.iter().position(|&b| b == 0)?;
    Some((&data[..end], &data[end + 1..]))
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Parse the answer to a `KERN_PROCARGS2` sysctl made with a buffer of
/// `capacity` bytes. An answer that fills the buffer may hold only the tail
/// of the process's argument area (see the module documentation): only its
/// argc is read, and argv is the mark of a command line that was not read.
pub fn parse_answer(answer: &[u8], capacity: usize) -> Result<ProcArgs, ProcArgsError> {
    if answer.len() < capacity {
        return parse(answer);
    }
    let Some((head, _)) = answer.split_first_chunk::<4>() else {
        return Err(ProcArgsError::TooShort(answer.len()));
    };
    // argc is written by itself before the copied area, so it is right.
    let argc = i32::from_ne_bytes(*head);
    let argc = u32::try_from(argc).map_err(|_| ProcArgsError::NegativeArgc(argc))?;
    Ok(ProcArgs {
        argc,
        argv: ArgvCap::new().finish(true),
        cut_at_front: true,
        ..ProcArgs::default()
    })
}

/// The padding NULs after an exec path of `path_len` bytes: to the next
/// multiple of [`ARGV_ALIGN`] past its NUL, counted from the path's start.
fn padding_after(path_len: usize) -> usize {
    let used = path_len + 1;
    used.next_multiple_of(ARGV_ALIGN) - used
}

/// Parse a whole `KERN_PROCARGS2` argument area (an answer that did not
/// fill its buffer; see [`parse_answer`]).
pub fn parse(buf: &[u8]) -> Result<ProcArgs, ProcArgsError> {
    let Some((head, mut rest)) = buf.split_first_chunk::<4>() else {
        return Err(ProcArgsError::TooShort(buf.len()));
    };
    let argc = i32::from_ne_bytes(*head);
    let argc = u32::try_from(argc).map_err(|_| ProcArgsError::NegativeArgc(argc))?;
    let mut out = ProcArgs {
        argc,
        ..ProcArgs::default()
    };

    let Some((path, after)) = take_string(rest) else {
        // Cut inside the executable path: nothing whole to report.
        return Ok(out);
    };
    out.exec_path = lossy(path);
    // sysctl_procargs_no_read: path, two NULs, the path again, its NUL, end.
    if argc == 1
        && after
            .strip_prefix(b"\0")
            .and_then(|r| r.strip_prefix(path))
            .is_some_and(|r| r == b"\0")
    {
        let mut argv = ArgvCap::new();
        argv.push(path);
        out.argv = argv.finish(false);
        out.complete = true;
        out.saved_path = true;
        return Ok(out);
    }
    rest = after;
    // Alignment padding between the path and argv[0]: at most the bytes the
    // kernel pads with, and only NULs (a stack rewritten since exec may
    // hold something else there).
    let padding = rest
        .iter()
        .take(padding_after(path.len()))
        .take_while(|&&b| b == 0)
        .count();
    rest = &rest[padding..];

    // Each argument consumes exactly its terminator, so empty arguments
    // ("") survive as empty strings. Every argument is walked, so that the
    // mark of a cut command line gives its whole size.
    let mut argv = ArgvCap::new();
    let mut found = 0usize;
    while found < argc as usize {
        match take_string(rest) {
            Some((arg, after)) => {
                argv.push(arg);
                found += 1;
                rest = after;
            }
            None => {
                out.argv = argv.finish(false);
                return Ok(out);
            }
        }
    }
    out.argv = argv.finish(false);
    out.complete = true;

    let mut env_bytes = 0usize;
    while let Some((var, after)) = take_string(rest) {
        if var.is_empty() {
            break;
        }
        if var.len() >= ARGV_MAX_BYTES || out.env.len() >= ARGV_MAX_ARGS {
            break;
        }
        // Counted as the text kept (a byte that is not UTF-8 grows to three).
        let text = lossy(var);
        env_bytes = env_bytes.saturating_add(text.len() + 1);
        if env_bytes > ARGV_MAX_BYTES {
            break;
        }
        out.env.push(text);
        rest = after;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // No byte-for-byte KERN_PROCARGS2 answer from a Mac is published to
    // test against; the buffers are built from the kernel's layout
    // (`exec_extract_strings`, `sysctl_procargsx`), whose padding rule the
    // key-length assertion and `padding_after` pin, and the Mac-only
    // sampler tests read real answers.

    /// Lay out a buffer the way `sysctl_procargsx` returns it: argc, the
    /// exec path padded with NULs to an 8-byte boundary (the stack layout
    /// of a 64-bit process; the key the kernel strips before the path is 16
    /// bytes), argv, env, and the terminating empty string.
    fn buffer(argc: i32, exec_path: &str, argv: &[&str], env: &[&str]) -> Vec<u8> {
        let mut b = argc.to_ne_bytes().to_vec();
        b.extend_from_slice(exec_path.as_bytes());
        b.push(0);
        while !(EXECUTABLE_KEY_LEN + b.len() - 4).is_multiple_of(8) {
            b.push(0);
        }
        for s in argv.iter().chain(env) {
            b.extend_from_slice(s.as_bytes());
            b.push(0);
        }
        b.push(0);
        b
    }

    /// A Jupyter kernel started by Homebrew's Python: the framework stub
    /// re-executes the real interpreter inside Python.app, so the exec path
    /// is not argv[0] (that is why such kernels are named "Python").
    const PYTHON_APP: &str = "/opt/homebrew/Cellar/python@3.11/3.11.9/Frameworks/Python.framework/Versions/3.11/Resources/Python.app/Contents/MacOS/Python";
    const KERNEL_ARGV: [&str; 4] = [
        "/opt/homebrew/opt/python@3.11/bin/python3.11",
        "-m",
        "ipykernel_launcher",
        "-f=/Users/ann/Library/Jupyter/runtime/kernel-5f0c2d1e-7b1a-4c8e-9a57-3f2b8c1d9e60.json",
    ];

    #[test]
    fn a_jupyter_kernel_gives_path_argv_and_env() {
        let env = ["PATH=/opt/homebrew/bin:/usr/bin:/bin", "HOME=/Users/ann"];
        let buf = buffer(4, PYTHON_APP, &KERNEL_ARGV, &env);
        let p = parse(&buf).unwrap();
        assert_eq!(p.argc, 4);
        assert_eq!(p.exec_path, PYTHON_APP);
        assert_eq!(p.argv, KERNEL_ARGV);
        assert_eq!(p.env, env);
        assert!(p.complete);
    }

    #[test]
    fn hidden_environment_leaves_only_the_arguments() {
        // Other users' hardened processes: the kernel stops at argv.
        let mut buf = 2i32.to_ne_bytes().to_vec();
        buf.extend_from_slice(b"/usr/sbin/cfprefsd\0\0\0\0\0\0/usr/sbin/cfprefsd\0agent\0");
        let p = parse(&buf).unwrap();
        assert_eq!(p.exec_path, "/usr/sbin/cfprefsd");
        assert_eq!(p.argv, ["/usr/sbin/cfprefsd", "agent"]);
        assert!(p.env.is_empty());
        assert!(p.complete);
    }

    #[test]
    fn the_no_read_procargs_answer_is_path_twice() {
        // sysctl_procargs_no_read: snprintf("%s%c%c%s", path, 0, 0, path),
        // its NUL, nothing after.
        let mut buf = 1i32.to_ne_bytes().to_vec();
        buf.extend_from_slice(b"/usr/libexec/secured\0\0/usr/libexec/secured\0");
        let p = parse(&buf).unwrap();
        assert_eq!(p.exec_path, "/usr/libexec/secured");
        assert_eq!(p.argv, ["/usr/libexec/secured"]);
        assert!(p.complete && p.saved_path);
    }

    #[test]
    fn the_no_read_answer_is_recognised_where_padding_would_misread_it() {
        // A 15-byte path: its NUL ends an 8-byte word, so a real answer has
        // no padding and the second NUL would be an empty argv[0]. The
        // synthetic answer has the second NUL anyway.
        let path = "/usr/libexec/ab";
        assert_eq!(padding_after(path.len()), 0);
        let mut buf = 1i32.to_ne_bytes().to_vec();
        buf.extend_from_slice(format!("{path}\0\0{path}\0").as_bytes());
        let p = parse(&buf).unwrap();
        assert_eq!(p.argv, [path]);
        assert!(p.saved_path && p.env.is_empty());
    }

    #[test]
    fn an_empty_argv0_is_an_argument_not_padding() {
        // execve("/bin/sleep", ["", "5"], ["A=1"]): 10 path bytes and the
        // NUL take 11, padding to 16 adds 5; the sixth NUL is argv[0].
        let buf = buffer(2, "/bin/sleep", &["", "5"], &["A=1"]);
        let p = parse(&buf).unwrap();
        assert_eq!(p.argv, ["", "5"]);
        assert_eq!(p.env, ["A=1"]);
        assert!(p.complete && !p.saved_path);
        // Also where the path needs no padding at all (15 bytes + NUL).
        let buf = buffer(2, "/usr/bin/python", &["", "-V"], &["B=2"]);
        let p = parse(&buf).unwrap();
        assert_eq!(p.argv, ["", "-V"]);
        assert_eq!(p.env, ["B=2"]);
    }

    #[test]
    fn padding_ends_at_the_next_pointer_boundary() {
        // Counted from the path's first byte, NUL included.
        assert_eq!(padding_after(0), 7);
        assert_eq!(padding_after(7), 0);
        assert_eq!(padding_after(8), 7);
        assert_eq!(padding_after(10), 5);
        for len in 0..64 {
            assert!((len + 1 + padding_after(len)).is_multiple_of(ARGV_ALIGN));
            assert!(padding_after(len) < ARGV_ALIGN);
        }
    }

    #[test]
    fn a_filled_buffer_may_be_a_tail_and_gives_no_arguments() {
        // An argument area larger than the buffer: the kernel copies out
        // its END (environment and loader strings) after argc. Read as a
        // whole area, that would make "PATH=…" the executable and the next
        // strings argv.
        let mut tail = 3i32.to_ne_bytes().to_vec();
        tail.extend_from_slice(b"H=/Users/ann\0PATH=/usr/bin\0ptr_munge=\0main_stack=\0");
        let capacity = tail.len();
        let p = parse_answer(&tail, capacity).unwrap();
        assert!(p.cut_at_front && !p.complete);
        assert_eq!(p.argc, 3);
        assert_eq!(p.exec_path, "");
        assert_eq!(p.argv, ["…[argv truncated: over 4096 bytes]"]);
        assert!(p.env.is_empty());
        // The same bytes in a larger buffer are a whole (odd) area.
        let whole = parse_answer(&tail, capacity + 1).unwrap();
        assert!(!whole.cut_at_front);
        assert_eq!(whole.exec_path, "H=/Users/ann");
        assert_eq!(
            parse_answer(&[1, 0], 2),
            Err(ProcArgsError::TooShort(2)),
            "a filled buffer too short for argc"
        );
    }

    #[test]
    fn empty_arguments_are_kept() {
        let buf = buffer(4, "/usr/bin/python3", &["python3", "-c", "", "x"], &[]);
        let p = parse(&buf).unwrap();
        assert_eq!(p.argv, ["python3", "-c", "", "x"]);
        assert!(p.complete);
    }

    #[test]
    fn argc_zero_has_no_arguments_but_an_environment() {
        let buf = buffer(0, "/bin/sleep", &[], &["A=1"]);
        let p = parse(&buf).unwrap();
        assert!(p.argv.is_empty());
        assert_eq!(p.env, ["A=1"]);
        assert!(p.complete);
    }

    #[test]
    fn a_buffer_cut_inside_an_argument_keeps_the_whole_ones() {
        let full = buffer(4, PYTHON_APP, &KERNEL_ARGV, &[]);
        // Cut in the middle of the connection-file argument.
        let cut = full.len() - 20;
        let p = parse(&full[..cut]).unwrap();
        assert_eq!(p.argv, KERNEL_ARGV[..3]);
        assert!(!p.complete);
        assert!(p.env.is_empty());
    }

    #[test]
    fn a_buffer_cut_inside_the_exec_path_reports_nothing_but_argc() {
        let full = buffer(4, PYTHON_APP, &KERNEL_ARGV, &[]);
        let p = parse(&full[..30]).unwrap();
        assert_eq!(p.argc, 4);
        assert_eq!(p.exec_path, "");
        assert!(p.argv.is_empty());
        assert!(!p.complete);
    }

    #[test]
    fn more_arguments_than_the_cap_are_complete_and_marked() {
        // Found by fuzzing: more arguments than the cap, all present.
        let args = vec!["a"; 300];
        let buf = buffer(300, "/bin/ls", &args, &[]);
        let p = parse(&buf).unwrap();
        assert!(p.complete, "every argument was there");
        assert_eq!(p.argv.len(), ARGV_MAX_ARGS);
        assert!(
            p.argv
                .last()
                .unwrap()
                .starts_with(crate::model::ARGV_TRUNCATED)
        );
    }

    #[test]
    fn argc_larger_than_the_strings_is_incomplete() {
        let buf = buffer(9, "/bin/ls", &["ls", "-l"], &[]);
        let p = parse(&buf).unwrap();
        // The terminating empty string reads as one more (empty) argument.
        assert_eq!(p.argv, ["ls", "-l", ""]);
        assert!(!p.complete);
    }

    #[test]
    fn garbage_headers_are_errors_not_panics() {
        assert_eq!(parse(&[]), Err(ProcArgsError::TooShort(0)));
        assert_eq!(parse(&[1, 0, 0]), Err(ProcArgsError::TooShort(3)));
        let mut neg = (-1i32).to_ne_bytes().to_vec();
        neg.extend_from_slice(b"/bin/ls\0");
        assert_eq!(parse(&neg), Err(ProcArgsError::NegativeArgc(-1)));
        // argc alone.
        let p = parse(&3i32.to_ne_bytes()).unwrap();
        assert_eq!((p.argc, p.argv.len(), p.complete), (3, 0, false));
    }

    #[test]
    fn a_zero_filled_tail_ends_the_environment() {
        let mut buf = buffer(1, "/bin/zsh", &["-zsh"], &["TERM=xterm"]);
        buf.extend_from_slice(&[0; 64]);
        let p = parse(&buf).unwrap();
        assert_eq!(p.argv, ["-zsh"]);
        assert_eq!(p.env, ["TERM=xterm"]);
    }

    #[test]
    fn megabytes_of_arguments_are_kept_within_the_caps_and_marked() {
        let big = "x".repeat(500 << 10);
        let mut argv: Vec<&str> = KERNEL_ARGV.to_vec();
        argv.push(&big);
        argv.push(&big);
        let env_var = format!("A={big}");
        let buf = buffer(6, PYTHON_APP, &argv, &[&env_var, "B=1"]);
        let p = parse(&buf).unwrap();
        assert!(p.complete);
        assert_eq!(p.argv[..4], KERNEL_ARGV, "the front survives");
        let kept: usize = p.argv[..p.argv.len() - 1].iter().map(|a| a.len() + 1).sum();
        assert!(kept <= ARGV_MAX_BYTES, "{kept}");
        let total: usize = argv.iter().map(|a| a.len() + 1).sum();
        assert_eq!(
            p.argv.last().unwrap(),
            &format!("…[argv truncated: {total} bytes]")
        );
        assert!(p.env.is_empty(), "an oversized environment is not kept");
    }

    #[test]
    fn thousands_of_arguments_are_cut_at_the_count_cap() {
        let many = vec!["a"; 5000];
        let buf = buffer(5000, "/bin/echo", &many, &[]);
        let p = parse(&buf).unwrap();
        assert!(p.complete);
        assert_eq!(p.argv.len(), ARGV_MAX_ARGS);
        assert_eq!(p.argv.last().unwrap(), "…[argv truncated: 10000 bytes]");
    }

    #[test]
    fn invalid_utf8_is_replaced_not_rejected() {
        let mut buf = 1i32.to_ne_bytes().to_vec();
        buf.extend_from_slice(b"/tmp/caf\xe9\0\0/tmp/caf\xe9\0");
        let p = parse(&buf).unwrap();
        assert_eq!(p.argv, ["/tmp/caf\u{fffd}"]);
    }
}
