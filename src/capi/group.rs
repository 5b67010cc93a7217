// SPDX-License-Identifier: BSD-2-Clause
//! Group reads from C: a run of counters read CPU by CPU in one pass.

use core::ffi::c_int;

use super::error::{code, PCPU_EINVAL, PCPU_ENOTINSTALLED, PCPU_OK};
use super::slot::counter_u64_t;
use super::zone::current_zone;

/// Checks the arguments of a group call and runs `read` on the zone, the run's first offset
/// and the `n` values of `dst`.
///
/// # Safety
/// `dst` is NULL or valid for writing `n` values.
unsafe fn run(
    first: counter_u64_t,
    n: usize,
    dst: *mut u64,
    read: impl FnOnce(&crate::Zone<'_>, usize, &mut [u64]) -> Result<(), crate::Error>,
) -> c_int {
    if first.is_null() || dst.is_null() {
        return PCPU_EINVAL;
    }
    let Some(zone) = current_zone() else {
        return PCPU_ENOTINSTALLED;
    };
    let out: &mut [u64] = match n {
        // An empty run: `dst` is never read or written (nor need it be aligned).
        0 => &mut [],
        // SAFETY: `dst` is valid for `n` writes (the caller's contract) and not NULL.
        _ => unsafe { core::slice::from_raw_parts_mut(dst, n) },
    };
    match read(zone, first as usize, out) {
        Ok(()) => PCPU_OK,
        Err(e) => code(e),
    }
}

/// Reads the `n` adjacent counters from `first` into `dst[0..n]`, in one pass over the CPUs.
///
/// The counters are a run as `counter_u64_array_alloc` makes them (`a[0]`, `a[1]`, ...);
/// each CPU's run of slots is read in order. Each value is what `counter_u64_fetch` would
/// read.
///
/// Returns 0, `PCPU_EINVAL` (NULL `first` or `dst`, a run not inside the zone; `dst` is then
/// left as it is) or `PCPU_ENOTINSTALLED`. `n` 0 is an empty run: 0 when `first` is a
/// counter of the zone, nothing read or written.
///
/// # Safety
/// `dst` is NULL or valid for writing `n` values.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(4, 64), 0);
/// let mut a = [core::ptr::null_mut(); 3];
/// assert_eq!(unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 3, M_WAITOK) }, 0);
/// assert_eq!(pcpu_sim_bind(3), 0);
/// unsafe { pcpu_counter_add(a[2], 4) };
/// pcpu_sim_unbind();
/// let mut out = [9u64; 3];
/// assert_eq!(unsafe { pcpu_counter_group_fetch(a[0], 3, out.as_mut_ptr()) }, 0);
/// assert_eq!(out, [0, 0, 4]);
/// assert_eq!(unsafe { pcpu_counter_group_fetch(a[0], 1000, out.as_mut_ptr()) }, PCPU_EINVAL);
/// assert_eq!(unsafe { pcpu_counter_group_fetch(a[0], 0, out.as_mut_ptr()) }, 0); // empty
/// assert_eq!(out, [0, 0, 4]);
/// # unsafe { counter_u64_array_free(a.as_mut_ptr(), 3) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_counter_group_fetch(
    first: counter_u64_t,
    n: usize,
    dst: *mut u64,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { run(first, n, dst, |zone, off, out| zone.fetch_range(off, out)) }
}

/// As `pcpu_counter_group_fetch`, and zeroes each counter losslessly with its read.
///
/// Each counter is zeroed as one step with its read, with no IPI: the deltas of successive calls add up, with a final fetch, to exactly every add
/// made, and an add racing with the call is in this delta or the next, never both. Nothing
/// is zeroed when an error is returned.
///
/// # Safety
/// `dst` is NULL or valid for writing `n` values.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// let mut a = [core::ptr::null_mut(); 2];
/// assert_eq!(unsafe { counter_u64_array_alloc(a.as_mut_ptr(), 2, M_WAITOK) }, 0);
/// assert_eq!(pcpu_sim_bind(1), 0);
/// unsafe { pcpu_counter_add(a[0], 6) };
/// pcpu_sim_unbind();
/// let mut out = [0u64; 2];
/// assert_eq!(unsafe { pcpu_counter_group_fetch_and_zero(a[0], 2, out.as_mut_ptr()) }, 0);
/// assert_eq!((out, unsafe { counter_u64_fetch(a[0]) }), ([6, 0], 0));
/// # unsafe { counter_u64_array_free(a.as_mut_ptr(), 2) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_counter_group_fetch_and_zero(
    first: counter_u64_t,
    n: usize,
    dst: *mut u64,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        run(first, n, dst, |zone, off, out| {
            zone.fetch_and_zero_range(off, out)
        })
    }
}

/// `COUNTER_ARRAY_COPY`: `n` handles that are one run of adjacent slots of the zone (as
/// `counter_u64_array_alloc` makes them) are read as one group; other handles one by one.
///
/// # Safety
/// As `counter_u64_array_copy`.
pub(crate) unsafe fn array_copy(a: *const counter_u64_t, dst: *mut u64, n: usize) -> bool {
    if n == 0 || current_zone().is_none() {
        return false;
    }
    // SAFETY: `a` is valid for `n` reads (the caller's contract).
    let handles = unsafe { core::slice::from_raw_parts(a, n) };
    let first = handles[0] as usize;
    let adjacent = handles
        .iter()
        .enumerate()
        .all(|(i, &h)| Some(h as usize) == first.checked_add(8 * i));
    // SAFETY: `dst` is valid for `n` writes (the caller's contract).
    adjacent && unsafe { pcpu_counter_group_fetch(handles[0], n, dst) } == PCPU_OK
}
