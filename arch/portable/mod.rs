//! The portable fallback: a plain add on the current CPU's slot inside local protection.
//!
//! Used on archs without a primitive of their own. The slot is found from the platform's
//! current CPU ([`Platform::current_cpu`](crate::Platform::current_cpu)), which must be below
//! the zone's CPU count: a CPU out of range panics with its index instead of writing outside
//! the zone. Where 64-bit atomics are missing a remote read may tear unless the machine is a
//! uniprocessor (as FreeBSD assumes of i386 without CX8).

use crate::platform::{self, Protection};
use crate::Zone;

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
/// `off` is a live slot of `zone`.
#[inline]
pub(crate) unsafe fn add(zone: &Zone<'_>, off: usize, v: i64) {
    // The test-only feature drops this protection: an interrupt between the load and the
    // store of `add_protected` then loses an add, which the firmware's timer check must see.
    #[cfg(not(pcpu_counter_broken = "portable_unprotected_add"))]
    let _protection = Protection::acquire();
    // SAFETY: same contract, and protection is held (except in the test-only broken build,
    // where the add may lose updates but never touches memory outside this CPU's slot).
    unsafe { add_protected(zone, off, v) }
}

/// Adds `v` to the current CPU's slot; the caller holds local protection.
///
/// # Safety
/// `off` is a live slot of `zone`, and the caller holds local protection.
#[inline]
pub(crate) unsafe fn add_protected(zone: &Zone<'_>, off: usize, v: i64) {
    let cpu = platform::current_cpu();
    assert!(
        cpu < zone.ncpus(),
        "current CPU {cpu} is out of range (zone has {} CPUs)",
        zone.ncpus()
    );
    let slot = zone.slot_addr(cpu, off);
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

/// The plain add needs local protection, so `counter_enter` enters it.
#[inline(always)]
pub(crate) const fn needs_protection() -> bool {
    true
}

cfg_if::cfg_if! {
    if #[cfg(target_has_atomic = "64")] {
        use core::sync::atomic::{AtomicU64, Ordering};

        /// Reads a slot of any CPU with a 64-bit atomic load.
        ///
        /// # Safety
        /// `slot` is an aligned slot inside a live zone.
        #[inline]
        pub(crate) unsafe fn load_slot(slot: *mut u64) -> u64 {
            // SAFETY: aligned and live per the caller.
            unsafe { AtomicU64::from_ptr(slot) }.load(Ordering::Relaxed)
        }

        /// Writes a slot with a 64-bit atomic store.
        ///
        /// # Safety
        /// As `load_slot`; only the slot's owner (or the allocator, for an unused slot) writes.
        #[inline]
        pub(crate) unsafe fn store_slot(slot: *mut u64, value: u64) {
            // SAFETY: aligned and live per the caller.
            unsafe { AtomicU64::from_ptr(slot) }.store(value, Ordering::Relaxed)
        }
    } else {
        /// Reads a slot under local protection (uniprocessor assumption, see the module docs).
        ///
        /// # Safety
        /// `slot` is an aligned slot inside a live zone.
        #[inline]
        pub(crate) unsafe fn load_slot(slot: *mut u64) -> u64 {
            let _protection = Protection::acquire();
            // SAFETY: aligned and live per the caller.
            unsafe { slot.read_volatile() }
        }

        /// Writes a slot under local protection.
        ///
        /// # Safety
        /// As `load_slot`; only the slot's owner (or the allocator, for an unused slot) writes.
        #[inline]
        pub(crate) unsafe fn store_slot(slot: *mut u64, value: u64) {
            let _protection = Protection::acquire();
            // SAFETY: aligned and live per the caller.
            unsafe { slot.write_volatile(value) }
        }
    }
}

/// The portable fallback has no per-CPU register: the slot comes from the current CPU's
/// index, so there is nothing to set. Always returns `true`.
///
/// # Safety
/// None needed; `unsafe` only to match the other archs.
pub unsafe fn set_cpu_base(_base: usize) -> bool {
    true
}

// Host simulation: the simulation's current CPU answers `current_cpu`; binding keeps the
// block's address in a thread-local only for the area tag in its first word.
#[cfg(feature = "sim")]
#[path = "../host_base.rs"]
mod host_base;
#[cfg(feature = "sim")]
pub(crate) use host_base::{host_bind, host_unbind};
