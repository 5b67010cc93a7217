// SPDX-License-Identifier: BSD-2-Clause
//! aarch64: the slot address from the per-CPU base plus the offset, then an LL/SC
//! `ldxr; add; stxr; cbnz` loop, or one LSE `ldadd` where the target enables `lse`.
//!
//! `ldadd` with a real destination register, not `stadd` (`ldadd` into `xzr`): as Linux 6.18
//! does for its per-CPU atomics, because a CPU may execute a `stadd` "far" (at the
//! interconnect or the cache that owns the line), and back-to-back far atomics are slow. A
//! `ldadd` is executed near, in the CPU's own cache, where a per-CPU slot already is.
//!
//! In a kernel each CPU's `TPIDR_EL1` holds that CPU's block of the zone ([`set_cpu_base`]).
//! Reading the register and then adding are separate instructions, so a migration may fall
//! in between; the add is then a real atomic on the old CPU's slot, which stays correct (the
//! slot is counted by every fetch, and the old CPU's own adds to it are atomic too). An
//! interrupt inside the LL/SC loop clears the exclusive monitor (or its handler's own
//! `stxr` does), so the `stxr` fails and the loop retries.
//!
//! Where the platform supplies the base (`cfg(pcpu_base_from_platform)`: at EL0, as in the host
//! simulation, `TPIDR_EL1` cannot be read) the base comes from `platform::cpu_base`, and the
//! same LL/SC (or LSE) code runs on it.

use core::arch::asm;

pub use super::defaults::*;
use crate::Error;

/// The arch this build's primitives are for.
#[cfg(not(target_feature = "lse"))]
pub const NAME: &str = "aarch64 (ldxr/stxr loop)";
/// The arch this build's primitives are for.
#[cfg(target_feature = "lse")]
pub const NAME: &str = "aarch64 (LSE ldadd)";

/// The current CPU's per-CPU base: `TPIDR_EL1`, or the platform's answer where it supplies
/// the base.
#[inline(always)]
fn cpu_base() -> usize {
    if cfg!(pcpu_base_from_platform) {
        return crate::platform::cpu_base();
    }
    let base: usize;
    // SAFETY: reading TPIDR_EL1 has no side effects (the crate runs at EL1 unless the platform
    // supplies the base, which returned above).
    unsafe { asm!("mrs {}, tpidr_el1", out(reg) base, options(nomem, nostack, preserves_flags)) };
    base
}

/// Adds `v` to the current CPU's slot at offset `off` from its per-CPU base.
///
/// # Safety
/// This CPU's per-CPU base must be its block of the zone that owns `off`, and `off` a live
/// slot.
#[inline(always)]
pub(crate) unsafe fn add(off: usize, v: i64) {
    let slot = cpu_base().wrapping_add(off) as *mut u64;
    // SAFETY: `slot` is a live, aligned slot of the zone (caller's contract); the add is an
    // atomic read-modify-write on it.
    unsafe { atomic_add(slot, v as u64) }
}

/// One `ldadd` (LSE) whose old value is discarded into a scratch register.
///
/// # Safety
/// `slot` is a live, aligned slot.
#[cfg(target_feature = "lse")]
#[inline(always)]
unsafe fn atomic_add(slot: *mut u64, v: u64) {
    // SAFETY: per the caller; `ldadd` is a single atomic add (the old value is unused).
    unsafe {
        asm!("ldadd {v}, {old}, [{slot}]", v = in(reg) v, old = out(reg) _, slot = in(reg) slot,
            options(nostack))
    }
}

/// The LL/SC loop: retry until the store-exclusive succeeds.
///
/// # Safety
/// `slot` is a live, aligned slot.
#[cfg(not(target_feature = "lse"))]
#[inline(always)]
unsafe fn atomic_add(slot: *mut u64, v: u64) {
    // SAFETY: per the caller; `stxr` stores only if nothing touched the slot (or took an
    // exception) since the `ldxr`, so a failed attempt leaves the slot unchanged.
    unsafe {
        asm!(
            "2:",
            "ldxr {t}, [{slot}]",
            "add {t}, {t}, {v}",
            "stxr {s:w}, {t}, [{slot}]",
            "cbnz {s:w}, 2b",
            slot = in(reg) slot,
            v = in(reg) v,
            t = out(reg) _,
            s = out(reg) _,
            options(nostack),
        )
    }
}

/// Adds `v` to this CPU's slot at offset `off` and returns the slot's value before the add
/// (the approximate counter's add): the same atomic add as [`add`], keeping the old value. A
/// migration between reading the base and the add adds, atomically, to the old CPU's slot and
/// returns that slot's old value: each slot's chain of values stays whole.
///
/// # Safety
/// As [`add`].
#[inline(always)]
pub(crate) unsafe fn fetch_add(off: usize, v: i64) -> u64 {
    let slot = cpu_base().wrapping_add(off) as *mut u64;
    // SAFETY: `slot` is a live, aligned slot of the zone (caller's contract).
    unsafe { atomic_fetch_add(slot, v as u64) }
}

/// One `ldadd`, keeping the old value.
///
/// # Safety
/// `slot` is a live, aligned slot.
#[cfg(target_feature = "lse")]
#[inline(always)]
unsafe fn atomic_fetch_add(slot: *mut u64, v: u64) -> u64 {
    let old: u64;
    // SAFETY: per the caller; `ldadd` is a single atomic add that returns the old value.
    unsafe {
        asm!("ldadd {v}, {old}, [{slot}]", v = in(reg) v, old = out(reg) old, slot = in(reg) slot,
            options(nostack))
    }
    old
}

/// The LL/SC loop, keeping the value the successful `ldxr` read.
///
/// # Safety
/// `slot` is a live, aligned slot.
#[cfg(not(target_feature = "lse"))]
#[inline(always)]
unsafe fn atomic_fetch_add(slot: *mut u64, v: u64) -> u64 {
    let old: u64;
    // SAFETY: per the caller; `stxr` stores only if nothing touched the slot (or took an
    // exception) since the `ldxr`, so the value kept is the one the stored sum came from.
    unsafe {
        asm!(
            "2:",
            "ldxr {old}, [{slot}]",
            "add {t}, {old}, {v}",
            "stxr {s:w}, {t}, [{slot}]",
            "cbnz {s:w}, 2b",
            slot = in(reg) slot,
            v = in(reg) v,
            old = out(reg) old,
            t = out(reg) _,
            s = out(reg) _,
            options(nostack),
        )
    }
    old
}

/// Points this CPU's `TPIDR_EL1` at `base` (its [`Zone::cpu_base`](crate::Zone::cpu_base)).
/// Call it once on each CPU, at EL1, before that CPU adds to a counter. A kernel that already
/// keeps its own per-CPU block in `TPIDR_EL1` hosts the zone inside that block instead (see
/// [`ZoneLayout`](crate::ZoneLayout)) and need not call this. Every base fits the register:
/// never an error. Where the platform supplies the base (`cfg(pcpu_base_from_platform)`) there
/// is no register to write, and it writes nothing.
///
/// # Safety
/// Must run at EL1 on the CPU whose block `base` is; nothing else on that CPU may rely on the
/// previous `TPIDR_EL1`.
pub unsafe fn set_cpu_base(base: usize) -> Result<(), Error> {
    if cfg!(pcpu_base_from_platform) {
        return Ok(());
    }
    // SAFETY: per the caller's contract (EL1, this CPU's block, nobody else's register).
    unsafe { asm!("msr tpidr_el1, {}", in(reg) base, options(nostack, preserves_flags)) };
    Ok(())
}

/// The per-CPU register the add goes through, as the bring-up check names it (where the
/// platform supplies the base, the default names the platform).
#[cfg(not(pcpu_base_from_platform))]
pub const REGISTER: &str = "TPIDR_EL1";

/// What `TPIDR_EL1` holds now, for the bring-up check (where the platform supplies the base,
/// the default asks the platform).
///
/// # Safety
/// Runs at EL1.
#[cfg(not(pcpu_base_from_platform))]
pub(crate) unsafe fn current_base() -> Result<usize, Error> {
    Ok(cpu_base())
}
