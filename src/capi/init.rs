// SPDX-License-Identifier: BSD-2-Clause
//! Making the C ABI's zone: `pcpu_zone_init` (and the host simulation's
//! `pcpu_sim_machine_new`) check that the zone fits the C ABI ([`fits_c`]), install it, and
//! move every `COUNTER_U64_DEFINE_EARLY` counter's early count into a slot of it
//! ([`move_into`]); `pcpu_early_base` says what the boot CPU's register holds until then.

use core::ffi::c_int;

use super::early::{self, early_variables};
use super::error::{code, PCPU_ECPU, PCPU_EFULL, PCPU_EINSTALLED, PCPU_EINVAL, PCPU_OK};
use super::protect;
use super::slot;
use super::zone::{current_zone, pcpu_zone_layout};
use crate::zone::global;
use crate::{arch, baseline, Zone, ZoneLayout};

/// Installs the global zone on the memory `layout` describes, once, with the early counters.
///
/// Every `COUNTER_U64_DEFINE_EARLY` counter of the program gets a slot, with its early count.
///
/// `meta` (`meta_words` 64-bit words: a zero baseline per counter, a bitmap bit per counter
/// and the bitmap's summary levels, `PCPU_META_WORDS(len / 8)`) is the zone's metadata.
///
/// Returns 0, `PCPU_EINVAL` (NULL pointer), `PCPU_EINSTALLED`, the code of the first
/// broken layout rule (`PCPU_ENOCPUS`, `PCPU_ESTRIDE`, `PCPU_EMISALIGNED`, ...; a CPU's
/// counter area the CPU cannot write: `PCPU_EUNADDR`, on x86_64 not canonical, or
/// `PCPU_EOVERFLOW`, past the end of the address space),
/// `PCPU_EFULL` (no room for the early counters) or `PCPU_ECPU` (more than
/// `PCPU_NEST_CPUS` CPUs where the arch needs protection). On failure nothing changed.
/// Call it before other CPUs start: it moves the early counts, which adds must not race.
///
/// # Safety
/// As [`Zone::from_raw_parts`]: every CPU's counter area is valid memory used by nothing
/// else for the rest of the program, and so is the metadata.
///
/// ```
/// use pcpu_counter::capi::{pcpu_zone_init, pcpu_zone_layout, PCPU_ENOCPUS};
/// let bad = pcpu_zone_layout { base: 0x1000, stride: 64, offset: 0, len: 64, ncpus: 0 };
/// let mut meta = [0u64; 1];
/// assert_eq!(unsafe { pcpu_zone_init(&bad, meta.as_mut_ptr(), 1) }, PCPU_ENOCPUS);
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_zone_init(
    layout: *const pcpu_zone_layout,
    meta: *mut u64,
    meta_words: usize,
) -> c_int {
    if layout.is_null() || meta.is_null() {
        return PCPU_EINVAL;
    }
    // SAFETY: non-null and readable per the contract.
    let l = unsafe { *layout };
    let layout = ZoneLayout {
        base: l.base,
        stride: l.stride,
        offset: l.offset,
        len: l.len,
        ncpus: l.ncpus,
    };
    // SAFETY: the metadata is valid for `meta_words` words for ever, per the contract.
    let meta = unsafe { core::slice::from_raw_parts_mut(meta, meta_words) };
    // SAFETY: the memory contract is the caller's, as documented.
    match unsafe { install(layout, meta) } {
        Ok(zone) => {
            move_into(zone);
            PCPU_OK
        }
        Err(e) => e,
    }
}

/// Makes the zone and installs it: out of line, so that the zone's value (the two copies of
/// it on the way into the global) is off the stack before the early counters move (the
/// stack bound of `pcpu_zone_init`, `cargo xtask stack`).
///
/// # Safety
/// As `pcpu_zone_init`.
#[inline(never)]
unsafe fn install(
    layout: ZoneLayout,
    meta: &'static mut [u64],
) -> Result<&'static Zone<'static>, c_int> {
    // SAFETY: the caller's contract.
    let zone = unsafe { Zone::from_raw_parts(layout, meta) }.map_err(code)?;
    fits_c(&zone)?;
    global::install(zone).map_err(code)
}

/// Says what the boot CPU's per-CPU register holds until `pcpu_zone_init` (for early counters).
///
/// Early counters are then right whatever the register holds.
///
/// The inline `counter_u64_add` adds at register + `name`; an early counter's `name` starts
/// as its word's address, right while the register is 0. A kernel whose register holds
/// something else before the zone exists (a hart id in `tp`, a per-CPU pointer set at reset;
/// on i386 the base of the segment in `%fs`) calls this with that value on the boot CPU,
/// before the first add to an early counter and again after each change of the register
/// until `pcpu_zone_init`; the library rewrites every early `name` to word - `base`.
///
/// Returns 0, `PCPU_EINSTALLED` once a zone exists (early counters are slots then), or
/// `PCPU_EINVAL` when an early counter would read as NULL (`base` is its word's address).
/// On failure nothing changed.
///
/// # Safety
/// Runs on the boot CPU before other CPUs start, with nothing adding to an early counter
/// meanwhile (interrupts off), and from this call until the next one (or `pcpu_zone_init`)
/// the boot CPU's per-CPU register holds `base`.
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// assert_eq!(unsafe { pcpu_early_base(0x8000) }, PCPU_EINSTALLED);
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_early_base(base: usize) -> c_int {
    if current_zone().is_some() {
        return PCPU_EINSTALLED;
    }
    if early::rebase(base) {
        PCPU_OK
    } else {
        PCPU_EINVAL
    }
}

/// What a zone for the C ABI must hold beyond its layout rules: a slot for every
/// `COUNTER_U64_DEFINE_EARLY` counter (`PCPU_EFULL`), and no more CPUs than the nullary
/// `counter_enter()` keeps nesting for where the arch needs protection (`PCPU_ECPU`).
pub(crate) fn fits_c(zone: &Zone<'_>) -> Result<(), c_int> {
    if !protect::nest_fits(zone.ncpus()) {
        return Err(PCPU_ECPU);
    }
    if !fit(zone) {
        return Err(PCPU_EFULL);
    }
    Ok(())
}

/// Whether `zone` has a C slot for every early counter of the program.
pub(crate) fn fit(zone: &Zone<'_>) -> bool {
    // A zone at offset 0 never hands its first slot to C (it would read as NULL).
    let room = zone.capacity() - usize::from(zone.layout().offset == 0);
    early_variables().count() <= room
}

/// Gives every early counter a slot of `zone`, with its early count in CPU 0's slot; runs
/// once, when the C zone is made.
///
/// The caller checked [`fit`], and no add to an early counter runs meanwhile (see the
/// module's text).
pub(crate) fn move_into(zone: &Zone<'_>) {
    for var in early_variables() {
        // SAFETY: a live `counter_u64_t` variable the macro defined; nothing adds meanwhile.
        let word = early::word(unsafe { var.read_volatile() });
        // A fixed message, not `expect`: that would link `Error`'s `Debug` (and `core::fmt`)
        // into the C kernel library.
        let Ok(off) = slot::alloc_run(zone, 1, crate::Wait::NoWait) else {
            panic!("pcpu-counter: early counters fit (checked by `fit`)")
        };
        // SAFETY: the early word, a static `uint64_t` of the macro's, only reached atomically.
        let early = unsafe { baseline::take(word) };
        // SAFETY: a new slot of the zone: nobody adds to it before `var` holds it.
        unsafe { arch::store_slot(zone.slot_addr(0, off), early) };
        // SAFETY: as above; from now on adds go to the slot.
        unsafe { var.write_volatile(slot::handle(off)) };
    }
}
