//! The terminal `headroom top` draws on: raw mode and the alternate screen
//! while it runs, and the terminal as it was afterwards, however it ends:
//! a return, an error ([`Screen`]'s `Drop`) or a panic (a hook that restores
//! the terminal before the panic's message is printed, so the message is
//! readable and the shell usable).

use std::io::{self, IsTerminal as _, Stdout};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::Show;
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

/// The terminal while `top` runs; restored when dropped.
pub struct Screen {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

/// Undo what [`Screen::enter`] did; safe to call more than once.
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

impl Screen {
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

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}
