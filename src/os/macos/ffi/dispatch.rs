//! The macOS memory-pressure notification: a libdispatch
//! `DISPATCH_SOURCE_TYPE_MEMORYPRESSURE` source whose handler wakes the
//! daemon loop at once.
//!
//! `EVFILT_VM`/`NOTE_VM_PRESSURE` kqueue filters no longer attach on current
//! macOS; dispatch is the supported route (`doc/vm/memorystatus_notify.md`).
//! The handler runs on a global dispatch queue, stores the level flags it
//! received and notifies a `tokio::sync::Notify`, which [`MemoryPressureSource::wait`]
//! awaits. The event can lag the kernel's level, so the sampler still reads
//! `kern.memorystatus_vm_pressure_level` every tick.
//!
//! The handlers get the shared state through the source's context pointer:
//! one `Arc` reference is given to the source when it is created and taken
//! back by its cancel handler, which libdispatch runs once, after the last
//! event handler has returned. Dropping [`MemoryPressureSource`] cancels the
//! source.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dispatch2::{
    _dispatch_source_type_memorypressure, DispatchObject, DispatchQoS, DispatchQueue,
    DispatchRetained, DispatchSource, GlobalQueueIdentifier, dispatch_source_type_t,
};
use tokio::sync::Notify;

use crate::os::macos::parse::pressure::{CRITICAL, NORMAL, WARN};

// The level flags `pressure` writes out (`NOTE_MEMORYSTATUS_PRESSURE_*` of
// `bsd/sys/event.h`, `DISPATCH_MEMORYPRESSURE_*` of `dispatch/source.h`),
// against dispatch2's declarations.
const _: () = {
    use dispatch2::dispatch_source_memorypressure_flags_t as F;
    assert!(NORMAL == F::DISPATCH_MEMORYPRESSURE_NORMAL.0 as u64);
    assert!(WARN == F::DISPATCH_MEMORYPRESSURE_WARN.0 as u64);
    assert!(CRITICAL == F::DISPATCH_MEMORYPRESSURE_CRITICAL.0 as u64);
};

/// What the handlers share with the waiting side.
struct Shared {
    notify: Notify,
    /// The level flags of the latest event (0 before the first).
    last: AtomicU64,
    /// The source, for reading an event's data from the handler. Set before
    /// the source is activated; read only by the handler.
    source: std::sync::OnceLock<DispatchRetained<DispatchSource>>,
}

/// A registered memory-pressure source.
pub struct MemoryPressureSource {
    shared: Arc<Shared>,
}

/// The event handler. libdispatch passes the source's context, which is
/// the `Arc<Shared>` pointer set in [`MemoryPressureSource::open`].
extern "C" fn on_event(context: *mut c_void) {
    if context.is_null() {
        return;
    }
    // SAFETY: the context is the pointer from `Arc::into_raw` in `open`;
    // the reference it stands for is released only by `on_cancel`, which
    // libdispatch runs after the last event handler has returned, so the
    // `Shared` is alive for this call.
    let shared = unsafe { &*context.cast_const().cast::<Shared>() };
    let data = shared.source.get().map_or(0, |s| s.data() as u64);
    shared.last.store(data, Ordering::Relaxed);
    shared.notify.notify_one();
}

/// The cancel handler: gives back the reference the source held.
extern "C" fn on_cancel(context: *mut c_void) {
    if context.is_null() {
        return;
    }
    // SAFETY: the pointer came from `Arc::into_raw` in `open` and this
    // handler runs exactly once, after every event handler, so the
    // reference is taken back exactly once.
    drop(unsafe { Arc::from_raw(context.cast_const().cast::<Shared>()) });
}

impl MemoryPressureSource {
    /// Create and activate the source for normal, warn and critical
    /// events.
    pub fn open() -> Self {
        let shared = Arc::new(Shared {
            notify: Notify::new(),
            last: AtomicU64::new(0),
            source: std::sync::OnceLock::new(),
        });
        let queue = DispatchQueue::global_queue(GlobalQueueIdentifier::QualityOfService(
            DispatchQoS::UserInitiated,
        ));
        let kind: dispatch_source_type_t =
            (&raw const _dispatch_source_type_memorypressure).cast_mut();
        let mask = (NORMAL | WARN | CRITICAL) as usize;
        // SAFETY: the type is libdispatch's memory-pressure source type, the
        // handle is unused for it (0), the mask holds only the documented
        // level flags, and the queue is a valid global queue.
        let source = unsafe { DispatchSource::new(kind, 0, mask, Some(&queue)) };
        let context = Arc::into_raw(Arc::clone(&shared))
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: the context is a pointer the handlers below know how to
        // use (see `on_event`, `on_cancel`); it is set before activation, so
        // no handler can run without it.
        unsafe { source.set_context(context) };
        source.set_event_handler_f(on_event);
        source.set_cancel_handler_f(on_cancel);
        let _ = shared.source.set(source.clone());
        source.activate();
        Self { shared }
    }

    /// Wait for the next pressure event; the level flags it carried
    /// (see [`crate::os::macos::parse::pressure::level_from_dispatch_mask`]).
    pub async fn wait(&self) -> u64 {
        self.shared.notify.notified().await;
        self.shared.last.load(Ordering::Relaxed)
    }
}

impl Drop for MemoryPressureSource {
    fn drop(&mut self) {
        if let Some(source) = self.shared.source.get() {
            source.cancel();
        }
    }
}
