//! IOKit reads for the GPU: each `IOAccelerator` service's class, `model`
//! and `PerformanceStatistics`, and the `IOUserClientCreator` and registry
//! entry id of its user clients (one per GPU connection a process opened).
//!
//! IOKit objects are Mach port names that must be released; [`IoObject`]
//! owns one and releases it on drop, so no early return leaks a port.
//! CoreFoundation values come back as `CFRetained`, which releases itself.
//! The values are handed to [`super::parse::gpu_stats`] as plain Rust data.

use std::ffi::{CStr, c_char};
use std::num::NonZeroU32;

use objc2_core_foundation::{CFDictionary, CFNumber, CFRetained, CFString, CFType};
use objc2_io_kit::{
    IOIteratorNext, IOObjectGetClass, IOObjectRelease, IORegistryEntryCreateCFProperty,
    IORegistryEntryGetChildIterator, IORegistryEntryGetRegistryEntryID,
    IOServiceGetMatchingServices, IOServiceMatching, io_object_t, kIOReturnSuccess,
    kIOServicePlane,
};

use super::parse::gpu_stats::{self, StatValue, UserClient};

/// `io_name_t` is `char[128]` (`IOKit/IOTypes.h`); objc2-io-kit's
/// prototypes take a pointer to exactly that array, so the compiler holds
/// the buffers below to this size.
const IO_NAME_LEN: usize = 128;

/// An IOKit object (service, registry entry or iterator) this code owns
/// one reference to.
struct IoObject(NonZeroU32);

impl IoObject {
    /// Take ownership of a reference; `None` for IO_OBJECT_NULL.
    fn new(raw: io_object_t) -> Option<Self> {
        NonZeroU32::new(raw).map(Self)
    }

    fn raw(&self) -> io_object_t {
        self.0.get()
    }

    /// The next object of this iterator, owned.
    fn next_object(&self) -> Option<IoObject> {
        IoObject::new(IOIteratorNext(self.raw()))
    }

    /// The IOKit class name (`AGXAcceleratorG16G`, `AGXDeviceUserClient`).
    fn class(&self) -> String {
        let mut name = [0 as c_char; IO_NAME_LEN];
        // SAFETY: `name` is an io_name_t (128 bytes) the call fills with a
        // NUL-terminated class name.
        let kr = unsafe { IOObjectGetClass(self.raw(), &mut name) };
        if kr != kIOReturnSuccess {
            return String::new();
        }
        name[IO_NAME_LEN - 1] = 0;
        // SAFETY: the buffer holds a NUL-terminated string: the call wrote
        // one on success and the last byte is NUL regardless.
        unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    /// A property of this registry entry, retained.
    fn property(&self, key: &str) -> Option<CFRetained<CFType>> {
        let key = CFString::from_str(key);
        // SAFETY: `self` is a valid registry entry; the key is a CFString;
        // a null allocator means the default one; no options are defined.
        unsafe { IORegistryEntryCreateCFProperty(self.raw(), Some(&key), None, 0) }
    }

    /// The registry entry id: unique until reboot, handed out in increasing
    /// order (`IORegistryEntry::init`). `None` if IOKit refuses.
    fn entry_id(&self) -> Option<u64> {
        let mut id: u64 = 0;
        // SAFETY: `self` is a valid registry entry; `id` is a valid
        // out-pointer for one u64.
        let kr = unsafe { IORegistryEntryGetRegistryEntryID(self.raw(), &mut id) };
        (kr == kIOReturnSuccess).then_some(id)
    }

    /// The children of this entry in the service plane.
    fn children(&self) -> Option<IoObject> {
        let mut iter: io_object_t = 0;
        // SAFETY: `iter` is a valid out-pointer; the plane name is the
        // NUL-terminated "IOService", passed as the io_name_t the
        // prototype asks for (IOKit only reads it).
        let kr = unsafe {
            IORegistryEntryGetChildIterator(
                self.raw(),
                kIOServicePlane
                    .as_ptr()
                    .cast_mut()
                    .cast::<[c_char; IO_NAME_LEN]>(),
                &mut iter,
            )
        };
        if kr != kIOReturnSuccess {
            return None;
        }
        IoObject::new(iter)
    }
}

impl Drop for IoObject {
    fn drop(&mut self) {
        // Releasing can only fail for a port that is already gone; there is
        // nothing to do about it in a destructor.
        let _ = IOObjectRelease(self.raw());
    }
}

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
    // SAFETY: every key and value of a CF dictionary is a CF object, so
    // viewing them as CFType is sound; the dictionary is not mutated (it is
    // our own snapshot copy of the registry property).
    let dict = unsafe { dict.cast_unchecked::<CFType, CFType>() };
    let (keys, values) = dict.to_vecs();
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
    // SAFETY: the class name is a NUL-terminated C string literal.
    let Some(matching) = (unsafe { IOServiceMatching(c"IOAccelerator".as_ptr()) }) else {
        return Err("IOServiceMatching(\"IOAccelerator\") returned nothing".into());
    };
    let matching = CFRetained::<CFDictionary>::from(&matching);
    let mut iter: io_object_t = 0;
    // SAFETY: main port 0 (MACH_PORT_NULL) means the default IOKit main
    // port; the matching dictionary's reference is consumed by the call;
    // `iter` is a valid out-pointer.
    let kr = unsafe { IOServiceGetMatchingServices(0, Some(matching), &mut iter) };
    if kr != kIOReturnSuccess {
        return Err(format!(
            "IOServiceGetMatchingServices(IOAccelerator) failed with {kr:#x}"
        ));
    }
    let Some(iter) = IoObject::new(iter) else {
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
