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
//!   `"pid <pid>, <name>"` (`IOCopyLogNameForPID` in
//!   `iokit/Kernel/IOLib.cpp`; the name is `proc_name()`'s and may be empty).
//!   Those processes are GPU clients: part of their footprint may be
//!   Metal buffers.

use crate::model::GpuDevice;

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
    }
}

/// The pid and process name in an `IOUserClientCreator` value
/// (`"pid 682, WindowServer"`). `None` for anything else.
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

    /// `ioreg -r -d 1 -c IOAccelerator` on an Apple M4 (AGXAcceleratorG16G),
    /// quoted verbatim in a public project's test fixture:
    /// {"In use system memory (driver)"=0,"Alloc system memory"=1574862848,
    /// "Tiler Utilization %"=20,"recoveryCount"=0,"Renderer Utilization %"=19,
    /// "TiledSceneBytes"=1605632,"Device Utilization %"=21,
    /// "SplitSceneCount"=0,"In use system memory"=351141888}
    fn m4() -> Vec<(String, StatValue)> {
        vec![
            int("In use system memory (driver)", 0),
            int("Alloc system memory", 1_574_862_848),
            int("Tiler Utilization %", 20),
            int("recoveryCount", 0),
            int("Renderer Utilization %", 19),
            int("TiledSceneBytes", 1_605_632),
            int("Device Utilization %", 21),
            int("SplitSceneCount", 0),
            int("In use system memory", 351_141_888),
        ]
    }

    #[test]
    fn an_m4s_statistics_give_memory_and_utilization() {
        let s = accelerator_stats(&m4());
        assert_eq!(s.in_use, Some(351_141_888));
        assert_eq!(s.allocated, Some(1_574_862_848));
        assert_eq!(s.utilization, Some(0.21));
        let d = gpu_device(0, Some("Apple M4"), "AGXAcceleratorG16G", &s, None);
        assert_eq!(d.name, "Apple M4");
        assert_eq!(d.memory_used, Some(351_141_888));
        assert_eq!(d.memory_total, None, "unified memory has no VRAM size");
        assert_eq!(d.utilization, Some(0.21));
    }

    #[test]
    fn the_driver_figure_is_not_taken_for_the_in_use_one() {
        let only_driver = vec![int("In use system memory (driver)", 5)];
        assert_eq!(accelerator_stats(&only_driver).in_use, None);
    }

    #[test]
    fn the_wired_limit_is_the_total_where_set() {
        let s = accelerator_stats(&m4());
        let d = gpu_device(0, None, "AGXAcceleratorG16G", &s, Some(20 << 30));
        assert_eq!(d.memory_total, Some(20 << 30));
        assert_eq!(d.name, "AGXAcceleratorG16G", "class name without a model");
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
        // The WindowServer client on an Apple Silicon Mac.
        assert_eq!(
            parse_user_client_creator("pid 682, WindowServer"),
            Some((682, "WindowServer".into()))
        );
        // From an `ioreg -l` dump of a macOS guest: loginwindow's client.
        assert_eq!(
            parse_user_client_creator("pid 195, loginwindow"),
            Some((195, "loginwindow".into()))
        );
        // Names may hold spaces and commas.
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
