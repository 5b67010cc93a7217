// SPDX-License-Identifier: BSD-2-Clause
//! `counter_ratecheck` from C, with FreeBSD's `struct counter_rate` and a tick hook.

use crate::atomic::{AtomicU32, AtomicUsize, Ordering};
use core::ffi::c_int;

use super::slot::counter_u64_t;
use super::zone;
use crate::ratecheck::RateState;

/// FreeBSD's `struct counter_rate`: the state of one `counter_ratecheck` limit.
///
/// Initialise it as FreeBSD does:
/// `struct counter_rate cr = { .cr_rate = counter_u64_alloc(M_WAITOK) };` (the other fields
/// 0), and touch the other fields only through `counter_ratecheck`.
#[repr(C)]
#[derive(Debug)]
pub struct counter_rate {
    /// Events since the last second (a counter handle).
    pub cr_rate: counter_u64_t,
    /// 1 while a CPU resets the second.
    pub cr_lock: c_int,
    /// Ticks at the last reset.
    pub cr_ticks: c_int,
    /// -1 once over the limit in the current second, else 0.
    pub cr_over: c_int,
}

// The three fields after `cr_rate` are a `RateState`, which has the same layout.
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(counter_rate, cr_ticks) - offset_of!(counter_rate, cr_lock) == 4);
    assert!(offset_of!(counter_rate, cr_over) - offset_of!(counter_rate, cr_lock) == 8);
    assert!(core::mem::size_of::<RateState>() == 12);
    assert!(core::mem::align_of::<RateState>() == 4);
};

/// The tick hook (`uint32_t (*)(void)`, as a `usize`; 0 when unset) and ticks per second.
static TICKS: AtomicUsize = AtomicUsize::new(0);
static HZ: AtomicU32 = AtomicU32::new(0);

/// Sets the tick source of `counter_ratecheck`: `now()` ticks, `hz` per second.
///
/// `now()` returns the ticks (they may wrap) and `hz` ticks make one second (FreeBSD's `ticks` and `hz`). Until it is
/// called, a library built with `std` uses a monotonic millisecond clock, and one without
/// `std` sees time stand still (a second never ends). `now == NULL` or `hz == 0` resets to
/// that default.
///
/// ```
/// extern "C" fn ticks() -> u32 { 42 }
/// pcpu_counter::capi::pcpu_set_ticks(Some(ticks), 100);
/// ```
#[no_mangle]
pub extern "C" fn pcpu_set_ticks(now: Option<extern "C" fn() -> u32>, hz: u32) {
    match now {
        Some(f) if hz != 0 => {
            HZ.store(hz, Ordering::Relaxed);
            TICKS.store(f as usize, Ordering::Release);
        }
        _ => TICKS.store(0, Ordering::Release),
    }
}

/// The current tick and ticks per second, from the hook or the default.
fn clock() -> (u32, u32) {
    let f = TICKS.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: only `pcpu_set_ticks` stores a non-zero value, and it stores a function of
        // this type.
        let f: extern "C" fn() -> u32 = unsafe { core::mem::transmute(f) };
        return (f(), HZ.load(Ordering::Relaxed));
    }
    #[cfg(feature = "std")]
    {
        let c = crate::ratecheck::Clock::monotonic();
        ((c.now)(), c.hz)
    }
    #[cfg(not(feature = "std"))]
    (0, u32::MAX)
}

/// FreeBSD's `counter_ratecheck(cr, limit)`: 0 under the limit, -1 over, >0 at a new second.
///
/// Counts one event on the current CPU; returns 0 while this second's events are within `limit`, -1 over it, and at the first event of a
/// new second the previous second's count if that was over `limit`. MP-safe: one CPU wins
/// the reset, others racing with it skip their event.
///
/// # Safety
/// `cr` points at a `struct counter_rate` with a live `cr_rate`, used by nothing but
/// `counter_ratecheck`; the current CPU's per-CPU register is set for the zone.
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// extern "C" fn ticks() -> u32 { 500 }
/// pcpu_set_ticks(Some(ticks), 100);
/// assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let mut cr = counter_rate { cr_rate: counter_u64_alloc(M_WAITOK), cr_lock: 0, cr_ticks: 0, cr_over: 0 };
/// assert_eq!(pcpu_sim_bind(0), 0);
/// let got: Vec<i64> = (0..3).map(|_| unsafe { counter_ratecheck(&mut cr, 2) }).collect();
/// pcpu_sim_unbind();
/// assert_eq!(got, [0, 0, -1]);
/// # unsafe { counter_u64_free(cr.cr_rate) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn counter_ratecheck(cr: *mut counter_rate, limit: i64) -> i64 {
    // SAFETY: `cr_lock`, `cr_ticks`, `cr_over` are laid out as a `RateState` (asserted
    // above), and only `counter_ratecheck` touches them, with atomics.
    let state = unsafe { &*(core::ptr::addr_of_mut!((*cr).cr_lock) as *const RateState) };
    // SAFETY: `cr` is valid per the contract.
    let (zone, off) = zone::resolve(unsafe { (*cr).cr_rate });
    let (now, hz) = clock();
    state.check(&(zone, off), now, hz, limit)
}
