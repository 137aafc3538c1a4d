//! The `sysctl({CTL_KERN, KERN_PROCARGS2, pid})` buffer into a process's
//! executable path, arguments and environment.
//!
//! Layout, from `sysctl_procargsx()` in XNU's `bsd/kern/kern_sysctl.c`:
//!
//! ```text
//! argc                  int, native endian (suword)
//! exec_path \0          the path given to execve, "executable_path=" stripped
//! \0 \0 …               padding to pointer alignment
//! argv[0] \0 … argv[argc-1] \0
//! env[0] \0 … env[n] \0 the environment (left out for other users' hardened
//!                       processes), followed on some versions by the
//!                       loader's own key=value "apple" strings
//! ```
//!
//! A process opted out with the `no-read-procargs` entitlement gets a
//! synthetic buffer (`sysctl_procargs_no_read`): argc 1, its exec path, one
//! NUL, and the exec path again as argv[0].
//!
//! The parser never panics and never reads past the buffer. A buffer cut
//! short (a process rewriting its arguments, a racing exec) gives what was
//! complete and says so in [`ProcArgs::complete`]; a string cut off by the
//! end of the buffer is dropped rather than passed on half, since a
//! truncated `-f kernel-….json` would name the wrong kernel.
//!
//! What is kept is bounded whatever the process holds (up to `kern.argmax`,
//! 1 MiB): the arguments within [`ARGV_MAX_BYTES`] and [`ARGV_MAX_ARGS`],
//! cut with a visible last element `…[argv truncated: N bytes]` (see
//! [`ArgvCap`]); the environment within the same bounds, cut without a mark
//! (no one shows it).

use crate::model::{ARGV_MAX_ARGS, ARGV_MAX_BYTES, ArgvCap};

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

/// Parse a `KERN_PROCARGS2` buffer.
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
    rest = after;
    // Alignment padding between the path and argv[0].
    let padding = rest.iter().take_while(|&&b| b == 0).count();
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

    /// Lay out a buffer the way `sysctl_procargsx` returns it: argc, the
    /// exec path padded with NULs to an 8-byte boundary (the stack layout
    /// of a 64-bit process), argv, env, and the terminating empty string.
    fn buffer(argc: i32, exec_path: &str, argv: &[&str], env: &[&str]) -> Vec<u8> {
        let mut b = argc.to_ne_bytes().to_vec();
        b.extend_from_slice(exec_path.as_bytes());
        b.push(0);
        while !(b.len() - 4).is_multiple_of(8) {
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
        // sysctl_procargs_no_read: snprintf("%s%c%c%s", path, 0, 0, path).
        let mut buf = 1i32.to_ne_bytes().to_vec();
        buf.extend_from_slice(b"/usr/libexec/secured\0\0/usr/libexec/secured\0");
        let p = parse(&buf).unwrap();
        assert_eq!(p.exec_path, "/usr/libexec/secured");
        assert_eq!(p.argv, ["/usr/libexec/secured"]);
        assert!(p.complete);
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
