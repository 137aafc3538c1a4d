//! IOKit reads for the GPU: each `IOAccelerator` service's class, `model`
//! and `PerformanceStatistics`, and the `IOUserClientCreator` and registry
//! entry id of its user clients (one per GPU connection a process opened).
//!
//! The IOKit calls themselves, and the release of every object they hand
//! out, are in `ffi/iokit.rs`. The values are handed to
//! [`super::parse::gpu_stats`] as plain Rust data.

use objc2_core_foundation::{CFDictionary, CFNumber, CFRetained, CFString, CFType};

use super::ffi::iokit::{IoObject, dictionary_entries, matching_services};
use super::parse::gpu_stats::{self, StatValue, UserClient};

/// What one accelerator reports.
#[derive(Debug, Clone, Default)]
pub struct AcceleratorReading {
    pub class: String,
    pub model: Option<String>,
    /// The `PerformanceStatistics` entries; empty if it has none.
    pub stats: Vec<(String, StatValue)>,
    /// Each user client whose creator and entry id could be read.
    pub clients: Vec<UserClient>,
}

fn string(value: CFRetained<CFType>) -> Option<String> {
    value.downcast::<CFString>().ok().map(|s| s.to_string())
}

fn stat_value(value: CFRetained<CFType>) -> StatValue {
    match value.downcast::<CFNumber>() {
        Ok(n) if n.is_float_type() => n.as_f64().map_or(StatValue::Other, StatValue::Float),
        Ok(n) => n.as_i64().map_or(StatValue::Other, StatValue::Int),
        Err(_) => StatValue::Other,
    }
}

fn performance_statistics(accelerator: &IoObject) -> Vec<(String, StatValue)> {
    let Some(dict) = accelerator
        .property("PerformanceStatistics")
        .and_then(|p| p.downcast::<CFDictionary>().ok())
    else {
        return Vec::new();
    };
    let (keys, values) = dictionary_entries(&dict);
    keys.into_iter()
        .zip(values)
        .filter_map(|(k, v)| Some((string(k)?, stat_value(v))))
        .collect()
}

fn clients(accelerator: &IoObject) -> Vec<UserClient> {
    let Some(children) = accelerator.children() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    while let Some(child) = children.next_object() {
        if let Some(creator) = child.property("IOUserClientCreator").and_then(string)
            && let Some((pid, name)) = gpu_stats::parse_user_client_creator(&creator)
            && let Some(entry_id) = child.entry_id()
        {
            out.push(UserClient {
                entry_id,
                pid,
                name,
            });
        }
    }
    out
}

/// Read every `IOAccelerator`. An error only when IOKit refused the
/// matching request itself; no accelerator is an empty list.
pub fn read_accelerators(with_clients: bool) -> Result<Vec<AcceleratorReading>, String> {
    let Some(iter) = matching_services(c"IOAccelerator")? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    while let Some(accelerator) = iter.next_object() {
        out.push(AcceleratorReading {
            class: accelerator.class(),
            model: accelerator.property("model").and_then(string),
            stats: performance_statistics(&accelerator),
            clients: if with_clients {
                clients(&accelerator)
            } else {
                Vec::new()
            },
        });
    }
    Ok(out)
}
