// SPDX-License-Identifier: BSD-2-Clause
//! `struct pcpu_approx`: the approximate counter ([`crate::ApproxCounter`]) from C.
//!
//! The caller owns the struct (static, embedded or on its heap); `pcpu_approx_init` gives it
//! two slots of the C zone (the counter and its count of sixteens) and `pcpu_approx_free`
//! returns them. The protocol and its bound are `ApproxCounter`'s (docs/reading.md).

use core::cmp::Ordering;
use core::ffi::c_int;

use super::error::{code, PCPU_ENOTINSTALLED, PCPU_OK};
use super::slot::{self, counter_u64_t};
use super::zone::{self, current_zone};
use crate::approx;

/// An approximate counter (`ApproxCounter`): an O(1) read within a stated bound.
///
/// `pcpu_approx_read` is one load, at most `ncpus * (batch - 1)` under the precise value.
/// Set up by `pcpu_approx_init`; touch its fields only through the
/// `pcpu_approx_*` calls, and do not register `pa_counter` with `pcpu_sysctl_add_counter` (a
/// delta export would zero its slots but not `pa_total`). Aligning it to 128 bytes keeps `pa_total`, which other CPUs write
/// once every `batch` adds, off the cache lines of the fields every add reads.
#[repr(C)]
pub struct pcpu_approx {
    /// The counter's slot: its `counter_u64_t` value, widened to 64 bits.
    pub pa_counter: u64,
    /// The slot of its count of multiples of 16, per CPU (the same way).
    pub pa_sixteens: u64,
    /// The batch (a power of two from 16 to 2^32).
    pub pa_batch: u64,
    /// Padding: `pa_total` starts 128 bytes into the struct.
    pub pa_pad: [u64; 13],
    /// The shared approximate total.
    pub pa_total: u64,
    /// Padding to 256 bytes.
    pub pa_pad2: [u64; 15],
}

const _: () = assert!(core::mem::offset_of!(pcpu_approx, pa_total) == 128);
const _: () = assert!(core::mem::size_of::<pcpu_approx>() == 256);

/// A slot's `counter_u64_t` from its widened value (a slot offset always fits a `usize`:
/// `pcpu_approx_init` stored it from one).
fn handle(widened: u64) -> counter_u64_t {
    widened as usize as counter_u64_t
}

/// The zone, offsets and high mask behind `a`; aborts as `zone::resolve` when its slots are
/// not the C zone's.
///
/// # Safety
/// `a` points to a `pcpu_approx` set up by `pcpu_approx_init` and not yet freed.
unsafe fn parts(a: *const pcpu_approx) -> (&'static crate::Zone<'static>, usize, usize, u64) {
    // SAFETY: per the caller.
    let a = unsafe { &*a };
    let (zone, off) = zone::resolve(handle(a.pa_counter));
    let (_, sixteens) = zone::resolve(handle(a.pa_sixteens));
    (zone, off, sixteens, !(a.pa_batch / 16 - 1))
}

/// Sets up `a` with two new slots of the C zone and batch `batch`; it reads 0.
///
/// Returns 0; `PCPU_EINVAL` for a batch that is not a power of two from 16 to 2^32;
/// `PCPU_ENOTINSTALLED` without a zone; `PCPU_EFULL` when the zone has not two free slots.
/// On an error nothing is allocated and `a` is not written.
///
/// # Safety
/// `a` is valid for writes of a `pcpu_approx`, not one that is set up (that would leak its
/// slots).
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// let mut a = core::mem::MaybeUninit::<pcpu_approx>::uninit();
/// assert_eq!(unsafe { pcpu_approx_init(a.as_mut_ptr(), 10) }, PCPU_EINVAL);
/// assert_eq!(unsafe { pcpu_approx_init(a.as_mut_ptr(), 16) }, PCPU_OK);
/// assert_eq!(pcpu_sim_bind(1), 0);
/// (0..40).for_each(|_| unsafe { pcpu_approx_add(a.as_mut_ptr(), 1) });
/// pcpu_sim_unbind();
/// assert_eq!(unsafe { pcpu_approx_read(a.as_ptr()) }, 32);
/// assert_eq!(unsafe { pcpu_approx_precise(a.as_ptr()) }, 40);
/// assert_eq!(unsafe { pcpu_approx_compare(a.as_ptr(), 40) }, 0);
/// # unsafe { pcpu_approx_free(a.as_mut_ptr()) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_approx_init(a: *mut pcpu_approx, batch: u64) -> c_int {
    if let Err(e) = approx::batch_high(batch) {
        return code(e);
    }
    let Some(zone) = current_zone() else {
        return PCPU_ENOTINSTALLED;
    };
    let off = match slot::alloc_run(zone, 1, crate::Wait::NoWait) {
        Ok(off) => off,
        Err(e) => return code(e),
    };
    let sixteens = match slot::alloc_run(zone, 1, crate::Wait::NoWait) {
        Ok(s) => s,
        Err(e) => {
            zone.free_run(off, 1);
            return code(e);
        }
    };
    // SAFETY: both slots were just allocated (cleared) and are used by nothing yet.
    let total = unsafe { approx::init_parts(zone, off, sixteens, batch) };
    // SAFETY: `a` is valid for writes (the caller's contract).
    unsafe {
        a.write(pcpu_approx {
            pa_counter: off as u64,
            pa_sixteens: sixteens as u64,
            pa_batch: batch,
            pa_pad: [0; 13],
            pa_total: total,
            pa_pad2: [0; 15],
        })
    };
    PCPU_OK
}

/// Adds `v` on the current CPU.
///
/// The plain counter's add, and more only when this CPU's slot crosses a multiple of 16.
///
/// # Safety
/// `a` is set up and not freed; the current CPU's per-CPU register is set for the zone.
#[no_mangle]
pub unsafe extern "C" fn pcpu_approx_add(a: *mut pcpu_approx, v: i64) {
    // SAFETY: per the caller.
    let (zone, off, sixteens, high) = unsafe { parts(a) };
    // SAFETY: live slots of the zone and the struct's own shared word (per the caller).
    unsafe {
        approx::add_parts(
            zone,
            off,
            sixteens,
            high,
            core::ptr::addr_of_mut!((*a).pa_total),
            v,
        )
    }
}

/// The approximate value: one load.
///
/// At most `under` (see `pcpu_approx_accuracy`) under the precise value.
///
/// # Safety
/// `a` is set up and not freed.
#[no_mangle]
pub unsafe extern "C" fn pcpu_approx_read(a: *const pcpu_approx) -> u64 {
    // SAFETY: the struct's shared word, only accessed atomically (per the caller).
    unsafe { approx::load_total(core::ptr::addr_of!((*a).pa_total).cast_mut()) }
}

/// The precise value: every CPU's slot summed, less the zero baseline.
///
/// # Safety
/// `a` is set up and not freed.
#[no_mangle]
pub unsafe extern "C" fn pcpu_approx_precise(a: *const pcpu_approx) -> u64 {
    // SAFETY: per the caller.
    let (zone, off, _, _) = unsafe { parts(a) };
    zone.fetch(off)
}

/// Writes the bound: how far the approximate value can be under and over the precise one.
///
/// Either pointer may be NULL.
///
/// # Safety
/// `a` is set up and not freed; `under` and `over` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn pcpu_approx_accuracy(
    a: *const pcpu_approx,
    under: *mut u64,
    over: *mut u64,
) {
    // SAFETY: per the caller.
    let (zone, _, _, _) = unsafe { parts(a) };
    // SAFETY: per the caller.
    let (u, o) = approx::accuracy(zone.ncpus(), unsafe { (*a).pa_batch });
    // SAFETY: per the caller.
    unsafe {
        if !under.is_null() {
            under.write(u);
        }
        if !over.is_null() {
            over.write(o);
        }
    }
}

/// -1, 0 or 1 as the value (as an `int64_t`) is below, at or above `threshold`.
///
/// From the approximate value when the threshold is outside its bound, else from the
/// precise sum.
///
/// # Safety
/// `a` is set up and not freed.
#[no_mangle]
pub unsafe extern "C" fn pcpu_approx_compare(a: *const pcpu_approx, threshold: i64) -> c_int {
    // SAFETY: per the caller.
    let (zone, off, _, _) = unsafe { parts(a) };
    // SAFETY: per the caller.
    let (under, over) = approx::accuracy(zone.ncpus(), unsafe { (*a).pa_batch });
    // SAFETY: per the caller.
    let approximate = unsafe { pcpu_approx_read(a) };
    let ordering = approx::compare_bounded(approximate, under, over, threshold)
        .unwrap_or_else(|| (zone.fetch(off) as i64).cmp(&threshold));
    match ordering {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

/// Returns the count since the last zero and zeroes it, as one step (exact).
///
/// The approximate value drops by the same amount.
///
/// # Safety
/// `a` is set up and not freed.
#[no_mangle]
pub unsafe extern "C" fn pcpu_approx_fetch_and_zero(a: *mut pcpu_approx) -> u64 {
    // SAFETY: per the caller.
    let (zone, off, _, _) = unsafe { parts(a) };
    let delta = zone.fetch_and_zero(off);
    // SAFETY: the struct's shared word (per the caller).
    unsafe { approx::add_total(core::ptr::addr_of_mut!((*a).pa_total), delta.wrapping_neg()) };
    delta
}

/// Returns `a`'s two slots to the zone; NULL is fine. `a` may be set up again afterwards.
///
/// # Safety
/// `a` is NULL, or set up and not freed, and no CPU uses it any more.
#[no_mangle]
pub unsafe extern "C" fn pcpu_approx_free(a: *mut pcpu_approx) {
    if a.is_null() {
        return;
    }
    // SAFETY: per the caller.
    let (zone, off, sixteens, _) = unsafe { parts(a) };
    zone.free_run(off, 1);
    zone.free_run(sixteens, 1);
    // SAFETY: per the caller; cleared so that a second free aborts instead of freeing
    // slots someone else may own by then.
    unsafe {
        (*a).pa_counter = 0;
        (*a).pa_sixteens = 0;
    }
}
