//! IOKit GPU values into a [`GpuDevice`] and GPU-client pids.
//!
//! - Every `IOAccelerator` service (`AGXAccelerator…` on Apple Silicon, the
//!   AMD or Intel accelerator on Intel Macs) publishes a
//!   `PerformanceStatistics` dictionary. The keys headroom reads: "In use
//!   system memory" (bytes the GPU's resources occupy now), "Alloc system
//!   memory" (bytes the driver has allocated for the GPU) and "Device
//!   Utilization %" (0–100). Not every driver has every key; "In use system
//!   memory (driver)" is a different, usually 0, figure and is not used.
//! - A process that opens the GPU gets an `AGXDeviceUserClient` child of
//!   the accelerator, whose `IOUserClientCreator` property IOKit sets to
//!   `"pid <pid>, <name>"` when the client is opened (`is_io_service_open_
//!   extended` in `iokit/Kernel/IOUserClient.cpp`, `IOCopyLogNameForPID` in
//!   `iokit/Kernel/IOLib.cpp`; the name is `proc_name()`'s, the process's
//!   16-byte `p_comm`, and may be empty). Those processes are GPU clients:
//!   part of their footprint may be Metal buffers.
//! - The creator is fixed when the client opens and names a pid, not a
//!   process, and a user client can outlive the process that opened it. A
//!   pid handed out again must not inherit its earlier holder's client:
//!   [`ClientSightings`] accepts a client for the process that holds its
//!   pid now only if that process started before the client was first seen
//!   (the registry has no creation time; registry entry ids only grow, so
//!   an id first seen at T was created before T), and, where the creator
//!   names one, only if the names agree.

use std::collections::HashMap;
use std::time::Duration;

use crate::model::{GpuDevice, Timestamp};

/// One value of a `PerformanceStatistics` dictionary, as CoreFoundation
/// gave it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StatValue {
    Int(i64),
    Float(f64),
    /// Not a number (a string, a nested dictionary…).
    Other,
}

/// The figures headroom takes from `PerformanceStatistics`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AcceleratorStats {
    /// "In use system memory", bytes.
    pub in_use: Option<u64>,
    /// "Alloc system memory", bytes.
    pub allocated: Option<u64>,
    /// "Device Utilization %" as a share, 0–1.
    pub utilization: Option<f64>,
}

fn find<'a>(entries: &'a [(String, StatValue)], key: &str) -> Option<&'a StatValue> {
    entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn bytes(v: Option<&StatValue>) -> Option<u64> {
    match v? {
        StatValue::Int(n) => u64::try_from(*n).ok(),
        // Float-to-int `as` saturates; finite and non-negative is checked.
        StatValue::Float(f) if f.is_finite() && *f >= 0.0 => Some(f.round() as u64),
        _ => None,
    }
}

fn percent(v: Option<&StatValue>) -> Option<f64> {
    let p = match v? {
        StatValue::Int(n) => *n as f64,
        StatValue::Float(f) => *f,
        StatValue::Other => return None,
    };
    (p.is_finite() && (0.0..=100.0).contains(&p)).then_some(p / 100.0)
}

/// Read the figures from a `PerformanceStatistics` dictionary's entries.
/// Missing, negative or non-numeric values are `None`.
pub fn accelerator_stats(entries: &[(String, StatValue)]) -> AcceleratorStats {
    AcceleratorStats {
        in_use: bytes(find(entries, "In use system memory")),
        allocated: bytes(find(entries, "Alloc system memory")),
        // Older drivers spell it without the percent sign (sysinfo checks
        // both).
        utilization: percent(
            find(entries, "Device Utilization %").or_else(|| find(entries, "Device Utilization")),
        ),
    }
}

/// A [`GpuDevice`] for the `index`-th accelerator. `model` is the
/// accelerator's `model` property (e.g. "Apple M4"), falling back to its
/// IOKit class name. `memory_total` is the GPU wired-memory ceiling where
/// one is set: on unified memory there is no separate VRAM size.
pub fn gpu_device(
    index: u32,
    model: Option<&str>,
    class: &str,
    stats: &AcceleratorStats,
    wired_limit: Option<u64>,
) -> GpuDevice {
    GpuDevice {
        index,
        name: model.filter(|m| !m.is_empty()).unwrap_or(class).to_owned(),
        uuid: None,
        memory_total: wired_limit,
        memory_used: stats.in_use,
        memory_reserved: None,
        utilization: stats.utilization,
        processes: Vec::new(),
        cuda_version: None,
    }
}

/// One user client of an accelerator: its registry entry id
/// (`IORegistryEntryGetRegistryEntryID`, unique until reboot, handed out in
/// increasing order) and the pid and name its creator property names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserClient {
    pub entry_id: u64,
    pub pid: u32,
    pub name: String,
}

/// How far a process's start may lie after the first sighting of a client
/// and the client still count as its own: the two times come from the same
/// wall clock, read at different moments (the start in microseconds, the
/// sighting in milliseconds), and an NTP adjustment in between may move it.
pub const CLOCK_SLACK: Duration = Duration::from_secs(1);

/// Bytes of a process name that `IOUserClientCreator` and the sampler's
/// name are compared on: `pbi_comm` keeps 15 (`proc_pidbsdinfo` forces its
/// 16th byte to NUL), the creator's `p_comm` 16, `pbi_name` 31.
const NAME_COMPARED: usize = 15;

/// When each user client was first seen, for telling a client the process
/// holding its pid opened from one an earlier holder of the pid left
/// behind. See the module documentation.
///
/// What it cannot tell: a client that already existed when headroom
/// started is dated to that first sighting, so for a pid handed out again
/// before then, to a process of the same name, the stale client still
/// counts. A clock stepped back by more than [`CLOCK_SLACK`] between a
/// process's start and its client's first sighting makes the client count
/// for nobody.
#[derive(Debug, Default)]
pub struct ClientSightings {
    first_seen: HashMap<u64, Timestamp>,
}

impl ClientSightings {
    /// Note the clients listed now (`now` for those not seen before) and
    /// forget those no longer listed, so the map holds what exists.
    pub fn observe<'a>(
        &mut self,
        clients: impl IntoIterator<Item = &'a UserClient>,
        now: Timestamp,
    ) {
        let mut seen = HashMap::with_capacity(self.first_seen.len());
        for c in clients {
            let at = self.first_seen.get(&c.entry_id).copied().unwrap_or(now);
            seen.insert(c.entry_id, at);
        }
        self.first_seen = seen;
    }

    /// When `entry_id` was first seen; `None` if [`Self::observe`] has not
    /// listed it.
    pub fn first_seen(&self, entry_id: u64) -> Option<Timestamp> {
        self.first_seen.get(&entry_id).copied()
    }

    /// Whether `client` belongs to the process that holds its pid now,
    /// which started at `started_at` and goes by `name`.
    pub fn belongs_to(&self, client: &UserClient, started_at: Timestamp, name: &str) -> bool {
        let Some(seen) = self.first_seen(client.entry_id) else {
            return false;
        };
        started_at <= seen.plus(CLOCK_SLACK)
            && (client.name.is_empty() || same_name(&client.name, name))
    }
}

/// The same process name, compared on the first [`NAME_COMPARED`] bytes.
fn same_name(creator: &str, name: &str) -> bool {
    fn cut(s: &str) -> &[u8] {
        &s.as_bytes()[..s.len().min(NAME_COMPARED)]
    }
    cut(creator) == cut(name)
}

/// The pid and process name in an `IOUserClientCreator` value
/// (`"pid 91, securityd"`). `None` for anything else.
pub fn parse_user_client_creator(value: &str) -> Option<(u32, String)> {
    let rest = value.strip_prefix("pid ")?;
    let (pid, name) = rest.split_once(',')?;
    let pid = pid.parse::<u32>().ok()?;
    Some((pid, name.strip_prefix(' ').unwrap_or(name).to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(k: &str, v: i64) -> (String, StatValue) {
        (k.to_owned(), StatValue::Int(v))
    }

    /// `ioreg -r -d 1 -w 0 -c "IOAccelerator"` on a 16-inch MacBook Pro
    /// with an M1 Pro (AGXAcceleratorG13X, "gpu,t6000") under macOS 12.6,
    /// posted in exelban/stats#1094; the `PerformanceStatistics` line, in
    /// ioreg's order:
    /// {"TiledSceneBytes"=1572864,"Alloc system memory"=1214005248,
    /// "Tiler Utilization %"=2,"recoveryCount"=0,"Renderer Utilization %"=2,
    /// "SplitSceneCount"=0,"Allocated PB Size"=17956864,
    /// "Device Utilization %"=2,"In use system memory"=340983808}
    fn m1_pro() -> Vec<(String, StatValue)> {
        vec![
            int("TiledSceneBytes", 1_572_864),
            int("Alloc system memory", 1_214_005_248),
            int("Tiler Utilization %", 2),
            int("recoveryCount", 0),
            int("Renderer Utilization %", 2),
            int("SplitSceneCount", 0),
            int("Allocated PB Size", 17_956_864),
            int("Device Utilization %", 2),
            int("In use system memory", 340_983_808),
        ]
    }

    #[test]
    fn an_m1_pros_statistics_give_memory_and_utilization() {
        let s = accelerator_stats(&m1_pro());
        assert_eq!(s.in_use, Some(340_983_808));
        assert_eq!(s.allocated, Some(1_214_005_248));
        assert_eq!(s.utilization, Some(0.02));
        let d = gpu_device(0, Some("Apple M1 Pro"), "AGXAcceleratorG13X", &s, None);
        assert_eq!(d.name, "Apple M1 Pro");
        assert_eq!(d.memory_used, Some(340_983_808));
        assert_eq!(d.memory_total, None, "unified memory has no VRAM size");
        assert_eq!(d.utilization, Some(0.02));
    }

    #[test]
    fn the_driver_figure_is_not_taken_for_the_in_use_one() {
        // Constructed: newer drivers also publish "In use system memory
        // (driver)", a different figure that must not stand in for the one
        // headroom reads.
        let only_driver = vec![int("In use system memory (driver)", 5)];
        assert_eq!(accelerator_stats(&only_driver).in_use, None);
    }

    #[test]
    fn the_wired_limit_is_the_total_where_set() {
        let s = accelerator_stats(&m1_pro());
        let d = gpu_device(0, None, "AGXAcceleratorG13X", &s, Some(20 << 30));
        assert_eq!(d.memory_total, Some(20 << 30));
        assert_eq!(d.name, "AGXAcceleratorG13X", "class name without a model");
    }

    #[test]
    fn odd_values_are_dropped_not_trusted() {
        let entries = vec![
            int("In use system memory", -1),
            ("Alloc system memory".into(), StatValue::Other),
            int("Device Utilization %", 250),
        ];
        assert_eq!(accelerator_stats(&entries), AcceleratorStats::default());
        let floats = vec![
            ("In use system memory".into(), StatValue::Float(1024.0)),
            ("Device Utilization".into(), StatValue::Float(37.5)),
            ("Alloc system memory".into(), StatValue::Float(f64::NAN)),
        ];
        let s = accelerator_stats(&floats);
        assert_eq!(s.in_use, Some(1024));
        assert_eq!(s.utilization, Some(0.375));
        assert_eq!(s.allocated, None);
        assert_eq!(accelerator_stats(&[]), AcceleratorStats::default());
    }

    #[test]
    fn user_client_creators_name_pid_and_process() {
        // A user client's properties as ioreg printed them, posted in
        // bazad/bazad.github.io#1: <key>IOUserClientCreator</key>
        // <string>pid 91, securityd</string>.
        assert_eq!(
            parse_user_client_creator("pid 91, securityd"),
            Some((91, "securityd".into()))
        );
        // Constructed from IOCopyLogNameForPID's format ("pid %d, " and
        // the name): names may hold spaces and commas.
        assert_eq!(
            parse_user_client_creator("pid 808, Brave Browser Helper (GPU), x"),
            Some((808, "Brave Browser Helper (GPU), x".into()))
        );
        // proc_name() failed: IOCopyLogNameForPID leaves "pid N, ".
        assert_eq!(
            parse_user_client_creator("pid 77, "),
            Some((77, String::new()))
        );
    }

    fn client(entry_id: u64, pid: u32, name: &str) -> UserClient {
        UserClient {
            entry_id,
            pid,
            name: name.into(),
        }
    }

    #[test]
    fn a_client_counts_for_the_process_that_was_there_before_it() {
        let t0 = Timestamp(1_732_246_411_000);
        let mut seen = ClientSightings::default();
        let python = client(0x1_0000_0a01, 4242, "python3.11");
        seen.observe([&python], t0);
        // python3.11 started a minute before the client was first seen.
        let started = Timestamp(t0.0 - 60_000);
        assert!(seen.belongs_to(&python, started, "python3.11"));
        // A later sighting keeps the first one's time.
        seen.observe([&python], t0.plus(Duration::from_secs(30)));
        assert_eq!(seen.first_seen(python.entry_id), Some(t0));
    }

    #[test]
    fn a_client_left_behind_does_not_pass_to_the_pids_next_holder() {
        let t0 = Timestamp(1_732_246_411_000);
        let mut seen = ClientSightings::default();
        let stale = client(0x1_0000_0a01, 4242, "python3.11");
        seen.observe([&stale], t0);
        // pid 4242 handed out again ten seconds later, to another python3.11
        // and to a shell: neither opened this client.
        let later = t0.plus(Duration::from_secs(10));
        assert!(!seen.belongs_to(&stale, later, "python3.11"));
        assert!(!seen.belongs_to(&stale, later, "zsh"));
        // Within the slack a start still counts (the clocks are read at
        // different moments).
        assert!(seen.belongs_to(&stale, t0.plus(Duration::from_millis(900)), "python3.11"));
    }

    #[test]
    fn a_client_of_another_name_is_not_the_processs() {
        let t0 = Timestamp(1_732_246_411_000);
        let mut seen = ClientSightings::default();
        let stale = client(7, 4242, "WindowServer");
        seen.observe([&stale], t0);
        // A pid handed out again before headroom started: the time cannot
        // tell, the name does.
        let before = Timestamp(t0.0 - 1000);
        assert!(!seen.belongs_to(&stale, before, "python3.11"));
        // The creator's p_comm is cut at 16 bytes, pbi_comm at 15 and
        // pbi_name at 31: the first 15 bytes decide.
        let long = client(8, 808, "ollama_llama_ser");
        seen.observe([&stale, &long], t0);
        assert!(seen.belongs_to(&long, before, "ollama_llama_server"));
        assert!(seen.belongs_to(&long, before, "ollama_llama_se"));
        // proc_name() found no name: only the time decides.
        let unnamed = client(9, 77, "");
        seen.observe([&unnamed], t0);
        assert!(seen.belongs_to(&unnamed, before, "anything"));
    }

    #[test]
    fn clients_no_longer_listed_are_forgotten() {
        let t0 = Timestamp(1_732_246_411_000);
        let mut seen = ClientSightings::default();
        let a = client(1, 10, "a");
        let b = client(2, 20, "b");
        seen.observe([&a, &b], t0);
        seen.observe([&b], t0.plus(Duration::from_secs(1)));
        assert_eq!(seen.first_seen(1), None);
        assert!(
            !seen.belongs_to(&a, Timestamp(0), "a"),
            "an unknown client counts for no one"
        );
        assert_eq!(seen.first_seen(2), Some(t0));
    }

    #[test]
    fn anything_else_is_not_a_creator() {
        for bad in [
            "",
            "pid",
            "pid , x",
            "pid -1, x",
            "pid 12 x",
            "PID 1, x",
            "task 5, x",
        ] {
            assert_eq!(parse_user_client_creator(bad), None, "{bad:?}");
        }
    }
}
