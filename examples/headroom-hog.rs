//! `headroom-hog`: a program that grows its memory on purpose, to try
//! headroom's rules on (and to test them with). It is a Cargo example, not
//! a binary of the package, so `cargo install` and the packages carry only
//! the daemon: `cargo run --release --example headroom-hog -- --max 2GiB`
//! runs it, `target/release/examples/headroom-hog` is the program.
//!
//! It allocates and touches memory (a write to every page, so it is really
//! resident) at a given rate up to a maximum, then holds it. It can catch
//! signals the way a Jupyter kernel does: by default a caught signal stops
//! the growth and the memory is kept (an interrupted cell); `--ignore` keeps
//! growing (a cell whose loop swallows KeyboardInterrupt); `--exit-on` exits.
//! With `--lock` (Linux, root) every page it touches stays in memory, never
//! swapped: a ballast that takes RAM away from everything else, to push
//! other processes into swap in tests and benchmarks. With `--thrash` it
//! writes again to the pages it already holds, one held block after each new
//! one while it grows and all of them in turn once grown (until a caught
//! signal stops it or `--hold` runs out): held beyond the memory left, its
//! pages go out to swap and come back in, over and over.
//! Every event is one line on stdout, flushed at once, for scripts and tests:
//!
//! ```text
//! child pid=4243                     (with --child)
//! forked pid=4250 at_ms=830         (with --fork, once grown, per child)
//! locked                             (with --lock)
//! ready pid=4242
//! allocated 67108864                 (every 64 MiB)
//! signal SIGINT footprint=104857600 at_ms=1520
//! holding 104857600                  (growth ended: --max reached or a signal)
//! rewritten 67108864                 (with --thrash, every 64 MiB written again)
//! allocation failed at 8589934592: memory allocation failed
//! done 104857600                     (--hold ran out; exit 0)
//! ```

#![deny(unsafe_code)]

use std::io::Write as _;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use headroom::config::{ByteSize, Rate, parse_duration, parse_rate, parse_size};
use headroom::os::{ffi::fork, residency};
use headroom::policy::SignalName;
use signal_hook::iterator::Signals;

/// Touch one byte in every 4 KiB: every page on 4 KiB and 16 KiB page systems.
const PAGE_STRIDE: usize = 4096;
/// Memory is allocated in blocks of this size.
const BLOCK: u64 = 1024 * 1024;
/// An `allocated` line every this many bytes.
const REPORT_EVERY: u64 = 64 * 1024 * 1024;

#[derive(Debug, Parser)]
#[command(
    name = "headroom-hog",
    version,
    about = "Grow memory on purpose, to try headroom's rules",
    long_about = "Allocates and touches memory (writes every page) at --rate up to --max, then \
                  holds it. Prints one line per event on stdout: `ready pid=N`, `allocated BYTES` \
                  every 64 MiB, `signal SIGINT footprint=BYTES at_ms=MS` for each caught signal, \
                  `holding BYTES` when growth ends, `done BYTES` when --hold runs out.\n\n\
                  A caught signal (--catch) stops the growth and keeps the memory, like an \
                  interrupted notebook cell; --ignore keeps growing, --exit-on exits 0. \
                  Signals not caught have their default action (SIGINT, SIGUSR1 and SIGTERM \
                  kill the process).\n\n\
                  Example: headroom-hog --rate 200MiB/s --max 2GiB --catch INT"
)]
struct Args {
    /// Growth rate, e.g. 200MiB/s or 1GiB/10s; `max` for as fast as possible.
    #[arg(long, default_value = "max", value_parser = parse_rate_arg, value_name = "RATE")]
    rate: Speed,
    /// Stop growing at this size, e.g. 2GiB.
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE")]
    max: ByteSize,
    /// Allocate this much at once before growing at --rate.
    #[arg(long, default_value = "0", value_parser = parse_size_arg, value_name = "SIZE")]
    start: ByteSize,
    /// Signals to catch (stop growing, keep the memory): INT,USR1,USR2,TERM.
    #[arg(long, value_delimiter = ',', value_parser = parse_signal_arg, value_name = "SIGNALS")]
    catch: Vec<SignalName>,
    /// Signals to catch and keep growing after.
    #[arg(long, value_delimiter = ',', value_parser = parse_signal_arg, value_name = "SIGNALS")]
    ignore: Vec<SignalName>,
    /// Signals to catch and exit 0 on.
    #[arg(long, value_delimiter = ',', value_parser = parse_signal_arg, value_name = "SIGNALS")]
    exit_on: Vec<SignalName>,
    /// Exit 0 this long after growth ends (default: hold until killed), e.g. 60s.
    #[arg(long, value_parser = parse_duration_arg, value_name = "DURATION")]
    hold: Option<Duration>,
    /// Start a child `sleep` in the hog's process group (for group signalling).
    #[arg(long)]
    child: bool,
    /// Keep every page in memory once touched (mlockall; Linux, as root):
    /// a ballast that is never swapped out.
    #[arg(long)]
    lock: bool,
    /// Keep writing to the pages already held, while growing and after: more
    /// than the memory left, they thrash in and out of swap.
    #[arg(long)]
    thrash: bool,
    /// Once grown, fork this many children that share the held memory
    /// copy-on-write (like `multiprocessing` fork workers) and wait.
    #[arg(long, default_value_t = 0, value_name = "N")]
    fork: u32,
    /// Each forked child writes to every held page at this rate, turning
    /// shared pages into copies of its own (copy-on-write growth that moves
    /// no RSS), e.g. 50MiB/s.
    #[arg(long, value_parser = parse_rate_arg, value_name = "RATE", requires = "fork")]
    fork_write: Option<Speed>,
}

/// `--rate`: a rate, or as fast as the machine allows.
#[derive(Debug, Clone, Copy)]
enum Speed {
    Max,
    Rate(Rate),
}

impl Speed {
    fn bytes_per_second(self) -> f64 {
        match self {
            Speed::Max => f64::INFINITY,
            Speed::Rate(rate) => rate.bytes_per_second(),
        }
    }
}

fn parse_rate_arg(s: &str) -> Result<Speed, String> {
    if s.trim().eq_ignore_ascii_case("max") {
        return Ok(Speed::Max);
    }
    parse_rate(s).map(Speed::Rate).map_err(|e| e.to_string())
}

fn parse_size_arg(s: &str) -> Result<ByteSize, String> {
    parse_size(s).map_err(|e| e.to_string())
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn parse_signal_arg(s: &str) -> Result<SignalName, String> {
    match SignalName::parse(s) {
        Some(SignalName::Kill) => Err("SIGKILL cannot be caught".into()),
        Some(sig) => Ok(sig),
        None => Err(format!("unknown signal {s:?}; use INT, USR1, USR2 or TERM")),
    }
}

/// Print one line and flush it; a closed stdout ends the program quietly.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}

/// What a caught signal does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnSignal {
    Stop,
    Ignore,
    Exit,
}

/// State shared with the signal thread.
struct Shared {
    began: Instant,
    allocated: AtomicU64,
    stop: AtomicBool,
    child: Mutex<Option<Child>>,
}

impl Shared {
    fn exit(&self, code: i32) -> ! {
        if let Ok(mut child) = self.child.lock()
            && let Some(child) = child.as_mut()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
        std::process::exit(code)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut actions: Vec<(SignalName, OnSignal)> = Vec::new();
    for (list, what) in [
        (&args.catch, OnSignal::Stop),
        (&args.ignore, OnSignal::Ignore),
        (&args.exit_on, OnSignal::Exit),
    ] {
        for &sig in list {
            if let Some(&(_, before)) = actions.iter().find(|(s, _)| *s == sig) {
                if before != what {
                    eprintln!(
                        "headroom-hog: {sig} is given to more than one of --catch, --ignore, --exit-on"
                    );
                    return ExitCode::from(2);
                }
                continue;
            }
            actions.push((sig, what));
        }
    }

    let shared = Arc::new(Shared {
        began: Instant::now(),
        allocated: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        child: Mutex::new(None),
    });

    if !actions.is_empty() {
        let numbers: Vec<i32> = actions.iter().map(|(s, _)| s.number()).collect();
        let mut signals = match Signals::new(&numbers) {
            Ok(signals) => signals,
            Err(e) => {
                eprintln!("headroom-hog: cannot install signal handlers: {e}");
                return ExitCode::from(1);
            }
        };
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            for number in signals.forever() {
                let Some(&(sig, what)) = actions.iter().find(|(s, _)| s.number() == number) else {
                    continue;
                };
                // Stop before the footprint is read: read first, a thread
                // preempted between the two would let the growth run on past
                // the figure it printed. Stopped first, at most the block
                // being touched is added after it.
                if what == OnSignal::Stop {
                    shared.stop.store(true, Ordering::SeqCst);
                }
                say(&format!(
                    "signal {sig} footprint={} at_ms={}",
                    shared.allocated.load(Ordering::SeqCst),
                    shared.began.elapsed().as_millis()
                ));
                if what == OnSignal::Exit {
                    shared.exit(0);
                }
            }
        });
    }

    if args.child {
        // Inherits the hog's process group: a group signal reaches it.
        match Command::new("sleep")
            .arg("86400")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
        {
            Ok(child) => {
                say(&format!("child pid={}", child.id()));
                if let Ok(mut slot) = shared.child.lock() {
                    *slot = Some(child);
                }
            }
            Err(e) => {
                eprintln!("headroom-hog: cannot start the child `sleep`: {e}");
                return ExitCode::from(1);
            }
        }
    }

    if args.lock {
        match residency::lock_memory() {
            residency::Locked::All => say("locked"),
            residency::Locked::Skipped(why) => {
                eprintln!("headroom-hog: --lock: {why}");
                return ExitCode::from(1);
            }
        }
    }

    say(&format!("ready pid={}", std::process::id()));
    let mut rewrites = Rewrites::default();
    let mut held = grow(&args, &shared, &mut rewrites);
    say(&format!(
        "holding {}",
        shared.allocated.load(Ordering::SeqCst)
    ));
    for _ in 0..args.fork {
        let rate = args.fork_write.map(Speed::bytes_per_second);
        match fork::fork_sharer(&mut held, rate) {
            Ok(pid) => say(&format!(
                "forked pid={pid} at_ms={}",
                shared.began.elapsed().as_millis()
            )),
            Err(e) => {
                eprintln!("headroom-hog: --fork: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let until = args.hold.map(|hold| Instant::now() + hold);
    if args.thrash {
        // Every held block in turn, until stopped or --hold runs out.
        let mut next = 0;
        while !held.is_empty()
            && !shared.stop.load(Ordering::SeqCst)
            && until.is_none_or(|t| Instant::now() < t)
        {
            rewrites.rewrite(&mut held, next);
            next = (next + 1) % held.len();
        }
    }
    match until {
        Some(until) => {
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            say(&format!("done {}", shared.allocated.load(Ordering::SeqCst)));
            drop(held);
            shared.exit(0)
        }
        None => loop {
            std::thread::sleep(Duration::from_secs(3600));
            std::hint::black_box(&held);
        },
    }
}

/// Writes again to blocks already held (`--thrash`), counting the bytes.
#[derive(Default)]
struct Rewrites {
    bytes: u64,
    next_report: u64,
}

impl Rewrites {
    /// Write every page of `blocks[i]` again, and say so every 64 MiB.
    fn rewrite(&mut self, blocks: &mut [Vec<u8>], i: usize) {
        let Some(block) = blocks.get_mut(i) else {
            return;
        };
        for page in (0..block.len()).step_by(PAGE_STRIDE) {
            block[page] = block[page].wrapping_add(1);
        }
        std::hint::black_box(&block);
        self.bytes += block.len() as u64;
        if self.bytes >= self.next_report + REPORT_EVERY {
            self.next_report = self.bytes - self.bytes % REPORT_EVERY;
            say(&format!("rewritten {}", self.next_report));
        }
    }
}

/// Allocate and touch blocks until --max, a stopping signal, or a failed
/// allocation; the blocks are returned to be held. With --thrash, one held
/// block is written again after each new one.
fn grow(args: &Args, shared: &Shared, rewrites: &mut Rewrites) -> Vec<Vec<u8>> {
    let max = args.max.bytes();
    let start = args.start.bytes().min(max);
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    let mut allocated: u64 = 0;
    let mut next_report = REPORT_EVERY;
    let growth_began = Instant::now();
    while allocated < max && !shared.stop.load(Ordering::SeqCst) {
        let due = match args.rate {
            _ if allocated < start => start,
            Speed::Max => max,
            Speed::Rate(rate) => {
                let grown = rate.bytes_per_second() * growth_began.elapsed().as_secs_f64();
                start.saturating_add(grown as u64).min(max)
            }
        };
        if allocated >= due {
            // Wait for the next block to fall due, checking for signals.
            let per_block = BLOCK as f64 / args.rate.bytes_per_second();
            let wait = Duration::from_secs_f64(per_block.clamp(0.001, 0.05));
            std::thread::sleep(wait);
            continue;
        }
        let size = (max - allocated).min(BLOCK) as usize;
        match touched_block(size) {
            Ok(block) => blocks.push(block),
            Err(e) => {
                say(&format!("allocation failed at {allocated}: {e}"));
                break;
            }
        }
        if args.thrash && blocks.len() > 1 {
            // The held blocks before this one, in turn.
            let older = blocks.len() - 1;
            rewrites.rewrite(&mut blocks, (allocated / BLOCK) as usize % older);
        }
        allocated += size as u64;
        shared.allocated.store(allocated, Ordering::SeqCst);
        if allocated >= next_report {
            say(&format!("allocated {allocated}"));
            next_report += REPORT_EVERY;
        }
    }
    blocks
}

/// A block of `size` bytes with every page written.
fn touched_block(size: usize) -> Result<Vec<u8>, std::collections::TryReserveError> {
    const ZEROS: [u8; PAGE_STRIDE] = [0; PAGE_STRIDE];
    let mut block: Vec<u8> = Vec::new();
    block.try_reserve_exact(size)?;
    // A page at a time (a copy, also in a debug build, where `resize`
    // writes byte by byte: many GiB of ballast took minutes).
    while block.len() < size {
        let n = (size - block.len()).min(PAGE_STRIDE);
        block.extend_from_slice(&ZEROS[..n]);
    }
    for i in (0..size).step_by(PAGE_STRIDE) {
        block[i] = 0xA5;
    }
    // Keep the writes: the block is never read, and must not be optimised away.
    Ok(std::hint::black_box(block))
}
