//! The pure parsers of what macOS gives, compiled and tested on every OS:
//! VM statistics ([`vm`]) and the per-tick page-count sysctls
//! ([`page_counts`]), the memory-pressure level ([`pressure`]),
//! `kinfo_proc` ([`kinfo`]), `proc_info.h` layouts ([`proc_info`]),
//! `KERN_PROCARGS2` ([`procargs`]), the GPU's statistics ([`gpu_stats`]),
//! jetsam's log lines ([`jetsam`]), the kind of a diagnostic report
//! ([`report_kind`]), crash reports ([`crash_report`]), JetsamEvent reports
//! ([`jetsam_report`]), kqueue exit events ([`proc_exit`]) and access
//! control lists ([`acl`]).

pub mod acl;
pub mod crash_report;
pub mod gpu_stats;
pub mod jetsam;
pub mod jetsam_report;
pub mod kinfo;
pub mod page_counts;
pub mod post_mortem_sources;
pub mod pressure;
pub mod proc_exit;
pub mod proc_info;
pub mod procargs;
pub mod report_kind;
pub mod vm;
