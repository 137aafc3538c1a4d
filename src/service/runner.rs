//! How a plan's commands are run: [`Runner`] runs one command to its end
//! and hands back its exit status and output ([`Ran`]), sleeps, and tells
//! the time. [`SystemRunner`] does it for real; the tests drive the same
//! sequences with a runner that replays recorded `launchctl` answers and
//! whose clock moves only when it sleeps.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A command run to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// The exit status; `None` if it did not start or a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    /// What it wrote to stderr; where it did not start, why.
    pub stderr: String,
}

impl Ran {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// The status and the first line of stderr (or stdout), for a message:
    /// `exit 5: Bootstrap failed: 5: Input/output error`.
    pub fn summary(&self) -> String {
        let status = match self.code {
            Some(c) => format!("exit {c}"),
            None => "did not run to its end".to_owned(),
        };
        let said = [&self.stderr, &self.stdout]
            .into_iter()
            .flat_map(|t| t.lines())
            .map(str::trim)
            .find(|l| !l.is_empty());
        match said {
            Some(line) => format!("{status}: {}", crate::report::printable(line)),
            None => status,
        }
    }
}

/// Runs commands, sleeps and tells the time for a plan being carried out.
pub trait Runner {
    /// Run `argv` (program and arguments) to its end.
    fn run(&mut self, argv: &[String]) -> Ran;
    /// Wait `d`.
    fn sleep(&mut self, d: Duration);
    /// Time since some fixed start, monotonic.
    fn now(&mut self) -> Duration;
}

/// The real thing: commands through `std::process`, stdin inherited and
/// stdout/stderr captured (and echoed to stderr by the caller that shows
/// them), `thread::sleep`, `Instant`.
#[derive(Debug)]
pub struct SystemRunner {
    start: Instant,
}

impl SystemRunner {
    pub fn new() -> SystemRunner {
        SystemRunner {
            start: Instant::now(),
        }
    }
}

impl Default for SystemRunner {
    fn default() -> Self {
        SystemRunner::new()
    }
}

impl Runner for SystemRunner {
    fn run(&mut self, argv: &[String]) -> Ran {
        let Some((program, args)) = argv.split_first() else {
            return Ran {
                code: Some(0),
                stdout: String::new(),
                stderr: String::new(),
            };
        };
        match Command::new(program)
            .args(args)
            .stdin(Stdio::inherit())
            .output()
        {
            Ok(out) => Ran {
                code: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            },
            Err(e) => Ran {
                code: None,
                stdout: String::new(),
                stderr: format!("cannot run {program}: {e}"),
            },
        }
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }

    fn now(&mut self) -> Duration {
        self.start.elapsed()
    }
}

#[cfg(test)]
pub(crate) mod replay {
    //! A runner that replays recorded answers: each command is matched, in
    //! order, against the script, and the clock moves only when the code
    //! under test sleeps.

    use std::collections::VecDeque;
    use std::time::Duration;

    use super::{Ran, Runner};

    /// One recorded answer: the command it answers (its words, joined by
    /// spaces) and what it returned.
    #[derive(Debug, Clone)]
    pub struct Answer {
        pub command: String,
        pub ran: Ran,
    }

    pub fn answer(command: &str, code: i32, stdout: &str, stderr: &str) -> Answer {
        Answer {
            command: command.to_owned(),
            ran: Ran {
                code: Some(code),
                stdout: stdout.to_owned(),
                stderr: stderr.to_owned(),
            },
        }
    }

    #[derive(Debug, Default)]
    pub struct Replay {
        script: VecDeque<Answer>,
        /// Every command run, in order.
        pub ran: Vec<String>,
        /// Every sleep, in order.
        pub slept: Vec<Duration>,
        clock: Duration,
    }

    impl Replay {
        pub fn new(script: Vec<Answer>) -> Replay {
            Replay {
                script: script.into(),
                ..Replay::default()
            }
        }

        /// Whether every recorded answer was asked for.
        pub fn finished(&self) -> bool {
            self.script.is_empty()
        }
    }

    impl Runner for Replay {
        fn run(&mut self, argv: &[String]) -> Ran {
            let command = argv.join(" ");
            self.ran.push(command.clone());
            let next = self
                .script
                .pop_front()
                .unwrap_or_else(|| panic!("no recorded answer left for `{command}`"));
            assert_eq!(next.command, command, "commands run out of order");
            next.ran
        }

        fn sleep(&mut self, d: Duration) {
            self.slept.push(d);
            self.clock += d;
        }

        fn now(&mut self) -> Duration {
            self.clock
        }
    }
}
