//! What a sampler reads about a process the first time it sees it (or sees
//! its pid reused), in which order, and what each failed read does: one
//! policy for every OS. Each OS supplies the reads ([`FirstSightReads`]).
//!
//! | read | gives | when it fails |
//! |---|---|---|
//! | identity | parent, name, start, kernel thread | counted; the process is left out |
//! | executable | its path | gone: counted, left out; otherwise kept without one, not counted (zombies and, unless root, other users' processes have none to read) |
//! | owner | the uids | refused: counted, kept without an owner; otherwise counted, left out |
//! | arguments | argv | gone: counted, left out; otherwise counted, kept with none |
//!
//! A kernel thread gets the identity read alone. The workload is then
//! classified from the name, executable and argv; mapped libraries, where
//! an OS lists them, come later and classify it again.

use crate::model::{Argv, CollectorErrors, Workload};
use crate::os::read_failure::ReadFailure;
use crate::workload::{self, ProcessFacts};

/// The reads of one process, as its OS makes them.
pub trait FirstSightReads {
    /// What the identity read gives (Linux: `stat`; macOS:
    /// `PROC_PIDTBSDINFO` and `kinfo_proc`).
    type Identity;
    /// What the owner read gives (Linux: `status`; macOS: the uids the
    /// identity read gave).
    type Owner;

    /// Who the process is.
    fn identity(&mut self) -> Result<Self::Identity, ReadFailure>;

    /// Whether the identity is a kernel thread's: nothing more is read.
    fn is_kernel_thread(identity: &Self::Identity) -> bool;

    /// The path of its executable: `Ok(None)` where there is none to read,
    /// an error only where the process is gone.
    fn exe(&mut self) -> Result<Option<String>, ReadFailure>;

    /// Whom the process runs as.
    fn owner(&mut self, identity: &Self::Identity) -> Result<Self::Owner, ReadFailure>;

    /// Its arguments; `owner` is `None` where the owner read was refused.
    fn argv(&mut self, owner: Option<&Self::Owner>) -> Result<Argv, ReadFailure>;

    /// Its name, taken out of the identity; `exe` names a process whose
    /// full name the identity read did not give.
    fn name(identity: &mut Self::Identity, exe: Option<&str>) -> String;
}

/// What was read at first sight of a process.
#[derive(Debug)]
pub struct FirstSight<I, O> {
    pub identity: I,
    pub name: String,
    /// `None` for a kernel thread, and where the owner read was refused.
    pub owner: Option<O>,
    pub argv: Argv,
    pub exe: Option<String>,
    /// Classified without libraries; the default for a kernel thread.
    pub workload: Workload,
}

/// Read a process seen for the first time. `None` if it is left out (its
/// failure counted in `errors`).
pub fn first_sight<R: FirstSightReads>(
    reads: &mut R,
    errors: &mut CollectorErrors,
) -> Option<FirstSight<R::Identity, R::Owner>> {
    let mut identity = reads.identity().map_err(|f| f.count(errors)).ok()?;
    if R::is_kernel_thread(&identity) {
        let name = R::name(&mut identity, None);
        return Some(FirstSight {
            identity,
            name,
            owner: None,
            argv: Argv::default(),
            exe: None,
            workload: Workload::default(),
        });
    }
    let exe = match reads.exe() {
        Ok(exe) => exe,
        Err(ReadFailure::Vanished) => {
            ReadFailure::Vanished.count(errors);
            return None;
        }
        Err(ReadFailure::Denied | ReadFailure::Unreadable) => None,
    };
    let owner = match reads.owner(&identity) {
        Ok(owner) => Some(owner),
        Err(ReadFailure::Denied) => {
            ReadFailure::Denied.count(errors);
            None
        }
        Err(f) => {
            f.count(errors);
            return None;
        }
    };
    let argv = match reads.argv(owner.as_ref()) {
        Ok(argv) => argv,
        Err(ReadFailure::Vanished) => {
            ReadFailure::Vanished.count(errors);
            return None;
        }
        Err(f) => {
            f.count(errors);
            Argv::default()
        }
    };
    let name = R::name(&mut identity, exe.as_deref());
    let workload = workload::classify(&ProcessFacts {
        name: &name,
        exe: exe.as_deref(),
        argv: &argv,
        libraries: &[],
    });
    Some(FirstSight {
        identity,
        name,
        owner,
        argv,
        exe,
        workload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WorkloadKind;

    /// Scripted answers, and the reads made, in order.
    struct Fake {
        identity: Result<(bool, &'static str), ReadFailure>,
        owner: Result<u32, ReadFailure>,
        argv: Result<&'static [&'static str], ReadFailure>,
        exe: Result<Option<&'static str>, ReadFailure>,
        made: Vec<&'static str>,
        argv_saw_owner: Option<Option<u32>>,
    }

    impl Fake {
        /// A readable Python process owned by uid 1000.
        fn python() -> Self {
            Self {
                identity: Ok((false, "python3")),
                owner: Ok(1000),
                argv: Ok(&["python3", "-m", "torch.distributed.run", "train.py"]),
                exe: Ok(Some("/usr/bin/python3.12")),
                made: Vec::new(),
                argv_saw_owner: None,
            }
        }
    }

    impl FirstSightReads for Fake {
        /// (kernel thread, short name)
        type Identity = (bool, String);
        type Owner = u32;

        fn identity(&mut self) -> Result<(bool, String), ReadFailure> {
            self.made.push("identity");
            self.identity.map(|(k, n)| (k, n.to_owned()))
        }
        fn is_kernel_thread(identity: &(bool, String)) -> bool {
            identity.0
        }
        fn owner(&mut self, _: &(bool, String)) -> Result<u32, ReadFailure> {
            self.made.push("owner");
            self.owner
        }
        fn argv(&mut self, owner: Option<&u32>) -> Result<Argv, ReadFailure> {
            self.made.push("argv");
            self.argv_saw_owner = Some(owner.copied());
            self.argv
                .map(|a| Argv::from(a.iter().map(|s| s.to_string()).collect::<Vec<_>>()))
        }
        fn exe(&mut self) -> Result<Option<String>, ReadFailure> {
            self.made.push("exe");
            self.exe.map(|e| e.map(str::to_owned))
        }
        fn name(identity: &mut (bool, String), exe: Option<&str>) -> String {
            match exe {
                Some(path) => format!("{}@{path}", identity.1),
                None => std::mem::take(&mut identity.1),
            }
        }
    }

    fn errors(e: &CollectorErrors) -> (u64, u64, u64) {
        (e.vanished, e.permission_denied, e.unreadable)
    }

    #[test]
    fn a_readable_process_keeps_every_read_and_is_classified() {
        let mut reads = Fake::python();
        let mut e = CollectorErrors::default();
        let seen = first_sight(&mut reads, &mut e).expect("kept");
        assert_eq!(reads.made, ["identity", "exe", "owner", "argv"]);
        assert_eq!(reads.argv_saw_owner, Some(Some(1000)));
        assert_eq!(seen.owner, Some(1000));
        assert_eq!(
            &*seen.argv,
            ["python3", "-m", "torch.distributed.run", "train.py"]
        );
        assert_eq!(seen.exe.as_deref(), Some("/usr/bin/python3.12"));
        // The name is the OS's, given the executable.
        assert_eq!(seen.name, "python3@/usr/bin/python3.12");
        assert_eq!(seen.workload.kind, WorkloadKind::Pytorch);
        assert_eq!(errors(&e), (0, 0, 0));
    }

    #[test]
    fn a_failed_identity_read_leaves_the_process_out_with_its_failure_counted() {
        for (failure, counts) in [
            (ReadFailure::Vanished, (1, 0, 0)),
            (ReadFailure::Denied, (0, 1, 0)),
            (ReadFailure::Unreadable, (0, 0, 1)),
        ] {
            let mut reads = Fake {
                identity: Err(failure),
                ..Fake::python()
            };
            let mut e = CollectorErrors::default();
            assert!(first_sight(&mut reads, &mut e).is_none());
            assert_eq!(reads.made, ["identity"], "{failure:?}");
            assert_eq!(errors(&e), counts, "{failure:?}");
        }
    }

    #[test]
    fn a_kernel_thread_gets_the_identity_read_alone() {
        let mut reads = Fake {
            identity: Ok((true, "kworker/0:1")),
            ..Fake::python()
        };
        let mut e = CollectorErrors::default();
        let seen = first_sight(&mut reads, &mut e).expect("kept");
        assert_eq!(reads.made, ["identity"]);
        assert_eq!(seen.name, "kworker/0:1");
        assert_eq!((seen.owner, seen.exe), (None, None));
        assert!(seen.argv.is_empty());
        assert_eq!(seen.workload, Workload::default());
        assert_eq!(errors(&e), (0, 0, 0));
    }

    #[test]
    fn a_refused_owner_read_keeps_the_process_without_an_owner() {
        let mut reads = Fake {
            owner: Err(ReadFailure::Denied),
            ..Fake::python()
        };
        let mut e = CollectorErrors::default();
        let seen = first_sight(&mut reads, &mut e).expect("kept");
        assert_eq!(seen.owner, None);
        assert_eq!(reads.argv_saw_owner, Some(None));
        assert_eq!(seen.workload.kind, WorkloadKind::Pytorch);
        assert_eq!(errors(&e), (0, 1, 0));
    }

    #[test]
    fn any_other_failed_owner_read_leaves_the_process_out() {
        for (failure, counts) in [
            (ReadFailure::Vanished, (1, 0, 0)),
            (ReadFailure::Unreadable, (0, 0, 1)),
        ] {
            let mut reads = Fake {
                owner: Err(failure),
                ..Fake::python()
            };
            let mut e = CollectorErrors::default();
            assert!(first_sight(&mut reads, &mut e).is_none());
            assert_eq!(reads.made, ["identity", "exe", "owner"], "{failure:?}");
            assert_eq!(errors(&e), counts, "{failure:?}");
        }
    }

    #[test]
    fn argv_of_a_gone_process_leaves_it_out_other_failures_keep_it_without() {
        let mut reads = Fake {
            argv: Err(ReadFailure::Vanished),
            ..Fake::python()
        };
        let mut e = CollectorErrors::default();
        assert!(first_sight(&mut reads, &mut e).is_none());
        assert_eq!(reads.made, ["identity", "exe", "owner", "argv"]);
        assert_eq!(errors(&e), (1, 0, 0));
        for (failure, counts) in [
            (ReadFailure::Denied, (0, 1, 0)),
            (ReadFailure::Unreadable, (0, 0, 1)),
        ] {
            let mut reads = Fake {
                argv: Err(failure),
                ..Fake::python()
            };
            let mut e = CollectorErrors::default();
            let seen = first_sight(&mut reads, &mut e).expect("kept");
            assert!(seen.argv.is_empty(), "{failure:?}");
            assert_eq!(seen.exe.as_deref(), Some("/usr/bin/python3.12"));
            // Without argv, only the name and path say Python.
            assert_eq!(seen.workload.kind, WorkloadKind::Python);
            assert_eq!(errors(&e), counts, "{failure:?}");
        }
    }

    #[test]
    fn the_executable_of_a_gone_process_leaves_it_out_an_unreadable_one_is_no_error() {
        let mut reads = Fake {
            exe: Err(ReadFailure::Vanished),
            ..Fake::python()
        };
        let mut e = CollectorErrors::default();
        assert!(first_sight(&mut reads, &mut e).is_none());
        assert_eq!(reads.made, ["identity", "exe"]);
        assert_eq!(errors(&e), (1, 0, 0));
        for exe in [
            Err(ReadFailure::Denied),
            Err(ReadFailure::Unreadable),
            Ok(None),
        ] {
            let mut reads = Fake {
                exe,
                ..Fake::python()
            };
            let mut e = CollectorErrors::default();
            let seen = first_sight(&mut reads, &mut e).expect("kept");
            assert_eq!(seen.exe, None, "{exe:?}");
            assert_eq!(seen.name, "python3", "named without a path");
            assert_eq!(errors(&e), (0, 0, 0), "{exe:?}");
        }
    }
}
