//! Which process a thread belongs to, for crash records that name a thread.
//!
//! The kernel's fault lines name the task that faulted: for a crash in a
//! thread other than the main one (a TensorFlow executor, a PyTorch worker
//! thread), its thread id and thread name, not its process's. By the time
//! the record is read the process is usually gone, so [`Threads`] remembers,
//! poll after poll, the thread ids of the processes post-mortems watch
//! (`/proc/[pid]/task`), and keeps those of a process that vanished for a
//! few more polls, so that a record read a moment late still finds its
//! process. A thread born and crashed between two polls is not known; its
//! crash then stays unmatched, and the post-mortem says what it found.
//!
//! Bounded: at most [`MAX_PER_PROCESS`] threads of one process and
//! [`MAX_THREADS`] in all are remembered, whatever a process spawns.

use std::collections::HashMap;
use std::path::Path;

/// Threads of one process remembered, at most.
pub const MAX_PER_PROCESS: usize = 4096;
/// Threads remembered in all, at most.
pub const MAX_THREADS: usize = 65_536;
/// Polls a vanished process's threads are kept for.
const KEEP_POLLS: u64 = 3;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Threads {
    /// Thread id → (process id, the poll it was last seen in).
    owner: HashMap<u32, (u32, u64)>,
    poll: u64,
}

impl Threads {
    /// Read the threads of `pids` under `proc_root` (normally `/proc`).
    pub fn refresh(&mut self, proc_root: &Path, pids: impl IntoIterator<Item = u32>) {
        self.poll += 1;
        let now = self.poll;
        for pid in pids {
            let Ok(entries) = std::fs::read_dir(proc_root.join(pid.to_string()).join("task"))
            else {
                continue;
            };
            for tid in entries
                .map_while(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|tid| *tid != pid)
                .take(MAX_PER_PROCESS)
            {
                if self.owner.len() >= MAX_THREADS && !self.owner.contains_key(&tid) {
                    break;
                }
                self.owner.insert(tid, (pid, now));
            }
        }
        self.owner
            .retain(|_, (_, seen)| now.saturating_sub(*seen) <= KEEP_POLLS);
    }

    /// The process `tid` was last seen in, if it was a thread other than
    /// a main one.
    pub fn owner(&self, tid: u32) -> Option<u32> {
        self.owner.get(&tid).map(|(pid, _)| *pid)
    }

    pub fn len(&self) -> usize {
        self.owner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.owner.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_thread_is_owned_by_its_process() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            // `/proc/thread-self` links to `PID/task/TID`.
            let link = std::fs::read_link("/proc/thread-self").unwrap();
            let tid: u32 = link
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse().ok())
                .unwrap();
            tx.send(tid).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let me = std::process::id();
        let mut threads = Threads::default();
        threads.refresh(Path::new("/proc"), [me]);
        assert_eq!(threads.owner(tid), Some(me));
        assert_eq!(threads.owner(me), None, "the main thread is the process");
        done_tx.send(()).unwrap();
        worker.join().unwrap();
    }

    #[test]
    fn a_vanished_process_is_remembered_for_a_few_polls() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("40/task/41")).unwrap();
        std::fs::create_dir_all(dir.path().join("40/task/40")).unwrap();
        let mut threads = Threads::default();
        threads.refresh(dir.path(), [40]);
        assert_eq!(threads.owner(41), Some(40));
        std::fs::remove_dir_all(dir.path().join("40")).unwrap();
        for _ in 0..KEEP_POLLS {
            threads.refresh(dir.path(), [40]);
            assert_eq!(threads.owner(41), Some(40));
        }
        threads.refresh(dir.path(), [40]);
        assert_eq!(threads.owner(41), None);
        assert!(threads.is_empty());
    }
}
