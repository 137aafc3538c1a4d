//! `headroom top`: a live view of memory, pressure, GPUs, jobs, ML
//! processes and rule states in the terminal, refreshed at the sampling
//! interval, sortable and filterable from the keyboard.
//!
//! The figures come from the running daemon's API at `--address` (or
//! `http.listen` of the config), through the client that asks nothing of a
//! port another user holds. Where no daemon answers at the default address,
//! or with `--local`, this machine is sampled here instead, and the view
//! says so. A daemon that stops answering later keeps its last figures on
//! the screen, with since when it is silent, and is asked again every
//! interval.
//!
//! `feed.rs` fetches (on a thread of its own, so keys never wait for the
//! network), `view.rs` turns figures and keys into the screen's text (pure,
//! tested without a terminal), `draw.rs` lays it out with ratatui,
//! `terminal.rs` takes the terminal and gives it back on every way out.

mod draw;
mod feed;
mod terminal;
mod view;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::daemon_client::{DaemonClient, GetError};
use super::{CliError, load_config};
use crate::model::Timestamp;
use feed::{DaemonSource, LocalSource, Source};
pub use view::SortKey;
use view::{Flow, Key, Link, Origin, ViewState};

/// The shortest refresh interval `--interval` takes.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// How long the loop waits for a key before looking for new figures.
const KEY_POLL: Duration = Duration::from_millis(100);

/// What `headroom top` was asked.
#[derive(Debug, Clone)]
pub struct TopArgs {
    pub address: Option<SocketAddr>,
    pub config: Option<PathBuf>,
    pub local: bool,
    pub interval: Option<Duration>,
    pub sort: SortKey,
}

/// Run `headroom top` until q, Esc, Ctrl-C, SIGINT, SIGTERM or SIGHUP.
pub fn run(args: TopArgs) -> Result<(), CliError> {
    if let Some(i) = args.interval
        && i < MIN_INTERVAL
    {
        return Err(CliError::Usage(format!(
            "--interval {} is too short: at least {} (the figures change no faster than the \
             daemon samples)",
            humantime::format_duration(i),
            humantime::format_duration(MIN_INTERVAL)
        )));
    }
    let config = load_config(args.config.as_deref())?;
    terminal::require().map_err(CliError::Runtime)?;
    let (mut source, origin, interval) = choose_source(&args, config)?;
    let mut link = Link::new(origin, interval);
    // The first figures before the terminal is taken: an error that ends
    // the command is then printed on a normal screen.
    link.update(source.refresh(), Timestamp::now());

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| CliError::Runtime(format!("cannot handle signal {signal}: {e}")))?;
    }

    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("headroom-top-feed".into())
        .spawn(move || {
            loop {
                let started = Instant::now();
                std::thread::sleep(interval.saturating_sub(started.elapsed()));
                if tx.send(source.refresh()).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| CliError::Runtime(format!("cannot start the refresh thread: {e}")))?;

    let mut screen = terminal::RawTerminal::enter().map_err(CliError::Runtime)?;
    terminal::watch_for_hangup(Arc::clone(&stop)).map_err(CliError::Runtime)?;
    let mut state = ViewState {
        sort: args.sort,
        ..ViewState::default()
    };
    let mut page = 1;
    let mut dirty = true;
    loop {
        loop {
            match rx.try_recv() {
                Ok(outcome) => {
                    link.update(outcome, Timestamp::now());
                    dirty = true;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    return Err(CliError::Runtime("the refresh thread stopped".into()));
                }
            }
        }
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if dirty {
            let shown = view::screen(&link, &state, Timestamp::now());
            screen
                .terminal
                .draw(|frame| {
                    let (fits, scroll) = draw::draw(frame, &shown, state.scroll);
                    page = fits;
                    state.scroll = scroll;
                })
                .map_err(|e| CliError::Runtime(format!("cannot draw on the terminal: {e}")))?;
            dirty = false;
        }
        if terminal::lost() {
            return Err(CliError::Runtime(
                "the terminal went away (hung up or closed)".into(),
            ));
        }
        let ready = event::poll(KEY_POLL)
            .map_err(|e| CliError::Runtime(format!("cannot read the terminal: {e}")))?;
        if !ready {
            continue;
        }
        match event::read()
            .map_err(|e| CliError::Runtime(format!("cannot read the terminal: {e}")))?
        {
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                if let Some(key) = key_of(k) {
                    if state.on_key(key, page) == Flow::Quit {
                        return Ok(());
                    }
                    dirty = true;
                }
            }
            Event::Resize(..) => dirty = true,
            _ => {}
        }
    }
}

/// The daemon at the address, or this machine; and the refresh interval.
fn choose_source(
    args: &TopArgs,
    config: crate::config::Config,
) -> Result<(Source, Origin, Duration), CliError> {
    let local = |config, why: Option<String>| {
        let source = LocalSource::new(config);
        let interval = args.interval.unwrap_or_else(|| source.interval());
        (
            Source::Local(Box::new(source)),
            Origin::Local { why },
            interval,
        )
    };
    if args.local {
        return Ok(local(config, None));
    }
    let client = DaemonClient::new(args.address.unwrap_or(config.http.listen));
    let addr = client.addr();
    match client.get("/healthz") {
        Ok(_) => {}
        // Nobody there: this machine instead, unless that daemon was asked
        // for by name (it may be starting, or on its way back).
        Err(GetError::NoAnswer { .. }) if args.address.is_none() => {
            let why = format!("no daemon at {addr}: sampled here, rules in dry run");
            eprintln!(
                "headroom top: no headroom daemon answers at {addr}; showing this machine \
                 sampled here, its rules judged in dry run (start one with `headroom run`, \
                 or pass --address ADDR:PORT)"
            );
            return Ok(local(config, Some(why)));
        }
        Err(GetError::NoAnswer { .. }) => {}
        // Another user's program on the port: nothing asked of it, and no
        // falling back (the daemon may be elsewhere).
        Err(e) => return Err(CliError::Runtime(e.to_string())),
    }
    let mut source = DaemonSource::new(client);
    let interval = args.interval.unwrap_or_else(|| {
        source
            .settings()
            .ok()
            .and_then(|s| s.interval)
            .unwrap_or(config.daemon.interval)
            .max(MIN_INTERVAL)
    });
    Ok((
        Source::Daemon(Box::new(source)),
        Origin::Daemon(addr),
        interval,
    ))
}

/// The view's name for a key press.
fn key_of(k: KeyEvent) -> Option<Key> {
    Some(match k.code {
        KeyCode::Char(c) if k.modifiers.contains(KeyModifiers::CONTROL) => {
            Key::Ctrl(c.to_ascii_lowercase())
        }
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Esc => Key::Esc,
        KeyCode::Enter => Key::Enter,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::F(n) => Key::F(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_c_is_ctrl_and_plain_letters_are_letters() {
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(key_of(ctrl_c), Some(Key::Ctrl('c')));
        let s = KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE);
        assert_eq!(key_of(s), Some(Key::Char('s')));
        let f6 = KeyEvent::new(KeyCode::F(6), KeyModifiers::NONE);
        assert_eq!(key_of(f6), Some(Key::F(6)));
        let tab = KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE);
        assert_eq!(key_of(tab), None);
    }
}
