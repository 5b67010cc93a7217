// SPDX-License-Identifier: BSD-2-Clause
//! `counter_u64_*` and the arrays, with FreeBSD's names.

use core::ffi::c_int;

use super::error::{code, PCPU_EFULL, PCPU_EINVAL, PCPU_ENOTINSTALLED, PCPU_OK};
use super::slot::{self, counter_u64_t, Target};
use super::zone::{self, current_zone};
use crate::zone::global::alloc_waiting;
use crate::{baseline, Wait};

/// FreeBSD's `M_NOWAIT`: never block; a full zone fails or takes a chunk without blocking.
///
/// A full zone fails at once, or, with chunk hooks (`pcpu_zone_grow`), takes a chunk its
/// `alloc` gives without blocking.
pub const M_NOWAIT: c_int = 0x0001;
/// FreeBSD's `M_WAITOK`: may block until a chunk comes or another CPU frees a slot.
///
/// A full zone with chunk hooks takes a chunk from `alloc` (which may sleep for it) and fails
/// only when `alloc` returns NULL (or a chunk the library refuses: misaligned, or shorter than
/// asked); without hooks it waits until another CPU frees a slot.
pub const M_WAITOK: c_int = 0x0002;
/// FreeBSD's `M_ZERO`: accepted and ignored (counters always start at 0).
pub const M_ZERO: c_int = 0x0100;

/// The wait a C `wait` flag asks for; `None` for flags FreeBSD rejects (neither or both).
fn waits(wait: c_int) -> Option<Wait> {
    match wait & !M_ZERO {
        M_NOWAIT => Some(Wait::NoWait),
        M_WAITOK => Some(Wait::WaitOk),
        _ => None,
    }
}

/// FreeBSD's `counter_u64_alloc(wait)`: a new counter reading 0, or NULL.
///
/// NULL when there is no zone, `wait` is neither `M_NOWAIT` nor `M_WAITOK`, the zone's chunk
/// hook (`pcpu_zone_grow`) gave no memory (or a chunk misaligned or shorter than asked, given
/// back), or (`M_NOWAIT`) the zone is full and has no hooks.
/// `M_WAITOK` on a full zone without hooks waits for a free slot.
///
/// ```
/// use pcpu_counter::capi::{counter_u64_alloc, M_NOWAIT};
/// assert!(counter_u64_alloc(M_NOWAIT).is_null()); // no zone installed in this doctest
/// ```
#[no_mangle]
pub extern "C" fn counter_u64_alloc(wait: c_int) -> counter_u64_t {
    let Some(wait) = waits(wait) else {
        return core::ptr::null_mut();
    };
    let Some(zone) = current_zone() else {
        return core::ptr::null_mut();
    };
    alloc_waiting(wait, || slot::alloc_run(zone, 1, wait))
        .map_or(core::ptr::null_mut(), slot::handle)
}

/// FreeBSD's `counter_u64_free(c)`; NULL is fine.
///
/// # Safety
/// `c` is NULL or a handle from `counter_u64_alloc` (or an array) not yet freed, that no
/// CPU uses any more. A pointer that is not a handle aborts with a message.
///
/// ```
/// unsafe { pcpu_counter::capi::counter_u64_free(core::ptr::null_mut()) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn counter_u64_free(c: counter_u64_t) {
    if !c.is_null() {
        let (zone, off) = zone::resolve(c);
        zone.free_run(off, 1);
    }
}

/// The out-of-line add behind `counter_u64_add(c, v)`: adds `v` on the current CPU.
///
/// The header's `static inline counter_u64_add` is the arch's instruction itself on x86_64
/// and aarch64 and calls this elsewhere.
///
/// # Safety
/// `c` is a live handle, and the current CPU's per-CPU register is set for the zone; or,
/// before any zone exists, `c` is a `COUNTER_U64_DEFINE_EARLY` counter (added to its word).
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// let c = counter_u64_alloc(M_WAITOK);
/// assert_eq!(pcpu_sim_bind(1), 0);
/// unsafe { pcpu_counter_add(c, 5) };
/// pcpu_sim_unbind();
/// assert_eq!(unsafe { counter_u64_fetch(c) }, 5);
/// # unsafe { counter_u64_free(c) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_counter_add(c: counter_u64_t, v: i64) {
    match slot::add_slot(c) {
        // SAFETY: a live slot of the C zone (the caller's contract); registers are the platform's.
        Some((zone, off)) => unsafe { zone.add(off, v) },
        // SAFETY: the caller's contract.
        None => unsafe { add_first(c, v, false) },
    }
}

/// The add before the add path knows the C zone: an early counter's word, or a slot found
/// the slow way (and the zone kept for next time). Out of line, so that the add path needs
/// no stack frame.
///
/// # Safety
/// As [`pcpu_counter_add`]; with `protected`, inside `counter_enter()`.
#[cold]
#[inline(never)]
pub(crate) unsafe fn add_first(c: counter_u64_t, v: i64, protected: bool) {
    let target = zone::target(c);
    slot::remember(&target);
    match target {
        // SAFETY: a live slot of the C zone (the caller's contract), protected if asked.
        Target::Slot(zone, off) if protected => unsafe { zone.add_protected(off, v) },
        // SAFETY: a live slot of the C zone (the caller's contract).
        Target::Slot(zone, off) => unsafe { zone.add(off, v) },
        // SAFETY: an early counter's word (the caller's contract), only reached atomically.
        Target::Early(word) => unsafe { baseline::add(word, v as u64) },
    }
}

/// FreeBSD's `counter_u64_fetch(c)`: the sum over all CPUs since the last zero.
///
/// # Safety
/// `c` is a live handle, or before any zone exists an early counter.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// let c = counter_u64_alloc(M_NOWAIT);
/// assert_eq!(unsafe { counter_u64_fetch(c) }, 0);
/// # unsafe { counter_u64_free(c) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn counter_u64_fetch(c: counter_u64_t) -> u64 {
    match zone::target(c) {
        Target::Slot(zone, off) => zone.fetch(off),
        // SAFETY: an early counter's word (the caller's contract), only reached atomically.
        Target::Early(word) => unsafe { baseline::load(word) },
    }
}

/// FreeBSD's `counter_u64_zero(c)`, lossless without an IPI.
///
/// # Safety
/// `c` is a live handle, or before any zone exists an early counter.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let c = counter_u64_alloc(M_NOWAIT);
/// assert_eq!(pcpu_sim_bind(0), 0);
/// unsafe { pcpu_counter_add(c, 9); counter_u64_zero(c) };
/// pcpu_sim_unbind();
/// assert_eq!(unsafe { counter_u64_fetch(c) }, 0);
/// # unsafe { counter_u64_free(c) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn counter_u64_zero(c: counter_u64_t) {
    match zone::target(c) {
        Target::Slot(zone, off) => drop(zone.fetch_and_zero(off)),
        // SAFETY: an early counter's word (the caller's contract), only reached atomically.
        Target::Early(word) => drop(unsafe { baseline::take(word) }),
    }
}

/// Returns the count since the last zero and zeroes it, as one step: no add is lost.
///
/// As [`crate::Counter::fetch_and_zero`].
///
/// # Safety
/// `c` is a live handle, or before any zone exists an early counter.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let c = counter_u64_alloc(M_NOWAIT);
/// assert_eq!(pcpu_sim_bind(0), 0);
/// unsafe { pcpu_counter_add(c, 9) };
/// pcpu_sim_unbind();
/// assert_eq!(unsafe { pcpu_counter_fetch_and_zero(c) }, 9);
/// assert_eq!(unsafe { counter_u64_fetch(c) }, 0);
/// # unsafe { counter_u64_free(c) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_counter_fetch_and_zero(c: counter_u64_t) -> u64 {
    match zone::target(c) {
        Target::Slot(zone, off) => zone.fetch_and_zero(off),
        // SAFETY: an early counter's word (the caller's contract), only reached atomically.
        Target::Early(word) => unsafe { baseline::take(word) },
    }
}

/// `COUNTER_ARRAY_ALLOC(a, n, wait)`: `n` counters in one run of slots, handles in `a`.
///
/// Allocates `n` counters reading 0 as one run of adjacent slots, storing their handles in
/// `a[0..n]` (the contiguous form of FreeBSD's `COUNTER_ARRAY_ALLOC(a, n, wait)`). All or
/// nothing: on failure no slot and no handle stays allocated (entries of `a` may have been
/// set to NULL).
///
/// Returns 0, `PCPU_EINVAL` (NULL `a`, `n == 0`, bad `wait`), `PCPU_ENOTINSTALLED`, or
/// `PCPU_EFULL` (with `M_NOWAIT`: no run of `n` free slots now; with
/// either flag: `n` is more than the zone can ever hold).
///
/// # Safety
/// `a` is NULL or valid for writing `n` handles.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let mut a = [core::ptr::null_mut(); 3];
/// assert_eq!(unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 3, M_NOWAIT) }, 0);
/// assert_eq!(unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 99, M_NOWAIT) }, PCPU_EFULL);
/// # unsafe { counter_u64_array_free(a.as_mut_ptr(), 3) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn counter_u64_array_alloc(
    a: *mut counter_u64_t,
    n: usize,
    wait: c_int,
) -> c_int {
    let (Some(wait), false, true) = (waits(wait), a.is_null(), n > 0) else {
        return PCPU_EINVAL;
    };
    let Some(zone) = current_zone() else {
        return PCPU_ENOTINSTALLED;
    };
    // A zone that grows holds a run of `max_run` in a chunk; one that does not, a run of one
    // less (its offset 0 is never a C counter).
    if n > zone.max_run() - usize::from(!zone.grows()) {
        // Could never fit (offset 0 is never a C counter, and a run stays in one chunk):
        // fail even under `M_WAITOK`, which would wait for ever.
        return PCPU_EFULL;
    }
    match alloc_waiting(wait, || slot::alloc_run(zone, n, wait)).map_err(code) {
        Ok(off) => {
            for i in 0..n {
                // SAFETY: `a` is valid for `n` writes per the contract.
                unsafe { a.add(i).write(slot::handle(off + 8 * i)) };
            }
            PCPU_OK
        }
        Err(e) => e,
    }
}

/// Frees `n` handles of `a` (FreeBSD's `COUNTER_ARRAY_FREE(a, n)`); NULL entries are fine.
///
/// # Safety
/// `a` is valid for reading `n` handles, each as `counter_u64_free` requires.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let mut a = [core::ptr::null_mut(); 2];
/// assert_eq!(unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 2, M_WAITOK) }, 0);
/// unsafe { counter_u64_array_free(a.as_mut_ptr(), 2) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn counter_u64_array_free(a: *mut counter_u64_t, n: usize) {
    for i in 0..n {
        // SAFETY: the caller's contract.
        unsafe { counter_u64_free(*a.add(i)) }
    }
}

/// Zeroes `n` counters of `a` (FreeBSD's `COUNTER_ARRAY_ZERO(a, n)`).
///
/// # Safety
/// `a` is valid for reading `n` live handles.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let mut a = [core::ptr::null_mut(); 2];
/// assert_eq!(unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 2, M_WAITOK) }, 0);
/// assert_eq!(pcpu_sim_bind(0), 0);
/// unsafe { pcpu_counter_add(a[1], 4); counter_u64_array_zero(a.as_ptr(), 2) };
/// pcpu_sim_unbind();
/// assert_eq!(unsafe { counter_u64_fetch(a[1]) }, 0);
/// # unsafe { counter_u64_array_free(a.as_mut_ptr(), 2) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn counter_u64_array_zero(a: *const counter_u64_t, n: usize) {
    for i in 0..n {
        // SAFETY: the caller's contract.
        unsafe { counter_u64_zero(*a.add(i)) }
    }
}

/// Fetches `n` counters of `a` into `dst[0..n]` (FreeBSD's `COUNTER_ARRAY_COPY(a, dst, n)`).
///
/// In one pass over the CPUs when they are one run (as `counter_u64_array_alloc` makes them).
///
/// # Safety
/// `a` is valid for reading `n` live handles and `dst` for writing `n` values.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let mut a = [core::ptr::null_mut(); 2];
/// assert_eq!(unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 2, M_WAITOK) }, 0);
/// assert_eq!(pcpu_sim_bind(0), 0);
/// unsafe { pcpu_counter_add(a[1], 4) };
/// pcpu_sim_unbind();
/// let mut out = [9u64; 2];
/// unsafe { counter_u64_array_copy(a.as_ptr(), out.as_mut_ptr(), 2) };
/// assert_eq!(out, [0, 4]);
/// # unsafe { counter_u64_array_free(a.as_mut_ptr(), 2) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn counter_u64_array_copy(a: *const counter_u64_t, dst: *mut u64, n: usize) {
    // SAFETY: the caller's contract; a run of adjacent slots is read as one group.
    if unsafe { super::group::array_copy(a, dst, n) } {
        return;
    }
    for i in 0..n {
        // SAFETY: the caller's contract.
        unsafe { *dst.add(i) = counter_u64_fetch(*a.add(i)) }
    }
}
