//! The thread that reads `/proc/[pid]/maps` for the library scans
//! (`library_rescan.rs` decides which and when), so that a read never holds
//! up a sample: the sampler hands it the pids due and takes its answers up
//! at a later tick.
//!
//! A process's owner decides how long its `maps` is: 65 000 mappings of a
//! file with a 3.8 KB path make 250 MB, which the kernel takes about 3 s
//! to render. So each read stops after [`MAPS_PREFIX`] bytes or
//! [`READ_TIME`], whichever comes first (a cut read), reads through a
//! buffer that is never grown, and keeps only the names of libraries that
//! show a framework, at most [`KEPT_LIBRARIES`] of them: what the
//! classifier looks at, and no more.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, sync_channel};
use std::time::{Duration, Instant};

use crate::os::linux::parse::procfs::{self, MapsLibraries};
use crate::workload;

use super::proc_reader::ProcReader;
use crate::os::read_failure::ReadFailure;

/// The most of a `maps` read: a Python process with PyTorch and CUDA
/// loaded has a few thousand mappings, about 1 MB. Libraries loaded later
/// sit at lower addresses, so a framework imported after start comes early
/// in the file.
pub(super) const MAPS_PREFIX: usize = 2 << 20;
/// The longest a `maps` read may take: a 2 MB prefix of ordinary lines
/// takes the kernel about 20 ms.
pub(super) const READ_TIME: Duration = Duration::from_millis(50);
/// Most library names kept of one process (only those that show a
/// framework are kept at all).
pub(super) const KEPT_LIBRARIES: usize = 32;

/// What one read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Listing {
    /// The libraries that show a framework, sorted and unique.
    pub(super) libraries: Vec<String>,
    /// The `site-packages` directories they were mapped from.
    pub(super) site_packages: Vec<String>,
    /// The read stopped at [`MAPS_PREFIX`] or [`READ_TIME`] before the end
    /// of the file.
    pub(super) cut: bool,
}

/// One process as the worker read it.
#[derive(Debug)]
pub(super) struct LibraryReply {
    pub(super) pid: u32,
    /// Its start time from `stat`, read just before: the answer applies
    /// only to the same identity.
    pub(super) start: Option<u64>,
    pub(super) listing: Result<Listing, ReadFailure>,
    pub(super) took: Duration,
}

/// The libraries of `pid` that show a framework, from at most `max` bytes
/// of its `maps` read within `time`.
pub(super) fn read_libraries(
    reader: &mut ProcReader,
    pid: u32,
    max: usize,
    time: Duration,
) -> Result<Listing, ReadFailure> {
    let mut libs = MapsLibraries::new(workload::library_shows_framework, KEPT_LIBRARIES);
    let deadline = Instant::now() + time;
    let streamed = reader.stream_pid(pid, "maps", max, deadline, |chunk| libs.feed(chunk))?;
    let (libraries, site_packages) = libs.finish_with_site_packages(!streamed.cut);
    Ok(Listing {
        libraries,
        site_packages,
        cut: streamed.cut,
    })
}

/// One process's identity and libraries.
fn read_one(reader: &mut ProcReader, pid: u32) -> LibraryReply {
    let start = reader
        .read_pid(pid, "stat")
        .ok()
        .and_then(procfs::parse_stat)
        .map(|st| st.start_ticks);
    let began = Instant::now();
    let listing = read_libraries(reader, pid, MAPS_PREFIX, READ_TIME);
    LibraryReply {
        pid,
        start,
        listing,
        took: began.elapsed(),
    }
}

/// The sampler's end of the thread.
#[derive(Debug)]
pub(super) struct LibraryWorker {
    requests: SyncSender<Vec<u32>>,
    replies: Receiver<Vec<LibraryReply>>,
    /// A request is being read: no other is sent until it is answered.
    pub(super) in_flight: bool,
}

/// Why no answer could be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gone {
    /// The thread has ended (it cannot be asked again).
    Thread,
}

impl LibraryWorker {
    /// Start the thread over the `/proc` tree at `root`; `None` (and no
    /// scans are made) if the thread cannot be started.
    pub(super) fn start(root: PathBuf) -> Option<Self> {
        let (requests, incoming) = sync_channel::<Vec<u32>>(1);
        let (answer, replies) = sync_channel::<Vec<LibraryReply>>(1);
        std::thread::Builder::new()
            .name("headroom-maps".to_string())
            .spawn(move || {
                crate::os::this_process::run_in_background();
                let mut reader = ProcReader::new(root);
                for pids in incoming {
                    let read: Vec<LibraryReply> = pids
                        .into_iter()
                        .map(|pid| read_one(&mut reader, pid))
                        .collect();
                    if answer.send(read).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(Self {
            requests,
            replies,
            in_flight: false,
        })
    }

    /// Hand the thread `pids` to read; false if it has ended.
    pub(super) fn send(&mut self, pids: Vec<u32>) -> bool {
        if self.requests.send(pids).is_err() {
            return false;
        }
        self.in_flight = true;
        true
    }

    /// The answer to the request in flight, if it is in: waiting up to
    /// `wait` for it, or not at all.
    pub(super) fn take(
        &mut self,
        wait: Option<Duration>,
    ) -> Result<Option<Vec<LibraryReply>>, Gone> {
        if !self.in_flight {
            return Ok(None);
        }
        let got = match wait {
            Some(d) => self.replies.recv_timeout(d).map_err(|e| match e {
                RecvTimeoutError::Timeout => TryRecvError::Empty,
                RecvTimeoutError::Disconnected => TryRecvError::Disconnected,
            }),
            None => self.replies.try_recv(),
        };
        match got {
            Ok(replies) => {
                self.in_flight = false;
                Ok(Some(replies))
            }
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(Gone::Thread),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc` tree with one process whose `maps` is `maps`.
    fn tree(pid: u32, maps: &[u8]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join(pid.to_string());
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("maps"), maps).unwrap();
        std::fs::write(
            d.join("stat"),
            format!("{pid} (python3) S 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 0\n"),
        )
        .unwrap();
        dir
    }

    const TORCH: &[u8] = b"7f00-7f01 r-xp 00000000 08:01 12 /venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so\n\
        7f01-7f02 r-xp 00000000 08:01 13 /usr/lib/x86_64-linux-gnu/libc.so.6\n";

    #[test]
    fn only_libraries_that_show_a_framework_are_kept() {
        let dir = tree(5, TORCH);
        let mut reader = ProcReader::new(dir.path().to_owned());
        let listing = read_libraries(&mut reader, 5, MAPS_PREFIX, READ_TIME).unwrap();
        assert_eq!(
            listing,
            Listing {
                libraries: vec!["libtorch_cpu.so".into()],
                site_packages: vec!["/venv/lib/python3.11/site-packages".into()],
                cut: false
            }
        );
    }

    #[test]
    fn a_huge_maps_is_read_only_up_to_its_prefix() {
        // A thousand mappings of a file with a 3.8 KB path (3.8 MB: the
        // attack used 65 000), then a framework.
        let path = format!("/tmp/{}/data.so", "p".repeat(3800));
        let mut maps = Vec::new();
        for i in 0..1_000u64 {
            maps.extend_from_slice(
                format!("{i:x}000-{i:x}fff r--p 00000000 08:01 99 {path}\n").as_bytes(),
            );
        }
        maps.extend_from_slice(TORCH);
        let dir = tree(6, &maps);
        let mut reader = ProcReader::new(dir.path().to_owned());
        let listing = read_libraries(&mut reader, 6, MAPS_PREFIX, Duration::from_secs(60)).unwrap();
        assert!(listing.cut);
        assert!(listing.libraries.is_empty(), "{:?}", listing.libraries);
        // The whole file, without the bound, shows the framework.
        let whole = read_libraries(&mut reader, 6, usize::MAX, Duration::from_secs(60)).unwrap();
        assert_eq!((whole.cut, whole.libraries.len()), (false, 1));
    }

    #[test]
    fn the_thread_answers_each_pid_with_its_identity() {
        let dir = tree(7, TORCH);
        let mut worker = LibraryWorker::start(dir.path().to_owned()).unwrap();
        assert!(worker.take(None).unwrap().is_none(), "nothing asked yet");
        assert!(worker.send(vec![7, 8]));
        let replies = worker
            .take(Some(Duration::from_secs(30)))
            .unwrap()
            .expect("an answer");
        assert!(!worker.in_flight);
        assert_eq!(replies.len(), 2);
        assert_eq!((replies[0].pid, replies[0].start), (7, Some(777)));
        assert_eq!(replies[0].listing.as_ref().unwrap().libraries.len(), 1);
        assert_eq!((replies[1].pid, replies[1].start), (8, None));
        assert_eq!(replies[1].listing, Err(ReadFailure::Vanished));
    }
}
