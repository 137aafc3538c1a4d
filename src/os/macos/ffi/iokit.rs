//! IOKit objects and the calls on them that the GPU reads make: matching
//! services by class, walking an iterator or an entry's children, and an
//! entry's class, properties and registry id. Each is a safe method that
//! returns plain Rust values or retained CoreFoundation objects
//! (`os::macos::iokit` turns them into readings).
//!
//! IOKit objects are Mach port names that must be released; [`IoObject`]
//! owns one and releases it on drop, so no early return leaks a port.
//! CoreFoundation values come back as `CFRetained`, which releases itself.

use std::ffi::{CStr, c_char};
use std::num::NonZeroU32;

use objc2_core_foundation::{CFDictionary, CFRetained, CFString, CFType};
use objc2_io_kit::{
    IOIteratorNext, IOObjectGetClass, IOObjectRelease, IORegistryEntryCreateCFProperty,
    IORegistryEntryGetChildIterator, IORegistryEntryGetRegistryEntryID,
    IOServiceGetMatchingServices, IOServiceMatching, io_object_t, kIOReturnSuccess,
    kIOServicePlane,
};

/// `io_name_t` is `char[128]` (`IOKit/IOTypes.h`); objc2-io-kit's
/// prototypes take a pointer to exactly that array, so the compiler holds
/// the buffers below to this size.
const IO_NAME_LEN: usize = 128;

/// An IOKit object (service, registry entry or iterator) this code owns
/// one reference to.
pub struct IoObject(NonZeroU32);

impl IoObject {
    /// Take ownership of a reference; `None` for IO_OBJECT_NULL.
    fn new(raw: io_object_t) -> Option<Self> {
        NonZeroU32::new(raw).map(Self)
    }

    fn raw(&self) -> io_object_t {
        self.0.get()
    }

    /// The next object of this iterator, owned.
    pub fn next_object(&self) -> Option<IoObject> {
        IoObject::new(IOIteratorNext(self.raw()))
    }

    /// The IOKit class name (`AGXAcceleratorG16G`, `AGXDeviceUserClient`).
    pub fn class(&self) -> String {
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
    pub fn property(&self, key: &str) -> Option<CFRetained<CFType>> {
        let key = CFString::from_str(key);
        // SAFETY: `self` is a valid registry entry; the key is a CFString;
        // a null allocator means the default one; no options are defined.
        unsafe { IORegistryEntryCreateCFProperty(self.raw(), Some(&key), None, 0) }
    }

    /// The registry entry id: unique until reboot, handed out in increasing
    /// order (`IORegistryEntry::init`). `None` if IOKit refuses.
    pub fn entry_id(&self) -> Option<u64> {
        let mut id: u64 = 0;
        // SAFETY: `self` is a valid registry entry; `id` is a valid
        // out-pointer for one u64.
        let kr = unsafe { IORegistryEntryGetRegistryEntryID(self.raw(), &mut id) };
        (kr == kIOReturnSuccess).then_some(id)
    }

    /// The children of this entry in the service plane.
    pub fn children(&self) -> Option<IoObject> {
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

/// The services of IOKit class `class` (`IOServiceMatching`,
/// `IOServiceGetMatchingServices` on the default main port), as an
/// iterator; `Ok(None)` when there are none. An error only when IOKit
/// refused the request itself.
pub fn matching_services(class: &CStr) -> Result<Option<IoObject>, String> {
    let shown = class.to_string_lossy();
    // SAFETY: the class name is a NUL-terminated C string that lives across
    // the call, which only reads it.
    let Some(matching) = (unsafe { IOServiceMatching(class.as_ptr()) }) else {
        return Err(format!("IOServiceMatching(\"{shown}\") returned nothing"));
    };
    let matching = CFRetained::<CFDictionary>::from(&matching);
    let mut iter: io_object_t = 0;
    // SAFETY: main port 0 (MACH_PORT_NULL) means the default IOKit main
    // port; the matching dictionary's reference is consumed by the call;
    // `iter` is a valid out-pointer.
    let kr = unsafe { IOServiceGetMatchingServices(0, Some(matching), &mut iter) };
    if kr != kIOReturnSuccess {
        return Err(format!(
            "IOServiceGetMatchingServices({shown}) failed with {kr:#x}"
        ));
    }
    Ok(IoObject::new(iter))
}

/// The keys and values of a CF dictionary, each as a CF object.
pub fn dictionary_entries(
    dict: &CFDictionary,
) -> (Vec<CFRetained<CFType>>, Vec<CFRetained<CFType>>) {
    // SAFETY: every key and value of a CF dictionary is a CF object, so
    // viewing them as CFType is sound; the dictionary is not mutated (it is
    // our own snapshot copy of the registry property).
    let dict = unsafe { dict.cast_unchecked::<CFType, CFType>() };
    dict.to_vecs()
}
