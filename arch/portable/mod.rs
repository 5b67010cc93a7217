// SPDX-License-Identifier: BSD-2-Clause
//! The portable fallback: a plain add on the current CPU's slot inside local protection.
//!
//! Used on archs without a primitive of their own. There is no per-CPU register: the
//! platform supplies the current CPU's base (`platform::cpu_base`: in a kernel the register
//! value of the platform's current CPU ([`Platform::current_cpu`](crate::Platform::current_cpu))
//! in [`Area::global`](crate::Area::global), which panics with the CPU's index when it is out
//! of range instead of writing outside the area). Where 64-bit atomics are missing a remote
//! read may tear unless the machine is a uniprocessor (as FreeBSD assumes of i386 without
//! CX8).

pub use super::defaults::*;
use crate::platform::{self, Protection};
use crate::Error;

/// The arch this build's primitives are for.
#[cfg(not(pcpu_counter_broken = "portable_unprotected_add"))]
pub const NAME: &str = "portable (plain add under local protection)";
/// The arch this build's primitives are for: broken on purpose (test only).
#[cfg(pcpu_counter_broken = "portable_unprotected_add")]
pub const NAME: &str =
    "portable (plain add WITHOUT protection: cfg pcpu_counter_broken, test only)";

/// Adds `v` to the current CPU's slot at offset `off`, inside local protection.
///
/// # Safety
/// `off` is a live slot of the area the platform's base is in.
#[inline]
pub(crate) unsafe fn add(off: usize, v: i64) {
    // The test-only feature drops this protection: an interrupt between the load and the
    // store of `add_protected` then loses an add, which the firmware's timer check must see.
    #[cfg(not(pcpu_counter_broken = "portable_unprotected_add"))]
    let _protection = Protection::acquire();
    // SAFETY: same contract, and protection is held (except in the test-only broken build,
    // where the add may lose updates but never touches memory outside this CPU's slot).
    unsafe { add_protected(off, v) }
}

/// Adds `v` to the current CPU's slot; the caller holds local protection.
///
/// # Safety
/// As [`add`], and the caller holds local protection.
#[inline]
pub(crate) unsafe fn add_protected(off: usize, v: i64) {
    let slot = platform::cpu_base().wrapping_add(off) as *mut u64;
    cfg_if::cfg_if! {
        if #[cfg(target_has_atomic = "64")] {
            // SAFETY: the slot is this CPU's own, inside the zone; protection keeps every
            // other writer of it (this CPU's interrupts, preemption) away, and the 64-bit
            // atomic load and store keep remote readers from seeing a torn value.
            unsafe { store_slot(slot, load_slot(slot).wrapping_add(v as u64)) }
        } else {
            // Without 64-bit atomics `load_slot`/`store_slot` each enter protection; the caller
            // holds it already, so the read-modify-write is plain, under that one protection
            // (on Cortex-M: one PRIMASK save/`cpsid`/restore per `add`, not three).
            // SAFETY: as above; remote readers read the slot under protection too
            // (`load_slot`), which on a multi-core machine must exclude the other cores.
            unsafe { slot.write_volatile(slot.read_volatile().wrapping_add(v as u64)) }
        }
    }
}

/// Adds `v` to the current CPU's slot at `off` and returns the slot's value before the add:
/// the add inside local protection, then the slot read back. With neither an interrupt nor a
/// migration between them, the value read less `v` is the value before.
///
/// # Safety
/// As [`add`].
#[inline]
pub(crate) unsafe fn fetch_add(off: usize, v: i64) -> u64 {
    let _protection = Protection::acquire();
    // SAFETY: per the caller; protection is held, as `add_protected` asks.
    unsafe { add_protected(off, v) };
    let slot = platform::cpu_base().wrapping_add(off) as *mut u64;
    // SAFETY: the slot just added to, still this CPU's under protection.
    let new = unsafe { load_slot(slot) };
    new.wrapping_sub(v as u64)
}

/// The plain add needs local protection, so `counter_enter` enters it.
#[inline(always)]
pub(crate) const fn needs_protection() -> bool {
    true
}

/// Reads a slot under local protection, without 64-bit atomics (uniprocessor assumption,
/// see the module docs; with them, the default's atomic load).
///
/// # Safety
/// `slot` is an aligned slot inside a live zone.
#[cfg(not(target_has_atomic = "64"))]
#[inline]
pub(crate) unsafe fn load_slot(slot: *mut u64) -> u64 {
    let _protection = Protection::acquire();
    // SAFETY: aligned and live per the caller.
    unsafe { slot.read_volatile() }
}

/// Writes a slot under local protection, without 64-bit atomics (with them, the default's
/// atomic store).
///
/// # Safety
/// As `load_slot`; only the slot's owner (or the allocator, for an unused slot) writes.
#[cfg(not(target_has_atomic = "64"))]
#[inline]
pub(crate) unsafe fn store_slot(slot: *mut u64, value: u64) {
    let _protection = Protection::acquire();
    // SAFETY: aligned and live per the caller.
    unsafe { slot.write_volatile(value) }
}

/// The portable fallback has no per-CPU register: the platform supplies each CPU's base, so
/// there is nothing to set, and nothing can fail.
///
/// # Safety
/// None needed; `unsafe` only to match the other archs.
pub unsafe fn set_cpu_base(_base: usize) -> Result<(), Error> {
    Ok(())
}

/// The add always takes this CPU's base from the platform's hooks: there is no register (the
/// defaults' `REGISTER` and `current_base` name and ask the platform).
pub(crate) const BASE_FROM_PLATFORM: bool = true;
