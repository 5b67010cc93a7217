//! The table of C handles: `counter_u64_t` points at one of its entries.
//!
//! A Rust [`Counter`] is a value (zone, slot offset, zero baseline); C wants a pointer that
//! stays valid until `counter_u64_free`. The entries live in static memory, so the C ABI needs
//! no allocator; an entry is claimed with a compare-and-swap and released after its counter
//! was dropped.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::Counter;

/// How many counters the C ABI can hand out at once (arrays use one entry per element).
pub const PCPU_CAPI_HANDLES: usize = 4096;

/// One entry of the handle table: what a `counter_u64_t` points at. Opaque to C.
pub struct CounterHandle {
    used: AtomicBool,
    counter: UnsafeCell<MaybeUninit<Counter<'static>>>,
}

// SAFETY: `counter` is written only by the thread that claimed the entry (before it hands
// the pointer out) and dropped only by `counter_u64_free`, whose caller owns the handle; the
// shared uses in between are `&Counter`, which is `Sync`.
unsafe impl Sync for CounterHandle {}

/// FreeBSD's `counter_u64_t`: a handle from `counter_u64_alloc`, or NULL.
pub type counter_u64_t = *mut CounterHandle;

#[allow(clippy::declare_interior_mutable_const)] // Only used to initialise `TABLE`.
const FREE: CounterHandle = CounterHandle {
    used: AtomicBool::new(false),
    counter: UnsafeCell::new(MaybeUninit::uninit()),
};

static TABLE: [CounterHandle; PCPU_CAPI_HANDLES] = [FREE; PCPU_CAPI_HANDLES];

/// Claims a free entry, fills it with `counter` and returns its handle; gives `counter`
/// back when every entry is in use.
pub(crate) fn claim(counter: Counter<'static>) -> Result<counter_u64_t, Counter<'static>> {
    for entry in &TABLE {
        if !entry.used.load(Ordering::Relaxed)
            && entry
                .used
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            // SAFETY: the CAS made this thread the entry's only owner; nobody reads it until
            // the handle below is published.
            unsafe { (*entry.counter.get()).write(counter) };
            return Ok(entry as *const CounterHandle as counter_u64_t);
        }
    }
    Err(counter)
}

/// Claims `out.len()` entries for the counters `make(i)` makes, or none: when no entry is
/// left for counter `i`, every counter made so far is dropped, their entries released, and
/// `Err(i)` returned (`make` was not called past `i`).
pub(crate) fn claim_all(
    out: &mut [counter_u64_t],
    mut make: impl FnMut(usize) -> Counter<'static>,
) -> Result<(), usize> {
    for i in 0..out.len() {
        match claim(make(i)) {
            Ok(handle) => out[i] = handle,
            Err(counter) => {
                drop(counter);
                for handle in &mut out[..i] {
                    // SAFETY: claimed just above and not yet given to the caller.
                    unsafe { release(*handle) };
                    *handle = core::ptr::null_mut();
                }
                return Err(i);
            }
        }
    }
    Ok(())
}

/// The counter behind a handle.
///
/// # Safety
/// `handle` comes from [`claim`] and was not released.
#[inline(always)]
pub(crate) unsafe fn get<'h>(handle: counter_u64_t) -> &'h Counter<'static> {
    debug_assert!(is_entry(handle), "pcpu-counter: not a counter_u64_t handle");
    // SAFETY: per the contract the entry holds an initialised counter until release.
    unsafe { (*(*handle).counter.get()).assume_init_ref() }
}

/// Whether `handle` points at an entry of the table.
pub(crate) fn is_entry(handle: counter_u64_t) -> bool {
    let start = TABLE.as_ptr() as usize;
    let addr = handle as usize;
    let size = core::mem::size_of::<CounterHandle>();
    addr >= start && addr < start + PCPU_CAPI_HANDLES * size && (addr - start) % size == 0
}

/// Drops the counter behind `handle` (freeing its slot) and frees the entry.
///
/// # Safety
/// `handle` comes from [`claim`], was not released, and nothing uses it any more.
pub(crate) unsafe fn release(handle: counter_u64_t) {
    assert!(
        is_entry(handle),
        "pcpu-counter: counter_u64_free of {handle:p}, which is not a counter_u64_t handle"
    );
    // SAFETY: `handle` is an entry of the table (checked above), which lives for ever.
    let entry = unsafe { &*handle };
    assert!(
        entry.used.load(Ordering::Acquire),
        "pcpu-counter: counter_u64_free of {handle:p}, which is already free"
    );
    // SAFETY: per the contract the entry holds an initialised counter that nobody uses.
    unsafe {
        (*entry.counter.get()).assume_init_drop();
    }
    entry.used.store(false, Ordering::Release);
}

/// Entries in use (for tests: arrays that fail leave none behind).
pub(crate) fn in_use() -> usize {
    TABLE
        .iter()
        .filter(|e| e.used.load(Ordering::Relaxed))
        .count()
}
