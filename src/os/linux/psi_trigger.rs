//! Linux PSI triggers: the kernel wakes us when memory stalls cross a
//! threshold, so the daemon samples at once instead of waiting for its tick.
//!
//! Protocol (kernel Documentation/accounting/psi.rst, "Monitoring for
//! pressure thresholds"): open `/proc/pressure/memory` read-write, write
//! `"some <stall µs> <window µs>"`, then poll the descriptor for POLLPRI. The
//! kernel signals at most once per window while the stall lasts. Unprivileged
//! users may only use windows that are multiples of 2 s, so a 2 s window with
//! the same ratio is tried after the 1 s one.
//!
//! A wake is believed only if the file's own `some total=` (microseconds of
//! stall, read fresh on each read) grew by at least the trigger's threshold
//! since the trigger was registered or last believed. The kernel can wake a
//! new 2 s trigger with no stall at all: seen on Linux 6.18 in a process
//! without `CAP_SYS_RESOURCE`, POLLPRI 0.34 s after registration while the
//! total stayed the same (the trigger's window starts from a total the
//! 2 s triggers do not use). Believed, such a wake would report a calm
//! machine at `warn` and set off `pressure` rules.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::ffi::psi;

/// Triggers to try, in order: 150 ms of stall in any 1 s window, then the
/// same share over 2 s for processes without CAP_SYS_RESOURCE.
pub const TRIGGERS: [&str; 2] = ["some 150000 1000000", "some 300000 2000000"];

/// The pressure level a trigger firing stands for, on the sample it wakes.
///
/// Either trigger fires once some task has been stalled on memory for 15 %
/// of the window, a rate above the `some avg10` warn threshold
/// ([`crate::os::linux::parse::procfs::PSI_SOME_WARN`], 10 %). The level a sample
/// derives from `avg10` lags that: the kernel updates the averages every
/// 2 s and `avg10` decays over 10 s, so after one second at 15 % it reads
/// about 1.5 %. Without this, a `pressure = "warn"` rule would be evaluated
/// on the woken sample as if nothing had happened.
pub const TRIGGER_LEVEL: crate::model::PressureLevel = crate::model::PressureLevel::Warn;

/// Why no trigger could be registered.
#[derive(Debug, thiserror::Error)]
#[error("cannot register a PSI trigger on {path} (tried {tried}): {source}")]
pub struct TriggerError {
    pub path: PathBuf,
    pub tried: String,
    #[source]
    pub source: io::Error,
}

/// A registered trigger, waited on through tokio's reactor.
pub struct PsiTrigger {
    fd: AsyncFd<File>,
    spec: &'static str,
    path: PathBuf,
    /// The file's `some total=` when registered or last believed.
    believed_total: Option<u64>,
    /// Wakes not believed, for the log.
    spurious: u64,
}

impl PsiTrigger {
    /// Register the first trigger the kernel accepts. Must be called inside a
    /// tokio runtime.
    pub fn register(path: &Path) -> Result<Self, TriggerError> {
        let mut last_err = None;
        for spec in TRIGGERS {
            match open_trigger(path, spec) {
                Ok(file) => match psi::watch_priority(file) {
                    Ok(fd) => {
                        return Ok(Self {
                            fd,
                            spec,
                            path: path.to_path_buf(),
                            believed_total: some_total(path),
                            spurious: 0,
                        });
                    }
                    Err(e) => last_err = Some(e),
                },
                Err(e) => last_err = Some(e),
            }
        }
        Err(TriggerError {
            path: path.to_path_buf(),
            tried: TRIGGERS.map(|t| format!("\"{t}\"")).join(", "),
            source: last_err.unwrap_or_else(|| io::Error::other("no trigger to try")),
        })
    }

    /// The trigger the kernel accepted.
    pub fn spec(&self) -> &'static str {
        self.spec
    }

    /// Wait until the kernel reports the threshold crossed and the stall
    /// total shows it (see the module doc).
    pub async fn wait(&mut self) -> io::Result<()> {
        loop {
            let mut guard = self.fd.ready(Interest::PRIORITY).await?;
            if guard.ready().is_error() {
                return Err(io::Error::other(
                    "the kernel closed the PSI trigger (the pressure file went away)",
                ));
            }
            guard.clear_ready();
            let now = some_total(&self.path);
            if stalled_enough(self.believed_total, now, threshold_micros(self.spec)) {
                self.believed_total = now;
                return Ok(());
            }
            self.spurious += 1;
            tracing::debug!(
                "PSI trigger woke without memory stall (total {now:?} µs, {} such wakes): ignored",
                self.spurious
            );
        }
    }

    /// Wakes ignored because the stall total had not grown.
    pub fn spurious_wakes(&self) -> u64 {
        self.spurious
    }
}

/// `some total=` of the pressure file at `path`: microseconds of stall
/// since boot; `None` if it cannot be read.
fn some_total(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    crate::os::linux::parse::procfs::parse_psi(&text).map(|p| p.some.total_micros)
}

/// The stall a trigger's spec asks for (`some <stall µs> <window µs>`).
fn threshold_micros(spec: &str) -> u64 {
    spec.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Whether a wake is believed: the stall total grew by `threshold` since
/// `before`. Where either total is unknown the wake cannot be checked and is
/// believed, as the kernel meant it.
fn stalled_enough(before: Option<u64>, now: Option<u64>, threshold: u64) -> bool {
    match (before, now) {
        (Some(before), Some(now)) => now.saturating_sub(before) >= threshold,
        _ => true,
    }
}

fn open_trigger(path: &Path, spec: &str) -> io::Result<File> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    // The kernel parses the string with sscanf; the NUL ends it as in the
    // documentation's example.
    let mut bytes = spec.as_bytes().to_vec();
    bytes.push(0);
    file.write_all(&bytes)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_pressure_file_names_the_path_and_the_triggers() {
        let err = PsiTrigger::register(Path::new("/nonexistent/pressure/memory"))
            .err()
            .map(|e| e.to_string());
        let msg = err.unwrap_or_default();
        assert!(msg.contains("/nonexistent/pressure/memory"), "{msg}");
        assert!(msg.contains("\"some 150000 1000000\""), "{msg}");
        assert!(msg.contains("No such file"), "{msg}");
    }

    #[tokio::test]
    async fn a_file_that_is_not_a_pressure_file_is_rejected() {
        // Regular files accept the write but cannot be polled by epoll.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory");
        std::fs::write(&path, "").unwrap();
        assert!(PsiTrigger::register(&path).is_err());
    }

    #[test]
    fn a_wake_is_believed_only_with_the_stall_it_asks_for() {
        let t = threshold_micros(TRIGGERS[1]);
        assert_eq!(t, 300_000);
        assert_eq!(threshold_micros(TRIGGERS[0]), 150_000);
        // The kernel's spurious first wake: no growth.
        assert!(!stalled_enough(Some(287_018_937), Some(287_018_937), t));
        assert!(!stalled_enough(Some(1_000), Some(1_000 + t - 1), t));
        assert!(stalled_enough(Some(1_000), Some(1_000 + t), t));
        // A total that cannot be read: the kernel is believed.
        assert!(stalled_enough(None, Some(5), t));
        assert!(stalled_enough(Some(5), None, t));
    }

    fn system_total() -> Option<u64> {
        some_total(Path::new("/proc/pressure/memory"))
    }

    #[tokio::test]
    async fn a_registered_trigger_wakes_only_on_real_stall() {
        // Where this kernel accepts triggers, a wake means the stall total
        // grew by the trigger's threshold since registration (the test
        // machine may be busy: a wake is not an error, a wake without that
        // stall is; this kernel's spurious first wake must not come
        // through); where it refuses them, the error says why. Read before
        // registering: a stall the trigger reports happened after
        // registration, so after this read too.
        let before = system_total();
        match PsiTrigger::register(Path::new("/proc/pressure/memory")) {
            Ok(mut t) => {
                assert!(TRIGGERS.contains(&t.spec()));
                let woke = tokio::time::timeout(std::time::Duration::from_secs(2), t.wait()).await;
                if woke.is_ok() {
                    let after = system_total();
                    let grew = after.zip(before).map(|(a, b)| a.saturating_sub(b));
                    assert!(
                        grew >= Some(threshold_micros(t.spec())),
                        "woke after {grew:?} µs of stall: {before:?} → {after:?} ({} ignored)",
                        t.spurious_wakes()
                    );
                }
            }
            Err(e) => assert!(e.to_string().contains("/proc/pressure/memory"), "{e}"),
        }
    }
}
