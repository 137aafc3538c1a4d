//! The machine-wide files of the Linux sampler: `/proc/meminfo` (the only
//! source whose failure fails the sample), `/proc/vmstat` (swap paging),
//! `/proc/pressure/memory` (PSI; absent on kernels built without it, which
//! is not an error) and, once, the boot time in `/proc/stat`.

use std::io;

use crate::model::sampling::{SampleError, Tripwire};
use crate::model::{CollectorErrors, Pressure, Swap, SystemMemory};
use crate::os::linux::parse::procfs;

use super::process_reads::Io;

/// The machine-wide figures of one sample.
pub(super) struct SystemFigures {
    pub(super) memory: SystemMemory,
    pub(super) swap: Swap,
    pub(super) pressure: Pressure,
}

impl Io {
    /// Whether `trip` holds at the available memory and swap used that
    /// `meminfo` shows now; an unreadable `meminfo` trips nothing (the
    /// tick's own read reports it).
    pub(super) fn tripped(&mut self, trip: &Tripwire) -> bool {
        match self.reader.read_root("meminfo").map(procfs::parse_meminfo) {
            Ok(Ok(m)) => {
                let swap_used = m
                    .swap_total
                    .unwrap_or(0)
                    .saturating_sub(m.swap_free.unwrap_or(0));
                trip.tripped(m.available, swap_used)
            }
            _ => false,
        }
    }

    /// Read the machine-wide files; the boot time too on the first call.
    /// Only `meminfo` failing fails; the others count as unreadable.
    pub(super) fn read_system(
        &mut self,
        errors: &mut CollectorErrors,
    ) -> Result<SystemFigures, SampleError> {
        let meminfo = match self.reader.read_root("meminfo") {
            Ok(text) => procfs::parse_meminfo(text).map_err(|reason| SampleError::Parse {
                path: self.root_file("meminfo"),
                reason,
            })?,
            Err(source) => {
                return Err(SampleError::Read {
                    path: self.root_file("meminfo"),
                    source,
                });
            }
        };
        let vmstat = match self.reader.read_root("vmstat") {
            Ok(text) => procfs::parse_vmstat(text),
            Err(_) => {
                errors.unreadable += 1;
                procfs::VmstatSwap::default()
            }
        };
        let psi = match self.reader.read_root("pressure/memory") {
            Ok(text) => {
                let psi = procfs::parse_psi(text);
                if psi.is_none() {
                    errors.unreadable += 1;
                }
                psi
            }
            // No file: kernel without CONFIG_PSI. EOPNOTSUPP: booted with psi=0.
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => None,
            Err(_) => {
                errors.unreadable += 1;
                None
            }
        };
        if self.boot_time.is_none() {
            self.boot_time = Some(
                self.reader
                    .read_root("stat")
                    .ok()
                    .and_then(procfs::parse_btime),
            );
        }

        let memory = procfs::system_memory(&meminfo);
        let level = procfs::pressure_level(psi.as_ref(), memory.available, memory.total);
        Ok(SystemFigures {
            swap: procfs::swap(&meminfo, &vmstat, self.page_size),
            memory,
            pressure: Pressure {
                level,
                psi,
                free_percent: None,
            },
        })
    }
}
