//! The terminal `headroom top` draws on: raw mode and the alternate screen
//! while it runs, and the terminal as it was afterwards, however it ends:
//! a return, an error ([`RawTerminal`]'s `Drop`) or a panic (a hook that restores
//! the terminal before the panic's message is printed, so the message is
//! readable and the shell usable).
//!
//! A terminal can also go away under it: an SSH connection drops, a tmux
//! server is killed. Reading such a terminal returns end-of-file at once,
//! and the key reader would retry without end, a core's worth of CPU, never
//! coming back to see the SIGHUP. A watchdog thread ends the process in
//! that case ([`watch_for_hangup`]).

use std::io::{self, IsTerminal as _, Stdout, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::Show;
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

/// The terminal while `top` runs; restored when dropped.
pub struct RawTerminal {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

/// Undo what [`RawTerminal::enter`] did; safe to call more than once.
fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, Show);
}

/// Fails, saying what to use instead, where stdin or stdout is not a
/// terminal.
pub fn require() -> Result<(), String> {
    if io::stdout().is_terminal() && io::stdin().is_terminal() {
        return Ok(());
    }
    Err(
        "headroom top needs a terminal on stdin and stdout; for output to a pipe or a \
         file use `headroom status --watch` (or `headroom status --json`)"
            .into(),
    )
}

impl RawTerminal {
    /// Take over the terminal ([`require`] first).
    pub fn enter() -> Result<Self, String> {
        require()?;
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        let entered = enable_raw_mode()
            .and_then(|()| execute!(io::stdout(), EnterAlternateScreen))
            .and_then(|()| Terminal::new(CrosstermBackend::new(io::stdout())));
        match entered {
            Ok(terminal) => Ok(Self { terminal }),
            Err(e) => {
                restore();
                Err(format!("cannot set up the terminal: {e}"))
            }
        }
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        restore();
    }
}

/// Whether the terminal on stdin is gone: a hung-up terminal answers no
/// terminal request, so it no longer reads as one.
pub fn lost() -> bool {
    !io::stdin().is_terminal()
}

/// How often the watchdog looks, and how long it leaves the loop to end on
/// its own once it should.
const WATCHDOG_TICK: Duration = Duration::from_millis(250);
const WATCHDOG_GRACE: Duration = Duration::from_millis(750);

/// Start a thread that ends the process when the terminal is gone or a stop
/// signal (SIGINT, SIGTERM, SIGHUP: `stop`) has not ended the loop within
/// [`WATCHDOG_GRACE`], as happens while the key reader spins on a hung-up
/// terminal. It gives back what it can of the terminal first. Exit status
/// 0 after a signal, 1 when the terminal went away.
pub fn watch_for_hangup(stop: Arc<AtomicBool>) -> Result<(), String> {
    std::thread::Builder::new()
        .name("headroom-top-watchdog".into())
        .spawn(move || {
            loop {
                std::thread::sleep(WATCHDOG_TICK);
                let gone = lost();
                if gone || stop.load(Ordering::Relaxed) {
                    std::thread::sleep(WATCHDOG_GRACE);
                    restore();
                    if gone {
                        // Not eprintln!: stderr is often that very terminal,
                        // and a failed write must not end this thread.
                        let _ = writeln!(
                            io::stderr(),
                            "headroom top: the terminal went away (hung up or closed)"
                        );
                    }
                    std::process::exit(i32::from(gone));
                }
            }
        })
        .map(drop)
        .map_err(|e| format!("cannot start the terminal watchdog: {e}"))
}
